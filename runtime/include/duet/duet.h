/* duet C ABI: the softmax family on raw device pointers, for other
 * languages (Python's ctypes, Rust, ...). No exception crosses it: every
 * call returns a status, and duet_last_error() gives the message of the last
 * failure on the calling thread. */
#ifndef DUET_DUET_H
#define DUET_DUET_H

#include <stddef.h>
#include <stdint.h>

/* DUET_API, and the version this header belongs to: DUET_VERSION_MAJOR,
 * DUET_VERSION_MINOR and DUET_VERSION_PATCH (duet_version() gives the
 * library's at run time). */
#include "duet/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum duet_status_t {
  DUET_SUCCESS = 0,
  DUET_ERROR_INVALID_ARGUMENT = 1,
  DUET_ERROR_NO_DEVICE = 2,
  DUET_ERROR_UNSUPPORTED = 3,
  DUET_ERROR_OUT_OF_MEMORY = 4,
  DUET_ERROR_VENDOR = 5,
  DUET_ERROR_IO = 6,
  DUET_ERROR_PARSE = 7,
  DUET_ERROR_INTERNAL = 8,
  DUET_STATUS_MAX_ENUM = 0x7fffffff
} duet_status_t;

/* The *_MIN_ENUM and *_MAX_ENUM members give each enum the whole range of a
 * 32-bit int, so any int a caller passes, negative ones included, is a valid
 * value to test (and reject) rather than undefined. */
typedef enum duet_dtype_t {
  DUET_DTYPE_MIN_ENUM = -0x7fffffff - 1,
  DUET_F32 = 0,
  DUET_F16 = 1,
  DUET_BF16 = 2,
  DUET_DTYPE_MAX_ENUM = 0x7fffffff
} duet_dtype_t;
typedef enum duet_backend_t {
  DUET_BACKEND_MIN_ENUM = -0x7fffffff - 1,
  DUET_BACKEND_HOST = 0,
  DUET_BACKEND_CUDA = 1,
  DUET_BACKEND_HIP = 2,
  DUET_BACKEND_MAX_ENUM = 0x7fffffff
} duet_backend_t;

typedef struct duet_device_t {
  duet_backend_t backend;
  int ordinal;
} duet_device_t;

DUET_API const char* duet_version(void);
DUET_API const char* duet_status_string(duet_status_t status);
/* Message of the last failed call on this thread ("" if none). */
DUET_API const char* duet_last_error(void);

/* All devices of all built backends, GPUs first, the host last. */
DUET_API duet_status_t duet_device_count(int* count);
DUET_API duet_status_t duet_get_device(int index, duet_device_t* device);
/* The device whose memory holds `ptr` (DUET_BACKEND_HOST if none). */
DUET_API duet_status_t duet_device_of_pointer(const void* ptr, duet_device_t* device);

/* Strides are in elements; stream is a cudaStream_t / hipStream_t or NULL. */
DUET_API duet_status_t duet_softmax(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                    const void* x, int64_t x_stride, void* y, int64_t y_stride, void* stream);
DUET_API duet_status_t duet_log_softmax(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                        const void* x, int64_t x_stride, void* y, int64_t y_stride, void* stream);
DUET_API duet_status_t duet_softmax_backward(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                             const void* y, int64_t y_stride, const void* dy, int64_t dy_stride,
                                             void* dx, int64_t dx_stride, void* stream);
DUET_API duet_status_t duet_log_softmax_backward(duet_device_t device, duet_dtype_t dtype, int64_t rows,
                                                 int64_t cols, const void* y, int64_t y_stride, const void* dy,
                                                 int64_t dy_stride, void* dx, int64_t dx_stride, void* stream);
/* Caller-provided workspace (CUB's two-phase style), so that the caller
 * owns every allocation (a CUDA graph can capture the calls):
 * duet_softmax_workspace_size gives the bytes a call of this shape needs on
 * `device` (backward: 0 forward, 1 backward; the same for softmax and
 * log_softmax), 0 for most shapes and for any pointers and strides. The
 * *_ws calls then take `workspace`: device memory of `device`, 16-byte
 * aligned, apart from the matrices, uninitialised is fine, in use until the
 * call's kernels finish on `stream`. A workspace smaller than needed is
 * refused with DUET_ERROR_INVALID_ARGUMENT, the message naming the size;
 * where the shape needs none, `workspace` may be NULL. The calls without
 * _ws keep a per-stream workspace of their own, allocated on first need. */
DUET_API duet_status_t duet_softmax_workspace_size(duet_device_t device, duet_dtype_t dtype, int64_t rows,
                                                   int64_t cols, int backward, size_t* bytes);
DUET_API duet_status_t duet_softmax_ws(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                       const void* x, int64_t x_stride, void* y, int64_t y_stride, void* workspace,
                                       size_t workspace_bytes, void* stream);
DUET_API duet_status_t duet_log_softmax_ws(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                           const void* x, int64_t x_stride, void* y, int64_t y_stride,
                                           void* workspace, size_t workspace_bytes, void* stream);
DUET_API duet_status_t duet_softmax_backward_ws(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                                const void* y, int64_t y_stride, const void* dy, int64_t dy_stride,
                                                void* dx, int64_t dx_stride, void* workspace, size_t workspace_bytes,
                                                void* stream);
DUET_API duet_status_t duet_log_softmax_backward_ws(duet_device_t device, duet_dtype_t dtype, int64_t rows,
                                                    int64_t cols, const void* y, int64_t y_stride, const void* dy,
                                                    int64_t dy_stride, void* dx, int64_t dx_stride, void* workspace,
                                                    size_t workspace_bytes, void* stream);
/* The four *_ws calls above through one entry, their arguments in one
 * struct: a binding fills it at once instead of converting each argument
 * (Python's ctypes takes about 0.1 us an argument). size must be
 * sizeof(duet_softmax_args_t), or DUET_SOFTMAX_ARGS_V1_SIZE for the struct
 * before out_dtype (read as out_dtype = dtype); a struct of another size is
 * refused, so a later version can grow it. Fields not used by the call (dy
 * in a forward) are ignored. flags, or'ed: DUET_CALL_DEVICES_CHECKED where
 * the caller vouches that x, dy and out are memory of `device` (a
 * framework's tensors know their device): duet then skips the vendor's
 * per-pointer device query (duet::SoftmaxCall::caller_checked_devices);
 * every other check stays. DUET_CALL_OUT_DTYPE: out is of out_dtype, not
 * dtype (duet::SoftmaxCall::out_dtype; without the flag out_dtype is not
 * read, so a zeroed struct keeps one dtype): DUET_F16/DUET_BF16 x into a
 * DUET_F32 y forward, DUET_F32 y and dy into a DUET_F16/DUET_BF16 dx
 * backward, the cast in the same pass. reserved: 0. */
typedef struct duet_softmax_args_t {
  uint64_t size;
  int32_t log;      /* 0 softmax, 1 log_softmax */
  int32_t backward; /* 0 forward (x -> out), 1 backward (x = y, dy -> out = dx) */
  duet_dtype_t dtype;
  uint32_t flags;
  int64_t rows;
  int64_t cols;
  const void* x;
  int64_t x_stride;
  const void* dy;
  int64_t dy_stride;
  void* out;
  int64_t out_stride;
  void* workspace;
  uint64_t workspace_bytes;
  void* stream;
  duet_dtype_t out_dtype;
  uint32_t reserved;
} duet_softmax_args_t;
#define DUET_SOFTMAX_ARGS_V1_SIZE 112u
#define DUET_CALL_DEVICES_CHECKED 1u
#define DUET_CALL_OUT_DTYPE 2u
DUET_API duet_status_t duet_softmax_call(duet_device_t device, const duet_softmax_args_t* args);

/* Softmax over interleaved rows, as a non-last dimension holds them
 * (duet/softmax.hpp, SoftmaxCall::inner, has the layout and its rules):
 * `rows` outer rows of `inner` rows of `cols` elements; element c of row
 * (r, i) is at r * stride + c * col_stride + i (elements). Dim d of a
 * contiguous tensor: rows = the sizes before d multiplied, cols = size d,
 * inner = the sizes after d multiplied, col_stride = inner, stride = cols *
 * inner. `log`: 0 softmax, 1 log_softmax. Where the shape needs a workspace
 * (duet_softmax_interleaved_workspace_size), these keep a per-stream one of
 * their own, allocated on first need; the *_ws calls below take the
 * caller's. */
DUET_API duet_status_t duet_softmax_interleaved(duet_device_t device, duet_dtype_t dtype, int log, int64_t rows,
                                                int64_t cols, int64_t inner, const void* x, int64_t x_stride,
                                                int64_t x_col_stride, void* y, int64_t y_stride,
                                                int64_t y_col_stride, void* stream);
DUET_API duet_status_t duet_softmax_interleaved_backward(duet_device_t device, duet_dtype_t dtype, int log,
                                                         int64_t rows, int64_t cols, int64_t inner, const void* y,
                                                         int64_t y_stride, int64_t y_col_stride, const void* dy,
                                                         int64_t dy_stride, int64_t dy_col_stride, void* dx,
                                                         int64_t dx_stride, int64_t dx_col_stride, void* stream);
/* The caller's workspace for interleaved calls, as for rows
 * (duet_softmax_workspace_size and the *_ws calls): the bytes a call of
 * this shape needs on `device` for any pointers and strides (0 for most
 * shapes; on GPUs, rows on packs too long for a tile on chip take
 * interleaved_stream's queue or interleaved_slabs' pairs), then the two
 * calls with it. */
DUET_API duet_status_t duet_softmax_interleaved_workspace_size(duet_device_t device, duet_dtype_t dtype, int backward,
                                                               int64_t rows, int64_t cols, int64_t inner,
                                                               size_t* bytes);
DUET_API duet_status_t duet_softmax_interleaved_ws(duet_device_t device, duet_dtype_t dtype, int log, int64_t rows,
                                                   int64_t cols, int64_t inner, const void* x, int64_t x_stride,
                                                   int64_t x_col_stride, void* y, int64_t y_stride,
                                                   int64_t y_col_stride, void* workspace, size_t workspace_bytes,
                                                   void* stream);
DUET_API duet_status_t duet_softmax_interleaved_backward_ws(
    duet_device_t device, duet_dtype_t dtype, int log, int64_t rows, int64_t cols, int64_t inner, const void* y,
    int64_t y_stride, int64_t y_col_stride, const void* dy, int64_t dy_stride, int64_t dy_col_stride, void* dx,
    int64_t dx_stride, int64_t dx_col_stride, void* workspace, size_t workspace_bytes, void* stream);
/* Scaled, masked softmax (duet/masked_softmax.hpp has the semantics):
 * y = softmax(scale * x + mask) over rows = batch * heads * seq_q rows of
 * cols (seq_k) elements. `mask` NULL means none. A boolean mask is one byte
 * an element, nonzero = masked out; an additive one has the scores' dtype;
 * a causal one reads no memory (column j of query i is masked out when
 * j > i + causal_offset). Mask strides are in elements, 0 broadcasts.
 * zero_masked_rows: 0 gives NaN for a row with every element masked (torch),
 * 1 gives zeros. */
typedef enum duet_mask_kind_t {
  DUET_MASK_KIND_MIN_ENUM = -0x7fffffff - 1,
  DUET_MASK_NONE = 0,
  DUET_MASK_ADDITIVE = 1,
  DUET_MASK_BOOLEAN = 2,
  DUET_MASK_CAUSAL = 3,
  DUET_MASK_KIND_MAX_ENUM = 0x7fffffff
} duet_mask_kind_t;
typedef struct duet_mask_t {
  duet_mask_kind_t kind;
  const void* data;
  int64_t heads;
  int64_t seq_q;
  int64_t batch_stride;
  int64_t head_stride;
  int64_t row_stride;
  int64_t causal_offset;
} duet_mask_t;
DUET_API duet_status_t duet_masked_softmax(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                           const void* x, int64_t x_stride, void* y, int64_t y_stride, float scale,
                                           const duet_mask_t* mask, int zero_masked_rows, void* stream);
/* dx = scale * y * (dy - sum(dy * y)) */
DUET_API duet_status_t duet_masked_softmax_backward(duet_device_t device, duet_dtype_t dtype, int64_t rows,
                                                    int64_t cols, const void* y, int64_t y_stride, const void* dy,
                                                    int64_t dy_stride, void* dx, int64_t dx_stride, float scale,
                                                    void* stream);

/* Cross-entropy over rows of cols logits with class-index targets
 * (duet/cross_entropy.hpp has the semantics). `options` NULL means
 * ignore_index -100, no label smoothing, no z-loss, reduction mean.
 * Outputs: loss (float32: rows of them for DUET_REDUCTION_NONE, else one),
 * lse (float32, rows, optional), grad (the logits' dtype, optional; the
 * gradient for an upstream gradient of 1; may be the logits themselves).
 * A target outside [0, cols) other than ignore_index: the host backend
 * refuses the call with DUET_ERROR_INVALID_ARGUMENT; on a GPU that row's
 * loss, lse and gradient are NaN and `invalid_targets` (device memory, one
 * int32, optional) receives the count of such rows.
 * Workspace as for softmax: duet_cross_entropy_workspace_size, then pass it,
 * or NULL (0 bytes) to use duet's per-stream cache. */
typedef enum duet_index_t {
  DUET_INDEX_MIN_ENUM = -0x7fffffff - 1,
  DUET_INDEX_I32 = 0,
  DUET_INDEX_I64 = 1,
  DUET_INDEX_MAX_ENUM = 0x7fffffff
} duet_index_t;
typedef enum duet_reduction_t {
  DUET_REDUCTION_MIN_ENUM = -0x7fffffff - 1,
  DUET_REDUCTION_NONE = 0,
  DUET_REDUCTION_MEAN = 1,
  DUET_REDUCTION_SUM = 2,
  DUET_REDUCTION_MAX_ENUM = 0x7fffffff
} duet_reduction_t;
typedef struct duet_cross_entropy_options_t {
  int64_t ignore_index;
  float label_smoothing;
  float z_loss;
  duet_reduction_t reduction;
} duet_cross_entropy_options_t;
DUET_API duet_status_t duet_cross_entropy_workspace_size(duet_device_t device, int64_t rows,
                                                         duet_reduction_t reduction, size_t* bytes);
DUET_API duet_status_t duet_cross_entropy(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                          const void* logits, int64_t logits_stride, duet_index_t target_type,
                                          const void* target, int64_t target_stride,
                                          const duet_cross_entropy_options_t* options, float* loss, float* lse,
                                          void* grad, int64_t grad_stride, int32_t* invalid_targets,
                                          void* workspace, size_t workspace_bytes, void* stream);
/* The gradient from the forward's lse and the upstream gradient grad_loss
 * (float32: rows of them for DUET_REDUCTION_NONE, else one). */
DUET_API duet_status_t duet_cross_entropy_backward(duet_device_t device, duet_dtype_t dtype, int64_t rows,
                                                   int64_t cols, const void* logits, int64_t logits_stride,
                                                   duet_index_t target_type, const void* target,
                                                   int64_t target_stride, const duet_cross_entropy_options_t* options,
                                                   const float* lse, const float* grad_loss, void* grad,
                                                   int64_t grad_stride, void* workspace, size_t workspace_bytes,
                                                   void* stream);

/* Vocabulary-parallel halves (duet/vocab_parallel.hpp has the semantics):
 * the rows' shard of columns [vocab_start, vocab_start + cols) of `vocab`
 * classes (vocab 0: vocab_start + cols).
 * duet_shard_stats writes 4 floats a row to `stats` (16-byte aligned):
 * {max, sum exp(x - max), x[target - vocab_start] or 0, sum x}; target may
 * be NULL (the third float is then 0). An invalid target: as for
 * duet_cross_entropy (host: DUET_ERROR_INVALID_ARGUMENT; GPU: NaN there). */
DUET_API duet_status_t duet_shard_stats(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                        const void* x, int64_t x_stride, duet_index_t target_type,
                                        const void* target, int64_t target_stride, int64_t ignore_index,
                                        int64_t vocab_start, int64_t vocab, float* stats, void* stream);
/* y = exp(x - lse) (log_softmax 0) or x - lse (1), lse: rows floats, the
 * whole rows' log-sum-exp; with `max` (rows floats, or NULL) the rows' max
 * M and lse = log S: y = exp((x - M) - lse) or (x - M) - lse. y may be x. */
DUET_API duet_status_t duet_shard_softmax(duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols,
                                          const void* x, int64_t x_stride, const float* max, const float* lse,
                                          int log_softmax, void* y, int64_t y_stride, void* stream);
/* The combine: `shards` shards' statistics of the same rows (shard k's
 * at stats + 4 * rows * k, an all-gather of duet_shard_stats' outputs) into
 * the whole rows' max M, log S and lse = M + log S (rows floats each, every
 * one optional) and, with targets (classes of the whole `vocab`), the
 * cross-entropy loss as duet_cross_entropy's (options NULL: its defaults;
 * invalid targets as there). The loss takes duet_cross_entropy_workspace_size
 * bytes of workspace (NULL, 0: duet's per-stream cache). */
DUET_API duet_status_t duet_shard_combine(duet_device_t device, int64_t shards, int64_t rows, const float* stats,
                                          duet_index_t target_type, const void* target, int64_t target_stride,
                                          int64_t vocab, const duet_cross_entropy_options_t* options, float* max,
                                          float* log_sum, float* lse, float* loss, int32_t* invalid_targets,
                                          void* workspace, size_t workspace_bytes, void* stream);
/* duet_cross_entropy_backward over a shard: targets are classes of the
 * whole vocabulary; lse is the whole rows'. */
DUET_API duet_status_t duet_shard_cross_entropy_backward(
    duet_device_t device, duet_dtype_t dtype, int64_t rows, int64_t cols, const void* logits,
    int64_t logits_stride, duet_index_t target_type, const void* target, int64_t target_stride,
    int64_t vocab_start, int64_t vocab, const duet_cross_entropy_options_t* options, const float* lse,
    const float* grad_loss, void* grad, int64_t grad_stride, void* workspace, size_t workspace_bytes,
    void* stream);

/* Waits for `stream` (NULL: the whole device). */
DUET_API duet_status_t duet_synchronize(duet_device_t device, void* stream);
/* Copies `bytes` from src to dst, both memory of `device`, on `stream`
 * (asynchronous on GPUs) with duet's own copy kernel: 16-byte accesses where
 * the addresses differ by a multiple of 16, any offset and size
 * (duet::copy_kernel in duet/device.hpp). The ranges must not overlap; 0
 * bytes does nothing. The host backend copies with memcpy on its threads.
 * duet-bench and bench/compare.py time it beside the vendor's copy for the
 * copy ceiling. */
DUET_API duet_status_t duet_copy_kernel(duet_device_t device, void* dst, const void* src, size_t bytes, void* stream);
/* Threads of the host backend: 0 = one per CPU (or DUET_HOST_THREADS). */
DUET_API duet_status_t duet_set_host_threads(int threads);

/* duet's log messages (those DUET_LOG_LEVEL lets through: trace, debug,
 * info, warn, error, critical, off; default warn) go to stderr, or to
 * `callback` once one is set (NULL: stderr again). `level` is 0 (trace) to
 * 5 (critical); `message` is valid during the call. The callback runs on the
 * thread that logs, possibly on several threads at once. */
typedef void (*duet_log_callback_t)(int level, const char* message, void* user);
DUET_API void duet_set_log_callback(duet_log_callback_t callback, void* user);

#ifdef __cplusplus
}
#endif
#endif /* DUET_DUET_H */
