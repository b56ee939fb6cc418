// The host backend's storage types for scalar loops: float, and the 16-bit
// formats as raw words, with their conversions and the dispatch from a
// DType (the SIMD loops have their own per-target types, simd-inl.h).
#pragma once

#include <cstdint>
#include <type_traits>

#include "duet/float16.hpp"
#include "softmax_variants.hpp"

namespace duet::host {

struct F16 {
  std::uint16_t bits;
};
struct BF16 {
  std::uint16_t bits;
};
inline float to_float(float v) { return v; }
inline float to_float(F16 v) { return f16_to_float(v.bits); }
inline float to_float(BF16 v) { return bf16_to_float(v.bits); }
template <class S>
inline S from_float(float v) {
  if constexpr (std::is_same_v<S, float>) return v;
  else if constexpr (std::is_same_v<S, F16>) return F16{float_to_f16(v)};
  else return BF16{float_to_bf16(v)};
}

template <class S>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<S, F16>) return DType::f16;
  else if constexpr (std::is_same_v<S, BF16>) return DType::bf16;
  else return DType::f32;
}

// f(S{}) for the storage type S of `dtype`.
template <class F>
decltype(auto) with_storage(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f16: return f(F16{});
    case DType::bf16: return f(BF16{});
    default: return f(0.0f);
  }
}

}  // namespace duet::host
