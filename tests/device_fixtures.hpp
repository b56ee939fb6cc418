// Device properties of real GPUs, built by hand for the CPU occupancy tests
// (values as cudaGetDeviceProperties / hipGetDeviceProperties report them;
// the property files in tools/deviceinfo/devices/ name their sources).
#pragma once

#include <cstdint>
#include <string>

#include "duet/device_props.hpp"

namespace duet::fixtures {

inline DeviceProps nvidia_gpu(const char* name, int major, int minor, int sms, std::int64_t smem_sm,
                              std::int64_t optin, std::int64_t reserved, int threads_sm, int blocks_sm) {
  DeviceProps d;
  d.name = name;
  d.vendor = Vendor::nvidia;
  d.backend = BackendKind::cuda;
  d.arch = "sm_" + std::to_string(major) + std::to_string(minor);
  d.family = nvidia_family(major, minor);
  d.cc_major = major;
  d.cc_minor = minor;
  d.sm_count = sms;
  d.warp_size = 32;
  d.regs_per_sm = 65536;
  d.regs_per_block = 65536;
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = threads_sm;
  d.max_blocks_per_sm = blocks_sm;
  d.smem_per_sm = smem_sm;
  d.smem_per_block = 49152;
  d.smem_per_block_optin = optin;
  d.smem_reserved_per_block = reserved;
  return d;
}

inline DeviceProps amd_gpu(const char* name, const char* arch, int cus, int warp, int regs_per_sm,
                           RegisterPoolReport pool, std::int64_t lds_sm) {
  DeviceProps d;
  d.name = name;
  d.vendor = Vendor::amd;
  d.backend = BackendKind::hip;
  d.arch = arch;
  d.family = amd_family(arch);
  d.sm_count = cus;
  d.warp_size = warp;
  d.regs_per_sm = regs_per_sm;
  d.regs_per_block = regs_per_sm;
  d.register_pool = pool;
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = 2048;
  d.max_blocks_per_sm = 32;
  d.smem_per_sm = lds_sm;
  d.smem_per_block = 65536;
  d.smem_per_block_optin = 0;  // HIP reports 0
  d.smem_reserved_per_block = 0;
  return d;
}

// H100 SXM (sm_90).
inline DeviceProps h100() { return nvidia_gpu("NVIDIA H100", 9, 0, 132, 233472, 232448, 1024, 2048, 32); }

// MI300X: gfx942, 304 CUs, wave64, 64 KiB LDS per CU. Older ROCm reports
// 65536 registers per CU (256 arch VGPRs x 4 SIMDs x 64 lanes); ROCm 7
// reports 131072 (the unified 512-entry pool).
inline DeviceProps mi300x() {
  return amd_gpu("AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 304, 64, 65536, RegisterPoolReport::arch_vgprs_only,
                 65536);
}

}  // namespace duet::fixtures
