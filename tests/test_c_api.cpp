// The C ABI returns status codes with readable messages; deviceinfo's CLI
// behaviour (exit codes, JSON, property files, plans) on a machine of any kind.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "duet/duet.h"
#include "duet/kernel_resources.hpp"

TEST_CASE("C ABI: host softmax and status codes") {
  int count = 0;
  REQUIRE(duet_device_count(&count) == DUET_SUCCESS);
  CHECK(count >= 1);
  duet_device_t host{DUET_BACKEND_HOST, 0};
  float x[6] = {0, 0, 0, 1, 2, 3}, y[6] = {};
  REQUIRE(duet_softmax(host, DUET_F32, 2, 3, x, 3, y, 3, nullptr) == DUET_SUCCESS);
  CHECK(y[0] == doctest::Approx(1.0 / 3));
  CHECK(y[3] + y[4] + y[5] == doctest::Approx(1.0));
  CHECK(duet_softmax(host, DUET_F32, 2, 3, nullptr, 3, y, 3, nullptr) == DUET_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(duet_last_error()).find("null") != std::string::npos);
  CHECK(duet_softmax(host, static_cast<duet_dtype_t>(5), 2, 3, x, 3, y, 3, nullptr) == DUET_ERROR_INVALID_ARGUMENT);
  CHECK(duet_softmax({DUET_BACKEND_HOST, 7}, DUET_F32, 2, 3, x, 3, y, 3, nullptr) == DUET_ERROR_NO_DEVICE);
  CHECK(duet_softmax(host, DUET_F32, 2, 3, x, 3, y, 3, nullptr) == DUET_SUCCESS);
  CHECK(std::string(duet_last_error()).empty());
  duet_device_t d{};
  CHECK(duet_get_device(count, &d) == DUET_ERROR_NO_DEVICE);
}

namespace {
struct Run {
  int code = -1;
  std::string out;
};
Run deviceinfo(const std::string& args) {
  const std::string cmd = std::string(DUET_DEVICEINFO) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  Run r;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe.get()) != nullptr) r.out += buf.data();
  const int status = pclose(pipe.release());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}
const std::string kDevices = std::string(DUET_SOURCE_DIR) + "/tools/deviceinfo/devices/";
}  // namespace

TEST_CASE("deviceinfo lists devices, summarises, and exits 0 without a GPU") {
  const Run r = deviceinfo("");
  CHECK(r.code == 0);
  CHECK(r.out.find("Device 0:") != std::string::npos);
  CHECK(r.out.find("backends") != std::string::npos);
}

TEST_CASE("deviceinfo --json is valid JSON with stable keys") {
  const Run r = deviceinfo("--json");
  INFO(r.out.substr(0, 2000));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["devices"].size() >= 1);
  CHECK(j["devices"][0]["props"].contains("sm_count"));
  CHECK(j["backends"].size() >= 1);
}

TEST_CASE("deviceinfo --props and --plan model a device that is not here") {
  bool have_hip = false, have_cuda = false;
  for (const auto& [backend, target] : duet::recorded_targets()) {
    have_hip = have_hip || backend == "hip";
    have_cuda = have_cuda || backend == "cuda";
  }
  if (!have_hip || !have_cuda) {
    // A build without a GPU compiler recorded no resource report: planning a
    // GPU from a file must say so, not guess.
    const Run r = deviceinfo("--props " + kDevices + (have_hip ? "h100_sxm.json" : "mi300x.json") + " --plan 64x64");
    CHECK(r.code == 1);
    CHECK(r.out.find("recorded no") != std::string::npos);
    return;
  }
  const Run r = deviceinfo("--props " + kDevices + "mi300x.json --plan 8192x4096:bf16 --json");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["devices"][0]["props"]["arch"].get<std::string>().rfind("gfx942", 0) == 0);
  CHECK(j["plans"].size() == 1);
  const Run text = deviceinfo("--props " + kDevices + "h100_sxm.json --plan 4096x65536");
  CHECK(text.code == 0);
  CHECK(text.out.find("exact_occupancy") != std::string::npos);
  CHECK(text.out.find("tutorial_occupancy") != std::string::npos);
}

TEST_CASE("deviceinfo exit codes: bad usage 2, errors 1") {
  CHECK(deviceinfo("--no-such-flag").code == 2);
  CHECK(deviceinfo("--plan 12by4").code == 2);
  CHECK(deviceinfo("--props /nonexistent.json").code == 2);
  CHECK(deviceinfo("--device 999").code == 2);  // README: an index past the list is bad usage
  const Run bad = deviceinfo("--props " + std::string(DUET_SOURCE_DIR) + "/README.md");
  CHECK(bad.code == 1);
  CHECK(bad.out.find("not valid JSON") != std::string::npos);
}
