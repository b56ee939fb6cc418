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
#include "common/reduce.cuh"
#include "common/row_edges.cuh"
#include "common/row_fragment.cuh"

namespace duet::DUET_NS::kernels {

#if DUET_DEVICE_CLUSTERS
// The row's max and the per-row constant k of cluster_row_value, from this
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
  // One per-row constant k (a register: the row's packs fill the rest):
  // log_softmax subtracts log s; softmax multiplies by 1/s, except for
  // 16-bit results, where exp(x - m) / s is one exp2 of (x - m) log2e -
  // log2 s, an FFMA in place of two FMULs, whose ~1e-6 relative error is
  // far below their rounding (2^-9 bf16, 2^-12 f16).
  return {stats.x, a.log ? logf(stats.y) : sizeof(T) == 2 ? log2f(stats.y) : 1.0f / stats.y};
}

// An output value from the row's max m and constant k (cluster_row_stats).
template <class T>
__device__ __forceinline__ float cluster_row_value(float v, float m, float k, const int& log) {
  const float d = v - m;
  if (log) return d - k;
  if constexpr (sizeof(T) == 2)
    return fast_exp2(fmaf(d, kLog2e, -k));
  else
    return fast_exp2(d * kLog2e) * k;  // forward_value's arithmetic
}

// A block's place in its cluster, once its cluster's barriers are set up
// (every block's, before any pair is sent): the cluster's blocks, this
// block's rank, the clusters walking the rows, and this thread's packs of
// every row: first, first + nt, ... below the slice's end (the same each
// row where rows are whole packs; with edges a row's body is its own).
struct ClusterSlice {
  int blocks, rank, nt;
  std::int64_t clusters, first, end;
  // This thread's packs below `limit`.
  __device__ __forceinline__ int count_below(std::int64_t limit) const {
    return first < limit ? static_cast<int>((limit - first + nt - 1) / nt) : 0;
  }
};
template <int PACK>
__device__ __forceinline__ ClusterSlice cluster_slice_start(const SoftmaxArgs& a, ClusterPairs& cpairs) {
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  ClusterSlice c;
  c.blocks = a.chunks_per_row;
  c.rank = static_cast<int>(cluster.block_rank());
  c.nt = blockDim.x;
  cluster_pairs_init(cpairs);
  cluster.sync();
  c.clusters = gridDim.x / c.blocks;
  const Chunk chunk = chunk_of<PACK>(a, c.rank);
  c.first = chunk.begin + static_cast<int>(threadIdx.x);
  c.end = chunk.end;
  return c;
}

template <class T, int PACK, int VECS_PER_THREAD, bool EDGES>
__device__ __forceinline__ void cluster_row_body(const SoftmaxArgs& a, BlockScratch& scratch, ClusterPairs& cpairs) {
  using P = Pack<T, PACK>;
  const ClusterSlice c = cluster_slice_start<PACK>(a, cpairs);
  const int blocks = c.blocks, rank = c.rank, nt = c.nt;
  const int tid = threadIdx.x;
  const std::int64_t clusters = c.clusters, first = c.first;
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
    const float2 mk = cluster_row_stats<T, PACK, EDGES>(a, slice, edges, scratch, cpairs, blocks, rank, parity, phases);
    const auto value = [&](float v, float) DUET_INLINE_LAMBDA { return cluster_row_value<T>(v, mk.x, mk.y, a.log); };
    if constexpr (EDGES) edges.store(row_elems<T>(a.out, row, a.out_stride), value);
    slice_write<T>(slice, value);
  }
  // No block leaves while a peer may still store into its shared memory.
  cooperative_groups::this_cluster().sync();
}

// cluster_row_smem's rows, pipelined, so that one block an SM keeps the
// memory busy while it computes:
// - a row's loads are issued while the row before is written, each
//   register or shared-memory slot refilled right after its value is
//   stored (a slot's copy is issued after this thread's store of the value
//   it read there, so the read has returned); the first row's before the
//   loop;
// - the refilled slots' statistics (forward: the online (max, sum);
//   backward: sum(dy y), log_softmax sum(dy)) are taken in the same loop,
//   kCpAsyncLag slots behind the copies (each slot's copy its own group),
//   so the next row's arithmetic runs while the memory moves, and between
//   rows only the registers' packs, the block's reduction and the
//   cluster's exchange remain.
// Backward keeps y in slots [0, smem_vecs) and dy in [smem_vecs, 2
// smem_vecs) of each thread's, and exchanges (0, sum) as its pair.
inline constexpr int kCpAsyncLag = 8;

template <class T, int PACK, int VECS_PER_THREAD, bool BACKWARD, bool EDGES>
__device__ __forceinline__ void cluster_row_smem_body(const SoftmaxArgs& a, float4* dynamic_smem,
                                                      BlockScratch& scratch, ClusterPairs& cpairs) {
  using P = Pack<T, PACK>;
  const ClusterSlice c = cluster_slice_start<PACK>(a, cpairs);
  const int blocks = c.blocks, rank = c.rank, nt = c.nt;
  const int tid = threadIdx.x;
  const std::int64_t clusters = c.clusters, first = c.first;
  auto count_below = [&](std::int64_t end) { return c.count_below(end); };
  unsigned phases = 0;
  const int smem_vecs = a.smem_vecs;
  P* const smem = reinterpret_cast<P*>(dynamic_smem) + tid;  // this thread's slot 0; slot k at k * nt
  auto slot = [&](int k) DUET_INLINE_LAMBDA -> P& { return smem[std::int64_t(k) * nt]; };
  auto dy_slot = [&](int k) DUET_INLINE_LAMBDA -> P& { return smem[std::int64_t(smem_vecs + k) * nt]; };
  // A row's body as this thread sees it: the pack offset of its first
  // whole pack and how many of this thread's packs it holds (0 past the
  // last row: nothing to load).
  struct Body {
    int head = 0;
    int count = 0;
  };
  auto body_of = [&](std::int64_t row) {
    Body b;
    if (row >= a.rows) return b;
    b.count = count_below(c.end);
    if constexpr (EDGES) {
      const RowSpan span = row_span<T, PACK>(a.x, row, a.x_stride, a.cols);
      b.head = span.head;
      b.count = count_below(c.end < span.body ? c.end : span.body);
    }
    return b;
  };
  // This thread's first pack of a row's x (backward: y) and dy.
  auto packs_of = [&](const void* t, std::int64_t stride, std::int64_t row, const Body& b) {
    return row_ptr<T, PACK>(t, row < a.rows ? row : 0, stride, b.head) + first;
  };
  // A row's statistics so far: forward an online pair (m, s), backward the
  // sum alone (m stays 0, so the cluster's exchange adds the sums).
  struct Stats {
    float m = BACKWARD ? 0.0f : kNegInf;
    float s = 0.0f;
  };
  auto add = [&](Stats& st, const P& p, const P& q) DUET_INLINE_LAMBDA {
    if constexpr (BACKWARD) {
#pragma unroll
      for (int e = 0; e < PACK; ++e) st.s += backward_term(element<T>(p, e), element<T>(q, e), a.log);
    } else {
      online_add<PACK>(st.m, st.s, [&](int e) DUET_INLINE_LAMBDA { return element<T>(p, e); });
    }
  };
  // Issues the copies of slot k of a row into shared memory.
  auto fill = [&](int k, const P* xr, const P* gr) DUET_INLINE_LAMBDA {
    duet_cp_async16(&slot(k), xr + std::int64_t(VECS_PER_THREAD + k) * nt);
    if constexpr (BACKWARD) duet_cp_async16(&dy_slot(k), gr + std::int64_t(VECS_PER_THREAD + k) * nt);
  };
  auto add_slot = [&](Stats& st, int k) DUET_INLINE_LAMBDA {
    if constexpr (BACKWARD)
      add(st, slot(k), dy_slot(k));
    else
      add(st, slot(k), slot(k));
  };
  P x[VECS_PER_THREAD];
  P g[BACKWARD ? VECS_PER_THREAD : 1];
  std::int64_t row = blockIdx.x / blocks;
  Body body = body_of(row);
  // The shared-memory slots' statistics of the row about to be reduced.
  Stats slots;
  {
    const P* xr = packs_of(a.x, a.x_stride, row, body);
    const P* gr = BACKWARD ? packs_of(a.dy, a.dy_stride, row, body) : nullptr;
    for (int k = 0; k < smem_vecs && VECS_PER_THREAD + k < body.count; ++k) fill(k, xr, gr);
#pragma unroll
    for (int j = 0; j < VECS_PER_THREAD; ++j)
      if (j < body.count) {
        x[j] = xr[std::int64_t(j) * nt];
        if constexpr (BACKWARD) g[j] = gr[std::int64_t(j) * nt];
      }
    duet_cp_async_wait_all();
    for (int k = 0; k < smem_vecs && VECS_PER_THREAD + k < body.count; ++k) add_slot(slots, k);
  }
  int parity = 0;
  for (; row < a.rows; row += clusters, parity ^= 1) {
    [[maybe_unused]] EdgesOf<EDGES, T, PACK, 64, BACKWARD> edges;
    if constexpr (EDGES) {
      edges.place(row_span<T, PACK>(a.x, row, a.x_stride, a.cols), tid, rank == 0);
      edges.load(row_elems<T>(a.x, row, a.x_stride), BACKWARD ? row_elems<T>(a.dy, row, a.dy_stride) : nullptr);
    }
    const int count = body.count;
    auto valid = [&](int j) { return j < count; };
    Stats st = slots;
#pragma unroll
    for (int j = 0; j < VECS_PER_THREAD; ++j)
      if (valid(j)) add(st, x[j], BACKWARD ? g[j] : x[j]);
    float2 stats;
    if constexpr (BACKWARD) {
      if constexpr (EDGES) st.s = edges.sum(st.s, [&](float y, float dy) { return backward_term(y, dy, a.log); });
      stats = cluster_pairs_exchange(cpairs, 0.0f, block_reduce(st.s, scratch[parity], SumOp{}), blocks, rank,
                                     parity, phases);
    } else {
      if constexpr (EDGES) edges.online(st.m, st.s);
      const float block_m = block_reduce(st.m, scratch[0], MaxOp{});
      const float block_s = block_reduce(rescale(st.s, st.m, block_m), scratch[1], SumOp{});
      stats = cluster_pairs_exchange(cpairs, block_m, block_s, blocks, rank, parity, phases);
    }
    const float row_m = stats.x;
    const float k_row = BACKWARD ? stats.y : a.log ? logf(stats.y) : sizeof(T) == 2 ? log2f(stats.y) : 1.0f / stats.y;
    const auto value = [&](float v, float dy) DUET_INLINE_LAMBDA {
      if constexpr (BACKWARD)
        return backward_value(v, dy, k_row, a.log);
      else
        return cluster_row_value<T>(v, row_m, k_row, a.log);
    };
    const auto result = [&](const P& p, const P& q) DUET_INLINE_LAMBDA {
      return make_pack<T, P>([&](int e) DUET_INLINE_LAMBDA { return value(element<T>(p, e), element<T>(q, e)); });
    };
    if constexpr (EDGES) edges.store(row_elems<T>(a.out, row, a.out_stride), value);
    // The write, refilling every slot with the next row's pack as it goes.
    P* const out = row_ptr<T, PACK>(a.out, row, a.out_stride, body.head) + first;
    const Body next = body_of(row + clusters);
    const P* const xn = packs_of(a.x, a.x_stride, row + clusters, next);
    const P* const gn = BACKWARD ? packs_of(a.dy, a.dy_stride, row + clusters, next) : nullptr;
#pragma unroll
    for (int j = 0; j < VECS_PER_THREAD; ++j) {
      if (valid(j)) out[std::int64_t(j) * nt] = result(x[j], BACKWARD ? g[j] : x[j]);
      if (j < next.count) {
        x[j] = xn[std::int64_t(j) * nt];
        if constexpr (BACKWARD) g[j] = gn[std::int64_t(j) * nt];
      }
    }
    slots = Stats{};
    for (int k = 0; k < smem_vecs; ++k) {
      if (valid(VECS_PER_THREAD + k))
        out[std::int64_t(VECS_PER_THREAD + k) * nt] = result(slot(k), BACKWARD ? dy_slot(k) : slot(k));
      if (VECS_PER_THREAD + k < next.count) fill(k, xn, gn);
      duet_cp_async_commit();  // a group a slot, empty or not: the lag counts slots
      if (k >= kCpAsyncLag) {
        duet_cp_async_wait_group<kCpAsyncLag>();  // slot k - lag has landed
        if (VECS_PER_THREAD + k - kCpAsyncLag < next.count) add_slot(slots, k - kCpAsyncLag);
      }
    }
    duet_cp_async_wait_all();
    for (int k = smem_vecs > kCpAsyncLag ? smem_vecs - kCpAsyncLag : 0; k < smem_vecs; ++k)
      if (VECS_PER_THREAD + k < next.count) add_slot(slots, k);
    body = next;
  }
  // No block leaves while a peer may still store into its shared memory.
  cooperative_groups::this_cluster().sync();
}
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
  cluster_row_smem_body<T, PACK, VECS_PER_THREAD, BACKWARD, EDGES>(a, dynamic_smem, scratch, cpairs);
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
