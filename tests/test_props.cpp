// Property files: every shipped device file loads and survives a JSON round
// trip; hostile files fail with a clear error naming the field.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

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

// Issue findings I/J: files no real GPU could match were listed with exit 0
// and refused only when a plan needed a recorded compiler report.
TEST_CASE("impossible GPU property files are refused where they are parsed") {
  const std::string h100 = read(kDevices / "h100_sxm.json");
  const std::string mi300x = read(kDevices / "mi300x.json");
  const auto mutate = [](const std::string& text, const std::function<void(nlohmann::json&)>& f) {
    auto j = nlohmann::json::parse(text);
    f(j["props"]);
    return j.dump();
  };
  struct Bad {
    std::string text;
    std::string says;  // "<field> = <value>: <why>"
  };
  const std::vector<Bad> cases{
      {mutate(h100, [](auto& p) { p["warp_size"] = 64; }), "warp_size = 64: an NVIDIA warp is 32 threads"},
      {mutate(h100, [](auto& p) { p["cc_major"] = 0, p["cc_minor"] = 0, p["arch"] = "sm_00"; }),
       "compute capability = 0.0: not an NVIDIA architecture"},
      {mutate(h100, [](auto& p) { p["cc_major"] = 2, p["arch"] = "sm_20"; }), "compute capability = 2.0"},
      {mutate(h100, [](auto& p) { p["cc_minor"] = 12, p["arch"] = "sm_912"; }), "compute capability = 9.12"},
      {mutate(h100, [](auto& p) { p["arch"] = "sm_80"; }), "arch = \"sm_80\": compute capability 9.0 is sm_90"},
      {mutate(h100, [](auto& p) { p["regs_per_block"] = 0; }), "regs_per_block = 0: less than one register"},
      {mutate(h100, [](auto& p) { p["regs_per_sm"] = 16; }), "regs_per_sm = 16"},
      {mutate(h100, [](auto& p) { p["smem_per_sm"] = 0, p["smem_per_block_optin"] = 0; }),
       "smem_per_sm = 0: a GPU has shared memory"},
      {mutate(h100, [](auto& p) { p["smem_per_sm"] = 512, p["smem_per_block_optin"] = 0; }),
       "smem_per_sm = 512: below smem_reserved_per_block = 1024"},
      {mutate(h100, [](auto& p) { p["max_threads_per_sm"] = 1; }), "max_threads_per_sm = 1: less than one warp"},
      {mutate(h100, [](auto& p) { p["max_threads_per_block"] = 16; }), "max_threads_per_block = 16"},
      {mutate(mi300x, [](auto& p) { p["arch"] = "gfxZZZ"; }), "arch = \"gfxZZZ\": not an AMD GPU architecture"},
      {mutate(mi300x, [](auto& p) { p["arch"] = "gfx810"; }), "arch = \"gfx810\""},
      {mutate(mi300x, [](auto& p) { p["arch"] = "gfx942:xnack"; }), "arch = \"gfx942:xnack\""},
      {mutate(mi300x, [](auto& p) { p["arch"] = "gfx942:"; }), "arch = \"gfx942:\""},
      {mutate(mi300x, [](auto& p) { p["cc_major"] = 10; }), "cc_major = 10: gfx942:sramecc+:xnack- is major 9"},
      {mutate(mi300x, [](auto& p) { p["warp_size"] = 16; }), "warp_size"},
  };
  for (const auto& c : cases) {
    INFO(c.says);
    try {
      props_from_json(c.text, "bad.json");
      FAIL("accepted an impossible device");
    } catch (const Error& e) {
      CHECK(e.status() == Status::parse_error);
      CHECK(std::string(e.what()).find("bad.json: " + c.says) == 0);
    }
  }
  // The edges of what is accepted: RDNA's wave32, a Blackwell "a" target,
  // gfx1100 (two-digit major), every shipped file (the test above).
  CHECK(props_from_json(mutate(mi300x, [](auto& p) { p["warp_size"] = 32; })).warp_size == 32);
  CHECK(props_from_json(mutate(h100, [](auto& p) { p["cc_major"] = 10, p["arch"] = "sm_100a"; })).cc_major == 10);
  CHECK(props_from_json(mutate(mi300x, [](auto& p) { p["arch"] = "gfx1100", p["cc_major"] = 11; })).arch == "gfx1100");
}

// Issue finding D: `deviceinfo --props FIFO` blocked forever in open().
TEST_CASE("only regular files are read as property files") {
  const fs::path dir = fs::temp_directory_path() / ("duet_props_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const std::string& path : {std::string("/dev/null"), dir.string()}) {
    INFO(path);
    try {
      load_props_file(path);
      FAIL("read a file that is not a regular file");
    } catch (const Error& e) {
      CHECK(e.status() == Status::io_error);
      CHECK(std::string(e.what()).find("is not a regular file") != std::string::npos);
    }
  }
  // A link to a regular file is followed.
  fs::create_symlink(kDevices / "h100_sxm.json", dir / "link.json");
  CHECK(load_props_file((dir / "link.json").string()).sm_count == 132);
  fs::remove_all(dir);
}

TEST_CASE("printable escapes what is not UTF-8 and control characters") {
  CHECK(printable("H100 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "H100 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(printable("a\xff.json") == "a\\xff.json");
  CHECK(printable("\x1b[2Jx\n") == "\\x1b[2Jx\\x0a");
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");           // overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(printable("\xe2\x82") == "\\xe2\\x82");           // cut short
  CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
  // A file without "source" gets its name, escaped, so its JSON can be written.
  auto j = nlohmann::json::parse(read(kDevices / "h100_sxm.json"));
  j["props"].erase("source");
  const DeviceProps d = props_from_json(j.dump(), "dev\xff.json");
  CHECK(d.source == "dev\\xff.json");
  CHECK(props_from_json(props_to_json(d)).source == d.source);
}
