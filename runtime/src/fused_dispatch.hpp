// Launching a checked fused call (masked softmax, cross-entropy) on its
// device: GPUs through the fused planner (plans cached per device and
// shape), the host backend directly.
#pragma once

#include "duet/device.hpp"
#include "duet/fused_planner.hpp"
#include "fused_args.hpp"

namespace duet::detail {

// Whether every tensor of the rows is 16-byte aligned and a whole number of
// 16-byte vectors long and apart: the pointer, the row stride in bytes and
// the row's bytes (cols * elem) all multiples of 16. A null pointer (an
// absent tensor) and a zero stride (a broadcast) pass.
bool vector_aligned(const void* p, std::int64_t stride_bytes, std::int64_t row_bytes);

// The planner's view of a checked call that reads no mask (cross-entropy,
// the vocabulary-parallel halves): vector_ok when x and out (if any) both
// allow 16-byte accesses.
FusedShape fused_shape(const FusedArgs& args);

// `args` has been checked; `shape` describes it for the planner.
void launch_fused(const Device& dev, const FusedArgs& args, const FusedShape& shape, void* stream);

}  // namespace duet::detail
