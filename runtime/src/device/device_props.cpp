#include "duet/device_props.hpp"

#include <array>
#include <utility>

#include "duet/error.hpp"

namespace duet {

namespace {
template <class E, std::size_t N>
E parse_enum(std::string_view s, const std::array<std::pair<std::string_view, E>, N>& table,
             std::string_view what) {
  for (const auto& [name, value] : table)
    if (name == s) return value;
  std::string allowed;
  for (const auto& [name, value] : table) allowed += (allowed.empty() ? "" : ", ") + std::string(name);
  throw Error(Status::invalid_argument,
              "unknown " + std::string(what) + " '" + std::string(s) + "' (expected one of: " + allowed + ")");
}

constexpr std::array<std::pair<std::string_view, Vendor>, 3> kVendors{
    {{"host", Vendor::host}, {"nvidia", Vendor::nvidia}, {"amd", Vendor::amd}}};
constexpr std::array<std::pair<std::string_view, BackendKind>, 3> kBackends{
    {{"host", BackendKind::host}, {"cuda", BackendKind::cuda}, {"hip", BackendKind::hip}}};
constexpr std::array<std::pair<std::string_view, RegisterPoolReport>, 3> kPools{
    {{"not_applicable", RegisterPoolReport::not_applicable},
     {"arch_vgprs_only", RegisterPoolReport::arch_vgprs_only},
     {"unified_pool", RegisterPoolReport::unified_pool}}};

template <class E, std::size_t N>
std::string_view name_of(E v, const std::array<std::pair<std::string_view, E>, N>& table) noexcept {
  for (const auto& [name, value] : table)
    if (value == v) return name;
  return "unknown";
}
}  // namespace

std::string_view to_string(Vendor v) noexcept { return name_of(v, kVendors); }
std::string_view to_string(BackendKind b) noexcept { return name_of(b, kBackends); }
std::string_view to_string(RegisterPoolReport r) noexcept { return name_of(r, kPools); }
Vendor vendor_from_string(std::string_view s) { return parse_enum(s, kVendors, "vendor"); }
BackendKind backend_from_string(std::string_view s) { return parse_enum(s, kBackends, "backend"); }
RegisterPoolReport register_pool_report_from_string(std::string_view s) {
  return parse_enum(s, kPools, "register_pool");
}

double DeviceProps::peak_bandwidth_gbps() const noexcept {
  if (memory_bus_width_bits <= 0 || memory_clock_khz <= 0) return 0.0;
  // cudaDeviceProp::memoryClockRate is the DDR clock: data moves on both edges.
  return 2.0 * memory_clock_khz * 1e3 * (memory_bus_width_bits / 8.0) / 1e9;
}

std::string nvidia_family(int cc_major, int cc_minor) {
  switch (cc_major) {
    case 3: return "Kepler";
    case 5: return "Maxwell";
    case 6: return "Pascal";
    case 7: return cc_minor >= 5 ? "Turing" : "Volta";
    case 8: return cc_minor == 9 ? "Ada" : "Ampere";
    case 9: return "Hopper";
    case 10:
    case 11:  // sm_110 (Thor; sm_101 before CUDA 13)
    case 12: return "Blackwell";
    default: return "unknown";
  }
}

std::string_view amd_base_arch(std::string_view gfx_arch) noexcept {
  return gfx_arch.substr(0, gfx_arch.find(':'));
}

bool amd_is_cdna(std::string_view gfx_arch) noexcept {
  const auto base = amd_base_arch(gfx_arch);
  // gfx908 (CDNA1) introduced AccVGPRs; gfx90a and gfx94x/gfx950 unify them
  // with the VGPRs. The Triton tutorial lists gfx908..gfx942 as CDNA.
  return base == "gfx908" || base == "gfx90a" || base == "gfx940" || base == "gfx941" ||
         base == "gfx942" || base == "gfx950";
}

std::string amd_family(std::string_view gfx_arch) {
  const auto base = amd_base_arch(gfx_arch);
  if (base == "gfx908") return "CDNA1";
  if (base == "gfx90a") return "CDNA2";
  if (base == "gfx940" || base == "gfx941" || base == "gfx942") return "CDNA3";
  if (base == "gfx950") return "CDNA4";
  if (base.substr(0, 5) == "gfx10") return base.size() > 5 && base[5] == '3' ? "RDNA2" : "RDNA1";
  if (base.substr(0, 5) == "gfx11") return "RDNA3";
  if (base.substr(0, 5) == "gfx12") return "RDNA4";
  if (base.substr(0, 4) == "gfx9") return "GCN5";
  return "unknown";
}

}  // namespace duet
