// duet::tutorial_occupancy (the Triton fused-softmax tutorial's formula,
// holes fixed) on hand-worked NVIDIA examples, compared with the exact
// model; the host backend; to_string(Limiter). The AMD branch is worked in
// test_occupancy_amd.cpp.
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

DeviceProps h100_sxm() { return duet::fixtures::h100(); }

KernelAttributes kernel(int regs, std::int64_t static_smem = 0) {
  KernelAttributes k;
  k.regs_per_thread = regs;
  k.static_smem_bytes = static_smem;
  return k;
}

DeviceProps host_cpu() {
  DeviceProps d;
  d.name = "host";
  d.vendor = duet::Vendor::host;
  d.backend = duet::BackendKind::host;
  d.arch = "x86_64";
  d.sm_count = 16;
  d.warp_size = 8;
  return d;
}

}  // namespace

TEST_CASE("occupancy/tutorial: H100, shared memory decides, and the 1 KiB reservation matters") {
  // 128 threads = 4 warps, 32 registers, 16 KiB shared memory.
  // Tutorial: 65536 // (32 * 32 * 4) = 16 by registers;
  //           233472 // 16384 = 14 by shared memory -> 14.
  const auto t = duet::tutorial_occupancy(h100_sxm(), kernel(32, 16384), LaunchShape{128, 0});
  CHECK(t.blocks_per_sm == 14);
  CHECK(t.limiter == Limiter::shared_memory);
  CHECK(t.by_registers == 16);
  CHECK(t.by_shared_memory == 14);
  CHECK(t.by_warps == 16);   // 2048/32 = 64 // 4: information only
  CHECK(t.by_blocks == 32);  // information only
  // Exact: registers 32*32 = 1024 per warp (already a multiple of 256);
  // 16384 per sub-partition / 1024 = 16 warps x 4 = 64 warps -> 64/4 = 16.
  // Shared memory 16384 + 1024 reserved = 17408 (a multiple of 128);
  // carve-out 228 KiB = 233472 -> 233472 / 17408 = 13. Warps 64/4 = 16;
  // blocks 32 -> 13.
  const auto e = duet::exact_occupancy(h100_sxm(), kernel(32, 16384), LaunchShape{128, 0});
  CHECK(e.blocks_per_sm == 13);
  CHECK(e.limiter == Limiter::shared_memory);
  CHECK(e.by_registers == 16);
  CHECK(e.by_warps == 16);
  CHECK(e.by_blocks == 32);
}

TEST_CASE("occupancy/tutorial: H100, register-bound kernel without shared memory") {
  // 256 threads = 8 warps, 64 registers: 65536 // (64 * 32 * 8) = 4; no
  // shared memory, so the tutorial's smem cap (a division by zero there) is
  // skipped and reported as the block limit.
  const auto t = duet::tutorial_occupancy(h100_sxm(), kernel(64), LaunchShape{256, 0});
  CHECK(t.blocks_per_sm == 4);
  CHECK(t.limiter == Limiter::registers);
  CHECK(t.by_shared_memory == 32);
  CHECK(t.note.find("smem cap skipped") != std::string::npos);
  // Exact: 2048 per warp; 16384 / 2048 = 8 warps per sub-partition x 4 =
  // 32 warps -> 32/8 = 4. Shared memory is the 1 KiB reservation alone:
  // 233472 / 1024 = 228.
  const auto e = duet::exact_occupancy(h100_sxm(), kernel(64), LaunchShape{256, 0});
  CHECK(e.blocks_per_sm == 4);
  CHECK(e.limiter == Limiter::registers);
  CHECK(e.by_shared_memory == 228);
}

TEST_CASE("occupancy/tutorial: H100, the tutorial does not cap by warps or block slots") {
  // 32-thread blocks with 8 registers: 65536 // (8 * 32 * 1) = 256 blocks.
  // The SM holds 64 warps and 32 blocks; the tutorial records those but
  // keeps its 256. The exact model says 32 (blocks).
  const auto t = duet::tutorial_occupancy(h100_sxm(), kernel(8), LaunchShape{32, 0});
  CHECK(t.blocks_per_sm == 256);
  CHECK(t.by_warps == 64);
  CHECK(t.by_blocks == 32);
  CHECK(t.limiter == Limiter::registers);
  const auto e = duet::exact_occupancy(h100_sxm(), kernel(8), LaunchShape{32, 0});
  CHECK(e.blocks_per_sm == 32);
  CHECK(e.limiter == Limiter::blocks);
}

TEST_CASE("occupancy/tutorial: sub-partition rounding makes the tutorial optimistic") {
  // 80 registers, one warp per block. Tutorial: 65536 // 2560 = 25.
  // Exact: 80*32 = 2560 per warp; 16384 / 2560 = 6 warps per sub-partition
  // (6.4 rounded down) x 4 = 24 warps -> 24 blocks.
  const auto t = duet::tutorial_occupancy(h100_sxm(), kernel(80), LaunchShape{32, 0});
  const auto e = duet::exact_occupancy(h100_sxm(), kernel(80), LaunchShape{32, 0});
  CHECK(t.blocks_per_sm == 25);
  CHECK(e.blocks_per_sm == 24);
  CHECK(e.limiter == Limiter::registers);
}

TEST_CASE("occupancy/tutorial: zero-register kernels count as one register") {
  // 65536 // (1 * 32 * 8) = 256, and the note says why.
  const auto t = duet::tutorial_occupancy(h100_sxm(), kernel(0), LaunchShape{256, 0});
  CHECK(t.blocks_per_sm == 256);
  CHECK(t.note.find("treated as 1") != std::string::npos);
  // The exact model: registers do not limit; 64 warps / 8 = 8.
  const auto e = duet::exact_occupancy(h100_sxm(), kernel(0), LaunchShape{256, 0});
  CHECK(e.blocks_per_sm == 8);
  CHECK(e.limiter == Limiter::warps);
  CHECK(e.by_registers == 32);  // unused: reported as the block limit
}

TEST_CASE("occupancy/tutorial: non-multiple-of-32 blocks round up to whole warps") {
  // 100 threads = 4 warps: 65536 // (32 * 32 * 4) = 16; dynamic shared
  // memory counts like static: 233472 // (4096 + 4096) = 28 -> 16.
  const auto t =
      duet::tutorial_occupancy(h100_sxm(), kernel(32, 4096), LaunchShape{100, 4096});
  CHECK(t.blocks_per_sm == 16);
  CHECK(t.by_shared_memory == 28);
}

TEST_CASE("occupancy/tutorial: results are deterministic and pure") {
  const auto a = duet::tutorial_occupancy(h100_sxm(), kernel(40, 2048), LaunchShape{192, 512});
  const auto b = duet::tutorial_occupancy(h100_sxm(), kernel(40, 2048), LaunchShape{192, 512});
  CHECK(a.blocks_per_sm == b.blocks_per_sm);
  CHECK(a.note == b.note);
  CHECK(a.limiter == b.limiter);
}

TEST_CASE("occupancy/host: one block per core at a time, for both models") {
  const auto t = duet::tutorial_occupancy(host_cpu(), kernel(0), LaunchShape{256, 0});
  const auto e = duet::exact_occupancy(host_cpu(), kernel(0), LaunchShape{256, 0});
  for (const auto& o : {t, e}) {
    CHECK(o.blocks_per_sm == 1);
    CHECK(o.limiter == Limiter::none);
    CHECK(o.by_registers == 1);
    CHECK(o.by_blocks == 1);
    CHECK(o.note.find("one block per core") != std::string::npos);
  }
  DeviceProps none = host_cpu();
  none.sm_count = 0;
  CHECK_THROWS_AS(duet::exact_occupancy(none, kernel(0), LaunchShape{256, 0}), duet::Error);
}

TEST_CASE("occupancy/tutorial: exact_occupancy dispatches on the vendor") {
  const auto a = duet::exact_occupancy(h100_sxm(), kernel(64), LaunchShape{256, 0});
  const auto b = duet::nvidia_exact_occupancy(h100_sxm(), kernel(64), LaunchShape{256, 0});
  CHECK(a.blocks_per_sm == b.blocks_per_sm);
  CHECK(a.note == b.note);
  CHECK(a.note.find("exact/NVIDIA sm_90") == 0);
  // The vendor-specific entry points refuse the other vendor's device.
  CHECK_THROWS_AS(duet::amd_exact_occupancy(h100_sxm(), kernel(64), LaunchShape{256, 0}),
                  duet::Error);
}

TEST_CASE("occupancy/tutorial: to_string(Limiter)") {
  CHECK(duet::to_string(Limiter::none) == "none");
  CHECK(duet::to_string(Limiter::registers) == "registers");
  CHECK(duet::to_string(Limiter::shared_memory) == "shared_memory");
  CHECK(duet::to_string(Limiter::warps) == "warps");
  CHECK(duet::to_string(Limiter::blocks) == "blocks");
}
