// Entry point of the GPU suite. Without a GPU it skips (exit 77, which CTest
// reports as "skipped", not passed) unless DUET_REQUIRE_GPU=1, when a
// missing GPU is a failure.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "duet/device.hpp"

int main(int argc, char** argv) {
  const char* req = std::getenv("DUET_REQUIRE_GPU");
  const bool required = req != nullptr && std::string(req) == "1";
  if (duet::gpu_count() == 0) {
    std::string why;
    for (const auto& b : duet::backend_info())
      if (b.kind != duet::BackendKind::host) why += " " + std::string(duet::to_string(b.kind)) + ": " + b.no_device_reason + ";";
    if (required) {
      std::fprintf(stderr, "DUET_REQUIRE_GPU=1 but no GPU was found;%s\n", why.c_str());
      return 1;
    }
    std::printf("no GPU found;%s skipping the GPU suite (set DUET_REQUIRE_GPU=1 to make this a failure)\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
