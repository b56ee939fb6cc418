#include "host/host_interleaved.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "host/host_storage.hpp"

namespace duet::host {
namespace {

// Rows [i0, i0 + n) of outer row r: three walks over their elements (max,
// sum, write; backward: sum, write), n lanes a step. The max skips NaN, the
// sum does not, so a NaN makes its row NaN, as on the GPU and in torch.
// The sums run in double: a float sum over thousands of elements carries an
// absolute error that log_softmax's dx = dy - exp(y) sum shows wherever the
// sum is small against its terms (as in host_kernels.cpp's rows).
template <class T, bool BACKWARD>
void lanes(const SoftmaxArgs& a, std::int64_t r, std::int64_t i0, int n) {
  const T* x = static_cast<const T*>(a.x) + r * a.x_stride + i0;
  const T* dy = BACKWARD ? static_cast<const T*>(a.dy) + r * a.dy_stride + i0 : nullptr;
  T* out = static_cast<T*>(a.out) + r * a.out_stride + i0;
  float m[kInterleavedLanes];
  double s[kInterleavedLanes];
  std::fill_n(s, n, 0.0);
  if constexpr (BACKWARD) {
    for (std::int64_t c = 0; c < a.cols; ++c) {
      const T* yc = x + c * a.x_col_stride;
      const T* gc = dy + c * a.dy_col_stride;
      for (int j = 0; j < n; ++j) s[j] += a.log ? to_float(gc[j]) : double(to_float(gc[j])) * to_float(yc[j]);
    }
    for (std::int64_t c = 0; c < a.cols; ++c) {
      const T* yc = x + c * a.x_col_stride;
      const T* gc = dy + c * a.dy_col_stride;
      T* oc = out + c * a.out_col_stride;
      for (int j = 0; j < n; ++j) {
        const float y = to_float(yc[j]), g = to_float(gc[j]), sum = static_cast<float>(s[j]);
        oc[j] = from_float<T>(a.log ? g - std::exp(y) * sum : y * (g - sum));
      }
    }
    return;
  }
  std::fill_n(m, n, -std::numeric_limits<float>::infinity());
  for (std::int64_t c = 0; c < a.cols; ++c) {
    const T* xc = x + c * a.x_col_stride;
    for (int j = 0; j < n; ++j) {
      const float v = to_float(xc[j]);
      m[j] = v > m[j] ? v : m[j];
    }
  }
  for (std::int64_t c = 0; c < a.cols; ++c) {
    const T* xc = x + c * a.x_col_stride;
    for (int j = 0; j < n; ++j) s[j] += std::exp(to_float(xc[j]) - m[j]);
  }
  float k[kInterleavedLanes];  // log s or 1 / s
  for (int j = 0; j < n; ++j) k[j] = static_cast<float>(a.log ? std::log(s[j]) : 1.0 / s[j]);
  for (std::int64_t c = 0; c < a.cols; ++c) {
    const T* xc = x + c * a.x_col_stride;
    T* oc = out + c * a.out_col_stride;
    for (int j = 0; j < n; ++j) {
      const float v = to_float(xc[j]) - m[j];
      oc[j] = from_float<T>(a.log ? v - k[j] : std::exp(v) * k[j]);
    }
  }
}

template <class T, bool BACKWARD>
void run(ThreadPool* pool, const SoftmaxArgs& a) {
  const std::int64_t tiles = (a.inner + kInterleavedLanes - 1) / kInterleavedLanes;
  const auto task = [&](std::int64_t t) {
    const std::int64_t r = t / tiles, i0 = t % tiles * kInterleavedLanes;
    lanes<T, BACKWARD>(a, r, i0, static_cast<int>(std::min<std::int64_t>(kInterleavedLanes, a.inner - i0)));
  };
  if (pool == nullptr || pool->threads() <= 1 || a.rows * tiles == 1) {
    for (std::int64_t t = 0; t < a.rows * tiles; ++t) task(t);
    return;
  }
  pool->run(a.rows * tiles, task);
}

}  // namespace

void run_interleaved(ThreadPool* pool, const SoftmaxArgs& a, DType dtype, bool backward) {
  with_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    backward ? run<T, true>(pool, a) : run<T, false>(pool, a);
  });
}

}  // namespace duet::host
