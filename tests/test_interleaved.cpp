// Softmax over interleaved rows (SoftmaxCall::inner: a non-last dimension)
// on every device: fresh random tensors with padded strides, poisoned
// outputs, forward and backward, softmax and log_softmax, every dtype,
// against the float64 reference of the same rows gathered contiguous; the
// bytes between the rows keep their values; bad layouts are refused before
// anything is written.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "duet/duet.h"
#include "duet/softmax.hpp"
#include "expect_refused.hpp"
#include "fused_test_util.hpp"
#include "plan_options_guard.hpp"

using namespace duet;
using namespace duet::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr std::uint8_t kGap = 0x5a;

struct Shape {
  std::int64_t rows, cols, inner;
  std::int64_t col_pad = 0;  // col_stride = inner + col_pad
  std::int64_t row_pad = 0;  // stride = (cols - 1) * col_stride + inner + row_pad
};

// One interleaved tensor: its strides and its bytes as the device holds
// them, gaps filled.
struct Tensor {
  std::int64_t col_stride = 0, stride = 0;
  std::vector<std::uint8_t> bytes;
};
std::int64_t offset(const Tensor& t, std::int64_t r, std::int64_t c, std::int64_t i) {
  return r * t.stride + c * t.col_stride + i;
}
Tensor layout(const Shape& s, std::uint8_t fill, DType dtype) {
  Tensor t;
  t.col_stride = s.inner + s.col_pad;
  t.stride = (s.cols - 1) * t.col_stride + s.inner + s.row_pad;
  t.bytes.assign(std::size_t(s.rows * t.stride) * std::size_t(dtype_size(dtype)), fill);
  return t;
}
// values: (rows x inner) rows of cols, row (r, i) at (r * inner + i) * cols.
void place(const Shape& s, Tensor& t, const std::vector<float>& values, DType dtype) {
  const std::size_t elem = std::size_t(dtype_size(dtype));
  const auto enc = reference::encode(values, dtype);
  for (std::int64_t r = 0; r < s.rows; ++r)
    for (std::int64_t i = 0; i < s.inner; ++i)
      for (std::int64_t c = 0; c < s.cols; ++c)
        std::memcpy(t.bytes.data() + std::size_t(offset(t, r, c, i)) * elem,
                    enc.data() + std::size_t((r * s.inner + i) * s.cols + c) * elem, elem);
}
std::vector<float> gather(const Shape& s, const Tensor& t, const std::vector<std::uint8_t>& bytes, DType dtype) {
  const std::size_t elem = std::size_t(dtype_size(dtype));
  std::vector<float> out(std::size_t(s.rows * s.inner * s.cols));
  for (std::int64_t r = 0; r < s.rows; ++r)
    for (std::int64_t i = 0; i < s.inner; ++i)
      for (std::int64_t c = 0; c < s.cols; ++c)
        out[std::size_t((r * s.inner + i) * s.cols + c)] =
            reference::decode(bytes.data() + std::size_t(offset(t, r, c, i)) * elem, 1, dtype)[0];
  return out;
}
// Whether every byte outside the tensor's elements still holds `fill`.
bool gaps_hold(const Shape& s, const Tensor& t, const std::vector<std::uint8_t>& bytes, std::uint8_t fill,
               DType dtype) {
  const std::size_t elem = std::size_t(dtype_size(dtype));
  std::vector<bool> element(bytes.size(), false);
  for (std::int64_t r = 0; r < s.rows; ++r)
    for (std::int64_t c = 0; c < s.cols; ++c)
      for (std::int64_t i = 0; i < s.inner; ++i)
        for (std::size_t b = 0; b < elem; ++b) element[std::size_t(offset(t, r, c, i)) * elem + b] = true;
  for (std::size_t b = 0; b < bytes.size(); ++b)
    if (!element[b] && bytes[b] != fill) return false;
  return true;
}

// Row (0, 0) all -inf, row (0, 1) a NaN, row (0, 2) a +inf, row (0, 3)
// every other element -inf: torch's answers are NaN, NaN, NaN and finite.
void make_extreme(const Shape& s, std::vector<float>& x) {
  auto at = [&](std::int64_t i, std::int64_t c) -> float& { return x[std::size_t(i * s.cols + c)]; };
  for (std::int64_t c = 0; c < s.cols; ++c) at(0, c) = -kInf;
  if (s.inner > 1) at(1, s.cols / 2) = std::numeric_limits<float>::quiet_NaN();
  if (s.inner > 2) at(2, s.cols - 1) = kInf;
  if (s.inner > 3)
    for (std::int64_t c = 1; c < s.cols; c += 2) at(3, c) = -kInf;
}

std::string describe(const Device& dev, const Shape& s, DType dtype, Op op, bool backward, bool in_place) {
  return dev.label() + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "x" + std::to_string(s.inner) +
         " pads " + std::to_string(s.col_pad) + "/" + std::to_string(s.row_pad) + " " + to_string(dtype) +
         (op == Op::log_softmax ? " log_softmax" : " softmax") + (backward ? " backward" : "") +
         (in_place ? " in place" : "");
}

// One call: returns the plan's kernel for the caller's checks.
Variant run_case(const Device& dev, const Shape& s, DType dtype, Op op, bool backward, bool in_place,
                 bool extreme = false) {
  INFO(describe(dev, s, dtype, op, backward, in_place));
  const std::int64_t n_rows = s.rows * s.inner;
  std::vector<float> x = random_values(std::size_t(n_rows * s.cols), 3.0f, dtype);
  if (extreme) make_extreme(s, x);
  std::vector<float> dy;
  std::vector<double> want;
  const std::vector<double>* scale = nullptr;
  std::vector<double> row_scale;
  if (backward) {
    // y as the forward writes it, dy random.
    const auto y64 = reference::forward(x, n_rows, s.cols, op);
    std::vector<float> y(y64.begin(), y64.end());
    x = reference::round_trip(y, dtype);
    dy = random_values(x.size(), 1.0f, dtype);
    want = reference::backward(x, dy, n_rows, s.cols, op);
    row_scale = reference::backward_scale(x, dy, n_rows, s.cols, op);
    scale = &row_scale;
  } else {
    want = reference::forward(x, n_rows, s.cols, op);
  }
  Tensor tx = layout(s, kGap, dtype);
  place(s, tx, x, dtype);
  Tensor tdy = layout(s, kGap, dtype);
  if (backward) place(s, tdy, dy, dtype);
  Tensor tout = layout(s, kNaNPoison, dtype);

  DeviceCopy dx_buf(dev, tx.bytes), ddy_buf(dev, tdy.bytes), dout_buf(dev, tout.bytes);
  SoftmaxCall c;
  c.op = op;
  c.backward = backward;
  c.dtype = dtype;
  c.rows = s.rows;
  c.cols = s.cols;
  c.inner = s.inner;
  c.x = dx_buf.data();
  c.x_stride = tx.stride;
  c.x_col_stride = tx.col_stride;
  if (backward) {
    c.dy = ddy_buf.data();
    c.dy_stride = tdy.stride;
    c.dy_col_stride = tdy.col_stride;
  }
  const DeviceCopy& written = in_place ? (backward ? ddy_buf : dx_buf) : dout_buf;
  const Tensor& tw = in_place ? (backward ? tdy : tx) : tout;
  c.out = written.data();
  c.out_stride = tw.stride;
  c.out_col_stride = tw.col_stride;
  const Plan plan = plan_for(dev, c);
  if (dev.is_gpu()) {  // packs of rows exactly where every tensor sits on them
    const auto on_packs = [&](int vec) {
      return interleaved_on_packs(dtype, backward, s.rows, s.cols, s.inner, c.x, c.x_stride, c.x_col_stride, c.dy,
                                  c.dy_stride, c.dy_col_stride, c.out, c.out_stride, c.out_col_stride, vec);
    };
    if (plan.kernel.strategy == Strategy::interleaved_ring)  // 16-byte packs of rows
      CHECK((plan.kernel.vec == dtype_vec16(dtype) && on_packs(plan.kernel.vec)));
    else
      CHECK(plan.kernel.vec == (on_packs(kInterleavedPack) ? kInterleavedPack : 1));
  }
  run(dev, c);
  if (dev.is_gpu()) synchronize(dev);
  const auto bytes = written.get<std::uint8_t>();
  const auto got = gather(s, tw, bytes, dtype);
  const auto check = reference::compare(got, want, n_rows, s.cols, reference::default_tolerance(dtype), scale,
                                        reference::default_abs_floor(dtype));
  INFO(variant_name(plan.kernel), ": ", check.first_failure);
  CHECK(check.ok);
  CHECK(gaps_hold(s, tw, bytes, in_place ? kGap : kNaNPoison, dtype));
  if (!in_place) CHECK(dx_buf.get<std::uint8_t>() == tx.bytes);  // the input is only read
  return plan.kernel;
}

// Dim 0 of a [cols, inner] f32 matrix, whose plan needs a workspace: a
// call with interleaved_workspace_size's bytes of the caller's gives the
// same bits as two calls with the per-stream one (whichever blocks finish
// first); 16 bytes fewer are refused, naming the size function, before
// anything is written.
void check_caller_workspace(const Device& dev, std::int64_t cols, std::int64_t inner) {
  INFO("[", cols, ", ", inner, "] over dim 0 with the caller's workspace");
  const std::size_t need = interleaved_workspace_size(dev, DType::f32, 1, cols, inner, false);
  CHECK(need > 0);
  const std::vector<float> xv = random_values(std::size_t(cols * inner), 3.0f, DType::f32);
  const std::vector<float> poison(xv.size(), std::numeric_limits<float>::quiet_NaN());
  DeviceCopy xd(dev, xv), own(dev, poison), again(dev, poison), given(dev, poison),
      ws(dev, std::vector<std::uint8_t>(need, 0xff));
  SoftmaxCall c;
  c.rows = 1;
  c.cols = cols;
  c.inner = inner;
  c.x = xd.data();
  c.x_stride = c.out_stride = cols * inner;
  c.x_col_stride = c.out_col_stride = inner;
  c.out = own.data();
  CHECK(need == std::size_t(plan_for(dev, c).workspace_bytes));
  run(dev, c);
  c.out = again.data();
  run(dev, c);
  c.out = given.data();
  c.workspace = Workspace{ws.data(), need - 16};
  expect_refused([&] { run(dev, c); }, "interleaved_workspace_size");
  c.workspace = Workspace{ws.data(), need};
  run(dev, c);
  synchronize(dev);
  const std::vector<float> first = own.get<float>();
  CHECK(again.get<float>() == first);
  CHECK(given.get<float>() == first);
}

const Shape kShapes[] = {
    {2, 21, 100},         // [2, 21, 10, 10] over dim 1: registers, one element a thread
    {3, 5, 33, 2, 7},     // padded col and row strides, a part tile
    {1, 300, 40},         // 16 elements a thread forward, two passes backward (on GPUs)
    {4, 129, 64, 0, 3},   // several tiles an outer row
    {2, 700, 37},         // two passes
    {1, 2000, 3, 1, 0},   // a narrow tile, many threads a row
    {3, 7, 1, 2, 1},      // inner 1: one row an outer row, its elements apart
    {5, 1, 50},           // one element a row
    {2, 200, 40},         // f32 forward: a register tile of half a line (4 lanes, 56 slots; v84)
    // Past registers on packs (GPUs with asynchronous shared-memory copies:
    // interleaved_smem, else two passes):
    {2, 1000, 56},        // two tiles an outer row, the second partly spare lanes
    {1, 4096, 64},        // 32-byte tiles forward, two passes backward (f32)
    {3, 513, 16, 4, 8},   // padded strides on packs, a tile an outer row
    {1, 3000, 4},         // one lane: 512 threads a row, some with one pack fewer
};

}  // namespace

TEST_CASE("interleaved rows: every device, dtype, direction and layout against float64") {
  on_every_device([](const Device& dev) {
    for (const Shape& s : kShapes)
      for (DType dtype : {DType::f32, DType::bf16, DType::f16})
        for (Op op : {Op::softmax, Op::log_softmax})
          for (bool backward : {false, true}) {
            const Variant v = run_case(dev, s, dtype, op, backward, false);
            CHECK(family_of(v.strategy).work == WorkUnit::inner_tile);
          }
  });
}

TEST_CASE("interleaved rows: tiles over a cluster, in one block and in two passes agree with float64") {
  // Where no tile of half a line fits one block (H100: 4096 rows, over 8
  // or 16 blocks), a cluster splits a line-wide tile; with
  // DUET_CLUSTER=prefer also where one block holds it at one an SM (1000
  // rows over 2, 2053 over 4, odd); without clusters one block holds a
  // narrower tile; without the stash, two passes over chunks any block
  // takes (interleaved_stream), or without that one block a tile.
  bool any_gpu = false;
  on_every_device([&](const Device& dev) {
    if (!dev.is_gpu()) return;
    any_gpu = true;
    const RestorePlanOptions restore;
    const PlanOptions& saved = restore.saved;
    const bool clusters = dev.props().cluster_launch;
    enum Mode { prefer, plain, no_clusters, no_stash, no_stream };
    for (Mode mode : {prefer, plain, no_clusters, no_stash, no_stream}) {
      PlanOptions o = saved;
      o.prefer_clusters = mode == prefer;
      o.allow_clusters = mode != no_clusters;
      o.interleaved_stash = mode >= no_stash ? InterleavedStash::off : InterleavedStash::past_registers;
      o.allow_interleaved_stream = mode != no_stream;
      set_plan_options(o);
      for (const Shape& s : {Shape{1, 4096, 64}, Shape{2, 1000, 56}, Shape{1, 2053, 32, 8, 4}})
        for (DType dtype : {DType::f32, DType::bf16})
          for (bool backward : {false, true}) {
            const Variant v = run_case(dev, s, dtype, Op::softmax, backward, false);
            if (mode == no_stash) CHECK(v.strategy == Strategy::interleaved_stream);
            if (mode == no_stream) CHECK(v.strategy == Strategy::interleaved_rows);
            if (mode == no_clusters) CHECK(v.strategy != Strategy::interleaved_cluster);
            if (mode <= plain && clusters && s.cols == 4096) CHECK(v.strategy == Strategy::interleaved_cluster);
            if (mode == prefer && clusters && dtype == DType::f32 && !backward)
              CHECK(v.strategy == Strategy::interleaved_cluster);
          }
      run_case(dev, {1, 4096, 64}, DType::f32, Op::log_softmax, true, false);
      run_case(dev, {2, 1000, 56}, DType::bf16, Op::log_softmax, false, false, true);  // inf / -inf / NaN rows
      run_case(dev, {2, 1000, 56}, DType::f32, Op::softmax, true, true);               // in place
    }
  });
  if (!any_gpu) MESSAGE("skipping: no GPU here (the GPU families' plans)");
}

TEST_CASE("interleaved rows: interleaved_ring's tiles against float64") {
  // Rows of 64..512 on 16-byte packs (NVIDIA sm_90+): lines of 64..512
  // bytes of rows, spare lanes in a tile and spare places in a thread's
  // share (rows of 129), padded strides on packs, more tiles than blocks
  // (2048 outer rows: each block's tiles alternate the ring's two
  // buffers), in place, inf / -inf / NaN rows. Where the ring is not
  // planned the other families take the same shapes.
  // The float32 backward takes it where forced (DUET_INTERLEAVED_RING=
  // always).
  bool any_gpu = false;
  on_every_device([&](const Device& dev) {
    if (!dev.is_gpu()) return;
    any_gpu = true;
    const DeviceProps& props = dev.props();
    const bool ring = props.vendor == Vendor::nvidia && props.cc_major >= 9;
    const RestorePlanOptions restore;
    PlanOptions forced = restore.saved;
    forced.force_interleaved_ring = true;
    set_plan_options(forced);
    for (const Shape& s : {Shape{3, 100, 64}, Shape{2, 129, 40, 8, 0}, Shape{1, 300, 40}, Shape{2048, 64, 64},
                           Shape{2, 200, 1024, 0, 16}, Shape{2, 512, 64}})
      for (DType dtype : {DType::f32, DType::bf16, DType::f16})
        for (Op op : {Op::softmax, Op::log_softmax})
          for (bool backward : {false, true}) {
            const Variant v = run_case(dev, s, dtype, op, backward, false);
            // Every shape takes the ring but f32 rows of 300 backward (two
            // buffers of both tensors past half an SM at a 128-byte line)
            // and f32 rows of 512 (16-bit rows take a 64-byte line there).
            const bool f32_past = dtype == DType::f32 && ((s.cols == 300 && backward) || s.cols == 512);
            if (ring && !f32_past) CHECK(v.strategy == Strategy::interleaved_ring);
          }
    set_plan_options(restore.saved);
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (bool backward : {false, true}) run_case(dev, {3, 100, 64}, dtype, Op::softmax, backward, true);
      run_case(dev, {3, 100, 64}, dtype, Op::softmax, false, false, true);
      run_case(dev, {3, 100, 64}, dtype, Op::log_softmax, false, false, true);
    }
  });
  if (!any_gpu) MESSAGE("skipping: no GPU here (the GPU families' plans)");
}

TEST_CASE("interleaved rows: register tiles, several a block, against float64") {
  // Grids of one wave, so that each block takes many tiles: on NVIDIA
  // sm_90+ the 16-bit forwards' folds over a few slots alternate the
  // scratch's two halves from one reduction to the next with no barrier
  // between them (rows of 8, 16, 21: 2-3 slots), and trees past
  // kFoldSlotsMax slots (rows of 100 with interleaved_ring off: 15-17
  // slots); spare lanes (inner 100) and padded strides on packs.
  bool any_gpu = false;
  on_every_device([&](const Device& dev) {
    if (!dev.is_gpu()) return;
    any_gpu = true;
    const RestorePlanOptions restore;
    PlanOptions one_wave = restore.saved;
    one_wave.max_waves = 1;
    one_wave.allow_interleaved_ring = false;
    set_plan_options(one_wave);
    for (const Shape& s : {Shape{6000, 21, 64}, Shape{2000, 16, 100}, Shape{4000, 8, 32, 4, 8}, Shape{1500, 100, 64}})
      for (DType dtype : {DType::bf16, DType::f16, DType::f32})
        for (Op op : {Op::softmax, Op::log_softmax})
          for (bool backward : {false, true}) {
            const Variant v = run_case(dev, s, dtype, op, backward, false);
            CHECK(v.strategy == Strategy::interleaved_rows);
            CHECK(v.vpt > 0);
          }
    set_plan_options(restore.saved);
  });
  if (!any_gpu) MESSAGE("skipping: no GPU here (the GPU families' grids)");
}

TEST_CASE("interleaved rows: in place, and inf / -inf / NaN rows") {
  on_every_device([](const Device& dev) {
    for (DType dtype : {DType::f32, DType::bf16})
      for (Op op : {Op::softmax, Op::log_softmax}) {
        for (bool backward : {false, true}) run_case(dev, {2, 37, 70, 1, 2}, dtype, op, backward, true);
        run_case(dev, {2, 37, 70}, dtype, op, false, false, true);
        run_case(dev, {1, 900, 8}, dtype, op, false, false, true);  // shared memory or two passes on GPUs
        for (bool backward : {false, true}) run_case(dev, {2, 600, 8}, dtype, op, backward, true);
      }
  });
}

TEST_CASE("interleaved rows: interleaved_stream's chunks against float64") {
  // Columns of many chunks (any block takes any chunk; a group's last first
  // pass combines its pairs), tiles partly spare, padded strides, one and
  // two lanes, more groups than chunks, in place, inf / -inf / NaN rows.
  // Without the stash, so that shapes of a few MB reach the family.
  bool any_gpu = false;
  on_every_device([&](const Device& dev) {
    if (!dev.is_gpu()) return;
    any_gpu = true;
    const RestorePlanOptions restore;
    PlanOptions o = restore.saved;
    o.interleaved_stash = InterleavedStash::off;
    set_plan_options(o);
    const Shape shapes[] = {
        {1, 20000, 64},       // 40 chunks (f32 forward) of each of two tiles
        {3, 1500, 40, 4, 8},  // padded strides; the second tile 8 of its 32 rows live
        {2, 5000, 4},         // one lane
        {1, 5000, 8},         // two lanes
        {9, 1500, 16},        // more groups than chunks
    };
    for (const Shape& s : shapes)
      for (DType dtype : {DType::f32, DType::bf16, DType::f16})
        for (Op op : {Op::softmax, Op::log_softmax})
          for (bool backward : {false, true})
            CHECK(run_case(dev, s, dtype, op, backward, false).strategy == Strategy::interleaved_stream);
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (bool backward : {false, true})
        CHECK(run_case(dev, {2, 3000, 32, 4, 4}, dtype, Op::softmax, backward, true).strategy ==
              Strategy::interleaved_stream);
      CHECK(run_case(dev, {1, 6000, 16}, dtype, Op::log_softmax, false, false, true).strategy ==
            Strategy::interleaved_stream);
    }
    // The caller's workspace (a group's pairs combine in chunk order).
    check_caller_workspace(dev, 20000, 64);
  });
  if (!any_gpu) MESSAGE("skipping: no GPU here (interleaved_stream runs on GPUs)");
}

TEST_CASE("interleaved rows: interleaved_slabs' slabs against float64") {
  // Columns in many slabs (two levels of bundles), in a few (one bundle)
  // and in one (more tiles than a wave of blocks: no fold at all), tiles
  // partly spare and of up to 256 lanes, padded strides, one and two
  // lanes, in place, inf / -inf / NaN rows; forced, so that shapes of a
  // few MB reach the family (the planner takes it where a tile's column
  // outgrows the L2).
  bool any_gpu = false;
  on_every_device([&](const Device& dev) {
    if (!dev.is_gpu()) return;
    any_gpu = true;
    const RestorePlanOptions restore;
    PlanOptions o = restore.saved;
    o.interleaved_stash = InterleavedStash::off;
    o.force_interleaved_slabs = true;
    set_plan_options(o);
    struct Case {
      Shape shape;
      std::int64_t bundles;  // f32 forward's on a GPU of 132 SMs or more (0: not checked)
    };
    const Case cases[] = {
        {{1, 20000, 64}, 10},        // 16 lanes: 157 slabs of a step of 128 positions, the last short
        {{1, 3000, 1032}, 0},        // two tiles of 256 lanes, the second 2 of them live
        {{3, 1500, 40, 4, 8}, 1},    // padded strides; 16 lanes, 24 of 64 rows spare
        {{2, 5000, 4}, 1},           // one lane: 512 slots
        {{1, 5000, 8}, 1},           // two lanes
        {{300, 1100, 16}, 1},        // more tiles than a wave: one slab each
    };
    for (const Case& k : cases)
      for (DType dtype : {DType::f32, DType::bf16, DType::f16})
        for (Op op : {Op::softmax, Op::log_softmax})
          for (bool backward : {false, true}) {
            if (k.shape.rows == 300 && (dtype == DType::f16 || op == Op::log_softmax)) continue;  // 5M elements
            const Variant v = run_case(dev, k.shape, dtype, op, backward, false);
            CHECK(v.strategy == Strategy::interleaved_slabs);
          }
    // The plans the cases above meant: slabs and bundles (f32 forward).
    const auto plan_of = [&](const Shape& s) {
      SoftmaxCall c;
      c.rows = s.rows;
      c.cols = s.cols;
      c.inner = s.inner;
      Buffer x(dev, std::size_t(s.rows * s.cols * (s.inner + s.col_pad) + s.rows * s.row_pad) * 4), y(dev, x.size());
      c.x = x.data();
      c.out = y.data();
      c.x_col_stride = c.out_col_stride = s.inner + s.col_pad;
      c.x_stride = c.out_stride = (s.cols - 1) * c.x_col_stride + s.inner + s.row_pad;
      return plan_for(dev, c);
    };
    if (dev.props().sm_count >= 132)
      for (const Case& k : cases) {
        if (k.bundles == 0) continue;
        INFO(k.shape.rows, "x", k.shape.cols, "x", k.shape.inner);
        const Plan p = plan_of(k.shape);
        CHECK(p.kernel.strategy == Strategy::interleaved_slabs);
        CHECK(interleaved_slab_bundles(p.chunks_per_row) == k.bundles);
        if (k.shape.rows == 300) CHECK(p.chunks_per_row == 1);
      }
    // The slabs a tile follow the outer rows: the columns of the 300-row
    // case, now of one outer row, take slabs enough to fill the device,
    // not the cached 300-row plan's one a tile.
    const Plan one_row = plan_of({1, 1100, 16});
    CHECK(one_row.kernel.strategy == Strategy::interleaved_slabs);
    CHECK(one_row.chunks_per_row > 1);
    CHECK(one_row.chunks_per_row > plan_of({300, 1100, 16}).chunks_per_row);
    for (bool backward : {false, true})
      CHECK(run_case(dev, {1, 1100, 16}, DType::f32, Op::softmax, backward, false).strategy ==
            Strategy::interleaved_slabs);
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (bool backward : {false, true})
        CHECK(run_case(dev, {2, 3000, 32, 4, 4}, dtype, Op::softmax, backward, true).strategy ==
              Strategy::interleaved_slabs);
      CHECK(run_case(dev, {1, 6000, 16}, dtype, Op::log_softmax, false, false, true).strategy ==
            Strategy::interleaved_slabs);
      CHECK(run_case(dev, {1, 3000, 1024}, dtype, Op::softmax, false, false, true).strategy ==
            Strategy::interleaved_slabs);
    }
    // The caller's workspace (the pairs fold in slab and bundle order,
    // whichever block finishes last): 250 slabs planned at 20 positions,
    // 625 steps of 8 dealt to them in turn, 16 bundles on 132 SMs.
    check_caller_workspace(dev, 5000, 1024);
  });
  if (!any_gpu) MESSAGE("skipping: no GPU here (interleaved_slabs runs on GPUs)");
}

TEST_CASE("interleaved rows: the planner picks registers, shared memory or two passes by the row's length") {
  // A live GPU's plans (property files' plans: test_planner.cpp).
  bool any_gpu = false;
  on_every_device([&](const Device& dev) {
    if (!dev.is_gpu()) return;
    any_gpu = true;
    const DeviceProps& props = dev.props();
    const bool async_copies = props.vendor == Vendor::nvidia && props.cc_major >= 8;
    const RestorePlanOptions restore;
    const PlanOptions& saved = restore.saved;
    // f32 on packs of 4 rows: at least 8 lanes, up to 64 slots; 16 floats
    // a thread forward (4 packs), 8 backward (2 packs of each tensor).
    // Past that, the tile in shared memory where the device copies there
    // asynchronously and it fits (a 1000000-element row does not), else
    // two passes over chunks any block takes (interleaved_stream), or
    // without that one block a tile.
    for (auto [stash, stream] : {std::pair{true, true}, std::pair{false, true}, std::pair{false, false}}) {
      PlanOptions o = saved;
      o.interleaved_stash = stash ? InterleavedStash::past_registers : InterleavedStash::off;
      o.allow_interleaved_stream = stream;
      o.allow_interleaved_slabs = false;  // its own case below
      o.allow_interleaved_ring = false;   // its own case
      set_plan_options(o);
      for (auto [cols, backward, vpt] :
           {std::tuple{21, false, 4}, std::tuple{256, false, 4}, std::tuple{257, false, 0}, std::tuple{60, true, 2},
            std::tuple{129, true, 0}, std::tuple{513, false, 0}, std::tuple{1000000, false, 0}}) {
        INFO(cols, backward ? " backward" : " forward", stash ? "" : " (no stash)", stream ? "" : " (no stream)");
        SoftmaxCall c;
        c.rows = cols > 10000 ? 1 : 8;
        c.inner = cols > 10000 ? 8 : 4096;
        Buffer x(dev, std::size_t(c.rows * c.inner) * std::size_t(cols) * 4), y(dev, x.size()), dy(dev, x.size());
        c.cols = cols;
        c.backward = backward;
        c.x = x.data();
        c.out = y.data();
        c.dy = backward ? dy.data() : nullptr;
        c.x_stride = c.out_stride = c.dy_stride = cols * c.inner;
        c.x_col_stride = c.out_col_stride = c.dy_col_stride = c.inner;
        const Plan p = plan_for(dev, c);
        const bool held = vpt == 0 && stash && async_copies && cols < 10000;
        const bool streamed = vpt == 0 && !held && stream;
        CHECK(p.kernel.strategy == (held       ? Strategy::interleaved_smem
                                    : streamed ? Strategy::interleaved_stream
                                               : Strategy::interleaved_rows));
        CHECK(p.kernel.vpt == (streamed ? interleaved_stream_vpt(DType::f32, backward) : vpt));
        CHECK(p.kernel.vec == 4);
        const int lanes = p.rows_per_block / 4;
        CHECK(lanes >= (vpt > 0 ? 8 : std::min<std::int64_t>(2, c.inner / 4)));
        CHECK(lanes <= 32);
        if (streamed) {
          // A line of rows (or the outer row's, fewer), its column in
          // chunks of slots x packs a thread.
          CHECK(lanes == std::min<std::int64_t>(8, c.inner / 4));
          const std::int64_t chunk = p.launch.threads_per_block / lanes * p.kernel.vpt;
          CHECK(p.chunks_per_row == (cols + chunk - 1) / chunk);
          CHECK(p.workspace_bytes > 0);
        }
        CHECK(p.inner_tiles == c.inner / p.rows_per_block);
        CHECK(p.launch.threads_per_block <= max_threads_per_block(p.kernel));
        if (vpt > 0) CHECK(std::int64_t(p.launch.threads_per_block / lanes) * vpt >= cols);
        if (held) {
          // 8 lanes (a 128-byte line of rows), every thread's packs of each
          // tensor held, within the opt-in.
          CHECK(lanes == 8);
          const std::int64_t slots = p.launch.threads_per_block / lanes;
          CHECK(p.smem_vecs == (cols + slots - 1) / slots);
          CHECK(p.launch.dynamic_smem_bytes == std::int64_t(p.smem_vecs) * p.launch.threads_per_block * 16 *
                                                   (backward ? 2 : 1));
          CHECK(p.launch.dynamic_smem_bytes + p.attributes.static_smem_bytes <= props.smem_per_block_optin);
        }
      }
    }
  });
  if (!any_gpu) MESSAGE("skipping: no GPU here (a live device's plans)");
}

TEST_CASE("interleaved rows: workspace sizes") {
  // The host needs none; bad shapes and dtypes are refused; an empty shape needs none.
  const Device host(BackendKind::host, 0);
  CHECK(interleaved_workspace_size(host, DType::f32, 1, 65536, 1024, false) == 0);
  CHECK(interleaved_workspace_size(host, DType::bf16, 0, 65536, 1024, true) == 0);
  expect_refused([&] { (void)interleaved_workspace_size(host, DType::f32, 1, -1, 8, false); }, "inner");
  expect_refused([&] { (void)interleaved_workspace_size(host, static_cast<DType>(9), 1, 8, 8, false); }, "dtype");
  std::size_t bytes = 1;
  CHECK(duet_softmax_interleaved_workspace_size(duet_device_t{DUET_BACKEND_HOST, 0}, DUET_F32, 0, 1, 65536, 1024,
                                                &bytes) == DUET_SUCCESS);
  CHECK(bytes == 0);
  CHECK(duet_softmax_interleaved_workspace_size(duet_device_t{DUET_BACKEND_HOST, 0}, DUET_F32, 0, 1, 8, 8, nullptr) ==
        DUET_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("interleaved rows: bad layouts are refused before anything is written") {
  const Device host(BackendKind::host, 0);
  std::vector<float> x(4096, 1.0f), y(4096, -7.0f);
  SoftmaxCall c;
  c.rows = 2;
  c.cols = 8;
  c.inner = 16;
  c.x = x.data();
  c.out = y.data();
  c.x_stride = c.out_stride = 8 * 16;
  c.x_col_stride = c.out_col_stride = 16;
  const auto refused = [&](SoftmaxCall bad, const std::string& words) {
    expect_refused([&] { run(host, bad); }, words.c_str());
    for (float v : y) REQUIRE(v == -7.0f);
  };
  SoftmaxCall bad = c;
  bad.out_col_stride = 15;
  refused(bad, "y col stride 15 is smaller than inner 16");
  bad = c;
  bad.x_stride = 8 * 16 - 1;
  refused(bad, "x stride 127 is smaller than an outer row's span");
  bad = c;
  bad.out = y.data() + 1;
  bad.x = y.data();
  refused(bad, "overlap");
  bad = c;
  bad.inner = -1;
  refused(bad, "inner must be >= 0");
  bad = c;
  bad.x = reinterpret_cast<const char*>(x.data()) + 1;
  refused(bad, "not aligned");
  bad = c;
  bad.inner = 0;  // an empty call
  run(host, bad);
  for (float v : y) REQUIRE(v == -7.0f);
  // In place, x and y the same elements: allowed.
  SoftmaxCall in_place = c;
  in_place.x = y.data();
  run(host, in_place);
  CHECK(y[0] == doctest::Approx(1.0 / 8));
}

TEST_CASE("interleaved rows through the C ABI") {
  duet_device_t host{DUET_BACKEND_HOST, 0};
  // [2, 3, 4] over dim 1.
  std::vector<float> x(24), y(24, 0.0f), dx(24, 0.0f);
  for (int k = 0; k < 24; ++k) x[std::size_t(k)] = float(k % 5) - 2.0f;
  REQUIRE(duet_softmax_interleaved(host, DUET_F32, 1, 2, 3, 4, x.data(), 12, 4, y.data(), 12, 4, nullptr) ==
          DUET_SUCCESS);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4; ++i) {
      double lse = 0;
      for (int c = 0; c < 3; ++c) lse += std::exp(double(x[std::size_t(r * 12 + c * 4 + i)]));
      lse = std::log(lse);
      for (int c = 0; c < 3; ++c)
        CHECK(y[std::size_t(r * 12 + c * 4 + i)] == doctest::Approx(x[std::size_t(r * 12 + c * 4 + i)] - lse));
    }
  std::vector<float> dy(24, 1.0f);
  REQUIRE(duet_softmax_interleaved_backward(host, DUET_F32, 1, 2, 3, 4, y.data(), 12, 4, dy.data(), 12, 4, dx.data(),
                                            12, 4, nullptr) == DUET_SUCCESS);
  for (int k = 0; k < 24; ++k) CHECK(dx[std::size_t(k)] == doctest::Approx(1.0 - 3.0 * std::exp(y[std::size_t(k)])));
  CHECK(duet_softmax_interleaved(host, DUET_F32, 2, 2, 3, 4, x.data(), 12, 4, y.data(), 12, 4, nullptr) ==
        DUET_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(duet_last_error()).find("log must be 0") != std::string::npos);
}
