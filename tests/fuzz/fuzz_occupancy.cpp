// libFuzzer target: the occupancy models on structured hostile input.
//
// The bytes become a DeviceProps (NVIDIA, AMD, host, or an out-of-range
// vendor code), a KernelAttributes and a LaunchShape, mostly plausible and
// sometimes anything an int holds. The models are called directly, without
// props_from_json's validation in front of them: occupancy.hpp promises they
// validate their own input. Findings: a crash, ASan/UBSan report, an
// exception other than duet::Error, or a violated invariant (FUZZ_CHECK).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "duet/device_props.hpp"
#include "duet/error.hpp"
#include "duet/occupancy.hpp"
#include "fuzz_common.hpp"

namespace {

using namespace duet_fuzz;
using duet::BackendKind;
using duet::Vendor;

using Model = Occupancy (*)(const DeviceProps&, const KernelAttributes&, const LaunchShape&);

constexpr std::array<std::array<int, 2>, 16> kNvidiaCc{{{7, 0}, {7, 2}, {7, 5}, {8, 0}, {8, 6}, {8, 7}, {8, 9},
                                                        {9, 0}, {10, 0}, {10, 1}, {10, 3}, {11, 0}, {12, 0},
                                                        {12, 1}, {6, 1}, {13, 0}}};
constexpr std::array<const char*, 22> kAmdArch{
    "gfx803",  "gfx900",  "gfx906",  "gfx908",  "gfx90a",  "gfx940",  "gfx941",  "gfx942",
    "gfx950",  "gfx1010", "gfx1012", "gfx1030", "gfx1036", "gfx1100", "gfx1101", "gfx1102",
    "gfx1151", "gfx1200", "gfx1201", "gfx1250", "gfx700",  "gfx1300"};

DeviceProps fuzz_device(FuzzedDataProvider& p) {
  DeviceProps d;
  // Vendor: 1 in 16 a code outside the enumerators (a cast away in C++;
  // the models must refuse it, not guess).
  const int which = p.ConsumeIntegralInRange<int>(0, 15);
  d.vendor = which < 7 ? Vendor::nvidia : which < 14 ? Vendor::amd : which == 14 ? Vendor::host
                                                                                  : static_cast<Vendor>(pick<int>(p, 3, 255));
  d.backend = d.vendor == Vendor::nvidia ? BackendKind::cuda : d.vendor == Vendor::amd ? BackendKind::hip : BackendKind::host;
  d.name = "fuzz device";
  if (d.vendor == Vendor::amd) {
    const int how = p.ConsumeIntegralInRange<int>(0, 7);
    if (how == 0) {
      d.arch = p.ConsumeRandomLengthString(16);
    } else if (how == 1) {
      d.arch = "gfx" + p.ConsumeRandomLengthString(5);
    } else {
      d.arch = p.PickValueInArray(kAmdArch);
      if (p.ConsumeBool()) d.arch += ":sramecc+:xnack-";
    }
    d.warp_size = p.ConsumeBool() ? 64 : p.ConsumeBool() ? 32 : pick<int>(p, 1, 1024);
    d.register_pool = p.PickValueInArray({duet::RegisterPoolReport::not_applicable,
                                          duet::RegisterPoolReport::arch_vgprs_only,
                                          duet::RegisterPoolReport::unified_pool});
    d.cc_major = pick<int>(p, 8, 12);
    d.cc_minor = pick<int>(p, 0, 15);
  } else {
    if (p.ConsumeIntegralInRange<int>(0, 7) != 0) {
      const auto cc = p.PickValueInArray(kNvidiaCc);
      d.cc_major = cc[0];
      d.cc_minor = cc[1];
    } else {
      d.cc_major = pick<int>(p, 0, 20);
      d.cc_minor = pick<int>(p, 0, 10);
    }
    d.arch = "sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
    d.warp_size = p.ConsumeIntegralInRange<int>(0, 7) != 0 ? 32 : pick<int>(p, 1, 1024);
  }
  d.sm_count = pick<int>(p, 1, 512);
  d.regs_per_sm = p.ConsumeBool() ? p.PickValueInArray({32768, 65536, 131072}) : pick<int>(p, 1, 1 << 24);
  d.regs_per_block = p.ConsumeBool() ? d.regs_per_sm : pick<int>(p, 1, 1 << 24);
  d.max_threads_per_block = p.ConsumeBool() ? 1024 : pick<int>(p, 1, 4096);
  d.max_threads_per_sm = p.ConsumeBool() ? p.PickValueInArray({1024, 1536, 2048, 2560}) : pick<int>(p, 1, 1 << 16);
  d.max_blocks_per_sm = p.ConsumeBool() ? p.PickValueInArray({2, 16, 24, 32}) : pick<int>(p, 1, 1 << 12);
  d.smem_per_sm = p.ConsumeBool() ? p.PickValueInArray<std::int64_t>({65536, 102400, 167936, 233472})
                                  : pick<std::int64_t>(p, 1, 256 * 1024);
  d.smem_per_block = p.ConsumeBool() ? 49152 : pick<std::int64_t>(p, 1, 256 * 1024);
  d.smem_per_block_optin = p.ConsumeBool() ? std::max<std::int64_t>(d.smem_per_sm, 1024) - 1024 : pick<std::int64_t>(p, 0, 256 * 1024);
  d.smem_reserved_per_block = p.ConsumeBool() ? p.PickValueInArray<std::int64_t>({0, 1024})
                                              : pick<std::int64_t>(p, 0, 1 << 16);
  return d;
}

// Runs one model; returns its result, or nothing when it refused with
// duet::Error. Any other exception escapes to libFuzzer as a finding.
std::optional<Occupancy> run(Model model, const DeviceProps& d, const KernelAttributes& k, const LaunchShape& l) {
  try {
    return model(d, k, l);
  } catch (const duet::Error& e) {
    check_error(e);
    return std::nullopt;
  }
}

// Evaluates a model, checks its invariants and that it is a pure function.
std::optional<Occupancy> evaluate(Model model, bool exact, const DeviceProps& d, const KernelAttributes& k,
                                  const LaunchShape& l) {
  auto o = run(model, d, k, l);
  if (!o) return o;
  if (exact)
    check_exact(d, k, l, *o);
  else
    check_tutorial(d, k, l, *o);
  if (const auto again = run(model, d, k, l)) check_same(*o, *again);
  else FUZZ_CHECK(false, "second call refused what the first accepted");
  return o;
}

// Asking for more of a resource never lets more blocks fit (both models are
// non-increasing in registers, shared memory and threads per block).
void check_monotone(Model model, bool exact, const DeviceProps& d, const KernelAttributes& k, const LaunchShape& l,
                    const Occupancy& base, FuzzedDataProvider& p) {
  auto more = [&](KernelAttributes k2, LaunchShape l2, const char* what) {
    if (const auto o = run(model, d, k2, l2)) {
      if (exact) check_exact(d, k2, l2, *o);
      else check_tutorial(d, k2, l2, *o);
      FUZZ_CHECK(o->blocks_per_sm <= base.blocks_per_sm,
                 std::string(what) + ": " + describe(*o) + " vs base " + describe(base));
    }
  };
  // Only from in-range values, so the harness's own additions cannot overflow.
  if (k.regs_per_thread < 0 || k.regs_per_thread > (1 << 24) || k.static_smem_bytes < 0 ||
      k.static_smem_bytes > (std::int64_t(1) << 48) || l.dynamic_smem_bytes < 0 ||
      l.dynamic_smem_bytes > (std::int64_t(1) << 48) || l.threads_per_block < 0 || l.threads_per_block > (1 << 24))
    return;
  const int dr = p.ConsumeIntegralInRange<int>(1, 64);
  const std::int64_t ds = p.ConsumeIntegralInRange<std::int64_t>(1, 64 * 1024);
  const int dt = p.ConsumeIntegralInRange<int>(1, 512);
  {
    KernelAttributes k2 = k;
    k2.regs_per_thread += dr;
    more(k2, l, "more registers per thread");
  }
  {
    LaunchShape l2 = l;
    l2.dynamic_smem_bytes += ds;
    more(k, l2, "more dynamic shared memory");
  }
  {
    KernelAttributes k2 = k;
    k2.static_smem_bytes += ds;
    more(k2, l, "more static shared memory");
  }
  {
    LaunchShape l2 = l;
    l2.threads_per_block += dt;
    more(k, l2, "more threads per block");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider p(data, size);
  const DeviceProps d = fuzz_device(p);
  const KernelAttributes k = fuzz_kernel(p);
  const LaunchShape l = fuzz_launch(p);

  const auto tutorial = evaluate(&duet::tutorial_occupancy, false, d, k, l);
  const auto exact = evaluate(&duet::exact_occupancy, true, d, k, l);
  const auto nvidia = evaluate(&duet::nvidia_exact_occupancy, true, d, k, l);
  const auto amd = evaluate(&duet::amd_exact_occupancy, true, d, k, l);

  // exact_occupancy dispatches on the vendor: it agrees with the vendor's
  // model, and a vendor model refuses the other vendors' devices.
  if (d.vendor == Vendor::nvidia) {
    FUZZ_CHECK(!amd, "amd_exact_occupancy accepted an NVIDIA device");
    FUZZ_CHECK(exact.has_value() == nvidia.has_value(), "exact and nvidia_exact disagree on refusing");
    if (exact) check_same(*exact, *nvidia);
  } else if (d.vendor == Vendor::amd) {
    FUZZ_CHECK(!nvidia, "nvidia_exact_occupancy accepted an AMD device");
    FUZZ_CHECK(exact.has_value() == amd.has_value(), "exact and amd_exact disagree on refusing");
    if (exact) check_same(*exact, *amd);
  } else {
    FUZZ_CHECK(!nvidia && !amd, "a vendor model accepted a device of another vendor");
    // An unknown vendor code has no exact model.
    if (d.vendor != Vendor::host) FUZZ_CHECK(!exact, "exact_occupancy accepted an unknown vendor code");
  }

  if (exact && d.vendor != Vendor::host) check_monotone(&duet::exact_occupancy, true, d, k, l, *exact, p);
  if (tutorial && (d.vendor == Vendor::nvidia || d.vendor == Vendor::amd))
    check_monotone(&duet::tutorial_occupancy, false, d, k, l, *tutorial, p);
  return 0;
}
