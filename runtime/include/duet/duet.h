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
/* Waits for `stream` (NULL: the whole device). */
DUET_API duet_status_t duet_synchronize(duet_device_t device, void* stream);
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
