// interleaved_ring: interleaved rows (interleaved_rows.cuh says how they lie)
// whose block passes its tiles through a ring of shared-memory buffers, so
// that the next tile is in flight while the block reduces and writes this
// one. A lane is a 16-byte pack of VEC = 16 / sizeof(T) neighbouring rows;
// a block of kInterleavedRingThreads threads takes tiles of a.tile lanes
// (a power of two, at most kInterleavedLanesMax); thread (lane, slot) =
// (t % tile, t / tile) takes elements slot, slot + slots, ... of its
// lane's rows, K = a.smem_vecs / BUFFERS of them at most.
// Its places in the ring: pack k of tensor j (x or y, then dy) in buffer s
// at ((s * tensors + j) * K + k) * threads + t, a warp's places adjacent.
// A thread copies (cp.async, sm_80+) and reads only its own places, so the
// ring needs no barrier: a thread refills the buffer it finished with once
// its reads of it have returned (their values were used). A tile: wait for
// this thread's copies of it, issue tile b + (BUFFERS - 1) grids' into the
// buffer the last tile used (BUFFERS - 1 tiles in flight under the work),
// the statistics from shared memory (a 16-bit max two halves at a time),
// the slots' reduction (reduce_slots: two barriers), the writes.
// The grid is one wave (FamilyInfo::waves); blocks take tiles b, b + grid,
// .... Where the device has no cp.async the copies are plain loads and
// stores and nothing is in flight under the work (the planner plans it on
// NVIDIA sm_90+ only, where it was measured; bench/NOTES.md v85).
#pragma once

#include "families/interleaved_rows.cuh"

namespace duet::DUET_NS::kernels {

template <class T, int VEC, int BUFFERS, bool BACKWARD, int LOG>
__device__ __forceinline__ void interleaved_ring(const SoftmaxArgs& a, DUET_RAW16* ring, float* scratch) {
  using V = DUET_RAW16;
  static_assert(VEC * sizeof(T) == 16, "a lane is a 16-byte pack of rows");
  static_assert(BUFFERS >= 2, "a tile in flight under the one being worked");
  constexpr int THREADS = kInterleavedRingThreads;
  constexpr int STAGES = BUFFERS;
  constexpr int TENSORS = BACKWARD ? 2 : 1;
  constexpr bool kPackedMax = sizeof(T) == 2 && DUET_DEVICE_CVT_RN16;
  const int tile = a.tile;
  const int slots = THREADS / tile;
  const int lane = static_cast<int>(threadIdx.x) % tile;
  const int slot = static_cast<int>(threadIdx.x) / tile;
  const int K = a.smem_vecs / STAGES;
  const int mine = slot < a.cols ? static_cast<int>((a.cols - 1 - slot) / slots) + 1 : 0;  // this thread's elements
  const std::int64_t tile_rows = std::int64_t(tile) * VEC;
  const std::int64_t tiles_a_row = (a.inner + tile_rows - 1) / tile_rows;
  const std::int64_t tiles = a.rows * tiles_a_row;
  V* const places = ring + threadIdx.x;
  const auto buffer = [&](int stage) { return places + std::int64_t(stage) * TENSORS * K * THREADS; };
  const auto at = [](const V& pack, int e) { return element<T>(pack, e); };
  // This thread's first row of tile b (its outer row r, the row i within
  // it), or -1 for a lane past the outer row's last row.
  const auto first_row = [&](std::int64_t b, std::int64_t& r) -> std::int64_t {
    r = b / tiles_a_row;
    const std::int64_t i = (b - r * tiles_a_row) * tile_rows + std::int64_t(lane) * VEC;
    return i < a.inner ? i : -1;
  };
  // Issues this thread's copies of tile b into buffer `stage` (none past
  // the last tile or for a spare lane), as one group.
  const auto issue = [&](std::int64_t b, int stage) {
    std::int64_t r;
    const std::int64_t i = b < tiles ? first_row(b, r) : -1;
    if (i >= 0) {
      const T* px = static_cast<const T*>(a.x) + r * a.x_stride + slot * a.x_col_stride + i;
      const T* pg = BACKWARD ? static_cast<const T*>(a.dy) + r * a.dy_stride + slot * a.dy_col_stride + i : nullptr;
      const std::int64_t x_step = std::int64_t(slots) * a.x_col_stride;
      const std::int64_t g_step = BACKWARD ? std::int64_t(slots) * a.dy_col_stride : 0;
      V* const dst = buffer(stage);
      // The copies read under evict_last, as the register tiles' loads
      // (bench/NOTES.md v108).
#pragma unroll 4
      for (int k = 0; k < mine; ++k) {
        copy_to_shared<LoadHint::keep>(dst + k * THREADS, reinterpret_cast<const V*>(px));
        px += x_step;
        if constexpr (BACKWARD) {
          copy_to_shared<LoadHint::keep>(dst + (K + k) * THREADS, reinterpret_cast<const V*>(pg));
          pg += g_step;
        }
      }
    }
    shared_copies_commit();
  };

  const std::int64_t step = gridDim.x;
#pragma unroll
  for (int k = 0; k < STAGES - 1; ++k) issue(blockIdx.x + k * step, k);
  int stage = 0;
  for (std::int64_t b = blockIdx.x; b < tiles; b += step) {
    shared_copies_wait<STAGES - 2>();  // this thread's copies of tile b
    issue(b + (STAGES - 1) * step, stage == 0 ? STAGES - 1 : stage - 1);
    const V* const xs = buffer(stage);
    const V* const gs = xs + K * THREADS;
    float m[VEC], s[VEC];
    if constexpr (BACKWARD) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[e] = 0.0f;
#pragma unroll 4
      for (int k = 0; k < mine; ++k) {
        const V y = xs[k * THREADS], g = gs[k * THREADS];
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] += backward_term(at(y, e), at(g, e), LOG);
      }
      reduce_slots<VEC>(s, scratch, lane, slot, tile, slots, SumOp{});
    } else {
      if constexpr (kPackedMax) {
        unsigned mw[4] = {kNegInfHalves<T>, kNegInfHalves<T>, kNegInfHalves<T>, kNegInfHalves<T>};
#pragma unroll 4
        for (int k = 0; k < mine; ++k) {
          const V v = xs[k * THREADS];
#pragma unroll
          for (int w = 0; w < 4; ++w) mw[w] = max_halves<T>(mw[w], DUET_RAW16_WORD(v, w));
        }
        const V packed = DUET_RAW16_MAKE(mw[0], mw[1], mw[2], mw[3]);
#pragma unroll
        for (int e = 0; e < VEC; ++e) m[e] = at(packed, e);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) m[e] = kNegInf;
#pragma unroll 4
        for (int k = 0; k < mine; ++k) {
          const V v = xs[k * THREADS];
#pragma unroll
          for (int e = 0; e < VEC; ++e) m[e] = fmaxf(m[e], at(v, e));
        }
      }
      // The thread's pairs: the sums shifted by its max (by 0 where it has
      // no finite value, so that s stays 0 or NaN), one reduction of the
      // pairs over the slots.
      float shift[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        shift[e] = m[e] == kNegInf ? 0.0f : m[e];
        s[e] = 0.0f;
      }
#pragma unroll 4
      for (int k = 0; k < mine; ++k) {
        const V v = xs[k * THREADS];
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] += exp_shifted(at(v, e), shift[e]);
      }
      pair_across_slots<VEC>(m, s, scratch, lane, slot, tile, slots);
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[e] = LOG ? logf(s[e]) : 1.0f / s[e];
    }
    std::int64_t r;
    const std::int64_t i = first_row(b, r);
    if (i >= 0) {
      T* o = static_cast<T*>(a.out) + r * a.out_stride + slot * a.out_col_stride + i;
      const std::int64_t o_step = std::int64_t(slots) * a.out_col_stride;
#pragma unroll 4
      for (int k = 0; k < mine; ++k) {
        const V v = xs[k * THREADS];
        if constexpr (BACKWARD) {
          const V g = gs[k * THREADS];
          store_words(reinterpret_cast<V*>(o),
                      make_pack<T, V>([&](int e) { return backward_value(at(v, e), at(g, e), s[e], LOG); }));
        } else {
          store_words(reinterpret_cast<V*>(o),
                      make_pack<T, V>([&](int e) { return forward_value(at(v, e), m[e], s[e], s[e], LOG); }));
        }
        o += o_step;
      }
    }
    stage = stage + 1 == STAGES ? 0 : stage + 1;
  }
  shared_copies_wait<0>();  // no copy outlives the block
}

// The slots' scratch: reduce_slots' parts, then its result for up to
// kInterleavedLanesMax lanes of VEC rows.
template <int VEC>
inline constexpr int kRingScratchFloats = 2 * kInterleavedRingThreads * VEC + 2 * kInterleavedLanesMax * VEC;

template <class T, int VEC, int BUFFERS, bool BACKWARD>
__global__ void __launch_bounds__(kInterleavedRingThreads) interleaved_ring_kernel(SoftmaxArgs a) {
  extern __shared__ DUET_RAW16 interleaved_ring_places[];
  __shared__ float scratch[kRingScratchFloats<VEC>];
  // softmax or log_softmax fixed at compile time: a run-time choice an
  // element computed both and selected (the backward: an exp an element
  // more, 25% more instructions; Nsight Compute, H200).
  if (a.log)
    interleaved_ring<T, VEC, BUFFERS, BACKWARD, 1>(a, interleaved_ring_places, scratch);
  else
    interleaved_ring<T, VEC, BUFFERS, BACKWARD, 0>(a, interleaved_ring_places, scratch);
}

template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::interleaved_ring, I> = {
    &interleaved_ring_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward>};

}  // namespace duet::DUET_NS::kernels
