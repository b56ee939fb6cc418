// Persistent softmax kernels, written once in CUDA spelling.
//
// nvcc compiles this file as it is; hipcc compiles it through
// backends/vendor/vendor.h, and hipify-perl would translate it mechanically
// (runtime API and intrinsics only: no driver API, no inline PTX).
//
// Every kernel walks the rows with a grid-stride loop, so the planner sizes
// the grid to what fits on the device at once (SMs x occupancy), as the
// Triton fused-softmax tutorial does. All arithmetic is float32.
//
// Semantics follow torch.softmax / torch.log_softmax: the row maximum is
// subtracted before exp; a NaN anywhere in a row makes the row NaN; +inf in a
// row gives NaN (inf - inf); a row that is all -inf gives NaN (0/0).
#pragma once

#include <type_traits>

#include "softmax_args.hpp"
#include "softmax_variants.hpp"
#include "vendor.h"

namespace duet::DUET_NS::kernels {

// ---------------------------------------------------------------- storage types
// 16-bit floats are carried as raw bits and converted in registers, so the
// same code builds against CUDA's and HIP's fp16 headers (which name their
// bfloat16 types differently).
struct alignas(2) f16_t { unsigned short bits; };
struct alignas(2) bf16_t { unsigned short bits; };

template <DType D> struct StorageOf;
template <> struct StorageOf<DType::f32> { using type = float; };
template <> struct StorageOf<DType::f16> { using type = f16_t; };
template <> struct StorageOf<DType::bf16> { using type = bf16_t; };

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(f16_t v) { return __half2float(__ushort_as_half(v.bits)); }
__device__ __forceinline__ float to_float(bf16_t v) { return __uint_as_float(unsigned(v.bits) << 16); }

template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ f16_t from_float<f16_t>(float v) {
  return f16_t{__half_as_ushort(__float2half_rn(v))};
}
template <> __device__ __forceinline__ bf16_t from_float<bf16_t>(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // One cvt.rn.bf16.f32 on sm_80+ instead of the integer rounding below.
  return bf16_t{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
#endif
  // Round to nearest even; NaN stays a quiet NaN.
  unsigned u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{static_cast<unsigned short>((u >> 16) | 0x0040u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16_t{static_cast<unsigned short>(u >> 16)};
}

// VEC elements moved as one access (16 bytes for the vector paths).
template <class T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// ---------------------------------------------------------------- math
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -__builtin_huge_valf();

// 2^x on the hardware unit. NVIDIA: ex2.approx.ftz.f32 (MUFU.EX2, about 2
// ulp; results below 2^-126 flush to zero), which plain exp2f wraps in extra
// denormal fix-up instructions that showed up as an instruction-bound 16-bit
// path (bench/NOTES.md). AMD: exp2f is v_exp_f32 already.
__device__ __forceinline__ float fast_exp2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// exp(x - m) = 2^((x - m) log2e): the subtraction first, so it is exact or
// nearly so for the values that matter (x close to m). The one-FFMA form
// fma(x, log2e, -m log2e) is an instruction shorter but rounds m log2e at the
// magnitude of m: at |m| = 1e30 that error is ~1e23 in the exponent, and at
// 1e5 already 0.5% in the result (torch test with logits of 1e30 caught it).
__device__ __forceinline__ float exp_shifted(float x, float m) { return fast_exp2((x - m) * kLog2e); }

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
  static constexpr float kIdentity = kNegInf;
};
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
  static constexpr float kIdentity = 0.0f;
};

// Butterfly reduction over WIDTH consecutive lanes (WIDTH a power of two no
// larger than the wavefront); every lane gets the result.
template <int WIDTH, class R>
__device__ __forceinline__ float group_reduce(float v, R op) {
#pragma unroll
  for (int offset = WIDTH / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(DUET_FULL_MASK, v, offset, WIDTH));
  return v;
}

// Largest number of warps a block can hold: 1024 threads / the smallest
// warp (32 lanes). A 64-lane wavefront uses half of it.
constexpr int kMaxWarpsPerBlock = 1024 / 32;

// Block-wide reduction; every thread gets the result. `scratch` must not be
// in use by the previous reduction of the same block: callers alternate two
// buffers, so the barrier inside one reduction also protects the buffer the
// one before it read.
template <class R>
__device__ __forceinline__ float block_reduce(float v, float* scratch, R op) {
  constexpr int W = DUET_DEVICE_WARP_SIZE;
  v = group_reduce<W>(v, op);
  const int lane = threadIdx.x % W;
  const int warp = threadIdx.x / W;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + W - 1) / W;
  v = lane < warps ? scratch[lane] : R::kIdentity;
  return group_reduce<W>(v, op);
}

// Combine online-softmax pairs (max m, sum s of exp(x - m)). A part with no
// finite value (m = -inf) holds s = 0, or NaN if it saw a NaN (fmaxf skips
// NaN, the sum does not): it passes unscaled, so -inf entries never make NaN
// by themselves (exp(-inf - -inf)) and a NaN still reaches the row, as in
// torch. (Returning 0 there lost a NaN in a chunk otherwise all -inf: GPU
// test "inf, -inf and NaN", row 7.)
__device__ __forceinline__ float rescale(float s, float m, float m_new) {
  return m == kNegInf ? s : s * exp_shifted(m, m_new);
}

// Adds one vector of VEC values (value(e)) to a running online-softmax pair
// (m, s): one rescale a vector. -inf values add nothing (so a part all -inf
// keeps s = 0 and never computes exp(-inf - -inf)); a NaN reaches s.
template <int VEC, class V>
__device__ __forceinline__ void online_add(float& m, float& s, V value) {
  float vm = kNegInf;
#pragma unroll
  for (int e = 0; e < VEC; ++e) vm = fmaxf(vm, value(e));
  const float m_new = fmaxf(m, vm);
  s = rescale(s, m, m_new);
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const float xe = value(e);
    s += xe == kNegInf ? 0.0f : exp_shifted(xe, m_new);
  }
  m = m_new;
}

// ---------------------------------------------------------------- element ops
// Forward output of one element given the row max m and the row sum s
// (inv_s = 1/s, log_s = log s).
__device__ __forceinline__ float forward_value(float x, float m, float inv_s, float log_s, int log) {
  return log ? (x - m) - log_s : exp_shifted(x, m) * inv_s;
}
// Backward: softmax dx = y (dy - sum(dy y)); log_softmax dx = dy - exp(y) sum(dy).
__device__ __forceinline__ float backward_term(float y, float dy, int log) { return log ? dy : dy * y; }
__device__ __forceinline__ float backward_value(float y, float dy, float sum, int log) {
  return log ? dy - fast_exp2(y * kLog2e) * sum : y * (dy - sum);
}

template <class T, int VEC>
__device__ __forceinline__ const Pack<T, VEC>* row_ptr(const void* base, std::int64_t row, std::int64_t stride) {
  return reinterpret_cast<const Pack<T, VEC>*>(static_cast<const T*>(base) + row * stride);
}
template <class T, int VEC>
__device__ __forceinline__ Pack<T, VEC>* row_ptr(void* base, std::int64_t row, std::int64_t stride) {
  return reinterpret_cast<Pack<T, VEC>*>(static_cast<T*>(base) + row * stride);
}

// Issues the loads of vectors v0, v0 + stride, ..., (N of them, those below
// `end`) of x, and of g for backward, before any is used: the loads in flight.
template <int N, bool BWD, class P>
__device__ __forceinline__ void load_strided(const P* xr, const P* gr, std::int64_t v0, std::int64_t stride,
                                             std::int64_t end, P (&x)[N], P (&g)[BWD ? N : 1]) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const std::int64_t vi = v0 + std::int64_t(k) * stride;
    if (vi < end) {
      x[k] = xr[vi];
      if constexpr (BWD) g[k] = gr[vi];
    }
  }
}

// split_row's work item: chunk item % chunks_per_row of row item / chunks_per_row,
// vectors [begin, end).
struct Chunk {
  std::int64_t row, begin, end;
};
template <int VEC>
__device__ __forceinline__ Chunk chunk_of(const SoftmaxArgs& a, std::int64_t item) {
  const std::int64_t nvec = a.cols / VEC;
  const std::int64_t chunk_vecs = a.chunk_elems / VEC;
  const std::int64_t begin = (item % a.chunks_per_row) * chunk_vecs;
  return {item / a.chunks_per_row, begin, begin + chunk_vecs < nvec ? begin + chunk_vecs : nvec};
}

// ---------------------------------------------------------------- group_rows
// GROUP threads (1..32, a power of two) own a row; each keeps VPT vectors of
// VEC elements in registers, so a row of up to GROUP*VPT*VEC elements is read
// and written exactly once. Reductions are shuffles within the group. Each
// group takes ROWS rows per step and issues all their loads before the first
// reduction, so every thread has several vectors in flight
// (kGroupShapes in softmax_variants.hpp).
template <class T, int VEC, int GROUP, int VPT, int ROWS, bool BWD>
__global__ void __launch_bounds__(kGroupRowsBlock) group_rows_kernel(SoftmaxArgs a) {
  using P = Pack<T, VEC>;
  constexpr int kSlots = kGroupRowsBlock / GROUP;       // groups in a block
  constexpr int kRowsPerBlock = kSlots * ROWS;
  const int lane = threadIdx.x % GROUP;
  const int slot = threadIdx.x / GROUP;
  const std::int64_t nvec = a.cols / VEC;
  // The loop bound is uniform across the block, so whole warps stay
  // converged for the shuffles even when the last rows run out.
  for (std::int64_t base = std::int64_t(blockIdx.x) * kRowsPerBlock; base < a.rows;
       base += std::int64_t(gridDim.x) * kRowsPerBlock) {
    P x[ROWS][VPT];
    P g[ROWS][BWD ? VPT : 1];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const std::int64_t row = base + std::int64_t(r) * kSlots + slot;
      const bool row_ok = row < a.rows;
      // Written out rather than through load_strided: passing x[r] as an
      // array reference cost 2-8 registers here (ptxas -v, sm_90).
      const P* xr = row_ptr<T, VEC>(a.x, row_ok ? row : 0, a.x_stride);
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const std::int64_t vi = std::int64_t(j) * GROUP + lane;
        if (row_ok && vi < nvec) {
          x[r][j] = xr[vi];
          if constexpr (BWD) g[r][j] = row_ptr<T, VEC>(a.dy, row, a.dy_stride)[vi];
        }
      }
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const std::int64_t row = base + std::int64_t(r) * kSlots + slot;
      const bool row_ok = row < a.rows;
      auto valid = [&](int j) { return row_ok && std::int64_t(j) * GROUP + lane < nvec; };
      P* orow = row_ptr<T, VEC>(a.out, row_ok ? row : 0, a.out_stride);
      if constexpr (!BWD) {
        float m = kNegInf;
#pragma unroll
        for (int j = 0; j < VPT; ++j)
          if (valid(j))
#pragma unroll
            for (int e = 0; e < VEC; ++e) m = fmaxf(m, to_float(x[r][j].v[e]));
        m = group_reduce<GROUP>(m, MaxOp{});
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < VPT; ++j)
          if (valid(j))
#pragma unroll
            for (int e = 0; e < VEC; ++e) s += exp_shifted(to_float(x[r][j].v[e]), m);
        s = group_reduce<GROUP>(s, SumOp{});
        const float inv_s = 1.0f / s;
        const float log_s = logf(s);
#pragma unroll
        for (int j = 0; j < VPT; ++j)
          if (valid(j)) {
            P o;
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              o.v[e] = from_float<T>(forward_value(to_float(x[r][j].v[e]), m, inv_s, log_s, a.log));
            orow[std::int64_t(j) * GROUP + lane] = o;
          }
      } else {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < VPT; ++j)
          if (valid(j))
#pragma unroll
            for (int e = 0; e < VEC; ++e) s += backward_term(to_float(x[r][j].v[e]), to_float(g[r][j].v[e]), a.log);
        s = group_reduce<GROUP>(s, SumOp{});
#pragma unroll
        for (int j = 0; j < VPT; ++j)
          if (valid(j)) {
            P o;
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              o.v[e] = from_float<T>(backward_value(to_float(x[r][j].v[e]), to_float(g[r][j].v[e]), s, a.log));
            orow[std::int64_t(j) * GROUP + lane] = o;
          }
      }
    }
  }
}

// ---------------------------------------------------------------- block_row
// One block per row. Thread t keeps vectors t, t+T, ..., t+(VPT-1)T in
// registers and the next a.smem_vecs vectors in its own slots of dynamic
// shared memory (slot k of thread t at k*T + t: consecutive threads touch
// consecutive 16-byte words, so no bank conflicts and no barrier: a thread
// only ever reads back what it wrote itself).
// SPILL is false for block_row_kernel (registers only: the shared-memory
// path's code alone took it from 44 to 62 registers at VPT 4, ptxas -v,
// sm_90, halving the blocks that fit) and true for block_row_smem_kernel.
template <class T, int VEC, int VPT, bool BWD, bool SPILL>
__device__ __forceinline__ void block_row_body(const SoftmaxArgs& a, float4* dynamic_smem,
                                               float (&scratch)[2][kMaxWarpsPerBlock]) {
  using P = Pack<T, VEC>;
  const int tid = threadIdx.x;
  const int nt = blockDim.x;
  const int spill = SPILL ? a.smem_vecs : 0;
  P* spill_x = reinterpret_cast<P*>(dynamic_smem);
  P* spill_g = spill_x + std::int64_t(spill) * nt;
  const std::int64_t nvec = a.cols / VEC;
  const std::int64_t reg_vecs = std::int64_t(VPT) * nt;

  for (std::int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const P* xr = row_ptr<T, VEC>(a.x, row, a.x_stride);
    const P* gr = BWD ? row_ptr<T, VEC>(a.dy, row, a.dy_stride) : nullptr;
    P* orow = row_ptr<T, VEC>(a.out, row, a.out_stride);
    P x[VPT];
    P g[BWD ? VPT : 1];
    load_strided<VPT, BWD>(xr, gr, tid, nt, nvec, x, g);
    // Spilled part (block_row_smem only): SPILL_BATCH loads in flight before the shared stores
    // (two for backward, which carries two tensors, to stay off local memory).
    // The staging copies move 16-byte packs as one native vector
    // (DUET_RAW16): copied as Pack structs (a memcpy each), the staging
    // arrays stayed in scratch on every AMD target (80 bytes a lane,
    // -Rpass-analysis=kernel-resource-usage).
    constexpr int SPILL_BATCH = BWD ? 2 : 4;
    using S = std::conditional_t<sizeof(P) == 16, DUET_RAW16, P>;
    const std::int64_t spill_slots_end = reg_vecs + std::int64_t(spill) * nt;
    const std::int64_t spill_end = nvec < spill_slots_end ? nvec : spill_slots_end;
    const S* xs = reinterpret_cast<const S*>(xr);
    const S* gs = reinterpret_cast<const S*>(gr);
    for (int k0 = 0; k0 < spill; k0 += SPILL_BATCH) {
      S t[SPILL_BATCH];
      S u[BWD ? SPILL_BATCH : 1];
      load_strided<SPILL_BATCH, BWD, S>(xs, gs, reg_vecs + std::int64_t(k0) * nt + tid, nt, spill_end, t, u);
#pragma unroll
      for (int k = 0; k < SPILL_BATCH; ++k)
        if (k0 + k < spill) {
          reinterpret_cast<S*>(spill_x)[std::int64_t(k0 + k) * nt + tid] = t[k];
          if constexpr (BWD) reinterpret_cast<S*>(spill_g)[std::int64_t(k0 + k) * nt + tid] = u[k];
        }
    }
    auto reg_valid = [&](int j) { return std::int64_t(j) * nt + tid < nvec; };
    auto spill_valid = [&](int k) { return reg_vecs + std::int64_t(k) * nt + tid < nvec; };

    if constexpr (!BWD) {
      float m = kNegInf;
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (reg_valid(j))
#pragma unroll
          for (int e = 0; e < VEC; ++e) m = fmaxf(m, to_float(x[j].v[e]));
      for (int k = 0; k < spill && spill_valid(k); ++k) {
        const P p = spill_x[std::int64_t(k) * nt + tid];
#pragma unroll
        for (int e = 0; e < VEC; ++e) m = fmaxf(m, to_float(p.v[e]));
      }
      m = block_reduce(m, scratch[0], MaxOp{});
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (reg_valid(j))
#pragma unroll
          for (int e = 0; e < VEC; ++e) s += exp_shifted(to_float(x[j].v[e]), m);
      for (int k = 0; k < spill && spill_valid(k); ++k) {
        const P p = spill_x[std::int64_t(k) * nt + tid];
#pragma unroll
        for (int e = 0; e < VEC; ++e) s += exp_shifted(to_float(p.v[e]), m);
      }
      s = block_reduce(s, scratch[1], SumOp{});
      const float inv_s = 1.0f / s;
      const float log_s = logf(s);
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (reg_valid(j)) {
          P o;
#pragma unroll
          for (int e = 0; e < VEC; ++e) o.v[e] = from_float<T>(forward_value(to_float(x[j].v[e]), m, inv_s, log_s, a.log));
          orow[std::int64_t(j) * nt + tid] = o;
        }
      for (int k = 0; k < spill && spill_valid(k); ++k) {
        const P p = spill_x[std::int64_t(k) * nt + tid];
        P o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) o.v[e] = from_float<T>(forward_value(to_float(p.v[e]), m, inv_s, log_s, a.log));
        orow[reg_vecs + std::int64_t(k) * nt + tid] = o;
      }
    } else {
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (reg_valid(j))
#pragma unroll
          for (int e = 0; e < VEC; ++e) s += backward_term(to_float(x[j].v[e]), to_float(g[j].v[e]), a.log);
      for (int k = 0; k < spill && spill_valid(k); ++k) {
        const P p = spill_x[std::int64_t(k) * nt + tid];
        const P q = spill_g[std::int64_t(k) * nt + tid];
#pragma unroll
        for (int e = 0; e < VEC; ++e) s += backward_term(to_float(p.v[e]), to_float(q.v[e]), a.log);
      }
      // One reduction per row here, so alternate buffers across rows.
      s = block_reduce(s, scratch[row / gridDim.x % 2], SumOp{});
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (reg_valid(j)) {
          P o;
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            o.v[e] = from_float<T>(backward_value(to_float(x[j].v[e]), to_float(g[j].v[e]), s, a.log));
          orow[std::int64_t(j) * nt + tid] = o;
        }
      for (int k = 0; k < spill && spill_valid(k); ++k) {
        const P p = spill_x[std::int64_t(k) * nt + tid];
        const P q = spill_g[std::int64_t(k) * nt + tid];
        P o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) o.v[e] = from_float<T>(backward_value(to_float(p.v[e]), to_float(q.v[e]), s, a.log));
        orow[reg_vecs + std::int64_t(k) * nt + tid] = o;
      }
    }
  }
}

template <class T, int VEC, int VPT, bool BWD>
__global__ void __launch_bounds__(kBlockRowMaxThreads) block_row_kernel(SoftmaxArgs a) {
  __shared__ float scratch[2][kMaxWarpsPerBlock];
  block_row_body<T, VEC, VPT, BWD, false>(a, nullptr, scratch);
}

template <class T, int VEC, int VPT, bool BWD>
__global__ void __launch_bounds__(kBlockRowMaxThreads) block_row_smem_kernel(SoftmaxArgs a) {
  extern __shared__ float4 dynamic_smem[];
  __shared__ float scratch[2][kMaxWarpsPerBlock];
  block_row_body<T, VEC, VPT, BWD, true>(a, dynamic_smem, scratch);
}

// ---------------------------------------------------------------- cluster pairs
// A cluster's blocks exchange their (max, sum) pairs for a row without a
// cluster barrier: each block stores its pair into every block's slot for it
// (itself included) with st.async, which counts the 8 bytes on the
// receiver's mbarrier, and each block waits on its own barrier. The
// barrier.cluster.arrive it replaces has release semantics (ptxas emits
// MEMBAR.ALL.GPU), so every block first waited for its stores of the
// previous row to be acknowledged, with nothing in flight.
// Two buffers alternate by row: a block sends row r + 2's pair only after it
// has every pair of row r + 1, and each block sends that only past a block
// barrier that its threads reach after reading row r's pairs.
struct ClusterPairs {
  float2 pairs[2][kMaxClusterBlocks];
  unsigned long long arrived[2];
};

#if DUET_DEVICE_CLUSTERS
// Thread 0 initialises the barriers; the caller then syncs the cluster once,
// so no block stores into a peer's barrier before it is set up.
__device__ __forceinline__ void cluster_pairs_init(ClusterPairs& cp) {
  if (threadIdx.x == 0) {
    duet_mbarrier_init(&cp.arrived[0], 1);
    duet_mbarrier_init(&cp.arrived[1], 1);
    duet_mbarrier_init_fence();
  }
}

// The row's pair from every block's (m, s); `phases` holds each buffer's
// next phase parity (one bit a buffer, flipped here).
__device__ __forceinline__ float2 cluster_pairs_exchange(ClusterPairs& cp, float m, float s, int blocks, int rank,
                                                         int parity, unsigned& phases) {
  const int tid = threadIdx.x;
  if (tid == 0) duet_mbarrier_expect(&cp.arrived[parity], static_cast<unsigned>(blocks * sizeof(float2)));
  if (tid < blocks) duet_store_async(&cp.pairs[parity][rank], make_float2(m, s), &cp.arrived[parity], tid);
  while (!duet_mbarrier_try_wait_cluster(&cp.arrived[parity], (phases >> parity) & 1u)) {
  }
  phases ^= 1u << parity;
  // Every warp combines the pairs itself, lane b (mod kMaxClusterBlocks)
  // holding block b's.
  const int b = tid % kMaxClusterBlocks;
  const float2 q = b < blocks ? cp.pairs[parity][b] : make_float2(kNegInf, 0.0f);
  const float row_m = group_reduce<kMaxClusterBlocks>(q.x, MaxOp{});
  return make_float2(row_m, group_reduce<kMaxClusterBlocks>(rescale(q.y, q.x, row_m), SumOp{}));
}
#endif

// ---------------------------------------------------------------- cluster_row
// A row past one block's registers, cut over a thread-block cluster of
// a.chunks_per_row blocks (the launch's cluster size): block r of a cluster
// keeps vectors [r * chunk, (r + 1) * chunk) of the row in registers as
// block_row does (thread t: chunk start + t, + T, ...), reduces them to an
// online pair (m_r, s_r = sum exp(x - m_r)), and the pairs are exchanged
// through distributed shared memory (cluster pairs, above: no cluster
// barrier a row). Read once, write once; blocks of up to 512 threads fit at
// least twice an SM. The grid is one wave
// of clusters walking the rows (a fresh cluster per row measured 0.74 of
// copy at f32 N = 65536, a persistent one 0.81: bench/NOTES.md, v10).
// Hopper (sm_90) and later; never launched elsewhere
// (DeviceProps::cluster_launch).
template <class T, int VEC, int VPT>
__global__ void __launch_bounds__(kClusterRowMaxThreads, 2) cluster_row_kernel(SoftmaxArgs a) {
#if DUET_DEVICE_CLUSTERS
  using P = Pack<T, VEC>;
  namespace cg = cooperative_groups;
  __shared__ float scratch[2][kMaxWarpsPerBlock];
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
  // This thread's vectors of every row: first, first + nt, ... (count of
  // them below the slice's end), the same for each row, so computed once.
  const Chunk chunk = chunk_of<VEC>(a, rank);
  const std::int64_t first = chunk.begin + tid;
  const int count = first < chunk.end ? static_cast<int>((chunk.end - first + nt - 1) / nt) : 0;
  auto valid = [&](int j) { return j < count; };
  int parity = 0;
  for (std::int64_t row = blockIdx.x / blocks; row < a.rows; row += clusters, parity ^= 1) {
    const P* xr = row_ptr<T, VEC>(a.x, row, a.x_stride) + first;
    P x[VPT];
#pragma unroll
    for (int j = 0; j < VPT; ++j)
      if (valid(j)) x[j] = xr[std::int64_t(j) * nt];

    float m = kNegInf;
#pragma unroll
    for (int j = 0; j < VPT; ++j)
      if (valid(j))
#pragma unroll
        for (int e = 0; e < VEC; ++e) m = fmaxf(m, to_float(x[j].v[e]));
    m = block_reduce(m, scratch[0], MaxOp{});
    float s = 0.0f;
    if (m != kNegInf) {
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (valid(j))
#pragma unroll
          for (int e = 0; e < VEC; ++e) s += exp_shifted(to_float(x[j].v[e]), m);
    } else {
      // Every value of this chunk is -inf or NaN: the chunk adds nothing to
      // the row's sum unless it holds a NaN, which must reach the row.
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (valid(j))
#pragma unroll
          for (int e = 0; e < VEC; ++e) s += to_float(x[j].v[e]) == kNegInf ? 0.0f : to_float(x[j].v[e]);
    }
    s = block_reduce(s, scratch[1], SumOp{});
    const float2 stats = cluster_pairs_exchange(cpairs, m, s, blocks, rank, parity, phases);
    const float row_m = stats.x;
    const float row_s = stats.y;
    // One per-row constant k (a register: the row's vectors fill the rest):
    // log_softmax subtracts log s; softmax multiplies by 1/s, except for
    // 16-bit results, where exp(x - m) / s is one exp2 of (x - m) log2e -
    // log2 s, an FFMA in place of two FMULs, whose ~1e-6 relative error is
    // far below their rounding (2^-9 bf16, 2^-12 f16).
    const float k = a.log ? logf(row_s) : sizeof(T) == 2 ? log2f(row_s) : 1.0f / row_s;
    auto out = [&](float v) {
      const float d = v - row_m;
      if (a.log) return d - k;
      if constexpr (sizeof(T) == 2)
        return fast_exp2(fmaf(d, kLog2e, -k));
      else
        return fast_exp2(d * kLog2e) * k;  // forward_value's arithmetic
    };
    P* orow = row_ptr<T, VEC>(a.out, row, a.out_stride) + first;
#pragma unroll
    for (int j = 0; j < VPT; ++j)
      if (valid(j)) {
        P o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) o.v[e] = from_float<T>(out(to_float(x[j].v[e])));
        orow[std::int64_t(j) * nt] = o;
      }
  }
  // No block leaves while a peer may still store into its shared memory.
  cluster.sync();
#else
  (void)a;
#endif
}

// ---------------------------------------------------------------- split_row
// Work item i is chunk i % chunks_per_row of row i / chunks_per_row.
// Pass 1 reduces each chunk to an online-softmax pair (forward: max and sum
// of exp(x - max); backward: the sum only); pass 2 combines a row's pairs
// (they sit in L2) and writes its chunk.
template <class T, int VEC, int INFLIGHT, bool BWD>
__global__ void __launch_bounds__(kSplitRowBlock) split_row_partial_kernel(SoftmaxArgs a) {
  using P = Pack<T, VEC>;
  __shared__ float scratch[2][kMaxWarpsPerBlock];
  const std::int64_t items = a.rows * a.chunks_per_row;
  for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const auto [row, begin, end] = chunk_of<VEC>(a, item);
    const P* xr = row_ptr<T, VEC>(a.x, row, a.x_stride);
    const P* gr = BWD ? row_ptr<T, VEC>(a.dy, row, a.dy_stride) : nullptr;
    float m = kNegInf;
    float s = 0.0f;
    for (std::int64_t v0 = begin + threadIdx.x; v0 < end; v0 += std::int64_t(INFLIGHT) * blockDim.x) {
      P x[INFLIGHT];
      P g[BWD ? INFLIGHT : 1];
      load_strided<INFLIGHT, BWD>(xr, gr, v0, blockDim.x, end, x, g);
#pragma unroll
      for (int k = 0; k < INFLIGHT; ++k) {
        if (v0 + std::int64_t(k) * blockDim.x >= end) break;
        if constexpr (BWD) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) s += backward_term(to_float(x[k].v[e]), to_float(g[k].v[e]), a.log);
        } else {
          online_add<VEC>(m, s, [&](int e) { return to_float(x[k].v[e]); });
        }
      }
    }
    // Two reductions per item: the buffers alternate within an item, and the
    // barrier of the second protects the first buffer for the next item.
    if constexpr (!BWD) {
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

template <class T, int VEC, int INFLIGHT, bool BWD>
__global__ void __launch_bounds__(kSplitRowBlock) split_row_finalize_kernel(SoftmaxArgs a) {
  using P = Pack<T, VEC>;
  const std::int64_t items = a.rows * a.chunks_per_row;
  for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const auto [row, begin, end] = chunk_of<VEC>(a, item);
    // Every thread combines the row's pairs itself: a few L2 reads, no barrier.
    const float* pr = a.partials + 2 * row * a.chunks_per_row;
    float m = kNegInf;
    float s = 0.0f;
    if constexpr (!BWD) {
      for (int c = 0; c < a.chunks_per_row; ++c) m = fmaxf(m, pr[2 * c]);
      for (int c = 0; c < a.chunks_per_row; ++c) s += rescale(pr[2 * c + 1], pr[2 * c], m);
    } else {
      for (int c = 0; c < a.chunks_per_row; ++c) s += pr[2 * c + 1];
    }
    const float inv_s = 1.0f / s;
    const float log_s = logf(s);
    const P* xr = row_ptr<T, VEC>(a.x, row, a.x_stride);
    const P* gr = BWD ? row_ptr<T, VEC>(a.dy, row, a.dy_stride) : nullptr;
    P* orow = row_ptr<T, VEC>(a.out, row, a.out_stride);
    for (std::int64_t v0 = begin + threadIdx.x; v0 < end; v0 += std::int64_t(INFLIGHT) * blockDim.x) {
      P x[INFLIGHT];
      P g[BWD ? INFLIGHT : 1];
      load_strided<INFLIGHT, BWD>(xr, gr, v0, blockDim.x, end, x, g);
#pragma unroll
      for (int k = 0; k < INFLIGHT; ++k) {
        const std::int64_t vi = v0 + std::int64_t(k) * blockDim.x;
        if (vi >= end) break;
        P o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          if constexpr (BWD)
            o.v[e] = from_float<T>(backward_value(to_float(x[k].v[e]), to_float(g[k].v[e]), s, a.log));
          else
            o.v[e] = from_float<T>(forward_value(to_float(x[k].v[e]), m, inv_s, log_s, a.log));
        }
        orow[vi] = o;
      }
    }
  }
}

// ---------------------------------------------------------------- split_stream
// split_row's two passes in one launch, ordered so that the second pass finds
// its input still in L2. Work item i is chunk i % chunks_per_row of row
// i / chunks_per_row, as in split_row, and each item is visited twice:
// pass 1 reduces the chunk to its pair and counts it done for its row; the
// row's last pass 1 to finish combines the row's pairs into the row's (max,
// sum) and counts once more; pass 2 waits for that count and writes the chunk.
// Blocks take visits from a ticket queue in the order
//   pass 1 of items [0, lag); then pass 1 of item lag + j and pass 2 of item j,
//   alternately; then pass 2 of the last lag items,
// so a chunk is read again about `lag` chunks of other reads after its first
// read, and the planner sizes `lag` to what the L2 keeps.
// A visit waits only on visits with smaller tickets (a row's chunks lie within
// chunks_per_row - 1 items of each other, and lag >= chunks_per_row), which
// blocks already running hold and finish without waiting on later tickets. So
// the wait always ends, whatever the grid and whatever else shares the device.
// Each thread holds VPT vectors of a chunk (chunk_elems = threads x VPT x VEC).

// A chunk's vectors as a thread holds them: 16 bytes as one native vector
// (four 32-bit registers; a pack of eight 16-bit values was held in eight and
// spilled: ptxas -v, sm_90), narrower packs as they are (the scalar path).
template <class T, int VEC>
using Held = std::conditional_t<sizeof(Pack<T, VEC>) == 16, DUET_RAW16, Pack<T, VEC>>;

// Element e of a held vector, as float (e is a constant once unrolled).
template <class T, class H>
__device__ __forceinline__ float held_at(const H& h, int e) {
  if constexpr (std::is_same_v<H, DUET_RAW16>) {
    if constexpr (sizeof(T) == 4) {
      return __uint_as_float(DUET_RAW16_WORD(h, e));
    } else {
      const unsigned w = DUET_RAW16_WORD(h, e / 2);
      if constexpr (std::is_same_v<T, bf16_t>) return __uint_as_float(e % 2 ? w & 0xffff0000u : w << 16);
      return to_float(T{static_cast<unsigned short>(e % 2 ? w >> 16 : w & 0xffffu)});
    }
  } else {
    return to_float(h.v[e]);
  }
}

// Two floats rounded to 16-bit T in one word, the first in the low half: one
// cvt.rn.{bf16x2,f16x2}.f32 on sm_80+ where per-element conversion took a
// cvt, a shift and an or per pair.
template <class T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned w;
  if constexpr (std::is_same_v<T, bf16_t>)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
#else
  return unsigned(from_float<T>(lo).bits) | unsigned(from_float<T>(hi).bits) << 16;
#endif
}

// A held vector whose element e is f(e), rounded to T.
template <class T, class H, class F>
__device__ __forceinline__ H make_held(F f) {
  if constexpr (std::is_same_v<H, DUET_RAW16>) {
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (sizeof(T) == 4)
        w[i] = __float_as_uint(f(i));
      else
        w[i] = pack2<T>(f(2 * i), f(2 * i + 1));
    }
    return DUET_RAW16_MAKE(w[0], w[1], w[2], w[3]);
  } else {
    H o;
#pragma unroll
    for (int e = 0; e < int(sizeof(H) / sizeof(T)); ++e) o.v[e] = from_float<T>(f(e));
    return o;
  }
}

// Loads and stores of held vectors; the 16-byte ones with cache hints where
// asked (DUET_LOAD_KEEP, DUET_LOAD_LAST_USE, DUET_STORE_STREAMING in
// vendor.h).
template <class H>
__device__ __forceinline__ H load_keep(const H* p) {
  if constexpr (std::is_same_v<H, DUET_RAW16>)
    return DUET_LOAD_KEEP(p);
  else
    return *p;
}
template <class H>
__device__ __forceinline__ H load_last_use(const H* p) {
  if constexpr (std::is_same_v<H, DUET_RAW16>)
    return DUET_LOAD_LAST_USE(p);
  else
    return *p;
}
template <class H>
__device__ __forceinline__ void store_streaming(H* p, const H& v) {
  if constexpr (std::is_same_v<H, DUET_RAW16>)
    DUET_STORE_STREAMING(p, v);
  else
    *p = v;
}

template <class T, int VEC, int VPT, bool BWD>
__global__ void __launch_bounds__(kSplitStreamBlock, kSplitStreamMinBlocksPerSm) split_stream_kernel(SoftmaxArgs a) {
  using H = Held<T, VEC>;
  constexpr int W = DUET_DEVICE_WARP_SIZE;
  __shared__ float scratch[2][kMaxWarpsPerBlock];
  __shared__ float2 row_stats;
  __shared__ unsigned long long ticket[2];
  const int tid = threadIdx.x;
  // The block size is fixed (the planner launches kSplitStreamBlock threads),
  // so a thread's vectors sit at constant offsets from its first: fewer
  // registers for addresses (bf16 spilled at a run-time stride: ptxas -v, sm_90).
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
    const Chunk ch = chunk_of<VEC>(a, item);
    const std::int64_t first = ch.begin + tid;
    const H* xr = reinterpret_cast<const H*>(row_ptr<T, VEC>(a.x, ch.row, a.x_stride));
    const H* gr = BWD ? reinterpret_cast<const H*>(row_ptr<T, VEC>(a.dy, ch.row, a.dy_stride)) : nullptr;
    auto valid = [&](int j) { return first + j * nt < ch.end; };
    H x[VPT];
    H g[BWD ? VPT : 1];
    if (!second) {
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (valid(j)) {
          x[j] = load_keep(xr + first + j * nt);
          if constexpr (BWD) g[j] = load_keep(gr + first + j * nt);
        }
      float m = kNegInf;
      float s = 0.0f;
      if constexpr (!BWD) {
        // Online over the thread's vectors, as split_row's first pass, so no
        // value stays live across the block's reductions (the two-step form,
        // max then sum, spilled at 16-bit types: ptxas -v, sm_90).
#pragma unroll
        for (int j = 0; j < VPT; ++j)
          if (valid(j)) online_add<VEC>(m, s, [&](int e) { return held_at<T>(x[j], e); });
        const float m_blk = block_reduce(m, scratch[0], MaxOp{});
        s = block_reduce(rescale(s, m, m_blk), scratch[1], SumOp{});
        m = m_blk;
      } else {
#pragma unroll
        for (int j = 0; j < VPT; ++j)
          if (valid(j))
#pragma unroll
            for (int e = 0; e < VEC; ++e) s += backward_term(held_at<T>(x[j], e), held_at<T>(g[j], e), a.log);
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
          // spilled unrolled (ptxas -v, sm_90).
#pragma unroll 1
          for (std::int64_t c = tid; c < chunks; c += W) {
            const float mc = pr[2 * c];
            const float sc = pr[2 * c + 1];
            if constexpr (BWD) {
              rs += sc;
            } else {
              const float m_new = fmaxf(rm, mc);
              rs = rescale(rs, rm, m_new) + rescale(sc, mc, m_new);
              rm = m_new;
            }
          }
          if constexpr (!BWD) {
            const float row_m = group_reduce<W>(rm, MaxOp{});
            rs = group_reduce<W>(rescale(rs, rm, row_m), SumOp{});
            rm = row_m;
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
      for (int j = 0; j < VPT; ++j)
        if (valid(j)) {
          x[j] = load_last_use(xr + first + j * nt);
          if constexpr (BWD) g[j] = load_last_use(gr + first + j * nt);
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
      const float inv_s = 1.0f / s;
      const float log_s = logf(s);
      H* orow = reinterpret_cast<H*>(row_ptr<T, VEC>(a.out, ch.row, a.out_stride));
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (valid(j)) {
          const H o = make_held<T, H>([&](int e) {
            if constexpr (BWD)
              return backward_value(held_at<T>(x[j], e), held_at<T>(g[j], e), s, a.log);
            else
              return forward_value(held_at<T>(x[j], e), m, inv_s, log_s, a.log);
          });
          store_streaming(orow + first + j * nt, o);
        }
    }
    // Also the barrier between this visit's reductions (and row_stats) and
    // the next visit's.
    if (tid == 0) ticket[slot ^ 1] = t_next;
    __syncthreads();
  }
}

}  // namespace duet::DUET_NS::kernels
