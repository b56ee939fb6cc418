// The C ABI over the C++ API: translate, call, catch everything.
#include "duet/duet.h"

#include <cstddef>
#include <exception>
#include <optional>
#include <string>

#include "backend_registry.hpp"
#include "duet/config.hpp"
#include "duet/device.hpp"
#include "duet/error.hpp"
#include "duet/cross_entropy.hpp"
#include "duet/masked_softmax.hpp"
#include "duet/softmax.hpp"
#include "duet/vocab_parallel.hpp"

namespace {

thread_local std::string g_last_error;

template <class F>
duet_status_t guarded(F&& f) noexcept {
  try {
    f();
    g_last_error.clear();
    return DUET_SUCCESS;
  } catch (const duet::Error& e) {
    g_last_error = e.what();
    return static_cast<duet_status_t>(e.status());
  } catch (const std::bad_alloc&) {
    g_last_error = "out of host memory";
    return DUET_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return DUET_ERROR_INTERNAL;
  } catch (...) {
    g_last_error = "unknown exception";
    return DUET_ERROR_INTERNAL;
  }
}

duet::BackendKind to_kind(duet_backend_t b) {
  switch (b) {
    case DUET_BACKEND_HOST: return duet::BackendKind::host;
    case DUET_BACKEND_CUDA: return duet::BackendKind::cuda;
    case DUET_BACKEND_HIP: return duet::BackendKind::hip;
    default: break;
  }
  throw duet::Error(duet::Status::invalid_argument, "unknown backend code " + std::to_string(static_cast<int>(b)));
}
duet_backend_t from_kind(duet::BackendKind k) {
  return k == duet::BackendKind::cuda ? DUET_BACKEND_CUDA : k == duet::BackendKind::hip ? DUET_BACKEND_HIP : DUET_BACKEND_HOST;
}
duet::DType to_dtype(duet_dtype_t d) {
  if (d != DUET_F32 && d != DUET_F16 && d != DUET_BF16)
    throw duet::Error(duet::Status::invalid_argument, "unsupported dtype code " + std::to_string(static_cast<int>(d)));
  return static_cast<duet::DType>(d);
}
duet::Device to_device(duet_device_t d) { return duet::device(to_kind(d.backend), d.ordinal); }

duet::MaskKind to_mask_kind(duet_mask_kind_t k) {
  if (k != DUET_MASK_NONE && k != DUET_MASK_ADDITIVE && k != DUET_MASK_BOOLEAN && k != DUET_MASK_CAUSAL)
    throw duet::Error(duet::Status::invalid_argument, "unsupported mask kind code " + std::to_string(static_cast<int>(k)));
  return static_cast<duet::MaskKind>(k);
}
duet::IndexType to_index_type(duet_index_t t) {
  if (t != DUET_INDEX_I32 && t != DUET_INDEX_I64)
    throw duet::Error(duet::Status::invalid_argument,
                      "unsupported target index type code " + std::to_string(static_cast<int>(t)));
  return static_cast<duet::IndexType>(t);
}
duet::Reduction to_reduction(duet_reduction_t r) {
  if (r != DUET_REDUCTION_NONE && r != DUET_REDUCTION_MEAN && r != DUET_REDUCTION_SUM)
    throw duet::Error(duet::Status::invalid_argument, "unsupported reduction code " + std::to_string(static_cast<int>(r)));
  return static_cast<duet::Reduction>(r);
}
// NULL: the defaults (ignore_index -100, no smoothing, no z-loss, mean).
duet::CrossEntropyOptions to_options(const duet_cross_entropy_options_t* o) {
  duet::CrossEntropyOptions out;
  if (o == nullptr) return out;
  out.ignore_index = o->ignore_index;
  out.label_smoothing = o->label_smoothing;
  out.z_loss = o->z_loss;
  out.reduction = to_reduction(o->reduction);
  return out;
}
// NULL or 0 bytes: duet's per-stream cache.
std::optional<duet::Workspace> to_workspace(void* workspace, size_t bytes) {
  if (workspace == nullptr && bytes == 0) return std::nullopt;
  return duet::Workspace{workspace, bytes};
}

// The fields cross-entropy's forward and backward calls share.
template <class Call>
void set_common(Call& c, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* logits, int64_t logits_stride,
                duet_index_t target_type, const void* target, int64_t target_stride,
                const duet_cross_entropy_options_t* options, void* grad, int64_t grad_stride, void* workspace,
                size_t workspace_bytes, void* stream) {
  c.dtype = to_dtype(dtype);
  c.rows = rows;
  c.cols = cols;
  c.logits = logits;
  c.logits_stride = logits_stride;
  c.target_type = to_index_type(target_type);
  c.target = target;
  c.target_stride = target_stride;
  c.options = to_options(options);
  c.grad = grad;
  c.grad_stride = grad_stride;
  c.stream = stream;
  c.workspace = to_workspace(workspace, workspace_bytes);
}

duet::Op to_op(int log) {
  duet::require(log == 0 || log == 1, duet::Status::invalid_argument,
                [&] { return "log must be 0 (softmax) or 1 (log_softmax), got " + std::to_string(log); });
  return log ? duet::Op::log_softmax : duet::Op::softmax;
}

// An interleaved-rows call (SoftmaxCall::inner) of x into out.
duet::SoftmaxCall interleaved_call(duet_dtype_t dtype, int log, int64_t rows, int64_t cols, int64_t inner,
                                   const void* x, int64_t x_stride, int64_t x_col_stride, void* out,
                                   int64_t out_stride, int64_t out_col_stride, void* stream) {
  return {.op = to_op(log),
          .dtype = to_dtype(dtype),
          .rows = rows,
          .cols = cols,
          .x = x,
          .x_stride = x_stride,
          .out = out,
          .out_stride = out_stride,
          .stream = stream,
          .inner = inner,
          .x_col_stride = x_col_stride,
          .out_col_stride = out_col_stride};
}
// The same backward: y (the forward's output) and dy into dx.
duet::SoftmaxCall interleaved_backward_call(duet_dtype_t dtype, int log, int64_t rows, int64_t cols, int64_t inner,
                                            const void* y, int64_t y_stride, int64_t y_col_stride, const void* dy,
                                            int64_t dy_stride, int64_t dy_col_stride, void* dx, int64_t dx_stride,
                                            int64_t dx_col_stride, void* stream) {
  duet::SoftmaxCall c =
      interleaved_call(dtype, log, rows, cols, inner, y, y_stride, y_col_stride, dx, dx_stride, dx_col_stride, stream);
  c.backward = true;
  c.dy = dy;
  c.dy_stride = dy_stride;
  c.dy_col_stride = dy_col_stride;
  return c;
}

// The C++ entry points, called as they are: one place builds a SoftmaxCall.
using ForwardFn = void (*)(const duet::Device&, duet::DType, std::int64_t, std::int64_t, const void*, std::int64_t,
                           void*, std::int64_t, void*);
using BackwardFn = void (*)(const duet::Device&, duet::DType, std::int64_t, std::int64_t, const void*, std::int64_t,
                            const void*, std::int64_t, void*, std::int64_t, void*);

using ForwardWsFn = void (*)(const duet::Device&, duet::DType, std::int64_t, std::int64_t, const void*, std::int64_t,
                             void*, std::int64_t, duet::Workspace, void*);
using BackwardWsFn = void (*)(const duet::Device&, duet::DType, std::int64_t, std::int64_t, const void*, std::int64_t,
                              const void*, std::int64_t, void*, std::int64_t, duet::Workspace, void*);

duet_status_t forward(ForwardFn fn, duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* x,
                      int64_t x_stride, void* y, int64_t y_stride, void* stream) {
  return guarded([&] { fn(to_device(device), to_dtype(dtype), rows, cols, x, x_stride, y, y_stride, stream); });
}
duet_status_t backward(BackwardFn fn, duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                       const void* y, int64_t y_stride, const void* dy, int64_t dy_stride, void* dx, int64_t dx_stride,
                       void* stream) {
  return guarded([&] {
    fn(to_device(device), to_dtype(dtype), rows, cols, y, y_stride, dy, dy_stride, dx, dx_stride, stream);
  });
}

duet_status_t forward_ws(ForwardWsFn fn, duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                         const void* x, int64_t x_stride, void* y, int64_t y_stride, void* workspace,
                         size_t workspace_bytes, void* stream) {
  return guarded([&] {
    fn(to_device(device), to_dtype(dtype), rows, cols, x, x_stride, y, y_stride, {workspace, workspace_bytes}, stream);
  });
}
duet_status_t backward_ws(BackwardWsFn fn, duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                          const void* y, int64_t y_stride, const void* dy, int64_t dy_stride, void* dx,
                          int64_t dx_stride, void* workspace, size_t workspace_bytes, void* stream) {
  return guarded([&] {
    fn(to_device(device), to_dtype(dtype), rows, cols, y, y_stride, dy, dy_stride, dx, dx_stride,
       {workspace, workspace_bytes}, stream);
  });
}

}  // namespace

extern "C" {

const char* duet_version(void) { return DUET_VERSION; }

const char* duet_status_string(duet_status_t status) {
  static thread_local std::string s;
  s = std::string(duet::to_string(static_cast<duet::Status>(status)));
  return s.c_str();
}

const char* duet_last_error(void) { return g_last_error.c_str(); }

duet_status_t duet_device_count(int* count) {
  return guarded([&] {
    duet::require(count != nullptr, duet::Status::invalid_argument, "count is a null pointer");
    *count = static_cast<int>(duet::devices().size());
  });
}

duet_status_t duet_get_device(int index, duet_device_t* out) {
  return guarded([&] {
    duet::require(out != nullptr, duet::Status::invalid_argument, "device is a null pointer");
    const auto all = duet::devices();
    duet::require(index >= 0 && index < static_cast<int>(all.size()), duet::Status::no_device,
                  "device index " + std::to_string(index) + " out of range (" + std::to_string(all.size()) + " devices)");
    *out = {from_kind(all[static_cast<std::size_t>(index)].backend()), all[static_cast<std::size_t>(index)].ordinal()};
  });
}

duet_status_t duet_device_of_pointer(const void* ptr, duet_device_t* out) {
  return guarded([&] {
    duet::require(out != nullptr, duet::Status::invalid_argument, "device is a null pointer");
    *out = {DUET_BACKEND_HOST, 0};
    for (const auto* ops : duet::detail::backends()) {
      if (ops->kind == duet::BackendKind::host || ops->device_count() == 0) continue;
      const int d = ops->pointer_device(ptr);
      if (d >= 0) {
        *out = {from_kind(ops->kind), d};
        return;
      }
    }
  });
}

duet_status_t duet_softmax(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* x,
                           int64_t x_stride, void* y, int64_t y_stride, void* stream) {
  return forward(&duet::softmax, device, dtype, rows, cols, x, x_stride, y, y_stride, stream);
}
duet_status_t duet_log_softmax(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* x,
                               int64_t x_stride, void* y, int64_t y_stride, void* stream) {
  return forward(&duet::log_softmax, device, dtype, rows, cols, x, x_stride, y, y_stride, stream);
}
duet_status_t duet_softmax_backward(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* y,
                                    int64_t y_stride, const void* dy, int64_t dy_stride, void* dx, int64_t dx_stride,
                                    void* stream) {
  return backward(&duet::softmax_backward, device, dtype, rows, cols, y, y_stride, dy, dy_stride, dx, dx_stride, stream);
}
duet_status_t duet_log_softmax_backward(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                        const void* y, int64_t y_stride, const void* dy, int64_t dy_stride, void* dx,
                                        int64_t dx_stride, void* stream) {
  return backward(&duet::log_softmax_backward, device, dtype, rows, cols, y, y_stride, dy, dy_stride, dx, dx_stride, stream);
}
duet_status_t duet_softmax_interleaved(duet_device_t device, duet_dtype_t dtype, int log, int64_t rows, int64_t cols,
                                       int64_t inner, const void* x, int64_t x_stride, int64_t x_col_stride, void* y,
                                       int64_t y_stride, int64_t y_col_stride, void* stream) {
  return guarded([&] {
    duet::run(to_device(device), interleaved_call(dtype, log, rows, cols, inner, x, x_stride, x_col_stride, y, y_stride,
                                                  y_col_stride, stream));
  });
}
// Bindings pack duet_softmax_args_t themselves (python/duet/_lib.py's
// SOFTMAX_ARGS): its layout has no padding and does not change.
static_assert(sizeof(duet_softmax_args_t) == 120 && offsetof(duet_softmax_args_t, out_dtype) == DUET_SOFTMAX_ARGS_V1_SIZE);
static_assert(offsetof(duet_softmax_args_t, flags) == 20 && offsetof(duet_softmax_args_t, rows) == 24);
static_assert(offsetof(duet_softmax_args_t, x) == 40 && offsetof(duet_softmax_args_t, stream) == 104);
duet_status_t duet_softmax_call(duet_device_t device, const duet_softmax_args_t* args) {
  return guarded([&] {
    duet::require(args != nullptr, duet::Status::invalid_argument, "args is a null pointer");
    const bool v1 = args->size == DUET_SOFTMAX_ARGS_V1_SIZE;
    duet::require(v1 || args->size == sizeof(duet_softmax_args_t), duet::Status::invalid_argument, [&] {
      return "args->size is " + std::to_string(args->size) + ", this libduet's duet_softmax_args_t has " +
             std::to_string(sizeof(duet_softmax_args_t)) + " bytes (or " +
             std::to_string(DUET_SOFTMAX_ARGS_V1_SIZE) + ", before out_dtype)";
    });
    duet::require(v1 || args->reserved == 0, duet::Status::invalid_argument,
                  [&] { return "args->reserved must be 0, got " + std::to_string(args->reserved); });
    duet::require(args->backward == 0 || args->backward == 1, duet::Status::invalid_argument,
                  [&] { return "backward must be 0 or 1, got " + std::to_string(args->backward); });
    duet::require((args->flags & ~(DUET_CALL_DEVICES_CHECKED | DUET_CALL_OUT_DTYPE)) == 0 &&
                      !(v1 && (args->flags & DUET_CALL_OUT_DTYPE) != 0),
                  duet::Status::invalid_argument, [&] {
                    return "unknown flags " + std::to_string(args->flags) +
                           (v1 ? " (DUET_CALL_OUT_DTYPE needs the struct with out_dtype)" : "");
                  });
    const bool backward = args->backward == 1;
    duet::run(to_device(device), duet::SoftmaxCall{.op = to_op(args->log),
                                                   .backward = backward,
                                                   .dtype = to_dtype(args->dtype),
                                                   .rows = args->rows,
                                                   .cols = args->cols,
                                                   .x = args->x,
                                                   .x_stride = args->x_stride,
                                                   .dy = backward ? args->dy : nullptr,
                                                   .dy_stride = backward ? args->dy_stride : 0,
                                                   .out = args->out,
                                                   .out_stride = args->out_stride,
                                                   .stream = args->stream,
                                                   .caller_checked_devices =
                                                       (args->flags & DUET_CALL_DEVICES_CHECKED) != 0,
                                                   .workspace = duet::Workspace{args->workspace, args->workspace_bytes},
                                                   .out_dtype = (args->flags & DUET_CALL_OUT_DTYPE) != 0
                                                                    ? std::optional(to_dtype(args->out_dtype))
                                                                    : std::nullopt});
  });
}
duet_status_t duet_softmax_interleaved_backward(duet_device_t device, duet_dtype_t dtype, int log, int64_t rows,
                                                int64_t cols, int64_t inner, const void* y, int64_t y_stride,
                                                int64_t y_col_stride, const void* dy, int64_t dy_stride,
                                                int64_t dy_col_stride, void* dx, int64_t dx_stride,
                                                int64_t dx_col_stride, void* stream) {
  return guarded([&] {
    duet::run(to_device(device), interleaved_backward_call(dtype, log, rows, cols, inner, y, y_stride, y_col_stride, dy,
                                                           dy_stride, dy_col_stride, dx, dx_stride, dx_col_stride,
                                                           stream));
  });
}
duet_status_t duet_softmax_interleaved_workspace_size(duet_device_t device, duet_dtype_t dtype, int backward,
                                                     int64_t rows, int64_t cols, int64_t inner, size_t* bytes) {
  return guarded([&] {
    duet::require(bytes != nullptr, duet::Status::invalid_argument, "bytes is a null pointer");
    *bytes = duet::interleaved_workspace_size(to_device(device), to_dtype(dtype), rows, cols, inner, backward != 0);
  });
}
duet_status_t duet_softmax_interleaved_ws(duet_device_t device, duet_dtype_t dtype, int log, int64_t rows,
                                          int64_t cols, int64_t inner, const void* x, int64_t x_stride,
                                          int64_t x_col_stride, void* y, int64_t y_stride, int64_t y_col_stride,
                                          void* workspace, size_t workspace_bytes, void* stream) {
  return guarded([&] {
    duet::SoftmaxCall c =
        interleaved_call(dtype, log, rows, cols, inner, x, x_stride, x_col_stride, y, y_stride, y_col_stride, stream);
    c.workspace = duet::Workspace{workspace, workspace_bytes};
    duet::run(to_device(device), c);
  });
}
duet_status_t duet_softmax_interleaved_backward_ws(duet_device_t device, duet_dtype_t dtype, int log, int64_t rows,
                                                   int64_t cols, int64_t inner, const void* y, int64_t y_stride,
                                                   int64_t y_col_stride, const void* dy, int64_t dy_stride,
                                                   int64_t dy_col_stride, void* dx, int64_t dx_stride,
                                                   int64_t dx_col_stride, void* workspace, size_t workspace_bytes,
                                                   void* stream) {
  return guarded([&] {
    duet::SoftmaxCall c = interleaved_backward_call(dtype, log, rows, cols, inner, y, y_stride, y_col_stride, dy,
                                                    dy_stride, dy_col_stride, dx, dx_stride, dx_col_stride, stream);
    c.workspace = duet::Workspace{workspace, workspace_bytes};
    duet::run(to_device(device), c);
  });
}
duet_status_t duet_softmax_workspace_size(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                          int backward, size_t* bytes) {
  return guarded([&] {
    duet::require(bytes != nullptr, duet::Status::invalid_argument, "bytes is a null pointer");
    *bytes = duet::workspace_size(to_device(device), to_dtype(dtype), rows, cols, backward != 0);
  });
}
duet_status_t duet_softmax_ws(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* x,
                              int64_t x_stride, void* y, int64_t y_stride, void* workspace, size_t workspace_bytes,
                              void* stream) {
  return forward_ws(&duet::softmax, device, dtype, rows, cols, x, x_stride, y, y_stride, workspace, workspace_bytes,
                    stream);
}
duet_status_t duet_log_softmax_ws(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* x,
                                  int64_t x_stride, void* y, int64_t y_stride, void* workspace, size_t workspace_bytes,
                                  void* stream) {
  return forward_ws(&duet::log_softmax, device, dtype, rows, cols, x, x_stride, y, y_stride, workspace,
                    workspace_bytes, stream);
}
duet_status_t duet_softmax_backward_ws(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                       const void* y, int64_t y_stride, const void* dy, int64_t dy_stride, void* dx,
                                       int64_t dx_stride, void* workspace, size_t workspace_bytes, void* stream) {
  return backward_ws(&duet::softmax_backward, device, dtype, rows, cols, y, y_stride, dy, dy_stride, dx, dx_stride,
                     workspace, workspace_bytes, stream);
}
duet_status_t duet_log_softmax_backward_ws(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                           const void* y, int64_t y_stride, const void* dy, int64_t dy_stride,
                                           void* dx, int64_t dx_stride, void* workspace, size_t workspace_bytes,
                                           void* stream) {
  return backward_ws(&duet::log_softmax_backward, device, dtype, rows, cols, y, y_stride, dy, dy_stride, dx,
                     dx_stride, workspace, workspace_bytes, stream);
}
duet_status_t duet_masked_softmax(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* x,
                                  int64_t x_stride, void* y, int64_t y_stride, float scale, const duet_mask_t* mask,
                                  int zero_masked_rows, void* stream) {
  return guarded([&] {
    duet::Mask m;
    if (mask != nullptr) {
      m.kind = to_mask_kind(mask->kind);
      m.data = mask->data;
      m.heads = mask->heads;
      m.seq_q = mask->seq_q;
      m.batch_stride = mask->batch_stride;
      m.head_stride = mask->head_stride;
      m.row_stride = mask->row_stride;
      m.causal_offset = mask->causal_offset;
    }
    duet::masked_softmax(to_device(device), to_dtype(dtype), rows, cols, x, x_stride, y, y_stride, scale, m,
                         zero_masked_rows != 0, stream);
  });
}
duet_status_t duet_masked_softmax_backward(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                           const void* y, int64_t y_stride, const void* dy, int64_t dy_stride,
                                           void* dx, int64_t dx_stride, float scale, void* stream) {
  return guarded([&] {
    duet::masked_softmax_backward(to_device(device), to_dtype(dtype), rows, cols, y, y_stride, dy, dy_stride, dx,
                                  dx_stride, scale, stream);
  });
}
duet_status_t duet_cross_entropy_workspace_size(duet_device_t device, int64_t rows, duet_reduction_t reduction,
                                                size_t* bytes) {
  return guarded([&] {
    duet::require(bytes != nullptr, duet::Status::invalid_argument, "bytes is a null pointer");
    *bytes = duet::cross_entropy_workspace_size(to_device(device), rows, to_reduction(reduction));
  });
}
duet_status_t duet_cross_entropy(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                 const void* logits, int64_t logits_stride, duet_index_t target_type,
                                 const void* target, int64_t target_stride, const duet_cross_entropy_options_t* options,
                                 float* loss, float* lse, void* grad, int64_t grad_stride, int32_t* invalid_targets,
                                 void* workspace, size_t workspace_bytes, void* stream) {
  return guarded([&] {
    duet::CrossEntropyCall c;
    set_common(c, dtype, rows, cols, logits, logits_stride, target_type, target, target_stride, options, grad,
               grad_stride, workspace, workspace_bytes, stream);
    c.loss = loss;
    c.lse = lse;
    c.invalid_targets = invalid_targets;
    duet::run(to_device(device), c);
  });
}
// The whole rows' backward: the backward over a shard that is all of them.
duet_status_t duet_cross_entropy_backward(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                          const void* logits, int64_t logits_stride, duet_index_t target_type,
                                          const void* target, int64_t target_stride,
                                          const duet_cross_entropy_options_t* options, const float* lse,
                                          const float* grad_loss, void* grad, int64_t grad_stride, void* workspace,
                                          size_t workspace_bytes, void* stream) {
  return duet_shard_cross_entropy_backward(device, dtype, rows, cols, logits, logits_stride, target_type, target,
                                           target_stride, 0, 0, options, lse, grad_loss, grad, grad_stride, workspace,
                                           workspace_bytes, stream);
}
duet_status_t duet_shard_stats(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* x,
                               int64_t x_stride, duet_index_t target_type, const void* target, int64_t target_stride,
                               int64_t ignore_index, int64_t vocab_start, int64_t vocab, float* stats, void* stream) {
  return guarded([&] {
    // The layout is ShardRowStats'; its 16-byte alignment is checked before use.
    duet::run(to_device(device), duet::ShardStatsCall{.dtype = to_dtype(dtype),
                                                      .rows = rows,
                                                      .cols = cols,
                                                      .x = x,
                                                      .x_stride = x_stride,
                                                      .target_type = to_index_type(target_type),
                                                      .target = target,
                                                      .target_stride = target_stride,
                                                      .ignore_index = ignore_index,
                                                      .vocab_start = vocab_start,
                                                      .vocab = vocab,
                                                      .stats = reinterpret_cast<duet::ShardRowStats*>(stats),
                                                      .stream = stream});
  });
}
duet_status_t duet_shard_softmax(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* x,
                                 int64_t x_stride, const float* max, const float* lse, int log_softmax, void* y,
                                 int64_t y_stride, void* stream) {
  return guarded([&] {
    duet::run(to_device(device), duet::ShardSoftmaxCall{.dtype = to_dtype(dtype),
                                                        .rows = rows,
                                                        .cols = cols,
                                                        .x = x,
                                                        .x_stride = x_stride,
                                                        .lse = lse,
                                                        .max = max,
                                                        .log_softmax = log_softmax != 0,
                                                        .y = y,
                                                        .y_stride = y_stride,
                                                        .stream = stream});
  });
}
duet_status_t duet_shard_combine(duet_device_t device, int64_t shards, int64_t rows, const float* stats,
                                 duet_index_t target_type, const void* target, int64_t target_stride, int64_t vocab,
                                 const duet_cross_entropy_options_t* options, float* max, float* log_sum, float* lse,
                                 float* loss, int32_t* invalid_targets, void* workspace, size_t workspace_bytes,
                                 void* stream) {
  return guarded([&] {
    // The layout is ShardRowStats' (4 floats a row); alignment is checked before use.
    duet::run(to_device(device), duet::ShardCombineCall{.shards = shards,
                                                        .rows = rows,
                                                        .stats = reinterpret_cast<const duet::ShardRowStats*>(stats),
                                                        .target_type = to_index_type(target_type),
                                                        .target = target,
                                                        .target_stride = target_stride,
                                                        .vocab = vocab,
                                                        .options = to_options(options),
                                                        .max = max,
                                                        .log_sum = log_sum,
                                                        .lse = lse,
                                                        .loss = loss,
                                                        .invalid_targets = invalid_targets,
                                                        .stream = stream,
                                                        .workspace = to_workspace(workspace, workspace_bytes)});
  });
}
duet_status_t duet_shard_cross_entropy_backward(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                                const void* logits, int64_t logits_stride, duet_index_t target_type,
                                                const void* target, int64_t target_stride, int64_t vocab_start,
                                                int64_t vocab, const duet_cross_entropy_options_t* options,
                                                const float* lse, const float* grad_loss, void* grad,
                                                int64_t grad_stride, void* workspace, size_t workspace_bytes,
                                                void* stream) {
  return guarded([&] {
    duet::CrossEntropyBackwardCall c;
    set_common(c, dtype, rows, cols, logits, logits_stride, target_type, target, target_stride, options, grad,
               grad_stride, workspace, workspace_bytes, stream);
    c.lse = lse;
    c.grad_loss = grad_loss;
    c.vocab_start = vocab_start;
    c.vocab = vocab;
    duet::run(to_device(device), c);
  });
}
duet_status_t duet_synchronize(duet_device_t device, void* stream) {
  return guarded([&] { duet::synchronize(to_device(device), stream); });
}
duet_status_t duet_copy_kernel(duet_device_t device, void* dst, const void* src, size_t bytes, void* stream) {
  return guarded([&] { duet::copy_kernel(to_device(device), dst, src, bytes, stream); });
}
duet_status_t duet_set_host_threads(int threads) { return guarded([&] { duet::set_host_threads(threads); }); }

}  // extern "C"
