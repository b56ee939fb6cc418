#include "duet/props_json.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

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

// "<origin>: <field> = <value>: <why>"
[[noreturn]] void refuse(const std::string& origin, const char* key, const std::string& value, const std::string& why) {
  fail(origin, std::string(key) + " = " + value + ": " + why);
}

// gfx + major (decimal, 1-2 digits) + minor and stepping (one hex digit
// each), then target features (":sramecc+", ":xnack-"): "gfx90a:xnack-".
// Returns the major, or -1 where the name has another shape.
int gfx_major(std::string_view arch) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  const std::string_view base = amd_base_arch(arch);
  if (base.size() < 6 || base.size() > 7 || base.substr(0, 3) != "gfx") return -1;
  const std::string_view major = base.substr(3, base.size() - 5);
  int value = 0;
  for (const char c : major) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  if (!hex(base[base.size() - 2]) || !hex(base.back())) return -1;
  for (std::string_view rest = arch.substr(base.size()); !rest.empty();) {
    const std::size_t end = rest.find(':', 1);
    const std::string_view feature = rest.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1);
    if (rest[0] != ':' || feature.size() < 2 || (feature.back() != '+' && feature.back() != '-')) return -1;
    for (const char c : feature.substr(0, feature.size() - 1))
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return -1;
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  }
  return value;
}

// What a GPU of the file's vendor can be: a warp of that vendor, an
// architecture duet knows the family of, and at least one warp's worth of
// threads, registers and shared memory (past the per-block reservation).
void check_gpu(const DeviceProps& d, const std::string& origin) {
  const std::string cc = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
  if (d.vendor == Vendor::nvidia) {
    if (d.warp_size != 32) refuse(origin, "warp_size", std::to_string(d.warp_size), "an NVIDIA warp is 32 threads");
    // 3.0 (Kepler) is the first architecture with warp shuffles, which every
    // duet kernel uses; nvidia_family names each major up to Blackwell.
    if (d.cc_minor > 9 || nvidia_family(d.cc_major, d.cc_minor) == "unknown")
      refuse(origin, "compute capability", cc, "not an NVIDIA architecture (3.0 Kepler .. 12.x Blackwell)");
    const std::string sm = "sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
    if (d.arch != sm && d.arch != sm + "a" && d.arch != sm + "f")
      refuse(origin, "arch", "\"" + d.arch + "\"", "compute capability " + cc + " is " + sm);
  } else {
    if (d.warp_size != 32 && d.warp_size != 64)
      refuse(origin, "warp_size", std::to_string(d.warp_size), "an AMD wavefront is 32 or 64 threads");
    const int major = gfx_major(d.arch);
    if (major < 0 || amd_family(d.arch) == "unknown")
      refuse(origin, "arch", "\"" + d.arch + "\"", "not an AMD GPU architecture duet knows (gfx9xx .. gfx12xx)");
    if (major != d.cc_major)
      refuse(origin, "cc_major", std::to_string(d.cc_major), d.arch + " is major " + std::to_string(major));
  }
  if (d.max_threads_per_block < d.warp_size)
    refuse(origin, "max_threads_per_block", std::to_string(d.max_threads_per_block), "less than one warp");
  if (d.max_threads_per_sm < d.warp_size)
    refuse(origin, "max_threads_per_sm", std::to_string(d.max_threads_per_sm), "less than one warp");
  if (d.max_threads_per_block > d.max_threads_per_sm && d.vendor == Vendor::nvidia)
    refuse(origin, "max_threads_per_block", std::to_string(d.max_threads_per_block),
           "exceeds max_threads_per_sm = " + std::to_string(d.max_threads_per_sm));
  if (d.regs_per_sm < d.warp_size)
    refuse(origin, "regs_per_sm", std::to_string(d.regs_per_sm), "less than one register for each thread of a warp");
  if (d.regs_per_block < d.warp_size)
    refuse(origin, "regs_per_block", std::to_string(d.regs_per_block), "less than one register for each thread of a warp");
  if (d.smem_per_sm < 1) refuse(origin, "smem_per_sm", std::to_string(d.smem_per_sm), "a GPU has shared memory");
  if (d.smem_per_sm < d.smem_reserved_per_block)
    refuse(origin, "smem_per_sm", std::to_string(d.smem_per_sm),
           "below smem_reserved_per_block = " + std::to_string(d.smem_reserved_per_block) + ": no block fits");
  if (d.smem_per_block_optin > d.smem_per_sm)
    refuse(origin, "smem_per_block_optin", std::to_string(d.smem_per_block_optin),
           "exceeds smem_per_sm = " + std::to_string(d.smem_per_sm));
}

std::string file_kind(std::filesystem::file_type t) {
  using std::filesystem::file_type;
  switch (t) {
    case file_type::directory: return "a directory";
    case file_type::fifo: return "a FIFO";
    case file_type::socket: return "a socket";
    case file_type::character: return "a character device";
    case file_type::block: return "a block device";
    default: return "a special file";
  }
}

}  // namespace

std::string printable(std::string_view text) {
  // Length of the valid UTF-8 sequence (RFC 3629: no overlong forms, no
  // surrogates, nothing past U+10FFFF) that starts at i, or 0.
  const auto sequence = [&](std::size_t i) -> std::size_t {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char b = byte(i);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // range of the second byte
    if (b >= 0xc2 && b <= 0xdf) n = 2;
    else if (b >= 0xe0 && b <= 0xef) n = 3, lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
    else if (b >= 0xf0 && b <= 0xf4) n = 4, lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
    else return 0;
    if (i + n > text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (std::size_t k = 2; k < n; ++k)
      if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
    return n;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    const std::size_t n = b < 0x80 ? (b >= 0x20 && b != 0x7f ? 1 : 0) : sequence(i);
    if (n == 0) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[b >> 4], kHex[b & 15]};
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

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
  if (d.source.empty()) d.source = printable(origin);

  // Cross-field sanity: what a real device of that vendor could report.
  if (d.vendor == Vendor::nvidia && d.backend != BackendKind::cuda) fail(origin, "vendor nvidia needs backend cuda");
  if (d.vendor == Vendor::amd && d.backend != BackendKind::hip) fail(origin, "vendor amd needs backend hip");
  if (d.is_gpu()) check_gpu(d, origin);
  return d;
}

DeviceProps load_props_file(const std::string& path) {
  // Only a regular file (after following links) is read: a FIFO would block
  // the open until a writer came, a device or /proc file never ends.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw Error(Status::io_error, "cannot open property file '" + path + "'" + (ec ? ": " + ec.message() : ""));
  if (!std::filesystem::is_regular_file(status))
    throw Error(Status::io_error, "property file '" + path + "' is not a regular file (" + file_kind(status.type()) + ")");
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
