// Scaled, masked softmax on every device against the float64 reference:
// fresh random data and masks each run, poisoned outputs, every dtype.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "duet/masked_softmax.hpp"
#include "expect_refused.hpp"
#include "fused_test_util.hpp"

using namespace duet;
using namespace duet::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  explicit Case(const char* n) : name(n) {}
  const char* name;
  std::int64_t batch = 2, heads = 3, seq_q = 5, seq_k = 37;
  MaskKind kind = MaskKind::none;
  bool mask_per_batch = true, mask_per_head = true;
  bool mask_one_row = false;    // [B, H, 1, Sk] (row stride 0): one mask row for every query
  double masked_share = 0.3;    // boolean: share of elements masked out
  bool full_rows = false;       // boolean: some rows masked out entirely
  std::int64_t causal_offset = 0;
  float scale = 1.0f;
  bool zero_masked_rows = false;
  std::int64_t x_pad = 0, out_pad = 0;  // row strides past cols
  // Elements into their buffers where x, y and the mask start (views off
  // the 16-byte grid); y is x's in place.
  std::int64_t x_offset = 0, out_offset = 0, mask_offset = 0;
  bool in_place = false;
  // 1: every tensor starts its rows at x's offset within a 16-byte pack, so
  // GPUs run the vector kernels with edges; 0: the scalar path; -1: either.
  int vector = -1;
};

// The mask as the device reads it ([Bm, Hm, Sq or 1, Sk] with its strides)
// and broadcast to rows x cols for the reference.
struct BuiltMask {
  Mask mask;
  std::vector<std::uint8_t> bytes;  // the device's mask tensor
  reference::DenseMask dense;
};

BuiltMask build_mask(const Case& c, DType dtype) {
  BuiltMask b;
  const std::int64_t rows = c.batch * c.heads * c.seq_q, cols = c.seq_k;
  b.mask.kind = c.kind;
  b.dense.kind = c.kind;
  b.mask.heads = c.heads;
  b.mask.seq_q = c.seq_q;
  b.dense.seq_q = c.seq_q;
  if (c.kind == MaskKind::causal) {
    b.mask.causal_offset = c.causal_offset;
    b.dense.causal_offset = c.causal_offset;
  }
  if (c.kind != MaskKind::additive && c.kind != MaskKind::boolean) return b;
  const std::int64_t mb = c.mask_per_batch ? c.batch : 1, mh = c.mask_per_head ? c.heads : 1,
                     mq = c.mask_one_row ? 1 : c.seq_q;
  const std::int64_t n = mb * mh * mq * cols;
  b.mask.row_stride = c.mask_one_row ? 0 : cols;
  b.mask.head_stride = c.mask_per_head ? mq * cols : 0;
  b.mask.batch_stride = c.mask_per_batch ? mh * mq * cols : 0;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<float> additive;
  std::vector<std::uint8_t> boolean;
  if (c.kind == MaskKind::additive) {
    // Finite offsets, with some -inf (masked) elements.
    additive = random_values(std::size_t(n), 2.0f, dtype);
    for (auto& v : additive)
      if (u(rng()) < c.masked_share) v = -kInf;
    b.bytes = reference::encode(additive, dtype);
  } else {
    boolean.resize(std::size_t(n));
    for (auto& v : boolean) v = u(rng()) < c.masked_share ? std::uint8_t(1 + rng()() % 255) : 0;
    if (c.full_rows)  // every third mask row entirely masked out
      for (std::int64_t r = 0; r < n / cols; r += 3) std::fill_n(boolean.begin() + r * cols, cols, std::uint8_t(1));
    b.bytes = boolean;
  }
  // Broadcast to the scores' rows.
  if (c.kind == MaskKind::additive) b.dense.additive.resize(std::size_t(rows * cols));
  else b.dense.boolean.resize(std::size_t(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t q = r % c.seq_q, h = (r / c.seq_q) % c.heads, bt = r / (c.seq_q * c.heads);
    const std::int64_t at = bt * b.mask.batch_stride + h * b.mask.head_stride + q * b.mask.row_stride;
    for (std::int64_t j = 0; j < cols; ++j) {
      if (c.kind == MaskKind::additive) b.dense.additive[std::size_t(r * cols + j)] = additive[std::size_t(at + j)];
      else b.dense.boolean[std::size_t(r * cols + j)] = boolean[std::size_t(at + j)];
    }
  }
  return b;
}

// One forward case on one device and dtype, with a given poison.
void run_forward(const Device& dev, DType dtype, const Case& c, std::uint8_t poison) {
  const std::int64_t rows = c.batch * c.heads * c.seq_q, cols = c.seq_k;
  const std::int64_t x_stride = cols + c.x_pad, out_stride = c.in_place ? x_stride : cols + c.out_pad;
  const std::int64_t out_offset = c.in_place ? c.x_offset : c.out_offset;
  const auto x = random_values(std::size_t(rows * cols), 3.0f, dtype);
  BuiltMask m = build_mask(c, dtype);
  const auto want = reference::masked_softmax(x, rows, cols, c.scale, m.dense, c.zero_masked_rows);
  const std::uint8_t gap = 0x5a;
  const int elem = dtype_size(dtype);
  const auto x_bytes = placed(x, rows, cols, x_stride, c.x_offset, dtype, gap);
  DeviceCopy dx(dev, x_bytes);
  DeviceCopy dy(dev, std::vector<std::uint8_t>(placed_bytes(rows, cols, out_stride, out_offset, dtype), poison));
  const std::int64_t mask_elem = c.kind == MaskKind::boolean ? 1 : elem;
  std::vector<std::uint8_t> mask_bytes(std::size_t(c.mask_offset * mask_elem), 0);
  mask_bytes.insert(mask_bytes.end(), m.bytes.begin(), m.bytes.end());
  DeviceCopy dmask(dev, mask_bytes);
  if (!m.bytes.empty()) m.mask.data = static_cast<const char*>(dmask.data()) + c.mask_offset * mask_elem;
  char* xp = static_cast<char*>(dx.data()) + c.x_offset * elem;
  void* out = c.in_place ? static_cast<void*>(xp) : static_cast<char*>(dy.data()) + out_offset * elem;
  FusedArgs a;
  a.op = FusedOp::masked_softmax;
  a.dtype = dtype;
  a.rows = rows;
  a.cols = cols;
  a.x = xp;
  a.x_stride = x_stride;
  a.out = out;
  a.out_stride = out_stride;
  a.mask_kind = c.kind;
  a.mask = m.mask.data;
  a.heads = c.heads;
  a.seq_q = c.seq_q;
  a.mask_batch_stride = m.mask.batch_stride;
  a.mask_head_stride = m.mask.head_stride;
  a.mask_row_stride = m.mask.row_stride;
  const std::string kernel = fused_kernel(dev, a);
  INFO(label(dev, dtype), " ", c.name, " ", rows, "x", cols, " via ", kernel);
  if (c.vector >= 0) CHECK(detail::fused_vector_ok(a) == (c.vector == 1));
  CHECK(runs_path(dev, a, kernel, c.vector));
  masked_softmax(dev, dtype, rows, cols, xp, x_stride, out, out_stride, c.scale, m.mask, c.zero_masked_rows);
  synchronize(dev);
  const auto out_bytes = c.in_place ? dx.get<std::uint8_t>() : dy.get<std::uint8_t>();
  const auto got = dense(out_bytes, rows, cols, out_stride, out_offset, dtype);
  const auto check = reference::compare(got, want, rows, cols, reference::default_tolerance(dtype), nullptr,
                                        reference::default_abs_floor(dtype));
  INFO(check.first_failure);
  CHECK(check.ok);
  CHECK(gaps_hold(out_bytes, rows, cols, out_stride, out_offset, dtype, c.in_place ? gap : poison));
  CHECK(dx.get<std::uint8_t>() == (c.in_place ? out_bytes : x_bytes));
}

void forward_case(const Case& c) {
  on_every_device([&](const Device& dev) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      run_forward(dev, dtype, c, kNaNPoison);
      // Rows whose answer is NaN: a NaN poison left in place would pass.
      if (!c.zero_masked_rows && (c.full_rows || c.kind == MaskKind::causal) && !c.in_place)
        run_forward(dev, dtype, c, kFinitePoison);
    }
  });
}

}  // namespace

TEST_CASE("masked softmax: no mask, odd cols, temperature and strides") {
  Case c("plain");
  forward_case(c);
  c = Case("temperature 0.125, strided");
  c.seq_k = 1000;
  c.scale = 0.125f;
  c.x_pad = 7;
  c.out_pad = 24;
  forward_case(c);
  c = Case("scale -2.5, one column");
  c.seq_k = 1;
  c.scale = -2.5f;
  forward_case(c);
  c = Case("in place, 4097 columns");
  c.batch = 1;
  c.heads = 2;
  c.seq_q = 3;
  c.seq_k = 4097;
  c.in_place = true;
  c.x_pad = 3;
  forward_case(c);
}

TEST_CASE("masked softmax: additive masks, full and broadcast") {
  Case c("additive [B,H,Sq,Sk]");
  c.kind = MaskKind::additive;
  c.scale = 0.5f;
  forward_case(c);
  c.name = "additive [B,1,Sq,Sk]";
  c.mask_per_head = false;
  c.seq_k = 130;
  forward_case(c);
  c.name = "additive [1,1,Sq,Sk], strided";
  c.mask_per_batch = false;
  c.x_pad = 5;
  c.out_pad = 2;
  forward_case(c);
}

TEST_CASE("masked softmax: boolean masks with fully masked rows, NaN and zeros") {
  for (bool zeros : {false, true}) {
    Case c{zeros ? "boolean, full rows, zeros" : "boolean, full rows, NaN"};
    c.kind = MaskKind::boolean;
    c.full_rows = true;
    c.zero_masked_rows = zeros;
    c.seq_k = 67;
    forward_case(c);
    c.name = "boolean [B,1,Sq,Sk], full rows";
    c.mask_per_head = false;
    c.scale = 0.25f;
    forward_case(c);
    c.name = "boolean [B,1,1,Sk] key padding, full rows";
    c.mask_one_row = true;
    forward_case(c);
    c.name = "boolean [1,1,Sq,Sk] dense, in place";
    c.mask_one_row = false;
    c.mask_per_batch = false;
    c.masked_share = 0.9;
    c.in_place = true;
    forward_case(c);
  }
}

TEST_CASE("masked softmax: causal with offsets 0, Sk - Sq and negative") {
  for (bool zeros : {false, true}) {
    Case c("causal square");
    c.kind = MaskKind::causal;
    c.seq_q = 9;
    c.seq_k = 9;
    c.zero_masked_rows = zeros;
    c.scale = 0.3f;
    forward_case(c);
    c.name = "causal bottom-right (Sk - Sq)";
    c.seq_q = 6;
    c.seq_k = 41;
    c.causal_offset = c.seq_k - c.seq_q;
    forward_case(c);
    c.name = "causal offset -3: the first queries see nothing";
    c.causal_offset = -3;
    forward_case(c);
    c.name = "causal, strided, wide";
    c.seq_q = 4;
    c.seq_k = 3000;
    c.causal_offset = 1500;
    c.x_pad = 9;
    c.out_pad = 1;
    forward_case(c);
  }
}

// Rows off the 16-byte grid: odd lengths, views starting 1..7 elements past
// a 16-byte boundary, odd strides. Where every tensor starts its rows at the
// same offset within a pack (vector = 1), GPUs run the vector kernels
// (group_rows, block_row and stream_row by length) with each row's head and
// tail element-wise; elsewhere the scalar kernels. Every output element is
// compared (outputs poisoned), and the bytes before, between and after the
// rows must be as they were.
TEST_CASE("masked softmax: odd lengths and offset views on the vector path") {
  for (std::int64_t cols : {1, 3, 7, 9, 15, 17, 33, 135})
    for (std::int64_t k = 0; k < 8; ++k) {
      Case c("offset view, odd stride");
      c.batch = 1;
      c.heads = 2;
      c.seq_q = 5;
      c.seq_k = cols;
      c.x_offset = c.out_offset = k;
      c.x_pad = k % 3 == 0 ? 0 : 2 * k - 1;
      c.out_pad = c.x_pad + 8;
      c.scale = 0.75f;
      c.vector = 1;
      forward_case(c);
    }
  // Past group_rows: block_row (1027 and 2055: 256 packs and a tail for f32
  // and 16-bit; 4097) and stream_row (70001).
  for (std::int64_t cols : {1027, 2055, 4097, 70001})
    for (std::int64_t k : {0, 1, 6}) {
      Case c("long rows, offset view, odd stride");
      c.batch = 1;
      c.heads = 1;
      c.seq_q = 3;
      c.seq_k = cols;
      c.x_offset = c.out_offset = k;
      c.x_pad = 3;
      c.out_pad = 11;
      c.vector = 1;
      forward_case(c);
    }
  for (std::int64_t cols : {33, 4097}) {
    Case c("in place, offset view, odd stride");
    c.seq_k = cols;
    c.heads = 1;
    c.x_offset = 3;
    c.x_pad = 5;
    c.in_place = true;
    c.vector = 1;
    forward_case(c);
    c = Case("y one element further into its buffer than x: the scalar path");
    c.seq_k = cols;
    c.x_offset = 2;
    c.out_offset = 3;
    c.vector = 0;
    forward_case(c);
    c = Case("strides an odd number apart: the scalar path");
    c.seq_k = cols;
    c.x_pad = 1;
    c.out_pad = 4;
    c.vector = 0;
    forward_case(c);
  }
}

TEST_CASE("masked softmax: causal with odd Sk and offset views") {
  for (bool zeros : {false, true})
    for (std::int64_t cols : {41, 4097, 70001}) {
      Case c("causal, odd Sk, bottom-right");
      c.kind = MaskKind::causal;
      c.batch = 1;
      c.heads = 2;
      c.seq_q = cols > 5000 ? 2 : 6;
      c.seq_k = cols;
      c.causal_offset = cols - c.seq_q;
      c.x_offset = c.out_offset = 3;
      c.zero_masked_rows = zeros;
      c.vector = 1;
      forward_case(c);
      c.name = "causal, odd Sk, offset -3: the first queries see nothing";
      c.causal_offset = -3;
      c.x_offset = c.out_offset = 6;
      forward_case(c);
      c.name = "causal, odd Sk, the diagonal in the first pack";
      c.causal_offset = 1;
      c.x_offset = c.out_offset = 0;
      c.x_pad = 1;
      c.out_pad = 9;
      forward_case(c);
    }
}

TEST_CASE("masked softmax: masks with odd Sk broadcast over heads, offset views") {
  for (MaskKind kind : {MaskKind::boolean, MaskKind::additive})
    for (std::int64_t cols : {37, 4097, 70001}) {
      const bool boolean = kind == MaskKind::boolean;
      // [B,1,Sq,Sk] with Sq = 8: a head's rows are a whole number of packs
      // long (8 x Sk elements), so the mask's rows keep x's offsets.
      Case c(boolean ? "boolean [B,1,8,Sk], odd Sk" : "additive [B,1,8,Sk], odd Sk");
      c.kind = kind;
      c.batch = cols > 5000 ? 1 : 2;
      c.heads = cols > 5000 ? 2 : 3;
      c.seq_q = 8;
      c.seq_k = cols;
      c.mask_per_head = false;
      c.full_rows = boolean;
      c.scale = 0.5f;
      c.x_offset = c.out_offset = c.mask_offset = 5;
      c.vector = 1;
      forward_case(c);
      if (cols > 5000) continue;
      c.name = boolean ? "boolean [B,1,8,Sk], odd Sk, zeros" : "additive [B,1,8,Sk], odd Sk, in place";
      c.zero_masked_rows = boolean;
      c.in_place = !boolean;
      c.x_offset = c.out_offset = c.mask_offset = 2;
      forward_case(c);
      c = Case(boolean ? "boolean [B,H,Sq,Sk], odd Sq and Sk" : "additive [B,H,Sq,Sk], odd Sq and Sk");
      c.kind = kind;
      c.seq_k = cols;
      c.x_offset = c.out_offset = c.mask_offset = 7;
      c.vector = 1;
      forward_case(c);
      // Broadcasts that move the mask's rows against x's: the scalar path.
      c.name = boolean ? "boolean [B,1,Sq,Sk], odd Sq and Sk" : "additive [B,1,Sq,Sk], odd Sq and Sk";
      c.mask_per_head = false;
      c.vector = 0;
      forward_case(c);
      c.name = boolean ? "boolean [B,1,1,Sk] key padding, odd Sk" : "additive [B,1,1,Sk], odd Sk";
      c.mask_one_row = true;
      forward_case(c);
      c.name = boolean ? "boolean mask one element off x's offset" : "additive mask one element off x's offset";
      c.mask_one_row = false;
      c.mask_per_head = true;
      c.mask_offset = 6;
      forward_case(c);
    }
}

TEST_CASE("masked softmax: NaN, +inf and -inf scores as torch") {
  on_every_device([&](const Device& dev) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    // Rows: a NaN, a +inf, two -inf among finite, every element -inf.
    const std::vector<float> x{1, nan, 2, 0, /**/ 1, kInf, 0, 2, /**/ -kInf, 3, -kInf, 1, /**/ -kInf, -kInf, -kInf, -kInf};
    for (bool zeros : {false, true}) {
      const auto want = reference::masked_softmax(x, 4, 4, 2.0f, {}, zeros);
      DeviceCopy dx(dev, x), dy(dev, std::vector<float>(16, 7.0f));
      masked_softmax(dev, DType::f32, 4, 4, dx.data(), 4, dy.data(), 4, 2.0f, Mask{}, zeros);
      synchronize(dev);
      const auto got = dy.get<float>();
      INFO(dev.label(), zeros ? " zeros" : " NaN");
      CHECK(reference::compare(got, want, 4, 4, 1e-5).ok);
      for (int j = 0; j < 8; ++j) CHECK(std::isnan(got[std::size_t(j)]));
      CHECK(got[8] == 0.0f);
      for (int j = 12; j < 16; ++j) CHECK((zeros ? got[std::size_t(j)] == 0.0f : std::isnan(got[std::size_t(j)])));
    }
  });
}

// A causal row with a NaN or +inf among the columns it sees is NaN in
// every column, those past the diagonal too, as torch's masked_fill and
// softmax give; rows of 5 packs, so the columns past the diagonal fill
// whole packs, which the 16-bit kernels write without computing them.
TEST_CASE("masked softmax: causal rows with NaN or +inf are NaN past the diagonal too") {
  on_every_device([&](const Device& dev) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    constexpr std::int64_t rows = 4, cols = 40;
    std::vector<float> x(std::size_t(rows * cols), 0.5f);
    x[std::size_t(1 * cols + 0)] = nan;   // row 1 sees columns 0..1
    x[std::size_t(2 * cols + 2)] = kInf;  // row 2 sees columns 0..2
    x[std::size_t(3 * cols + 9)] = nan;   // past row 3's diagonal: never seen
    reference::DenseMask causal;
    causal.kind = MaskKind::causal;
    causal.seq_q = rows;
    for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      const auto want = reference::masked_softmax(x, rows, cols, 1.0f, causal, false);
      DeviceCopy dx(dev, reference::encode(x, dtype));
      DeviceCopy dy(dev, std::vector<std::uint8_t>(std::size_t(rows * cols * dtype_size(dtype)), kNaNPoison));
      Mask m;
      m.kind = MaskKind::causal;
      m.seq_q = rows;
      masked_softmax(dev, dtype, rows, cols, dx.data(), cols, dy.data(), cols, 1.0f, m, false);
      synchronize(dev);
      const auto got = dense(dy.get<std::uint8_t>(), rows, cols, cols, dtype);
      INFO(label(dev, dtype));
      CHECK(reference::compare(got, want, rows, cols, 1e-2).ok);
      for (std::int64_t j = cols; j < 3 * cols; ++j) CHECK(std::isnan(got[std::size_t(j)]));
      for (std::int64_t j = 1; j < cols; ++j) CHECK(got[std::size_t(j)] == 0.0f);
      for (std::int64_t j = 4; j < cols; ++j) CHECK(got[std::size_t(3 * cols + j)] == 0.0f);
    }
  });
}

TEST_CASE("masked softmax backward: dx = scale * y * (dy - sum(dy * y)), strided and in place") {
  on_every_device([&](const Device& dev) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16})
      for (int mode = 0; mode < 4; ++mode) {  // separate, strided, in place over dy, in place over y
        const std::int64_t rows = 24, cols = mode == 1 ? 1023 : 77;
        const float scale = mode == 0 ? 1.0f : 0.375f;
        const std::int64_t stride = mode == 1 ? cols + 5 : cols;
        const auto x = random_values(std::size_t(rows * cols), 3.0f, dtype);
        const auto y_exact = reference::masked_softmax(x, rows, cols, scale, {}, false);
        std::vector<float> y(y_exact.begin(), y_exact.end());
        y = reference::round_trip(y, dtype);
        const auto g = random_values(y.size(), 1.0f, dtype);
        const auto want = reference::masked_softmax_backward(y, g, rows, cols, scale);
        auto row_scale = reference::backward_scale(y, g, rows, cols, Op::softmax);
        for (auto& s : row_scale) s *= double(scale);
        DeviceCopy dyv(dev, strided(y, rows, cols, stride, dtype, 0x11));
        DeviceCopy dg(dev, strided(g, rows, cols, stride, dtype, 0x22));
        DeviceCopy dout(dev, std::vector<std::uint8_t>(std::size_t((rows - 1) * stride + cols) *
                                                           std::size_t(dtype_size(dtype)),
                                                       kNaNPoison));
        void* out = mode == 2 ? dg.data() : mode == 3 ? dyv.data() : dout.data();
        masked_softmax_backward(dev, dtype, rows, cols, dyv.data(), stride, dg.data(), stride, out, stride, scale);
        synchronize(dev);
        const auto bytes = mode == 2 ? dg.get<std::uint8_t>() : mode == 3 ? dyv.get<std::uint8_t>() : dout.get<std::uint8_t>();
        const auto got = dense(bytes, rows, cols, stride, dtype);
        const auto check = reference::compare(got, want, rows, cols, reference::default_tolerance(dtype), &row_scale,
                                              reference::default_abs_floor(dtype));
        INFO(label(dev, dtype), " mode ", mode, ": ", check.first_failure);
        CHECK(check.ok);
      }
  });
}

TEST_CASE("masked softmax backward: odd lengths and offset views on the vector path") {
  on_every_device([&](const Device& dev) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16})
      for (std::int64_t cols : {1, 9, 33, 135, 2055, 4097, 70001})
        for (int mode = 0; mode < 3; ++mode) {  // offset views; in place over dy; dy off y's offset (scalar)
          const std::int64_t rows = cols > 5000 ? 3 : 12, k = 1 + cols % 7;
          const std::int64_t stride = cols + 2 * k + 1;
          const std::int64_t y_off = k, g_off = mode == 2 ? k + 1 : k, o_off = mode == 1 ? g_off : k + 8;
          const float scale = 0.375f;
          const auto x = random_values(std::size_t(rows * cols), 3.0f, dtype);
          const auto y_exact = reference::masked_softmax(x, rows, cols, scale, {}, false);
          const auto y = reference::round_trip(std::vector<float>(y_exact.begin(), y_exact.end()), dtype);
          const auto g = random_values(y.size(), 1.0f, dtype);
          const auto want = reference::masked_softmax_backward(y, g, rows, cols, scale);
          auto row_scale = reference::backward_scale(y, g, rows, cols, Op::softmax);
          for (auto& v : row_scale) v *= double(scale);
          const int elem = dtype_size(dtype);
          const auto y_bytes = placed(y, rows, cols, stride, y_off, dtype, 0x11);
          const auto g_bytes = placed(g, rows, cols, stride, g_off, dtype, 0x22);
          DeviceCopy dyv(dev, y_bytes), dg(dev, g_bytes);
          DeviceCopy dout(dev, std::vector<std::uint8_t>(placed_bytes(rows, cols, stride, o_off, dtype), kNaNPoison));
          const char* yp = static_cast<const char*>(dyv.data()) + y_off * elem;
          const char* gp = static_cast<const char*>(dg.data()) + g_off * elem;
          char* op = mode == 1 ? static_cast<char*>(dg.data()) + g_off * elem
                               : static_cast<char*>(dout.data()) + o_off * elem;
          FusedArgs a;
          a.op = FusedOp::masked_softmax_backward;
          a.dtype = dtype;
          a.rows = rows;
          a.cols = cols;
          a.x = yp;
          a.x_stride = stride;
          a.dy = gp;
          a.dy_stride = stride;
          a.out = op;
          a.out_stride = stride;
          const std::string kernel = fused_kernel(dev, a);
          INFO(label(dev, dtype), " ", rows, "x", cols, " mode ", mode, " via ", kernel);
          CHECK(detail::fused_vector_ok(a) == (mode != 2));
          CHECK(runs_path(dev, a, kernel, mode != 2 ? 1 : 0));
          masked_softmax_backward(dev, dtype, rows, cols, yp, stride, gp, stride, op, stride, scale);
          synchronize(dev);
          const auto bytes = mode == 1 ? dg.get<std::uint8_t>() : dout.get<std::uint8_t>();
          const std::int64_t off = mode == 1 ? g_off : o_off;
          const auto check = reference::compare(dense(bytes, rows, cols, stride, off, dtype), want, rows, cols,
                                                reference::default_tolerance(dtype), &row_scale,
                                                reference::default_abs_floor(dtype));
          INFO(check.first_failure);
          CHECK(check.ok);
          CHECK(gaps_hold(bytes, rows, cols, stride, off, dtype, mode == 1 ? 0x22 : kNaNPoison));
          CHECK(dyv.get<std::uint8_t>() == y_bytes);
        }
  });
}

TEST_CASE("masked softmax: bad calls are refused with a reason and write nothing") {
  const Device host = device(BackendKind::host, 0);
  std::vector<float> x(64, 1.0f), y(64, -7.0f);
  std::vector<std::uint8_t> bools(64, 0);
  auto untouched = [&] { return std::all_of(y.begin(), y.end(), [](float v) { return v == -7.0f; }); };
  auto expect = [&](auto&& call, const char* mentions) {
    expect_refused(call, mentions);
    CHECK(untouched());
  };
  Mask none;
  expect([&] { masked_softmax(host, DType::f32, 2, 4, nullptr, 4, y.data(), 4, 1.0f, none); }, "null");
  expect([&] { masked_softmax(host, DType::f32, -2, 4, x.data(), 4, y.data(), 4, 1.0f, none); }, ">= 0");
  expect([&] { masked_softmax(host, static_cast<DType>(-1), 2, 4, x.data(), 4, y.data(), 4, 1.0f, none); }, "dtype");
  expect([&] { masked_softmax(host, DType::f32, 2, 8, x.data(), 4, y.data(), 8, 1.0f, none); }, "stride");
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, NAN, none); }, "finite");
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, INFINITY, none); }, "finite");
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, x.data() + 2, 4, 1.0f, none); }, "overlap");
  expect([&] { masked_softmax(host, DType::f16, 2, 4, x.data(), 4, reinterpret_cast<char*>(y.data()) + 1, 4, 1.0f, none); },
         "aligned");
  expect([&] { masked_softmax(host, DType::f32, std::int64_t(1) << 40, 4, x.data(), 1024, y.data(), 1024, 1.0f, none); },
         "2^48");
  Mask m;
  m.kind = static_cast<MaskKind>(7);
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, 1.0f, m); }, "mask kind");
  m = Mask{};
  m.kind = MaskKind::boolean;
  m.seq_q = 2;
  m.row_stride = 4;
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, 1.0f, m); }, "mask is a null");
  m.data = bools.data();
  m.seq_q = 3;
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, 1.0f, m); }, "whole number");
  m.seq_q = 2;
  m.row_stride = -4;
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, 1.0f, m); }, ">= 0");
  m.row_stride = 4;
  m.batch_stride = std::int64_t(1) << 60;
  m.seq_q = 1;
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, 1.0f, m); }, "2^48");
  m.batch_stride = 4;
  m.data = y.data() + 4;  // the mask inside the output
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, 1.0f, m); }, "overlap");
  m.kind = MaskKind::additive;
  m.data = reinterpret_cast<const char*>(x.data()) + 2;
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, 1.0f, m); }, "aligned");
  m = Mask{};
  m.kind = MaskKind::causal;
  m.data = bools.data();
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, 1.0f, m); }, "causal");
  m.data = nullptr;
  m.heads = 0;
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, 1.0f, m); }, "heads");
  m.heads = 1;
  m.causal_offset = std::numeric_limits<std::int64_t>::max();
  expect([&] { masked_softmax(host, DType::f32, 2, 4, x.data(), 4, y.data(), 4, 1.0f, m); }, "causal_offset");
  expect([&] { masked_softmax_backward(host, DType::f32, 2, 4, x.data(), 4, nullptr, 4, y.data(), 4, 1.0f); }, "dy");
  expect([&] { masked_softmax_backward(host, DType::f32, 2, 4, x.data(), 4, y.data() + 1, 4, y.data(), 4, 1.0f); },
         "dy and dx overlap");
  // Zero rows or cols: a no-op, even with null pointers.
  masked_softmax(host, DType::f32, 0, 4, nullptr, 4, nullptr, 4, 1.0f, none);
  masked_softmax(host, DType::f32, 3, 0, nullptr, 4, nullptr, 4, 1.0f, none);
  CHECK(untouched());
}
