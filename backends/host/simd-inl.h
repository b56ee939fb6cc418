// Per-target SIMD pieces the host backend's kernels share (Highway's "-inl"
// convention: included by every file that runs hwy/foreach_target.h, after
// hwy/highway.h, once for each target it compiles): the storage types and
// their vector conversions, tail loads and stores, and the exps.
#if defined(DUET_HOST_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DUET_HOST_SIMD_INL_H_
#undef DUET_HOST_SIMD_INL_H_
#else
#define DUET_HOST_SIMD_INL_H_
#endif

#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "duet/float16.hpp"

HWY_BEFORE_NAMESPACE();
namespace duet::host::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Lanes of the widest vector any target has: the size of a tail's buffer.
constexpr std::size_t kMaxFloatLanes = HWY_MAX_BYTES / sizeof(float);

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Storage types: float, IEEE half (f16) and bfloat16, as raw 16-bit words.
struct F32 {
  using T = float;
};
struct F16 {
  using T = std::uint16_t;
};
struct BF16 {
  using T = std::uint16_t;
};

// Targets without F16C (or NEON's conversions), where Highway's emulated
// f16 conversions lose NaN (it becomes a finite value): f16 goes lane by
// lane through duet's scalar conversions there.
#undef DUET_EMULATED_F16
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX2) || \
    !(HWY_ARCH_X86 || HWY_ARCH_ARM)
#define DUET_EMULATED_F16 1
#else
#define DUET_EMULATED_F16 0
#endif

template <class E>
HWY_INLINE VF LoadFloats(DF d, const typename E::T* p) {
  if constexpr (std::is_same_v<E, F32>) {
    return hn::LoadU(d, p);
  } else if constexpr (std::is_same_v<E, F16>) {
#if DUET_EMULATED_F16
    HWY_ALIGN float buf[kMaxFloatLanes];
    for (std::size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = f16_to_float(p[i]);
    return hn::Load(d, buf);
#else
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
#endif
  } else {
    // bf16 -> f32 is the 16 bits moved to the top of the word.
    const hn::Rebind<std::uint16_t, DF> d16;
    const hn::RebindToUnsigned<DF> du;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
  }
}

// `stream`: a non-temporal store to a `p` CanStream allows (f32 only), for
// outputs too large to stay in cache: it spares the read for ownership.
template <class E>
HWY_INLINE void StoreFloats(DF d, VF v, typename E::T* p, bool stream = false) {
  if constexpr (std::is_same_v<E, F32>) {
    if (stream)
      hn::Stream(v, d, p);
    else
      hn::StoreU(v, d, p);
  } else if constexpr (std::is_same_v<E, F16>) {
#if DUET_EMULATED_F16
    HWY_ALIGN float buf[kMaxFloatLanes];
    hn::Store(v, d, buf);
    for (std::size_t i = 0; i < hn::Lanes(d); ++i) p[i] = float_to_f16(buf[i]);
#else
    const hn::Rebind<hwy::float16_t, DF> dh;
    if (stream)
      hn::Stream(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
    else
      hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
#endif
  } else {
    // Round to nearest even, as float_to_bf16 and the GPU do; NaN stays a
    // (quiet) NaN.
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<std::uint16_t, DF> d16;
    const auto bits = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(lsb, hn::Set(du, 0x7fffu))));
    const auto quiet_nan = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du, 0x40u));
    const auto word = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, word)), d16, p);
  }
}

template <class E>
float ToFloat(typename E::T v) {
  if constexpr (std::is_same_v<E, F32>) return v;
  else if constexpr (std::is_same_v<E, F16>) return f16_to_float(v);
  else return bf16_to_float(v);
}
template <class E>
typename E::T FromFloat(float v) {
  if constexpr (std::is_same_v<E, F32>) return v;
  else if constexpr (std::is_same_v<E, F16>) return float_to_f16(v);
  else return float_to_bf16(v);
}

// The last `count` (< one vector) elements: loaded through a buffer padded
// with `pad`, and stored back through one.
template <class E>
HWY_INLINE VF LoadTail(DF d, const typename E::T* p, std::int64_t count, float pad) {
  HWY_ALIGN float buf[kMaxFloatLanes];
  for (std::size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = std::int64_t(i) < count ? ToFloat<E>(p[i]) : pad;
  return hn::Load(d, buf);
}
template <class E>
HWY_INLINE void StoreTail(DF d, VF v, typename E::T* p, std::int64_t count) {
  HWY_ALIGN float buf[kMaxFloatLanes];
  hn::Store(v, d, buf);
  for (std::int64_t i = 0; i < count; ++i) p[i] = FromFloat<E>(buf[i]);
}

// The largest lane of v. Highway 1.0's MaxOfLanes on EMU128 starts from the
// lowest finite float, so there a vector of -inf gives -FLT_MAX, which
// callers would take for a finite max; that answer is checked lane by lane.
// A NaN lane may or may not show, as with Max.
HWY_INLINE float MaxLane(DF d, VF v) {
  const float m = hn::GetLane(hn::MaxOfLanes(d, v));
  if (m != std::numeric_limits<float>::lowest()) return m;
  HWY_ALIGN float lanes[kMaxFloatLanes];
  hn::Store(v, d, lanes);
  float largest = -HUGE_VALF;
  for (std::size_t i = 0; i < hn::Lanes(d); ++i) largest = lanes[i] > largest ? lanes[i] : largest;
  return largest;
}

// 2^f on [-1/2, 1/2] by a minimax polynomial: degree 5 (relative error
// 1.6e-7) for f32 results, degree 4 (3.7e-6, a hundredth of f16's half step
// and less of bf16's) for results rounded to 16 bits. The constant terms
// are exactly 1, so exp(0) is exactly 1: a row's max contributes exactly 1
// to its sum, and a row of one element (or of equal elements) gives softmax
// 1 (1/N) and log_softmax 0 (-log N) as torch does.
template <class E>
HWY_INLINE VF Exp2Fraction(DF d, VF f) {
  VF p;
  if constexpr (std::is_same_v<E, F32>) {
    p = hn::Set(d, 1.327647129073739e-3f);
    p = hn::MulAdd(p, f, hn::Set(d, 9.675541892647743e-3f));
    p = hn::MulAdd(p, f, hn::Set(d, 5.550713092088699e-2f));
    p = hn::MulAdd(p, f, hn::Set(d, 2.4022120237350464e-1f));
    p = hn::MulAdd(p, f, hn::Set(d, 6.931469440460205e-1f));
    p = hn::MulAdd(p, f, hn::Set(d, 1.0f));
  } else {
    p = hn::Set(d, 9.570102207362652e-3f);
    p = hn::MulAdd(p, f, hn::Set(d, 5.591786280274391e-2f));
    p = hn::MulAdd(p, f, hn::Set(d, 2.40247443318367e-1f));
    p = hn::MulAdd(p, f, hn::Set(d, 6.931217908859253e-1f));
    p = hn::MulAdd(p, f, hn::Set(d, 1.0f));
  }
  return p;
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// 2^t for t already clamped to the range its caller allows, on AVX-512:
// 2^(t - round(t)) by the polynomial, scaled by 2^round(t) in one
// instruction (vscalefps), which underflows gradually to 0.
template <class E>
HWY_INLINE VF Exp2Clamped(DF d, VF t) {
  const VF whole = hn::Round(t);
  const VF p = Exp2Fraction<E>(d, hn::Sub(t, whole));
  return VF{_mm512_scalef_ps(p.raw, whole.raw)};
}
#endif

// exp(x) * 2^bias for x <= 0 (softmax's x - max; -inf gives 0) and
// bias <= 0, as 2^round(t) * 2^(t - round(t)) with t = x log2(e) + bias.
// NaN stays NaN: the forward finds a row's NaN in its sum that way.
// - AVX-512 scales by 2^round(t) in one instruction (vscalefps). t is
//   clamped at -126 first and the result set to 0 below it, as elsewhere:
//   a result that underflows (the old clamp at -150, which every masked
//   -inf reached) costs the core a microcode assist, and a quarter of a
//   row masked made the host's masked softmax 9x slower than no mask
//   (bench/NOTES.md v58). vmaxps returns its second operand, t, when t is
//   NaN, and the select keeps it.
// - Elsewhere the low bits of t + 1.5 * 2^23 + 127 are round(t) + 127, so
//   shifted into the exponent field they are 2^round(t); below t = -126,
//   where that would leave the normal range, the result is 0 (the select
//   keeps NaN).
template <class E = F32>
HWY_INLINE VF ExpNonPositive(DF d, VF x, VF bias) {
  const VF t = hn::MulAdd(x, hn::Set(d, 1.44269504088896341f), bias);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  const VF lowest = hn::Set(d, -126.0f);
  return hn::IfThenZeroElse(hn::Lt(t, lowest), Exp2Clamped<E>(d, hn::Max(lowest, t)));
#else
  const hn::RebindToUnsigned<DF> du;
  const VF shifter = hn::Set(d, 12582912.0f + 127.0f);
  const VF k = hn::Add(t, shifter);
  const VF p = Exp2Fraction<E>(d, hn::Sub(t, hn::Sub(k, shifter)));
  const VF scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(du, k)));
  return hn::IfThenZeroElse(hn::Lt(t, hn::Set(d, -126.0f)), hn::Mul(p, scale));
#endif
}
template <class E = F32>
HWY_INLINE VF ExpNonPositive(DF d, VF x) {
  return ExpNonPositive<E>(d, x, hn::Zero(d));
}

// exp(x) for any x, with the edge cases of expf: NaN stays NaN, x > 88.72
// is +inf, and very negative x is 0. AVX-512 clamps t to [-150, 150] (a
// NaN passes both clamps: vmaxps and vminps return their second operand,
// t, when it is NaN) and scales as ExpNonPositive does; elsewhere
// Highway's Exp, exact only on its valid range and 0 for NaN, is corrected
// by two selects.
HWY_INLINE VF ExpFull(DF d, VF v) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  const VF t = hn::Mul(v, hn::Set(d, 1.44269504088896341f));
  return Exp2Clamped<F32>(d, hn::Min(hn::Set(d, 150.0f), hn::Max(hn::Set(d, -150.0f), t)));
#else
  const VF e = hn::IfThenElse(hn::Gt(v, hn::Set(d, 88.72283935546875f)), hn::Set(d, HUGE_VALF), hn::Exp(d, v));
  return hn::IfThenElse(hn::IsNaN(v), v, e);
#endif
}

}  // namespace duet::host::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // DUET_HOST_SIMD_INL_H_
