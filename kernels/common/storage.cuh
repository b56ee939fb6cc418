// Storage types, their conversion to and from float, and the one vector
// type: a Pack of elements moved as one memory access, held in registers
// either element by element or, where it is 16 bytes, as one native 16-byte
// value (PackWords). element() and make_pack() read and build either form.
#pragma once

#include <cstdint>
#include <type_traits>

#include "softmax_variants.hpp"
#include "vendor.h"

namespace duet::DUET_NS::kernels {

// 16-bit floats are carried as raw bits and converted in registers, so the
// same code builds against CUDA's and HIP's fp16 headers (which name their
// bfloat16 types differently).
struct alignas(2) f16_t { unsigned short bits; };
struct alignas(2) bf16_t { unsigned short bits; };

template <DType D> struct StorageOf;
template <> struct StorageOf<DType::f32> { using type = float; };
template <> struct StorageOf<DType::f16> { using type = f16_t; };
template <> struct StorageOf<DType::bf16> { using type = bf16_t; };
template <class T> inline constexpr DType kDTypeOf = DType::f32;  // float; the 16-bit types below
template <> inline constexpr DType kDTypeOf<f16_t> = DType::f16;
template <> inline constexpr DType kDTypeOf<bf16_t> = DType::bf16;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(f16_t v) { return __half2float(__ushort_as_half(v.bits)); }
__device__ __forceinline__ float to_float(bf16_t v) { return __uint_as_float(unsigned(v.bits) << 16); }

template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ f16_t from_float<f16_t>(float v) {
  return f16_t{__half_as_ushort(__float2half_rn(v))};
}
template <> __device__ __forceinline__ bf16_t from_float<bf16_t>(float v) {
#if DUET_DEVICE_CVT_RN16
  // One cvt.rn.bf16.f32 in place of the integer rounding below.
  return bf16_t{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
#else
  // Round to nearest even; NaN stays a quiet NaN.
  unsigned u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{static_cast<unsigned short>((u >> 16) | 0x0040u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16_t{static_cast<unsigned short>(u >> 16)};
#endif  // DUET_DEVICE_CVT_RN16
}

// Two floats rounded to 16-bit T in one word, the first in the low half: one
// instruction where the device has it, in place of a cvt, a shift and an or
// per pair.
template <class T>
__device__ __forceinline__ unsigned round_pair(float lo, float hi) {
#if DUET_DEVICE_CVT_RN16
  if constexpr (std::is_same_v<T, bf16_t>)
    return duet_cvt_rn_bf16x2(lo, hi);
  else
    return duet_cvt_rn_f16x2(lo, hi);
#else
  return unsigned(from_float<T>(lo).bits) | unsigned(from_float<T>(hi).bits) << 16;
#endif  // DUET_DEVICE_CVT_RN16
}

// The larger halves of two words of 16-bit T where the device has a packed
// max (DUET_DEVICE_CVT_RN16).
template <class T>
__device__ __forceinline__ unsigned max_halves(unsigned a, unsigned b) {
#if DUET_DEVICE_CVT_RN16
  if constexpr (std::is_same_v<T, bf16_t>)
    return duet_max_bf16x2(a, b);
  else
    return duet_max_f16x2(a, b);
#else
  (void)b;
  return a;  // not called: the kernel takes the max element by element
#endif
}
// A word of two -inf halves of 16-bit T, and of two +inf halves.
template <class T>
inline constexpr unsigned kNegInfHalves = std::is_same_v<T, bf16_t> ? 0xff80ff80u : 0xfc00fc00u;
template <class T>
inline constexpr unsigned kPosInfHalves = std::is_same_v<T, bf16_t> ? 0x7f807f80u : 0x7c007c00u;

// PACK elements moved as one access (16 bytes on the vector paths, one
// element on the scalar path), held element by element.
template <class T, int PACK>
struct alignas(sizeof(T) * PACK) Pack {
  T v[PACK];
};

// The same bytes held as one native 16-byte value (four 32-bit registers)
// where they are 16 bytes, else as the Pack. Staging copies and the kernels
// that hold many 16-bit packs use it: a Pack of eight 16-bit values is held
// in eight registers (split_stream spills so, ptxas -v, sm_90), and a Pack
// copied whole is a memcpy that clang keeps in scratch on AMD
// (block_row_smem's staging, -Rpass-analysis=kernel-resource-usage).
template <class T, int PACK>
using PackWords = std::conditional_t<sizeof(Pack<T, PACK>) == 16, DUET_RAW16, Pack<T, PACK>>;

// Four 16-bit values (8 bytes) held as two 32-bit words, converted from
// and rounded to the words in registers: interleaved_stream's 16-bit packs,
// which as a Pack took a register a value and spilled (ptxas -v, sm_80 and
// sm_90).
struct alignas(8) Words8 {
  unsigned w[2];
};

// Element e of a pack in any form, as float (e is a constant once unrolled).
template <class T, class V>
__device__ __forceinline__ float element(const V& p, int e) {
  if constexpr (std::is_same_v<V, Words8>) {
    static_assert(sizeof(T) == 2, "Words8 holds 16-bit values");
    const unsigned w = p.w[e / 2];
    if constexpr (std::is_same_v<T, bf16_t>) return __uint_as_float(e % 2 ? w & 0xffff0000u : w << 16);
    return to_float(T{static_cast<unsigned short>(e % 2 ? w >> 16 : w & 0xffffu)});
  } else if constexpr (std::is_same_v<V, DUET_RAW16>) {
    if constexpr (sizeof(T) == 4) {
      return __uint_as_float(DUET_RAW16_WORD(p, e));
    } else {
      const unsigned w = DUET_RAW16_WORD(p, e / 2);
      if constexpr (std::is_same_v<T, bf16_t>) return __uint_as_float(e % 2 ? w & 0xffff0000u : w << 16);
      return to_float(T{static_cast<unsigned short>(e % 2 ? w >> 16 : w & 0xffffu)});
    }
  } else if constexpr (std::is_same_v<T, bf16_t> && sizeof(V) % 4 == 0) {
    // The element's word: the high half is a mask of it, where the half
    // alone took a byte permute and a shift (SASS, sm_90).
    unsigned w;
    __builtin_memcpy(&w, &p.v[e & ~1], 4);
    return __uint_as_float(e % 2 ? w & 0xffff0000u : w << 16);
  } else {
    return to_float(p.v[e]);
  }
}

// A pack in form V whose element e is value(e), rounded to T.
template <class T, class V, class Value>
__device__ __forceinline__ V make_pack(const Value& value) {
  if constexpr (std::is_same_v<V, Words8>) {
    return Words8{{round_pair<T>(value(0), value(1)), round_pair<T>(value(2), value(3))}};
  } else if constexpr (std::is_same_v<V, DUET_RAW16>) {
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (sizeof(T) == 4)
        w[i] = __float_as_uint(value(i));
      else
        w[i] = round_pair<T>(value(2 * i), value(2 * i + 1));
    }
    return DUET_RAW16_MAKE(w[0], w[1], w[2], w[3]);
  } else {
    V o;
#pragma unroll
    for (int e = 0; e < int(sizeof(V) / sizeof(T)); ++e) o.v[e] = from_float<T>(value(e));
    return o;
  }
}

// Row `row` of a tensor with `stride` elements between rows, as packs of
// form V (a Pack by default), from `offset` elements in (a row's first
// whole pack where it has edges: common/row_edges.cuh).
template <class T, int PACK, class V = Pack<T, PACK>>
__device__ __forceinline__ const V* row_ptr(const void* base, std::int64_t row, std::int64_t stride, int offset = 0) {
  return reinterpret_cast<const V*>(static_cast<const T*>(base) + row * stride + offset);
}
template <class T, int PACK, class V = Pack<T, PACK>>
__device__ __forceinline__ V* row_ptr(void* base, std::int64_t row, std::int64_t stride, int offset = 0) {
  return reinterpret_cast<V*>(static_cast<T*>(base) + row * stride + offset);
}
// The same row as elements.
template <class T>
__device__ __forceinline__ const T* row_elems(const void* base, std::int64_t row, std::int64_t stride) {
  return static_cast<const T*>(base) + row * stride;
}
template <class T>
__device__ __forceinline__ T* row_elems(void* base, std::int64_t row, std::int64_t stride) {
  return static_cast<T*>(base) + row * stride;
}

// Loads and stores of packs; the 16-byte ones with cache hints where asked
// (DUET_LOAD_KEEP, DUET_LOAD_LAST_USE, DUET_STORE_STREAMING in vendor.h).
enum class LoadHint {
  normal,    // no cache hint
  keep,      // evict last from L2: a line read again later, and a row's
             // single read into registers (bench/NOTES.md v102, v104b)
  last_use,  // the last of two reads: evict first
};
// A 16-byte pack loads with HINT: DUET_RAW16 as it is, any other (Pack<T,
// PACK> of 16 bytes) through its words; other sizes take a plain load.
template <LoadHint HINT, class V>
__device__ __forceinline__ V load_hinted(const V* p) {
  if constexpr (std::is_same_v<V, DUET_RAW16>) {
    if constexpr (HINT == LoadHint::keep)
      return DUET_LOAD_KEEP(p);
    else if constexpr (HINT == LoadHint::last_use)
      return DUET_LOAD_LAST_USE(p);
    else
      return *p;
  } else if constexpr (sizeof(V) == 16 && alignof(V) == 16) {
    const DUET_RAW16 w = load_hinted<HINT>(reinterpret_cast<const DUET_RAW16*>(p));
    V v;
    __builtin_memcpy(&v, &w, 16);
    return v;
  } else {
    return *p;
  }
}
// A pack written with one store of its words: 16 bytes as DUET_RAW16, 8
// bytes as two 32-bit words; smaller packs as they are.
template <class V>
__device__ __forceinline__ void store_words(V* p, const V& v) {
  if constexpr (std::is_same_v<V, DUET_RAW16>) {
    DUET_STORE_WORDS(p, v);
  } else if constexpr (sizeof(V) == 8 && alignof(V) == 8) {
    uint2 w;
    __builtin_memcpy(&w, &v, 8);
    DUET_STORE_WORDS(reinterpret_cast<uint2*>(p), w);
  } else {
    *p = v;
  }
}
template <class V>
__device__ __forceinline__ void store_streaming(V* p, const V& v) {
  if constexpr (std::is_same_v<V, DUET_RAW16>)
    DUET_STORE_STREAMING(p, v);
  else
    *p = v;
}

// A pack of 16, 8 or 4 bytes copied from global to this thread's place in
// shared memory; a 16-byte one with HINT's L2 policy (keep: evict_last,
// last_use: evict_first), others plainly, as load_hinted does. Where the
// device has cp.async (DUET_DEVICE_CP_ASYNC) no register holds it and the
// copy is in flight until shared_copies_wait covers it; the copies since
// the last shared_copies_commit form a group. Elsewhere a load and a store,
// complete at once (commit and wait do nothing).
template <LoadHint HINT = LoadHint::normal, class V>
__device__ __forceinline__ void copy_to_shared(V* dst, const V* src) {
  static_assert(sizeof(V) == 16 || sizeof(V) == 8 || sizeof(V) == 4, "cp.async moves 16, 8 or 4 bytes");
#if DUET_DEVICE_CP_ASYNC
  if constexpr (sizeof(V) == 16 && HINT != LoadHint::normal)
    duet_cp_async16_hinted(dst, src, HINT == LoadHint::keep ? duet_policy_evict_last() : duet_policy_evict_first());
  else if constexpr (sizeof(V) == 16)
    duet_cp_async16(dst, src);
  else if constexpr (sizeof(V) == 8)
    duet_cp_async8(dst, src);
  else
    duet_cp_async4(dst, src);
#else
  *dst = *src;
#endif
}
__device__ __forceinline__ void shared_copies_commit() {
#if DUET_DEVICE_CP_ASYNC
  duet_cp_async_commit();
#endif
}
// Waits until at most `pending` of this thread's groups are in flight.
template <int PENDING>
__device__ __forceinline__ void shared_copies_wait() {
#if DUET_DEVICE_CP_ASYNC
  if constexpr (PENDING == 0)
    duet_cp_async_wait_all();
  else
    duet_cp_async_wait_group<PENDING>();
#endif
}

// The same for a run-time count: at most `pending` groups in flight, or
// at most 7 where `pending` is larger (a longer wait, never a shorter one).
__device__ __forceinline__ void shared_copies_wait(int pending) {
  switch (pending) {
    case 0: shared_copies_wait<0>(); break;
    case 1: shared_copies_wait<1>(); break;
    case 2: shared_copies_wait<2>(); break;
    case 3: shared_copies_wait<3>(); break;
    case 4: shared_copies_wait<4>(); break;
    case 5: shared_copies_wait<5>(); break;
    case 6: shared_copies_wait<6>(); break;
    default: shared_copies_wait<7>(); break;
  }
}

}  // namespace duet::DUET_NS::kernels
