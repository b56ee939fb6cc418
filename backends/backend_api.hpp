// The interface every backend library exports, in namespace duet::DUET_NS
// (duet::cuda, duet::hip or duet::host). Vendor-free: the runtime includes it
// once per built backend, with DUET_NS set, to reach all of them from one
// process.
//
// No include guard on purpose: it is meant to be included once per namespace.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend_ops.hpp"
#include "duet/device_props.hpp"
#include "duet/error.hpp"
#include "duet/occupancy.hpp"
#include "fused_args.hpp"
#include "softmax_args.hpp"
#include "softmax_variants.hpp"

#ifndef DUET_NS
#error "DUET_NS must name the backend namespace (cuda, hip or host)"
#endif

namespace duet::DUET_NS {

// One declaration per entry of the list (backend_ops.hpp says what each does).
#define DUET_DECLARE_BACKEND_OP(unused, R, name, params, nx) R name params nx;
DUET_BACKEND_OPS_LIST(DUET_DECLARE_BACKEND_OP, )
#undef DUET_DECLARE_BACKEND_OP

}  // namespace duet::DUET_NS
