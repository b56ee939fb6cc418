// Sixteen application threads at once on the host backend, mixed shapes,
// dtypes and directions (one thread also changes the thread setting): every
// result right, no thread multiplied. scripts/tsan.sh runs this under
// ThreadSanitizer.
#include <doctest/doctest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "duet/device.hpp"
#include "duet/reference.hpp"
#include "duet/softmax.hpp"

using namespace duet;

TEST_CASE("host stress: 16 threads x mixed shapes") {
  const Device host = device(BackendKind::host, 0);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<unsigned>(t) * 7919u);
      std::normal_distribution<float> dist(0.0f, 4.0f);
      const std::int64_t shapes[][2] = {{1, 3 + t}, {64, 257}, {300, 1024}, {2, 70001}, {16, 4096}, {1, 200003}};
      for (int round = 0; round < 3; ++round)
        for (const auto& shape : shapes) {
          if (t == 15 && round == 1) set_host_threads(1 + int(shape[1] % 3));
          const std::int64_t rows = shape[0], cols = shape[1];
          const DType dt = (t + round) % 3 == 0 ? DType::f32 : (t + round) % 3 == 1 ? DType::bf16 : DType::f16;
          const Op op = t % 2 ? Op::softmax : Op::log_softmax;
          std::vector<float> x(std::size_t(rows * cols));
          for (auto& v : x) v = dist(rng);
          x = reference::round_trip(x, dt);
          auto xb = reference::encode(x, dt);
          std::vector<std::uint8_t> yb(xb.size(), 0xff);
          if (op == Op::softmax)
            softmax(host, dt, rows, cols, xb.data(), cols, yb.data(), cols);
          else
            log_softmax(host, dt, rows, cols, xb.data(), cols, yb.data(), cols);
          const auto got = reference::decode(yb.data(), x.size(), dt);
          if (!reference::compare(got, reference::forward(x, rows, cols, op), rows, cols, reference::default_tolerance(dt))
                   .ok)
            ++failures;
        }
    });
  for (auto& th : threads) th.join();
  set_host_threads(0);
  CHECK(failures.load() == 0);
}
