#include "backend_registry.hpp"

#include "duet/config.hpp"
#include "duet/error.hpp"

#define DUET_NS host
#include "backend_api.hpp"
#undef DUET_NS
#if DUET_HAVE_CUDA
#define DUET_NS cuda
#include "backend_api.hpp"
#undef DUET_NS
#endif
#if DUET_HAVE_HIP
#define DUET_NS hip
#include "backend_api.hpp"
#undef DUET_NS
#endif

// Every entry of BackendOps, taken from one backend namespace.
#define DUET_BACKEND_OPS(ns, kind)                                                                            \
  BackendOps {                                                                                                \
    kind, &ns::device_count, &ns::no_device_reason, &ns::device_props, &ns::runtime_version,                  \
        &ns::driver_version, &ns::compiled_targets, &ns::kernel_attributes, &ns::occupancy_blocks_per_sm,     \
        &ns::max_active_clusters, &ns::launch_softmax, &ns::launch_fused, &ns::device_alloc, &ns::device_free, \
        &ns::copy_to_device, &ns::copy_to_host, &ns::copy_device_to_device, &ns::copy_kernel, &ns::fill_bytes, \
        &ns::synchronize, &ns::stream_create, &ns::stream_destroy, &ns::pointer_device, &ns::event_create,     \
        &ns::event_destroy, &ns::event_record, &ns::event_elapsed_ms                                          \
  }

namespace duet::detail {

const std::vector<const BackendOps*>& backends() {
#if DUET_HAVE_CUDA
  static const BackendOps cuda_ops = DUET_BACKEND_OPS(duet::cuda, BackendKind::cuda);
#endif
#if DUET_HAVE_HIP
  static const BackendOps hip_ops = DUET_BACKEND_OPS(duet::hip, BackendKind::hip);
#endif
  static const BackendOps host_ops = DUET_BACKEND_OPS(duet::host, BackendKind::host);
  static const std::vector<const BackendOps*> all{
#if DUET_HAVE_CUDA
      &cuda_ops,
#endif
#if DUET_HAVE_HIP
      &hip_ops,
#endif
      &host_ops};
  return all;
}

const BackendOps& backend(BackendKind kind) {
  for (const BackendOps* ops : backends())
    if (ops->kind == kind) return *ops;
  throw Error(Status::unsupported, "the " + std::string(to_string(kind)) + " backend is not built into this duet");
}

}  // namespace duet::detail
