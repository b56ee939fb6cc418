// Arguments of the fused row operations (scaled and masked softmax,
// cross-entropy): plain data, passed by value to every backend's kernels.
// The semantics each field carries are the public API's
// (duet/masked_softmax.hpp, duet/cross_entropy.hpp); the runtime has checked
// every field before a backend sees it.
#pragma once

#include <cstdint>

#include "row_divisor.hpp"
#include "softmax_args.hpp"
#include "softmax_variants.hpp"

namespace duet {

enum class FusedOp : int {
  masked_softmax = 0,           // out = softmax(scale * x + mask)
  masked_softmax_backward = 1,  // out = scale * y * (dy - sum(dy * y)), x holding y
  cross_entropy = 2,            // loss (and lse, and the gradient when out is set)
  cross_entropy_backward = 3,   // out = the gradient, from the forward's lse
  // Vocabulary-parallel halves (duet/vocab_parallel.hpp): x is one shard of
  // every row's vocabulary, columns [vocab_start, vocab_start + cols).
  shard_stats = 4,    // stats = per row {max, sum exp(x - max), x[t - vocab_start] or 0, sum x}
  shard_softmax = 5,  // out = exp(x - lse), or x - lse with log_softmax (x - row_max where given)
  // Every shard's statistics (stats, `shards` shards of rows) into the
  // whole rows' combined_max, log_sum, lse and loss (kernels/shard_combine.hpp).
  // Not a row kernel of the catalogue: no plan, one thread a row.
  shard_combine = 6,
  // softmax or log_softmax (log_softmax = 1) of 16-bit x (dtype) written
  // as float32: torch's softmax(x, dim, dtype=torch.float32) in one pass.
  widening_softmax = 7,
  // Its backward: dx of the 16-bit dtype from float32 y (x) and dy.
  widening_softmax_backward = 8,
};

// The dtype of each tensor of a row operation: `dtype` (FusedArgs::dtype,
// a catalogue entry's), but float32 for the widening softmax's y: its
// forward's output, and its backward's inputs. x and dy (the inputs) share
// one dtype in every operation.
constexpr DType fused_x_dtype(FusedOp op, DType dtype) {
  return op == FusedOp::widening_softmax_backward ? DType::f32 : dtype;
}
constexpr DType fused_out_dtype(FusedOp op, DType dtype) { return op == FusedOp::widening_softmax ? DType::f32 : dtype; }
constexpr bool widening(FusedOp op) {
  return op == FusedOp::widening_softmax || op == FusedOp::widening_softmax_backward;
}
// Elements of a vector-path pack: one 16-byte access of the row's widest
// tensor (the widening softmax's float32 one: its 16-bit tensor moves 8
// bytes a pack, so that every store and load of a warp covers whole
// 32-byte sectors, bench/NOTES.md v43).
constexpr int fused_vec(FusedOp op, DType dtype) { return widening(op) ? 4 : dtype_vec16(dtype); }

enum class MaskKind : int {
  none = 0,
  additive = 1,  // mask elements of the input's dtype, added after scaling
  boolean = 2,   // one byte an element; nonzero masks the element out
  causal = 3,    // no tensor: column j of query i is masked when j > i + causal_offset
};

enum class IndexType : int { i32 = 0, i64 = 1 };

enum class Reduction : int { none = 0, mean = 1, sum = 2 };

struct FusedArgs {
  FusedOp op = FusedOp::masked_softmax;
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const void* x = nullptr;  // scores, y (masked_softmax_backward) or logits
  std::int64_t x_stride = 0;
  const void* dy = nullptr;  // masked_softmax_backward only
  std::int64_t dy_stride = 0;
  void* out = nullptr;  // y, dx, or the cross-entropy gradient (nullptr: none)
  std::int64_t out_stride = 0;

  // Scaled, masked softmax. Row r is query i = r % seq_q of head
  // h = (r / seq_q) % heads of batch b = r / (seq_q * heads); its mask row
  // starts at mask + b * mask_batch_stride + h * mask_head_stride +
  // i * mask_row_stride (elements; 0 broadcasts), columns contiguous.
  float scale = 1.0f;
  MaskKind mask_kind = MaskKind::none;
  const void* mask = nullptr;
  std::int64_t heads = 1;
  std::int64_t seq_q = 1;
  std::int64_t mask_batch_stride = 0;
  std::int64_t mask_head_stride = 0;
  std::int64_t mask_row_stride = 0;
  std::int64_t causal_offset = 0;
  // seq_q and heads as divisors of row indices: the GPU launch sets them
  // from the two fields above.
  RowDivisor seq_q_divisor;
  RowDivisor heads_divisor;
  // A row with every element masked: 0 gives NaN (torch), 1 gives zeros.
  int zero_masked_rows = 0;

  // Cross-entropy.
  const void* target = nullptr;  // rows indices of target_type
  IndexType target_type = IndexType::i64;
  std::int64_t target_stride = 1;
  std::int64_t ignore_index = -100;
  float label_smoothing = 0.0f;
  float z_loss = 0.0f;
  Reduction reduction = Reduction::mean;
  float* loss = nullptr;               // rows floats (none) or one (mean, sum)
  float* lse = nullptr;                // forward: rows floats, optional; backward: input
  const float* grad_loss = nullptr;    // backward: rows floats (none) or one (mean, sum)
  std::int32_t* invalid_targets = nullptr;  // optional: count of rows whose target is out of range
  // A shard of the vocabulary (cross_entropy_backward, shard_stats): the
  // logits' columns are classes [vocab_start, vocab_start + cols) of `vocab`
  // (0: cols, not sharded). A target in [0, vocab) outside the shard is
  // valid and only has no one-hot term here; label smoothing divides by vocab.
  std::int64_t vocab_start = 0;
  std::int64_t vocab = 0;
  float* stats = nullptr;  // shard_stats: 4 floats a row, 16-byte aligned (shard_combine: shards of them, read)
  std::int64_t shards = 0;          // shard_combine: shards whose statistics stats holds
  float* combined_max = nullptr;    // shard_combine, optional: each row's M
  float* log_sum = nullptr;         // shard_combine, optional: each row's log S
  int log_softmax = 0;     // shard_softmax, widening_softmax(_backward): 1 is log_softmax's
  const float* row_max = nullptr;  // shard_softmax, optional: lse is then log S of x - row_max
  void* workspace = nullptr;           // cross_entropy_workspace_size bytes, 16-byte aligned
  // stream_row: bytes of dynamic shared memory that keep a row's first
  // packs between its two passes (the launch sets it from the plan's
  // geometry; 0 re-reads every chunk).
  std::int64_t stash_bytes = 0;
};

// Cross-entropy's workspace: two int32 counters at byte 0 (rows not
// ignored, rows with an invalid target; the launch zeroes them), then for
// reductions mean and sum one float per row at byte 16: the rows' losses,
// which the reduction adds in a fixed order (the same sum every run).
constexpr std::int64_t kCrossEntropyCountersBytes = 16;
// The classes a row's target may name: the whole vocabulary of a shard.
constexpr std::int64_t fused_vocab(const FusedArgs& a) { return a.vocab > 0 ? a.vocab : a.cols; }
constexpr std::int64_t cross_entropy_workspace_bytes(std::int64_t rows, Reduction reduction) {
  return kCrossEntropyCountersBytes + (reduction == Reduction::none ? 0 : (rows * 4 + 15) / 16 * 16);
}

// Where and how a GPU backend launches a fused operation (the planner's
// choice, duet/fused_planner.hpp); the host backend ignores it.
struct FusedLaunch {
  int variant = -1;
  LaunchGeometry geometry;
  // cluster_row: blocks a cluster, the blocks a row is cut over (the launch
  // takes the portable 8 where the device refuses more); otherwise 0.
  int cluster_blocks = 0;
};

}  // namespace duet
