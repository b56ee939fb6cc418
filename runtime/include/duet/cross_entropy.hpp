// Cross-entropy over the last dimension (the vocabulary), forward and
// backward, with torch.nn.functional.cross_entropy's class-index semantics:
//   lse_i  = log(sum_j exp(x_ij))
//   loss_i = lse_i - (1 - eps) x_i[t_i] - (eps / V) sum_j x_ij   (eps: label_smoothing)
//            + z_loss * lse_i^2
//   grad_ij = g_i * (softmax_ij * (1 + 2 z_loss lse_i) - (1 - eps) [j == t_i] - eps / V)
// with g_i the gradient of the reduced loss with respect to loss_i. Rows
// whose target is ignore_index give loss 0 and gradient 0 and do not count
// in the mean; the mean of rows that are all ignored is NaN (0 / 0, as
// torch). Arithmetic is float32 (sums of a row in float32 lanes combined in
// float32); losses and lse are float32 whatever the logits' dtype.
//
// The forward reads the logits once. Given `grad`, it also writes the
// gradient for an upstream gradient of 1 (of the mean or sum, or of every
// row's loss for reduction none): the memory-saving mode of Liger and quack,
// where grad may be the logits themselves (same pointer and stride). No
// float32 [rows, cols] intermediate is made in any mode.
//
// Targets: int32 or int64, one per row (target_stride elements apart).
// A target outside [0, cols) other than ignore_index is invalid:
//   host backend: the call throws invalid_argument before writing anything;
//   GPU backends: the device cannot refuse the launch, so such a row's loss,
//     lse and gradient are NaN (so a reduced loss is NaN), and, when
//     invalid_targets is given, the count of such rows is written there
//     (device memory, one int32; reading it synchronizes).
//
// GPU calls need a small workspace (cross_entropy_workspace_size; CUB's
// two-phase style as in duet/softmax.hpp): without one the call takes it
// from duet's per-stream cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "duet/device.hpp"
#include "duet/export.h"
#include "duet/softmax.hpp"
#include "fused_args.hpp"

namespace duet {

struct CrossEntropyOptions {
  std::int64_t ignore_index = -100;
  float label_smoothing = 0.0f;  // in [0, 1]
  float z_loss = 0.0f;           // >= 0, finite
  Reduction reduction = Reduction::mean;
};

struct CrossEntropyCall {
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;  // the vocabulary, >= 1
  const void* logits = nullptr;
  std::int64_t logits_stride = 0;
  IndexType target_type = IndexType::i64;
  const void* target = nullptr;
  std::int64_t target_stride = 1;
  CrossEntropyOptions options{};
  // Forward outputs: loss (rows floats for reduction none, else one), lse
  // (rows floats, optional), grad (optional, the logits' dtype).
  float* loss = nullptr;
  float* lse = nullptr;
  void* grad = nullptr;
  std::int64_t grad_stride = 0;
  std::int32_t* invalid_targets = nullptr;
  void* stream = nullptr;
  std::optional<Workspace> workspace{};
};

// Bytes of workspace a call of this shape needs on `dev`, forward or
// backward: cross_entropy_workspace_bytes (fused_args.hpp) on GPUs, 0 on the host.
DUET_API std::size_t cross_entropy_workspace_size(const Device& dev, std::int64_t rows, Reduction reduction);

// The forward: checks (throws duet::Error, writing nothing), plans, launches.
DUET_API void run(const Device& dev, const CrossEntropyCall& call);

struct CrossEntropyBackwardCall {
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const void* logits = nullptr;
  std::int64_t logits_stride = 0;
  IndexType target_type = IndexType::i64;
  const void* target = nullptr;
  std::int64_t target_stride = 1;
  CrossEntropyOptions options{};
  const float* lse = nullptr;        // the forward's, rows floats
  const float* grad_loss = nullptr;  // rows floats for reduction none, else one
  // A shard of the vocabulary (duet/vocab_parallel.hpp): the logits are
  // classes [vocab_start, vocab_start + cols) of `vocab` (0: vocab_start +
  // cols, so with vocab_start 0 the whole row). Targets are classes of the
  // whole row: one in [0, vocab) outside this shard adds no one-hot term
  // here, one outside [0, vocab) other than ignore_index is invalid (as
  // above); label smoothing divides by vocab.
  std::int64_t vocab_start = 0;
  std::int64_t vocab = 0;
  void* grad = nullptr;              // may be the logits (same pointer and stride)
  std::int64_t grad_stride = 0;
  void* stream = nullptr;
  std::optional<Workspace> workspace{};
};

// The backward from the forward's lse: reads the logits once, writes the
// gradient once.
DUET_API void run(const Device& dev, const CrossEntropyBackwardCall& call);

}  // namespace duet
