#include "validate.hpp"

#include <string>

#include "backend_registry.hpp"
#include "duet/error.hpp"

namespace duet::detail {

namespace {
constexpr Status bad = Status::invalid_argument;
}  // namespace

Layout layout_of(const void* p, std::int64_t rows, std::int64_t cols, std::int64_t stride, int elem,
                 const char* what) {
  std::int64_t last = 0, bytes = 0;
  const bool overflow = __builtin_mul_overflow(rows - 1, stride, &last) ||
                        __builtin_add_overflow(last, cols, &last) ||
                        __builtin_mul_overflow(last, std::int64_t(elem), &bytes);
  require(!overflow && bytes <= kMaxSpanBytes, bad, [&] {
    return std::string(what) + ": " + std::to_string(rows) + " rows of stride " + std::to_string(stride) +
           " elements span more than 2^48 bytes: the size overflows any device's address space";
  });
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  require(b + static_cast<std::uintptr_t>(bytes) >= b, bad,
          [&] { return std::string(what) + ": the matrix wraps past the end of the address space"; });
  const std::int64_t row_bytes = cols * elem;
  return {b, rows, rows == 1 ? row_bytes : stride * elem, row_bytes, b + static_cast<std::uintptr_t>(bytes)};
}

Layout span_of(const void* p, std::int64_t bytes, const char* what) { return layout_of(p, 1, bytes, bytes, 1, what); }

Overlap overlap(const Layout& a, const Layout& b) {
  if (!(a.begin < b.end && b.begin < a.end)) return Overlap::none;
  if (a.rows == 1 || b.rows == 1 || a.stride_bytes == b.stride_bytes) {
    // One stride s (a single row can take any): rows i of a and j of b meet
    // when -wb < d + k s < wa for d = b - a and k = j - i, which holds for
    // one range of k; the matrices meet if it shares a k with the rows'.
    using i128 = __int128;
    auto floor_div = [](i128 n, i128 q) { return n >= 0 ? n / q : -((-n + q - 1) / q); };
    const i128 s = a.rows > 1 ? a.stride_bytes : b.rows > 1 ? b.stride_bytes : 1;
    const i128 d = static_cast<i128>(b.begin) - static_cast<i128>(a.begin);
    const i128 k_min = floor_div(-b.row_bytes - d, s) + 1;
    const i128 k_max = -floor_div(-(a.row_bytes - d), s) - 1;  // ceil((wa - d) / s) - 1
    const i128 lo = k_min > -(a.rows - 1) ? k_min : -(a.rows - 1);
    const i128 hi = k_max < b.rows - 1 ? k_max : b.rows - 1;
    return lo <= hi ? Overlap::shared : Overlap::none;
  }
  // Different strides: merge the two sorted lists of rows.
  std::int64_t i = 0, j = 0;
  for (std::int64_t steps = 0; i < a.rows && j < b.rows; ++steps) {
    if (steps == kMaxOverlapWalk) return Overlap::unchecked;
    const std::uintptr_t ai = a.begin + std::uintptr_t(i * a.stride_bytes);
    const std::uintptr_t bj = b.begin + std::uintptr_t(j * b.stride_bytes);
    if (ai < bj + std::uintptr_t(b.row_bytes) && bj < ai + std::uintptr_t(a.row_bytes)) return Overlap::shared;
    if (ai < bj)
      ++i;
    else
      ++j;
  }
  return Overlap::none;
}

void check_apart(const Layout& in, const char* in_name, const Layout& out, const char* out_name, bool in_place_ok) {
  const bool exactly_in_place = in.begin == out.begin && in.rows == out.rows && in.row_bytes == out.row_bytes &&
                                in.stride_bytes == out.stride_bytes;
  if (in_place_ok && exactly_in_place) return;
  const Overlap o = overlap(in, out);
  require(o == Overlap::none, bad, [&] {
    const std::string pair = std::string(in_name) + " and " + out_name;
    if (o == Overlap::unchecked)
      return pair + " overlap or interleave with different strides over more rows than duet checks (2^20); use "
                    "disjoint buffers";
    return pair + (in_place_ok ? " overlap (share elements) without being exactly in place (same pointer, same stride)"
                               : " overlap (share bytes); they must be apart");
  });
}

void check_pointer_on(const Device& dev, const void* p, const char* what) {
  if (dev.is_gpu()) {
    const int on = backend(dev.backend()).pointer_device(p);
    if (on < 0)
      throw Error(bad, std::string(what) + " is not " + std::string(to_string(dev.backend())) +
                           " device memory (a host pointer?) but the call runs on " + dev.label());
    if (on != dev.ordinal())
      throw Error(bad, std::string(what) + " lives on " + std::string(to_string(dev.backend())) + ":" +
                           std::to_string(on) + " but the call runs on " + dev.label());
  } else {
    for (const auto* ops : backends())
      if (ops->kind != BackendKind::host && ops->device_count() > 0 && ops->pointer_device(p) >= 0)
        throw Error(bad, std::string(what) + " is " + std::string(to_string(ops->kind)) +
                             " device memory but the call runs on the host");
  }
}

void check_dtype(DType dtype) {
  require(dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16, bad,
          [&] { return "unsupported dtype code " + std::to_string(static_cast<int>(dtype)); });
}

void check_pointer(const void* p, int elem, const char* name, const char* elem_name) {
  require(p != nullptr, bad, [&] { return std::string(name) + " is a null pointer"; });
  require(reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(elem) == 0, bad, [&] {
    return std::string(name) + " is not aligned to its " + std::to_string(elem) + "-byte " + elem_name + " elements";
  });
}

void check_stride(std::int64_t stride, std::int64_t cols, const char* name) {
  require(stride >= cols, bad, [&] {
    return std::string(name) + " row stride " + std::to_string(stride) + " is smaller than cols " +
           std::to_string(cols);
  });
}

void check_cols(std::int64_t cols) {
  require(cols < (std::int64_t(1) << 31), bad, [&] { return "cols must be below 2^31, got " + std::to_string(cols); });
}

void check_index_type(IndexType type) {
  require(type == IndexType::i32 || type == IndexType::i64, bad,
          [&] { return "unsupported target index type code " + std::to_string(static_cast<int>(type)); });
}

Layout check_targets(const void* target, IndexType type, std::int64_t rows, std::int64_t stride) {
  require(stride >= 1, bad, [&] { return "target_stride must be >= 1, got " + std::to_string(stride); });
  const int index_bytes = type == IndexType::i32 ? 4 : 8;
  check_pointer(target, index_bytes, "target", type == IndexType::i32 ? "int32" : "int64");
  return layout_of(target, rows, 1, stride, index_bytes, "target");
}

std::int64_t check_vocab(std::int64_t vocab_start, std::int64_t vocab, std::int64_t cols) {
  require(vocab_start >= 0, bad, [&] { return "vocab_start must be >= 0, got " + std::to_string(vocab_start); });
  require(vocab >= 0, bad, [&] {
    return "vocab must be >= 0 (0: vocab_start + cols), got " + std::to_string(vocab);
  });
  std::int64_t end = 0;
  require(!__builtin_add_overflow(vocab_start, cols, &end), bad, [&] {
    return "vocab_start " + std::to_string(vocab_start) + " + cols " + std::to_string(cols) + " overflows int64";
  });
  if (vocab == 0) return end;
  require(vocab >= end, bad, [&] {
    return "vocab " + std::to_string(vocab) + " is smaller than the shard's end, vocab_start " +
           std::to_string(vocab_start) + " + cols " + std::to_string(cols) + " = " + std::to_string(end);
  });
  return vocab;
}

Layout check_row_matrices(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                          std::int64_t x_stride, const char* x_name, const void* dy, std::int64_t dy_stride,
                          const void* out, std::int64_t out_stride, const char* out_name, bool query_devices) {
  return check_row_matrices(dev, dtype, dtype, rows, cols, x, x_stride, x_name, dy, dy_stride, out, out_stride,
                            out_name, query_devices);
}

Layout check_row_matrices(const Device& dev, DType dtype, DType out_dtype, std::int64_t rows, std::int64_t cols,
                          const void* x, std::int64_t x_stride, const char* x_name, const void* dy,
                          std::int64_t dy_stride, const void* out, std::int64_t out_stride, const char* out_name,
                          bool query_devices) {
  const int elem = dtype_size(dtype), out_elem = dtype_size(out_dtype);
  const std::string elem_name = to_string(dtype), out_elem_name = to_string(out_dtype);
  check_pointer(x, elem, x_name, elem_name.c_str());
  check_pointer(out, out_elem, out_name, out_elem_name.c_str());
  if (dy != nullptr) check_pointer(dy, elem, "dy", elem_name.c_str());
  check_stride(x_stride, cols, x_name);
  check_stride(out_stride, cols, out_name);
  if (dy != nullptr) check_stride(dy_stride, cols, "dy");
  const Layout o = layout_of(out, rows, cols, out_stride, out_elem, out_name);
  // In place only where the elements are the same size.
  const bool in_place_ok = elem == out_elem;
  check_apart(layout_of(x, rows, cols, x_stride, elem, x_name), x_name, o, out_name, in_place_ok);
  if (dy != nullptr) check_apart(layout_of(dy, rows, cols, dy_stride, elem, "dy"), "dy", o, out_name, in_place_ok);
  if (!query_devices) return o;
  check_pointer_on(dev, x, x_name);
  check_pointer_on(dev, out, out_name);
  if (dy != nullptr) check_pointer_on(dev, dy, "dy");
  return o;
}

Layout interleaved_layout(const void* p, std::int64_t rows, std::int64_t cols, std::int64_t inner,
                          std::int64_t stride, std::int64_t col_stride, int elem, const char* name) {
  require(col_stride >= inner || cols == 1, bad, [&] {
    return std::string(name) + " col stride " + std::to_string(col_stride) + " is smaller than inner " +
           std::to_string(inner) + ": rows would share elements";
  });
  std::int64_t outer_span = 0;
  require(!__builtin_mul_overflow(cols - 1, col_stride, &outer_span) &&
              !__builtin_add_overflow(outer_span, inner, &outer_span),
          bad, [&] { return std::string(name) + ": cols x col stride overflows int64"; });
  require(rows == 1 || stride >= outer_span, bad, [&] {
    return std::string(name) + " stride " + std::to_string(stride) + " is smaller than an outer row's span, (cols - 1) x col_stride + inner = " +
           std::to_string(outer_span) + ": outer rows would share elements";
  });
  std::int64_t lines = 0;
  if (cols == 1) return layout_of(p, rows, inner, stride, elem, name);
  if ((rows == 1 || stride == cols * col_stride) && !__builtin_mul_overflow(rows, cols, &lines))
    return layout_of(p, lines, inner, col_stride, elem, name);
  return layout_of(p, rows, outer_span, stride, elem, name);
}

void check_interleaved_matrices(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols,
                                std::int64_t inner, const void* x, std::int64_t x_stride, std::int64_t x_col_stride,
                                const char* x_name, const void* dy, std::int64_t dy_stride,
                                std::int64_t dy_col_stride, const void* out, std::int64_t out_stride,
                                std::int64_t out_col_stride, const char* out_name) {
  const int elem = dtype_size(dtype);
  const std::string elem_name = to_string(dtype);
  check_pointer(x, elem, x_name, elem_name.c_str());
  check_pointer(out, elem, out_name, elem_name.c_str());
  if (dy != nullptr) check_pointer(dy, elem, "dy", elem_name.c_str());
  const Layout o = interleaved_layout(out, rows, cols, inner, out_stride, out_col_stride, elem, out_name);
  const auto in_place = [&](const void* p, std::int64_t stride, std::int64_t col_stride) {
    return p == out && (rows == 1 || stride == out_stride) && (cols == 1 || col_stride == out_col_stride);
  };
  const Layout xl = interleaved_layout(x, rows, cols, inner, x_stride, x_col_stride, elem, x_name);
  if (!in_place(x, x_stride, x_col_stride)) check_apart(xl, x_name, o, out_name, true);
  if (dy != nullptr) {
    const Layout dl = interleaved_layout(dy, rows, cols, inner, dy_stride, dy_col_stride, elem, "dy");
    if (!in_place(dy, dy_stride, dy_col_stride)) check_apart(dl, "dy", o, out_name, true);
  }
  check_pointer_on(dev, x, x_name);
  check_pointer_on(dev, out, out_name);
  if (dy != nullptr) check_pointer_on(dev, dy, "dy");
}

void check_workspace(const Device& dev, const Workspace& w, std::int64_t needed, const char* size_function,
                     const std::vector<Named>& tensors) {
  require(w.data != nullptr && w.bytes >= static_cast<std::size_t>(needed), bad, [&] {
    return "workspace of " + std::to_string(w.data == nullptr ? 0 : w.bytes) + " bytes is too small: this call needs " +
           std::to_string(needed) + " (see " + size_function + ")";
  });
  require(reinterpret_cast<std::uintptr_t>(w.data) % 16 == 0, bad,
          [] { return std::string("workspace must be 16-byte aligned"); });
  check_pointer_on(dev, w.data, "workspace");
  const Layout ws = span_of(w.data, needed, "workspace");
  for (const Named& t : tensors)
    require(overlap(ws, t.layout) == Overlap::none, bad, [&] { return std::string("workspace overlaps ") + t.name; });
}

}  // namespace duet::detail
