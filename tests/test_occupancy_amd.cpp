// duet::amd_exact_occupancy (the HIP runtime's rule,
// ihipOccupancyMaxActiveBlocksPerMultiprocessor) on hand-worked examples,
// and the tutorial model's AMD branch (CDNA doubling, no double count where
// ROCm already reports the unified pool, RDNA).
//
// Device values: what hipGetDeviceProperties reports, except
// max_blocks_per_sm, for which HIP reports maxThreadsPerCU/maxWorkGroupSize
// (= 2); the fixtures use 32, the CU's wave slots, which never caps below the
// wave limit. RDNA values are per WGP, the unit HIP reports on gfx10+.
#include <doctest/doctest.h>

#include <string>

#include "duet/error.hpp"
#include "device_fixtures.hpp"
#include "duet/occupancy.hpp"

namespace {

using duet::DeviceProps;
using duet::KernelAttributes;
using duet::LaunchShape;
using duet::Limiter;

using duet::fixtures::amd_gpu;
using duet::fixtures::mi300x;

DeviceProps mi300x_rocm7() {
  return amd_gpu("AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 304, 64, 131072,
                 duet::RegisterPoolReport::unified_pool, 65536);
}
// MI250X: gfx90a, 110 CUs per GCD.
DeviceProps mi250x() {
  return amd_gpu("AMD Instinct MI250X", "gfx90a:sramecc+:xnack-", 110, 64, 65536,
                 duet::RegisterPoolReport::arch_vgprs_only, 65536);
}
// MI100: gfx908, 120 CUs.
DeviceProps mi100() {
  return amd_gpu("AMD Instinct MI100", "gfx908:sramecc+:xnack-", 120, 64, 65536,
                 duet::RegisterPoolReport::arch_vgprs_only, 65536);
}
// RX 7900 XTX: gfx1100, 48 WGPs (96 CUs), wave32, as HIP reports it
// (tools/deviceinfo/devices/rx7900xtx.json): registers per WGP 1536 VGPRs x
// 4 SIMD32 x 32 lanes = 196608, 64 KiB of LDS, 2048 threads.
DeviceProps rx7900xtx() {
  return amd_gpu("AMD Radeon RX 7900 XTX", "gfx1100", 48, 32, 196608,
                 duet::RegisterPoolReport::not_applicable, 65536);
}

KernelAttributes kernel(int vgprs, int agprs = 0, int sgprs = 0, std::int64_t lds = 0) {
  KernelAttributes k;
  k.regs_per_thread = vgprs;
  k.agprs_per_thread = agprs;
  k.sgprs_per_wave = sgprs;
  k.static_smem_bytes = lds;
  return k;
}

}  // namespace

TEST_CASE("occupancy/amd exact: MI300X, VGPR-bound kernel") {
  // 256 threads = 4 waves of 64. 128 VGPRs -> align 8 = 128; 512/128 = 4
  // waves per SIMD (below the 8-wave cap) x 4 SIMDs = 16 waves -> 16/4 = 4.
  // Wave slots min(4x8, 2048/64) = 32 -> 32/4 = 8. LDS 65536/8192 = 8.
  const auto o = duet::amd_exact_occupancy(mi300x(), kernel(128, 0, 0, 8192), LaunchShape{256, 0});
  CHECK(o.blocks_per_sm == 4);
  CHECK(o.limiter == Limiter::registers);
  CHECK(o.by_registers == 4);
  CHECK(o.by_warps == 8);
  CHECK(o.by_shared_memory == 8);
  CHECK(o.by_blocks == 32);
  // The exact model reads the ISA's register file, not dev.regs_per_sm: the
  // ROCm 7 report (131072, unified_pool) gives the same answer.
  const auto o7 =
      duet::amd_exact_occupancy(mi300x_rocm7(), kernel(128, 0, 0, 8192), LaunchShape{256, 0});
  CHECK(o7.blocks_per_sm == 4);
  CHECK(o7.by_registers == 4);
}

TEST_CASE("occupancy/amd exact: MI300X, VGPRs plus AccVGPRs in the unified file") {
  // 90 arch VGPRs + 64 AGPRs: align(90, 4) = 92, + 64 = 156 -> align 8 = 160;
  // 512/160 = 3 waves per SIMD x 4 = 12 waves -> 12/4 = 3 blocks of 256.
  const auto o = duet::amd_exact_occupancy(mi300x(), kernel(90, 64), LaunchShape{256, 0});
  CHECK(o.blocks_per_sm == 3);
  CHECK(o.limiter == Limiter::registers);
  CHECK(o.by_shared_memory == 32);  // no LDS: reported as the block limit
  CHECK(o.note.find("align(90,4)+64") != std::string::npos);
}

TEST_CASE("occupancy/amd exact: MI300X, small waves are capped by wave slots") {
  // 16 VGPRs: 512/16 = 32 waves per SIMD, capped at 8 -> 32 waves per CU;
  // 64-thread blocks (1 wave): registers allow 4x32 = 128, slots allow 32,
  // block slots 32. Ties are reported in the order registers, shared memory,
  // warps, blocks: warps.
  const auto o = duet::amd_exact_occupancy(mi300x(), kernel(16), LaunchShape{64, 0});
  CHECK(o.blocks_per_sm == 32);
  CHECK(o.by_registers == 128);
  CHECK(o.by_warps == 32);
  CHECK(o.limiter == Limiter::warps);
  // A block of 65 threads occupies 2 waves: 32/2 = 16.
  CHECK(duet::amd_exact_occupancy(mi300x(), kernel(16), LaunchShape{65, 0}).blocks_per_sm == 16);
}

TEST_CASE("occupancy/amd exact: MI300X with HIP's derived maxBlocksPerMultiProcessor") {
  // hipGetDeviceProperties reports maxBlocksPerMultiProcessor =
  // 2048 / 1024 = 2, which is not a residency limit: the model replaces it
  // by the CU's wave slots (2048 / 64 = 32) and says so, so the answer is
  // the same as with 32 recorded.
  DeviceProps d = mi300x();
  d.max_blocks_per_sm = 2;
  const auto o = duet::amd_exact_occupancy(d, kernel(16), LaunchShape{64, 0});
  CHECK(o.blocks_per_sm == 32);
  CHECK(o.by_blocks == 32);
  CHECK(o.note.find("derived value") != std::string::npos);
}

TEST_CASE("occupancy/amd exact: MI250X, SGPR-bound and LDS-bound kernels") {
  // 32 VGPRs: 512/32 = 16 waves per SIMD. 100 SGPRs -> align 16 = 112;
  // 800/112 = 7 waves per SIMD. min(16, 7) = 7 (below the cap of 8) x 4 SIMDs
  // = 28 waves -> 28/4 = 7 blocks of 256 threads.
  const auto o = duet::amd_exact_occupancy(mi250x(), kernel(32, 0, 100), LaunchShape{256, 0});
  CHECK(o.blocks_per_sm == 7);
  CHECK(o.limiter == Limiter::registers);
  CHECK(o.by_warps == 8);

  // 64 VGPRs: 512/64 = 8 waves per SIMD -> 32 waves -> 32/8 = 4 blocks of
  // 512 threads; LDS 24 KiB: 65536/24576 = 2 -> 2 blocks, LDS-bound.
  const auto l = duet::amd_exact_occupancy(mi250x(), kernel(64, 0, 0, 24576), LaunchShape{512, 0});
  CHECK(l.blocks_per_sm == 2);
  CHECK(l.limiter == Limiter::shared_memory);
  CHECK(l.by_registers == 4);
  CHECK(l.by_warps == 4);

  // Dynamic LDS counts the same as static: 8 KiB + 8 KiB = 16 KiB -> 4.
  const auto dyn = duet::amd_exact_occupancy(mi250x(), kernel(32, 0, 0, 8192), LaunchShape{256, 8192});
  CHECK(dyn.by_shared_memory == 4);
  CHECK(dyn.blocks_per_sm == 4);
}

TEST_CASE("occupancy/amd exact: MI100 (gfx908), separate AccVGPR file, 4-register granule") {
  // gfx908: 256 VGPRs per lane per SIMD, granule 4; AGPRs are a separate
  // 256-entry file, so the kernel occupies max(100, 120) = 120 of each ->
  // align 4 = 120; 256/120 = 2 waves per SIMD x 4 = 8 waves -> 8/4 = 2.
  const auto o = duet::amd_exact_occupancy(mi100(), kernel(100, 120), LaunchShape{256, 0});
  CHECK(o.blocks_per_sm == 2);
  CHECK(o.limiter == Limiter::registers);

  // 102 VGPRs -> align 4 = 104; 256/104 = 2 -> 8 waves -> 8/2 = 4 blocks of 128.
  CHECK(duet::amd_exact_occupancy(mi100(), kernel(102), LaunchShape{128, 0}).blocks_per_sm == 4);

  // 24 VGPRs: 256/24 = 10 waves per SIMD; 96 SGPRs: 800/96 = 8. min(10, 8,
  // cap 8) = 8 -> 32 waves. HIP caps gfx908 at 8 waves per SIMD as well
  // (LLVM lists 10; the SPI allows 32 waves per CU).
  const auto s = duet::amd_exact_occupancy(mi100(), kernel(24, 0, 96), LaunchShape{64, 0});
  CHECK(s.blocks_per_sm == 32);
  CHECK(s.by_registers == 32);
}

TEST_CASE("occupancy/amd exact: RX 7900 XTX (gfx1100), wave32 and wave64") {
  // gfx1100 has 1.5x VGPRs: 1536 per SIMD lane in wave32, granule 24.
  // 100 VGPRs -> align 24 = 120; 1536/120 = 12 waves per SIMD (cap 16) x 4
  // SIMD32 per WGP = 48 waves; 256 threads = 8 waves -> 48/8 = 6 blocks.
  // Wave slots min(4x16, 2048/32) = 64 -> 8. LDS: 65536 per WGP / 16384 = 4.
  const auto o = duet::amd_exact_occupancy(rx7900xtx(), kernel(100, 0, 0, 16384), LaunchShape{256, 0});
  CHECK(o.blocks_per_sm == 4);
  CHECK(o.limiter == Limiter::shared_memory);
  CHECK(o.by_registers == 6);
  CHECK(o.by_warps == 8);
  CHECK(o.by_shared_memory == 4);
  // Without LDS, registers limit: 6 blocks of 8 waves a WGP, 288 on the device.
  const auto regs = duet::amd_exact_occupancy(rx7900xtx(), kernel(100), LaunchShape{256, 0});
  CHECK(regs.blocks_per_sm == 6);
  CHECK(regs.limiter == Limiter::registers);

  // SGPRs do not limit on gfx10+.
  CHECK(duet::amd_exact_occupancy(rx7900xtx(), kernel(100, 0, 106), LaunchShape{256, 0}).blocks_per_sm == 6);

  // wave64 on RDNA halves the pool and the granule: 768 / 12.
  // 100 -> align 12 = 108; 768/108 = 7 waves per SIMD x 4 = 28 waves;
  // 256 threads = 4 waves -> 28/4 = 7.
  DeviceProps w64 = rx7900xtx();
  w64.warp_size = 64;
  const auto o64 = duet::amd_exact_occupancy(w64, kernel(100), LaunchShape{256, 0});
  CHECK(o64.blocks_per_sm == 7);
  CHECK(o64.by_warps == 8);  // min(4x16, 2048/64) = 32 waves / 4
}

TEST_CASE("occupancy/amd exact: other RDNA register files") {
  // gfx1030 (RDNA2): 1024 per lane, granule 16. 100 -> 112; 1024/112 = 9
  // waves per SIMD x 4 = 36 waves; 128 threads = 4 waves -> 9 blocks.
  DeviceProps d = rx7900xtx();
  d.arch = "gfx1030";
  CHECK(duet::amd_exact_occupancy(d, kernel(100), LaunchShape{128, 0}).blocks_per_sm == 9);
  // gfx1010 (RDNA1): granule 8. 100 -> 104; 1024/104 = 9 -> same 9 blocks;
  // 60 VGPRs -> 64; 1024/64 = 16 -> 64 waves -> 16 blocks of 4 waves, also
  // the wave slots' limit (min(4x16, 2048/32) = 64).
  d.arch = "gfx1010";
  CHECK(duet::amd_exact_occupancy(d, kernel(60), LaunchShape{128, 0}).blocks_per_sm == 16);
  // gfx1030 with 70 VGPRs -> 80; 1024/80 = 12 -> 48 waves -> 12 blocks
  // (gfx1010: 72 -> 14 -> 56 waves -> 14).
  d.arch = "gfx1030";
  CHECK(duet::amd_exact_occupancy(d, kernel(70), LaunchShape{128, 0}).blocks_per_sm == 12);
  d.arch = "gfx1010";
  CHECK(duet::amd_exact_occupancy(d, kernel(70), LaunchShape{128, 0}).blocks_per_sm == 14);
}

TEST_CASE("occupancy/amd exact: inputs HIP cannot run are rejected") {
  // AGPRs on an ISA without them.
  CHECK_THROWS_AS(duet::amd_exact_occupancy(rx7900xtx(), kernel(32, 8), LaunchShape{64, 0}),
                  duet::Error);
  // More VGPRs than the ISA can address.
  CHECK_THROWS_AS(duet::amd_exact_occupancy(mi300x(), kernel(300), LaunchShape{64, 0}), duet::Error);
  CHECK_THROWS_AS(duet::amd_exact_occupancy(mi300x(), kernel(64, 300), LaunchShape{64, 0}),
                  duet::Error);
  // CDNA runs wave64 only.
  DeviceProps w32 = mi300x();
  w32.warp_size = 32;
  CHECK_THROWS_AS(duet::amd_exact_occupancy(w32, kernel(32), LaunchShape{64, 0}), duet::Error);
  // Not a gfx name; a gfx name outside the model.
  DeviceProps bad = mi300x();
  bad.arch = "sm_90";
  CHECK_THROWS_AS(duet::amd_exact_occupancy(bad, kernel(32), LaunchShape{64, 0}), duet::Error);
  bad.arch = "gfx700";
  try {
    (void)duet::amd_exact_occupancy(bad, kernel(32), LaunchShape{64, 0});
    FAIL("gfx700 accepted");
  } catch (const duet::Error& e) {
    CHECK(e.status() == duet::Status::unsupported);
  }
  // The NVIDIA device handed to the AMD model.
  DeviceProps nv = mi300x();
  nv.vendor = duet::Vendor::nvidia;
  nv.warp_size = 32;
  CHECK_THROWS_AS(duet::amd_exact_occupancy(nv, kernel(32), LaunchShape{64, 0}), duet::Error);
}

TEST_CASE("occupancy/amd exact: exact_occupancy dispatches to the AMD model") {
  const auto a = duet::exact_occupancy(mi300x(), kernel(128), LaunchShape{256, 0});
  const auto b = duet::amd_exact_occupancy(mi300x(), kernel(128), LaunchShape{256, 0});
  CHECK(a.blocks_per_sm == b.blocks_per_sm);
  CHECK(a.note == b.note);
}

// ---- The tutorial model's AMD branch ----

TEST_CASE("occupancy/amd tutorial: MI250X doubles the arch-VGPR report (CDNA)") {
  // NUM_GPRS = 2 x 65536 = 131072; 131072 // 64 // 128 = 16 waves;
  // max_num_waves = 2048 // 64 = 32; min(16, 32) // 4 waves per block = 4.
  const auto o = duet::tutorial_occupancy(mi250x(), kernel(128), LaunchShape{256, 0});
  CHECK(o.blocks_per_sm == 4);
  CHECK(o.limiter == Limiter::registers);
  CHECK(o.by_warps == 8);  // 32 // 4
  CHECK(o.note.find("2 x regs_per_sm") != std::string::npos);
  // register_pool not filled in (not_applicable): the tutorial still doubles on CDNA.
  DeviceProps d = mi250x();
  d.register_pool = duet::RegisterPoolReport::not_applicable;
  CHECK(duet::tutorial_occupancy(d, kernel(128), LaunchShape{256, 0}).blocks_per_sm == 4);
  // MI100 (gfx908) is CDNA too: same arithmetic.
  CHECK(duet::tutorial_occupancy(mi100(), kernel(128), LaunchShape{256, 0}).blocks_per_sm == 4);
}

TEST_CASE("occupancy/amd tutorial: MI300X, doubled 65536 and undoubled 131072 agree") {
  // ROCm 6: 65536 reported, doubled to 131072: 131072 // 64 // 128 = 16
  // waves -> 16 // 4 = 4; LDS cap 65536 // 8192 = 8 -> 4.
  const auto old_rocm = duet::tutorial_occupancy(mi300x(), kernel(128, 0, 0, 8192), LaunchShape{256, 0});
  CHECK(old_rocm.blocks_per_sm == 4);
  CHECK(old_rocm.by_shared_memory == 8);
  // ROCm 7: 131072 reported as the unified pool: not doubled -> the same 4.
  // (Doubling it would claim 262144 // 64 // 128 = 32 waves -> 8 blocks.)
  const auto rocm7 = duet::tutorial_occupancy(mi300x_rocm7(), kernel(128, 0, 0, 8192), LaunchShape{256, 0});
  CHECK(rocm7.blocks_per_sm == 4);
  CHECK(rocm7.note.find("not doubled") != std::string::npos);
  // The tutorial ignores AccVGPRs: 90 VGPRs + 64 AGPRs -> 131072 // 64 // 90
  // = 22 waves -> 22 // 4 = 5, where the exact model says 3.
  const auto agpr = duet::tutorial_occupancy(mi300x(), kernel(90, 64), LaunchShape{256, 0});
  CHECK(agpr.blocks_per_sm == 5);
  CHECK(agpr.note.find("ignores") != std::string::npos);
  CHECK(duet::amd_exact_occupancy(mi300x(), kernel(90, 64), LaunchShape{256, 0}).blocks_per_sm == 3);
}

TEST_CASE("occupancy/amd tutorial: RDNA uses the reported pool as is") {
  // RX 7900 XTX: NUM_GPRS = 196608 (no doubling); 196608 // 32 // 100 = 61
  // waves; max_num_waves = 2048 // 32 = 64; min(61, 64) // 8 = 7;
  // LDS cap 65536 // 8192 = 8 -> 7.
  const auto o = duet::tutorial_occupancy(rx7900xtx(), kernel(100, 0, 0, 8192), LaunchShape{256, 0});
  CHECK(o.blocks_per_sm == 7);
  CHECK(o.limiter == Limiter::registers);
  CHECK(o.note.find("non-CDNA") != std::string::npos);
}

TEST_CASE("occupancy/amd tutorial: wave slots can be the limit") {
  // 8 VGPRs: 131072 // 64 // 8 = 256 waves by registers; max_num_waves 32;
  // 64-thread blocks (1 wave): min(256, 32) // 1 = 32 -> warps.
  const auto o = duet::tutorial_occupancy(mi300x(), kernel(8), LaunchShape{64, 0});
  CHECK(o.blocks_per_sm == 32);
  CHECK(o.limiter == Limiter::warps);
  CHECK(o.by_registers == 256);
}
