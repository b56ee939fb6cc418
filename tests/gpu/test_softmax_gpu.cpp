// Every strategy and its boundaries, all dtypes, forward and backward,
// strided, in-place and misaligned, against the double reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <thread>

#include <atomic>

#include "duet/config.hpp"
#include "duet/error.hpp"
#include "duet/float16.hpp"
#include "duet/occupancy.hpp"
#include "expect_refused.hpp"
#include "gpu_fixture.hpp"

using namespace duet;
using duet::testing::Case;
using duet::testing::run_case;

namespace {

// Row lengths at and around every strategy switch: group sizes (1..32
// threads, 1..8 vectors), block_row's register and shared-memory limits,
// cluster_row's 2 to 16 blocks (even and uneven slices), cluster_row_smem
// (f32 262145 and past, Hopper), and split_stream,
// with primes and powers of two.
std::vector<std::int64_t> boundary_cols() {
  // 27, 55 and 95: flat_rows' longest rows (f32, 16-bit backward, 16-bit
  // forward), 29, 57 and 97 past them; 57: the first 16-bit forward row
  // worked in chunks.
  return {1, 2, 3, 4, 5, 7, 8, 9, 15, 19, 27, 29, 31, 32,
          33, 39, 55, 57, 61, 64, 95, 97, 127, 128, 129, 255, 256, 257, 509, 512,
          1000, 1023, 1024, 1025, 2047, 2048, 2049, 4093, 4096, 4097, 8191, 8192,
          8193, 16383, 16384, 16385, 24576, 32768, 32771, 40000, 65536, 65537, 98304, 100003,
          131072, 131076, 262144, 262145, 262148, 524288, 1048576};
}

std::int64_t rows_for(std::int64_t cols) {
  // Enough rows to cover several waves of the persistent grid at small N,
  // bounded so that the CPU reference stays quick.
  return std::clamp<std::int64_t>((std::int64_t(1) << 21) / cols, 1, 3000);
}

void expect_ok(const Case& c, const duet::testing::Outcome& o) {
  INFO(c.name(), " via ", o.variant, ": ", o.check.first_failure, " (worst row error ", o.check.worst, ")");
  CHECK(o.check.ok);
}

// Eight random rows of `cols` with -inf, inf and NaN placed so that row 1
// is all -inf, row 4 half -inf, rows 6 and 7 start with a third of -inf
// (a block's or cluster's slice that adds nothing; row 7's with a NaN
// after it), row 2 ends with inf and row 3 starts with NaN.
std::vector<float> special_rows(std::int64_t cols) {
  auto x = duet::testing::random_values(static_cast<std::size_t>(8 * cols));
  const float inf = std::numeric_limits<float>::infinity();
  x[0 * cols + cols / 2] = -inf;
  for (std::int64_t i = 0; i < cols; ++i) x[1 * cols + i] = -inf;
  x[2 * cols + cols - 1] = inf;
  x[3 * cols + 0] = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t i = 0; i < cols; i += 2) x[4 * cols + i] = -inf;
  for (std::int64_t i = 0; i < cols / 3; ++i) x[6 * cols + i] = x[7 * cols + i] = -inf;
  x[7 * cols + cols / 6] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

// softmax and log_softmax of the given rows x cols input (f32).
void expect_ok_both_ops(const Device& dev, std::int64_t rows, std::int64_t cols, const std::vector<float>& x) {
  for (Op op : {Op::softmax, Op::log_softmax}) {
    Case c;
    c.op = op;
    c.rows = rows;
    c.cols = cols;
    expect_ok(c, duet::testing::run_case(dev, c, &x));
  }
}

}  // namespace

TEST_CASE("every strategy boundary, dtype and direction matches the double reference") {
  const Device dev = duet::testing::first_gpu();
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (bool bwd : {false, true})
      for (Op op : {Op::softmax, Op::log_softmax})
        for (std::int64_t cols : boundary_cols()) {
          Case c;
          c.op = op;
          c.backward = bwd;
          c.dtype = dt;
          c.cols = cols;
          c.rows = rows_for(cols);
          try {
            expect_ok(c, run_case(dev, c));
          } catch (const std::exception& e) {
            FAIL_CHECK(c.name(), " threw: ", e.what());
          }
        }
}

TEST_CASE("many more rows than the grid holds") {
  const Device dev = duet::testing::first_gpu();
  // 300000: split_stream backward; forward cluster_row_smem on Hopper.
  for (std::int64_t cols : {1, 32, 100, 1024, 5000, 40000, 65536, 300000})
    for (bool bwd : {false, true}) {
      if (bwd && cols != 300000) continue;
      Case c;
      c.cols = cols;
      c.backward = bwd;
      c.rows = std::max<std::int64_t>(200000 / cols, 1) * 50 + 7;
      if (c.rows * cols > (std::int64_t(1) << 24)) c.rows = (std::int64_t(1) << 24) / cols + 3;
      expect_ok(c, run_case(dev, c));
    }
}

TEST_CASE("few rows: spread over clusters where the device launches them, the float64 reference's result") {
  const Device dev = duet::testing::first_gpu();
  // Rows one block_row holds once an SM (f32 32768) and cluster rows of 8
  // blocks (f32 65536, bf16 131072), at row counts that are lone (1, 2),
  // few (8, 66) and not (67), with uneven and odd lengths beside them.
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (std::int64_t cols : {32768, 32771, 65536, 131072})
      for (std::int64_t rows : {1, 2, 8, 66, 67})
        for (bool bwd : {false, true}) {
          Case c;
          c.dtype = dt;
          c.rows = rows;
          c.cols = cols;
          c.backward = bwd;
          c.op = rows % 2 ? Op::softmax : Op::log_softmax;
          const duet::testing::Outcome o = run_case(dev, c);
          expect_ok(c, o);
          if (dev.props().cluster_launch && !bwd && dt == DType::f32 && cols == 32768) {
            INFO(c.name(), " via ", o.variant);
            CHECK((o.variant.rfind("cluster_row<", 0) == 0) == few_rows(dev.props(), rows));
          }
        }
}

TEST_CASE("strided, in-place and misaligned calls") {
  const Device dev = duet::testing::first_gpu();
  for (DType dt : {DType::f32, DType::bf16})
    for (std::int64_t cols : {7, 64, 1000, 4096, 40000, 300000}) {
      const std::int64_t rows = std::clamp<std::int64_t>((1 << 20) / cols, 2, 500);
      Case strided;
      strided.dtype = dt;
      strided.cols = cols;
      strided.rows = rows;
      strided.in_stride = cols + 8;
      strided.out_stride = cols + 24;
      expect_ok(strided, run_case(dev, strided));
      Case odd_stride = strided;
      odd_stride.in_stride = cols + 3;  // rows at offsets the output's do not share: scalar path
      expect_ok(odd_stride, run_case(dev, odd_stride));
      Case in_place = strided;
      in_place.in_place = true;
      expect_ok(in_place, run_case(dev, in_place));
      Case misaligned = strided;
      misaligned.misalign = 1;
      expect_ok(misaligned, run_case(dev, misaligned));
      Case bwd_in_place = strided;
      bwd_in_place.backward = true;
      bwd_in_place.op = Op::log_softmax;
      expect_ok(bwd_in_place, run_case(dev, bwd_in_place));
    }
}

// Which path a layout takes, and its results: rows off the pack grid whose
// tensors agree in their offset within a pack run the vector kernels with
// edges, in every family; tensors that disagree run the scalar kernels.
TEST_CASE("rows off the pack grid: the vector kernels with edges, every family, both directions") {
  const Device dev = duet::testing::first_gpu();
  struct Layout {
    const char* name;
    std::int64_t extra_in, extra_out, misalign;  // strides cols + extra; pointers shifted
    bool in_place;
    const char* path;  // ",edges", ",vec1," or "" (vector, no edges)
  };
  const Layout layouts[] = {
      {"contiguous", 0, 0, 0, false, nullptr},        // edges where cols is off the grid
      {"shifted one element", 0, 0, 1, false, ",edges"},
      {"odd strides, congruent", 3, 3, 0, false, ",edges"},
      {"odd stride in place", 5, 5, 3, true, ",edges"},
      {"back to back in place", 0, 0, 3, true, ",edges"},
      {"strides differing by a pack", 1, 9, 0, false, ",edges"},
      {"strides not congruent", 3, 0, 0, false, ",vec1,"},
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (bool bwd : {false, true})
      // flat_rows (short, back to back), group_rows, block_row,
      // block_row_smem (bf16 backward), cluster_row (sm_90 forward),
      // split_stream
      for (std::int64_t cols : {3, 13, 77, 333, 4097, 12289, 40001, 65537, 300001})
        for (const Layout& l : layouts) {
          Case c;
          c.dtype = dt;
          c.backward = bwd;
          c.op = cols % 2 ? Op::softmax : Op::log_softmax;
          c.cols = cols;
          c.rows = std::clamp<std::int64_t>((std::int64_t(1) << 20) / cols, 3, 700);
          c.in_stride = cols + l.extra_in;
          c.out_stride = cols + l.extra_out;
          c.misalign = l.misalign;
          c.in_place = l.in_place;
          const auto o = run_case(dev, c);
          INFO(c.name(), " (", l.name, ") via ", o.variant);
          expect_ok(c, o);
          const bool off_grid = cols % dtype_vec16(dt) != 0;
          if (l.path == nullptr)
            CHECK((o.variant.find(",edges") != std::string::npos) == off_grid);
          else if (std::string(l.path) == ",vec1,")
            CHECK(o.variant.find(",vec1,") != std::string::npos);
          else
            CHECK(o.variant.find(l.path) != std::string::npos);
        }
}

TEST_CASE("flat_rows: every row length it takes") {
  // The kernel has an instance for each row length up to
  // flat_rows_unrolled_cols and, where it takes longer rows, one for each
  // remainder of the chunks of 8 past it (kernels/families/flat_rows.cuh):
  // each length is run, with the tile's first row off the pack (misaligned
  // by 0 and 3 elements) and a last tile that is partly empty, against the
  // float64 reference; the row one past the longest goes to another family.
  // Every length's tiles fit 64 KiB, so every device plans it.
  const Device dev = duet::testing::first_gpu();
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (bool bwd : {false, true}) {
      const int longest = flat_rows_max_cols(dtype_vec16(dt), bwd);
      for (Op op : {Op::softmax, Op::log_softmax})
        for (std::int64_t misalign : {0, 3})
          for (std::int64_t cols = 1; cols <= longest + 1; ++cols) {
            Case c;
            c.dtype = dt;
            c.backward = bwd;
            c.op = op;
            c.cols = cols;
            c.rows = 300;  // two full tiles of 128 and one of 44
            c.misalign = misalign;
            const auto o = run_case(dev, c);
            const bool off_grid = cols % dtype_vec16(dt) != 0 || misalign != 0;
            INFO(c.name(), " misaligned by ", misalign, " via ", o.variant);
            expect_ok(c, o);
            CHECK((o.variant.find("flat_rows") != std::string::npos) == (off_grid && cols <= longest));
          }
      // Many more rows than a wave of blocks holds: each block works its
      // tiles in turn, the next one's copies landing in the other tile, and
      // the tensor's last tile is partly empty.
      for (std::int64_t cols : {std::int64_t(9), std::int64_t(flat_rows_unrolled_cols(dtype_vec16(dt))),
                                std::int64_t(longest)}) {
        Case c;
        c.dtype = dt;
        c.backward = bwd;
        c.op = cols % 2 ? Op::softmax : Op::log_softmax;
        c.cols = cols;
        c.rows = 400001;
        c.misalign = 1;
        const auto o = run_case(dev, c);
        INFO(c.name(), " via ", o.variant);
        expect_ok(c, o);
        CHECK(o.variant.find("flat_rows") != std::string::npos);
      }
    }
}

TEST_CASE("inf, -inf and NaN propagate as in torch") {
  const Device dev = duet::testing::first_gpu();
  // Odd lengths too: their first and last elements (row 3's NaN, row 2's
  // +inf) sit in edge packs.
  for (std::int64_t cols : {5, 200, 3000, 3001, 40000, 40001, 70000, 70001, 131072, 262144, 300000, 300001}) {
    const std::int64_t rows = 8;
    auto x = duet::testing::random_values(static_cast<std::size_t>(rows * cols));
    const float inf = std::numeric_limits<float>::infinity();
    x[0 * cols + cols / 2] = -inf;                                     // row 0: one -inf -> 0 there
    for (std::int64_t i = 0; i < cols; ++i) x[1 * cols + i] = -inf;    // row 1: all -inf -> NaN
    x[2 * cols + cols - 1] = inf;                                      // row 2: +inf -> NaN
    x[3 * cols + 0] = std::numeric_limits<float>::quiet_NaN();         // row 3: NaN -> NaN
    for (std::int64_t i = 0; i < cols; i += 2) x[4 * cols + i] = -inf; // row 4: half -inf
    // Rows 6, 7: the first third all -inf (a whole cluster block's slice at
    // the wide rows), then one NaN in it: the slice adds nothing, or NaN.
    for (std::int64_t i = 0; i < cols / 3; ++i) x[6 * cols + i] = x[7 * cols + i] = -inf;
    x[7 * cols + cols / 6] = std::numeric_limits<float>::quiet_NaN();
    expect_ok_both_ops(dev, rows, cols, x);
  }
}

// cluster_row_smem (sm_90+): rows past a cluster's registers, each block's
// slice in its registers and shared memory. Lengths from a cluster of 4 to
// the capacity edge of 16 (and one pack past it, split_stream), odd
// lengths and shifted pointers (edges), slices with every value -inf or a
// NaN, more rows than the clusters that fit, and clusters forced to 16;
// 16-bit rows with clusters preferred (the planner's default gives them
// split_stream).
TEST_CASE("cluster_row_smem: rows on chip across a cluster's shared memory, to its capacity edge") {
  const Device dev = duet::testing::first_gpu();
  const duet::testing::RestorePlanOptions restore;
  const PlanOptions before = restore.saved;
  const bool clusters = dev.props().cluster_launch;
  // The most floats 16 blocks hold: 512 threads x (8 + the vectors the
  // opt-in leaves) x 4, from the kernel's own static shared memory.
  const int f32_entry = find_variant(Variant{Strategy::cluster_row_smem, DType::f32, false, 4, 0, kClusterRowVpt, 1, false});
  REQUIRE(f32_entry >= 0);
  const std::int64_t static_smem = live_kernel_attributes(dev, f32_entry, false).static_smem_bytes;
  const std::int64_t most_vecs = (dev.props().smem_per_block_optin - static_smem) / (kClusterRowSmemThreads * 16);
  const std::int64_t edge_vectors = 16 * kClusterRowSmemThreads * (kClusterRowVpt + most_vecs);
  struct Row {
    DType dt;
    std::int64_t cols;
    std::int64_t misalign;
    bool on_chip;  // planned as cluster_row_smem where the device has clusters
    bool backward = false;
  };
  // Backward keeps y and dy: half the vectors a block.
  const std::int64_t edge_vectors_bwd = 16 * kClusterRowSmemThreads * (cluster_row_smem_vpt(true) + most_vecs / 2);
  const std::vector<Row> rows_tried = {
      {DType::f32, 262148, 0, true},                    // 4 blocks
      {DType::f32, 524288, 0, true},                    // 8
      {DType::f32, 1 << 20, 0, true},                   // 16
      {DType::f32, (1 << 20) + 1, 0, true},             // edges
      {DType::f32, 700001, 3, true},                    // shifted, uneven slices
      {DType::f32, edge_vectors * 4, 0, true},          // the capacity edge
      {DType::f32, edge_vectors * 4 + 4, 0, false},     // a pack past it
      {DType::bf16, 1 << 21, 0, true},                  // 16-bit rows of 2M
      {DType::f16, (1 << 21) - 5, 1, true},
      {DType::bf16, edge_vectors * 8, 0, true},
      {DType::f32, 65536, 0, true, true},                       // backward: past one block_row_smem
      {DType::f32, 300001, 1, true, true},                      // edges, shifted
      {DType::f32, edge_vectors_bwd * 4, 0, true, true},        // the capacity edge
      {DType::f32, edge_vectors_bwd * 4 + 4, 0, false, true},   // a pack past it
      {DType::bf16, (1 << 20) + 3, 0, true, true},
  };
  for (const Row& r : rows_tried)
    for (int forced : {0, 16}) {
      PlanOptions o = before;
      o.min_cluster_blocks = forced;
      o.prefer_clusters = dtype_size(r.dt) == 2;  // 16-bit rows take it only then
      set_plan_options(o);
      Case c;
      c.dtype = r.dt;
      c.op = r.cols % 2 ? Op::log_softmax : Op::softmax;
      c.cols = r.cols;
      c.misalign = r.misalign;
      c.backward = r.backward;
      // More rows than the clusters the device holds at once (one block an
      // SM: up to 16 clusters of 8 on the H100's 132 SMs, 8 of 16), within a
      // reference the CPU computes quickly.
      c.rows = r.cols > (1 << 20) ? 19 : 37;
      if (forced) c.rows = 11;
      const auto o_run = run_case(dev, c);
      INFO(c.name(), " clusters of at least ", forced, " via ", o_run.variant);
      expect_ok(c, o_run);
      if (clusters)
        CHECK((o_run.variant.rfind("cluster_row_smem", 0) == 0) == r.on_chip);
    }
  set_plan_options(before);
  // Slices that add nothing or NaN (rows 6 and 7 of "inf, -inf and NaN"),
  // at 8 and 16 blocks.
  for (std::int64_t cols : {std::int64_t(524288), std::int64_t(1 << 20), std::int64_t((1 << 20) + 3)}) {
    expect_ok_both_ops(dev, 8, cols, special_rows(cols));
  }
}

// grid_row (NVIDIA sm_80+): rows over many blocks of one grid, their pairs
// through global memory. f32 rows past a cluster on chip (4M, 2M with
// edges, backward 1M and 2M, in place), and rows forced onto it
// (DUET_STRATEGY=grid_row, DUET_GRID_BLOCKS): few rows spread over the
// SMs, 16-bit rows, odd and shifted rows, uneven block counts with many
// more rows than the groups that fit at once, slices that add nothing or
// NaN.
TEST_CASE("grid_row: rows over many blocks of one grid") {
  const Device dev = duet::testing::first_gpu();
  const duet::testing::RestorePlanOptions restore;
  const PlanOptions before = restore.saved;
  const bool has_it = dev.props().vendor == Vendor::nvidia && dev.props().cc_major >= 8;
  struct Row {
    DType dt;
    std::int64_t rows, cols, misalign;
    bool backward, in_place;
    int forced_blocks;  // 0: the planner's choice, else DUET_STRATEGY=grid_row at this many blocks
  };
  const std::vector<Row> tried = {
      {DType::f32, 3, 1 << 22, 0, false, false, 0},
      {DType::f32, 5, (1 << 21) + 3, 1, false, false, 0},
      {DType::f32, 4, 1 << 20, 0, true, false, 0},
      {DType::f32, 2, (1 << 21) - 1, 2, true, true, 0},
      {DType::f32, 2, 1 << 22, 0, false, true, 0},
      {DType::f32, 1, 32768, 0, false, false, 32},
      {DType::f32, 1, 262144, 0, false, false, 132},
      {DType::bf16, 8, 131072, 0, false, false, 16},
      {DType::f16, 3, 100003, 1, false, false, 40},
      {DType::bf16, 5, 65537, 0, true, false, 20},
      {DType::bf16, 2, (1 << 21) + 3, 1, false, false, 1},
      {DType::f32, 301, 40000, 0, false, false, 7},
      {DType::bf16, 203, 4099, 3, true, false, 3},
      {DType::f32, 97, 20000, 1, false, true, 5},
      {DType::f16, 40, 33333, 0, true, false, 11},
  };
  for (const Row& r : tried) {
    PlanOptions o = before;
    o.force_grid_row = r.forced_blocks > 0;
    o.grid_row_blocks = r.forced_blocks;
    set_plan_options(o);
    Case c;
    c.dtype = r.dt;
    c.op = r.cols % 2 ? Op::log_softmax : Op::softmax;
    c.rows = r.rows;
    c.cols = r.cols;
    c.misalign = r.misalign;
    c.backward = r.backward;
    c.in_place = r.in_place;
    const auto o_run = run_case(dev, c);
    INFO(c.name(), " blocks forced ", r.forced_blocks, " via ", o_run.variant);
    expect_ok(c, o_run);
    if (has_it) CHECK(o_run.variant.rfind("grid_row", 0) == 0);
  }
  // Slices that add nothing or NaN (rows 1, 4, 6 and 7), over at least 64
  // blocks a row: rows of 262144 floats, about 4096 a block.
  PlanOptions o = before;
  o.force_grid_row = true;
  o.grid_row_blocks = 64;
  set_plan_options(o);
  for (std::int64_t cols : {std::int64_t(262144), std::int64_t(262147)}) {
    expect_ok_both_ops(dev, 8, cols, special_rows(cols));
  }
}

TEST_CASE("large magnitudes keep their precision") {
  // exp(x - m) must subtract before scaling: a fused x*log2e - m*log2e rounds
  // at the magnitude of m (0.5% error at 1e5, garbage at 1e30).
  const Device dev = duet::testing::first_gpu();
  for (std::int64_t cols : {3, 100, 3000, 70000, 300000}) {
    const std::int64_t rows = 4;
    auto x = duet::testing::random_values(static_cast<std::size_t>(rows * cols));
    for (std::int64_t i = 0; i < cols; ++i) {
      x[static_cast<std::size_t>(0 * cols + i)] += 1e5f;
      x[static_cast<std::size_t>(1 * cols + i)] -= 3e4f;
      x[static_cast<std::size_t>(2 * cols + i)] = i % 2 ? 1e30f : -1e30f;
      x[static_cast<std::size_t>(3 * cols + i)] = x[static_cast<std::size_t>(3 * cols + i)] * 1e3f;
    }
    expect_ok_both_ops(dev, rows, cols, x);
  }
}

TEST_CASE("rows past 2^31 elements in total use 64-bit offsets") {
  const Device dev = duet::testing::first_gpu();
  // 2^31 + 2^20 bf16 elements (4.3 GB); a few rows of the end are checked.
  const std::int64_t cols = 1 << 20, rows = 2049;
  Buffer x(dev, std::size_t(rows * cols) * 2), y(dev, std::size_t(rows * cols) * 2);
  x.fill(0);  // bf16 zeros: every output is exactly 1/cols
  y.fill(0xff);
  softmax(dev, DType::bf16, rows, cols, x.data(), cols, y.data(), cols);
  synchronize(dev);
  std::vector<std::uint8_t> tail(std::size_t(cols) * 2);
  for (std::int64_t r : {std::int64_t(0), rows - 1}) {
    y.download(tail.data(), tail.size(), std::size_t(r * cols) * 2);
    const auto v = reference::decode(tail.data(), std::size_t(cols), DType::bf16);
    std::size_t wrong = 0;
    for (float f : v) wrong += f != bf16_to_float(float_to_bf16(1.0f / cols));
    INFO("row ", r);
    CHECK(wrong == 0);
  }
}

TEST_CASE("exact occupancy model equals the vendor's for every shipped kernel") {
  const Device dev = duet::testing::first_gpu();
  const DeviceProps& p = dev.props();
  std::ofstream table;
  if (const char* path = std::getenv("DUET_OCCUPANCY_TABLE")) table.open(path);
  if (table) table << "variant;threads;dynamic_smem;regs;static_smem;exact;vendor;tutorial;limiter\n";
  int disagreements = 0;
  for (int v = 0; v < kVariantCount; ++v) {
    const Variant& var = kCatalogue[static_cast<std::size_t>(v)];
    // The experiment kernels are built with DUET_EXPERIMENTS only.
    if (var.strategy == Strategy::split_row && !DUET_HAVE_EXPERIMENTS) {
      CHECK_THROWS_AS(live_kernel_attributes(dev, v, false), Error);
      continue;
    }
    for (bool fin : {false, true}) {
      if (fin && var.strategy != Strategy::split_row) continue;
      const KernelAttributes a = live_kernel_attributes(dev, v, fin);
      std::vector<std::pair<int, std::int64_t>> launches;
      if (var.strategy == Strategy::group_rows) launches = {{kGroupRowsBlock, 0}};
      else if (var.strategy == Strategy::split_row) launches = {{kSplitRowBlock, 0}};
      else if (var.strategy == Strategy::split_stream) launches = {{kSplitStreamBlock, 0}};
      else if (var.strategy == Strategy::block_row_smem) launches = {{1024, 0}};
      else
        for (int t : {128, 256, 512, 1024})
          if (t <= a.max_threads_per_block) launches.push_back({t, 0});  // cluster_row: launch bounds of 512
      if (var.strategy == Strategy::block_row_smem)
        for (std::int64_t s : {std::int64_t(16384), std::int64_t(65536), std::int64_t(131072), p.smem_per_block_optin - a.static_smem_bytes})
          launches.push_back({1024, s});
      if (var.strategy == Strategy::cluster_row_smem)
        for (std::int64_t s : {std::int64_t(8192), std::int64_t(65536), std::int64_t(114688), p.smem_per_block_optin - a.static_smem_bytes})
          launches.push_back({kClusterRowSmemThreads, s});
      for (auto [threads, smem] : launches) {
        const Occupancy ex = exact_occupancy(p, a, {threads, smem});
        const Occupancy tu = tutorial_occupancy(p, a, {threads, smem});
        const int vendor = live_occupancy(dev, v, fin, threads, smem);
        if (table)
          table << a.name << ";" << threads << ";" << smem << ";" << a.regs_per_thread << ";" << a.static_smem_bytes << ";"
                << ex.blocks_per_sm << ";" << vendor << ";" << tu.blocks_per_sm << ";" << to_string(ex.limiter) << "\n";
        if (ex.blocks_per_sm != vendor) {
          ++disagreements;
          MESSAGE(a.name, " threads ", threads, " smem ", smem, ": exact ", ex.blocks_per_sm, " vendor ", vendor);
        }
      }
    }
  }
  CHECK(disagreements == 0);
}

TEST_CASE("each family's block limit in kFamilies is its kernels' launch bound") {
  // Property-file plans take the limit from the table (the compilers'
  // reports do not carry it); a live device reports the compiled one.
  const Device dev = duet::testing::first_gpu();
  for (int v = 0; v < kVariantCount; ++v) {
    const Variant& var = kCatalogue[static_cast<std::size_t>(v)];
    if (var.strategy == Strategy::split_row && !DUET_HAVE_EXPERIMENTS) continue;
    const KernelAttributes a = live_kernel_attributes(dev, v, false);
    INFO(a.name);
    // interleaved_rows' register-capped entries carry no launch bound on
    // NVIDIA: the device reports the most threads the cap allows, and the
    // planner launches the table's.
    const bool capped = dev.props().vendor == Vendor::nvidia && var.strategy == Strategy::interleaved_rows &&
                        interleaved_is_register_capped(var.dtype, var.vec, var.vpt, var.backward);
    if (capped)
      CHECK(a.max_threads_per_block >= max_threads_per_block(var));
    else
      CHECK(a.max_threads_per_block == max_threads_per_block(var));
  }
}

TEST_CASE("eight host threads x two streams each get correct results") {
  // Plans, attributes and workspaces are shared: every thread plans the same
  // shapes (one of them split_stream, whose workspace is per stream) on its own
  // two streams.
  const Device dev = duet::testing::first_gpu();
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t)
    pool.emplace_back([&, t] {
      Stream first(dev), second(dev);
      void* streams[2] = {first.handle(), second.handle()};
      for (int rep = 0; rep < 3; ++rep)
        for (int s = 0; s < 2; ++s)
          for (std::int64_t cols : {96, 3000, 70001}) {
            Case c;
            c.cols = cols;
            c.rows = 64 + s;
            c.dtype = t % 2 ? DType::bf16 : DType::f32;
            c.stream = streams[s];
            if (!run_case(dev, c).check.ok) ++failures;
          }
    });
  for (auto& th : pool) th.join();
  CHECK(failures.load() == 0);
}

TEST_CASE("randomized differential: 2000 random shapes, strides, dtypes and alignments") {
  const Device dev = duet::testing::first_gpu();
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> log_cols(0.0, std::log(400000.0));
  int failures = 0;
  std::map<std::string, int> by_strategy;  // how often each kernel family ran
  const int cases = std::getenv("DUET_DIFFERENTIAL_CASES") ? std::atoi(std::getenv("DUET_DIFFERENTIAL_CASES")) : 2000;
  for (int i = 0; i < cases; ++i) {
    Case c;
    c.dtype = static_cast<DType>(rng() % 3);
    c.op = rng() % 2 ? Op::softmax : Op::log_softmax;
    c.backward = rng() % 3 == 0;
    c.cols = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::exp(log_cols(rng))));
    c.rows = std::max<std::int64_t>(1, static_cast<std::int64_t>(rng() % std::max<std::uint64_t>(1, (1 << 19) / c.cols + 1)));
    if (rng() % 2) c.in_stride = c.cols + static_cast<std::int64_t>(rng() % 17);
    if (rng() % 2) c.out_stride = c.cols + static_cast<std::int64_t>(rng() % 17);
    if (rng() % 3 == 0) c.out_stride = c.in_stride;  // congruent rows: the vector kernels with edges
    c.misalign = rng() % 4 == 0 ? static_cast<std::int64_t>(rng() % 8) : 0;
    c.in_place = rng() % 5 == 0;
    try {
      const auto o = run_case(dev, c);
      const bool edges = o.variant.find(",edges") != std::string::npos;
      const bool scalar = o.variant.find(",vec1,") != std::string::npos;
      ++by_strategy[o.variant.substr(0, o.variant.find('<')) + (edges ? "+edges" : scalar ? "+scalar" : "")];
      if (!o.check.ok) {
        ++failures;
        MESSAGE(c.name(), " via ", o.variant, ": ", o.check.first_failure);
      }
    } catch (const std::exception& e) {
      ++failures;
      MESSAGE(c.name(), " threw: ", e.what());
    }
  }
  std::string mix;
  for (const auto& [name, n] : by_strategy) mix += " " + name + ":" + std::to_string(n);
  MESSAGE("differential: ", cases, " cases, ", failures, " failures; by kernel family:", mix);
  CHECK(failures == 0);
}

TEST_CASE("pointers from the wrong place are refused before anything is written") {
  const Device dev = duet::testing::first_gpu();
  std::vector<float> host(256, 1.0f);
  Buffer x(dev, 256 * 4), y(dev, 256 * 4);
  y.fill(0x7f);
  using duet::testing::expect_refused;
  expect_refused([&] { softmax(dev, DType::f32, 4, 64, host.data(), 64, y.data(), 64); }, "host pointer");
  expect_refused([&] { softmax(dev, DType::f32, 4, 64, x.data(), 64, host.data(), 64); }, "host pointer");
  expect_refused([&] { softmax(Device(BackendKind::host, 0), DType::f32, 4, 64, x.data(), 64, host.data(), 64); },
                 "device memory");
  expect_refused([&] { softmax(dev, DType::f32, 4, 64, x.data(), 64, static_cast<float*>(x.data()) + 8, 64); },
                 "overlap");
  std::vector<std::uint8_t> after(256 * 4);
  y.download(after.data(), after.size());
  CHECK(std::all_of(after.begin(), after.end(), [](std::uint8_t b) { return b == 0x7f; }));
  CHECK_THROWS_AS(device(dev.backend(), 1000), Error);
}

TEST_CASE("out of device memory for split_stream's workspace: a clear error, nothing written, then recovery") {
  const Device dev = duet::testing::first_gpu();
  // Past any on-chip family (f32 rows of 1M fit a Hopper cluster's shared
  // memory): split_stream, a workspace of counters and partials.
  const std::int64_t rows = 8, cols = std::int64_t(1) << 22;
  const std::size_t bytes = static_cast<std::size_t>(rows * cols) * 4;
  Buffer x(dev, bytes), y(dev, bytes);
  x.fill(0);  // all zeros: every output is 1 / cols
  y.fill(0x7f);
  Stream stream(dev);  // workspaces are per stream: none exists for this one yet
  // Take every byte the allocator will give, in halving pieces down to 256
  // bytes: cudaMalloc carves small blocks out of pages it already holds, so
  // stopping at 64 KiB left room for the workspace (a first run, H200).
  std::vector<Buffer> hog;
  for (std::size_t piece = std::size_t(1) << 36; piece >= 256;) {
    try {
      hog.emplace_back(dev, piece);
    } catch (const Error& e) {
      REQUIRE(e.status() == Status::out_of_memory);
      piece /= 2;
    }
  }
  MESSAGE("holding ", hog.size(), " allocations");
  duet::testing::expect_refused(
      [&] { softmax(dev, DType::f32, rows, cols, x.data(), cols, y.data(), cols, stream.handle()); },
      "Malloc", Status::out_of_memory);
  synchronize(dev, stream.handle());
  std::vector<std::uint8_t> untouched(bytes);
  y.download(untouched.data(), bytes);
  CHECK(std::all_of(untouched.begin(), untouched.end(), [](std::uint8_t b) { return b == 0x7f; }));
  hog.clear();
  // The same call on the same stream now gets its workspace and is right.
  softmax(dev, DType::f32, rows, cols, x.data(), cols, y.data(), cols, stream.handle());
  synchronize(dev, stream.handle());
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  y.download(out.data(), bytes);
  const float want = 1.0f / static_cast<float>(cols);
  CHECK(std::all_of(out.begin(), out.end(), [&](float v) { return std::fabs(v - want) <= 1e-6f * want; }));
}

TEST_CASE("split_stream with the caller's workspace: the float64 reference's result, and too small a one refused") {
  const Device dev = duet::testing::first_gpu();
  const std::int64_t rows = 5, cols = (std::int64_t(1) << 22) + 12;  // split_stream forward and backward
  const std::size_t elems = static_cast<std::size_t>(rows * cols), bytes = elems * 4;
  Buffer x(dev, bytes), dy(dev, bytes), y_own(dev, bytes), y_lent(dev, bytes), dx_own(dev, bytes), dx_lent(dev, bytes);
  const std::vector<float> hx = duet::testing::random_values(elems), hdy = duet::testing::random_values(elems, 1.0f);
  x.upload(hx.data(), bytes);
  dy.upload(hdy.data(), bytes);
  Stream stream(dev);
  // split_stream combines a row's partial sums in the order its chunks
  // finish, so two runs agree to rounding, not to the bit: each result is
  // checked against the float64 reference instead.
  auto download = [&](const Buffer& b) {
    synchronize(dev, stream.handle());
    std::vector<float> h(elems);
    b.download(h.data(), bytes);
    return h;
  };
  auto matches_reference = [&](const Buffer& b, bool backward) {
    const std::vector<float> got = download(b);
    if (!backward) return reference::compare(got, reference::forward(hx, rows, cols, Op::softmax), rows, cols, 1e-5);
    const std::vector<float> y = download(y_own);
    const auto scale = reference::backward_scale(y, hdy, rows, cols, Op::softmax);
    return reference::compare(got, reference::backward(y, hdy, rows, cols, Op::softmax), rows, cols, 1e-5, &scale);
  };
  for (bool bwd : {false, true}) {
    INFO((bwd ? "backward" : "forward"));
    const std::size_t need = workspace_size(dev, DType::f32, rows, cols, bwd);
    CHECK(need > 0);
    CHECK(workspace_size(dev, DType::f32, rows, 1000, bwd) == 0);  // on-chip rows need none
    Buffer lent(dev, need);
    lent.fill(0x5a);  // uninitialised memory is fine: the call zeroes what it counts with
    Buffer& own = bwd ? dx_own : y_own;
    Buffer& out = bwd ? dx_lent : y_lent;
    out.fill(0x7f);
    auto call = [&](Workspace w, Buffer& dst) {
      if (bwd)
        softmax_backward(dev, DType::f32, rows, cols, y_own.data(), cols, dy.data(), cols, dst.data(), cols, w,
                         stream.handle());
      else
        softmax(dev, DType::f32, rows, cols, x.data(), cols, dst.data(), cols, w, stream.handle());
    };
    // workspace_size covers the vector and the scalar path, so a call may
    // need less than `need`, never less than the counters and one pair.
    duet::testing::expect_refused([&] { call({lent.data(), 16}, out); }, "too small");
    duet::testing::expect_refused([&] { call({}, out); }, "too small");
    duet::testing::expect_refused([&] { call({static_cast<char*>(lent.data()) + 8, need}, out); }, "aligned");
    std::vector<std::uint8_t> untouched(bytes);
    synchronize(dev, stream.handle());
    out.download(untouched.data(), bytes);
    CHECK(std::all_of(untouched.begin(), untouched.end(), [](std::uint8_t b) { return b == 0x7f; }));
    if (bwd)
      softmax_backward(dev, DType::f32, rows, cols, y_own.data(), cols, dy.data(), cols, own.data(), cols,
                       stream.handle());
    else
      softmax(dev, DType::f32, rows, cols, x.data(), cols, own.data(), cols, stream.handle());
    call({lent.data(), need}, out);
    const auto own_check = matches_reference(own, bwd), lent_check = matches_reference(out, bwd);
    INFO(own_check.first_failure, " / ", lent_check.first_failure);
    CHECK(own_check.ok);
    CHECK(lent_check.ok);
  }
}

// Needs two GPUs of one backend (e.g. nvidia-h200-x2); reported as skipped
// otherwise.
TEST_CASE("two devices: another device's pointer is refused, and both run at once" *
          doctest::skip(duet::testing::gpus_of_first_backend() < 2)) {
  const Device d0 = duet::testing::first_gpu();
  const Device d1 = device(d0.backend(), 1);
  Buffer x1(d1, 64 * 64 * 4), y0(d0, 64 * 64 * 4);
  duet::testing::expect_refused([&] { softmax(d0, DType::f32, 64, 64, x1.data(), 64, y0.data(), 64); },
                                ":1 but the call runs on");
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (const Device& d : {d0, d1})
    pool.emplace_back([&, d] {
      for (std::int64_t cols : {100, 5000, 300000}) {
        Case c;
        c.cols = cols;
        c.rows = 50;
        if (!run_case(d, c).check.ok) ++failures;
      }
    });
  for (auto& th : pool) th.join();
  CHECK(failures.load() == 0);
}
