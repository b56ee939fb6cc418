#include "duet/props_json.hpp"

#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "duet/error.hpp"

namespace duet {
namespace {

using json = nlohmann::json;

// Bounds generous enough for any real device, tight enough that the
// occupancy arithmetic cannot overflow on what passes.
constexpr std::int64_t kMaxCount = 1 << 20;
constexpr std::int64_t kMaxBytes = std::int64_t(1) << 50;

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw Error(Status::parse_error, origin + ": " + what);
}

const json& field(const json& o, const char* key, const std::string& origin) {
  const auto it = o.find(key);
  if (it == o.end()) fail(origin, std::string("missing field '") + key + "'");
  return *it;
}

std::int64_t integer(const json& o, const char* key, std::int64_t lo, std::int64_t hi, const std::string& origin) {
  const json& v = field(o, key, origin);
  if (!v.is_number_integer())
    fail(origin, std::string("field '") + key + "' must be an integer, got " + std::string(v.type_name()));
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(origin, std::string("field '") + key + "' is out of range");
    x = static_cast<std::int64_t>(u);
  } else {
    x = v.get<std::int64_t>();
  }
  if (x < lo || x > hi)
    fail(origin, std::string("field '") + key + "' = " + std::to_string(x) + " is outside [" + std::to_string(lo) +
                     ", " + std::to_string(hi) + "]");
  return x;
}

std::string text(const json& o, const char* key, const std::string& origin, bool required = true) {
  const auto it = o.find(key);
  if (it == o.end()) {
    if (required) fail(origin, std::string("missing field '") + key + "'");
    return {};
  }
  if (!it->is_string()) fail(origin, std::string("field '") + key + "' must be a string, got " + std::string(it->type_name()));
  const auto s = it->get<std::string>();
  if (s.size() > 4096) fail(origin, std::string("field '") + key + "' is longer than 4096 characters");
  return s;
}

template <class E, class F>
E enumeration(const json& o, const char* key, F parse, const std::string& origin) {
  const auto s = text(o, key, origin);
  try {
    return parse(s);
  } catch (const Error& e) {
    fail(origin, std::string("field '") + key + "': " + e.what());
  }
}

}  // namespace

std::string props_to_json(const DeviceProps& d, int indent) {
  json p = {
      {"name", d.name},
      {"vendor", std::string(to_string(d.vendor))},
      {"backend", std::string(to_string(d.backend))},
      {"arch", d.arch},
      {"family", d.family},
      {"cc_major", d.cc_major},
      {"cc_minor", d.cc_minor},
      {"ordinal", d.ordinal},
      {"sm_count", d.sm_count},
      {"warp_size", d.warp_size},
      {"regs_per_sm", d.regs_per_sm},
      {"regs_per_block", d.regs_per_block},
      {"max_threads_per_block", d.max_threads_per_block},
      {"max_threads_per_sm", d.max_threads_per_sm},
      {"max_blocks_per_sm", d.max_blocks_per_sm},
      {"register_pool", std::string(to_string(d.register_pool))},
      {"cooperative_launch", d.cooperative_launch},
      {"cluster_launch", d.cluster_launch},
      {"smem_per_sm", d.smem_per_sm},
      {"smem_per_block", d.smem_per_block},
      {"smem_per_block_optin", d.smem_per_block_optin},
      {"smem_reserved_per_block", d.smem_reserved_per_block},
      {"l2_bytes", d.l2_bytes},
      {"memory_bytes", d.memory_bytes},
      {"memory_bus_width_bits", d.memory_bus_width_bits},
      {"memory_clock_khz", d.memory_clock_khz},
      {"peak_bandwidth_gbps", d.peak_bandwidth_gbps()},
      {"driver_version", d.driver_version},
      {"runtime_version", d.runtime_version},
      {"simd_width_bytes", d.simd_width_bytes},
      {"l1d_bytes", d.l1d_bytes},
      {"l3_bytes", d.l3_bytes},
      {"source", d.source},
  };
  return json{{"schema", kPropsSchema}, {"props", p}}.dump(indent);
}

DeviceProps props_from_json(const std::string& input, const std::string& origin) {
  // nlohmann's parser stops at a NUL byte and accepts whatever preceded it;
  // no valid JSON text contains one (fuzz finding).
  if (input.find('\0') != std::string::npos) fail(origin, "not valid JSON: contains a NUL byte");
  json doc;
  try {
    doc = json::parse(input);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400 (fuzz finding)
    fail(origin, std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) fail(origin, "top level must be an object");
  if (doc.contains("schema") && text(doc, "schema", origin) != kPropsSchema)
    fail(origin, "schema '" + text(doc, "schema", origin) + "' is not " + kPropsSchema);
  const json& p = doc.contains("props") ? doc["props"] : doc;
  if (!p.is_object()) fail(origin, "'props' must be an object");

  DeviceProps d;
  d.name = text(p, "name", origin);
  d.vendor = enumeration<Vendor>(p, "vendor", vendor_from_string, origin);
  d.backend = enumeration<BackendKind>(p, "backend", backend_from_string, origin);
  d.arch = text(p, "arch", origin);
  d.family = text(p, "family", origin, false);
  d.cc_major = static_cast<int>(integer(p, "cc_major", 0, 1000, origin));
  d.cc_minor = static_cast<int>(integer(p, "cc_minor", 0, 1000, origin));
  d.ordinal = p.contains("ordinal") ? static_cast<int>(integer(p, "ordinal", 0, kMaxCount, origin)) : 0;
  d.sm_count = static_cast<int>(integer(p, "sm_count", 1, kMaxCount, origin));
  d.warp_size = static_cast<int>(integer(p, "warp_size", 1, 1024, origin));
  d.regs_per_sm = static_cast<int>(integer(p, "regs_per_sm", 0, 1 << 24, origin));
  d.regs_per_block = static_cast<int>(integer(p, "regs_per_block", 0, 1 << 24, origin));
  d.max_threads_per_block = static_cast<int>(integer(p, "max_threads_per_block", 1, kMaxCount, origin));
  d.max_threads_per_sm = static_cast<int>(integer(p, "max_threads_per_sm", 1, kMaxCount, origin));
  d.max_blocks_per_sm = static_cast<int>(integer(p, "max_blocks_per_sm", 1, kMaxCount, origin));
  d.register_pool = p.contains("register_pool")
                        ? enumeration<RegisterPoolReport>(p, "register_pool", register_pool_report_from_string, origin)
                        : RegisterPoolReport::not_applicable;
  // Every GPU duet's property files model supports cooperative launch
  // (compute capability 6.0+, gfx9+); a file may say otherwise. Informational.
  d.cooperative_launch = d.is_gpu();
  if (p.contains("cooperative_launch")) {
    if (!p["cooperative_launch"].is_boolean()) fail(origin, "field 'cooperative_launch' must be true or false");
    d.cooperative_launch = p["cooperative_launch"].get<bool>();
  }
  // Thread-block clusters: NVIDIA compute capability 9.0 and later (CUDA C
  // Programming Guide, "Thread Block Clusters"), unless the file says.
  d.cluster_launch = d.vendor == Vendor::nvidia && d.cc_major >= 9;
  if (p.contains("cluster_launch")) {
    if (!p["cluster_launch"].is_boolean()) fail(origin, "field 'cluster_launch' must be true or false");
    d.cluster_launch = p["cluster_launch"].get<bool>();
  }
  d.smem_per_sm = integer(p, "smem_per_sm", 0, kMaxBytes, origin);
  d.smem_per_block = integer(p, "smem_per_block", 0, kMaxBytes, origin);
  d.smem_per_block_optin = integer(p, "smem_per_block_optin", 0, kMaxBytes, origin);
  d.smem_reserved_per_block = integer(p, "smem_reserved_per_block", 0, kMaxBytes, origin);
  d.l2_bytes = integer(p, "l2_bytes", 0, kMaxBytes, origin);
  d.memory_bytes = integer(p, "memory_bytes", 0, kMaxBytes, origin);
  d.memory_bus_width_bits = static_cast<int>(integer(p, "memory_bus_width_bits", 0, kMaxCount, origin));
  d.memory_clock_khz = static_cast<int>(integer(p, "memory_clock_khz", 0, 1 << 30, origin));
  auto optional_int = [&](const char* key, std::int64_t hi) -> std::int64_t {
    return p.contains(key) ? integer(p, key, 0, hi, origin) : 0;
  };
  d.driver_version = static_cast<int>(optional_int("driver_version", 1 << 30));
  d.runtime_version = static_cast<int>(optional_int("runtime_version", 1 << 30));
  d.simd_width_bytes = static_cast<int>(optional_int("simd_width_bytes", 4096));
  d.l1d_bytes = optional_int("l1d_bytes", kMaxBytes);
  d.l3_bytes = optional_int("l3_bytes", kMaxBytes);
  d.source = text(p, "source", origin, false);
  if (d.source.empty()) d.source = origin;

  // Cross-field sanity: what a real device of that vendor could report.
  if (d.vendor == Vendor::nvidia && d.backend != BackendKind::cuda) fail(origin, "vendor nvidia needs backend cuda");
  if (d.vendor == Vendor::amd && d.backend != BackendKind::hip) fail(origin, "vendor amd needs backend hip");
  if (d.is_gpu()) {
    if (d.warp_size != 32 && d.warp_size != 64) fail(origin, "field 'warp_size' must be 32 or 64 on a GPU");
    if (d.regs_per_sm < 1) fail(origin, "field 'regs_per_sm' must be positive on a GPU");
    if (d.max_threads_per_block > d.max_threads_per_sm && d.max_threads_per_sm > 0 && d.vendor == Vendor::nvidia)
      fail(origin, "field 'max_threads_per_block' exceeds 'max_threads_per_sm'");
    if (d.smem_per_block_optin > d.smem_per_sm) fail(origin, "field 'smem_per_block_optin' exceeds 'smem_per_sm'");
  }
  return d;
}

DeviceProps load_props_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Status::io_error, "cannot open property file '" + path + "'");
  std::ostringstream ss;
  constexpr std::streamsize kLimit = 1 << 20;
  std::string buf(static_cast<std::size_t>(kLimit) + 1, '\0');
  in.read(buf.data(), kLimit + 1);
  if (in.bad()) throw Error(Status::io_error, "cannot read property file '" + path + "'");
  if (in.gcount() > kLimit) throw Error(Status::io_error, "property file '" + path + "' is larger than 1 MiB");
  buf.resize(static_cast<std::size_t>(in.gcount()));
  return props_from_json(buf, path);
}

}  // namespace duet
