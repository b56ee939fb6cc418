// The host backend runs the same operations: checked against the double
// reference, with poisoned outputs, across strategies' shape classes.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <random>

#include "duet/device.hpp"
#include "duet/error.hpp"
#include "duet/reference.hpp"
#include "duet/softmax.hpp"
#include "expect_refused.hpp"

using namespace duet;

TEST_CASE("host softmax family matches the double reference") {
  const Device host = device(BackendKind::host, 0);
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (bool bwd : {false, true})
      for (Op op : {Op::softmax, Op::log_softmax})
        for (std::int64_t cols : {1, 2, 33, 1000, 4097, 70001}) {
          const std::int64_t rows = std::max<std::int64_t>(1, 200000 / cols);
          std::vector<float> x(std::size_t(rows * cols)), g(x.size());
          for (auto& v : x) v = dist(rng);
          for (auto& v : g) v = dist(rng) / 4;
          x = reference::round_trip(x, dt);
          if (bwd) {
            const auto y = reference::forward(x, rows, cols, op);
            for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(y[i]);
            x = reference::round_trip(x, dt);
            g = reference::round_trip(g, dt);
          }
          auto xb = reference::encode(x, dt), gb = reference::encode(g, dt);
          std::vector<std::uint8_t> out(xb.size(), 0xff);
          SoftmaxCall c;
          c.op = op;
          c.backward = bwd;
          c.dtype = dt;
          c.rows = rows;
          c.cols = cols;
          c.x = xb.data();
          c.x_stride = cols;
          c.dy = bwd ? gb.data() : nullptr;
          c.dy_stride = cols;
          c.out = out.data();
          c.out_stride = cols;
          run(host, c);
          const auto got = reference::decode(out.data(), x.size(), dt);
          const auto want = bwd ? reference::backward(x, g, rows, cols, op) : reference::forward(x, rows, cols, op);
          const auto scale = bwd ? reference::backward_scale(x, g, rows, cols, op) : std::vector<double>{};
          const auto check =
              reference::compare(got, want, rows, cols, reference::default_tolerance(dt), bwd ? &scale : nullptr,
                                 reference::default_abs_floor(dt));
          INFO(to_string(dt), bwd ? " bwd " : " fwd ", op == Op::softmax ? "softmax " : "log_softmax ", rows, "x", cols,
               ": ", check.first_failure);
          CHECK(check.ok);
        }
}

TEST_CASE("torch semantics for inf, -inf and NaN on the host") {
  const Device host = device(BackendKind::host, 0);
  const float inf = INFINITY, nan = NAN;
  std::vector<float> x{1, -inf, 2, /**/ -inf, -inf, -inf, /**/ 1, inf, 0, /**/ 0, nan, 1};
  std::vector<float> y(x.size(), 0);
  softmax(host, DType::f32, 4, 3, x.data(), 3, y.data(), 3);
  CHECK(y[1] == 0.0f);
  CHECK(std::abs(y[0] + y[2] - 1.0f) < 1e-6f);
  for (int i = 3; i < 12; ++i) CHECK(std::isnan(y[std::size_t(i)]));
}

TEST_CASE("bad calls fail with a clear error and write nothing") {
  const Device host = device(BackendKind::host, 0);
  std::vector<float> x(64, 1.0f), y(64, -7.0f);
  auto untouched = [&] { return std::all_of(y.begin(), y.end(), [](float v) { return v == -7.0f; }); };
  auto expect = [&](auto&& call, const char* mentions) {
    duet::testing::expect_refused(call, mentions);
    CHECK(untouched());
  };
  expect([&] { softmax(host, DType::f32, 2, 4, nullptr, 4, y.data(), 4); }, "null");
  expect([&] { softmax(host, DType::f32, 2, 4, x.data(), 4, nullptr, 4); }, "null");
  expect([&] { softmax(host, DType::f32, -1, 4, x.data(), 4, y.data(), 4); }, ">= 0");
  expect([&] { softmax(host, DType::f32, 2, 8, x.data(), 4, y.data(), 8); }, "stride");
  expect([&] { softmax(host, DType::f32, 2, 4, x.data(), 4, x.data() + 1, 4); }, "overlap");
  expect([&] { softmax(host, DType::f32, std::int64_t(1) << 62, 4, x.data(), 4, y.data(), 4); }, "overflow");
  expect([&] { softmax(host, static_cast<DType>(9), 2, 4, x.data(), 4, y.data(), 4); }, "dtype");
  // Zero rows or columns: a documented no-op.
  softmax(host, DType::f32, 0, 4, nullptr, 4, nullptr, 4);
  softmax(host, DType::f32, 4, 0, nullptr, 4, nullptr, 4);
  CHECK(untouched());
  // In place is allowed.
  softmax(host, DType::f32, 2, 4, y.data(), 4, y.data(), 4);
  CHECK(y[0] == doctest::Approx(0.25f));
  CHECK_THROWS_AS(device(BackendKind::host, 3), Error);
}

TEST_CASE("host backend: eight threads at once, shared plan cache") {
  const Device host = device(BackendKind::host, 0);
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t)
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<unsigned>(t));
      std::normal_distribution<float> dist(0.0f, 4.0f);
      for (std::int64_t cols : {7 + t, 1000, 4097}) {
        const std::int64_t rows = 33;
        std::vector<float> x(std::size_t(rows * cols)), y(x.size(), -1.0f);
        for (auto& v : x) v = dist(rng);
        softmax(host, DType::f32, rows, cols, x.data(), cols, y.data(), cols);
        const auto check = reference::compare(y, reference::forward(x, rows, cols, Op::softmax), rows, cols, 1e-5);
        if (!check.ok) ++failures;
      }
    });
  for (auto& th : pool) th.join();
  CHECK(failures.load() == 0);
}

TEST_CASE("an allocation the machine cannot satisfy is out_of_memory, not a crash") {
  const Device host = device(BackendKind::host, 0);
  try {
    Buffer huge(host, std::size_t(1) << 62);
    FAIL("a 4 EiB allocation succeeded");
  } catch (const Error& e) {
    CHECK(e.status() == Status::out_of_memory);
  }
}

TEST_CASE("set_plan_options: later calls plan with the new switches, earlier plans stay as they were") {
  const Device dev(BackendKind::host, 0);
  const std::int64_t rows = 4, cols = 4096;
  std::vector<float> x(rows * cols, 0.5f), y(rows * cols);
  SoftmaxCall call;
  call.rows = rows;
  call.cols = cols;
  call.x = x.data();
  call.x_stride = cols;
  call.out = y.data();
  call.out_stride = cols;
  const PlanOptions before = plan_options();
  const Plan planned = plan_for(dev, call);
  CHECK(planned.kernel.strategy != Strategy::split_stream);
  PlanOptions stream = before;
  stream.force_stream = true;
  set_plan_options(stream);
  CHECK(plan_options().force_stream);
  CHECK(plan_for(dev, call).kernel.strategy == Strategy::split_stream);
  run(dev, call);  // the host runs its own loops whatever the plan: still softmax
  CHECK(std::abs(y[0] - 1.0f / cols) < 1e-9f);
  set_plan_options(before);
  CHECK(plan_for(dev, call).kernel.strategy == planned.kernel.strategy);
}
