// The per-thread fragment of a row: what one thread does with the packs of
// a row it holds, written once for every kernel family.
//
// A slice is a callable: slice(visit) calls visit(x, dy, store) for each
// pack the thread holds, in order, skipping those past the row's end:
//   x      the input pack (backward: y), Pack or PackWords;
//   dy     backward: the upstream gradient's pack; forward: x again (unused);
//   store  store(o) writes the result pack o where x's result goes.
// Each family builds its slices from its own registers, shared memory and
// addressing.
//
// The slices, the visitors and everything they call are inlined before
// anything is optimised (force-inlined functions; lambdas marked
// DUET_INLINE_LAMBDA), and taken by reference, so the kernel is optimised as
// if its loops were written out in it: a lambda left to the ordinary inliner
// is optimised on its own first, and a closure copied by value lingers in
// memory, and either comes out as other machine code (up to 12 more
// registers in group_rows backward, ptxas -v, sm_90).
//
// The forward fragment is max -> reduce -> sum of exp(x - max) -> reduce ->
// write; the backward one is sum(dy y) (log: sum(dy)) -> reduce -> write.
// `reduce(v, op, step)` combines v over the row's threads (a group, a block
// or a cluster); step counts the reductions of the row (0, 1), for callers
// that alternate scratch buffers. `log` is a reference to a.log, read where
// it is used, as the kernels did when they were written out.
#pragma once

#include <cstdint>

#include "common/math.cuh"
#include "common/storage.cuh"
#include "softmax_args.hpp"

// Placed after a lambda's parameter list: inline it before optimising.
#define DUET_INLINE_LAMBDA __attribute__((always_inline))

namespace duet::DUET_NS::kernels {

// The slice's largest input value, from m.
template <class T, int PACK, class Slice>
__device__ __forceinline__ float slice_max(float m, const Slice& slice) {
  slice([&](const auto& x, const auto&, const auto&) DUET_INLINE_LAMBDA {
#pragma unroll
    for (int e = 0; e < PACK; ++e) m = fmaxf(m, element<T>(x, e));
  });
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

// A row held whole by its threads, forward: each thread's slice reduced to
// the row's max and sum, then written.
template <class T, int PACK, class Slice, class Reduce>
__device__ __forceinline__ void forward_fragment(const Slice& slice, const Reduce& reduce, const int& log) {
  const float m = reduce(slice_max<T, PACK>(kNegInf, slice), MaxOp{}, 0);
  const float s =
      reduce(slice_sum<T, PACK>(0.0f, slice, [&](float x) DUET_INLINE_LAMBDA { return exp_shifted(x, m); }), SumOp{}, 1);
  write_forward<T>(slice, row_scale(m, s), log);
}

// The same, backward: one reduction, then the write.
template <class T, int PACK, class Slice, class Reduce>
__device__ __forceinline__ void backward_fragment(const Slice& slice, const Reduce& reduce, const int& log) {
  write_backward<T>(slice, reduce(slice_backward_sum<T, PACK>(0.0f, slice, log), SumOp{}, 0), log);
}

// The fragment of either direction.
template <class T, int PACK, bool BACKWARD, class Slice, class Reduce>
__device__ __forceinline__ void row_fragment(const Slice& slice, const Reduce& reduce, const int& log) {
  if constexpr (BACKWARD)
    backward_fragment<T, PACK>(slice, reduce, log);
  else
    forward_fragment<T, PACK>(slice, reduce, log);
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
template <int COUNT, bool BACKWARD, class V>
__device__ __forceinline__ void load_strided(const V* xr, const V* gr, std::int64_t v0, std::int64_t stride,
                                             std::int64_t end, V (&x)[COUNT], V (&g)[BACKWARD ? COUNT : 1]) {
#pragma unroll
  for (int k = 0; k < COUNT; ++k) {
    const std::int64_t vi = v0 + std::int64_t(k) * stride;
    if (vi < end) {
      x[k] = xr[vi];
      if constexpr (BACKWARD) g[k] = gr[vi];
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
