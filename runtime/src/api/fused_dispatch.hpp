// Launching a checked fused call (masked softmax, cross-entropy) on its
// device: GPUs through the fused planner (plans cached per device and
// shape), the host backend directly.
#pragma once

#include <optional>
#include <vector>

#include "duet/cross_entropy.hpp"
#include "duet/device.hpp"
#include "duet/fused_planner.hpp"
#include "duet/softmax.hpp"
#include "fused_args.hpp"
#include "validate.hpp"

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

// Throw invalid_argument for a reduction, label smoothing or z-loss that
// duet/cross_entropy.hpp does not define.
void check_reduction(Reduction reduction);
void check_cross_entropy_options(const CrossEntropyOptions& options);

// launch_fused for the operations that take cross-entropy's workspace
// (cross_entropy_workspace_bytes of a.rows and a.reduction): the caller's,
// checked against `layouts` (the call's tensors), or the per-stream
// cache's; the host backend takes none.
void launch_with_ce_workspace(const Device& dev, FusedArgs& a, const std::optional<Workspace>& workspace,
                              const std::vector<Named>& layouts, void* stream);

}  // namespace duet::detail
