// The strategies of the fused row operations, one family for every FusedOp
// through its policy (families/fused_ops.cuh):
//   fused_group_kernel   GROUP threads a row, VPT packs each in registers,
//                        kFusedGroupBlock / GROUP rows a block; shuffles only.
//   fused_block_kernel   one block a row (run-time size), VPT packs a thread
//                        in registers; one barrier a row.
//   fused_stream_kernel  one block a row at a time, rows of any length: a
//                        first pass of VPT-pack chunks into the thread's
//                        online pair, one barrier, then a second pass over
//                        the chunks in reverse order (the latest read first,
//                        still in L2) that writes. Ops without an output
//                        (cross-entropy's forward without the gradient) read
//                        the row once; ops without a reduction (its
//                        backward) only make the second pass.
// Each thread issues the loads of all its packs before it reduces any, so a
// thread has VPT loads in flight. Grids are grid-stride (runtime/src/
// fused_planner.cpp sizes them); no workspace but cross-entropy's.
// Plus cross-entropy's two helpers: the count of its targets before the
// rows (the mean's divisor, needed by the gradient in the same pass) and
// the fixed-order sum of the rows' losses after.
#pragma once

#include "common/reduce.cuh"
#include "families/fused_ops.cuh"
#include "fused_variants.hpp"

namespace duet::DUET_NS::kernels {

// The partial results of WIDTH consecutive lanes combined; every lane gets
// the row's.
template <class Op, int WIDTH>
__device__ __forceinline__ RowAcc combine_lanes(RowAcc r) {
  if constexpr (Op::kSoftmax) {
    const float m = group_reduce<WIDTH>(r.m, MaxOp{});
    r.s = group_reduce<WIDTH>(rescale(r.s, r.m, m), SumOp{});
    r.m = m;
  }
  if constexpr (Op::kSums >= 1) r.a = group_reduce<WIDTH>(r.a, SumOp{});
  if constexpr (Op::kSums >= 2) r.b = group_reduce<WIDTH>(r.b, SumOp{});
  return r;
}

// Per-warp partial results of a block, two buffers: a row uses buffer
// `parity`, the next row the other, so a row's writes never meet the
// previous row's reads (the barrier of the row between protects them).
using FusedScratch = float4[2][kMaxWarpsPerBlock];

template <class Op>
__device__ __forceinline__ RowAcc combine_block(RowAcc r, FusedScratch& scratch, int parity) {
  constexpr int W = DUET_DEVICE_WARP_SIZE;
  r = combine_lanes<Op, W>(r);
  const int lane = threadIdx.x % W;
  const int warp = threadIdx.x / W;
  if (lane == 0) scratch[parity][warp] = make_float4(r.m, r.s, r.a, r.b);
  __syncthreads();
  const int warps = (blockDim.x + W - 1) / W;
  RowAcc q;
  if (lane < warps) {
    const float4 v = scratch[parity][lane];
    q.m = v.x;
    q.s = v.y;
    q.a = v.z;
    q.b = v.w;
  }
  return combine_lanes<Op, W>(q);
}

template <class Op, int PACK, int GROUP, int VPT>
__global__ void __launch_bounds__(kFusedGroupBlock, 8) fused_group_kernel(FusedArgs a) {
  constexpr int kRowsPerBlock = kFusedGroupBlock / GROUP;
  const int lane = threadIdx.x % GROUP;
  const int group = threadIdx.x / GROUP;
  const std::int64_t packs = a.cols / PACK;
  // The bound is uniform across the block, so whole warps stay converged
  // for the shuffles when the last rows run out.
  for (std::int64_t base = std::int64_t(blockIdx.x) * kRowsPerBlock; base < a.rows;
       base += std::int64_t(gridDim.x) * kRowsPerBlock) {
    const std::int64_t row = base + group;
    const bool row_ok = row < a.rows;
    const Op op(a, row_ok ? row : 0);
    typename Op::Item it[VPT];
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const std::int64_t p = std::int64_t(j) * GROUP + lane;
      if (row_ok && p < packs) op.template load<LoadHint::keep>(it[j], p);
    }
    RowAcc acc;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const std::int64_t p = std::int64_t(j) * GROUP + lane;
      if (row_ok && p < packs) op.accumulate(acc, it[j], p);
    }
    if constexpr (Op::kReduces) acc = combine_lanes<Op, GROUP>(acc);
    const auto f = op.finish(acc);
    if (row_ok && op.writes()) {
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const std::int64_t p = std::int64_t(j) * GROUP + lane;
        if (p < packs) op.store(it[j], p, f, false);
      }
    }
    if (row_ok && lane == 0) op.epilogue(f, row);
  }
}

template <class Op, int PACK, int VPT>
__global__ void __launch_bounds__(kFusedBlockMaxThreads) fused_block_kernel(FusedArgs a) {
  __shared__ FusedScratch scratch;
  const int tid = threadIdx.x;
  const int nt = blockDim.x;
  const std::int64_t packs = a.cols / PACK;
  int parity = 0;
  for (std::int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const Op op(a, row);
    typename Op::Item it[VPT];
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const std::int64_t p = std::int64_t(j) * nt + tid;
      if (p < packs) op.template load<LoadHint::keep>(it[j], p);
    }
    RowAcc acc;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const std::int64_t p = std::int64_t(j) * nt + tid;
      if (p < packs) op.accumulate(acc, it[j], p);
    }
    if constexpr (Op::kReduces) {
      acc = combine_block<Op>(acc, scratch, parity);
      parity ^= 1;
    }
    const auto f = op.finish(acc);
    if (op.writes()) {
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const std::int64_t p = std::int64_t(j) * nt + tid;
        if (p < packs) op.store(it[j], p, f, false);
      }
    }
    if (tid == 0) op.epilogue(f, row);
  }
}

template <class Op, int PACK, int VPT>
__global__ void __launch_bounds__(kFusedStreamBlock, 1) fused_stream_kernel(FusedArgs a) {
  __shared__ FusedScratch scratch;
  constexpr int nt = kFusedStreamBlock;
  constexpr std::int64_t kChunk = std::int64_t(nt) * VPT;  // packs a chunk
  const int tid = threadIdx.x;
  const std::int64_t packs = a.cols / PACK;
  const std::int64_t last_chunk = packs > 0 ? (packs - 1) / kChunk * kChunk : 0;
  int parity = 0;
  for (std::int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const Op op(a, row);
    RowAcc acc;
    if constexpr (Op::kReduces) {
      // Pass 1: every chunk into the thread's partial results; the reads
      // ask L2 to keep the lines for pass 2.
      for (std::int64_t c0 = 0; c0 < packs; c0 += kChunk) {
        typename Op::Item it[VPT];
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
          const std::int64_t p = c0 + std::int64_t(j) * nt + tid;
          if (p < packs) op.template load<LoadHint::keep>(it[j], p);
        }
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
          const std::int64_t p = c0 + std::int64_t(j) * nt + tid;
          if (p < packs) op.accumulate(acc, it[j], p);
        }
      }
      acc = combine_block<Op>(acc, scratch, parity);
      parity ^= 1;
    }
    const auto f = op.finish(acc);
    if (op.writes()) {
      // Pass 2, last chunk first: the last read, evicted first; the output
      // stored streaming, so it does not push pass 1's lines out of L2.
      for (std::int64_t c0 = last_chunk; c0 >= 0; c0 -= kChunk) {
        typename Op::Item it[VPT];
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
          const std::int64_t p = c0 + std::int64_t(j) * nt + tid;
          if (p < packs) op.template load<LoadHint::last_use>(it[j], p);
        }
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
          const std::int64_t p = c0 + std::int64_t(j) * nt + tid;
          if (p < packs) op.store(it[j], p, f, true);
        }
      }
    }
    if (tid == 0) op.epilogue(f, row);
  }
}

// ------------------------------------------------------------ cross-entropy helpers
inline constexpr int kCeHelperBlock = 256;

// Rows not ignored (counter 0) and rows with an invalid target (counter 1),
// added to the workspace's zeroed counters.
__global__ void __launch_bounds__(kCeHelperBlock) ce_count_kernel(FusedArgs a) {
  __shared__ int block_counts[2];
  if (threadIdx.x == 0) block_counts[0] = block_counts[1] = 0;
  __syncthreads();
  int counted = 0, invalid = 0;
  for (std::int64_t row = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; row < a.rows;
       row += std::int64_t(gridDim.x) * blockDim.x) {
    const CeRow r = ce_row(a, row);
    counted += r.ignored ? 0 : 1;
    invalid += r.invalid ? 1 : 0;
  }
  if (counted) atomicAdd(&block_counts[0], counted);
  if (invalid) atomicAdd(&block_counts[1], invalid);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (block_counts[0]) atomicAdd(&ce_counters(a)[0], block_counts[0]);
    if (block_counts[1]) atomicAdd(&ce_counters(a)[1], block_counts[1]);
  }
}

// One block: the rows' losses summed in double in a fixed order (thread t
// takes rows t, t + 256, ...; then a fixed tree), so a run gives the same
// bits every time; mean divides by the rows counted (0 / 0 = NaN when all
// are ignored). Also copies the invalid count out where asked.
__global__ void __launch_bounds__(kCeHelperBlock) ce_finalize_kernel(FusedArgs a) {
  __shared__ double partial[kCeHelperBlock];
  const int tid = threadIdx.x;
  double sum = 0.0;
  if (a.reduction != Reduction::none) {
    const float* losses = ce_row_losses(a);
    for (std::int64_t row = tid; row < a.rows; row += kCeHelperBlock) sum += losses[row];
  }
  partial[tid] = sum;
  __syncthreads();
  for (int half = kCeHelperBlock / 2; half > 0; half /= 2) {
    if (tid < half) partial[tid] += partial[tid + half];
    __syncthreads();
  }
  if (tid == 0) {
    if (a.reduction == Reduction::sum) a.loss[0] = static_cast<float>(partial[0]);
    if (a.reduction == Reduction::mean) a.loss[0] = static_cast<float>(partial[0] / double(ce_counters(a)[0]));
    if (a.invalid_targets) *a.invalid_targets = ce_counters(a)[1];
  }
}

}  // namespace duet::DUET_NS::kernels
