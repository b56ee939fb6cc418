// The shapes both planners take: what a launch's arithmetic holds.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace duet::detail
