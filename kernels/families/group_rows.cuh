// group_rows: rows of up to a warp's registers, several rows a warp.
//
// THREADS_PER_ROW threads (1..32, a power of two) own a row; each keeps
// VECS_PER_THREAD packs of PACK elements in registers, so a row of up to
// THREADS_PER_ROW * VECS_PER_THREAD * PACK elements is read and written
// exactly once. Reductions are shuffles within the group, no barrier. Each
// group takes ROWS_PER_STEP rows per step and issues all their loads before
// the first reduction, so every thread has several packs in flight
// (kGroupShapes and kGroupRowsInFlight in softmax_variants.hpp).
// Grid: blocks of kGroupRowsBlock threads, one per kGroupRowsBlock /
// THREADS_PER_ROW * ROWS_PER_STEP rows, up to the planner's waves
// (runtime/src/planner.cpp, grid_for); no workspace.
#pragma once

#include "common/reduce.cuh"
#include "common/row_fragment.cuh"

namespace duet::DUET_NS::kernels {

template <class T, int PACK, int THREADS_PER_ROW, int VECS_PER_THREAD, int ROWS_PER_STEP, bool BACKWARD>
__global__ void __launch_bounds__(kGroupRowsBlock) group_rows_kernel(SoftmaxArgs a) {
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
#pragma unroll
    for (int r = 0; r < ROWS_PER_STEP; ++r) {
      const std::int64_t row = base + std::int64_t(r) * kGroups + group;
      const bool row_ok = row < a.rows;
      // Written out rather than through load_strided: passing x[r] as an
      // array reference costs 2-8 registers here (ptxas -v, sm_90).
      const P* xr = row_ptr<T, PACK>(a.x, row_ok ? row : 0, a.x_stride);
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j) {
        const std::int64_t vi = std::int64_t(j) * THREADS_PER_ROW + lane;
        if (row_ok && vi < packs) {
          x[r][j] = xr[vi];
          if constexpr (BACKWARD) g[r][j] = row_ptr<T, PACK>(a.dy, row, a.dy_stride)[vi];
        }
      }
    }
#pragma unroll
    for (int r = 0; r < ROWS_PER_STEP; ++r) {
      const std::int64_t row = base + std::int64_t(r) * kGroups + group;
      const bool row_ok = row < a.rows;
      auto valid = [&](int j) { return row_ok && std::int64_t(j) * THREADS_PER_ROW + lane < packs; };
      P* orow = row_ptr<T, PACK>(a.out, row_ok ? row : 0, a.out_stride);
      // The row fragment written out (common/row_fragment.cuh says why).
      float m = kNegInf;
      float s = 0.0f;
      if constexpr (!BACKWARD) {
#pragma unroll
        for (int j = 0; j < VECS_PER_THREAD; ++j)
          if (valid(j))
#pragma unroll
            for (int e = 0; e < PACK; ++e) m = fmaxf(m, to_float(x[r][j].v[e]));
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
      s = group_reduce<THREADS_PER_ROW>(s, SumOp{});
      const float inv_s = 1.0f / s;
      const float log_s = logf(s);
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

}  // namespace duet::DUET_NS::kernels
