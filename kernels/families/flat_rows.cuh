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
// dynamic shared memory: two tiles of each tensor read (the next one's
// copies in flight while this one is worked), each from the pack boundary
// before its first element (runtime/src/planner/planner.cpp: smem_vecs packs
// a thread); no workspace.
#pragma once

#include "common/family_kernels.cuh"
#include "common/math.cuh"
#include "common/storage.cuh"
#include "softmax_args.hpp"

namespace duet::DUET_NS::kernels {

// Packs a thread loads before it stores any to shared memory: the loads in
// flight.
inline constexpr int kFlatLoadsInFlight = 4;

// The packs [first, end) of a flat tensor (its first pack `phase` elements
// before its base) that cover its elements [e0, e1).
struct PackSpan {
  std::int64_t first, end;
};
template <int PACK>
__device__ __forceinline__ PackSpan packs_covering(int phase, std::int64_t e0, std::int64_t e1) {
  return {(e0 + phase) / PACK, (e1 + phase + PACK - 1) / PACK};
}

// A pack read element by element, `first` the element in its first slot:
// its elements in [e0, e1), zeros in its other slots (never read).
template <class T, int PACK>
__device__ __forceinline__ void load_pack_elements(Pack<T, PACK>& out, const T* base, std::int64_t first,
                                                   std::int64_t e0, std::int64_t e1) {
#pragma unroll
  for (int e = 0; e < PACK; ++e) out.v[e] = first + e >= e0 && first + e < e1 ? base[first + e] : T{};
}

// Elements [e0, e1) of a flat tensor at base (first pack at `phase`
// elements before base) into shared memory from the pack holding e0: whole
// packs as one access, the first and last element by element.
template <class T, int PACK, int ROWS>
__device__ __forceinline__ void flat_load(const T* base, int phase, std::int64_t e0, std::int64_t e1, T* tile) {
  using P = Pack<T, PACK>;
  constexpr int K = kFlatLoadsInFlight;
  const auto [a0, a1] = packs_covering<PACK>(phase, e0, e1);
  const P* packs = reinterpret_cast<const P*>(base - phase);
  for (std::int64_t p0 = a0 + threadIdx.x; p0 < a1; p0 += std::int64_t(K) * ROWS) {
    P v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const std::int64_t p = p0 + std::int64_t(k) * ROWS;
      const std::int64_t first = p * PACK - phase;  // element of the pack's first slot
      if (p >= a1) continue;
      if (first >= e0 && first + PACK <= e1)
        v[k] = packs[p];
      else
        load_pack_elements(v[k], base, first, e0, e1);
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const std::int64_t p = p0 + std::int64_t(k) * ROWS;
      if (p < a1) reinterpret_cast<P*>(tile)[p - a0] = v[k];
    }
  }
}

// Elements [e0, e1) of a flat tensor of `total` elements into a tile as
// flat_load puts them, as copies still in flight where the device has
// cp.async (shared_copies_wait covers them): whole packs, the packs at the
// tile's ends too, whose elements of the neighbouring tiles are copied and
// never read; element by element only a pack reaching outside the tensor
// (its first and last). Elsewhere flat_load, complete on return.
template <class T, int PACK, int ROWS>
__device__ __forceinline__ void flat_fetch(const T* base, int phase, std::int64_t e0, std::int64_t e1,
                                           std::int64_t total, T* tile) {
#if DUET_DEVICE_CP_ASYNC
  using P = Pack<T, PACK>;
  const auto [a0, a1] = packs_covering<PACK>(phase, e0, e1);
  const P* packs = reinterpret_cast<const P*>(base - phase);
  for (std::int64_t p = a0 + threadIdx.x; p < a1; p += ROWS) {
    const std::int64_t first = p * PACK - phase;
    P* slot = reinterpret_cast<P*>(tile) + (p - a0);
    if (first >= 0 && first + PACK <= total)
      copy_to_shared(slot, packs + p);
    else
      load_pack_elements(*slot, base, first, e0, e1);
  }
#else
  flat_load<T, PACK, ROWS>(base, phase, e0, e1, tile);
#endif
}

// The same tile back out to a flat tensor with the same phase.
template <class T, int PACK, int ROWS>
__device__ __forceinline__ void flat_store(T* base, int phase, std::int64_t e0, std::int64_t e1, const T* tile) {
  using P = Pack<T, PACK>;
  const auto [a0, a1] = packs_covering<PACK>(phase, e0, e1);
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

// One element of the tile, read again on each of its row's passes, so that
// no row stays in registers between passes (a row of 39 held there took
// 96-105 registers and 5 or 4 blocks an SM, and ran slower than reading it
// on each pass; bench/NOTES.md v117). nvcc: a volatile read. AMD: a plain
// read, kept to its pass by pass_fence and chunk_fence, because hipcc
// makes a volatile read through this generic pointer a flat load that
// waits for itself, its 64-bit address in two VGPRs (rows of 55 16-bit
// elements took 256 VGPRs and scratch), where a plain one is an LDS read
// at a constant offset.
template <class T>
__device__ __forceinline__ float tile_value(const T* p) {
#if defined(DUET_VENDOR_HIP)
  return to_float(*p);
#else
  if constexpr (sizeof(T) == 2)
    return to_float(T{*reinterpret_cast<const volatile unsigned short*>(p)});
  else
    return *reinterpret_cast<const volatile float*>(p);
#endif
}

// Between a row's passes: no memory access moves across it, so each pass
// reads its row again, after the previous pass's reads (on AMD, where
// tile_value is a plain read, hipcc would otherwise keep the row in
// registers from one pass to the next). nvcc's cubin is the same with and
// without it.
__device__ __forceinline__ void pass_fence() { asm volatile("" ::: "memory"); }

// Within a pass on AMD, after the last element i of each run of
// kFlatRowsChunk (i a constant once the pass's loop is unrolled): the
// pass's running value `acc` is complete up to here and no read moves
// across, so hipcc holds kFlatRowsChunk (8) of a row's elements at a time,
// not the whole pass (f16 backward rows of 55: 231 VGPRs without). nvcc
// keeps its own schedule.
__device__ __forceinline__ void chunk_fence([[maybe_unused]] int i, [[maybe_unused]] float& acc) {
#if defined(DUET_VENDOR_HIP)
  if (i % kFlatRowsChunk == kFlatRowsChunk - 1) asm volatile("" : "+v"(acc)::"memory");
#endif
}

// Thread t's row of the tile (its elements from xr, dy's from gr) worked in
// place in shared memory, softmax or log_softmax fixed at compile time.
// `each(visit)` is the loop over the row: it calls visit(e, i) for each
// element e, i its place in its run of kFlatRowsChunk (where chunk_fence
// falls); the two loops below make each pass straight-line code at
// constant offsets.
template <class T, bool BACKWARD, int LOG, class Each>
__device__ __forceinline__ void row_passes(T* xr, const T* gr, Each&& each) {
  if constexpr (BACKWARD) {
    float s = 0.0f;
    each([&](int e, int i) {
      s += backward_term(tile_value(xr + e), tile_value(gr + e), LOG);
      chunk_fence(i, s);
    });
    pass_fence();
    each([&](int e, int i) {
      xr[e] = from_float<T>(backward_value(tile_value(xr + e), tile_value(gr + e), s, LOG));
      chunk_fence(i, s);
    });
  } else {
    float m = kNegInf;
    each([&](int e, int i) {
      m = fmaxf(m, tile_value(xr + e));
      chunk_fence(i, m);
    });
    pass_fence();
    float s = 0.0f;
    each([&](int e, int i) {
      s += exp_shifted(tile_value(xr + e), m);
      chunk_fence(i, s);
    });
    pass_fence();
    float scale = LOG ? logf(s) : 1.0f / s;
    each([&](int e, int i) {
      xr[e] = from_float<T>(forward_value(tile_value(xr + e), m, scale, scale, LOG));
      chunk_fence(i, scale);
    });
  }
}

// A row of COLS elements, its length fixed at compile time, each pass
// unrolled whole: run-time loops over the row cost several times the work
// (their trip counts, remainders and indices; bench/NOTES.md v110, v117),
// and v61's loops to the longest row, predicated off past cols, issued the
// longest row's work for every row.
template <class T, bool BACKWARD, int LOG, int COLS>
__device__ __forceinline__ void flat_row(T* xr, const T* gr) {
  row_passes<T, BACKWARD, LOG>(xr, gr, [](auto&& visit) {
#pragma unroll
    for (int i = 0; i < COLS; ++i) visit(i, i);
  });
}

// A row of kFlatRowsChunk * chunks + R elements, chunks known only at run
// time: each pass runs over the chunks, kFlatRowsChunk elements at
// constant offsets a step (the loop's count, compare and pointer a step
// shared by 8 elements), then over the R left. One instance a remainder
// serves every length past the unrolled ones.
template <class T, bool BACKWARD, int LOG, int R>
__device__ __forceinline__ void flat_row_chunked(T* xr, const T* gr, int chunks) {
  row_passes<T, BACKWARD, LOG>(xr, gr, [chunks](auto&& visit) {
#pragma unroll 1
    for (int c = 0; c < chunks; ++c) {
#pragma unroll
      for (int i = 0; i < kFlatRowsChunk; ++i) visit(c * kFlatRowsChunk + i, i);
    }
#pragma unroll
    for (int i = 0; i < R; ++i) visit(chunks * kFlatRowsChunk + i, i);
  });
}

// The row of `cols` elements, cols in [LO, HI], to the instance of its
// length: a binary search of uniform branches (about log2(HI) compares a
// row).
template <class T, bool BACKWARD, int LOG, int LO, int HI>
__device__ __forceinline__ void flat_row_of(T* xr, const T* gr, int cols) {
  if constexpr (LO == HI) {
    flat_row<T, BACKWARD, LOG, LO>(xr, gr);
  } else {
    constexpr int MID = (LO + HI) / 2;
    if (cols <= MID)
      flat_row_of<T, BACKWARD, LOG, LO, MID>(xr, gr, cols);
    else
      flat_row_of<T, BACKWARD, LOG, MID + 1, HI>(xr, gr, cols);
  }
}

// A row past the unrolled lengths to the instance of its remainder R in
// [LO, HI] (cols % 8), the same way.
template <class T, bool BACKWARD, int LOG, int LO, int HI>
__device__ __forceinline__ void flat_row_chunked_of(T* xr, const T* gr, int cols) {
  if constexpr (LO == HI) {
    flat_row_chunked<T, BACKWARD, LOG, LO>(xr, gr, cols / kFlatRowsChunk);
  } else {
    constexpr int MID = (LO + HI) / 2;
    if (cols % kFlatRowsChunk <= MID)
      flat_row_chunked_of<T, BACKWARD, LOG, LO, MID>(xr, gr, cols);
    else
      flat_row_chunked_of<T, BACKWARD, LOG, MID + 1, HI>(xr, gr, cols);
  }
}

// Any row flat_rows takes: its own instance up to UNROLLED elements, in
// chunks past them (up to MAX_COLS).
template <class T, bool BACKWARD, int LOG, int UNROLLED, int MAX_COLS>
__device__ __forceinline__ void flat_row_any(T* xr, const T* gr, int cols) {
  if constexpr (MAX_COLS > UNROLLED) {
    if (cols > UNROLLED) {
      flat_row_chunked_of<T, BACKWARD, LOG, 0, kFlatRowsChunk - 1>(xr, gr, cols);
      return;
    }
  }
  flat_row_of<T, BACKWARD, LOG, 1, UNROLLED>(xr, gr, cols);
}

// MAX_COLS: the longest row it takes (flat_rows_max_cols; the launch
// refuses longer ones); UNROLLED: the longest with an instance of its own.
template <class T, int PACK, int ROWS, bool BACKWARD, int UNROLLED, int MAX_COLS>
__global__ void __launch_bounds__(ROWS) flat_rows_kernel(SoftmaxArgs a) {
  extern __shared__ float4 dynamic_smem[];
  const std::int64_t cols = a.cols;
  // Every tensor starts at the same offset within a pack (the runtime checks
  // it), so one phase serves them all.
  const int phase = static_cast<int>(reinterpret_cast<std::uintptr_t>(a.x) / sizeof(T) % PACK);
  // A tile of each tensor: ROWS x cols elements plus up to PACK - 1 before
  // the first, in whole packs.
  const std::int64_t tile_packs = (std::int64_t(ROWS) * cols + 2 * (PACK - 1)) / PACK;
  // kFlatRowsTiles (2) tiles of x, then as many of dy: the block works one
  // while the next one's copies are in flight.
  T* const tiles = reinterpret_cast<T*>(dynamic_smem);
  const auto x_tile = [&](int b) { return tiles + b * tile_packs * PACK; };
  const auto g_tile = [&](int b) { return tiles + (kFlatRowsTiles + b) * tile_packs * PACK; };
  const std::int64_t total = a.rows * cols;
  const std::int64_t step = std::int64_t(gridDim.x) * ROWS;
  const auto fetch = [&](std::int64_t row0, int b) {
    const std::int64_t e0 = row0 * cols, e1 = (row0 + ROWS < a.rows ? row0 + ROWS : a.rows) * cols;
    flat_fetch<T, PACK, ROWS>(static_cast<const T*>(a.x), phase, e0, e1, total, x_tile(b));
    if constexpr (BACKWARD) flat_fetch<T, PACK, ROWS>(static_cast<const T*>(a.dy), phase, e0, e1, total, g_tile(b));
  };
  std::int64_t row0 = std::int64_t(blockIdx.x) * ROWS;
  if (row0 < a.rows) fetch(row0, 0);
  shared_copies_commit();
  for (int b = 0; row0 < a.rows; row0 += step, b ^= 1) {
    // The next tile's copies go to the other tile, read out before the
    // last barrier; then this tile's (the group before them) are waited for.
    if (row0 + step < a.rows) fetch(row0 + step, b ^ 1);
    shared_copies_commit();
    shared_copies_wait<1>();
    __syncthreads();
    const std::int64_t rows = a.rows - row0 < ROWS ? a.rows - row0 : ROWS;
    const std::int64_t e0 = row0 * cols, e1 = (row0 + rows) * cols;
    if (threadIdx.x < rows) {
      // Row t of the tile, from the element e0 + t cols (the tile starts at
      // the pack boundary (e0 + phase) % PACK elements before e0).
      const int at = static_cast<int>((e0 + phase) % PACK) + static_cast<int>(threadIdx.x) * static_cast<int>(cols);
      if (a.log)
        flat_row_any<T, BACKWARD, 1, UNROLLED, MAX_COLS>(x_tile(b) + at, g_tile(b) + at, static_cast<int>(cols));
      else
        flat_row_any<T, BACKWARD, 0, UNROLLED, MAX_COLS>(x_tile(b) + at, g_tile(b) + at, static_cast<int>(cols));
    }
    __syncthreads();
    flat_store<T, PACK, ROWS>(static_cast<T*>(a.out), phase, e0, e1, x_tile(b));
    __syncthreads();  // the tile is read out before the copies after next land in it
  }
}

template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::flat_rows, I> = {
    &flat_rows_kernel<EntryStorage<I>, kEntry<I>.vec, kFlatRowsBlock, kEntry<I>.backward,
                      flat_rows_unrolled_cols(kEntry<I>.vec), flat_rows_max_cols(kEntry<I>.vec, kEntry<I>.backward)>};

}  // namespace duet::DUET_NS::kernels
