// AMD exact occupancy: work-groups (blocks) of one kernel resident on one of
// the units HIP counts in multiProcessorCount (a CU on gfx9, a WGP on gfx10+
// in the default WGP mode), computed the way the HIP runtime computes
// hipOccupancyMaxActiveBlocksPerMultiprocessor
// (ROCm clr, hipamd/src/hip_platform.cpp,
// ihipOccupancyMaxActiveBlocksPerMultiprocessor), with the per-ISA register
// facts ROCclr reads from the ISA metadata (TotalNumVGPRs, VGPRAllocGranule,
// from LLVM's AMDGPUBaseInfo IsaInfo::getTotalNumVGPRs/getVGPRAllocGranule)
// and the SGPR budget set in ROCclr's rocdevice.cpp. Restated in our words:
//
//   waves per block  Wb = ceil(threads / wave size)
//   VGPRs per lane   v = k.regs_per_thread (arch VGPRs), a = k.agprs_per_thread
//                    used = align(v, 4) + a   on gfx90a/gfx94x/gfx950 when a > 0
//                                             (one unified file; AccVGPRs start
//                                             at a 4-aligned offset)
//                    used = max(v, a)         otherwise (gfx908 has two separate
//                                             256-entry files; no AGPRs elsewhere)
//                    (LLVM getTotalNumVGPRs(has90AInsts, NumAGPR, NumVGPR), the
//                    value a code object's .vgpr_count carries and HIP reads)
//   VGPR pool/granule per SIMD lane (wave32 values; halved for wave64 on gfx10+):
//                    gfx90a, gfx94x, gfx950 ......... 512 / 8
//                    other gfx9 (incl. gfx908), gfx8  256 / 4   (wave64 only)
//                    gfx10.1 (gfx101x) .............. 1024 / 8  (wave64: 512 / 4)
//                    gfx10.3+, gfx11, gfx12 ......... 1024 / 16 (wave64: 512 / 8)
//                    gfx1100/1101/1151/1200/1201 .... 1536 / 24 (wave64: 768 / 12)
//                    VGPR waves per SIMD = pool / align(used, granule)
//                    (a kernel with 0 VGPRs is not limited by them)
//   SGPRs            gfx8/gfx9: 800 per SIMD, waves = 800 / align(sgprs, 16);
//                    gfx10+: SGPRs are not shared between waves, no limit
//   waves per SIMD   at most 8 on gfx9 ("limited by SPI 32 per CU, hence 8 per
//                    SIMD": HIP applies it to gfx908 too, although LLVM lists 10
//                    there), 16 on gfx10+
//   SIMDs per unit   4: a gfx9 CU (CDNA/GCN); a gfx10+ WGP, two CUs of two
//                    SIMD32 each (clr doubles HSA's SIMDs per CU in WGP mode,
//                    rocdevice.cpp populateOCLDeviceConstants)
//   blocks by regs   = SIMDs x min(VGPR waves, SGPR waves) / Wb
//   blocks by waves  = min(SIMDs x max waves per SIMD, max_threads_per_sm / wave) / Wb
//   blocks by LDS    = LDS pool / (static + dynamic LDS), unlimited when 0; the
//                    pool is HIP's localMemSize_, the per-work-group LDS limit
//                    (64 KiB): min(dev.smem_per_sm, per-block limit). On CDNA that
//                    is the CU's whole LDS; on RDNA HIP counts 64 KiB per WGP
//                    (whose hardware holds 128 KiB). HIP does not round LDS
//                    to the hardware's 512 B allocation granule, nor do we.
//   blocks by slots  = dev.max_blocks_per_sm (HIP itself applies no such cap)
//   result           = min of the four.
//
// On RDNA this counts what HIP counts: 4 SIMD32 per WGP against the WGPs
// hipGetDeviceProperties reports (RX 7900 XTX: 48, of 96 CUs), so
// SMs x blocks per SM is the device's total.
//
// A block larger than the device allows makes HIP return 0 blocks; here it
// is invalid_argument (validated before any arithmetic). A kernel whose
// VGPRs can never fit is an error in HIP (hipErrorUnknown); here the VGPR
// counts are bounded by the 256 addressable registers of each kind, so that
// cannot happen.
#include <algorithm>
#include <cctype>
#include <string>

#include "duet/occupancy.hpp"
#include "occupancy_validate.hpp"

namespace duet {

using occupancy_detail::ceil_div;
using occupancy_detail::combine;
using occupancy_detail::fail;
using occupancy_detail::kUnlimited;
using occupancy_detail::Limit;
using occupancy_detail::round_up;

namespace {

std::string s(std::int64_t v) { return std::to_string(v); }

struct AmdArch {
  std::string name;           // "gfx942"
  int major = 0, minor = 0, stepping = 0;
  bool unified_agprs = false; // gfx90a/gfx94x/gfx950: one VGPR+AGPR file
  bool has_agprs = false;     // gfx908 and the above
  std::int64_t vgprs_per_simd = 0;  // per lane, for the wave size in use
  std::int64_t vgpr_granule = 0;
  std::int64_t sgprs_per_simd = 0;  // 0: SGPRs do not limit
  std::int64_t simds_per_unit = 0;
  std::int64_t max_waves_per_simd = 0;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

AmdArch amd_arch(const DeviceProps& dev) {
  const std::string_view base = amd_base_arch(dev.arch);
  auto bad_name = [&]() {
    fail("dev.arch '" + dev.arch + "' is not an AMD gfx target name (like gfx942 or gfx1100)");
  };
  if (base.size() < 6 || base.size() > 7 || base.substr(0, 3) != "gfx") bad_name();
  const std::string_view digits = base.substr(3);  // "942", "90a", "1100"
  // Major and minor digits are decimal, the stepping is hex ("90a").
  for (std::size_t i = 0; i < digits.size(); ++i)
    if (i + 1 < digits.size() ? !std::isdigit(static_cast<unsigned char>(digits[i]))
                              : hex_digit(digits[i]) < 0)
      bad_name();
  AmdArch a;
  a.name = std::string(base);
  if (digits.size() == 3) {
    a.major = hex_digit(digits[0]);
    a.minor = hex_digit(digits[1]);
    a.stepping = hex_digit(digits[2]);
  } else {
    a.major = hex_digit(digits[0]) * 10 + hex_digit(digits[1]);
    a.minor = hex_digit(digits[2]);
    a.stepping = hex_digit(digits[3]);
  }
  if (a.major < 8 || a.major > 12)
    throw Error(Status::unsupported, "occupancy: " + a.name +
                                         " (dev.arch) is outside the exact AMD model (gfx8 to gfx12)");

  const int wave = dev.warp_size;
  if (a.major <= 9 && wave != 64)
    fail("dev.warp_size must be 64 on " + a.name + " (GCN/CDNA run wave64 only), got " + s(wave));

  const bool gfx908 = a.name == "gfx908";
  // gfx90a and the gfx94x/gfx95x family carry LLVM's FeatureGFX90AInsts.
  a.unified_agprs = a.name == "gfx90a" || (a.major == 9 && a.minor >= 4);
  a.has_agprs = a.unified_agprs || gfx908;

  // Register file per SIMD lane and allocation granule (LLVM IsaInfo,
  // wave32 values where the ISA has both modes).
  const bool vgprs_1_5x = a.name == "gfx1100" || a.name == "gfx1101" || a.name == "gfx1151" ||
                          a.name == "gfx1200" || a.name == "gfx1201";
  const bool gfx10_3_plus = a.major >= 11 || (a.major == 10 && a.minor >= 3);
  if (a.unified_agprs) {
    a.vgprs_per_simd = 512, a.vgpr_granule = 8;
  } else if (a.major <= 9) {
    a.vgprs_per_simd = 256, a.vgpr_granule = 4;
  } else if (vgprs_1_5x) {
    a.vgprs_per_simd = 1536, a.vgpr_granule = 24;
  } else if (gfx10_3_plus) {
    a.vgprs_per_simd = 1024, a.vgpr_granule = 16;
  } else {
    a.vgprs_per_simd = 1024, a.vgpr_granule = 8;
  }
  if (a.major >= 10 && wave == 64) {  // ROCclr: wave64 on gfx10+ halves both
    a.vgprs_per_simd /= 2;
    a.vgpr_granule /= 2;
  }
  a.sgprs_per_simd = a.major <= 9 ? 800 : 0;
  a.simds_per_unit = 4;  // gfx9 CU, or gfx10+ WGP (2 CUs x 2 SIMD32)
  a.max_waves_per_simd = a.major <= 9 ? 8 : 16;
  return a;
}

}  // namespace

Occupancy amd_exact_occupancy(const DeviceProps& dev, const KernelAttributes& k,
                              const LaunchShape& launch) {
  if (dev.vendor != Vendor::amd)
    fail("amd_exact_occupancy needs an AMD device, dev.vendor is " +
         std::string(to_string(dev.vendor)));
  occupancy_detail::validate_gpu(dev, k, launch);
  const AmdArch a = amd_arch(dev);

  const std::int64_t wave = dev.warp_size;
  const std::int64_t Wb = ceil_div(launch.threads_per_block, wave);
  std::string note = "exact/AMD " + a.name + " wave" + s(wave) + ": " + s(Wb) +
                     " waves per block, " + s(a.simds_per_unit) + (a.major <= 9 ? " SIMDs per CU" : " SIMD32 per WGP");

  // VGPRs (arch + AccVGPRs).
  const std::int64_t v = k.regs_per_thread, ag = k.agprs_per_thread;
  if (v > 256) fail("k.regs_per_thread " + s(v) + " exceeds the 256 addressable VGPRs of " + a.name);
  if (ag > 0 && !a.has_agprs)
    fail("k.agprs_per_thread " + s(ag) + " but " + a.name + " has no AccVGPRs");
  if (ag > 256)
    fail("k.agprs_per_thread " + s(ag) + " exceeds the 256 addressable AccVGPRs of " + a.name);
  const std::int64_t used = (a.unified_agprs && ag > 0) ? round_up(v, 4) + ag : std::max(v, ag);
  std::int64_t gpr_waves = kUnlimited;
  if (used > 0) {
    const std::int64_t alloc = round_up(used, a.vgpr_granule);
    gpr_waves = a.vgprs_per_simd / alloc;
    note += "; VGPRs " + s(used) + (a.unified_agprs && ag > 0 ? " (align(" + s(v) + ",4)+" + s(ag) + " AGPRs)" : "") +
            " -> " + s(alloc) + " (granule " + s(a.vgpr_granule) + "), " + s(a.vgprs_per_simd) + "/" +
            s(alloc) + " = " + s(gpr_waves) + " waves/SIMD";
  } else {
    note += "; 0 VGPRs: not limited by VGPRs";
  }
  if (a.sgprs_per_simd > 0 && k.sgprs_per_wave > 0) {
    const std::int64_t alloc = round_up(k.sgprs_per_wave, 16);
    const std::int64_t sgpr_waves = a.sgprs_per_simd / alloc;
    note += "; SGPRs " + s(k.sgprs_per_wave) + " -> " + s(alloc) + ", " + s(a.sgprs_per_simd) +
            "/" + s(alloc) + " = " + s(sgpr_waves) + " waves/SIMD";
    gpr_waves = std::min(gpr_waves, sgpr_waves);
  }
  Limit regs;
  if (gpr_waves != kUnlimited) regs.value = a.simds_per_unit * gpr_waves / Wb;

  // Wave slots: per-SIMD maximum, and the CU's thread limit as reported.
  const std::int64_t slot_waves =
      std::min(a.simds_per_unit * a.max_waves_per_simd, dev.max_threads_per_sm / wave);
  const Limit warps{slot_waves / Wb};
  note += "; wave slots min(" + s(a.simds_per_unit) + "x" + s(a.max_waves_per_simd) + ", " +
          s(dev.max_threads_per_sm) + "/" + s(wave) + ") = " + s(slot_waves);

  // LDS.
  const std::int64_t lds = k.static_smem_bytes + launch.dynamic_smem_bytes;
  const std::int64_t lds_pool = std::min(dev.smem_per_sm, occupancy_detail::smem_block_limit(dev));
  Limit smem;
  if (lds > 0) {
    smem.value = lds_pool / lds;
    note += "; LDS " + s(lds_pool) + "/" + s(lds) + " = " + s(smem.value);
  } else {
    note += "; no LDS";
  }

  // Block slots. hipGetDeviceProperties derives maxBlocksPerMultiProcessor
  // as maxThreadsPerCU / maxWorkGroupSize (hip_device.cpp): 2048/1024 = 2 on
  // CDNA, not a residency limit, and HIP's own occupancy function applies no
  // block cap. Such a derived value is replaced by the CU's wave slots.
  const bool derived = std::int64_t{dev.max_blocks_per_sm} * dev.max_threads_per_block == dev.max_threads_per_sm;
  const int block_cap = derived ? dev.max_threads_per_sm / dev.warp_size : dev.max_blocks_per_sm;
  const Limit blocks{block_cap};
  note += "; blocks " + s(block_cap) + (derived ? " (wave slots: the reported max_blocks_per_sm is HIP's derived value)" : "");
  Occupancy o = combine(regs, smem, warps, blocks, std::move(note));
  return o;
}

}  // namespace duet
