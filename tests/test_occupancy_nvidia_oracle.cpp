// duet::nvidia_exact_occupancy against the CUDA toolkit's own occupancy
// calculator (cuda_occupancy.h, header-only), used here only as a test
// oracle. Built only where the CUDA toolkit headers exist.
//
// The oracle is driven the way a real launch looks after
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
// optin - static): FUNC_SHMEM_LIMIT_OPTIN, partitioned global caching off,
// one block barrier (what cudaFuncAttributes converts to), default device
// state (no carve-out preference).
#include <doctest/doctest.h>

#include <cuda_occupancy.h>

#include <climits>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "duet/error.hpp"
#include "device_fixtures.hpp"
#include "duet/occupancy.hpp"

namespace {

using duet::DeviceProps;
using duet::KernelAttributes;
using duet::LaunchShape;

// Real device properties (cudaGetDeviceProperties on each part).
using duet::fixtures::h100;
using duet::fixtures::nvidia_gpu;

DeviceProps a100() { return nvidia_gpu("NVIDIA A100", 8, 0, 108, 167936, 166912, 1024, 2048, 32); }
DeviceProps rtx3090() {
  return nvidia_gpu("NVIDIA GeForce RTX 3090", 8, 6, 82, 102400, 101376, 1024, 1536, 16);
}
DeviceProps rtx4090() {
  return nvidia_gpu("NVIDIA GeForce RTX 4090", 8, 9, 128, 102400, 101376, 1024, 1536, 24);
}
// Extra coverage of the other tables the calculator has.
DeviceProps v100() { return nvidia_gpu("Tesla V100", 7, 0, 80, 98304, 98304, 0, 2048, 32); }
DeviceProps t4() { return nvidia_gpu("Tesla T4", 7, 5, 40, 65536, 65536, 0, 1024, 16); }
DeviceProps b200() { return nvidia_gpu("NVIDIA B200", 10, 0, 148, 233472, 232448, 1024, 2048, 32); }
DeviceProps rtx5090() {
  return nvidia_gpu("NVIDIA GeForce RTX 5090", 12, 0, 170, 102400, 101376, 1024, 1536, 24);
}

cudaOccDeviceProp occ_props(const DeviceProps& d) {
  cudaOccDeviceProp p;
  p.computeMajor = d.cc_major;
  p.computeMinor = d.cc_minor;
  p.maxThreadsPerBlock = d.max_threads_per_block;
  p.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  p.regsPerBlock = d.regs_per_block;
  p.regsPerMultiprocessor = d.regs_per_sm;
  p.warpSize = d.warp_size;
  p.sharedMemPerBlock = static_cast<size_t>(d.smem_per_block);
  p.sharedMemPerMultiprocessor = static_cast<size_t>(d.smem_per_sm);
  p.numSms = d.sm_count;
  p.sharedMemPerBlockOptin = static_cast<size_t>(d.smem_per_block_optin);
  p.reservedSharedMemPerBlock = static_cast<size_t>(d.smem_reserved_per_block);
  return p;
}

cudaOccFuncAttributes occ_attrs(const DeviceProps& d, const KernelAttributes& k) {
  cudaOccFuncAttributes a;
  a.maxThreadsPerBlock = k.max_threads_per_block;
  a.numRegs = k.regs_per_thread;
  a.sharedSizeBytes = static_cast<size_t>(k.static_smem_bytes);
  a.partitionedGCConfig = PARTITIONED_GC_OFF;
  a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
  const std::int64_t max_dyn = d.smem_per_block_optin - k.static_smem_bytes;
  a.maxDynamicSharedSizeBytes = static_cast<size_t>(max_dyn > 0 ? max_dyn : 0);
  a.numBlockBarriers = 1;
  a.virtualResourceCount = 0;
  return a;
}

struct OracleAnswer {
  cudaOccError status = CUDA_OCC_SUCCESS;
  cudaOccResult result{};
};

OracleAnswer ask_oracle(const DeviceProps& d, const KernelAttributes& k, const LaunchShape& l) {
  const cudaOccDeviceProp p = occ_props(d);
  const cudaOccFuncAttributes a = occ_attrs(d, k);
  const cudaOccDeviceState state;
  OracleAnswer ans;
  ans.status = cudaOccMaxActiveBlocksPerMultiprocessor(
      &ans.result, &p, &a, &state, l.threads_per_block,
      static_cast<size_t>(l.dynamic_smem_bytes));
  return ans;
}

unsigned limiter_bit(duet::Limiter l) {
  switch (l) {
    case duet::Limiter::warps: return OCC_LIMIT_WARPS;
    case duet::Limiter::registers: return OCC_LIMIT_REGISTERS;
    case duet::Limiter::shared_memory: return OCC_LIMIT_SHARED_MEMORY;
    case duet::Limiter::blocks: return OCC_LIMIT_BLOCKS;
    case duet::Limiter::none: return 0;
  }
  return 0;
}

// Compares one configuration; returns an empty string on agreement, a
// description otherwise.
std::string compare_one(const DeviceProps& d, const KernelAttributes& k, const LaunchShape& l) {
  std::ostringstream where;
  where << d.name << " regs=" << k.regs_per_thread << " threads=" << l.threads_per_block
        << " static=" << k.static_smem_bytes << " dynamic=" << l.dynamic_smem_bytes << ": ";
  const OracleAnswer o = ask_oracle(d, k, l);
  duet::Occupancy mine;
  try {
    mine = duet::nvidia_exact_occupancy(d, k, l);
  } catch (const duet::Error& e) {
    if (o.status != CUDA_OCC_SUCCESS) return "";  // both reject
    where << "we threw '" << e.what() << "', oracle gave "
          << o.result.activeBlocksPerMultiprocessor;
    return where.str();
  }
  if (o.status != CUDA_OCC_SUCCESS) {
    where << "oracle error " << o.status << ", we gave " << mine.blocks_per_sm;
    return where.str();
  }
  const cudaOccResult& r = o.result;
  if (mine.blocks_per_sm != r.activeBlocksPerMultiprocessor) {
    where << "blocks " << mine.blocks_per_sm << " vs oracle " << r.activeBlocksPerMultiprocessor
          << " (" << mine.note << ")";
    return where.str();
  }
  // Our limiter must be one of the oracle's limiting factors.
  if ((r.limitingFactors & limiter_bit(mine.limiter)) == 0) {
    where << "limiter " << duet::to_string(mine.limiter) << " not in oracle factors 0x" << std::hex
          << r.limitingFactors;
    return where.str();
  }
  // Per-resource limits: the oracle's INT_MAX ("unused") is our block limit.
  auto same = [&](int ours, int theirs) {
    return ours == (theirs == INT_MAX ? mine.by_blocks : theirs);
  };
  if (!same(mine.by_registers, r.blockLimitRegs) ||
      !same(mine.by_shared_memory, r.blockLimitSharedMem) ||
      !same(mine.by_warps, r.blockLimitWarps) || !same(mine.by_blocks, r.blockLimitBlocks)) {
    where << "by_* " << mine.by_registers << "/" << mine.by_shared_memory << "/" << mine.by_warps
          << "/" << mine.by_blocks << " vs oracle " << r.blockLimitRegs << "/"
          << r.blockLimitSharedMem << "/" << r.blockLimitWarps << "/" << r.blockLimitBlocks;
    return where.str();
  }
  return "";
}

struct Tally {
  int runs = 0;
  int disagreements = 0;
  std::vector<std::string> first;
  void add(const std::string& diff) {
    ++runs;
    if (diff.empty()) return;
    ++disagreements;
    if (first.size() < 5) first.push_back(diff);
  }
  void report() const {
    for (const auto& f : first) MESSAGE("disagreement: " << f);
  }
};

// One random configuration: registers 1..255, block sizes mostly 32..1024
// (a third not a multiple of 32, some below 32), shared memory 0..opt-in
// split between static and dynamic.
void random_config(std::mt19937_64& rng, const DeviceProps& d, KernelAttributes& k,
                   LaunchShape& l) {
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  k = KernelAttributes{};
  k.regs_per_thread = static_cast<int>(uni(1, 255));
  switch (uni(0, 5)) {
    case 0:
    case 1: l.threads_per_block = static_cast<int>(32 * uni(1, 32)); break;
    case 2: l.threads_per_block = static_cast<int>(uni(1, 1024)); break;
    default: l.threads_per_block = static_cast<int>(uni(32, 1024)); break;
  }
  std::int64_t total = 0;
  switch (uni(0, 4)) {
    case 0: total = 0; break;
    case 1: total = uni(0, 4096); break;  // small: exercises the 128 B rounding
    default: total = uni(0, d.smem_per_block_optin); break;
  }
  k.static_smem_bytes = uni(0, total);
  l.dynamic_smem_bytes = total - k.static_smem_bytes;
}

}  // namespace

TEST_CASE("occupancy/nvidia oracle: random configurations on sm_80, sm_86, sm_89, sm_90") {
  std::mt19937_64 rng(0x5eed0cc0ULL);
  Tally tally;
  for (const DeviceProps& d : {a100(), rtx3090(), rtx4090(), h100()}) {
    for (int i = 0; i < 3000; ++i) {
      KernelAttributes k;
      LaunchShape l;
      random_config(rng, d, k, l);
      tally.add(compare_one(d, k, l));
    }
  }
  tally.report();
  MESSAGE("compared " << tally.runs << " configurations, " << tally.disagreements
                      << " disagreements");
  CHECK(tally.runs >= 10000);
  CHECK(tally.disagreements == 0);
}

TEST_CASE("occupancy/nvidia oracle: other architectures (sm_70, sm_75, sm_100, sm_120)") {
  std::mt19937_64 rng(0xc0ffeeULL);
  Tally tally;
  for (const DeviceProps& d : {v100(), t4(), b200(), rtx5090()}) {
    for (int i = 0; i < 500; ++i) {
      KernelAttributes k;
      LaunchShape l;
      random_config(rng, d, k, l);
      if (l.threads_per_block > d.max_threads_per_sm) l.threads_per_block = d.max_threads_per_sm;
      tally.add(compare_one(d, k, l));
    }
  }
  tally.report();
  CHECK(tally.disagreements == 0);
}

TEST_CASE("occupancy/nvidia oracle: register edge cases (0 registers, 255, 256, above the cap)") {
  Tally tally;
  for (const DeviceProps& d : {a100(), h100(), rtx4090()}) {
    for (int regs : {0, 1, 2, 31, 32, 33, 64, 65, 72, 80, 96, 128, 168, 200, 232, 254, 255, 256,
                     257, 300, 1000}) {
      for (int threads : {1, 32, 33, 64, 96, 100, 128, 192, 256, 288, 320, 384, 512, 640, 768,
                          1000, 1024}) {
        KernelAttributes k;
        k.regs_per_thread = regs;
        LaunchShape l;
        l.threads_per_block = threads;
        tally.add(compare_one(d, k, l));
      }
    }
  }
  tally.report();
  CHECK(tally.disagreements == 0);
}

TEST_CASE("occupancy/nvidia oracle: shared-memory boundaries around the carve-out steps") {
  Tally tally;
  for (const DeviceProps& d : {a100(), rtx3090(), h100()}) {
    for (std::int64_t kib : {0, 1, 7, 8, 15, 16, 31, 32, 47, 48, 63, 64, 99, 100, 131, 132, 163,
                             164, 195, 196, 227}) {
      for (std::int64_t delta : {-1025, -1024, -1023, -129, -128, -1, 0, 1, 127, 128}) {
        const std::int64_t total = kib * 1024 + delta;
        if (total < 0 || total > d.smem_per_block_optin) continue;
        for (int split = 0; split < 3; ++split) {
          KernelAttributes k;
          k.regs_per_thread = 32;
          LaunchShape l;
          l.threads_per_block = 128;
          k.static_smem_bytes = split == 0 ? total : split == 1 ? 0 : total / 2;
          l.dynamic_smem_bytes = total - k.static_smem_bytes;
          tally.add(compare_one(d, k, l));
        }
      }
    }
  }
  tally.report();
  CHECK(tally.disagreements == 0);
}

TEST_CASE("occupancy/nvidia oracle: hypothetical devices exercise rules real ones hide") {
  // On shipping parts regs_per_block == regs_per_sm and smem_per_sm is one
  // of the carve-out sizes, which hides two rules: the hardware's per-block
  // register check (warps rounded up to the 4 sub-partitions) and the
  // carve-out round-up (of smem_per_sm, and of a block larger than it).
  std::vector<DeviceProps> devices;
  DeviceProps half_regs = a100();
  half_regs.name = "A100 with 32768 registers per block";
  half_regs.regs_per_block = 32768;
  devices.push_back(half_regs);
  DeviceProps odd_smem = rtx3090();
  odd_smem.name = "sm_86 with 100000 B per SM";
  odd_smem.smem_per_sm = 100000;  // carve-out rounds up to 100 KiB
  odd_smem.smem_per_block_optin = 99000;
  devices.push_back(odd_smem);
  DeviceProps small_sm = h100();
  small_sm.name = "sm_90 with 150000 B per SM";
  small_sm.smem_per_sm = 150000;  // 164 KiB carve-out; bigger blocks need 196/228 KiB
  devices.push_back(small_sm);
  std::mt19937_64 rng(0xfeedULL);
  Tally tally;
  for (const DeviceProps& d : devices) {
    for (int i = 0; i < 800; ++i) {
      KernelAttributes k;
      LaunchShape l;
      random_config(rng, d, k, l);
      tally.add(compare_one(d, k, l));
    }
  }
  tally.report();
  CHECK(tally.disagreements == 0);
}

TEST_CASE("occupancy/nvidia oracle: configurations the oracle rejects make us throw") {
  struct Case {
    const char* what;
    DeviceProps dev;
    KernelAttributes k;
    LaunchShape l;
  };
  KernelAttributes k32;
  k32.regs_per_thread = 32;
  const LaunchShape l128{128, 0};
  std::vector<Case> cases;
  {
    Case c{"block size 0", h100(), k32, LaunchShape{0, 0}};
    cases.push_back(c);
  }
  {
    KernelAttributes k = k32;
    k.regs_per_thread = -1;
    cases.push_back({"negative registers", h100(), k, l128});
  }
  {
    DeviceProps d = h100();
    d.sm_count = 0;
    cases.push_back({"no SMs", d, k32, l128});
  }
  {
    DeviceProps d = a100();
    d.warp_size = 0;
    cases.push_back({"warp size 0", d, k32, l128});
  }
  {
    DeviceProps d = a100();
    d.regs_per_sm = 0;
    cases.push_back({"no registers", d, k32, l128});
  }
  {
    DeviceProps d = a100();
    d.max_threads_per_sm = 0;
    cases.push_back({"no threads per SM", d, k32, l128});
  }
  {
    DeviceProps d = a100();
    d.smem_per_block = 0;
    cases.push_back({"no shared memory per block", d, k32, l128});
  }
  {
    DeviceProps d = h100();
    d.cc_major = 13;
    cases.push_back({"unknown compute capability 13.0", d, k32, l128});
  }
  {
    DeviceProps d = b200();
    d.cc_minor = 2;
    cases.push_back({"unknown Blackwell minor 10.2", d, k32, l128});
  }
  {
    DeviceProps d = rtx3090();
    d.smem_per_sm = 200 * 1024;  // above the largest sm_86 carve-out (100 KiB)
    cases.push_back({"smem_per_sm above the largest carve-out", d, k32, l128});
  }
  {
    DeviceProps d = h100();
    d.cc_major = 5;  // Maxwell: known to the oracle, outside our model
    d.cc_minor = 2;
    d.smem_reserved_per_block = 0;
    cases.push_back({"sm_52 (out of our range)", d, k32, l128});
  }
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const OracleAnswer o = ask_oracle(c.dev, c.k, c.l);
    if (std::string(c.what) == "sm_52 (out of our range)") {
      CHECK(o.status == CUDA_OCC_SUCCESS);  // the oracle knows Maxwell; we do not
    } else {
      CHECK(o.status != CUDA_OCC_SUCCESS);
    }
    CHECK_THROWS_AS(duet::nvidia_exact_occupancy(c.dev, c.k, c.l), duet::Error);
  }
}

TEST_CASE("occupancy/nvidia oracle: where the oracle answers 0 for an impossible launch we throw") {
  // The calculator reports 0 blocks (no error) for a block above the device's
  // limit and for shared memory above the opt-in limit; duet calls both an
  // invalid argument instead.
  const DeviceProps d = h100();
  KernelAttributes k;
  k.regs_per_thread = 32;
  k.max_threads_per_block = 2048;
  LaunchShape too_big{1056, 0};
  OracleAnswer o = ask_oracle(d, k, too_big);
  CHECK(o.status == CUDA_OCC_SUCCESS);
  CHECK(o.result.activeBlocksPerMultiprocessor == 0);
  CHECK_THROWS_AS(duet::nvidia_exact_occupancy(d, k, too_big), duet::Error);

  KernelAttributes k2;
  k2.regs_per_thread = 32;
  k2.static_smem_bytes = 1024;
  LaunchShape over{128, d.smem_per_block_optin};  // 1 KiB over the opt-in limit in total
  o = ask_oracle(d, k2, over);
  CHECK(o.status == CUDA_OCC_SUCCESS);
  CHECK(o.result.activeBlocksPerMultiprocessor == 0);
  CHECK_THROWS_AS(duet::nvidia_exact_occupancy(d, k2, over), duet::Error);
}

TEST_CASE("occupancy/nvidia oracle: the toolkit's blocks-per-SM table matches the test devices") {
  // cudaOccMaxBlocksPerMultiprocessor is internal to the header, but its
  // value shows up as blockLimitBlocks.
  for (const DeviceProps& d : {a100(), rtx3090(), rtx4090(), h100(), v100(), t4(), b200(),
                               rtx5090()}) {
    CAPTURE(d.name);
    KernelAttributes k;
    k.regs_per_thread = 16;
    const OracleAnswer o = ask_oracle(d, k, LaunchShape{32, 0});
    REQUIRE(o.status == CUDA_OCC_SUCCESS);
    CHECK(o.result.blockLimitBlocks == d.max_blocks_per_sm);
    const duet::Occupancy mine = duet::nvidia_exact_occupancy(d, k, LaunchShape{32, 0});
    CHECK(mine.note.find("toolkit's table says") == std::string::npos);
  }
}
