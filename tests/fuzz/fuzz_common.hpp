// Shared by the libFuzzer targets in tests/fuzz/: the abort-on-violation
// check, value pickers over FuzzedDataProvider, and the occupancy invariants
// both fuzzers assert. Every check states what it protects.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "duet/device_props.hpp"
#include "duet/error.hpp"
#include "duet/occupancy.hpp"

// A violated invariant is a finding: print it and abort, so libFuzzer saves
// the input (assert() would vanish under NDEBUG).
#define FUZZ_CHECK(cond, context)                                                         \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "\n*** duet fuzz invariant violated at %s:%d\n***   %s\n", __FILE__, \
                   __LINE__, #cond);                                                      \
      std::fprintf(stderr, "***   context: %s\n", std::string(context).c_str());          \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

namespace duet_fuzz {

using duet::DeviceProps;
using duet::KernelAttributes;
using duet::LaunchShape;
using duet::Limiter;
using duet::Occupancy;

// Mostly a value in [lo, hi]; one time in 16 an edge (0, +-1, the bounds and
// one past them, the type's extremes), one in 16 anything the type holds.
// (Rarer would starve the hostile paths, commoner the accepted ones: with a
// dozen fields per input, 7/8 plausible each leaves about 1 in 5 inputs
// entirely plausible.)
template <class T>
T pick(FuzzedDataProvider& p, T lo, T hi) {
  using L = std::numeric_limits<T>;
  switch (p.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return p.ConsumeIntegral<T>();
    case 1: {
      const T above = hi < L::max() ? T(hi + 1) : hi;
      const T below = lo > L::min() ? T(lo - 1) : lo;
      return p.PickValueInArray<T>({T(0), T(1), T(-1), lo, hi, above, below, L::max(), L::min()});
    }
    default: return p.ConsumeIntegralInRange<T>(lo, hi);
  }
}

// What a compiled kernel might report: realistic most of the time.
inline KernelAttributes fuzz_kernel(FuzzedDataProvider& p) {
  KernelAttributes k;
  k.name = "fuzz";
  k.regs_per_thread = pick<int>(p, 0, 256);
  k.agprs_per_thread = p.ConsumeIntegralInRange<int>(0, 3) != 0 ? 0 : pick<int>(p, 0, 256);
  k.sgprs_per_wave = p.ConsumeBool() ? 0 : pick<int>(p, 0, 128);
  k.static_smem_bytes = p.ConsumeBool() ? 0 : pick<std::int64_t>(p, 0, 256 * 1024);
  k.local_bytes_per_thread = p.ConsumeBool() ? 0 : pick<std::int64_t>(p, 0, 1 << 20);
  k.max_threads_per_block = p.ConsumeBool() ? 1024 : pick<int>(p, 1, 1024);
  k.source = "fuzz";
  return k;
}

inline LaunchShape fuzz_launch(FuzzedDataProvider& p) {
  LaunchShape l;
  l.threads_per_block = p.ConsumeBool() ? 32 * p.ConsumeIntegralInRange<int>(1, 32) : pick<int>(p, 1, 1024);
  l.dynamic_smem_bytes = p.ConsumeBool() ? 0 : pick<std::int64_t>(p, 0, 256 * 1024);
  return l;
}

// --------------------------------------------------------------- invariants

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
inline std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

inline std::string describe(const Occupancy& o) {
  return "blocks_per_sm=" + std::to_string(o.blocks_per_sm) + " limiter=" + std::string(duet::to_string(o.limiter)) +
         " regs=" + std::to_string(o.by_registers) + " smem=" + std::to_string(o.by_shared_memory) +
         " warps=" + std::to_string(o.by_warps) + " blocks=" + std::to_string(o.by_blocks) + " | " + o.note;
}

inline int limit_of(const Occupancy& o, Limiter l) {
  switch (l) {
    case Limiter::registers: return o.by_registers;
    case Limiter::shared_memory: return o.by_shared_memory;
    case Limiter::warps: return o.by_warps;
    case Limiter::blocks: return o.by_blocks;
    case Limiter::none: break;
  }
  return -1;
}

// Holds for every model and vendor.
inline void check_common(const Occupancy& o) {
  const std::string ctx = describe(o);
  // Non-negative counts: a negative block count would become a negative or
  // wrapped grid size in the planner.
  FUZZ_CHECK(o.blocks_per_sm >= 0 && o.by_registers >= 0 && o.by_shared_memory >= 0 && o.by_warps >= 0 &&
                 o.by_blocks >= 0,
             ctx);
  // The limiter is one of the enumerators (to_string must not say "unknown").
  FUZZ_CHECK(duet::to_string(o.limiter) != "unknown", ctx);
  // The limiter names a resource whose own limit is the result.
  if (o.limiter != Limiter::none) FUZZ_CHECK(limit_of(o, o.limiter) == o.blocks_per_sm, ctx);
  // Every result explains itself (deviceinfo prints the note).
  FUZZ_CHECK(!o.note.empty(), ctx);
}

// Occupancy models only ever refuse with the two documented statuses.
inline void check_error(const duet::Error& e) {
  FUZZ_CHECK(e.status() == duet::Status::invalid_argument || e.status() == duet::Status::unsupported,
             std::string(duet::to_string(e.status())) + ": " + e.what());
  FUZZ_CHECK(std::string_view(e.what()).size() > 0, "empty error message");
}

// A generous bound on the VGPR lanes x registers one unit HIP counts holds:
// a gfx8/gfx9 CU ("gfx9xx"), 4 SIMDs x 512; a gfx10+ WGP ("gfx1xxx"),
// 4 SIMD32 x 1536.
inline std::int64_t amd_vgpr_budget(const DeviceProps& d) {
  return duet::amd_base_arch(d.arch).size() == 6 ? 4 * 512 : 4 * 1536;
}
// Wave slots of that unit: 32 on a gfx8/gfx9 CU (4 SIMDs x 8), 64 on a
// gfx10+ WGP (4 SIMD32 x 16).
inline std::int64_t amd_wave_slots(const DeviceProps& d) {
  return duet::amd_base_arch(d.arch).size() == 6 ? 32 : 64;
}

// exact_occupancy / nvidia_exact_occupancy / amd_exact_occupancy: the result
// never exceeds what any single resource allows, recomputed here from the
// inputs independently of the model's own arithmetic.
inline void check_exact(const DeviceProps& d, const KernelAttributes& k, const LaunchShape& l, const Occupancy& o) {
  check_common(o);
  const std::string ctx = describe(o);
  const std::int64_t b = o.blocks_per_sm;
  if (d.vendor == duet::Vendor::host) {
    // The host runs one block per core at a time.
    FUZZ_CHECK(b == 1 && o.limiter == Limiter::none, ctx);
    return;
  }
  // Every resource caps the exact models: the result is the smallest limit,
  // and some resource is named as the limiter.
  FUZZ_CHECK(b == std::min({o.by_registers, o.by_shared_memory, o.by_warps, o.by_blocks}), ctx);
  FUZZ_CHECK(o.limiter != Limiter::none, ctx);
  const std::int64_t t = l.threads_per_block;
  const std::int64_t warp = d.warp_size;
  const std::int64_t waves = ceil_div(t, warp);
  const std::int64_t smem = k.static_smem_bytes + l.dynamic_smem_bytes;
  // Thread slots: resident threads never exceed the SM's limit.
  FUZZ_CHECK(b * waves * warp <= d.max_threads_per_sm, ctx);
  // A resident block fits the per-block shared-memory (opt-in) limit.
  if (b > 0) FUZZ_CHECK(smem <= std::max(d.smem_per_block, d.smem_per_block_optin), ctx);

  if (d.vendor == duet::Vendor::nvidia) {
    // Block slots.
    FUZZ_CHECK(b <= d.max_blocks_per_sm, ctx);
    // Registers: 256-register units per warp, from one register file, and the
    // per-thread (256) and per-block caps.
    const std::int64_t r = k.regs_per_thread;
    if (r > 0 && b > 0) {
      const std::int64_t per_warp = round_up(r * warp, 256);
      FUZZ_CHECK(r <= 256, ctx);
      FUZZ_CHECK(per_warp * waves <= d.regs_per_block, ctx);
      FUZZ_CHECK(b * waves * per_warp <= d.regs_per_sm, ctx);
    }
    // Shared memory with the driver's reservation: within the largest
    // carve-out any supported SM offers (228 KiB).
    FUZZ_CHECK(b * (smem + d.smem_reserved_per_block) <= 228 * 1024, ctx);
  } else {
    // AMD. Wave slots: 32 per CU on gfx8/gfx9, 64 per WGP on gfx10+.
    FUZZ_CHECK(b * waves <= amd_wave_slots(d), ctx);
    // Block slots: the reported cap, or wave slots where HIP derived it.
    FUZZ_CHECK(b <= std::max<std::int64_t>(d.max_blocks_per_sm, d.max_threads_per_sm / warp), ctx);
    // VGPRs (arch + AccVGPRs) of the resident waves fit the CU's files.
    const std::int64_t used = std::max(k.regs_per_thread, k.agprs_per_thread);
    if (used > 0) FUZZ_CHECK(b * waves * used <= amd_vgpr_budget(d), ctx);
    // SGPRs on gfx8/gfx9: 800 per SIMD, 4 SIMDs.
    if (k.sgprs_per_wave > 0 && duet::amd_base_arch(d.arch).size() == 6)
      FUZZ_CHECK(b * waves * round_up(k.sgprs_per_wave, 16) <= 4 * 800, ctx);
    // LDS: resident blocks share the CU's pool (capped at the per-block limit).
    if (smem > 0)
      FUZZ_CHECK(b * smem <= std::min(d.smem_per_sm, std::max(d.smem_per_block, d.smem_per_block_optin)), ctx);
  }
}

// tutorial_occupancy: the Triton formula's own caps hold.
inline void check_tutorial(const DeviceProps& d, const KernelAttributes& k, const LaunchShape& l,
                           const Occupancy& o) {
  check_common(o);
  const std::string ctx = describe(o);
  const std::int64_t b = o.blocks_per_sm;
  if (d.vendor == duet::Vendor::host) {
    FUZZ_CHECK(b == 1, ctx);
    return;
  }
  const std::int64_t smem = k.static_smem_bytes + l.dynamic_smem_bytes;
  // Registers always cap the tutorial's result.
  FUZZ_CHECK(b <= o.by_registers, ctx);
  // Shared memory caps it when the kernel uses any.
  if (smem > 0) {
    FUZZ_CHECK(b <= o.by_shared_memory, ctx);
    FUZZ_CHECK(b * smem <= d.smem_per_sm, ctx);
  }
  if (d.vendor != duet::Vendor::nvidia && d.vendor != duet::Vendor::amd) return;
  const std::int64_t warp = d.warp_size;  // validated: 32 or 64
  const std::int64_t num_warps = ceil_div(l.threads_per_block, warp);
  const std::int64_t n_regs = std::max(k.regs_per_thread, 1);
  if (d.vendor == duet::Vendor::nvidia) {
    // NUM_REGS // (n_regs * WARP_SIZE * num_warps)
    FUZZ_CHECK(b * n_regs * warp * num_warps <= d.regs_per_sm, ctx);
  } else {
    // NUM_GPRS is at most 2 x regs_per_sm (CDNA doubling); wave slots cap too.
    FUZZ_CHECK(b * num_warps * warp * n_regs <= 2 * std::int64_t(d.regs_per_sm), ctx);
    FUZZ_CHECK(b * num_warps <= d.max_threads_per_sm / warp, ctx);
    FUZZ_CHECK(b <= o.by_warps, ctx);
  }
}

// Pure functions: the same input gives the same answer.
inline void check_same(const Occupancy& a, const Occupancy& b) {
  FUZZ_CHECK(a.blocks_per_sm == b.blocks_per_sm && a.limiter == b.limiter && a.by_registers == b.by_registers &&
                 a.by_shared_memory == b.by_shared_memory && a.by_warps == b.by_warps &&
                 a.by_blocks == b.by_blocks && a.note == b.note,
             describe(a) + " vs " + describe(b));
}

}  // namespace duet_fuzz
