// The host kernels on every SIMD target this build dispatches to (each one
// forced in turn), against the float64 reference: odd lengths, strides, in
// place, NaN and inf rows, rows split across threads; and the thread setting.
#include <doctest/doctest.h>

#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend_registry.hpp"
#include "duet/device.hpp"
#include "duet/duet.h"
#include "duet/error.hpp"
#include "duet/reference.hpp"
#include "duet/softmax.hpp"
#include "host/float_chunks.hpp"
#include "host/host_kernels.hpp"

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
  bool hidden_nan = false;  // rows all -inf but one NaN, or a NaN in a -inf stretch
  // The kernels called directly with non-temporal stores asked for (the
  // backend asks from 32 MB of output), on 64-byte aligned copies: every row
  // but the last whole, the last in two ranges as a split row.
  bool stream = false;
};

// The kernels on `call` with streaming stores, as described at Case::stream.
void run_streaming(const SoftmaxCall& call) {
  SoftmaxArgs a{};
  a.x = call.x;
  a.dy = call.dy;
  a.out = call.out;
  a.rows = call.rows;
  a.cols = call.cols;
  a.x_stride = call.x_stride;
  a.dy_stride = call.dy_stride;
  a.out_stride = call.out_stride;
  a.log = call.op == Op::log_softmax;
  host::run_rows(a, call.dtype, call.backward, 0, call.rows - 1, true, host::kMaxScratchElems);
  const std::int64_t row = call.rows - 1, mid = call.cols / 2 / 64 * 64;
  const auto first = host::row_partial(a, call.dtype, call.backward, row, 0, mid);
  const auto whole = host::combine(first, host::row_partial(a, call.dtype, call.backward, row, mid, call.cols));
  host::write_row_range(a, call.dtype, call.backward, row, 0, mid, whole, true);
  host::write_row_range(a, call.dtype, call.backward, row, mid, call.cols, whole, true);
}

// A 64-byte aligned copy of `bytes`, copied back by copy_back.
struct AlignedCopy {
  std::unique_ptr<std::uint8_t, decltype(&std::free)> p{nullptr, &std::free};
  explicit AlignedCopy(const std::vector<std::uint8_t>& bytes)
      : p(static_cast<std::uint8_t*>(std::aligned_alloc(64, (bytes.size() + 63) / 64 * 64)), &std::free) {
    REQUIRE(p != nullptr);
    std::memcpy(p.get(), bytes.data(), bytes.size());
  }
  void copy_back(std::vector<std::uint8_t>& bytes) const { std::memcpy(bytes.data(), p.get(), bytes.size()); }
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

// A NaN among -inf, where a max that drops NaN sees only -inf: row r is all
// -inf but one NaN (even r), or finite with a run of -inf of a chunk's length
// or more holding one NaN (odd r), the NaN at a random place.
void put_hidden_nan(std::vector<float>& x, const Case& c, std::mt19937_64& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  for (std::int64_t r = 0; r < c.rows; ++r) {
    float* row = x.data() + r * c.cols;
    std::uniform_int_distribution<std::int64_t> col(0, c.cols - 1);
    const std::int64_t begin = r % 2 == 0 ? 0 : col(rng);
    const std::int64_t end = r % 2 == 0 ? c.cols : std::min(c.cols, begin + 5000);
    std::fill(row + begin, row + end, -inf);
    std::uniform_int_distribution<std::int64_t> in_run(begin, end - 1);
    row[in_run(rng)] = std::numeric_limits<float>::quiet_NaN();
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
  if (c.hidden_nan && !c.backward) put_hidden_nan(x, c, rng);
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
  std::optional<AlignedCopy> xa, ga, oa;
  if (c.stream) xa.emplace(xb), ga.emplace(gb), oa.emplace(ob);
  std::uint8_t* const xp = c.stream ? xa->p.get() : xb.data();
  std::uint8_t* const gp = c.stream ? ga->p.get() : gb.data();
  std::uint8_t* const op = c.stream ? oa->p.get() : ob.data();
  std::uint8_t* const run_out = c.in_place ? (c.backward ? gp : xp) : op;
  SoftmaxCall call;
  call.op = c.op;
  call.backward = c.backward;
  call.dtype = c.dtype;
  call.rows = c.rows;
  call.cols = c.cols;
  call.x = xp;
  call.x_stride = c.cols + c.pad;
  call.dy = c.backward ? gp : nullptr;
  call.dy_stride = c.cols + c.pad;
  call.out = run_out;
  call.out_stride = c.cols + c.pad;
  if (c.stream) {
    run_streaming(call);
    xa->copy_back(xb), ga->copy_back(gb), oa->copy_back(ob);
  } else {
    run(device(BackendKind::host, 0), call);
  }
  std::uint8_t* out = c.in_place ? (c.backward ? gb.data() : xb.data()) : ob.data();

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
         " pad " + std::to_string(c.pad) + (c.in_place ? " in place" : "") + (c.specials ? " specials" : "") +
         (c.hidden_nan ? " hidden NaN" : "") + (c.stream ? " streaming" : "");
}

// Every dtype, op and direction over `shapes`, with and without padding,
// in place and not, with special rows, and with streaming stores (aligned
// rows, then padded rows in place).
int run_all(const std::vector<std::pair<std::int64_t, std::int64_t>>& shapes, std::mt19937_64& rng) {
  int failures = 0;
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (bool bwd : {false, true})
      for (Op op : {Op::softmax, Op::log_softmax})
        for (const auto& [rows, cols] : shapes)
          for (int variant = 0; variant < 5; ++variant) {
            Case c{dt, op, bwd, rows, cols, variant == 1 || variant == 4 ? 5 : 0, variant == 2 || variant == 4,
                   variant != 0};
            c.stream = variant >= 3;
            std::string why;
            if (!check(c, rng, why)) {
              ++failures;
              FAIL_CHECK(describe(c) << ": " << why);
            }
          }
  return failures;
}

// Odd lengths, and aligned ones whose rows start on a vector (where the
// streaming variants store whole aligned vectors): short rows go in pairs,
// rows of several chunks through the scratch, the longest past it.
const std::vector<std::pair<std::int64_t, std::int64_t>> kShapes{
    {7, 1}, {5, 3}, {6, 17}, {5, 255}, {7, 256}, {3, 2048}, {5, 2049}, {3, 4096}, {3, 4099}, {2, 65536 + 3}};

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
    CHECK(run_all(kShapes, rng) == 0);
  }
  hwy::SetSupportedTargetsForTest(0);
  MESSAGE("targets tested: ", names);
}

// The fused operations' chunk primitives against scalar float32 and
// float64 on one target: conversions exact, the exp within float32's
// rounding of the polynomial, the special values as documented.
void check_float_chunks(std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (const std::int64_t n : {0, 1, 5, 16, 17, 33, 100, 1023, 1024}) {
    std::vector<float> x(std::size_t(n) + 1);
    for (auto& v : x) v = dist(rng);
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      INFO(to_string(dt), " n = ", n);
      const auto bytes = reference::encode(x, dt);
      const auto exact = reference::decode(bytes.data(), x.size(), dt);
      std::vector<float> got(x.size(), -7.0f);
      host::load_floats(dt, bytes.data(), n, got.data(), 0.5f);
      for (std::int64_t k = 0; k < n; ++k) CHECK(got[std::size_t(k)] == 0.5f * exact[std::size_t(k)]);
      CHECK(got[std::size_t(n)] == -7.0f);  // nothing past n written
      std::vector<float> sum(x.size(), 1.0f);
      host::add_floats(dt, bytes.data(), n, sum.data());
      for (std::int64_t k = 0; k < n; ++k) CHECK(sum[std::size_t(k)] == 1.0f + exact[std::size_t(k)]);
      std::vector<std::uint8_t> stored(bytes.size(), 0xab);
      host::store_floats(dt, x.data(), n, stored.data());
      const std::size_t elem = dt == DType::f32 ? 4 : 2;
      CHECK(std::memcmp(stored.data(), bytes.data(), std::size_t(n) * elem) == 0);
      CHECK(stored[std::size_t(n) * elem] == 0xab);
    }
    std::vector<std::uint8_t> masked(std::size_t(n) + 1);
    for (auto& m : masked) m = std::uint8_t(rng() % 3 == 0 ? 1 + rng() % 255 : 0);
    std::vector<float> v = x;
    host::mask_floats(masked.data(), n, v.data());
    for (std::int64_t k = 0; k < n; ++k)
      CHECK(v[std::size_t(k)] == (masked[std::size_t(k)] ? -HUGE_VALF : x[std::size_t(k)]));
    CHECK(v[std::size_t(n)] == x[std::size_t(n)]);
    const float largest = n == 0 ? -HUGE_VALF : *std::max_element(x.begin(), x.begin() + n);
    CHECK(host::max_floats(x.data(), n) == largest);
    // exp(v - max) * mul + add, with a -inf and (separately) a NaN.
    std::vector<float> e = x;
    if (n > 2) e[1] = -HUGE_VALF;
    const double exps = host::exp_affine(e.data(), n, largest, 0.25f, -1.0f);
    double want_sum = 0.0;
    for (std::int64_t k = 0; k < n; ++k) {
      const double want = k == 1 && n > 2 ? 0.0 : std::exp(double(x[std::size_t(k)]) - largest);
      want_sum += want;
      CHECK(std::abs(double(e[std::size_t(k)]) - (0.25 * want - 1.0)) <= 1e-6);
    }
    // Each lane sums in float: up to 512 terms on a one-lane target.
    CHECK(std::abs(exps - want_sum) <= 2e-5 * want_sum);
    if (n > 0) {
      std::vector<float> with_nan = x;
      with_nan[std::size_t(n) / 2] = std::numeric_limits<float>::quiet_NaN();
      CHECK(std::isnan(host::exp_affine(with_nan.data(), n, largest, 1.0f, 0.0f)));
      CHECK(std::isnan(with_nan[std::size_t(n) / 2]));
    }
  }
}

TEST_CASE("the fused operations' chunk primitives on every SIMD target") {
  std::mt19937_64 rng(std::random_device{}());
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("forced target ", std::string(hwy::TargetName(target)));
    check_float_chunks(rng);
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST_CASE("a NaN among -inf, where the max loop cannot see it, still makes its row NaN") {
  std::mt19937_64 rng(std::random_device{}());
  const auto targets = hwy::SupportedAndGeneratedTargets();
  for (const std::int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("forced target ", std::string(hwy::TargetName(target)));
    for (DType dt : {DType::f32, DType::f16, DType::bf16})
      for (Op op : {Op::softmax, Op::log_softmax})
        for (std::int64_t cols : {1, 33, 2048, 2049, 6000, 65536 + 3, 70001}) {
          Case c{dt, op, false, 4, cols, 0, false, false, true};
          std::string why;
          INFO(describe(c));
          CHECK_MESSAGE(check(c, rng, why), why);
        }
  }
  hwy::SetSupportedTargetsForTest(0);
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

TEST_CASE("the host's cache sizes are the ones Linux lists for CPU 0") {
  const DeviceProps props = detail::backend(BackendKind::host).device_props(0);
  int levels_listed = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    int level = 0;
    std::string type, size;
    if (!(std::ifstream(dir + "level") >> level)) break;
    std::ifstream(dir + "type") >> type;
    std::ifstream(dir + "size") >> size;
    if (type == "Instruction" || size.empty() || size.back() != 'K') continue;
    const std::int64_t bytes = std::stoll(size) * 1024;
    INFO("level ", level, " listed as ", size);
    if (level == 1) CHECK(props.l1d_bytes == bytes);
    if (level == 2) CHECK(props.l2_bytes == bytes);
    if (level == 3) CHECK(props.l3_bytes == bytes);
    ++levels_listed;
  }
  if (levels_listed == 0) MESSAGE("no cache entries under /sys: sysconf's sizes are used, nothing to compare");
  if (props.l2_bytes > 0 && props.l3_bytes > 0) CHECK(props.l2_bytes <= props.l3_bytes);
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
