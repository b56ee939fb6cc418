// Launching a checked fused call (masked softmax, cross-entropy) on its
// device: GPUs through the fused planner (plans cached per device and
// shape), the host backend directly.
#pragma once

#include "duet/device.hpp"
#include "duet/fused_planner.hpp"
#include "fused_args.hpp"

namespace duet::detail {

// Whether the vector kernels serve the call: every tensor of a row starts
// at the same offset within a 16-byte pack (fused_rows_congruent); the row
// length and the offset itself are free.
bool fused_vector_ok(const FusedArgs& args);
// Whether some row is not whole 16-byte packs from its start (the vector
// kernels with edges serve such rows).
bool fused_row_edges(const FusedArgs& args);

// The planner's view of a checked call that reads no mask (cross-entropy,
// the vocabulary-parallel halves), but for vector_ok and row_edges.
FusedShape fused_shape(const FusedArgs& args);

// `args` has been checked; `shape` describes it for the planner, but for
// vector_ok and row_edges, which launch_fused sets from the args.
void launch_fused(const Device& dev, const FusedArgs& args, const FusedShape& shape, void* stream);

}  // namespace duet::detail
