// libFuzzer target: property-file parsing, and everything a parsed device
// feeds (occupancy models, the softmax planner).
//
// Input: a JSON text, optionally followed by a NUL byte and parameter bytes.
// A raw NUL is never valid JSON, so the split loses no document; the
// parameter bytes (FuzzedDataProvider) choose extra kernel attributes, launch
// shapes, softmax shapes and the attributes the planner's source returns.
// Without them, a fixed set of realistic kernels and shapes is used.
//
// Findings: a crash, an ASan/UBSan report, an exception other than
// duet::Error, or a violated invariant (FUZZ_CHECK).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "duet/device_props.hpp"
#include "duet/error.hpp"
#include "duet/occupancy.hpp"
#include "duet/planner.hpp"
#include "duet/props_json.hpp"
#include "fuzz_common.hpp"

namespace {

using namespace duet_fuzz;
using duet::Plan;
using duet::SoftmaxShape;
using duet::Strategy;

// ------------------------------------------------------------ parsing

// What passes the parser is what props_json.hpp and the schema promise.
void check_parsed(const DeviceProps& d) {
  const std::string ctx = "parsed '" + d.name + "'";
  FUZZ_CHECK(d.sm_count >= 1 && d.max_threads_per_block >= 1 && d.max_threads_per_sm >= 1 && d.max_blocks_per_sm >= 1,
             ctx);
  FUZZ_CHECK(d.smem_per_sm >= 0 && d.smem_per_block >= 0 && d.smem_per_block_optin >= 0 &&
                 d.smem_reserved_per_block >= 0 && d.l2_bytes >= 0 && d.memory_bytes >= 0,
             ctx);
  FUZZ_CHECK(d.name.size() <= 4096 && d.arch.size() <= 4096 && d.family.size() <= 4096 && d.source.size() <= 4096,
             ctx);
  FUZZ_CHECK(!d.source.empty(), ctx);  // the origin stands in for a missing source
  // Vendor and backend agree; a GPU has a GPU's warp and a register file.
  FUZZ_CHECK(d.vendor != duet::Vendor::nvidia || d.backend == duet::BackendKind::cuda, ctx);
  FUZZ_CHECK(d.vendor != duet::Vendor::amd || d.backend == duet::BackendKind::hip, ctx);
  if (d.is_gpu()) {
    FUZZ_CHECK(d.warp_size == 32 || d.warp_size == 64, ctx);
    FUZZ_CHECK(d.regs_per_sm >= 1, ctx);
    FUZZ_CHECK(d.smem_per_block_optin <= d.smem_per_sm, ctx);
  }
  const double bw = d.peak_bandwidth_gbps();
  FUZZ_CHECK(bw >= 0.0 && bw == bw, ctx);  // finite, never negative or NaN
}

// Serialising a parsed device and parsing it again is lossless: the second
// text is byte-identical to the first (pretty and compact).
void check_round_trip(const DeviceProps& d) {
  for (const int indent : {2, -1}) {
    const std::string t1 = duet::props_to_json(d, indent);
    DeviceProps d2;
    try {
      d2 = duet::props_from_json(t1, "<round-trip>");
    } catch (const duet::Error& e) {
      FUZZ_CHECK(false, std::string("props_to_json wrote a text props_from_json refuses: ") + e.what() + "\n" + t1);
    }
    const std::string t2 = duet::props_to_json(d2, indent);
    FUZZ_CHECK(t1 == t2, "round trip changed the text:\n" + t1 + "\n---\n" + t2);
  }
}

// ------------------------------------------------------------ occupancy

struct Case {
  KernelAttributes k;
  LaunchShape l;
};

KernelAttributes kernel(int regs, int agprs, int sgprs, std::int64_t static_smem, int max_threads) {
  KernelAttributes k;
  k.name = "fixed";
  k.regs_per_thread = regs;
  k.agprs_per_thread = agprs;
  k.sgprs_per_wave = sgprs;
  k.static_smem_bytes = static_smem;
  k.max_threads_per_block = max_threads;
  return k;
}

std::vector<Case> fixed_cases() {
  return {
      {kernel(32, 0, 0, 0, 1024), {128, 0}},
      {kernel(64, 0, 32, 0, 1024), {256, 16 * 1024}},
      {kernel(255, 0, 0, 0, 1024), {1024, 0}},
      {kernel(0, 0, 0, 48 * 1024, 1024), {32, 0}},
      {kernel(128, 64, 96, 1024, 512), {512, 8 * 1024}},
      {kernel(40, 0, 0, 0, 1024), {1, 100 * 1024}},
  };
}

void check_occupancy(const DeviceProps& d, const Case& c) {
  try {
    const Occupancy o = duet::exact_occupancy(d, c.k, c.l);
    check_exact(d, c.k, c.l, o);
  } catch (const duet::Error& e) {
    check_error(e);
  }
  try {
    const Occupancy o = duet::tutorial_occupancy(d, c.k, c.l);
    check_tutorial(d, c.k, c.l, o);
  } catch (const duet::Error& e) {
    check_error(e);
  }
}

// ------------------------------------------------------------ planner

KernelAttributes default_attributes() { return kernel(32, 0, 0, 0, 1024); }

// The planner's invariants: a catalogued kernel of the requested kind that
// fits the device, covers the whole row, and a grid within the work and the
// resident blocks.
void check_plan(const DeviceProps& d, const SoftmaxShape& s, const Plan& p,
                const std::map<int, KernelAttributes>& handed_out) {
  const std::string ctx = "plan " + duet::variant_name(p.kernel) + " rows=" + std::to_string(s.rows) +
                          " cols=" + std::to_string(s.cols) + " grid=" + std::to_string(p.geometry.grid) +
                          " resident=" + std::to_string(p.resident_blocks) + " | " + p.why;
  // A compiled kernel: the index names the catalogue entry the plan holds.
  FUZZ_CHECK(p.variant >= 0 && p.variant < duet::kVariantCount, ctx);
  const duet::Variant& v = duet::kCatalogue[static_cast<std::size_t>(p.variant)];
  FUZZ_CHECK(v.strategy == p.kernel.strategy && v.dtype == p.kernel.dtype && v.backward == p.kernel.backward &&
                 v.vec == p.kernel.vec && v.group == p.kernel.group && v.vpt == p.kernel.vpt &&
                 v.edges == p.kernel.edges,
             ctx);
  // Of the requested kind: dtype, direction, vector width; edges where a
  // row is off the pack grid on the vector path (split_row, which has none,
  // runs such rows scalar).
  FUZZ_CHECK(v.dtype == s.dtype && v.backward == s.backward, ctx);
  const int vec16 = duet::dtype_vec16(s.dtype);
  const bool interleaved = s.inner > 0;
  FUZZ_CHECK(interleaved == (duet::family_of(v.strategy).work == duet::WorkUnit::inner_tile), ctx);
  // A tile held in shared memory only where copies to it are asynchronous
  // (NVIDIA sm_80+), on packs of rows, every thread's packs in the opt-in.
  // interleaved_cluster: the same over 2..16 blocks of a cluster, each with
  // its share of the tile's rows, on devices that launch clusters.
  if (v.strategy == Strategy::interleaved_smem || v.strategy == Strategy::interleaved_cluster) {
    FUZZ_CHECK(d.vendor == duet::Vendor::nvidia && d.cc_major >= 8 && s.vector_ok, ctx);
    const bool in_cluster = v.strategy == Strategy::interleaved_cluster;
    FUZZ_CHECK(!in_cluster || (d.cluster_launch && s.options.allow_clusters && p.chunks_per_row >= 2 &&
                               p.chunks_per_row <= duet::kMaxClusterBlocks),
               ctx);
    const std::int64_t lanes = p.rows_per_block / duet::kInterleavedPack;
    FUZZ_CHECK(lanes >= 1 && lanes <= duet::kInterleavedLanesMax, ctx);
    const std::int64_t slots = p.launch.threads_per_block / lanes * (in_cluster ? p.chunks_per_row : 1);
    FUZZ_CHECK(std::int64_t(p.smem_vecs) * slots >= s.cols && std::int64_t(p.smem_vecs - 1) * slots < s.cols, ctx);
    FUZZ_CHECK(p.launch.dynamic_smem_bytes + p.attributes.static_smem_bytes <= d.smem_per_block_optin, ctx);
  }
  const bool edges = !interleaved && s.vector_ok && (s.row_edges || s.cols % vec16 != 0);
  const bool split_row = v.strategy == Strategy::split_row;
  // Interleaved: packs of rows where the tensors sit on them, never edges;
  // interleaved_ring's 16-byte packs only where every tensor sits on those.
  const bool ring = v.strategy == Strategy::interleaved_ring;
  if (ring)
    FUZZ_CHECK(s.wide_packs && v.vec == vec16, ctx);
  else if (interleaved)
    FUZZ_CHECK(v.vec == (s.vector_ok ? duet::kInterleavedPack : 1), ctx);
  else
    FUZZ_CHECK(v.vec == (s.vector_ok && !(edges && split_row) ? vec16 : 1), ctx);
  FUZZ_CHECK(v.edges == (edges && !split_row), ctx);
  // Planned with the attributes the source gave for that kernel.
  const auto it = handed_out.find(p.variant);
  FUZZ_CHECK(it != handed_out.end() && it->second.regs_per_thread == p.attributes.regs_per_thread &&
                 it->second.static_smem_bytes == p.attributes.static_smem_bytes,
             ctx);
  // It fits: at least one block per SM, resident blocks = SMs x that.
  FUZZ_CHECK(p.exact.blocks_per_sm >= 1, ctx);
  FUZZ_CHECK(p.resident_blocks == std::int64_t(d.sm_count) * p.exact.blocks_per_sm, ctx);
  FUZZ_CHECK(p.launch.threads_per_block >= 1 && p.launch.dynamic_smem_bytes >= 0, ctx);
  if (d.is_gpu()) {
    FUZZ_CHECK(p.launch.threads_per_block <= d.max_threads_per_block, ctx);
    FUZZ_CHECK(p.launch.threads_per_block <= p.attributes.max_threads_per_block, ctx);
    FUZZ_CHECK(p.launch.dynamic_smem_bytes + p.attributes.static_smem_bytes <=
                   std::max(d.smem_per_block, d.smem_per_block_optin),
               ctx);
    // The plan's occupancy is the model's answer for the plan's launch.
    check_same(p.exact, duet::exact_occupancy(d, p.attributes, p.launch));
  }
  // The row is covered: every element has a thread (register or shared
  // memory slot, or a chunk) to go to. Classified by the plan's data, not
  // by enumerator, so new strategies are checked too.
  // Elements the packs hold: with edges, the body of whole packs (the
  // kernels hold the up to 2 (vec - 1) others apart).
  const __int128 cols = v.edges ? s.cols / v.vec * v.vec : s.cols;
  const __int128 launch_rows = s.rows;
  const bool cluster = duet::family_of(p.kernel.strategy).cluster_launch;
  const bool stream = p.kernel.strategy == Strategy::split_stream;
  const bool grid_row = p.kernel.strategy == Strategy::grid_row;
  // Blocks launched in whole groups of a row's chunks: clusters, and
  // cooperative groups (grid_row).
  const bool grouped = cluster || duet::family_of(p.kernel.strategy).cooperative;
  __int128 work = launch_rows;  // blocks' worth of work (before the resident cap)
  if (interleaved) {
    // Tiles of whole lanes cover each outer row's inner rows, the lanes'
    // slots fill the block; registers hold the row, shared memory holds the
    // tile (interleaved_smem, above) or two passes read it.
    const int lanes = p.rows_per_block / v.vec;
    FUZZ_CHECK(lanes >= 1 && p.rows_per_block % v.vec == 0 && p.launch.threads_per_block % lanes == 0, ctx);
    FUZZ_CHECK(p.launch.threads_per_block <= duet::max_threads_per_block(v), ctx);
    FUZZ_CHECK(__int128(p.inner_tiles) * p.rows_per_block >= s.inner, ctx);
    FUZZ_CHECK(__int128(p.inner_tiles - 1) * p.rows_per_block < s.inner, ctx);
    // interleaved_stream: packs on GPUs, tiles of at most a line, each
    // tile's column in chunks of slots x vpt positions (enough, none
    // empty), two visits a chunk; its counters and pairs in a workspace.
    const bool streamed = v.strategy == Strategy::interleaved_stream;
    if (streamed) {
      FUZZ_CHECK(d.is_gpu() && s.vector_ok && s.options.allow_interleaved_stream && v.vpt > 0, ctx);
      FUZZ_CHECK(lanes <= duet::kInterleavedStreamLanesMax, ctx);
      const __int128 chunk = __int128(p.launch.threads_per_block / lanes) * v.vpt;
      FUZZ_CHECK(p.chunk_elems == chunk && p.chunks_per_row >= 1, ctx);
      FUZZ_CHECK(p.tiles_together >= 1 && p.tiles_together <= std::max<__int128>(launch_rows, 1) * p.inner_tiles, ctx);
      FUZZ_CHECK(chunk * p.chunks_per_row >= s.cols && chunk * (p.chunks_per_row - 1) < s.cols, ctx);
      if (s.rows > 0)
        FUZZ_CHECK(p.workspace_bytes == duet::interleaved_stream_workspace_bytes(s.rows * p.inner_tiles,
                                                                                 p.chunks_per_row, p.rows_per_block),
                   ctx);
    } else if (v.strategy == Strategy::interleaved_slabs) {
      // interleaved_slabs: packs on GPUs, tiles of up to 256 lanes, each
      // tile's column in slabs sized at whole slots (enough, none empty), a
      // block a slab; its counters and pairs in a workspace.
      FUZZ_CHECK(d.is_gpu() && s.vector_ok && s.options.allow_interleaved_slabs && v.vpt > 0, ctx);
      FUZZ_CHECK(lanes <= duet::kInterleavedSlabsLanesMax && p.launch.threads_per_block == duet::kInterleavedSlabsThreads,
                 ctx);
      const __int128 slots = p.launch.threads_per_block / lanes;
      FUZZ_CHECK(p.chunk_elems > 0 && p.chunk_elems % slots == 0 && p.chunks_per_row >= 1, ctx);
      FUZZ_CHECK(__int128(p.chunk_elems) * p.chunks_per_row >= s.cols, ctx);
      FUZZ_CHECK(__int128(p.chunk_elems) * (p.chunks_per_row - 1) < std::max<std::int64_t>(s.cols, 1), ctx);
      if (s.rows > 0)
        FUZZ_CHECK(p.workspace_bytes == duet::interleaved_slabs_workspace_bytes(s.rows * p.inner_tiles,
                                                                                p.chunks_per_row, p.rows_per_block),
                   ctx);
    } else if (ring) {
      // interleaved_ring: NVIDIA sm_90+, rows of kInterleavedRingMinCols or
      // more, blocks of kInterleavedRingThreads, lines of 64..512 bytes; its
      // buffers (the entry's vpt) each a share of the row a thread (enough,
      // none empty).
      FUZZ_CHECK(d.vendor == duet::Vendor::nvidia && d.cc_major >= 9 && s.cols >= duet::kInterleavedRingMinCols, ctx);
      FUZZ_CHECK(p.launch.threads_per_block == duet::kInterleavedRingThreads && lanes * 16 >= 64 &&
                     lanes <= duet::kInterleavedLanesMax,
                 ctx);
      FUZZ_CHECK(v.vpt >= 2 && p.smem_vecs % v.vpt == 0, ctx);
      const __int128 slots = p.launch.threads_per_block / lanes;
      FUZZ_CHECK(p.smem_vecs / v.vpt * slots >= s.cols && (p.smem_vecs / v.vpt - 1) * slots < s.cols, ctx);
      FUZZ_CHECK(p.workspace_bytes == 0, ctx);
    } else {
      if (v.vpt > 0) FUZZ_CHECK(__int128(p.launch.threads_per_block / lanes) * v.vpt >= s.cols, ctx);
      FUZZ_CHECK(p.workspace_bytes == 0, ctx);
    }
    FUZZ_CHECK((p.launch.dynamic_smem_bytes > 0) == (v.strategy == Strategy::interleaved_smem ||
                                                     v.strategy == Strategy::interleaved_cluster || ring),
               ctx);
    const bool slabbed = v.strategy == Strategy::interleaved_slabs;
    work = launch_rows * p.inner_tiles * (cluster || streamed || slabbed ? p.chunks_per_row : 1) * (streamed ? 2 : 1);
  } else if (p.kernel.strategy == Strategy::group_rows) {
    // Whole groups of threads per row; a block takes a multiple of
    // threads/group rows.
    const int groups = p.kernel.group > 0 ? p.launch.threads_per_block / p.kernel.group : 0;
    FUZZ_CHECK(groups >= 1 && p.rows_per_block >= 1 && p.rows_per_block % groups == 0, ctx);
    FUZZ_CHECK(__int128(p.kernel.group) * p.kernel.vpt * p.kernel.vec >= cols, ctx);
    work = (__int128(s.rows) + p.rows_per_block - 1) / p.rows_per_block;
  } else if (p.kernel.strategy == Strategy::flat_rows) {
    // kFlatRowsTiles tiles of a block's rows (a thread each), each from the
    // pack boundary before its first element, in shared memory for each
    // tensor read.
    FUZZ_CHECK(p.rows_per_block == p.launch.threads_per_block && s.dense_rows && v.edges, ctx);
    const __int128 tile_bytes = (__int128(p.rows_per_block) * s.cols + 2 * (v.vec - 1)) / v.vec * 16;
    FUZZ_CHECK(__int128(p.launch.dynamic_smem_bytes) >= tile_bytes * duet::kFlatRowsTiles * (s.backward ? 2 : 1), ctx);
    work = (__int128(s.rows) + p.rows_per_block - 1) / p.rows_per_block;
  } else if (p.chunks_per_row > 0) {
    // Chunked rows (split_row, split_stream, cluster_row): enough chunks,
    // none empty; split_row: one (max, sum) float pair per (row, chunk);
    // split_stream: its counters first, two visits an item, the second pass
    // at least a row's chunks behind (its queue's progress rests on it);
    // cluster_row(_smem): a block's threads hold its chunk in registers
    // (and shared-memory slots), at most 16 a cluster; grid_row the same
    // over at most the resident blocks (all resident at once), where the
    // device copies to shared memory asynchronously (NVIDIA sm_80+), its
    // workspace an arrival count a group and two pairs a block.
    FUZZ_CHECK(p.rows_per_block == 1 && p.chunk_elems >= 1, ctx);
    FUZZ_CHECK(__int128(p.chunks_per_row) * p.chunk_elems >= cols, ctx);
    FUZZ_CHECK(__int128(p.chunks_per_row - 1) * p.chunk_elems < cols, ctx);
    if (cluster) {
      FUZZ_CHECK(d.cluster_launch && (!s.backward || p.kernel.strategy == Strategy::cluster_row_smem) &&
                     p.chunks_per_row >= 2 && p.chunks_per_row <= duet::kMaxClusterBlocks,
                 ctx);
      FUZZ_CHECK(__int128(p.launch.threads_per_block) * (p.kernel.vpt + p.smem_vecs) * p.kernel.vec >= p.chunk_elems,
                 ctx);
      FUZZ_CHECK(p.smem_vecs == 0 || __int128(p.launch.dynamic_smem_bytes) ==
                                         __int128(p.smem_vecs) * p.launch.threads_per_block * 16 * (s.backward ? 2 : 1),
                 ctx);
      FUZZ_CHECK(p.workspace_bytes == 0, ctx);
    } else if (grid_row) {
      FUZZ_CHECK(d.vendor == duet::Vendor::nvidia && d.cc_major >= 8 && s.options.allow_grid_row, ctx);
      FUZZ_CHECK(p.chunks_per_row >= 1 && p.chunks_per_row <= p.resident_blocks, ctx);
      FUZZ_CHECK(__int128(p.launch.threads_per_block) * (p.kernel.vpt + p.smem_vecs) * p.kernel.vec >= p.chunk_elems,
                 ctx);
      FUZZ_CHECK(__int128(p.launch.dynamic_smem_bytes) ==
                     __int128(p.smem_vecs) * p.launch.threads_per_block * 16 * (s.backward ? 2 : 1),
                 ctx);
      if (s.rows > 0)
        FUZZ_CHECK(p.workspace_bytes == duet::grid_row_workspace_bytes(p.geometry.grid / p.chunks_per_row,
                                                                       p.chunks_per_row),
                   ctx);
    } else if (stream) {
      FUZZ_CHECK(__int128(p.launch.threads_per_block) * p.kernel.vpt * p.kernel.vec == p.chunk_elems, ctx);
      FUZZ_CHECK(__int128(p.workspace_bytes) ==
                     duet::split_stream_partials_offset(s.rows) + launch_rows * (p.chunks_per_row + 1) * 8,
                 ctx);
      FUZZ_CHECK(duet::split_stream_partials_offset(s.rows) % 16 == 0, ctx);
      FUZZ_CHECK(p.stream_lag > p.chunks_per_row, ctx);
    } else {
      FUZZ_CHECK(__int128(p.workspace_bytes) == launch_rows * p.chunks_per_row * 8, ctx);
      FUZZ_CHECK(p.finalize_geometry.grid == p.geometry.grid, ctx);
    }
    work = launch_rows * p.chunks_per_row * (stream ? 2 : 1);
  } else {
    // One block a row (block_row, with or without shared memory): registers
    // plus shared-memory vectors hold the row.
    FUZZ_CHECK(p.kernel.strategy != Strategy::split_row, ctx);
    FUZZ_CHECK(p.rows_per_block == 1 && p.smem_vecs >= 0, ctx);
    FUZZ_CHECK(__int128(p.launch.threads_per_block) * (p.kernel.vpt + p.smem_vecs) * p.kernel.vec >= cols, ctx);
  }
  // The grid: no blocks for no rows; otherwise within the work items, at
  // least one wave of resident blocks (or all the work), and at most
  // the family's waves (FamilyInfo::waves: up to 64; one with
  // PlanOptions::persistent; at most PlanOptions::max_waves).
  FUZZ_CHECK(p.geometry.grid >= 0, ctx);
  FUZZ_CHECK(p.geometry.block == p.launch.threads_per_block, ctx);
  FUZZ_CHECK(p.geometry.dynamic_smem == p.launch.dynamic_smem_bytes, ctx);
  if (s.rows == 0) {
    FUZZ_CHECK(p.geometry.grid == 0, ctx);
  } else {
    // cluster_row(_smem), split_stream: one wave (FamilyInfo::waves);
    // cluster launches whole clusters (at least one cluster).
    const int family_waves = duet::family_of(p.kernel.strategy).waves;
    const std::int64_t waves = family_waves == 1 || p.persistent ? 1
                               : s.options.max_waves > 0     ? s.options.max_waves
                                                             : family_waves;
    FUZZ_CHECK(p.max_waves == s.options.max_waves, ctx);
    FUZZ_CHECK(p.persistent == s.options.persistent, ctx);
    const __int128 wave = grouped ? std::max<__int128>(p.resident_blocks / p.chunks_per_row, 1) * p.chunks_per_row
                                  : __int128(p.resident_blocks);
    FUZZ_CHECK(p.geometry.grid >= 1 && p.geometry.grid <= work, ctx);
    // interleaved_slabs: a block a slab, whatever the waves.
    if (p.kernel.strategy == Strategy::interleaved_slabs)
      FUZZ_CHECK(p.geometry.grid == work && p.finalize_geometry.grid == work, ctx);
    else
      FUZZ_CHECK(p.geometry.grid <= wave * waves, ctx);
    // Within the vendor's grid limit (CUDA 2^31 - 1 blocks, HIP also 2^32 - 1 threads).
    FUZZ_CHECK(p.geometry.grid <= p.max_grid && p.max_grid <= (std::int64_t(1) << 31) - 1, ctx);
    FUZZ_CHECK(d.vendor != duet::Vendor::amd || __int128(p.geometry.grid) * p.geometry.block < (__int128(1) << 32), ctx);
    const __int128 limit = grouped ? __int128(p.max_grid) / p.chunks_per_row * p.chunks_per_row : p.max_grid;
    FUZZ_CHECK(p.geometry.grid >= std::min<__int128>({work, wave, limit}), ctx);
    if (grouped) FUZZ_CHECK(p.geometry.grid % p.chunks_per_row == 0, ctx);
  }
}

void check_planner(const DeviceProps& d, const SoftmaxShape& s, FuzzedDataProvider* p) {
  std::map<int, KernelAttributes> handed_out;
  const duet::AttributeSource source = [&](int variant, bool finalize) {
    // The planner asks only for catalogued kernels.
    FUZZ_CHECK(variant >= 0 && variant < duet::kVariantCount, "attribute source asked for " + std::to_string(variant));
    (void)finalize;
    // A real source answers the same for the same kernel (the planner may
    // ask twice: block_row's 4- and 8-vector candidates can name one variant).
    if (const auto it = handed_out.find(variant); it != handed_out.end()) return it->second;
    KernelAttributes k = p && p->remaining_bytes() > 0 ? fuzz_kernel(*p) : default_attributes();
    handed_out[variant] = k;
    return k;
  };
  try {
    const Plan plan = duet::plan_softmax(d, s, source);
    check_plan(d, s, plan, handed_out);
    // The same rows as interleaved rows (a non-last dimension), taking no
    // bytes of the input (the replayed corpus keeps its meaning): rows
    // split into outer rows of up to 4096 inner rows.
    if (s.inner == 0 && s.rows > 0) {
      SoftmaxShape t = s;
      t.inner = std::min<std::int64_t>(s.rows, 4096);
      t.rows = s.rows / t.inner;
      const Plan q = duet::plan_softmax(d, t, source);
      check_plan(d, t, q, handed_out);
      // And on 16-byte packs where the inner rows fill them.
      if (t.vector_ok && t.inner % duet::dtype_vec16(t.dtype) == 0) {
        t.wide_packs = true;
        const Plan w = duet::plan_softmax(d, t, source);
        check_plan(d, t, w, handed_out);
      }
    }
  } catch (const duet::Error& e) {
    // A bad shape, a kernel that fits nowhere, or attributes the occupancy
    // model refuses; never an internal error (every planned kernel exists).
    FUZZ_CHECK(e.status() == duet::Status::invalid_argument || e.status() == duet::Status::unsupported,
               std::string(duet::to_string(e.status())) + ": " + e.what());
  }
}

SoftmaxShape shape(duet::DType t, bool backward, std::int64_t rows, std::int64_t cols, bool vector_ok = true) {
  SoftmaxShape s;
  s.dtype = t;
  s.backward = backward;
  s.rows = rows;
  s.cols = cols;
  s.vector_ok = vector_ok;
  return s;
}

std::vector<SoftmaxShape> fixed_shapes() {
  using duet::DType;
  return {
      shape(DType::f32, false, 4096, 1024),         shape(DType::bf16, true, 1, 8192),
      shape(DType::f16, false, 7, 1 << 20),         shape(DType::f32, false, 0, 64),
      shape(DType::f32, true, 1000, 1000, false),   shape(DType::f16, false, 3, (std::int64_t(1) << 31) - 1, false),
      shape(DType::f32, false, 1 << 20, 32768),     shape(DType::bf16, true, 5, 40000),
      // As interleaved rows on 16-byte packs (4096 inner rows): rows of 100
      // and 200, interleaved_ring's on NVIDIA sm_90+.
      shape(DType::bf16, false, 1 << 18, 100),      shape(DType::f16, true, 1 << 18, 200),
  };
}

SoftmaxShape fuzz_shape(FuzzedDataProvider& p) {
  const auto t = p.PickValueInArray({duet::DType::f32, duet::DType::f16, duet::DType::bf16});
  const bool backward = p.ConsumeBool();
  const bool vector_ok = p.ConsumeBool();
  const bool row_edges = vector_ok && p.ConsumeBool();
  const bool dense_rows = p.ConsumeBool();
  // Rows: any int64 the API accepts. Cols: mostly vector multiples.
  const std::int64_t rows = pick<std::int64_t>(p, 0, std::int64_t(1) << 32);
  std::int64_t cols = pick<std::int64_t>(p, 1, std::int64_t(1) << 31);
  if (vector_ok && p.ConsumeBool() && cols > 0 && cols < (std::int64_t(1) << 40)) cols = (cols + 7) / 8 * 8;
  SoftmaxShape s = shape(t, backward, rows, cols, vector_ok);
  s.row_edges = row_edges;
  s.dense_rows = dense_rows;
  s.options.persistent = p.ConsumeBool();
  if (p.ConsumeBool()) s.options.max_waves = static_cast<int>(pick<std::int64_t>(p, 1, 64));
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  const std::string text(all.substr(0, nul));

  if (nul != std::string_view::npos) {
    // A raw NUL is never valid JSON: the whole input must be refused.
    try {
      (void)duet::props_from_json(std::string(all), "<fuzz>");
      FUZZ_CHECK(false, "props_from_json accepted a text holding a raw NUL");
    } catch (const duet::Error& e) {
      FUZZ_CHECK(e.status() == duet::Status::parse_error, e.what());
    }
  }

  DeviceProps d;
  try {
    d = duet::props_from_json(text, "<fuzz>");
  } catch (const duet::Error& e) {
    // The parser refuses with parse_error only, naming the origin.
    FUZZ_CHECK(e.status() == duet::Status::parse_error, std::string(duet::to_string(e.status())) + ": " + e.what());
    FUZZ_CHECK(std::string_view(e.what()).substr(0, 6) == "<fuzz>", e.what());
    return 0;
  }
  check_parsed(d);
  check_round_trip(d);

  if (nul == std::string_view::npos) {
    for (const Case& c : fixed_cases()) check_occupancy(d, c);
    for (const SoftmaxShape& s : fixed_shapes()) check_planner(d, s, nullptr);
    return 0;
  }
  FuzzedDataProvider p(data + nul + 1, size - nul - 1);
  for (int i = 0; i < 4 && p.remaining_bytes() > 0; ++i) check_occupancy(d, {fuzz_kernel(p), fuzz_launch(p)});
  for (int i = 0; i < 3 && p.remaining_bytes() > 0; ++i) check_planner(d, fuzz_shape(p), &p);
  return 0;
}
