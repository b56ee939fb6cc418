// Placeholder until the fused kernels land.
#include "gpu_check.hpp"
#include "backend_api.hpp"

namespace duet::DUET_NS {

void launch_fused(int, const FusedArgs&, const FusedLaunch&, void*) {
  throw Error(Status::unsupported, "fused operations have no GPU kernels in this build");
}

}  // namespace duet::DUET_NS
