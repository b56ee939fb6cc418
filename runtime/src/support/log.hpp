// duet's own logger: levels trace, debug, info, warn, error, critical, off
// (spdlog's names), chosen by DUET_LOG_LEVEL (default warn), written to
// stderr as "[duet <level>] message".
//
// The logger belongs to duet alone: it is not registered in spdlog's global
// registry, so an application's own logger named "duet" does not clash with
// it and an application's spdlog::set_level does not change it. spdlog and
// fmt are compiled in header-only and hidden, so libduet neither exports
// their symbols nor needs their shared libraries.
#pragma once

#include <string_view>
#include <utility>

#include <fmt/core.h>

namespace duet::log {

enum class Level : int { trace = 0, debug = 1, info = 2, warn = 3, error = 4, critical = 5, off = 6 };

// Whether a message at `level` is written (the level is read once, from
// DUET_LOG_LEVEL; an unknown value warns once and keeps warn).
bool enabled(Level level) noexcept;
// Writes one message; never throws.
void write(Level level, std::string_view message) noexcept;

// Parses a DUET_LOG_LEVEL value: spdlog's names (and its aliases "warning",
// "err"); false for anything else.
bool parse_level(std::string_view text, Level* level) noexcept;

template <class... A> void emit(Level level, fmt::format_string<A...> f, A&&... a) {
  if (enabled(level)) write(level, fmt::format(f, std::forward<A>(a)...));
}
template <class... A> void debug(fmt::format_string<A...> f, A&&... a) { emit(Level::debug, f, std::forward<A>(a)...); }
template <class... A> void info(fmt::format_string<A...> f, A&&... a) { emit(Level::info, f, std::forward<A>(a)...); }
template <class... A> void warn(fmt::format_string<A...> f, A&&... a) { emit(Level::warn, f, std::forward<A>(a)...); }

}  // namespace duet::log
