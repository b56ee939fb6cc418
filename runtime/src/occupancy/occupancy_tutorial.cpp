// The Triton fused-softmax tutorial's occupancy formula (python/tutorials/
// 02-fused-softmax.py, "Compute Kernel Occupancy"), with its holes fixed, plus
// to_string(Limiter) and the exact_occupancy dispatcher.
//
// The tutorial, in its own terms:
//   NVIDIA: occupancy = NUM_REGS // (n_regs * WARP_SIZE * num_warps)
//   AMD:    NUM_GPRS = NUM_REGS, doubled on CDNA ("VGPRs are allocated out of
//           two pools: regular VGPRs and accumulation VGPRs ... A wave may
//           have up to 512 total VGPRs", CDNA3 ISA section 3.6.4)
//           max_num_waves = MAX_NUM_THREADS // WARP_SIZE
//           occupancy = min(NUM_GPRS // WARP_SIZE // n_regs, max_num_waves) // num_warps
//   both:   occupancy = min(occupancy, SIZE_SMEM // size_smem)
//
// Holes fixed here:
//   * size_smem == 0 divides by zero in the tutorial: the cap is skipped.
//   * n_regs == 0 divides by zero: treated as 1 (said in the note).
//   * NUM_GPRS is undefined for non-CDNA AMD (RDNA, GCN): no doubling.
//   * ROCm 7 already reports the unified 512-entry pool on gfx942 (131072
//     per CU, dev.register_pool == unified_pool): no doubling, which would
//     count the AccVGPRs twice.
//
// Inputs: NUM_REGS = dev.regs_per_sm, SIZE_SMEM = dev.smem_per_sm,
// MAX_NUM_THREADS = dev.max_threads_per_sm, n_regs = k.regs_per_thread,
// size_smem = static + dynamic shared memory (no driver reservation),
// num_warps = ceil(threads_per_block / warp_size). (Triton's own NVIDIA
// driver fills NUM_REGS from MAX_REGISTERS_PER_BLOCK and SIZE_SMEM from
// MAX_SHARED_MEMORY_PER_BLOCK_OPTIN; the formula budgets one SM, so the
// per-SM values are the ones it means. On A100/H100 regs per block == regs
// per SM == 65536.)
//
// The tutorial caps by neither the SM's warp slots (NVIDIA) nor its block
// slots (both vendors): by_warps (NVIDIA) and by_blocks are recorded for
// information and do not cap blocks_per_sm.
#include <algorithm>
#include <string>

#include "duet/occupancy.hpp"
#include "occupancy_validate.hpp"

namespace duet {

using occupancy_detail::ceil_div;
using occupancy_detail::combine;
using occupancy_detail::kUnlimited;
using occupancy_detail::Limit;

std::string_view to_string(Limiter l) noexcept {
  switch (l) {
    case Limiter::none: return "none";
    case Limiter::registers: return "registers";
    case Limiter::shared_memory: return "shared_memory";
    case Limiter::warps: return "warps";
    case Limiter::blocks: return "blocks";
  }
  return "unknown";
}

namespace {

std::string s(std::int64_t v) { return std::to_string(v); }

// The host backend runs one block per core at a time.
Occupancy host_occupancy(const DeviceProps& dev, const KernelAttributes& k,
                         const LaunchShape& launch, std::string_view model) {
  occupancy_detail::validate_host(dev, k, launch);
  Occupancy o;
  o.blocks_per_sm = o.by_registers = o.by_shared_memory = o.by_warps = o.by_blocks = 1;
  o.limiter = Limiter::none;
  o.note = std::string(model) + "/host: one block per core at a time (" + s(dev.sm_count) +
           " cores)";
  return o;
}

}  // namespace

Occupancy tutorial_occupancy(const DeviceProps& dev, const KernelAttributes& k,
                             const LaunchShape& launch) {
  if (dev.vendor == Vendor::host) return host_occupancy(dev, k, launch, "tutorial");
  // The tutorial has a formula per vendor; any other code (only reachable
  // by casting) is refused before its warp size is divided by (fuzz finding).
  if (dev.vendor != Vendor::nvidia && dev.vendor != Vendor::amd)
    throw Error(Status::invalid_argument, "occupancy: unknown dev.vendor");
  occupancy_detail::validate_gpu(dev, k, launch);

  const std::int64_t warp = dev.warp_size;
  const std::int64_t num_warps = ceil_div(launch.threads_per_block, warp);
  std::int64_t n_regs = k.regs_per_thread;
  std::string note;
  if (n_regs == 0) {
    n_regs = 1;
    note += "kernel reports 0 registers: n_regs treated as 1 (the tutorial would divide by zero); ";
  }

  // Shared-memory cap; skipped when the kernel uses none.
  const std::int64_t size_smem = k.static_smem_bytes + launch.dynamic_smem_bytes;
  Limit smem{kUnlimited, true};
  if (size_smem > 0) smem.value = dev.smem_per_sm / size_smem;

  const Limit blocks{dev.max_blocks_per_sm, false};  // information only
  Limit regs, warps;

  if (dev.vendor == Vendor::nvidia) {
    // occupancy = NUM_REGS // (n_regs * WARP_SIZE * num_warps)
    regs.value = dev.regs_per_sm / (n_regs * warp * num_warps);
    warps = Limit{(dev.max_threads_per_sm / warp) / num_warps, false};  // information only
    note += "tutorial/NVIDIA: regs_per_sm // (n_regs*warp*num_warps) = " + s(dev.regs_per_sm) +
            " // (" + s(n_regs) + "*" + s(warp) + "*" + s(num_warps) + ") = " + s(regs.value);
  } else {
    // AMD. NUM_GPRS: doubled on CDNA unless the runtime already reports the
    // unified VGPR+AccVGPR pool.
    std::int64_t num_gprs = dev.regs_per_sm;
    const std::string arch(amd_base_arch(dev.arch));
    if (amd_is_cdna(dev.arch)) {
      if (dev.register_pool == RegisterPoolReport::unified_pool) {
        note += "tutorial/AMD CDNA " + arch +
                ": NUM_GPRS = regs_per_sm, not doubled (dev.register_pool = unified_pool already "
                "counts the 512-entry VGPR+AccVGPR pool)";
      } else {
        num_gprs *= 2;
        note += "tutorial/AMD CDNA " + arch +
                ": NUM_GPRS = 2 x regs_per_sm (VGPRs and AccVGPRs form one 512-entry pool per "
                "lane; the runtime reports the arch VGPRs only)";
      }
    } else {
      note += "tutorial/AMD non-CDNA " + (arch.empty() ? std::string("(no arch)") : arch) +
              ": NUM_GPRS = regs_per_sm, no doubling (the tutorial leaves it undefined here)";
    }
    // max_num_waves = MAX_NUM_THREADS // WARP_SIZE;
    // occupancy = min(NUM_GPRS // WARP_SIZE // n_regs, max_num_waves) // num_warps,
    // and min(a, b) // n == min(a // n, b // n) for non-negative integers.
    const std::int64_t reg_waves = num_gprs / warp / n_regs;
    const std::int64_t max_num_waves = dev.max_threads_per_sm / warp;
    regs.value = reg_waves / num_warps;
    warps.value = max_num_waves / num_warps;
    note += "; waves by registers " + s(num_gprs) + " // " + s(warp) + " // " + s(n_regs) + " = " +
            s(reg_waves) + ", max_num_waves " + s(max_num_waves) + ", num_warps " + s(num_warps);
    if (k.agprs_per_thread > 0)
      note += "; the tutorial ignores the kernel's " + s(k.agprs_per_thread) + " AccVGPRs";
  }

  if (size_smem > 0)
    note += "; smem cap " + s(dev.smem_per_sm) + " // " + s(size_smem) + " = " + s(smem.value);
  else
    note += "; no shared memory: smem cap skipped";
  note += dev.vendor == Vendor::nvidia
              ? "; by_warps and by_blocks are information only (the tutorial does not cap by them)"
              : "; by_blocks is information only (the tutorial does not cap by it)";
  return combine(regs, smem, warps, blocks, std::move(note));
}

Occupancy exact_occupancy(const DeviceProps& dev, const KernelAttributes& k,
                          const LaunchShape& launch) {
  switch (dev.vendor) {
    case Vendor::nvidia: return nvidia_exact_occupancy(dev, k, launch);
    case Vendor::amd: return amd_exact_occupancy(dev, k, launch);
    case Vendor::host: return host_occupancy(dev, k, launch, "exact");
  }
  throw Error(Status::invalid_argument, "occupancy: unknown dev.vendor");
}

}  // namespace duet
