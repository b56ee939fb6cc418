// The checks every operation's call runs before a backend sees it (softmax,
// masked softmax, cross-entropy): where a matrix lies, whether two overlap,
// whether a pointer is usable and on the call's device. Each throws
// duet::Error(invalid_argument) with a one-line reason.
#pragma once

#include <cstdint>
#include <vector>

#include "duet/device.hpp"
#include "duet/softmax.hpp"
#include "fused_args.hpp"
#include "softmax_variants.hpp"

namespace duet::detail {

// The largest span a matrix may cover: 2^48 bytes (256 TiB), past the
// user address space of x86-64 and AArch64 with 4-level page tables and the
// memory of any device. A larger span can only come from a size mistake.
constexpr std::int64_t kMaxSpanBytes = std::int64_t(1) << 48;

// Where a rows x cols matrix of `elem`-byte elements with a row stride
// (elements) lies: rows at begin + r * stride_bytes, each row_bytes long.
struct Layout {
  std::uintptr_t begin = 0;
  std::int64_t rows = 0;
  std::int64_t stride_bytes = 0;
  std::int64_t row_bytes = 0;
  std::uintptr_t end = 0;  // one past the last byte of the last row
};

// Throws when the span overflows 2^48 bytes or wraps the address space.
Layout layout_of(const void* p, std::int64_t rows, std::int64_t cols, std::int64_t stride, int elem, const char* what);
// One contiguous range of `bytes` bytes, checked the same way.
Layout span_of(const void* p, std::int64_t bytes, const char* what);

// Whether two matrices share a byte. Rows are disjoint, increasing
// intervals, so bounding ranges answer first; interleaved layouts (x in the
// even row slots of a buffer, y in the odd ones) need the rows themselves.
enum class Overlap { none, shared, unchecked };
// Rows merged, for two different strides, before giving up (`unchecked`).
constexpr std::int64_t kMaxOverlapWalk = std::int64_t(1) << 20;
Overlap overlap(const Layout& a, const Layout& b);

// Refuses an input that overlaps an output unless it is exactly in place
// (same pointer, same stride, or a single row); `in_place_ok` false refuses
// any overlap.
void check_apart(const Layout& in, const char* in_name, const Layout& out, const char* out_name, bool in_place_ok);

// Refuses a pointer on another device than the call's (or host memory for a
// GPU call, GPU memory for a host call).
void check_pointer_on(const Device& dev, const void* p, const char* what);

// Refuses an unknown dtype code.
void check_dtype(DType dtype);
// Refuses a null pointer or one inside an element of `elem` bytes (which
// faults on a GPU and poisons the caller's context).
void check_pointer(const void* p, int elem, const char* name, const char* elem_name);
// Refuses a row stride below cols.
void check_stride(std::int64_t stride, std::int64_t cols, const char* name);
// Refuses cols of 2^31 or more (the kernels index a row with 32 bits).
void check_cols(std::int64_t cols);
// Refuses an unknown target index type code.
void check_index_type(IndexType type);
// One target a row (cross-entropy, shard statistics), `stride` elements
// apart: refuses a stride below 1 and a pointer that is null or not aligned
// to its int32 or int64 elements; returns the targets' layout.
Layout check_targets(const void* target, IndexType type, std::int64_t rows, std::int64_t stride);
// The classes a shard of the vocabulary belongs to (duet/vocab_parallel.hpp):
// columns [vocab_start, vocab_start + cols) of `vocab` classes, vocab 0
// meaning vocab_start + cols (the last shard, or a row not sharded).
// Refuses vocab_start < 0, vocab < 0 and a vocab the shard does not fit in;
// returns the resolved vocab.
std::int64_t check_vocab(std::int64_t vocab_start, std::int64_t vocab, std::int64_t cols);

// The matrices of a row operation (softmax, masked softmax): x, and dy for
// a backward (null: none), read; out written. Each non-null, aligned to its
// elements, with a stride >= cols, an input exactly in place over out or
// apart from it, all on `dev` (asked of the vendor unless query_devices is
// false: the caller vouches for it). Returns out's layout.
Layout check_row_matrices(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                          std::int64_t x_stride, const char* x_name, const void* dy, std::int64_t dy_stride,
                          const void* out, std::int64_t out_stride, const char* out_name, bool query_devices = true);
// The same with out of another dtype than x and dy (the widening softmax):
// out then apart from both.
Layout check_row_matrices(const Device& dev, DType dtype, DType out_dtype, std::int64_t rows, std::int64_t cols,
                          const void* x, std::int64_t x_stride, const char* x_name, const void* dy,
                          std::int64_t dy_stride, const void* out, std::int64_t out_stride, const char* out_name,
                          bool query_devices = true);

// An interleaved tensor's lines (inner elements each): rows x cols lines
// col_stride apart where outer rows follow each other evenly, else each
// outer row as one span. Refuses strides under which rows or outer rows
// would share elements.
Layout interleaved_layout(const void* p, std::int64_t rows, std::int64_t cols, std::int64_t inner,
                          std::int64_t stride, std::int64_t col_stride, int elem, const char* name);

// The same for interleaved rows (SoftmaxCall::inner): `rows` outer rows of
// `inner` rows of `cols` elements, element c of row (r, i) at r * stride +
// c * col_stride + i. Each tensor holds no element twice (col_stride >=
// inner, stride >= (cols - 1) * col_stride + inner); an input is exactly in
// place over out or apart from it. Where outer rows are not evenly spaced
// runs of lines (stride != cols * col_stride), whole outer rows are compared,
// so tensors that interleave there are refused.
void check_interleaved_matrices(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols,
                                std::int64_t inner, const void* x, std::int64_t x_stride, std::int64_t x_col_stride,
                                const char* x_name, const void* dy, std::int64_t dy_stride,
                                std::int64_t dy_col_stride, const void* out, std::int64_t out_stride,
                                std::int64_t out_col_stride, const char* out_name);

// A caller's workspace for a call that needs `needed` bytes: large enough,
// 16-byte aligned, on the call's device, and apart from every one of the
// call's tensors.
struct Named {
  Layout layout;
  const char* name;
};
// `size_function` names the query that gives the size, for the message.
void check_workspace(const Device& dev, const Workspace& w, std::int64_t needed, const char* size_function,
                     const std::vector<Named>& tensors);

}  // namespace duet::detail
