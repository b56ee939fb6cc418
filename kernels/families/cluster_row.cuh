// cluster_row: a row past one block's registers, cut over a thread-block
// cluster (Hopper, sm_90, and later; forward only).
//
// The cluster has a.chunks_per_row blocks (the launch's cluster size): block
// r keeps packs [r * chunk, (r + 1) * chunk) of the row in registers as
// block_row does (thread t: chunk start + t, + T, ...), reduces them to an
// online pair (m_r, s_r = sum exp(x - m_r)), and the pairs are exchanged
// through distributed shared memory (ClusterPairs, common/reduce.cuh: no
// cluster barrier a row). Read once, write once; blocks of up to 512
// threads fit at least twice an SM.
// Grid: one wave of whole clusters walking the rows (grid_for in
// runtime/src/planner/planner.cpp says why), launched with the cluster
// attribute (softmax_launch.cu); no workspace.
// EDGES: rows off the pack grid, their edge elements held beside the packs
// by the first threads of the cluster's first block (common/row_edges.cuh).
// Never launched where DeviceProps::cluster_launch is false.
#pragma once

#include "common/family_kernels.cuh"
#include "common/reduce.cuh"
#include "common/row_edges.cuh"
#include "common/row_fragment.cuh"

namespace duet::DUET_NS::kernels {

template <class T, int PACK, int VECS_PER_THREAD, bool EDGES>
__global__ void __launch_bounds__(kClusterRowMaxThreads, 2) cluster_row_kernel(SoftmaxArgs a) {
#if DUET_DEVICE_CLUSTERS
  using P = Pack<T, PACK>;
  namespace cg = cooperative_groups;
  __shared__ BlockScratch scratch;
  __shared__ ClusterPairs cpairs;
  const cg::cluster_group cluster = cg::this_cluster();
  const int blocks = a.chunks_per_row;
  const int rank = static_cast<int>(cluster.block_rank());
  const int tid = threadIdx.x;
  const int nt = blockDim.x;
  unsigned phases = 0;
  cluster_pairs_init(cpairs);
  cluster.sync();
  const std::int64_t clusters = gridDim.x / blocks;
  // This thread's packs of every row: first, first + nt, ... (count of
  // them below the chunk's end), the same for each row where rows are
  // whole packs, so computed once; with edges a row's body is its own.
  const Chunk chunk = chunk_of<PACK>(a, rank);
  const std::int64_t first = chunk.begin + tid;
  auto count_below = [&](std::int64_t end) {
    return first < end ? static_cast<int>((end - first + nt - 1) / nt) : 0;
  };
  const int whole_count = count_below(chunk.end);
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
      count = count_below(chunk.end < span.body ? chunk.end : span.body);
      edges.place(span, tid, rank == 0);
      edges.load(row_elems<T>(a.x, row, a.x_stride), nullptr);
    }
    auto valid = [&](int j) { return j < count; };
    const P* xr = row_ptr<T, PACK>(a.x, row, a.x_stride, head) + first;
    P x[VECS_PER_THREAD];
#pragma unroll
    for (int j = 0; j < VECS_PER_THREAD; ++j)
      if (valid(j)) x[j] = xr[std::int64_t(j) * nt];
    // The output row's address is formed where the first result is stored.
    auto slice = [&](const auto& visit) DUET_INLINE_LAMBDA {
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (valid(j))
          visit(x[j], x[j], [&](const P& o) DUET_INLINE_LAMBDA { (row_ptr<T, PACK>(a.out, row, a.out_stride, head) + first)[std::int64_t(j) * nt] = o; });
    };

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
    const float row_m = stats.x;
    const float row_s = stats.y;
    // One per-row constant k (a register: the row's packs fill the rest):
    // log_softmax subtracts log s; softmax multiplies by 1/s, except for
    // 16-bit results, where exp(x - m) / s is one exp2 of (x - m) log2e -
    // log2 s, an FFMA in place of two FMULs, whose ~1e-6 relative error is
    // far below their rounding (2^-9 bf16, 2^-12 f16).
    const float k = a.log ? logf(row_s) : sizeof(T) == 2 ? log2f(row_s) : 1.0f / row_s;
    const auto value = [&](float v, float) DUET_INLINE_LAMBDA {
      const float d = v - row_m;
      if (a.log) return d - k;
      if constexpr (sizeof(T) == 2)
        return fast_exp2(fmaf(d, kLog2e, -k));
      else
        return fast_exp2(d * kLog2e) * k;  // forward_value's arithmetic
    };
    if constexpr (EDGES) edges.store(row_elems<T>(a.out, row, a.out_stride), value);
    slice_write<T>(slice, value);
  }
  // No block leaves while a peer may still store into its shared memory.
  cluster.sync();
#else
  (void)a;
#endif  // DUET_DEVICE_CLUSTERS
}

static_assert(!any_entry(Strategy::cluster_row, [](const Variant& v) { return v.backward; }),
              "cluster_row is forward only: its kernel takes no direction");
template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::cluster_row, I> = {
    &cluster_row_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.edges>};

}  // namespace duet::DUET_NS::kernels
