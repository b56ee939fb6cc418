// Experiment (bench/NOTES.md v85): softmax over a middle dimension with each
// block's tiles staged through a ring of shared-memory buffers by cp.async,
// so that while a block reduces and writes one tile the next STAGES - 1 are
// in flight. Standalone: builds with nvcc alone and measures itself against
// a device-to-device copy in the same run.
//   nvcc -O3 -std=c++17 -arch=sm_90 -I backends/vendor bench/experiments/interleaved_ring.cu -o ring
//   ./ring [--quick | --one C f32|bf16 fwd|bwd LB THREADS STAGES]
// A tile is C lines of LB bytes: channels c = 0..C-1 of inner elements
// [i0, i0 + LB / sizeof(T)) of one outer row. Thread (lane, slot) copies
// and later reads the 16-byte packs at lane of the lines c = slot, slot +
// slots, ... (its own places in each buffer, so no barrier guards the
// ring); the slots' partial results meet by shuffles and shared memory.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hopper_ptx.h"

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

struct Args {
  const void* x;
  const void* dy;
  void* out;
  long long outer, C, inner;  // contiguous [outer, C, inner], softmax over C
  int line_bytes;             // LB: a power of two, 32..512
  int lanes_log2;             // log2(LB / 16)
  long long tiles_per_outer;
  int log;
};

template <class T>
__device__ __forceinline__ float to_f(T v) {
  if constexpr (sizeof(T) == 4) return v; else return __bfloat162float(v);
}
template <class T>
__device__ __forceinline__ T from_f(float v) {
  if constexpr (sizeof(T) == 4) return v; else return __float2bfloat16_rn(v);
}

constexpr float kLog2e = 1.4426950408889634f;

// VEC floats rounded into a 16-byte pack of T.
template <int VEC>
__device__ __forceinline__ void pack(const float (&r)[VEC], uint4& w) {
  unsigned* words = &w.x;
  if constexpr (VEC == 4) {
#pragma unroll
    for (int e = 0; e < 4; ++e) words[e] = __float_as_uint(r[e]);
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) words[e] = duet_cvt_rn_bf16x2(r[2 * e], r[2 * e + 1]);
  }
}

template <class T, bool BACKWARD, int NT, int STAGES>
__global__ void __launch_bounds__(NT, 1) ring_kernel(Args a) {
#if DUET_DEVICE_CP_ASYNC
  constexpr int VEC = 16 / sizeof(T);
  constexpr int W = 32;
  constexpr int TENSORS = BACKWARD ? 2 : 1;
  // Thread t's places: pack k of tensor j in stage s at ((s * TENSORS + j) * K + k) * NT + t.
  // A thread copies and reads only its own places: no barrier guards the ring.
  extern __shared__ uint4 ring[];
  __shared__ float2 parts[NT * VEC];  // (warps or slots) x lanes x VEC pairs
  __shared__ float2 result[32 * VEC];
  const int lg = a.lanes_log2;
  const int lanes = 1 << lg;
  const int tid = threadIdx.x;
  const int lane = tid & (lanes - 1);
  const int slot = tid >> lg;
  const int slots = NT >> lg;
  const int C = static_cast<int>(a.C);
  const int K = (C + slots - 1) / slots;  // places a thread a tensor
  const int mine = slot < C ? (C - 1 - slot) / slots + 1 : 0;
  const long long tiles = a.outer * a.tiles_per_outer;
  const int L = a.line_bytes / static_cast<int>(sizeof(T));
  const long long col_step = static_cast<long long>(slots) * a.inner;  // elements between a thread's channels
  const T* const x = static_cast<const T*>(a.x);
  const T* const dy = static_cast<const T*>(a.dy);
  T* const out = static_cast<T*>(a.out);
  uint4* const my = ring + tid;
  const int stage_stride = TENSORS * K * NT;

  // The offset of this thread's first element of tile b, and whether its
  // lane lies inside the rows.
  const auto start = [&](long long b, bool* valid) {
    const long long r = b / a.tiles_per_outer;
    const long long i = (b - r * a.tiles_per_outer) * L + lane * VEC;
    *valid = i < a.inner;
    return (r * a.C + slot) * a.inner + (*valid ? i : 0);
  };
  const auto issue = [&](long long b, int stage) {
    if (b < tiles) {
      bool valid;
      const long long off = start(b, &valid);
      const T* px = x + off;
      const T* pg = BACKWARD ? dy + off : nullptr;
      uint4* dst = my + stage * stage_stride;
#pragma unroll 4
      for (int k = 0; k < mine; ++k) {
        duet_cp_async16_or_zero(dst + k * NT, px, valid);
        if constexpr (BACKWARD) duet_cp_async16_or_zero(dst + (K + k) * NT, pg, valid);
        px += col_step;
        if constexpr (BACKWARD) pg += col_step;
      }
    }
    duet_cp_async_commit();
  };

  const long long first = blockIdx.x, step = gridDim.x;
#pragma unroll
  for (int k = 0; k < STAGES - 1; ++k) issue(first + k * step, k);

  const auto el = [](const uint4& p, int e) {
    const unsigned w = (&p.x)[e * sizeof(T) / 4];
    if constexpr (sizeof(T) == 4) return __uint_as_float(w);
    else return __uint_as_float(e % 2 ? w & 0xffff0000u : w << 16);
  };

  int stage = 0;
  for (long long b = first; b < tiles; b += step) {
    duet_cp_async_wait_group<STAGES - 2>();  // this thread's copies of tile b landed
    issue(b + (STAGES - 1) * step, stage == 0 ? STAGES - 1 : stage - 1);
    const uint4* tx = my + stage * stage_stride;
    const uint4* tg = tx + K * NT;
    float m[VEC], s[VEC];
    if constexpr (BACKWARD) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) { m[e] = 0.f; s[e] = 0.f; }
#pragma unroll 4
      for (int k = 0; k < mine; ++k) {
        const uint4 y = tx[k * NT], g = tg[k * NT];
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] += a.log ? el(g, e) : el(g, e) * el(y, e);
      }
    } else {
      if constexpr (sizeof(T) == 2) {
        // The max of 16-bit values is one of them: packed, two a word.
        __nv_bfloat162 mp[4];
#pragma unroll
        for (int w = 0; w < 4; ++w) mp[w] = __halves2bfloat162(__ushort_as_bfloat16(0xff80), __ushort_as_bfloat16(0xff80));
#pragma unroll 4
        for (int k = 0; k < mine; ++k) {
          const uint4 v = tx[k * NT];
          const __nv_bfloat162* pv = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
          for (int w = 0; w < 4; ++w) mp[w] = __hmax2(mp[w], pv[w]);
        }
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          m[2 * w] = __low2float(mp[w]);
          m[2 * w + 1] = __high2float(mp[w]);
        }
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) m[e] = -INFINITY;
#pragma unroll 4
        for (int k = 0; k < mine; ++k) {
          const uint4 v = tx[k * NT];
#pragma unroll
          for (int e = 0; e < VEC; ++e) m[e] = fmaxf(m[e], el(v, e));
        }
      }
      float sh[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        sh[e] = m[e] == -INFINITY ? 0.f : m[e];
        s[e] = 0.f;
      }
#pragma unroll 4
      for (int k = 0; k < mine; ++k) {
        const uint4 v = tx[k * NT];
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] += duet_ex2_approx((el(v, e) - sh[e]) * kLog2e);
      }
    }
    // The slots' pairs combined: within a warp by shuffles, then by warp.
    const auto combine = [](float2 p, float2 q) {
      if constexpr (BACKWARD) {
        return make_float2(0.f, p.y + q.y);
      } else {
        const float mm = fmaxf(p.x, q.x);
        if (mm == -INFINITY) return make_float2(mm, p.y + q.y);
        return make_float2(mm, p.y * duet_ex2_approx((p.x - mm) * kLog2e) + q.y * duet_ex2_approx((q.x - mm) * kLog2e));
      }
    };
    for (int off = lanes; off < W; off *= 2)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float2 p = combine(make_float2(m[e], s[e]),
                                 make_float2(__shfl_xor_sync(0xffffffffu, m[e], off), __shfl_xor_sync(0xffffffffu, s[e], off)));
        m[e] = p.x;
        s[e] = p.y;
      }
    const int per_warp = lanes < W ? W / lanes : 1;
    const int nparts = (slots + per_warp - 1) / per_warp;
    if (slot % per_warp == 0)
#pragma unroll
      for (int e = 0; e < VEC; ++e) parts[(slot / per_warp * lanes + lane) * VEC + e] = make_float2(m[e], s[e]);
    __syncthreads();
    for (int rr = tid; rr < lanes * VEC; rr += NT) {
      float2 all = parts[rr];
      for (int p = 1; p < nparts; ++p) all = combine(all, parts[p * lanes * VEC + rr]);
      result[rr] = all;
    }
    __syncthreads();
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float2 p = result[lane * VEC + e];
      m[e] = p.x;
      s[e] = BACKWARD ? p.y : (a.log ? logf(p.y) : 1.f / p.y);
    }
    bool valid;
    const long long off = start(b, &valid);
    if (valid) {
      T* o = out + off;
#pragma unroll 4
      for (int k = 0; k < mine; ++k) {
        const uint4 v = tx[k * NT];
        uint4 w;
        if constexpr (BACKWARD) {
          const uint4 g = tg[k * NT];
          float r[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float y = el(v, e), gg = el(g, e);
            r[e] = a.log ? gg - duet_ex2_approx(y * kLog2e) * s[e] : y * (gg - s[e]);
          }
          pack(r, w);
        } else {
          float r[VEC];
          if (a.log) {
#pragma unroll
            for (int e = 0; e < VEC; ++e) r[e] = el(v, e) - m[e] - s[e];
          } else {
#pragma unroll
            for (int e = 0; e < VEC; ++e) r[e] = duet_ex2_approx((el(v, e) - m[e]) * kLog2e) * s[e];
          }
          pack(r, w);
        }
        *reinterpret_cast<uint4*>(o) = w;
        o += col_step;
      }
    }
    stage = stage + 1 == STAGES ? 0 : stage + 1;
  }
  duet_cp_async_wait_all();
#else
  (void)a;
#endif
}

// float64 reference, a thread a column.
template <class T>
__global__ void reference_kernel(const T* x, const T* dy, double* ref, long long outer, long long C, long long inner,
                                 bool backward) {
  const long long col = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (col >= outer * inner) return;
  const long long r = col / inner, i = col % inner;
  const T* xr = x + r * C * inner + i;
  double* o = ref + r * C * inner + i;
  if (backward) {
    const T* g = dy + r * C * inner + i;
    double s = 0;
    for (long long c = 0; c < C; ++c) s += (double)to_f<T>(g[c * inner]) * to_f<T>(xr[c * inner]);
    for (long long c = 0; c < C; ++c) o[c * inner] = to_f<T>(xr[c * inner]) * (to_f<T>(g[c * inner]) - s);
  } else {
    double m = -INFINITY, s = 0;
    for (long long c = 0; c < C; ++c) m = fmax(m, (double)to_f<T>(xr[c * inner]));
    for (long long c = 0; c < C; ++c) s += exp(to_f<T>(xr[c * inner]) - m);
    for (long long c = 0; c < C; ++c) o[c * inner] = exp(to_f<T>(xr[c * inner]) - m) / s;
  }
}
template <class T>
__global__ void compare_kernel(const T* out, const double* ref, long long n, double* err) {
  double num = 0, den = 0;
  bool bad = false;
  for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
    const double o = to_f<T>(out[k]);
    if (!(o == o)) bad = true;
    num += (o - ref[k]) * (o - ref[k]);
    den += ref[k] * ref[k];
  }
  atomicAdd(&err[0], num);
  atomicAdd(&err[1], den);
  if (bad) atomicAdd(&err[2], 1.0);
}
template <class T>
__global__ void fill_kernel(T* p, long long n, unsigned seed, float scale) {
  for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(k) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[k] = from_f<T>(scale * ((h & 0xffffff) / float(0x1000000) - 0.5f));
  }
}

struct Shape { const char* label; long long C, inner; };

// --one C dtype(f32|bf16) dir(fwd|bwd) lb nt stages: that setting alone
// (for a profiler), 8 timed launches.
struct Only {
  bool on = false;
  long long C = 0;
  int f32 = 0, bwd = 0, lb = 0, nt = 0, stages = 0;
} g_only;

template <class T, bool BACKWARD, int NT, int STAGES>
float run(const Args& a, long long tiles, int lb, int sms, std::size_t* smem_out, int* blocks_out) {
  const int tensors = BACKWARD ? 2 : 1;
  const int slots = NT / (lb / 16);
  const std::size_t K = (a.C + slots - 1) / slots;
  const std::size_t smem = static_cast<std::size_t>(STAGES) * tensors * K * NT * 16;
  *smem_out = smem;
  auto k = ring_kernel<T, BACKWARD, NT, STAGES>;
  // The attribute and occupancy queries once a size: inside the timed
  // region they would add host time between the events.
  static std::size_t cached_smem = 0;
  static int per_sm = 0;
  if (smem != cached_smem) {
    cudaFuncAttributes attr;
    CHECK(cudaFuncGetAttributes(&attr, k));
    if (smem + attr.sharedSizeBytes > 227 * 1024) return -1;
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, NT, smem));
    cached_smem = smem;
  }
  if (per_sm == 0) return -1;
  const long long grid = std::min<long long>(tiles, static_cast<long long>(per_sm) * sms);
  *blocks_out = per_sm;
  k<<<static_cast<unsigned>(grid), NT, smem>>>(a);
  CHECK(cudaGetLastError());
  return 0;
}

template <class T, bool BACKWARD>
using Launcher = float (*)(const Args&, long long, int, int, std::size_t*, int*);

template <class T, bool BACKWARD>
Launcher<T, BACKWARD> pick(int nt, int stages) {
  if (nt == 256) {
    if (stages == 2) return run<T, BACKWARD, 256, 2>;
    if (stages == 3) return run<T, BACKWARD, 256, 3>;
    return run<T, BACKWARD, 256, 4>;
  }
  if (stages == 2) return run<T, BACKWARD, 128, 2>;
  if (stages == 3) return run<T, BACKWARD, 128, 3>;
  return run<T, BACKWARD, 128, 4>;
}

double copy_gbps(void* a, void* b, std::size_t bytes) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int w = 0; w < 3; ++w) CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  std::vector<float> ts;
  for (int rep = 0; rep < 20; ++rep) {
    CHECK(cudaEventRecord(e0));
    CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return 2.0 * bytes / (ts[ts.size() / 2] * 1e-3) / 1e9;
}

template <class T, bool BACKWARD>
void sweep(const Shape& sh, std::size_t target_bytes, double copy, int sms, void* bufs[6], double* ref, double* err) {
  const long long outer = std::max<long long>(1, target_bytes / sizeof(T) / (sh.C * sh.inner));
  const long long n = outer * sh.C * sh.inner;
  const int inner_bytes = static_cast<int>(sh.inner * sizeof(T));
  const char* dt = sizeof(T) == 4 ? "f32" : "bf16";
  if (g_only.on && (g_only.C != sh.C || g_only.f32 != (sizeof(T) == 4) || g_only.bwd != BACKWARD)) return;
  for (int lb : {512, 256, 128, 64, 32}) {
    // Lines no wider than the inner rows' bytes rounded up to a power of
    // two, tiles of at most 64 KiB a tensor.
    if (lb > 32 && lb / 2 >= inner_bytes) continue;
    if (sh.C * lb > 64 * 1024) continue;
    if (g_only.on && lb != g_only.lb) continue;
    for (int nt : {128, 256}) {
      if (lb / 16 > nt) continue;
      if (g_only.on && nt != g_only.nt) continue;
      for (int stages : {2, 3, 4}) {
        if (g_only.on && stages != g_only.stages) continue;
        Args a{};
        a.outer = outer;
        a.C = sh.C;
        a.inner = sh.inner;
        a.line_bytes = lb;
        a.lanes_log2 = 0;
        while ((16 << a.lanes_log2) < lb) ++a.lanes_log2;
        a.tiles_per_outer = (sh.inner + lb / sizeof(T) - 1) / (lb / sizeof(T));
        a.log = 0;
        const long long tiles = outer * a.tiles_per_outer;
        auto launch = pick<T, BACKWARD>(nt, stages);
        // Check on fresh data with a poisoned output.
        a.x = bufs[0];
        a.dy = bufs[2];
        a.out = bufs[4];
        fill_kernel<T><<<1024, 256>>>(static_cast<T*>(bufs[0]), n, 1234u + stages + nt + lb, 6.0f);
        fill_kernel<T><<<1024, 256>>>(static_cast<T*>(bufs[2]), n, 77u + stages + nt + lb, 2.0f);
        CHECK(cudaMemset(bufs[4], 0xff, n * sizeof(T)));
        std::size_t smem;
        int per_sm = 0;
        if (launch(a, tiles, lb, sms, &smem, &per_sm) < 0) continue;
        reference_kernel<T><<<static_cast<unsigned>((outer * sh.inner + 255) / 256), 256>>>(
            static_cast<const T*>(bufs[0]), static_cast<const T*>(bufs[2]), ref, outer, sh.C, sh.inner, BACKWARD);
        CHECK(cudaMemset(err, 0, 3 * sizeof(double)));
        compare_kernel<T><<<1024, 256>>>(static_cast<const T*>(bufs[4]), ref, n, err);
        CHECK(cudaGetLastError());
        double e[3];
        CHECK(cudaMemcpy(e, err, sizeof e, cudaMemcpyDeviceToHost));
        const double rel = std::sqrt(e[0] / e[1]);
        // Time, two input sets rotated.
        cudaEvent_t e0, e1;
        CHECK(cudaEventCreate(&e0));
        CHECK(cudaEventCreate(&e1));
        std::vector<float> ts;
        for (int rep = 0; rep < (g_only.on ? 10 : 24); ++rep) {
          const int set = rep & 1;
          a.x = bufs[set];
          a.dy = bufs[2 + set];
          a.out = bufs[4 + set];
          CHECK(cudaEventRecord(e0));
          launch(a, tiles, lb, sms, &smem, &per_sm);
          CHECK(cudaEventRecord(e1));
          CHECK(cudaEventSynchronize(e1));
          float ms;
          CHECK(cudaEventElapsedTime(&ms, e0, e1));
          if (rep >= 4) ts.push_back(ms);
        }
        std::sort(ts.begin(), ts.end());
        const double ms = ts[ts.size() / 2];
        const double bytes = double(n) * sizeof(T) * (BACKWARD ? 3 : 2);
        const double gbps = bytes / (ms * 1e-3) / 1e9;
        std::printf("%-16s %-4s %s lb %3d nt %3d stages %d smem %6zu blocks/SM %d  %.3f ms  %7.1f GB/s  ratio %.3f  err %.2e%s\n",
                    sh.label, dt, BACKWARD ? "bwd" : "fwd", lb, nt, stages, smem, per_sm, ms, gbps, gbps / copy, rel,
                    e[2] > 0 ? " NaN!" : "");
        std::fflush(stdout);
      }
    }
  }
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (argc == 8 && std::strcmp(argv[1], "--one") == 0) {
    g_only.on = true;
    g_only.C = std::atoll(argv[2]);
    g_only.f32 = std::strcmp(argv[3], "f32") == 0;
    g_only.bwd = std::strcmp(argv[4], "bwd") == 0;
    g_only.lb = std::atoi(argv[5]);
    g_only.nt = std::atoi(argv[6]);
    g_only.stages = std::atoi(argv[7]);
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::size_t target = std::size_t(256) << 20;
  void* bufs[6];
  for (auto& b : bufs) CHECK(cudaMalloc(&b, target + (1 << 20)));
  double* ref;
  double* err;
  CHECK(cudaMalloc(&ref, target / 2 * 8 + (1 << 20)));
  CHECK(cudaMalloc(&err, 3 * sizeof(double)));
  CHECK(cudaMemset(bufs[0], 1, target));
  const double copy = copy_gbps(bufs[0], bufs[1], target);
  std::printf("device %s, %d SMs, copy %.1f GB/s (cudaMemcpyAsync D2D of 256 MB, read + write)\n", prop.name,
              prop.multiProcessorCount, copy);
  const Shape shapes[] = {{"[N,21,256,256]", 21, 65536}, {"[N,100,64,64]", 100, 4096}, {"[N,200,32,32]", 200, 1024},
                          {"[N,512,32,32]", 512, 1024}, {"[N,1000,56]", 1000, 56},     {"[N,32,16,1024]", 16, 1024}};
  for (const Shape& sh : shapes) {
    if (quick && sh.C != 100) continue;
    sweep<__nv_bfloat16, false>(sh, target, copy, prop.multiProcessorCount, bufs, ref, err);
    sweep<float, false>(sh, target, copy, prop.multiProcessorCount, bufs, ref, err);
    sweep<__nv_bfloat16, true>(sh, target, copy, prop.multiProcessorCount, bufs, ref, err);
    sweep<float, true>(sh, target, copy, prop.multiProcessorCount, bufs, ref, err);
  }
  return 0;
}
