#include "duet/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "duet/error.hpp"
#include "duet/float16.hpp"

namespace duet::reference {

std::vector<double> forward(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, Op op) {
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    double* yr = y.data() + r * cols;
    double m = -std::numeric_limits<double>::infinity();
    bool nan = false;
    for (std::int64_t i = 0; i < cols; ++i) {
      nan = nan || std::isnan(xr[i]);
      m = std::max(m, double(xr[i]));
    }
    double s = 0.0;
    for (std::int64_t i = 0; i < cols; ++i) s += std::exp(double(xr[i]) - m);
    if (nan) s = std::numeric_limits<double>::quiet_NaN();
    const double log_s = std::log(s);
    for (std::int64_t i = 0; i < cols; ++i)
      yr[i] = op == Op::log_softmax ? (double(xr[i]) - m) - log_s : std::exp(double(xr[i]) - m) / s;
  }
  return y;
}

std::vector<double> backward(const std::vector<float>& y, const std::vector<float>& dy, std::int64_t rows,
                             std::int64_t cols, Op op) {
  std::vector<double> dx(y.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* yr = y.data() + r * cols;
    const float* gr = dy.data() + r * cols;
    double s = 0.0;
    for (std::int64_t i = 0; i < cols; ++i) s += op == Op::log_softmax ? double(gr[i]) : double(gr[i]) * yr[i];
    for (std::int64_t i = 0; i < cols; ++i)
      dx[std::size_t(r * cols + i)] =
          op == Op::log_softmax ? double(gr[i]) - std::exp(double(yr[i])) * s : double(yr[i]) * (double(gr[i]) - s);
  }
  return dx;
}

std::vector<double> backward_scale(const std::vector<float>& y, const std::vector<float>& dy, std::int64_t rows,
                                   std::int64_t cols, Op op) {
  std::vector<double> scale(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* yr = y.data() + r * cols;
    const float* gr = dy.data() + r * cols;
    double s = 0.0, m = 0.0;
    for (std::int64_t i = 0; i < cols; ++i) s += op == Op::log_softmax ? double(gr[i]) : double(gr[i]) * yr[i];
    for (std::int64_t i = 0; i < cols; ++i)
      m = std::max(m, op == Op::log_softmax ? std::abs(double(gr[i])) + std::exp(double(yr[i])) * std::abs(s)
                                            : std::abs(double(yr[i])) * (std::abs(double(gr[i])) + std::abs(s)));
    scale[std::size_t(r)] = m;
  }
  return scale;
}

std::vector<double> masked_softmax(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, float scale,
                                   const DenseMask& mask, bool zero_masked_rows) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> y(x.size());
  std::vector<double> v(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::size_t row = std::size_t(r * cols);
    // v = scale * x + mask; a boolean or causal mask replaces the element
    // with -inf whatever it was (Tensor.masked_fill), an additive one adds.
    bool has_nan = false;
    double m = -inf;
    for (std::int64_t i = 0; i < cols; ++i) {
      double e = double(scale) * double(x[row + std::size_t(i)]);
      switch (mask.kind) {
        case MaskKind::additive: e += double(mask.additive[row + std::size_t(i)]); break;
        case MaskKind::boolean:
          if (mask.boolean[row + std::size_t(i)] != 0) e = -inf;
          break;
        case MaskKind::causal:
          if (i > r % mask.seq_q + mask.causal_offset) e = -inf;
          break;
        default: break;
      }
      v[std::size_t(i)] = e;
      has_nan = has_nan || std::isnan(e);
      if (!std::isnan(e)) m = std::max(m, e);
    }
    // A NaN makes the row NaN (torch); a row whose every element is -inf
    // (masked out) is NaN, or zeros with zero_masked_rows; +inf makes the
    // row NaN (inf - inf).
    if (has_nan || m == -inf) {
      const double fill = !has_nan && zero_masked_rows ? 0.0 : nan;
      std::fill(y.begin() + std::ptrdiff_t(row), y.begin() + std::ptrdiff_t(row) + cols, fill);
      continue;
    }
    double s = 0.0;
    for (std::int64_t i = 0; i < cols; ++i) s += std::exp(v[std::size_t(i)] - m);
    for (std::int64_t i = 0; i < cols; ++i) y[row + std::size_t(i)] = std::exp(v[std::size_t(i)] - m) / s;
  }
  return y;
}

std::vector<double> masked_softmax_backward(const std::vector<float>& y, const std::vector<float>& dy,
                                            std::int64_t rows, std::int64_t cols, float scale) {
  std::vector<double> dx = backward(y, dy, rows, cols, Op::softmax);
  for (double& d : dx) d *= double(scale);
  return dx;
}

CrossEntropyReference cross_entropy(const std::vector<float>& logits, std::int64_t rows, std::int64_t cols,
                                    const std::vector<std::int64_t>& target, std::int64_t ignore_index,
                                    double label_smoothing, double z_loss, Reduction reduction,
                                    const std::vector<double>& grad_loss) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double eps = label_smoothing, V = double(cols);
  CrossEntropyReference out;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t t = target[std::size_t(r)];
    if (t == ignore_index) continue;
    if (t < 0 || t >= cols)
      throw Error(Status::invalid_argument, "reference cross_entropy: target " + std::to_string(t) + " of row " +
                                                std::to_string(r) + " is out of range");
    ++out.counted;
  }
  const bool none = reduction == Reduction::none;
  std::vector<double> loss(static_cast<std::size_t>(rows), 0.0);
  out.lse.assign(static_cast<std::size_t>(rows), 0.0);
  out.grad.assign(static_cast<std::size_t>(rows * cols), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = logits.data() + r * cols;
    // lse = max + log(sum exp(x - max)): -inf for a row of -inf (as
    // torch.logsumexp), NaN with a NaN or +inf (inf - inf).
    double m = -inf, sum_x = 0.0;
    bool has_nan = false;
    for (std::int64_t i = 0; i < cols; ++i) {
      has_nan = has_nan || std::isnan(x[i]);
      if (!std::isnan(x[i])) m = std::max(m, double(x[i]));
      sum_x += double(x[i]);
    }
    double s = 0.0;
    if (m != -inf)
      for (std::int64_t i = 0; i < cols; ++i) s += std::exp(double(x[i]) - m);
    const double lse = has_nan ? nan : m == -inf ? -inf : m + std::log(s);
    out.lse[std::size_t(r)] = lse;
    const std::int64_t t = target[std::size_t(r)];
    if (t == ignore_index) continue;  // loss 0, gradient 0
    const double xt = double(x[t]);
    // (1 - eps)(lse - x_t) + eps (lse - mean_j x_j) + z lse^2
    // Without smoothing the mean term is absent (a -inf logit must not make
    // it 0 * -inf).
    const double smooth = eps > 0.0 ? (eps / V) * sum_x : 0.0;
    loss[std::size_t(r)] = lse - (1.0 - eps) * xt - smooth + z_loss * lse * lse;
    const double g = none ? grad_loss[std::size_t(r)]
                          : reduction == Reduction::mean ? grad_loss[0] / double(out.counted) : grad_loss[0];
    const double c1 = 1.0 + 2.0 * z_loss * lse;
    for (std::int64_t i = 0; i < cols; ++i)
      out.grad[std::size_t(r * cols + i)] =
          g * (std::exp(double(x[i]) - lse) * c1 - (i == t ? 1.0 - eps : 0.0) - eps / V);
  }
  if (none) {
    out.loss = loss;
  } else {
    double total = 0.0;
    for (double l : loss) total += l;
    out.loss = {reduction == Reduction::mean ? total / double(out.counted) : total};
  }
  return out;
}

std::vector<std::uint8_t> encode(const std::vector<float>& values, DType dtype) {
  std::vector<std::uint8_t> out(values.size() * std::size_t(dtype_size(dtype)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::f32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else {
      const std::uint16_t h = dtype == DType::f16 ? float_to_f16(values[i]) : float_to_bf16(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::vector<float> decode(const std::uint8_t* bytes, std::size_t count, DType dtype) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (dtype == DType::f32) {
      std::memcpy(&out[i], bytes + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      out[i] = dtype == DType::f16 ? f16_to_float(h) : bf16_to_float(h);
    }
  }
  return out;
}

std::vector<float> round_trip(const std::vector<float>& values, DType dtype) {
  const auto bytes = encode(values, dtype);
  return decode(bytes.data(), values.size(), dtype);
}

Check compare(const std::vector<float>& got, const std::vector<double>& want, std::int64_t rows, std::int64_t cols,
              double tolerance, const std::vector<double>* row_scale, double abs_floor) {
  Check c;
  for (std::int64_t r = 0; r < rows; ++r) {
    double scale = row_scale ? (*row_scale)[std::size_t(r)] : 0.0, err = 0.0;
    std::int64_t worst_col = -1;
    bool row_bad = false;
    for (std::int64_t i = 0; i < cols; ++i) {
      const double w = want[std::size_t(r * cols + i)];
      const double g = got[std::size_t(r * cols + i)];
      if (std::isnan(w) != std::isnan(g) || (std::isinf(w) && w != g)) {
        ++c.nan_mismatch;
        if (!row_bad && c.first_failure.empty())
          c.first_failure = "row " + std::to_string(r) + " col " + std::to_string(i) + ": got " + std::to_string(g) +
                            ", want " + std::to_string(w);
        row_bad = true;
        continue;
      }
      if (std::isnan(w) || std::isinf(w)) continue;
      if (!std::isnan(scale)) scale = std::max(scale, std::abs(w));
      if (std::abs(g - w) > err) {
        err = std::abs(g - w);
        worst_col = i;
      }
    }
    const double rel = scale > 0.0 ? err / scale : err;
    c.worst = std::max(c.worst, rel);
    if (rel > tolerance && err > abs_floor && !row_bad) {
      row_bad = true;
      if (c.first_failure.empty())
        c.first_failure = "row " + std::to_string(r) + " col " + std::to_string(worst_col) + ": got " +
                          std::to_string(got[std::size_t(r * cols + worst_col)]) + ", want " +
                          std::to_string(want[std::size_t(r * cols + worst_col)]) + " (row error " +
                          std::to_string(rel) + ")";
    }
    if (row_bad) ++c.bad_rows;
  }
  c.ok = c.bad_rows == 0;
  return c;
}

double default_tolerance(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-2; }
// One float16 subnormal step (2^-24); bfloat16 and float32 share float32's
// exponent range, where the relative tolerance alone is right.
double default_abs_floor(DType dtype) { return dtype == DType::f16 ? 5.960464477539063e-08 : 0.0; }

}  // namespace duet::reference
