// The operations every backend library exports, listed once:
// DUET_BACKEND_OPS_LIST(X, a) expands X(a, return type, name, (parameters),
// noexcept or nothing) for each. backend_api.hpp declares them in a backend's
// namespace; the runtime's registry (runtime/src/device/backend_registry.*) holds
// them as a table of function pointers per built backend.
#pragma once

// The entries, what they do:
//   device_count            devices this backend sees; 0 (never an error) without a driver or device
//   no_device_reason        why device_count() found none ("no CUDA-capable device", ...), or ""
//   device_props            uncached query; throws duet::Error(no_device) for an ordinal not there
//   runtime_version,        runtime and driver versions, or 0 where unknown (no driver)
//   driver_version
//   compiled_targets        GPU targets this library was compiled for, e.g. "sm_80;sm_90"
//   kernel_attributes       attributes of the compiled kernel of catalogue entry `variant` on a live
//                           device (its first kernel, or the finalize kernel of a split_row entry)
//   occupancy_blocks_per_sm the vendor's own occupancy answer, for cross-checking the exact model
//   max_active_clusters     clusters of `cluster_blocks` blocks of a cluster_row or cluster_row_smem
//                           variant, each with `dynamic_smem` bytes, the device holds at once
//                           (cudaOccupancyMaxActiveClusters); 0 where none fits or the vendor has
//                           no clusters
//   launch_softmax          one planned softmax launch on `stream`
//   launch_fused            the fused row operations (masked softmax, cross-entropy): every kernel
//                           the operation needs, enqueued on `stream` (cross-entropy: counting
//                           targets, the rows, the reduction); `launch` is the fused planner's
//                           choice on GPUs, the host backend ignores it; throws duet::Error
//   device_alloc ..         memory and streams (the runtime's workspace, tests and tools);
//   stream_destroy          device_alloc throws out_of_memory
//   copy_kernel             the copy by duet's own kernel (GPUs: kernels/copy_launch.cu, 16-byte
//                           accesses; host: the pooled memcpy of copy_device_to_device); the runtime
//                           has checked the pointers (non-null, no overlap)
//   pointer_device          which device memory `p` lives on: -1 for host (or unknown) memory
//   event_create ..         device-side timing for the benchmark: events on `stream`
//   event_elapsed_ms
#define DUET_BACKEND_OPS_LIST(X, a)                                                                        \
  X(a, int, device_count, (), noexcept)                                                                    \
  X(a, std::string, no_device_reason, (), )                                                                \
  X(a, DeviceProps, device_props, (int ordinal), )                                                         \
  X(a, int, runtime_version, (), noexcept)                                                                 \
  X(a, int, driver_version, (), noexcept)                                                                  \
  X(a, std::string, compiled_targets, (), )                                                                \
  X(a, KernelAttributes, kernel_attributes, (int ordinal, int variant, bool finalize), )                   \
  X(a, int, occupancy_blocks_per_sm, (int ordinal, int variant, bool finalize, int threads,                \
                                      std::int64_t dynamic_smem), )                                         \
  X(a, int, max_active_clusters, (int ordinal, int variant, int threads, int cluster_blocks,               \
                                  std::int64_t dynamic_smem), )                                             \
  X(a, void, launch_softmax, (int ordinal, int variant, const SoftmaxArgs& args,                           \
                              const LaunchGeometry& geometry, const LaunchGeometry& finalize_geometry,      \
                              void* stream), )                                                              \
  X(a, void, launch_fused, (int ordinal, const FusedArgs& args, const FusedLaunch& launch, void* stream), ) \
  X(a, void*, device_alloc, (int ordinal, std::size_t bytes), )                                            \
  X(a, void, device_free, (int ordinal, void* p), noexcept)                                                \
  X(a, void, copy_to_device, (int ordinal, void* dst, const void* src, std::size_t bytes), )               \
  X(a, void, copy_to_host, (int ordinal, void* dst, const void* src, std::size_t bytes), )                 \
  X(a, void, copy_device_to_device, (int ordinal, void* dst, const void* src, std::size_t bytes,           \
                                     void* stream), )                                                       \
  X(a, void, copy_kernel, (int ordinal, void* dst, const void* src, std::size_t bytes, void* stream), )    \
  X(a, void, fill_bytes, (int ordinal, void* dst, int value, std::size_t bytes), )                         \
  X(a, void, synchronize, (int ordinal, void* stream), )                                                   \
  X(a, void*, stream_create, (int ordinal), )                                                              \
  X(a, void, stream_destroy, (int ordinal, void* stream), noexcept)                                        \
  X(a, int, pointer_device, (const void* p), )                                                             \
  X(a, void*, event_create, (int ordinal), )                                                               \
  X(a, void, event_destroy, (int ordinal, void* event), noexcept)                                          \
  X(a, void, event_record, (int ordinal, void* event, void* stream), )                                     \
  X(a, float, event_elapsed_ms, (int ordinal, void* start, void* stop), )
