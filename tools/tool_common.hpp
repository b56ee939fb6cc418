// What deviceinfo and duet-bench share: the version line, the exit codes
// and their help text, and one way to report a command-line error.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include "duet/config.hpp"
#include "duet/props_json.hpp"

namespace duet_tools {

// Exit codes (README, "deviceinfo"): 0 success (zero GPUs included), 1 an
// API error, 2 bad usage. duet-bench adds kWrongResult.
inline constexpr int kOk = 0;
inline constexpr int kApiError = 1;
inline constexpr int kUsage = 2;

// "deviceinfo (duet 0.1.0): backends cuda (sm_80,sm_90), hip (gfx90a), host"
inline std::string version_line(const char* tool) {
  std::string backends;
  if (DUET_HAVE_CUDA) backends += std::string("cuda (") + DUET_CUDA_TARGETS + "), ";
  if (DUET_HAVE_HIP) backends += std::string("hip (") + DUET_HIP_TARGETS + "), ";
  return std::string(tool) + " (duet " + DUET_VERSION + "): backends " + backends + "host";
}

// --version, and a footer with the exit codes, on `app`.
inline void describe(CLI::App& app, const char* tool, const std::string& exit_codes) {
  app.set_version_flag("--version", version_line(tool), "print duet's version and the built backends, then exit");
  app.footer("Exit codes:\n" + exit_codes);
}

// A finite number of at least 0 (or above 0): CLI11's NonNegativeNumber and
// PositiveNumber name a 300-digit upper bound in their messages.
inline CLI::Validator number(bool positive) {
  const char* what = positive ? "a number > 0" : "a number >= 0";
  return CLI::Validator(
      [positive, what](std::string& s) -> std::string {
        double v = 0;
        const bool ok = CLI::detail::lexical_cast(s, v) && std::isfinite(v) && (positive ? v > 0 : v >= 0);
        return ok ? std::string() : std::string("expected ") + what + ", got '" + s + "'";
      },
      what);
}

// A command-line error: one escaped line on stderr, exit code 2 (--help and
// --version print and give 0).
inline int usage_error(CLI::App& app, const char* tool, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e) == 0 ? kOk : kUsage;
  std::fprintf(stderr, "%s: %s\nRun with --help for more information.\n", tool, duet::printable(e.what()).c_str());
  return kUsage;
}

}  // namespace duet_tools
