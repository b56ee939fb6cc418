// Planner: strategy and grid per shape class, from recorded compiler
// reports where no GPU is present.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "duet/config.hpp"
#include "duet/error.hpp"
#include "duet/fused_planner.hpp"
#include "duet/kernel_resources.hpp"
#include "duet/planner.hpp"
#include "duet/props_json.hpp"
#include "fused_dispatch.hpp"
#include "fused_variants.hpp"

using namespace duet;
namespace fs = std::filesystem;

namespace {
DeviceProps device_file(const char* name) {
  return load_props_file((fs::path(DUET_SOURCE_DIR) / "tools" / "deviceinfo" / "devices" / name).string());
}
AttributeSource recorded(const DeviceProps& d) {
  return [d](int v, bool f) { return recorded_kernel_attributes(d, v, f); };
}
}  // namespace

TEST_CASE("every recorded report covers every catalogue kernel") {
  const auto targets = recorded_targets();
  for (const auto& recorded_target : targets) {
    // Named copies, not structured bindings: INFO captures them in a lambda,
    // which clang before 16 refuses for bindings.
    const std::string backend = recorded_target.first, target = recorded_target.second;
    INFO(backend, " ", target);
    DeviceProps d;
    d.backend = backend == "cuda" ? BackendKind::cuda : BackendKind::hip;
    d.vendor = backend == "cuda" ? Vendor::nvidia : Vendor::amd;
    d.arch = target;
    d.family = backend == "cuda" ? "" : amd_family(target);
    for (int v = 0; v < kVariantCount; ++v) {
      // The experiment kernels are built (and recorded) with DUET_EXPERIMENTS only.
      if (kCatalogue[static_cast<std::size_t>(v)].strategy == Strategy::split_row && !DUET_HAVE_EXPERIMENTS) {
        CHECK_THROWS_AS(recorded_kernel_attributes(d, v, false), Error);
        continue;
      }
      const KernelAttributes a = recorded_kernel_attributes(d, v, false);
      // cluster_row compiles to an empty body where there are no clusters
      // (HIP), grid_row where there is no cp.async (HIP), interleaved_rows'
      // wide entries off NVIDIA sm_90+: recorded, never planned there
      // (DeviceProps::cluster_launch, copies_to_shared_async, plan_interleaved).
      const Variant& k = kCatalogue[static_cast<std::size_t>(v)];
      const Strategy strategy = k.strategy;
      const bool wide =
          strategy == Strategy::interleaved_rows && interleaved_is_wide(k.dtype, k.vec, k.vpt, k.backward);
      if ((family_of(strategy).cluster_launch || strategy == Strategy::grid_row || wide) && backend == "hip")
        CHECK(a.regs_per_thread == 0);
      else
        CHECK(a.regs_per_thread > 0);
      // No kernel spills or uses scratch: ptxas -v's stack frame (NVIDIA),
      // ScratchSize (AMD).
      CHECK(a.local_bytes_per_thread == 0);
      if (kCatalogue[static_cast<std::size_t>(v)].strategy == Strategy::split_row)
        CHECK(recorded_kernel_attributes(d, v, true).regs_per_thread > 0);
    }
  }
}

TEST_CASE("strategy by row length on H100") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  if (recorded_target_for(h100).empty()) return;  // a build without the CUDA backend records no ptxas report
  auto plan = [&](std::int64_t cols, DType dt = DType::f32, bool bwd = false) {
    return plan_softmax(h100, {dt, bwd, 4096, cols, true}, recorded(h100));
  };
  CHECK(plan(32).kernel.strategy == Strategy::group_rows);
  CHECK(plan(32).kernel.group == 8);        // 8 vectors of 4 floats: 8 threads x 1
  CHECK(plan(32).kernel.vpt == 1);
  CHECK(plan(8).kernel.group == 2);         // 2 vectors: two threads
  CHECK(plan(32).kernel.rows == 2);         // and two rows a step: 2 vectors in flight a thread
  CHECK(plan(128).kernel.group == 16);      // 32 vectors: 16 threads x 2
  CHECK(plan(128).kernel.vpt == 2);
  CHECK(plan(128).kernel.rows == 1);
  CHECK(plan(128).rows_per_block == kGroupRowsBlock / 16);
  CHECK(plan(512).kernel.group == 32);
  CHECK(plan(1024).kernel.group == 32);
  CHECK(plan(1024).kernel.vpt == 8);
  CHECK(plan(1028).kernel.strategy == Strategy::block_row);
  // DUET_BLOCK_VPT's field: block_row at that many vectors where they hold
  // the row in 1024 threads, the planner's own choice where not.
  auto forced = [&](std::int64_t cols, int block_vpt) {
    SoftmaxShape s{DType::f32, false, 4096, cols, true};
    s.options.block_vpt = block_vpt;
    return plan_softmax(h100, s, recorded(h100));
  };
  CHECK(forced(4096, 2).kernel.vpt == 2);
  CHECK(forced(4096, 2).launch.threads_per_block == 512);
  CHECK(forced(16384, 2).kernel.vpt == plan(16384).kernel.vpt);
  CHECK(forced(16384, 2).launch.threads_per_block == plan(16384).launch.threads_per_block);
  CHECK(plan(16384).smem_vecs == 0);
  CHECK(plan(16384).kernel.strategy == Strategy::block_row);
  CHECK(plan(32768, DType::f32, true).kernel.strategy == Strategy::block_row_smem);  // backward: no clusters
  CHECK(plan(32768, DType::f32, true).smem_vecs > 0);
  CHECK(plan(32768, DType::f32, true).launch.dynamic_smem_bytes <= h100.smem_per_block_optin);
  CHECK(plan(1 << 20).kernel.strategy == Strategy::cluster_row_smem);  // f32: a cluster's shared memory holds it
  // Past a cluster on chip, the whole GPU's on-chip memory (grid_row, f32),
  // then two passes.
  CHECK(plan(1 << 20, DType::bf16).kernel.strategy == Strategy::split_stream);
  CHECK(plan(1 << 22).kernel.strategy == Strategy::grid_row);
  CHECK(plan(1 << 24).kernel.strategy == Strategy::split_stream);
  CHECK(plan(1 << 24).chunks_per_row * plan(1 << 24).chunk_elems >= (1 << 24));
  // Grid: up to 64 waves of SMs x blocks per SM, capped by the work.
  const Plan p = plan(4096);
  CHECK(p.resident_blocks == std::int64_t(h100.sm_count) * p.exact.blocks_per_sm);
  CHECK(p.geometry.grid == std::min<std::int64_t>(4096, 64 * p.resident_blocks));
  const Plan huge = plan_softmax(h100, {DType::f32, false, std::int64_t(1) << 30, 32, true}, recorded(h100));
  CHECK(huge.geometry.grid == 64 * huge.resident_blocks);  // grid-stride covers the rest
  const Plan few = plan_softmax(h100, {DType::f32, false, 3, 4096, true}, recorded(h100));
  CHECK(few.geometry.grid == 3);
}

TEST_CASE("rows off the pack grid: the vector kernels with edges, the scalar ones where tensors disagree") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  if (recorded_target_for(h100).empty()) return;
  auto plan = [&](std::int64_t cols, DType dt, bool bwd, bool vector_ok, bool row_edges, bool dense = true) {
    SoftmaxShape s{dt, bwd, 4096, cols, vector_ok, row_edges, dense};
    return plan_softmax(h100, s, recorded(h100));
  };
  // An odd length in rows not back to back: its body of whole packs is
  // planned as a row (33 f32: 8 packs at most), at least 4 threads a row,
  // who hold the edges.
  Plan p = plan(33, DType::f32, false, true, false, false);
  CHECK(variant_name(p.kernel) == "group_rows<f32,vec4,g8,v1,r2,edges>");
  CHECK(p.why.find("row of 8 vectors") == 0);
  CHECK(p.why.find("element by element") != std::string::npos);
  CHECK(variant_name(plan(3, DType::bf16, false, true, false, false).kernel) == "group_rows<bf16,vec8,g4,v1,r2,edges>");
  CHECK(variant_name(plan(33, DType::bf16, false, true, false, false).kernel) == "group_rows<bf16,vec8,g4,v1,r2,edges>");
  // Back to back, short rows off the grid move through shared memory as one
  // run of packs a tile: 128 rows of 33 bf16, 529 packs of 16 bytes at most,
  // 5 a thread (10 240 bytes), two tiles (the next one in flight); backward
  // holds y and dy (31 bf16: 4 a thread).
  p = plan(33, DType::bf16, false, true, false);
  CHECK(variant_name(p.kernel) == "flat_rows<bf16,vec8,v0,edges>");
  CHECK(p.rows_per_block == kFlatRowsBlock);
  CHECK(p.launch.dynamic_smem_bytes == 2 * 5 * 128 * 16);
  CHECK(p.why.find("(20480 B: 2 a tensor") != std::string::npos);
  CHECK(plan(31, DType::bf16, true, true, false).launch.dynamic_smem_bytes == 2 * 2 * 4 * 128 * 16);
  CHECK(p.geometry.grid == 4096 / 128);
  CHECK(plan(3, DType::f32, true, true, false).kernel.strategy == Strategy::flat_rows);
  // Up to 6 whole packs in both directions, 16-bit forward rows to 11;
  // never for rows on the grid.
  CHECK(plan(55, DType::bf16, false, true, false).kernel.strategy == Strategy::flat_rows);
  CHECK(plan(57, DType::bf16, false, true, false).kernel.strategy == Strategy::flat_rows);
  CHECK(plan(95, DType::f16, false, true, false).kernel.strategy == Strategy::flat_rows);
  CHECK(plan(97, DType::f16, false, true, false).kernel.strategy == Strategy::group_rows);
  // 2 tiles of 128 rows of 95 bf16 (1521 packs: 12 a thread) in 49 152 B.
  CHECK(plan(95, DType::bf16, false, true, false).launch.dynamic_smem_bytes == 2 * 12 * 128 * 16);
  CHECK(plan(55, DType::bf16, true, true, false).kernel.strategy == Strategy::flat_rows);
  CHECK(plan(57, DType::bf16, true, true, false).kernel.strategy == Strategy::group_rows);
  CHECK(plan(27, DType::f32, true, true, false).kernel.strategy == Strategy::flat_rows);
  CHECK(plan(29, DType::f32, true, true, false).kernel.strategy == Strategy::group_rows);
  CHECK(plan(32, DType::bf16, false, true, false).kernel.strategy == Strategy::group_rows);
  // Whole packs from a pack boundary: no edges; off a boundary: edges.
  CHECK(!plan(4096, DType::bf16, false, true, false).kernel.edges);
  p = plan(4096, DType::bf16, false, true, true);
  CHECK(p.kernel.edges);
  CHECK(p.kernel.vec == 8);
  // Tensors at different offsets within a pack: the scalar kernels.
  p = plan(4097, DType::bf16, true, false, false);
  CHECK(p.kernel.vec == 1);
  CHECK(!p.kernel.edges);
  // Every family has them: block_row, cluster_row, split_stream.
  CHECK(variant_name(plan(4097, DType::f32, false, true, false).kernel).find("block_row<f32,vec4,") == 0);
  CHECK(plan(4097, DType::f32, true, true, false).kernel.edges);
  p = plan(65537, DType::f32, false, true, false);
  CHECK(p.kernel.strategy == Strategy::cluster_row);
  CHECK(p.kernel.edges);
  CHECK(std::int64_t(p.chunks_per_row) * p.chunk_elems >= 65536);  // the cluster holds the body
  p = plan((1 << 20) + 1, DType::bf16, true, true, false);
  CHECK(p.kernel.strategy == Strategy::split_stream);
  CHECK(p.kernel.edges);
  // Its chunks cover the body of whole packs, the edges ride with the first.
  CHECK(std::int64_t(p.chunks_per_row) * p.chunk_elems >= (1 << 20));
  CHECK(std::int64_t(p.chunks_per_row - 1) * p.chunk_elems < (1 << 20));
  // split_row, an experiment, has no edges: such rows run it scalar.
  SoftmaxShape split{DType::f32, false, 64, 100001, true, false};
  split.options.force_split = true;
  if (DUET_HAVE_EXPERIMENTS) {
    p = plan_softmax(h100, split, recorded(h100));
    CHECK(p.kernel.strategy == Strategy::split_row);
    CHECK(p.kernel.vec == 1);
  }
}

TEST_CASE("rows_congruent and rows_on_packs: which layouts the vector kernels take") {
  // Addresses only: nothing is read. A 64-byte aligned base, bf16 (8 a pack).
  alignas(64) static char arena[4096];
  const char* base = arena;
  auto at = [&](int elems) { return static_cast<const void*>(base + 2 * elems); };
  // Contiguous rows of an odd length, input and output at the same offset:
  // congruent, off the grid (edges).
  CHECK(rows_congruent(2, 8, 100, at(0), 1025, at(16), 1025));
  CHECK(!rows_on_packs(2, 8, 100, 1025, at(0), 1025));
  // Whole packs from a boundary: no edges.
  CHECK(rows_on_packs(2, 8, 100, 1024, at(8), 1024));
  // One element in (a view x[:, 1:]): congruent with an output one element
  // in, not with a fresh output of stride cols.
  CHECK(rows_congruent(2, 8, 100, at(1), 1025, at(9), 1025));
  CHECK(!rows_on_packs(2, 8, 100, 1024, at(1), 1025));
  CHECK(!rows_congruent(2, 8, 100, at(1), 1025, at(0), 1024));
  // Strides differing by whole packs agree; by less, not, unless one row.
  CHECK(rows_congruent(2, 8, 100, at(0), 1027, at(0), 1035));
  CHECK(!rows_congruent(2, 8, 100, at(0), 1027, at(0), 1030));
  CHECK(rows_congruent(2, 8, 1, at(0), 1027, at(0), 1030));
  CHECK(rows_on_packs(2, 8, 1, 1024, at(0), 1027));
  // A pointer that is not on an element is never congruent.
  CHECK(!rows_congruent(2, 8, 100, static_cast<const void*>(base + 1), 1024, base + 1, 1024));
  CHECK(pack_phase(base + 1, 2, 8) == -1);
  CHECK(pack_phase(base + 6, 2, 8) == 3);
}

TEST_CASE("split_stream: wide rows in one launch, the second pass a window behind the first") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  if (recorded_target_for(h100).empty()) return;
  // Without clusters (DUET_CLUSTER=0): f32 rows of 1M fit a Hopper
  // cluster's shared memory (cluster_row_smem); without grid_row
  // (DUET_GRID_ROW=0): they fit the GPU's.
  auto shape = [](std::int64_t rows, std::int64_t cols, bool bwd = false) {
    SoftmaxShape s{DType::f32, bwd, rows, cols, true};
    s.options.allow_clusters = false;
    s.options.allow_grid_row = false;
    return s;
  };
  const Plan p = plan_softmax(h100, shape(64, 1 << 20), recorded(h100));
  REQUIRE(p.kernel.strategy == Strategy::split_stream);
  // Chunks of 512 threads x 8 vectors x 4 floats; 64 of them a row.
  CHECK(p.launch.threads_per_block == kSplitStreamBlock);
  CHECK(p.kernel.vpt == 8);
  CHECK(p.chunk_elems == 16384);
  CHECK(p.chunks_per_row == 64);
  // One wave: blocks take their work from the queue.
  CHECK(p.geometry.grid == p.resident_blocks);
  CHECK(p.exact.blocks_per_sm == 2);
  // The second pass trails by a row's chunks plus a visit per resident block.
  CHECK(p.stream_lag == 64 + p.resident_blocks);
  // Workspace: the ticket counter and a count per row, then at a 16-byte
  // boundary a pair per chunk and one per row.
  CHECK(split_stream_partials_offset(64) == 272);
  CHECK(p.workspace_bytes == 272 + 64 * (64 + 1) * 8);
  // Fewer visits than blocks: the grid is the work.
  const Plan one = plan_softmax(h100, shape(1, 1 << 19), recorded(h100));
  REQUIRE(one.kernel.strategy == Strategy::split_stream);
  CHECK(one.geometry.grid == 2 * 32);
  // A slack from the environment (DUET_STREAM_SLACK) replaces the default.
  SoftmaxShape tight = shape(64, 1 << 20);
  tight.options.stream_slack = 1;
  CHECK(plan_softmax(h100, tight, recorded(h100)).stream_lag == 65);
  // Backward keeps two tensors: 4 vectors of each a thread.
  const Plan b = plan_softmax(h100, shape(64, 1 << 20, true), recorded(h100));
  CHECK(b.kernel.strategy == Strategy::split_stream);
  CHECK(b.kernel.vpt == 4);
  CHECK(b.chunk_elems == 8192);
  // DUET_STRATEGY=split_row: the two-kernel version, its partials only; a
  // build without the experiments refuses it, naming the switch.
  SoftmaxShape two = shape(4096, 1 << 20);
  two.options.force_split = true;
  if (DUET_HAVE_EXPERIMENTS) {
    const Plan s = plan_softmax(h100, two, recorded(h100));
    CHECK(s.kernel.strategy == Strategy::split_row);
    CHECK(s.workspace_bytes == 4096 * s.chunks_per_row * 8);
    CHECK(s.finalize_geometry.grid == s.geometry.grid);
  } else {
    try {
      (void)plan_softmax(h100, two, recorded(h100));
      FAIL_CHECK("planned split_row without the experiments");
    } catch (const Error& e) {
      CHECK(e.status() == Status::unsupported);
      CHECK(std::string(e.what()).find("DUET_EXPERIMENTS") != std::string::npos);
    }
  }
  // DUET_STRATEGY=split_stream: wherever group_rows does not fit.
  SoftmaxShape forced = shape(4096, 4096);
  forced.options.force_stream = true;
  const Plan f = plan_softmax(h100, forced, recorded(h100));
  CHECK(f.kernel.strategy == Strategy::split_stream);
  CHECK(f.chunks_per_row == 1);
}

TEST_CASE("cluster_row: rows past one block's registers over a cluster, on Hopper only") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  if (recorded_target_for(h100).empty()) return;
  CHECK(h100.cluster_launch);
  auto plan = [&](const DeviceProps& d, std::int64_t cols, DType dt = DType::f32, bool clusters = true) {
    SoftmaxShape s{dt, false, 4096, cols, true};
    s.options.allow_clusters = clusters;
    return plan_softmax(d, s, recorded(d));
  };
  // 65536 floats = 16384 vectors: 4 blocks of 512 threads x 8 vectors hold
  // it; 16 blocks of 128, eight an SM, is the plan (many float32 rows: up
  // to 16 blocks while each keeps 128 threads).
  const Plan p = plan(h100, 65536);
  CHECK(p.kernel.strategy == Strategy::cluster_row);
  CHECK(p.chunks_per_row == 16);
  CHECK(p.chunk_elems == 4096);
  CHECK(p.launch.threads_per_block == 128);
  CHECK(p.kernel.vpt == 8);
  CHECK(p.exact.blocks_per_sm == 8);  // eight slices an SM; block_row_smem holds one row
  // One wave of whole clusters, walking the rows.
  CHECK(p.geometry.grid == p.resident_blocks / 16 * 16);
  CHECK(p.geometry.grid < 4096 * 4);
  CHECK(std::int64_t(p.launch.threads_per_block) * p.kernel.vpt * p.kernel.vec >= p.chunk_elems);
  // 16 blocks (a non-portable cluster size) while each keeps 128 threads
  // (float32, many rows) or 256 (16-bit; few rows); past 16 of 512,
  // cluster_row_smem (the next case).
  CHECK(plan(h100, 131072).chunks_per_row == 16);  // 16 blocks of 256 threads
  CHECK(plan(h100, 131072).launch.threads_per_block == 256);
  CHECK(plan(h100, 131076).chunks_per_row == 16);
  CHECK(plan(h100, 65472).chunks_per_row == 8);  // 16 would leave fewer than 128 threads a block
  CHECK(plan(h100, 65476).chunks_per_row == 16);
  CHECK(plan(h100, 65536, DType::bf16).chunks_per_row == 8);  // 16 would leave 64 threads a block
  // Few rows keep clusters of 8 where 16 would need blocks of 128 threads.
  CHECK(plan_softmax(h100, {DType::f32, false, 8, 65536, true}, recorded(h100)).chunks_per_row == 8);
  CHECK(plan(h100, 262144).chunks_per_row == 16);
  CHECK(plan(h100, 262144).launch.threads_per_block == 512);
  // At most 8 blocks: what the runtime plans again with where the device
  // holds no cluster of 16.
  SoftmaxShape portable{DType::f32, false, 4096, 131072, true};
  portable.options.max_cluster_blocks = kPortableClusterBlocks;
  CHECK(plan_softmax(h100, portable, recorded(h100)).chunks_per_row == 8);
  portable.cols = 262144;
  CHECK(plan_softmax(h100, portable, recorded(h100)).kernel.strategy == Strategy::cluster_row_smem);
  CHECK(plan(h100, 262148).kernel.strategy == Strategy::cluster_row_smem);
  CHECK(plan(h100, 262144, DType::bf16).chunks_per_row == 16);
  CHECK(plan(h100, 524288, DType::bf16).chunks_per_row == 16);
  CHECK(plan(h100, 524296, DType::bf16).kernel.strategy == Strategy::split_stream);  // f32 only, unless preferred
  CHECK(plan(h100, 131072, DType::bf16).chunks_per_row == 8);
  CHECK(plan(h100, 131072, DType::bf16).launch.threads_per_block == 256);
  // Uneven slices: 40000 floats = 10000 vectors over 8 blocks of 1250
  // (157 threads, rounded up to whole wavefronts: 192).
  const Plan uneven = plan(h100, 40000);
  CHECK(uneven.chunks_per_row == 8);
  CHECK(uneven.chunk_elems == 5000);
  CHECK(uneven.launch.threads_per_block == 192);
  CHECK(std::int64_t(uneven.launch.threads_per_block) * uneven.kernel.vpt * 4 >= 5000);
  // DUET_CLUSTER_BLOCKS=16: clusters of 16 where 8 would do.
  SoftmaxShape sixteen{DType::f32, false, 4096, 65472, true};
  sixteen.options.min_cluster_blocks = 16;
  CHECK(plan_softmax(h100, sixteen, recorded(h100)).chunks_per_row == 16);
  CHECK(plan_softmax(h100, sixteen, recorded(h100)).launch.threads_per_block == 128);
  // A row one block_row holds (once an SM, 1024 x 8 vectors) stays there
  // unless clusters are preferred (DUET_CLUSTER=prefer).
  CHECK(plan(h100, 32768).kernel.strategy == Strategy::block_row);
  SoftmaxShape prefer{DType::f32, false, 4096, 32768, true};
  prefer.options.prefer_clusters = true;
  CHECK(plan_softmax(h100, prefer, recorded(h100)).kernel.strategy == Strategy::cluster_row);
  CHECK(plan_softmax(h100, prefer, recorded(h100)).chunks_per_row == 8);  // 8 x 128 threads
  // Few rows (a block a row would leave half the 132 SMs idle or more)
  // take the cluster too, and say why; the cached plans are keyed by it.
  CHECK(few_rows(h100, 1));
  CHECK(few_rows(h100, 66));
  CHECK_FALSE(few_rows(h100, 67));
  CHECK_FALSE(few_rows(h100, 0));
  CHECK_FALSE(few_rows(DeviceProps{}, 1));  // the host backend
  for (const std::int64_t rows : {1, 8, 66}) {
    CAPTURE(rows);
    const Plan few = plan_softmax(h100, {DType::f32, false, rows, 32768, true}, recorded(h100));
    CHECK(few.kernel.strategy == Strategy::cluster_row);
    CHECK(few.why.find(rows <= 2 ? "(a row or two alone on the device" : "(few rows") != std::string::npos);
    CHECK(std::count(few.why.begin(), few.why.end(), '(') == 1);
    // A row or two (16-block clusters fill at most a quarter of the SMs):
    // clusters of 16, where 8 blocks were the plan.
    CHECK(lone_rows(h100, rows) == (rows <= 2));
    CHECK(few.chunks_per_row == (rows <= 2 ? 16 : 8));
    const Plan bf16 = plan_softmax(h100, {DType::bf16, false, rows, 131072, true}, recorded(h100));
    CHECK(bf16.kernel.strategy == Strategy::cluster_row);
    CHECK(bf16.chunks_per_row == (rows <= 2 ? 16 : 8));
  }
  CHECK_FALSE(lone_rows(DeviceProps{}, 1));
  CHECK(plan_softmax(h100, {DType::f32, false, 67, 32768, true}, recorded(h100)).kernel.strategy ==
        Strategy::block_row);
  CHECK(plan(h100, 16384).kernel.strategy == Strategy::block_row);
  // 16-bit rows that block_row holds only once an SM take a cluster (bf16
  // 65536: 1024 x 8 vectors once an SM, or 8 blocks of 128 x 8, eight an SM).
  const Plan bf16_cluster = plan(h100, 65536, DType::bf16);
  CHECK(bf16_cluster.kernel.strategy == Strategy::cluster_row);
  CHECK(bf16_cluster.chunks_per_row == 8);
  CHECK(bf16_cluster.launch.threads_per_block == 128);
  CHECK(bf16_cluster.exact.blocks_per_sm == 8);
  CHECK(plan(h100, 32768, DType::bf16).kernel.strategy == Strategy::block_row);  // 512 x 8, twice an SM
  CHECK(plan(h100, 65536, DType::bf16, false).kernel.strategy == Strategy::block_row);  // DUET_CLUSTER=0
  // Without clusters (DUET_CLUSTER=0, or none fits), the single-block kernels.
  CHECK(plan(h100, 65536, DType::f32, false).kernel.strategy == Strategy::block_row_smem);
  // Not on the 16-bit scalar path, not before Hopper, not on AMD.
  CHECK(plan_softmax(h100, {DType::bf16, false, 4096, 65537, false}, recorded(h100)).kernel.strategy !=
        Strategy::cluster_row);
  const DeviceProps a100 = device_file("a100_sxm.json");
  CHECK_FALSE(a100.cluster_launch);
  if (!recorded_target_for(a100).empty()) CHECK(plan(a100, 65536).kernel.strategy != Strategy::cluster_row);
  const DeviceProps mi300x = device_file("mi300x.json");
  CHECK_FALSE(mi300x.cluster_launch);
  if (!recorded_target_for(mi300x).empty()) CHECK(plan(mi300x, 65536).kernel.strategy != Strategy::cluster_row);
}

TEST_CASE("cluster_row_smem: rows past a cluster's registers kept in its shared memory too, read once") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  if (recorded_target_for(h100).empty()) return;
  // 16-bit rows take it where clusters are preferred (DUET_CLUSTER=prefer).
  // Without grid_row (DUET_GRID_ROW=0), rows past it take split_stream (the
  // grid_row case has what takes them by default).
  auto shape = [](std::int64_t cols, DType dt = DType::f32) {
    SoftmaxShape s{dt, false, 64, cols, true};
    s.options.prefer_clusters = dtype_size(dt) == 2;
    s.options.allow_grid_row = false;
    return s;
  };
  // What a plan holds: every block's slice in its registers and shared
  // memory, within the opt-in, with no shared-memory vector to spare.
  auto check_holds = [&](const Plan& p, std::int64_t cols, DType dt) {
    const int vec = dtype_vec16(dt);
    const std::int64_t nv = cols / vec;
    CHECK(p.kernel.strategy == Strategy::cluster_row_smem);
    CHECK(p.launch.threads_per_block == kClusterRowSmemThreads);
    CHECK(p.kernel.vpt == kClusterRowVpt);
    CHECK(std::int64_t(p.chunks_per_row) * p.chunk_elems >= nv * vec);
    const std::int64_t slice = p.chunk_elems / vec;
    CHECK(std::int64_t(p.launch.threads_per_block) * (p.kernel.vpt + p.smem_vecs) >= slice);
    CHECK(std::int64_t(p.launch.threads_per_block) * (p.kernel.vpt + p.smem_vecs - 1) < slice);
    CHECK(p.launch.dynamic_smem_bytes == std::int64_t(p.smem_vecs) * p.launch.threads_per_block * 16);
    CHECK(p.launch.dynamic_smem_bytes + p.attributes.static_smem_bytes <= h100.smem_per_block_optin);
    CHECK(p.exact.blocks_per_sm == 1);
    CHECK(p.geometry.grid == p.resident_blocks / p.chunks_per_row * p.chunks_per_row);  // one wave of clusters
    CHECK(p.why.find("in shared memory") != std::string::npos);
  };
  // The fewest blocks that hold the row: f32 524288 (131072 vectors) in 8
  // blocks of 16384, 1M in 16, and bf16 2M in 16.
  const Plan half = plan_softmax(h100, shape(524288), recorded(h100));
  check_holds(half, 524288, DType::f32);
  CHECK(half.chunks_per_row == 8);
  const Plan mega = plan_softmax(h100, shape(1 << 20), recorded(h100));
  check_holds(mega, 1 << 20, DType::f32);
  CHECK(mega.chunks_per_row == 16);
  const Plan bf16 = plan_softmax(h100, shape(1 << 21, DType::bf16), recorded(h100));
  check_holds(bf16, 1 << 21, DType::bf16);
  CHECK(bf16.chunks_per_row == 16);
  SoftmaxShape bf16_default = shape(1 << 21, DType::bf16);
  bf16_default.options.prefer_clusters = false;
  CHECK(plan_softmax(h100, bf16_default, recorded(h100)).kernel.strategy == Strategy::split_stream);
  // Odd lengths take the entry with edges.
  const Plan odd = plan_softmax(h100, shape((1 << 20) + 1), recorded(h100));
  CHECK(odd.kernel.strategy == Strategy::cluster_row_smem);
  CHECK(odd.kernel.edges);
  // Rows cluster_row holds stay there (f32 262144: 16 x 512 in registers).
  CHECK(plan_softmax(h100, shape(262144), recorded(h100)).kernel.strategy == Strategy::cluster_row);
  // The capacity edge: 16 blocks of 512 x (8 + the opt-in's vectors).
  const std::int64_t most_smem = (h100.smem_per_block_optin - mega.attributes.static_smem_bytes) / (512 * 16);
  const std::int64_t edge = 16 * 512 * (8 + most_smem) * 4;  // floats
  CHECK(edge >= 1 << 20);  // the issue's promise: f32 rows of 1M on chip
  check_holds(plan_softmax(h100, shape(edge), recorded(h100)), edge, DType::f32);
  CHECK(plan_softmax(h100, shape(edge + 4), recorded(h100)).kernel.strategy == Strategy::split_stream);
  // DUET_CLUSTER_BLOCKS=16: the slices spread over 16 blocks.
  SoftmaxShape sixteen = shape(524288);
  sixteen.options.min_cluster_blocks = 16;
  const Plan spread = plan_softmax(h100, sixteen, recorded(h100));
  check_holds(spread, 524288, DType::f32);
  CHECK(spread.chunks_per_row == 16);
  // Portable clusters hold half as much; DUET_CLUSTER=0 and backward rows
  // take split_stream.
  SoftmaxShape portable = shape(1 << 20);
  portable.options.max_cluster_blocks = kPortableClusterBlocks;
  CHECK(plan_softmax(h100, portable, recorded(h100)).kernel.strategy == Strategy::split_stream);
  portable.cols = 524288;
  CHECK(plan_softmax(h100, portable, recorded(h100)).chunks_per_row == 8);
  SoftmaxShape none = shape(1 << 20);
  none.options.allow_clusters = false;
  CHECK(plan_softmax(h100, none, recorded(h100)).kernel.strategy == Strategy::split_stream);
  // Backward keeps y and dy: 4 vectors of each a thread in registers, half
  // the slots of shared memory each; rows past one block_row_smem.
  SoftmaxShape backward = shape(1 << 20);
  backward.backward = true;
  CHECK(plan_softmax(h100, backward, recorded(h100)).kernel.strategy == Strategy::split_stream);
  for (std::int64_t cols : {65536, 300001, 524288}) {
    backward.cols = cols;
    const Plan b = plan_softmax(h100, backward, recorded(h100));
    INFO("backward ", cols);
    CHECK(b.kernel.strategy == Strategy::cluster_row_smem);
    CHECK(b.kernel.backward);
    CHECK(b.kernel.vpt == cluster_row_smem_vpt(true));
    CHECK(b.launch.dynamic_smem_bytes == std::int64_t(b.smem_vecs) * b.launch.threads_per_block * 32);
    CHECK(b.launch.dynamic_smem_bytes + b.attributes.static_smem_bytes <= h100.smem_per_block_optin);
    CHECK(std::int64_t(b.launch.threads_per_block) * (b.kernel.vpt + b.smem_vecs) * 4 >= b.chunk_elems);
    CHECK(std::int64_t(b.chunks_per_row) * b.chunk_elems >= cols / 4 * 4);
    CHECK(b.why.find("y and dy") != std::string::npos);
  }
  backward.cols = 32768;  // one block_row_smem holds it
  CHECK(plan_softmax(h100, backward, recorded(h100)).kernel.strategy == Strategy::block_row_smem);
  // The vendor's count is asked with the plan's shared memory; where no
  // cluster of 16 fits, clusters of 8 cannot hold 1M floats: split_stream.
  std::vector<std::int64_t> smem_asked;
  const Plan fell = plan_softmax(h100, shape(1 << 20), recorded(h100), [&](int, int, int blocks, std::int64_t smem) {
    smem_asked.push_back(smem);
    return blocks == 16 ? 0 : 7;
  });
  REQUIRE(smem_asked.size() == 1);
  CHECK(smem_asked[0] == mega.launch.dynamic_smem_bytes);
  CHECK(fell.kernel.strategy == Strategy::split_stream);
  CHECK(fell.fallback.find("no cluster of 16 x cluster_row_smem") == 0);
  const Plan seven = plan_softmax(h100, shape(524288), recorded(h100), [&](int, int, int, std::int64_t) { return 7; });
  CHECK(seven.resident_blocks == 7 * 8);
  CHECK(seven.geometry.grid == 7 * 8);
  // Not before Hopper, not on AMD.
  for (const char* file : {"a100_sxm.json", "mi300x.json"}) {
    const DeviceProps d = device_file(file);
    if (!recorded_target_for(d).empty())
      CHECK(plan_softmax(d, shape(1 << 20), recorded(d)).kernel.strategy == Strategy::split_stream);
  }
}

// grid_row: float32 rows past a cluster on chip over blocks of the whole
// GPU, a cooperative wave of whole groups that leave no SM idle, its
// workspace an arrival count a group and two pairs a block.
TEST_CASE("grid_row: rows past a cluster on chip over blocks of one grid") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  if (recorded_target_for(h100).empty()) return;
  auto plan = [&](std::int64_t rows, std::int64_t cols, DType dt = DType::f32, bool bwd = false) {
    return plan_softmax(h100, {dt, bwd, rows, cols, true}, recorded(h100));
  };
  // What every grid_row plan holds: each block's slice in its registers and
  // shared memory, the groups resident at once.
  auto check_holds = [&](const Plan& p, std::int64_t rows, std::int64_t cols, DType dt, bool bwd) {
    const int vec = dtype_vec16(dt);
    REQUIRE(p.kernel.strategy == Strategy::grid_row);
    CHECK(p.launch.threads_per_block == kGridRowThreads);
    CHECK(p.kernel.vpt == cluster_row_smem_vpt(bwd));
    CHECK(std::int64_t(p.chunks_per_row) * p.chunk_elems >= cols / vec * vec);
    CHECK(std::int64_t(p.chunks_per_row - 1) * p.chunk_elems < cols / vec * vec);
    CHECK(std::int64_t(p.launch.threads_per_block) * (p.kernel.vpt + p.smem_vecs) * vec >= p.chunk_elems);
    CHECK(p.launch.dynamic_smem_bytes == std::int64_t(p.smem_vecs) * p.launch.threads_per_block * 16 * (bwd ? 2 : 1));
    CHECK(p.launch.dynamic_smem_bytes + p.attributes.static_smem_bytes <= h100.smem_per_block_optin);
    CHECK(p.exact.blocks_per_sm == 1);
    CHECK(p.chunks_per_row <= p.resident_blocks);
    const std::int64_t groups = std::min(rows, p.resident_blocks / p.chunks_per_row);
    CHECK(p.geometry.grid == groups * p.chunks_per_row);
    CHECK(p.workspace_bytes == grid_row_workspace_bytes(groups, p.chunks_per_row));
    CHECK(p.why.find("blocks of one grid") != std::string::npos);
  };
  // f32 4M (16 MiB a row over blocks of about 290 KiB on chip): 57 blocks
  // hold it; two groups of 66 fill the 132 SMs.
  const Plan wide = plan(16, 1 << 22);
  check_holds(wide, 16, 1 << 22, DType::f32, false);
  CHECK(wide.chunks_per_row == 66);
  CHECK(wide.geometry.grid == 132);
  const Plan two_m = plan(16, 1 << 21);
  check_holds(two_m, 16, 1 << 21, DType::f32, false);
  CHECK(h100.sm_count % two_m.chunks_per_row == 0);
  check_holds(plan(16, (1 << 22) + 3), 16, (1 << 22) + 3, DType::f32, false);
  CHECK(plan(16, (1 << 22) + 3).kernel.edges);
  const Plan back = plan(16, 1 << 20, DType::f32, true);
  check_holds(back, 16, 1 << 20, DType::f32, true);
  CHECK(back.why.find("y and dy") != std::string::npos);
  // One row: one group, the grid its blocks.
  check_holds(plan(1, 1 << 22), 1, 1 << 22, DType::f32, false);
  CHECK(plan(1, 1 << 22).geometry.grid == 66);
  // 16-bit rows, past the GPU's on-chip memory, DUET_GRID_ROW=0 and
  // DUET_STRATEGY=split_stream: split_stream.
  CHECK(plan(16, 1 << 21, DType::bf16).kernel.strategy == Strategy::split_stream);
  CHECK(plan(16, 1 << 21, DType::bf16, true).kernel.strategy == Strategy::split_stream);
  CHECK(plan(16, 1 << 24).kernel.strategy == Strategy::split_stream);
  SoftmaxShape off{DType::f32, false, 16, 1 << 22, true};
  off.options.allow_grid_row = false;
  CHECK(plan_softmax(h100, off, recorded(h100)).kernel.strategy == Strategy::split_stream);
  SoftmaxShape stream{DType::f32, false, 16, 1 << 22, true};
  stream.options.force_stream = true;
  CHECK(plan_softmax(h100, stream, recorded(h100)).kernel.strategy == Strategy::split_stream);
  // Rows a cluster holds stay there.
  CHECK(plan(16, 1 << 20).kernel.strategy == Strategy::cluster_row_smem);
  // DUET_STRATEGY=grid_row: wherever it holds the row, 16-bit rows too;
  // DUET_GRID_BLOCKS: at least that many blocks a row, as many more as
  // leave no SM idle (7: 132 / 18 = 7; 64: 66), then as few as give each
  // the same slice (512 vectors over 66 blocks: 8 each, 64 blocks).
  SoftmaxShape forced{DType::bf16, false, 4096, 4096, true};
  forced.options.force_grid_row = true;
  for (const auto& [asked, got] : std::vector<std::pair<int, int>>{{4, 4}, {7, 7}, {64, 64}}) {
    forced.options.grid_row_blocks = asked;
    const Plan f = plan_softmax(h100, forced, recorded(h100));
    INFO("DUET_GRID_BLOCKS=", asked);
    check_holds(f, 4096, 4096, DType::bf16, false);
    CHECK(f.chunks_per_row == got);
  }
  forced.options.grid_row_blocks = 0;
  forced.cols = 1 << 21;
  check_holds(plan_softmax(h100, forced, recorded(h100)), 4096, 1 << 21, DType::bf16, false);
  // No cp.async on AMD: never planned there.
  for (const char* file : {"mi250x_gcd.json", "mi300x.json"}) {
    const DeviceProps d = device_file(file);
    if (recorded_target_for(d).empty()) continue;
    INFO(file);
    CHECK(plan_softmax(d, {DType::f32, false, 16, 1 << 22, true}, recorded(d)).kernel.strategy != Strategy::grid_row);
  }
}

TEST_CASE("AMD plans come from the recorded HIP reports") {
  const DeviceProps mi300x = device_file("mi300x.json");
  if (recorded_target_for(mi300x).empty()) return;
  CHECK(recorded_target_for(mi300x) == "gfx940");  // gfx942 has no device libs in ROCm 5.2: nearest CDNA3
  const Plan p = plan_softmax(mi300x, {DType::f32, false, 8192, 4096, true}, recorded(mi300x));
  CHECK(p.attributes.source.find("amdgpu") != std::string::npos);
  CHECK(p.exact.blocks_per_sm >= 1);
  CHECK(p.resident_blocks == std::int64_t(mi300x.sm_count) * p.exact.blocks_per_sm);
  CHECK(p.geometry.grid == std::min<std::int64_t>(8192, 64 * p.resident_blocks));
  // flat_rows' longest rows fit the 64 KiB of a workgroup: 16-bit rows of
  // 95 forward (48 KiB) and 55 backward (56 KiB).
  const auto odd = [&](std::int64_t cols, bool bwd) {
    return plan_softmax(mi300x, {DType::bf16, bwd, 4096, cols, true, false, true}, recorded(mi300x));
  };
  CHECK(odd(95, false).kernel.strategy == Strategy::flat_rows);
  CHECK(odd(55, true).kernel.strategy == Strategy::flat_rows);
  CHECK(odd(55, true).launch.dynamic_smem_bytes == 2 * 2 * 7 * 128 * 16);
}

TEST_CASE("bad shapes are rejected") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  auto never = [](int, bool) -> KernelAttributes { throw Error(Status::internal, "not reached"); };
  CHECK_THROWS_AS(plan_softmax(h100, {DType::f32, false, -1, 10, true}, never), Error);
  CHECK_THROWS_AS(plan_softmax(h100, {DType::f32, false, 1, 0, true}, never), Error);
  CHECK_THROWS_AS(plan_softmax(h100, {DType::f32, false, 1, 10, true}, never), Error);  // 10 % 4 != 0 on the vector path
}

// Issue finding J: a file of 2^20 SMs planned "grid 4294967296", past CUDA's
// grid limit; the grid-stride loops cover any grid, so the planner caps it.
TEST_CASE("the grid stays within the vendor's limit") {
  auto fixed = [](int, bool) {
    KernelAttributes k;
    k.regs_per_thread = 32;
    k.max_threads_per_block = 1024;
    k.source = "test";
    return k;
  };
  constexpr std::int64_t kCudaGridX = (std::int64_t(1) << 31) - 1;
  // An H100 file with 2^20 SMs, each with room for 64 blocks of 256
  // threads: 64 waves of them would be 2^32 blocks.
  DeviceProps nvidia = device_file("h100_sxm.json");
  nvidia.sm_count = 1 << 20;
  nvidia.max_threads_per_sm = 64 * 256;
  nvidia.max_blocks_per_sm = 64;
  nvidia.regs_per_sm = 64 * 256 * 32;
  // group_rows and block_row: 64 waves of 2^20 SMs x 8 or more blocks, past
  // the limit; cluster_row and split_stream: one wave, within it.
  for (const std::int64_t cols : {32, 4096, 65536, 1 << 20}) {
    INFO(cols);
    const Plan p = plan_softmax(nvidia, {DType::f32, false, std::int64_t(1) << 40, cols, true}, fixed);
    CHECK(p.max_grid == kCudaGridX);
    CHECK(p.geometry.grid <= kCudaGridX);
    if (cols <= 4096) CHECK(p.geometry.grid == kCudaGridX);
    if (cols <= 4096) CHECK(p.resident_blocks * 64 == std::int64_t(1) << 32);
  }
  // HIP: blocks x threads within 32 bits too.
  DeviceProps amd = device_file("mi300x.json");
  amd.sm_count = 1 << 20;
  amd.max_blocks_per_sm = 64;
  const Plan a = plan_softmax(amd, {DType::f32, false, std::int64_t(1) << 40, 4096, true}, fixed);
  CHECK(a.geometry.grid * a.geometry.block < (std::int64_t(1) << 32));
  CHECK(a.geometry.grid == a.max_grid);
  // The same device from a file: parsed, planned within the limit.
  auto j = props_to_json(nvidia);
  CHECK(plan_softmax(props_from_json(j), {DType::f32, false, std::int64_t(1) << 40, 32, true}, fixed).geometry.grid ==
        kCudaGridX);
}

// Issue finding K: "set_grid: rows out of range" named an internal function.
TEST_CASE("too many rows for one launch is said in the caller's terms") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  auto fixed = [](int, bool) {
    KernelAttributes k;
    k.regs_per_thread = 32;
    k.max_threads_per_block = 1024;
    return k;
  };
  try {
    plan_softmax(h100, {DType::f32, false, (std::int64_t(1) << 61) - 1, 2, false}, fixed);
    FAIL("planned 2^61 rows");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()) == "rows = 2305843009213693951 is too many for one launch: at most 576460752303423488 rows");
  }
}

// ------------------------------------------------------------ fused row operations
namespace {

FusedShape fused_shape(FusedOp op, MaskKind mask, DType dt, std::int64_t rows, std::int64_t cols, bool vector_ok) {
  FusedShape s;
  s.op = op;
  s.mask_kind = mask;
  s.dtype = dt;
  s.rows = rows;
  s.cols = cols;
  s.vector_ok = vector_ok;
  s.gradient = op == FusedOp::cross_entropy;
  return s;
}

// A pointer `elems` elements of `elem` bytes past a 256-byte boundary (no
// memory behind it: fused_vector_ok only reads addresses).
void* at(std::int64_t elems, int elem) {
  return reinterpret_cast<void*>(std::uintptr_t(1) << 20 | std::uintptr_t(elems * elem));
}

}  // namespace

TEST_CASE("fused planner: odd rows on the vector path when the tensors agree, else the scalar path") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  // An odd vocabulary, its rows at the same offsets in every tensor: the
  // vector kernel (8 bf16 a pack), the rows' edges element-wise.
  // GPT-2's 50257 classes: one pass, the row in one block's registers.
  auto p = plan_fused(h100, fused_shape(FusedOp::cross_entropy, MaskKind::none, DType::bf16, 8192, 50257, true));
  CHECK(p.kernel == "block_row<cross_entropy,bf16,vec8,v8,edges>");
  CHECK(p.why.find("6282 packs of 8 (the elements off the pack grid apart) fits one block of 832 threads x 8 packs") !=
        std::string::npos);
  // Llama 2's 32000: 8 packs a thread leave two blocks of 512 an SM.
  p = plan_fused(h100, fused_shape(FusedOp::cross_entropy, MaskKind::none, DType::bf16, 8192, 32000, true));
  CHECK(p.kernel == "block_row<cross_entropy,bf16,vec8,v8>");
  CHECK(p.why.find("512 threads x 8 packs in registers; grid 8192 of 512 threads (2 blocks an SM") != std::string::npos);
  // Rows at different offsets: the scalar kernel.
  p = plan_fused(h100, fused_shape(FusedOp::cross_entropy, MaskKind::none, DType::bf16, 8192, 50257, false));
  CHECK(p.kernel == "stream_row<cross_entropy,bf16,vec1,v8>");
  // Short odd rows: group_rows of 8 threads for up to 16 packs, edges apart.
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::causal, DType::f32, 4096, 67, true));
  CHECK(p.kernel == "group_rows<masked_softmax:causal,f32,vec4,g8,v2,edges>");
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::causal, DType::f32, 4096, 67, false));
  CHECK(p.kernel == "group_rows<masked_softmax:causal,f32,vec1,g32,v8>");
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::boolean, DType::f16, 4096, 1, true));
  CHECK(p.kernel == "group_rows<masked_softmax:boolean,f16,vec8,g8,v2,edges>");
  // Two tensors a row position: rows of 17..32 and 33..64 packs as 8 and 16
  // threads of 4 packs (the light ops take 16 threads of 4 for both).
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::boolean, DType::bf16, 4096, 256, true));
  CHECK(p.kernel == "group_rows<masked_softmax:boolean,bf16,vec8,g8,v4>");
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::additive, DType::bf16, 4096, 512, true));
  CHECK(p.kernel == "group_rows<masked_softmax:additive,bf16,vec8,g16,v4>");
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::none, DType::bf16, 4096, 512, true));
  CHECK(p.kernel == "group_rows<masked_softmax:none,bf16,vec8,g16,v4>");
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::causal, DType::bf16, 4096, 256, true));
  CHECK(p.kernel == "group_rows<masked_softmax:causal,bf16,vec8,g16,v4>");
  // Rows of up to 16 whole packs: 4 threads of 4, but for the backwards and
  // rows with edges (8 x 2).
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::boolean, DType::bf16, 4096, 128, true));
  CHECK(p.kernel == "group_rows<masked_softmax:boolean,bf16,vec8,g4,v4>");
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax_backward, MaskKind::none, DType::bf16, 4096, 128, true));
  CHECK(p.kernel == "group_rows<masked_softmax_backward,bf16,vec8,g8,v2>");
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::boolean, DType::bf16, 4096, 127, true));
  CHECK(p.kernel == "group_rows<masked_softmax:boolean,bf16,vec8,g8,v2,edges>");
  // block_row: blocks of 64 threads for rows of whole packs, 128 with edges.
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::boolean, DType::bf16, 4096, 2048, true));
  CHECK(p.kernel == "block_row<masked_softmax:boolean,bf16,vec8,v4>");
  CHECK(p.launch.geometry.block == 64);
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax, MaskKind::boolean, DType::bf16, 4096, 2047, true));
  CHECK(p.kernel == "block_row<masked_softmax:boolean,bf16,vec8,v2,edges>");
  CHECK(p.launch.geometry.block == 128);
  p = plan_fused(h100, fused_shape(FusedOp::masked_softmax_backward, MaskKind::none, DType::f32, 64, 4097, true));
  CHECK(p.kernel.rfind("block_row<masked_softmax_backward,f32,vec4,", 0) == 0);
  CHECK(p.kernel.find(",edges>") != std::string::npos);
  // Rows of whole packs take the kernels without edges, unless some row
  // starts off a pack boundary.
  auto whole = fused_shape(FusedOp::masked_softmax, MaskKind::causal, DType::bf16, 4096, 2048, true);
  CHECK(plan_fused(h100, whole).kernel == "group_rows<masked_softmax:causal,bf16,vec8,g32,v8>");
  whole.row_edges = true;
  CHECK(plan_fused(h100, whole).kernel == "group_rows<masked_softmax:causal,bf16,vec8,g32,v8,edges>");
  whole.vector_ok = false;
  CHECK(plan_fused(h100, whole).kernel == "block_row<masked_softmax:causal,bf16,vec1,v8>");
}

TEST_CASE("fused planner: a mask tensor's widest block_row entry keeps the mask in shared memory") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  const DeviceProps mi250 = device_file("mi250x_gcd.json");
  const auto plan = [](const DeviceProps& dev, MaskKind mask, std::int64_t cols, DType dt = DType::bf16) {
    return plan_fused(dev, fused_shape(FusedOp::masked_softmax, mask, dt, 4096, cols, true));
  };
  // Sk = 32768 bf16: 4096 packs. With the mask in registers, 1024 threads
  // x 4 packs, one block an SM; with it in shared memory, 512 x 8, two:
  // 512 x 8 places of 8 bytes (boolean) or 16 (additive).
  for (MaskKind mask : {MaskKind::boolean, MaskKind::additive}) {
    CAPTURE(to_string(mask));
    const std::int64_t place = mask == MaskKind::boolean ? 8 : 16;
    auto p = plan(h100, mask, 32768);
    CHECK(p.kernel == "block_row<masked_softmax:" + to_string(mask) + ",bf16,vec8,v8,mask_in_smem>");
    CHECK(p.launch.geometry.block == 512);
    CHECK(p.launch.geometry.dynamic_smem == 512 * 8 * place);
    CHECK(p.why.find("its mask packs in shared memory (" + std::to_string(4 * place) + " KiB, cp.async)") !=
          std::string::npos);
    CHECK(p.why.find("2 blocks an SM") != std::string::npos);
    // 16384, 8192, 4096: the mask in registers gives 2, 4 and 8 blocks an
    // SM (512, 256, 128 threads x 4 packs). Over 16-bit rows it goes to
    // shared memory where that is at most 4 (boolean) or 2 (additive)
    // blocks; float32 rows keep it in registers from 2 blocks.
    for (std::int64_t cols : {16384, 8192, 4096}) {
      CAPTURE(cols);
      p = plan(h100, mask, cols);
      const bool shared = cols == 16384 || (cols == 8192 && mask == MaskKind::boolean);
      if (shared) {
        CHECK(p.kernel == "block_row<masked_softmax:" + to_string(mask) + ",bf16,vec8,v8,mask_in_smem>");
        CHECK(p.launch.geometry.block == cols / 64);
        CHECK(p.launch.geometry.dynamic_smem == cols / 64 * 8 * place);
      } else {
        CHECK(p.kernel == "block_row<masked_softmax:" + to_string(mask) + ",bf16,vec8,v4>");
        CHECK(p.launch.geometry.block == cols / 32);
        CHECK(p.launch.geometry.dynamic_smem == 0);
      }
      p = plan(h100, mask, cols / 2, DType::f32);  // the same packs of 4 floats
      CHECK(p.kernel == "block_row<masked_softmax:" + to_string(mask) + ",f32,vec4,v4>");
      CHECK(p.launch.geometry.dynamic_smem == 0);
    }
    // Odd rows take the entry with edges. f32 rows of 32768 (8192 packs)
    // fit no block with the mask in registers: 1024 x 8, one an SM, with it
    // in shared memory (4-byte boolean packs).
    CHECK(plan(h100, mask, 32767).kernel.find(",v8,mask_in_smem,edges>") != std::string::npos);
    p = plan(h100, mask, 32768, DType::f32);
    CHECK(p.kernel.find(",v8,mask_in_smem>") != std::string::npos);
    CHECK(p.launch.geometry.block == 1024);
    CHECK(p.launch.geometry.dynamic_smem == 1024 * 8 * (mask == MaskKind::boolean ? 4 : 16));
    // AMD has no copy that bypasses registers: the mask stays in them.
    p = plan(mi250, mask, 32768);
    CHECK(p.kernel.find("mask_in_smem") == std::string::npos);
    CHECK(p.launch.geometry.dynamic_smem == 0);
  }
  // DUET_PERSISTENT: one wave of the two blocks an SM, each over several rows.
  PlanOptions one_wave;
  one_wave.persistent = true;
  const auto many = fused_shape(FusedOp::masked_softmax, MaskKind::boolean, DType::bf16, 100000, 32768, true);
  CHECK(plan_fused(h100, many, one_wave).launch.geometry.grid == 2 * h100.sm_count);
  // A mask tensor read: at most 16 waves (v83); no mask tensor: 64.
  CHECK(plan_fused(h100, many).launch.geometry.grid == 16 * 2 * h100.sm_count);
  const auto scaled = fused_shape(FusedOp::masked_softmax, MaskKind::none, DType::bf16, 1000000, 128, true);
  PlanOptions sixteen, sixty_four;
  sixteen.max_waves = 16;
  sixty_four.max_waves = 64;
  CHECK(plan_fused(h100, many, sixty_four).launch.geometry.grid == 64 * 2 * h100.sm_count);
  CHECK(plan_fused(h100, scaled).launch.geometry.grid == plan_fused(h100, scaled, sixty_four).launch.geometry.grid);
  CHECK(plan_fused(h100, scaled, sixteen).launch.geometry.grid < plan_fused(h100, scaled).launch.geometry.grid);
  // DUET_WAVES: at most that many waves.
  PlanOptions three_waves;
  three_waves.max_waves = 3;
  CHECK(plan_fused(h100, many, three_waves).launch.geometry.grid == 3 * 2 * h100.sm_count);
  // Without a mask tensor nothing goes to shared memory.
  CHECK(plan(h100, MaskKind::none, 32768).launch.geometry.dynamic_smem == 0);
  CHECK(plan(h100, MaskKind::causal, 32768).launch.geometry.dynamic_smem == 0);
  CHECK(fused_mask_pack_bytes(MaskKind::boolean, DType::f32) == 4);
  CHECK(fused_mask_pack_bytes(MaskKind::boolean, DType::f16) == 8);
  CHECK(fused_mask_pack_bytes(MaskKind::additive, DType::f32) == 16);
}

TEST_CASE("fused planner: every vector shape covers the longest body of a row") {
  // A row of cols elements holds at most cols / vec whole packs (when it
  // starts on a pack); its edges need the first vec - 1 threads of the row
  // (rows of whole packs may run fewer threads than a pack's elements).
  const DeviceProps h100 = device_file("h100_sxm.json");
  const DeviceProps mi300x = device_file("mi300x.json");
  std::vector<std::int64_t> lengths;
  for (std::int64_t n = 1; n <= 300; ++n) lengths.push_back(n);
  for (std::int64_t base : {1024, 2048, 4096, 8192, 16384, 32768, 65536})
    for (std::int64_t d = -9; d <= 9; ++d) lengths.push_back(base + d);
  for (std::int64_t n : {32003, 50257, 70001, 128257}) lengths.push_back(n);
  for (const DeviceProps* dev : {&h100, &mi300x})
    for (const auto& [op, mask] : kFusedOpKinds)
      for (DType dt : {DType::f32, DType::f16, DType::bf16})
        for (std::int64_t cols : lengths) {
          if (widening(op) && dt == DType::f32) continue;  // compiled for 16-bit input only
          const FusedPlan p = plan_fused(*dev, fused_shape(op, mask, dt, 1000, cols, true));
          const FusedVariant& v = kFusedCatalogue[std::size_t(p.launch.variant)];
          const std::int64_t body = cols / v.vec;
          INFO(dev->name, " ", p.kernel, " cols ", cols);
          CHECK(v.vec == fused_vec(op, dt));  // 16 bytes of the widest tensor
          CHECK(v.edges == (cols % v.vec != 0));
          if (v.strategy == FusedStrategy::group_rows) {
            CHECK(std::int64_t(v.group) * v.vpt >= body);
            if (v.edges) CHECK(v.group >= v.vec);
          } else if (v.strategy == FusedStrategy::block_row || v.strategy == FusedStrategy::block_row_ahead) {
            CHECK(p.launch.geometry.block * v.vpt >= body);
            CHECK(p.launch.geometry.block >= (v.edges ? kFusedBlockEdgesMinThreads : kFusedBlockMinThreads));
          } else {
            CHECK((v.block == kFusedStreamBlock || (v.vec > 1 && v.block == kFusedStreamBlock / 2)));
            CHECK(p.launch.geometry.block == v.block);
          }
        }
}

TEST_CASE("fused planner: the widening softmax packs 16 bytes of float32, its tensors' offsets in their own elements") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  // Packs of 4 elements both ways: 16 bytes of float32 y, 8 of 16-bit x or dx.
  const FusedPlan fwd = plan_fused(h100, fused_shape(FusedOp::widening_softmax, MaskKind::none, DType::bf16, 64, 4096, true));
  CHECK(kFusedCatalogue[std::size_t(fwd.launch.variant)].vec == 4);
  const FusedPlan bwd =
      plan_fused(h100, fused_shape(FusedOp::widening_softmax_backward, MaskKind::none, DType::f16, 64, 4096, true));
  CHECK(kFusedCatalogue[std::size_t(bwd.launch.variant)].vec == 4);
  CHECK(bwd.kernel.find("widening_softmax_backward,f16,vec4") != std::string::npos);
  CHECK_THROWS_AS(plan_fused(h100, fused_shape(FusedOp::widening_softmax, MaskKind::none, DType::f32, 64, 4096, true)),
                  Error);
  CHECK_THROWS_AS(plan_fused(h100, fused_shape(FusedOp::shard_combine, MaskKind::none, DType::f32, 64, 4096, true)),
                  Error);

  FusedArgs a;
  a.op = FusedOp::widening_softmax;
  a.dtype = DType::bf16;
  a.rows = 16;
  a.cols = 1025;
  a.x = at(3, 2);
  a.out = at(3, 4);  // each 3 of its elements past a 256-byte boundary
  a.x_stride = a.out_stride = 1025;
  CHECK(detail::fused_vector_ok(a));
  CHECK(detail::fused_row_edges(a));
  a.out = at(5, 4);  // 5 floats on: 2 more than x's 3, not a pack of 4
  CHECK_FALSE(detail::fused_vector_ok(a));
  a.out = at(7, 4);  // 7 floats on: a whole pack of 4 more
  CHECK(detail::fused_vector_ok(a));
  a.out_stride = 1027;
  CHECK_FALSE(detail::fused_vector_ok(a));  // strides 2 apart

  FusedArgs b;
  b.op = FusedOp::widening_softmax_backward;
  b.dtype = DType::bf16;
  b.rows = 8;
  b.cols = 64;
  b.x = at(1, 4);  // y and dy float32, dx bf16: offsets modulo 4
  b.dy = at(5, 4);
  b.out = at(9, 2);
  b.x_stride = b.dy_stride = b.out_stride = 64;
  CHECK(detail::fused_vector_ok(b));
  CHECK(detail::fused_row_edges(b));
  b.out = at(2, 2);
  CHECK_FALSE(detail::fused_vector_ok(b));
  b.x = at(0, 4);
  b.dy = at(4, 4);
  b.out = at(8, 2);
  CHECK(detail::fused_vector_ok(b));
  CHECK_FALSE(detail::fused_row_edges(b));
}

TEST_CASE("fused planner: stream_row keeps what fits of a row in shared memory for its writing pass") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  const DeviceProps mi250 = device_file("mi250x_gcd.json");
  const auto plan = [](const DeviceProps& dev, FusedOp op, MaskKind mask, DType dt, std::int64_t cols,
                       const PlanOptions& options = {}) {
    return plan_fused(dev, fused_shape(op, mask, dt, 1000, cols, true), options);
  };
  // A slot is one Item a thread of the 1024: 16 KiB of bf16 logits.
  CHECK(fused_item_bytes(FusedOp::cross_entropy, MaskKind::none, DType::bf16) == 16);
  CHECK(fused_item_bytes(FusedOp::masked_softmax, MaskKind::causal, DType::bf16) == 16);
  CHECK(fused_item_bytes(FusedOp::masked_softmax, MaskKind::boolean, DType::bf16) == 32);  // 16 + 8, aligned
  CHECK(fused_item_bytes(FusedOp::masked_softmax, MaskKind::additive, DType::f32) == 32);
  CHECK(fused_item_bytes(FusedOp::masked_softmax_backward, MaskKind::none, DType::f16) == 32);
  CHECK(fused_item_bytes(FusedOp::widening_softmax, MaskKind::none, DType::bf16) == 8);
  CHECK(fused_item_bytes(FusedOp::widening_softmax_backward, MaskKind::none, DType::bf16) == 32);

  // 8192 x 128256 bf16 logits: 16032 packs, 15.7 slots; the H100's opt-in
  // 232448 bytes less the 1 KiB scratch hold 14 of them.
  const std::int64_t optin = h100.smem_per_block_optin;
  REQUIRE(optin == 232448);
  auto p = plan(h100, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 128256);
  CHECK(p.kernel == "stream_row<cross_entropy,bf16,vec8,v4>");
  CHECK(p.launch.geometry.dynamic_smem == 14 * 16384);
  CHECK(p.launch.geometry.dynamic_smem + kFusedScratchBytes <= optin);
  CHECK(p.why.find("its first 14336 packs kept in shared memory between them (224 KiB, copied there by cp.async, a "
                   "row's all in flight at once), the rest read again from L2") != std::string::npos);
  // cp.async fills the stash of the ops whose Item is x's 16-byte pack
  // alone, on NVIDIA sm_80+: not the widening softmax's 8-byte packs, not
  // two tensors a position, not a device without cp.async.
  CHECK(fused_stash_by_copy(FusedOp::cross_entropy, MaskKind::none, DType::f32));
  CHECK(fused_stash_by_copy(FusedOp::masked_softmax, MaskKind::none, DType::f16));
  CHECK_FALSE(fused_stash_by_copy(FusedOp::masked_softmax, MaskKind::boolean, DType::bf16));
  CHECK_FALSE(fused_stash_by_copy(FusedOp::masked_softmax_backward, MaskKind::none, DType::bf16));
  CHECK_FALSE(fused_stash_by_copy(FusedOp::widening_softmax, MaskKind::none, DType::bf16));
  for (const auto& [op, mask] : {std::pair{FusedOp::widening_softmax, MaskKind::none},
                                 std::pair{FusedOp::masked_softmax_backward, MaskKind::none},
                                 std::pair{FusedOp::masked_softmax, MaskKind::boolean}}) {
    const FusedPlan q = plan(h100, op, mask, DType::bf16, 1 << 18);
    INFO(q.kernel, ": ", q.why);
    CHECK(q.launch.geometry.dynamic_smem > 0);
    CHECK(q.why.find("cp.async") == std::string::npos);
  }
  DeviceProps a100_like = h100;
  a100_like.cc_major = 8;
  CHECK(plan(a100_like, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 128256).why.find("cp.async") !=
        std::string::npos);
  DeviceProps volta_like = h100;
  volta_like.cc_major = 7;
  CHECK(plan(volta_like, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 128256).why.find("cp.async") ==
        std::string::npos);
  // Two blocks of 512 an SM where their rows move at most twice L2: 264
  // rows of 70001 bf16 logits and their gradient move 70 MiB; each block
  // keeps its share of the SM's shared memory, 14 slots of 8 KiB.
  p = plan(h100, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 70001);
  CHECK(p.kernel == "stream_row<cross_entropy,bf16,vec8,v4,b512,edges>");
  CHECK(p.launch.geometry.block == 512);
  CHECK(p.launch.geometry.grid == 264);
  CHECK(p.launch.geometry.dynamic_smem == 14 * 8192);
  CHECK(p.why.find("2 blocks of 512 an SM (their rows move 70 MiB, within twice L2's 50 MiB") != std::string::npos);
  CHECK(p.why.find("its first 7168 packs kept in shared memory") != std::string::npos);
  // In place (the gradient into the logits) one block of 1024 an SM. 132
  // rows of 128256 classes move 34 MiB, within L2: a stash cp.async fills
  // is kept all the same (it puts a row's bytes in flight at once), one
  // filled through registers (sm_7x) is not.
  FusedShape in_place = fused_shape(FusedOp::cross_entropy, MaskKind::none, DType::bf16, 1000, 128256, true);
  in_place.in_place = true;
  CHECK(plan_fused(h100, in_place).kernel == "stream_row<cross_entropy,bf16,vec8,v4>");
  CHECK(plan_fused(h100, in_place).launch.geometry.block == 1024);
  CHECK(plan_fused(h100, in_place).launch.geometry.dynamic_smem == 14 * 16384);
  CHECK(plan_fused(volta_like, in_place).launch.geometry.dynamic_smem == 0);
  // The same for rows whose passes L2 serves: 132 rows of 70001 (one a
  // block of 1024, too few for two blocks an SM) move 35 MiB.
  const FusedShape served = fused_shape(FusedOp::cross_entropy, MaskKind::none, DType::bf16, 132, 70001, true);
  CHECK(plan_fused(h100, served).launch.geometry.dynamic_smem == 9 * 16384);
  p = plan_fused(volta_like, served);
  CHECK(p.launch.geometry.block == 1024);
  CHECK(p.launch.geometry.dynamic_smem == 0);
  CHECK(p.why.find("(the rows between their passes move 35 MiB, within L2's 50 MiB)") != std::string::npos);
  // DUET_FUSED_STASH=always keeps that one too.
  PlanOptions always;
  always.fused_stash = FusedStash::always;
  p = plan_fused(volta_like, served, always);
  CHECK(p.launch.geometry.dynamic_smem == 9 * 16384);
  CHECK(p.why.find("the rows between their passes move 35 MiB, within L2's 50 MiB (DUET_FUSED_STASH=always)") !=
        std::string::npos);
  // And few rows: 64 rows of 128256 move 32 MiB.
  const FusedShape few = fused_shape(FusedOp::cross_entropy, MaskKind::none, DType::bf16, 64, 128256, true);
  CHECK(plan_fused(h100, few).launch.geometry.dynamic_smem == 14 * 16384);
  CHECK(plan_fused(volta_like, few).launch.geometry.dynamic_smem == 0);
  // A row that fits whole takes only its slots: 50257 f32 -> 12564 packs,
  // 13 slots (132 rows move 51 MiB).
  p = plan(h100, FusedOp::cross_entropy, MaskKind::none, DType::f32, 50257);
  CHECK(p.kernel == "stream_row<cross_entropy,f32,vec4,v4,edges>");
  CHECK(p.launch.geometry.dynamic_smem == 13 * 16384);
  CHECK(p.why.find("the whole row kept in shared memory") != std::string::npos);
  // An unknown L2 size: the stash wherever it fits.
  DeviceProps no_l2 = h100;
  no_l2.l2_bytes = 0;
  CHECK(plan(no_l2, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 70001).launch.geometry.dynamic_smem ==
        9 * 16384);
  // Two tensors a position: slots of 32 KiB.
  p = plan(h100, FusedOp::masked_softmax_backward, MaskKind::none, DType::bf16, 1 << 20);
  CHECK(p.launch.geometry.dynamic_smem == 7 * 32768);
  // The loss alone writes nothing; the backward and a shard's softmax
  // reduce nothing: one pass each, no stash.
  FusedShape loss_only = fused_shape(FusedOp::cross_entropy, MaskKind::none, DType::bf16, 1000, 128256, true);
  loss_only.gradient = false;
  CHECK(plan_fused(h100, loss_only).launch.geometry.dynamic_smem == 0);
  CHECK(plan(h100, FusedOp::cross_entropy_backward, MaskKind::none, DType::bf16, 128256).launch.geometry.dynamic_smem ==
        0);
  CHECK(plan(h100, FusedOp::shard_softmax, MaskKind::none, DType::f32, 1 << 20).launch.geometry.dynamic_smem == 0);
  // The scalar path keeps none; nor do group_rows and block_row.
  CHECK(plan_fused(h100, fused_shape(FusedOp::cross_entropy, MaskKind::none, DType::bf16, 1000, 128256, false))
            .launch.geometry.dynamic_smem == 0);
  CHECK(plan(h100, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 32000).launch.geometry.dynamic_smem == 0);
  // A CDNA2 GCD's 64 KiB of LDS: 3 slots beside the scratch.
  CHECK(plan(mi250, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 128256).launch.geometry.dynamic_smem ==
        3 * 16384);
  // Switched off (DUET_FUSED_STASH=0): every chunk again from L2.
  PlanOptions off;
  off.fused_stash = FusedStash::off;
  p = plan(h100, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 128256, off);
  CHECK(p.launch.geometry.dynamic_smem == 0);
  CHECK(p.why.find("(DUET_FUSED_STASH=0)") != std::string::npos);
  // DUET_STRATEGY=split_stream: stream_row also for rows block_row holds
  // (32000 bf16 logits), one block of 1024 or two of 512 an SM as the rule
  // says, its whole row in the stash cp.async fills; group_rows' rows stay.
  PlanOptions streamed;
  streamed.force_stream = true;
  CHECK(plan(h100, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 32000).kernel ==
        "block_row<cross_entropy,bf16,vec8,v8>");
  p = plan(h100, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 32000, streamed);
  CHECK(p.kernel.rfind("stream_row<cross_entropy,bf16,vec8,v4", 0) == 0);
  CHECK(p.why.find("the whole row kept in shared memory") != std::string::npos);
  CHECK(p.why.find("row of 4000 packs of 8 streamed (DUET_STRATEGY=split_stream): one block a row") !=
        std::string::npos);
  CHECK(plan(h100, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 1024, streamed).kernel.rfind("group_rows<",
                                                                                                       0) == 0);
  // No opt-in reported: none.
  DeviceProps bare = h100;
  bare.smem_per_block_optin = 0;
  CHECK(plan(bare, FusedOp::cross_entropy, MaskKind::none, DType::bf16, 128256).launch.geometry.dynamic_smem == 0);
}

TEST_CASE("fused planner: cluster_row cuts rows past what stream_row finds again in L2 over a cluster") {
  const DeviceProps h200 = device_file("h200.json");
  const auto ce = [](DType dt, std::int64_t rows, std::int64_t cols) {
    FusedShape s = fused_shape(FusedOp::cross_entropy, MaskKind::none, dt, rows, cols, true);
    s.gradient = true;
    return s;
  };
  // 256 rows of 2^20 float32 logits: 262144 packs. stream_row's 132
  // resident rows would read 499 MiB again, past the 60 MiB L2. Blocks of
  // 512, two an SM: a block's half of the SM's shared memory holds 13
  // slots of 8 KiB beside the scratch and the exchange. Over 8 blocks the
  // 264 resident blocks would read 105 MiB of their slices again, past L2:
  // 16 blocks, slices of 16384 packs, 6656 of them stashed; 16 clusters.
  REQUIRE(kFusedClusterAccsBytes == 528);
  REQUIRE(kFusedClusterBlock == 512);
  FusedPlan p = plan_fused(h200, ce(DType::f32, 256, 1 << 20));
  INFO(p.why);
  CHECK(p.kernel == "cluster_row<cross_entropy,f32,vec4,v4,b512>");
  CHECK(p.launch.cluster_blocks == 16);
  CHECK(p.launch.geometry.block == 512);
  CHECK(p.launch.geometry.grid == 16 * 16);
  CHECK(p.launch.geometry.dynamic_smem == 13 * 8192);
  CHECK(p.launch.geometry.dynamic_smem + kFusedScratchBytes + kFusedClusterAccsBytes <=
        h200.smem_per_sm / 2 - h200.smem_reserved_per_block);
  CHECK(p.why.find("(499 MiB of the resident rows read again, past L2's 60 MiB): cut over a cluster of 16 blocks of "
                   "512 threads, slices of 16384 packs, each its first 6656 packs kept in shared memory") !=
        std::string::npos);
  CHECK(p.why.find("16 clusters walking 256 rows") != std::string::npos);
  // bf16: 131072 packs; over 8 blocks the slices read 41 MB again, within
  // L2: 8 blocks, 33 clusters of them.
  p = plan_fused(h200, ce(DType::bf16, 256, 1 << 20));
  CHECK(p.kernel == "cluster_row<cross_entropy,bf16,vec8,v4,b512>");
  CHECK(p.launch.cluster_blocks == 8);
  CHECK(p.launch.geometry.grid == 33 * 8);
  CHECK(p.launch.geometry.dynamic_smem == 13 * 8192);
  CHECK(p.why.find("slices of 16384 packs, each its first 6656 packs kept") != std::string::npos);
  // Few rows read little again: 5 rows, 9 MiB, stay on stream_row; with
  // DUET_CLUSTER=prefer a cluster a row.
  CHECK(plan_fused(h200, ce(DType::bf16, 5, 1 << 20)).kernel.rfind("stream_row<", 0) == 0);
  PlanOptions prefer;
  prefer.prefer_clusters = true;
  p = plan_fused(h200, ce(DType::bf16, 5, 1 << 20), prefer);
  CHECK(p.launch.geometry.grid == 5 * 8);
  CHECK(p.why.find("(DUET_CLUSTER=prefer)") != std::string::npos);
  // DUET_CLUSTER=portable: 8 blocks for the float32 rows too, their slices
  // read again from wherever they are.
  PlanOptions portable;
  portable.max_cluster_blocks = kPortableClusterBlocks;
  p = plan_fused(h200, ce(DType::f32, 256, 1 << 20), portable);
  CHECK(p.launch.cluster_blocks == 8);
  CHECK(p.launch.geometry.grid == 33 * 8);
  CHECK(p.why.find("slices of 32768 packs, each its first 6656 packs kept") != std::string::npos);
  // DUET_CLUSTER_BLOCKS=n: from n blocks. 50000 packs: over 2 blocks the
  // slices would read 74 MiB again, over 4 blocks 25 MiB; 16 all the same.
  PlanOptions from;
  from.prefer_clusters = true;
  from.min_cluster_blocks = 2;
  CHECK(plan_fused(h200, ce(DType::f32, 64, 4 * 50000), from).launch.cluster_blocks == 4);
  from.min_cluster_blocks = 16;
  CHECK(plan_fused(h200, ce(DType::f32, 64, 4 * 50000), from).launch.cluster_blocks == 16);
  from.min_cluster_blocks = 0;
  CHECK(plan_fused(h200, ce(DType::f32, 64, 4 * 50000), from).launch.cluster_blocks == 8);  // slices kept whole
  CHECK(plan_fused(h200, ce(DType::f32, 64, 4 * 50000)).kernel.rfind("stream_row<", 0) == 0);  // within L2
  // Llama 3's vocabulary stays on stream_row: its rows past the stash are 3.6 MiB.
  CHECK(plan_fused(h200, ce(DType::bf16, 8192, 128256)).kernel == "stream_row<cross_entropy,bf16,vec8,v4>");
  // Not where: clusters are off (DUET_CLUSTER=0), the device has none, the
  // loss alone (one pass, nothing read again), rows off the pack grid (no
  // entry with edges), the scalar path.
  PlanOptions no_clusters;
  no_clusters.allow_clusters = false;
  CHECK(plan_fused(h200, ce(DType::f32, 256, 1 << 20), no_clusters).kernel == "stream_row<cross_entropy,f32,vec4,v4>");
  CHECK(plan_fused(device_file("a100_sxm.json"), ce(DType::f32, 256, 1 << 20)).kernel.rfind("stream_row<", 0) == 0);
  FusedShape loss_only = ce(DType::f32, 256, 1 << 20);
  loss_only.gradient = false;
  CHECK(plan_fused(h200, loss_only).kernel.rfind("stream_row<", 0) == 0);
  CHECK(plan_fused(h200, ce(DType::f32, 256, (1 << 20) + 1)).kernel == "stream_row<cross_entropy,f32,vec4,v4,edges>");
  FusedShape scalar = ce(DType::f32, 256, 1 << 20);
  scalar.vector_ok = false;
  CHECK(plan_fused(h200, scalar).kernel.rfind("stream_row<", 0) == 0);
  // The catalogue's cluster entries: the cross-entropy forward, each dtype.
  int entries = 0;
  for (const FusedVariant& v : kFusedCatalogue)
    if (v.strategy == FusedStrategy::cluster_row) {
      ++entries;
      CHECK(v.op == FusedOp::cross_entropy);
      CHECK_FALSE(v.edges);
      CHECK(v.block == kFusedClusterBlock);
    }
  CHECK(entries == kFusedClusterEntries);
}

TEST_CASE("fused planner: block_row_ahead copies the next row ahead where the cross-entropy row holds one block an SM") {
  const DeviceProps h200 = device_file("h200.json");
  const auto ce = [](DType dt, std::int64_t rows, std::int64_t cols, bool gradient = true) {
    FusedShape s = fused_shape(FusedOp::cross_entropy, MaskKind::none, dt, rows, cols, true);
    s.gradient = gradient;
    return s;
  };
  // GPT-2's vocabulary, 50257 bf16 logits, the loss alone: 6282 packs and
  // edges; block_row holds the row in 832 threads x 8 packs at 64
  // registers, one block an SM. Each block copies its next row's 832 x 8
  // packs (104 KiB) ahead; the grid one wave of the 132 SMs.
  FusedPlan p = plan_fused(h200, ce(DType::bf16, 8192, 50257, false));
  INFO(p.why);
  CHECK(p.kernel == "block_row_ahead<cross_entropy,bf16,vec8,v8,edges>");
  CHECK(p.launch.geometry.block == 832);
  CHECK(p.launch.geometry.dynamic_smem == 832 * 8 * 16);
  CHECK(p.launch.geometry.grid == 132);
  CHECK(p.why.find("one block an SM, so each block copies its next row into shared memory (104 KiB, cp.async)") !=
        std::string::npos);
  // Rows of whole packs (float32 24000: 6000 packs, 768 threads), and
  // blocks of 1024 (float32 32000: 8000 packs).
  CHECK(plan_fused(h200, ce(DType::f32, 8192, 24000, false)).kernel == "block_row_ahead<cross_entropy,f32,vec4,v8>");
  CHECK(plan_fused(h200, ce(DType::bf16, 8192, 50256, false)).kernel == "block_row_ahead<cross_entropy,bf16,vec8,v8>");
  p = plan_fused(h200, ce(DType::f32, 8192, 32000, false));
  CHECK(p.kernel == "block_row_ahead<cross_entropy,f32,vec4,v8>");
  CHECK(p.launch.geometry.block == 1024);
  // The gradient written: block_row, unless forced (DUET_FUSED_AHEAD=always),
  // on any device with cp.async.
  CHECK(plan_fused(h200, ce(DType::bf16, 8192, 50257)).kernel == "block_row<cross_entropy,bf16,vec8,v8,edges>");
  CHECK(plan_fused(device_file("h100_sxm.json"), ce(DType::f32, 8192, 20001)).kernel ==
        "block_row<cross_entropy,f32,vec4,v8,edges>");
  PlanOptions forced;
  forced.force_fused_ahead = true;
  p = plan_fused(h200, ce(DType::bf16, 8192, 50257), forced);
  CHECK(p.kernel == "block_row_ahead<cross_entropy,bf16,vec8,v8,edges>");
  CHECK(p.launch.geometry.dynamic_smem == 832 * 8 * 16);
  CHECK(plan_fused(h200, ce(DType::f32, 8192, 32000), forced).kernel == "block_row_ahead<cross_entropy,f32,vec4,v8>");
  // Not where: two blocks an SM hold the row (Llama 2's 32000 bf16: 4000
  // packs in 512 threads), no more rows than blocks, DUET_FUSED_AHEAD=0
  // (forced or not), the backward, a device without cp.async (AMD).
  CHECK(plan_fused(h200, ce(DType::bf16, 8192, 32000, false)).kernel == "block_row<cross_entropy,bf16,vec8,v8>");
  CHECK(plan_fused(h200, ce(DType::bf16, 132, 50257, false)).kernel == "block_row<cross_entropy,bf16,vec8,v8,edges>");
  PlanOptions off = forced;
  off.fused_ahead = false;
  p = plan_fused(h200, ce(DType::bf16, 8192, 50257, false), off);
  CHECK(p.kernel == "block_row<cross_entropy,bf16,vec8,v8,edges>");
  CHECK(p.launch.geometry.dynamic_smem == 0);
  CHECK(p.launch.geometry.grid == 8192);
  CHECK(plan_fused(h200, fused_shape(FusedOp::cross_entropy_backward, MaskKind::none, DType::bf16, 8192, 50257, true))
            .kernel.rfind("block_row<", 0) == 0);
  CHECK(plan_fused(device_file("mi300x.json"), ce(DType::bf16, 8192, 50257, false), forced).kernel.rfind("block_row<", 0) ==
        0);
  // sm_80 has cp.async: the A100 takes it too.
  CHECK(plan_fused(device_file("a100_sxm.json"), ce(DType::bf16, 8192, 50257, false)).kernel.rfind("block_row_ahead<", 0) ==
        0);
  // The catalogue's entries: the cross-entropy forward, each dtype, with
  // and without edges, at block_row's most packs a thread.
  int entries = 0;
  for (const FusedVariant& v : kFusedCatalogue)
    if (v.strategy == FusedStrategy::block_row_ahead) {
      ++entries;
      CHECK(v.op == FusedOp::cross_entropy);
      CHECK(v.vpt == kFusedAheadVpt);
      CHECK(v.vec > 1);
    }
  CHECK(entries == kFusedAheadEntries);
}

TEST_CASE("fused_vector_ok: one offset within a pack for every tensor of a row") {
  FusedArgs a;
  a.op = FusedOp::cross_entropy;
  a.dtype = DType::bf16;
  a.rows = 16;
  a.cols = 50257;
  a.x = at(0, 2);
  a.x_stride = 50257;
  CHECK(detail::fused_vector_ok(a));  // dense odd rows: each row's head differs, but x is alone
  a.out = at(8, 2);
  a.out_stride = 50257 + 16;
  CHECK(detail::fused_vector_ok(a));  // the gradient 8 elements (a pack) on, strides a multiple of 8 apart
  a.out = at(3, 2);
  CHECK_FALSE(detail::fused_vector_ok(a));  // 3 elements on
  a.out = at(8, 2);
  a.out_stride = 50257 + 1;
  CHECK_FALSE(detail::fused_vector_ok(a));  // strides 1 apart
  a.rows = 1;
  CHECK(detail::fused_vector_ok(a));  // one row: its stride never counts
  a.rows = 16;
  a.out_stride = 50257;
  a.x = a.out = at(5, 2);
  CHECK(detail::fused_vector_ok(a));  // in place at any offset
  a.x = static_cast<const char*>(at(5, 2)) + 1;
  CHECK_FALSE(detail::fused_vector_ok(a));  // not on an element
  a.dtype = DType::f32;  // 4 a pack: 4 elements on is a pack on
  a.x = at(0, 4);
  a.out = at(4, 4);
  a.x_stride = 37;
  a.out_stride = 41;
  CHECK(detail::fused_vector_ok(a));

  // The backward's dy.
  FusedArgs b;
  b.op = FusedOp::masked_softmax_backward;
  b.dtype = DType::f16;
  b.rows = 4;
  b.cols = 77;
  b.x = at(1, 2);
  b.out = at(9, 2);
  b.dy = at(17, 2);
  b.x_stride = b.out_stride = b.dy_stride = 77;
  CHECK(detail::fused_vector_ok(b));
  b.dy = at(2, 2);
  CHECK_FALSE(detail::fused_vector_ok(b));

  // Masks: [B, H, Sq, Sk] rows of x; a mask's strides must step as x's
  // rows do over every dimension with more than one index.
  FusedArgs m;
  m.op = FusedOp::masked_softmax;
  m.dtype = DType::bf16;
  m.mask_kind = MaskKind::boolean;
  const std::int64_t B = 2, H = 3, Sq = 5, Sk = 77;
  m.rows = B * H * Sq;
  m.cols = Sk;
  m.heads = H;
  m.seq_q = Sq;
  m.x = at(3, 2);
  m.out = at(3, 2);
  m.x_stride = m.out_stride = Sk;
  m.mask = at(3, 1);
  m.mask_row_stride = Sk;
  m.mask_head_stride = Sq * Sk;
  m.mask_batch_stride = H * Sq * Sk;
  CHECK(detail::fused_vector_ok(m));  // [B, H, Sq, Sk]
  m.mask = at(4, 1);
  CHECK_FALSE(detail::fused_vector_ok(m));  // the mask a byte further on
  m.mask = at(3, 1);
  m.mask_head_stride = 0;
  m.mask_batch_stride = Sq * Sk;
  CHECK_FALSE(detail::fused_vector_ok(m));  // [B, 1, Sq, Sk]: a head moves x by Sq * Sk = 385, the mask by 0
  m.heads = 1;
  m.rows = B * Sq;
  CHECK(detail::fused_vector_ok(m));  // ... unless there is one head
  m.heads = H;
  m.rows = B * H * 8;
  m.seq_q = 8;
  m.mask_batch_stride = 8 * Sk;
  CHECK(detail::fused_vector_ok(m));  // [B, 1, 8, Sk]: a head moves x by 8 * Sk, a whole number of packs
  m.mask_row_stride = 0;
  m.mask_batch_stride = Sk;
  CHECK_FALSE(detail::fused_vector_ok(m));  // [B, 1, 1, Sk] key padding: a query moves x by Sk, the mask by 0
  m.cols = m.x_stride = m.out_stride = m.mask_batch_stride = 80;
  CHECK(detail::fused_vector_ok(m));  // ... fine where Sk is a whole number of packs
  m.mask_kind = MaskKind::additive;
  m.mask = at(3, 2);
  CHECK(detail::fused_vector_ok(m));  // an additive mask counts in elements of the scores' dtype
  m.mask = at(3, 1);
  CHECK_FALSE(detail::fused_vector_ok(m));  // not on an element
  m.mask_kind = MaskKind::causal;
  m.mask = nullptr;
  CHECK(detail::fused_vector_ok(m));  // causal reads no tensor

  // Rows of whole packs from a pack boundary: no edges.
  FusedArgs w;
  w.op = FusedOp::masked_softmax;
  w.dtype = DType::f32;
  w.rows = 3;
  w.cols = 64;
  w.x = at(0, 4);
  w.out = at(4, 4);
  w.x_stride = w.out_stride = 68;
  CHECK_FALSE(detail::fused_row_edges(w));
  w.x = at(1, 4);
  w.out = at(5, 4);
  CHECK(detail::fused_row_edges(w));  // every row a float past a boundary
  w.x = at(0, 4);
  w.x_stride = 65;
  w.out = at(0, 4);
  w.out_stride = 69;
  CHECK(detail::fused_row_edges(w));  // rows 1 and 2 off the boundary
  w.rows = 1;
  CHECK_FALSE(detail::fused_row_edges(w));  // one row: its stride never counts
  w.cols = 63;
  CHECK(detail::fused_row_edges(w));  // a tail
}

TEST_CASE("plan options: every switch from its environment variable, malformed values named, set from code") {
  struct Var {
    const char* name;
    const char* value;
  };
  // Sets the variables for one read, then restores the environment.
  auto with_env = [](std::initializer_list<Var> vars) {
    for (const auto& v : vars) setenv(v.name, v.value, 1);
    try {
      const PlanOptions o = plan_options_from_environment();
      for (const auto& v : vars) unsetenv(v.name);
      return o;
    } catch (...) {
      for (const auto& v : vars) unsetenv(v.name);
      throw;
    }
  };
  // The variables the test runs under are put back at its end.
  struct Saved {
    std::vector<std::pair<std::string, std::string>> vars;
    ~Saved() {
      for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
    }
  } saved;
  for (const char* name : {"DUET_CLUSTER", "DUET_CLUSTER_BLOCKS", "DUET_STRATEGY", "DUET_STREAM_SLACK",
                           "DUET_BLOCK_VPT", "DUET_PERSISTENT", "DUET_FUSED_STASH", "DUET_INTERLEAVED_STASH",
                           "DUET_INTERLEAVED_TILE", "DUET_INTERLEAVED_STREAM", "DUET_STREAM_TILES", "DUET_GRID_ROW", "DUET_GRID_BLOCKS",
                           "DUET_WAVES", "DUET_FUSED_AHEAD"})
    if (const char* v = std::getenv(name)) {
      saved.vars.emplace_back(name, v);
      unsetenv(name);
    }
  const PlanOptions none = plan_options_from_environment();
  CHECK(none.allow_clusters);
  CHECK(!none.prefer_clusters);
  CHECK(none.max_cluster_blocks == kMaxClusterBlocks);
  CHECK(!none.force_split);
  CHECK(!none.persistent);
  CHECK(none.allow_grid_row);
  CHECK(!none.force_grid_row);
  CHECK(none.grid_row_blocks == 0);
  CHECK(none.fused_stash == FusedStash::planned);
  CHECK(none.interleaved_stash == InterleavedStash::past_registers);
  CHECK(!with_env({{"DUET_CLUSTER", "0"}}).allow_clusters);
  CHECK(with_env({{"DUET_CLUSTER", "portable"}}).max_cluster_blocks == kPortableClusterBlocks);
  CHECK(with_env({{"DUET_CLUSTER", "prefer"}}).prefer_clusters);
  CHECK(with_env({{"DUET_CLUSTER_BLOCKS", "4"}}).min_cluster_blocks == 4);
  CHECK(with_env({{"DUET_STRATEGY", "split_row"}}).force_split);
  CHECK(with_env({{"DUET_STRATEGY", "split_stream"}}).force_stream);
  CHECK(with_env({{"DUET_STRATEGY", "grid_row"}}).force_grid_row);
  CHECK(!with_env({{"DUET_GRID_ROW", "0"}}).allow_grid_row);
  CHECK(with_env({{"DUET_GRID_ROW", "1"}}).allow_grid_row);
  CHECK(with_env({{"DUET_GRID_BLOCKS", "33"}}).grid_row_blocks == 33);
  CHECK(with_env({{"DUET_STREAM_SLACK", "12"}}).stream_slack == 12);
  CHECK(with_env({{"DUET_BLOCK_VPT", "2"}}).block_vpt == 2);
  CHECK(with_env({{"DUET_PERSISTENT", "1"}}).persistent);
  CHECK(none.max_waves == 0);
  CHECK(with_env({{"DUET_WAVES", "8"}}).max_waves == 8);
  CHECK(with_env({{"DUET_FUSED_STASH", "0"}}).fused_stash == FusedStash::off);
  CHECK(with_env({{"DUET_FUSED_STASH", "1"}}).fused_stash == FusedStash::planned);
  CHECK(with_env({{"DUET_FUSED_STASH", "always"}}).fused_stash == FusedStash::always);
  CHECK(none.fused_ahead);
  CHECK(!with_env({{"DUET_FUSED_AHEAD", "0"}}).fused_ahead);
  CHECK(with_env({{"DUET_FUSED_AHEAD", "1"}}).fused_ahead);
  CHECK(!none.force_fused_ahead);
  CHECK(!with_env({{"DUET_FUSED_AHEAD", "1"}}).force_fused_ahead);
  CHECK(with_env({{"DUET_FUSED_AHEAD", "always"}}).force_fused_ahead);
  CHECK(with_env({{"DUET_FUSED_AHEAD", "always"}}).fused_ahead);
  CHECK(with_env({{"DUET_INTERLEAVED_STASH", "0"}}).interleaved_stash == InterleavedStash::off);
  CHECK(with_env({{"DUET_INTERLEAVED_STASH", "1"}}).interleaved_stash == InterleavedStash::past_registers);
  CHECK(with_env({{"DUET_INTERLEAVED_STASH", "always"}}).interleaved_stash == InterleavedStash::always);
  CHECK(none.interleaved_tile_bytes == 0);
  CHECK(with_env({{"DUET_INTERLEAVED_TILE", "16"}}).interleaved_tile_bytes == 16);
  CHECK(none.allow_interleaved_stream);
  CHECK(!with_env({{"DUET_INTERLEAVED_STREAM", "0"}}).allow_interleaved_stream);
  CHECK(with_env({{"DUET_INTERLEAVED_STREAM", "1"}}).allow_interleaved_stream);
  CHECK(none.allow_interleaved_slabs);
  CHECK(!none.force_interleaved_slabs);
  CHECK(!with_env({{"DUET_INTERLEAVED_SLABS", "0"}}).allow_interleaved_slabs);
  CHECK(with_env({{"DUET_INTERLEAVED_SLABS", "always"}}).force_interleaved_slabs);
  CHECK(none.interleaved_stream_tiles == 0);
  CHECK(with_env({{"DUET_STREAM_TILES", "2"}}).interleaved_stream_tiles == 2);
  for (const Var& bad : {Var{"DUET_CLUSTER", "yes"}, Var{"DUET_CLUSTER_BLOCKS", "3"}, Var{"DUET_STRATEGY", "split"},
                         Var{"DUET_STREAM_SLACK", "12x"}, Var{"DUET_STREAM_SLACK", "-1"}, Var{"DUET_BLOCK_VPT", "16"},
                         Var{"DUET_PERSISTENT", "true"}, Var{"DUET_FUSED_STASH", "off"},
                         Var{"DUET_INTERLEAVED_STASH", "no"}, Var{"DUET_INTERLEAVED_TILE", "48"},
                         Var{"DUET_INTERLEAVED_STREAM", "off"}, Var{"DUET_STREAM_TILES", "0"},
                         Var{"DUET_GRID_ROW", "off"}, Var{"DUET_GRID_BLOCKS", "0"}, Var{"DUET_GRID_BLOCKS", "4x"},
                         Var{"DUET_GRID_BLOCKS", "99999999999"}, Var{"DUET_WAVES", "0"},
                         Var{"DUET_WAVES", "-2"}, Var{"DUET_WAVES", "eight"}}) {
    INFO(bad.name, "=", bad.value);
    try {
      (void)with_env({bad});
      FAIL_CHECK("accepted");
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK(std::string(e.what()).find(bad.name) != std::string::npos);
      CHECK(std::string(e.what()).find(std::string("'") + bad.value + "'") != std::string::npos);
    }
  }
  // The one-wave grid from the option: one wave of resident blocks.
  const DeviceProps h100 = device_file("h100_sxm.json");
  if (recorded_target_for(h100).empty()) return;
  SoftmaxShape s{DType::f32, false, 1 << 20, 1024, true};
  const Plan waves = plan_softmax(h100, s, recorded(h100));
  s.options.persistent = true;
  const Plan one = plan_softmax(h100, s, recorded(h100));
  CHECK(one.persistent);
  CHECK(one.geometry.grid == one.resident_blocks);
  CHECK(waves.geometry.grid == 64 * waves.resident_blocks);
  // At most n waves from the option; families of one wave keep theirs.
  s.options.persistent = false;
  s.options.max_waves = 3;
  const Plan three = plan_softmax(h100, s, recorded(h100));
  CHECK(three.max_waves == 3);
  CHECK(three.geometry.grid == 3 * three.resident_blocks);
  SoftmaxShape wide{DType::f32, false, 4096, 131072, true};
  wide.options = s.options;
  const Plan cluster = plan_softmax(h100, wide, recorded(h100));
  REQUIRE(cluster.kernel.strategy == Strategy::cluster_row);
  CHECK(cluster.geometry.grid == cluster.resident_blocks);
}

TEST_CASE("interleaved tiles: grids of at most 16 waves, so a block of a large tensor takes several tiles") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  if (recorded_target_for(h100).empty()) return;
  // dim 1 of [4096, 100, 64, 64] f32 (rows of 100 in registers) and of
  // [4096, 512, 32, 32] (tiles in shared memory): more tiles than 16 waves.
  for (const auto& [cols, strategy] : {std::pair{100, Strategy::interleaved_rows}, {512, Strategy::interleaved_smem}}) {
    CAPTURE(cols);
    SoftmaxShape s{DType::f32, false, 4096, cols, true};
    s.inner = cols == 100 ? 4096 : 1024;
    const Plan p = plan_softmax(h100, s, recorded(h100));
    REQUIRE(p.kernel.strategy == strategy);
    CHECK(4096 * p.inner_tiles > 16 * p.resident_blocks);
    CHECK(p.geometry.grid == 16 * p.resident_blocks);
    // A small tensor keeps a block a tile.
    s.rows = 2;
    CHECK(plan_softmax(h100, s, recorded(h100)).geometry.grid == 2 * p.inner_tiles);
  }
}

TEST_CASE("the planner owns the cluster fallback: the vendor's count sizes the wave, none that fits replans") {
  const DeviceProps h100 = device_file("h100_sxm.json");
  if (recorded_target_for(h100).empty()) return;
  const SoftmaxShape wide{DType::f32, false, 4096, 131072, true};  // clusters of 16 x 256 threads (v21)
  const Plan model = plan_softmax(h100, wide, recorded(h100));
  REQUIRE(model.kernel.strategy == Strategy::cluster_row);
  REQUIRE(model.chunks_per_row == 16);
  CHECK(model.fallback.empty());
  std::vector<int> asked;  // cluster sizes the planner asked about
  // The vendor holds 5 clusters of 16: a wave of 80 blocks.
  const Plan five = plan_softmax(h100, wide, recorded(h100), [&](int, int, int blocks, std::int64_t) {
    asked.push_back(blocks);
    return blocks == 16 ? 5 : 0;
  });
  CHECK(asked == std::vector<int>{16});
  CHECK(five.resident_blocks == 80);
  CHECK(five.geometry.grid == 80);
  // No cluster of 16 fits: clusters of at most 8, which the vendor then holds.
  asked.clear();
  const Plan eight = plan_softmax(h100, wide, recorded(h100), [&](int, int, int blocks, std::int64_t) {
    asked.push_back(blocks);
    return blocks <= 8 ? 10 : 0;
  });
  CHECK(asked == std::vector<int>{16, 8});
  CHECK(eight.kernel.strategy == Strategy::cluster_row);
  CHECK(eight.chunks_per_row == 8);
  CHECK(eight.resident_blocks == 80);
  CHECK(eight.fallback.find("no cluster of 16") == 0);
  // None fits at all: the kernels without clusters (grid_row: the row over
  // blocks of the grid), and the plan says why.
  const Plan none = plan_softmax(h100, wide, recorded(h100), [](int, int, int, std::int64_t) { return 0; });
  CHECK(none.kernel.strategy == Strategy::grid_row);
  CHECK(none.fallback.find("no cluster of 8") == 0);
}

TEST_CASE("interleaved rows through a ring of shared-memory buffers: where the H100 and H200 take it") {
  for (const char* file : {"h100_sxm.json", "h200.json"}) {
    const DeviceProps d = device_file(file);
    if (recorded_target_for(d).empty()) continue;
    INFO(file);
    const auto plan = [&](std::int64_t cols, std::int64_t inner, DType dt, bool bwd, bool wide = true) {
      SoftmaxShape s{dt, bwd, 64, cols, true};
      s.inner = inner;
      s.wide_packs = wide;
      return plan_softmax(d, s, recorded(d));
    };
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (bool bwd : {false, true})
        for (auto [cols, inner] : {std::pair{100, 4096}, std::pair{200, 1024}, std::pair{64, 56}}) {
          const std::string what = to_string(dt) + (bwd ? " backward, " : " forward, ") + std::to_string(cols) +
                                   " x " + std::to_string(inner);
          INFO(what);
          // The float32 backward keeps the other plans unless forced.
          if (bwd && dt == DType::f32) {
            CHECK(plan(cols, inner, dt, bwd).kernel.strategy != Strategy::interleaved_ring);
            continue;
          }
          const Plan p = plan(cols, inner, dt, bwd);
          REQUIRE(p.kernel.strategy == Strategy::interleaved_ring);
          const int vec = 16 / dtype_size(dt);
          CHECK(p.kernel.vec == vec);
          const int lanes = p.rows_per_block / vec;
          const int slots = kInterleavedRingThreads / lanes;
          // The widest line of 128..512 bytes of rows, no wider than the
          // outer row's rounded up to a power of two (56 rows: 128 bytes
          // of 16-bit rows, 256 of f32), whose buffers fit half an SM: two
          // buffers, rows of 100 forward a 512-byte line (25 packs a
          // thread, 100 KiB), backward (two tensors) 256 bytes, rows of 200
          // half those; the f32 forward three buffers, at half the line.
          const bool f32 = dt == DType::f32;
          const int buffers = f32 ? 3 : 2;
          CHECK(p.kernel.vpt == buffers);
          const int line = cols == 64 ? (f32 ? 256 : 128) : (cols == 100 ? 512 : 256) / (bwd || f32 ? 2 : 1);
          CHECK(lanes * 16 == line);
          CHECK(p.launch.threads_per_block == kInterleavedRingThreads);
          CHECK(p.smem_vecs == buffers * ((cols + slots - 1) / slots));
          CHECK(p.launch.dynamic_smem_bytes ==
                std::int64_t(p.smem_vecs) * kInterleavedRingThreads * 16 * (bwd ? 2 : 1));
          CHECK(p.launch.dynamic_smem_bytes <= d.smem_per_sm / 2);
          CHECK(p.exact.blocks_per_sm >= 1);
          CHECK(p.inner_tiles == (inner + p.rows_per_block - 1) / p.rows_per_block);
          // One wave: a block takes tiles b, b + grid, ...
          CHECK(p.geometry.grid == std::min<std::int64_t>(p.resident_blocks, 64 * p.inner_tiles));
        }
    // Not taken: rows shorter than kInterleavedRingMinCols; tensors off
    // 16-byte packs; rows whose line-wide tile does not fit two buffers in
    // half an SM (512 rows of a 128-byte line: 128 KiB); outer rows of
    // fewer than a line of rows; the switch.
    CHECK(plan(21, 65536, DType::f32, false).kernel.strategy == Strategy::interleaved_rows);
    CHECK(plan(100, 4096, DType::bf16, false, false).kernel.strategy == Strategy::interleaved_rows);
    CHECK(plan(512, 1024, DType::f32, false).kernel.strategy != Strategy::interleaved_ring);
    // 16-bit rows also at a 64-byte line where no wider one fits: rows of
    // 512 forward in half an SM (64 KiB), backward in the opt-in (128
    // KiB, one block an SM); rows of 1000 at none.
    for (DType dt : {DType::bf16, DType::f16})
      for (bool bwd : {false, true}) {
        const Plan p = plan(512, 1024, dt, bwd);
        CHECK(p.kernel.strategy == Strategy::interleaved_ring);
        CHECK(p.rows_per_block * dtype_size(dt) == 64);
        CHECK(p.launch.dynamic_smem_bytes == (bwd ? 131072 : 65536));
        CHECK(plan(1000, 56, dt, bwd).kernel.strategy != Strategy::interleaved_ring);
      }
    CHECK(plan(100, 16, DType::f32, false).kernel.strategy != Strategy::interleaved_ring);
    SoftmaxShape off{DType::bf16, false, 64, 100, true};
    off.inner = 4096;
    off.wide_packs = true;
    off.options.allow_interleaved_ring = false;
    CHECK(plan_softmax(d, off, recorded(d)).kernel.strategy == Strategy::interleaved_rows);
    SoftmaxShape forced{DType::f32, true, 64, 100, true};
    forced.inner = 4096;
    forced.wide_packs = true;
    forced.options.force_interleaved_ring = true;
    const Plan f = plan_softmax(d, forced, recorded(d));
    CHECK(f.kernel.strategy == Strategy::interleaved_ring);
    CHECK(f.rows_per_block == 64);  // 256 bytes of rows: two buffers of both tensors, 104 KiB
  }
  // Neither an A100 (sm_80: measured nowhere) nor an AMD device (no
  // asynchronous copies to shared memory).
  for (const char* file : {"a100_sxm.json", "mi250x_gcd.json"}) {
    const DeviceProps d = device_file(file);
    if (recorded_target_for(d).empty()) continue;
    INFO(file);
    SoftmaxShape s{DType::bf16, false, 64, 100, true};
    s.inner = 4096;
    s.wide_packs = true;
    CHECK(plan_softmax(d, s, recorded(d)).kernel.strategy != Strategy::interleaved_ring);
  }
}

TEST_CASE("interleaved rows on H100 and MI250X property files") {
  for (const char* file : {"h100_sxm.json", "mi250x_gcd.json"}) {
    const DeviceProps d = device_file(file);
    if (recorded_target_for(d).empty()) continue;  // a build without that backend records no report
    INFO(file);
    const auto plan = [&](std::int64_t rows, std::int64_t cols, std::int64_t inner, DType dt, bool bwd, bool packs) {
      SoftmaxShape s{dt, bwd, rows, cols, packs};
      s.inner = inner;
      return plan_softmax(d, s, recorded(d));
    };
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (bool bwd : {false, true})
        for (bool packs : {true, false})
          for (auto [rows, cols, inner] : {std::tuple{8, 21, 65536}, std::tuple{64, 300, 49}, std::tuple{1, 4096, 16384},
                                           std::tuple{3, 5, 3}, std::tuple{2, 100000, 8}}) {
            INFO(to_string(dt), bwd ? " backward " : " forward ", packs ? "packs " : "single ", rows, "x", cols, "x",
                 inner);
            const Plan p = plan(rows, cols, inner, dt, bwd, packs);
            // The tile in shared memory only on the H100 (asynchronous
            // copies), on packs, past registers: 300 elements in one
            // block; 4096 over a cluster (8 blocks, backward's two tensors
            // 16) for two blocks an SM at a line's width; 100000 not.
            // Past registers on packs otherwise (300 elements and longer,
            // on the MI250X every one), two passes over chunks that any
            // block takes (interleaved_stream), or where the columns of the
            // tiles whose chunks alternate there outgrow half the L2, over
            // slabs of whole lines (interleaved_slabs: on the MI250X's 8 MB,
            // 4096 and 100000 f32 backward).
            const bool held = d.vendor == Vendor::nvidia && packs && (cols == 300 || cols == 4096);
            const bool streamed = !held && packs && cols >= 300;
            bool slabbed = false;
            if (streamed) {
              SoftmaxShape s{dt, bwd, rows, cols, packs};
              s.inner = inner;
              s.options.allow_interleaved_slabs = false;
              const Plan q = plan_softmax(d, s, recorded(d));
              CHECK(q.kernel.strategy == Strategy::interleaved_stream);
              slabbed = __int128(q.tiles_together) * q.rows_per_block * dtype_size(dt) * cols * (bwd ? 2 : 1) >
                        d.l2_bytes / 2;
              if (d.vendor == Vendor::amd && dt == DType::f32 && bwd) CHECK(slabbed == (cols >= 4096));
              if (d.vendor == Vendor::nvidia) CHECK(!slabbed);
            }
            const Strategy want = slabbed       ? Strategy::interleaved_slabs
                                  : streamed    ? Strategy::interleaved_stream
                                  : !held       ? Strategy::interleaved_rows
                                  : cols == 300 ? Strategy::interleaved_smem
                                                : Strategy::interleaved_cluster;
            CHECK(p.kernel.strategy == want);
            if (slabbed) {
              // Tiles of up to 256 lanes, slabs sized at whole slots that cover
              // the column, none empty, a block a slab.
              const int lanes = p.rows_per_block / kInterleavedPack;
              CHECK(lanes <= kInterleavedSlabsLanesMax);
              int pow2 = 1;
              while (pow2 < (inner + 3) / 4) pow2 *= 2;
              CHECK(lanes == std::min(pow2, 256));
              const std::int64_t slots = kInterleavedSlabsThreads / lanes;
              CHECK(p.chunk_elems % slots == 0);
              CHECK(p.chunk_elems * p.chunks_per_row >= cols);
              CHECK(p.chunk_elems * (p.chunks_per_row - 1) < cols);
              CHECK(p.kernel.vpt == interleaved_slabs_vpt(dt, bwd));
              // The kernels deal the column's steps to the slabs in turn:
              // each slab gets one at least.
              CHECK(p.chunks_per_row <= (cols + slots * p.kernel.vpt - 1) / (slots * p.kernel.vpt));
              CHECK(p.geometry.grid == rows * p.inner_tiles * p.chunks_per_row);
              CHECK(p.finalize_geometry.grid == p.geometry.grid);
              CHECK(p.launch.dynamic_smem_bytes == 0);
              CHECK(p.workspace_bytes ==
                    interleaved_slabs_workspace_bytes(rows * p.inner_tiles, p.chunks_per_row, p.rows_per_block));
              continue;
            }
            CHECK(p.kernel.vec == (packs ? kInterleavedPack : 1));
            const int lanes = p.rows_per_block / p.kernel.vec;
            CHECK(p.inner_tiles * p.rows_per_block >= inner);
            CHECK((p.inner_tiles - 1) * p.rows_per_block < inner);
            CHECK(p.launch.threads_per_block % lanes == 0);
            CHECK(p.launch.threads_per_block <= interleaved_max_threads(p.kernel.vec));
            const std::int64_t slots = p.launch.threads_per_block / lanes;
            // Registers hold the row, or a two-pass kernel takes it.
            if (p.kernel.vpt > 0 && !streamed) CHECK(slots * p.kernel.vpt >= cols);
            if (cols >= 4096 && !streamed) CHECK(p.kernel.vpt == 0);
            if (streamed) {
              CHECK(p.kernel.vpt == interleaved_stream_vpt(dt, bwd));
              CHECK(p.chunks_per_row == (cols + slots * p.kernel.vpt - 1) / (slots * p.kernel.vpt));
              if (d.vendor == Vendor::nvidia) CHECK(p.exact.blocks_per_sm == 2);  // 64 registers
              CHECK(p.geometry.grid <= p.resident_blocks);
            }
            // 16-bit forwards on packs: on NVIDIA sm_90, 7 loads a thread
            // where that takes fewer slots than 6 (rows of 21: 3 slots, not
            // 4), else 6; elsewhere 6 (the wide entries are not built).
            if (p.kernel.vpt > 0 && packs && !bwd && dtype_size(dt) == 2 && !streamed)
              CHECK(p.kernel.vpt == (cols == 21 && d.vendor == Vendor::nvidia ? 7 : 6));
            if (held) {
              const int blocks = cols == 4096 ? (bwd ? 16 : 8) : 1;
              CHECK(p.chunks_per_row == (blocks > 1 ? blocks : 0));
              CHECK(std::int64_t(p.smem_vecs) * slots * blocks >= cols);
              CHECK(std::int64_t(p.smem_vecs - 1) * slots * blocks < cols);
              // A line of rows, two blocks an SM.
              CHECK(p.rows_per_block * dtype_size(dt) == 128);
              CHECK(p.exact.blocks_per_sm == 2);
              if (blocks > 1) CHECK(p.launch.dynamic_smem_bytes == 4096 * 128 / blocks * (bwd ? 2 : 1));
              CHECK(p.geometry.grid % std::max(p.chunks_per_row, 1) == 0);
              CHECK(p.launch.dynamic_smem_bytes + p.attributes.static_smem_bytes <= d.smem_per_block_optin);
            }
            CHECK(p.exact.blocks_per_sm >= 1);
            CHECK(p.geometry.grid >= 1);
            CHECK(p.geometry.grid <= rows * p.inner_tiles * std::max(p.chunks_per_row, 1) * (streamed ? 2 : 1));
          }
    // Dim 0 of a [65536, 1024] matrix: one tile of 1024 rows (256 lanes, 2
    // slots), its column in slabs that fill the blocks two an SM hold.
    // DUET_INTERLEAVED_SLABS=0: 32 line-wide tiles of f32 (16-bit: 16),
    // each column in chunks of 64 x 4 positions (16-bit: 32 x 8), every
    // SM's two blocks taking chunks; DUET_INTERLEAVED_STREAM=0 too: a block
    // a tile, two passes.
    for (DType dt : {DType::f32, DType::bf16}) {
      INFO(to_string(dt), " [65536, 1024] over dim 0");
      SoftmaxShape s{dt, false, 1, 65536, true};
      s.inner = 1024;
      const Plan slabs = plan_softmax(d, s, recorded(d));
      CHECK(slabs.kernel.strategy == Strategy::interleaved_slabs);
      CHECK(slabs.rows_per_block == 1024);
      CHECK(slabs.inner_tiles == 1);
      // Two blocks an SM on the H100 (64 registers), three a CU on the
      // MI250X (the recorded gfx90a report's registers).
      CHECK(slabs.exact.blocks_per_sm == (d.vendor == Vendor::nvidia ? 2 : 3));
      const std::int64_t resident = std::int64_t(d.sm_count) * slabs.exact.blocks_per_sm;
      CHECK(slabs.chunk_elems == (65536 + 2 * resident - 1) / (2 * resident) * 2);
      CHECK(slabs.chunks_per_row == (65536 + slabs.chunk_elems - 1) / slabs.chunk_elems);
      CHECK(slabs.chunks_per_row <= resident);
      CHECK(slabs.geometry.grid == slabs.chunks_per_row);
      CHECK(slabs.launch.dynamic_smem_bytes == 0);
      s.options.allow_interleaved_slabs = false;
      const Plan p = plan_softmax(d, s, recorded(d));
      CHECK(p.kernel.strategy == Strategy::interleaved_stream);
      CHECK(p.rows_per_block * dtype_size(dt) == 128);
      CHECK(p.inner_tiles * p.rows_per_block == 1024);
      CHECK(p.chunks_per_row == 256);
      CHECK(p.tiles_together == 8);  // 1 KiB of each line
      CHECK(p.geometry.grid == std::min<std::int64_t>(p.resident_blocks, 2 * p.inner_tiles * 256));
      CHECK(p.workspace_bytes == interleaved_stream_workspace_bytes(p.inner_tiles, 256, p.rows_per_block));
      s.options.allow_interleaved_stream = false;
      const Plan one = plan_softmax(d, s, recorded(d));
      CHECK(one.kernel.strategy == Strategy::interleaved_rows);
      CHECK(one.kernel.vpt == 0);
      CHECK(one.workspace_bytes == 0);
    }
    // On the H100, rows of 100 take a line-wide tile with 7 (15 slots x 32
    // lanes), where 6 (17 slots) leaves 16 lanes, as on the MI250X; rows of
    // 16 keep 6 (3 slots either way).
    const bool wide = d.vendor == Vendor::nvidia;
    for (auto [cols, vpt, lanes] : {std::tuple{100, wide ? 7 : 6, wide ? 32 : 16}, std::tuple{16, 6, 32}}) {
      INFO("bf16 forward, rows of ", cols);
      const Plan p = plan(16, cols, 4096, DType::bf16, false, true);
      CHECK(p.kernel.strategy == Strategy::interleaved_rows);
      CHECK(p.kernel.vpt == vpt);
      CHECK(p.rows_per_block / kInterleavedPack == lanes);
    }
    // The register entries' registers (kInterleavedRegisters) on the H100:
    // backward tiles of rows of 100 (13 warps) three an SM, f32 forward
    // tiles of rows of 21 (6 warps) six.
    if (d.vendor == Vendor::nvidia) {
      for (DType dt : {DType::f32, DType::bf16}) {
        INFO(to_string(dt), " backward, rows of 100");
        const Plan p = plan(8, 100, 4096, dt, true, true);
        CHECK(p.kernel.strategy == Strategy::interleaved_rows);
        CHECK(p.launch.threads_per_block == 416);
        CHECK(p.attributes.regs_per_thread <= 48);
        CHECK(p.exact.blocks_per_sm == 3);
      }
      const Plan p = plan(8, 21, 65536, DType::f32, false, true);
      CHECK(p.kernel.strategy == Strategy::interleaved_rows);
      CHECK(p.launch.threads_per_block == 192);
      CHECK(p.exact.blocks_per_sm == 6);
      // The tile that keeps the most rows resident: f32 rows of 100
      // forward in 8 lanes (28 slots, 5 blocks an SM: 40 lanes) rather
      // than 16 (26 slots, 2 blocks: 32 lanes); rows of 21 in 32 lanes,
      // as many as 16 lanes keep (the wider of the two).
      const Plan q = plan(8, 100, 4096, DType::f32, false, true);
      CHECK(q.rows_per_block / kInterleavedPack == 8);
      CHECK(q.launch.threads_per_block == 224);
      CHECK(q.exact.blocks_per_sm == 5);
      CHECK(p.rows_per_block / kInterleavedPack == 32);
      // From half a line: f32 rows of 200 forward in 4 lanes (56 slots,
      // 5 blocks: 20 lanes) rather than 8 (52 slots, 2 blocks: 16; v84);
      // rows of 100 keep 8 (4 lanes: 32 slots, 9 blocks, 36 lanes).
      const Plan half = plan(8, 200, 1024, DType::f32, false, true);
      CHECK(half.kernel.strategy == Strategy::interleaved_rows);
      CHECK(half.rows_per_block / kInterleavedPack == 4);
      CHECK(half.launch.threads_per_block == 224);
      CHECK(half.exact.blocks_per_sm == 5);
    }
    // An A100 (sm_80) keeps 6: the wide entries are not built there.
    if (d.vendor == Vendor::nvidia) {
      const DeviceProps a100 = device_file("a100_sxm.json");
      SoftmaxShape s{DType::bf16, false, 16, 100, true};
      s.inner = 4096;
      if (!recorded_target_for(a100).empty()) CHECK(plan_softmax(a100, s, recorded(a100)).kernel.vpt == 6);
    }
    if (d.vendor != Vendor::nvidia) {
      // No asynchronous copies to shared memory: never interleaved_smem,
      // whatever the switches ask.
      SoftmaxShape s{DType::f32, false, 8, 21, true};
      s.inner = 65536;
      s.options.interleaved_stash = InterleavedStash::always;
      CHECK(plan_softmax(d, s, recorded(d)).kernel.strategy == Strategy::interleaved_rows);
      continue;
    }
    // DUET_INTERLEAVED_STASH=always: shared memory also for rows registers hold.
    {
      SoftmaxShape s{DType::f32, false, 8, 21, true};
      s.inner = 65536;
      s.options.interleaved_stash = InterleavedStash::always;
      CHECK(plan_softmax(d, s, recorded(d)).kernel.strategy == Strategy::interleaved_smem);
      s.options.interleaved_stash = InterleavedStash::past_registers;
      CHECK(plan_softmax(d, s, recorded(d)).kernel.strategy == Strategy::interleaved_rows);
    }
    // Without clusters, 4096 rows forward take a sector-wide tile in one
    // block; DUET_INTERLEAVED_TILE: the tile's width in bytes where it fits
    // (16 bytes of a 4096-row column: two blocks an SM), else the widest
    // that fits, in one block.
    {
      SoftmaxShape s{DType::f32, false, 1, 4096, true};
      s.inner = 16384;
      s.options.allow_clusters = false;
      const Plan p = plan_softmax(d, s, recorded(d));
      CHECK(p.kernel.strategy == Strategy::interleaved_smem);
      CHECK(p.rows_per_block * 4 == 32);
      CHECK(p.exact.blocks_per_sm == 1);
    }
    for (auto [bytes, cols, want_bytes] : {std::tuple{16, 4096, 16}, std::tuple{128, 4096, 32},
                                           std::tuple{64, 300, 64}}) {
      INFO("tile ", bytes, " bytes, ", cols);
      SoftmaxShape s{DType::f32, false, 1, cols, true};
      s.inner = 16384;
      s.options.interleaved_tile_bytes = bytes;
      const Plan p = plan_softmax(d, s, recorded(d));
      CHECK(p.kernel.strategy == Strategy::interleaved_smem);
      CHECK(p.rows_per_block * 4 == want_bytes);
      if (bytes == 16) CHECK(p.exact.blocks_per_sm == 2);
    }
    // The register tiles too: bf16 rows of 100 (15 slots of 7 packs) take
    // 16 lanes for 128 bytes instead of the planner's 32, f32 rows of 100
    // (25 slots) 16 for 256 bytes instead of the planner's 8 (the most rows
    // resident: 5 blocks of 7 warps); 512 bytes of bf16 (64 lanes) are past
    // a tile and leave the planner's 32.
    for (auto [dt, bytes, lanes] : {std::tuple{DType::bf16, 128, 16}, std::tuple{DType::f32, 256, 16},
                                    std::tuple{DType::bf16, 512, 32}, std::tuple{DType::bf16, 0, 32},
                                    std::tuple{DType::f32, 0, 8}}) {
      INFO(to_string(dt), " register tile ", bytes, " bytes");
      SoftmaxShape s{dt, false, 16, 100, true};
      s.inner = 4096;
      s.options.interleaved_tile_bytes = bytes;
      const Plan p = plan_softmax(d, s, recorded(d));
      CHECK(p.kernel.strategy == Strategy::interleaved_rows);
      CHECK(p.rows_per_block / kInterleavedPack == lanes);
      CHECK(p.launch.threads_per_block % lanes == 0);
      CHECK(p.launch.threads_per_block / lanes * p.kernel.vpt >= 100);
      CHECK((p.why.find("DUET_INTERLEAVED_TILE") != std::string::npos) == (bytes > 0 && bytes < 512));
    }
  }
}
