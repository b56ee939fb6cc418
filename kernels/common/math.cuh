// Float32 arithmetic shared by every kernel: exp through the hardware exp2,
// online-softmax (max, sum) pairs, and the per-element formulas.
//
// Semantics follow torch.softmax / torch.log_softmax: the row maximum is
// subtracted before exp; a NaN anywhere in a row makes the row NaN; +inf in a
// row gives NaN (inf - inf); a row that is all -inf gives NaN (0/0).
#pragma once

#include <type_traits>

#include "vendor.h"

namespace duet::DUET_NS::kernels {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -__builtin_huge_valf();

// 2^x on the hardware unit (DUET_FAST_EXP2, vendor.h).
__device__ __forceinline__ float fast_exp2(float x) { return DUET_FAST_EXP2(x); }

// exp(x - m) = 2^((x - m) log2e): the subtraction first, so it is exact or
// nearly so for the values that matter (x close to m). The one-FFMA form
// fma(x, log2e, -m log2e) is an instruction shorter but rounds m log2e at the
// magnitude of m: at |m| = 1e30 that error is ~1e23 in the exponent, and at
// 1e5 already 0.5% in the result.
__device__ __forceinline__ float exp_shifted(float x, float m) { return fast_exp2((x - m) * kLog2e); }

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
  static constexpr float kIdentity = kNegInf;
};
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
  static constexpr float kIdentity = 0.0f;
};

// Online-softmax pairs: a max m and the sum s of exp(x - m) over a part of a
// row. A part with no finite value (m = -inf) holds s = 0, or NaN if it saw
// a NaN (fmaxf skips NaN, the sum does not): it passes unscaled, so -inf
// entries never make NaN by themselves (exp(-inf - -inf)) and a NaN still
// reaches the row, as in torch (GPU test "inf, -inf and NaN", row 7, holds
// the NaN in a chunk otherwise all -inf).
__device__ __forceinline__ float rescale(float s, float m, float m_new) {
  return m == kNegInf ? s : s * exp_shifted(m, m_new);
}

// Folds the pair (m1, s1) into (m0, s0): both rescaled to the larger max.
__device__ __forceinline__ void combine_pair(float& m0, float& s0, float m1, float s1) {
  const float m = fmaxf(m0, m1);
  s0 = rescale(s0, m0, m) + rescale(s1, m1, m);
  m0 = m;
}

// Adds one pack of PACK values (value(e)) to a running pair (m, s): one
// rescale a pack. -inf values add nothing: the hardware exp2 gives 0 for
// -inf, and a pack whose values are all -inf so far shifts by 0 instead of
// m = -inf (so exp(-inf - -inf) is never computed and s stays 0); one
// select a pack, not one an element. A NaN reaches s.
template <int PACK, class Value>
__device__ __forceinline__ void online_add(float& m, float& s, Value value) {
  float pack_max = kNegInf;
#pragma unroll
  for (int e = 0; e < PACK; ++e) pack_max = fmaxf(pack_max, value(e));
  const float m_new = fmaxf(m, pack_max);
  s = rescale(s, m, m_new);
  const float shift = m_new == kNegInf ? 0.0f : m_new;
#pragma unroll
  for (int e = 0; e < PACK; ++e) s += exp_shifted(value(e), shift);
  m = m_new;
}

// softmax (0) or log_softmax (1), fixed at compile time (a
// std::integral_constant: an element computes one output) or read at run
// time (int: it computes both and selects).
template <class Log>
__device__ __forceinline__ int log_flag(Log log) {
  if constexpr (std::is_integral_v<Log>)
    return log;
  else
    return Log::value;
}

// Forward output of one element given the row max m and the row sum s
// (inv_s = 1/s, log_s = log s).
__device__ __forceinline__ float forward_value(float x, float m, float inv_s, float log_s, int log) {
  return log ? (x - m) - log_s : exp_shifted(x, m) * inv_s;
}
// Backward: softmax dx = y (dy - sum(dy y)); log_softmax dx = dy - exp(y) sum(dy).
// backward_term is one element's share of that sum.
__device__ __forceinline__ float backward_term(float y, float dy, int log) { return log ? dy : dy * y; }
__device__ __forceinline__ float backward_value(float y, float dy, float sum, int log) {
  return log ? dy - fast_exp2(y * kLog2e) * sum : y * (dy - sum);
}

}  // namespace duet::DUET_NS::kernels
