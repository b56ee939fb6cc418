// Placeholder until the fused kernels land: no GPU plan yet.
#include "duet/fused_planner.hpp"

#include "duet/error.hpp"

namespace duet {

FusedPlan plan_fused(const DeviceProps&, const FusedShape&) {
  throw Error(Status::unsupported, "fused operations have no GPU kernels in this build");
}

}  // namespace duet
