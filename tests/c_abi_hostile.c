/* Hostile calls through the C ABI, from C, on the host backend: each one is
 * refused with DUET_ERROR_INVALID_ARGUMENT and a message that names the
 * problem, before anything is written; valid but unusual layouts run and
 * give the float64 reference's answer. Under the sanitize preset, UBSan
 * checks that no call reads an out-of-range enum or a misaligned element. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "duet/duet.h"

static int g_failures = 0;

#define EXPECT(cond, ...)                                      \
  do {                                                         \
    if (!(cond)) {                                             \
      ++g_failures;                                            \
      fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                            \
      fprintf(stderr, "\n");                                   \
    }                                                          \
  } while (0)

#define POISON 12345.0f

static const duet_device_t kHost = {DUET_BACKEND_HOST, 0};

static int mentions(const char* needle) { return strstr(duet_last_error(), needle) != NULL; }

/* Element-misaligned pointers: refused, output untouched. */
static void misaligned_elements(void) {
  _Alignas(16) float x[64], y[64];
  for (int i = 0; i < 64; ++i) {
    x[i] = (float)i;
    y[i] = POISON;
  }
  const char* xb = (const char*)x;
  char* yb = (char*)y;
  duet_status_t s = duet_softmax(kHost, DUET_F32, 1, 16, xb + 1, 16, y, 16, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("x is not aligned"), "status %d: %s", s, duet_last_error());
  s = duet_softmax(kHost, DUET_F32, 1, 16, x, 16, yb + 2, 16, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("y is not aligned"), "status %d: %s", s, duet_last_error());
  s = duet_softmax_backward(kHost, DUET_F16, 1, 16, x, 16, xb + 33, 16, y, 16, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("dy is not aligned"), "status %d: %s", s, duet_last_error());
  for (int i = 0; i < 64; ++i) EXPECT(y[i] == POISON, "y[%d] written by a refused call", i);
  /* Offset by whole elements (not 16-byte aligned) is valid. */
  s = duet_softmax(kHost, DUET_F32, 1, 16, x + 1, 16, y + 3, 16, NULL);
  EXPECT(s == DUET_SUCCESS, "whole-element offsets refused: %s", duet_last_error());
  s = duet_softmax(kHost, DUET_BF16, 1, 16, xb + 2, 16, yb + 6, 16, NULL);
  EXPECT(s == DUET_SUCCESS, "bf16 at 2-byte offsets refused: %s", duet_last_error());
}

/* Any int is a valid value to pass for an enum: negative codes are refused,
 * not undefined (UBSan's -fsanitize=enum checks the loads). */
static void out_of_range_codes(void) {
  float x[4] = {0, 1, 2, 3}, y[4];
  const int bad[] = {-1, -5, INT32_MIN, 3, 1000};
  for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    duet_status_t s = duet_softmax(kHost, (duet_dtype_t)bad[i], 1, 4, x, 4, y, 4, NULL);
    EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("dtype"), "dtype %d: status %d: %s", bad[i], s,
           duet_last_error());
    const duet_device_t dev = {(duet_backend_t)bad[i], 0};
    s = duet_softmax(dev, DUET_F32, 1, 4, x, 4, y, 4, NULL);
    EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("backend"), "backend %d: status %d: %s", bad[i], s,
           duet_last_error());
  }
}

static double softmax_ref(const float* row, int n, int i) {
  double m = -INFINITY, sum = 0;
  for (int k = 0; k < n; ++k) m = row[k] > m ? row[k] : m;
  for (int k = 0; k < n; ++k) sum += exp((double)row[k] - m);
  return exp((double)row[i] - m) / sum;
}

/* x in the even row slots of one buffer and y in the odd ones share no
 * element: valid, and computed right. One element more and they overlap. */
static void interleaved_layouts(void) {
  enum { R = 5, C = 24 };
  float buf[2 * R * C], x_copy[R * C];
  unsigned seed = 7;
  for (int i = 0; i < 2 * R * C; ++i) {
    seed = seed * 1664525u + 1013904223u;
    buf[i] = (float)((int)(seed >> 9) % 2001 - 1000) / 100.0f;
  }
  for (int r = 0; r < R; ++r) memcpy(x_copy + r * C, buf + 2 * r * C, C * sizeof(float));
  duet_status_t s = duet_softmax(kHost, DUET_F32, R, C, buf, 2 * C, buf + C, 2 * C, NULL);
  EXPECT(s == DUET_SUCCESS, "interleaved rows refused: %s", duet_last_error());
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < C; ++i) {
      const double want = softmax_ref(x_copy + r * C, C, i), got = buf[2 * r * C + C + i];
      EXPECT(fabs(got - want) <= 1e-6, "row %d col %d: %g, reference %g", r, i, got, want);
    }
  s = duet_softmax(kHost, DUET_F32, R, C, buf, 2 * C, buf + C - 1, 2 * C, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("share elements"), "status %d: %s", s, duet_last_error());
  /* Different strides that never meet: x rows at 4kC, y rows at (2k+1)C. */
  float wide[4 * 3 * 8];
  for (int i = 0; i < 4 * 3 * 8; ++i) wide[i] = (float)(i % 7);
  s = duet_softmax(kHost, DUET_F32, 3, 8, wide, 32, wide + 8, 16, NULL);
  EXPECT(s == DUET_SUCCESS, "disjoint rows of different strides refused: %s", duet_last_error());
  /* ... and two that do: y row 1 starts inside x row 1. */
  s = duet_softmax(kHost, DUET_F32, 2, 8, wide, 32, wide + 8, 26, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("share elements"), "status %d: %s", s, duet_last_error());
}

/* Random layouts in one buffer: a call runs exactly when x and y share no
 * element or are exactly in place, as marking every element shows. */
static void random_layouts_against_marking(void) {
  enum { N = 2048 };
  static float buf[N];
  static unsigned char mark[N];
  unsigned seed = 12345;
#define NEXT(m) (seed = seed * 1664525u + 1013904223u, (int)((seed >> 8) % (unsigned)(m)))
  int accepted = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int cols = 1 + NEXT(12), rows = 1 + NEXT(6);
    const int xs = cols + NEXT(3) * NEXT(9), ys = NEXT(4) == 0 ? xs : cols + NEXT(3) * NEXT(9);
    const int xo = NEXT(200), yo = NEXT(4) == 0 ? xo : NEXT(200);
    memset(mark, 0, sizeof mark);
    int shared = 0;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) mark[xo + r * xs + c] = 1;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) shared |= mark[yo + r * ys + c];
    const int in_place = xo == yo && (xs == ys || rows == 1);
    for (int i = 0; i < N; ++i) buf[i] = (float)(i % 5);
    const duet_status_t s = duet_softmax(kHost, DUET_F32, rows, cols, buf + xo, xs, buf + yo, ys, NULL);
    const int want_ok = !shared || in_place;
    EXPECT((s == DUET_SUCCESS) == want_ok, "rows %d cols %d x +%d/%d y +%d/%d: status %d (%s), shared %d", rows, cols,
           xo, xs, yo, ys, s, duet_last_error(), shared);
    if (s == DUET_SUCCESS) ++accepted; else ++refused;
  }
#undef NEXT
  EXPECT(accepted > 300 && refused > 300, "random layouts too one-sided: %d accepted, %d refused", accepted, refused);
}

/* A size mistake is reported as one, not as an overlap. */
static void impossible_sizes(void) {
  float x[16], y[16];
  duet_status_t s = duet_softmax(kHost, DUET_F32, (int64_t)1 << 43, 16, x, 16, y, 16, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("2^48") && !mentions("overlap") && !mentions("share"),
         "status %d: %s", s, duet_last_error());
  s = duet_softmax(kHost, DUET_F32, 2, 16, x, INT64_MAX / 2, y, 16, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("x: 2 rows of stride"), "status %d: %s", s, duet_last_error());
}

/* The fused operations: bad enums (negative ones included), NULL and
 * misaligned pointers, overlapping outputs, bad options and out-of-range
 * targets are refused with a message and write nothing; NULL mask and
 * NULL options are the defaults. */
static int all_poison(const float* v, int n) {
  for (int i = 0; i < n; ++i)
    if (v[i] != POISON) return 0;
  return 1;
}
static void fused_operations(void) {
  _Alignas(16) float x[32], y[32], lse[4], loss[4];
  int64_t t[4] = {0, 3, -100, 7};
  unsigned char bools[32];
  for (int i = 0; i < 32; ++i) {
    x[i] = (float)(i % 5);
    y[i] = POISON;
    bools[i] = (unsigned char)(i % 3 == 0);
  }
  for (int i = 0; i < 4; ++i) lse[i] = loss[i] = POISON;
  const int bad[] = {-1, -7, INT32_MIN, 4, 1000};
  duet_status_t s;
  for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    duet_mask_t m = {(duet_mask_kind_t)bad[i], NULL, 1, 1, 0, 0, 0, 0};
    s = duet_masked_softmax(kHost, DUET_F32, 4, 8, x, 8, y, 8, 1.0f, &m, 0, NULL);
    EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("mask kind"), "mask kind %d: %d %s", bad[i], s, duet_last_error());
    s = duet_masked_softmax(kHost, (duet_dtype_t)bad[i], 4, 8, x, 8, y, 8, 1.0f, NULL, 0, NULL);
    EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("dtype"), "dtype %d: %d %s", bad[i], s, duet_last_error());
    s = duet_cross_entropy(kHost, DUET_F32, 4, 8, x, 8, (duet_index_t)bad[i], t, 1, NULL, loss, lse, NULL, 0, NULL,
                           NULL, 0, NULL);
    EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("index type"), "index %d: %d %s", bad[i], s, duet_last_error());
    duet_cross_entropy_options_t o = {-100, 0.0f, 0.0f, (duet_reduction_t)bad[i]};
    s = duet_cross_entropy(kHost, DUET_F32, 4, 8, x, 8, DUET_INDEX_I64, t, 1, &o, loss, lse, NULL, 0, NULL, NULL, 0,
                           NULL);
    EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("reduction"), "reduction %d: %d %s", bad[i], s,
           duet_last_error());
    size_t bytes = 0;
    s = duet_cross_entropy_workspace_size(kHost, 4, (duet_reduction_t)bad[i], &bytes);
    EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("reduction"), "size %d: %d %s", bad[i], s, duet_last_error());
  }
  s = duet_masked_softmax(kHost, DUET_F32, 4, 8, NULL, 8, y, 8, 1.0f, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("x is a null"), "%d %s", s, duet_last_error());
  s = duet_masked_softmax(kHost, DUET_F32, 4, 8, x, 8, (char*)y + 2, 8, 1.0f, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("y is not aligned"), "%d %s", s, duet_last_error());
  s = duet_masked_softmax(kHost, DUET_F32, 4, 8, x, 8, x + 4, 8, 1.0f, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("overlap"), "%d %s", s, duet_last_error());
  duet_mask_t boolean = {DUET_MASK_BOOLEAN, bools, 1, 4, 0, 0, 8, 0};
  s = duet_masked_softmax(kHost, DUET_F32, 4, 8, x, 8, y, 8, NAN, &boolean, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("finite"), "%d %s", s, duet_last_error());
  duet_mask_t in_output = {DUET_MASK_ADDITIVE, y + 8, 1, 4, 0, 0, 0, 0};
  s = duet_masked_softmax(kHost, DUET_F32, 4, 8, x, 8, y, 8, 1.0f, &in_output, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("mask and y overlap"), "%d %s", s, duet_last_error());
  s = duet_masked_softmax_backward(kHost, DUET_BF16, 4, 8, x, 8, (char*)x + 1, 8, y, 8, 1.0f, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("dy is not aligned"), "%d %s", s, duet_last_error());
  EXPECT(all_poison(y, 32), "a refused masked softmax wrote y");

  duet_cross_entropy_options_t smooth = {-100, 2.0f, 0.0f, DUET_REDUCTION_MEAN};
  s = duet_cross_entropy(kHost, DUET_F32, 4, 8, x, 8, DUET_INDEX_I64, t, 1, &smooth, loss, lse, y, 8, NULL, NULL, 0,
                         NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("label_smoothing"), "%d %s", s, duet_last_error());
  s = duet_cross_entropy(kHost, DUET_F32, 4, 8, x, 8, DUET_INDEX_I64, t, 1, NULL, NULL, lse, y, 8, NULL, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("loss is a null"), "%d %s", s, duet_last_error());
  s = duet_cross_entropy(kHost, DUET_F32, 4, 8, x, 8, DUET_INDEX_I64, (char*)t + 4, 1, NULL, loss, lse, y, 8, NULL,
                         NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("target is not aligned"), "%d %s", s, duet_last_error());
  s = duet_cross_entropy(kHost, DUET_F32, 4, 8, x, 8, DUET_INDEX_I64, t, 1, NULL, loss, y + 3, y, 8, NULL, NULL, 0,
                         NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("overlap"), "%d %s", s, duet_last_error());
  s = duet_cross_entropy(kHost, DUET_F32, 4, 8, x, 8, DUET_INDEX_I64, t, 1, NULL, loss, lse, x + 1, 8, NULL, NULL, 0,
                         NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("overlap"), "%d %s", s, duet_last_error());
  /* Target 7 of row 3 is valid for 8 columns, not for 6. */
  s = duet_cross_entropy(kHost, DUET_F32, 4, 6, x, 8, DUET_INDEX_I64, t, 1, NULL, loss, lse, y, 8, NULL, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("target 7 of row 3"), "%d %s", s, duet_last_error());
  s = duet_cross_entropy_backward(kHost, DUET_F32, 4, 8, x, 8, DUET_INDEX_I64, t, 1, NULL, NULL, loss, y, 8, NULL, 0,
                                  NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("lse is a null"), "%d %s", s, duet_last_error());
  EXPECT(all_poison(y, 32) && all_poison(lse, 4) && all_poison(loss, 4), "a refused cross-entropy wrote its outputs");

  /* The defaults: no mask, options NULL (mean over rows not ignored). */
  s = duet_masked_softmax(kHost, DUET_F32, 4, 8, x, 8, y, 8, 1.0f, NULL, 0, NULL);
  EXPECT(s == DUET_SUCCESS && fabsf(y[0] + y[1] + y[2] + y[3] + y[4] + y[5] + y[6] + y[7] - 1.0f) < 1e-5f, "%s",
         duet_last_error());
  s = duet_cross_entropy(kHost, DUET_F32, 4, 8, x, 8, DUET_INDEX_I64, t, 1, NULL, loss, lse, NULL, 0, NULL, NULL, 0,
                         NULL);
  double want = 0.0;
  for (int r = 0; r < 4; ++r) {
    if (t[r] == -100) continue;
    double sum = 0.0;
    for (int j = 0; j < 8; ++j) sum += exp((double)x[r * 8 + j]);
    want += log(sum) - x[r * 8 + t[r]];
  }
  want /= 3.0;
  EXPECT(s == DUET_SUCCESS && fabs(loss[0] - want) < 1e-5 * fabs(want), "loss %g, want %g: %s", loss[0], want,
         duet_last_error());
}

/* The copy kernel: null pointers, overlapping ranges and a size past any
 * address space refused, the destination untouched; any byte offset and an
 * odd size copied exactly; zero bytes do nothing, even with null pointers. */
static void copy_kernel_calls(void) {
  unsigned char src[80], dst[80];
  for (int i = 0; i < 80; ++i) {
    src[i] = (unsigned char)(i * 13 + 1);
    dst[i] = 0xa5;
  }
  duet_status_t s = duet_copy_kernel(kHost, dst, NULL, 16, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("src is a null pointer"), "status %d: %s", s, duet_last_error());
  s = duet_copy_kernel(kHost, NULL, src, 16, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("dst is a null pointer"), "status %d: %s", s, duet_last_error());
  s = duet_copy_kernel(kHost, src + 15, src, 16, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("overlap"), "status %d: %s", s, duet_last_error());
  s = duet_copy_kernel(kHost, dst, src, SIZE_MAX, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("address space"), "status %d: %s", s, duet_last_error());
  for (int i = 0; i < 80; ++i) EXPECT(dst[i] == 0xa5, "dst[%d] written by a refused call", i);
  s = duet_copy_kernel(kHost, NULL, NULL, 0, NULL);
  EXPECT(s == DUET_SUCCESS, "zero bytes refused: %s", duet_last_error());
  s = duet_copy_kernel(kHost, dst + 3, src + 1, 61, NULL);
  EXPECT(s == DUET_SUCCESS, "odd copy refused: %s", duet_last_error());
  for (int i = 0; i < 80; ++i) {
    const int inside = i >= 3 && i < 64;
    EXPECT(dst[i] == (inside ? src[i - 2] : 0xa5), "dst[%d] = %d", i, dst[i]);
  }
}

/* The vocabulary-parallel halves over shard [4, 12) of 12 classes: NULL,
 * misaligned and overlapping pointers, a vocabulary the shard does not fit
 * in and out-of-range targets are refused with a message and write
 * nothing; valid calls give the float64 answers. */
static void vocab_parallel(void) {
  enum { R = 4, C = 8, S = 4 * R + C * R }; /* stats with room for x's layout over it */
  _Alignas(16) float x[R * C], stats[S], y[R * C], grad[R * C], lse[R];
  int64_t t[R] = {0, 11, -100, 5}; /* row 0's class is another shard's; 11 and 5 are columns 7 and 1 */
  int64_t bad_t[R] = {0, 12, -100, 5};
  const float one = 1.0f;
  for (int i = 0; i < R * C; ++i) {
    x[i] = (float)((i * 7) % 11) / 4.0f - 1.0f;
    y[i] = grad[i] = POISON;
  }
  for (int i = 0; i < S; ++i) stats[i] = POISON;
  for (int r = 0; r < R; ++r) lse[r] = 3.0f;
  duet_status_t s;
  s = duet_shard_stats(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, t, 1, -100, 4, 12, NULL, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("stats is a null"), "%d %s", s, duet_last_error());
  s = duet_shard_stats(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, t, 1, -100, 4, 12, stats + 1, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("16-byte aligned"), "%d %s", s, duet_last_error());
  s = duet_shard_stats(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, t, 1, -100, 4, 11, stats, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("smaller than the shard's end"), "%d %s", s, duet_last_error());
  s = duet_shard_stats(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, t, 1, -100, -1, 12, stats, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("vocab_start"), "%d %s", s, duet_last_error());
  s = duet_shard_stats(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, bad_t, 1, -100, 4, 12, stats, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("target 12 of row 1"), "%d %s", s, duet_last_error());
  s = duet_shard_stats(kHost, DUET_F32, R, C, x, C, (duet_index_t)-3, t, 1, -100, 4, 12, stats, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("index type"), "%d %s", s, duet_last_error());
  s = duet_shard_stats(kHost, DUET_F32, R, C, stats, C, DUET_INDEX_I64, t, 1, -100, 4, 12, stats, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("x and stats overlap"), "%d %s", s, duet_last_error());
  EXPECT(all_poison(stats, S), "a refused duet_shard_stats wrote its statistics");

  /* vocab 0: vocab_start + cols, 12 here. */
  s = duet_shard_stats(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, t, 1, -100, 4, 0, stats, NULL);
  EXPECT(s == DUET_SUCCESS, "%s", duet_last_error());
  const int column[R] = {-1, 7, -1, 1};
  for (int r = 0; r < R; ++r) {
    const float* row = x + r * C;
    double m = -INFINITY, se = 0.0, sum = 0.0;
    for (int j = 0; j < C; ++j) m = row[j] > m ? row[j] : m;
    for (int j = 0; j < C; ++j) {
      se += exp((double)row[j] - m);
      sum += row[j];
    }
    const double xt = column[r] < 0 ? 0.0 : row[column[r]];
    const float* got = stats + 4 * r;
    EXPECT(got[0] == (float)m && fabs(got[1] - se) <= 1e-6 * se && got[2] == (float)xt && fabs(got[3] - sum) <= 1e-6,
           "row %d: {%g, %g, %g, %g}, want {%g, %g, %g, %g}", r, got[0], got[1], got[2], got[3], m, se, xt, sum);
    lse[r] = (float)(m + log(se)); /* this shard's alone, as if it were the whole row */
  }

  /* The combine of this one shard's statistics: its own lse, and the loss
   * (M - x_t) + log S (row 0's target is another shard's, so x_t = 0; row
   * 2 is ignored). */
  float combined[R], loss[R];
  for (int r = 0; r < R; ++r) combined[r] = loss[r] = POISON;
  duet_cross_entropy_options_t no_reduction = {-100, 0.0f, 0.0f, DUET_REDUCTION_NONE};
  s = duet_shard_combine(kHost, 0, R, stats, DUET_INDEX_I64, t, 1, 12, &no_reduction, NULL, NULL, combined, loss,
                         NULL, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("shards must be >= 1"), "%d %s", s, duet_last_error());
  s = duet_shard_combine(kHost, 1, R, stats, DUET_INDEX_I64, NULL, 1, 12, &no_reduction, NULL, NULL, combined, loss,
                         NULL, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("the loss needs the targets"), "%d %s", s, duet_last_error());
  s = duet_shard_combine(kHost, 1, R, stats, DUET_INDEX_I64, t, 1, 12, &no_reduction, NULL, NULL, stats + 4, loss,
                         NULL, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("lse and stats overlap"), "%d %s", s, duet_last_error());
  s = duet_shard_combine(kHost, 1, R, stats, DUET_INDEX_I64, bad_t, 1, 12, &no_reduction, NULL, NULL, combined, loss,
                         NULL, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("target 12 of row 1"), "%d %s", s, duet_last_error());
  EXPECT(all_poison(combined, R) && all_poison(loss, R), "a refused duet_shard_combine wrote its outputs");
  s = duet_shard_combine(kHost, 1, R, stats, DUET_INDEX_I64, t, 1, 12, &no_reduction, NULL, NULL, combined, loss,
                         NULL, NULL, 0, NULL);
  EXPECT(s == DUET_SUCCESS, "%s", duet_last_error());
  for (int r = 0; r < R; ++r) {
    const float* st = stats + 4 * r;
    const double want_loss = r == 2 ? 0.0 : ((double)st[0] - st[2]) + log((double)st[1]);
    EXPECT(fabs(combined[r] - lse[r]) <= 1e-6 * fabs(lse[r]) + 1e-6 && fabs(loss[r] - want_loss) <= 1e-5,
           "row %d: combined lse %g loss %g, want %g and %g", r, combined[r], loss[r], lse[r], want_loss);
  }

  s = duet_shard_softmax(kHost, DUET_F32, R, C, x, C, NULL, NULL, 0, y, C, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("lse is a null"), "%d %s", s, duet_last_error());
  s = duet_shard_softmax(kHost, DUET_F32, R, C, x, C, NULL, y + 8, 0, y, C, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("lse and y overlap"), "%d %s", s, duet_last_error());
  s = duet_shard_softmax(kHost, DUET_F32, R - 1, C, y + 1, C, NULL, lse, 0, y, C, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("overlap"), "%d %s", s, duet_last_error());
  s = duet_shard_softmax(kHost, DUET_F32, R, C, x, C, NULL, lse, 0, (char*)y + 2, C, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("y is not aligned"), "%d %s", s, duet_last_error());
  EXPECT(all_poison(y, R * C), "a refused duet_shard_softmax wrote y");
  /* In place: the rows' softmax, each summing to 1. */
  memcpy(y, x, sizeof x);
  s = duet_shard_softmax(kHost, DUET_F32, R, C, y, C, NULL, lse, 0, y, C, NULL);
  EXPECT(s == DUET_SUCCESS, "%s", duet_last_error());
  for (int r = 0; r < R; ++r) {
    double total = 0.0;
    for (int j = 0; j < C; ++j) total += y[r * C + j];
    EXPECT(fabs(total - 1.0) < 1e-5, "row %d of the in-place softmax sums to %g", r, total);
  }

  duet_cross_entropy_options_t sum = {-100, 0.0f, 0.0f, DUET_REDUCTION_SUM};
  s = duet_shard_cross_entropy_backward(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, t, 1, 4, 11, &sum, lse, &one,
                                        grad, C, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("smaller than the shard's end"), "%d %s", s, duet_last_error());
  s = duet_shard_cross_entropy_backward(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, t, 1, -2, 12, &sum, lse, &one,
                                        grad, C, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("vocab_start"), "%d %s", s, duet_last_error());
  s = duet_shard_cross_entropy_backward(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, bad_t, 1, 4, 12, &sum, lse,
                                        &one, grad, C, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("target 12 of row 1"), "%d %s", s, duet_last_error());
  s = duet_shard_cross_entropy_backward(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, t, 1, 4, 12, &sum, lse, &one,
                                        NULL, C, NULL, 0, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("grad is a null"), "%d %s", s, duet_last_error());
  EXPECT(all_poison(grad, R * C), "a refused duet_shard_cross_entropy_backward wrote grad");
  /* The one-hot term only where the shard holds the target; 0 for row 2 (ignored). */
  s = duet_shard_cross_entropy_backward(kHost, DUET_F32, R, C, x, C, DUET_INDEX_I64, t, 1, 4, 12, &sum, lse, &one,
                                        grad, C, NULL, 0, NULL);
  EXPECT(s == DUET_SUCCESS, "%s", duet_last_error());
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) {
      const double want = r == 2 ? 0.0 : exp((double)x[r * C + j] - lse[r]) - (j == column[r] ? 1.0 : 0.0);
      EXPECT(fabs(grad[r * C + j] - want) <= 1e-6, "grad row %d col %d: %g, want %g", r, j, grad[r * C + j], want);
    }
}

/* Softmax over a non-last dimension (duet_softmax_interleaved): dim 1 of a
 * [2, 3, 4] tensor against the reference; hostile layouts refused, writing
 * nothing; dim 1 with y one element into x (a partial overlap) refused. */
static void non_last_dimension(void) {
  float x[24], y[24], dy[24], dx[24];
  for (int k = 0; k < 24; ++k) {
    x[k] = (float)((k * 7) % 11) - 5.0f;
    y[k] = dx[k] = POISON;
    dy[k] = 1.0f;
  }
  duet_status_t s = duet_softmax_interleaved(kHost, DUET_F32, 0, 2, 3, 4, x, 12, 4, y, 12, 3, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("col stride 3 is smaller than inner 4"), "%d %s", s,
         duet_last_error());
  s = duet_softmax_interleaved(kHost, DUET_F32, 0, 2, 3, 4, x, 11, 4, y, 12, 4, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("smaller than an outer row's span"), "%d %s", s,
         duet_last_error());
  s = duet_softmax_interleaved(kHost, DUET_F32, 0, 2, 3, 4, x, 12, 4, x + 1, 12, 4, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("overlap"), "%d %s", s, duet_last_error());
  s = duet_softmax_interleaved(kHost, DUET_F32, 0, 2, 3, -4, x, 12, 4, y, 12, 4, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("inner must be >= 0"), "%d %s", s, duet_last_error());
  s = duet_softmax_interleaved(kHost, DUET_F32, 0, 2, 3, 4, NULL, 12, 4, y, 12, 4, NULL);
  EXPECT(s == DUET_ERROR_INVALID_ARGUMENT && mentions("null"), "%d %s", s, duet_last_error());
  EXPECT(all_poison(y, 24), "a refused duet_softmax_interleaved wrote y");
  s = duet_softmax_interleaved(kHost, DUET_F32, 0, 2, 3, 4, x, 12, 4, y, 12, 4, NULL);
  EXPECT(s == DUET_SUCCESS, "%s", duet_last_error());
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4; ++i) {
      float row[3];
      for (int c = 0; c < 3; ++c) row[c] = x[r * 12 + c * 4 + i];
      for (int c = 0; c < 3; ++c) {
        const double want = softmax_ref(row, 3, c);
        EXPECT(fabs(y[r * 12 + c * 4 + i] - want) <= 1e-6, "(%d, %d, %d): %g, want %g", r, c, i, y[r * 12 + c * 4 + i],
               want);
      }
    }
  /* dx = y (dy - sum(dy y)) with dy = 1: zero, the rows summing to one. */
  s = duet_softmax_interleaved_backward(kHost, DUET_F32, 0, 2, 3, 4, y, 12, 4, dy, 12, 4, dx, 12, 4, NULL);
  EXPECT(s == DUET_SUCCESS, "%s", duet_last_error());
  for (int k = 0; k < 24; ++k) EXPECT(fabs(dx[k]) <= 1e-6, "dx[%d] = %g, want 0", k, dx[k]);
}

int main(void) {
  misaligned_elements();
  out_of_range_codes();
  interleaved_layouts();
  random_layouts_against_marking();
  impossible_sizes();
  fused_operations();
  copy_kernel_calls();
  vocab_parallel();
  non_last_dimension();
  printf("c_abi_hostile: %d failed\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
