#include "log.hpp"

#include <cstdlib>
#include <memory>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace duet::log {

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    auto l = spdlog::stderr_color_mt("duet");
    l->set_pattern("[duet %l] %v");
    const char* env = std::getenv("DUET_LOG_LEVEL");
    l->set_level(env != nullptr ? spdlog::level::from_str(env) : spdlog::level::warn);
    return l;
  }();
  return *instance;
}

}  // namespace duet::log
