// The float32 chunk primitives (float_chunks.hpp), once per SIMD target
// (Highway's foreach_target re-includes this file for each), and their
// run-time dispatch.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/float_chunks.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h

#include <hwy/highway.h>

#include <cmath>
#include <cstdint>

#include "host/float_chunks.hpp"
#include "host/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace duet::host::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst = scale * src (kAdd: dst += scale * src).
template <class E, bool kAdd = false>
void LoadChunk(const void* src, std::int64_t n, float* dst, float scale) {
  const DF d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const auto* p = static_cast<const typename E::T*>(src);
  const VF s = hn::Set(d, scale);
  auto put = [&](VF v, float* at) {
    if constexpr (kAdd)
      hn::StoreU(hn::MulAdd(v, s, hn::LoadU(d, at)), d, at);
    else
      hn::StoreU(hn::Mul(v, s), d, at);
  };
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) put(LoadFloats<E>(d, p + i), dst + i);
  if (i < n) {
    HWY_ALIGN float buf[kMaxFloatLanes] = {};
    if constexpr (kAdd)
      for (std::int64_t k = 0; k < n - i; ++k) buf[k] = dst[i + k];
    put(LoadTail<E>(d, p + i, n - i, 0.0f), buf);
    for (std::int64_t k = 0; k < n - i; ++k) dst[i + k] = buf[k];
  }
}

void MaskChunk(const std::uint8_t* masked, std::int64_t n, float* v) {
  const DF d;
  const hn::Rebind<std::uint8_t, DF> d8;
  const hn::RebindToUnsigned<DF> du;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const VF neg_inf = hn::Set(d, -HUGE_VALF);
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto is_masked = hn::RebindMask(d, hn::Ne(hn::PromoteTo(du, hn::LoadU(d8, masked + i)), hn::Zero(du)));
    hn::StoreU(hn::IfThenElse(is_masked, neg_inf, hn::LoadU(d, v + i)), d, v + i);
  }
  for (; i < n; ++i)
    if (masked[i] != 0) v[i] = -HUGE_VALF;
}

template <class E>
void StoreChunk(const float* src, std::int64_t n, void* dst) {
  const DF d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  auto* p = static_cast<typename E::T*>(dst);
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) StoreFloats<E>(d, hn::LoadU(d, src + i), p + i);
  if (i < n) StoreTail<E>(d, LoadTail<F32>(d, src + i, n - i, 0.0f), p + i, n - i);
}

void LoadAny(DType dtype, const void* src, std::int64_t n, float* dst, float scale) {
  switch (dtype) {
    case DType::f16: return LoadChunk<F16>(src, n, dst, scale);
    case DType::bf16: return LoadChunk<BF16>(src, n, dst, scale);
    default: return LoadChunk<F32>(src, n, dst, scale);
  }
}
void AddAny(DType dtype, const void* src, std::int64_t n, float* v) {
  switch (dtype) {
    case DType::f16: return LoadChunk<F16, true>(src, n, v, 1.0f);
    case DType::bf16: return LoadChunk<BF16, true>(src, n, v, 1.0f);
    default: return LoadChunk<F32, true>(src, n, v, 1.0f);
  }
}
void StoreAny(DType dtype, const float* src, std::int64_t n, void* dst) {
  switch (dtype) {
    case DType::f16: return StoreChunk<F16>(src, n, dst);
    case DType::bf16: return StoreChunk<BF16>(src, n, dst);
    default: return StoreChunk<F32>(src, n, dst);
  }
}

float MaxFloats(const float* v, std::int64_t n) {
  const DF d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  VF m0 = hn::Set(d, -HUGE_VALF), m1 = m0;
  std::int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    m0 = hn::Max(m0, hn::LoadU(d, v + i));
    m1 = hn::Max(m1, hn::LoadU(d, v + i + lanes));
  }
  for (; i + lanes <= n; i += lanes) m0 = hn::Max(m0, hn::LoadU(d, v + i));
  if (i < n) m1 = hn::Max(m1, LoadTail<F32>(d, v + i, n - i, -HUGE_VALF));
  return MaxLane(d, hn::Max(m0, m1));
}

double ExpAffine(float* v, std::int64_t n, float sub, float mul, float add) {
  const DF d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const VF s = hn::Set(d, sub), m = hn::Set(d, mul), a = hn::Set(d, add);
  VF sum0 = hn::Zero(d), sum1 = sum0;
  std::int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const VF e0 = ExpNonPositive<F32>(d, hn::Sub(hn::LoadU(d, v + i), s));
    const VF e1 = ExpNonPositive<F32>(d, hn::Sub(hn::LoadU(d, v + i + lanes), s));
    sum0 = hn::Add(sum0, e0);
    sum1 = hn::Add(sum1, e1);
    hn::StoreU(hn::MulAdd(e0, m, a), d, v + i);
    hn::StoreU(hn::MulAdd(e1, m, a), d, v + i + lanes);
  }
  for (; i + lanes <= n; i += lanes) {
    const VF e = ExpNonPositive<F32>(d, hn::Sub(hn::LoadU(d, v + i), s));
    sum0 = hn::Add(sum0, e);
    hn::StoreU(hn::MulAdd(e, m, a), d, v + i);
  }
  if (i < n) {
    const VF e = ExpNonPositive<F32>(d, hn::Sub(LoadTail<F32>(d, v + i, n - i, -HUGE_VALF), s));
    sum1 = hn::Add(sum1, e);
    StoreTail<F32>(d, hn::MulAdd(e, m, a), v + i, n - i);
  }
  // The lanes added in double: a lane holds at most n / lanes terms.
  HWY_ALIGN float lane_sums[2 * kMaxFloatLanes];
  hn::Store(sum0, d, lane_sums);
  hn::Store(sum1, d, lane_sums + lanes);
  double sum = 0.0;
  for (std::int64_t k = 0; k < 2 * lanes; ++k) sum += double(lane_sums[k]);
  return sum;
}

}  // namespace duet::host::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace duet::host {

HWY_EXPORT(LoadAny);
HWY_EXPORT(AddAny);
HWY_EXPORT(MaskChunk);
HWY_EXPORT(StoreAny);
HWY_EXPORT(MaxFloats);
HWY_EXPORT(ExpAffine);

void load_floats(DType dtype, const void* src, std::int64_t n, float* dst, float scale) {
  HWY_DYNAMIC_DISPATCH(LoadAny)(dtype, src, n, dst, scale);
}
void add_floats(DType dtype, const void* src, std::int64_t n, float* v) {
  HWY_DYNAMIC_DISPATCH(AddAny)(dtype, src, n, v);
}
void mask_floats(const std::uint8_t* masked, std::int64_t n, float* v) {
  HWY_DYNAMIC_DISPATCH(MaskChunk)(masked, n, v);
}
void store_floats(DType dtype, const float* src, std::int64_t n, void* dst) {
  HWY_DYNAMIC_DISPATCH(StoreAny)(dtype, src, n, dst);
}
float max_floats(const float* v, std::int64_t n) { return HWY_DYNAMIC_DISPATCH(MaxFloats)(v, n); }
double exp_affine(float* v, std::int64_t n, float sub, float mul, float add) {
  return HWY_DYNAMIC_DISPATCH(ExpAffine)(v, n, sub, mul, add);
}

}  // namespace duet::host
#endif  // HWY_ONCE
