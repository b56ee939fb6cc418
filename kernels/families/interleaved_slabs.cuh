// interleaved_slabs: interleaved rows (interleaved_rows.cuh's layout) too
// long for a tile on chip, whose tiles' columns are too tall for the L2 to
// hold between interleaved_stream's two visits of a chunk: softmax over
// dim 0 of a [65536, 1024] matrix, where every row is 65536 elements 4 KiB
// apart and a 1 KiB-wide column is already 64 MiB.
//
// Such a row is read twice from DRAM whatever the order, so the order is
// chosen for DRAM: a group is a tile of a.tile lanes of one outer row (up
// to kInterleavedSlabsLanesMax lanes of packs, a whole line of up to 4 KiB
// where inner allows), its column cut into steps of slots x VPT lines
// (the threads (lane, slot) = (t % tile, t / tile) of a block hold VPT
// packs of their lane at positions slot, slot + slots, ... of a step) and
// the steps dealt to a.chunks_per_row slabs: slab j takes steps j, j +
// slabs, j + 2 slabs, ... A block takes a slab (a unit: group x slabs +
// slab; the planner picks slabs so that the units fill about one wave), so
// that a block reads whole lines back to back and the blocks together
// sweep the column from its start, as a copy does (faster than a slab of
// contiguous steps each: bench/NOTES.md v69).
//
// Partial kernel: each block reduces its slab to a (max, sum) pair per row
// of the tile (backward: a sum), folds its slots in shared memory and
// stores the pairs. A group's slabs meet in two levels, so that no block
// folds more than kInterleavedSlabBundle sets of pairs: the last slab of
// each bundle to finish folds the bundle's pairs, and the last bundle to
// finish folds the bundles' into the rows' results (in slab and bundle
// order, whichever block finishes last: the results are deterministic).
// Finalize kernel: the units in reverse order and each slab's steps from
// its last, so that it starts with the lines the partial kernel read last,
// which the L2 still holds; it writes.
// Grid: a kInterleavedSlabsThreads-thread block a unit, for both kernels
// (at most 64 registers a thread: two blocks an SM on NVIDIA). Workspace
// (a.workspace, counters zeroed before each launch): the layout of
// interleaved_slabs_* in softmax_args.hpp.
#pragma once

#include "common/family_kernels.cuh"
#include "common/math.cuh"
#include "common/reduce.cuh"
#include "common/storage.cuh"
#include "softmax_args.hpp"

namespace duet::DUET_NS::kernels {

// One unit as thread 0 decodes it into shared memory, so that the other
// threads keep none of its 64-bit divisions in registers: the outer row r,
// the tile's first row i0, the first positions of the slab's first and
// last steps and its number of steps (slots x VPT positions each, slabs x
// slots x VPT apart; only the column's last step is short, so only a
// slab's last step may be), and the workspace's places for it
// (softmax_args.hpp):
// its group's counts, this slab's set of pairs (a pair per row of the
// tile), the first set of its bundle and the bundle's own set, its group's
// first bundle set and its results.
struct SlabVisit {
  std::int64_t r, i0, first, last, steps;
  unsigned* counts;
  float *slab_set, *bundle_first, *bundle_set, *bundle_sets, *results;
  int bundle, members, bundles, slabs;
};
// The units of a launch: slabs of every tile of every outer row.
template <int VEC>
__device__ __forceinline__ std::int64_t slab_units(const SoftmaxArgs& a) {
  const std::int64_t tile_rows = std::int64_t(a.tile) * VEC;
  return a.rows * ((a.inner + tile_rows - 1) / tile_rows) * a.chunks_per_row;
}
template <int VEC, int VPT>
__device__ __forceinline__ SlabVisit slab_visit(const SoftmaxArgs& a, std::int64_t unit, int slots) {
  const std::int64_t tile_rows = std::int64_t(a.tile) * VEC;
  const std::int64_t tiles = (a.inner + tile_rows - 1) / tile_rows;
  const std::int64_t groups = a.rows * tiles;
  const std::int64_t slabs = a.chunks_per_row;
  const std::int64_t bundles = interleaved_slab_bundles(slabs);
  const std::int64_t step = std::int64_t(slots) * VPT;
  const std::int64_t chunks = (a.cols + step - 1) / step;  // steps of the column
  const std::int64_t group = unit / slabs;
  const std::int64_t slab = unit - group * slabs;
  SlabVisit v;
  v.r = group / tiles;
  v.i0 = (group - v.r * tiles) * tile_rows;
  v.first = slab * step;
  v.steps = chunks > slab ? (chunks - 1 - slab) / slabs + 1 : 0;
  v.last = v.first + (v.steps - 1) * slabs * step;
  v.slabs = static_cast<int>(slabs);
  v.bundles = static_cast<int>(bundles);
  v.bundle = static_cast<int>(slab / kInterleavedSlabBundle);
  const std::int64_t first = std::int64_t(v.bundle) * kInterleavedSlabBundle;
  v.members = static_cast<int>(slabs - first < kInterleavedSlabBundle ? slabs - first : kInterleavedSlabBundle);
  v.counts = static_cast<unsigned*>(a.workspace) + group * (bundles + 1);
  float* const slab_sets =
      reinterpret_cast<float*>(static_cast<char*>(a.workspace) + interleaved_slabs_pairs_offset(groups, slabs));
  float* const bundle_sets = slab_sets + 2 * groups * slabs * tile_rows;
  float* const results = bundle_sets + 2 * groups * bundles * tile_rows;
  v.slab_set = slab_sets + 2 * unit * tile_rows;
  v.bundle_first = slab_sets + 2 * (group * slabs + first) * tile_rows;
  v.bundle_sets = bundle_sets + 2 * group * bundles * tile_rows;
  v.bundle_set = v.bundle_sets + 2 * std::int64_t(v.bundle) * tile_rows;
  v.results = results + 2 * group * tile_rows;
  return v;
}

// Folds every slot's (m, s) of this thread's lane (PAIRS; else the sums s
// alone) by a tree in `folded` (a pair per thread and row of its lane).
// Ends with a barrier, after which folded[r] holds row r's pair for the
// tile's rows r < tile x VEC (slot 0's places) and the rest is free.
template <int VEC, bool PAIRS>
__device__ __forceinline__ void fold_slabs_slots(float (&m)[VEC], float (&s)[VEC], float2* folded, int slot,
                                                 int slots, int tile) {
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int e = 0; e < VEC; ++e) folded[tid * VEC + e] = make_float2(m[e], s[e]);
  __syncthreads();
  slot_tree(slot, slots, [&](int half) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float2 p = folded[(tid + half * tile) * VEC + e];
      if constexpr (PAIRS)
        combine_pair(m[e], s[e], p.x, p.y);
      else
        s[e] += p.y;
      folded[tid * VEC + e] = make_float2(m[e], s[e]);
    }
  });
}

// The sets of pairs move between blocks a row per thread, rows tid, tid +
// kInterleavedSlabsThreads, ...: a warp's 8-byte accesses cover 256
// contiguous bytes.
// (A thread's own lane's VEC pairs, 32 bytes, left gaps between a warp's
// lanes: each 4-byte access of a warp touched 32 sectors; bench/NOTES.md
// v71.)

// folded[r] stored as a set of tile_rows pairs at `dst`. Other blocks of
// this launch see it after this block's next count (last_to_arrive), the
// finalize kernel after this launch.
__device__ __forceinline__ void store_slab_set(float* dst, const float2* folded, int tile_rows) {
  float2* const set = reinterpret_cast<float2*>(dst);
  for (int r = static_cast<int>(threadIdx.x); r < tile_rows; r += kInterleavedSlabsThreads) set[r] = folded[r];
}

// Sets of each of its rows a thread has in flight in fold_slab_sets.
inline constexpr int kSlabFoldBatch = 4;

// `count` sets of pairs other blocks stored at `sets` folded row by row,
// in set order (PAIRS; else the sums alone), into folded[r]: a thread
// folds rows tid, tid + kInterleavedSlabsThreads, ..., at most
// kSlabFoldRows of them (the widest tile's rows over the block's threads),
// with kSlabFoldBatch sets of each in flight. Starts after a barrier that
// ends every read of `folded`, ends with one.
inline constexpr int kSlabFoldRows = kInterleavedSlabsLanesMax * kInterleavedPack / kInterleavedSlabsThreads;
template <int VEC, bool PAIRS>
__device__ __forceinline__ void fold_slab_sets(const float* sets, int count, int tile_rows, float2* folded) {
  static_assert(kInterleavedSlabsLanesMax * VEC <= kSlabFoldRows * kInterleavedSlabsThreads);
  constexpr int ROWS = kSlabFoldRows;
  constexpr int nt = kInterleavedSlabsThreads;
  const int tid = static_cast<int>(threadIdx.x);
  // Volatile 64-bit loads: past the non-coherent L1, one access a pair.
  const volatile unsigned long long* const words = reinterpret_cast<const volatile unsigned long long*>(sets);
  float m[ROWS], s[ROWS];
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
    m[j] = kNegInf;
    s[j] = 0.0f;
  }
#pragma unroll 1
  for (int n0 = 0; n0 < count; n0 += kSlabFoldBatch) {
    unsigned long long w[ROWS][kSlabFoldBatch];
#pragma unroll
    for (int j = 0; j < ROWS; ++j)
#pragma unroll
      for (int b = 0; b < kSlabFoldBatch; ++b)
        if (tid + j * nt < tile_rows && n0 + b < count)
          w[j][b] = words[std::int64_t(n0 + b) * tile_rows + tid + j * nt];
#pragma unroll
    for (int j = 0; j < ROWS; ++j)
#pragma unroll
      for (int b = 0; b < kSlabFoldBatch; ++b)
        if (tid + j * nt < tile_rows && n0 + b < count) {
          const float pm = __uint_as_float(static_cast<unsigned>(w[j][b]));
          const float ps = __uint_as_float(static_cast<unsigned>(w[j][b] >> 32));
          if constexpr (PAIRS)
            combine_pair(m[j], s[j], pm, ps);
          else
            s[j] += ps;
        }
  }
#pragma unroll
  for (int j = 0; j < ROWS; ++j)
    if (tid + j * nt < tile_rows) folded[tid + j * nt] = make_float2(m[j], s[j]);
  __syncthreads();
}

template <class T, int VEC>
using SlabPack = std::conditional_t<sizeof(T) == 2 && VEC == 4, Words8, PackWords<T, VEC>>;

template <class T, int VEC, int VPT, bool BACKWARD>
__global__ void __launch_bounds__(kInterleavedSlabsThreads, 2) interleaved_slabs_partial_kernel(SoftmaxArgs a) {
  using V = SlabPack<T, VEC>;
  constexpr int nt = kInterleavedSlabsThreads;
  constexpr bool kPairs = !BACKWARD;
  __shared__ float2 folded[nt * VEC];
  __shared__ SlabVisit visit;
  __shared__ int last;
  const int tid = static_cast<int>(threadIdx.x);
  const int tile = a.tile;
  const int slots = nt / tile;
  const int lane = tid % tile;
  const int slot = tid / tile;
  const std::int64_t x_gap = slots * a.x_col_stride;  // between a thread's packs
  const std::int64_t dy_gap = BACKWARD ? slots * a.dy_col_stride : 0;
  const auto at = [](const V& pack, int e) { return element<T>(pack, e); };
  // One unit a block, block b taking unit b (a loop over units kept its
  // bounds and spilled, ptxas -v sm_80).
  const std::int64_t unit = blockIdx.x;
  if (unit >= slab_units<VEC>(a)) return;
  if (tid == 0) visit = slab_visit<VEC, VPT>(a, unit, slots);
  __syncthreads();
  const std::int64_t i = visit.i0 + std::int64_t(lane) * VEC;
  // The last tile's spare lanes take part in the folds only.
  const std::int64_t steps = i < a.inner ? visit.steps : 0;
  const std::int64_t c0 = visit.first + slot;
  const std::int64_t stride = std::int64_t(visit.slabs) * VPT;  // a slab's steps apart, in a thread's packs
  const T* x = static_cast<const T*>(a.x) + visit.r * a.x_stride + c0 * a.x_col_stride + i;
  const T* dy = BACKWARD ? static_cast<const T*>(a.dy) + visit.r * a.dy_stride + c0 * a.dy_col_stride + i : nullptr;
  const std::int64_t last_left = a.cols - visit.last - slot;  // this thread's positions from the last step's on
  float m[VEC], s[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    m[e] = kNegInf;
    s[e] = 0.0f;
  }
#pragma unroll 1
  for (std::int64_t n = steps; n > 0; --n) {
    // Places past the column hold -inf forward and zeros backward.
    V v[VPT];
    V g[BACKWARD ? VPT : 1];
    load_packs_or_neutral<T, V, VPT, BACKWARD, LoadHint::keep>(
        v, g, x, x_gap, dy, dy_gap, [&](int k) { return n > 1 || std::int64_t(k) * slots < last_left; });
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if constexpr (BACKWARD) {
#pragma unroll
        for (int k = 0; k < VPT; ++k) s[e] += backward_term(at(v[k], e), at(g[k], e), a.log);
      } else {
        online_add<VPT>(m[e], s[e], [&](int k) { return at(v[k], e); });
      }
    }
    x += stride * x_gap;
    if constexpr (BACKWARD) dy += stride * dy_gap;
  }
  fold_slabs_slots<VEC, kPairs>(m, s, folded, slot, slots, tile);
  const int tile_rows = tile * VEC;
  if (visit.slabs == 1) {
    store_slab_set(visit.results, folded, tile_rows);
    return;
  }
  // Whether this block is the last of `expected` to count at `count`;
  // if so, the others' stored pairs are visible to it. One fence a block
  // on each side of the count, as a grid barrier has: the barrier orders
  // the block's stores before thread 0's fence and count, and the other
  // threads' loads after thread 0's fence.
  const auto last_to_arrive = [&](unsigned* count, int expected) {
    __syncthreads();
    if (tid == 0) {
      __threadfence();
      last = atomicAdd(count, 1u) + 1 == static_cast<unsigned>(expected);
      if (last) __threadfence();
    }
    __syncthreads();
    return last != 0;
  };
  // The slab's pairs, then the bundle's count; the bundle's last folds
  // the bundle's sets, and the group's last bundle the bundles'.
  store_slab_set(visit.slab_set, folded, tile_rows);
  if (!last_to_arrive(&visit.counts[visit.bundle], visit.members)) return;
  fold_slab_sets<VEC, kPairs>(visit.bundle_first, visit.members, tile_rows, folded);
  if (visit.bundles == 1) {
    store_slab_set(visit.results, folded, tile_rows);
    return;
  }
  store_slab_set(visit.bundle_set, folded, tile_rows);
  if (!last_to_arrive(&visit.counts[visit.bundles], visit.bundles)) return;
  fold_slab_sets<VEC, kPairs>(visit.bundle_sets, visit.bundles, tile_rows, folded);
  store_slab_set(visit.results, folded, tile_rows);
}

template <class T, int VEC, int VPT, bool BACKWARD>
__global__ void __launch_bounds__(kInterleavedSlabsThreads, 2) interleaved_slabs_finalize_kernel(SoftmaxArgs a) {
  using V = SlabPack<T, VEC>;
  constexpr int nt = kInterleavedSlabsThreads;
  __shared__ SlabVisit visit;
  const int tid = static_cast<int>(threadIdx.x);
  const int tile = a.tile;
  const int slots = nt / tile;
  const int lane = tid % tile;
  const int slot = tid / tile;
  const std::int64_t x_gap = slots * a.x_col_stride;  // between a thread's packs
  const std::int64_t dy_gap = BACKWARD ? slots * a.dy_col_stride : 0;
  const std::int64_t out_gap = slots * a.out_col_stride;
  const auto at = [](const V& pack, int e) { return element<T>(pack, e); };
  // One unit a block, as in the partial kernel, but block b taking unit
  // units - 1 - b.
  const std::int64_t units = slab_units<VEC>(a);
  if (std::int64_t(blockIdx.x) >= units) return;
  if (tid == 0) visit = slab_visit<VEC, VPT>(a, units - 1 - std::int64_t(blockIdx.x), slots);
  __syncthreads();
  const std::int64_t i = visit.i0 + std::int64_t(lane) * VEC;
  const std::int64_t steps = i < a.inner ? visit.steps : 0;
  float m[VEC], s[VEC];
  if (steps > 0) {
    const float* const result = visit.results + 2 * std::int64_t(lane) * VEC;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      m[e] = result[2 * e];
      const float sum = result[2 * e + 1];
      s[e] = BACKWARD ? sum : (a.log ? logf(sum) : 1.0f / sum);
    }
  }
  // Steps from the slab's last: positions c + k x slots of each.
  const std::int64_t stride = std::int64_t(visit.slabs) * VPT;  // a slab's steps apart, in a thread's packs
  const std::int64_t c = visit.last + slot;
  const std::int64_t last_left = a.cols - c;  // positions of the last step (n = 0) from c on
  const T* x = static_cast<const T*>(a.x) + visit.r * a.x_stride + c * a.x_col_stride + i;
  const T* dy = BACKWARD ? static_cast<const T*>(a.dy) + visit.r * a.dy_stride + c * a.dy_col_stride + i : nullptr;
  T* out = static_cast<T*>(a.out) + visit.r * a.out_stride + c * a.out_col_stride + i;
#pragma unroll 1
  for (std::int64_t n = 0; n < steps; ++n) {
    V v[VPT];
    V g[BACKWARD ? VPT : 1];
#pragma unroll
    for (int k = 0; k < VPT; ++k)
      if (n > 0 || std::int64_t(k) * slots < last_left) {
        v[k] = load_hinted<LoadHint::last_use>(reinterpret_cast<const V*>(x + k * x_gap));
        if constexpr (BACKWARD) g[k] = load_hinted<LoadHint::last_use>(reinterpret_cast<const V*>(dy + k * dy_gap));
      }
#pragma unroll
    for (int k = 0; k < VPT; ++k)
      if (n > 0 || std::int64_t(k) * slots < last_left) {
        V o;
        if constexpr (BACKWARD)
          o = make_pack<T, V>([&](int e) { return backward_value(at(v[k], e), at(g[k], e), s[e], a.log); });
        else
          o = make_pack<T, V>([&](int e) { return forward_value(at(v[k], e), m[e], s[e], s[e], a.log); });
        store_words(reinterpret_cast<V*>(out + k * out_gap), o);
      }
    x -= stride * x_gap;
    if constexpr (BACKWARD) dy -= stride * dy_gap;
    out -= stride * out_gap;
  }
}

template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::interleaved_slabs, I> = {
    &interleaved_slabs_partial_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward>,
    &interleaved_slabs_finalize_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward>};

}  // namespace duet::DUET_NS::kernels
