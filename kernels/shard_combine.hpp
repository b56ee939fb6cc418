// The combine of vocabulary-parallel statistics (duet/vocab_parallel.hpp,
// step 2): one row's statistics from every shard into the whole row's max M,
// log S, lse and cross-entropy loss. Plain float32 arithmetic shared by the
// host backend and the GPU kernel (kernels/families/shard_combine.cuh), so
// both give the same bits. No vendor header.
#pragma once

#include <cmath>
#include <cstdint>

#include "host_device.hpp"

namespace duet {

struct CombinedRow {
  float max;      // M = max_k m_k
  float log_sum;  // log S, S = sum_k s_k exp(m_k - M)
  float lse;      // M + log S; NaN for a row whose target is invalid
  float loss;     // the row's cross-entropy loss: 0 when ignored, NaN when the target is invalid
};

// Row `row` of `shards` shards' statistics, shard k's rows at
// stats + 4 * rows * k (an all-gather's layout; 4 floats a row:
// {m_k, s_k, target logit or 0, sum x}). A shard whose row is all -inf
// (m_k = -inf, s_k = 0) adds nothing; a NaN m_k or s_k makes S NaN, also
// where m_k is -inf. The
// loss is (1 - eps) ((M - x_t) + log S) + eps ((M - sum x / vocab) + log S)
// + z_loss lse^2: (M - x_t) + log S rather than lse - x_t, exact where x_t
// is the max, as the single-device kernels take it.
DUET_HOST_DEVICE inline CombinedRow combine_shard_row(const float* stats, std::int64_t rows, std::int64_t shards,
                                                      std::int64_t row, bool ignored, bool invalid,
                                                      float label_smoothing, float z_loss, std::int64_t vocab) {
  const float neg_inf = -INFINITY;
  float m = neg_inf;
  for (std::int64_t k = 0; k < shards; ++k) {
    const float mk = stats[4 * (k * rows + row)];
    m = mk > m ? mk : m;  // a NaN m_k is skipped here and reaches S below
  }
  float s = 0.0f, target_logit = 0.0f, total = 0.0f;
  for (std::int64_t k = 0; k < shards; ++k) {
    const float* e = stats + 4 * (k * rows + row);
    // A shard with no finite value adds s_k unscaled: 0, or the NaN of a
    // shard that saw only NaN and -inf (kernels/common/math.cuh's pairs).
    s += e[0] != neg_inf ? e[1] * expf(e[0] - m) : e[1];
    target_logit += e[2];
    total += e[3];
  }
  CombinedRow c;
  c.max = m;
  c.log_sum = logf(s);
  const float lse = m + c.log_sum;
  const float eps = label_smoothing;
  float loss = (1.0f - eps) * ((m - target_logit) + c.log_sum) + z_loss * lse * lse;
  if (eps != 0.0f) loss += eps * ((m - total / static_cast<float>(vocab)) + c.log_sum);
  c.lse = invalid ? NAN : lse;
  c.loss = ignored ? 0.0f : invalid ? NAN : loss;
  return c;
}

}  // namespace duet
