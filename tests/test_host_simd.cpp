// The host kernels on every SIMD target this build dispatches to (each one
// forced in turn), against the float64 reference: odd lengths, strides, in
// place, NaN and inf rows, rows split across threads; and the thread setting.
#include <doctest/doctest.h>

#include <hwy/targets.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend_registry.hpp"
#include "duet/device.hpp"
#include "duet/duet.h"
#include "duet/error.hpp"
#include "duet/reference.hpp"
#include "duet/softmax.hpp"

using namespace duet;

namespace {

struct Case {
  DType dtype = DType::f32;
  Op op = Op::softmax;
  bool backward = false;
  std::int64_t rows = 1, cols = 1;
  std::int64_t pad = 0;   // stride - cols, the same for every operand
  bool in_place = false;  // out over x (forward) or over dy (backward)
  bool specials = false;  // rows with NaN, +inf, all -inf, one -inf
};

// Rows x cols values of `rows` in a strided buffer of `stride` elements a row,
// the padding holding `fill` bytes.
std::vector<std::uint8_t> strided(const std::vector<float>& values, const Case& c, std::uint8_t fill) {
  const std::size_t elem = dtype_size(c.dtype), stride = std::size_t(c.cols + c.pad);
  std::vector<std::uint8_t> out(std::size_t(c.rows) * stride * elem, fill);
  const auto bytes = reference::encode(values, c.dtype);
  for (std::int64_t r = 0; r < c.rows; ++r)
    std::memcpy(out.data() + std::size_t(r) * stride * elem, bytes.data() + std::size_t(r * c.cols) * elem,
                std::size_t(c.cols) * elem);
  return out;
}

void put_specials(std::vector<float>& x, const Case& c, std::mt19937_64& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  std::uniform_int_distribution<std::int64_t> col(0, c.cols - 1);
  for (std::int64_t r = 0; r < c.rows; ++r) {
    float* row = x.data() + r * c.cols;
    switch (r % 5) {
      case 0: row[col(rng)] = std::numeric_limits<float>::quiet_NaN(); break;
      case 1: row[col(rng)] = inf; break;
      case 2: std::fill(row, row + c.cols, -inf); break;
      case 3: row[col(rng)] = -inf; break;
      default: break;
    }
  }
}

// Runs one case on the host and checks it; returns false (with a message) on
// a mismatch, or when the padding between rows was written.
bool check(const Case& c, std::mt19937_64& rng, std::string& why) {
  std::normal_distribution<float> dist(0.0f, 4.0f);
  const std::size_t n = std::size_t(c.rows * c.cols);
  std::vector<float> x(n), g(n);
  for (auto& v : x) v = dist(rng);
  for (auto& v : g) v = dist(rng) / 4;
  if (c.specials && !c.backward) put_specials(x, c, rng);
  x = reference::round_trip(x, c.dtype);
  if (c.backward) {
    const auto y = reference::forward(x, c.rows, c.cols, c.op);
    for (std::size_t i = 0; i < n; ++i) x[i] = float(y[i]);
    if (c.specials) put_specials(x, c, rng);
    x = reference::round_trip(x, c.dtype);
    g = reference::round_trip(g, c.dtype);
  }
  auto xb = strided(x, c, 0x5a), gb = strided(g, c, 0x5a);
  std::vector<std::uint8_t> ob(xb.size(), 0xff);  // poisoned: NaN in every dtype
  for (std::int64_t r = 0; r < c.rows; ++r)  // padding as in xb, to see it stay
    std::memset(ob.data() + std::size_t(r * (c.cols + c.pad) + c.cols) * dtype_size(c.dtype), 0x5a,
                std::size_t(c.pad) * dtype_size(c.dtype));
  std::uint8_t* out = c.in_place ? (c.backward ? gb.data() : xb.data()) : ob.data();
  SoftmaxCall call;
  call.op = c.op;
  call.backward = c.backward;
  call.dtype = c.dtype;
  call.rows = c.rows;
  call.cols = c.cols;
  call.x = xb.data();
  call.x_stride = c.cols + c.pad;
  call.dy = c.backward ? gb.data() : nullptr;
  call.dy_stride = c.cols + c.pad;
  call.out = out;
  call.out_stride = c.cols + c.pad;
  run(device(BackendKind::host, 0), call);

  const std::size_t elem = dtype_size(c.dtype), stride = std::size_t(c.cols + c.pad);
  std::vector<std::uint8_t> packed(n * elem);
  for (std::int64_t r = 0; r < c.rows; ++r) {
    const std::uint8_t* row = out + std::size_t(r) * stride * elem;
    std::memcpy(packed.data() + std::size_t(r * c.cols) * elem, row, std::size_t(c.cols) * elem);
    for (std::size_t b = std::size_t(c.cols) * elem; b < stride * elem; ++b)
      if (row[b] != 0x5a) {
        why = "padding of row " + std::to_string(r) + " written";
        return false;
      }
  }
  const auto got = reference::decode(packed.data(), n, c.dtype);
  const auto want = c.backward ? reference::backward(x, g, c.rows, c.cols, c.op) : reference::forward(x, c.rows, c.cols, c.op);
  const auto scale = c.backward ? reference::backward_scale(x, g, c.rows, c.cols, c.op) : std::vector<double>{};
  const auto result = reference::compare(got, want, c.rows, c.cols, reference::default_tolerance(c.dtype),
                                         c.backward ? &scale : nullptr, reference::default_abs_floor(c.dtype));
  why = result.first_failure;
  return result.ok;
}

std::string describe(const Case& c) {
  return std::string(to_string(c.dtype)) + (c.backward ? " bwd " : " fwd ") +
         (c.op == Op::softmax ? "softmax " : "log_softmax ") + std::to_string(c.rows) + "x" + std::to_string(c.cols) +
         " pad " + std::to_string(c.pad) + (c.in_place ? " in place" : "") + (c.specials ? " specials" : "");
}

// Every dtype, op and direction over `shapes`, with and without padding,
// in place and not, with special rows.
int run_all(const std::vector<std::pair<std::int64_t, std::int64_t>>& shapes, std::mt19937_64& rng) {
  int failures = 0;
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (bool bwd : {false, true})
      for (Op op : {Op::softmax, Op::log_softmax})
        for (const auto& [rows, cols] : shapes)
          for (int variant = 0; variant < 3; ++variant) {
            Case c{dt, op, bwd, rows, cols, variant == 1 ? 5 : 0, variant == 2, variant != 0};
            std::string why;
            if (!check(c, rng, why)) {
              ++failures;
              FAIL_CHECK(describe(c) << ": " << why);
            }
          }
  return failures;
}

const std::vector<std::pair<std::int64_t, std::int64_t>> kOddShapes{
    {7, 1}, {5, 3}, {6, 17}, {5, 255}, {5, 2049}, {3, 4099}, {2, 65536 + 3}};

}  // namespace

TEST_CASE("host kernels on every SIMD target this build dispatches to") {
  std::mt19937_64 rng(std::random_device{}());
  const auto targets = hwy::SupportedAndGeneratedTargets();
  REQUIRE(!targets.empty());
  std::string names;
  for (const std::int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    const DeviceProps props = detail::backend(BackendKind::host).device_props(0);
    INFO("forced target ", std::string(hwy::TargetName(target)));
    CHECK(props.family == "CPU " + std::string(hwy::TargetName(target)));
    CHECK(props.simd_width_bytes == props.warp_size * 4);
    names += std::string(hwy::TargetName(target)) + " ";
    CHECK(run_all(kOddShapes, rng) == 0);
  }
  hwy::SetSupportedTargetsForTest(0);
  MESSAGE("targets tested: ", names);
}

TEST_CASE("wide rows: 1M elements, whole and split across threads, keep to the tolerance") {
  std::mt19937_64 rng(std::random_device{}());
  for (int threads : {1, 2, 3}) {
    set_host_threads(threads);
    CHECK(host_threads() <= threads);
    for (DType dt : {DType::f32, DType::bf16})
      for (bool bwd : {false, true})
        for (Op op : {Op::softmax, Op::log_softmax}) {
          Case c{dt, op, bwd, 2, (std::int64_t(1) << 20) + 1, 0, false, false};
          std::string why;
          INFO(describe(c), " threads ", threads);
          CHECK_MESSAGE(check(c, rng, why), why);
        }
  }
  set_host_threads(0);
}

TEST_CASE("host threads: the setting, its limits, and the C call") {
  set_host_threads(1);
  CHECK(host_threads() == 1);
  set_host_threads(3);
  CHECK(host_threads() == 3);
  set_host_threads(0);
  CHECK(host_threads() >= 1);
  CHECK_THROWS_AS(set_host_threads(-1), Error);
  CHECK_THROWS_AS(set_host_threads(1 << 20), Error);
  CHECK(duet_set_host_threads(-5) == DUET_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(duet_last_error()).find("-5") != std::string::npos);
  CHECK(duet_set_host_threads(2) == DUET_SUCCESS);
  CHECK(host_threads() == 2);
  CHECK(duet_set_host_threads(0) == DUET_SUCCESS);
}

TEST_CASE("a host buffer of SIZE_MAX bytes is out_of_memory (the rounding does not wrap)") {
  const Device host = device(BackendKind::host, 0);
  for (std::size_t bytes : {std::numeric_limits<std::size_t>::max(), std::numeric_limits<std::size_t>::max() - 62}) {
    try {
      Buffer b(host, bytes);
      FAIL("a buffer of " << bytes << " bytes was made");
    } catch (const Error& e) {
      CHECK(e.status() == Status::out_of_memory);
    }
  }
}
