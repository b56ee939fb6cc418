// The fused row operations on the GPU against the float64 references
// (duet/reference.hpp), through the public API: scaled and masked softmax
// (no mask, additive, boolean broadcast over heads, causal with offsets,
// fully masked rows) forward and backward, and cross-entropy forward (with
// and without the gradient, in place, every reduction, ignore_index,
// label smoothing, z-loss, extreme and non-finite logits, odd vocabularies,
// invalid targets) and backward, over every plan class: group_rows,
// block_row and stream_row, the vector path (odd lengths and misaligned
// views with element-wise edges) and the scalar path (tensors whose rows
// start at different offsets within a pack). Outputs are poisoned with NaN
// first, so an element left unwritten fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "duet/cross_entropy.hpp"
#include "duet/fused_planner.hpp"
#include "duet/masked_softmax.hpp"
#include "fused_variants.hpp"
#include "gpu_fixture.hpp"

using namespace duet;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::string plan_name(const Device& dev, const FusedShape& s) {
  if (!dev.is_gpu()) return "host";
  try {
    return plan_fused(dev.props(), s).kernel;
  } catch (const std::exception& e) {
    return std::string("no plan: ") + e.what();
  }
}

// Dense rows x cols values laid out at `stride` from element `misalign`,
// encoded to `dt`.
std::vector<std::uint8_t> scatter(const std::vector<float>& dense, std::int64_t rows, std::int64_t cols,
                                  std::int64_t stride, std::int64_t misalign, DType dt) {
  std::vector<float> full(static_cast<std::size_t>((rows - 1) * stride + cols + misalign), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      full[static_cast<std::size_t>(misalign + r * stride + c)] = dense[static_cast<std::size_t>(r * cols + c)];
  return reference::encode(full, dt);
}
std::vector<float> gather(const Buffer& b, std::int64_t rows, std::int64_t cols, std::int64_t stride,
                          std::int64_t misalign, DType dt) {
  const std::size_t elems = static_cast<std::size_t>((rows - 1) * stride + cols + misalign);
  std::vector<std::uint8_t> raw(elems * dtype_size(dt));
  b.download(raw.data(), raw.size());
  const auto full = reference::decode(raw.data(), elems, dt);
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(r * cols + c)] = full[static_cast<std::size_t>(misalign + r * stride + c)];
  return out;
}
std::size_t span_bytes(std::int64_t rows, std::int64_t cols, std::int64_t stride, std::int64_t misalign, DType dt) {
  return static_cast<std::size_t>((rows - 1) * stride + cols + misalign) * dtype_size(dt);
}

// ------------------------------------------------------------ masked softmax
struct MsCase {
  DType dtype = DType::f32;
  std::int64_t batch = 2, heads = 2, seq_q = 3, cols = 64;
  MaskKind mask = MaskKind::none;
  float scale = 0.125f;
  std::int64_t causal_offset = 0;
  bool zero_masked_rows = false;
  bool fully_masked = false;  // some mask rows mask every column
  std::int64_t x_pad = 0, out_pad = 0, misalign = 0;
  bool in_place = false;
  bool backward = false;

  std::int64_t rows() const { return batch * heads * seq_q; }
  std::string name() const {
    return std::string(backward ? "bwd " : "") + to_string(dtype) + " " + std::to_string(rows()) + "x" +
           std::to_string(cols) + " mask " + to_string(mask) + " scale " + std::to_string(scale) +
           (mask == MaskKind::causal ? " offset " + std::to_string(causal_offset) : "") +
           (zero_masked_rows ? " zero-rows" : "") + (fully_masked ? " fully-masked" : "") +
           (x_pad ? " x_pad " + std::to_string(x_pad) : "") + (misalign ? " misalign" : "") +
           (in_place ? " in-place" : "");
  }
};

void run_masked(const Device& dev, const MsCase& c) {
  const std::int64_t rows = c.rows(), cols = c.cols;
  const std::int64_t xs = cols + c.x_pad;
  const std::int64_t os = c.in_place ? xs : cols + c.out_pad;
  const DType dt = c.dtype;
  auto x = reference::round_trip(duet::testing::random_values(static_cast<std::size_t>(rows * cols)), dt);

  // The mask: [batch, 1, seq_q, cols] (broadcast over heads), dense for the reference.
  reference::DenseMask dense;
  dense.kind = c.mask;
  dense.seq_q = c.seq_q;
  dense.causal_offset = c.causal_offset;
  const std::int64_t mask_rows = c.batch * c.seq_q;
  std::vector<float> additive;
  std::vector<std::uint8_t> boolean;
  std::bernoulli_distribution masked(0.3);
  if (c.mask == MaskKind::additive) {
    additive = reference::round_trip(duet::testing::random_values(static_cast<std::size_t>(mask_rows * cols), 2.0f), dt);
    for (auto& v : additive)
      if (masked(duet::testing::rng())) v = -kInf;
    if (c.fully_masked) std::fill(additive.begin(), additive.begin() + cols, -kInf);  // batch 0, query 0
  }
  if (c.mask == MaskKind::boolean) {
    boolean.resize(static_cast<std::size_t>(mask_rows * cols));
    // Any nonzero byte masks: every value 1..255 turns up, each bit of a
    // byte alone among them (the kernels fold a pack's bytes to bits).
    std::uniform_int_distribution<int> byte(1, 255);
    for (auto& v : boolean) v = masked(duet::testing::rng()) ? std::uint8_t(byte(duet::testing::rng())) : 0;
    if (c.fully_masked) std::fill(boolean.begin(), boolean.begin() + cols, std::uint8_t(0x80));
  }
  if (c.mask == MaskKind::additive || c.mask == MaskKind::boolean) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t b = r / (c.heads * c.seq_q), i = r % c.seq_q;
      const std::size_t from = static_cast<std::size_t>((b * c.seq_q + i) * cols);
      if (c.mask == MaskKind::additive)
        dense.additive.insert(dense.additive.end(), additive.begin() + from, additive.begin() + from + cols);
      else
        dense.boolean.insert(dense.boolean.end(), boolean.begin() + from, boolean.begin() + from + cols);
    }
  }

  std::vector<float> g;
  if (c.backward) {
    const auto y = reference::masked_softmax(x, rows, cols, c.scale, dense, true);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(y[i]);
    x = reference::round_trip(x, dt);
    g = reference::round_trip(duet::testing::random_values(x.size(), 1.0f), dt);
  }

  Buffer bx(dev, span_bytes(rows, cols, xs, c.misalign, dt));
  bx.upload(scatter(x, rows, cols, xs, c.misalign, dt).data(), bx.size());
  Buffer bout, bg, bmask;
  if (!c.in_place) {
    bout = Buffer(dev, span_bytes(rows, cols, os, c.misalign, dt));
    bout.fill(0xff);
  }
  const int es = dtype_size(dt);
  char* xp = static_cast<char*>(bx.data()) + c.misalign * es;
  char* op = c.in_place ? xp : static_cast<char*>(bout.data()) + c.misalign * es;
  MaskedSoftmaxCall call;
  call.backward = c.backward;
  call.dtype = dt;
  call.rows = rows;
  call.cols = cols;
  call.x = xp;
  call.x_stride = xs;
  call.out = op;
  call.out_stride = os;
  call.scale = c.scale;
  call.zero_masked_rows = c.zero_masked_rows;
  if (c.backward) {
    bg = Buffer(dev, span_bytes(rows, cols, xs, c.misalign, dt));
    bg.upload(scatter(g, rows, cols, xs, c.misalign, dt).data(), bg.size());
    call.dy = static_cast<char*>(bg.data()) + c.misalign * es;
    call.dy_stride = xs;
  } else {
    call.mask.kind = c.mask;
    call.mask.heads = c.heads;
    call.mask.seq_q = c.seq_q;
    call.mask.causal_offset = c.causal_offset;
    if (c.mask == MaskKind::additive) {
      const auto enc = reference::encode(additive, dt);
      bmask = Buffer(dev, enc.size());
      bmask.upload(enc.data(), enc.size());
    } else if (c.mask == MaskKind::boolean) {
      bmask = Buffer(dev, boolean.size());
      bmask.upload(boolean.data(), boolean.size());
    }
    if (bmask.data()) {
      call.mask.data = bmask.data();
      call.mask.batch_stride = c.seq_q * cols;
      call.mask.head_stride = 0;
      call.mask.row_stride = cols;
    }
  }
  FusedShape shape;
  shape.op = c.backward ? FusedOp::masked_softmax_backward : FusedOp::masked_softmax;
  shape.dtype = dt;
  shape.rows = rows;
  shape.cols = cols;
  shape.mask_kind = c.backward ? MaskKind::none : c.mask;
  FusedArgs args;
  args.op = shape.op;
  args.dtype = dt;
  args.rows = rows;
  args.cols = cols;
  args.x = call.x;
  args.x_stride = call.x_stride;
  args.out = call.out;
  args.out_stride = call.out_stride;
  args.dy = call.dy;
  args.dy_stride = call.dy_stride;
  args.mask_kind = shape.mask_kind;
  args.mask = call.mask.data;
  args.heads = c.heads;
  args.seq_q = c.seq_q;
  args.mask_batch_stride = call.mask.batch_stride;
  args.mask_head_stride = call.mask.head_stride;
  args.mask_row_stride = call.mask.row_stride;
  shape.vector_ok = fused_rows_congruent(args, dtype_vec16(dt));
  shape.row_edges = !fused_rows_on_packs(args, dtype_vec16(dt));
  INFO(c.name(), " via ", plan_name(dev, shape));
  run(dev, call);
  synchronize(dev);

  const auto got = gather(c.in_place ? bx : bout, rows, cols, os, c.misalign, dt);
  reference::Check check;
  if (c.backward) {
    const auto want = reference::masked_softmax_backward(x, g, rows, cols, c.scale);
    auto scale = reference::backward_scale(x, g, rows, cols, Op::softmax);
    for (auto& s : scale) s *= std::fabs(c.scale);
    check = reference::compare(got, want, rows, cols, reference::default_tolerance(dt), &scale,
                               reference::default_abs_floor(dt));
  } else {
    const auto want = reference::masked_softmax(x, rows, cols, c.scale, dense, c.zero_masked_rows);
    check = reference::compare(got, want, rows, cols, reference::default_tolerance(dt), nullptr,
                               reference::default_abs_floor(dt));
  }
  INFO(check.first_failure, " (worst row error ", check.worst, ", NaN mismatches ", check.nan_mismatch, ")");
  CHECK(check.ok);
}

// Row lengths of every plan class: group_rows (up to 256 packs), block_row
// (a block's registers), stream_row (past them), odd lengths with a tail.
const std::vector<std::int64_t> kMaskedCols = {1, 7, 64, 128, 200, 1000, 2048, 4096, 8192, 16384, 32768, 40000, 131072};

std::int64_t queries_for(std::int64_t cols) { return std::clamp<std::int64_t>((std::int64_t(1) << 18) / cols / 4, 1, 64); }

// ------------------------------------------------------------ cross-entropy
struct CeCase {
  DType dtype = DType::f32;
  std::int64_t rows = 16, cols = 1000;
  std::int64_t pad = 0;  // extra elements between rows
  IndexType target_type = IndexType::i64;
  Reduction reduction = Reduction::mean;
  float label_smoothing = 0.0f, z_loss = 0.0f;
  bool gradient = true, in_place = false, want_lse = true;
  bool ignore_all = false;
  bool extreme = false;        // huge, -inf and NaN logits in some rows
  std::int64_t invalid = 0;    // rows with a target out of range
  std::string name() const {
    return to_string(dtype) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
           (pad ? " pad " + std::to_string(pad) : "") + (target_type == IndexType::i32 ? " i32" : " i64") +
           " reduction " + std::to_string(static_cast<int>(reduction)) + " eps " + std::to_string(label_smoothing) +
           " z " + std::to_string(z_loss) + (gradient ? " +grad" : "") + (in_place ? " in-place" : "") +
           (ignore_all ? " all-ignored" : "") + (extreme ? " extreme" : "") +
           (invalid ? " invalid " + std::to_string(invalid) : "");
  }
};

// |got - want| within rel * max(1, |want|), NaN where want is NaN.
// A lower bound on each gradient row's scale: the size of the terms
// g (p_j (1 + 2 z lse) - (1 - eps) [j == t]) before they cancel. Where the
// target's probability is near 1 (two classes, a dominant logit) the result
// is far smaller than its terms, and float32 can only hold it to eps_f32
// times the terms.
std::vector<double> gradient_scale(const std::vector<double>& lse, const std::vector<double>& g, Reduction reduction,
                                   std::int64_t counted, double z_loss) {
  std::vector<double> scale(lse.size());
  for (std::size_t r = 0; r < lse.size(); ++r) {
    double gr = std::fabs(g[reduction == Reduction::none ? r : 0]);
    if (reduction == Reduction::mean) gr /= double(std::max<std::int64_t>(counted, 1));
    scale[r] = gr * (1.0 + 2.0 * z_loss * std::fabs(lse[r]));
  }
  return scale;
}

bool close(double got, double want, double rel) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want));
}

void run_ce(const Device& dev, const CeCase& c) {
  const DType dt = c.dtype;
  const std::int64_t rows = c.rows, cols = c.cols, stride = cols + c.pad;
  constexpr std::int64_t kIgnore = -100;
  auto x = duet::testing::random_values(static_cast<std::size_t>(rows * cols), 3.0f);
  if (c.extreme && rows >= 4) {
    for (std::int64_t j = 0; j < cols; ++j) x[static_cast<std::size_t>(j)] += 1.0e4f;  // row 0: huge
    for (std::int64_t j = 0; j < cols; j += 2) x[static_cast<std::size_t>(cols + j)] = -kInf;  // row 1: half -inf
    x[static_cast<std::size_t>(2 * cols + cols / 2)] = 80.0f;  // row 2: one dominant logit
    x[static_cast<std::size_t>(3 * cols)] = std::numeric_limits<float>::quiet_NaN();  // row 3: NaN
  }
  x = reference::round_trip(x, dt);
  std::vector<std::int64_t> target(static_cast<std::size_t>(rows));
  std::uniform_int_distribution<std::int64_t> pick(0, cols - 1);
  std::bernoulli_distribution ignored(0.1);
  for (std::int64_t r = 0; r < rows; ++r) {
    target[static_cast<std::size_t>(r)] = c.ignore_all || ignored(duet::testing::rng()) ? kIgnore : pick(duet::testing::rng());
    if (c.extreme && r == 1) target[1] = 1;  // a finite logit of the row that is half -inf
  }
  // Invalid rows: the last `invalid` rows; the reference sees them ignored
  // and they are checked for NaN on their own.
  std::vector<std::int64_t> device_target = target;
  for (std::int64_t k = 0; k < c.invalid; ++k)
    device_target[static_cast<std::size_t>(rows - 1 - k)] = k % 2 ? -3 : cols + k;
  const bool any_invalid = c.invalid > 0;
  for (std::int64_t k = 0; k < c.invalid; ++k) target[static_cast<std::size_t>(rows - 1 - k)] = kIgnore;

  Buffer bx(dev, span_bytes(rows, cols, stride, 0, dt));
  bx.upload(scatter(x, rows, cols, stride, 0, dt).data(), bx.size());
  Buffer bgrad;
  if (c.gradient && !c.in_place) {
    bgrad = Buffer(dev, span_bytes(rows, cols, stride, 0, dt));
    bgrad.fill(0xff);
  }
  const std::int64_t loss_n = c.reduction == Reduction::none ? rows : 1;
  Buffer bloss(dev, loss_n * 4), blse(dev, rows * 4), binvalid(dev, 4);
  bloss.fill(0xff);
  blse.fill(0xff);
  binvalid.fill(0xff);
  Buffer btarget;
  if (c.target_type == IndexType::i32) {
    std::vector<std::int32_t> t32(device_target.begin(), device_target.end());
    btarget = Buffer(dev, t32.size() * 4);
    btarget.upload(t32.data(), t32.size() * 4);
  } else {
    btarget = Buffer(dev, device_target.size() * 8);
    btarget.upload(device_target.data(), device_target.size() * 8);
  }
  CrossEntropyCall call;
  call.dtype = dt;
  call.rows = rows;
  call.cols = cols;
  call.logits = bx.data();
  call.logits_stride = stride;
  call.target_type = c.target_type;
  call.target = btarget.data();
  call.options.ignore_index = kIgnore;
  call.options.label_smoothing = c.label_smoothing;
  call.options.z_loss = c.z_loss;
  call.options.reduction = c.reduction;
  call.loss = static_cast<float*>(bloss.data());
  call.lse = c.want_lse ? static_cast<float*>(blse.data()) : nullptr;
  if (c.gradient) {
    call.grad = c.in_place ? bx.data() : bgrad.data();
    call.grad_stride = stride;
  }
  call.invalid_targets = static_cast<std::int32_t*>(binvalid.data());
  FusedShape shape;
  shape.op = FusedOp::cross_entropy;
  shape.dtype = dt;
  shape.rows = rows;
  shape.cols = cols;
  shape.gradient = c.gradient;
  shape.vector_ok = true;  // the logits and the gradient at the same strides from aligned buffers
  shape.row_edges = stride % dtype_vec16(dt) != 0;
  INFO(c.name(), " via ", plan_name(dev, shape));
  run(dev, call);
  synchronize(dev);

  std::vector<double> ones(static_cast<std::size_t>(loss_n), 1.0);
  const auto ref = reference::cross_entropy(x, rows, cols, target, kIgnore, c.label_smoothing, c.z_loss, c.reduction, ones);
  std::vector<float> loss(static_cast<std::size_t>(loss_n)), lse(static_cast<std::size_t>(rows));
  std::int32_t invalid = -1;
  bloss.download(loss.data(), loss.size() * 4);
  blse.download(lse.data(), lse.size() * 4);
  binvalid.download(&invalid, 4);
  CHECK(invalid == c.invalid);
  const double tol = 2e-4;
  auto invalid_row = [&](std::int64_t r) { return r >= rows - c.invalid; };
  if (c.reduction == Reduction::none) {
    for (std::int64_t r = 0; r < rows; ++r) {
      INFO("row ", r);
      if (invalid_row(r))
        CHECK(std::isnan(loss[static_cast<std::size_t>(r)]));
      else
        CHECK(close(loss[static_cast<std::size_t>(r)], ref.loss[static_cast<std::size_t>(r)], tol));
    }
  } else if (any_invalid) {
    CHECK(std::isnan(loss[0]));  // a NaN row makes the reduction NaN
  } else {
    INFO("loss ", loss[0], " want ", ref.loss[0]);
    CHECK(close(loss[0], ref.loss[0], tol));
  }
  if (c.want_lse)
    for (std::int64_t r = 0; r < rows; ++r) {
      INFO("lse row ", r, ": ", lse[static_cast<std::size_t>(r)], " want ", ref.lse[static_cast<std::size_t>(r)]);
      if (invalid_row(r))
        CHECK(std::isnan(lse[static_cast<std::size_t>(r)]));
      else
        CHECK(close(lse[static_cast<std::size_t>(r)], ref.lse[static_cast<std::size_t>(r)], tol));
    }
  if (!c.gradient) return;
  const auto grad = gather(c.in_place ? bx : bgrad, rows, cols, stride, 0, dt);
  // Invalid rows must be NaN throughout; the rest match the reference
  // (with a mean over a count that includes the invalid rows, as the
  // device counts every row not ignored).
  std::vector<float> got;
  std::vector<double> want;
  std::int64_t checked = 0;
  const double mean_fix = c.reduction == Reduction::mean && ref.counted + c.invalid > 0
                              ? double(std::max<std::int64_t>(ref.counted, 1)) / double(ref.counted + c.invalid)
                              : 1.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (invalid_row(r)) {
      for (std::int64_t j = 0; j < cols; ++j) CHECK(std::isnan(grad[static_cast<std::size_t>(r * cols + j)]));
      continue;
    }
    for (std::int64_t j = 0; j < cols; ++j) {
      got.push_back(grad[static_cast<std::size_t>(r * cols + j)]);
      want.push_back(ref.grad[static_cast<std::size_t>(r * cols + j)] * mean_fix);
    }
    ++checked;
  }
  std::vector<double> scale;
  {
    const auto all = gradient_scale(ref.lse, ones, c.reduction, ref.counted, c.z_loss);
    for (std::int64_t r = 0; r < rows; ++r)
      if (!invalid_row(r)) scale.push_back(all[static_cast<std::size_t>(r)] * mean_fix);
  }
  const auto check = reference::compare(got, want, checked, cols, reference::default_tolerance(dt), &scale,
                                        reference::default_abs_floor(dt));
  INFO(check.first_failure, " (worst row error ", check.worst, ")");
  CHECK(check.ok);
}

// The backward from a forward's lse, with random upstream gradients.
void run_ce_backward(const Device& dev, const CeCase& c) {
  const DType dt = c.dtype;
  const std::int64_t rows = c.rows, cols = c.cols, stride = cols + c.pad;
  constexpr std::int64_t kIgnore = -100;
  const auto x = reference::round_trip(duet::testing::random_values(static_cast<std::size_t>(rows * cols), 3.0f), dt);
  std::vector<std::int64_t> target(static_cast<std::size_t>(rows));
  std::uniform_int_distribution<std::int64_t> pick(0, cols - 1);
  std::bernoulli_distribution ignored(0.1);
  for (auto& t : target) t = c.ignore_all || ignored(duet::testing::rng()) ? kIgnore : pick(duet::testing::rng());
  const std::int64_t gn = c.reduction == Reduction::none ? rows : 1;
  std::vector<double> grad_loss(static_cast<std::size_t>(gn));
  std::vector<float> grad_loss_f(grad_loss.size());
  std::uniform_real_distribution<float> gdist(0.5f, 2.0f);
  for (std::size_t i = 0; i < grad_loss.size(); ++i) grad_loss[i] = grad_loss_f[i] = gdist(duet::testing::rng());
  const auto ref = reference::cross_entropy(x, rows, cols, target, kIgnore, c.label_smoothing, c.z_loss, c.reduction,
                                            grad_loss);
  std::vector<float> lse(ref.lse.begin(), ref.lse.end());

  Buffer bx(dev, span_bytes(rows, cols, stride, 0, dt));
  bx.upload(scatter(x, rows, cols, stride, 0, dt).data(), bx.size());
  Buffer bgrad;
  if (!c.in_place) {
    bgrad = Buffer(dev, span_bytes(rows, cols, stride, 0, dt));
    bgrad.fill(0xff);
  }
  Buffer blse(dev, lse.size() * 4), bgl(dev, grad_loss_f.size() * 4), btarget(dev, target.size() * 8);
  blse.upload(lse.data(), lse.size() * 4);
  bgl.upload(grad_loss_f.data(), grad_loss_f.size() * 4);
  btarget.upload(target.data(), target.size() * 8);
  CrossEntropyBackwardCall call;
  call.dtype = dt;
  call.rows = rows;
  call.cols = cols;
  call.logits = bx.data();
  call.logits_stride = stride;
  call.target = btarget.data();
  call.options.ignore_index = kIgnore;
  call.options.label_smoothing = c.label_smoothing;
  call.options.z_loss = c.z_loss;
  call.options.reduction = c.reduction;
  call.lse = static_cast<const float*>(blse.data());
  call.grad_loss = static_cast<const float*>(bgl.data());
  call.grad = c.in_place ? bx.data() : bgrad.data();
  call.grad_stride = stride;
  FusedShape shape;
  shape.op = FusedOp::cross_entropy_backward;
  shape.dtype = dt;
  shape.rows = rows;
  shape.cols = cols;
  shape.vector_ok = true;  // as the forward's
  shape.row_edges = stride % dtype_vec16(dt) != 0;
  INFO("backward ", c.name(), " via ", plan_name(dev, shape));
  run(dev, call);
  synchronize(dev);
  const auto grad = gather(c.in_place ? bx : bgrad, rows, cols, stride, 0, dt);
  const auto scale = gradient_scale(ref.lse, grad_loss, c.reduction, ref.counted, c.z_loss);
  const auto check = reference::compare(grad, ref.grad, rows, cols, reference::default_tolerance(dt), &scale,
                                        reference::default_abs_floor(dt));
  INFO(check.first_failure, " (worst row error ", check.worst, ")");
  CHECK(check.ok);
}

}  // namespace

TEST_CASE("fused masked softmax: every mask, dtype and plan class matches the double reference") {
  const Device dev = duet::testing::first_gpu();
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (MaskKind mk : {MaskKind::none, MaskKind::additive, MaskKind::boolean, MaskKind::causal})
      for (std::int64_t cols : kMaskedCols) {
        MsCase c;
        c.dtype = dt;
        c.mask = mk;
        c.cols = cols;
        c.seq_q = queries_for(cols);
        c.causal_offset = mk == MaskKind::causal ? cols - c.seq_q : 0;  // bottom-right alignment
        run_masked(dev, c);
      }
}

TEST_CASE("fused masked softmax: fully masked rows give NaN or zeros, causal offsets") {
  const Device dev = duet::testing::first_gpu();
  for (std::int64_t cols : {64, 2048, 40000})
    for (bool zero : {false, true}) {
      for (MaskKind mk : {MaskKind::additive, MaskKind::boolean}) {
        MsCase c;
        c.dtype = DType::bf16;
        c.mask = mk;
        c.cols = cols;
        c.seq_q = 4;
        c.fully_masked = true;
        c.zero_masked_rows = zero;
        run_masked(dev, c);
      }
      // Offsets: negative (the first queries see nothing), 0 (torch.tril),
      // past the row (nothing masked).
      for (std::int64_t off : {std::int64_t(-3), std::int64_t(0), cols + 5}) {
        MsCase c;
        c.dtype = DType::f32;
        c.mask = MaskKind::causal;
        c.cols = cols;
        c.seq_q = 8;
        c.causal_offset = off;
        c.zero_masked_rows = zero;
        run_masked(dev, c);
      }
    }
}

TEST_CASE("fused masked softmax: strides, misaligned rows, in place, temperature") {
  const Device dev = duet::testing::first_gpu();
  for (DType dt : {DType::f32, DType::bf16})
    for (std::int64_t cols : {7, 128, 1000, 4096, 40000}) {
      MsCase c;
      c.dtype = dt;
      c.cols = cols;
      c.mask = MaskKind::boolean;
      c.seq_q = 4;
      c.x_pad = 8;
      c.out_pad = 24;
      run_masked(dev, c);
      MsCase odd = c;
      odd.x_pad = 3;  // x's rows at other offsets within a pack than y's: the scalar path
      run_masked(dev, odd);
      MsCase shifted = c;
      shifted.mask = MaskKind::causal;
      shifted.misalign = 1;
      run_masked(dev, shifted);
      MsCase in_place = c;
      in_place.in_place = true;
      run_masked(dev, in_place);
      MsCase hot = c;
      hot.mask = MaskKind::none;
      hot.scale = 1.0f / 0.7f;  // sampling's temperature 0.7
      run_masked(dev, hot);
      // The boolean mask is folded into x as an infinity whose sign
      // depends on the scale's, and a zero scale multiplies x by 0 first.
      for (float scale : {-0.5f, 0.0f}) {
        MsCase signed_scale = c;
        signed_scale.scale = scale;
        run_masked(dev, signed_scale);
        signed_scale.fully_masked = true;
        run_masked(dev, signed_scale);
      }
    }
}

TEST_CASE("fused masked softmax: masks in shared memory, each block over several rows") {
  const Device dev = duet::testing::first_gpu();
  // One wave of blocks, so each block refills its mask places for row
  // after row (the usual grid gives these shapes a block a row).
  const duet::testing::RestorePlanOptions restore;
  PlanOptions one_wave = plan_options();
  one_wave.persistent = true;
  set_plan_options(one_wave);
  for (DType dt : {DType::bf16, DType::f32})
    for (MaskKind mk : {MaskKind::boolean, MaskKind::additive})
      for (std::int64_t cols : {32768, 32767}) {
        MsCase c;
        c.dtype = dt;
        c.mask = mk;
        c.cols = cols;
        c.batch = 2;
        c.heads = 1;  // the mask's rows at the scores' offsets within a pack, odd Sk too
        c.fully_masked = true;
        FusedShape s;
        s.op = FusedOp::masked_softmax;
        s.dtype = dt;
        s.mask_kind = mk;
        s.rows = 1 << 20;
        s.cols = cols;
        s.row_edges = cols % dtype_vec16(dt) != 0;
        const FusedPlan plan = plan_fused(dev.props(), s, plan_options());
        if (plan.kernel.find("mask_in_smem") == std::string::npos) {
          MESSAGE("skipped: ", plan.kernel, " keeps the mask in registers on ", dev.props().name);
          continue;
        }
        c.seq_q = plan.launch.geometry.grid + 3;  // 2 x (grid + 3) rows: two or three a block
        run_masked(dev, c);
      }
}

TEST_CASE("fused masked softmax backward matches the double reference") {
  const Device dev = duet::testing::first_gpu();
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (std::int64_t cols : {1, 7, 64, 256, 2048, 8192, 32768, 131072}) {
      MsCase c;
      c.dtype = dt;
      c.backward = true;
      c.mask = MaskKind::causal;  // y from a causal forward: zeros past the diagonal
      c.cols = cols;
      c.seq_q = queries_for(cols);
      c.causal_offset = cols - c.seq_q;
      c.scale = 0.088f;
      run_masked(dev, c);
      if (cols == 2048 || cols == 7) {
        MsCase in_place = c;
        in_place.in_place = true;
        in_place.x_pad = 8;
        run_masked(dev, in_place);
      }
    }
}

TEST_CASE("fused cross-entropy forward: reductions, smoothing, z-loss, gradient, every plan class") {
  const Device dev = duet::testing::first_gpu();
  // Vocabularies: group_rows, block_row, stream_row; odd ones on the scalar path.
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (std::int64_t cols : {2, 7, 128, 1000, 2048, 32000, 32003, 50257, 128256}) {
      const std::int64_t rows = std::clamp<std::int64_t>((std::int64_t(1) << 20) / cols, 3, 64);
      for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
        CeCase c;
        c.dtype = dt;
        c.rows = rows;
        c.cols = cols;
        c.reduction = red;
        c.label_smoothing = red == Reduction::mean ? 0.1f : 0.0f;
        c.z_loss = red == Reduction::sum ? 1e-4f : 0.0f;
        c.target_type = red == Reduction::none ? IndexType::i32 : IndexType::i64;
        run_ce(dev, c);
      }
      CeCase loss_only;
      loss_only.dtype = dt;
      loss_only.rows = rows;
      loss_only.cols = cols;
      loss_only.gradient = false;
      run_ce(dev, loss_only);
    }
}

TEST_CASE("fused cross-entropy forward: in place, strides, ignored rows, extreme logits, invalid targets") {
  const Device dev = duet::testing::first_gpu();
  for (std::int64_t cols : {100, 4096, 50257, 131072}) {
    const std::int64_t rows = std::clamp<std::int64_t>((std::int64_t(1) << 20) / cols, 6, 48);
    CeCase in_place;
    in_place.dtype = DType::bf16;
    in_place.rows = rows;
    in_place.cols = cols;
    in_place.in_place = true;
    in_place.label_smoothing = 0.05f;
    run_ce(dev, in_place);
    CeCase strided = in_place;
    strided.in_place = false;
    strided.pad = 16;
    strided.dtype = DType::f32;
    run_ce(dev, strided);
    CeCase all_ignored = strided;
    all_ignored.ignore_all = true;  // the mean is NaN (0 / 0), the gradient 0
    run_ce(dev, all_ignored);
    CeCase sum_ignored = all_ignored;
    sum_ignored.reduction = Reduction::sum;
    run_ce(dev, sum_ignored);
    CeCase extreme = strided;
    extreme.extreme = true;
    extreme.reduction = Reduction::none;
    run_ce(dev, extreme);
    // The same extreme rows in 16-bit logits (huge, half -inf, one dominant,
    // NaN), on every plan class of these vocabularies.
    for (DType dt : {DType::bf16, DType::f16}) {
      CeCase extreme16 = extreme;
      extreme16.dtype = dt;
      run_ce(dev, extreme16);
    }
    for (Reduction red : {Reduction::none, Reduction::mean}) {
      CeCase invalid = strided;
      invalid.invalid = 2;
      invalid.reduction = red;
      run_ce(dev, invalid);
    }
  }
}

TEST_CASE("fused cross-entropy: a vocabulary of 2^20, forward") {
  const Device dev = duet::testing::first_gpu();
  CeCase c;
  c.dtype = DType::f32;
  c.rows = 6;
  c.cols = std::int64_t(1) << 20;
  c.gradient = false;
  run_ce(dev, c);
  c.gradient = true;
  c.dtype = DType::bf16;
  c.reduction = Reduction::sum;
  run_ce(dev, c);
}

TEST_CASE("fused cross-entropy backward from the forward's lse") {
  const Device dev = duet::testing::first_gpu();
  for (DType dt : {DType::f32, DType::bf16})
    for (std::int64_t cols : {3, 128, 4096, 32003, 128256})
      for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
        CeCase c;
        c.dtype = dt;
        c.rows = std::clamp<std::int64_t>((std::int64_t(1) << 19) / cols, 3, 64);
        c.cols = cols;
        c.reduction = red;
        c.label_smoothing = red == Reduction::sum ? 0.1f : 0.0f;
        c.z_loss = red == Reduction::mean ? 1e-3f : 0.0f;
        c.in_place = red == Reduction::none && cols == 4096;
        run_ce_backward(dev, c);
      }
}

// stream_row's entries for two blocks of 512 an SM (planned where more
// rows than SMs wait and the resident rows at two an SM move at most twice
// L2, not in place): the cross-entropy forward with its gradient and its
// backward against the double reference, an odd vocabulary (edges) and one
// of whole packs, enough rows that every block takes several.
TEST_CASE("fused stream_row: two blocks of 512 an SM match the double reference") {
  const Device dev = duet::testing::first_gpu();
  const std::int64_t rows = 2 * std::int64_t(dev.props().sm_count) + 7;
  int ran = 0;
  for (DType dt : {DType::bf16, DType::f16, DType::f32})
    for (std::int64_t cols : {std::int64_t(70001), std::int64_t(69632)}) {
      const FusedShape shape{.op = FusedOp::cross_entropy,
                             .dtype = dt,
                             .rows = rows,
                             .cols = cols,
                             .gradient = true,
                             .row_edges = cols % dtype_vec16(dt) != 0};
      const FusedPlan plan = plan_fused(dev.props(), shape, plan_options());
      if (plan.launch.geometry.block != kFusedStreamBlock / 2) {
        MESSAGE("skipped: ", plan.kernel, " (", plan.launch.geometry.block, " threads) on ", dev.props().name);
        continue;
      }
      CeCase c;
      c.dtype = dt;
      c.rows = rows;
      c.cols = cols;
      c.label_smoothing = 0.1f;
      run_ce(dev, c);
      c.reduction = Reduction::none;
      run_ce_backward(dev, c);
      ++ran;
    }
  // The 16-bit vocabularies take it on every GPU duet plans for with an
  // L2 of 40 MB or more (an H100: 264 rows of 70001 move 70 MiB).
  if (dev.props().vendor == Vendor::nvidia && dev.props().l2_bytes >= 40'000'000) CHECK(ran >= 4);
}

// stream_row's stash (rows past a block's registers keep their first packs
// in shared memory for the writing pass) gives the bits of the pass that
// reads every chunk again (DUET_FUSED_STASH=0): the same values in the same
// order, only from elsewhere. Stashed wherever it fits
// (DUET_FUSED_STASH=always): rows kept whole (50257 f32 on a 50 MB L2) and
// in part, one and two tensors a position, in place.
TEST_CASE("fused stream_row: the rows kept in shared memory give the bits of the rows read again") {
  const Device dev = duet::testing::first_gpu();
  const duet::testing::RestorePlanOptions restore;
  const PlanOptions before = restore.saved;
  PlanOptions on = before, off = before;
  on.fused_stash = FusedStash::always;
  off.fused_stash = FusedStash::off;
  on.allow_clusters = off.allow_clusters = false;  // stream_row's rows, not cluster_row's
  const auto stashed = [&](const FusedShape& s) { return plan_fused(dev.props(), s, on).launch.geometry.dynamic_smem; };
  const std::int64_t sms = dev.props().sm_count, l2 = dev.props().l2_bytes;
  int kept = 0;

  // 50257 f32 logits, or 100003 bf16 (50257 bf16 fit one block's registers).
  for (DType dt : {DType::bf16, DType::f32})
    for (std::int64_t cols : {std::int64_t(dt == DType::bf16 ? 100003 : 50257), std::int64_t(131072),
                              std::int64_t(1) << 20})
      for (bool in_place : {false, true}) {
        // Rows: a second one a block, and for the longest ones enough that
        // the resident rows move twice L2.
        const std::int64_t row_bytes = 2 * cols * dtype_size(dt);
        const std::int64_t rows =
            cols > 200000 ? std::clamp<std::int64_t>(2 * l2 / row_bytes + 1, 3, sms) : 2 * sms + 5;
        INFO(to_string(dt), " ", rows, " x ", cols, in_place ? " in place" : "");
        const auto x = scatter(duet::testing::random_values(static_cast<std::size_t>(rows * cols), 4.0f), rows,
                               cols, cols, 0, dt);
        std::vector<std::int64_t> target(static_cast<std::size_t>(rows));
        for (std::int64_t r = 0; r < rows; ++r) target[static_cast<std::size_t>(r)] = (r * 7919) % cols;
        Buffer btarget(dev, target.size() * 8);
        btarget.upload(target.data(), target.size() * 8);
        const FusedShape shape{.op = FusedOp::cross_entropy,
                               .dtype = dt,
                               .rows = rows,
                               .cols = cols,
                               .gradient = true,
                               .row_edges = cols % dtype_vec16(dt) != 0,
                               .in_place = in_place};
        REQUIRE(plan_fused(dev.props(), shape, on).kernel.rfind("stream_row<", 0) == 0);
        INFO("stash ", stashed(shape), " bytes");
        kept += stashed(shape) > 0;
        CHECK(plan_fused(dev.props(), shape, off).launch.geometry.dynamic_smem == 0);
        std::vector<std::vector<std::uint8_t>> grads;
        std::vector<std::vector<float>> losses;
        for (const PlanOptions& o : {on, off}) {
          set_plan_options(o);
          Buffer bx(dev, x.size()), bgrad(dev, x.size()), bloss(dev, rows * 4), blse(dev, rows * 4);
          bx.upload(x.data(), x.size());
          if (!in_place) bgrad.fill(0xff);
          bloss.fill(0xff);
          run(dev, CrossEntropyCall{.dtype = dt,
                                    .rows = rows,
                                    .cols = cols,
                                    .logits = bx.data(),
                                    .logits_stride = cols,
                                    .target = btarget.data(),
                                    .options = {.label_smoothing = 0.1f, .reduction = Reduction::none},
                                    .loss = static_cast<float*>(bloss.data()),
                                    .lse = static_cast<float*>(blse.data()),
                                    .grad = in_place ? bx.data() : bgrad.data(),
                                    .grad_stride = cols});
          synchronize(dev);
          grads.emplace_back(x.size());
          (in_place ? bx : bgrad).download(grads.back().data(), x.size());
          losses.emplace_back(static_cast<std::size_t>(rows));
          bloss.download(losses.back().data(), losses.back().size() * 4);
        }
        CHECK(grads[0] == grads[1]);
        CHECK(losses[0] == losses[1]);
        CHECK(grads[0] != x);  // written
      }

  // The masked softmax backward: y and dy a position (32-byte Items).
  for (DType dt : {DType::f16, DType::f32}) {
    const std::int64_t rows = 2 * dev.props().sm_count + 3, cols = 131072 + 5;
    INFO(to_string(dt), " backward ", rows, " x ", cols);
    const auto y = scatter(duet::testing::random_values(static_cast<std::size_t>(rows * cols), 1.0f), rows, cols,
                           cols, 0, dt);
    const auto dy = scatter(duet::testing::random_values(static_cast<std::size_t>(rows * cols), 1.0f), rows, cols,
                            cols, 0, dt);
    const FusedShape shape{
        .op = FusedOp::masked_softmax_backward, .dtype = dt, .rows = rows, .cols = cols, .row_edges = true};
    REQUIRE(plan_fused(dev.props(), shape, on).kernel.rfind("stream_row<", 0) == 0);
    kept += stashed(shape) > 0;
    std::vector<std::vector<std::uint8_t>> dxs;
    for (const PlanOptions& o : {on, off}) {
      set_plan_options(o);
      Buffer by(dev, y.size()), bdy(dev, dy.size()), bdx(dev, y.size());
      by.upload(y.data(), y.size());
      bdy.upload(dy.data(), dy.size());
      bdx.fill(0xff);
      masked_softmax_backward(dev, dt, rows, cols, by.data(), cols, bdy.data(), cols, bdx.data(), cols, 0.5f);
      synchronize(dev);
      dxs.emplace_back(y.size());
      bdx.download(dxs.back().data(), y.size());
    }
    CHECK(dxs[0] == dxs[1]);
    CHECK(std::count(dxs[0].begin(), dxs[0].end(), std::uint8_t(0xff)) < std::ptrdiff_t(dxs[0].size() / 64));
  }
  // The scaled softmax without a mask, its rows at an odd stride: each row
  // starts at another offset within a pack, so consecutive rows' bodies
  // (and the stash copies each row issues, on devices with cp.async)
  // differ.
  for (DType dt : {DType::bf16, DType::f32}) {
    const std::int64_t rows = 2 * dev.props().sm_count + 3, cols = 131072 + 1, stride = cols + 3;
    INFO(to_string(dt), " scaled softmax ", rows, " x ", cols, " at a stride of ", stride);
    const auto x = scatter(duet::testing::random_values(static_cast<std::size_t>(rows * cols), 4.0f), rows, cols,
                           stride, 0, dt);
    const FusedShape shape{.op = FusedOp::masked_softmax, .dtype = dt, .rows = rows, .cols = cols, .row_edges = true};
    REQUIRE(plan_fused(dev.props(), shape, on).kernel.rfind("stream_row<", 0) == 0);
    kept += stashed(shape) > 0;
    std::vector<std::vector<std::uint8_t>> ys;
    for (const PlanOptions& o : {on, off}) {
      set_plan_options(o);
      Buffer bx(dev, x.size()), by(dev, x.size());
      bx.upload(x.data(), x.size());
      by.fill(0xff);
      masked_softmax(dev, dt, rows, cols, bx.data(), stride, by.data(), stride, 0.75f, Mask{});
      synchronize(dev);
      ys.emplace_back(x.size());
      by.download(ys.back().data(), x.size());
    }
    CHECK(ys[0] == ys[1]);
    CHECK(std::count(ys[0].begin(), ys[0].end(), std::uint8_t(0xff)) < std::ptrdiff_t(ys[0].size() / 16));
  }
  // The widening softmax forward: 8-byte Items of bf16 x into float32 y.
  for (std::int64_t cols : {std::int64_t(100000), std::int64_t(128256 + 3)}) {
    const std::int64_t rows = 2 * dev.props().sm_count + 1;
    INFO("widening ", rows, " x ", cols);
    const auto x = scatter(duet::testing::random_values(static_cast<std::size_t>(rows * cols), 4.0f), rows, cols,
                           cols, 0, DType::bf16);
    const FusedShape shape{
        .op = FusedOp::widening_softmax, .dtype = DType::bf16, .rows = rows, .cols = cols, .row_edges = cols % 4 != 0};
    REQUIRE(plan_fused(dev.props(), shape, on).kernel.rfind("stream_row<", 0) == 0);
    kept += stashed(shape) > 0;
    std::vector<std::vector<std::uint8_t>> ys;
    for (const PlanOptions& o : {on, off}) {
      set_plan_options(o);
      Buffer bx(dev, x.size()), by(dev, std::size_t(rows * cols) * 4);
      bx.upload(x.data(), x.size());
      by.fill(0xff);
      run(dev, SoftmaxCall{.op = Op::log_softmax,
                           .dtype = DType::bf16,
                           .rows = rows,
                           .cols = cols,
                           .x = bx.data(),
                           .x_stride = cols,
                           .out = by.data(),
                           .out_stride = cols,
                           .out_dtype = DType::f32});
      synchronize(dev);
      ys.emplace_back(by.size());
      by.download(ys.back().data(), by.size());
    }
    CHECK(ys[0] == ys[1]);
    CHECK(std::count(ys[0].begin(), ys[0].end(), std::uint8_t(0xff)) < std::ptrdiff_t(ys[0].size() / 64));
  }
  CHECK(kept >= 8);  // on a 50 MB L2: 2^20 rows both ways, the backward, the scaled softmax and the widening rows at least
}

// cluster_row (a row cut over a thread-block cluster, each block's slice
// through stream_row's two passes, the slices' partial results traded
// through distributed shared memory) against the double reference,
// DUET_CLUSTER=prefer and DUET_CLUSTER_BLOCKS choosing it for rows of every
// size: a vocabulary of 2^20 over 16 blocks, slices that fill the stash or
// not, clusters whose last slices are short or empty, strided and in
// place, every reduction, ignored rows and extreme logits.
TEST_CASE("fused cluster_row: the cross-entropy forward over a cluster matches the double reference") {
  const Device dev = duet::testing::first_gpu();
  if (!dev.props().cluster_launch) {
    MESSAGE("skipped: ", dev.props().name, " launches no thread-block clusters");
    return;
  }
  const duet::testing::RestorePlanOptions restore;
  struct Case {
    DType dtype;
    std::int64_t rows, cols, pad;
    int min_blocks;  // DUET_CLUSTER_BLOCKS, 0: the planner's
    bool in_place, extreme;
    Reduction reduction;
  };
  const Case cases[] = {
      {DType::f32, 5, std::int64_t(1) << 20, 0, 0, false, false, Reduction::mean},     // 16 blocks, part stashed
      {DType::bf16, 7, 8 * 40000, 8, 0, false, false, Reduction::none},                // 4 blocks, the last short
      {DType::f16, 9, 8 * 1100, 0, 16, false, false, Reduction::sum},                  // 14 of 16 slices empty
      {DType::bf16, 6, 8 * 65536 + 8 * 3, 0, 8, true, false, Reduction::mean},         // in place
      {DType::f32, 11, 4 * 50001, 4, 2, false, true, Reduction::none},                 // extreme logits
      {DType::f16, 2 * 132 + 3, 8 * 20000, 0, 4, false, false, Reduction::mean},       // clusters walk several rows
  };
  for (const Case& k : cases) {
    PlanOptions o = restore.saved;
    o.prefer_clusters = true;
    o.force_stream = true;  // past block_row, where cluster_row is considered
    o.min_cluster_blocks = k.min_blocks;
    set_plan_options(o);
    const FusedShape shape{.op = FusedOp::cross_entropy,
                           .dtype = k.dtype,
                           .rows = k.rows,
                           .cols = k.cols,
                           .gradient = true,
                           .in_place = k.in_place};
    const FusedPlan plan = plan_fused(dev.props(), shape, o);
    INFO(plan.kernel, ": ", plan.why);
    REQUIRE(plan.kernel.rfind("cluster_row<", 0) == 0);
    CHECK(plan.launch.cluster_blocks >= std::max(k.min_blocks, 2));
    CeCase c;
    c.dtype = k.dtype;
    c.rows = k.rows;
    c.cols = k.cols;
    c.pad = k.pad;
    c.in_place = k.in_place;
    c.extreme = k.extreme;
    c.reduction = k.reduction;
    c.label_smoothing = k.reduction == Reduction::mean ? 0.1f : 0.0f;
    c.z_loss = k.reduction == Reduction::sum ? 1e-4f : 0.0f;
    run_ce(dev, c);
  }
}

// block_row_ahead (block_row's rows that hold one block an SM, the next row
// copied into shared memory while this one is reduced and written) against
// the double reference, forced (DUET_FUSED_AHEAD=always: the planner takes
// it for the loss alone, these cases also write the gradient): rows on the pack grid
// and off it (odd vocabularies, padded rows), blocks walking two or more
// rows each, in place, the loss alone, int32 targets, every reduction,
// label smoothing and z-loss, extreme logits, ignored and invalid rows.
// Each case again with DUET_FUSED_AHEAD=0 (block_row), which must agree.
TEST_CASE("fused block_row_ahead: the cross-entropy forward with the next row copied ahead matches the double reference") {
  const Device dev = duet::testing::first_gpu();
  const duet::testing::RestorePlanOptions restore;
  const std::int64_t sms = dev.props().sm_count;
  struct Case {
    DType dtype;
    std::int64_t rows, cols, pad;
    Reduction reduction;
    bool gradient, in_place, extreme;
    IndexType target_type;
    std::int64_t invalid;
  };
  const Case cases[] = {
      {DType::bf16, 2 * sms + 3, 50257, 3, Reduction::mean, true, false, false, IndexType::i64, 0},  // GPT-2's, edges
      {DType::f32, sms + 5, 24000, 0, Reduction::none, true, true, false, IndexType::i64, 0},        // in place
      {DType::f32, 2 * sms + 1, 32000, 0, Reduction::mean, false, false, false, IndexType::i32, 0},  // blocks of 1024
      {DType::f16, 3 * sms + 1, 40005, 8, Reduction::sum, true, false, false, IndexType::i32, 3},    // invalid targets
      {DType::bf16, 2 * sms, 8 * 6000, 0, Reduction::mean, false, false, false, IndexType::i64, 0},  // the loss alone
      {DType::f32, sms + 9, 20001, 1, Reduction::none, true, false, true, IndexType::i64, 0},        // extreme logits
  };
  for (const Case& k : cases) {
    const FusedShape shape{.op = FusedOp::cross_entropy,
                           .dtype = k.dtype,
                           .rows = k.rows,
                           .cols = k.cols,
                           .gradient = k.gradient,
                           .row_edges = (k.cols + k.pad) % dtype_vec16(k.dtype) != 0,
                           .in_place = k.in_place};
    CeCase c;
    c.dtype = k.dtype;
    c.rows = k.rows;
    c.cols = k.cols;
    c.pad = k.pad;
    c.reduction = k.reduction;
    c.gradient = k.gradient;
    c.in_place = k.in_place;
    c.extreme = k.extreme;
    c.target_type = k.target_type;
    c.invalid = k.invalid;
    c.label_smoothing = k.reduction == Reduction::mean ? 0.1f : 0.0f;
    c.z_loss = k.reduction == Reduction::sum ? 1e-4f : 0.0f;
    for (const bool ahead : {true, false}) {
      PlanOptions o = restore.saved;
      o.fused_ahead = ahead;
      o.force_fused_ahead = ahead;  // the gradient's rows too (planned for the loss alone)
      set_plan_options(o);
      const FusedPlan plan = plan_fused(dev.props(), shape, o);
      INFO(c.name(), ": ", plan.kernel, ": ", plan.why);
      if (ahead && !(dev.props().vendor == Vendor::nvidia && dev.props().cc_major >= 8)) {
        MESSAGE("skipped: ", dev.props().name, " copies to shared memory through registers (no block_row_ahead)");
        return;
      }
      REQUIRE(plan.kernel.rfind(ahead ? "block_row_ahead<" : "block_row<", 0) == 0);
      if (ahead) CHECK(plan.launch.geometry.grid <= sms);
      run_ce(dev, c);
    }
  }
}
