// Scaled, masked softmax over the last dimension, forward and backward, one
// pass each: y = softmax(scale * x + mask), the attention-score softmax of
// Megatron's scaled_masked_softmax and scaled_upper_triang_masked_softmax,
// and sampling's softmax with a temperature (scale = 1 / temperature).
//
// Rows are the flattened [batch, heads, seq_q] leading dimensions of the
// scores; each row has cols (seq_k) elements. Masks:
//   none      y = softmax(scale * x)
//   additive  y = softmax(scale * x + m), m of the scores' dtype (-inf masks)
//   boolean   one byte an element, nonzero = masked out (as Tensor.masked_fill
//             and Megatron take it; the opposite of scaled_dot_product_attention's
//             attn_mask, where true means "take part")
//   causal    no tensor read: column j of query i is masked out when
//             j > i + causal_offset (0: torch.tril's square convention;
//             seq_k - seq_q: the bottom-right alignment of FlashAttention)
// A mask tensor is [batch or 1, heads or 1, seq_q, seq_k] through its
// strides: a stride of 0 broadcasts it over that dimension (a
// [B, 1, Sq, Sk] mask over [B, H, Sq, Sk] scores has head_stride 0); its
// columns are contiguous.
// A row whose every element is masked out gives NaN (torch's softmax of a
// row of -inf), or zeros with zero_masked_rows (what attention wants).
//
// The backward needs no mask: dx = scale * y * (dy - sum(dy * y)), which is
// 0 wherever y is (every masked element).
// Pointers, strides, streams and errors are as in duet/softmax.hpp; in place
// (x == y, and in the backward dx == dy or dx == y) is allowed.
#pragma once

#include <cstdint>

#include "duet/device.hpp"
#include "duet/export.h"
#include "fused_args.hpp"

namespace duet {

struct Mask {
  MaskKind kind = MaskKind::none;
  const void* data = nullptr;  // additive: scores' dtype; boolean: bytes
  std::int64_t heads = 1;      // rows = batch * heads * seq_q
  std::int64_t seq_q = 1;
  std::int64_t batch_stride = 0;  // elements
  std::int64_t head_stride = 0;
  std::int64_t row_stride = 0;
  std::int64_t causal_offset = 0;
};

struct MaskedSoftmaxCall {
  bool backward = false;
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const void* x = nullptr;  // forward: scores; backward: y
  std::int64_t x_stride = 0;
  const void* dy = nullptr;  // backward only
  std::int64_t dy_stride = 0;
  void* out = nullptr;  // forward: y; backward: dx
  std::int64_t out_stride = 0;
  float scale = 1.0f;  // finite
  Mask mask{};         // forward only
  bool zero_masked_rows = false;
  void* stream = nullptr;
};

// Checks the call (throws duet::Error with a one-line reason, writing
// nothing), plans it and launches it.
DUET_API void run(const Device& dev, const MaskedSoftmaxCall& call);

DUET_API void masked_softmax(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                             std::int64_t x_stride, void* y, std::int64_t y_stride, float scale, const Mask& mask,
                             bool zero_masked_rows = false, void* stream = nullptr);
// dx = scale * y * (dy - sum(dy * y))
DUET_API void masked_softmax_backward(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols,
                                      const void* y, std::int64_t y_stride, const void* dy, std::int64_t dy_stride,
                                      void* dx, std::int64_t dx_stride, float scale, void* stream = nullptr);

}  // namespace duet
