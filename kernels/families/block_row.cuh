// block_row and block_row_smem: one block per row, the row on chip.
//
// Thread t keeps packs t, t+T, ..., t+(VECS_PER_THREAD-1)T of its row in
// registers (T threads). block_row_smem keeps the next a.smem_vecs packs in
// its own slots of dynamic shared memory (slot k of thread t at k*T + t:
// consecutive threads touch consecutive 16-byte words, so no bank conflicts
// and no barrier: a thread only ever reads back what it wrote itself).
// EDGES: rows off the pack grid, their edge elements held beside the packs
// by the block's first threads (common/row_edges.cuh).
// Grid: one block per row, up to the planner's waves; block_row_smem's
// dynamic shared memory is smem_vecs * T packs of each tensor it reads
// (runtime/src/planner/planner.cpp, make_plan and grid_for); no workspace.
#pragma once

#include "common/family_kernels.cuh"
#include "common/reduce.cuh"
#include "common/row_edges.cuh"
#include "common/row_fragment.cuh"

namespace duet::DUET_NS::kernels {

// WITH_SMEM is false for block_row_kernel (registers only: the shared-memory
// path's code alone takes it from 44 to 62 registers at 4 packs a thread,
// ptxas -v, sm_90, halving the blocks that fit) and true for
// block_row_smem_kernel.
template <class T, int PACK, int VECS_PER_THREAD, bool BACKWARD, bool EDGES, bool WITH_SMEM>
__device__ __forceinline__ void block_row_body(const SoftmaxArgs& a, float4* dynamic_smem, ReduceScratch& scratch) {
  using P = Pack<T, PACK>;
  const int tid = threadIdx.x;
  const int nt = blockDim.x;
  const int smem_vecs = WITH_SMEM ? a.smem_vecs : 0;
  P* smem_x = reinterpret_cast<P*>(dynamic_smem);
  P* smem_g = smem_x + std::int64_t(smem_vecs) * nt;
  const std::int64_t whole_packs = a.cols / PACK;  // a row's, without edges
  const std::int64_t reg_packs = std::int64_t(VECS_PER_THREAD) * nt;
  // A row read once: evict_last reads run faster than plain ones in
  // block_row, and slower in block_row_smem's backward (bench/NOTES.md v104b).
  constexpr LoadHint kHint = WITH_SMEM ? LoadHint::normal : LoadHint::keep;
  // The forward reduces (max, sum) pairs behind one barrier, but before
  // sm_90 for 16-bit rows with edges and 8 packs a thread, which spill so
  // (ptxas -v, sm_80) and reduce the max, then the sum.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  constexpr bool kTwoBarriers = EDGES && VECS_PER_THREAD == 8 && sizeof(T) == 2;
#else
  constexpr bool kTwoBarriers = false;
#endif

  for (std::int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    // Blocks have at least 128 threads (the planner), so the edges' 2 (PACK
    // - 1) elements take one slot of threads 0..13 at most.
    [[maybe_unused]] EdgesOf<EDGES, T, PACK, 64, BACKWARD> edges;
    int head = 0;
    std::int64_t packs = whole_packs;
    if constexpr (EDGES) {
      const RowSpan span = row_span<T, PACK>(a.x, row, a.x_stride, a.cols);
      head = span.head;
      packs = span.body;
      edges.place(span, tid, true);
      edges.load(row_elems<T>(a.x, row, a.x_stride), BACKWARD ? row_elems<T>(a.dy, row, a.dy_stride) : nullptr);
    }
    const P* xr = row_ptr<T, PACK>(a.x, row, a.x_stride, head);
    const P* gr = BACKWARD ? row_ptr<T, PACK>(a.dy, row, a.dy_stride, head) : nullptr;
    P* orow = row_ptr<T, PACK>(a.out, row, a.out_stride, head);
    P x[VECS_PER_THREAD];
    P g[BACKWARD ? VECS_PER_THREAD : 1];
    load_strided<VECS_PER_THREAD, BACKWARD, kHint>(xr, gr, tid, nt, packs, x, g);
    // The shared-memory part (block_row_smem only): STAGE loads in flight
    // before the shared stores (two for backward, which carries two tensors,
    // to stay off local memory), copied as PackWords.
    constexpr int STAGE = BACKWARD ? 2 : 4;
    using S = PackWords<T, PACK>;
    const std::int64_t smem_slots_end = reg_packs + std::int64_t(smem_vecs) * nt;
    const std::int64_t smem_end = packs < smem_slots_end ? packs : smem_slots_end;
    const S* xs = reinterpret_cast<const S*>(xr);
    const S* gs = reinterpret_cast<const S*>(gr);
    for (int k0 = 0; k0 < smem_vecs; k0 += STAGE) {
      S t[STAGE];
      S u[BACKWARD ? STAGE : 1];
      load_strided<STAGE, BACKWARD, kHint, S>(xs, gs, reg_packs + std::int64_t(k0) * nt + tid, nt, smem_end, t, u);
#pragma unroll
      for (int k = 0; k < STAGE; ++k)
        if (k0 + k < smem_vecs) {
          reinterpret_cast<S*>(smem_x)[std::int64_t(k0 + k) * nt + tid] = t[k];
          if constexpr (BACKWARD) reinterpret_cast<S*>(smem_g)[std::int64_t(k0 + k) * nt + tid] = u[k];
        }
    }
    auto reg_valid = [&](int j) { return std::int64_t(j) * nt + tid < packs; };
    auto smem_valid = [&](int k) { return reg_packs + std::int64_t(k) * nt + tid < packs; };

    // The row fragment written out (common/row_fragment.cuh says why).
    if constexpr (!BACKWARD) {
      float m = kNegInf;
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (reg_valid(j))
#pragma unroll
          for (int e = 0; e < PACK; ++e) m = fmaxf(m, to_float(x[j].v[e]));
      for (int k = 0; k < smem_vecs && smem_valid(k); ++k) {
        const P p = smem_x[std::int64_t(k) * nt + tid];
#pragma unroll
        for (int e = 0; e < PACK; ++e) m = fmaxf(m, to_float(p.v[e]));
      }
      if constexpr (EDGES) m = edges.max(m);
      if constexpr (kTwoBarriers) m = block_reduce(m, scratch.floats(0), MaxOp{});
      // The thread's sum against its own max (0 where that is -inf, so that
      // -inf elements add 0), then one block reduction of the pairs.
      const float shift = m == kNegInf ? 0.0f : m;
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (reg_valid(j))
#pragma unroll
          for (int e = 0; e < PACK; ++e) s += exp_shifted(to_float(x[j].v[e]), shift);
      for (int k = 0; k < smem_vecs && smem_valid(k); ++k) {
        const P p = smem_x[std::int64_t(k) * nt + tid];
#pragma unroll
        for (int e = 0; e < PACK; ++e) s += exp_shifted(to_float(p.v[e]), shift);
      }
      if constexpr (EDGES) s = edges.sum(s, [&](float v) { return exp_shifted(v, shift); });
      if constexpr (kTwoBarriers) {
        s = block_reduce(s, scratch.floats(1), SumOp{});
      } else {
        const float2 row_pair = block_reduce_pair(m, s, scratch.pairs(row / gridDim.x % 2));
        m = row_pair.x;
        s = row_pair.y;
      }
      const float inv_s = 1.0f / s;
      const float log_s = logf(s);
      if constexpr (EDGES)
        edges.store(row_elems<T>(a.out, row, a.out_stride),
                    [&](float v, float) { return forward_value(v, m, inv_s, log_s, a.log); });
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (reg_valid(j)) {
          P o;
#pragma unroll
          for (int e = 0; e < PACK; ++e) o.v[e] = from_float<T>(forward_value(to_float(x[j].v[e]), m, inv_s, log_s, a.log));
          orow[std::int64_t(j) * nt + tid] = o;
        }
      for (int k = 0; k < smem_vecs && smem_valid(k); ++k) {
        const P p = smem_x[std::int64_t(k) * nt + tid];
        P o;
#pragma unroll
        for (int e = 0; e < PACK; ++e) o.v[e] = from_float<T>(forward_value(to_float(p.v[e]), m, inv_s, log_s, a.log));
        orow[reg_packs + std::int64_t(k) * nt + tid] = o;
      }
    } else {
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (reg_valid(j))
#pragma unroll
          for (int e = 0; e < PACK; ++e) s += backward_term(to_float(x[j].v[e]), to_float(g[j].v[e]), a.log);
      for (int k = 0; k < smem_vecs && smem_valid(k); ++k) {
        const P p = smem_x[std::int64_t(k) * nt + tid];
        const P q = smem_g[std::int64_t(k) * nt + tid];
#pragma unroll
        for (int e = 0; e < PACK; ++e) s += backward_term(to_float(p.v[e]), to_float(q.v[e]), a.log);
      }
      if constexpr (EDGES) s = edges.sum(s, [&](float y, float dy) { return backward_term(y, dy, a.log); });
      // One reduction a row, so the buffers alternate across rows.
      s = block_reduce(s, scratch.floats(row / gridDim.x % 2), SumOp{});
      if constexpr (EDGES)
        edges.store(row_elems<T>(a.out, row, a.out_stride),
                    [&](float y, float dy) { return backward_value(y, dy, s, a.log); });
#pragma unroll
      for (int j = 0; j < VECS_PER_THREAD; ++j)
        if (reg_valid(j)) {
          P o;
#pragma unroll
          for (int e = 0; e < PACK; ++e)
            o.v[e] = from_float<T>(backward_value(to_float(x[j].v[e]), to_float(g[j].v[e]), s, a.log));
          orow[std::int64_t(j) * nt + tid] = o;
        }
      for (int k = 0; k < smem_vecs && smem_valid(k); ++k) {
        const P p = smem_x[std::int64_t(k) * nt + tid];
        const P q = smem_g[std::int64_t(k) * nt + tid];
        P o;
#pragma unroll
        for (int e = 0; e < PACK; ++e) o.v[e] = from_float<T>(backward_value(to_float(p.v[e]), to_float(q.v[e]), s, a.log));
        orow[reg_packs + std::int64_t(k) * nt + tid] = o;
      }
    }
  }
}

template <class T, int PACK, int VECS_PER_THREAD, bool BACKWARD, bool EDGES>
__global__ void __launch_bounds__(kBlockRowMaxThreads) block_row_kernel(SoftmaxArgs a) {
  __shared__ ReduceScratch scratch;
  block_row_body<T, PACK, VECS_PER_THREAD, BACKWARD, EDGES, false>(a, nullptr, scratch);
}

template <class T, int PACK, int VECS_PER_THREAD, bool BACKWARD, bool EDGES>
__global__ void __launch_bounds__(kBlockRowMaxThreads) block_row_smem_kernel(SoftmaxArgs a) {
  extern __shared__ float4 dynamic_smem[];
  __shared__ ReduceScratch scratch;
  block_row_body<T, PACK, VECS_PER_THREAD, BACKWARD, EDGES, true>(a, dynamic_smem, scratch);
}

template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::block_row, I> = {
    &block_row_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward, kEntry<I>.edges>};
template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::block_row_smem, I> = {
    &block_row_smem_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward, kEntry<I>.edges>};

}  // namespace duet::DUET_NS::kernels
