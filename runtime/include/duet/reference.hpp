// Double-precision CPU reference for the softmax family, and the comparison
// every GPU result is checked with (tests, duet-bench, the differential run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "duet/export.h"
#include "fused_args.hpp"
#include "softmax_variants.hpp"

namespace duet::reference {

// Row-major rows x cols, contiguous. Forward: x -> y. Backward: (y, dy) -> dx.
DUET_API std::vector<double> forward(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, Op op);
DUET_API std::vector<double> backward(const std::vector<float>& y, const std::vector<float>& dy, std::int64_t rows,
                                      std::int64_t cols, Op op);

// Per-row magnitude of the backward terms before they cancel
// (max_i |y_i| (|dy_i| + |sum|), or max_i |dy_i| + exp(y_i) |sum|): a
// float32 result can only be as close as eps times this, however exact the
// arithmetic, so the comparison scales by it.
DUET_API std::vector<double> backward_scale(const std::vector<float>& y, const std::vector<float>& dy,
                                            std::int64_t rows, std::int64_t cols, Op op);

// The fused operations (duet/masked_softmax.hpp, duet/cross_entropy.hpp),
// row-major and contiguous, masks already broadcast to rows x cols.
struct DenseMask {
  MaskKind kind = MaskKind::none;
  std::vector<float> additive;        // rows x cols, for additive
  std::vector<std::uint8_t> boolean;  // rows x cols, nonzero = masked out, for boolean
  std::int64_t seq_q = 1;             // causal: row r is query r % seq_q
  std::int64_t causal_offset = 0;
};
DUET_API std::vector<double> masked_softmax(const std::vector<float>& x, std::int64_t rows, std::int64_t cols,
                                            float scale, const DenseMask& mask, bool zero_masked_rows);
DUET_API std::vector<double> masked_softmax_backward(const std::vector<float>& y, const std::vector<float>& dy,
                                                     std::int64_t rows, std::int64_t cols, float scale);

struct CrossEntropyReference {
  std::vector<double> loss;  // rows (reduction none) or one
  std::vector<double> lse;   // rows
  std::vector<double> grad;  // rows x cols, for the upstream gradient given
  std::int64_t counted = 0;  // rows not ignored
};
// grad_loss: rows values (reduction none) or one; targets as int64 (an
// out-of-range target other than ignore_index throws invalid_argument).
DUET_API CrossEntropyReference cross_entropy(const std::vector<float>& logits, std::int64_t rows, std::int64_t cols,
                                             const std::vector<std::int64_t>& target, std::int64_t ignore_index,
                                             double label_smoothing, double z_loss, Reduction reduction,
                                             const std::vector<double>& grad_loss);

// Storage <-> float for a dtype (16-bit types round to nearest even).
DUET_API std::vector<std::uint8_t> encode(const std::vector<float>& values, DType dtype);
DUET_API std::vector<float> decode(const std::uint8_t* bytes, std::size_t count, DType dtype);
// Values representable in `dtype` (rounded through it), so a reference sees
// exactly the inputs the device reads.
DUET_API std::vector<float> round_trip(const std::vector<float>& values, DType dtype);

struct Check {
  bool ok = true;
  double worst = 0.0;          // largest per-row error: max|got - ref| / max|ref| of the row
  std::int64_t bad_rows = 0;
  std::int64_t nan_mismatch = 0;  // NaN in one but not the other (a poisoned output left unwritten shows here)
  std::string first_failure;   // "row 3 col 17: got 0.25, want 0.125"
};
// Tolerance per row, relative to the row's largest |ref|: 1e-5 for f32 and
// 1e-2 for 16-bit outputs are duet's contract.
// `row_scale`, if given, is a lower bound on each row's scale. A row also
// passes when its largest error is within `abs_floor`: the spacing of the
// output format near zero (float16 subnormals are 2^-24 apart, so a row of
// gradients around 1e-6 cannot be stored to 1e-2 of itself).
DUET_API Check compare(const std::vector<float>& got, const std::vector<double>& want, std::int64_t rows,
                       std::int64_t cols, double tolerance, const std::vector<double>* row_scale = nullptr,
                       double abs_floor = 0.0);
DUET_API double default_tolerance(DType dtype);
DUET_API double default_abs_floor(DType dtype);

}  // namespace duet::reference
