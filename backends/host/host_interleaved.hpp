// The host backend's softmax over interleaved rows (SoftmaxArgs::inner: a
// non-last dimension): a task takes up to kInterleavedLanes neighbouring
// rows of one outer row and walks their elements together, so each step
// reads adjacent memory and the compiler vectorizes across the rows.
#pragma once

#include "host/thread_pool.hpp"
#include "softmax_args.hpp"
#include "softmax_variants.hpp"

namespace duet::host {

inline constexpr int kInterleavedLanes = 64;

// Runs the call on `pool` (null: on the calling thread).
void run_interleaved(ThreadPool* pool, const SoftmaxArgs& a, DType dtype, bool backward);

}  // namespace duet::host
