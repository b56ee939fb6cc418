// fused_cluster_kernel: the fused row operations' rows past what stream_row
// finds again in L2, cut over a thread-block cluster (NVIDIA sm_90+).
//
// stream_row walks one row a block: between a row's two passes the row's
// bytes past its stash wait in L2, and with every SM's row there at once
// (a vocabulary of 2^20 float32 logits: 132 rows of 4 MiB on an H200)
// they are far more than L2 holds, so the writing pass reads most of the
// row from DRAM again. Here the cluster's blocks share a row: block r
// (of the cluster's G, its launch attribute) runs stream_row's two passes
// over slice r of the row's packs (whole blocks' worth of packs, the last
// slice shorter), its stash keeping the slice's first packs; the slices'
// partial results (RowAcc) meet through distributed shared memory between
// the passes (ClusterAccs: no cluster barrier a row). The rows between
// their passes are then one a cluster, not one a block, each held in G
// stashes, so what the writing pass reads again stays in L2. A block's
// next row is copied into its stash under the current row's writing
// pass; two blocks an SM (kFusedClusterBlock) run one's loads under the
// other's exchange and writes.
// Grid: whole clusters walking the rows (the launch caps it at the
// clusters that fit at once: fused_launch.cu). The op's epilogue (a row's
// loss and lse) is the cluster's first block's. Rows of whole packs only
// (no edges), the vector path. Never launched where
// DeviceProps::cluster_launch is false; other targets compile an empty
// kernel.
#pragma once

#include "families/fused_rows.cuh"

namespace duet::DUET_NS::kernels {

// Every block's RowAcc of a row as a float4, through the cluster's slots
// (common/reduce.cuh: ClusterSlots, no cluster barrier a row).
using ClusterAccs = ClusterSlots<float4>;
static_assert(sizeof(ClusterAccs) == kFusedClusterAccsBytes, "the planner counts the exchange beside the stash");

#if DUET_DEVICE_CLUSTERS
// The row's partial results from every block's `acc` (the block's, in
// every thread); every warp combines the blocks' in the same lanes, so each
// block finds the same row's.
template <class Op>
__device__ __forceinline__ RowAcc cluster_accs_exchange(ClusterAccs& ca, const RowAcc& acc, int blocks, int rank,
                                                        int parity, unsigned& phases) {
  const float4* accs =
      cluster_slots_exchange(ca, make_float4(acc.m, acc.s, acc.a, acc.b), blocks, rank, parity, phases);
  const int b = static_cast<int>(threadIdx.x) % kMaxClusterBlocks;
  RowAcc q;
  if (b < blocks) {
    const float4 v = accs[b];
    q.m = v.x;
    q.s = v.y;
    q.a = v.z;
    q.b = v.w;
  }
  return combine_lanes<Op, kMaxClusterBlocks>(q);
}
#endif  // DUET_DEVICE_CLUSTERS

template <class Op, int PACK, int VPT, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kFusedStreamBlock / BLOCK) fused_cluster_kernel(FusedArgs a) {
#if DUET_DEVICE_CLUSTERS
  static_assert(reduces<Op>, "cluster_row serves ops that reduce a row, then write it");
  __shared__ FusedScratch scratch;
  __shared__ ClusterAccs caccs;
  constexpr int kChunk = BLOCK * VPT;  // packs a chunk
  const int tid = threadIdx.x;
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int blocks = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  cluster_slots_init(caccs);
  cluster.sync();  // no block stores into a peer's barrier before it is set up

  const int packs = static_cast<int>(a.cols / PACK);  // cols < 2^31 (validate.cpp)
  const int per_block = (packs + blocks - 1) / blocks;
  const int slice = (per_block + BLOCK - 1) / BLOCK * BLOCK;
  const int begin = min(rank * slice, packs), end = min(begin + slice, packs);
  const int chunks = (end - begin + kChunk - 1) / kChunk;
  const RowStash<typename Op::Item, VPT, BLOCK> stash(a.stash_bytes);  // pass 1 fills it
  const int held = stash.chunks_held(chunks);
  const std::int64_t clusters = gridDim.x / blocks;
  // Row r's pack 0, for the stash's copies of a row not yet begun.
  const auto row_x = [&](std::int64_t r) {
    using X = decltype(Op(a, 0, 0).x);
    return reinterpret_cast<X>(static_cast<const typename Op::Elem*>(a.x) + r * a.x_stride);
  };
  unsigned phases = 0;
  int parity = 0;
  std::int64_t row = blockIdx.x / blocks;
  if constexpr (kAsyncStash<Op>)
    if (row < a.rows) stash_fetch_row(stash, row_x(row), held, end, begin);
  for (; row < a.rows; row += clusters, parity ^= 1) {
    const Op op(a, row, 0);
    const std::int64_t next = row + clusters;
    RowAcc acc;
    int no_edges = 0;  // WITH_EDGES is false: never used
    // Pass 1: the stash's chunks were put in flight before (a group a
    // chunk, in chunk order); each is waited for alone.
    for (int c = 0; c < chunks; ++c) {
      if constexpr (kAsyncStash<Op>) {
        if (c < held) {
          stream_accumulate_stashed<Op, VPT, BLOCK, false>(op, no_edges, acc, stash, c, end, held - 1 - c, begin);
          continue;
        }
      }
      stream_accumulate<Op, VPT, BLOCK, false>(op, no_edges, acc, stash, c, end, begin);
    }
    acc = combine_block<Op>(acc, scratch, parity);
    acc = cluster_accs_exchange<Op>(caccs, acc, blocks, rank, parity, phases);
    const auto f = op.finish(acc);
    if (rank == 0 && tid == 0) op.epilogue(f, row);
    // Pass 2: first the chunks past the stash, read again from L2, the
    // latest read first (as stream_row's); then the stashed chunks in
    // chunk order, each, once written out, taking the next row's copies
    // into its slots, so the next row's loads are in flight under this
    // row's writes (each copy comes after the reads of its slot in the
    // thread's program order, and after the store each read feeds).
    if (op.writes())
      for (int c = chunks - 1; c >= held; --c) {
        const int c0 = begin + c * kChunk;
        stream_write<Op, VPT, BLOCK>(op, f, stash, c, c0, end - c0);
      }
    for (int c = 0; c < held; ++c) {
      const int c0 = begin + c * kChunk;
      if (op.writes()) stream_write<Op, VPT, BLOCK>(op, f, stash, c, c0, end - c0);
      if constexpr (kAsyncStash<Op>)
        if (next < a.rows) stash_fetch(stash, row_x(next), c, end, begin);
    }
  }
  // No block leaves while a peer may still store into its shared memory.
  cluster.sync();
#else
  (void)a;
#endif  // DUET_DEVICE_CLUSTERS
}

}  // namespace duet::DUET_NS::kernels
