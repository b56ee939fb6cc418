// A row cut over several blocks, each block's slice held on chip between
// the row's read and its write: the block's place in the row (BlockSlice)
// and the pipelined rows of the families that keep a slice in registers and
// shared memory (cluster_row_smem: the blocks of a cluster; grid_row:
// blocks of one grid). They differ only in how a row's blocks trade their
// (max, sum) pairs, which each family passes in.
#pragma once

#include "common/reduce.cuh"
#include "common/row_edges.cuh"
#include "common/row_fragment.cuh"

namespace duet::DUET_NS::kernels {

// A block's place among the `blocks` blocks that share a row: its rank, the
// groups of blocks walking the rows, and this thread's packs of every row:
// first, first + nt, ... below the slice's end (the same each row where
// rows are whole packs; with edges a row's body is its own).
struct BlockSlice {
  int blocks, rank, nt;
  std::int64_t groups, first, end;
  // This thread's packs below `limit`.
  __device__ __forceinline__ int count_below(std::int64_t limit) const {
    return first < limit ? static_cast<int>((limit - first + nt - 1) / nt) : 0;
  }
};
template <int PACK>
__device__ __forceinline__ BlockSlice block_slice(const SoftmaxArgs& a, int rank, std::int64_t groups) {
  BlockSlice c;
  c.blocks = a.chunks_per_row;
  c.rank = rank;
  c.nt = blockDim.x;
  c.groups = groups;
  const Chunk chunk = chunk_of<PACK>(a, rank);
  c.first = chunk.begin + static_cast<int>(threadIdx.x);
  c.end = chunk.end;
  return c;
}

// An output value from the row's max m and constant k (cluster_row_stats; the
// held-slice rows' forward).
template <class T>
__device__ __forceinline__ float held_row_value(float v, float m, float k, const int& log) {
  const float d = v - m;
  if (log) return d - k;
  if constexpr (sizeof(T) == 2)
    return fast_exp2(fmaf(d, kLog2e, -k));
  else
    return fast_exp2(d * kLog2e) * k;  // forward_value's arithmetic
}

#if DUET_DEVICE_CP_ASYNC
// The rows of a family that holds each block's slice of a row on chip
// (cluster_row_smem, grid_row), pipelined, so that one block an SM keeps
// the memory busy while it computes:
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
//   blocks' exchange remain.
// Backward keeps y in slots [0, smem_vecs) and dy in [smem_vecs, 2
// smem_vecs) of each thread's, and exchanges (0, sum) as its pair.
inline constexpr int kCpAsyncLag = 8;

// The blocks that share a row trade their pairs through `exchange`, an
// Exchange: start(a) returns the block's BlockSlice once pairs may be sent;
// pairs(m, s, parity) returns the row's pair from every block's (rows
// alternate parity 0 and 1); finish() returns once no peer still needs
// this block; kZeroFills chooses how the slots are filled (fill, below).
template <class T, int PACK, int VECS_PER_THREAD, bool BACKWARD, bool EDGES, class Exchange>
__device__ __forceinline__ void held_slice_rows(const SoftmaxArgs& a, float4* dynamic_smem, BlockScratch& scratch,
                                                Exchange& exchange) {
  using P = Pack<T, PACK>;
  const BlockSlice c = exchange.template start<PACK>(a);
  const int blocks = c.blocks, rank = c.rank, nt = c.nt;
  const int tid = threadIdx.x;
  const std::int64_t groups = c.groups, first = c.first;
  auto count_below = [&](std::int64_t end) { return c.count_below(end); };
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
  // Issues the copies of slot k of a row into shared memory where this
  // thread holds slot k of it (`count` packs). Exchange::kZeroFills: one
  // copy every slot with no branch around it, zeros where the row has no
  // pack (read from nowhere; the row's first pack, `first` packs before
  // this thread's, stands in as the address). grid_row ran faster that
  // way, cluster_row_smem's forward slower (bench/NOTES.md v65).
  auto fill = [&](int k, const P* xr, const P* gr, int count) DUET_INLINE_LAMBDA {
    const bool full = VECS_PER_THREAD + k < count;
    if constexpr (Exchange::kZeroFills) {
      const std::int64_t at = full ? std::int64_t(VECS_PER_THREAD + k) * nt : -first;
      duet_cp_async16_or_zero(&slot(k), xr + at, full);
      if constexpr (BACKWARD) duet_cp_async16_or_zero(&dy_slot(k), gr + at, full);
    } else if (full) {
      duet_cp_async16(&slot(k), xr + std::int64_t(VECS_PER_THREAD + k) * nt);
      if constexpr (BACKWARD) duet_cp_async16(&dy_slot(k), gr + std::int64_t(VECS_PER_THREAD + k) * nt);
    }
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
    for (int k = 0; k < smem_vecs && (Exchange::kZeroFills || VECS_PER_THREAD + k < body.count); ++k)
      fill(k, xr, gr, body.count);
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
  for (; row < a.rows; row += groups, parity ^= 1) {
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
      stats = exchange.pairs(0.0f, block_reduce(st.s, scratch[parity], SumOp{}), parity);
    } else {
      if constexpr (EDGES) edges.online(st.m, st.s);
      const float block_m = block_reduce(st.m, scratch[0], MaxOp{});
      const float block_s = block_reduce(rescale(st.s, st.m, block_m), scratch[1], SumOp{});
      stats = exchange.pairs(block_m, block_s, parity);
    }
    const float row_m = stats.x;
    const float k_row = BACKWARD ? stats.y : a.log ? logf(stats.y) : sizeof(T) == 2 ? log2f(stats.y) : 1.0f / stats.y;
    const auto value = [&](float v, float dy) DUET_INLINE_LAMBDA {
      if constexpr (BACKWARD)
        return backward_value(v, dy, k_row, a.log);
      else
        return held_row_value<T>(v, row_m, k_row, a.log);
    };
    const auto result = [&](const P& p, const P& q) DUET_INLINE_LAMBDA {
      return make_pack<T, P>([&](int e) DUET_INLINE_LAMBDA { return value(element<T>(p, e), element<T>(q, e)); });
    };
    if constexpr (EDGES) edges.store(row_elems<T>(a.out, row, a.out_stride), value);
    // The write, refilling every slot with the next row's pack as it goes.
    P* const out = row_ptr<T, PACK>(a.out, row, a.out_stride, body.head) + first;
    const Body next = body_of(row + groups);
    const P* const xn = packs_of(a.x, a.x_stride, row + groups, next);
    const P* const gn = BACKWARD ? packs_of(a.dy, a.dy_stride, row + groups, next) : nullptr;
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
      fill(k, xn, gn, next.count);
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
  exchange.finish();
}
#endif  // DUET_DEVICE_CP_ASYNC

}  // namespace duet::DUET_NS::kernels
