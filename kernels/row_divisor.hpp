// Division of row indices by a divisor fixed for a launch (a mask's queries
// and heads: fused_args.hpp), as a multiply-high, an add and a shift where
// every dividend is below 2^31. A 64-bit division is a software routine of
// tens of instructions on GPUs, paid once a row: as much as a short row's
// other work (bench/NOTES.md v95).
//
// The method is the round-up one of Granlund and Montgomery, "Division by
// Invariant Integers using Multiplication" (PLDI 1994), with N = 32: for
// 1 <= d <= 2^31 take l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1
// (below 2^32); then n / d = (mulhi(m, n) + n) >> l for 0 <= n < 2^32, and
// for n < 2^31 the sum fits 32 bits.
#pragma once

#include <cstdint>

#include "host_device.hpp"

namespace duet {

struct RowDivisor {
  std::int64_t d = 1;
  std::uint32_t mul = 1;
  std::uint32_t shift = 0;
  bool fast = true;  // every dividend below 2^31: multiply; otherwise divide in 64 bits
};

// The divisor d (>= 1) for dividends 0 <= n < `bound`.
constexpr RowDivisor row_divisor(std::int64_t d, std::int64_t bound) {
  RowDivisor v;
  v.d = d;
  v.fast = d >= 1 && d <= (std::int64_t(1) << 31) && bound <= (std::int64_t(1) << 31);
  if (!v.fast) return v;
  std::uint32_t l = 0;
  while ((std::uint64_t(1) << l) < std::uint64_t(d)) ++l;
  v.shift = l;
  v.mul = static_cast<std::uint32_t>(((std::uint64_t(1) << 32) * ((std::uint64_t(1) << l) - std::uint64_t(d))) /
                                         std::uint64_t(d) +
                                     1);
  return v;
}

struct RowQuotient {
  std::int64_t q;  // n / d
  std::int64_t r;  // n % d
};

DUET_HOST_DEVICE inline RowQuotient divide(const RowDivisor& v, std::int64_t n) {
  if (v.fast) {
    const auto n32 = static_cast<std::uint32_t>(n);
    const auto hi = static_cast<std::uint32_t>((std::uint64_t(n32) * v.mul) >> 32);
    const std::uint32_t q = (hi + n32) >> v.shift;
    return {q, static_cast<std::int64_t>(n32 - q * static_cast<std::uint32_t>(v.d))};
  }
  return {n / v.d, n % v.d};
}

}  // namespace duet
