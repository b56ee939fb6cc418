#include "duet/kernel_resources.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>

#include "duet/error.hpp"
#include "recorded_reports.hpp"
#include "softmax_variants.hpp"

namespace duet {
namespace {

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

int to_int(const std::string& s) { return static_cast<int>(std::strtol(s.c_str(), nullptr, 10)); }

}  // namespace

std::map<std::string, KernelAttributes> parse_ptxas_report(const std::string& text, const std::string& target) {
  // ptxas info    : Compiling entry function '_Z...' for 'sm_90'
  // ptxas info    : Function properties for _Z...
  //     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  // ptxas info    : Used 32 registers, used 1 barriers, 256 bytes smem, ...
  static const std::regex entry(R"(Compiling entry function '([^']+)' for '([^']+)')");
  static const std::regex stack(R"((\d+) bytes stack frame)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::map<std::string, KernelAttributes> out;
  std::istringstream in(text);
  std::string line, current;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry)) {
      current = m[1];
      if (m[2] != target) current.clear();
      else {
        auto& k = out[current];
        k.name = current;
        k.source = "ptxas -v (" + target + ")";
      }
    } else if (!current.empty() && std::regex_search(line, m, stack)) {
      out[current].local_bytes_per_thread = to_int(m[1]);
    } else if (!current.empty() && std::regex_search(line, m, used)) {
      auto& k = out[current];
      k.regs_per_thread = to_int(m[1]);
      if (std::regex_search(line, m, smem)) k.static_smem_bytes = to_int(m[1]);
    }
  }
  return out;
}

std::map<std::string, KernelAttributes> parse_amdgpu_report(const std::string& text, const std::string& target) {
  // Function Name: _Z...
  //     SGPRs: 11 / VGPRs: 6 / AGPRs: 0 / ScratchSize [bytes/lane]: 0 / LDS Size [bytes/block]: 0
  static const std::regex field(R"(^\s*(Function Name|SGPRs|VGPRs|AGPRs|ScratchSize \[bytes/lane\]|LDS Size \[bytes/block\]):\s*(\S+))");
  std::map<std::string, KernelAttributes> out;
  std::istringstream in(text);
  std::string line, current;
  std::smatch m;
  while (std::getline(in, line)) {
    const auto r = line.find("remark:");
    if (r != std::string::npos) line = line.substr(r + 7);
    if (!std::regex_search(line, m, field)) continue;
    const std::string key = m[1], value = m[2];
    if (key == "Function Name") {
      current = value;
      auto& k = out[current];
      k.name = current;
      k.source = "amdgpu kernel-resource-usage (" + target + ")";
      continue;
    }
    if (current.empty()) continue;
    auto& k = out[current];
    if (key == "SGPRs") k.sgprs_per_wave = to_int(value);
    else if (key == "VGPRs") k.regs_per_thread = to_int(value);
    else if (key == "AGPRs") k.agprs_per_thread = to_int(value);
    else if (key.rfind("ScratchSize", 0) == 0) k.local_bytes_per_thread = to_int(value);
    else k.static_smem_bytes = to_int(value);
  }
  return out;
}

int variant_of_kernel(const std::string& mangled, bool* finalize) {
  // "void duet::cuda::kernels::group_rows_kernel<float, 4, 32, 2, 2, false, false>(duet::SoftmaxArgs)":
  // the family's name, the storage type, then the template arguments its
  // FamilyInfo::params list.
  static const std::regex shape(R"(kernels::(\w+)_kernel<([^<>]+)>)");
  const std::string name = demangle(mangled);
  std::smatch m;
  if (!std::regex_search(name, m, shape)) return -1;
  const std::string kernel = m[1];
  std::vector<std::string> args;
  {
    std::istringstream in(m[2].str());
    for (std::string a; std::getline(in, a, ',');) args.push_back(a.substr(a.find_first_not_of(' ')));
  }
  for (const FamilyInfo& f : kFamilies) {
    const std::string base = f.name;
    bool fin = false;
    if (f.two_kernels ? kernel != base + "_partial" && !(fin = kernel == base + "_finalize") : kernel != base)
      continue;
    std::size_t count = 0;
    while (count < f.params.size() && f.params[count] != KernelParam::end) ++count;
    if (args.size() != count + 1) return -1;
    const std::string& type = args[0];
    Variant v{};
    v.strategy = f.strategy;
    v.dtype = type == "float" ? DType::f32 : type.find("bf16_t") != std::string::npos ? DType::bf16 : DType::f16;
    v.edges = f.always_edges;
    for (std::size_t i = 0; i < count; ++i) {
      const std::string& a = args[i + 1];
      const int n = a == "true" ? 1 : a == "false" ? 0 : to_int(a);
      switch (f.params[i]) {
        case KernelParam::vec: v.vec = n; break;
        case KernelParam::group: v.group = n; break;
        case KernelParam::vpt: v.vpt = n; break;
        case KernelParam::rows: v.rows = n; break;
        case KernelParam::backward: v.backward = n != 0; break;
        case KernelParam::edges: v.edges = n != 0; break;
        case KernelParam::constant:
        case KernelParam::end: break;
      }
    }
    if (finalize != nullptr) *finalize = fin;
    return find_variant(v);
  }
  return -1;
}

std::vector<std::pair<std::string, std::string>> recorded_targets() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& r : detail::recorded_reports()) out.emplace_back(r.backend, r.target);
  return out;
}

std::string recorded_target_for(const DeviceProps& dev) {
  const std::string backend(to_string(dev.backend));
  std::string exact = dev.vendor == Vendor::amd ? std::string(amd_base_arch(dev.arch)) : dev.arch;
  std::string best;
  for (const auto& [b, t] : recorded_targets()) {
    if (b != backend) continue;
    if (t == exact) return t;
    if (dev.vendor == Vendor::nvidia) {
      // Same major compute capability, highest minor not above the device's.
      if (t.size() >= 5 && exact.size() >= 5 && t.substr(0, 4) == exact.substr(0, 4) && t <= exact && t > best) best = t;
    } else if (amd_family(t) == dev.family || (amd_is_cdna(t) && amd_is_cdna(exact) && amd_family(t) == amd_family(exact))) {
      best = t;
    }
  }
  if (best.empty() && dev.vendor == Vendor::amd) {
    // Same wavefront size at least (gfx1100 -> gfx1030: both wave32 RDNA).
    for (const auto& [b, t] : recorded_targets())
      if (b == backend && amd_is_cdna(t) == amd_is_cdna(exact) && t.substr(0, 4) == exact.substr(0, 4)) best = t;
  }
  return best;
}

KernelAttributes recorded_kernel_attributes(const DeviceProps& dev, int variant, bool finalize) {
  static std::mutex mutex;
  static std::map<std::string, std::map<int, KernelAttributes>> parsed;  // "backend/target" -> variant*2+finalize
  const std::string target = recorded_target_for(dev);
  if (target.empty())
    throw Error(Status::unsupported, "this build recorded no " + std::string(to_string(dev.backend)) +
                                         " resource report usable for " + dev.arch);
  const std::string key = std::string(to_string(dev.backend)) + "/" + target;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = parsed.find(key);
  if (it == parsed.end()) {
    std::map<int, KernelAttributes> by_variant;
    for (const auto& r : detail::recorded_reports()) {
      if (r.backend + "/" + r.target != key) continue;
      const auto kernels = r.backend == "cuda" ? parse_ptxas_report(r.text, r.target) : parse_amdgpu_report(r.text, r.target);
      for (const auto& [mangled, attrs] : kernels) {
        bool fin = false;
        const int v = variant_of_kernel(mangled, &fin);
        if (v < 0) continue;
        KernelAttributes a = attrs;
        a.name = variant_name(kCatalogue[static_cast<std::size_t>(v)]) + (fin ? ".finalize" : "");
        a.max_threads_per_block = max_threads_per_block(kCatalogue[static_cast<std::size_t>(v)]);
        by_variant[v * 2 + (fin ? 1 : 0)] = a;
      }
    }
    it = parsed.emplace(key, std::move(by_variant)).first;
  }
  const auto found = it->second.find(variant * 2 + (finalize ? 1 : 0));
  if (found == it->second.end())
    throw Error(Status::unsupported, "no recorded resources for " + variant_name(kCatalogue.at(static_cast<std::size_t>(variant))) +
                                         " on " + target);
  KernelAttributes a = found->second;
  if (target != (dev.vendor == Vendor::amd ? std::string(amd_base_arch(dev.arch)) : dev.arch))
    a.source += ", standing in for " + dev.arch;
  return a;
}

}  // namespace duet
