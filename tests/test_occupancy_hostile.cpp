// Hostile input to the occupancy models: each bad property, kernel attribute
// or launch gives duet::Error(invalid_argument) with a message naming the
// field, zero-register kernels give a defined result, and 100k random
// hostile inputs only ever return or throw duet::Error.
#include <doctest/doctest.h>

#include <climits>
#include <cstdint>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "duet/error.hpp"
#include "device_fixtures.hpp"
#include "duet/occupancy.hpp"

namespace {

using duet::DeviceProps;
using duet::KernelAttributes;
using duet::LaunchShape;
using duet::Occupancy;

DeviceProps good_nvidia() { return duet::fixtures::h100(); }
DeviceProps good_amd() { return duet::fixtures::mi300x(); }

KernelAttributes good_kernel() {
  KernelAttributes k;
  k.regs_per_thread = 32;
  return k;
}

using Model = std::function<Occupancy(const DeviceProps&, const KernelAttributes&,
                                      const LaunchShape&)>;

const std::vector<std::pair<const char*, Model>>& models() {
  static const std::vector<std::pair<const char*, Model>> m = {
      {"tutorial", [](auto& d, auto& k, auto& l) { return duet::tutorial_occupancy(d, k, l); }},
      {"exact", [](auto& d, auto& k, auto& l) { return duet::exact_occupancy(d, k, l); }},
  };
  return m;
}

// Runs every model; each must throw duet::Error(invalid_argument) whose
// message mentions `field`.
void expect_invalid(const DeviceProps& d, const KernelAttributes& k, const LaunchShape& l,
                    const std::string& field) {
  for (const auto& entry : models()) {
    const char* name = entry.first;
    const Model& model = entry.second;
    CAPTURE(name);
    CAPTURE(field);
    CHECK_THROWS_AS(model(d, k, l), duet::Error);
    try {
      (void)model(d, k, l);
    } catch (const duet::Error& e) {
      CHECK(e.status() == duet::Status::invalid_argument);
      const std::string msg = e.what();
      CAPTURE(msg);
      CHECK(msg.find(field) != std::string::npos);
    }
  }
}

}  // namespace

TEST_CASE("occupancy/hostile: bad device properties name the field") {
  const LaunchShape l{256, 0};
  for (const DeviceProps& base : {good_nvidia(), good_amd()}) {
    CAPTURE(base.name);
    auto with = [&](auto mutate) {
      DeviceProps d = base;
      mutate(d);
      return d;
    };
    expect_invalid(with([](DeviceProps& d) { d.sm_count = 0; }), good_kernel(), l, "sm_count");
    expect_invalid(with([](DeviceProps& d) { d.sm_count = -5; }), good_kernel(), l, "sm_count");
    expect_invalid(with([](DeviceProps& d) { d.sm_count = INT_MAX; }), good_kernel(), l,
                   "sm_count");
    expect_invalid(with([](DeviceProps& d) { d.warp_size = 0; }), good_kernel(), l, "warp_size");
    expect_invalid(with([](DeviceProps& d) { d.warp_size = 48; }), good_kernel(), l, "warp_size");
    expect_invalid(with([](DeviceProps& d) { d.warp_size = -32; }), good_kernel(), l, "warp_size");
    expect_invalid(with([](DeviceProps& d) { d.regs_per_sm = 0; }), good_kernel(), l,
                   "regs_per_sm");
    expect_invalid(with([](DeviceProps& d) { d.max_threads_per_sm = 0; }), good_kernel(), l,
                   "max_threads_per_sm");
    expect_invalid(with([](DeviceProps& d) { d.max_threads_per_block = 0; }), good_kernel(),
                   LaunchShape{1, 0}, "max_threads_per_block");
    expect_invalid(with([](DeviceProps& d) { d.max_blocks_per_sm = -1; }), good_kernel(), l,
                   "max_blocks_per_sm");
    expect_invalid(with([](DeviceProps& d) { d.smem_per_sm = -1; }), good_kernel(), l,
                   "smem_per_sm");
    expect_invalid(with([](DeviceProps& d) { d.smem_per_sm = 0; }), good_kernel(), l,
                   "smem_per_sm");
    expect_invalid(with([](DeviceProps& d) { d.smem_per_sm = INT64_MAX; }), good_kernel(), l,
                   "smem_per_sm");
    expect_invalid(with([](DeviceProps& d) { d.smem_per_block = -65536; }), good_kernel(), l,
                   "smem_per_block");
    expect_invalid(with([](DeviceProps& d) { d.smem_per_block_optin = -1; }), good_kernel(), l,
                   "smem_per_block_optin");
    expect_invalid(with([](DeviceProps& d) { d.smem_reserved_per_block = -1024; }), good_kernel(),
                   l, "smem_reserved_per_block");
  }
  // NVIDIA-only fields.
  DeviceProps d = good_nvidia();
  d.regs_per_block = 0;
  CHECK_THROWS_AS(duet::exact_occupancy(d, good_kernel(), l), duet::Error);
  d = good_nvidia();
  d.cc_major = 0;
  CHECK_THROWS_WITH_AS(duet::exact_occupancy(d, good_kernel(), l), doctest::Contains("cc_major"),
                       duet::Error);
  d.cc_major = -3;
  CHECK_THROWS_AS(duet::exact_occupancy(d, good_kernel(), l), duet::Error);
  // AMD-only: the arch string.
  DeviceProps a = good_amd();
  a.arch = "";
  CHECK_THROWS_WITH_AS(duet::exact_occupancy(a, good_kernel(), l), doctest::Contains("dev.arch"),
                       duet::Error);
  a.arch = "gfx9";
  CHECK_THROWS_AS(duet::exact_occupancy(a, good_kernel(), l), duet::Error);
  a.arch = "gfx94z";
  CHECK_THROWS_AS(duet::exact_occupancy(a, good_kernel(), l), duet::Error);
}

TEST_CASE("occupancy/hostile: bad kernel attributes and launches name the field") {
  for (const DeviceProps& d : {good_nvidia(), good_amd()}) {
    CAPTURE(d.name);
    KernelAttributes k = good_kernel();
    k.regs_per_thread = -1;
    expect_invalid(d, k, LaunchShape{256, 0}, "regs_per_thread");
    k = good_kernel();
    k.static_smem_bytes = -1;
    expect_invalid(d, k, LaunchShape{256, 0}, "static_smem_bytes");
    k = good_kernel();
    k.max_threads_per_block = 0;
    expect_invalid(d, k, LaunchShape{256, 0}, "max_threads_per_block");
    k = good_kernel();
    k.sgprs_per_wave = -7;
    expect_invalid(d, k, LaunchShape{256, 0}, "sgprs_per_wave");

    // threads_per_block: 0, negative, above the device, above the kernel.
    expect_invalid(d, good_kernel(), LaunchShape{0, 0}, "threads_per_block");
    expect_invalid(d, good_kernel(), LaunchShape{-64, 0}, "threads_per_block");
    expect_invalid(d, good_kernel(), LaunchShape{INT_MIN, 0}, "threads_per_block");
    expect_invalid(d, good_kernel(), LaunchShape{1025, 0}, "dev.max_threads_per_block");
    k = good_kernel();
    k.max_threads_per_block = 256;  // __launch_bounds__(256)
    expect_invalid(d, k, LaunchShape{512, 0}, "k.max_threads_per_block");

    // Shared memory: negative dynamic, and above the opt-in limit.
    expect_invalid(d, good_kernel(), LaunchShape{256, -1}, "dynamic_smem_bytes");
    expect_invalid(d, good_kernel(), LaunchShape{256, INT64_MIN}, "dynamic_smem_bytes");
    const std::int64_t limit = std::max(d.smem_per_block, d.smem_per_block_optin);
    expect_invalid(d, good_kernel(), LaunchShape{256, limit + 1}, "opt-in limit");
    k = good_kernel();
    k.static_smem_bytes = limit;
    expect_invalid(d, k, LaunchShape{256, 1}, "opt-in limit");
    expect_invalid(d, good_kernel(), LaunchShape{256, INT64_MAX}, "dynamic_smem_bytes");
  }
}

TEST_CASE("occupancy/hostile: zero-register kernels have a defined result") {
  KernelAttributes k = good_kernel();
  k.regs_per_thread = 0;
  for (const DeviceProps& d : {good_nvidia(), good_amd()}) {
    CAPTURE(d.name);
    for (const auto& entry : models()) {
      const char* name = entry.first;
      const Model& model = entry.second;
      CAPTURE(name);
      Occupancy o;
      REQUIRE_NOTHROW(o = model(d, k, LaunchShape{256, 0}));
      CHECK(o.blocks_per_sm > 0);
      CHECK(o.by_registers > 0);
    }
  }
  // NVIDIA: more registers than the calculator allows -> 0 blocks, not a crash.
  k.regs_per_thread = 100000;
  const Occupancy o = duet::exact_occupancy(good_nvidia(), k, LaunchShape{256, 0});
  CHECK(o.blocks_per_sm == 0);
  CHECK(o.limiter == duet::Limiter::registers);
  // The tutorial divides and gets 0 as well.
  CHECK(duet::tutorial_occupancy(good_nvidia(), k, LaunchShape{256, 0}).blocks_per_sm == 0);
}

TEST_CASE("occupancy/hostile: 100k random hostile inputs only return or throw duet::Error") {
  std::mt19937_64 rng(0xbadc0deULL);
  auto pick = [&](std::initializer_list<std::int64_t> values) {
    auto it = values.begin();
    std::advance(it, std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(rng));
    return *it;
  };
  // Each input starts from a valid one and breaks a few fields (sometimes
  // none), so both the checks and the arithmetic behind them are exercised.
  auto nasty_int = [&]() -> int {
    if (rng() % 3 == 0) return static_cast<int>(rng());
    return static_cast<int>(pick({INT_MIN, -1, 0, 1, 3, 31, 32, 33, 48, 64, 65, 255, 256, 1023,
                                  1024, 1025, 65536, INT_MAX}));
  };
  auto nasty_bytes = [&]() -> std::int64_t {
    if (rng() % 3 == 0) return static_cast<std::int64_t>(rng());
    return pick({INT64_MIN, -1, 0, 1, 127, 128, 1024, 49152, 65536, 101376, 232448, 233472,
                 std::int64_t{1} << 40, (std::int64_t{1} << 40) + 1, INT64_MAX});
  };
  const char* arches[] = {"sm_90",  "gfx942", "gfx942:sramecc+:xnack-", "gfx90a", "gfx908",
                          "gfx1100", "gfx1030", "gfx1010", "gfx1201",  "gfx906", "gfx803",
                          "gfx700", "gfx9",    "gfxzzz",  "",         "gfx10000", "gfx950",
                          "gfx9-4-generic", "x86_64"};
  int ok = 0, errors = 0, other = 0, negative = 0;
  for (int i = 0; i < 100000; ++i) {
    DeviceProps d = (rng() % 2) ? good_nvidia() : good_amd();
    KernelAttributes k;
    k.regs_per_thread = static_cast<int>(rng() % 257);
    k.agprs_per_thread = rng() % 4 == 0 ? static_cast<int>(rng() % 257) : 0;
    k.sgprs_per_wave = static_cast<int>(rng() % 110);
    k.static_smem_bytes = static_cast<std::int64_t>(rng() % 32768);
    LaunchShape l;
    l.threads_per_block = static_cast<int>(1 + rng() % 1024);
    l.dynamic_smem_bytes = static_cast<std::int64_t>(rng() % 32768);
    if (rng() % 4 == 0) d.arch = arches[rng() % std::size(arches)];
    const int breaks = static_cast<int>(rng() % 4);
    for (int b = 0; b < breaks; ++b) {
      switch (rng() % 26) {
        case 0: d.vendor = static_cast<duet::Vendor>(rng() % 3); break;
        case 1: d.cc_major = nasty_int(); break;
        case 2: d.cc_minor = nasty_int(); break;
        case 3: d.sm_count = nasty_int(); break;
        case 4: d.warp_size = nasty_int(); break;
        case 5: d.regs_per_sm = nasty_int(); break;
        case 6: d.regs_per_block = nasty_int(); break;
        case 7: d.max_threads_per_block = nasty_int(); break;
        case 8: d.max_threads_per_sm = nasty_int(); break;
        case 9: d.max_blocks_per_sm = nasty_int(); break;
        case 10: d.register_pool = static_cast<duet::RegisterPoolReport>(rng() % 3); break;
        case 11: d.smem_per_sm = nasty_bytes(); break;
        case 12: d.smem_per_block = nasty_bytes(); break;
        case 13: d.smem_per_block_optin = nasty_bytes(); break;
        case 14: d.smem_reserved_per_block = nasty_bytes(); break;
        case 15: k.regs_per_thread = nasty_int(); break;
        case 16: k.agprs_per_thread = nasty_int(); break;
        case 17: k.sgprs_per_wave = nasty_int(); break;
        case 18: k.static_smem_bytes = nasty_bytes(); break;
        case 19: k.local_bytes_per_thread = nasty_bytes(); break;
        case 20: k.max_threads_per_block = nasty_int(); break;
        case 21: l.threads_per_block = nasty_int(); break;
        case 22: l.dynamic_smem_bytes = nasty_bytes(); break;
        case 23: d.arch = arches[rng() % std::size(arches)]; break;
        case 24: d.warp_size = static_cast<int>(pick({32, 64})); break;
        default: d.smem_per_sm = static_cast<std::int64_t>(rng() % (256 * 1024)); break;
      }
    }

    for (const auto& entry : models()) {
      const Model& model = entry.second;
      try {
        const Occupancy o = model(d, k, l);
        ++ok;
        if (o.blocks_per_sm < 0 || o.by_registers < 0 || o.by_shared_memory < 0 ||
            o.by_warps < 0 || o.by_blocks < 0)
          ++negative;
      } catch (const duet::Error&) {
        ++errors;
      } catch (...) {
        ++other;
      }
    }
  }
  MESSAGE("hostile loop: " << ok << " results, " << errors << " duet::Error");
  CHECK(other == 0);
  CHECK(negative == 0);
  CHECK(ok > 20000);  // the loop also exercises the arithmetic, not only the checks
}
