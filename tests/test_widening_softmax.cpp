// softmax / log_softmax of f16 and bf16 input into a float32 output, and
// the backward from float32 y and dy into an f16 or bf16 dx
// (SoftmaxCall::out_dtype), on every device against the float64 reference:
// fresh random data each run, poisoned outputs, views off the 16-byte grid.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "duet/softmax.hpp"
#include "expect_refused.hpp"
#include "fused_test_util.hpp"

using namespace duet;
using namespace duet::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The fused call run() makes of a widening call, for the plan a GPU takes.
FusedArgs fused_args_of(const SoftmaxCall& c) {
  FusedArgs a;
  a.op = c.backward ? FusedOp::widening_softmax_backward : FusedOp::widening_softmax;
  a.dtype = c.backward ? *c.out_dtype : c.dtype;
  a.rows = c.rows;
  a.cols = c.cols;
  a.x = c.x;
  a.x_stride = c.x_stride;
  a.dy = c.dy;
  a.dy_stride = c.dy_stride;
  a.out = c.out;
  a.out_stride = c.out_stride;
  a.log_softmax = c.op == Op::log_softmax ? 1 : 0;
  return a;
}

// Modes of where the tensors start: 0 on a 16-byte boundary, row stride
// cols; 1 all k elements into their buffers with an odd stride (the vector
// kernels with edges); 2 out one element off x's offset (the scalar kernels).
struct Placement {
  std::int64_t stride, in_off, out_off;
  int vector;  // runs_path's: 1 vector, 0 scalar
};
Placement placement(int mode, std::int64_t cols) {
  const std::int64_t k = 1 + cols % 7;
  if (mode == 0) return {cols, 0, 0, 1};
  if (mode == 1) return {cols + 2 * k + 1, k, k, 1};
  return {cols + 2 * k + 1, k, k + 1, 0};
}

}  // namespace

TEST_CASE("widening softmax: f16/bf16 x into float32 y, every row length and path, against float64") {
  on_every_device([&](const Device& dev) {
    for (DType dtype : {DType::f16, DType::bf16})
      for (Op op : {Op::softmax, Op::log_softmax})
        // 70001 and 131075: stream_row, its row kept whole and in part in
        // shared memory (GPU).
        for (std::int64_t cols : {1, 7, 64, 77, 1024, 4097, 70001, 131075})
          for (int mode = 0; mode < 3; ++mode) {
            const std::int64_t rows = cols > 5000 ? 3 : 13;
            const Placement p = placement(mode, cols);
            auto x = random_values(std::size_t(rows * cols), 3.0f, dtype);
            if (cols >= 7 && rows > 3) {  // rows with NaN, +inf, all -inf, and one -inf: as torch
              x[std::size_t(cols + 2)] = std::numeric_limits<float>::quiet_NaN();
              x[std::size_t(2 * cols + 5)] = kInf;
              std::fill(x.begin() + 3 * cols, x.begin() + 4 * cols, -kInf);
              x[std::size_t(4 * cols + 1)] = -kInf;
            }
            const auto want = reference::forward(x, rows, cols, op);
            const auto x_bytes = placed(x, rows, cols, p.stride, p.in_off, dtype, 0x11);
            DeviceCopy dx(dev, x_bytes);
            DeviceCopy dy(dev, std::vector<std::uint8_t>(placed_bytes(rows, cols, p.stride, p.out_off, DType::f32),
                                                         kNaNPoison));
            const SoftmaxCall call{.op = op,
                                   .dtype = dtype,
                                   .rows = rows,
                                   .cols = cols,
                                   .x = static_cast<const char*>(dx.data()) + p.in_off * dtype_size(dtype),
                                   .x_stride = p.stride,
                                   .out = static_cast<char*>(dy.data()) + p.out_off * 4,
                                   .out_stride = p.stride,
                                   .out_dtype = DType::f32};
            const FusedArgs a = fused_args_of(call);
            const std::string kernel = fused_kernel(dev, a);
            INFO(label(dev, dtype), (op == Op::log_softmax ? " log_softmax " : " softmax "), rows, "x", cols,
                 " mode ", mode, " via ", kernel);
            CHECK(runs_path(dev, a, kernel, p.vector));
            run(dev, call);
            synchronize(dev);
            const auto bytes = dy.get<std::uint8_t>();
            const auto check = reference::compare(dense(bytes, rows, cols, p.stride, p.out_off, DType::f32), want,
                                                  rows, cols, reference::default_tolerance(DType::f32));
            INFO(check.first_failure);
            CHECK(check.ok);
            CHECK(gaps_hold(bytes, rows, cols, p.stride, p.out_off, DType::f32, kNaNPoison));
            CHECK(dx.get<std::uint8_t>() == x_bytes);
          }
  });
}

TEST_CASE("widening softmax backward: float32 y and dy into an f16/bf16 dx, every row length and path") {
  on_every_device([&](const Device& dev) {
    for (DType dtype : {DType::f16, DType::bf16})
      for (Op op : {Op::softmax, Op::log_softmax})
        for (std::int64_t cols : {1, 7, 64, 77, 1024, 4097, 70001})
          for (int mode = 0; mode < 3; ++mode) {
            const std::int64_t rows = cols > 5000 ? 3 : 13;
            const Placement p = placement(mode, cols);
            const auto x = random_values(std::size_t(rows * cols), 3.0f, dtype);
            const auto y_exact = reference::forward(x, rows, cols, op);
            const std::vector<float> y(y_exact.begin(), y_exact.end());
            const auto g = random_values(y.size(), 1.0f, DType::f32);
            const auto want = reference::backward(y, g, rows, cols, op);
            const auto row_scale = reference::backward_scale(y, g, rows, cols, op);
            // y and dy at the input offset, dx at the output's.
            const auto y_bytes = placed(y, rows, cols, p.stride, p.in_off, DType::f32, 0x11);
            const auto g_bytes = placed(g, rows, cols, p.stride, p.in_off, DType::f32, 0x22);
            DeviceCopy dyv(dev, y_bytes), dg(dev, g_bytes);
            DeviceCopy ddx(dev, std::vector<std::uint8_t>(placed_bytes(rows, cols, p.stride, p.out_off, dtype),
                                                          kNaNPoison));
            const SoftmaxCall call{.op = op,
                                   .backward = true,
                                   .dtype = DType::f32,
                                   .rows = rows,
                                   .cols = cols,
                                   .x = static_cast<const char*>(dyv.data()) + p.in_off * 4,
                                   .x_stride = p.stride,
                                   .dy = static_cast<const char*>(dg.data()) + p.in_off * 4,
                                   .dy_stride = p.stride,
                                   .out = static_cast<char*>(ddx.data()) + p.out_off * dtype_size(dtype),
                                   .out_stride = p.stride,
                                   .out_dtype = dtype};
            const FusedArgs a = fused_args_of(call);
            const std::string kernel = fused_kernel(dev, a);
            INFO(label(dev, dtype), (op == Op::log_softmax ? " log_softmax " : " softmax "), rows, "x", cols,
                 " mode ", mode, " via ", kernel);
            CHECK(runs_path(dev, a, kernel, p.vector));
            run(dev, call);
            synchronize(dev);
            const auto bytes = ddx.get<std::uint8_t>();
            const auto check =
                reference::compare(dense(bytes, rows, cols, p.stride, p.out_off, dtype), want, rows, cols,
                                   reference::default_tolerance(dtype), &row_scale, reference::default_abs_floor(dtype));
            INFO(check.first_failure);
            CHECK(check.ok);
            CHECK(gaps_hold(bytes, rows, cols, p.stride, p.out_off, dtype, kNaNPoison));
            CHECK(dyv.get<std::uint8_t>() == y_bytes);
            CHECK(dg.get<std::uint8_t>() == g_bytes);
          }
  });
}

TEST_CASE("widening softmax: unsupported pairs and bad tensors are refused, nothing written") {
  const Device host = device(BackendKind::host, 0);
  std::vector<std::uint16_t> x(64, 0x3c00);  // f16 1.0 (bf16 1.875)
  std::vector<float> y(64, -7.0f);
  auto untouched = [&] { return std::all_of(y.begin(), y.end(), [](float v) { return v == -7.0f; }); };
  const SoftmaxCall good{
      .dtype = DType::bf16, .rows = 4, .cols = 16, .x = x.data(), .x_stride = 16, .out = y.data(), .out_stride = 16,
      .out_dtype = DType::f32};
  SoftmaxCall c = good;
  c.dtype = DType::f32;  // f32 into bf16: not a widening
  c.out_dtype = DType::bf16;
  expect_refused([&] { run(host, c); }, "f16 or bf16 x into a float32 y", Status::unsupported);
  c = good;
  c.out_dtype = DType::f16;  // bf16 into f16
  expect_refused([&] { run(host, c); }, "float32 y", Status::unsupported);
  c = good;
  c.backward = true;  // backward from bf16 y into an f32 dx: the reverse of what it takes
  c.dy = x.data();
  c.dy_stride = 16;
  expect_refused([&] { run(host, c); }, "float32 y and dy into an f16 or bf16 dx", Status::unsupported);
  c = good;
  c.inner = 2;  // interleaved rows
  c.rows = 2;
  c.x_col_stride = 2;
  c.out_col_stride = 2;
  expect_refused([&] { run(host, c); }, "inner = 1", Status::unsupported);
  c = good;
  c.out_dtype = static_cast<DType>(7);
  expect_refused([&] { run(host, c); }, "dtype");
  c = good;
  c.out = reinterpret_cast<char*>(y.data()) + 2;  // not on a float
  expect_refused([&] { run(host, c); }, "y");
  c = good;
  c.out = x.data();  // over x: elements of different sizes are never in place
  expect_refused([&] { run(host, c); }, "must be apart");
  expect_refused([&] { (void)plan_for(host, good); }, "plan_fused");
  CHECK(untouched());
  // The same call with out_dtype equal to dtype is the plain softmax.
  std::vector<std::uint16_t> same(64, 0);
  c = good;
  c.out = same.data();
  c.out_dtype = DType::bf16;
  run(host, c);
  CHECK(std::all_of(same.begin(), same.end(), [](std::uint16_t v) { return v == 0x3d80; }));  // bf16 1/16
}
