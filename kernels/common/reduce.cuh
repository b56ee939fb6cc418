// Reductions of one float over the threads that share a row: a group of
// lanes (shuffles), a block (shuffles and shared memory), and a thread-block
// cluster ((max, sum) pairs through distributed shared memory).
#pragma once

#include "common/math.cuh"
#include "common/storage.cuh"
#include "softmax_variants.hpp"
#include "vendor.h"

namespace duet::DUET_NS::kernels {

// Butterfly reduction over WIDTH consecutive lanes (WIDTH a power of two no
// larger than the wavefront); every lane gets the result.
template <int WIDTH, class Op>
__device__ __forceinline__ float group_reduce(float v, Op op) {
#pragma unroll
  for (int offset = WIDTH / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(DUET_FULL_MASK, v, offset, WIDTH));
  return v;
}

// The (max, sum) of WIDTH consecutive lanes' pairs, each lane's sum taken
// against its own max (m = -inf: a sum of nothing); every lane gets the
// pair: the max first, then each sum rescaled to it.
template <int WIDTH>
__device__ __forceinline__ float2 group_reduce_pair(float m, float s) {
  const float group_m = group_reduce<WIDTH>(m, MaxOp{});
  return make_float2(group_m, group_reduce<WIDTH>(rescale(s, m, group_m), SumOp{}));
}

// Largest number of warps a block can hold: 1024 threads / the smallest
// warp (32 lanes). A 64-lane wavefront uses half of it.
constexpr int kMaxWarpsPerBlock = 1024 / 32;

// A block's scratch for block_reduce: two buffers, so that a reduction
// never writes the buffer the one before it may still be reading.
using BlockScratch = float[2][kMaxWarpsPerBlock];

// Block-wide reduction; every thread gets the result. `scratch` must not be
// in use by the previous reduction of the same block: callers alternate two
// buffers, so the barrier inside one reduction also protects the buffer the
// one before it read.
template <class Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch, Op op) {
  constexpr int W = DUET_DEVICE_WARP_SIZE;
  v = group_reduce<W>(v, op);
  const int lane = threadIdx.x % W;
  const int warp = threadIdx.x / W;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + W - 1) / W;
  v = lane < warps ? scratch[lane] : Op::kIdentity;
  return group_reduce<W>(v, op);
}

// A block's scratch for both reductions: two buffers, alternated by row as
// block_reduce's are, each holding a pair a warp (block_reduce_pair) or a
// float a warp (block_reduce).
struct ReduceScratch {
  float2 buffer[2][kMaxWarpsPerBlock];
  __device__ __forceinline__ float2* pairs(std::int64_t parity) { return buffer[parity]; }
  __device__ __forceinline__ float* floats(std::int64_t parity) { return reinterpret_cast<float*>(buffer[parity]); }
};
// Block-wide (max, sum) of each thread's pair, its sum taken against its own
// max (m = -inf: a sum of nothing, or of NaN); every thread gets the row's
// pair. One barrier where a max and then a sum take two: the warps' pairs,
// then the pairs across the warps.
__device__ __forceinline__ float2 block_reduce_pair(float m, float s, float2* pairs) {
  constexpr int W = DUET_DEVICE_WARP_SIZE;
  const float2 warp_pair = group_reduce_pair<W>(m, s);
  const int lane = threadIdx.x % W;
  const int warp = threadIdx.x / W;
  if (lane == 0) pairs[warp] = warp_pair;
  __syncthreads();
  const int warps = (blockDim.x + W - 1) / W;
  const float2 q = lane < warps ? pairs[lane] : make_float2(kNegInf, 0.0f);
  return group_reduce_pair<W>(q.x, q.y);
}

// A cluster's blocks exchange one value each for a row (a (max, sum) pair;
// the fused rows' partial results) without a cluster barrier: each block
// stores its value into every block's slot for it (itself included) with
// st.async, which counts the bytes on the receiver's mbarrier, and each
// block waits on its own barrier. A cluster barrier a row would have
// release semantics (ptxas emits MEMBAR.ALL.GPU): every block would first
// wait for its stores of the previous row to be acknowledged, with nothing
// in flight.
// Two buffers alternate by row: a block sends row r + 2's value only after
// it has every value of row r + 1, and each block sends that only past a
// block barrier that its threads reach after reading row r's values.
template <class V>
struct ClusterSlots {
  V values[2][kMaxClusterBlocks];
  unsigned long long arrived[2];
};
using ClusterPairs = ClusterSlots<float2>;

#if DUET_DEVICE_CLUSTERS
// Thread 0 initialises the barriers; the caller then syncs the cluster once,
// so no block stores into a peer's barrier before it is set up.
template <class V>
__device__ __forceinline__ void cluster_slots_init(ClusterSlots<V>& cs) {
  if (threadIdx.x == 0) {
    duet_mbarrier_init(&cs.arrived[0], 1);
    duet_mbarrier_init(&cs.arrived[1], 1);
    duet_mbarrier_init_fence();
  }
}

// This block's `mine` (the same in every thread) sent to slot `rank` of
// every block's buffer `parity`; returns this block's buffer once every
// block's value has arrived. `phases` holds each buffer's next phase
// parity (one bit a buffer, flipped here).
template <class V>
__device__ __forceinline__ const V* cluster_slots_exchange(ClusterSlots<V>& cs, const V& mine, int blocks, int rank,
                                                           int parity, unsigned& phases) {
  const int tid = threadIdx.x;
  if (tid == 0) duet_mbarrier_expect(&cs.arrived[parity], static_cast<unsigned>(blocks * sizeof(V)));
  if (tid < blocks) duet_store_async(&cs.values[parity][rank], mine, &cs.arrived[parity], tid);
  while (!duet_mbarrier_try_wait_cluster(&cs.arrived[parity], (phases >> parity) & 1u)) {
  }
  phases ^= 1u << parity;
  return cs.values[parity];
}

// The row's pair from every block's (m, s).
__device__ __forceinline__ float2 cluster_pairs_exchange(ClusterPairs& cp, float m, float s, int blocks, int rank,
                                                         int parity, unsigned& phases) {
  const float2* pairs = cluster_slots_exchange(cp, make_float2(m, s), blocks, rank, parity, phases);
  // Every warp combines the pairs itself, lane b (mod kMaxClusterBlocks)
  // holding block b's.
  const int b = static_cast<int>(threadIdx.x) % kMaxClusterBlocks;
  const float2 q = b < blocks ? pairs[b] : make_float2(kNegInf, 0.0f);
  return group_reduce_pair<kMaxClusterBlocks>(q.x, q.y);
}
#endif  // DUET_DEVICE_CLUSTERS

// A reduction's VPT packs of x (and dy, BACKWARD) at x + k x x_gap (dy +
// k x dy_gap) where valid(k), each load with HINT; places past the row hold
// -inf forward (no share of the max, exp 0) and zeros backward (no share
// of the sum), so the sums need no test.
template <class T, class V, int VPT, bool BACKWARD, LoadHint HINT, class Valid>
__device__ __forceinline__ void load_packs_or_neutral(V (&v)[VPT], V (&g)[BACKWARD ? VPT : 1], const T* x,
                                                      std::int64_t x_gap, const T* dy, std::int64_t dy_gap,
                                                      Valid valid) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if constexpr (BACKWARD) {
      v[k] = make_pack<T, V>([](int) { return 0.0f; });
      g[k] = v[k];
    } else {
      v[k] = make_pack<T, V>([](int) { return kNegInf; });
    }
    if (valid(k)) {
      v[k] = load_hinted<HINT>(reinterpret_cast<const V*>(x + k * x_gap));
      if constexpr (BACKWARD) g[k] = load_hinted<HINT>(reinterpret_cast<const V*>(dy + k * dy_gap));
    }
  }
}

// This thread's share of `count` sets of (max, sum) pairs that other
// blocks stored (set n's pairs of this lane at sets + 2 (n x tile_rows +
// lane x VEC) floats; volatile: past the non-coherent L1): sets slot, slot
// + slots, ... folded in order into (m, s) (PAIRS; else the sums s alone).
template <int VEC, bool PAIRS>
__device__ __forceinline__ void fold_stored_sets(float (&m)[VEC], float (&s)[VEC], const float* sets,
                                                 std::int64_t count, std::int64_t tile_rows, int lane, int slot,
                                                 int slots) {
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    m[e] = kNegInf;
    s[e] = 0.0f;
  }
#pragma unroll 1
  for (std::int64_t n = slot; n < count; n += slots) {
    const volatile float* p = sets + 2 * (n * tile_rows + std::int64_t(lane) * VEC);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float pm = p[2 * e];
      const float ps = p[2 * e + 1];
      if constexpr (PAIRS)
        combine_pair(m[e], s[e], pm, ps);
      else
        s[e] += ps;
    }
  }
}

// A tree over the slots in shared memory: step(half) folds slot + half into
// slot for every slot below half that has one, log2(slots) steps, each
// ended by a barrier.
template <class Step>
__device__ __forceinline__ void slot_tree(int slot, int slots, Step step) {
  int half = 1;
  while (half * 2 < slots) half *= 2;
  for (; half >= 1; half /= 2) {
    if (slot < half && slot + half < slots) step(half);
    __syncthreads();
  }
}

}  // namespace duet::DUET_NS::kernels
