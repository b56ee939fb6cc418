// The host backend's fused row operations (kernels/fused_args.hpp): scaled,
// masked softmax forward and backward, cross-entropy forward and backward,
// the widening softmax (16-bit x, float32 y) and its backward, the
// vocabulary-parallel halves (a shard's statistics, its softmax from the
// whole rows' lse), in float32 arithmetic over f32/f16/bf16 storage, rows in
// parallel on the backend's thread pool.
//
// A row is walked in chunks of kChunk elements: each chunk is converted to
// float32 (scaled and masked) into a buffer on the stack, then reduced while
// it is in L1, and the chunks' (max, sum of exp) pairs combine online, so
// the first pass reads the row from memory once; the second pass (the
// outputs) reads it again, from cache for rows that fit there. The
// conversions, masks, max and exps over a chunk run in float_chunks.hpp's
// primitives, on the best SIMD target the CPU has; what is left here is
// per-op arithmetic over the buffer, in loops with no calls, which the
// compiler vectorizes. Sums of a row are kept in double (a chunk's exps by
// lane in float, the lanes added in double), so float32 results stay within
// 1e-5 of float64.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "duet/float16.hpp"
#include "host/float_chunks.hpp"
#include "host/host_pool.hpp"
#include "host/host_storage.hpp"
#include "host/work_split.hpp"

#define DUET_NS host
#include "backend_api.hpp"
#include "shard_combine.hpp"
#undef DUET_NS

namespace duet::host {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr std::int64_t kChunk = 1024;
constexpr int kLanes = 8;

// exp(x) in float32 to about 2 ulp (Cephes' expf: x = n ln2 + r, a
// polynomial in r, times 2^(n - 1) times 2, so that n = 128 stays finite),
// written without calls or branches so loops over it vectorize (the file is
// compiled with -fno-trapping-math, which lets the compiler turn the
// selects into vector blends): exp(-inf) = 0, exp(+inf) = +inf,
// exp(NaN) = NaN; x below about -87 (results under 2^-125) flushes to 0.
// Out of that range the arithmetic runs on whatever x is and the selects
// discard it.
inline float fast_exp(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = x * 1.44269504088896341f + kMagic;
  const float n = t - kMagic;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // n from t's low mantissa bits: integer arithmetic, defined for any x.
  const std::uint32_t ni = std::bit_cast<std::uint32_t>(t) - std::bit_cast<std::uint32_t>(kMagic);
  const float half_scale = std::bit_cast<float>((ni + 126u) << 23);
  float e = (y * half_scale) * 2.0f;
  e = x > 88.72283f ? kInf : e;
  e = x < -87.33654f ? 0.0f : e;
  return x == x ? e : x;
}

// A row's running (max, sum of exp(v - max)), and whether a NaN was seen
// (or made: +inf gives inf - inf).
struct Online {
  float max = -kInf;
  double sum = 0.0;
  bool nan = false;
};

// Adds a chunk of n values to `o`, overwriting them with their exp(v - max).
void absorb(Online& o, float* v, std::int64_t n) {
  // A NaN in the chunk either shows in m (then nm is o.max) or not; either
  // way it reaches the sum through its exp, or the scan below finds it.
  const float m = max_floats(v, n);
  const float nm = std::max(o.max, m);
  if (nm == -kInf) {  // every value so far is -inf or NaN: no sum to add to
    for (std::int64_t k = 0; k < n; ++k) o.nan |= v[k] != v[k];
    return;
  }
  // Past here a NaN makes the sum NaN, which the callers read as o.nan.
  // The rescale is one factor for every term summed so far, so its error
  // does not average out over the row as the terms' do: it is taken in
  // double (once a chunk, so the cost does not show).
  if (nm != o.max) {
    o.sum *= std::exp(double(o.max) - double(nm));
    o.max = nm;
  }
  o.sum += exp_affine(v, n, nm, 1.0f, 0.0f);
  o.nan |= o.sum != o.sum;
}

// Sum of a chunk in double lanes.
double chunk_sum(const float* v, std::int64_t n) {
  double acc[kLanes] = {};
  std::int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += double(v[k + l]);
  for (; k < n; ++k) acc[0] += double(v[k]);
  double s = 0.0;
  for (double a : acc) s += a;
  return s;
}

template <class S>
void load(const S* p, std::int64_t n, float* v) {
  load_floats(dtype_of<S>(), p, n, v);
}
template <class S>
void store(const float* v, std::int64_t n, S* p) {
  store_floats(dtype_of<S>(), v, n, p);
}

// A row's first pass: its online (max, sum of exp), and sum x added to
// *sum_x when sum_x is set (each chunk summed before absorb overwrites it).
template <class S>
Online row_online(const S* x, std::int64_t cols, double* sum_x, float* v) {
  Online o;
  for (std::int64_t c = 0; c < cols; c += kChunk) {
    const std::int64_t n = std::min(kChunk, cols - c);
    load(x + c, n, v);
    if (sum_x != nullptr) *sum_x += chunk_sum(v, n);
    absorb(o, v, n);
  }
  return o;
}

// Writes a row of f(x) a chunk at a time: f(v, n, c) rewrites the n values
// of the chunk that starts at column c. In place over x: each chunk is read
// before it is written.
template <class S, class F>
void map_row(const S* x, S* out, std::int64_t cols, float* v, F&& f) {
  for (std::int64_t c = 0; c < cols; c += kChunk) {
    const std::int64_t n = std::min(kChunk, cols - c);
    load(x + c, n, v);
    f(v, n, c);
    store(v, n, out + c);
  }
}

template <class S>
const S* row_of(const void* base, std::int64_t row, std::int64_t stride) {
  return static_cast<const S*>(base) + row * stride;
}
template <class S>
S* row_of(void* base, std::int64_t row, std::int64_t stride) {
  return static_cast<S*>(base) + row * stride;
}

// Runs body(row_begin, row_end) over every row, in parallel on the pool
// when the call moves enough bytes (work_split.hpp's thresholds).
template <class Body>
void for_rows(std::int64_t rows, std::int64_t row_bytes, Body&& body) {
  const PoolLease lease;
  ThreadPool* pool = lease.pool();
  const std::int64_t bytes = rows * row_bytes;
  if (pool == nullptr || pool->threads() <= 1 || bytes < kHostParallelBytes) return body(std::int64_t(0), rows);
  const std::int64_t by_size = std::max<std::int64_t>(1, bytes / kHostTaskBytes);
  std::int64_t tasks = std::min({rows, std::int64_t(pool->threads()) * 4, by_size});
  const std::int64_t per_task = (rows + tasks - 1) / tasks;
  tasks = (rows + per_task - 1) / per_task;
  pool->run(tasks, [&](std::int64_t t) { body(t * per_task, std::min(rows, (t + 1) * per_task)); });
}

// ------------------------------------------------------------- masked softmax

// Chunk [begin, begin + n) of row `row`: scale * x + mask, masked elements -inf.
template <class S>
void scores(const FusedArgs& a, std::int64_t row, std::int64_t begin, std::int64_t n, float* v) {
  const S* x = row_of<S>(a.x, row, a.x_stride) + begin;
  load_floats(dtype_of<S>(), x, n, v, a.scale);
  if (a.mask_kind == MaskKind::none) return;
  const std::int64_t q = row % a.seq_q;
  if (a.mask_kind == MaskKind::causal) {
    // Column j is masked when j > q + causal_offset.
    const std::int64_t keep = std::clamp<std::int64_t>(q + a.causal_offset + 1 - begin, 0, n);
    for (std::int64_t k = keep; k < n; ++k) v[k] = -kInf;
    return;
  }
  const std::int64_t h = (row / a.seq_q) % a.heads;
  const std::int64_t b = row / (a.seq_q * a.heads);
  const std::int64_t offset = b * a.mask_batch_stride + h * a.mask_head_stride + q * a.mask_row_stride + begin;
  if (a.mask_kind == MaskKind::boolean) {
    mask_floats(static_cast<const std::uint8_t*>(a.mask) + offset, n, v);
  } else {
    add_floats(dtype_of<S>(), static_cast<const S*>(a.mask) + offset, n, v);
  }
}

template <class S>
void masked_softmax_rows(const FusedArgs& a, std::int64_t begin, std::int64_t end) {
  alignas(64) float v[kChunk];
  for (std::int64_t r = begin; r < end; ++r) {
    Online o;
    for (std::int64_t c = 0; c < a.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, a.cols - c);
      scores<S>(a, r, c, n, v);
      absorb(o, v, n);
    }
    S* y = row_of<S>(a.out, r, a.out_stride);
    // A NaN makes the row NaN; a row whose every element is -inf (masked
    // out) is NaN or zeros as asked; +inf makes the sum NaN (inf - inf).
    if (o.nan || o.max == -kInf) {
      const float fill = !o.nan && a.zero_masked_rows != 0 ? 0.0f : kNaN;
      for (std::int64_t c = 0; c < a.cols; c += kChunk) {
        const std::int64_t n = std::min(kChunk, a.cols - c);
        std::fill(v, v + n, fill);
        store(v, n, y + c);
      }
      continue;
    }
    const float inv = float(1.0 / o.sum);
    const float m = o.max;
    for (std::int64_t c = 0; c < a.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, a.cols - c);
      scores<S>(a, r, c, n, v);
      exp_affine(v, n, m, inv, 0.0f);
      store(v, n, y + c);
    }
  }
}

// dx = scale * y * (dy - sum(dy * y)); in place over y or dy (each element
// is read before it is written).
template <class S>
void masked_softmax_backward_rows(const FusedArgs& a, std::int64_t begin, std::int64_t end) {
  alignas(64) float y[kChunk], g[kChunk];
  for (std::int64_t r = begin; r < end; ++r) {
    const S* yr = row_of<S>(a.x, r, a.x_stride);
    const S* gr = row_of<S>(a.dy, r, a.dy_stride);
    double dot = 0.0;
    for (std::int64_t c = 0; c < a.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, a.cols - c);
      load(yr + c, n, y);
      load(gr + c, n, g);
      for (std::int64_t k = 0; k < n; ++k) g[k] *= y[k];
      dot += chunk_sum(g, n);
    }
    const float s = float(dot), scale = a.scale;
    S* dx = row_of<S>(a.out, r, a.out_stride);
    for (std::int64_t c = 0; c < a.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, a.cols - c);
      load(yr + c, n, y);
      load(gr + c, n, g);
      for (std::int64_t k = 0; k < n; ++k) y[k] = scale * y[k] * (g[k] - s);
      store(y, n, dx + c);
    }
  }
}

// ------------------------------------------------------------- widening softmax

// softmax or log_softmax of x (storage S) into float32 y; a row with a NaN,
// or whose every element is -inf, is NaN (as masked_softmax_rows).
template <class S>
void widening_softmax_rows(const FusedArgs& a, std::int64_t begin, std::int64_t end) {
  alignas(64) float v[kChunk];
  for (std::int64_t r = begin; r < end; ++r) {
    const S* x = row_of<S>(a.x, r, a.x_stride);
    float* y = row_of<float>(a.out, r, a.out_stride);
    const Online o = row_online(x, a.cols, nullptr, v);
    if (o.nan || o.max == -kInf) {
      std::fill(y, y + a.cols, kNaN);
      continue;
    }
    const float m = o.max;
    const float log_s = float(std::log(o.sum));
    const float inv = float(1.0 / o.sum);
    for (std::int64_t c = 0; c < a.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, a.cols - c);
      load(x + c, n, y + c);
      if (a.log_softmax != 0) {
        for (std::int64_t k = 0; k < n; ++k) y[c + k] = (y[c + k] - m) - log_s;
      } else {
        exp_affine(y + c, n, m, inv, 0.0f);
      }
    }
  }
}

// Its backward: dx (storage S) from float32 y and dy: softmax's
// y (dy - sum(dy y)), log_softmax's dy - exp(y) sum(dy).
template <class S>
void widening_softmax_backward_rows(const FusedArgs& a, std::int64_t begin, std::int64_t end) {
  alignas(64) float t[kChunk];
  const bool log = a.log_softmax != 0;
  for (std::int64_t r = begin; r < end; ++r) {
    const float* y = row_of<float>(a.x, r, a.x_stride);
    const float* g = row_of<float>(a.dy, r, a.dy_stride);
    double dot = 0.0;
    for (std::int64_t c = 0; c < a.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, a.cols - c);
      for (std::int64_t k = 0; k < n; ++k) t[k] = log ? g[c + k] : g[c + k] * y[c + k];
      dot += chunk_sum(t, n);
    }
    const float s = float(dot);
    S* dx = row_of<S>(a.out, r, a.out_stride);
    for (std::int64_t c = 0; c < a.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, a.cols - c);
      if (log) {
        for (std::int64_t k = 0; k < n; ++k) t[k] = g[c + k] - fast_exp(y[c + k]) * s;
      } else {
        for (std::int64_t k = 0; k < n; ++k) t[k] = y[c + k] * (g[c + k] - s);
      }
      store(t, n, dx + c);
    }
  }
}

// ------------------------------------------------------------- cross-entropy

std::int64_t target_of(const FusedArgs& a, std::int64_t row) {
  return a.target_type == IndexType::i32 ? std::int64_t(static_cast<const std::int32_t*>(a.target)[row * a.target_stride])
                                         : static_cast<const std::int64_t*>(a.target)[row * a.target_stride];
}

// Every row's target, a class of the whole vocabulary (fused_vocab), read
// before anything is written: an out-of-range one (not ignore_index) throws
// invalid_argument naming `op` and the row. Ignored rows, and every row
// when there are no targets, hold -1; `counted` (if not null) receives the
// rows not ignored.
std::vector<std::int64_t> read_targets(const FusedArgs& a, const char* op, std::int64_t* counted) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(a.rows), -1);
  if (counted != nullptr) *counted = 0;
  if (a.target == nullptr) return t;
  const std::int64_t vocab = fused_vocab(a);
  std::int64_t n = 0;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const std::int64_t v = target_of(a, r);
    if (v == a.ignore_index) continue;
    if (v < 0 || v >= vocab)
      throw Error(Status::invalid_argument, std::string(op) + ": target " + std::to_string(v) + " of row " +
                                                std::to_string(r) + " is outside [0, " + std::to_string(vocab) +
                                                ") and is not ignore_index " + std::to_string(a.ignore_index));
    t[std::size_t(r)] = v;
    ++n;
  }
  if (counted != nullptr) *counted = n;
  return t;
}

// The column of target `t` (from read_targets) in this shard of the
// vocabulary, or -1: an ignored row, or a class another shard holds.
std::int64_t shard_column(const FusedArgs& a, std::int64_t t) {
  const std::int64_t c = t - a.vocab_start;
  return t >= 0 && c >= 0 && c < a.cols ? c : -1;
}

// Writes a row's gradient, g * (p_j * c1 - eps / V) with p_j = exp(x_j - m)
// * inv, then the target's element (column `target`; -1: none in this
// shard), g * (p_t * c1 - (1 - eps) - eps / V), from `target_value`
// (computed by the caller in double, where p_t * c1 and 1 - eps cancel). In
// place over the logits: each chunk is read first.
template <class S>
void write_gradient(const S* x, S* out, std::int64_t cols, float m, float inv, float g, float c1, float smooth,
                    std::int64_t target, float target_value, float* v) {
  const float gc = g * c1 * inv, gs = g * smooth;
  map_row(x, out, cols, v, [gc, gs, m, target, target_value](float* w, std::int64_t n, std::int64_t c) {
    exp_affine(w, n, m, gc, -gs);
    if (target >= c && target < c + n) w[target - c] = target_value;
  });
}

template <class S>
void zero_row(S* out, std::int64_t cols) {
  const S zero = from_float<S>(0.0f);
  std::fill(out, out + cols, zero);
}

template <class S>
void cross_entropy(const FusedArgs& a) {
  std::int64_t counted = 0;
  const std::vector<std::int64_t> targets = read_targets(a, "cross_entropy", &counted);
  const double eps = a.label_smoothing, z = a.z_loss, vocab = double(fused_vocab(a));
  const bool none = a.reduction == Reduction::none;
  // The upstream gradient of every row's loss, for the gradient written in
  // the forward: 1, or 1 / counted for the mean.
  const double g = a.reduction == Reduction::mean ? 1.0 / double(counted) : 1.0;
  std::vector<float> losses(none ? 0 : static_cast<std::size_t>(a.rows));
  float* row_loss = none ? a.loss : losses.data();
  const int elem = a.dtype == DType::f32 ? 4 : 2;
  for_rows(a.rows, a.cols * elem * (a.out != nullptr ? 2 : 1), [&](std::int64_t begin, std::int64_t end) {
    alignas(64) float v[kChunk];
    for (std::int64_t r = begin; r < end; ++r) {
      const S* x = row_of<S>(a.x, r, a.x_stride);
      const std::int64_t t = targets[std::size_t(r)];
      double sum_x = 0.0;
      const Online o = row_online(x, a.cols, eps != 0.0 ? &sum_x : nullptr, v);
      // lse = max + log(sum): -inf for a row of -inf, NaN with a NaN or +inf.
      const double lse = o.nan ? double(kNaN) : o.max == -kInf ? -double(kInf) : double(o.max) + std::log(o.sum);
      if (a.lse != nullptr) a.lse[r] = float(lse);
      if (t < 0) {
        row_loss[r] = 0.0f;
        if (a.out != nullptr) zero_row(row_of<S>(a.out, r, a.out_stride), a.cols);
        continue;
      }
      const double xt = double(to_float(x[t]));
      row_loss[r] = float(lse - (1.0 - eps) * xt - (eps / vocab) * sum_x + z * lse * lse);
      if (a.out == nullptr) continue;
      // p_j = exp(x_j - max) / sum; the target's element in double:
      // g * ((e_t * c1 - (1 - eps) * sum) / sum - eps / V).
      const double c1 = 1.0 + 2.0 * z * lse;
      const double e_t = std::exp(xt - double(o.max));
      const double target_value = g * ((e_t * c1 - (1.0 - eps) * o.sum) / o.sum - eps / vocab);
      write_gradient(x, row_of<S>(a.out, r, a.out_stride), a.cols, o.max, float(1.0 / o.sum), float(g), float(c1),
                     float(eps / vocab), t, float(target_value), v);
    }
  });
  if (a.invalid_targets != nullptr) *a.invalid_targets = 0;
  if (none) return;
  // The rows' losses added in row order: the same sum every run.
  double total = 0.0;
  for (float l : losses) total += double(l);
  a.loss[0] = a.reduction == Reduction::mean ? float(total / double(counted)) : float(total);
}

// Over a shard of the vocabulary as over a whole row: the target's column
// only where the shard holds it, label smoothing over the whole vocabulary.
template <class S>
void cross_entropy_backward(const FusedArgs& a) {
  std::int64_t counted = 0;
  const std::vector<std::int64_t> targets = read_targets(a, "cross_entropy_backward", &counted);
  const double eps = a.label_smoothing, z = a.z_loss, vocab = double(fused_vocab(a));
  const int elem = a.dtype == DType::f32 ? 4 : 2;
  for_rows(a.rows, a.cols * elem * 2, [&](std::int64_t begin, std::int64_t end) {
    alignas(64) float v[kChunk];
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t t = targets[std::size_t(r)];
      S* out = row_of<S>(a.out, r, a.out_stride);
      if (t < 0) {
        zero_row(out, a.cols);
        continue;
      }
      const double g = a.reduction == Reduction::none  ? double(a.grad_loss[r])
                       : a.reduction == Reduction::mean ? double(a.grad_loss[0]) / double(counted)
                                                        : double(a.grad_loss[0]);
      const S* x = row_of<S>(a.x, r, a.x_stride);
      const double lse = a.lse[r];
      const double c1 = 1.0 + 2.0 * z * lse;
      const std::int64_t col = shard_column(a, t);
      const double p_t = col >= 0 ? std::exp(double(to_float(x[col])) - lse) : 0.0;
      const double target_value = g * (p_t * c1 - (1.0 - eps) - eps / vocab);
      // p_j = exp(x_j - lse): the max is lse and the inverse sum 1.
      write_gradient(x, out, a.cols, float(lse), 1.0f, float(g), float(c1), float(eps / vocab), col,
                     float(target_value), v);
    }
  });
}

// ------------------------------------------------------------- vocabulary-parallel halves

// Per row of the shard {max, sum exp(x - max), x[t - vocab_start] or 0,
// sum x}. A row of -inf gives -inf and 0 (it adds nothing to the combine);
// a NaN, or a +inf (inf - inf), makes max and sum_exp NaN, so that every
// combine of the row's shards gives a NaN lse, as cross_entropy's.
template <class S>
void shard_stats(const FusedArgs& a) {
  const std::vector<std::int64_t> targets = read_targets(a, "shard_stats", nullptr);
  for_rows(a.rows, a.cols * std::int64_t(sizeof(S)), [&](std::int64_t begin, std::int64_t end) {
    alignas(64) float v[kChunk];
    for (std::int64_t r = begin; r < end; ++r) {
      const S* x = row_of<S>(a.x, r, a.x_stride);
      double sum_x = 0.0;
      const Online o = row_online(x, a.cols, &sum_x, v);
      const std::int64_t col = shard_column(a, targets[std::size_t(r)]);
      float* stats = a.stats + 4 * r;
      stats[0] = o.nan ? kNaN : o.max;
      stats[1] = o.nan ? kNaN : float(o.sum);
      stats[2] = col >= 0 ? to_float(x[col]) : 0.0f;
      stats[3] = float(sum_x);
    }
  });
}

// y = exp(x - lse), or x - lse, from the whole rows' lse; with row_max,
// exp((x - max) - lse) or (x - max) - lse (lse = log S of x - max).
template <class S>
void shard_softmax_rows(const FusedArgs& a, std::int64_t begin, std::int64_t end) {
  alignas(64) float v[kChunk];
  for (std::int64_t r = begin; r < end; ++r) {
    const S* x = row_of<S>(a.x, r, a.x_stride);
    S* y = row_of<S>(a.out, r, a.out_stride);
    const float m = a.row_max != nullptr ? a.row_max[r] : 0.0f;
    const float lse = a.lse[r];
    if (a.log_softmax != 0)
      map_row(x, y, a.cols, v, [m, lse](float* w, std::int64_t n, std::int64_t) {
        for (std::int64_t k = 0; k < n; ++k) w[k] = (w[k] - m) - lse;
      });
    else
      map_row(x, y, a.cols, v, [m, lse](float* w, std::int64_t n, std::int64_t) {
        for (std::int64_t k = 0; k < n; ++k) w[k] = fast_exp((w[k] - m) - lse);
      });
  }
}

// Every shard's statistics combined, row by row (kernels/shard_combine.hpp,
// the GPU kernel's arithmetic); the losses of a reduction added in row
// order, as cross_entropy's.
void shard_combine(const FusedArgs& a) {
  std::int64_t counted = 0;
  const std::vector<std::int64_t> targets = read_targets(a, "shard_combine", &counted);
  const bool none = a.reduction == Reduction::none;
  double total = 0.0;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const bool ignored = a.target != nullptr && targets[std::size_t(r)] < 0;
    const CombinedRow c =
        combine_shard_row(a.stats, a.rows, a.shards, r, ignored, false, a.label_smoothing, a.z_loss, fused_vocab(a));
    if (a.combined_max != nullptr) a.combined_max[r] = c.max;
    if (a.log_sum != nullptr) a.log_sum[r] = c.log_sum;
    if (a.lse != nullptr) a.lse[r] = c.lse;
    if (a.loss != nullptr && none) a.loss[r] = c.loss;
    total += double(c.loss);
  }
  if (a.invalid_targets != nullptr) *a.invalid_targets = 0;
  if (a.loss != nullptr && !none)
    a.loss[0] = a.reduction == Reduction::mean ? float(total / double(counted)) : float(total);
}

}  // namespace

void launch_fused(int ordinal, const FusedArgs& args, const FusedLaunch&, void*) {
  if (ordinal != 0)
    throw Error(Status::no_device, "host device " + std::to_string(ordinal) + " does not exist (1 found)");
  if (args.rows == 0 || args.cols == 0) return;
  try {
    if (args.op == FusedOp::shard_combine) return shard_combine(args);
    with_storage(args.dtype, [&](auto tag) {
      using S = decltype(tag);
      const std::int64_t row_bytes = args.cols * std::int64_t(sizeof(S));
      switch (args.op) {
        case FusedOp::masked_softmax:
          return for_rows(args.rows, row_bytes * 2,
                          [&](std::int64_t b, std::int64_t e) { masked_softmax_rows<S>(args, b, e); });
        case FusedOp::masked_softmax_backward:
          return for_rows(args.rows, row_bytes * 3,
                          [&](std::int64_t b, std::int64_t e) { masked_softmax_backward_rows<S>(args, b, e); });
        case FusedOp::cross_entropy: return cross_entropy<S>(args);
        case FusedOp::cross_entropy_backward: return cross_entropy_backward<S>(args);
        case FusedOp::shard_stats: return shard_stats<S>(args);
        case FusedOp::shard_softmax:
          return for_rows(args.rows, row_bytes * 2,
                          [&](std::int64_t b, std::int64_t e) { shard_softmax_rows<S>(args, b, e); });
        case FusedOp::widening_softmax:  // 16-bit x in, float32 y out
          return for_rows(args.rows, row_bytes * 3,
                          [&](std::int64_t b, std::int64_t e) { widening_softmax_rows<S>(args, b, e); });
        case FusedOp::widening_softmax_backward:  // float32 y and dy in, 16-bit dx out
          return for_rows(args.rows, row_bytes * 5,
                          [&](std::int64_t b, std::int64_t e) { widening_softmax_backward_rows<S>(args, b, e); });
        case FusedOp::shard_combine: return shard_combine(args);  // taken before the dtype's dispatch
      }
      throw Error(Status::invalid_argument, "unknown fused op code " + std::to_string(static_cast<int>(args.op)));
    });
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, "the host backend ran out of memory for a " + std::to_string(args.rows) +
                                           " x " + std::to_string(args.cols) + " fused call");
  }
}

}  // namespace duet::host
