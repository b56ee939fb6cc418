// The CUDA side of vendor.h (include that, not this): the runtime headers,
// the launch helpers HIP lacks under the same name, and the device facts and
// primitives the kernels take from the vendor. The inline PTX they use is in
// hopper_ptx.h.
#pragma once

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
// A launch whose blocks the device must hold all at once, or refuse
// (cudaErrorCooperativeLaunchTooLarge): their blocks may wait on each
// other (CUDA Runtime API, cudaLaunchAttributeCooperative; valid for
// launches and graph nodes).
template <class... Args>
cudaError_t launch_cooperative(void (*fn)(Args...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                               Args... args) {
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
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
// Cache hints for split_stream: its first read keeps the line in L2 until the
// re-read (duet_load_keep, hopper_ptx.h); ld.global.cs / st.global.cs are
// evict-first, for data used once more at most (CUDA C Programming Guide,
// "Load Functions Using Cache Hints").
#define DUET_LOAD_KEEP(p) duet_load_keep(p)
#define DUET_LOAD_LAST_USE(p) __ldcs(p)
#define DUET_STORE_STREAMING(p, v) __stcs((p), (v))
// One store instruction for a pack's words (uint4 or uint2), with the
// default write-back policy: a pack built element by element and stored
// through its type can come out as one store an element (bench/NOTES.md,
// v42).
#define DUET_STORE_WORDS(p, v) __stwb((p), (v))
// A kernel's registers a thread capped at `regs`, where __launch_bounds__'s
// blocks an SM cannot name the cap (56 a thread for blocks of up to 512
// threads): __maxnreg__ (CUDA 12.4+, CUDA C Programming Guide, "Maximum
// Number of Registers per Thread"). HIP keeps __launch_bounds__(threads,
// min_blocks).
#define DUET_MAX_REGISTERS(threads, min_blocks, regs) __maxnreg__(regs)
// Every NVIDIA architecture has 32-thread warps (CUDA C Programming Guide,
// "Compute Capabilities" table: warpSize = 32 for all compute capabilities).
#define DUET_DEVICE_WARP_SIZE 32
// 2^x on the special-function unit (duet_ex2_approx, hopper_ptx.h).
#define DUET_FAST_EXP2(x) duet_ex2_approx(x)
