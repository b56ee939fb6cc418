// grid_row: cluster_row_smem's rows over any number of blocks of one grid,
// without clusters: a row's blocks trade their (max, sum) pairs through
// global memory. It serves float32 rows past a cluster's shared memory, up
// to what the whole GPU holds on chip (few rows spread over every SM ran
// slower than a block or a cluster a row: the exchange through L2 costs
// more than their whole call; bench/NOTES.md v63).
//
// Blocks b*G .. b*G + G - 1 (G = a.chunks_per_row) are group b; group b
// walks rows b, b + groups, ... Block r of a group keeps slice r of the
// row (chunk_of) in registers and its shared memory and runs the rows as
// cluster_row_smem does (common/held_slices.cuh: read once, the next row's
// loads under this row's writes). A row's pairs: each block's thread 0
// stores the block's pair into its slot of the group's buffer for the
// row's parity, fences, adds one to the group's arrival count and waits
// until every block of the group has arrived for this row; then each warp
// reads the G pairs and combines them itself. Rows alternate two buffers:
// a block stores row n + 2's pair only after all of the group arrived for
// row n + 1, which each block does only after reading row n's pairs.
// The waits need every block of a group resident at once: the grid is one
// wave of whole groups, launched cooperatively (the vendor refuses a grid
// that cannot be resident together rather than let it wait forever).
// Workspace (a.counters, zeroed before each launch, and a.partials): the
// layout of grid_row_counter_bytes / grid_row_workspace_bytes in
// softmax_args.hpp. Needs cp.async (sm_80+; the planner plans it nowhere
// else, and other targets compile an empty kernel).
#pragma once

#include "common/family_kernels.cuh"
#include "common/held_slices.cuh"

namespace duet::DUET_NS::kernels {

#if DUET_DEVICE_CP_ASYNC
// A pair as one 64-bit word, so that a slot is written and read whole.
__device__ __forceinline__ unsigned long long pair_bits(float m, float s) {
  return (static_cast<unsigned long long>(__float_as_uint(s)) << 32) | __float_as_uint(m);
}
__device__ __forceinline__ float2 pair_of(unsigned long long bits) {
  return make_float2(__uint_as_float(static_cast<unsigned>(bits)), __uint_as_float(static_cast<unsigned>(bits >> 32)));
}

// grid_row's pairs: through global memory (the header says how).
struct GridExchange {
  static constexpr bool kZeroFills = true;
  int blocks = 0, rank = 0;
  volatile unsigned long long* slots = nullptr;  // the group's two buffers of `blocks` pairs
  unsigned* arrived = nullptr;                   // the group's arrivals so far
  unsigned expected = 0;                         // thread 0: the count that ends this row's wait
  template <int PACK>
  __device__ __forceinline__ BlockSlice start(const SoftmaxArgs& a) {
    blocks = a.chunks_per_row;
    const int group = static_cast<int>(blockIdx.x) / blocks;
    rank = static_cast<int>(blockIdx.x) % blocks;
    arrived = a.counters + group;
    slots = reinterpret_cast<unsigned long long*>(a.partials) + std::int64_t(group) * 2 * blocks;
    return block_slice<PACK>(a, rank, gridDim.x / blocks);
  }
  __device__ __forceinline__ float2 pairs(float m, float s, int parity) {
    volatile unsigned long long* const buffer = slots + parity * blocks;
    if (threadIdx.x == 0) {
      buffer[rank] = pair_bits(m, s);
      __threadfence();  // the pair before the arrival
      atomicAdd(arrived, 1u);
      expected += static_cast<unsigned>(blocks);
      while (*static_cast<volatile unsigned*>(arrived) < expected) {
      }
      __threadfence();  // the arrivals before the pairs read below
    }
    __syncthreads();
    // Lane l folds pairs l, l + W, ... online; the warp combines the folds.
    constexpr int W = DUET_DEVICE_WARP_SIZE;
    float fm = kNegInf, fs = 0.0f;
    for (int b = static_cast<int>(threadIdx.x) % W; b < blocks; b += W) {
      const float2 q = pair_of(buffer[b]);
      const float m_new = fmaxf(fm, q.x);
      fs = rescale(fs, fm, m_new) + rescale(q.y, q.x, m_new);
      fm = m_new;
    }
    return group_reduce_pair<W>(fm, fs);
  }
  __device__ __forceinline__ void finish() {}
};
#endif  // DUET_DEVICE_CP_ASYNC

// One block an SM: up to 128 registers a thread, the opt-in shared memory.
template <class T, int PACK, int VECS_PER_THREAD, bool BACKWARD, bool EDGES>
__global__ void __launch_bounds__(kGridRowThreads, 1) grid_row_kernel(SoftmaxArgs a) {
#if DUET_DEVICE_CP_ASYNC
  extern __shared__ float4 dynamic_smem[];
  __shared__ BlockScratch scratch;
  GridExchange exchange;
  held_slice_rows<T, PACK, VECS_PER_THREAD, BACKWARD, EDGES>(a, dynamic_smem, scratch, exchange);
#else
  (void)a;
#endif  // DUET_DEVICE_CP_ASYNC
}

template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::grid_row, I> = {
    &grid_row_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward, kEntry<I>.edges>};

}  // namespace duet::DUET_NS::kernels
