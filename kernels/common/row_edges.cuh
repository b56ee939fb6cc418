// Rows off the 16-byte pack grid on the vector kernels: a row that starts
// at any element and has any length, as a body of whole, aligned packs and
// the few elements before and after it (its edges), which ride along in
// registers of the row's first threads.
//
// Every tensor of such a row starts at the same offset within a pack
// (pointers and row strides congruent modulo the pack's elements: the
// runtime checks it, runtime/src/api/softmax.cpp and kernels/fused_variants.hpp),
// so one head leaves the body aligned in all of them. The body runs exactly
// as a row of whole packs does; only the edge elements go one at a time, so
// the body keeps its registers (a pack that mixed both forms doubled the
// registers of 16-bit kernels and spilled them: ptxas -v, sm_90).
// The plain families hold the edges in EdgeElements; the fused families in
// RowEdges (families/fused_rows.cuh), through their op policies.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/math.cuh"
#include "common/storage.cuh"

namespace duet::DUET_NS::kernels {

// A row on the vector path: `head` elements before its first whole pack,
// `body` whole packs from there, `tail` elements after them (head and tail
// below PACK). Counts are 32-bit (cols < 2^31): fewer registers beside the
// edges.
struct RowSpan {
  int head, body, tail;
};
template <class T, int PACK>
__device__ __forceinline__ RowSpan row_span(const void* x, std::int64_t row, std::int64_t stride,
                                            std::int64_t cols64) {
  const auto start = reinterpret_cast<std::uintptr_t>(static_cast<const T*>(x) + row * stride) / sizeof(T);
  const int to_pack = static_cast<int>((PACK - start % PACK) % PACK);
  const int cols = static_cast<int>(cols64);
  const int head = cols < to_pack ? cols : to_pack;
  return {head, (cols - head) / PACK, (cols - head) % PACK};
}

// A row's edge elements (head first, then tail: at most 2 (PACK - 1)),
// held as float by threads 0.. of the row's THREADS: thread t holds edge
// elements t, t + THREADS, ... (one slot where THREADS >= 2 (PACK - 1)).
// Row pointers address the row's first element (not its first whole pack).
template <class T, int PACK, int THREADS, bool BACKWARD>
struct EdgeElements {
  static_assert(PACK > 1, "edges are the vector path's");
  static constexpr int kSlots = (2 * (PACK - 1) + THREADS - 1) / THREADS;
  // Which elements a slot holds is worked out where it is used, from the
  // span: cheaper than registers for it beside the packs.
  RowSpan span;
  int thread;
  float x[kSlots];
  float g[BACKWARD ? kSlots : 1];

  // Which edge elements this thread (of the row's THREADS) holds; none
  // where ok is false.
  __device__ __forceinline__ void place(const RowSpan& s, int t, bool ok) {
    span = ok ? s : RowSpan{0, 0, 0};
    thread = t;
  }
  __device__ __forceinline__ bool has(int k) const { return thread + k * THREADS < span.head + span.tail; }
  // The slot's column in the row: head elements first, then the tail's.
  __device__ __forceinline__ int col(int k) const {
    const int e = thread + k * THREADS;
    return e < span.head ? e : e + span.body * PACK;
  }
  __device__ __forceinline__ void load(const T* xr, const T* gr) {
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (has(k)) {
        x[k] = to_float(xr[col(k)]);
        if constexpr (BACKWARD) g[k] = to_float(gr[col(k)]);
      }
  }
  __device__ __forceinline__ float max(float m) const {
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (has(k)) m = fmaxf(m, x[k]);
    return m;
  }
  // s plus term(x) (forward) or term(x, dy) (backward) over the edges.
  template <class Term>
  __device__ __forceinline__ float sum(float s, const Term& term) const {
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (has(k)) {
        if constexpr (BACKWARD)
          s += term(x[k], g[k]);
        else
          s += term(x[k]);
      }
    return s;
  }
  // The edges added to a running online pair (m, s).
  __device__ __forceinline__ void online(float& m, float& s) const {
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (has(k)) online_add<1>(m, s, [&](int) { return x[k]; });
  }
  // Writes value(x, dy) (forward: dy is x) for every edge element.
  template <class Value>
  __device__ __forceinline__ void store(T* orow, const Value& value) const {
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (has(k)) orow[col(k)] = from_float<T>(value(x[k], BACKWARD ? g[k] : x[k]));
  }
};

// What a family holds for a row's edges: EdgeElements with edges, nothing
// without.
struct NoEdges {};
template <bool EDGES, class T, int PACK, int THREADS, bool BACKWARD>
using EdgesOf = std::conditional_t<EDGES, EdgeElements<T, PACK, THREADS, BACKWARD>, NoEdges>;

}  // namespace duet::DUET_NS::kernels
