// The launch planner of the fused row operations (masked softmax,
// cross-entropy): from a device's properties and a shape, the kernel
// variant and the grid. The host backend needs no plan.
#pragma once

#include <cstdint>
#include <string>

#include "duet/device_props.hpp"
#include "duet/export.h"
#include "duet/planner.hpp"
#include "fused_args.hpp"

namespace duet {

struct FusedShape {
  FusedOp op = FusedOp::masked_softmax;
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  // Every tensor of a row starts at the same offset within a 16-byte pack
  // (pointers and row strides congruent modulo the pack's elements), so
  // the vector kernels serve the rows: whole packs at aligned addresses,
  // the elements before and after them one at a time. Row lengths and the
  // offset itself are free. The library's calls set it from their tensors.
  bool vector_ok = true;
  MaskKind mask_kind = MaskKind::none;
  bool gradient = false;  // cross_entropy: the forward writes the gradient
  // vector_ok rows that do not all start on a 16-byte boundary (a view at an
  // odd element, a row stride not a whole number of packs): the vector
  // kernels with edges serve them. A row length not a whole number of packs
  // needs them whatever this says. The library's calls set it.
  bool row_edges = false;
  // The output is an input itself (cross-entropy's gradient written into
  // the logits, masked softmax in place): its writes then move no lines of
  // their own, which the planner's L2 estimate for stream_row's stash
  // counts (bench/NOTES.md v46). The library's calls set it.
  bool in_place = false;
};

struct FusedPlan {
  FusedLaunch launch;
  std::string kernel;  // the variant's name
  std::string why;     // one line: why this kernel and grid
};

// Throws duet::Error(invalid_argument) for a bad shape and
// duet::Error(unsupported) when nothing fits the device. Of the options,
// fused_stash, fused_ahead, force_stream and the cluster switches apply
// (the library's calls pass plan_options()).
DUET_API FusedPlan plan_fused(const DeviceProps& dev, const FusedShape& shape, const PlanOptions& options = {});

}  // namespace duet
