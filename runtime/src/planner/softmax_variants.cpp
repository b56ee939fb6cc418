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
  switch (s) {
    case Strategy::group_rows: return "group_rows";
    case Strategy::block_row: return "block_row";
    case Strategy::split_row: return "split_row";
    case Strategy::block_row_smem: return "block_row_smem";
    case Strategy::cluster_row: return "cluster_row";
    case Strategy::split_stream: return "split_stream";
    case Strategy::flat_rows: return "flat_rows";
    case Strategy::interleaved_rows: return "interleaved_rows";
  }
  return "unknown";
}

std::string variant_name(const Variant& v) {
  std::string name = to_string(v.strategy) + (v.backward ? "_bwd<" : "<") + to_string(v.dtype) + ",vec" +
                     std::to_string(v.vec);
  if (v.strategy == Strategy::group_rows) name += ",g" + std::to_string(v.group);
  name += ",v" + std::to_string(v.vpt);
  if (v.strategy == Strategy::group_rows) name += ",r" + std::to_string(v.rows);
  if (v.edges) name += ",edges";
  name += ">";
  return name;
}

}  // namespace duet
