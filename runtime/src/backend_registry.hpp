// The built backends as tables of functions: the runtime reaches CUDA, HIP
// and the host through one shape, so one process can hold all three.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "duet/device_props.hpp"
#include "duet/occupancy.hpp"
#include "fused_args.hpp"
#include "softmax_args.hpp"

namespace duet::detail {

struct BackendOps {
  BackendKind kind;
  int (*device_count)() noexcept;
  std::string (*no_device_reason)();
  DeviceProps (*device_props)(int);
  int (*runtime_version)() noexcept;
  int (*driver_version)() noexcept;
  std::string (*compiled_targets)();
  KernelAttributes (*kernel_attributes)(int, int, bool);
  int (*occupancy_blocks_per_sm)(int, int, bool, int, std::int64_t);
  int (*max_active_clusters)(int, int, int, int);
  void (*launch_softmax)(int, int, const SoftmaxArgs&, const LaunchGeometry&, const LaunchGeometry&, void*);
  void (*launch_fused)(int, const FusedArgs&, const FusedLaunch&, void*);
  void* (*device_alloc)(int, std::size_t);
  void (*device_free)(int, void*) noexcept;
  void (*copy_to_device)(int, void*, const void*, std::size_t);
  void (*copy_to_host)(int, void*, const void*, std::size_t);
  void (*copy_device_to_device)(int, void*, const void*, std::size_t, void*);
  void (*copy_kernel)(int, void*, const void*, std::size_t, void*);
  void (*fill_bytes)(int, void*, int, std::size_t);
  void (*synchronize)(int, void*);
  void* (*stream_create)(int);
  void (*stream_destroy)(int, void*) noexcept;
  int (*pointer_device)(const void*);
  void* (*event_create)(int);
  void (*event_destroy)(int, void*) noexcept;
  void (*event_record)(int, void*, void*);
  float (*event_elapsed_ms)(int, void*, void*);
};

// Built backends, GPU vendors first, host last.
const std::vector<const BackendOps*>& backends();
// The table for `kind`; throws duet::Error(unsupported) if it was not built.
const BackendOps& backend(BackendKind kind);

}  // namespace duet::detail
