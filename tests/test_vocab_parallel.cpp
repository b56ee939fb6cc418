// The vocabulary-parallel halves on every device, composed as a
// vocabulary-parallel run composes them: a random matrix split into shards
// of columns, each shard's statistics, their combine (ShardCombineCall over
// the statistics a run's all-gather brings together), then each shard's softmax, log_softmax and
// cross-entropy gradient, against the float64 references of the whole rows
// and the single-device cross-entropy. Fresh random data each run, poisoned
// outputs, every dtype.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "duet/cross_entropy.hpp"
#include "duet/vocab_parallel.hpp"
#include "expect_refused.hpp"
#include "fused_test_util.hpp"

using namespace duet;
using namespace duet::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr double kNaND = std::numeric_limits<double>::quiet_NaN();

struct Case {
  explicit Case(const char* n) : name(n) {}
  const char* name;
  std::int64_t rows = 24;
  std::vector<std::int64_t> widths{37};  // the shards' widths; the vocabulary is their sum
  float stddev = 3.0f;
  CrossEntropyOptions options;
  double ignored_share = 0.2;  // rows whose target is ignore_index
  IndexType target_type = IndexType::i64;
  std::int64_t target_stride = 1;
  std::int64_t x_pad = 0, out_pad = 0;  // row strides past each shard's width
  bool in_place = false;                // softmax and gradient written over the shard's logits
  bool last_vocab_zero = false;         // the last shard passes vocab 0 (vocab_start + cols)
  bool stats_targets = true;            // shard_stats given the targets (else target_logit 0)
  // Row 0: -inf entries; row 1: its first shard all -inf (one shard: all
  // but the last column); row 2: a +inf; row 3: a NaN; row 4: all -inf
  // (ignored).
  bool extreme = false;
};

std::int64_t vocab_of(const Case& c) { return std::accumulate(c.widths.begin(), c.widths.end(), std::int64_t(0)); }

// One rank's shard: columns [start, start + width) of every row, at a row
// stride of its own.
struct Shard {
  std::int64_t start = 0, width = 0, stride = 0;
  std::vector<float> x;             // rows x width, dense
  std::vector<std::uint8_t> bytes;  // as the device holds it, gaps filled with kGap
};
constexpr std::uint8_t kGap = 0x5a;

std::vector<Shard> split(const std::vector<float>& x, std::int64_t rows, const Case& c, DType dtype) {
  const std::int64_t vocab = vocab_of(c);
  std::vector<Shard> shards;
  std::int64_t start = 0;
  for (std::int64_t w : c.widths) {
    Shard s;
    s.start = start;
    s.width = w;
    s.stride = w + c.x_pad;
    s.x.reserve(std::size_t(rows * w));
    for (std::int64_t r = 0; r < rows; ++r)
      s.x.insert(s.x.end(), x.begin() + r * vocab + start, x.begin() + r * vocab + start + w);
    s.bytes = strided(s.x, rows, w, s.stride, dtype, kGap);
    shards.push_back(std::move(s));
    start += w;
  }
  return shards;
}

// A shard's rows x width values put back at its columns of rows x vocab.
void place(std::vector<float>& full, std::int64_t vocab, const Shard& s, const std::vector<float>& part,
           std::int64_t rows) {
  for (std::int64_t r = 0; r < rows; ++r)
    std::copy(part.begin() + r * s.width, part.begin() + (r + 1) * s.width, full.begin() + r * vocab + s.start);
}

// Column k of rows of four floats.
std::vector<float> column(const std::vector<float>& stats, int k) {
  std::vector<float> out(stats.size() / 4);
  for (std::size_t r = 0; r < out.size(); ++r) out[r] = stats[4 * r + std::size_t(k)];
  return out;
}

// The combine a vocabulary-parallel run does with its collective, in double:
// M = max m_k, S = sum s_k exp(m_k - M), lse = M + log S; the target logits
// and the sums add. A NaN in any shard's max or sum makes the row's lse NaN.
struct Combined {
  std::vector<double> lse, target_logit, sum;
  std::vector<double> max, log_sum;  // lse split as M and log S
};
Combined combine(const std::vector<std::vector<float>>& stats, std::int64_t rows) {
  Combined out;
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -kInfD, xt = 0.0, sum = 0.0;
    bool nan = false;
    for (const auto& s : stats) {
      const float* row = s.data() + 4 * r;
      nan = nan || std::isnan(row[0]) || std::isnan(row[1]);
      m = std::max(m, double(row[0]));
      xt += double(row[2]);
      sum += double(row[3]);
    }
    double total = 0.0;
    for (const auto& s : stats) {
      const float* row = s.data() + 4 * r;
      if (row[0] != -kInf) total += double(row[1]) * std::exp(double(row[0]) - m);
    }
    out.lse.push_back(nan ? kNaND : m == -kInfD ? -kInfD : m + std::log(total));
    out.max.push_back(nan ? kNaND : m);
    out.log_sum.push_back(nan ? kNaND : std::log(total));
    out.target_logit.push_back(xt);
    out.sum.push_back(sum);
  }
  return out;
}

// Runs call(k, x, out, out_stride) on each shard k: x a fresh device copy of
// the shard, out a poisoned matrix (or x itself, in place). Gives the
// outputs put together as rows x vocab; checks that the gaps between
// output rows hold and, not in place, that x is untouched.
template <class Call>
std::vector<float> on_shards(const Device& dev, DType dtype, const Case& c, const std::vector<Shard>& shards,
                             std::int64_t rows, Call&& call) {
  const std::int64_t vocab = vocab_of(c);
  std::vector<float> got(std::size_t(rows * vocab), kNaN);
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const Shard& s = shards[k];
    const std::int64_t out_stride = c.in_place ? s.stride : s.width + c.out_pad;
    DeviceCopy dx(dev, s.bytes);
    const std::size_t out_bytes = std::size_t((rows - 1) * out_stride + s.width) * std::size_t(dtype_size(dtype));
    DeviceCopy dout(dev, std::vector<std::uint8_t>(out_bytes, kNaNPoison));
    call(k, dx.data(), c.in_place ? dx.data() : dout.data(), out_stride);
    synchronize(dev);
    const auto bytes = c.in_place ? dx.get<std::uint8_t>() : dout.get<std::uint8_t>();
    place(got, vocab, s, dense(bytes, rows, s.width, out_stride, dtype), rows);
    INFO("shard ", k);
    CHECK(gaps_hold(bytes, rows, s.width, out_stride, dtype, c.in_place ? kGap : kNaNPoison));
    if (!c.in_place) CHECK(dx.get<std::uint8_t>() == s.bytes);
  }
  return got;
}

void run_case(const Device& dev, DType dtype, const Case& c) {
  const std::int64_t rows = c.rows, vocab = vocab_of(c);
  const CrossEntropyOptions& o = c.options;
  const double eps = o.label_smoothing, z = o.z_loss;
  INFO(label(dev, dtype), " ", c.name, " ", rows, "x", vocab, " in ", c.widths.size(), " shards");
  auto x = random_values(std::size_t(rows * vocab), c.stddev, dtype);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::int64_t> t(static_cast<std::size_t>(rows));
  for (auto& v : t) v = u(rng()) < c.ignored_share ? o.ignore_index : std::int64_t(rng()() % std::uint64_t(vocab));
  if (c.extreme) {
    const std::int64_t first = c.widths.size() > 1 ? c.widths[0] : vocab - 1;
    for (std::int64_t j = 0; j < vocab; ++j) {
      if (j % 3 == 0) x[std::size_t(j)] = -kInf;
      if (j < first) x[std::size_t(vocab + j)] = -kInf;
      x[std::size_t(4 * vocab + j)] = -kInf;
    }
    x[std::size_t(2 * vocab)] = kInf;
    x[std::size_t(4 * vocab - 1)] = kNaN;
    // Targets on finite logits (a -inf one gives an infinite loss).
    t[0] = 1;
    t[1] = vocab - 1;
    t[4] = o.ignore_index;
  }
  const auto shards = split(x, rows, c, dtype);
  const auto last = shards.size() - 1;
  auto vocab_arg = [&](std::size_t k) { return k == last && c.last_vocab_zero ? std::int64_t(0) : vocab; };
  DeviceCopy dt(dev, target_bytes(t, c.target_type, c.target_stride));
  std::vector<DeviceCopy> dx;
  for (const Shard& s : shards) dx.emplace_back(dev, s.bytes);

  // 1. Each shard's statistics, from poisoned rows.
  std::vector<std::vector<float>> stats;
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const Shard& s = shards[k];
    DeviceCopy dstats(dev, std::vector<float>(std::size_t(rows * 4), kNaN));
    ShardStatsCall call;
    call.dtype = dtype;
    call.rows = rows;
    call.cols = s.width;
    call.x = dx[k].data();
    call.x_stride = s.stride;
    call.target_type = c.target_type;
    call.target = c.stats_targets ? dt.data() : nullptr;
    call.target_stride = c.target_stride;
    call.ignore_index = o.ignore_index;
    call.vocab_start = s.start;
    call.vocab = vocab_arg(k);
    call.stats = static_cast<ShardRowStats*>(dstats.data());
    run(dev, call);
    synchronize(dev);
    stats.push_back(dstats.get<float>());
    CHECK(dx[k].get<std::uint8_t>() == s.bytes);

    // Against the shard's float64 statistics; max and sum_exp where the
    // shard holds no NaN and no +inf (there only the combine is specified).
    const std::size_t n = std::size_t(rows);
    std::vector<double> m(n), se(n), xt(n), sum(n, 0.0), sum_abs(n);
    auto got_m = column(stats.back(), 0), got_se = column(stats.back(), 1);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* row = s.x.data() + r * s.width;
      double mr = -kInfD, sr = 0.0, abs_r = 0.0;
      bool special = false;
      for (std::int64_t j = 0; j < s.width; ++j) {
        special = special || std::isnan(row[j]) || row[j] == kInf;
        mr = std::max(mr, double(row[j]));
        sum[std::size_t(r)] += double(row[j]);
        abs_r += std::abs(double(row[j]));
      }
      if (mr != -kInfD)
        for (std::int64_t j = 0; j < s.width; ++j) sr += std::exp(double(row[j]) - mr);
      m[std::size_t(r)] = special ? 0.0 : mr;
      se[std::size_t(r)] = special ? 0.0 : sr;
      if (special) got_m[std::size_t(r)] = got_se[std::size_t(r)] = 0.0f;
      sum_abs[std::size_t(r)] = std::isfinite(abs_r) ? abs_r : 0.0;
      const std::int64_t col = t[std::size_t(r)] - s.start;
      const bool here = c.stats_targets && t[std::size_t(r)] != o.ignore_index && col >= 0 && col < s.width;
      xt[std::size_t(r)] = here ? double(row[col]) : 0.0;
    }
    INFO("shard ", k, " at ", s.start, " of width ", s.width);
    const auto m_check = reference::compare(got_m, m, rows, 1, 0.0);
    INFO("max: ", m_check.first_failure);
    CHECK(m_check.ok);
    const auto se_check = reference::compare(got_se, se, rows, 1, 1e-5);
    INFO("sum_exp: ", se_check.first_failure);
    CHECK(se_check.ok);
    const auto xt_check = reference::compare(column(stats.back(), 2), xt, rows, 1, 0.0);
    INFO("target_logit: ", xt_check.first_failure);
    CHECK(xt_check.ok);
    const auto sum_check = reference::compare(column(stats.back(), 3), sum, rows, 1, 1e-5, &sum_abs);
    INFO("sum: ", sum_check.first_failure);
    CHECK(sum_check.ok);
  }

  // 2. The combine of every shard's statistics (what a run does after its
  // all-gather), from poisoned outputs: against the same statistics
  // combined in float64, the whole rows' float64 cross-entropy and the
  // single-device operation on the whole matrix.
  const Combined all = combine(stats, rows);
  const bool none = o.reduction == Reduction::none;
  const std::size_t loss_n = none ? std::size_t(rows) : 1;
  std::vector<float> gathered;
  for (const auto& st : stats) gathered.insert(gathered.end(), st.begin(), st.end());
  DeviceCopy dgathered(dev, gathered), dmax(dev, std::vector<float>(std::size_t(rows), kNaN)),
      dlog_sum(dev, std::vector<float>(std::size_t(rows), kNaN)), dlse(dev, std::vector<float>(std::size_t(rows), kNaN)),
      dcombined_loss(dev, std::vector<float>(loss_n, kNaN));
  ShardCombineCall combined;
  combined.shards = std::int64_t(stats.size());
  combined.rows = rows;
  combined.stats = static_cast<const ShardRowStats*>(dgathered.data());
  if (c.stats_targets) {
    combined.target_type = c.target_type;
    combined.target = dt.data();
    combined.target_stride = c.target_stride;
    combined.vocab = vocab;
    combined.options = o;
    combined.loss = static_cast<float*>(dcombined_loss.data());
  }
  combined.max = static_cast<float*>(dmax.data());
  combined.log_sum = static_cast<float*>(dlog_sum.data());
  combined.lse = static_cast<float*>(dlse.data());
  run(dev, combined);
  synchronize(dev);
  {
    // Bits, not values: the statistics may hold NaN.
    const auto* b = reinterpret_cast<const std::uint8_t*>(gathered.data());
    CHECK(dgathered.get<std::uint8_t>() == std::vector<std::uint8_t>(b, b + gathered.size() * sizeof(float)));
  }
  const std::vector<float> lse_f = dlse.get<float>(), max_f = dmax.get<float>(), log_sum_f = dlog_sum.get<float>();
  {
    // float32 arithmetic over float32 statistics: M exact, log S within a
    // few roundings; M is not specified where log S is NaN.
    std::vector<float> got_max = max_f;
    std::vector<double> want_max = all.max, log_sum_scale(std::size_t(rows), 1.0);
    for (std::int64_t r = 0; r < rows; ++r)
      if (std::isnan(log_sum_f[std::size_t(r)])) got_max[std::size_t(r)] = 0.0f, want_max[std::size_t(r)] = 0.0;
    const auto max_check = reference::compare(got_max, want_max, rows, 1, 0.0);
    INFO("combined max: ", max_check.first_failure);
    CHECK(max_check.ok);
    const auto log_sum_check = reference::compare(log_sum_f, all.log_sum, rows, 1, 1e-6, &log_sum_scale);
    INFO("combined log S: ", log_sum_check.first_failure);
    CHECK(log_sum_check.ok);
  }
  std::vector<float> grad_loss(loss_n);
  for (auto& g : grad_loss) g = float(u(rng()) * 4.0 - 2.0);
  grad_loss[0] = 0.75f;
  const auto want = reference::cross_entropy(x, rows, vocab, t, o.ignore_index, eps, z, o.reduction,
                                             std::vector<double>(grad_loss.begin(), grad_loss.end()));
  std::vector<double> lse_scale(std::size_t(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -kInfD;
    for (std::int64_t j = 0; j < vocab; ++j) m = std::max(m, double(x[std::size_t(r * vocab + j)]));
    lse_scale[std::size_t(r)] = std::isfinite(m) ? std::abs(m) + std::log(double(vocab)) : 0.0;
  }
  const auto lse_check = reference::compare(lse_f, want.lse, rows, 1, 1e-5, &lse_scale);
  INFO("combined lse: ", lse_check.first_failure);
  CHECK(lse_check.ok);
  if (c.stats_targets) {
    // The loss's scale: the terms it adds, each at its own magnitude.
    std::vector<double> l_scale(loss_n, 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t tr = t[std::size_t(r)];
      if (tr == o.ignore_index) continue;
      l_scale[none ? std::size_t(r) : 0] += loss_scale(x, vocab, r, tr, want.lse[std::size_t(r)], o);
    }
    if (o.reduction == Reduction::mean && want.counted > 0) l_scale[0] /= double(want.counted);
    const std::vector<float> got_loss = dcombined_loss.get<float>();
    const auto loss_check = reference::compare(got_loss, want.loss, std::int64_t(loss_n), 1, 1e-5, &l_scale);
    INFO("loss of the combine: ", loss_check.first_failure);
    CHECK(loss_check.ok);

    // The single-device operation over the whole rows gives the same loss.
    const auto full_bytes = strided(x, rows, vocab, vocab, dtype, kGap);
    DeviceCopy dfull(dev, full_bytes), dloss(dev, std::vector<float>(loss_n, kNaN));
    CrossEntropyCall ce;
    ce.dtype = dtype;
    ce.rows = rows;
    ce.cols = vocab;
    ce.logits = dfull.data();
    ce.logits_stride = vocab;
    ce.target_type = c.target_type;
    ce.target = dt.data();
    ce.target_stride = c.target_stride;
    ce.options = o;
    ce.loss = static_cast<float*>(dloss.data());
    run(dev, ce);
    synchronize(dev);
    const auto single = dloss.get<float>();
    const auto single_check =
        reference::compare(got_loss, std::vector<double>(single.begin(), single.end()), std::int64_t(loss_n), 1,
                           2e-5, &l_scale);
    INFO("loss against the single-device cross_entropy: ", single_check.first_failure);
    CHECK(single_check.ok);
  }

  // 3. Each shard's softmax and log_softmax from the combined lse, and from
  // its split form (M, log S), which keeps log_softmax exact near the max:
  // there the float64 reference's tolerance tightens to float32's rounding.
  for (const bool split : {false, true})
  for (bool log_softmax : {false, true}) {
    const auto got = on_shards(dev, dtype, c, shards, rows, [&](std::size_t k, void* sx, void* y, std::int64_t stride) {
      ShardSoftmaxCall call;
      call.dtype = dtype;
      call.rows = rows;
      call.cols = shards[k].width;
      call.x = sx;
      call.x_stride = shards[k].stride;
      call.lse = static_cast<const float*>(split ? dlog_sum.data() : dlse.data());
      call.max = split ? static_cast<const float*>(dmax.data()) : nullptr;
      call.log_softmax = log_softmax;
      call.y = y;
      call.y_stride = stride;
      run(dev, call);
    });
    const auto want_y = reference::forward(x, rows, vocab, log_softmax ? Op::log_softmax : Op::softmax);
    const auto check = reference::compare(got, want_y, rows, vocab, reference::default_tolerance(dtype), nullptr,
                                          reference::default_abs_floor(dtype));
    const char* what = log_softmax ? "log_softmax: " : "softmax: ";
    INFO(what, split ? "(from M, log S) " : "(from lse) ", check.first_failure);
    CHECK(check.ok);
    if (split && log_softmax && dtype == DType::f32 && !c.extreme) {
      // Each value is (x - M) - log S from the call's own M and log S (log S
      // itself is checked against the reference above) within a float32
      // rounding of x - M and one of the difference (2^-24 each, doubled to
      // cover their product): bounds of each value's own size, not of the
      // row's scale, so values near the max keep their digits.
      std::int64_t worse = 0;
      std::string first;
      for (std::size_t i = 0; i < got.size(); ++i) {
        const std::size_t r = i / std::size_t(vocab);
        const double x_m = double(x[i]) - double(max_f[r]);
        const double w = x_m - double(log_sum_f[r]);
        if (!std::isfinite(w)) continue;
        if (std::abs(double(got[i]) - w) > 0x1p-23 * (std::abs(x_m) + std::abs(w))) {
          if (worse++ == 0) first = "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " + std::to_string(w);
        }
      }
      INFO("log_softmax from (M, log S), elementwise: ", worse, " elements off, first ", first);
      CHECK(worse == 0);
    }
  }

  // 4. Each shard's cross-entropy gradient from the combined lse.
  DeviceCopy dgl(dev, grad_loss);
  const auto got = on_shards(dev, dtype, c, shards, rows, [&](std::size_t k, void* sx, void* out, std::int64_t stride) {
    CrossEntropyBackwardCall b;
    b.dtype = dtype;
    b.rows = rows;
    b.cols = shards[k].width;
    b.logits = sx;
    b.logits_stride = shards[k].stride;
    b.target_type = c.target_type;
    b.target = dt.data();
    b.target_stride = c.target_stride;
    b.options = o;
    b.lse = static_cast<const float*>(dlse.data());
    b.grad_loss = static_cast<const float*>(dgl.data());
    b.vocab_start = shards[k].start;
    b.vocab = vocab_arg(k);
    b.grad = out;
    b.grad_stride = stride;
    run(dev, b);
  });
  std::vector<double> g_scale(std::size_t(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double g = none ? grad_loss[std::size_t(r)]
                          : o.reduction == Reduction::mean ? grad_loss[0] / double(want.counted) : grad_loss[0];
    g_scale[std::size_t(r)] = grad_scale(x, vocab, r, want.lse[std::size_t(r)], g, o);
  }
  const auto check = reference::compare(got, want.grad, rows, vocab, reference::default_tolerance(dtype), &g_scale,
                                        reference::default_abs_floor(dtype));
  INFO("gradient: ", check.first_failure);
  CHECK(check.ok);
}

void each(const Case& c) {
  on_every_device([&](const Device& dev) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) run_case(dev, dtype, c);
  });
}

// Splits of a 37-class vocabulary: whole, two odd halves, shards of width 1
// at either end, and one in the middle.
const std::vector<std::vector<std::int64_t>> kSplits37{{37}, {18, 19}, {1, 35, 1}, {12, 1, 24}};

}  // namespace

TEST_CASE("vocab-parallel: shards of every width compose to softmax, log_softmax and cross-entropy") {
  for (const auto& widths : kSplits37)
    for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
      Case c("plain");
      c.widths = widths;
      c.options.reduction = red;
      each(c);
    }
}

TEST_CASE("vocab-parallel: label smoothing, z-loss and ignore_index values") {
  for (const auto& widths : kSplits37)
    for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
      Case c("label smoothing 0.1");
      c.widths = widths;
      c.options.reduction = red;
      c.options.label_smoothing = 0.1f;
      each(c);
      c.name = "z-loss 1e-3 and smoothing 0.05, ignore_index 7";
      c.options.z_loss = 1e-3f;
      c.options.label_smoothing = 0.05f;
      c.options.ignore_index = 7;
      each(c);
      c.name = "smoothing 1, ignore_index -1";
      c.options.label_smoothing = 1.0f;
      c.options.z_loss = 0.0f;
      c.options.ignore_index = -1;
      each(c);
    }
}

TEST_CASE("vocab-parallel: strided rows, in place, int32 targets at a stride, vocab 0 for the last shard") {
  for (const auto& widths : kSplits37)
    for (Reduction red : {Reduction::none, Reduction::mean}) {
      Case c("strided shards and outputs, int32 targets at stride 3");
      c.widths = widths;
      c.options.reduction = red;
      c.options.label_smoothing = 0.1f;
      c.x_pad = 3;
      c.out_pad = 5;
      c.target_type = IndexType::i32;
      c.target_stride = 3;
      each(c);
      c.name = "in place over strided shards, int64 targets at stride 2, vocab 0 for the last shard";
      c.in_place = true;
      c.target_type = IndexType::i64;
      c.target_stride = 2;
      c.last_vocab_zero = true;
      each(c);
    }
}

TEST_CASE("vocab-parallel: every row ignored, and statistics without targets") {
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    Case c("all ignored");
    c.widths = {18, 19};
    c.options.reduction = red;
    c.ignored_share = 1.0;
    each(c);
    c.name = "statistics without targets";
    c.ignored_share = 0.2;
    c.stats_targets = false;
    each(c);
  }
}

TEST_CASE("vocab-parallel: vocabularies 2 and 3, and shards longer than the host's chunk") {
  for (const std::vector<std::int64_t>& widths : std::vector<std::vector<std::int64_t>>{
           {1, 1}, {1, 1, 1}, {2, 1}, {1100, 1, 1399}, {2049, 2050}}) {
    Case c("vocabulary");
    c.widths = widths;
    c.rows = widths.size() > 1 && widths[0] > 1000 ? 6 : 24;
    c.options.label_smoothing = 0.1f;
    c.x_pad = 1;
    each(c);
  }
}

TEST_CASE("vocab-parallel: rows enough for the host's threads to share them") {
  Case c("many rows");
  c.rows = 64;
  c.widths = {4000, 1, 4000};
  c.options.label_smoothing = 0.1f;
  c.options.reduction = Reduction::sum;
  each(c);
}

TEST_CASE("vocab-parallel: -inf, +inf and NaN logits, and a shard of -inf only") {
  for (const auto& widths : kSplits37)
    for (Reduction red : {Reduction::none, Reduction::mean}) {
      Case c("extreme");
      c.widths = widths;
      c.extreme = true;
      c.ignored_share = 0.0;
      c.options.reduction = red;
      each(c);
      c.name = "extreme, smoothing 0.1, in place";
      c.options.label_smoothing = 0.1f;
      c.in_place = true;
      each(c);
    }
}

TEST_CASE("shard statistics: a row of -inf gives max -inf and sum_exp 0") {
  on_every_device([&](const Device& dev) {
    const std::vector<float> x{-kInf, -kInf, -kInf, 0.0f, 1.0f, 2.0f};
    const std::vector<std::int64_t> t{7, 4};  // row 0's target in another shard, row 1's at column 1
    DeviceCopy dx(dev, x), dt(dev, t), dstats(dev, std::vector<float>(8, kNaN));
    ShardStatsCall c;
    c.rows = 2;
    c.cols = 3;
    c.x = dx.data();
    c.x_stride = 3;
    c.target = dt.data();
    c.vocab_start = 3;
    c.vocab = 9;
    c.stats = static_cast<ShardRowStats*>(dstats.data());
    run(dev, c);
    synchronize(dev);
    const auto s = dstats.get<float>();
    INFO(dev.label());
    CHECK(s[0] == -kInf);
    CHECK(s[1] == 0.0f);
    CHECK(s[2] == 0.0f);
    CHECK(s[3] == -kInf);
    CHECK(s[4] == 2.0f);
    CHECK(s[5] == doctest::Approx(1.0 + std::exp(-1.0) + std::exp(-2.0)).epsilon(1e-6));
    CHECK(s[6] == 1.0f);  // target 4 at column 1
    CHECK(s[7] == 3.0f);
  });
}

TEST_CASE("shard statistics: out-of-range targets refused on the host before anything is written") {
  const Device host = device(BackendKind::host, 0);
  // Shard [4, 9) of 12 classes: 11 is valid (another shard's), 12 and -3 are not.
  for (std::int64_t bad_target : {std::int64_t(12), std::int64_t(-3), std::int64_t(1) << 40}) {
    std::vector<float> x(20, 1.0f), stats(16, -7.0f);
    std::vector<std::int64_t> t{4, 11, bad_target, -100};
    ShardStatsCall c;
    c.rows = 4;
    c.cols = 5;
    c.x = x.data();
    c.x_stride = 5;
    c.target = t.data();
    c.vocab_start = 4;
    c.vocab = 12;
    c.stats = reinterpret_cast<ShardRowStats*>(stats.data());
    expect_refused([&] { run(host, c); }, ("target " + std::to_string(bad_target) + " of row 2").c_str());
    CHECK(std::all_of(stats.begin(), stats.end(), [](float v) { return v == -7.0f; }));
    // The backward over the same shard refuses it the same way.
    std::vector<float> grad(20, -7.0f), lse(4, 2.0f);
    const float one = 1.0f;
    CrossEntropyBackwardCall b;
    b.rows = 4;
    b.cols = 5;
    b.logits = x.data();
    b.logits_stride = 5;
    b.target = t.data();
    b.lse = lse.data();
    b.grad_loss = &one;
    b.vocab_start = 4;
    b.vocab = 12;
    b.grad = grad.data();
    b.grad_stride = 5;
    expect_refused([&] { run(host, b); }, "row 2");
    CHECK(std::all_of(grad.begin(), grad.end(), [](float v) { return v == -7.0f; }));
    // In place: the logits are untouched too.
    b.grad = x.data();
    expect_refused([&] { run(host, b); }, "row 2");
    CHECK(std::all_of(x.begin(), x.end(), [](float v) { return v == 1.0f; }));
  }
}

TEST_CASE("shard statistics: out-of-range targets on a GPU give a NaN target logit") {
  for (const Device& dev : devices()) {
    if (!dev.is_gpu()) continue;
    try {
      const std::vector<float> x(20, 1.0f);
      const std::vector<std::int64_t> t{4, 12, 11, -4};
      DeviceCopy dx(dev, x), dt(dev, t), dstats(dev, std::vector<float>(16, 0.0f));
      ShardStatsCall c;
      c.rows = 4;
      c.cols = 5;
      c.x = dx.data();
      c.x_stride = 5;
      c.target = dt.data();
      c.vocab_start = 4;
      c.vocab = 12;
      c.stats = static_cast<ShardRowStats*>(dstats.data());
      run(dev, c);
      synchronize(dev);
      const auto s = dstats.get<float>();
      CHECK(s[2] == 1.0f);
      CHECK(std::isnan(s[6]));
      CHECK(s[10] == 0.0f);
      CHECK(std::isnan(s[14]));
    } catch (const Error& e) {
      if (e.status() != Status::unsupported) throw;
      MESSAGE("skipping ", dev.label(), ": ", e.what());
    }
  }
}

TEST_CASE("shard statistics: bad calls are refused with a reason and write nothing") {
  const Device host = device(BackendKind::host, 0);
  std::vector<float> x(40, 1.0f);
  alignas(16) float stats[64];
  std::fill(std::begin(stats), std::end(stats), -7.0f);
  std::vector<std::int64_t> t(8, 1);
  auto base = [&] {
    ShardStatsCall c;
    c.rows = 8;
    c.cols = 5;
    c.x = x.data();
    c.x_stride = 5;
    c.target = t.data();
    c.vocab_start = 0;
    c.vocab = 10;
    c.stats = reinterpret_cast<ShardRowStats*>(stats);
    return c;
  };
  auto expect = [&](const ShardStatsCall& c, const char* mentions) {
    expect_refused([&] { run(host, c); }, mentions);
    CHECK(std::all_of(std::begin(stats), std::end(stats), [](float v) { return v == -7.0f; }));
  };
  auto c = base();
  c.dtype = static_cast<DType>(3);
  expect(c, "dtype");
  c = base();
  c.target_type = static_cast<IndexType>(2);
  expect(c, "index type");
  c = base();
  c.rows = -1;
  expect(c, "rows and cols");
  c = base();
  c.vocab_start = -1;
  expect(c, "vocab_start must be >= 0");
  c = base();
  c.vocab = -1;
  expect(c, "vocab must be >= 0");
  c = base();
  c.vocab_start = 6;  // [6, 11) does not fit 10 classes
  expect(c, "smaller than the shard's end");
  c = base();
  c.vocab_start = std::numeric_limits<std::int64_t>::max() - 2;
  c.vocab = 0;
  expect(c, "overflows");
  c = base();
  c.cols = 0;
  expect(c, "width");
  c = base();
  c.x = nullptr;
  expect(c, "x is a null");
  c = base();
  c.x_stride = 4;
  expect(c, "stride");
  c = base();
  c.stats = nullptr;
  expect(c, "stats is a null");
  c = base();
  c.stats = reinterpret_cast<ShardRowStats*>(stats + 1);  // 4-byte aligned, not 16
  expect(c, "16-byte aligned");
  c = base();
  c.stats = reinterpret_cast<ShardRowStats*>(reinterpret_cast<char*>(stats) + 2);
  expect(c, "aligned");
  c = base();
  c.target_stride = 0;
  expect(c, "target_stride");
  c = base();
  c.target = reinterpret_cast<const char*>(t.data()) + 4;
  expect(c, "target is not aligned");
  c = base();
  c.x = stats + 4;  // the statistics written over x
  expect(c, "x and stats overlap");
  c = base();
  c.target = stats;  // ... or over the targets
  c.target_type = IndexType::i32;
  expect(c, "target and stats overlap");
  // Zero rows: a no-op, whatever the pointers.
  c = base();
  c.rows = 0;
  c.x = nullptr;
  c.stats = nullptr;
  run(host, c);
  // A target in [0, vocab) outside the shard, no target, and vocab 0 (the
  // last shard) are all valid.
  c = base();
  c.vocab_start = 5;
  c.vocab = 0;
  t.assign(8, 2);
  run(host, c);
  CHECK(stats[2] == 0.0f);
  std::fill(std::begin(stats), std::end(stats), -7.0f);
  c.target = nullptr;
  run(host, c);
  CHECK(stats[0] == 1.0f);
  CHECK(stats[2] == 0.0f);
}

TEST_CASE("shard softmax: bad calls are refused with a reason and write nothing") {
  const Device host = device(BackendKind::host, 0);
  std::vector<float> x(48, 1.0f), y(48, -7.0f), lse(8, 2.0f);
  auto base = [&] {
    ShardSoftmaxCall c;
    c.rows = 8;
    c.cols = 5;
    c.x = x.data();
    c.x_stride = 5;
    c.lse = lse.data();
    c.y = y.data();
    c.y_stride = 5;
    return c;
  };
  auto expect = [&](const ShardSoftmaxCall& c, const char* mentions) {
    expect_refused([&] { run(host, c); }, mentions);
    CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == -7.0f; }));
    CHECK(std::all_of(x.begin(), x.end(), [](float v) { return v == 1.0f; }));
  };
  auto c = base();
  c.dtype = static_cast<DType>(-1);
  expect(c, "dtype");
  c = base();
  c.cols = -2;
  expect(c, "rows and cols");
  c = base();
  c.lse = nullptr;
  expect(c, "lse is a null");
  c = base();
  c.lse = reinterpret_cast<const float*>(reinterpret_cast<const char*>(lse.data()) + 2);
  expect(c, "lse is not aligned");
  c = base();
  c.y = nullptr;
  expect(c, "y is a null");
  c = base();
  c.y = reinterpret_cast<char*>(y.data()) + 2;
  expect(c, "y is not aligned");
  c = base();
  c.y_stride = 4;
  expect(c, "stride");
  c = base();
  c.lse = y.data() + 6;  // read while y is written
  expect(c, "lse and y overlap");
  c = base();
  c.x = y.data() + 1;  // partly over y
  c.x_stride = 5;
  expect(c, "overlap");
  c = base();
  c.x = y.data();  // the same pointer at another stride
  c.x_stride = 6;
  c.rows = 6;
  expect(c, "overlap");
  // Zero rows or columns: a no-op.
  c = base();
  c.rows = 0;
  c.x = nullptr;
  run(host, c);
  c = base();
  c.cols = 0;
  c.lse = nullptr;
  run(host, c);
  CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == -7.0f; }));
  // Exactly in place is valid: x - lse over x.
  c = base();
  c.x = y.data();
  c.log_softmax = true;
  run(host, c);
  CHECK(std::all_of(y.begin(), y.begin() + 40, [](float v) { return v == -9.0f; }));
  CHECK(std::all_of(y.begin() + 40, y.end(), [](float v) { return v == -7.0f; }));
}

TEST_CASE("shard cross-entropy backward: the shard's vocabulary is checked") {
  const Device host = device(BackendKind::host, 0);
  std::vector<float> x(40, 1.0f), grad(40, -7.0f), lse(8, 2.0f);
  std::vector<std::int64_t> t(8, 1);
  const float one = 1.0f;
  auto base = [&] {
    CrossEntropyBackwardCall b;
    b.rows = 8;
    b.cols = 5;
    b.logits = x.data();
    b.logits_stride = 5;
    b.target = t.data();
    b.lse = lse.data();
    b.grad_loss = &one;
    b.options.reduction = Reduction::sum;
    b.grad = grad.data();
    b.grad_stride = 5;
    return b;
  };
  auto expect = [&](const CrossEntropyBackwardCall& b, const char* mentions) {
    expect_refused([&] { run(host, b); }, mentions);
    CHECK(std::all_of(grad.begin(), grad.end(), [](float v) { return v == -7.0f; }));
  };
  auto b = base();
  b.vocab_start = -5;
  expect(b, "vocab_start must be >= 0");
  b = base();
  b.vocab = -1;
  expect(b, "vocab must be >= 0");
  b = base();
  b.vocab_start = 3;
  b.vocab = 7;
  expect(b, "smaller than the shard's end");
  // Not sharded (vocab_start 0, vocab 0): targets must be below cols.
  b = base();
  t.assign(8, 5);
  expect(b, "target 5 of row 0 is outside [0, 5)");
  // vocab 0 with a vocab_start: the shard ends the vocabulary, [0, 8).
  b.vocab_start = 3;
  t.assign(8, 8);
  expect(b, "target 8 of row 0 is outside [0, 8)");
  // ... where 7 is valid, and so are classes of another shard, which add
  // no one-hot term: every element is g (p - eps / V) = exp(1 - 2).
  t.assign(8, 7);
  run(host, b);
  t.assign(8, 0);
  b.vocab = 100;
  grad.assign(40, -7.0f);
  run(host, b);
  CHECK(std::all_of(grad.begin(), grad.end(), [](float v) { return v == doctest::Approx(std::exp(-1.0)); }));
  // Zero rows: a no-op, but a bad vocabulary is still refused.
  b = base();
  b.rows = 0;
  b.logits = nullptr;
  run(host, b);
  b.vocab_start = -1;
  expect_refused([&] { run(host, b); }, "vocab_start");
}

TEST_CASE("shard combine: out-of-range targets, refused on the host and NaN with a count on a GPU") {
  // Two shards' statistics of 4 rows of 12 classes; row 2's target is 12.
  std::vector<float> stats;
  for (int k = 0; k < 2; ++k)
    for (int r = 0; r < 4; ++r) stats.insert(stats.end(), {1.0f + float(k), 3.0f, 0.5f * float(k), 2.0f});
  const std::vector<std::int64_t> t{4, 11, 12, -100};
  for (const Device& dev : devices()) {
    INFO(dev.label());
    try {
      DeviceCopy dstats(dev, stats), dt(dev, t), dlse(dev, std::vector<float>(4, -7.0f)),
          dloss(dev, std::vector<float>(4, -7.0f)), dinvalid(dev, std::vector<std::int32_t>{-1});
      for (Reduction red : {Reduction::none, Reduction::mean}) {
        ShardCombineCall c;
        c.shards = 2;
        c.rows = 4;
        c.stats = static_cast<const ShardRowStats*>(dstats.data());
        c.target = dt.data();
        c.vocab = 12;
        c.options.reduction = red;
        c.lse = static_cast<float*>(dlse.data());
        c.loss = static_cast<float*>(dloss.data());
        if (dev.is_gpu()) c.invalid_targets = static_cast<std::int32_t*>(dinvalid.data());
        if (!dev.is_gpu()) {
          expect_refused([&] { run(dev, c); }, "target 12 of row 2");
          CHECK(dlse.get<float>() == std::vector<float>(4, -7.0f));
          CHECK(dloss.get<float>() == std::vector<float>(4, -7.0f));
          continue;
        }
        run(dev, c);
        synchronize(dev);
        const auto lse = dlse.get<float>(), loss = dloss.get<float>();
        CHECK(std::isfinite(lse[0]));
        CHECK(std::isnan(lse[2]));
        CHECK(dinvalid.get<std::int32_t>()[0] == 1);
        if (red == Reduction::none) {
          CHECK(std::isfinite(loss[0]));
          CHECK(std::isnan(loss[2]));
          CHECK(loss[3] == 0.0f);  // ignored
        } else {
          CHECK(std::isnan(loss[0]));  // the mean of rows one of which is NaN
        }
      }
    } catch (const Error& e) {
      if (e.status() != Status::unsupported) throw;
      MESSAGE("skipping ", dev.label(), ": ", e.what());
    }
  }
}

TEST_CASE("shard combine: bad calls are refused with a reason and write nothing") {
  const Device host = device(BackendKind::host, 0);
  std::vector<float> stats(2 * 4 * 4, 1.0f), out(4, -7.0f), loss(4, -7.0f);
  std::vector<std::int64_t> t(4, 1);
  std::int32_t invalid = -1;
  auto base = [&] {
    ShardCombineCall c;
    c.shards = 2;
    c.rows = 4;
    c.stats = reinterpret_cast<const ShardRowStats*>(stats.data());
    c.target = t.data();
    c.vocab = 10;
    c.lse = out.data();
    c.loss = loss.data();
    return c;
  };
  auto expect = [&](const ShardCombineCall& c, const char* mentions) {
    expect_refused([&] { run(host, c); }, mentions);
    CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == -7.0f; }));
    CHECK(std::all_of(loss.begin(), loss.end(), [](float v) { return v == -7.0f; }));
    CHECK(std::all_of(stats.begin(), stats.end(), [](float v) { return v == 1.0f; }));
  };
  auto c = base();
  c.shards = 0;
  expect(c, "shards must be >= 1");
  c = base();
  c.rows = -1;
  expect(c, "rows must be >= 0");
  c = base();
  c.options.reduction = static_cast<Reduction>(5);
  expect(c, "reduction");
  c = base();
  c.options.label_smoothing = 1.5f;
  expect(c, "label_smoothing");
  c = base();
  c.options.z_loss = -1.0f;
  expect(c, "z_loss");
  c = base();
  c.target_type = static_cast<IndexType>(2);
  expect(c, "index type");
  c = base();
  c.target = nullptr;
  expect(c, "the loss needs the targets");
  c = base();
  c.loss = nullptr;
  c.invalid_targets = &invalid;
  expect(c, "invalid_targets");
  c = base();
  c.vocab = 0;
  expect(c, "vocab");
  c = base();
  c.stats = nullptr;
  expect(c, "stats is a null");
  c = base();
  c.stats = reinterpret_cast<const ShardRowStats*>(reinterpret_cast<const char*>(stats.data()) + 2);
  expect(c, "aligned");
  c = base();
  c.lse = reinterpret_cast<float*>(const_cast<float*>(stats.data())) + 8;  // written over the statistics
  expect(c, "lse and stats overlap");
  c = base();
  c.max = loss.data();  // two outputs in one place
  expect(c, "overlap");
  c = base();
  c.loss = reinterpret_cast<float*>(t.data());  // ... or over the targets
  expect(c, "loss and target overlap");
  // Zero rows: a no-op, whatever the pointers.
  c = base();
  c.rows = 0;
  c.stats = nullptr;
  run(host, c);
  CHECK(out[0] == -7.0f);
}

TEST_CASE("shard combine: one shard is the whole row, and the reductions add the rows' losses") {
  // One shard: M = m, log S = log s, loss = (m - x_t) + log s; two rows.
  const std::vector<float> stats{2.0f, 4.0f, 1.5f, 0.0f, -1.0f, 1.0f, -1.0f, 0.0f};
  const std::vector<std::int64_t> t{3, 5};
  const double l0 = (2.0 - 1.5) + std::log(4.0), l1 = 0.0;
  for (const Device& dev : devices()) {
    INFO(dev.label());
    try {
      for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
        DeviceCopy dstats(dev, stats), dt(dev, t), dmax(dev, std::vector<float>(2, kNaN)),
            dlog_sum(dev, std::vector<float>(2, kNaN)), dloss(dev, std::vector<float>(2, kNaN));
        ShardCombineCall c;
        c.shards = 1;
        c.rows = 2;
        c.stats = static_cast<const ShardRowStats*>(dstats.data());
        c.target = dt.data();
        c.vocab = 8;
        c.options.reduction = red;
        c.max = static_cast<float*>(dmax.data());
        c.log_sum = static_cast<float*>(dlog_sum.data());
        c.loss = static_cast<float*>(dloss.data());
        run(dev, c);
        synchronize(dev);
        CHECK(dmax.get<float>() == std::vector<float>{2.0f, -1.0f});
        const auto log_sum = dlog_sum.get<float>();
        CHECK(log_sum[0] == doctest::Approx(std::log(4.0)).epsilon(1e-6));
        CHECK(log_sum[1] == 0.0f);
        const auto loss = dloss.get<float>();
        if (red == Reduction::none) {
          CHECK(loss[0] == doctest::Approx(l0).epsilon(1e-6));
          CHECK(loss[1] == doctest::Approx(l1).epsilon(1e-6));
        } else {
          CHECK(loss[0] == doctest::Approx(red == Reduction::mean ? (l0 + l1) / 2.0 : l0 + l1).epsilon(1e-6));
          CHECK(std::isnan(loss[1]));  // one float written, the poison after it kept
        }
      }
    } catch (const Error& e) {
      if (e.status() != Status::unsupported) throw;
      MESSAGE("skipping ", dev.label(), ": ", e.what());
    }
  }
}
