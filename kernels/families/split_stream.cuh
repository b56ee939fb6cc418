// split_stream: split_row's two passes in one launch, ordered so that the
// second pass finds its input still in L2.
//
// Work item i is chunk i % chunks_per_row of row i / chunks_per_row, as in
// split_row, and each item is visited twice: pass 1 reduces the chunk to its
// pair and counts it done for its row; the row's last pass 1 to finish
// combines the row's pairs into the row's (max, sum) and counts once more;
// pass 2 waits for that count and writes the chunk.
// Blocks take visits from a ticket queue in the order
//   pass 1 of items [0, lag); then pass 1 of item lag + j and pass 2 of item j,
//   alternately; then pass 2 of the last lag items,
// so a chunk is read again about `lag` chunks of other reads after its first
// read, and the planner sizes `lag` to what the L2 keeps.
// A visit waits only on visits with smaller tickets (a row's chunks lie within
// chunks_per_row - 1 items of each other, and lag >= chunks_per_row), which
// blocks already running hold and finish without waiting on later tickets. So
// the wait always ends, whatever the grid and whatever else shares the device.
// Each thread holds VECS_PER_THREAD packs of a chunk (chunk_elems =
// kSplitStreamBlock * VECS_PER_THREAD * PACK), as PackWords: a Pack of eight
// 16-bit values is held in eight registers and spills (ptxas -v, sm_90).
// EDGES: rows off the pack grid: a row's body of whole packs in chunks, its
// edge elements with its first chunk, held by that block's first threads
// (common/row_edges.cuh).
// Grid: one wave of kSplitStreamBlock-thread blocks. Workspace (a.counters
// and a.partials, zeroed counters before each launch): the layout of
// split_stream_counter_bytes / split_stream_partials_offset in
// softmax_args.hpp, sized in runtime/src/planner/planner.cpp (grid_for); lag from
// make_plan.
#pragma once

#include "common/family_kernels.cuh"
#include "common/reduce.cuh"
#include "common/row_edges.cuh"
#include "common/row_fragment.cuh"

namespace duet::DUET_NS::kernels {

template <class T, int PACK, int VECS_PER_THREAD, bool BACKWARD, bool EDGES>
__global__ void __launch_bounds__(kSplitStreamBlock, kSplitStreamMinBlocksPerSm) split_stream_kernel(SoftmaxArgs a) {
  using V = PackWords<T, PACK>;
  constexpr int W = DUET_DEVICE_WARP_SIZE;
  __shared__ BlockScratch scratch;
  __shared__ float2 row_stats;
  __shared__ unsigned long long ticket[2];
  const int tid = threadIdx.x;
  // The block size is fixed (the planner launches kSplitStreamBlock threads),
  // so a thread's packs sit at constant offsets from its first: fewer
  // registers for addresses (bf16 spills at a run-time stride: ptxas -v, sm_90).
  constexpr int nt = kSplitStreamBlock;
  const std::int64_t chunks = a.chunks_per_row;
  const std::int64_t items = a.rows * chunks;
  const std::int64_t lag = a.lag < items ? a.lag : items;
  auto* const next_ticket = reinterpret_cast<unsigned long long*>(a.counters);
  // Per row: chunks whose pass 1 is done, + 1 once the row's result is out.
  unsigned* const done = a.counters + 2;
  float* const row_result = a.partials + 2 * items;  // (max, sum) per row
  if (tid == 0) ticket[0] = atomicAdd(next_ticket, 1ull);
  __syncthreads();
  for (int slot = 0;; slot ^= 1) {
    const std::int64_t t = static_cast<std::int64_t>(ticket[slot]);
    if (t >= 2 * items) break;
    // The next ticket is asked for now and used after this visit, so its
    // round trip to L2 overlaps the visit.
    unsigned long long t_next = 0;
    if (tid == 0) t_next = atomicAdd(next_ticket, 1ull);
    bool second = false;
    std::int64_t item = t;
    if (t >= lag && t < 2 * items - lag) {
      const std::int64_t u = t - lag;
      second = (u & 1) != 0;
      item = second ? u / 2 : lag + u / 2;
    } else if (t >= lag) {
      second = true;
      item = items - lag + (t - (2 * items - lag));
    }
    Chunk ch = chunk_of<PACK>(a, item);
    [[maybe_unused]] EdgesOf<EDGES, T, PACK, nt, BACKWARD> edges;
    int head = 0;
    if constexpr (EDGES) {
      const RowSpan span = row_span<T, PACK>(a.x, ch.row, a.x_stride, a.cols);
      head = span.head;
      if (ch.end > span.body) ch.end = span.body;
      edges.place(span, tid, ch.begin == 0);
      edges.load(row_elems<T>(a.x, ch.row, a.x_stride), BACKWARD ? row_elems<T>(a.dy, ch.row, a.dy_stride) : nullptr);
    }
    const std::int64_t first = ch.begin + tid;
    const V* xr = row_ptr<T, PACK, V>(a.x, ch.row, a.x_stride, head);
    const V* gr = BACKWARD ? row_ptr<T, PACK, V>(a.dy, ch.row, a.dy_stride, head) : nullptr;
    auto valid = [&](int j) { return first + j * nt < ch.end; };
    V x[VECS_PER_THREAD];
    V g[BACKWARD ? VECS_PER_THREAD : 1];
    // The chunk's packs; pass 1 never stores.
    const auto slice = [&](const auto& visit) DUET_INLINE_LAMBDA {
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (valid(j))
          visit(x[j], dy_or_x<BACKWARD>(g[BACKWARD ? j : 0], x[j]), [&](const V& o) DUET_INLINE_LAMBDA {
            store_streaming(row_ptr<T, PACK, V>(a.out, ch.row, a.out_stride, head) + first + j * nt, o);
          });
    };
    if (!second) {
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (valid(j)) {
          x[j] = load_hinted<LoadHint::keep>(xr + first + j * nt);
          if constexpr (BACKWARD) g[j] = load_hinted<LoadHint::keep>(gr + first + j * nt);
        }
      float m = kNegInf;
      float s = 0.0f;
      if constexpr (!BACKWARD) {
        // Online over the thread's packs, as split_row's first pass, so no
        // value stays live across the block's reductions (max then sum
        // spills at 16-bit types: ptxas -v, sm_90).
        slice_online<T, PACK>(m, s, slice);
        if constexpr (EDGES) edges.online(m, s);
        const float m_blk = block_reduce(m, scratch[0], MaxOp{});
        s = block_reduce(rescale(s, m, m_blk), scratch[1], SumOp{});
        m = m_blk;
      } else {
        s = slice_backward_sum<T, PACK>(s, slice, a.log);
        if constexpr (EDGES) s = edges.sum(s, [&](float y, float dy) { return backward_term(y, dy, a.log); });
        s = block_reduce(s, scratch[0], SumOp{});
      }
      if (tid < W) {
        unsigned prior = 0;
        if (tid == 0) {
          a.partials[2 * item] = m;
          a.partials[2 * item + 1] = s;
          __threadfence();  // the pair is visible device-wide before the count
          prior = atomicAdd(&done[ch.row], 1u);
        }
        // The last of the row: the first warp combines the row's pairs
        // (volatile: past the non-coherent L1) and publishes the result.
        const bool last = group_reduce<W>(prior + 1 == static_cast<unsigned>(chunks) ? 1.0f : 0.0f, MaxOp{}) > 0.0f;
        if (last) {
          __threadfence();
          const volatile float* pr = a.partials + 2 * ch.row * chunks;
          float rm = kNegInf;
          float rs = 0.0f;
          // Not unrolled: the loads in flight beside the chunk's registers
          // spill unrolled (ptxas -v, sm_90).
#pragma unroll 1
          for (std::int64_t c = tid; c < chunks; c += W) {
            const float mc = pr[2 * c];
            const float sc = pr[2 * c + 1];
            if constexpr (BACKWARD) {
              rs += sc;
            } else {
              const float m_new = fmaxf(rm, mc);
              rs = rescale(rs, rm, m_new) + rescale(sc, mc, m_new);
              rm = m_new;
            }
          }
          if constexpr (!BACKWARD) {
            const float2 pair = group_reduce_pair<W>(rm, rs);
            rm = pair.x;
            rs = pair.y;
          } else {
            rs = group_reduce<W>(rs, SumOp{});
          }
          if (tid == 0) {
            row_result[2 * ch.row] = rm;
            row_result[2 * ch.row + 1] = rs;
            __threadfence();
            atomicAdd(&done[ch.row], 1u);
          }
        }
      }
    } else {
      // The chunk's loads go out before the wait: they do not depend on it.
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (valid(j)) {
          x[j] = load_hinted<LoadHint::last_use>(xr + first + j * nt);
          if constexpr (BACKWARD) g[j] = load_hinted<LoadHint::last_use>(gr + first + j * nt);
        }
      if (tid < W) {
        // Every lane of the first warp waits for the row's result itself,
        // so each has seen the count before it reads the result.
        const volatile unsigned* count = done + ch.row;
        while (*count <= static_cast<unsigned>(chunks)) {
        }
        __threadfence();
        if (tid == 0) {
          const volatile float* r = row_result + 2 * ch.row;
          row_stats = make_float2(r[0], r[1]);
        }
      }
      __syncthreads();
      const float m = row_stats.x;
      const float s = row_stats.y;
      if constexpr (BACKWARD) {
        if constexpr (EDGES)
          edges.store(row_elems<T>(a.out, ch.row, a.out_stride),
                      [&](float y, float dy) { return backward_value(y, dy, s, a.log); });
        write_backward<T>(slice, s, a.log);
      } else {
        const RowScale rs = row_scale(m, s);
        if constexpr (EDGES)
          edges.store(row_elems<T>(a.out, ch.row, a.out_stride),
                      [&](float v, float) { return forward_value(v, rs.m, rs.inv_s, rs.log_s, a.log); });
        write_forward<T>(slice, rs, a.log);
      }
    }
    // Also the barrier between this visit's reductions (and row_stats) and
    // the next visit's.
    if (tid == 0) ticket[slot ^ 1] = t_next;
    __syncthreads();
  }
}

template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::split_stream, I> = {
    &split_stream_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward, kEntry<I>.edges>};

}  // namespace duet::DUET_NS::kernels
