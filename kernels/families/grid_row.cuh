// grid_row: cluster_row_smem's rows over any number of blocks of one grid,
// without clusters: a row's blocks trade their (max, sum) pairs through
// global memory. It serves rows past a cluster's shared memory (up to what
// the whole GPU holds on chip) and few rows, which a block or a cluster a
// row would leave most SMs idle.
//
// Blocks b*G .. b*G + G - 1 (G = a.chunks_per_row) are group b; group b
// walks rows b, b + groups, ... Block r of a group keeps slice r of the
// row (chunk_of) in registers and its shared memory and runs the rows as
// cluster_row_smem does (common/held_slices.cuh: read once, the next row's
// loads under this row's writes). A row's pairs: each block's thread 0
// stores the block's m and s into its two slots of the group's buffer for
// the row's parity, each a 64-bit word of the value and a tag (the row's
// count within the launch, from 1), and each warp reads the group's G
// slots until every tag is this row's, then combines the pairs itself. A
// word is written and read whole, so a tag seen is its value seen: no
// fence, no counter. Rows alternate two buffers: a block stores row n +
// 2's words only after it has read every block's row n + 1 words, which
// each block stores only after its warps have read row n's.
// The waits need every block of a group resident at once: the grid is one
// wave of whole groups, launched cooperatively (the vendor refuses a grid
// that cannot be resident together rather than let it wait forever).
// Workspace (a.partials, zeroed before each launch: no tag is current):
// grid_row_workspace_bytes in softmax_args.hpp. Needs cp.async (sm_80+;
// the planner plans it nowhere else, and other targets compile an empty
// kernel).
#pragma once

#include "common/family_kernels.cuh"
#include "common/held_slices.cuh"

namespace duet::DUET_NS::kernels {

#if DUET_DEVICE_CP_ASYNC
// grid_row's pairs: through global memory (the header says how).
struct GridExchange {
  int blocks = 0, rank = 0;
  volatile unsigned long long* slots = nullptr;  // the group's two buffers of `blocks` (m, s) word pairs
  unsigned tag = 0;                              // the current row's
  template <int PACK>
  __device__ __forceinline__ BlockSlice start(const SoftmaxArgs& a) {
    blocks = a.chunks_per_row;
    const int group = static_cast<int>(blockIdx.x) / blocks;
    rank = static_cast<int>(blockIdx.x) % blocks;
    slots = reinterpret_cast<unsigned long long*>(a.partials) + std::int64_t(group) * 4 * blocks;
    return block_slice<PACK>(a, rank, gridDim.x / blocks);
  }
  __device__ __forceinline__ float2 pairs(float m, float s, int parity) {
    ++tag;
    const unsigned long long tagged = static_cast<unsigned long long>(tag) << 32;
    volatile unsigned long long* const buffer = slots + std::int64_t(parity) * 2 * blocks;
    if (threadIdx.x == 0) {
      buffer[2 * rank] = tagged | __float_as_uint(m);
      buffer[2 * rank + 1] = tagged | __float_as_uint(s);
    }
    // Lane l folds the pairs of blocks l, l + W, ... online as their words
    // arrive; the warp combines the folds.
    constexpr int W = DUET_DEVICE_WARP_SIZE;
    float fm = kNegInf, fs = 0.0f;
    for (int b = static_cast<int>(threadIdx.x) % W; b < blocks; b += W) {
      unsigned long long wm, ws;
      do {
        wm = buffer[2 * b];
      } while ((wm >> 32) != tag);
      do {
        ws = buffer[2 * b + 1];
      } while ((ws >> 32) != tag);
      const float qm = __uint_as_float(static_cast<unsigned>(wm)), qs = __uint_as_float(static_cast<unsigned>(ws));
      const float m_new = fmaxf(fm, qm);
      fs = rescale(fs, fm, m_new) + rescale(qs, qm, m_new);
      fm = m_new;
    }
    const float row_m = group_reduce<W>(fm, MaxOp{});
    return make_float2(row_m, group_reduce<W>(rescale(fs, fm, row_m), SumOp{}));
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
