// duet's logger: spdlog, level from DUET_LOG_LEVEL (trace, debug, info,
// warn, error, critical, off; default warn), to stderr.
#pragma once

#include <spdlog/spdlog.h>

namespace duet::log {

spdlog::logger& logger();

template <class... A> void debug(spdlog::format_string_t<A...> f, A&&... a) { logger().debug(f, std::forward<A>(a)...); }
template <class... A> void info(spdlog::format_string_t<A...> f, A&&... a) { logger().info(f, std::forward<A>(a)...); }
template <class... A> void warn(spdlog::format_string_t<A...> f, A&&... a) { logger().warn(f, std::forward<A>(a)...); }

}  // namespace duet::log
