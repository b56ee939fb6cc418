#include "duet/planner.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>

#include "duet/config.hpp"
#include "duet/error.hpp"
#include "device_features.hpp"
#include "shape_limits.hpp"

namespace duet {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }  // no a + b - 1 overflow

namespace {

std::int64_t next_pow2(std::int64_t v) {
  std::int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Vectors each split_row thread reduces per chunk: 16 x 512 threads x 16
// bytes = 128 KiB a chunk, long enough that the per-chunk reduction and the
// partial's round trip through L2 stay a small part of the chunk's time.
constexpr int kSplitVecsPerThread = 16;

// Rows x chunks (a launch's work items) and their 8-byte partials stay
// below 2^63.
constexpr std::int64_t kMaxWorkItems = std::int64_t(1) << 59;

Plan make_plan(const DeviceProps& dev, const SoftmaxShape& s, const Variant& v, int threads, int smem_vecs,
               const AttributeSource& attributes) {
  Plan p;
  p.variant = find_variant(v);
  if (p.variant < 0) throw Error(Status::internal, "no compiled kernel for " + variant_name(v));
  p.kernel = v;
  p.attributes = attributes(p.variant, false);
  const std::int64_t vec_bytes = std::int64_t(v.vec) * dtype_size(v.dtype);
  p.smem_vecs = smem_vecs;
  p.launch.threads_per_block = threads;
  p.launch.dynamic_smem_bytes = std::int64_t(smem_vecs) * threads * vec_bytes * (s.backward ? 2 : 1);
  p.rows_per_block = v.strategy == Strategy::group_rows  ? threads / v.group * v.rows
                     : v.strategy == Strategy::flat_rows ? threads
                                                         : 1;
  p.max_grid = detail::max_grid_blocks(dev, threads);
  p.persistent = s.options.persistent;
  p.max_waves = s.options.max_waves;
  if (dev.is_gpu()) {
    p.exact = exact_occupancy(dev, p.attributes, p.launch);
    p.tutorial = tutorial_occupancy(dev, p.attributes, p.launch);
  } else {
    p.exact.blocks_per_sm = 1;  // the host runs a row block per core
    p.exact.note = "host: one worker per core";
  }
  p.resident_blocks = std::int64_t(dev.sm_count) * p.exact.blocks_per_sm;
  if (v.strategy == Strategy::split_row || v.strategy == Strategy::split_stream) {
    p.chunk_elems = std::int64_t(threads) * (v.strategy == Strategy::split_row ? kSplitVecsPerThread : v.vpt) * v.vec;
    // Chunks cover the row's packs: with edges its body of whole packs (at
    // most cols / vec of them; the first chunk's block takes the edges).
    const std::int64_t covered = v.edges ? s.cols / v.vec * v.vec : s.cols;
    p.chunks_per_row = static_cast<int>(std::max<std::int64_t>(ceil_div(covered, p.chunk_elems), 1));
  }
  if (v.strategy == Strategy::split_stream)
    // The second pass of an item trails its row's last first pass by about
    // two visits a block (a slack of one per resident block): finished,
    // unless it straggles.
    p.stream_lag = p.chunks_per_row +
                   (s.options.stream_slack > 0 ? s.options.stream_slack : std::max<std::int64_t>(p.resident_blocks, 1));
  return p;
}

// cluster_row for a row of nv vectors at 8 vectors a thread: the fewest
// blocks (2, 4, 8, 16) of up to 512 threads that hold the row, then twice
// as many while each keeps at least 128 threads (up to 8 blocks; 16 for
// many float32 rows) or 256 (16): smaller blocks, more of them an SM,
// overlap one block's arithmetic with another's loads. H200 (bench/NOTES.md,
// v21): f32 N = 65536 0.857 of copy as 4 blocks of 512 threads, 0.874 as 8
// of 256; bf16 131072 0.814 -> 0.863; f32 131072 0.889 as 8 of 512, 0.906 as
// 16 of 256; f32 262144 as 16 of 512: 0.89 against split_stream's 0.75;
// blocks of fewer threads lost (bf16 40000 as 8 of 128: 0.80 against 0.82 as
// 4 of 192).
// 16 is not a portable size: the vendor's count of active clusters (0
// where the device refuses it) has the last word. (compute-sanitizer's
// synccheck ends every launch of clusters of 16 with an illegal address,
// also bench/experiments/synccheck_cluster_repro.cu's, whose simplest kernel only calls
// cluster.sync(): a limit of the tool, v23.)
// Returns false where the device has no clusters or the row needs more than
// s.options.max_cluster_blocks.
bool plan_cluster_row(const DeviceProps& dev, const SoftmaxShape& s, int vec, bool edges, std::int64_t nv,
                      const AttributeSource& attributes, Plan& out) {
  if (!dev.cluster_launch || !s.options.allow_clusters || s.backward || vec != dtype_vec16(s.dtype)) return false;
  constexpr int vpt = kClusterRowVpt;
  constexpr std::int64_t max_slice = std::int64_t(kClusterRowMaxThreads) * vpt;
  constexpr std::int64_t min_slice = std::int64_t(128) * vpt;
  const int most = std::min(s.options.max_cluster_blocks, kMaxClusterBlocks);
  int blocks = 2;
  while (blocks < most && ceil_div(nv, blocks) > max_slice) blocks *= 2;
  if (ceil_div(nv, blocks) > max_slice) return false;
  // 16 blocks while each keeps 128 threads for many float32 rows (f32
  // 65536 as 16 of 128 against 8 of 256: 0.880 -> 0.900 of copy, H200,
  // bench/NOTES.md v93), 256 otherwise (bf16 / f16 131072: the same within
  // 0.004; few rows in a CUDA graph ran slower as 16, v75).
  const std::int64_t min_slice16 = (dtype_size(s.dtype) == 4 && !few_rows(dev, s.rows)) ? min_slice : 2 * min_slice;
  while (2 * blocks <= most &&
         ceil_div(nv, 2 * blocks) >= (2 * blocks <= kPortableClusterBlocks ? min_slice : min_slice16))
    blocks *= 2;
  while (blocks < std::min(s.options.min_cluster_blocks, most)) blocks *= 2;
  // A row or two alone on the device: the most blocks a cluster, so that
  // each loads the least (H100 in a CUDA graph, M = 1: f32 N = 65536 5.2
  // -> 4.5 us, bf16 N = 131072 5.8 -> 5.0 us as 16 blocks against 8; at M =
  // 8, 16 blocks ran slower: bench/NOTES.md v75).
  const int sized = blocks;
  if (lone_rows(dev, s.rows)) blocks = most;
  const std::int64_t slice = ceil_div(nv, blocks);
  const int threads = static_cast<int>(
      std::clamp<std::int64_t>(ceil_div(ceil_div(slice, vpt), 64) * 64, 128, kClusterRowMaxThreads));
  out = make_plan(dev, s, Variant{Strategy::cluster_row, s.dtype, false, vec, 0, vpt, 1, edges}, threads, 0,
                  attributes);
  out.chunks_per_row = blocks;
  out.chunk_elems = slice * vec;
  out.why = "row of " + std::to_string(nv) + " vectors over a cluster of " + std::to_string(blocks) + " blocks: " +
            std::to_string(threads) + " threads x " + std::to_string(vpt) + " vectors each, in registers";
  if (blocks != sized) out.why += " (a row or two alone on the device: the most blocks a cluster, the least to load a block)";
  return out.exact.blocks_per_sm >= 1;
}

// Vectors one block of a held-slice family (cluster_row_smem, grid_row:
// 512 threads, vpt vectors a thread in registers) holds on chip: its
// registers' and what the opt-in shared memory beside its static scratch
// takes (backward keeps two tensors a position); 0 where no slot fits.
std::int64_t held_slice_capacity(const DeviceProps& dev, const SoftmaxShape& s, const Variant& variant,
                                 const AttributeSource& attributes) {
  constexpr int threads = kClusterRowSmemThreads;
  static_assert(kGridRowThreads == threads, "grid_row runs cluster_row_smem's blocks");
  const Plan bare = make_plan(dev, s, variant, threads, 0, attributes);
  const std::int64_t vec_bytes = std::int64_t(variant.vec) * dtype_size(s.dtype) * (s.backward ? 2 : 1);
  const std::int64_t most_smem_vecs =
      (dev.smem_per_block_optin - bare.attributes.static_smem_bytes) / (std::int64_t(threads) * vec_bytes);
  return most_smem_vecs < 1 ? 0 : std::int64_t(threads) * (variant.vpt + most_smem_vecs);
}

// A held-slice family's plan for rows of nv vectors over `blocks` blocks
// (`over` names them in the why-line): each block's slice, the vectors its
// threads keep in shared memory past their registers; false where that
// does not fit the opt-in or no block fits an SM.
bool plan_held_slices(const DeviceProps& dev, const SoftmaxShape& s, const Variant& variant, std::int64_t nv,
                      std::int64_t blocks, const std::string& over, const AttributeSource& attributes, Plan& out) {
  constexpr int threads = kClusterRowSmemThreads;
  const std::int64_t slice = ceil_div(nv, blocks);
  const int smem_vecs = static_cast<int>(std::max<std::int64_t>(ceil_div(slice, threads) - variant.vpt, 1));
  out = make_plan(dev, s, variant, threads, smem_vecs, attributes);
  out.chunks_per_row = static_cast<int>(blocks);
  out.chunk_elems = slice * variant.vec;
  out.why = "row of " + std::to_string(nv) + " vectors over " + over + ": " + std::to_string(threads) +
            " threads x " + std::to_string(variant.vpt) + " vectors each in registers, " + std::to_string(smem_vecs) +
            " in shared memory (" + std::to_string(out.launch.dynamic_smem_bytes) + " B a block" +
            (s.backward ? ", y and dy" : "") + ")";
  return out.exact.blocks_per_sm >= 1 &&
         out.launch.dynamic_smem_bytes + out.attributes.static_smem_bytes <= dev.smem_per_block_optin;
}

// cluster_row_smem for a row of nv vectors past a cluster's registers: 512
// threads a block, 8 vectors a thread in registers and the rest of the
// block's slice in its shared memory, one block an SM. The fewest blocks
// (2, 4, 8, 16) that hold the row: every block count leaves one block an
// SM, so fewer blocks a cluster give more clusters, which fit a GPC's SMs
// more easily (H100, f32 262148 as 4 blocks: 0.79 of copy, as 16: 0.63;
// bench/NOTES.md v47). float32 only, unless clusters are preferred
// (DUET_CLUSTER=prefer): 16-bit rows, twice the elements a byte, ran below
// split_stream (forward bf16 1M / 2M: 0.68 / 0.69 against 0.75 / 0.71;
// backward 262144..1M: 0.76-0.80 against 0.80-0.86), f32 above it
// (forward 1M: 0.79 against 0.71; backward 65536 / 589824: 0.92 / 0.82
// against 0.86 / 0.79; v48). Backward keeps y and dy, 4 vectors of each a
// thread in registers. Returns false where the device has no clusters or
// the row needs more than s.options.max_cluster_blocks blocks' opt-in
// memory.
bool plan_cluster_row_smem(const DeviceProps& dev, const SoftmaxShape& s, int vec, bool edges, std::int64_t nv,
                           const AttributeSource& attributes, Plan& out) {
  if (!dev.cluster_launch || !s.options.allow_clusters || vec != dtype_vec16(s.dtype)) return false;
  if (dtype_size(s.dtype) != 4 && !s.options.prefer_clusters) return false;
  const int vpt = cluster_row_smem_vpt(s.backward);
  const Variant variant{Strategy::cluster_row_smem, s.dtype, s.backward, vec, 0, vpt, 1, edges};
  const std::int64_t capacity = held_slice_capacity(dev, s, variant, attributes);  // vectors a block
  if (capacity == 0) return false;
  const int most = std::min(s.options.max_cluster_blocks, kMaxClusterBlocks);
  int blocks = std::max(2, std::min(s.options.min_cluster_blocks, most));
  while (blocks < most && ceil_div(nv, blocks) > capacity) blocks *= 2;
  if (ceil_div(nv, blocks) > capacity) return false;
  return plan_held_slices(dev, s, variant, nv, blocks, "a cluster of " + std::to_string(blocks) + " blocks",
                          attributes, out);
}

// grid_row for rows of nv vectors: cluster_row_smem's blocks (512 threads,
// 8 vectors a thread in registers, backward 4 of each tensor, the rest in
// shared memory, one block an SM) over G blocks of one grid: the fewest
// that hold the row, then as many more as leave no SM idle (SMs / G groups
// over all the SMs: f32 4M as two groups of 66 blocks, not of the 57 that
// hold it), at least s.options.grid_row_blocks (DUET_GRID_BLOCKS); then as
// few as give each block the same slice, so that none is empty. Every
// group must be resident at once (the launch is cooperative), so G is at
// most the SMs. float32 only unless forced (DUET_STRATEGY=grid_row):
// 16-bit rows ran at or below split_stream, as on cluster_row_smem (H100
// bf16 1M / 2M / 4M: 0.739 / 0.673 / 0.663 against 0.747 / 0.712 / 0.676),
// where f32 gained (2M / 4M: 0.77 / 0.74-0.78 against 0.68 / 0.64;
// backward 1M / 2M / 4M: 0.79 / 0.77 / 0.72 against 0.69 / 0.60 / 0.53;
// bench/NOTES.md v63). Returns false where the device has no cp.async
// (sm_80+; its copies into shared memory) or the row needs more blocks
// than SMs.
bool plan_grid_row(const DeviceProps& dev, const SoftmaxShape& s, int vec, bool edges, std::int64_t nv,
                   const AttributeSource& attributes, Plan& out) {
  if (!dev.is_gpu() || !s.options.allow_grid_row || vec != dtype_vec16(s.dtype) ||
      !detail::copies_to_shared_async(dev))
    return false;
  if (dtype_size(s.dtype) != 4 && !s.options.force_grid_row) return false;
  const int vpt = cluster_row_smem_vpt(s.backward);
  const Variant variant{Strategy::grid_row, s.dtype, s.backward, vec, 0, vpt, 1, edges};
  const std::int64_t capacity = held_slice_capacity(dev, s, variant, attributes);  // vectors a block
  if (capacity == 0) return false;
  // One block an SM where the opt-in is taken whole; the bound is checked
  // below with the plan's own occupancy.
  const std::int64_t sms = std::max(dev.sm_count, 1);
  std::int64_t blocks = std::max<std::int64_t>(
      {ceil_div(nv, capacity), std::min<std::int64_t>(s.options.grid_row_blocks, sms), 1});
  if (blocks > sms) return false;
  blocks = sms / (sms / blocks);
  const std::int64_t packs = std::max<std::int64_t>(nv, 1);
  blocks = ceil_div(packs, ceil_div(packs, blocks));  // as few as give the same slice: none left empty
  const bool fits =
      plan_held_slices(dev, s, variant, nv, blocks, std::to_string(blocks) + " blocks of one grid", attributes, out);
  out.why += ", pairs through global memory";
  return fits && blocks <= out.resident_blocks;
}

// interleaved_smem for interleaved rows past registers, on packs, where the
// device copies to shared memory asynchronously (NVIDIA sm_80+; on others
// a thread's copies would wait one by one): blocks of 512 threads and the
// widest tile from `widest` lanes (a 128-byte line of rows) down to
// `narrowest` (a 32-byte sector) whose packs fit the opt-in beside the
// kernel's scratch. Where that gives one block an SM (nothing else runs
// while a block waits for its tile or reduces it), a narrower tile, down
// to half a line, that gives two (narrower ones read lines far apart a
// sector at a time: 2-4x slower). Where no tile of half a line fits one
// block, the line-wide tile over the fewest blocks of a cluster that give
// two an SM (interleaved_cluster, sm_90+; with DUET_CLUSTER=prefer also
// where a block holds the tile at one an SM): on the H100 it lost to the
// half-line tiles (f32 C = 1000 forward 0.71 against 0.89) and led the
// sector-wide tile and two passes (bench/NOTES.md v50, v51).
bool plan_interleaved_smem(const DeviceProps& dev, const SoftmaxShape& s, int widest, int narrowest,
                           const AttributeSource& attributes, Plan& out) {
  if (!s.vector_ok || s.options.interleaved_stash == InterleavedStash::off || !detail::copies_to_shared_async(dev))
    return false;
  const int threads = kInterleavedSmemThreads;
  const int pack_bytes = kInterleavedPack * dtype_size(s.dtype);
  // The plan for tiles of `tile` lanes over `blocks` blocks, or none where
  // its packs do not fit.
  const auto tile_plan = [&](int tile, int blocks) -> std::optional<Plan> {
    const Variant variant{blocks > 1 ? Strategy::interleaved_cluster : Strategy::interleaved_smem,
                          s.dtype, s.backward, kInterleavedPack, 0, 0, 1, false};
    const int slots = threads / tile;
    const std::int64_t held = ceil_div(s.cols, std::int64_t(slots) * blocks);  // packs a thread holds of each tensor
    if (held * threads * pack_bytes * (s.backward ? 2 : 1) > dev.smem_per_block_optin) return std::nullopt;
    Plan plan = make_plan(dev, s, variant, threads, static_cast<int>(held), attributes);
    if (plan.exact.blocks_per_sm < 1 ||
        plan.launch.dynamic_smem_bytes + plan.attributes.static_smem_bytes > dev.smem_per_block_optin)
      return std::nullopt;
    plan.rows_per_block = tile * kInterleavedPack;
    plan.inner_tiles = ceil_div(s.inner, plan.rows_per_block);
    if (blocks > 1) plan.chunks_per_row = blocks;
    plan.why = "interleaved rows (" + std::to_string(s.inner) + " an outer row, elements apart) past registers: tiles of " +
               std::to_string(plan.rows_per_block) + " rows (" + std::to_string(tile) + " lanes of " +
               std::to_string(kInterleavedPack) + "-row packs), " +
               (blocks > 1 ? "a cluster of " + std::to_string(blocks) + " blocks each " : std::string()) +
               std::to_string(slots) + " threads a row, " + std::to_string(held) + " packs a thread" +
               (s.backward ? " of each tensor" : "") + " in shared memory (" +
               std::to_string(plan.launch.dynamic_smem_bytes) + " B a block, " +
               std::to_string(plan.exact.blocks_per_sm) + (plan.exact.blocks_per_sm == 1 ? " block" : " blocks") +
               " an SM), read once, the next tile's copies under this one's writes";
    return plan;
  };
  std::optional<Plan> chosen;
  const int forced = s.options.interleaved_tile_bytes / pack_bytes;
  if (forced >= 1 && forced <= kInterleavedLanesMax)
    if ((chosen = tile_plan(forced, 1))) chosen->why += " (DUET_INTERLEAVED_TILE)";
  for (int tile = widest; !chosen && tile >= narrowest; tile /= 2) chosen = tile_plan(tile, 1);
  const auto two_an_sm = [](const std::optional<Plan>& p) { return p && p->exact.blocks_per_sm >= 2; };
  const bool choosing = s.options.interleaved_tile_bytes == 0;
  const auto over_a_cluster = [&] {
    if (!choosing || !dev.cluster_launch || !s.options.allow_clusters || two_an_sm(chosen)) return;
    const int most = std::min(s.options.max_cluster_blocks, kMaxClusterBlocks);
    for (int blocks = std::max(2, s.options.min_cluster_blocks); blocks <= most; blocks *= 2)
      if (auto c = tile_plan(widest, blocks); two_an_sm(c)) {
        chosen = std::move(c);
        return;
      }
  };
  if (s.options.prefer_clusters) over_a_cluster();
  if (chosen && !two_an_sm(chosen) && choosing)
    for (int tile = chosen->rows_per_block / kInterleavedPack / 2; tile * pack_bytes >= 64; tile /= 2)
      if (auto two = tile_plan(tile, 1); two_an_sm(two)) {
        chosen = std::move(two);
        break;
      }
  if (!chosen || chosen->rows_per_block * dtype_size(s.dtype) < 64) over_a_cluster();
  if (!chosen) return false;
  out = std::move(*chosen);
  return true;
}

// interleaved_stream for interleaved rows on packs past a tile on chip, on
// GPUs: tiles of `tile` lanes (the line-wide tile, or as many lanes as the
// outer row has), blocks of 512 threads, each tile's column cut into
// chunks of slots x VPT positions that any block takes from a queue, read
// twice, the second time mostly from L2. One block a tile instead (the two
// passes of interleaved_rows) leaves SMs idle wherever there are fewer
// tiles than SMs: dim 0 of [65536, 1024] f32 is 32 tiles of 8 MiB
// (bench/NOTES.md v67).
bool plan_interleaved_stream(const DeviceProps& dev, const SoftmaxShape& s, int tile,
                             const AttributeSource& attributes, Plan& out) {
  if (!dev.is_gpu() || !s.vector_ok || !s.options.allow_interleaved_stream || tile > kInterleavedStreamLanesMax)
    return false;
  const int vpt = interleaved_stream_vpt(s.dtype, s.backward);
  Plan p = make_plan(dev, s, Variant{Strategy::interleaved_stream, s.dtype, s.backward, kInterleavedPack, 0, vpt, 1, false},
                     kInterleavedStreamThreads, 0, attributes);
  if (p.exact.blocks_per_sm < 1) return false;
  const std::int64_t chunk_cols = std::int64_t(kInterleavedStreamThreads / tile) * vpt;
  p.rows_per_block = tile * kInterleavedPack;
  p.inner_tiles = ceil_div(s.inner, p.rows_per_block);
  p.chunks_per_row = static_cast<int>(ceil_div(s.cols, chunk_cols));
  p.chunk_elems = chunk_cols;
  // The chunks of the tiles that share 1 KiB of each line alternate in
  // the queue, so that DRAM serves runs of 1 KiB, not 128 bytes 4 KiB apart
  // ([65536, 1024] dim 0: 1, 2, 4, 8 tiles gave bf16 forward 0.34, 0.39,
  // 0.42, 0.43 of copy, although 8 tiles' columns (64 MiB) outgrow the L2
  // between a chunk's two reads; bench/NOTES.md v67).
  const int tile_bytes = tile * kInterleavedPack * dtype_size(s.dtype);
  const std::int64_t together =
      s.options.interleaved_stream_tiles > 0 ? s.options.interleaved_stream_tiles
                                             : std::min<std::int64_t>(std::max(1024 / tile_bytes, 1), p.inner_tiles);
  p.tiles_together = static_cast<int>(std::clamp<std::int64_t>(together, 1, std::max<std::int64_t>(s.rows, 1) * p.inner_tiles));
  p.stream_lag = std::int64_t(p.tiles_together) * p.chunks_per_row + p.resident_blocks;
  p.why = "interleaved rows (" + std::to_string(s.inner) + " an outer row, elements apart) past a tile on chip: tiles of " +
          std::to_string(p.rows_per_block) + " rows (" + std::to_string(tile) + " lanes of " +
          std::to_string(kInterleavedPack) + "-row packs), each tile's rows in " + std::to_string(p.chunks_per_row) +
          " chunks of " + std::to_string(chunk_cols) + " elements that any block takes, " + std::to_string(vpt) +
          " packs a thread" + (s.backward ? " of each tensor" : "") + ", the chunks of " +
          std::to_string(p.tiles_together) + (p.tiles_together == 1 ? " tile" : " neighbouring tiles") +
          " alternating, two passes, the second " + std::to_string(p.stream_lag) + " chunks behind";
  out = std::move(p);
  return true;
}

// interleaved_slabs for interleaved rows on packs past a tile on chip whose
// tiles' columns are too tall for the L2 to bridge interleaved_stream's two
// visits of a chunk (`streamed`, its plan: the columns of the tiles whose
// chunks alternate are more than half the L2), or wherever it would run
// where forced: tiles of up to 256 lanes (a whole line of up to 4 KiB),
// each column's steps dealt to slabs so that the units fill one wave (the
// slabs sized at whole slots, at least a step each). dim 0 of [65536, 1024]
// f32: streamed, its blocks read 128-byte lines of 8 tiles and both passes
// from DRAM (bench/NOTES.md v67); as slabs, whole 4 KiB lines back to back.
bool plan_interleaved_slabs(const DeviceProps& dev, const SoftmaxShape& s, const Plan& streamed,
                            const AttributeSource& attributes, Plan& out) {
  if (!dev.is_gpu() || !s.vector_ok || !s.options.allow_interleaved_slabs) return false;
  const int elem = dtype_size(s.dtype);
  const int tensors = s.backward ? 2 : 1;
  const __int128 set_bytes = __int128(streamed.tiles_together) * streamed.rows_per_block * elem * s.cols * tensors;
  if (!s.options.force_interleaved_slabs && (dev.l2_bytes <= 0 || set_bytes <= dev.l2_bytes / 2)) return false;
  const int vpt = interleaved_slabs_vpt(s.dtype, s.backward);
  const Variant v{Strategy::interleaved_slabs, s.dtype, s.backward, kInterleavedPack, 0, vpt, 1, false};
  Plan p = make_plan(dev, s, v, kInterleavedSlabsThreads, 0, attributes);
  if (p.exact.blocks_per_sm < 1) return false;
  const int lanes =
      static_cast<int>(std::min<std::int64_t>(next_pow2(ceil_div(s.inner, kInterleavedPack)), kInterleavedSlabsLanesMax));
  const int slots = kInterleavedSlabsThreads / lanes;
  p.rows_per_block = lanes * kInterleavedPack;
  p.inner_tiles = ceil_div(s.inner, p.rows_per_block);
  const std::int64_t groups = std::max<std::int64_t>(s.rows, 1) * p.inner_tiles;
  const std::int64_t most_slabs = std::max<std::int64_t>(ceil_div(s.cols, std::int64_t(slots) * vpt), 1);
  std::int64_t slabs = std::clamp<std::int64_t>(p.resident_blocks / groups, 1, std::min<std::int64_t>(most_slabs, 1 << 30));
  p.chunk_elems = interleaved_slab_length(std::max<std::int64_t>(s.cols, 1), slabs, slots);
  slabs = std::max<std::int64_t>(ceil_div(s.cols, p.chunk_elems), 1);  // no empty slab
  p.chunks_per_row = static_cast<int>(slabs);
  if (groups * slabs > p.max_grid) return false;  // a block a slab
  p.why = "interleaved rows (" + std::to_string(s.inner) + " an outer row, elements apart) past a tile on chip, " +
          "too tall for the L2 between two passes of a chunk: tiles of " + std::to_string(p.rows_per_block) + " rows (" +
          std::to_string(lanes) + " lanes of " + std::to_string(kInterleavedPack) + "-row packs), each tile's rows in " +
          std::to_string(slabs) + (slabs == 1 ? " slab" : " slabs") + " of " + std::to_string(p.chunk_elems) +
          " elements (steps of " + std::to_string(std::int64_t(slots) * vpt) +
          " lines dealt to the slabs in turn) read line by line, " + std::to_string(vpt) + " packs a thread" +
          (s.backward ? " of each tensor" : "") + "; the slabs' pairs folded in bundles of " +
          std::to_string(kInterleavedSlabBundle) + ", then a second kernel writes, from the lines read last";
  out = std::move(p);
  return true;
}

// interleaved_ring for interleaved rows on 16-byte packs (SoftmaxShape::
// wide_packs) on NVIDIA sm_90+ (its copies are cp.async, sm_80+; measured
// on the H200 only, so an A100 keeps the other plans), rows of at least
// kInterleavedRingMinCols elements: the
// widest tile, from a 512-byte line of rows down to a 128-byte one (and no
// wider than an outer row's rows), whose two buffers fit half an SM's
// shared memory, so that two blocks an SM can share it; 16-bit rows also
// at a 64-byte line where no wider one fits, the forward in half an SM,
// the backward in the opt-in (bf16 rows of 512: 0.76 / 0.83 of copy
// against 0.65 / 0.79; v86). The f32 forward takes three buffers at the
// widest line they fit in half an SM first (rows of 100 and 200: 0.90 /
// 0.91 against 0.87 / 0.86 with two at the whole line; v87). Narrower
// lines, f32 rows at 64 bytes and shorter rows ran slower than the other
// plans (H200, bench/NOTES.md v85:
// lines of 32-64 bytes 0.21-0.77 of copy; rows of 16 and 21 forward
// 0.60-0.91 against 0.67-0.94), rows of 100 and 200 faster (forward bf16
// 0.84-0.87 against 0.51-0.54, f32 0.85-0.86 against 0.77-0.82; bf16
// backward 0.83-0.89 against 0.77-0.85). The float32 backward keeps the
// register tiles, which led it (0.92-0.96 against 0.88-0.92), unless
// forced (DUET_INTERLEAVED_RING=always).
bool plan_interleaved_ring(const DeviceProps& dev, const SoftmaxShape& s, const AttributeSource& attributes,
                           Plan& out) {
  if (!dev.is_gpu() || !s.vector_ok || !s.wide_packs || !s.options.allow_interleaved_ring ||
      s.cols < kInterleavedRingMinCols || !detail::copies_to_shared_async(dev) || dev.cc_major < 9)
    return false;
  if (s.backward && dtype_size(s.dtype) == 4 && !s.options.force_interleaved_ring) return false;
  const int vec = dtype_vec16(s.dtype);
  const int tensors = s.backward ? 2 : 1;
  const std::int64_t lanes_of_inner = next_pow2(ceil_div(s.inner, vec));
  const bool two_sectors = dtype_size(s.dtype) == 2;  // 16-bit rows also at a 64-byte line
  // The plan at `lanes` and `buffers`, or none where they do not fit.
  const auto ring_plan = [&](int lanes, int buffers) -> std::optional<Plan> {
    if (lanes > lanes_of_inner) return std::nullopt;
    const int slots = kInterleavedRingThreads / lanes;
    const std::int64_t held = ceil_div(s.cols, std::int64_t(slots));  // packs a thread a tensor a buffer
    const std::int64_t bytes = buffers * held * kInterleavedRingThreads * 16 * tensors;
    // Half an SM; a 64-byte line's backward, the opt-in (one block an SM).
    const std::int64_t budget = lanes * 16 < 128 && s.backward ? dev.smem_per_block_optin : dev.smem_per_sm / 2;
    if (bytes > budget || bytes > dev.smem_per_block_optin) return std::nullopt;
    Plan p = make_plan(dev, s, Variant{Strategy::interleaved_ring, s.dtype, s.backward, vec, 0, buffers, 1, false},
                       kInterleavedRingThreads, static_cast<int>(buffers * held), attributes);
    if (p.exact.blocks_per_sm < 1 ||
        p.launch.dynamic_smem_bytes + p.attributes.static_smem_bytes > dev.smem_per_block_optin)
      return std::nullopt;
    p.rows_per_block = lanes * vec;
    p.inner_tiles = ceil_div(s.inner, p.rows_per_block);
    p.why = "interleaved rows (" + std::to_string(s.inner) + " an outer row, elements apart): tiles of " +
            std::to_string(p.rows_per_block) + " rows (" + std::to_string(lanes) + " lanes of " + std::to_string(vec) +
            "-row packs), " + std::to_string(slots) + " threads a row, " + std::to_string(held) +
            " packs a thread" + (s.backward ? " of each tensor" : "") + " through a ring of " +
            std::to_string(buffers) + " buffers in shared memory (" + std::to_string(p.launch.dynamic_smem_bytes) +
            " B a block, " + std::to_string(p.exact.blocks_per_sm) +
            (p.exact.blocks_per_sm == 1 ? " block" : " blocks") + " an SM), " +
            (buffers == 2 ? std::string("the next tile") : std::to_string(buffers - 1) + " tiles") +
            " in flight under this one";
    return p;
  };
  // The f32 forward: three buffers at the widest line they fit (v87), else
  // two.
  if (interleaved_ring_three_buffers(s.dtype, s.backward))
    for (int lanes = kInterleavedLanesMax; lanes * 16 >= 128; lanes /= 2)
      if (auto p = ring_plan(lanes, 3)) {
        out = std::move(*p);
        return true;
      }
  for (int lanes = kInterleavedLanesMax; lanes * 16 >= (two_sectors ? 64 : 128); lanes /= 2)
    if (auto p = ring_plan(lanes, kInterleavedRingBuffers)) {
      out = std::move(*p);
      return true;
    }
  return false;
}

// interleaved_rows: lanes of packs of four neighbouring rows where every
// tensor sits on packs (SoftmaxShape::vector_ok), else lanes of one row;
// slots split each row's elements. A thread keeps interleaved_vpt elements
// of its lane in registers where the slots that needs fit a block beside a
// tile of 128 bytes of rows (a line); the block then takes the lanes, from
// half a line up to 32, that keep the most rows resident an SM.
// Else interleaved_smem where its tile fits shared memory, else the
// two-pass kernel: a 128-byte tile and the most slots, the tile
// halved (down to 32 bytes, one sector) while the tiles resident at once
// span more than half the L2, so that the second pass finds them there.
// Fewer lanes where an outer row has fewer rows.
Plan plan_interleaved(const DeviceProps& dev, const SoftmaxShape& s, const AttributeSource& attributes) {
  if (Plan ring; plan_interleaved_ring(dev, s, attributes, ring)) return ring;
  const int elem = dtype_size(s.dtype);
  const int vec = s.vector_ok ? kInterleavedPack : 1;
  const int most_threads = interleaved_max_threads(vec);
  const int warp = std::max(dev.is_gpu() ? dev.warp_size : 32, 1);
  const std::int64_t lanes_of_inner = next_pow2(std::min<std::int64_t>(ceil_div(s.inner, vec), 64));
  const int line_lanes = static_cast<int>(std::min<std::int64_t>(128 / (elem * vec), lanes_of_inner));
  const auto slots_for = [&](std::int64_t wanted, int lanes) {
    const std::int64_t step = std::max(warp / lanes, 1);  // whole warps where a tile is narrower than one
    return static_cast<int>(std::min<std::int64_t>(ceil_div(wanted, step) * step, most_threads / lanes));
  };
  // The fewest loads a thread that give the fewest slots; the wide entries
  // are built for NVIDIA sm_90 and later (interleaved_vpt_wide).
  int reg_vpt = interleaved_vpt(s.dtype, vec, s.backward);
  if (const int wide = interleaved_vpt_wide(s.dtype, vec, s.backward);
      wide > 0 && dev.vendor == Vendor::nvidia && dev.cc_major >= 9 &&
      ceil_div(s.cols, std::int64_t(wide)) < ceil_div(s.cols, std::int64_t(reg_vpt)))
    reg_vpt = wide;
  const std::int64_t reg_slots = ceil_div(s.cols, reg_vpt);
  int vpt = 0, tile = line_lanes, slots = 0;
  bool tile_forced = false;
  if (reg_slots * line_lanes <= most_threads) {
    vpt = reg_vpt;
    // DUET_INTERLEAVED_TILE: that many bytes of rows where its slots fit a
    // block. Else, from half a line of rows (64 bytes or more: two sectors)
    // up to 32 lanes, the tile that keeps the most lanes resident an SM
    // (blocks an SM x the tile's lanes), the wider where two keep as many
    // (H100 f32 rows of 100 forward: 8 lanes, 5 blocks of 7 warps, 0.97 of
    // copy against 0.90 for 16 lanes, 2 blocks of 13 warps; rows of 21 and
    // 16: 16 lanes, as many as 32, 0.96 against 0.98; bench/NOTES.md v80;
    // H200 f32 rows of 200: 4 lanes, 5 blocks, 0.77 against 0.67 for 8
    // lanes, 2 blocks; v84). Off GPUs the widest.
    const int forced = s.options.interleaved_tile_bytes / (elem * vec);
    tile_forced = forced >= 1 && forced <= 32 && reg_slots * forced <= most_threads;
    if (tile_forced) {
      tile = forced;
    } else {
      const auto resident_lanes = [&](int t) -> std::int64_t {
        if (!dev.is_gpu()) return 0;
        const Plan p = make_plan(dev, s, Variant{Strategy::interleaved_rows, s.dtype, s.backward, vec, 0, vpt, 1, false},
                                 t * slots_for(reg_slots, t), 0, attributes);
        return std::int64_t(p.exact.blocks_per_sm) * t;
      };
      if (tile >= 2 && tile / 2 * elem * vec >= 64) tile /= 2;  // from half a line (64 bytes: two sectors)
      std::int64_t most_lanes = resident_lanes(tile);
      for (int t = tile * 2; t <= 32 && t <= lanes_of_inner && reg_slots * t <= most_threads; t *= 2)
        if (const std::int64_t lanes = resident_lanes(t); lanes >= most_lanes) {
          most_lanes = lanes;
          tile = t;
        }
    }
    slots = slots_for(reg_slots, tile);
  } else {
    slots = slots_for(s.cols, tile);
  }
  const int min_tile = std::max(32 / (elem * vec), 1);
  if (vpt == 0 || s.options.interleaved_stash == InterleavedStash::always) {
    Plan held;
    if (plan_interleaved_smem(dev, s, line_lanes, std::min(min_tile, line_lanes), attributes, held)) return held;
  }
  if (vpt == 0) {
    Plan streamed;
    if (plan_interleaved_stream(dev, s, line_lanes, attributes, streamed)) {
      Plan slabs;
      if (plan_interleaved_slabs(dev, s, streamed, attributes, slabs)) return slabs;
      return streamed;
    }
  }
  Plan plan = make_plan(dev, s, Variant{Strategy::interleaved_rows, s.dtype, s.backward, vec, 0, vpt, 1, false},
                        tile * slots, 0, attributes);
  if (vpt == 0 && dev.is_gpu() && dev.l2_bytes > 0) {
    const auto span = [&](const Plan& p, int t) {  // in 128 bits: a property file may hold any SM count
      return __int128(p.resident_blocks) * t * vec * s.cols * elem * (s.backward ? 2 : 1);
    };
    while (tile / 2 >= min_tile && span(plan, tile) > dev.l2_bytes / 2) {
      tile /= 2;
      slots = slots_for(s.cols, tile);
      plan = make_plan(dev, s, plan.kernel, tile * slots, 0, attributes);
    }
  }
  plan.rows_per_block = tile * vec;
  plan.inner_tiles = ceil_div(s.inner, plan.rows_per_block);
  plan.why = "interleaved rows (" + std::to_string(s.inner) + " an outer row, elements apart): tiles of " +
             std::to_string(plan.rows_per_block) + " rows" +
             (vec > 1 ? " (" + std::to_string(tile) + " lanes of " + std::to_string(vec) + "-row packs)" : std::string()) +
             ", " + std::to_string(slots) + " threads a row, " +
             (vpt > 0 ? std::to_string(vpt) + " elements a thread in registers"
                      : std::string("two passes, the second in reverse from L2")) +
             (tile_forced ? " (DUET_INTERLEAVED_TILE)" : "");
  return plan;
}

}  // namespace

bool few_rows(const DeviceProps& dev, std::int64_t rows) {
  return dev.is_gpu() && rows >= 1 && rows * 2 <= dev.sm_count;
}
bool lone_rows(const DeviceProps& dev, std::int64_t rows) {
  return dev.is_gpu() && rows >= 1 && rows * 4 * kMaxClusterBlocks <= dev.sm_count;
}

Grid grid_for(const Plan& p, std::int64_t rows) {
  const std::int64_t chunks = std::max(p.chunks_per_row, 1);
  // The messages are built only on failure: this runs on every call.
  require(rows >= 0, Status::invalid_argument, [&] { return "rows must be >= 0, got " + std::to_string(rows); });
  require(rows <= kMaxWorkItems / chunks, Status::invalid_argument, [&] {
    return "rows = " + std::to_string(rows) + " is too many for one launch: at most " +
           std::to_string(kMaxWorkItems / chunks) + " rows" +
           (chunks > 1 ? " of " + std::to_string(chunks) + " chunks" : std::string());
  });
  const FamilyInfo& family = family_of(p.kernel.strategy);
  require(family.work != WorkUnit::inner_tile ||
              rows <= kMaxWorkItems / std::max<std::int64_t>(p.inner_tiles, 1) / chunks,
          Status::invalid_argument, [&] {
            return "rows = " + std::to_string(rows) + " outer rows of " + std::to_string(p.inner_tiles) +
                   " tiles are too many for one launch";
          });
  std::int64_t work = 0;
  switch (family.work) {
    case WorkUnit::row_tile: work = ceil_div(rows, p.rows_per_block); break;
    case WorkUnit::row: work = rows; break;
    case WorkUnit::row_chunk: work = rows * p.chunks_per_row; break;
    case WorkUnit::chunk_visit: work = 2 * rows * p.chunks_per_row; break;
    case WorkUnit::inner_tile: work = rows * p.inner_tiles * chunks; break;  // interleaved_cluster: a tile a cluster
  }
  if (p.kernel.strategy == Strategy::interleaved_stream) work *= 2;  // two visits a chunk of a tile
  // Grid: up to the family's waves of the blocks that fit at once
  // (FamilyInfo::waves), the kernels' grid-stride loops covering the rest:
  // 64 for rows, so for the usual shapes one block per unit of work (a grid
  // of one wave, the Triton tutorial's persistent grid, PlanOptions::
  // persistent, measured ~10% slower on the H200 at 256 MB: N = 64..4096
  // f32, 0.85-0.90 of copy against 0.95; bench/NOTES.md v6); 16 for
  // interleaved tiles, so that a block takes several tiles of a large
  // tensor (v82); one for cluster_row (launching a fresh cluster per row
  // measured 0.74 of copy at f32 N = 65536 against 0.81 persistent, H200,
  // v10, the reverse of single blocks), interleaved_cluster (H100 [4096, M]
  // backward f32 0.71 against 0.63 in 64 waves, v51), split_stream and
  // interleaved_stream (their blocks take their work from a queue) and
  // grid_row (its groups wait on each other). PlanOptions::max_waves caps
  // the others (a comparison).
  const std::int64_t waves = detail::grid_waves(family.waves, p.persistent, p.max_waves);
  // Within the vendor's grid limit (a device file of 2^20 SMs asks for
  // more): the grid-stride loops and split_stream's queue cover any grid.
  const std::int64_t limit = p.max_grid > 0 ? p.max_grid : (std::int64_t(1) << 31) - 1;
  std::int64_t resident = std::min(std::max<std::int64_t>(p.resident_blocks, 1) * waves, limit);
  if (family.cluster_launch || family.cooperative)  // whole clusters; whole groups
    resident = std::max<std::int64_t>(resident / p.chunks_per_row, 1) * p.chunks_per_row;
  Grid g;
  g.main = {std::min(work, resident), p.launch.threads_per_block, p.launch.dynamic_smem_bytes};
  if (p.kernel.strategy == Strategy::interleaved_slabs) {  // a block a unit (a slab of a tile), both kernels
    require(work <= limit, Status::invalid_argument, [&] {
      return std::to_string(work) + " slabs are too many for one launch of " + std::to_string(limit) + " blocks";
    });
    g.main.grid = work;
  }
  if (family.two_kernels) g.finalize = {g.main.grid, p.launch.threads_per_block, 0};
  // Workspaces: split_row's partials; split_stream's, interleaved_stream's,
  // interleaved_slabs' and grid_row's counters and partials.
  if (p.kernel.strategy == Strategy::split_row)
    g.workspace_bytes = rows * p.chunks_per_row * 2 * std::int64_t(sizeof(float));
  if (p.kernel.strategy == Strategy::split_stream) {
    g.workspace_bytes =
        split_stream_partials_offset(rows) + rows * (p.chunks_per_row + 1) * 2 * std::int64_t(sizeof(float));
  }
  if (p.kernel.strategy == Strategy::interleaved_stream)
    g.workspace_bytes = interleaved_stream_workspace_bytes(rows * p.inner_tiles, chunks, p.rows_per_block);
  if (p.kernel.strategy == Strategy::interleaved_slabs)
    g.workspace_bytes = interleaved_slabs_workspace_bytes(rows * p.inner_tiles, chunks, p.rows_per_block);
  if (p.kernel.strategy == Strategy::grid_row && g.main.grid > 0)
    g.workspace_bytes = grid_row_workspace_bytes(g.main.grid / p.chunks_per_row, p.chunks_per_row);
  return g;
}

void set_grid(Plan& p, std::int64_t rows) {
  const Grid g = grid_for(p, rows);
  p.geometry = g.main;
  p.finalize_geometry = g.finalize;
  p.workspace_bytes = g.workspace_bytes;
}

namespace {
Plan plan_kernel(const DeviceProps& dev, const SoftmaxShape& s, const AttributeSource& attributes);
}  // namespace

Plan plan_softmax(const DeviceProps& dev, const SoftmaxShape& shape, const AttributeSource& attributes,
                  const ClusterSource& clusters) {
  SoftmaxShape s = shape;
  Plan plan = plan_kernel(dev, s, attributes);
  // The occupancy model counts blocks per SM; how many clusters find room
  // together (a cluster's blocks share one GPC) is the vendor's answer, and
  // it sizes the grid's waves.
  while (family_of(plan.kernel.strategy).cluster_launch && clusters) {
    const int n =
        clusters(plan.variant, plan.launch.threads_per_block, plan.chunks_per_row, plan.launch.dynamic_smem_bytes);
    if (n >= 1) {
      plan.resident_blocks = std::int64_t(n) * plan.chunks_per_row;
      break;
    }
    // None fits: clusters of at most the portable 8 blocks if the plan had
    // more (16 needs the device's consent), then none.
    const bool past_portable = plan.chunks_per_row > kPortableClusterBlocks;
    const std::string why = "no cluster of " + std::to_string(plan.chunks_per_row) + " x " + variant_name(plan.kernel) +
                            " fits this device";
    if (past_portable)
      s.options.max_cluster_blocks = kPortableClusterBlocks;
    else
      s.options.allow_clusters = false;
    plan = plan_kernel(dev, s, attributes);
    plan.fallback = why;
  }
  set_grid(plan, s.rows);
  return plan;
}

namespace {
// The plan, refused with unsupported where its kernel fits no block on an SM.
Plan require_fits(const DeviceProps& dev, Plan plan) {
  if (plan.exact.blocks_per_sm < 1)
    throw Error(Status::unsupported, variant_name(plan.kernel) + " does not fit on " + dev.name + " (" +
                                         std::string(to_string(plan.exact.limiter)) + ")");
  return plan;
}

Plan plan_kernel(const DeviceProps& dev, const SoftmaxShape& s, const AttributeSource& attributes) {
  detail::require_plannable(s.rows, s.cols);
  if (s.inner > 0) {
    require(s.rows <= (std::int64_t(1) << 62) / s.cols / s.inner, Status::invalid_argument,
            "rows x inner x cols must be below 2^62 elements");
    return require_fits(dev, plan_interleaved(dev, s, attributes));
  }
  const int vec = s.vector_ok ? dtype_vec16(s.dtype) : 1;
  // Rows that do not start on a pack or are not whole packs: the entries
  // with edges, whose body of whole packs (at most cols / vec) is planned
  // as a row; its up to 2 (vec - 1) other elements ride with the first
  // threads (split_row has no edges: its experiment runs them scalar).
  const bool edges = vec > 1 && (s.row_edges || s.cols % vec != 0);
  const std::int64_t nv = s.cols / vec;
  const auto variant = [&](Strategy strategy, int group, int vpt, int rows = 1) {
    return Variant{strategy, s.dtype, s.backward, vec, group, vpt, rows, edges};
  };

  Plan plan;
  bool planned = false;
  if (edges && s.dense_rows && s.cols <= flat_rows_max_cols(vec, s.backward) && !s.options.force_split && !s.options.force_stream) {
    // flat_rows: kFlatRowsTiles tiles of kFlatRowsBlock rows of each tensor
    // read, each from the pack boundary before its first element, in shared
    // memory.
    const std::int64_t tile_packs = (std::int64_t(kFlatRowsBlock) * s.cols + 2 * (vec - 1)) / vec;
    const int smem_vecs = kFlatRowsTiles * static_cast<int>(ceil_div(tile_packs, kFlatRowsBlock));
    plan = make_plan(dev, s, variant(Strategy::flat_rows, 0, 0), kFlatRowsBlock, smem_vecs, attributes);
    planned = plan.exact.blocks_per_sm >= 1 &&
              (!dev.is_gpu() ||
               plan.launch.dynamic_smem_bytes + plan.attributes.static_smem_bytes <= dev.smem_per_block_optin);
    plan.why = "rows of " + std::to_string(s.cols) + " elements off the pack grid, back to back: tiles of " +
               std::to_string(kFlatRowsBlock) + " rows through shared memory (" +
               std::to_string(plan.launch.dynamic_smem_bytes) + " B: " + std::to_string(kFlatRowsTiles) +
               " a tensor, the next one's copies in flight under this one's work), a thread a row";
  }
  if (!planned && nv <= 256) {
    // group_rows: at least 8 threads a row (whole 128-byte lines a load; the
    // whole row if it is shorter), then 2 vectors a thread in flight (two
    // rows a step where a row has fewer) up to a warp a row, then up to 8
    // vectors a thread (kGroupShapes).
    // With edges, at least kEdgesMinGroup threads, who hold the edges.
    const int group = static_cast<int>(std::max({std::min<std::int64_t>(next_pow2(nv), 8),
                                                 std::min<std::int64_t>(next_pow2(ceil_div(nv, kGroupRowsInFlight)), 32),
                                                 std::int64_t(edges ? kEdgesMinGroup : 1)}));
    const int vpt = static_cast<int>(next_pow2(ceil_div(nv, group)));
    const int rows = group_rows_rows_per_step(vpt);
    plan = make_plan(dev, s, variant(Strategy::group_rows, group, vpt, rows), kGroupRowsBlock, 0, attributes);
    plan.why = "row of " + std::to_string(nv) + " vectors fits " + std::to_string(group) + " threads x " +
               std::to_string(vpt) + " vectors in registers";
  } else if (!planned) {
    const int max_vpt = s.backward ? kBlockVptBackward.back() : kBlockVpt.back();
    bool fits = false;
    if (nv <= std::int64_t(kBlockRowMaxThreads) * max_vpt) {
      // Candidates: 4 or 8 vectors a thread (backward: 2 or 4), in blocks of
      // whole wavefronts (multiples of 64 threads, at least 128). Keep the
      // one with the most vectors resident per SM (exact occupancy x block
      // x vectors a thread: the bytes in flight), ties to fewer vectors a
      // thread. On the H200 a 1024 x 4 f32 block fit once per SM by
      // registers (0.82 of copy at N = 16384) where 512 x 8 fits twice (0.95).
      // DUET_BLOCK_VPT, where it holds the row and the direction has it.
      const bool forced = s.options.block_vpt > 0 && std::int64_t(s.options.block_vpt) * kBlockRowMaxThreads >= nv &&
                          s.options.block_vpt <= max_vpt;
      for (int target : (forced ? std::array<int, 2>{s.options.block_vpt, s.options.block_vpt}
                         : s.backward ? std::array<int, 2>{2, 4}
                                      : std::array<int, 2>{4, 8})) {
        const int threads = static_cast<int>(std::clamp<std::int64_t>(ceil_div(ceil_div(nv, target), 64) * 64, 128,
                                                                       kBlockRowMaxThreads));
        if (std::int64_t(target) * threads < nv) continue;
        int vpt = target;
        for (int c : kBlockVpt)
          if (c <= target && std::int64_t(c) * threads >= nv) {
            vpt = c;
            break;
          }
        Plan candidate = make_plan(dev, s, variant(Strategy::block_row, 0, vpt), threads, 0, attributes);
        const auto resident = [](const Plan& p) {
          return std::int64_t(p.exact.blocks_per_sm) * p.launch.threads_per_block * p.kernel.vpt;
        };
        if (!fits || resident(candidate) > resident(plan)) {
          plan = std::move(candidate);
          plan.why = "row of " + std::to_string(nv) + " vectors fits " + std::to_string(threads) + " threads x " +
                     std::to_string(vpt) + " vectors in registers";
          fits = true;
        }
      }
      // A cluster (blocks that fit at least twice an SM) in place of a
      // block_row that fits once an SM, for 16-bit types: one block an SM
      // leaves its
      // arithmetic (per byte twice float32's) exposed between its loads and
      // its stores. On the H200, bf16 N = 40000 / 49152 / 65536 measured
      // 0.746 / 0.792 / 0.827 of copy as block_row, 0.828 / 0.843 / 0.850
      // as clusters of two (0.82 / 0.84 / 0.87 with v21's sizes); float32 keeps block_row (N = 24576 / 32768: 0.92
      // against 0.85; bench/NOTES.md, v20). DUET_CLUSTER=prefer asks for
      // clusters for every type.
      // Few rows (few_rows) take the cluster too, every type: f32 rows of
      // 32768 in a CUDA graph ran 5.8 -> 4.0 us a call at M = 1 and 6.5 ->
      // 4.3 us at M = 8 (H100; bench/NOTES.md v75).
      Plan clustered;
      const bool few = few_rows(dev, s.rows);
      const bool prefer = s.options.prefer_clusters || dtype_size(s.dtype) == 2 || few;
      if (prefer && fits && plan.exact.blocks_per_sm == 1 &&
          plan_cluster_row(dev, s, vec, edges, nv, attributes, clustered) && clustered.exact.blocks_per_sm >= 2) {
        plan = std::move(clustered);
        if (few && !lone_rows(dev, s.rows) && !s.options.prefer_clusters && dtype_size(s.dtype) != 2)
          plan.why += " (few rows: one block a row would leave most SMs idle)";
      }
    } else if (plan_cluster_row(dev, s, vec, edges, nv, attributes, plan)) {
      fits = true;
    } else {
      const int threads = kBlockRowMaxThreads;
      const int reg_vpt = block_row_smem_vpt(s.backward);
      const std::int64_t spill = ceil_div(nv - std::int64_t(threads) * reg_vpt, threads);
      const std::int64_t vec_bytes = std::int64_t(vec) * dtype_size(s.dtype) * (s.backward ? 2 : 1);
      // Only worth planning if it can fit in the opt-in shared memory.
      if (!dev.is_gpu() || spill * threads * vec_bytes <= dev.smem_per_block_optin) {
        plan = make_plan(dev, s, variant(Strategy::block_row_smem, 0, reg_vpt), threads, static_cast<int>(spill),
                         attributes);
        fits = plan.exact.blocks_per_sm >= 1 &&
               (!dev.is_gpu() ||
                plan.launch.dynamic_smem_bytes + plan.attributes.static_smem_bytes <= dev.smem_per_block_optin);
        plan.why = "row of " + std::to_string(nv) + " vectors: " + std::to_string(threads * reg_vpt) +
                   " in registers, " + std::to_string(spill * threads) + " in shared memory (" +
                   std::to_string(plan.launch.dynamic_smem_bytes) + " B)";
      }
      // Past one block's shared memory: a cluster's, then the grid's.
      if (!fits) fits = plan_cluster_row_smem(dev, s, vec, edges, nv, attributes, plan);
      if (!fits) fits = plan_grid_row(dev, s, vec, edges, nv, attributes, plan);
    }
    // DUET_STRATEGY=grid_row: wherever it holds the row.
    Plan forced;
    if (s.options.force_grid_row && !s.options.force_split && !s.options.force_stream &&
        plan_grid_row(dev, s, vec, edges, nv, attributes, forced)) {
      plan = std::move(forced);
      fits = true;
    }
    if (s.options.force_split) {
      require(!dev.is_gpu() || DUET_HAVE_EXPERIMENTS, Status::unsupported,
              "split_row (DUET_STRATEGY=split_row) is an experiment this build leaves out (configure with "
              "-DDUET_EXPERIMENTS=ON)");
      const int split_vec = edges ? 1 : vec;
      plan = make_plan(dev, s, Variant{Strategy::split_row, s.dtype, s.backward, split_vec, 0, 4}, kSplitRowBlock, 0,
                       attributes);
      plan.why = "split_row requested: " + std::to_string(plan.chunks_per_row) + " chunks of " +
                 std::to_string(plan.chunk_elems) + " elements, two kernels";
    } else if (!fits || s.options.force_stream) {
      plan = make_plan(dev, s, variant(Strategy::split_stream, 0, split_stream_vpt(s.backward)), kSplitStreamBlock, 0,
                       attributes);
      plan.why = "row of " + std::to_string(nv) + " vectors exceeds one block's on-chip memory: " +
                 std::to_string(plan.chunks_per_row) + " chunks of " + std::to_string(plan.chunk_elems) +
                 " elements, two passes in one launch, the second " + std::to_string(plan.stream_lag) +
                 " chunks behind";
    }
  }
  if (plan.kernel.edges)
    plan.why += "; rows off the pack grid (start or length): the elements before and after the whole packs "
                "element by element, beside them";
  return require_fits(dev, std::move(plan));
}
}  // namespace

}  // namespace duet
