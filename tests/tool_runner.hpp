// Running the built tools from a test: a shell command's exit status and
// output, and paths quoted for the shell.
#pragma once

#include <sys/wait.h>

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace duet::testing {

struct Result {
  int code = -1;    // the exit status; -1 if killed by a signal (an abort)
  std::string out;  // stdout and stderr
};

// `command` through /bin/sh, its output whole (bytes as written).
inline Result run(const std::string& command) {
  Result r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A path as one shell word.
inline std::string quoted(const std::filesystem::path& p) {
  std::string out = "'";
  for (const char c : p.string()) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace duet::testing
