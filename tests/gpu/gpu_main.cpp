// Entry point of the GPU suite. Without a GPU it skips (exit 77, which CTest
// reports as "skipped", not passed) unless DUET_REQUIRE_GPU=1, when a
// missing GPU is a failure. Listing the cases (doctest's --list-test-cases,
// which CTest's test discovery runs at build time) needs no GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "duet/device.hpp"

namespace {

// doctest options that only list or describe, with or without the "dt-"
// prefix doctest also accepts.
bool only_lists(int argc, char** argv) {
  constexpr std::array<std::string_view, 13> kListing{
      "list-test-cases", "ltc", "list-test-suites", "lts", "list-reporters", "lr", "count", "c",
      "help", "h", "?", "version", "v"};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    while (!arg.empty() && arg.front() == '-') arg.remove_prefix(1);
    if (arg.substr(0, 3) == "dt-") arg.remove_prefix(3);
    arg = arg.substr(0, arg.find('='));
    for (const auto name : kListing)
      if (arg == name) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  if (only_lists(argc, argv)) return context.run();

  const char* req = std::getenv("DUET_REQUIRE_GPU");
  const bool required = req != nullptr && std::string(req) == "1";
  if (duet::gpu_count() == 0) {
    std::string why;
    for (const auto& b : duet::backend_info())
      if (b.kind != duet::BackendKind::host) why += " " + std::string(duet::to_string(b.kind)) + ": " + b.no_device_reason + ";";
    if (why.empty()) why = " no GPU backend in this build;";
    if (required) {
      std::fprintf(stderr, "DUET_REQUIRE_GPU=1 but no GPU was found;%s\n", why.c_str());
      return 1;
    }
    std::printf("no GPU found;%s skipping the GPU suite (set DUET_REQUIRE_GPU=1 to make this a failure)\n", why.c_str());
    return 77;
  }
  return context.run();
}
