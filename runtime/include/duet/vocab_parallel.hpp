// The local halves of vocabulary-parallel softmax and cross-entropy: each
// GPU (rank) holds a shard of every row's vocabulary, columns
// [vocab_start, vocab_start + cols) of rows of `vocab` classes. A row's
// result needs the whole row's max and sum, so a call runs in three steps:
//   1. shard statistics (ShardStatsCall), per row and shard
//        {max m_k, sum exp(x - m_k) s_k, x[t - vocab_start] or 0, sum x}
//      the target logit where the row's target falls in this shard;
//   2. a combine across the shards: the caller's collective (e.g. an
//      all-gather through torch.distributed or NCCL) brings every shard's
//      statistics to each rank, and ShardCombineCall gives the whole rows'
//      M = max_k m_k, S = sum_k s_k exp(m_k - M), lse = M + log S and the
//      cross-entropy loss, the target logits and the sums added;
//   3. normalize the shard (ShardSoftmaxCall: softmax or log_softmax from
//      M and log S, or from lse), or write the shard's cross-entropy gradient
//      (CrossEntropyBackwardCall with vocab_start and vocab,
//      duet/cross_entropy.hpp), which needs no communication.
// The cross-entropy loss follows from the combined statistics:
//   loss = (1 - eps) (lse - x_t) + eps (lse - sum x / vocab) + z_loss lse^2
// (duet/cross_entropy.hpp). duet.distributed (Python) composes the three
// steps over torch.distributed: one collective a forward.
//
// Arithmetic is float32 over f32/f16/bf16 storage. A shard whose row is all
// -inf has m = -inf and s = 0 (it adds nothing to the combine).
#pragma once

#include <cstdint>
#include <optional>

#include "duet/cross_entropy.hpp"
#include "duet/device.hpp"
#include "duet/export.h"
#include "duet/softmax.hpp"
#include "fused_args.hpp"

namespace duet {

// One row's statistics over one shard: the layout ShardStatsCall::stats holds.
struct ShardRowStats {
  float max;           // m_k; -inf for a row of -inf only
  float sum_exp;       // s_k = sum exp(x - m_k)
  float target_logit;  // x[t - vocab_start] for a target in this shard, else 0
  float sum;           // sum x (label smoothing's term)
};
static_assert(sizeof(ShardRowStats) == 16);

struct ShardStatsCall {
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;  // this shard's width, >= 1
  const void* x = nullptr;
  std::int64_t x_stride = 0;
  // Optional (target nullptr: target_logit is 0): one target a row, a class
  // of the whole vocabulary. A target outside [0, vocab) other than
  // ignore_index is invalid: the host backend throws invalid_argument
  // before writing anything; on a GPU that row's target_logit is NaN.
  IndexType target_type = IndexType::i64;
  const void* target = nullptr;
  std::int64_t target_stride = 1;
  std::int64_t ignore_index = -100;
  std::int64_t vocab_start = 0;  // this shard's first class, >= 0
  std::int64_t vocab = 0;        // classes of the whole row (0: vocab_start + cols); >= vocab_start + cols
  ShardRowStats* stats = nullptr;  // rows of them, 16-byte aligned
  void* stream = nullptr;
};
DUET_API void run(const Device& dev, const ShardStatsCall& call);

// The shard's part of the softmax (or log_softmax) of whole rows, given
// each row's combined statistics (rows floats each):
//   max null:  y = exp(x - lse), or x - lse; lse the rows' log-sum-exp;
//   max given: y = exp((x - max) - lse), or (x - max) - lse; max the rows'
//              max M and lse = log S, as the combine gives them. This form
//              keeps log_softmax exact to float32 near the row's max
//              (x - (M + log S) rounds to the spacing of M + log S).
// y may be x (same pointer and stride).
struct ShardSoftmaxCall {
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const void* x = nullptr;
  std::int64_t x_stride = 0;
  const float* lse = nullptr;
  const float* max = nullptr;
  bool log_softmax = false;
  void* y = nullptr;
  std::int64_t y_stride = 0;
  void* stream = nullptr;
};
DUET_API void run(const Device& dev, const ShardSoftmaxCall& call);

// Step 2: `shards` shards' statistics of the same rows (shard k's
// ShardRowStats at stats + k * rows, the layout of an all-gather) combined
// into the whole rows' max M, log S, lse = M + log S (rows floats each,
// every one optional) and, with targets, the cross-entropy loss (rows
// floats for reduction none, else one; ignore_index rows give 0 and do not
// count in the mean). The loss and the arithmetic are the single-device
// cross-entropy's (duet/cross_entropy.hpp); a target outside [0, vocab)
// other than ignore_index is refused as there (host: invalid_argument
// before writing anything; GPU: that row's lse and loss are NaN, the count
// in invalid_targets). The loss takes cross-entropy's workspace
// (cross_entropy_workspace_size of rows and the reduction) on GPUs; without
// a loss none is used.
struct ShardCombineCall {
  std::int64_t shards = 0;  // >= 1
  std::int64_t rows = 0;
  const ShardRowStats* stats = nullptr;
  // Targets: needed for the loss, else optional; classes of the whole vocabulary.
  IndexType target_type = IndexType::i64;
  const void* target = nullptr;
  std::int64_t target_stride = 1;
  std::int64_t vocab = 0;  // classes of the whole row, >= 1 with targets
  CrossEntropyOptions options{};
  float* max = nullptr;
  float* log_sum = nullptr;
  float* lse = nullptr;
  float* loss = nullptr;
  std::int32_t* invalid_targets = nullptr;
  void* stream = nullptr;
  std::optional<Workspace> workspace{};
};
DUET_API void run(const Device& dev, const ShardCombineCall& call);

}  // namespace duet
