// group_rows: rows of up to a warp's registers, several rows a warp.
//
// THREADS_PER_ROW threads (1..32, a power of two) own a row; each keeps
// VECS_PER_THREAD packs of PACK elements in registers, so a row of up to
// THREADS_PER_ROW * VECS_PER_THREAD * PACK elements is read and written
// exactly once. Reductions are shuffles within the group, no barrier. Each
// group takes ROWS_PER_STEP rows per step and issues all their loads before
// the first reduction, so every thread has several packs in flight
// (kGroupShapes and kGroupRowsInFlight in softmax_variants.hpp).
// EDGES: rows off the pack grid, their edge elements held beside the packs
// by the group's first lanes (common/row_edges.cuh; at least kEdgesMinGroup
// threads a row).
// Grid: blocks of kGroupRowsBlock threads, one per kGroupRowsBlock /
// THREADS_PER_ROW * ROWS_PER_STEP rows, up to the planner's waves
// (runtime/src/planner/planner.cpp, grid_for); no workspace.
#pragma once

#include "common/family_kernels.cuh"
#include "common/reduce.cuh"
#include "common/row_edges.cuh"
#include "common/row_fragment.cuh"

namespace duet::DUET_NS::kernels {

template <class T, int PACK, int THREADS_PER_ROW, int VECS_PER_THREAD, int ROWS_PER_STEP, bool BACKWARD, bool EDGES>
__global__ void __launch_bounds__(kGroupRowsBlock) group_rows_kernel(SoftmaxArgs a) {
  static_assert(!EDGES || THREADS_PER_ROW >= kEdgesMinGroup, "a row's first lanes hold its edges");
  using P = Pack<T, PACK>;
  constexpr int kGroups = kGroupRowsBlock / THREADS_PER_ROW;  // groups in a block
  constexpr int kRowsPerBlock = kGroups * ROWS_PER_STEP;
  const int lane = threadIdx.x % THREADS_PER_ROW;
  const int group = threadIdx.x / THREADS_PER_ROW;
  const std::int64_t packs = a.cols / PACK;
  // The loop bound is uniform across the block, so whole warps stay
  // converged for the shuffles even when the last rows run out.
  for (std::int64_t base = std::int64_t(blockIdx.x) * kRowsPerBlock; base < a.rows;
       base += std::int64_t(gridDim.x) * kRowsPerBlock) {
    P x[ROWS_PER_STEP][VECS_PER_THREAD];
    P g[ROWS_PER_STEP][BACKWARD ? VECS_PER_THREAD : 1];
    [[maybe_unused]] RowSpan span[ROWS_PER_STEP];
    [[maybe_unused]] EdgesOf<EDGES, T, PACK, THREADS_PER_ROW, BACKWARD> edges[ROWS_PER_STEP];
#pragma unroll
    for (int r = 0; r < ROWS_PER_STEP; ++r) {
      const std::int64_t row = base + std::int64_t(r) * kGroups + group;
      const bool row_ok = row < a.rows;
      int head = 0;
      std::int64_t body = packs;
      if constexpr (EDGES) {
        const std::int64_t rr = row_ok ? row : 0;
        span[r] = row_span<T, PACK>(a.x, rr, a.x_stride, a.cols);
        head = span[r].head;
        body = span[r].body;
        edges[r].place(span[r], lane, row_ok);
        edges[r].load(row_elems<T>(a.x, rr, a.x_stride), BACKWARD ? row_elems<T>(a.dy, rr, a.dy_stride) : nullptr);
      }
      // Written out rather than through load_strided: passing x[r] as an
      // array reference costs 2-8 registers here (ptxas -v, sm_90).
      const P* xr = row_ptr<T, PACK>(a.x, row_ok ? row : 0, a.x_stride, head);
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j) {
        const std::int64_t vi = std::int64_t(j) * THREADS_PER_ROW + lane;
        if (row_ok && vi < body) {
          x[r][j] = load_hinted<LoadHint::keep>(xr + vi);
          if constexpr (BACKWARD)
            g[r][j] = load_hinted<LoadHint::keep>(row_ptr<T, PACK>(a.dy, row, a.dy_stride, head) + vi);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < ROWS_PER_STEP; ++r) {
      const std::int64_t row = base + std::int64_t(r) * kGroups + group;
      const bool row_ok = row < a.rows;
      const std::int64_t body = EDGES ? span[r].body : packs;
      auto valid = [&](int j) { return row_ok && std::int64_t(j) * THREADS_PER_ROW + lane < body; };
      P* orow = row_ptr<T, PACK>(a.out, row_ok ? row : 0, a.out_stride, EDGES ? span[r].head : 0);
      // The row fragment written out (common/row_fragment.cuh says why).
      float m = kNegInf;
      float s = 0.0f;
      if constexpr (!BACKWARD) {
#pragma unroll
        for (int j = 0; j < VECS_PER_THREAD; ++j)
          if (valid(j))
#pragma unroll
            for (int e = 0; e < PACK; ++e) m = fmaxf(m, to_float(x[r][j].v[e]));
        if constexpr (EDGES) m = edges[r].max(m);
        m = group_reduce<THREADS_PER_ROW>(m, MaxOp{});
      }
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (valid(j))
#pragma unroll
          for (int e = 0; e < PACK; ++e) {
            if constexpr (BACKWARD)
              s += backward_term(to_float(x[r][j].v[e]), to_float(g[r][j].v[e]), a.log);
            else
              s += exp_shifted(to_float(x[r][j].v[e]), m);
          }
      if constexpr (EDGES && BACKWARD)
        s = edges[r].sum(s, [&](float y, float dy) { return backward_term(y, dy, a.log); });
      else if constexpr (EDGES)
        s = edges[r].sum(s, [&](float v) { return exp_shifted(v, m); });
      s = group_reduce<THREADS_PER_ROW>(s, SumOp{});
      const float inv_s = 1.0f / s;
      const float log_s = logf(s);
      if constexpr (EDGES)
        edges[r].store(row_elems<T>(a.out, row_ok ? row : 0, a.out_stride), [&](float v, float dy) {
          return BACKWARD ? backward_value(v, dy, s, a.log) : forward_value(v, m, inv_s, log_s, a.log);
        });
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (valid(j)) {
          P o;
#pragma unroll
          for (int e = 0; e < PACK; ++e) {
            if constexpr (BACKWARD)
              o.v[e] = from_float<T>(backward_value(to_float(x[r][j].v[e]), to_float(g[r][j].v[e]), s, a.log));
            else
              o.v[e] = from_float<T>(forward_value(to_float(x[r][j].v[e]), m, inv_s, log_s, a.log));
          }
          orow[std::int64_t(j) * THREADS_PER_ROW + lane] = o;
        }
    }
  }
}

template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::group_rows, I> = {
    &group_rows_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.group, kEntry<I>.vpt, kEntry<I>.rows,
                       kEntry<I>.backward, kEntry<I>.edges>};

}  // namespace duet::DUET_NS::kernels
