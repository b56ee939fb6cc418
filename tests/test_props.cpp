// Property files: every shipped device file loads and survives a JSON round
// trip; hostile files fail with a clear error naming the field.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "duet/error.hpp"
#include "duet/props_json.hpp"

using namespace duet;
namespace fs = std::filesystem;

namespace {
const fs::path kDevices = fs::path(DUET_SOURCE_DIR) / "tools" / "deviceinfo" / "devices";

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}
}  // namespace

TEST_CASE("every shipped property file loads and round-trips") {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kDevices)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    INFO(entry.path().filename().string());
    const DeviceProps a = load_props_file(entry.path().string());
    CHECK(a.is_gpu());
    CHECK(a.sm_count > 0);
    CHECK((a.warp_size == 32 || a.warp_size == 64));
    const DeviceProps b = props_from_json(props_to_json(a));
    CHECK(b.name == a.name);
    CHECK(b.arch == a.arch);
    CHECK(b.sm_count == a.sm_count);
    CHECK(b.regs_per_sm == a.regs_per_sm);
    CHECK(b.smem_per_block_optin == a.smem_per_block_optin);
    CHECK(b.l2_bytes == a.l2_bytes);
    CHECK(b.register_pool == a.register_pool);
    CHECK(b.cluster_launch == a.cluster_launch);
    // Thread-block clusters: NVIDIA compute capability 9.0+ only (the files
    // do not say; the default follows the CUDA C Programming Guide).
    CHECK(a.cluster_launch == (a.vendor == Vendor::nvidia && a.cc_major >= 9));
    CHECK(props_to_json(b) == props_to_json(a));
    // Every value must name its source.
    const auto doc = nlohmann::json::parse(read(entry.path()));
    for (const char* key : {"sm_count", "regs_per_sm", "smem_per_sm", "warp_size", "l2_bytes", "memory_bus_width_bits"}) {
      INFO(key);
      CHECK(doc["sources"].contains(key));
    }
  }
  CHECK(files >= 9);
}

TEST_CASE("H200 file holds the values read on the device") {
  const DeviceProps h = load_props_file((kDevices / "h200.json").string());
  CHECK(h.sm_count == 132);
  CHECK(h.regs_per_sm == 65536);
  CHECK(h.smem_per_sm == 233472);
  CHECK(h.smem_per_block_optin == 232448);
  CHECK(h.smem_reserved_per_block == 1024);
  CHECK(h.max_threads_per_sm == 2048);
  CHECK(h.max_blocks_per_sm == 32);
  CHECK(h.l2_bytes == 62914560);
  CHECK(h.memory_bus_width_bits == 6016);
  CHECK(h.arch == "sm_90");
}

TEST_CASE("hostile property files give one clear error") {
  const std::string good = read(kDevices / "h100_sxm.json");
  auto mutate = [&](const std::function<void(nlohmann::json&)>& f) {
    auto j = nlohmann::json::parse(good);
    f(j["props"]);
    return j.dump();
  };
  struct Bad {
    std::string text;
    std::string mentions;
  };
  const std::vector<Bad> cases{
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {"[1,2]", "top level"},
      {"{\"props\": 3}", "'props'"},
      {mutate([](auto& p) { p.erase("sm_count"); }), "sm_count"},
      {mutate([](auto& p) { p["sm_count"] = "132"; }), "sm_count"},
      {mutate([](auto& p) { p["sm_count"] = -5; }), "sm_count"},
      {mutate([](auto& p) { p["sm_count"] = 0; }), "sm_count"},
      {mutate([](auto& p) { p["regs_per_sm"] = 1e30; }), "regs_per_sm"},
      {mutate([](auto& p) { p["warp_size"] = 48; }), "warp_size"},
      {mutate([](auto& p) { p["smem_per_sm"] = 18446744073709551615ull; }), "smem_per_sm"},
      {mutate([](auto& p) { p["vendor"] = "intel"; }), "vendor"},
      {mutate([](auto& p) { p["backend"] = "hip"; }), "backend"},
      {mutate([](auto& p) { p["register_pool"] = 7; }), "register_pool"},
      {mutate([](auto& p) { p["name"] = nullptr; }), "name"},
      {mutate([](auto& p) { p["smem_per_block_optin"] = 1 << 30; }), "smem_per_block_optin"},
      // Fuzz findings: a NUL ends nlohmann's input early; 1e400 overflowed
      // into a non-duet exception.
      {good + std::string(1, '\0') + "garbage", "NUL"},
      {"1e400", "not valid JSON"},
      {mutate([](auto& p) { p["sm_count"] = 1.5; }), "sm_count"},
      {mutate([](auto& p) { p["cluster_launch"] = "yes"; }), "cluster_launch"},
  };
  for (const auto& c : cases) {
    INFO(c.text.substr(0, 80));
    try {
      props_from_json(c.text, "test.json");
      FAIL("accepted a hostile file");
    } catch (const Error& e) {
      CHECK(e.status() == Status::parse_error);
      CHECK(std::string(e.what()).find(c.mentions) != std::string::npos);
      CHECK(std::string(e.what()).find("test.json") == 0);
    }
  }
  CHECK_THROWS_AS(load_props_file("/nonexistent/duet.json"), Error);
}
