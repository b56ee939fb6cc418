// RowDivisor (kernels/row_divisor.hpp), the kernels' division of row
// indices by a mask's queries and heads, against the compiler's 64-bit /
// and %: every divisor up to 4096, the powers of two and their neighbours
// up to 2^31, and random ones, each over the dividends at the ends of the
// 32-bit range and fresh random ones; past 2^31 the 64-bit path.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "fused_test_util.hpp"
#include "row_divisor.hpp"

using duet::divide;
using duet::row_divisor;

namespace {

constexpr std::int64_t k31 = std::int64_t(1) << 31;

// Failures counted, the first few reported, so a wrong divisor does not
// print millions of lines.
struct Mismatches {
  int count = 0;
  void check(std::int64_t d, std::int64_t n, std::int64_t bound) {
    const auto v = row_divisor(d, bound);
    const auto got = divide(v, n);
    if (got.q == n / d && got.r == n % d) return;
    if (++count <= 5)
      FAIL_CHECK("n = " << n << ", d = " << d << ": got " << got.q << " r " << got.r << ", want " << n / d << " r "
                        << n % d);
  }
};

std::vector<std::int64_t> dividends(std::int64_t d, std::mt19937_64& rng) {
  std::vector<std::int64_t> n = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, k31 - 1, k31 - 2, k31 - d, k31 - d - 1,
                                 (k31 - 1) / d * d, (k31 - 1) / d * d - 1, 65535, 65536, (std::int64_t(1) << 24) + 1};
  std::uniform_int_distribution<std::int64_t> any(0, k31 - 1);
  for (int i = 0; i < 64; ++i) n.push_back(any(rng));
  std::vector<std::int64_t> in_range;
  for (std::int64_t x : n)
    if (x >= 0 && x < k31) in_range.push_back(x);
  return in_range;
}

}  // namespace

TEST_CASE("row divisor: multiply-high division matches / and % below 2^31") {
  auto& rng = duet::testing::rng();
  std::vector<std::int64_t> divisors;
  for (std::int64_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int l = 12; l <= 31; ++l)
    for (std::int64_t e : {-1, 0, 1}) divisors.push_back((std::int64_t(1) << l) + e);
  std::uniform_int_distribution<std::int64_t> any_divisor(1, k31);
  for (int i = 0; i < 2000; ++i) divisors.push_back(any_divisor(rng));
  Mismatches m;
  for (std::int64_t d : divisors) {
    if (d > k31) continue;
    CHECK_MESSAGE(row_divisor(d, k31).fast, "d = ", d);
    for (std::int64_t n : dividends(d, rng)) m.check(d, n, k31);
  }
  CHECK(m.count == 0);
}

TEST_CASE("row divisor: dividends that may reach 2^31 divide in 64 bits") {
  CHECK_FALSE(row_divisor(3, k31 + 1).fast);
  CHECK_FALSE(row_divisor(k31 + 1, k31).fast);
  CHECK(row_divisor(k31, k31).fast);
  Mismatches m;
  for (std::int64_t d : {std::int64_t(1), std::int64_t(3), std::int64_t(1000), k31 + 7})
    for (std::int64_t n : {k31, k31 * 3 + 5, (std::int64_t(1) << 40) - 1, std::int64_t(12345)})
      m.check(d, n, std::int64_t(1) << 41);
  CHECK(m.count == 0);
}
