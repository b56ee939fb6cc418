// Vendor-neutral description of one device, filled by a backend from the
// vendor runtime (cudaGetDeviceProperties / hipGetDeviceProperties plus
// *DeviceGetAttribute), by the host backend from the OS, or from a property
// file for a device that is not present (tools/deviceinfo/devices/*.json).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include "duet/export.h"

namespace duet {

enum class Vendor { host, nvidia, amd };
enum class BackendKind { host, cuda, hip };

DUET_API std::string_view to_string(Vendor v) noexcept;
DUET_API std::string_view to_string(BackendKind b) noexcept;
// Parse the names to_string produces; throws duet::Error(invalid_argument).
DUET_API Vendor vendor_from_string(std::string_view s);
DUET_API BackendKind backend_from_string(std::string_view s);

// Where an AMD device's `regs_per_sm` comes from. Older ROCm reports 65536
// registers per CU on CDNA2/3 (the 256-entry VGPR file of 4 SIMDs x 64
// lanes); ROCm 7 reports 131072 on gfx942 (the unified 512-entry
// VGPR+AccVGPR pool). The tutorial model doubles only the former.
enum class RegisterPoolReport { not_applicable, arch_vgprs_only, unified_pool };
DUET_API std::string_view to_string(RegisterPoolReport r) noexcept;
DUET_API RegisterPoolReport register_pool_report_from_string(std::string_view s);

struct DeviceProps {
  // Identity
  std::string name;                 // "NVIDIA H200", "AMD Instinct MI300X"
  Vendor vendor = Vendor::host;
  BackendKind backend = BackendKind::host;
  std::string arch;                 // "sm_90", "gfx90a:sramecc+:xnack-", "x86_64"
  std::string family;               // "Hopper", "CDNA3", "RDNA3", "CPU"
  int cc_major = 0;                 // NVIDIA compute capability; AMD gfx major
  int cc_minor = 0;
  int ordinal = 0;                  // index within its backend

  // Compute units and their limits
  int sm_count = 0;                 // SMs (NVIDIA), CUs (AMD), cores (host)
  int warp_size = 0;                // 32 on NVIDIA and RDNA, 64 on CDNA, SIMD lanes of float on host
  int regs_per_sm = 0;              // 32-bit registers per SM/CU, as the runtime reports it
  int regs_per_block = 0;
  int max_threads_per_block = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  RegisterPoolReport register_pool = RegisterPoolReport::not_applicable;
  // All blocks of a grid that fits can be made resident at once
  // (cudaDeviceProp::cooperativeLaunch).
  bool cooperative_launch = false;
  // Thread-block clusters can be launched (cudaDevAttrClusterLaunch: compute
  // capability 9.0+; no AMD device). cluster_row needs them.
  bool cluster_launch = false;

  // Shared memory (LDS on AMD), bytes
  std::int64_t smem_per_sm = 0;
  std::int64_t smem_per_block = 0;          // default per-block limit (48 KiB on NVIDIA)
  std::int64_t smem_per_block_optin = 0;    // after cudaFuncSetAttribute(MaxDynamicSharedMemorySize)
  std::int64_t smem_reserved_per_block = 0; // reserved by the driver for each resident block

  // Memory system
  std::int64_t l2_bytes = 0;
  std::int64_t memory_bytes = 0;
  int memory_bus_width_bits = 0;
  int memory_clock_khz = 0;         // as the runtime reports it (DDR: two transfers per clock)

  // Versions (encoded as the vendor does: 13000 = 13.0); 0 where unknown
  int driver_version = 0;
  int runtime_version = 0;

  // Host backend only
  int simd_width_bytes = 0;
  std::int64_t l1d_bytes = 0;
  std::int64_t l3_bytes = 0;

  // Where the values come from (a property file names its sources).
  std::string source;

  // Peak DRAM bandwidth the bus width and clock imply, GB/s (1e9 B/s):
  // 2 transfers per clock * clock * bus width / 8. 0 where unknown.
  DUET_API double peak_bandwidth_gbps() const noexcept;
  bool is_gpu() const noexcept { return backend != BackendKind::host; }
};

// Name of the architecture family for an NVIDIA compute capability
// ("Ampere", "Hopper", ...) or an AMD gfx name ("CDNA2", "RDNA2", ...).
DUET_API std::string nvidia_family(int cc_major, int cc_minor);
DUET_API std::string amd_family(std::string_view gfx_arch);

// True for gfx908/gfx90a/gfx940/gfx941/gfx942 and later CDNA parts, whose
// VGPRs and AccVGPRs form one pool per lane.
DUET_API bool amd_is_cdna(std::string_view gfx_arch) noexcept;

// "gfx90a:sramecc+:xnack-" -> "gfx90a"
DUET_API std::string_view amd_base_arch(std::string_view gfx_arch) noexcept;

}  // namespace duet
