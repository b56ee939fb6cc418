// The per-thread fragment of a row: what one thread does with the packs of
// a row it holds.
//
// A slice is a callable: slice(visit) calls visit(x, dy, store) for each
// pack the thread holds, in order, skipping those past the row's end:
//   x      the input pack (backward: y), Pack or PackWords;
//   dy     backward: the upstream gradient's pack; forward: x again (unused);
//   store  store(o) writes the result pack o where x's result goes.
// Each family builds its slice from its own registers and addressing, then
// runs the fragment's steps: forward max -> reduce -> sum of exp(x - max) ->
// reduce -> write, backward sum(dy y) (log: sum(dy)) -> reduce -> write,
// or the online pair of split_stream's first pass. cluster_row and
// split_stream use them.
//
// The kernels must compile to the same machine code as their loops written
// out (scripts/kernel_identity.sh), which rules the forms here: slices,
// visitors and what they call are inlined before anything is optimised
// (force-inlined functions; lambdas marked DUET_INLINE_LAMBDA) and taken by
// reference (a closure copied by value lingers in memory); `log` is a
// reference to a.log, read where it is used.
// group_rows, block_row and split_row keep the fragment written out in the
// kernel: through slices they compile to other code, on nvcc for backward
// (up to 12 more registers, ptxas -v, sm_90) and on hipcc in both
// directions (up to 45 more VGPRs, gfx90a, -Rpass-analysis=kernel-resource-usage).
#pragma once

#include <cstdint>

#include "common/math.cuh"
#include "common/storage.cuh"
#include "softmax_args.hpp"

// Placed after a lambda's parameter list: inline it before optimising.
#define DUET_INLINE_LAMBDA __attribute__((always_inline))

namespace duet::DUET_NS::kernels {

// The slice's largest input value, from m. 16-byte packs of 16-bit values
// take it on their 32-bit words, two halves at a time, where the device has
// a packed max (half an instruction an element, where a float max needs the
// element's conversion and the max); fmaxf's handling of NaN is the packed
// max's.
template <class T, int PACK, class Slice>
__device__ __forceinline__ float slice_max(float m, const Slice& slice) {
  [[maybe_unused]] unsigned halves = kNegInfHalves<T>;
  slice([&](const auto& x, const auto&, const auto&) DUET_INLINE_LAMBDA {
    if constexpr (sizeof(T) == 2 && sizeof(x) == 16 && DUET_DEVICE_CVT_RN16) {
      DUET_RAW16 r;
      __builtin_memcpy(&r, &x, 16);
      const unsigned w01 = max_halves<T>(DUET_RAW16_WORD(r, 0), DUET_RAW16_WORD(r, 1));
      const unsigned w23 = max_halves<T>(DUET_RAW16_WORD(r, 2), DUET_RAW16_WORD(r, 3));
      halves = max_halves<T>(halves, max_halves<T>(w01, w23));
    } else {
#pragma unroll
      for (int e = 0; e < PACK; ++e) m = fmaxf(m, element<T>(x, e));
    }
  });
  if constexpr (sizeof(T) == 2 && DUET_DEVICE_CVT_RN16) {
    const Words8 w{{halves, halves}};
    m = fmaxf(m, fmaxf(element<T>(w, 0), element<T>(w, 1)));
  }
  return m;
}

// s plus term(x) over the slice's input values.
template <class T, int PACK, class Slice, class Term>
__device__ __forceinline__ float slice_sum(float s, const Slice& slice, const Term& term) {
  slice([&](const auto& x, const auto&, const auto&) DUET_INLINE_LAMBDA {
#pragma unroll
    for (int e = 0; e < PACK; ++e) s += term(element<T>(x, e));
  });
  return s;
}

// s plus sum(dy y) (log: sum(dy)) over the slice.
template <class T, int PACK, class Slice>
__device__ __forceinline__ float slice_backward_sum(float s, const Slice& slice, const int& log) {
  slice([&](const auto& y, const auto& dy, const auto&) DUET_INLINE_LAMBDA {
#pragma unroll
    for (int e = 0; e < PACK; ++e) s += backward_term(element<T>(y, e), element<T>(dy, e), log);
  });
  return s;
}

// The slice's input values added to a running online pair (m, s), a pack at
// a time.
template <class T, int PACK, class Slice>
__device__ __forceinline__ void slice_online(float& m, float& s, const Slice& slice) {
  slice([&](const auto& x, const auto&, const auto&) DUET_INLINE_LAMBDA {
    online_add<PACK>(m, s, [&](int e) DUET_INLINE_LAMBDA { return element<T>(x, e); });
  });
}

// Writes value(x, dy) for every pack of the slice, rounded to T.
template <class T, class Slice, class Value>
__device__ __forceinline__ void slice_write(const Slice& slice, const Value& value) {
  slice([&](const auto& x, const auto& dy, const auto& store) DUET_INLINE_LAMBDA {
    using V = std::decay_t<decltype(x)>;
    store(make_pack<T, V>([&](int e) DUET_INLINE_LAMBDA { return value(element<T>(x, e), element<T>(dy, e)); }));
  });
}

// A row's max and sum as forward_value takes them, computed once a row.
struct RowScale {
  float m, inv_s, log_s;
};
__device__ __forceinline__ RowScale row_scale(float m, float s) { return {m, 1.0f / s, logf(s)}; }

// Forward outputs from the row's max and sum.
template <class T, class Slice>
__device__ __forceinline__ void write_forward(const Slice& slice, const RowScale& r, const int& log) {
  slice_write<T>(slice, [&](float x, float) DUET_INLINE_LAMBDA { return forward_value(x, r.m, r.inv_s, r.log_s, log); });
}

// Backward outputs from the row's sum(dy y) (log: sum(dy)).
template <class T, class Slice>
__device__ __forceinline__ void write_backward(const Slice& slice, float sum, const int& log) {
  slice_write<T>(slice, [&](float y, float dy) DUET_INLINE_LAMBDA { return backward_value(y, dy, sum, log); });
}

// The pack a slice passes as dy: g's for backward, x's own for forward.
template <bool BACKWARD, class V>
__device__ __forceinline__ const V& dy_or_x(const V& g, const V& x) {
  if constexpr (BACKWARD)
    return g;
  else
    return x;
}

// Issues the loads of packs v0, v0 + stride, ... (COUNT of them, those below
// `end`) of x, and of g for backward, before any is used: the loads in flight.
template <int COUNT, bool BACKWARD, LoadHint H = LoadHint::normal, class V>
__device__ __forceinline__ void load_strided(const V* xr, const V* gr, std::int64_t v0, std::int64_t stride,
                                             std::int64_t end, V (&x)[COUNT], V (&g)[BACKWARD ? COUNT : 1]) {
#pragma unroll
  for (int k = 0; k < COUNT; ++k) {
    const std::int64_t vi = v0 + std::int64_t(k) * stride;
    if (vi < end) {
      x[k] = load_hinted<H>(xr + vi);
      if constexpr (BACKWARD) g[k] = load_hinted<H>(gr + vi);
    }
  }
}

// A row cut in chunks (split_row, split_stream: one work item each;
// cluster_row: one per block of a cluster): work item `item` is chunk
// item % chunks_per_row of row item / chunks_per_row, packs [begin, end).
struct Chunk {
  std::int64_t row, begin, end;
};
template <int PACK>
__device__ __forceinline__ Chunk chunk_of(const SoftmaxArgs& a, std::int64_t item) {
  const std::int64_t packs = a.cols / PACK;
  const std::int64_t chunk_packs = a.chunk_elems / PACK;
  const std::int64_t begin = (item % a.chunks_per_row) * chunk_packs;
  return {item / a.chunks_per_row, begin, begin + chunk_packs < packs ? begin + chunk_packs : packs};
}

}  // namespace duet::DUET_NS::kernels
