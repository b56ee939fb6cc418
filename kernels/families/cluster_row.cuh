// cluster_row and cluster_row_smem: a row past one block's registers, cut
// over a thread-block cluster (Hopper, sm_90, and later; cluster_row
// forward only).
//
// The cluster has a.chunks_per_row blocks (the launch's cluster size): block
// r keeps packs [r * chunk, (r + 1) * chunk) of the row on chip (thread t:
// chunk start + t, + T, ...), reduces them to an online pair (m_r, s_r = sum
// exp(x - m_r)), and the pairs are exchanged through distributed shared
// memory (ClusterPairs, common/reduce.cuh: no cluster barrier a row). Read
// once, write once.
// cluster_row keeps a block's packs in registers, blocks of up to 512
// threads that fit at least twice an SM. cluster_row_smem keeps the first
// VECS_PER_THREAD of a thread's packs in registers and the next
// a.smem_vecs in its own slots of dynamic shared memory (slot k of thread
// t at k*T + t, as block_row_smem: no bank conflicts, no barrier, a thread
// reads back only what it wrote), copied there by cp.async without passing
// through registers, so a whole slice is in flight at once; one block an
// SM, whose next row's loads are issued while it writes the current one.
// Its backward keeps y and dy both and reduces sum(dy y) (log_softmax:
// sum(dy)) alone.
// Grid: one wave of whole clusters walking the rows (grid_for in
// runtime/src/planner/planner.cpp says why), launched with the cluster
// attribute (softmax_launch.cu); no workspace.
// EDGES: rows off the pack grid, their edge elements held beside the packs
// by the first threads of the cluster's first block (common/row_edges.cuh).
// Never launched where DeviceProps::cluster_launch is false.
#pragma once

#include "common/family_kernels.cuh"
#include "common/held_slices.cuh"
#include "common/reduce.cuh"
#include "common/row_edges.cuh"
#include "common/row_fragment.cuh"

namespace duet::DUET_NS::kernels {

#if DUET_DEVICE_CLUSTERS
// The row's max and the per-row constant k of held_row_value, from this
// block's slice (and, in the first block, the row's edges): the block's
// online pair, exchanged with the cluster's other blocks.
template <class T, int PACK, bool EDGES, class Slice, class Edges>
__device__ __forceinline__ float2 cluster_row_stats(const SoftmaxArgs& a, const Slice& slice, Edges& edges,
                                                    BlockScratch& scratch, ClusterPairs& cpairs, int blocks, int rank,
                                                    int parity, unsigned& phases) {
  float thread_m = slice_max<T, PACK>(kNegInf, slice);
  if constexpr (EDGES) thread_m = edges.max(thread_m);
  const float m = block_reduce(thread_m, scratch[0], MaxOp{});
  float s = 0.0f;
  if (m != kNegInf) {
    s = slice_sum<T, PACK>(s, slice, [&](float v) DUET_INLINE_LAMBDA { return exp_shifted(v, m); });
    if constexpr (EDGES) s = edges.sum(s, [&](float v) { return exp_shifted(v, m); });
  } else {
    // Every value of this chunk is -inf or NaN: the chunk adds nothing to
    // the row's sum unless it holds a NaN, which must reach the row.
    // (Each value converted twice, as the compare and the sum each read it:
    // a float16 conversion is an instruction the compiler does not merge.)
    slice([&](const auto& x, const auto&, const auto&) DUET_INLINE_LAMBDA {
#pragma unroll
      for (int e = 0; e < PACK; ++e) s += element<T>(x, e) == kNegInf ? 0.0f : element<T>(x, e);
    });
    if constexpr (EDGES) s = edges.sum(s, [&](float v) { return v == kNegInf ? 0.0f : v; });
  }
  s = block_reduce(s, scratch[1], SumOp{});
  const float2 stats = cluster_pairs_exchange(cpairs, m, s, blocks, rank, parity, phases);
  // One per-row constant k of held_row_value (a register: the row's packs
  // fill the rest):
  // log_softmax subtracts log s; softmax multiplies by 1/s, except for
  // 16-bit results, where exp(x - m) / s is one exp2 of (x - m) log2e -
  // log2 s, an FFMA in place of two FMULs, whose ~1e-6 relative error is
  // far below their rounding (2^-9 bf16, 2^-12 f16).
  return {stats.x, a.log ? logf(stats.y) : sizeof(T) == 2 ? log2f(stats.y) : 1.0f / stats.y};
}

// A block's place in its cluster, once its cluster's barriers are set up
// (every block's, before any pair is sent).
template <int PACK>
__device__ __forceinline__ BlockSlice cluster_slice_start(const SoftmaxArgs& a, ClusterPairs& cpairs) {
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  cluster_slots_init(cpairs);
  cluster.sync();
  return block_slice<PACK>(a, static_cast<int>(cluster.block_rank()), gridDim.x / a.chunks_per_row);
}

template <class T, int PACK, int VECS_PER_THREAD, bool EDGES>
__device__ __forceinline__ void cluster_row_body(const SoftmaxArgs& a, BlockScratch& scratch, ClusterPairs& cpairs) {
  using P = Pack<T, PACK>;
  const BlockSlice c = cluster_slice_start<PACK>(a, cpairs);
  const int blocks = c.blocks, rank = c.rank, nt = c.nt;
  const int tid = threadIdx.x;
  const std::int64_t clusters = c.groups, first = c.first;
  auto count_below = [&](std::int64_t end) { return c.count_below(end); };
  unsigned phases = 0;
  const int whole_count = count_below(c.end);
  int parity = 0;
  for (std::int64_t row = blockIdx.x / blocks; row < a.rows; row += clusters, parity ^= 1) {
    // Blocks have at least 128 threads (the planner): one slot of threads
    // 0..13 of block 0 at most.
    [[maybe_unused]] EdgesOf<EDGES, T, PACK, 64, false> edges;
    int head = 0;
    int count = whole_count;
    if constexpr (EDGES) {
      const RowSpan span = row_span<T, PACK>(a.x, row, a.x_stride, a.cols);
      head = span.head;
      count = count_below(c.end < span.body ? c.end : span.body);
      edges.place(span, tid, rank == 0);
      edges.load(row_elems<T>(a.x, row, a.x_stride), nullptr);
    }
    auto valid = [&](int j) { return j < count; };
    const P* xr = row_ptr<T, PACK>(a.x, row, a.x_stride, head) + first;
    // Read under evict_last, as block_row's rows are (bench/NOTES.md v104b).
    P x[VECS_PER_THREAD];
#pragma unroll
    for (int j = 0; j < VECS_PER_THREAD; ++j)
      if (valid(j)) x[j] = load_hinted<LoadHint::keep>(xr + std::int64_t(j) * nt);
    // The output row's address is formed where the first result is stored.
    auto slice = [&](const auto& visit) DUET_INLINE_LAMBDA {
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (valid(j))
          visit(x[j], x[j], [&](const P& o) DUET_INLINE_LAMBDA { (row_ptr<T, PACK>(a.out, row, a.out_stride, head) + first)[std::int64_t(j) * nt] = o; });
    };
    const float2 mk = cluster_row_stats<T, PACK, EDGES>(a, slice, edges, scratch, cpairs, blocks, rank, parity, phases);
    const auto value = [&](float v, float) DUET_INLINE_LAMBDA { return held_row_value<T>(v, mk.x, mk.y, a.log); };
    if constexpr (EDGES) edges.store(row_elems<T>(a.out, row, a.out_stride), value);
    slice_write<T>(slice, value);
  }
  // No block leaves while a peer may still store into its shared memory.
  cooperative_groups::this_cluster().sync();
}

// cluster_row_smem's pairs: through the cluster's distributed shared
// memory (ClusterPairs).
struct ClusterExchange {
  static constexpr bool kZeroFills = false;
  ClusterPairs& cpairs;
  int blocks = 0, rank = 0;
  unsigned phases = 0;
  template <int PACK>
  __device__ __forceinline__ BlockSlice start(const SoftmaxArgs& a) {
    const BlockSlice c = cluster_slice_start<PACK>(a, cpairs);
    blocks = c.blocks;
    rank = c.rank;
    return c;
  }
  __device__ __forceinline__ float2 pairs(float m, float s, int parity) {
    return cluster_pairs_exchange(cpairs, m, s, blocks, rank, parity, phases);
  }
  // No block leaves while a peer may still store into its shared memory.
  __device__ __forceinline__ void finish() { cooperative_groups::this_cluster().sync(); }
};

#endif  // DUET_DEVICE_CLUSTERS

template <class T, int PACK, int VECS_PER_THREAD, bool EDGES>
__global__ void __launch_bounds__(kClusterRowMaxThreads, 2) cluster_row_kernel(SoftmaxArgs a) {
#if DUET_DEVICE_CLUSTERS
  __shared__ BlockScratch scratch;
  __shared__ ClusterPairs cpairs;
  cluster_row_body<T, PACK, VECS_PER_THREAD, EDGES>(a, scratch, cpairs);
#else
  (void)a;
#endif  // DUET_DEVICE_CLUSTERS
}

// One block an SM: up to 128 registers a thread, the opt-in shared memory.
template <class T, int PACK, int VECS_PER_THREAD, bool BACKWARD, bool EDGES>
__global__ void __launch_bounds__(kClusterRowSmemThreads, 1) cluster_row_smem_kernel(SoftmaxArgs a) {
#if DUET_DEVICE_CLUSTERS
  extern __shared__ float4 dynamic_smem[];
  __shared__ BlockScratch scratch;
  __shared__ ClusterPairs cpairs;
  ClusterExchange exchange{cpairs};
  held_slice_rows<T, PACK, VECS_PER_THREAD, BACKWARD, EDGES>(a, dynamic_smem, scratch, exchange);
#else
  (void)a;
#endif  // DUET_DEVICE_CLUSTERS
}

static_assert(!any_entry(Strategy::cluster_row, [](const Variant& v) { return v.backward; }),
              "cluster_row is forward only: its kernel takes no direction");
template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::cluster_row, I> = {
    &cluster_row_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.edges>};
template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::cluster_row_smem, I> = {
    &cluster_row_smem_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward, kEntry<I>.edges>};

}  // namespace duet::DUET_NS::kernels
