#include "host/host_interleaved.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "duet/float16.hpp"

namespace duet::host {
namespace {

template <DType D> struct Storage;
template <> struct Storage<DType::f32> {
  using type = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};
template <> struct Storage<DType::f16> {
  using type = std::uint16_t;
  static float load(std::uint16_t v) { return f16_to_float(v); }
  static std::uint16_t store(float v) { return float_to_f16(v); }
};
template <> struct Storage<DType::bf16> {
  using type = std::uint16_t;
  static float load(std::uint16_t v) { return bf16_to_float(v); }
  static std::uint16_t store(float v) { return float_to_bf16(v); }
};

// Rows [i0, i0 + n) of outer row r: three walks over their elements (max,
// sum, write; backward: sum, write), n lanes a step. The max skips NaN, the
// sum does not, so a NaN makes its row NaN, as on the GPU and in torch.
template <DType D, bool BACKWARD>
void lanes(const SoftmaxArgs& a, std::int64_t r, std::int64_t i0, int n) {
  using S = Storage<D>;
  using T = typename S::type;
  const T* x = static_cast<const T*>(a.x) + r * a.x_stride + i0;
  const T* dy = BACKWARD ? static_cast<const T*>(a.dy) + r * a.dy_stride + i0 : nullptr;
  T* out = static_cast<T*>(a.out) + r * a.out_stride + i0;
  float m[kInterleavedLanes], s[kInterleavedLanes];
  std::fill_n(s, n, 0.0f);
  if constexpr (BACKWARD) {
    for (std::int64_t c = 0; c < a.cols; ++c) {
      const T* yc = x + c * a.x_col_stride;
      const T* gc = dy + c * a.dy_col_stride;
      for (int j = 0; j < n; ++j) s[j] += a.log ? S::load(gc[j]) : S::load(gc[j]) * S::load(yc[j]);
    }
    for (std::int64_t c = 0; c < a.cols; ++c) {
      const T* yc = x + c * a.x_col_stride;
      const T* gc = dy + c * a.dy_col_stride;
      T* oc = out + c * a.out_col_stride;
      for (int j = 0; j < n; ++j) {
        const float y = S::load(yc[j]), g = S::load(gc[j]);
        oc[j] = S::store(a.log ? g - std::exp(y) * s[j] : y * (g - s[j]));
      }
    }
    return;
  }
  std::fill_n(m, n, -std::numeric_limits<float>::infinity());
  for (std::int64_t c = 0; c < a.cols; ++c) {
    const T* xc = x + c * a.x_col_stride;
    for (int j = 0; j < n; ++j) {
      const float v = S::load(xc[j]);
      m[j] = v > m[j] ? v : m[j];
    }
  }
  for (std::int64_t c = 0; c < a.cols; ++c) {
    const T* xc = x + c * a.x_col_stride;
    for (int j = 0; j < n; ++j) s[j] += std::exp(S::load(xc[j]) - m[j]);
  }
  for (int j = 0; j < n; ++j) s[j] = a.log ? std::log(s[j]) : 1.0f / s[j];
  for (std::int64_t c = 0; c < a.cols; ++c) {
    const T* xc = x + c * a.x_col_stride;
    T* oc = out + c * a.out_col_stride;
    for (int j = 0; j < n; ++j) {
      const float v = S::load(xc[j]) - m[j];
      oc[j] = S::store(a.log ? v - s[j] : std::exp(v) * s[j]);
    }
  }
}

template <DType D, bool BACKWARD>
void run(ThreadPool* pool, const SoftmaxArgs& a) {
  const std::int64_t tiles = (a.inner + kInterleavedLanes - 1) / kInterleavedLanes;
  const auto task = [&](std::int64_t t) {
    const std::int64_t r = t / tiles, i0 = t % tiles * kInterleavedLanes;
    lanes<D, BACKWARD>(a, r, i0, static_cast<int>(std::min<std::int64_t>(kInterleavedLanes, a.inner - i0)));
  };
  if (pool == nullptr || pool->threads() <= 1 || a.rows * tiles == 1) {
    for (std::int64_t t = 0; t < a.rows * tiles; ++t) task(t);
    return;
  }
  pool->run(a.rows * tiles, task);
}

}  // namespace

void run_interleaved(ThreadPool* pool, const SoftmaxArgs& a, DType dtype, bool backward) {
  switch (dtype) {
    case DType::f32: return backward ? run<DType::f32, true>(pool, a) : run<DType::f32, false>(pool, a);
    case DType::f16: return backward ? run<DType::f16, true>(pool, a) : run<DType::f16, false>(pool, a);
    case DType::bf16: return backward ? run<DType::bf16, true>(pool, a) : run<DType::bf16, false>(pool, a);
  }
}

}  // namespace duet::host
