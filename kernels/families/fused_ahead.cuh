// fused_block_ahead_kernel: block_row's rows where one block an SM holds a
// row in registers, with the block's next row copied ahead into shared
// memory (the cross-entropy forward; planned for its loss alone, and with
// the gradient where forced, where the device copies to shared memory
// asynchronously, NVIDIA sm_80+; elsewhere each copy is a load and a
// store, complete at once).
//
// block_row runs one row a block in registers. Where a row needs the
// registers of a whole SM (a bf16 vocabulary of 50257 classes: 832
// threads x 8 packs), no second block runs under it: each row begins with
// the memory's latency, first the target's and then the row's loads, and
// the SM reads nothing while its one block sums, reduces and writes. Here
// the grid is persistent and each block, once it has taken a row's packs
// from shared memory into registers, copies its next row's packs into the
// same places (cp.async, evict-first: read once) and loads that row's
// target, so the next row is in flight under this row's sums, reduction
// and writes, and no row waits on its target before the load that needs
// its address (x[t]). Thread t's copies fill only the places thread t reads
// (pack j * blockDim + t at place j * blockDim + t), so no barrier orders
// them. The row's edges (rows off the pack grid) are loaded as block_row
// loads them. Dynamic shared memory: blockDim x VPT packs.
#pragma once

#include "families/fused_rows.cuh"

namespace duet::DUET_NS::kernels {

template <class Op, int PACK, int VPT, bool EDGES>
__global__ void __launch_bounds__(kFusedBlockMaxThreads) fused_block_ahead_kernel(FusedArgs a) {
  static_assert(ItemIsX<Op>::value && sizeof(typename Op::Item) == 16 && !Prepares<Op>::value,
                "the next row is copied as x's 16-byte packs, used as they come");
  static_assert(std::is_constructible_v<Op, const FusedArgs&, std::int64_t, int, const CeRow&>,
                "the row's state starts from a target loaded ahead (CrossEntropyOp)");
  using T = typename Op::Elem;
  using V = typename Op::V;
  __shared__ FusedScratch scratch;
  extern __shared__ float4 dynamic_smem[];
  V* const places = reinterpret_cast<V*>(dynamic_smem);
  const int tid = threadIdx.x;
  const int nt = blockDim.x;
  // A row's span: its head and body (whole packs from its start without
  // edges; cols < 2^31, validate.cpp).
  const auto span_of = [&](std::int64_t row) {
    if constexpr (EDGES) return row_span<T, PACK>(a, row);
    return RowSpan{0, static_cast<int>(a.cols / PACK), 0};
  };
  // This thread's packs of `row` copied to their places, one group.
  const auto copy_row = [&](std::int64_t row, const RowSpan& span) {
    const V* src = fused_row<T, V>(a.x, row, a.x_stride, span.head);
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * nt + tid;
      if (p < span.body) copy_to_shared<LoadHint::last_use>(places + p, src + p);
    }
    shared_copies_commit();
  };
  std::int64_t row = blockIdx.x;
  if (row >= a.rows) return;
  RowSpan span = span_of(row);
  copy_row(row, span);
  std::int64_t target = row_target(a, row);
  int parity = 0;
  for (; row < a.rows; row += gridDim.x) {
    typename Op::Item it[VPT];
    shared_copies_wait<0>();
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * nt + tid;
      if (p < span.body) it[j].x = places[p];
    }
    const Op op(a, row, span.head, ce_row_of(a, target));
    const RowSpan here = span;
    const std::int64_t next = row + gridDim.x;
    if (next < a.rows) {
      span = span_of(next);
      copy_row(next, span);
      target = row_target(a, next);
    }
    RowEdges<Op, PACK, kFusedBlockEdgesMinThreads> edges(op, here, tid, true);
    if constexpr (EDGES) edges.template load<LoadHint::last_use>();
    RowAcc acc;
    if constexpr (EDGES) edges.accumulate(acc);
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * nt + tid;
      if (p < here.body) op.accumulate(acc, it[j], p);
    }
    acc = combine_block<Op>(acc, scratch, parity);
    parity ^= 1;
    const auto f = op.finish(acc);
    if (tid == 0) op.epilogue(f, row);
    if (op.writes()) {
      if constexpr (EDGES) edges.store(f, false);
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const int p = j * nt + tid;
        if (p < here.body) op.store(it[j], p, f, false);
      }
    }
  }
}

}  // namespace duet::DUET_NS::kernels
