// The inline PTX duet uses on NVIDIA devices, and the only inline PTX in
// duet (vendor.h includes it for the CUDA build; bench/experiments/synccheck_cluster_repro.cu
// includes it on its own). Each helper names the PTX ISA section it follows.
// Compiled by nvcc only: plain C++ that includes vendor.h sees none of it.
#pragma once

#if defined(__CUDACC__)
#include <cuda_runtime.h>

// 2^x: ex2.approx.ftz.f32 (MUFU.EX2, about 2 ulp; results below 2^-126 flush
// to zero). exp2f wraps the same instruction in denormal fix-ups that made
// the 16-bit paths instruction-bound (bench/NOTES.md).
__device__ __forceinline__ float duet_ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Byte k of the result 0xff where the top bit of byte ((sel >> 4k) & 3) of
// w is set, else 0x00: one prmt.b32 whose selector nibbles ask for the
// byte's sign replicated (PTX ISA, "prmt", default mode: bit 3 of a
// nibble). Every architecture has it.
__device__ __forceinline__ unsigned duet_byte_signs(unsigned w, unsigned sel) {
  unsigned r;
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "r"(sel | 0x8888u));
  return r;
}

// A 16-byte load whose line should outlast others in L2 until its last use
// (an L2::evict_last cache policy: PTX ISA, "createpolicy" and "ld" with
// .L2::cache_hint, sm_80+); a plain load before sm_80.
__device__ __forceinline__ unsigned long long duet_policy_evict_last() {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint4 duet_load_keep(const uint4* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint4 v;
  asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(duet_policy_evict_last()));
  return v;
#else
  return *p;
#endif
}

// Two floats rounded to bfloat16 or float16 in one 32-bit word, `lo` in the
// low half: one cvt.rn.{bf16x2,f16x2}.f32 (PTX ISA, "cvt", sm_80+).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define DUET_DEVICE_CVT_RN16 1
__device__ __forceinline__ unsigned duet_cvt_rn_bf16x2(float lo, float hi) {
  unsigned w;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}
__device__ __forceinline__ unsigned duet_cvt_rn_f16x2(float lo, float hi) {
  unsigned w;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}
// The larger of each pair of bfloat16 or float16 halves of two words (PTX
// ISA, "max", .bf16x2 and .f16x2, sm_80+): a NaN half gives the other.
__device__ __forceinline__ unsigned duet_max_bf16x2(unsigned a, unsigned b) {
  unsigned r;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ unsigned duet_max_f16x2(unsigned a, unsigned b) {
  unsigned r;
  asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
#else
#define DUET_DEVICE_CVT_RN16 0
#endif  // __CUDA_ARCH__ >= 800

// Copies from global to shared memory that do not pass through registers,
// on sm_80 and later (PTX ISA, "cp.async", "cp.async.commit_group",
// "cp.async.wait_group"): 16 bytes cached in L2 only (.cg), 8 bytes (.ca,
// the only form of that size); the end of a group of this thread's copies;
// the wait until at most N of its groups are pending (wait_group N), or
// none (wait_all). A copy's shared-memory write is visible to this thread
// once a wait covers it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define DUET_DEVICE_CP_ASYNC 1
__device__ __forceinline__ unsigned duet_smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void duet_cp_async16(void* smem_dst, const void* global_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(duet_smem_address(smem_dst)), "l"(global_src)
               : "memory");
}
__device__ __forceinline__ void duet_cp_async8(void* smem_dst, const void* global_src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(duet_smem_address(smem_dst)), "l"(global_src)
               : "memory");
}
__device__ __forceinline__ void duet_cp_async4(void* smem_dst, const void* global_src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(duet_smem_address(smem_dst)), "l"(global_src)
               : "memory");
}
// A 16-byte copy where `full` holds; otherwise nothing is read and the
// slot gets 16 zero bytes (src-size 0), so that a loop issues its copies
// with no branch around them. `global_src` must be a valid address either
// way.
__device__ __forceinline__ void duet_cp_async16_or_zero(void* smem_dst, const void* global_src, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(duet_smem_address(smem_dst)), "l"(global_src),
               "r"(full ? 16 : 0)
               : "memory");
}
// A 16-byte copy under an L2 cache policy (PTX ISA, "cp.async" with
// .L2::cache_hint): evict_first for a line read for the last time,
// duet_policy_evict_last for a single read, as duet_load_keep's.
__device__ __forceinline__ unsigned long long duet_policy_evict_first() {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ void duet_cp_async16_hinted(void* smem_dst, const void* global_src,
                                                       unsigned long long policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(duet_smem_address(smem_dst)),
               "l"(global_src), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void duet_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void duet_cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void duet_cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
#else
#define DUET_DEVICE_CP_ASYNC 0
#endif  // __CUDA_ARCH__ >= 800

// Device code may use thread-block clusters and distributed shared memory
// (cooperative_groups::this_cluster) on sm_90 and later.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DUET_DEVICE_CLUSTERS 1
#else
#define DUET_DEVICE_CLUSTERS 0
#endif

// Device code compiled for sm_90 or later, for entries whose register
// budget was fitted there (ptxas allocates differently for sm_80).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DUET_DEVICE_SM90 1
#else
#define DUET_DEVICE_SM90 0
#endif

// Cluster-scope signalling on sm_90+ (PTX ISA, "mbarrier", "mapa",
// "st.async"): a store into another block's shared memory whose bytes
// complete a transaction-counting barrier there. An mbarrier is a 64-bit
// word in shared memory.
#if DUET_DEVICE_CLUSTERS
__device__ __forceinline__ void duet_mbarrier_init(unsigned long long* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(duet_smem_address(bar)), "r"(arrivals) : "memory");
}
// Makes initialised barriers visible to the rest of the cluster.
__device__ __forceinline__ void duet_mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// The arrival that completes a phase once `bytes` more have been counted.
__device__ __forceinline__ void duet_mbarrier_expect(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(duet_smem_address(bar)), "r"(bytes)
               : "memory");
}
// The address of this block's shared variable `p` in block `rank` of the
// cluster (mapa), and an 8-byte store there that counts its bytes on that
// block's barrier `bar` (st.async: no cluster barrier, no fence).
__device__ __forceinline__ unsigned duet_cluster_address(const void* p, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(duet_smem_address(p)), "r"(rank));
  return r;
}
__device__ __forceinline__ void duet_store_async(float2* dst, float2 v, unsigned long long* bar, unsigned rank) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(
                   duet_cluster_address(dst, rank)),
               "f"(v.x), "f"(v.y), "r"(duet_cluster_address(bar, rank))
               : "memory");
}
// The same for a 16-byte value.
__device__ __forceinline__ void duet_store_async(float4* dst, float4 v, unsigned long long* bar, unsigned rank) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                   duet_cluster_address(dst, rank)),
               "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(duet_cluster_address(bar, rank))
               : "memory");
}
// Whether the barrier's phase of the given parity has completed, acquiring
// at cluster scope what other blocks stored (st.async completes with
// release at cluster scope). The thread may be suspended a while inside.
__device__ __forceinline__ bool duet_mbarrier_try_wait_cluster(unsigned long long* bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, "
      "p;\n}"
      : "=r"(done)
      : "r"(duet_smem_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
#endif  // DUET_DEVICE_CLUSTERS
#endif  // __CUDACC__
