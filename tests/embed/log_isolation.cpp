// An application that uses spdlog itself (the shared system spdlog), with a
// logger of its own named "duet" and a global level of debug, then calls
// duet. duet's logger must be its own: the calls succeed, and duet's debug
// lines appear only when DUET_LOG_LEVEL asks for them.
//
// Usage: duet_log_isolation quiet|debug|invalid|callback
//   quiet    DUET_LOG_LEVEL unset: no line from duet at all
//   debug    DUET_LOG_LEVEL=debug: duet's debug lines appear (the check can see them)
//   invalid  DUET_LOG_LEVEL=verbose: one warning naming the value and the
//            accepted levels, then duet logs at warn (no debug lines)
//   callback DUET_LOG_LEVEL=debug and duet_set_log_callback: the debug lines
//            reach the callback, with its argument, and not stderr
// duet's stderr is captured in a temporary file and checked; exit 0 when it
// is as expected.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "duet/device.hpp"
#include "duet/duet.h"
#include "duet/softmax.hpp"

namespace {

// What duet_set_log_callback's callback received.
struct Received {
  std::mutex mutex;
  std::vector<std::pair<int, std::string>> messages;
};
void receive(int level, const char* message, void* user) {
  auto* received = static_cast<Received*>(user);
  std::lock_guard<std::mutex> lock(received->mutex);
  received->messages.emplace_back(level, message);
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Runs duet calls that log at debug (a device query, a plan) with stderr
// redirected to a file; returns what duet wrote there, or "" with `ok` false
// when a call failed.
std::string duet_calls_stderr(bool* ok) {
  std::fflush(stderr);
  char path[] = "/tmp/duet_log_isolation.XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    std::perror("mkstemp");
    std::exit(2);
  }
  const int saved = dup(2);
  dup2(fd, 2);

  *ok = true;
  try {
    const duet::Device host = duet::device(duet::BackendKind::host, 0);
    (void)host.props();
    std::vector<float> x(4 * 33, 0.5f), y(4 * 33, -1.0f);
    duet::softmax(host, duet::DType::f32, 4, 33, x.data(), 33, y.data(), 33);
    for (float v : y) *ok = *ok && v > 0.0f && v < 1.0f;
  } catch (const std::exception& e) {
    std::fprintf(stdout, "duet C++ call failed: %s\n", e.what());
    *ok = false;
  }
  int count = 0;
  if (duet_device_count(&count) != DUET_SUCCESS || count < 1) {
    std::fprintf(stdout, "duet_device_count failed: %s\n", duet_last_error());
    *ok = false;
  }

  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::remove(path);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "quiet" && mode != "debug" && mode != "invalid" && mode != "callback") {
    std::fprintf(stderr, "usage: duet_log_isolation quiet|debug|invalid|callback\n");
    return 2;
  }
  Received received;
  if (mode == "callback") duet_set_log_callback(receive, &received);

  // The application's own logger named "duet", registered globally, and a
  // global level of debug for every logger the registry knows.
  std::ostringstream app_output;
  auto app_logger = std::make_shared<spdlog::logger>("duet", std::make_shared<spdlog::sinks::ostream_sink_mt>(app_output));
  spdlog::register_logger(app_logger);
  spdlog::set_level(spdlog::level::debug);
  app_logger->debug("the application's own debug line");

  bool ok = false;
  const std::string duet_output = duet_calls_stderr(&ok);
  std::printf("duet wrote to stderr:\n%s(end)\n", duet_output.c_str());

  bool pass = ok;
  if (!ok) std::printf("FAIL: a duet call failed with the application's \"duet\" logger registered\n");
  if (app_output.str().find("the application's own debug line") == std::string::npos) {
    std::printf("FAIL: the application's logger lost its line\n");
    pass = false;
  }
  const int debug_lines = count_of(duet_output, "[duet debug]");
  const int warnings = count_of(duet_output, "DUET_LOG_LEVEL=verbose");
  if (mode == "quiet" && !duet_output.empty()) {
    std::printf("FAIL: duet wrote to stderr though DUET_LOG_LEVEL is unset and its default is warn\n");
    pass = false;
  }
  if (mode == "debug" && debug_lines == 0) {
    std::printf("FAIL: DUET_LOG_LEVEL=debug gave no [duet debug] line\n");
    pass = false;
  }
  if (mode == "invalid") {
    if (warnings != 1 || duet_output.find("trace, debug, info, warn, error, critical, off") == std::string::npos) {
      std::printf("FAIL: want one warning naming DUET_LOG_LEVEL=verbose and the accepted levels, got %d\n", warnings);
      pass = false;
    }
    if (debug_lines != 0) {
      std::printf("FAIL: an invalid DUET_LOG_LEVEL turned debug lines on\n");
      pass = false;
    }
  }
  if (mode == "callback") {
    int debug_messages = 0;
    for (const auto& [level, message] : received.messages) {
      std::printf("callback: level %d: %s\n", level, message.c_str());
      if (level == 1 && message.find("plan host:0") != std::string::npos) ++debug_messages;
    }
    if (debug_messages == 0 || !duet_output.empty()) {
      std::printf("FAIL: want duet's debug lines at the callback (got %d) and none on stderr\n", debug_messages);
      pass = false;
    }
  }
  std::printf("%s: mode %s, %d debug line(s) from duet\n", pass ? "PASS" : "FAIL", mode.c_str(), debug_lines);
  return pass ? 0 : 1;
}
