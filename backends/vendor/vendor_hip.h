// The HIP side of vendor.h (include that, not this): the CUDA names duet
// uses mapped onto HIP's, as ggml-cuda's vendors/hip.h does, and the device
// facts and primitives the kernels take from the vendor.
#pragma once

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
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
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
// A launch whose blocks the device must hold all at once, or refuse.
template <class... Args>
hipError_t launch_cooperative(void (*fn)(Args...), dim3 grid, dim3 block, size_t smem, hipStream_t stream,
                              Args... args) {
  void* argv[] = {static_cast<void*>(&args)...};
  return hipLaunchCooperativeKernel(reinterpret_cast<const void*>(fn), grid, block, argv,
                                    static_cast<unsigned>(smem), stream);
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
// A kernel's bounds where CUDA caps its registers a thread
// (vendor_cuda.h): the threads and blocks an SM.
#define DUET_MAX_REGISTERS(threads, min_blocks, regs) __launch_bounds__(threads, min_blocks)
#define DUET_DEVICE_SM90 0
// No asynchronous global-to-shared copy: storage.cuh's copy_to_shared loads
// and stores.
#define DUET_DEVICE_CP_ASYNC 0
// 2^x: exp2f is one v_exp_f32 on AMD.
#define DUET_FAST_EXP2(x) exp2f(x)
// No paired float -> 16-bit conversion instruction: storage.cuh rounds each
// value by hand.
#define DUET_DEVICE_CVT_RN16 0
// 16 bytes as one native vector register value: clang keeps arrays of these
// in registers where arrays of 16-byte structs (copied by memcpy) go to
// scratch (block_row_smem's staging, kernels/common/storage.cuh).
#if defined(__clang__)  // hipcc; the host compiler reads this header for HIP's structs alone (tests)
typedef unsigned duet_raw16_t __attribute__((ext_vector_type(4)));
#endif
#define DUET_RAW16 duet_raw16_t
// Word i (0..3) of a DUET_RAW16, and one made of four words.
#define DUET_RAW16_WORD(r, i) (r)[i]
#define DUET_RAW16_MAKE(a, b, c, d) duet_raw16_t{(a), (b), (c), (d)}
// Byte k of the result 0xff where the top bit of byte ((sel >> 4k) & 3) of
// w is set, else 0x00 (hopper_ptx.h's prmt on NVIDIA; v_perm_b32 replicates
// the signs of odd bytes only, so byte by byte here).
#if defined(__clang__)
__device__ __forceinline__ unsigned duet_byte_signs(unsigned w, unsigned sel) {
  unsigned r = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) r |= ((w >> (8 * ((sel >> (4 * k)) & 3u) + 7)) & 1u) * (0xffu << (8 * k));
  return r;
}
#endif
// Cache hints for split_stream. Its first read has no keep-in-L2 hint here (a
// plain load); its re-read is the last use of the input, and its output is
// not read again by the kernel (nontemporal: the "slc" hint on CDNA).
#define DUET_LOAD_KEEP(p) (*(p))
#define DUET_LOAD_LAST_USE(p) __builtin_nontemporal_load(p)
#define DUET_STORE_STREAMING(p, v) __builtin_nontemporal_store((v), (p))
#define DUET_STORE_WORDS(p, v) (*(p) = (v))
