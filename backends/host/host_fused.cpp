// Placeholder until the host's fused operations land.
#define DUET_NS host
#include "backend_api.hpp"

namespace duet::host {

void launch_fused(int, const FusedArgs&, const FusedLaunch&, void*) {
  throw Error(Status::unsupported, "fused operations are not built yet");
}

}  // namespace duet::host
