// The combine of vocabulary-parallel statistics on a GPU: one thread a row,
// combine_shard_row (kernels/shard_combine.hpp) over the shards (the
// runtime sets a.vocab). The rows' losses for a reduction go to
// cross-entropy's workspace, which ce_finalize_kernel adds in a fixed
// order, as for the single-device forward.
#pragma once

#include <cstdint>

#include "families/fused_rows.cuh"
#include "shard_combine.hpp"

namespace duet::DUET_NS::kernels {

__global__ void __launch_bounds__(kCeHelperBlock) shard_combine_kernel(FusedArgs a) {
  for (std::int64_t row = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; row < a.rows;
       row += std::int64_t(gridDim.x) * blockDim.x) {
    const CeRow r = ce_row(a, row);
    const CombinedRow c = combine_shard_row(a.stats, a.rows, a.shards, row, r.ignored, r.invalid, a.label_smoothing,
                                            a.z_loss, a.vocab);
    if (a.combined_max != nullptr) a.combined_max[row] = c.max;
    if (a.log_sum != nullptr) a.log_sum[row] = c.log_sum;
    if (a.lse != nullptr) a.lse[row] = c.lse;
    if (a.loss != nullptr) {
      if (a.reduction == Reduction::none)
        a.loss[row] = c.loss;
      else
        ce_row_losses(a)[row] = c.loss;
    }
  }
}

}  // namespace duet::DUET_NS::kernels
