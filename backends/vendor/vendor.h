// The one place duet includes a vendor runtime header.
//
// Everything else in backends/ and kernels/ is written in CUDA spelling, so
// hipify-perl translates it mechanically; for the HIP build this header maps
// the CUDA names duet uses onto HIP's (as ggml-cuda's vendors/hip.h does),
// so hipcc also compiles the same files directly.
//
// Exactly one of DUET_VENDOR_CUDA / DUET_VENDOR_HIP is defined by the build,
// and DUET_NS names the namespace the backend's symbols live in (duet::cuda
// or duet::hip), so one process can link both backends.
#pragma once

#if defined(DUET_VENDOR_CUDA) == defined(DUET_VENDOR_HIP)
#error "define exactly one of DUET_VENDOR_CUDA and DUET_VENDOR_HIP"
#endif

#if defined(DUET_VENDOR_HIP)  // ------------------------------------ HIP
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetLastError hipGetLastError
#define cudaPeekAtLastError hipPeekAtLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDeviceAttr hipDeviceAttribute_t
#define cudaDevAttrMemoryClockRate hipDeviceAttributeMemoryClockRate
#define cudaDevAttrMaxRegistersPerMultiprocessor hipDeviceAttributeMaxRegistersPerMultiprocessor
#define cudaDevAttrMaxSharedMemoryPerMultiprocessor hipDeviceAttributeMaxSharedMemoryPerMultiprocessor
#define cudaDevAttrMaxSharedMemoryPerBlockOptin hipDeviceAttributeSharedMemPerBlockOptin
#define cudaDevAttrReservedSharedMemoryPerBlock hipDeviceAttributeReservedSharedMemPerBlock
#define cudaDevAttrMaxBlocksPerMultiprocessor hipDeviceAttributeMaxBlocksPerMultiProcessor
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define cudaStream_t hipStream_t
#define cudaStreamCreate hipStreamCreate
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemset hipMemset
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemGetInfo hipMemGetInfo
#define cudaPointerAttributes hipPointerAttribute_t
#define cudaPointerGetAttributes hipPointerGetAttributes
#define cudaMemoryTypeDevice hipMemoryTypeDevice
#define cudaMemoryTypeHost hipMemoryTypeHost
// HIP 5.2 has only the mask-less shuffles; its wavefront is 32 or 64 lanes.
#define __shfl_xor_sync(mask, var, lane_mask, width) __shfl_xor(var, lane_mask, width)

namespace duet::vendor {
inline constexpr const char* kName = "hip";
// hipPointerAttribute_t names the field memoryType where CUDA says type.
inline auto memory_type(const hipPointerAttribute_t& a) { return a.memoryType; }
// HIP has no thread-block clusters: the planner never picks cluster_row for
// an AMD device (DeviceProps::cluster_launch is false), and a launch that
// asked for one anyway gets this error rather than a kernel without its
// cluster.
template <class... Args>
hipError_t launch_cluster(void (*)(Args...), dim3, dim3, size_t, hipStream_t, unsigned, Args...) {
  return hipErrorNotSupported;
}
inline hipError_t max_active_clusters(int* clusters, const void*, dim3, size_t, unsigned) {
  *clusters = 0;
  return hipSuccess;
}
}  // namespace duet::vendor
// HIP's warpSize is a constexpr fixed by the compiler per target
// (__AMDGCN_WAVEFRONT_SIZE): 64 on GCN/CDNA, 32 on RDNA.
#define DUET_DEVICE_WARP_SIZE warpSize
#define DUET_DEVICE_CLUSTERS 0
// 16 bytes as one native vector register value: clang keeps arrays of these
// in registers where arrays of 16-byte structs (copied by memcpy) went to
// scratch (block_row_smem's staging, kernels/softmax_kernels.cuh).
#if defined(__clang__)  // hipcc; the host compiler reads this header for HIP's structs alone (tests)
typedef unsigned duet_raw16_t __attribute__((ext_vector_type(4)));
#endif
#define DUET_RAW16 duet_raw16_t
// Word i (0..3) of a DUET_RAW16, and one made of four words.
#define DUET_RAW16_WORD(r, i) (r)[i]
#define DUET_RAW16_MAKE(a, b, c, d) duet_raw16_t{(a), (b), (c), (d)}
// Cache hints for split_stream. Its first read has no keep-in-L2 hint here (a
// plain load); its re-read is the last use of the input, and its output is
// not read again by the kernel (nontemporal: the "slc" hint on CDNA).
#define DUET_LOAD_KEEP(p) (*(p))
#define DUET_LOAD_LAST_USE(p) __builtin_nontemporal_load(p)
#define DUET_STORE_STREAMING(p, v) __builtin_nontemporal_store((v), (p))

#else  // ------------------------------------------------------------ CUDA
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>

namespace duet::vendor {
inline constexpr const char* kName = "cuda";
inline auto memory_type(const cudaPointerAttributes& a) { return a.type; }
// Launch configuration whose blocks form 1-D clusters of `cluster` blocks
// (CUDA 12+, sm_90+: CUDA C Programming Guide, "Thread Block Clusters"; the
// cluster size is a launch attribute so one kernel serves every size).
// `attr` must outlive the configuration.
inline cudaLaunchConfig_t cluster_config(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, unsigned cluster,
                                         cudaLaunchAttribute& attr) {
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  return config;
}
// Clusters past the portable 8 blocks need the kernel's opt-in (CUDA C
// Programming Guide, "Thread Block Clusters"; 16 on Hopper).
inline cudaError_t allow_cluster_size(const void* fn, unsigned cluster) {
  return cluster > 8 ? cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) : cudaSuccess;
}
template <class... Args>
cudaError_t launch_cluster(void (*fn)(Args...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                           unsigned cluster, Args... args) {
  if (const cudaError_t e = allow_cluster_size(reinterpret_cast<const void*>(fn), cluster); e != cudaSuccess) return e;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config = cluster_config(grid, block, smem, stream, cluster, attr);
  return cudaLaunchKernelEx(&config, fn, args...);
}
// Clusters of that shape the device can hold at once (0: none fits, or a
// size the device refuses).
inline cudaError_t max_active_clusters(int* clusters, const void* fn, dim3 block, size_t smem, unsigned cluster) {
  if (allow_cluster_size(fn, cluster) != cudaSuccess) {
    (void)cudaGetLastError();
    *clusters = 0;
    return cudaSuccess;
  }
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config = cluster_config(dim3(cluster), block, smem, nullptr, cluster, attr);
  return cudaOccupancyMaxActiveClusters(clusters, fn, &config);
}
}  // namespace duet::vendor
#define DUET_RAW16 uint4
// Word i (0..3) of a DUET_RAW16, and one made of four words.
#define DUET_RAW16_WORD(r, i) ((i) == 0 ? (r).x : (i) == 1 ? (r).y : (i) == 2 ? (r).z : (r).w)
#define DUET_RAW16_MAKE(a, b, c, d) make_uint4((a), (b), (c), (d))
// A 16-byte load whose line should outlast others in L2 until its last use
// (an L2::evict_last cache policy: PTX ISA, "createpolicy" and "ld" with
// .L2::cache_hint, sm_80+); a plain load before sm_80.
__device__ __forceinline__ uint4 duet_load_keep(const uint4* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  uint4 v;
  asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
#else
  return *p;
#endif
}
#define DUET_LOAD_KEEP(p) duet_load_keep(p)
// ld.global.cs / st.global.cs: evict-first, for data used once more at most
// (CUDA C Programming Guide, "Load Functions Using Cache Hints").
#define DUET_LOAD_LAST_USE(p) __ldcs(p)
#define DUET_STORE_STREAMING(p, v) __stcs((p), (v))
// Every NVIDIA architecture has 32-thread warps (CUDA C Programming Guide,
// "Compute Capabilities" table: warpSize = 32 for all compute capabilities).
#define DUET_DEVICE_WARP_SIZE 32
// Device code may use thread-block clusters and distributed shared memory
// (cooperative_groups::this_cluster) on sm_90 and later.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DUET_DEVICE_CLUSTERS 1
#else
#define DUET_DEVICE_CLUSTERS 0
#endif

// Cluster-scope signalling on sm_90+ (PTX ISA, "mbarrier", "mapa",
// "st.async"), for cluster_row's exchange of (max, sum) pairs: a store into
// another block's shared memory whose bytes complete a transaction-counting
// barrier there. An mbarrier is a 64-bit word in shared memory.
#if DUET_DEVICE_CLUSTERS
__device__ __forceinline__ unsigned duet_smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
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
#endif
#endif

// Full shuffle mask, wide enough for a 64-lane wavefront (ignored on HIP).
#define DUET_FULL_MASK 0xffffffffu
