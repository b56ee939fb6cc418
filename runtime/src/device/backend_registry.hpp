// The built backends as tables of functions: the runtime reaches CUDA, HIP
// and the host through one shape, so one process can hold all three.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend_ops.hpp"
#include "duet/device_props.hpp"
#include "duet/occupancy.hpp"
#include "fused_args.hpp"
#include "softmax_args.hpp"

namespace duet::detail {

// One function pointer per entry of the list (backends/backend_ops.hpp).
#define DUET_BACKEND_OP_FIELD(unused, R, name, params, nx) R(*name) params nx;
struct BackendOps {
  BackendKind kind;
  DUET_BACKEND_OPS_LIST(DUET_BACKEND_OP_FIELD, )
};
#undef DUET_BACKEND_OP_FIELD

// Built backends, GPU vendors first, host last.
const std::vector<const BackendOps*>& backends();
// The table for `kind`; throws duet::Error(unsupported) if it was not built.
const BackendOps& backend(BackendKind kind);

}  // namespace duet::detail
