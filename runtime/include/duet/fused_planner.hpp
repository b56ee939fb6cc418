// The launch planner of the fused row operations (masked softmax,
// cross-entropy): from a device's properties and a shape, the kernel
// variant and the grid. The host backend needs no plan.
#pragma once

#include <cstdint>
#include <string>

#include "duet/device_props.hpp"
#include "duet/export.h"
#include "fused_args.hpp"

namespace duet {

struct FusedShape {
  FusedOp op = FusedOp::masked_softmax;
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  // 16-byte accesses are possible for every tensor of the row.
  bool vector_ok = true;
  MaskKind mask_kind = MaskKind::none;
  bool gradient = false;  // cross_entropy: the forward writes the gradient
};

struct FusedPlan {
  FusedLaunch launch;
  std::string kernel;  // the variant's name
  std::string why;     // one line: why this kernel and grid
};

// Throws duet::Error(invalid_argument) for a bad shape and
// duet::Error(unsupported) when nothing fits the device.
DUET_API FusedPlan plan_fused(const DeviceProps& dev, const FusedShape& shape);

}  // namespace duet
