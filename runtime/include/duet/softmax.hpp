// softmax / log_softmax over the last dimension of a rows x cols matrix,
// forward and backward, on any duet device.
//
// Pointers are device pointers of `dev` (host memory for the host backend);
// strides are in elements, at least cols; in-place (x == y) is allowed, any
// other overlap is an error. rows == 0 is a no-op. Arithmetic is float32
// whatever the storage type. `stream` is a cudaStream_t / hipStream_t, or
// nullptr for the default stream; calls are asynchronous on GPUs.
//
// Semantics follow torch.softmax / torch.log_softmax: NaN in a row makes the
// row NaN, +inf makes it NaN (inf - inf), a row of all -inf gives NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "duet/export.h"
#include "duet/device.hpp"
#include "duet/planner.hpp"
#include "softmax_variants.hpp"

namespace duet {

// Memory the caller lends a call (CUB's two-phase style: ask
// workspace_size, then pass that many bytes): device memory of the call's
// device, 16-byte aligned, not overlapping the call's matrices, used only
// by this call's kernels on its stream (stream order makes it free again
// for the next call on that stream). Uninitialised memory is fine.
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

struct SoftmaxCall {
  Op op = Op::softmax;
  bool backward = false;
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const void* x = nullptr;     // forward: input; backward: y (the forward output)
  std::int64_t x_stride = 0;
  const void* dy = nullptr;    // backward only
  std::int64_t dy_stride = 0;
  void* out = nullptr;         // forward: y; backward: dx
  std::int64_t out_stride = 0;
  void* stream = nullptr;
  // Set where the caller vouches that x, dy and out are memory of dev (a
  // framework's tensors know their device): duet then skips the vendor's
  // query of each pointer's device, about 1 us a pointer. Null pointers,
  // alignment, strides and overlaps are checked either way. Rows with
  // inner = 1 only; interleaved calls always ask.
  bool caller_checked_devices = false;
  // Interleaved rows, as softmax over a non-last dimension sees them: each
  // of `rows` outer rows holds `inner` rows of `cols` elements; element c of
  // row (r, i) of x is at x + r * x_stride + c * x_col_stride + i (elements;
  // the same for dy and out). Dim d of a contiguous tensor: rows = the
  // product of the sizes before d, cols = size d, inner = the product of the
  // sizes after d, col strides = inner, strides = cols x inner. A tensor's
  // col stride is at least inner and its stride at least (cols - 1) x
  // col_stride + inner (no element twice); out is exactly x (or dy) or
  // apart from it. inner = 1 with col strides of 1 is the plain layout
  // above; inner = 0 is an empty call.
  std::int64_t inner = 1;
  std::int64_t x_col_stride = 1;
  std::int64_t dy_col_stride = 1;
  std::int64_t out_col_stride = 1;
  // The caller's workspace; without one, a call that needs a workspace
  // (split_row, split_stream) takes it from duet's per-stream cache, grown
  // on demand with a device allocation (not allowed under graph capture).
  std::optional<Workspace> workspace{};
  // out's dtype where it is not dtype (x's, and dy's): an f16 or bf16
  // forward into a float32 y (torch's softmax(x, dim, dtype=torch.float32)),
  // and its backward from float32 y and dy into an f16 or bf16 dx, the cast
  // in the same pass. They run the fused kernels (FusedOp::widening_softmax,
  // duet/fused_planner.hpp): rows with inner = 1, out apart from x and dy,
  // no workspace. Other pairs are refused (unsupported).
  std::optional<DType> out_dtype{};
};

// Checks `call` (throws duet::Error with a one-line reason, writing nothing),
// plans it (cached per device and shape class) and launches it.
DUET_API void run(const Device& dev, const SoftmaxCall& call);

// The plan `run` would use, without launching. A call with out_dtype is
// refused: it runs the fused kernels, whose plan plan_fused gives.
DUET_API Plan plan_for(const Device& dev, const SoftmaxCall& call);

// The planner's switches every call plans with (PlanOptions, duet/planner.hpp):
// the environment's until set_plan_options replaces them for the process.
// Plans made under other options stay cached under those, so calls in
// flight keep theirs. plan_options() throws duet::Error(invalid_argument)
// for a malformed environment variable, as the first call would.
DUET_API PlanOptions plan_options();
DUET_API void set_plan_options(const PlanOptions& options);

// Bytes of workspace a call of this shape needs on `dev`: 0 for most shapes
// (rows too wide for on-chip memory need one), and 0 when rows or cols is 0.
// It holds for any pointers and strides of the shape (the largest over the
// vector and scalar paths). Throws for a bad shape or dtype.
DUET_API std::size_t workspace_size(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, bool backward);
// The same for interleaved rows (SoftmaxCall::inner): `rows` outer rows of
// `inner` rows of `cols` elements, for any pointers and strides of that
// shape (on GPUs, rows on packs too long for a tile on chip take
// interleaved_stream's queue or interleaved_slabs' pairs).
// SoftmaxCall::workspace takes it.
DUET_API std::size_t interleaved_workspace_size(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols,
                                                std::int64_t inner, bool backward);

DUET_API void softmax(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                      std::int64_t x_stride, void* y, std::int64_t y_stride, void* stream = nullptr);
DUET_API void log_softmax(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                          std::int64_t x_stride, void* y, std::int64_t y_stride, void* stream = nullptr);
// dx = y * (dy - sum(dy * y))
DUET_API void softmax_backward(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                               std::int64_t y_stride, const void* dy, std::int64_t dy_stride, void* dx,
                               std::int64_t dx_stride, void* stream = nullptr);
// dx = dy - exp(y) * sum(dy), y the log_softmax output
DUET_API void log_softmax_backward(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                                   std::int64_t y_stride, const void* dy, std::int64_t dy_stride, void* dx,
                                   std::int64_t dx_stride, void* stream = nullptr);

// The same four with the caller's workspace: at least workspace_size()
// bytes (a smaller one is refused with invalid_argument, naming the size
// needed, before anything runs); ignored where the shape needs none.
DUET_API void softmax(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
             std::int64_t x_stride, void* y, std::int64_t y_stride, Workspace workspace, void* stream = nullptr);
DUET_API void log_softmax(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                 std::int64_t x_stride, void* y, std::int64_t y_stride, Workspace workspace, void* stream = nullptr);
DUET_API void softmax_backward(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                      std::int64_t y_stride, const void* dy, std::int64_t dy_stride, void* dx, std::int64_t dx_stride,
                      Workspace workspace, void* stream = nullptr);
DUET_API void log_softmax_backward(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                          std::int64_t y_stride, const void* dy, std::int64_t dy_stride, void* dx,
                          std::int64_t dx_stride, Workspace workspace, void* stream = nullptr);

// A compiled kernel's attributes on a live device (cudaFuncGetAttributes /
// hipFuncGetAttributes), and the vendor's own occupancy answer for it
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor), to check the exact model.
DUET_API KernelAttributes live_kernel_attributes(const Device& dev, int variant, bool finalize);
DUET_API int live_occupancy(const Device& dev, int variant, bool finalize, int threads, std::int64_t dynamic_smem);
// Clusters of a cluster_row or cluster_row_smem variant, each block with
// `dynamic_smem` bytes, the device holds at once
// (cudaOccupancyMaxActiveClusters); 0 without clusters.
DUET_API int live_max_active_clusters(const Device& dev, int variant, int threads, int cluster_blocks,
                                      std::int64_t dynamic_smem = 0);

// Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16".
DUET_API DType dtype_from_string(const std::string& s);

}  // namespace duet
