// interleaved_rows: rows whose elements lie col_stride apart and whose
// neighbours are adjacent in memory, as softmax over a non-last dimension
// sees them. Dim 1 of a contiguous [N, C, H, W] is N outer rows x H*W
// interleaved rows of C elements, H*W apart: element c of row (r, i) is at
// r * stride + c * col_stride + i.
//
// A block takes a tile of `a.tile` neighbouring rows (lanes) of one outer
// row; its threads are (lane, slot) = (t % tile, t / tile), and slot s
// reads elements s, s + slots, s + 2 slots, ... of its lane's row, so the
// lanes of a warp read adjacent addresses. The slots' partial results meet
// in shared memory.
//   VPT > 0: a thread keeps its VPT elements in registers (rows of at most
//   slots x VPT elements): one read, one write.
//   VPT == 0: rows of any length in two passes over the tile, the second
//   in reverse order so it starts with what the first read last (still in
//   L2 when the tile is not).
// VEC is 1: elements are read one at a time.
// Grid: blocks of tile x slots threads (at most kInterleavedMaxThreads),
// one tile each, up to the planner's waves; no dynamic shared memory, no
// workspace.
#pragma once

#include "common/math.cuh"
#include "common/storage.cuh"
#include "softmax_args.hpp"

namespace duet::DUET_NS::kernels {

// Elements a VPT == 0 thread loads before it reduces any: the loads in flight.
inline constexpr int kInterleavedInFlight = 8;

// Every slot's value of this thread's lane combined by `op`, for every
// thread of the lane. Ends with the scratch free again.
template <class Op>
__device__ __forceinline__ float across_slots(float v, float* scratch, int lane, int slot, int tile, int slots, Op op) {
  scratch[slot * tile + lane] = v;
  __syncthreads();
  float r = scratch[lane];
  for (int s = 1; s < slots; ++s) r = op(r, scratch[s * tile + lane]);
  __syncthreads();
  return r;
}

// The same for online (max, sum) pairs.
__device__ __forceinline__ void pair_across_slots(float& m, float& s, float* scratch, int lane, int slot, int tile,
                                                  int slots) {
  scratch[slot * tile + lane] = m;
  scratch[kInterleavedMaxThreads + slot * tile + lane] = s;
  __syncthreads();
  float row_m = kNegInf;
  for (int k = 0; k < slots; ++k) row_m = fmaxf(row_m, scratch[k * tile + lane]);
  float row_s = 0.0f;
  for (int k = 0; k < slots; ++k)
    row_s += rescale(scratch[kInterleavedMaxThreads + k * tile + lane], scratch[k * tile + lane], row_m);
  __syncthreads();
  m = row_m;
  s = row_s;
}

template <class T, int VEC, int VPT, bool BACKWARD>
__global__ void __launch_bounds__(kInterleavedMaxThreads) interleaved_rows_kernel(SoftmaxArgs a) {
  __shared__ float scratch[2 * kInterleavedMaxThreads];
  const int tile = a.tile;
  const int slots = static_cast<int>(blockDim.x) / tile;
  const int lane = static_cast<int>(threadIdx.x) % tile;
  const int slot = static_cast<int>(threadIdx.x) / tile;
  const std::int64_t tiles = (a.inner + tile - 1) / tile;
  const std::int64_t cols = a.cols;
  for (std::int64_t b = blockIdx.x; b < a.rows * tiles; b += gridDim.x) {
    const std::int64_t r = b / tiles;
    const std::int64_t i = (b % tiles) * tile + lane;
    const bool live = i < a.inner;  // the last tile's spare lanes take part in the barriers only
    const T* x = static_cast<const T*>(a.x) + r * a.x_stride + i;
    const T* dy = BACKWARD ? static_cast<const T*>(a.dy) + r * a.dy_stride + i : nullptr;
    T* out = static_cast<T*>(a.out) + r * a.out_stride + i;
    const auto at = [&](const T* p, std::int64_t stride, std::int64_t c) { return to_float(p[c * stride]); };

    if constexpr (VPT > 0) {
      float v[VPT];
      float g[BACKWARD ? VPT : 1];
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        const std::int64_t c = slot + std::int64_t(k) * slots;
        const bool in = live && c < cols;
        v[k] = in ? at(x, a.x_col_stride, c) : kNegInf;
        if constexpr (BACKWARD) g[k] = in ? at(dy, a.dy_col_stride, c) : 0.0f;
      }
      if constexpr (BACKWARD) {
        float part = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k)
          if (slot + std::int64_t(k) * slots < cols) part += backward_term(v[k], g[k], a.log);
        const float sum = across_slots(part, scratch, lane, slot, tile, slots, SumOp{});
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
          const std::int64_t c = slot + std::int64_t(k) * slots;
          if (live && c < cols) out[c * a.out_col_stride] = from_float<T>(backward_value(v[k], g[k], sum, a.log));
        }
      } else {
        float part_m = kNegInf;
#pragma unroll
        for (int k = 0; k < VPT; ++k) part_m = fmaxf(part_m, v[k]);
        const float m = across_slots(part_m, scratch, lane, slot, tile, slots, MaxOp{});
        float part_s = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k)
          if (slot + std::int64_t(k) * slots < cols) part_s += exp_shifted(v[k], m);
        const float s = across_slots(part_s, scratch, lane, slot, tile, slots, SumOp{});
        const float inv_s = 1.0f / s, log_s = logf(s);
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
          const std::int64_t c = slot + std::int64_t(k) * slots;
          if (live && c < cols) out[c * a.out_col_stride] = from_float<T>(forward_value(v[k], m, inv_s, log_s, a.log));
        }
      }
    } else {
      constexpr int K = kInterleavedInFlight;
      // Pass 1: this slot's share of the row, K elements at a time.
      float m = kNegInf, s = 0.0f;
      if (live) {
        for (std::int64_t c0 = slot; c0 < cols; c0 += std::int64_t(K) * slots) {
          float v[K];
          float g[BACKWARD ? K : 1];
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const std::int64_t c = c0 + std::int64_t(k) * slots;
            v[k] = c < cols ? at(x, a.x_col_stride, c) : kNegInf;
            if constexpr (BACKWARD) g[k] = c < cols ? at(dy, a.dy_col_stride, c) : 0.0f;
          }
          if constexpr (BACKWARD) {
#pragma unroll
            for (int k = 0; k < K; ++k)
              if (c0 + std::int64_t(k) * slots < cols) s += backward_term(v[k], g[k], a.log);
          } else {
            online_add<K>(m, s, [&](int k) { return v[k]; });
          }
        }
      }
      float sum = 0.0f;
      if constexpr (BACKWARD)
        sum = across_slots(s, scratch, lane, slot, tile, slots, SumOp{});
      else
        pair_across_slots(m, s, scratch, lane, slot, tile, slots);
      const float inv_s = 1.0f / s, log_s = logf(s);
      // Pass 2, last element first, K elements at a time.
      if (live && slot < cols) {
        const std::int64_t last = slot + (cols - 1 - slot) / slots * slots;
        for (std::int64_t c0 = last; c0 >= 0; c0 -= std::int64_t(K) * slots) {
          float v[K];
          float g[BACKWARD ? K : 1];
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const std::int64_t c = c0 - std::int64_t(k) * slots;
            v[k] = c >= 0 ? at(x, a.x_col_stride, c) : 0.0f;
            if constexpr (BACKWARD) g[k] = c >= 0 ? at(dy, a.dy_col_stride, c) : 0.0f;
          }
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const std::int64_t c = c0 - std::int64_t(k) * slots;
            if (c < 0) break;
            float y;
            if constexpr (BACKWARD)
              y = backward_value(v[k], g[k], sum, a.log);
            else
              y = forward_value(v[k], m, inv_s, log_s, a.log);
            out[c * a.out_col_stride] = from_float<T>(y);
          }
        }
      }
    }
  }
}

}  // namespace duet::DUET_NS::kernels
