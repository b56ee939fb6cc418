// NVIDIA exact occupancy: blocks of one kernel resident on one SM, computed
// the way the CUDA toolkit's occupancy calculator (cuda_occupancy.h,
// cudaOccMaxActiveBlocksPerMultiprocessor) does it for the default device
// state (no cache/carve-out preference) and a kernel that has opted in to
// the large shared-memory limit (FUNC_SHMEM_LIMIT_OPTIN with the maximum
// dynamic size allowed). The rules below are restated from that header's
// documented behaviour (CUDA 13.0); no code is taken from it.
//
// Per block of T threads and a device with warp size 32:
//   warps   W = ceil(T / 32)
//   warps:  (max_threads_per_sm / 32) / W
//   regs:   registers go to warps in units of 256: per-warp allocation
//           Rw = round_up(regs_per_thread * 32, 256). The SM's register file
//           is split over 4 sub-partitions (regs_per_sm / 4 each); a warp
//           lives in one, so warps/SM = 4 * floor((regs_per_sm / 4) / Rw),
//           and blocks = that / W.
//           The block is refused (0 blocks) when
//             Rw * round_up(W, 4) > regs_per_block   (hardware check: it
//                                    assumes all 4 partitions allocate at once),
//             Rw * W > regs_per_block                (software check), or
//             regs_per_thread > 256 (cc >= 7; ptxas itself stops at 255).
//           A kernel with 0 registers is not limited by registers.
//   smem:   per block S = round_up(static + dynamic + reserved, G) with
//           G = 128 B (cc >= 8) or 256 B (cc 7.x); the driver reserves
//           dev.smem_reserved_per_block (1 KiB from Ampere on) per block.
//           S may not exceed opt-in + reserved (reserved is added to the
//           limit from cc 8 on); otherwise 0 blocks.
//           The SM's shared memory is a carve-out of the unified L1/shared
//           array, chosen from a per-architecture list of sizes; with the
//           default preference the carve-out is smem_per_sm rounded up to
//           the next listed size (an error when smem_per_sm is above the
//           largest), and if S is larger than that, S rounded up to the
//           next listed size. blocks = carve-out / S (unlimited when S == 0).
//   blocks: dev.max_blocks_per_sm (the toolkit's table is 32 on sm_80/sm_90,
//           16 on sm_86, 24 on sm_89; a mismatch is reported in the note).
//   result  = min of the four.
// Hopper+ also limits by block barriers (2 x the block limit on sm_90, the
// block limit on sm_100a-class 10.1/11.0/12.x parts); a kernel uses one
// barrier per block by default, so that limit never falls below the block
// limit and is not modelled. Virtual resources (Blackwell) are not used by
// kernels whose attributes report none, and are not modelled either.
//
// Supported compute capabilities: 7.x through 12.x as the CUDA 13.0 header
// lists them; anything else is Status::unsupported.
#include <array>
#include <span>
#include <string>

#include "duet/occupancy.hpp"
#include "occupancy_validate.hpp"

namespace duet {

using occupancy_detail::ceil_div;
using occupancy_detail::check_range;
using occupancy_detail::combine;
using occupancy_detail::fail;
using occupancy_detail::kMaxRegs;
using occupancy_detail::kUnlimited;
using occupancy_detail::Limit;
using occupancy_detail::round_up;

namespace {

std::string s(std::int64_t v) { return std::to_string(v); }

// Shared-memory carve-out sizes an SM can be configured to, KiB
// (cuda_occupancy.h, cudaOccAlignUpShmemSizeVoltaPlus).
constexpr std::array<int, 6> kVoltaKiB{0, 8, 16, 32, 64, 96};                        // 7.0, 7.2
constexpr std::array<int, 2> kTuringKiB{32, 64};                                     // 7.5
constexpr std::array<int, 8> kGA100KiB{0, 8, 16, 32, 64, 100, 132, 164};             // 8.0, 8.7
constexpr std::array<int, 6> kGA10xKiB{0, 8, 16, 32, 64, 100};                       // 8.6, 8.9, 12.x
constexpr std::array<int, 10> kHopperKiB{0, 8, 16, 32, 64, 100, 132, 164, 196, 228};  // 9.x, 10.x, 11.x

struct NvArch {
  int smem_granularity = 128;     // bytes
  int max_regs_per_thread = 256;  // the calculator's per-thread cap (cc >= 7)
  int reg_granularity = 256;      // registers per warp allocation unit
  int sub_partitions = 4;         // register-file partitions per SM
  int table_max_blocks = 0;       // the calculator's blocks-per-SM table
  std::span<const int> carveout_kib;
};

NvArch nvidia_arch(int major, int minor) {
  if (major <= 0 || minor < 0)
    fail("dev.cc_major/cc_minor must describe a compute capability, got " + s(major) + "." +
         s(minor));
  NvArch a;
  auto unsupported = [&]() -> NvArch {
    throw Error(Status::unsupported, "occupancy: compute capability " + s(major) + "." + s(minor) +
                                         " (dev.cc_major/cc_minor) is not covered by the exact "
                                         "NVIDIA model (sm_70 to sm_12x as in CUDA 13.0)");
  };
  switch (major) {
    case 7:
      a.smem_granularity = 256;
      if (minor == 5) {
        a.carveout_kib = kTuringKiB;
        a.table_max_blocks = 16;
      } else {
        a.carveout_kib = kVoltaKiB;
        a.table_max_blocks = 32;
      }
      break;
    case 8:
      a.carveout_kib = (minor == 0 || minor == 7) ? std::span<const int>(kGA100KiB)
                                                  : std::span<const int>(kGA10xKiB);
      a.table_max_blocks = minor == 0 ? 32 : minor == 9 ? 24 : 16;
      break;
    case 9:
      a.carveout_kib = kHopperKiB;
      a.table_max_blocks = 32;
      break;
    case 10:
    case 11:
      if (minor != 0 && minor != 1 && minor != 3) return unsupported();
      a.carveout_kib = kHopperKiB;
      a.table_max_blocks = (major == 10 && minor == 1) || (major == 11 && minor == 0) ? 24 : 32;
      break;
    case 12:
      if (minor != 0 && minor != 1) return unsupported();
      a.carveout_kib = kGA10xKiB;
      a.table_max_blocks = 24;
      break;
    default: return unsupported();
  }
  return a;
}

// The smallest carve-out that holds `bytes`; throws when none does (the
// calculator answers CUDA_OCC_ERROR_INVALID_INPUT there).
std::int64_t carveout_for(std::int64_t bytes, const NvArch& a, int major, int minor,
                          std::string_view what) {
  for (int kib : a.carveout_kib)
    if (bytes <= std::int64_t{kib} * 1024) return std::int64_t{kib} * 1024;
  fail(std::string(what) + " " + s(bytes) + " B is above the largest shared-memory carve-out of sm_" +
       s(major) + s(minor) + " (" + s(std::int64_t{a.carveout_kib.back()} * 1024) + " B)");
}

}  // namespace

Occupancy nvidia_exact_occupancy(const DeviceProps& dev, const KernelAttributes& k,
                                 const LaunchShape& launch) {
  if (dev.vendor != Vendor::nvidia)
    fail("nvidia_exact_occupancy needs an NVIDIA device, dev.vendor is " +
         std::string(to_string(dev.vendor)));
  occupancy_detail::validate_gpu(dev, k, launch);
  check_range("dev.regs_per_block", dev.regs_per_block, 1, kMaxRegs);
  const NvArch a = nvidia_arch(dev.cc_major, dev.cc_minor);
  const std::string sm = "sm_" + s(dev.cc_major) + s(dev.cc_minor);

  const std::int64_t warp = dev.warp_size;
  const std::int64_t W = ceil_div(launch.threads_per_block, warp);
  std::string note = "exact/NVIDIA " + sm + ": " + s(W) + " warps per block";

  // Warp slots.
  const Limit warps{(dev.max_threads_per_sm / warp) / W};
  note += "; warps " + s(dev.max_threads_per_sm / warp) + "/" + s(W) + " = " + s(warps.value);

  // Registers, allocated per warp in 256-register units inside one of the 4
  // sub-partitions.
  Limit regs;
  const std::int64_t r = k.regs_per_thread;
  if (r == 0) {
    note += "; 0 registers: not limited by registers";
  } else {
    const std::int64_t per_warp = round_up(r * warp, a.reg_granularity);
    const std::int64_t hw_block = per_warp * round_up(W, a.sub_partitions);
    if (r > a.max_regs_per_thread) {
      regs.value = 0;
      note += "; " + s(r) + " registers per thread is above the " + s(a.max_regs_per_thread) +
              " cap: 0 blocks";
    } else if (hw_block > dev.regs_per_block || per_warp * W > dev.regs_per_block) {
      regs.value = 0;
      note += "; block needs " + s(hw_block) + " registers (" + s(per_warp) + "/warp x " +
              s(round_up(W, a.sub_partitions)) + " warps rounded to 4 partitions) > regs_per_block " +
              s(dev.regs_per_block) + ": 0 blocks";
    } else {
      const std::int64_t per_partition = (dev.regs_per_sm / a.sub_partitions) / per_warp;
      regs.value = (per_partition * a.sub_partitions) / W;
      note += "; regs " + s(r) + "/thread -> " + s(per_warp) + "/warp (256-register units), " +
              s(per_partition) + " warps per sub-partition x 4 -> " + s(regs.value) + " blocks";
    }
  }

  // Shared memory: 128 B (256 B on cc 7.x) units, plus the driver's
  // per-block reservation; the SM's carve-out.
  Limit smem;
  const std::int64_t reserved = dev.smem_reserved_per_block;
  const std::int64_t raw = k.static_smem_bytes + launch.dynamic_smem_bytes + reserved;
  const std::int64_t per_block = round_up(raw, a.smem_granularity);
  const std::int64_t block_limit =
      occupancy_detail::smem_block_limit(dev) + (dev.cc_major >= 8 ? reserved : 0);
  std::int64_t carveout = carveout_for(dev.smem_per_sm, a, dev.cc_major, dev.cc_minor,
                                       "dev.smem_per_sm");
  if (per_block > block_limit) {
    smem.value = 0;
    note += "; smem " + s(per_block) + " B/block (rounded, with " + s(reserved) +
            " B reserved) > limit " + s(block_limit) + " B: 0 blocks";
  } else {
    if (carveout < per_block)
      carveout = carveout_for(per_block, a, dev.cc_major, dev.cc_minor, "shared memory per block");
    if (per_block > 0) smem.value = carveout / per_block;
    note += "; smem " + s(per_block) + " B/block (" + s(k.static_smem_bytes) + " static + " +
            s(launch.dynamic_smem_bytes) + " dynamic + " + s(reserved) + " reserved, " +
            s(a.smem_granularity) + " B units), carve-out " + s(carveout) + " B -> " +
            (per_block > 0 ? s(smem.value) : std::string("unlimited"));
  }

  // Block slots.
  const Limit blocks{dev.max_blocks_per_sm};
  note += "; blocks " + s(dev.max_blocks_per_sm);
  if (dev.max_blocks_per_sm != a.table_max_blocks)
    note += " (the toolkit's table says " + s(a.table_max_blocks) + " for " + sm +
            "; dev.max_blocks_per_sm is used)";
  return combine(regs, smem, warps, blocks, std::move(note));
}

}  // namespace duet
