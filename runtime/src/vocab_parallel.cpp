#include "duet/vocab_parallel.hpp"

#include <string>

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

}  // namespace duet
