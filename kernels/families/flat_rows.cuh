// flat_rows: short rows off the 16-byte pack grid, stored back to back.
//
// A row of a few packs whose start and length are off the pack grid leaves
// group_rows' lanes mostly with edge elements: one 2- or 4-byte access each,
// scattered over many rows a warp. When every tensor's rows lie back to back
// (row stride = cols), a tile of ROWS rows is one contiguous run of memory,
// so the block moves it as the aligned 16-byte packs that cover it (element
// by element only at the tile's two ends, never touching a neighbouring
// tile's elements) through shared memory: thread t then works row t of the
// tile from shared memory, its results written back in place, and the tile
// leaves as packs again.
// Grid: blocks of ROWS threads, one tile each, up to the planner's waves;
// dynamic shared memory: a tile of each tensor read, from the pack boundary
// before its first element (runtime/src/planner/planner.cpp: smem_vecs packs a
// thread); no workspace.
#pragma once

#include "common/family_kernels.cuh"
#include "common/math.cuh"
#include "common/storage.cuh"
#include "softmax_args.hpp"

namespace duet::DUET_NS::kernels {

// Packs a thread loads before it stores any to shared memory: the loads in
// flight.
inline constexpr int kFlatLoadsInFlight = 4;

// Elements [e0, e1) of a flat tensor at base (first pack at `phase`
// elements before base) into shared memory from the pack holding e0: whole
// packs as one access, the first and last element by element (their other
// slots hold zeros, never read).
template <class T, int PACK, int ROWS>
__device__ __forceinline__ void flat_load(const T* base, int phase, std::int64_t e0, std::int64_t e1, T* tile) {
  using P = Pack<T, PACK>;
  constexpr int K = kFlatLoadsInFlight;
  const std::int64_t a0 = (e0 + phase) / PACK;             // first pack (from the aligned base)
  const std::int64_t a1 = (e1 + phase + PACK - 1) / PACK;  // one past the last
  const P* packs = reinterpret_cast<const P*>(base - phase);
  for (std::int64_t p0 = a0 + threadIdx.x; p0 < a1; p0 += std::int64_t(K) * ROWS) {
    P v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const std::int64_t p = p0 + std::int64_t(k) * ROWS;
      const std::int64_t first = p * PACK - phase;  // element of the pack's first slot
      if (p >= a1) continue;
      if (first >= e0 && first + PACK <= e1) {
        v[k] = packs[p];
      } else {
#pragma unroll
        for (int e = 0; e < PACK; ++e) v[k].v[e] = first + e >= e0 && first + e < e1 ? base[first + e] : T{};
      }
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const std::int64_t p = p0 + std::int64_t(k) * ROWS;
      if (p < a1) reinterpret_cast<P*>(tile)[p - a0] = v[k];
    }
  }
}

// The same tile back out to a flat tensor with the same phase.
template <class T, int PACK, int ROWS>
__device__ __forceinline__ void flat_store(T* base, int phase, std::int64_t e0, std::int64_t e1, const T* tile) {
  using P = Pack<T, PACK>;
  const std::int64_t a0 = (e0 + phase) / PACK;
  const std::int64_t a1 = (e1 + phase + PACK - 1) / PACK;
  P* packs = reinterpret_cast<P*>(base - phase);
  for (std::int64_t p = a0 + threadIdx.x; p < a1; p += ROWS) {
    const std::int64_t first = p * PACK - phase;
    const P* slot = reinterpret_cast<const P*>(tile) + (p - a0);
    if (first >= e0 && first + PACK <= e1) {
      packs[p] = *slot;
    } else {
#pragma unroll
      for (int e = 0; e < PACK; ++e)
        if (first + e >= e0 && first + e < e1) base[first + e] = slot->v[e];
    }
  }
}

// Thread t's row of the tile (`cols` elements from xr, dy's from gr) worked
// in place in shared memory, softmax or log_softmax fixed at compile time: a
// run-time choice had each element compute both outputs and select, and
// every row take both logf and the division (bench/NOTES.md v110). A row
// is short (planner.cpp: flat_rows_max_packs), so its indices are 32-bit.
template <class T, bool BACKWARD, int LOG>
__device__ __forceinline__ void flat_row(T* xr, const T* gr, int cols) {
  if constexpr (BACKWARD) {
    float s = 0.0f;
#pragma unroll 4
    for (int i = 0; i < cols; ++i) s += backward_term(to_float(xr[i]), to_float(gr[i]), LOG);
#pragma unroll 4
    for (int i = 0; i < cols; ++i) xr[i] = from_float<T>(backward_value(to_float(xr[i]), to_float(gr[i]), s, LOG));
  } else {
    float m = kNegInf;
#pragma unroll 4
    for (int i = 0; i < cols; ++i) m = fmaxf(m, to_float(xr[i]));
    float s = 0.0f;
#pragma unroll 4
    for (int i = 0; i < cols; ++i) s += exp_shifted(to_float(xr[i]), m);
    const float scale = LOG ? logf(s) : 1.0f / s;
#pragma unroll 4
    for (int i = 0; i < cols; ++i) xr[i] = from_float<T>(forward_value(to_float(xr[i]), m, scale, scale, LOG));
  }
}

template <class T, int PACK, int ROWS, bool BACKWARD>
__global__ void __launch_bounds__(ROWS) flat_rows_kernel(SoftmaxArgs a) {
  extern __shared__ float4 dynamic_smem[];
  const std::int64_t cols = a.cols;
  // Every tensor starts at the same offset within a pack (the runtime checks
  // it), so one phase serves them all.
  const int phase = static_cast<int>(reinterpret_cast<std::uintptr_t>(a.x) / sizeof(T) % PACK);
  // A tile of each tensor: ROWS x cols elements plus up to PACK - 1 before
  // the first, in whole packs.
  const std::int64_t tile_packs = (std::int64_t(ROWS) * cols + 2 * (PACK - 1)) / PACK;
  T* x_tile = reinterpret_cast<T*>(dynamic_smem);
  T* g_tile = x_tile + tile_packs * PACK;
  for (std::int64_t row0 = std::int64_t(blockIdx.x) * ROWS; row0 < a.rows; row0 += std::int64_t(gridDim.x) * ROWS) {
    const std::int64_t rows = a.rows - row0 < ROWS ? a.rows - row0 : ROWS;
    const std::int64_t e0 = row0 * cols, e1 = (row0 + rows) * cols;
    flat_load<T, PACK, ROWS>(static_cast<const T*>(a.x), phase, e0, e1, x_tile);
    if constexpr (BACKWARD) flat_load<T, PACK, ROWS>(static_cast<const T*>(a.dy), phase, e0, e1, g_tile);
    __syncthreads();
    if (threadIdx.x < rows) {
      // Row t of the tile, from the element e0 + t cols (the tile starts at
      // the pack boundary (e0 + phase) % PACK elements before e0).
      const int at = static_cast<int>((e0 + phase) % PACK) + static_cast<int>(threadIdx.x) * static_cast<int>(cols);
      if (a.log)
        flat_row<T, BACKWARD, 1>(x_tile + at, g_tile + at, static_cast<int>(cols));
      else
        flat_row<T, BACKWARD, 0>(x_tile + at, g_tile + at, static_cast<int>(cols));
    }
    __syncthreads();
    flat_store<T, PACK, ROWS>(static_cast<T*>(a.out), phase, e0, e1, x_tile);
    __syncthreads();  // the tile is read out before the next is loaded
  }
}

template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::flat_rows, I> = {
    &flat_rows_kernel<EntryStorage<I>, kEntry<I>.vec, kFlatRowsBlock, kEntry<I>.backward>};

}  // namespace duet::DUET_NS::kernels
