// The C ABI returns status codes with readable messages; deviceinfo's CLI
// behaviour (exit codes, JSON, property files, plans) on a machine of any kind.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <cstdio>
#include <cstdint>
#include <cstring>
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

TEST_CASE("C ABI: workspace size query and calls with the caller's workspace (host)") {
  const duet_device_t host{DUET_BACKEND_HOST, 0};
  size_t bytes = 123;
  // The host runs every shape without a workspace, wide rows included.
  for (int64_t cols : {int64_t(1), int64_t(1000), int64_t(1) << 20}) {
    for (int backward : {0, 1}) {
      bytes = 123;
      REQUIRE(duet_softmax_workspace_size(host, DUET_BF16, 3, cols, backward, &bytes) == DUET_SUCCESS);
      CHECK(bytes == 0);
    }
  }
  REQUIRE(duet_softmax_workspace_size(host, DUET_F32, 0, 5, 0, &bytes) == DUET_SUCCESS);
  CHECK(bytes == 0);
  CHECK(duet_softmax_workspace_size(host, DUET_F32, 2, 3, 0, nullptr) == DUET_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(duet_last_error()).find("bytes") != std::string::npos);
  CHECK(duet_softmax_workspace_size(host, DUET_F32, -1, 3, 0, &bytes) == DUET_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(duet_last_error()).find("rows") != std::string::npos);
  CHECK(duet_softmax_workspace_size(host, static_cast<duet_dtype_t>(9), 2, 3, 0, &bytes) ==
        DUET_ERROR_INVALID_ARGUMENT);
  CHECK(duet_softmax_workspace_size({DUET_BACKEND_HOST, 3}, DUET_F32, 2, 3, 0, &bytes) == DUET_ERROR_NO_DEVICE);

  // The _ws calls: a workspace (or none, where none is needed) is accepted,
  // and the results equal the calls without one.
  float x[8] = {0, 1, 2, 3, -1, 0, 5, 2}, dy[8] = {1, 0, 0, 2, 1, 1, -1, 0};
  float y[8], y_ws[8], dx[8], dx_ws[8];
  alignas(16) unsigned char workspace[64];
  struct Family {
    decltype(&duet_softmax) forward;
    decltype(&duet_softmax_ws) forward_ws;
    decltype(&duet_softmax_backward) backward;
    decltype(&duet_softmax_backward_ws) backward_ws;
  };
  for (const Family& f : {Family{duet_softmax, duet_softmax_ws, duet_softmax_backward, duet_softmax_backward_ws},
                          Family{duet_log_softmax, duet_log_softmax_ws, duet_log_softmax_backward,
                                 duet_log_softmax_backward_ws}}) {
    for (void* ws : {static_cast<void*>(workspace), static_cast<void*>(nullptr)}) {
      const size_t ws_bytes = ws == nullptr ? 0 : sizeof(workspace);
      std::fill(std::begin(y_ws), std::end(y_ws), -7.0f);
      std::fill(std::begin(dx_ws), std::end(dx_ws), -7.0f);
      REQUIRE(f.forward(host, DUET_F32, 2, 4, x, 4, y, 4, nullptr) == DUET_SUCCESS);
      REQUIRE(f.forward_ws(host, DUET_F32, 2, 4, x, 4, y_ws, 4, ws, ws_bytes, nullptr) == DUET_SUCCESS);
      CHECK(std::equal(std::begin(y), std::end(y), std::begin(y_ws)));
      REQUIRE(f.backward(host, DUET_F32, 2, 4, y, 4, dy, 4, dx, 4, nullptr) == DUET_SUCCESS);
      REQUIRE(f.backward_ws(host, DUET_F32, 2, 4, y, 4, dy, 4, dx_ws, 4, ws, ws_bytes, nullptr) == DUET_SUCCESS);
      CHECK(std::equal(std::begin(dx), std::end(dx), std::begin(dx_ws)));
    }
  }
  // The _ws calls check their arguments like the others.
  CHECK(duet_softmax_ws(host, DUET_F32, 2, 4, x, 4, x + 1, 4, nullptr, 0, nullptr) == DUET_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(duet_last_error()).find("overlap") != std::string::npos);
}

TEST_CASE("C ABI: duet_softmax_call runs the four _ws calls from one struct and checks it (host)") {
  const duet_device_t host{DUET_BACKEND_HOST, 0};
  float x[8] = {0, 1, 2, 3, -1, 0, 5, 2}, dy[8] = {1, 0, 0, 2, 1, -3, -1, 0};
  alignas(16) unsigned char workspace[64];
  auto args_of = [&](int log, int backward, const float* in, void* out) {
    duet_softmax_args_t a{};
    a.size = sizeof a;
    a.log = log;
    a.backward = backward;
    a.dtype = DUET_F32;
    a.rows = 2;
    a.cols = 4;
    a.x = in;
    a.x_stride = 4;
    a.dy = backward ? dy : nullptr;
    a.dy_stride = 4;
    a.out = out;
    a.out_stride = 4;
    a.workspace = workspace;
    a.workspace_bytes = sizeof workspace;
    return a;
  };
  for (int log : {0, 1}) {
    for (uint32_t flags : {0u, DUET_CALL_DEVICES_CHECKED}) {
      float y[8], y_call[8], dx[8], dx_call[8];
      std::fill(std::begin(y_call), std::end(y_call), -7.0f);
      std::fill(std::begin(dx_call), std::end(dx_call), -7.0f);
      auto fwd = log ? duet_log_softmax_ws : duet_softmax_ws;
      auto bwd = log ? duet_log_softmax_backward_ws : duet_softmax_backward_ws;
      REQUIRE(fwd(host, DUET_F32, 2, 4, x, 4, y, 4, nullptr, 0, nullptr) == DUET_SUCCESS);
      REQUIRE(bwd(host, DUET_F32, 2, 4, y, 4, dy, 4, dx, 4, nullptr, 0, nullptr) == DUET_SUCCESS);
      duet_softmax_args_t a = args_of(log, 0, x, y_call);
      a.flags = flags;
      REQUIRE(duet_softmax_call(host, &a) == DUET_SUCCESS);
      CHECK(std::equal(std::begin(y), std::end(y), std::begin(y_call)));
      a = args_of(log, 1, y, dx_call);
      a.flags = flags;
      REQUIRE(duet_softmax_call(host, &a) == DUET_SUCCESS);
      CHECK(std::equal(std::begin(dx), std::end(dx), std::begin(dx_call)));
    }
  }
  // The struct is checked before anything runs, and so is the call.
  float out[8];
  std::fill(std::begin(out), std::end(out), -7.0f);
  auto refused = [&](duet_softmax_args_t a, const char* says) {
    CHECK(duet_softmax_call(host, &a) == DUET_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(std::string(duet_last_error()).find(says) != std::string::npos, duet_last_error());
  };
  CHECK(duet_softmax_call(host, nullptr) == DUET_ERROR_INVALID_ARGUMENT);
  duet_softmax_args_t a = args_of(0, 0, x, out);
  a.size = sizeof a - 4;
  refused(a, "size");
  a = args_of(0, 0, x, out);
  a.backward = 2;
  refused(a, "backward");
  a = args_of(0, 0, x, out);
  a.log = 3;
  refused(a, "log");
  a = args_of(0, 0, x, out);
  a.flags = 4;
  refused(a, "flags");
  a = args_of(0, 1, x, out);
  a.dy = nullptr;
  refused(a, "dy");
  refused(args_of(0, 0, x, x + 1), "overlap");
  a = args_of(0, 0, x, out);
  a.dtype = static_cast<duet_dtype_t>(9);
  refused(a, "dtype");
  a = args_of(0, 0, x, out);
  a.size = DUET_SOFTMAX_ARGS_V1_SIZE;  // the struct before out_dtype has no room for it
  a.flags = DUET_CALL_OUT_DTYPE;
  refused(a, "DUET_CALL_OUT_DTYPE");
  a = args_of(0, 0, x, out);
  a.reserved = 1;
  refused(a, "reserved");
  a = args_of(0, 0, x, out);
  a.flags = DUET_CALL_OUT_DTYPE;
  a.out_dtype = DUET_BF16;  // f32 into bf16 is not a widening
  CHECK(duet_softmax_call(host, &a) == DUET_ERROR_UNSUPPORTED);
  CHECK(std::all_of(std::begin(out), std::end(out), [](float v) { return v == -7.0f; }));
}

TEST_CASE("C ABI: duet_softmax_call with DUET_CALL_OUT_DTYPE widens bf16 into float32, and the old struct still runs") {
  const duet_device_t host{DUET_BACKEND_HOST, 0};
  const float values[8] = {0, 1, 2, 3, -1, 0, 5, 2};  // exact in bf16
  std::uint16_t x16[8];
  for (int i = 0; i < 8; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    x16[i] = static_cast<std::uint16_t>(bits >> 16);
  }
  float want[8], got[8];
  REQUIRE(duet_softmax(host, DUET_F32, 2, 4, values, 4, want, 4, nullptr) == DUET_SUCCESS);
  duet_softmax_args_t a{};
  a.size = sizeof a;
  a.dtype = DUET_BF16;
  a.flags = DUET_CALL_OUT_DTYPE;
  a.out_dtype = DUET_F32;
  a.rows = 2;
  a.cols = 4;
  a.x = x16;
  a.x_stride = 4;
  a.out = got;
  a.out_stride = 4;
  std::fill(std::begin(got), std::end(got), -7.0f);
  REQUIRE(duet_softmax_call(host, &a) == DUET_SUCCESS);
  for (int i = 0; i < 8; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  // A caller built against the struct before out_dtype: out is of dtype.
  std::uint16_t y16[8] = {};
  a.size = DUET_SOFTMAX_ARGS_V1_SIZE;
  a.flags = 0;
  a.out = y16;
  REQUIRE(duet_softmax_call(host, &a) == DUET_SUCCESS);
  for (int i = 0; i < 8; ++i) {
    const std::uint32_t bits = std::uint32_t(y16[i]) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    CHECK(v == doctest::Approx(want[i]).epsilon(1e-2));
  }
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
