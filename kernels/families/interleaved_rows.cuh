// interleaved_rows: rows whose elements lie col_stride apart and whose
// neighbours are adjacent in memory, as softmax over a non-last dimension
// sees them. Dim 1 of a contiguous [N, C, H, W] is N outer rows x H*W
// interleaved rows of C elements, H*W apart: element c of row (r, i) is at
// r * stride + c * col_stride + i.
//
// A block takes a tile of `a.tile` lanes of one outer row, a lane VEC
// neighbouring rows (a pack of VEC = 4 elements where every tensor's rows
// and strides sit on packs, else VEC = 1); its threads are (lane,
// slot) = (t % tile, t / tile), and slot s reads elements s, s + slots,
// s + 2 slots, ... of its lane's rows, so the lanes of a warp read adjacent
// addresses. The slots' partial results meet in shared memory.
//   VPT > 0: a thread keeps its VPT elements in registers (rows of at most
//   slots x VPT elements): one read, one write.
//   VPT == 0: rows of any length in two passes over the tile, the second
//   in reverse order so it starts with what the first read last (still in
//   L2 when the tile is not).
// Grid: blocks of tile x slots threads (at most interleaved_max_threads),
// one tile each, up to the planner's waves; no dynamic shared memory, no
// workspace. interleaved_smem and interleaved_cluster (below) hold a tile
// in shared memory.
#pragma once

#include <type_traits>

#include "common/family_kernels.cuh"
#include "common/math.cuh"
#include "common/reduce.cuh"
#include "common/storage.cuh"
#include "softmax_args.hpp"

namespace duet::DUET_NS::kernels {

// The slots' reductions of a lane (every slot's values of this thread's
// lane combined, every thread of the lane getting the result), in two
// barriers: the slots a warp holds combine by shuffles (tile is a power of
// two, so lanes t and t ^ (a multiple of tile) hold the same lane), the
// first slot of each warp stores the warp's part, and after a barrier a
// thread a row of the tile combines the parts in warp order into the
// result, which every thread reads after the second. (A tree over the
// slots in shared memory took a barrier a level, two trees a forward:
// 14 barriers a tile at 26 slots; bench/NOTES.md v77.)
// The scratch: kSlotScratchFloats<VEC, threads> floats, the warps' parts
// first, the result after them. A reduction writes the parts only after
// every thread has passed the previous one's second barrier (having read
// its result), and the result only after its own first (every thread has
// stored its part, so none still reads the previous result): consecutive
// reductions need no barrier between them.
inline constexpr int kSlotResultFloats = 2 * kInterleavedLanesMax * kInterleavedPack;
template <int VEC, int THREADS>
inline constexpr int kSlotScratchFloats = 2 * THREADS * VEC + kSlotResultFloats;

// Combines each row's values over the slots of this thread's lane by
// combine(a, b): V is float (a value a row) or float2 (a (max, sum) pair).
// Every thread of a block takes part (shuffles over whole warps); the
// block's threads are whole warps (tile x slots, planner.cpp's
// slots_for).
template <int VEC, class V, class Combine>
__device__ __forceinline__ void reduce_slots(V (&v)[VEC], float* scratch, int lane, int slot, int tile, int slots,
                                             Combine combine) {
  constexpr int W = DUET_DEVICE_WARP_SIZE;
  const auto shuffle = [](V x, int offset) {
    if constexpr (sizeof(V) == sizeof(float)) {
      return __shfl_xor_sync(DUET_FULL_MASK, x, offset, W);
    } else {
      return make_float2(__shfl_xor_sync(DUET_FULL_MASK, x.x, offset, W),
                         __shfl_xor_sync(DUET_FULL_MASK, x.y, offset, W));
    }
  };
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    for (int offset = tile; offset < W; offset *= 2) v[e] = combine(v[e], shuffle(v[e], offset));
  // Slots a warp holds (1 where a tile spans a warp or more), and the parts.
  const int per_warp = tile < W ? W / tile : 1;
  const int parts = (slots + per_warp - 1) / per_warp;
  V* const part = reinterpret_cast<V*>(scratch);
  V* const result = reinterpret_cast<V*>(scratch + 2 * static_cast<int>(blockDim.x) * VEC);
  if (slot % per_warp == 0)
#pragma unroll
    for (int e = 0; e < VEC; ++e) part[(slot / per_warp * tile + lane) * VEC + e] = v[e];
  __syncthreads();
  // Row r of the tile (lane r / VEC, element r % VEC) is thread r %
  // threads's: where a block has fewer threads than the tile has rows
  // (fewer slots than VEC), a thread takes several.
#pragma unroll 1
  for (int r = static_cast<int>(threadIdx.x); r < tile * VEC; r += static_cast<int>(blockDim.x)) {
    V all = part[r];
    for (int p = 1; p < parts; ++p) all = combine(all, part[p * tile * VEC + r]);
    result[r] = all;
  }
  __syncthreads();
#pragma unroll
  for (int e = 0; e < VEC; ++e) v[e] = result[lane * VEC + e];
}

// The same by a tree over the slots in shared memory (a barrier a level,
// one more at each end; 2 x threads x VEC floats of scratch). The 16-bit
// register tiles keep it: forwards always (with reduce_slots beside their
// 6 or 7 packs they ran slower at a few slots a tile and no faster at
// many), backwards at a few slots (bench/NOTES.md v77, v79).
template <int VEC, class Op>
__device__ __forceinline__ void tree_across_slots(float (&v)[VEC], float* scratch, int lane, int slot, int tile,
                                                  int slots, Op op) {
  float* mine = scratch + (slot * tile + lane) * VEC;
#pragma unroll
  for (int e = 0; e < VEC; ++e) mine[e] = v[e];
  __syncthreads();
  slot_tree(slot, slots, [&](int half) {
    const float* other = mine + half * tile * VEC;
#pragma unroll
    for (int e = 0; e < VEC; ++e) mine[e] = op(mine[e], other[e]);
  });
#pragma unroll
  for (int e = 0; e < VEC; ++e) v[e] = scratch[lane * VEC + e];
  __syncthreads();
}

// The same for a few slots (at most kFoldSlotsMax: a thread reads slots x
// VEC values), in one barrier: every thread stores its values, then folds
// its lane's values of every slot in slot order (each slot of a lane gets
// the same result). Consecutive folds alternate the two halves of the
// scratch (2 x threads x VEC floats; `half` 0 or 1): a fold writes its half
// only after every thread has passed the previous fold's barrier, so after
// its reads of this half in the fold before that. A tree took four
// barriers a reduction at three slots, a fifth of the 16-bit forwards'
// stall samples (bench/NOTES.md v89).
inline constexpr int kFoldSlotsMax = 8;
template <int VEC, class Op>
__device__ __forceinline__ void fold_across_slots(float (&v)[VEC], float* scratch, int half, int lane, int slot,
                                                  int tile, int slots, Op op) {
  // Value e of (slot, lane) at (slot * VEC + e) * tile + lane: a warp's
  // lanes read adjacent words.
  float* const region = scratch + half * static_cast<int>(blockDim.x) * VEC;
#pragma unroll
  for (int e = 0; e < VEC; ++e) region[(slot * VEC + e) * tile + lane] = v[e];
  __syncthreads();
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    v[e] = region[e * tile + lane];
    for (int p = 1; p < slots; ++p) v[e] = op(v[e], region[(p * VEC + e) * tile + lane]);
  }
}
// fold_across_slots for the max of 16-bit T's packs of four held as words
// (two halves at a time, max_halves): a max of 16-bit values is one, so
// the slots exchange the packed words.
template <class T>
__device__ __forceinline__ Words8 fold_max_words(Words8 mine, float* scratch, int half, int lane, int slot, int tile,
                                                 int slots) {
  uint2* const region = reinterpret_cast<uint2*>(scratch + half * static_cast<int>(blockDim.x) * 4);
  region[slot * tile + lane] = make_uint2(mine.w[0], mine.w[1]);
  __syncthreads();
  uint2 all = region[lane];
  for (int p = 1; p < slots; ++p) {
    const uint2 o = region[p * tile + lane];
    all = make_uint2(max_halves<T>(all.x, o.x), max_halves<T>(all.y, o.y));
  }
  return Words8{{all.x, all.y}};
}

// reduce_slots over online (max, sum) pairs: this thread's in m and s, its
// lane's rows' pairs out.
template <int VEC>
__device__ __forceinline__ void pair_across_slots(float (&m)[VEC], float (&s)[VEC], float* scratch, int lane,
                                                  int slot, int tile, int slots) {
  float2 p[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) p[e] = make_float2(m[e], s[e]);
  reduce_slots<VEC>(p, scratch, lane, slot, tile, slots, [](float2 a, float2 b) {
    combine_pair(a.x, a.y, b.x, b.y);
    return a;
  });
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    m[e] = p[e].x;
    s[e] = p[e].y;
  }
}

template <int VEC>
inline constexpr int kInterleavedThreads = interleaved_max_threads(VEC);

// The register tiles in two forms. The lean one (bench/NOTES.md v88,
// v89: the forwards count tiles on instead of dividing, test places in
// 32 bits and step their addresses, hold 16-bit packs as words with their
// max two halves at a time, write per LOG, fold a few slots in one
// barrier) is built for NVIDIA sm_90 and later, where it was measured;
// sm_80 and AMD build the previous form (032613c), whose 16-bit forward
// entries of 6 spilled or used scratch with the lean one's changes (ptxas
// -v, -Rpass-analysis). A preprocessor choice, so that sm_90 compiles the
// measured text: as constant expressions the same choice made ptxas spill
// in the f16 forwards at 64 registers (the PTX differed only in the order
// of its registers). One form again once the lean one is measured on
// sm_80 and fitted there.
#if defined(DUET_VENDOR_HIP) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900)
#define DUET_INTERLEAVED_LEAN 0
#else
#define DUET_INTERLEAVED_LEAN 1
#endif
#if DUET_INTERLEAVED_LEAN
template <class T, int VEC, int VPT, bool BACKWARD>
__device__ __forceinline__ void interleaved_rows(const SoftmaxArgs& a) {
  // The forward's 16-bit packs of four as two words (the packed max reads
  // them).
  using V = std::conditional_t<sizeof(T) == 2 && VEC == 4 && !BACKWARD, Words8, PackWords<T, VEC>>;
  constexpr bool kPackedMax = std::is_same_v<V, Words8> && DUET_DEVICE_CVT_RN16;
  // Loads a VPT == 0 thread has in flight: 32 bytes of packs forward, 16
  // of each tensor backward (half the register entry's: a pass's running
  // state and its addresses take the rest of 64 registers), 6 single
  // elements (3 of each tensor backward; 8 and 4 spilled 8 bytes on sm_80).
  constexpr int K = VEC == 1 ? (BACKWARD ? 3 : 6) : (BACKWARD ? 16 : 32) / int(sizeof(V));
  // Trees only (the 16-bit register forwards), else reduce_slots.
  constexpr bool kTrees = VPT > 0 && !BACKWARD && sizeof(T) == 2;
  // The 16-bit register backwards reduce by a tree below this many slots
  // (rows of 16 and 21 ran faster so, rows of 100 slower; bench/NOTES.md
  // v79).
  constexpr int kTreeBelowSlots = 12;
  __shared__ float scratch[kTrees ? 2 * kInterleavedThreads<VEC> * VEC : kSlotScratchFloats<VEC, kInterleavedThreads<VEC>>];
  const int tile = a.tile;
  const int slots = static_cast<int>(blockDim.x) / tile;
  const int lane = static_cast<int>(threadIdx.x) % tile;
  const int slot = static_cast<int>(threadIdx.x) / tile;
  const std::int64_t tile_rows = std::int64_t(tile) * VEC;
  const std::int64_t tiles = (a.inner + tile_rows - 1) / tile_rows;
  const std::int64_t cols = a.cols;
  // Tile b's outer row r and place q in it. The forwards count them on from
  // the block's first tile: a 64-bit division a tile cost about as many
  // instructions as a thread's arithmetic on a short row's elements
  // (bench/NOTES.md v88). The backwards divide: their register entries,
  // capped at 48 registers, spilled with the counters (ptxas -v, sm_90).
  std::int64_t r = blockIdx.x / tiles, q = blockIdx.x % tiles;
  const unsigned r_step = static_cast<unsigned>(gridDim.x / tiles), q_step = static_cast<unsigned>(gridDim.x % tiles);
  for (std::int64_t b = blockIdx.x; b < a.rows * tiles; b += gridDim.x) {
    if constexpr (BACKWARD) {
      r = b / tiles;
      q = b - r * tiles;
    }
    const std::int64_t i = q * tile_rows + std::int64_t(lane) * VEC;
    const bool live = i < a.inner;  // the last tile's spare lanes take part in the barriers only
    const T* x = static_cast<const T*>(a.x) + r * a.x_stride + i;
    const T* dy = BACKWARD ? static_cast<const T*>(a.dy) + r * a.dy_stride + i : nullptr;
    T* out = static_cast<T*>(a.out) + r * a.out_stride + i;
    // Packs stay in their storage form until used (a 16-bit pack of four
    // in two registers), converted element by element. A register tile's
    // packs are read under evict_last (bench/NOTES.md v104b, v108), the
    // two-pass entries' (VPT == 0) plainly.
    const auto load_tile = [&](const T* p, std::int64_t stride, std::int64_t c) {
      return load_hinted<LoadHint::keep>(reinterpret_cast<const V*>(p + c * stride));
    };
    const auto load = [&](const T* p, std::int64_t stride, std::int64_t c) {
      return *reinterpret_cast<const V*>(p + c * stride);
    };
    const auto at = [](const V& pack, int e) { return element<T>(pack, e); };
    const auto store = [&](std::int64_t c, auto value) {
      store_words(reinterpret_cast<V*>(out + c * a.out_col_stride), make_pack<T, V>(value));
    };
    // A thread's state per row of its lane: the max and, after the sums,
    // 1/s (softmax) or log s (log_softmax), which forward_value reads.
    float m[VEC], s[VEC];

    if constexpr (VPT > 0) {
      V v[VPT];
      V g[BACKWARD ? VPT : 1];
      // Forward: a place past the row holds -inf, which the max ignores and
      // whose exp is 0, so the max and the sum run over every place without
      // a test; a test an element compiles to a branch around each
      // element's exp (bench/NOTES.md v54).
      const V empty = make_pack<T, V>([](int) { return kNegInf; });
      // Whether place k holds an element. The forward tests it in 32 bits
      // (a register tile's rows are at most slots x VPT elements) and steps
      // the places' addresses from the first: a 64-bit index and product a
      // place took about as many instructions as its elements' arithmetic
      // (Nsight Compute's source counters, bench/NOTES.md v88). The
      // backward's entries, capped at 48 registers, spilled so.
      const int held_cols = live ? static_cast<int>(cols) : 0;
      const auto has = [&](int k) {
        if constexpr (BACKWARD)
          return live && slot + std::int64_t(k) * slots < cols;
        else
          return slot + k * slots < held_cols;
      };
      if constexpr (BACKWARD) {
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
          const std::int64_t c = slot + std::int64_t(k) * slots;
          if (live && c < cols) {
            v[k] = load_tile(x, a.x_col_stride, c);
            g[k] = load_tile(dy, a.dy_col_stride, c);
          }
        }
      } else {
        const std::int64_t x_step = std::int64_t(slots) * a.x_col_stride;
        const T* xk = x + std::int64_t(slot) * a.x_col_stride;
#pragma unroll
        for (int k = 0; k < VPT; ++k, xk += x_step)
          v[k] = has(k) ? load_hinted<LoadHint::keep>(reinterpret_cast<const V*>(xk)) : empty;
      }
      if constexpr (BACKWARD) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          s[e] = 0.0f;
#pragma unroll
          for (int k = 0; k < VPT; ++k)
            if (has(k)) s[e] += backward_term(at(v[k], e), at(g[k], e), a.log);
        }
        if (sizeof(T) == 2 && slots < kTreeBelowSlots)
          tree_across_slots<VEC>(s, scratch, lane, slot, tile, slots, SumOp{});
        else
          reduce_slots<VEC>(s, scratch, lane, slot, tile, slots, SumOp{});
#pragma unroll
        for (int k = 0; k < VPT; ++k)
          if (has(k))
            store(slot + std::int64_t(k) * slots,
                  [&](int e) { return backward_value(at(v[k], e), at(g[k], e), s[e], a.log); });
      } else {
        // A fold over a few slots (16-bit packs, else trees; below).
        const bool fold = kPackedMax && slots <= kFoldSlotsMax;
        if constexpr (kPackedMax) {
          // Two halves at a time on the packs' words.
          Words8 mw{{kNegInfHalves<T>, kNegInfHalves<T>}};
#pragma unroll
          for (int k = 0; k < VPT; ++k)
#pragma unroll
            for (int w = 0; w < 2; ++w) mw.w[w] = max_halves<T>(mw.w[w], v[k].w[w]);
          if (fold) mw = fold_max_words<T>(mw, scratch, 0, lane, slot, tile, slots);
#pragma unroll
          for (int e = 0; e < VEC; ++e) m[e] = at(mw, e);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            m[e] = kNegInf;
#pragma unroll
            for (int k = 0; k < VPT; ++k) m[e] = fmaxf(m[e], at(v[k], e));
          }
        }
        if constexpr (sizeof(T) == 4) {
          // The thread's pair: its max, then its sum shifted by it (by 0
          // where it holds no finite value, so that s stays 0 or NaN); one
          // reduction of the pairs over the slots.
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float shift = m[e] == kNegInf ? 0.0f : m[e];
            s[e] = 0.0f;
#pragma unroll
            for (int k = 0; k < VPT; ++k) s[e] += exp_shifted(at(v[k], e), shift);
          }
          pair_across_slots<VEC>(m, s, scratch, lane, slot, tile, slots);
        } else {
          // The max over the slots first, then the sums: folds at a few
          // slots, else trees. A pair a row (the f32 path) spilled beside
          // 16-bit packs of 6 and 7 (ptxas -v sm_90) and, where it no
          // longer did, ran 4% slower on more instructions (v88).
          if (!fold) tree_across_slots<VEC>(m, scratch, lane, slot, tile, slots, MaxOp{});
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            s[e] = 0.0f;
#pragma unroll
            for (int k = 0; k < VPT; ++k) s[e] += exp_shifted(at(v[k], e), m[e]);
          }
          if (fold)
            fold_across_slots<VEC>(s, scratch, 1, lane, slot, tile, slots, SumOp{});
          else
            tree_across_slots<VEC>(s, scratch, lane, slot, tile, slots, SumOp{});
        }
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] = a.log ? logf(s[e]) : 1.0f / s[e];
        // The writes compiled for softmax and for log_softmax, chosen once
        // (a choice an element computed both; v88).
        const auto write = [&](auto log) {
          T* ok = out + std::int64_t(slot) * a.out_col_stride;
          const std::int64_t o_step = std::int64_t(slots) * a.out_col_stride;
#pragma unroll
          for (int k = 0; k < VPT; ++k, ok += o_step)
            if (has(k))
              store_words(reinterpret_cast<V*>(ok), make_pack<T, V>([&](int e) {
                            return forward_value(at(v[k], e), m[e], s[e], s[e], log_flag(log));
                          }));
        };
        if (a.log)
          write(std::integral_constant<int, 1>{});
        else
          write(std::integral_constant<int, 0>{});
      }
    } else {
      // Pass 1: this slot's share of the rows, K loads at a time.
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        m[e] = kNegInf;
        s[e] = 0.0f;
      }
      if (live) {
        for (std::int64_t c0 = slot; c0 < cols; c0 += std::int64_t(K) * slots) {
          V v[K];
          V g[BACKWARD ? K : 1];
          int n = 0;  // loads this step: the first n of v
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const std::int64_t c = c0 + std::int64_t(k) * slots;
            if (c < cols) {
              v[k] = load(x, a.x_col_stride, c);
              if constexpr (BACKWARD) g[k] = load(dy, a.dy_col_stride, c);
              n = k + 1;
            }
          }
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            if constexpr (BACKWARD) {
#pragma unroll
              for (int k = 0; k < K; ++k)
                if (k < n) s[e] += backward_term(at(v[k], e), at(g[k], e), a.log);
            } else {
              online_add<K>(m[e], s[e], [&](int k) { return k < n ? at(v[k], e) : kNegInf; });
            }
          }
        }
      }
      if constexpr (BACKWARD) {
        reduce_slots<VEC>(s, scratch, lane, slot, tile, slots, SumOp{});
      } else {
        pair_across_slots<VEC>(m, s, scratch, lane, slot, tile, slots);
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] = a.log ? logf(s[e]) : 1.0f / s[e];
      }
      // Pass 2, last element first, K loads at a time.
      if (live && slot < cols) {
        const std::int64_t last = slot + (cols - 1 - slot) / slots * slots;
        for (std::int64_t c0 = last; c0 >= 0; c0 -= std::int64_t(K) * slots) {
          V v[K];
          V g[BACKWARD ? K : 1];
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const std::int64_t c = c0 - std::int64_t(k) * slots;
            if (c >= 0) {
              v[k] = load(x, a.x_col_stride, c);
              if constexpr (BACKWARD) g[k] = load(dy, a.dy_col_stride, c);
            }
          }
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const std::int64_t c = c0 - std::int64_t(k) * slots;
            if (c < 0) break;
            if constexpr (BACKWARD)
              store(c, [&](int e) { return backward_value(at(v[k], e), at(g[k], e), s[e], a.log); });
            else
              store(c, [&](int e) { return forward_value(at(v[k], e), m[e], s[e], s[e], a.log); });
          }
        }
      }
    }
    if constexpr (!BACKWARD) {
      r += r_step;
      q += q_step;
      if (q >= tiles) {
        q -= tiles;
        ++r;
      }
    }
  }
}

#else  // the previous form
template <class T, int VEC, int VPT, bool BACKWARD>
__device__ __forceinline__ void interleaved_rows(const SoftmaxArgs& a) {
  using V = PackWords<T, VEC>;
  // Loads a VPT == 0 thread has in flight: 32 bytes of packs forward, 16
  // of each tensor backward (half the register entry's: a pass's running
  // state and its addresses take the rest of 64 registers), 6 single
  // elements (3 of each tensor backward; 8 and 4 spilled 8 bytes on sm_80).
  constexpr int K = VEC == 1 ? (BACKWARD ? 3 : 6) : (BACKWARD ? 16 : 32) / int(sizeof(V));
  // Trees only (the 16-bit register forwards), else reduce_slots.
  constexpr bool kTrees = VPT > 0 && !BACKWARD && sizeof(T) == 2;
  // The 16-bit register backwards reduce by a tree below this many slots
  // (rows of 16 and 21 ran faster so, rows of 100 slower; bench/NOTES.md
  // v79).
  constexpr int kTreeBelowSlots = 12;
  __shared__ float scratch[kTrees ? 2 * kInterleavedThreads<VEC> * VEC : kSlotScratchFloats<VEC, kInterleavedThreads<VEC>>];
  const int tile = a.tile;
  const int slots = static_cast<int>(blockDim.x) / tile;
  const int lane = static_cast<int>(threadIdx.x) % tile;
  const int slot = static_cast<int>(threadIdx.x) / tile;
  const std::int64_t tile_rows = std::int64_t(tile) * VEC;
  const std::int64_t tiles = (a.inner + tile_rows - 1) / tile_rows;
  const std::int64_t cols = a.cols;
  for (std::int64_t b = blockIdx.x; b < a.rows * tiles; b += gridDim.x) {
    const std::int64_t r = b / tiles;
    const std::int64_t i = (b % tiles) * tile_rows + std::int64_t(lane) * VEC;
    const bool live = i < a.inner;  // the last tile's spare lanes take part in the barriers only
    const T* x = static_cast<const T*>(a.x) + r * a.x_stride + i;
    const T* dy = BACKWARD ? static_cast<const T*>(a.dy) + r * a.dy_stride + i : nullptr;
    T* out = static_cast<T*>(a.out) + r * a.out_stride + i;
    // Packs stay in their storage form until used (a 16-bit pack of four
    // in two registers), converted element by element. A register tile's
    // packs are read under evict_last (bench/NOTES.md v104b, v108), the
    // two-pass entries' (VPT == 0) plainly.
    const auto load_tile = [&](const T* p, std::int64_t stride, std::int64_t c) {
      return load_hinted<LoadHint::keep>(reinterpret_cast<const V*>(p + c * stride));
    };
    const auto load = [&](const T* p, std::int64_t stride, std::int64_t c) {
      return *reinterpret_cast<const V*>(p + c * stride);
    };
    const auto at = [](const V& pack, int e) { return element<T>(pack, e); };
    const auto store = [&](std::int64_t c, auto value) {
      store_words(reinterpret_cast<V*>(out + c * a.out_col_stride), make_pack<T, V>(value));
    };
    // A thread's state per row of its lane: the max and, after the sums,
    // 1/s (softmax) or log s (log_softmax), which forward_value reads.
    float m[VEC], s[VEC];

    if constexpr (VPT > 0) {
      V v[VPT];
      V g[BACKWARD ? VPT : 1];
      // Forward: a place past the row holds -inf, which the max ignores and
      // whose exp is 0, so the max and the sum run over every place without
      // a test; a test an element compiles to a branch around each
      // element's exp (bench/NOTES.md v54).
      const V empty = make_pack<T, V>([](int) { return kNegInf; });
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        const std::int64_t c = slot + std::int64_t(k) * slots;
        if constexpr (!BACKWARD) v[k] = empty;
        if (live && c < cols) {
          v[k] = load_tile(x, a.x_col_stride, c);
          if constexpr (BACKWARD) g[k] = load_tile(dy, a.dy_col_stride, c);
        }
      }
      const auto has = [&](int k) { return live && slot + std::int64_t(k) * slots < cols; };
      if constexpr (BACKWARD) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          s[e] = 0.0f;
#pragma unroll
          for (int k = 0; k < VPT; ++k)
            if (has(k)) s[e] += backward_term(at(v[k], e), at(g[k], e), a.log);
        }
        if (sizeof(T) == 2 && slots < kTreeBelowSlots)
          tree_across_slots<VEC>(s, scratch, lane, slot, tile, slots, SumOp{});
        else
          reduce_slots<VEC>(s, scratch, lane, slot, tile, slots, SumOp{});
#pragma unroll
        for (int k = 0; k < VPT; ++k)
          if (has(k))
            store(slot + std::int64_t(k) * slots,
                  [&](int e) { return backward_value(at(v[k], e), at(g[k], e), s[e], a.log); });
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          m[e] = kNegInf;
#pragma unroll
          for (int k = 0; k < VPT; ++k) m[e] = fmaxf(m[e], at(v[k], e));
        }
        if constexpr (sizeof(T) == 4) {
          // The thread's pair: its max, then its sum shifted by it (by 0
          // where it holds no finite value, so that s stays 0 or NaN); one
          // reduction of the pairs over the slots.
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float shift = m[e] == kNegInf ? 0.0f : m[e];
            s[e] = 0.0f;
#pragma unroll
            for (int k = 0; k < VPT; ++k) s[e] += exp_shifted(at(v[k], e), shift);
          }
          pair_across_slots<VEC>(m, s, scratch, lane, slot, tile, slots);
        } else {
          // The max over the slots first, then the sums, by trees: a pair
          // a row beside 16-bit packs of 6 and 7 spilled (ptxas -v sm_90).
          tree_across_slots<VEC>(m, scratch, lane, slot, tile, slots, MaxOp{});
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            s[e] = 0.0f;
#pragma unroll
            for (int k = 0; k < VPT; ++k) s[e] += exp_shifted(at(v[k], e), m[e]);
          }
          tree_across_slots<VEC>(s, scratch, lane, slot, tile, slots, SumOp{});
        }
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] = a.log ? logf(s[e]) : 1.0f / s[e];
#pragma unroll
        for (int k = 0; k < VPT; ++k)
          if (has(k))
            store(slot + std::int64_t(k) * slots,
                  [&](int e) { return forward_value(at(v[k], e), m[e], s[e], s[e], a.log); });
      }
    } else {
      // Pass 1: this slot's share of the rows, K loads at a time.
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        m[e] = kNegInf;
        s[e] = 0.0f;
      }
      if (live) {
        for (std::int64_t c0 = slot; c0 < cols; c0 += std::int64_t(K) * slots) {
          V v[K];
          V g[BACKWARD ? K : 1];
          int n = 0;  // loads this step: the first n of v
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const std::int64_t c = c0 + std::int64_t(k) * slots;
            if (c < cols) {
              v[k] = load(x, a.x_col_stride, c);
              if constexpr (BACKWARD) g[k] = load(dy, a.dy_col_stride, c);
              n = k + 1;
            }
          }
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            if constexpr (BACKWARD) {
#pragma unroll
              for (int k = 0; k < K; ++k)
                if (k < n) s[e] += backward_term(at(v[k], e), at(g[k], e), a.log);
            } else {
              online_add<K>(m[e], s[e], [&](int k) { return k < n ? at(v[k], e) : kNegInf; });
            }
          }
        }
      }
      if constexpr (BACKWARD) {
        reduce_slots<VEC>(s, scratch, lane, slot, tile, slots, SumOp{});
      } else {
        pair_across_slots<VEC>(m, s, scratch, lane, slot, tile, slots);
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] = a.log ? logf(s[e]) : 1.0f / s[e];
      }
      // Pass 2, last element first, K loads at a time.
      if (live && slot < cols) {
        const std::int64_t last = slot + (cols - 1 - slot) / slots * slots;
        for (std::int64_t c0 = last; c0 >= 0; c0 -= std::int64_t(K) * slots) {
          V v[K];
          V g[BACKWARD ? K : 1];
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const std::int64_t c = c0 - std::int64_t(k) * slots;
            if (c >= 0) {
              v[k] = load(x, a.x_col_stride, c);
              if constexpr (BACKWARD) g[k] = load(dy, a.dy_col_stride, c);
            }
          }
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const std::int64_t c = c0 - std::int64_t(k) * slots;
            if (c < 0) break;
            if constexpr (BACKWARD)
              store(c, [&](int e) { return backward_value(at(v[k], e), at(g[k], e), s[e], a.log); });
            else
              store(c, [&](int e) { return forward_value(at(v[k], e), m[e], s[e], s[e], a.log); });
          }
        }
      }
    }
  }
}

#endif  // DUET_INTERLEAVED_LEAN

// The 16-bit forwards' wide entries (interleaved_vpt_wide) fit 64
// registers on sm_90 and spill on sm_80 (ptxas -v): they are built for
// sm_90 and later, where the planner takes them, and empty elsewhere.
template <class T, int VEC, int VPT, bool BACKWARD>
inline constexpr bool kInterleavedWide = interleaved_is_wide(kDTypeOf<T>, VEC, VPT, BACKWARD);
// Registers a thread where an entry is capped below its launch bounds'
// 64 (0: not capped; ptxas -v, no spills), the register entries on packs:
//   backward 48 (16-bit on sm_80: 56, where 48 spilled 12 bytes): blocks
//     of 13 warps (rows of 100) fit three an SM instead of two, and the
//     SM has half as many bytes more in flight (H100 f32 and bf16 [N,100,
//     64,64] dim 1: 0.89 / 0.84 of copy -> 1.00; bench/NOTES.md v79);
//   f32 forward 56 (52 used): blocks of 6 warps (rows of 21) fit six an
//     SM instead of five.
// Fewer registers a thread for the forwards (fewer packs in flight, more
// blocks) ran slower (v79). Whether an entry is capped must not depend on
// the target: the host's pass picks the same kernel as the device's.
template <class T, int VEC, int VPT, bool BACKWARD>
inline constexpr int kInterleavedRegisters =
    !interleaved_is_register_capped(kDTypeOf<T>, VEC, VPT, BACKWARD) ? 0
    : BACKWARD ? (sizeof(T) == 4 || DUET_DEVICE_SM90 ? 48 : 56)
               : 56;
template <class T, int VEC, int VPT, bool BACKWARD>
__device__ __forceinline__ void interleaved_rows_entry(const SoftmaxArgs& a) {
  if constexpr (kInterleavedWide<T, VEC, VPT, BACKWARD> && !DUET_DEVICE_SM90)
    (void)a;
  else
    interleaved_rows<T, VEC, VPT, BACKWARD>(a);
}
// Two kernels of one name: the launch bounds' 64 registers, or a cap
// (DUET_MAX_REGISTERS, backends/vendor). A cap of 64 is not the bounds'
// 64: ptxas then spilled 16 bytes in the bf16 two-pass backward, which
// fits the bounds with none. The last template argument (0) is not part
// of the entry (FamilyInfo::params: a constant).
template <class T, int VEC, int VPT, bool BACKWARD,
          std::enable_if_t<kInterleavedRegisters<T, VEC, VPT, BACKWARD> == 0, int> = 0>
__global__ void __launch_bounds__(kInterleavedThreads<VEC>, 1024 / kInterleavedThreads<VEC>) interleaved_rows_kernel(SoftmaxArgs a) {
  interleaved_rows_entry<T, VEC, VPT, BACKWARD>(a);
}
template <class T, int VEC, int VPT, bool BACKWARD,
          std::enable_if_t<(kInterleavedRegisters<T, VEC, VPT, BACKWARD> > 0), int> = 0>
__global__ void DUET_MAX_REGISTERS(kInterleavedThreads<VEC>, 1024 / kInterleavedThreads<VEC>,
                                   (kInterleavedRegisters<T, VEC, VPT, BACKWARD>)) interleaved_rows_kernel(SoftmaxArgs a) {
  interleaved_rows_entry<T, VEC, VPT, BACKWARD>(a);
}

// interleaved_smem: the same tiles for rows too long for registers, each
// held in dynamic shared memory so that it is read once. Thread t keeps
// its packs k = 0, 1, ... at k * blockDim + t, a warp's packs adjacent
// (backward: y's, then dy's after a.smem_vecs of them). Only the thread
// that copied a pack reads it, so the packs need no barrier, only this
// thread's wait for its copies.
// A tile: wait for its copies, the slot's statistics from shared memory,
// the tree over the slots, then the write, each pack's place refilled with
// the next tile's pack right after its value is stored (the store used the
// value, so the read has returned), so the next tile's reads are in flight
// while this one is written.
// interleaved_cluster (CLUSTER, sm_90+): a tile too tall for one block's
// shared memory cut over a cluster of a.chunks_per_row blocks, as slots of
// the cluster: block r's slot s is the cluster's slot r * slots + s, its
// packs elements r * slots + s + k * (cluster's slots). After the tree each
// block's lane leaders publish their rows' pairs in their shared memory,
// one cluster barrier, then the block's threads read every block's pairs
// (distributed shared memory) a pair a thread, and the leaders combine
// them; two buffers by tile parity, so that one cluster barrier a tile
// suffices.
struct InterleavedClusterShared {
  float2 published[2][kInterleavedLanesMax * kInterleavedPack];  // this block's pairs, by tile parity
  float2 combined[kInterleavedLanesMax * kInterleavedPack];       // the cluster's, for the block's threads
};

// The scratch of the tree over the slots (2 x threads x VEC floats) also
// gathers a cluster's pairs (blocks x lanes x VEC float2).
static_assert(kInterleavedSmemThreads >= kMaxClusterBlocks * kInterleavedLanesMax,
              "the slots' scratch holds every block's pairs of a cluster");

template <class T, int VEC, bool BACKWARD, bool CLUSTER>
__device__ __forceinline__ void interleaved_smem_body(const SoftmaxArgs& a, float4* dynamic_smem, float* scratch,
                                                      InterleavedClusterShared* shared) {
  // The forward's 16-bit packs of four as two words (the packed max reads
  // them), as interleaved_rows holds them.
  using V = std::conditional_t<sizeof(T) == 2 && VEC == 4 && !BACKWARD, Words8, PackWords<T, VEC>>;
  constexpr bool kPackedMax = std::is_same_v<V, Words8> && DUET_DEVICE_CVT_RN16;
  const int nt = static_cast<int>(blockDim.x);
  const int tile = a.tile;
  const int slots = nt / tile;
  const int lane = static_cast<int>(threadIdx.x) % tile;
  const int slot = static_cast<int>(threadIdx.x) / tile;
  const int blocks = CLUSTER ? a.chunks_per_row : 1;  // the cluster's size: its blocks take one tile
  const int rank = CLUSTER ? static_cast<int>(blockIdx.x) % blocks : 0;
  const std::int64_t first_tile = blockIdx.x / blocks, tile_step = gridDim.x / blocks;
  const std::int64_t cslot = std::int64_t(rank) * slots + slot, cslots = std::int64_t(blocks) * slots;
  V* const held = reinterpret_cast<V*>(dynamic_smem) + threadIdx.x;  // pack k at k * nt
  V* const held_dy = held + std::int64_t(a.smem_vecs) * nt;
  const std::int64_t tile_rows = std::int64_t(tile) * VEC;
  const std::int64_t tiles = (a.inner + tile_rows - 1) / tile_rows;
  const std::int64_t cols = a.cols;
  // This thread's packs of a row: elements cslot, cslot + cslots, ...
  const int packs = cslot < cols ? static_cast<int>((cols - 1 - cslot) / cslots) + 1 : 0;
  // The first row of this thread's lane in tile b, or -1 past the last
  // tile and for a lane past the outer row's last row.
  const auto first_row = [&](std::int64_t b) -> std::int64_t {
    if (b >= a.rows * tiles) return -1;
    const std::int64_t i = (b % tiles) * tile_rows + std::int64_t(lane) * VEC;
    return i < a.inner ? i : -1;
  };
  // This lane's first pack of tile b in a tensor (row `row` of its outer
  // row), or null past the last tile and for a spare lane (row -1).
  const auto tile_start = [&](const void* t, std::int64_t stride, std::int64_t b, std::int64_t row) -> const T* {
    return row >= 0 ? static_cast<const T*>(t) + b / tiles * stride + row : nullptr;
  };
  // Issues the copies of pack k (element c = cslot + k cslots) of the tile
  // whose packs start at xs (and gs).
  const auto fill = [&](const T* xs, const T* gs, int k) {
    const std::int64_t c = cslot + std::int64_t(k) * cslots;
    copy_to_shared(held + std::int64_t(k) * nt, reinterpret_cast<const V*>(xs + c * a.x_col_stride));
    if constexpr (BACKWARD)
      copy_to_shared(held_dy + std::int64_t(k) * nt, reinterpret_cast<const V*>(gs + c * a.dy_col_stride));
  };
  const auto at = [](const V& pack, int e) { return element<T>(pack, e); };

  std::int64_t b = first_tile;
  std::int64_t i = first_row(b);
  if (i >= 0) {
    const T* const xs = tile_start(a.x, a.x_stride, b, i);
    const T* const gs = BACKWARD ? tile_start(a.dy, a.dy_stride, b, i) : nullptr;
    for (int k = 0; k < packs; ++k) fill(xs, gs, k);
  }
  shared_copies_commit();
  int parity = 0;
  for (; b < a.rows * tiles; b += tile_step, parity ^= 1) {
    shared_copies_wait<0>();
    const int n = i >= 0 ? packs : 0;  // a spare lane of the last tile takes part in the barriers only
    float m[VEC], s[VEC];
    if constexpr (BACKWARD) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        m[e] = 0.0f;  // the cluster's exchange adds the sums alone
        s[e] = 0.0f;
      }
      for (int k = 0; k < n; ++k) {
        const V y = held[std::int64_t(k) * nt], g = held_dy[std::int64_t(k) * nt];
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] += backward_term(at(y, e), at(g, e), a.log);
      }
      reduce_slots<VEC>(s, scratch, lane, slot, tile, slots, SumOp{});
    } else {
      // The slot's pair (m, s): its max, then the sum shifted by it (by 0
      // where it has no finite value, so that s stays 0 or NaN).
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        m[e] = kNegInf;
        s[e] = 0.0f;
      }
      if constexpr (kPackedMax) {
        Words8 mw{{kNegInfHalves<T>, kNegInfHalves<T>}};
#pragma unroll 4
        for (int k = 0; k < n; ++k) {
          const V v = held[std::int64_t(k) * nt];
#pragma unroll
          for (int w = 0; w < 2; ++w) mw.w[w] = max_halves<T>(mw.w[w], v.w[w]);
        }
#pragma unroll
        for (int e = 0; e < VEC; ++e) m[e] = at(mw, e);
      } else {
        for (int k = 0; k < n; ++k) {
          const V v = held[std::int64_t(k) * nt];
#pragma unroll
          for (int e = 0; e < VEC; ++e) m[e] = fmaxf(m[e], at(v, e));
        }
      }
      float shift[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) shift[e] = m[e] == kNegInf ? 0.0f : m[e];
      for (int k = 0; k < n; ++k) {
        const V v = held[std::int64_t(k) * nt];
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] += exp_shifted(at(v, e), shift[e]);
      }
      pair_across_slots<VEC>(m, s, scratch, lane, slot, tile, slots);
    }
#if DUET_DEVICE_CLUSTERS
    if constexpr (CLUSTER) {
      auto cluster = cooperative_groups::this_cluster();
      const int pairs = tile * VEC;  // a block's pairs: its rows'
      if (slot == 0)
#pragma unroll
        for (int e = 0; e < VEC; ++e) shared->published[parity][lane * VEC + e] = make_float2(m[e], s[e]);
      cluster.sync();
      // Every block's pairs gathered into the scratch (free after the
      // tree), one remote read a thread, all in flight at once.
      float2* const gathered = reinterpret_cast<float2*>(scratch);
      for (int t = static_cast<int>(threadIdx.x); t < blocks * pairs; t += nt)
        gathered[t] = *cluster.map_shared_rank(&shared->published[parity][t % pairs], t / pairs);
      __syncthreads();
      if (slot == 0)
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          float2 all = make_float2(BACKWARD ? 0.0f : kNegInf, 0.0f);
          for (int r = 0; r < blocks; ++r) {
            const float2 p = gathered[r * pairs + lane * VEC + e];
            if constexpr (BACKWARD) {
              all.y += p.y;
            } else {
              const float row_m = fmaxf(all.x, p.x);
              all.y = rescale(all.y, all.x, row_m) + rescale(p.y, p.x, row_m);
              all.x = row_m;
            }
          }
          shared->combined[lane * VEC + e] = all;
        }
      __syncthreads();
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        m[e] = shared->combined[lane * VEC + e].x;
        s[e] = shared->combined[lane * VEC + e].y;
      }
    }
#endif  // DUET_DEVICE_CLUSTERS
    if constexpr (!BACKWARD) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[e] = a.log ? logf(s[e]) : 1.0f / s[e];
    }
    // The write, refilling each place with the next tile's pack.
    const std::int64_t r = b / tiles;
    T* const out = static_cast<T*>(a.out) + r * a.out_stride + (i >= 0 ? i : 0);
    const std::int64_t next = b + tile_step;
    const std::int64_t next_i = first_row(next);
    const T* const xn = tile_start(a.x, a.x_stride, next, next_i);
    const T* const gn = BACKWARD ? tile_start(a.dy, a.dy_stride, next, next_i) : nullptr;
    // Compiled for softmax and for log_softmax, chosen once a tile (a
    // choice an element computed both; bench/NOTES.md v88); the cluster
    // entries choose an element (their f32 entries spilled with two
    // writes, ptxas -v sm_90).
    const auto write = [&](auto log) {
      for (int k = 0; k < packs; ++k) {
        if (k < n) {
          const V v = held[std::int64_t(k) * nt];
          [[maybe_unused]] const V g = BACKWARD ? held_dy[std::int64_t(k) * nt] : v;
          const std::int64_t c = cslot + std::int64_t(k) * cslots;
          store_words(reinterpret_cast<V*>(out + c * a.out_col_stride), make_pack<T, V>([&](int e) {
                        if constexpr (BACKWARD)
                          return backward_value(at(v, e), at(g, e), s[e], log_flag(log));
                        else
                          return forward_value(at(v, e), m[e], s[e], s[e], log_flag(log));
                      }));
        }
        if (next_i >= 0) fill(xn, gn, k);
      }
    };
    if constexpr (CLUSTER)
      write(a.log);
    else if (a.log)
      write(std::integral_constant<int, 1>{});
    else
      write(std::integral_constant<int, 0>{});
    shared_copies_commit();
    i = next_i;
  }
#if DUET_DEVICE_CLUSTERS
  // No block leaves while a peer may still read its shared memory.
  if constexpr (CLUSTER) cooperative_groups::this_cluster().sync();
#endif
}

// Two blocks an SM: at most 64 registers a thread (56-64, no spills, ptxas
// -v sm_90), so that one block's wait and reduction run under the other's
// memory traffic (bench/NOTES.md v50).
template <class T, int VEC, bool BACKWARD>
__global__ void __launch_bounds__(kInterleavedSmemThreads, 2) interleaved_smem_kernel(SoftmaxArgs a) {
  extern __shared__ float4 interleaved_held[];
  __shared__ float scratch[kSlotScratchFloats<VEC, kInterleavedSmemThreads>];  // the slots' reductions
  interleaved_smem_body<T, VEC, BACKWARD, false>(a, interleaved_held, scratch, nullptr);
}

template <class T, int VEC, bool BACKWARD>
__global__ void __launch_bounds__(kInterleavedSmemThreads, 2) interleaved_cluster_kernel(SoftmaxArgs a) {
#if DUET_DEVICE_CLUSTERS
  extern __shared__ float4 interleaved_held[];
  // The slots' reductions, then the cluster's pairs (in the parts' place).
  __shared__ float scratch[kSlotScratchFloats<VEC, kInterleavedSmemThreads>];
  __shared__ InterleavedClusterShared shared;
  interleaved_smem_body<T, VEC, BACKWARD, true>(a, interleaved_held, scratch, &shared);
#else
  (void)a;
#endif  // DUET_DEVICE_CLUSTERS
}

template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::interleaved_rows, I> = {
    &interleaved_rows_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward>};
template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::interleaved_smem, I> = {
    &interleaved_smem_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.backward>};
template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::interleaved_cluster, I> = {
    &interleaved_cluster_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.backward>};

}  // namespace duet::DUET_NS::kernels
