// The shapes and grids both planners take: what a launch's arithmetic
// holds, the vendor's largest grid, and a grid's waves.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "duet/device_props.hpp"
#include "duet/error.hpp"

namespace duet::detail {

// Throws duet::Error(invalid_argument) unless rows >= 0 and 1 <= cols <
// 2^31, with rows x cols below 2^62, which keeps every grid and workspace
// product in range (a fuzz finding: rows near 2^63 overflowed set_grid's
// arithmetic).
inline void require_plannable(std::int64_t rows, std::int64_t cols) {
  const Status bad = Status::invalid_argument;
  require(rows >= 0, bad, [&] { return "rows must be >= 0, got " + std::to_string(rows); });
  require(cols >= 1, bad, [&] { return "cols must be >= 1, got " + std::to_string(cols); });
  require(cols <= (std::int64_t(1) << 31) - 1, bad, [&] { return "cols must be below 2^31, got " + std::to_string(cols); });
  require(rows <= (std::int64_t(1) << 62) / cols, bad, [&] {
    return "rows x cols must be below 2^62 elements, got " + std::to_string(rows) + " x " + std::to_string(cols);
  });
}

// The vendor's largest grid of `threads`-thread blocks: CUDA's x dimension
// holds 2^31 - 1 blocks (cudaDeviceProp::maxGridSize[0]); HIP also counts a
// dispatch's work-items in 32 bits (the AQL packet's grid size), so blocks
// x threads stays below 2^32. The kernels' grid-stride loops cover the rest.
inline std::int64_t max_grid_blocks(const DeviceProps& dev, int threads) {
  constexpr std::int64_t kGridX = (std::int64_t(1) << 31) - 1;
  if (dev.vendor != Vendor::amd) return kGridX;
  return std::min(kGridX, ((std::int64_t(1) << 32) - 1) / std::max(threads, 1));
}

// The most waves of resident blocks a grid takes: one where the kind of
// work takes one (`own_waves` 1: a work queue, clusters that keep their
// rows) or PlanOptions::persistent asks for one, else PlanOptions::
// max_waves where set (`max_waves` > 0), else the work's own.
inline std::int64_t grid_waves(int own_waves, bool persistent, int max_waves) {
  if (own_waves == 1 || persistent) return 1;
  return max_waves > 0 ? max_waves : own_waves;
}

}  // namespace duet::detail
