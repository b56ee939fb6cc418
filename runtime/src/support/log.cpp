#include "log.hpp"

#include <array>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "duet/duet.h"

namespace duet::log {

namespace {

constexpr std::array<std::pair<std::string_view, Level>, 9> kLevelNames{{
    {"trace", Level::trace},
    {"debug", Level::debug},
    {"info", Level::info},
    {"warn", Level::warn},
    {"warning", Level::warn},
    {"error", Level::error},
    {"err", Level::error},
    {"critical", Level::critical},
    {"off", Level::off},
}};
constexpr Level kDefaultLevel = Level::warn;

spdlog::level::level_enum to_spdlog(Level level) { return static_cast<spdlog::level::level_enum>(level); }

struct Logger {
  // Constructed directly, not through spdlog::stderr_color_mt and friends,
  // which register the logger by name in spdlog's process-wide registry.
  std::shared_ptr<spdlog::logger> sink_logger;
  Level level = kDefaultLevel;
  // Why DUET_LOG_LEVEL was not used, written once by the first enabled().
  std::string bad_level_warning;
};
std::once_flag g_bad_level_warned;

// duet_set_log_callback's callback and its argument.
struct Callback {
  duet_log_callback_t function = nullptr;
  void* user = nullptr;
};
std::mutex g_callback_mutex;
Callback g_callback;

const Logger& instance() {
  static const Logger logger = [] {
    Logger l;
    l.sink_logger = std::make_shared<spdlog::logger>("duet", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l.sink_logger->set_pattern("[duet %l] %v");
    l.sink_logger->set_level(spdlog::level::trace);  // duet filters by `level` itself
    const char* env = std::getenv("DUET_LOG_LEVEL");
    if (env != nullptr && !parse_level(env, &l.level)) {
      l.bad_level_warning = std::string("DUET_LOG_LEVEL=") + env +
                            " is not a level (trace, debug, info, warn, error, critical, off); logging at warn";
    }
    return l;
  }();
  return logger;
}

}  // namespace

bool parse_level(std::string_view text, Level* level) noexcept {
  for (const auto& [name, value] : kLevelNames) {
    if (text == name) {
      *level = value;
      return true;
    }
  }
  return false;
}

bool enabled(Level level) noexcept {
  try {
    const Logger& logger = instance();
    std::call_once(g_bad_level_warned, [&] {
      if (!logger.bad_level_warning.empty()) write(Level::warn, logger.bad_level_warning);
    });
    const Level threshold = logger.level;
    return level != Level::off && threshold != Level::off && level >= threshold;
  } catch (...) {
    return false;  // a logger that cannot be made (out of memory) stays silent
  }
}

void write(Level level, std::string_view message) noexcept {
  try {
    Callback callback;
    {
      std::lock_guard<std::mutex> lock(g_callback_mutex);
      callback = g_callback;
    }
    if (callback.function != nullptr) {
      const std::string text(message);  // NUL-terminated for C
      callback.function(static_cast<int>(level), text.c_str(), callback.user);
    } else {
      instance().sink_logger->log(to_spdlog(level), "{}", message);
    }
  } catch (...) {
    // Logging never fails a call.
  }
}

}  // namespace duet::log

extern "C" DUET_API void duet_set_log_callback(duet_log_callback_t callback, void* user) {
  std::lock_guard<std::mutex> lock(duet::log::g_callback_mutex);
  duet::log::g_callback = {callback, user};
}
