// Internal helpers shared by the occupancy models (occupancy_tutorial.cpp,
// occupancy_nvidia.cpp, occupancy_amd.cpp): input validation and the step
// that turns per-resource block limits into an Occupancy.
//
// Every check throws duet::Error(Status::invalid_argument) with a one-line
// message that names the offending field, so hostile input never reaches an
// integer division, a narrowing cast or an overflowing product.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>

#include "duet/device_props.hpp"
#include "duet/error.hpp"
#include "duet/occupancy.hpp"

namespace duet::occupancy_detail {

// A resource the kernel does not use places no limit.
inline constexpr std::int64_t kUnlimited = INT64_MAX;

// Upper bounds beyond which a property is "absurd": far above any real
// device, low enough that every product below fits in 64 bits.
inline constexpr std::int64_t kMaxCount = std::int64_t{1} << 20;     // SMs, threads, blocks
inline constexpr std::int64_t kMaxRegs = std::int64_t{1} << 24;      // registers per SM/block
inline constexpr std::int64_t kMaxBytes = std::int64_t{1} << 40;     // shared memory, 1 TiB

[[noreturn]] inline void fail(const std::string& message) {
  throw Error(Status::invalid_argument, "occupancy: " + message);
}

inline void check_range(std::string_view field, std::int64_t value, std::int64_t lo,
                        std::int64_t hi) {
  if (value < lo || value > hi)
    fail(std::string(field) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
         "], got " + std::to_string(value));
}

inline std::int64_t ceil_div(std::int64_t x, std::int64_t y) { return (x + y - 1) / y; }
inline std::int64_t round_up(std::int64_t x, std::int64_t y) { return ceil_div(x, y) * y; }
inline int clamp_int(std::int64_t v) {
  return static_cast<int>(std::clamp<std::int64_t>(v, 0, INT_MAX));
}

// Per-block shared memory limit once the kernel has opted in
// (cudaFuncSetAttribute(MaxDynamicSharedMemorySize)); HIP reports
// sharedMemPerBlockOptin = 0, so the larger of the two is the limit.
inline std::int64_t smem_block_limit(const DeviceProps& dev) {
  return std::max(dev.smem_per_block, dev.smem_per_block_optin);
}

inline void validate_kernel(const KernelAttributes& k) {
  check_range("k.regs_per_thread", k.regs_per_thread, 0, kMaxCount);
  check_range("k.agprs_per_thread", k.agprs_per_thread, 0, kMaxCount);
  check_range("k.sgprs_per_wave", k.sgprs_per_wave, 0, kMaxCount);
  check_range("k.static_smem_bytes", k.static_smem_bytes, 0, kMaxBytes);
  check_range("k.local_bytes_per_thread", k.local_bytes_per_thread, 0, kMaxBytes);
  check_range("k.max_threads_per_block", k.max_threads_per_block, 1, kMaxCount);
}

// Device properties every GPU model reads.
inline void validate_gpu_device(const DeviceProps& dev) {
  check_range("dev.sm_count", dev.sm_count, 1, kMaxCount);
  if (dev.vendor == Vendor::nvidia && dev.warp_size != 32)
    fail("dev.warp_size must be 32 on NVIDIA, got " + std::to_string(dev.warp_size));
  if (dev.vendor == Vendor::amd && dev.warp_size != 32 && dev.warp_size != 64)
    fail("dev.warp_size must be 32 or 64 on AMD, got " + std::to_string(dev.warp_size));
  check_range("dev.regs_per_sm", dev.regs_per_sm, 1, kMaxRegs);
  check_range("dev.max_threads_per_block", dev.max_threads_per_block, 1, kMaxCount);
  check_range("dev.max_threads_per_sm", dev.max_threads_per_sm, 1, kMaxCount);
  check_range("dev.max_blocks_per_sm", dev.max_blocks_per_sm, 1, kMaxCount);
  check_range("dev.smem_per_sm", dev.smem_per_sm, 1, kMaxBytes);
  check_range("dev.smem_per_block", dev.smem_per_block, 1, kMaxBytes);
  check_range("dev.smem_per_block_optin", dev.smem_per_block_optin, 0, kMaxBytes);
  check_range("dev.smem_reserved_per_block", dev.smem_reserved_per_block, 0, kMaxBytes);
}

// The launch against the device's and the kernel's per-block limits.
inline void validate_gpu_launch(const DeviceProps& dev, const KernelAttributes& k,
                                const LaunchShape& launch) {
  const std::int64_t t = launch.threads_per_block;
  if (t <= 0) fail("launch.threads_per_block must be positive, got " + std::to_string(t));
  if (t > dev.max_threads_per_block)
    fail("launch.threads_per_block " + std::to_string(t) + " exceeds dev.max_threads_per_block " +
         std::to_string(dev.max_threads_per_block));
  if (t > k.max_threads_per_block)
    fail("launch.threads_per_block " + std::to_string(t) +
         " exceeds the kernel's k.max_threads_per_block (launch bounds) " +
         std::to_string(k.max_threads_per_block));
  check_range("launch.dynamic_smem_bytes", launch.dynamic_smem_bytes, 0, kMaxBytes);
  const std::int64_t smem = k.static_smem_bytes + launch.dynamic_smem_bytes;
  const std::int64_t limit = smem_block_limit(dev);
  if (smem > limit)
    fail("shared memory per block " + std::to_string(smem) + " B (k.static_smem_bytes " +
         std::to_string(k.static_smem_bytes) + " + launch.dynamic_smem_bytes " +
         std::to_string(launch.dynamic_smem_bytes) + ") exceeds the opt-in limit " +
         std::to_string(limit) + " B (dev.smem_per_block_optin)");
}

inline void validate_gpu(const DeviceProps& dev, const KernelAttributes& k,
                         const LaunchShape& launch) {
  validate_gpu_device(dev);
  validate_kernel(k);
  validate_gpu_launch(dev, k, launch);
}

// The host backend needs only a core count and a sane launch.
inline void validate_host(const DeviceProps& dev, const KernelAttributes& k,
                          const LaunchShape& launch) {
  check_range("dev.sm_count", dev.sm_count, 1, kMaxCount);
  validate_kernel(k);
  const std::int64_t t = launch.threads_per_block;
  if (t <= 0) fail("launch.threads_per_block must be positive, got " + std::to_string(t));
  if (t > k.max_threads_per_block)
    fail("launch.threads_per_block " + std::to_string(t) +
         " exceeds the kernel's k.max_threads_per_block " + std::to_string(k.max_threads_per_block));
  if (dev.max_threads_per_block > 0 && t > dev.max_threads_per_block)
    fail("launch.threads_per_block " + std::to_string(t) + " exceeds dev.max_threads_per_block " +
         std::to_string(dev.max_threads_per_block));
  check_range("launch.dynamic_smem_bytes", launch.dynamic_smem_bytes, 0, kMaxBytes);
}

// One per-resource limit: `value` blocks (kUnlimited when the resource is not
// used) and whether the model lets it cap the result (the tutorial records
// some limits for information only).
struct Limit {
  std::int64_t value = kUnlimited;
  bool caps = true;
};

// blocks_per_sm = min over the capping limits. The limiter is the first
// capping limit equal to that minimum, in the order registers,
// shared_memory, warps, blocks (ties are reported in that order). A limit of
// kUnlimited is reported as the block limit, as occupancy.hpp promises.
inline Occupancy combine(Limit regs, Limit smem, Limit warps, Limit blocks, std::string note) {
  std::int64_t result = kUnlimited;
  for (const Limit* l : {&regs, &smem, &warps, &blocks})
    if (l->caps) result = std::min(result, l->value);
  Occupancy o;
  o.limiter = Limiter::none;
  if (result != kUnlimited) {
    const std::pair<const Limit*, Limiter> order[] = {{&regs, Limiter::registers},
                                                      {&smem, Limiter::shared_memory},
                                                      {&warps, Limiter::warps},
                                                      {&blocks, Limiter::blocks}};
    for (const auto& [l, which] : order)
      if (l->caps && l->value == result) {
        o.limiter = which;
        break;
      }
  }
  const std::int64_t block_limit = blocks.value;
  auto report = [&](const Limit& l) { return clamp_int(l.value == kUnlimited ? block_limit : l.value); };
  o.blocks_per_sm = report(Limit{result, true});
  o.by_registers = report(regs);
  o.by_shared_memory = report(smem);
  o.by_warps = report(warps);
  o.by_blocks = report(blocks);
  o.note = std::move(note);
  return o;
}

}  // namespace duet::occupancy_detail
