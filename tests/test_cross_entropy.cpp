// Cross-entropy forward and backward on every device against the float64
// reference: fresh random logits and targets each run, poisoned outputs,
// every dtype and option.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "duet/cross_entropy.hpp"
#include "expect_refused.hpp"
#include "fused_test_util.hpp"

using namespace duet;
using namespace duet::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Case {
  explicit Case(const char* n) : name(n) {}
  const char* name;
  std::int64_t rows = 48, cols = 37;
  float stddev = 3.0f;
  CrossEntropyOptions options;
  double ignored_share = 0.2;  // rows whose target is ignore_index
  IndexType target_type = IndexType::i64;
  std::int64_t target_stride = 1;
  std::int64_t logits_pad = 0, grad_pad = 0;
  // Elements into their buffers where the logits and the gradient start
  // (views off the 16-byte grid); in place, the gradient is the logits.
  std::int64_t logits_offset = 0, grad_offset = 0;
  // Targets on the rows' first and last 8 columns, where the vector
  // kernels' heads and tails are.
  bool edge_targets = false;
  // 1: the logits and the gradient start their rows at the same offset
  // within a 16-byte pack (GPUs run the vector kernels with edges); 0: the
  // scalar path; -1: either.
  int vector = -1;
  enum Grad { none, separate, in_place } grad = separate;
  bool lse = true;
  bool backward = false;  // also the backward from lse
  // Rows given special values: +inf, NaN, -inf entries, +-1e4 (by row).
  bool extreme = false;
};

void run_case(const Device& dev, DType dtype, const Case& c) {
  const std::int64_t rows = c.rows, cols = c.cols;
  const CrossEntropyOptions& o = c.options;
  auto x = random_values(std::size_t(rows * cols), c.stddev, dtype);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::int64_t> t(static_cast<std::size_t>(rows));
  for (auto& v : t) v = u(rng()) < c.ignored_share ? o.ignore_index : std::int64_t(rng()() % std::uint64_t(cols));
  if (c.edge_targets)
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t& v = t[std::size_t(r)];
      if (v == o.ignore_index || r % 3 == 2) continue;
      const std::int64_t j = (r / 3) % 8;
      v = std::clamp<std::int64_t>(r % 3 == 0 ? j : cols - 1 - j, 0, cols - 1);
    }
  if (c.extreme) {
    for (std::int64_t j = 0; j < cols; ++j) {
      x[std::size_t(0 * cols + j)] = (j % 2 ? 1e4f : -1e4f);
      x[std::size_t(1 * cols + j)] = j % 3 == 0 ? -kInf : x[std::size_t(1 * cols + j)];
    }
    x[std::size_t(2 * cols + 1)] = kInf;
    x[std::size_t(3 * cols)] = kNaN;
    x = reference::round_trip(x, dtype);
    // Row 0's target on a 1e4 logit, row 1's on a finite one (a -inf
    // target logit gives an infinite loss).
    t[0] = t[1] = 1;
  }
  const bool none = o.reduction == Reduction::none;
  const std::size_t loss_n = none ? std::size_t(rows) : 1;
  // The forward's gradient is for an upstream gradient of 1.
  const auto want = reference::cross_entropy(x, rows, cols, t, o.ignore_index, o.label_smoothing, o.z_loss,
                                             o.reduction, std::vector<double>(loss_n, 1.0));
  const std::int64_t x_stride = cols + c.logits_pad;
  const std::int64_t g_stride = c.grad == Case::in_place ? x_stride : cols + c.grad_pad;
  const std::int64_t g_offset = c.grad == Case::in_place ? c.logits_offset : c.grad_offset;
  const int elem = dtype_size(dtype);
  const std::uint8_t gap = 0x5a;
  const auto x_bytes = placed(x, rows, cols, x_stride, c.logits_offset, dtype, gap);
  DeviceCopy dx(dev, x_bytes);
  DeviceCopy dt(dev, target_bytes(t, c.target_type, c.target_stride));
  DeviceCopy dloss(dev, std::vector<float>(loss_n, kNaN)), dlse(dev, std::vector<float>(std::size_t(rows), kNaN));
  DeviceCopy dgrad(dev, std::vector<std::uint8_t>(placed_bytes(rows, cols, g_stride, g_offset, dtype), kNaNPoison));
  DeviceCopy dinvalid(dev, std::vector<std::int32_t>{-5});
  char* xp = static_cast<char*>(dx.data()) + c.logits_offset * elem;
  CrossEntropyCall call;
  call.dtype = dtype;
  call.rows = rows;
  call.cols = cols;
  call.logits = xp;
  call.logits_stride = x_stride;
  call.target_type = c.target_type;
  call.target = dt.data();
  call.target_stride = c.target_stride;
  call.options = o;
  call.loss = static_cast<float*>(dloss.data());
  call.lse = c.lse ? static_cast<float*>(dlse.data()) : nullptr;
  call.grad = c.grad == Case::none       ? nullptr
              : c.grad == Case::in_place ? static_cast<void*>(xp)
                                         : static_cast<char*>(dgrad.data()) + g_offset * elem;
  call.grad_stride = g_stride;
  call.invalid_targets = static_cast<std::int32_t*>(dinvalid.data());
  FusedArgs a;
  a.op = FusedOp::cross_entropy;
  a.dtype = dtype;
  a.rows = rows;
  a.cols = cols;
  a.x = call.logits;
  a.x_stride = x_stride;
  a.out = call.grad;
  a.out_stride = call.grad ? g_stride : 0;
  const std::string kernel = fused_kernel(dev, a);
  INFO(label(dev, dtype), " ", c.name, " ", rows, "x", cols, " via ", kernel);
  if (c.vector >= 0) CHECK(detail::fused_vector_ok(a) == (c.vector == 1));
  CHECK(runs_path(dev, a, kernel, c.vector));
  run(dev, call);
  synchronize(dev);

  // Losses and lse: float32, per row (or the one reduced value).
  std::vector<double> l_scale(loss_n, 0.0);
  std::int64_t counted = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (t[std::size_t(r)] == o.ignore_index) continue;
    ++counted;
    l_scale[none ? std::size_t(r) : 0] += loss_scale(x, cols, r, t[std::size_t(r)], want.lse[std::size_t(r)], o);
  }
  if (o.reduction == Reduction::mean && counted > 0) l_scale[0] /= double(counted);
  const auto loss_check = reference::compare(dloss.get<float>(), want.loss, std::int64_t(loss_n), 1, 1e-5, &l_scale);
  INFO("loss: ", loss_check.first_failure);
  CHECK(loss_check.ok);
  if (c.lse) {
    // An ignored row's lse is not part of the contract: compared where counted.
    auto got_lse = dlse.get<float>();
    auto want_lse = want.lse;
    for (std::int64_t r = 0; r < rows; ++r)
      if (t[std::size_t(r)] == o.ignore_index) got_lse[std::size_t(r)] = float(want_lse[std::size_t(r)] = 0.0);
    // lse = max + log(sum): float32 holds it to eps times those terms, which
    // cancel where lse is near 0 (two logits of opposite sign).
    std::vector<double> lse_scale(std::size_t(rows), 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, double(x[std::size_t(r * cols + j)]));
      lse_scale[std::size_t(r)] = std::isfinite(m) ? std::abs(m) + std::log(double(cols)) : 0.0;
    }
    const auto lse_check = reference::compare(got_lse, want_lse, rows, 1, 1e-5, &lse_scale);
    INFO("lse: ", lse_check.first_failure);
    CHECK(lse_check.ok);
  }
  CHECK(dinvalid.get<std::int32_t>()[0] == 0);
  if (c.grad != Case::none) {
    const double g_all = o.reduction == Reduction::mean ? 1.0 / double(counted) : 1.0;
    std::vector<double> g_scale(std::size_t(rows), 0.0);
    for (std::int64_t r = 0; r < rows; ++r)
      g_scale[std::size_t(r)] = grad_scale(x, cols, r, want.lse[std::size_t(r)], g_all, o);
    const auto bytes = c.grad == Case::in_place ? dx.get<std::uint8_t>() : dgrad.get<std::uint8_t>();
    const auto got = dense(bytes, rows, cols, g_stride, g_offset, dtype);
    const auto check = reference::compare(got, want.grad, rows, cols, reference::default_tolerance(dtype), &g_scale,
                                          reference::default_abs_floor(dtype));
    INFO("grad: ", check.first_failure);
    CHECK(check.ok);
    CHECK(gaps_hold(bytes, rows, cols, g_stride, g_offset, dtype, c.grad == Case::in_place ? gap : kNaNPoison));
  }
  if (c.grad != Case::in_place) CHECK(dx.get<std::uint8_t>() == x_bytes);
  if (!c.backward) return;

  // The backward from the reference's lse (as float32, what a forward
  // writes) and an upstream gradient other than 1.
  std::vector<float> lse_f(want.lse.begin(), want.lse.end());
  std::vector<float> grad_loss(loss_n);
  for (auto& g : grad_loss) g = float(u(rng()) * 4.0 - 2.0);
  grad_loss[0] = 0.75f;
  const auto want_b = reference::cross_entropy(x, rows, cols, t, o.ignore_index, o.label_smoothing, o.z_loss,
                                               o.reduction, std::vector<double>(grad_loss.begin(), grad_loss.end()));
  DeviceCopy dlse_in(dev, lse_f), dgl(dev, grad_loss);
  DeviceCopy dgrad_b(dev, std::vector<std::uint8_t>(placed_bytes(rows, cols, g_stride, g_offset, dtype), kNaNPoison));
  DeviceCopy dx_b(dev, x_bytes);
  char* xp_b = static_cast<char*>(dx_b.data()) + c.logits_offset * elem;
  CrossEntropyBackwardCall b;
  b.dtype = dtype;
  b.rows = rows;
  b.cols = cols;
  b.logits = xp_b;
  b.logits_stride = x_stride;
  b.target_type = c.target_type;
  b.target = dt.data();
  b.target_stride = c.target_stride;
  b.options = o;
  b.lse = static_cast<const float*>(dlse_in.data());
  b.grad_loss = static_cast<const float*>(dgl.data());
  b.grad = c.grad == Case::in_place ? static_cast<void*>(xp_b) : static_cast<char*>(dgrad_b.data()) + g_offset * elem;
  b.grad_stride = g_stride;
  a.op = FusedOp::cross_entropy_backward;
  a.x = b.logits;
  a.out = b.grad;
  a.out_stride = g_stride;
  const std::string backward_kernel = fused_kernel(dev, a);
  INFO("backward via ", backward_kernel);
  if (c.vector >= 0) CHECK(detail::fused_vector_ok(a) == (c.vector == 1));
  CHECK(runs_path(dev, a, backward_kernel, c.vector));
  run(dev, b);
  synchronize(dev);
  std::vector<double> g_scale(std::size_t(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double g = none ? grad_loss[std::size_t(r)]
                          : o.reduction == Reduction::mean ? grad_loss[0] / double(counted) : grad_loss[0];
    g_scale[std::size_t(r)] = grad_scale(x, cols, r, want.lse[std::size_t(r)], g, o);
  }
  const auto bytes = c.grad == Case::in_place ? dx_b.get<std::uint8_t>() : dgrad_b.get<std::uint8_t>();
  const auto check = reference::compare(dense(bytes, rows, cols, g_stride, g_offset, dtype), want_b.grad, rows, cols,
                                        reference::default_tolerance(dtype), &g_scale,
                                        reference::default_abs_floor(dtype));
  INFO("backward grad: ", check.first_failure);
  CHECK(check.ok);
  CHECK(gaps_hold(bytes, rows, cols, g_stride, g_offset, dtype, c.grad == Case::in_place ? gap : kNaNPoison));
}

void each(const Case& c) {
  on_every_device([&](const Device& dev) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) run_case(dev, dtype, c);
  });
}

}  // namespace

TEST_CASE("cross-entropy: reductions, lse, gradient in the forward and the backward") {
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    Case c("plain");
    c.options.reduction = red;
    c.backward = true;
    each(c);
    c.name = "gradient in place into the logits, strided";
    c.grad = Case::in_place;
    c.logits_pad = 3;
    each(c);
    c.name = "separate strided gradient, no lse, int32 targets at stride 3";
    c.grad = Case::separate;
    c.grad_pad = 11;
    c.lse = false;
    c.target_type = IndexType::i32;
    c.target_stride = 3;
    each(c);
    c.name = "loss only, int64 targets at stride 2";
    c.grad = Case::none;
    c.target_type = IndexType::i64;
    c.target_stride = 2;
    c.backward = false;
    each(c);
  }
}

TEST_CASE("cross-entropy: label smoothing, z-loss, ignore_index values") {
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    Case c("label smoothing 0.1");
    c.options.reduction = red;
    c.options.label_smoothing = 0.1f;
    c.backward = true;
    each(c);
    c.name = "z-loss 1e-3 and smoothing 0.05, ignore_index 7";
    c.options.z_loss = 1e-3f;
    c.options.label_smoothing = 0.05f;
    c.options.ignore_index = 7;
    each(c);
    c.name = "smoothing 1, ignore_index -1";
    c.options.label_smoothing = 1.0f;
    c.options.z_loss = 0.0f;
    c.options.ignore_index = -1;
    each(c);
  }
}

TEST_CASE("cross-entropy: every row ignored (mean NaN, sum 0, gradient 0)") {
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    Case c("all ignored");
    c.options.reduction = red;
    c.ignored_share = 1.0;
    c.backward = true;
    each(c);
  }
}

TEST_CASE("cross-entropy: vocabularies 2, odd, 1000 and 32003") {
  for (std::int64_t cols : {2, 3, 1000, 32003}) {
    Case c("vocabulary");
    c.cols = cols;
    c.rows = cols > 1000 ? 6 : 40;
    c.options.label_smoothing = 0.1f;
    c.backward = true;
    each(c);
  }
}

// Rows off the 16-byte grid: odd vocabularies, views starting 1..7
// elements past a 16-byte boundary, odd strides, targets in the rows' first
// and last columns. Where the logits and the gradient start their rows at
// the same offset within a pack (vector = 1), GPUs run the vector kernels
// (group_rows, block_row and stream_row by length) with each row's head and
// tail element-wise, the target's logit and its one-hot term among them.
TEST_CASE("cross-entropy: odd vocabularies and offset views on the vector path") {
  for (std::int64_t cols : {1, 3, 7, 9, 15, 17, 33, 135})
    for (std::int64_t k = 0; k < 8; ++k) {
      Case c("offset view, odd stride, targets on the edges");
      c.rows = 24;
      c.cols = cols;
      c.logits_offset = c.grad_offset = k;
      c.logits_pad = k % 3 == 0 ? 0 : 2 * k - 1;
      c.grad_pad = c.logits_pad + 8;
      c.edge_targets = true;
      c.ignored_share = 0.1;
      c.options.reduction = k % 2 ? Reduction::none : Reduction::mean;
      c.options.label_smoothing = k % 4 == 1 ? 0.1f : 0.0f;
      c.backward = true;
      c.vector = 1;
      each(c);
    }
  // Past group_rows: block_row (1027, 2055, 4097) and stream_row (50257,
  // 70001); dense rows (odd strides), views at odd offsets, in place.
  for (std::int64_t cols : {1027, 2055, 4097, 50257, 70001}) {
    Case c("odd vocabulary, dense rows, targets on the edges");
    c.rows = cols > 5000 ? 6 : 12;
    c.cols = cols;
    c.edge_targets = true;
    c.ignored_share = 0.0;
    c.options.label_smoothing = 0.05f;
    c.backward = true;
    c.vector = 1;
    each(c);
    c.name = "odd vocabulary, offset views, odd strides";
    c.logits_offset = c.grad_offset = 5;
    c.logits_pad = 1;
    c.grad_pad = 9;
    c.options.reduction = Reduction::none;
    each(c);
    c.name = "odd vocabulary, gradient in place, offset view";
    c.grad = Case::in_place;
    c.logits_offset = 3;
    c.options.reduction = Reduction::sum;
    c.options.z_loss = 1e-3f;
    each(c);
    c.name = "odd vocabulary, loss only, offset view";
    c.grad = Case::none;
    c.logits_offset = 7;
    c.backward = false;
    each(c);
    c = Case("gradient one element further into its buffer than the logits: the scalar path");
    c.rows = 6;
    c.cols = cols;
    c.edge_targets = true;
    c.logits_offset = 2;
    c.grad_offset = 3;
    c.backward = true;
    c.vector = 0;
    each(c);
  }
}

TEST_CASE("cross-entropy: extreme and non-finite logits as torch") {
  // Row 0: +-1e4; row 1: -inf entries; row 2: a +inf (NaN); row 3: a NaN.
  // The backward is not run: a float32 lse of logits near 1e4 is only
  // within 1e-3 of the float64 one, which the gradient would inherit.
  for (Reduction red : {Reduction::none, Reduction::mean}) {
    Case c("extreme");
    c.extreme = true;
    c.ignored_share = 0.0;
    c.options.reduction = red;
    each(c);
    c.name = "extreme, gradient in place";
    c.grad = Case::in_place;
    each(c);
  }
}

TEST_CASE("cross-entropy: a 2^20 vocabulary") {
  on_every_device([&](const Device& dev) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      Case c("wide");
      c.rows = 2;
      c.cols = std::int64_t(1) << 20;
      c.ignored_share = 0.0;
      c.backward = dtype == DType::f32;
      run_case(dev, dtype, c);
    }
  });
}

TEST_CASE("cross-entropy: out-of-range targets refused on the host before anything is written") {
  const Device host = device(BackendKind::host, 0);
  for (std::int64_t bad_target : {std::int64_t(5), std::int64_t(-3), std::int64_t(1) << 40}) {
    std::vector<float> x(20, 1.0f), grad(20, -7.0f), lse(4, -7.0f), x_copy = x;
    float loss = -7.0f;
    std::vector<std::int64_t> t{0, 1, bad_target, 2};
    CrossEntropyCall c;
    c.rows = 4;
    c.cols = 5;
    c.logits = x.data();
    c.logits_stride = 5;
    c.target = t.data();
    c.loss = &loss;
    c.lse = lse.data();
    c.grad = grad.data();
    c.grad_stride = 5;
    expect_refused([&] { run(host, c); }, ("target " + std::to_string(bad_target) + " of row 2").c_str());
    CHECK(loss == -7.0f);
    CHECK(std::all_of(lse.begin(), lse.end(), [](float v) { return v == -7.0f; }));
    CHECK(std::all_of(grad.begin(), grad.end(), [](float v) { return v == -7.0f; }));
    // In place: the logits are untouched too.
    c.grad = x.data();
    expect_refused([&] { run(host, c); }, "row 2");
    CHECK(x == x_copy);
    CrossEntropyBackwardCall b;
    const float one = 1.0f;
    b.rows = 4;
    b.cols = 5;
    b.logits = x.data();
    b.logits_stride = 5;
    b.target = t.data();
    b.lse = lse.data();
    b.grad_loss = &one;
    b.grad = grad.data();
    b.grad_stride = 5;
    expect_refused([&] { run(host, b); }, "row 2");
    CHECK(std::all_of(grad.begin(), grad.end(), [](float v) { return v == -7.0f; }));
  }
}

TEST_CASE("cross-entropy: out-of-range targets on a GPU give NaN rows and a count") {
  for (const Device& dev : devices()) {
    if (!dev.is_gpu()) continue;
    try {
      const std::vector<float> x(20, 1.0f);
      const std::vector<std::int64_t> t{0, 9, 1, -4};
      DeviceCopy dx(dev, x), dt(dev, t), dloss(dev, std::vector<float>(4, 0.0f)), dcount(dev, std::vector<std::int32_t>{0});
      CrossEntropyCall c;
      c.rows = 4;
      c.cols = 5;
      c.logits = dx.data();
      c.logits_stride = 5;
      c.target = dt.data();
      c.options.reduction = Reduction::none;
      c.loss = static_cast<float*>(dloss.data());
      c.invalid_targets = static_cast<std::int32_t*>(dcount.data());
      run(dev, c);
      synchronize(dev);
      const auto loss = dloss.get<float>();
      CHECK(std::isfinite(loss[0]));
      CHECK(std::isnan(loss[1]));
      CHECK(std::isnan(loss[3]));
      CHECK(dcount.get<std::int32_t>()[0] == 2);
    } catch (const Error& e) {
      if (e.status() != Status::unsupported) throw;
      MESSAGE("skipping ", dev.label(), ": ", e.what());
    }
  }
}

TEST_CASE("cross-entropy: bad calls are refused with a reason and write nothing") {
  const Device host = device(BackendKind::host, 0);
  std::vector<float> x(40, 1.0f), grad(40, -7.0f), lse(8, -7.0f);
  std::vector<std::int64_t> t(8, 1);
  float loss = -7.0f;
  auto base = [&] {
    CrossEntropyCall c;
    c.rows = 8;
    c.cols = 5;
    c.logits = x.data();
    c.logits_stride = 5;
    c.target = t.data();
    c.loss = &loss;
    c.lse = lse.data();
    c.grad = grad.data();
    c.grad_stride = 5;
    return c;
  };
  auto expect = [&](const CrossEntropyCall& c, const char* mentions) {
    expect_refused([&] { run(host, c); }, mentions);
    CHECK(loss == -7.0f);
    CHECK(std::all_of(grad.begin(), grad.end(), [](float v) { return v == -7.0f; }));
    CHECK(std::all_of(lse.begin(), lse.end(), [](float v) { return v == -7.0f; }));
  };
  auto c = base();
  c.dtype = static_cast<DType>(3);
  expect(c, "dtype");
  c = base();
  c.target_type = static_cast<IndexType>(-1);
  expect(c, "index type");
  c = base();
  c.options.reduction = static_cast<Reduction>(9);
  expect(c, "reduction");
  c = base();
  c.cols = 0;
  expect(c, "vocabulary");
  c = base();
  c.options.label_smoothing = 1.5f;
  expect(c, "label_smoothing");
  c.options.label_smoothing = kNaN;
  expect(c, "label_smoothing");
  c = base();
  c.options.z_loss = -1.0f;
  expect(c, "z_loss");
  c.options.z_loss = kInf;
  expect(c, "z_loss");
  c = base();
  c.target_stride = 0;
  expect(c, "target_stride");
  c = base();
  c.loss = nullptr;
  expect(c, "loss is a null");
  c = base();
  c.target = nullptr;
  expect(c, "target is a null");
  c = base();
  c.target = reinterpret_cast<const char*>(t.data()) + 4;
  expect(c, "aligned");
  c = base();
  c.logits_stride = 4;
  expect(c, "stride");
  c = base();
  c.grad = reinterpret_cast<char*>(grad.data()) + 2;
  expect(c, "aligned");
  c = base();
  c.grad = x.data() + 5;  // overlapping the logits, one row off
  expect(c, "overlap");
  c = base();
  c.lse = grad.data() + 3;  // lse inside the gradient
  expect(c, "overlap");
  c = base();
  c.loss = lse.data() + 2;  // loss inside lse (reduction none: 8 floats)
  c.options.reduction = Reduction::none;
  expect(c, "overlap");
  c = base();
  c.target = reinterpret_cast<const std::int64_t*>(grad.data() + 8);
  expect(c, "overlap");
  // Zero rows: a no-op.
  c = base();
  c.rows = 0;
  c.logits = nullptr;
  run(host, c);
  CHECK(loss == -7.0f);
  CHECK(cross_entropy_workspace_size(host, 100, Reduction::mean) == 0);
  expect_refused([&] { cross_entropy_workspace_size(host, -1, Reduction::mean); }, "rows");
  expect_refused([&] { cross_entropy_workspace_size(host, 1, static_cast<Reduction>(-7)); }, "reduction");
}
