#include "duet/vocab_parallel.hpp"

#include <string>
#include <vector>

#include "duet/error.hpp"
#include "fused_dispatch.hpp"
#include "validate.hpp"

namespace duet {
namespace {

using detail::Layout;
using detail::layout_of;
constexpr Status bad = Status::invalid_argument;

void check_shape(DType dtype, std::int64_t rows, std::int64_t cols) {
  require(rows >= 0 && cols >= 0, bad, [&] {
    return "rows and cols must be >= 0, got " + std::to_string(rows) + " x " + std::to_string(cols);
  });
  detail::check_dtype(dtype);
}

// Checks a statistics call and resolves its vocabulary; returns false for
// an empty call (nothing to write).
bool validate(const Device& dev, const ShardStatsCall& c, std::int64_t* vocab) {
  check_shape(c.dtype, c.rows, c.cols);
  detail::check_index_type(c.target_type);
  *vocab = detail::check_vocab(c.vocab_start, c.vocab, c.cols);
  if (c.rows == 0) return false;
  require(c.cols >= 1, bad, [] { return std::string("cols (the shard's width) must be >= 1 when rows > 0"); });
  detail::check_cols(c.cols);

  const int elem = dtype_size(c.dtype);
  detail::check_pointer(c.x, elem, "x", to_string(c.dtype).c_str());
  detail::check_stride(c.x_stride, c.cols, "x");
  const Layout x = layout_of(c.x, c.rows, c.cols, c.x_stride, elem, "x");
  // The statistics are written while x and the targets are read: apart from
  // both. 16-byte aligned, so that a GPU writes a row's four floats at once.
  detail::check_pointer(c.stats, 4, "stats", "float32");
  require(reinterpret_cast<std::uintptr_t>(c.stats) % 16 == 0, bad,
          [] { return std::string("stats is not 16-byte aligned (one 16-byte ShardRowStats a row)"); });
  const Layout stats = detail::span_of(c.stats, c.rows * std::int64_t(sizeof(ShardRowStats)), "stats");
  detail::check_apart(x, "x", stats, "stats", false);
  if (c.target != nullptr) {
    const Layout target = detail::check_targets(c.target, c.target_type, c.rows, c.target_stride);
    detail::check_apart(target, "target", stats, "stats", false);
  }
  detail::check_pointer_on(dev, c.x, "x");
  if (c.target != nullptr) detail::check_pointer_on(dev, c.target, "target");
  detail::check_pointer_on(dev, c.stats, "stats");
  return true;
}

// Checks a normalizing call; returns false for an empty call.
bool validate(const Device& dev, const ShardSoftmaxCall& c) {
  check_shape(c.dtype, c.rows, c.cols);
  if (c.rows == 0 || c.cols == 0) return false;
  detail::check_cols(c.cols);
  // y exactly in place over x or apart from it; lse read while y is written.
  const Layout y =
      detail::check_row_matrices(dev, c.dtype, c.rows, c.cols, c.x, c.x_stride, "x", nullptr, 0, c.y, c.y_stride, "y");
  detail::check_pointer(c.lse, 4, "lse", "float32");
  detail::check_apart(detail::span_of(c.lse, c.rows * 4, "lse"), "lse", y, "y", false);
  detail::check_pointer_on(dev, c.lse, "lse");
  if (c.max != nullptr) {
    detail::check_pointer(c.max, 4, "max", "float32");
    detail::check_apart(detail::span_of(c.max, c.rows * 4, "max"), "max", y, "y", false);
    detail::check_pointer_on(dev, c.max, "max");
  }
  return true;
}

// Checks a combine; gives the tensors' layouts for the workspace check and
// returns false for a call with nothing to write.
bool validate(const Device& dev, const ShardCombineCall& c, std::vector<detail::Named>* layouts) {
  require(c.shards >= 1, bad, [&] { return "shards must be >= 1, got " + std::to_string(c.shards); });
  require(c.rows >= 0, bad, [&] { return "rows must be >= 0, got " + std::to_string(c.rows); });
  detail::check_index_type(c.target_type);
  detail::check_cross_entropy_options(c.options);
  require(c.loss == nullptr || c.target != nullptr, bad,
          [] { return std::string("the loss needs the targets (target is a null pointer)"); });
  require(c.invalid_targets == nullptr || c.loss != nullptr, bad,
          [] { return std::string("invalid_targets counts the loss's rows: it needs the loss"); });
  require(c.target == nullptr || c.vocab >= 1, bad, [&] {
    return "vocab (the classes of the whole row) must be >= 1 with targets, got " + std::to_string(c.vocab);
  });
  require(c.vocab >= 0, bad, [&] { return "vocab must be >= 0, got " + std::to_string(c.vocab); });
  if (c.rows == 0) return false;
  require(c.rows <= detail::kMaxSpanBytes / std::int64_t(sizeof(ShardRowStats)) / c.shards, bad, [&] {
    return std::to_string(c.shards) + " shards of " + std::to_string(c.rows) + " rows overflow any address space";
  });
  detail::check_pointer(c.stats, 4, "stats", "float32");
  const Layout stats =
      detail::span_of(c.stats, c.shards * c.rows * std::int64_t(sizeof(ShardRowStats)), "stats");
  layouts->push_back({stats, "stats"});
  Layout target;
  if (c.target != nullptr) {
    target = detail::check_targets(c.target, c.target_type, c.rows, c.target_stride);
    layouts->push_back({target, "target"});
  }
  // Every output apart from the inputs and from each other.
  struct Output {
    const void* p;
    std::int64_t elems;
    const char* name;
    const char* elem_name;
  };
  const std::int64_t loss_floats = c.options.reduction == Reduction::none ? c.rows : 1;
  const Output outputs[] = {{c.max, c.rows, "max", "float32"},
                            {c.log_sum, c.rows, "log_sum", "float32"},
                            {c.lse, c.rows, "lse", "float32"},
                            {c.loss, loss_floats, "loss", "float32"},
                            {c.invalid_targets, 1, "invalid_targets", "int32"}};
  bool writes = false;
  for (const Output& o : outputs) {
    if (o.p == nullptr) continue;
    writes = true;
    detail::check_pointer(o.p, 4, o.name, o.elem_name);
    const Layout l = detail::span_of(o.p, o.elems * 4, o.name);
    for (const detail::Named& other : *layouts)
      detail::check_apart(l, o.name, other.layout, other.name, false);
    layouts->push_back({l, o.name});
  }
  detail::check_pointer_on(dev, c.stats, "stats");
  if (c.target != nullptr) detail::check_pointer_on(dev, c.target, "target");
  for (const Output& o : outputs)
    if (o.p != nullptr) detail::check_pointer_on(dev, o.p, o.name);
  return writes;
}

}  // namespace

void run(const Device& dev, const ShardStatsCall& c) {
  std::int64_t vocab = 0;
  if (!validate(dev, c, &vocab)) return;
  FusedArgs a;
  a.op = FusedOp::shard_stats;
  a.dtype = c.dtype;
  a.rows = c.rows;
  a.cols = c.cols;
  a.x = c.x;
  a.x_stride = c.x_stride;
  a.target = c.target;
  a.target_type = c.target_type;
  a.target_stride = c.target != nullptr ? c.target_stride : 1;
  a.ignore_index = c.ignore_index;
  a.vocab_start = c.vocab_start;
  a.vocab = vocab;
  a.stats = reinterpret_cast<float*>(c.stats);
  detail::launch_fused(dev, a, detail::fused_shape(a), c.stream);
}

void run(const Device& dev, const ShardSoftmaxCall& c) {
  if (!validate(dev, c)) return;
  FusedArgs a;
  a.op = FusedOp::shard_softmax;
  a.dtype = c.dtype;
  a.rows = c.rows;
  a.cols = c.cols;
  a.x = c.x;
  a.x_stride = c.x_stride;
  a.out = c.y;
  a.out_stride = c.y_stride;
  // An input here (FusedArgs shares the field with cross-entropy's forward).
  a.lse = const_cast<float*>(c.lse);
  a.row_max = c.max;
  a.log_softmax = c.log_softmax ? 1 : 0;
  detail::launch_fused(dev, a, detail::fused_shape(a), c.stream);
}

void run(const Device& dev, const ShardCombineCall& c) {
  std::vector<detail::Named> layouts;
  if (!validate(dev, c, &layouts)) return;
  FusedArgs a;
  a.op = FusedOp::shard_combine;
  a.rows = c.rows;
  // The combined rows' width: the whole vocabulary (1 where it plays no part).
  a.cols = c.vocab > 0 ? c.vocab : 1;
  a.vocab = a.cols;
  a.stats = const_cast<float*>(reinterpret_cast<const float*>(c.stats));  // read only here
  a.shards = c.shards;
  a.target = c.target;
  a.target_type = c.target_type;
  a.target_stride = c.target != nullptr ? c.target_stride : 1;
  a.ignore_index = c.options.ignore_index;
  a.label_smoothing = c.options.label_smoothing;
  a.z_loss = c.options.z_loss;
  a.reduction = c.options.reduction;
  a.combined_max = c.max;
  a.log_sum = c.log_sum;
  a.lse = c.lse;
  a.loss = c.loss;
  a.invalid_targets = c.invalid_targets;
  if (c.loss != nullptr)
    detail::launch_with_ce_workspace(dev, a, c.workspace, layouts, c.stream);
  else
    detail::launch_fused(dev, a, detail::fused_shape(a), c.stream);
}

}  // namespace duet
