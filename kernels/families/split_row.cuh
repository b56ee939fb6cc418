// split_row: rows too wide for one block's on-chip memory, in two launches
// (split_stream does the same in one; split_row stays as an experiment, in
// a file of its own so it can leave the product whole).
//
// Work item i is chunk i % chunks_per_row of row i / chunks_per_row.
// The partial kernel reduces each chunk to an online-softmax pair (forward:
// max and sum of exp(x - max); backward: the sum only); the finalize kernel
// combines a row's pairs (they sit in L2) and writes its chunk. Each thread
// keeps VECS_IN_FLIGHT loads in flight.
// Grid: kSplitRowBlock threads a block, one block per item up to the
// planner's waves, the same grid for both kernels; chunk_elems =
// kSplitRowBlock * kSplitVecsPerThread * PACK. Workspace: a.partials, one
// (max, sum) pair of floats per item (runtime/src/planner/planner.cpp, make_plan and
// grid_for).
#pragma once

// An experiment: its kernels are built only with -DDUET_EXPERIMENTS=ON
// (CMake); otherwise its entries name no kernel and launch nothing.
#ifndef DUET_EXPERIMENTS
#define DUET_EXPERIMENTS 0
#endif

#include "common/family_kernels.cuh"
#include "common/reduce.cuh"
#include "common/row_fragment.cuh"

namespace duet::DUET_NS::kernels {

template <class T, int PACK, int VECS_IN_FLIGHT, bool BACKWARD>
__global__ void __launch_bounds__(kSplitRowBlock) split_row_partial_kernel(SoftmaxArgs a) {
  using P = Pack<T, PACK>;
  __shared__ float scratch[2][kMaxWarpsPerBlock];
  const std::int64_t items = a.rows * a.chunks_per_row;
  for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const auto [row, begin, end] = chunk_of<PACK>(a, item);
    const P* xr = row_ptr<T, PACK>(a.x, row, a.x_stride);
    const P* gr = BACKWARD ? row_ptr<T, PACK>(a.dy, row, a.dy_stride) : nullptr;
    float m = kNegInf;
    float s = 0.0f;
    for (std::int64_t v0 = begin + threadIdx.x; v0 < end; v0 += std::int64_t(VECS_IN_FLIGHT) * blockDim.x) {
      P x[VECS_IN_FLIGHT];
      P g[BACKWARD ? VECS_IN_FLIGHT : 1];
      load_strided<VECS_IN_FLIGHT, BACKWARD>(xr, gr, v0, blockDim.x, end, x, g);
#pragma unroll
      for (int k = 0; k < VECS_IN_FLIGHT; ++k) {
        if (v0 + std::int64_t(k) * blockDim.x >= end) break;
        if constexpr (BACKWARD) {
#pragma unroll
          for (int e = 0; e < PACK; ++e) s += backward_term(to_float(x[k].v[e]), to_float(g[k].v[e]), a.log);
        } else {
          online_add<PACK>(m, s, [&](int e) { return to_float(x[k].v[e]); });
        }
      }
    }
    // Two reductions per item: the buffers alternate within an item, and the
    // barrier of the second protects the first buffer for the next item.
    if constexpr (!BACKWARD) {
      const float m_blk = block_reduce(m, scratch[0], MaxOp{});
      s = block_reduce(rescale(s, m, m_blk), scratch[1], SumOp{});
      m = m_blk;
    } else {
      s = block_reduce(s, scratch[item / gridDim.x % 2], SumOp{});
    }
    if (threadIdx.x == 0) {
      a.partials[2 * item] = m;
      a.partials[2 * item + 1] = s;
    }
  }
}

template <class T, int PACK, int VECS_IN_FLIGHT, bool BACKWARD>
__global__ void __launch_bounds__(kSplitRowBlock) split_row_finalize_kernel(SoftmaxArgs a) {
  using P = Pack<T, PACK>;
  const std::int64_t items = a.rows * a.chunks_per_row;
  for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const auto [row, begin, end] = chunk_of<PACK>(a, item);
    // Every thread combines the row's pairs itself: a few L2 reads, no barrier.
    const float* pr = a.partials + 2 * row * a.chunks_per_row;
    float m = kNegInf;
    float s = 0.0f;
    if constexpr (!BACKWARD) {
      for (int c = 0; c < a.chunks_per_row; ++c) m = fmaxf(m, pr[2 * c]);
      for (int c = 0; c < a.chunks_per_row; ++c) s += rescale(pr[2 * c + 1], pr[2 * c], m);
    } else {
      for (int c = 0; c < a.chunks_per_row; ++c) s += pr[2 * c + 1];
    }
    const float inv_s = 1.0f / s;
    const float log_s = logf(s);
    const P* xr = row_ptr<T, PACK>(a.x, row, a.x_stride);
    const P* gr = BACKWARD ? row_ptr<T, PACK>(a.dy, row, a.dy_stride) : nullptr;
    P* orow = row_ptr<T, PACK>(a.out, row, a.out_stride);
    for (std::int64_t v0 = begin + threadIdx.x; v0 < end; v0 += std::int64_t(VECS_IN_FLIGHT) * blockDim.x) {
      P x[VECS_IN_FLIGHT];
      P g[BACKWARD ? VECS_IN_FLIGHT : 1];
      load_strided<VECS_IN_FLIGHT, BACKWARD>(xr, gr, v0, blockDim.x, end, x, g);
      // Written out: through slice visitors, float16 backward compiles to
      // other code (ptxas -v, sm_90; common/row_fragment.cuh).
#pragma unroll
      for (int k = 0; k < VECS_IN_FLIGHT; ++k) {
        const std::int64_t vi = v0 + std::int64_t(k) * blockDim.x;
        if (vi >= end) break;
        P o;
#pragma unroll
        for (int e = 0; e < PACK; ++e) {
          if constexpr (BACKWARD)
            o.v[e] = from_float<T>(backward_value(to_float(x[k].v[e]), to_float(g[k].v[e]), s, a.log));
          else
            o.v[e] = from_float<T>(forward_value(to_float(x[k].v[e]), m, inv_s, log_s, a.log));
        }
        orow[vi] = o;
      }
    }
  }
}

static_assert(!any_entry(Strategy::split_row, [](const Variant& v) { return v.edges; }),
              "split_row has no edges: its kernels take rows of whole packs");
template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::split_row, I> =
#if DUET_EXPERIMENTS
    {&split_row_partial_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward>,
     &split_row_finalize_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward>};
#else
    {};
#endif

}  // namespace duet::DUET_NS::kernels
