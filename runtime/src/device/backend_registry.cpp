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
#define DUET_BACKEND_OP_ADDRESS(ns, R, name, params, nx) &ns::name,
#define DUET_BACKEND_OPS(ns, kind) \
  BackendOps { kind, DUET_BACKEND_OPS_LIST(DUET_BACKEND_OP_ADDRESS, ns) }

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
