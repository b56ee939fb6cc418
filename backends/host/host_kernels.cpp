// The host row kernels, once per SIMD target (Highway's foreach_target
// re-includes this file for each), and their run-time dispatch.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/host_kernels.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "host/host_kernels.hpp"
#include "host/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace duet::host::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements per chunk of the first pass: 8 KiB of f32, read twice from L1.
constexpr std::int64_t kChunk = 2048;

// Two vectors of 2 * Lanes elements. f32 and f16 in order (a the first
// Lanes, b the next); bf16 as 32-bit words of two elements each, a the
// elements in the words' low halves and b those in the high halves: one
// shift and one and for both vectors, where widening costs two moves and two
// shifts. Store2 puts each element back in the half it came from, and
// everything between is per element, so the order never shows outside (the
// scratch holds it, written and read in the same pairs).
template <class E>
HWY_INLINE void Load2(DF d, const typename E::T* p, VF& a, VF& b) {
  if constexpr (std::is_same_v<E, BF16>) {
    const hn::RebindToUnsigned<DF> du;
    const auto w = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(p));
    a = hn::BitCast(d, hn::ShiftLeft<16>(w));
    b = hn::BitCast(d, hn::And(w, hn::Set(du, 0xffff0000u)));
  } else {
    a = LoadFloats<E>(d, p);
    b = LoadFloats<E>(d, p + hn::Lanes(d));
  }
}

// The bits of v rounded to bf16 at their top (nearest even); with `kNaN`, a
// NaN made quiet instead (rounding could carry a NaN with a full payload
// into the sign). Without it a NaN must be a quiet one with a clear low half
// (the canonical NaN the forward writes).
template <bool kNaN>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> RoundToBf16Bits(VF v) {
  const hn::RebindToUnsigned<DF> du;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::Add(bits, hn::Add(lsb, hn::Set(du, 0x7fffu)));
  if constexpr (!kNaN) return rounded;
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(bits, hn::Set(du, 0x400000u)), rounded);
}

// Stores what Load2 loaded; `stream` as StoreFloats, `kNaN` as
// RoundToBf16Bits (bf16 only).
template <class E, bool kNaN = true>
HWY_INLINE void Store2(DF d, VF a, VF b, typename E::T* p, bool stream = false) {
  if constexpr (std::is_same_v<E, BF16>) {
    const hn::RebindToUnsigned<DF> du;
    const auto word = hn::Or(hn::ShiftRight<16>(RoundToBf16Bits<kNaN>(a)),
                             hn::And(RoundToBf16Bits<kNaN>(b), hn::Set(du, 0xffff0000u)));
    if (stream)
      hn::Stream(word, du, reinterpret_cast<std::uint32_t*>(p));
    else
      hn::StoreU(word, du, reinterpret_cast<std::uint32_t*>(p));
  } else {
    StoreFloats<E>(d, a, p, stream);
    StoreFloats<E>(d, b, p + hn::Lanes(d), stream);
  }
}

// Whether non-temporal stores go to `out`: outputs aligned to a float
// vector (so every pair's store is whole and aligned). They spare the read
// for ownership of each line, which memcpy of the same bytes does not pay
// either.
template <class E>
HWY_INLINE bool CanStream(DF d, const typename E::T* out) {
  return reinterpret_cast<std::uintptr_t>(out) % (hn::Lanes(d) * sizeof(float)) == 0;
}

// Prefetches one pair's worth of elements (2 * Lanes) at p into L1.
template <class E>
HWY_INLINE void PrefetchPair(DF d, const typename E::T* p) {
  const std::size_t bytes = 2 * hn::Lanes(d) * sizeof(typename E::T);
  for (std::size_t off = 0; off < bytes; off += 64) hwy::Prefetch(reinterpret_cast<const char*>(p) + off);
}

// The max of len (<= kChunk) elements; NaN may or may not show in it
// (Max's NaN rule differs between targets), which the sum settles.
template <class E>
HWY_INLINE float ChunkMax(DF d, const typename E::T* p, std::int64_t len) {
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const float neg_inf = -HUGE_VALF;
  VF max0 = hn::Set(d, neg_inf), max1 = max0, max2 = max0, max3 = max0;
  std::int64_t i = 0;
  for (; i + 4 * lanes <= len; i += 4 * lanes) {
    VF a, b, c, e;
    Load2<E>(d, p + i, a, b);
    Load2<E>(d, p + i + 2 * lanes, c, e);
    max0 = hn::Max(max0, a);
    max1 = hn::Max(max1, b);
    max2 = hn::Max(max2, c);
    max3 = hn::Max(max3, e);
  }
  for (; i + lanes <= len; i += lanes) max0 = hn::Max(max0, LoadFloats<E>(d, p + i));
  if (i < len) max1 = hn::Max(max1, LoadTail<E>(d, p + i, len - i, neg_inf));
  return MaxLane(d, hn::Max(hn::Max(max0, max1), hn::Max(max2, max3)));
}

template <class E>
bool HasNaN(const typename E::T* p, std::int64_t len) {
  for (std::int64_t i = 0; i < len; ++i)
    if (std::isnan(ToFloat<E>(p[i]))) return true;
  return false;
}

// The sum of exp(x - m) over len (<= kChunk) elements, NaN if one is; with
// `e`, the exps kept there too, in Load2's pairs (ScaleChunk reads them so).
template <class E>
HWY_INLINE float ChunkExpSum(DF d, const typename E::T* p, std::int64_t len, VF m, float* e) {
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  VF sum0 = hn::Zero(d), sum1 = sum0;
  std::int64_t i = 0;
  for (; i + 2 * lanes <= len; i += 2 * lanes) {
    PrefetchPair<E>(d, p + i + kChunk);  // the next chunk (or row), for ChunkMax
    VF a, b;
    Load2<E>(d, p + i, a, b);
    a = ExpNonPositive<E>(d, hn::Sub(a, m));
    b = ExpNonPositive<E>(d, hn::Sub(b, m));
    if (e) hn::StoreU(a, d, e + i), hn::StoreU(b, d, e + i + lanes);
    sum0 = hn::Add(sum0, a);
    sum1 = hn::Add(sum1, b);
  }
  for (; i + lanes <= len; i += lanes) {
    const VF a = ExpNonPositive<E>(d, hn::Sub(LoadFloats<E>(d, p + i), m));
    if (e) hn::StoreU(a, d, e + i);
    sum0 = hn::Add(sum0, a);
  }
  if (i < len) {
    const VF a = ExpNonPositive<E>(d, hn::Sub(LoadTail<E>(d, p + i, len - i, -HUGE_VALF), m));
    if (e) hn::StoreU(a, d, e + i);  // the scratch has a vector to spare
    sum0 = hn::Add(sum0, a);
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(sum0, sum1)));
}

// Forward first pass over n elements: chunk by chunk, the chunk's max, then
// its sum of exp(x - max) while it is in L1. With `exps`, also keeps
// exp(x - chunk max) there and each chunk's max in chunk_max, so the second
// pass scales instead of calling exp again.
template <class E>
RowPartial ForwardPartial(const typename E::T* x, std::int64_t n, float* exps = nullptr, float* chunk_max_out = nullptr) {
  const DF d;
  RowPartial acc;
  for (std::int64_t c = 0; c < n; c += kChunk) {
    const typename E::T* p = x + c;
    const std::int64_t len = std::min(kChunk, n - c);
    const float chunk_max = ChunkMax<E>(d, p, len);
    if (chunk_max_out) chunk_max_out[c / kChunk] = chunk_max;
    if (chunk_max == -HUGE_VALF) {
      // Contributes nothing, unless Max passed over a NaN.
      if (HasNaN<E>(p, len)) acc.nan = true;
      if (acc.nan) return acc;
      continue;
    }
    if (std::isnan(chunk_max)) {
      acc.nan = true;
      return acc;
    }
    if (chunk_max == HUGE_VALF) {
      acc.max = HUGE_VALF;  // +inf makes the row NaN
      return acc;
    }
    const float chunk_sum = ChunkExpSum<E>(d, p, len, hn::Set(d, chunk_max), exps ? exps + c : nullptr);
    if (std::isnan(chunk_sum)) {
      acc.nan = true;  // the whole row is NaN: nothing more to learn
      return acc;
    }
    acc = combine(acc, RowPartial{chunk_max, double(chunk_sum), false});
  }
  return acc;
}

// Backward first pass: the sum of dy * y (softmax) or of dy (log_softmax),
// each pair of vectors' terms added in float, then accumulated in double
// lanes. The terms cancel (dy has either sign), so the sum can be far
// smaller than its terms, and dx = dy - exp(y) * sum (log_softmax) carries
// the sum's absolute error: with float accumulators over 64 vectors, rows
// of 2^20 whose sum came out small missed the float64 reference by 1.2e-5
// of their largest dx, past the test's tolerance in about one run of 15.
template <class E>
RowPartial BackwardPartial(const typename E::T* y, const typename E::T* dy, std::int64_t n, bool log) {
  const DF d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  auto term = [&](VF yv, VF gv) { return log ? gv : hn::Mul(gv, yv); };
  RowPartial acc;
  acc.max = 0.0f;
#if HWY_TARGET == HWY_SCALAR
  double total = 0.0;
  auto add = [&](VF v) { total += double(hn::GetLane(v)); };
#else
  const hn::Half<DF> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  auto lo = hn::Zero(dd), hi = lo;
  auto add = [&](VF v) {
    lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, v)));
    hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, v)));
  };
#endif
  std::int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    PrefetchPair<E>(d, y + i + kChunk);
    PrefetchPair<E>(d, dy + i + kChunk);
    VF ya, yb, ga, gb;
    Load2<E>(d, y + i, ya, yb);
    Load2<E>(d, dy + i, ga, gb);
    add(hn::Add(term(ya, ga), term(yb, gb)));
  }
  for (; i + lanes <= n; i += lanes) add(term(LoadFloats<E>(d, y + i), LoadFloats<E>(d, dy + i)));
  if (n > i) add(term(LoadTail<E>(d, y + i, n - i, 0.0f), LoadTail<E>(d, dy + i, n - i, 0.0f)));
#if HWY_TARGET == HWY_SCALAR
  acc.sum = total;
#else
  acc.sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(lo, hi)));
#endif
  return acc;
}

// The second pass over n elements, `f` turning one vector of inputs (and of
// dy, backward) into one of outputs. In place is safe: each vector is read
// before the same positions are written. `stream` asks for non-temporal
// stores, made where `out` is aligned; `kNaN` as Store2.
template <class E, bool kNaN, class F>
HWY_INLINE void WritePass(const typename E::T* x, const typename E::T* dy, typename E::T* out, std::int64_t n,
                          const F& f, bool stream = false) {
  const DF d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  stream = stream && CanStream<E>(d, out);
  std::int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    PrefetchPair<E>(d, x + i + kChunk);
    if (dy) PrefetchPair<E>(d, dy + i + kChunk);
    VF a, b, ga, gb;
    Load2<E>(d, x + i, a, b);
    if (dy) Load2<E>(d, dy + i, ga, gb);
    else ga = a, gb = b;
    Store2<E, kNaN>(d, f(a, ga), f(b, gb), out + i, stream);
  }
  for (; i + lanes <= n; i += lanes) {
    const VF a = LoadFloats<E>(d, x + i);
    StoreFloats<E>(d, f(a, dy ? LoadFloats<E>(d, dy + i) : a), out + i, stream);
  }
  if (i < n) {
    const VF a = LoadTail<E>(d, x + i, n - i, 0.0f);
    StoreTail<E>(d, f(a, dy ? LoadTail<E>(d, dy + i, n - i, 0.0f) : a), out + i, n - i);
  }
}

template <class E>
void ForwardWrite(const typename E::T* x, typename E::T* out, std::int64_t n, const RowPartial& row, bool log,
                  bool stream) {
  const DF d;
  // NaN anywhere, +inf (inf - inf) or a row all -inf: the row is NaN (the
  // canonical quiet NaN, which bf16's rounding without a NaN test keeps).
  if (row.nan || !std::isfinite(row.max)) {
    const VF nan = hn::Set(d, std::numeric_limits<float>::quiet_NaN());
    return WritePass<E, false>(x, nullptr, out, n, [&](VF, VF) { return nan; }, stream);
  }
  const VF m = hn::Set(d, row.max);
  if (log) {
    const VF log_sum = hn::Set(d, static_cast<float>(std::log(row.sum)));
    WritePass<E, false>(x, nullptr, out, n, [&](VF v, VF) { return hn::Sub(hn::Sub(v, m), log_sum); }, stream);
  } else {
    // exp(x - max) / sum as 2^((x - max) log2(e) - log2(sum)).
    const VF bias = hn::Set(d, static_cast<float>(-std::log2(row.sum)));
    WritePass<E, false>(x, nullptr, out, n, [&](VF v, VF) { return ExpNonPositive<E>(d, hn::Sub(v, m), bias); }, stream);
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// CPUs with AVX512-BF16 (Zen 4 and later, Cooper Lake, Sapphire Rapids)
// round two f32 vectors to bf16 in one instruction (vcvtne2ps2bf16, round to
// nearest even, NaN kept quiet, subnormal results flushed to zero), which
// Highway 1.0 does not reach: where the CPU has it, a bf16 chunk's scale
// pass runs here, over whole pairs in Load2's order (even elements in the
// first vector, odd in the second), interleaved back by one word permute.
// Returns the elements done (a multiple of a pair).
__attribute__((target("avx,avx2,bmi,bmi2,fma,f16c,avx512f,avx512vl,avx512dq,avx512bw,avx512bf16"))) HWY_NOINLINE
    std::int64_t
    ScalePairsToBf16(const float* src, std::uint16_t* out, std::int64_t len, float scale, bool stream) {
  alignas(64) static constexpr std::uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                                21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                                                11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(kInterleave);
  const __m512 s = _mm512_set1_ps(scale);
  std::int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    const __m512 even = _mm512_mul_ps(_mm512_loadu_ps(src + i), s);
    const __m512 odd = _mm512_mul_ps(_mm512_loadu_ps(src + i + 16), s);
    const __m512i words = _mm512_permutexvar_epi16(order, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even)));
    if (stream)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), words);
    else
      _mm512_storeu_si512(out + i, words);
  }
  return i;
}
#endif

// out = src * scale over len (<= kChunk) floats of the scratch, as
// ChunkExpSum wrote them.
template <class E>
void ScaleChunk(const float* src, typename E::T* out, std::int64_t len, VF scale, bool stream) {
  const DF d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  stream = stream && CanStream<E>(d, out);
  std::int64_t i = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (std::is_same_v<E, BF16>) {
    static const bool has_bf16 = __builtin_cpu_supports("avx512bf16");
    if (has_bf16) i = ScalePairsToBf16(src, out, len, hn::GetLane(scale), stream);
  }
#endif
  for (; i + 2 * lanes <= len; i += 2 * lanes)
    Store2<E, false>(d, hn::Mul(hn::LoadU(d, src + i), scale), hn::Mul(hn::LoadU(d, src + i + lanes), scale), out + i,
                     stream);
  for (; i + lanes <= len; i += lanes)
    StoreFloats<E>(d, hn::Mul(hn::LoadU(d, src + i), scale), out + i, stream);
  if (i < len) StoreTail<E>(d, hn::Mul(LoadTail<F32>(d, src + i, len - i, 0.0f), scale), out + i, len - i);
}

// A whole softmax row through the scratch: exps kept by the first pass,
// each chunk scaled by exp(chunk max - row max) / sum by the second.
template <class E>
void ForwardRowScaled(const typename E::T* x, typename E::T* out, std::int64_t n, float* exps, bool stream) {
  float chunk_max[kMaxScratchElems / kChunk];
  const RowPartial row = ForwardPartial<E>(x, n, exps, chunk_max);
  if (row.nan || !std::isfinite(row.max)) return ForwardWrite<E>(x, out, n, row, false, stream);
  const DF d;
  for (std::int64_t c = 0; c < n; c += kChunk) {
    const std::int64_t len = std::min(kChunk, n - c);
    const float m = chunk_max[c / kChunk];
    // A chunk all -inf kept no exps: its outputs are 0. The chunk holding
    // the row's max (a short row's only chunk) needs no exp.
    const double rescale = m == row.max ? 1.0 : std::exp(double(m) - row.max);
    const VF scale = hn::Set(d, m == -HUGE_VALF ? 0.0f : static_cast<float>(rescale / row.sum));
    if (m == -HUGE_VALF) std::fill(exps + c, exps + c + len, 0.0f);
    ScaleChunk<E>(exps + c, out + c, len, scale, stream);
  }
}

// Two forward rows of at most kChunk elements, each step of one beside the
// same step of the other, so that one row's waits (the max and the sum
// across lanes, the division or log) overlap the other's loop; on a short
// row those waits take as long as its arithmetic. The outputs are those of
// the one-row path, which takes both rows where either is not finite.
template <class E>
void ForwardShortRowPair(const typename E::T* x0, typename E::T* out0, const typename E::T* x1, typename E::T* out1,
                         std::int64_t n, bool log, float* exps, bool stream) {
  const DF d;
  const float max0 = ChunkMax<E>(d, x0, n), max1 = ChunkMax<E>(d, x1, n);
  if (std::isfinite(max0) && std::isfinite(max1)) {
    // softmax keeps the exps to scale; log_softmax needs only the sums.
    float* exps0 = log ? nullptr : exps;
    float* exps1 = log ? nullptr : exps + kChunk + kMaxFloatLanes;
    const float sum0 = ChunkExpSum<E>(d, x0, n, hn::Set(d, max0), exps0);
    const float sum1 = ChunkExpSum<E>(d, x1, n, hn::Set(d, max1), exps1);
    if (!std::isnan(sum0) && !std::isnan(sum1)) {
      if (log) {
        ForwardWrite<E>(x0, out0, n, RowPartial{max0, double(sum0), false}, true, stream);
        ForwardWrite<E>(x1, out1, n, RowPartial{max1, double(sum1), false}, true, stream);
      } else {
        ScaleChunk<E>(exps0, out0, n, hn::Set(d, static_cast<float>(1.0 / double(sum0))), stream);
        ScaleChunk<E>(exps1, out1, n, hn::Set(d, static_cast<float>(1.0 / double(sum1))), stream);
      }
      return;
    }
  }
  for (const auto& [x, out] : {std::pair{x0, out0}, std::pair{x1, out1}}) {
    if (log)
      ForwardWrite<E>(x, out, n, ForwardPartial<E>(x, n), true, stream);
    else
      ForwardRowScaled<E>(x, out, n, exps, stream);
  }
}

template <class E>
void BackwardWrite(const typename E::T* y, const typename E::T* dy, typename E::T* out, std::int64_t n,
                   const RowPartial& row, bool log, bool stream) {
  const DF d;
  const VF s = hn::Set(d, static_cast<float>(row.sum));
  if (log)
    WritePass<E, true>(y, dy, out, n, [&](VF yv, VF gv) { return hn::NegMulAdd(ExpFull(d, yv), s, gv); }, stream);
  else
    WritePass<E, true>(y, dy, out, n, [&](VF yv, VF gv) { return hn::Mul(yv, hn::Sub(gv, s)); }, stream);
}

// Typed pointers to one row's elements from `begin` on.
template <class E>
struct RowPointers {
  const typename E::T* x;
  const typename E::T* dy;
  typename E::T* out;
};
template <class E>
RowPointers<E> row_pointers(const SoftmaxArgs& a, std::int64_t row, std::int64_t begin) {
  using T = typename E::T;
  return {static_cast<const T*>(a.x) + row * a.x_stride + begin,
          a.dy ? static_cast<const T*>(a.dy) + row * a.dy_stride + begin : nullptr,
          static_cast<T*>(a.out) + row * a.out_stride + begin};
}

template <class E>
RowPartial PartialOf(const SoftmaxArgs& a, bool backward, std::int64_t row, std::int64_t begin, std::int64_t end) {
  const auto p = row_pointers<E>(a, row, begin);
  return backward ? BackwardPartial<E>(p.x, p.dy, end - begin, a.log != 0) : ForwardPartial<E>(p.x, end - begin);
}
template <class E>
void WriteOf(const SoftmaxArgs& a, bool backward, std::int64_t row, std::int64_t begin, std::int64_t end,
             const RowPartial& whole, bool stream) {
  const auto p = row_pointers<E>(a, row, begin);
  if (backward)
    BackwardWrite<E>(p.x, p.dy, p.out, end - begin, whole, a.log != 0, stream);
  else
    ForwardWrite<E>(p.x, p.out, end - begin, whole, a.log != 0, stream);
}
template <class E>
void Rows(const SoftmaxArgs& a, bool backward, std::int64_t row_begin, std::int64_t row_end, bool stream,
          std::int64_t scratch_elems) {
  const bool short_forward = !backward && a.cols <= kChunk;
  const bool scaled = !backward && !a.log && a.cols <= std::min(scratch_elems, kMaxScratchElems);
  // Room for the row, or for two short rows, each with a vector to spare.
  float* exps = short_forward || scaled
                    ? thread_scratch(std::size_t(std::max(a.cols, 2 * kChunk) + 2 * kMaxFloatLanes))
                    : nullptr;
  std::int64_t r = row_begin;
  if (short_forward) {
    for (; r + 1 < row_end; r += 2) {
      const auto p0 = row_pointers<E>(a, r, 0), p1 = row_pointers<E>(a, r + 1, 0);
      ForwardShortRowPair<E>(p0.x, p0.out, p1.x, p1.out, a.cols, a.log != 0, exps, stream);
    }
  }
  for (; r < row_end; ++r) {
    if (scaled) {
      const auto p = row_pointers<E>(a, r, 0);
      ForwardRowScaled<E>(p.x, p.out, a.cols, exps, stream);
    } else {
      WriteOf<E>(a, backward, r, 0, a.cols, PartialOf<E>(a, backward, r, 0, a.cols), stream);
    }
  }
  if (stream) hwy::FlushStream();
}

// The dispatched entry points: `f` called with the storage type's tag.
template <class F>
decltype(auto) WithElement(DType dtype, const F& f) {
  switch (dtype) {
    case DType::f16: return f(F16{});
    case DType::bf16: return f(BF16{});
    default: return f(F32{});
  }
}

void RunRowsAny(const SoftmaxArgs& a, DType dtype, bool backward, std::int64_t row_begin, std::int64_t row_end,
                bool stream, std::int64_t scratch_elems) {
  WithElement(dtype, [&](auto e) { Rows<decltype(e)>(a, backward, row_begin, row_end, stream, scratch_elems); });
}
RowPartial PartialAny(const SoftmaxArgs& a, DType dtype, bool backward, std::int64_t row, std::int64_t begin,
                      std::int64_t end) {
  return WithElement(dtype, [&](auto e) { return PartialOf<decltype(e)>(a, backward, row, begin, end); });
}
void WriteAny(const SoftmaxArgs& a, DType dtype, bool backward, std::int64_t row, std::int64_t begin, std::int64_t end,
              const RowPartial& whole, bool stream) {
  WithElement(dtype, [&](auto e) {
    WriteOf<decltype(e)>(a, backward, row, begin, end, whole, stream);
    if (stream) hwy::FlushStream();
  });
}

std::int64_t CurrentTarget() { return HWY_TARGET; }
int FloatLanes() { return static_cast<int>(hn::Lanes(DF())); }

}  // namespace duet::host::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace duet::host {

HWY_EXPORT(RunRowsAny);
HWY_EXPORT(PartialAny);
HWY_EXPORT(WriteAny);
HWY_EXPORT(CurrentTarget);
HWY_EXPORT(FloatLanes);

void run_rows(const SoftmaxArgs& args, DType dtype, bool backward, std::int64_t row_begin, std::int64_t row_end,
              bool stream, std::int64_t scratch_elems) {
  HWY_DYNAMIC_DISPATCH(RunRowsAny)(args, dtype, backward, row_begin, row_end, stream, scratch_elems);
}
RowPartial row_partial(const SoftmaxArgs& args, DType dtype, bool backward, std::int64_t row, std::int64_t begin,
                       std::int64_t end) {
  return HWY_DYNAMIC_DISPATCH(PartialAny)(args, dtype, backward, row, begin, end);
}
void write_row_range(const SoftmaxArgs& args, DType dtype, bool backward, std::int64_t row, std::int64_t begin,
                     std::int64_t end, const RowPartial& whole_row, bool stream) {
  HWY_DYNAMIC_DISPATCH(WriteAny)(args, dtype, backward, row, begin, end, whole_row, stream);
}

RowPartial combine(const RowPartial& a, const RowPartial& b) {
  RowPartial r;
  r.nan = a.nan || b.nan;
  if (b.max == -HUGE_VALF) return RowPartial{a.max, a.sum, r.nan};
  if (a.max == -HUGE_VALF) return RowPartial{b.max, b.sum, r.nan};
  r.max = std::max(a.max, b.max);
  r.sum = a.sum * std::exp(double(a.max) - r.max) + b.sum * std::exp(double(b.max) - r.max);
  return r;
}

std::string simd_target_name() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(CurrentTarget)()); }
int simd_float_lanes() { return HWY_DYNAMIC_DISPATCH(FloatLanes)(); }
std::string compiled_simd_targets() {
  std::string names;
  for (int bit = 0; bit < 63; ++bit) {
    const std::int64_t target = std::int64_t(1) << bit;
    if ((HWY_TARGETS & target) == 0) continue;
    if (!names.empty()) names += ' ';
    names += hwy::TargetName(target);
  }
  return names;
}

}  // namespace duet::host
#endif  // HWY_ONCE
