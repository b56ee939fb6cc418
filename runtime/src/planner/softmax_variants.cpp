#include "softmax_variants.hpp"

namespace duet {

std::string to_string(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "unknown";
}

std::string to_string(Strategy s) {
  const auto i = static_cast<std::size_t>(s);
  return i < kFamilies.size() ? kFamilies[i].name : "unknown";
}

std::string variant_name(const Variant& v) {
  // The fields the family's kernels take as template arguments, in order,
  // the vector width and the entry's vpt always.
  const auto& params = family_of(v.strategy).params;
  const auto takes = [&](KernelParam p) {
    for (KernelParam q : params)
      if (q == p) return true;
    return false;
  };
  std::string name = to_string(v.strategy) + (v.backward ? "_bwd<" : "<") + to_string(v.dtype) + ",vec" +
                     std::to_string(v.vec);
  if (takes(KernelParam::group)) name += ",g" + std::to_string(v.group);
  name += ",v" + std::to_string(v.vpt);
  if (takes(KernelParam::rows)) name += ",r" + std::to_string(v.rows);
  if (v.edges) name += ",edges";
  name += ">";
  return name;
}

}  // namespace duet
