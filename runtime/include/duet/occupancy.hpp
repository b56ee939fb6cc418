// Occupancy models: how many blocks of a kernel fit on one SM/CU at once.
//
//  * tutorial_occupancy: the Triton fused-softmax tutorial's formula, with
//    its holes fixed (no division by zero, defined RDNA pool, no double count
//    where ROCm already reports the unified CDNA pool).
//  * exact_occupancy: allocation-granular models, NVIDIA as the toolkit's
//    cuda_occupancy.h computes it, AMD as the HIP runtime does.
//
// Both are pure functions of their inputs: no GPU is needed to evaluate them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "duet/export.h"
#include "duet/device_props.hpp"

namespace duet {

// What a compiled kernel needs per thread / per block. On a live device it
// comes from cudaFuncGetAttributes / hipFuncGetAttributes; without one, from
// the compiler's resource report recorded at build time.
struct KernelAttributes {
  std::string name;
  int regs_per_thread = 0;              // NVIDIA registers; AMD arch VGPRs
  int agprs_per_thread = 0;             // AMD AccVGPRs (CDNA); 0 elsewhere
  int sgprs_per_wave = 0;               // AMD scalar registers; 0 on NVIDIA
  std::int64_t static_smem_bytes = 0;   // __shared__ arrays (LDS on AMD)
  std::int64_t local_bytes_per_thread = 0;  // spills / scratch
  int max_threads_per_block = 1024;     // from __launch_bounds__
  std::string source;                   // "cudaFuncGetAttributes", "ptxas", "amdgpu remark", ...
};

struct LaunchShape {
  int threads_per_block = 0;
  std::int64_t dynamic_smem_bytes = 0;
};

enum class Limiter { none, registers, shared_memory, warps, blocks };
DUET_API std::string_view to_string(Limiter l) noexcept;

struct Occupancy {
  int blocks_per_sm = 0;        // min of the per-resource limits below
  Limiter limiter = Limiter::none;
  // Blocks per SM each resource alone would allow; INT32_MAX-free: a
  // resource the kernel does not use is reported as the block limit.
  int by_registers = 0;
  int by_shared_memory = 0;
  int by_warps = 0;
  int by_blocks = 0;
  // Which rule applied, in words ("CDNA unified pool: regs doubled", ...).
  std::string note;
};

// Throws duet::Error(invalid_argument) on hostile input: non-positive or
// absurd device properties, a block larger than the device or the kernel
// allows, shared memory beyond the opt-in limit, negative sizes.
DUET_API Occupancy tutorial_occupancy(const DeviceProps& dev, const KernelAttributes& k,
                                      const LaunchShape& launch);
DUET_API Occupancy exact_occupancy(const DeviceProps& dev, const KernelAttributes& k,
                                   const LaunchShape& launch);

// The two exact models, callable directly (exact_occupancy dispatches on
// dev.vendor; the host backend has occupancy 1 per core).
DUET_API Occupancy nvidia_exact_occupancy(const DeviceProps& dev, const KernelAttributes& k,
                                          const LaunchShape& launch);
DUET_API Occupancy amd_exact_occupancy(const DeviceProps& dev, const KernelAttributes& k,
                                       const LaunchShape& launch);

}  // namespace duet
