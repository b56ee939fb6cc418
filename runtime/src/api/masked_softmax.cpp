#include "duet/masked_softmax.hpp"

#include <cmath>
#include <string>

#include "duet/error.hpp"
#include "fused_dispatch.hpp"
#include "validate.hpp"

namespace duet {
namespace {

using detail::Layout;
using detail::layout_of;
constexpr Status bad = Status::invalid_argument;

// The largest |causal_offset|: past any row count a 2^48-byte matrix can
// have, so i + causal_offset cannot overflow.
constexpr std::int64_t kMaxCausalOffset = std::int64_t(1) << 62;

bool reads_mask(MaskKind kind) { return kind == MaskKind::additive || kind == MaskKind::boolean; }

// The mask's bytes from its first element to one past its last: batch *
// heads * seq_q rows at their strides, cols elements each. Throws past 2^48
// bytes.
Layout mask_span(const MaskedSoftmaxCall& c, int elem) {
  const Mask& m = c.mask;
  const std::int64_t batch = c.rows / (m.heads * m.seq_q);
  std::int64_t last = 0, a = 0, b = 0, r = 0, bytes = 0;
  const bool overflow = __builtin_mul_overflow(batch - 1, m.batch_stride, &a) ||
                        __builtin_mul_overflow(m.heads - 1, m.head_stride, &b) ||
                        __builtin_mul_overflow(m.seq_q - 1, m.row_stride, &r) || __builtin_add_overflow(a, b, &last) ||
                        __builtin_add_overflow(last, r, &last) || __builtin_add_overflow(last, c.cols, &last) ||
                        __builtin_mul_overflow(last, std::int64_t(elem), &bytes) || bytes > detail::kMaxSpanBytes;
  require(!overflow, bad, [&] {
    return "mask: strides " + std::to_string(m.batch_stride) + ", " + std::to_string(m.head_stride) + ", " +
           std::to_string(m.row_stride) + " span more than 2^48 bytes: the size overflows any device's address space";
  });
  return detail::span_of(m.data, bytes, "mask");
}

// Checks the mask of a forward call with rows and cols > 0.
void validate_mask(const Device& dev, const MaskedSoftmaxCall& c, const Layout& out, const char* out_name) {
  const Mask& m = c.mask;
  require(m.kind == MaskKind::none || m.kind == MaskKind::additive || m.kind == MaskKind::boolean ||
              m.kind == MaskKind::causal,
          bad, [&] { return "unsupported mask kind code " + std::to_string(static_cast<int>(m.kind)); });
  if (m.kind == MaskKind::none) {
    require(m.data == nullptr, bad, [] { return std::string("mask data is given but the mask kind is none"); });
    return;
  }
  require(m.heads >= 1 && m.seq_q >= 1, bad, [&] {
    return "mask heads and seq_q must be >= 1, got " + std::to_string(m.heads) + " and " + std::to_string(m.seq_q);
  });
  std::int64_t per_batch = 0;
  require(!__builtin_mul_overflow(m.heads, m.seq_q, &per_batch) && c.rows % per_batch == 0, bad, [&] {
    return "rows " + std::to_string(c.rows) + " are not a whole number of batches of heads " +
           std::to_string(m.heads) + " x seq_q " + std::to_string(m.seq_q);
  });
  if (m.kind == MaskKind::causal) {
    require(m.data == nullptr, bad,
            [] { return std::string("a causal mask reads no tensor: its data must be a null pointer"); });
    require(m.causal_offset >= -kMaxCausalOffset && m.causal_offset <= kMaxCausalOffset, bad,
            [&] { return "causal_offset " + std::to_string(m.causal_offset) + " is out of range (|offset| <= 2^62)"; });
    return;
  }
  require(m.batch_stride >= 0 && m.head_stride >= 0 && m.row_stride >= 0, bad, [&] {
    return "mask strides must be >= 0 (0 broadcasts), got " + std::to_string(m.batch_stride) + ", " +
           std::to_string(m.head_stride) + ", " + std::to_string(m.row_stride);
  });
  const int elem = m.kind == MaskKind::boolean ? 1 : dtype_size(c.dtype);
  detail::check_pointer(m.data, elem, "mask", m.kind == MaskKind::boolean ? "bool" : to_string(c.dtype).c_str());
  // The mask is read while y is written: it must not share a byte with y
  // (its whole span is compared, a broadcast mask's included).
  detail::check_apart(mask_span(c, elem), "mask", out, out_name, false);
  detail::check_pointer_on(dev, m.data, "mask");
}

// Returns false for an empty call (nothing to do).
bool validate(const Device& dev, const MaskedSoftmaxCall& c) {
  require(c.rows >= 0 && c.cols >= 0, bad, [&] {
    return "rows and cols must be >= 0, got " + std::to_string(c.rows) + " x " + std::to_string(c.cols);
  });
  detail::check_dtype(c.dtype);
  if (c.rows == 0 || c.cols == 0) return false;
  detail::check_cols(c.cols);
  require(std::isfinite(c.scale), bad, [&] { return "scale must be finite, got " + std::to_string(c.scale); });
  require(!c.backward || c.dy != nullptr, bad, [] { return std::string("dy is a null pointer"); });
  const char* out_name = c.backward ? "dx" : "y";
  const Layout out = detail::check_row_matrices(dev, c.dtype, c.rows, c.cols, c.x, c.x_stride, c.backward ? "y" : "x",
                                                c.backward ? c.dy : nullptr, c.dy_stride, c.out, c.out_stride, out_name);
  if (!c.backward) validate_mask(dev, c, out, out_name);
  return true;
}

}  // namespace

void run(const Device& dev, const MaskedSoftmaxCall& c) {
  if (!validate(dev, c)) return;
  FusedArgs a;
  a.op = c.backward ? FusedOp::masked_softmax_backward : FusedOp::masked_softmax;
  a.dtype = c.dtype;
  a.rows = c.rows;
  a.cols = c.cols;
  a.x = c.x;
  a.x_stride = c.x_stride;
  a.out = c.out;
  a.out_stride = c.out_stride;
  a.scale = c.scale;
  if (c.backward) {
    a.dy = c.dy;
    a.dy_stride = c.dy_stride;
  } else {
    a.mask_kind = c.mask.kind;
    a.zero_masked_rows = c.zero_masked_rows ? 1 : 0;
    if (c.mask.kind != MaskKind::none) {
      a.heads = c.mask.heads;
      a.seq_q = c.mask.seq_q;
    }
    if (reads_mask(c.mask.kind)) {
      a.mask = c.mask.data;
      a.mask_batch_stride = c.mask.batch_stride;
      a.mask_head_stride = c.mask.head_stride;
      a.mask_row_stride = c.mask.row_stride;
    }
    if (c.mask.kind == MaskKind::causal) a.causal_offset = c.mask.causal_offset;
  }
  FusedShape shape;
  shape.op = a.op;
  shape.dtype = c.dtype;
  shape.rows = c.rows;
  shape.cols = c.cols;
  shape.mask_kind = a.mask_kind;
  detail::launch_fused(dev, a, shape, c.stream);
}

void masked_softmax(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                    std::int64_t x_stride, void* y, std::int64_t y_stride, float scale, const Mask& mask,
                    bool zero_masked_rows, void* stream) {
  run(dev, MaskedSoftmaxCall{.dtype = dtype,
                             .rows = rows,
                             .cols = cols,
                             .x = x,
                             .x_stride = x_stride,
                             .out = y,
                             .out_stride = y_stride,
                             .scale = scale,
                             .mask = mask,
                             .zero_masked_rows = zero_masked_rows,
                             .stream = stream});
}

void masked_softmax_backward(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                             std::int64_t y_stride, const void* dy, std::int64_t dy_stride, void* dx,
                             std::int64_t dx_stride, float scale, void* stream) {
  run(dev, MaskedSoftmaxCall{.backward = true,
                             .dtype = dtype,
                             .rows = rows,
                             .cols = cols,
                             .x = y,
                             .x_stride = y_stride,
                             .dy = dy,
                             .dy_stride = dy_stride,
                             .out = dx,
                             .out_stride = dx_stride,
                             .scale = scale,
                             .stream = stream});
}

}  // namespace duet
