// The fused row operations' planner: which catalogue entry
// (kernels/fused_variants.hpp) and which grid, from the device's properties
// and the shape. Vendor-free.
//
// By row length in packs (16-byte vectors of the row's widest tensor,
// fused_vec: 4 elements for the widening softmax's float32 and 16-bit
// pair; or elements on the scalar path, which serves tensors whose rows
// start at different offsets within a pack; a row's elements off the
// vector grid do not count):
//   up to 256 packs          group_rows: 8 or 32 threads a row, in registers
//   up to a block's registers block_row: one block a row, the block size and
//                            packs a thread that keep the most of a row
//                            resident an SM; a mask tensor's widest entry
//                            keeps the row's mask packs in shared memory
//                            (NVIDIA sm_80+: cp.async), its x in registers;
//                            block_row_ahead where the cross-entropy's
//                            loss alone holds one block an SM (NVIDIA
//                            sm_80+; the gradient's rows when forced): the
//                            block's next row copied into shared memory
//                            while it reduces and writes this one
//   longer                   stream_row: one block a row at a time (1024
//                            threads, or two blocks of 512 an SM where
//                            their rows move at most twice L2), two
//                            passes; the second reads what fits
//                            of the row in the block's shared memory
//                            (vector path) from there, the rest from L2
//   longer, past L2          cluster_row (NVIDIA sm_90+, the cross-entropy
//                            forward with its gradient, rows of whole
//                            packs): where stream_row's rows would read
//                            again more than L2 holds, a row cut over a
//                            cluster of 8 or 16 blocks of 512 threads, two
//                            an SM, each running the two passes over its
//                            slice with its own stash
// Register use is what each kernel's __launch_bounds__ caps it to
// (kFusedRegisterCap), so the planner's occupancy estimate needs no
// compiled kernel's attributes.
#include "duet/fused_planner.hpp"

#include <algorithm>
#include <string>

#include "duet/error.hpp"
#include "device_features.hpp"
#include "fused_variants.hpp"
#include "shape_limits.hpp"

namespace duet {

std::string to_string(FusedOp op) {
  switch (op) {
    case FusedOp::masked_softmax: return "masked_softmax";
    case FusedOp::masked_softmax_backward: return "masked_softmax_backward";
    case FusedOp::cross_entropy: return "cross_entropy";
    case FusedOp::cross_entropy_backward: return "cross_entropy_backward";
    case FusedOp::shard_stats: return "shard_stats";
    case FusedOp::shard_softmax: return "shard_softmax";
    case FusedOp::shard_combine: return "shard_combine";
    case FusedOp::widening_softmax: return "widening_softmax";
    case FusedOp::widening_softmax_backward: return "widening_softmax_backward";
  }
  return "unknown";
}

std::string to_string(MaskKind m) {
  switch (m) {
    case MaskKind::none: return "none";
    case MaskKind::additive: return "additive";
    case MaskKind::boolean: return "boolean";
    case MaskKind::causal: return "causal";
  }
  return "unknown";
}

std::string to_string(FusedStrategy s) {
  switch (s) {
    case FusedStrategy::group_rows: return "group_rows";
    case FusedStrategy::block_row: return "block_row";
    case FusedStrategy::stream_row: return "stream_row";
    case FusedStrategy::cluster_row: return "cluster_row";
    case FusedStrategy::block_row_ahead: return "block_row_ahead";
  }
  return "unknown";
}

std::string fused_variant_name(const FusedVariant& v) {
  // Appended piece by piece (GCC 12's -Wrestrict false positive on chains).
  std::string name = to_string(v.strategy);
  name += "<";
  name += to_string(v.op);
  if (v.op == FusedOp::masked_softmax) {
    name += ":";
    name += to_string(v.mask);
  }
  name += ",";
  name += to_string(v.dtype);
  name += ",vec";
  name += std::to_string(v.vec);
  if (v.strategy == FusedStrategy::group_rows) {
    name += ",g";
    name += std::to_string(v.group);
  }
  name += ",v";
  name += std::to_string(v.vpt);
  if ((v.strategy == FusedStrategy::stream_row || v.strategy == FusedStrategy::cluster_row) &&
      v.block != kFusedStreamBlock) {
    name += ",b";
    name += std::to_string(v.block);
  }
  if (fused_mask_in_shared(v)) name += ",mask_in_smem";
  if (v.edges) name += ",edges";
  name += ">";
  return name;
}

namespace {

constexpr std::int64_t cdiv(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }

// Blocks of `threads` an SM holds at the register cap, by threads, registers
// and blocks (at least 1: every catalogue block fits a 64K-register SM).
// With `smem` dynamic bytes a block (beside its scratch), by shared memory
// too.
int blocks_per_sm(const DeviceProps& dev, int threads, std::int64_t smem = 0) {
  const int warp = std::max(dev.warp_size, 1);
  const std::int64_t t = cdiv(threads, warp) * warp;
  std::int64_t n = dev.max_threads_per_sm > 0 ? dev.max_threads_per_sm / t : 1;
  if (dev.regs_per_sm > 0) n = std::min<std::int64_t>(n, dev.regs_per_sm / (t * kFusedRegisterCap));
  if (dev.max_blocks_per_sm > 0) n = std::min<std::int64_t>(n, dev.max_blocks_per_sm);
  if (smem > 0 && dev.smem_per_sm > 0)
    n = std::min<std::int64_t>(n, dev.smem_per_sm / (smem + kFusedScratchBytes + dev.smem_reserved_per_block));
  return static_cast<int>(std::max<std::int64_t>(n, 1));
}

// The dynamic shared memory a block may opt into where `per_sm` blocks
// share an SM: its share of the SM's less the per-block reserve, at most
// the opt-in (the opt-in alone where the SM's is not known).
std::int64_t block_smem_share(const DeviceProps& dev, int per_sm) {
  return dev.smem_per_sm > 0 ? std::min<std::int64_t>(dev.smem_per_block_optin,
                                                      dev.smem_per_sm / per_sm - dev.smem_reserved_per_block)
                             : dev.smem_per_block_optin;
}

// cluster_row's cluster for a row of nv packs of `item` bytes: from 8
// blocks (or DUET_CLUSTER_BLOCKS), the fewest (powers of two) whose slices
// (whole blocks' worth of packs each) leave past their stash of
// `stash_slots` slots no more than L2 holds for the `resident` blocks'
// writing passes to find again, else the most (16; 8 with
// DUET_CLUSTER=portable). On the H200 clusters of 8 ran fastest wherever
// what they read again fit L2: fewer blocks a cluster read more of their
// slices again, 16 wait for more peers a row (bench/NOTES.md v111).
constexpr int kClusterRowFirstBlocks = 8;
int cluster_row_blocks(const DeviceProps& dev, std::int64_t nv, std::int64_t item, std::int64_t resident,
                       std::int64_t stash_slots, const PlanOptions& options) {
  const int most = std::clamp(options.max_cluster_blocks, 2, kMaxClusterBlocks);
  int blocks = 2;
  while (blocks < std::min(options.min_cluster_blocks > 0 ? options.min_cluster_blocks : kClusterRowFirstBlocks, most))
    blocks *= 2;
  for (; blocks < most; blocks *= 2) {
    const std::int64_t slice = cdiv(cdiv(nv, blocks), kFusedClusterBlock) * kFusedClusterBlock;
    const std::int64_t again = resident * std::max<std::int64_t>(slice - stash_slots * kFusedClusterBlock, 0) * item;
    if (again == 0 || (dev.l2_bytes > 0 && again <= dev.l2_bytes)) return blocks;
  }
  return most;
}

}  // namespace

FusedPlan plan_fused(const DeviceProps& dev, const FusedShape& s, const PlanOptions& options) {
  const Status bad = Status::invalid_argument;
  require(dev.is_gpu(), bad, [&] { return "plan_fused plans GPU launches; " + dev.name + " is not a GPU"; });
  detail::require_plannable(s.rows, s.cols);
  const int op_index = static_cast<int>(s.op);
  require(op_index >= 0 && op_index <= static_cast<int>(FusedOp::widening_softmax_backward) &&
              s.op != FusedOp::shard_combine,
          bad, [&] { return "unknown fused operation " + std::to_string(op_index); });
  const int dt = static_cast<int>(s.dtype);
  require(dt >= 0 && dt <= 2, bad, [&] { return "unknown dtype " + std::to_string(dt); });
  require(!widening(s.op) || s.dtype != DType::f32, bad,
          [&] { return to_string(s.op) + " widens f16 or bf16, not f32"; });
  const MaskKind mask = s.op == FusedOp::masked_softmax ? s.mask_kind : MaskKind::none;
  require(static_cast<int>(mask) >= 0 && static_cast<int>(mask) <= 3, bad,
          [&] { return "unknown mask kind " + std::to_string(static_cast<int>(mask)); });

  // The vector path takes any row length and start: a row is a body of
  // whole packs and fewer than a pack's elements before and after it, which
  // the row's first threads hold beside their packs (the entries with
  // edges). The body is at most cols / vec packs (a row starting on a
  // pack), so that is what a shape must cover.
  const int vec = s.vector_ok ? fused_vec(s.op, s.dtype) : 1;
  const bool edges = vec > 1 && (s.row_edges || s.cols % vec != 0);
  const std::int64_t nv = s.cols / vec;
  std::string packs = std::to_string(nv) + (vec > 1 ? " packs of " + std::to_string(vec) : " elements");
  if (edges) packs += " (the elements off the pack grid apart)";

  FusedVariant v{s.op, mask, s.dtype, FusedStrategy::group_rows, vec, 0, 0, edges};
  int threads = 0;
  std::int64_t stash_bytes = 0;  // stream_row's and cluster_row's stash, or block_row's shared mask
  int cluster_blocks = 0;        // cluster_row: blocks a row
  std::string why;
  const int longest = int(kFusedGroupShapes.size()) - 1;
  if (vec > 1 && nv <= std::int64_t(kFusedGroupShapes.back()[0]) * fused_group_shape(s.op, mask, longest, edges)[1]) {
    for (int g = 0; g < int(kFusedGroupShapes.size()); ++g) {
      const auto shape = fused_group_shape(s.op, mask, g, edges);
      if (std::int64_t(shape[0]) * shape[1] >= nv) {
        v.group = shape[0];
        v.vpt = shape[1];
        break;
      }
    }
    threads = kFusedGroupBlock;
    why = "row of " + packs + " fits " + std::to_string(v.group) + " threads x " + std::to_string(v.vpt) +
          " packs in registers, " + std::to_string(kFusedGroupBlock / v.group) + " rows a block";
  } else if (vec == 1 && nv <= std::int64_t(kFusedScalarGroup[0]) * fused_scalar_group_vpt(s.op, mask)) {
    v.group = kFusedScalarGroup[0];
    v.vpt = fused_scalar_group_vpt(s.op, mask);
    threads = kFusedGroupBlock;
    why = "row of " + packs + " (scalar path: its tensors start rows at different offsets within 16 bytes) fits " +
          std::to_string(v.group) +
          " threads x " + std::to_string(v.vpt) + " elements in registers";
  } else {
    // block_row: of the packs-a-thread choices that hold the row in one
    // block, the one with the most of a row resident an SM (blocks an SM x
    // packs a block in use), ties to fewer packs a thread. A mask tensor's
    // widest entry copies its mask packs to shared memory (a block's
    // threads x packs places), where the device copies without registers
    // (NVIDIA sm_80+; elsewhere each copy would pass through one) and the
    // places fit the opt-in, and only where the entries with the mask in
    // registers leave few blocks an SM: one over float32 rows (with two or
    // more, those ran 1-3% faster, bench/NOTES.md v53); over 16-bit rows,
    // issue-bound, where half the threads a row spend less of its own work
    // an element, two under an additive mask and four under a boolean one
    // (v101).
    const int shared_mask_blocks =
        dtype_size(s.dtype) == 2 ? (mask == MaskKind::boolean ? 4 : 2) : 1;
    std::int64_t best = 0;
    int best_per_sm = 0;
    auto consider = [&](int vpt) {
      const std::int64_t t =
          std::clamp<std::int64_t>(cdiv(cdiv(nv, vpt), 64) * 64,
                                   edges ? kFusedBlockEdgesMinThreads : kFusedBlockMinThreads, kFusedBlockMaxThreads);
      if (t * vpt < nv) return;
      std::int64_t smem = 0;
      if (fused_mask_in_shared(s.op, mask, FusedStrategy::block_row, vec, vpt)) {
        smem = fused_shared_mask_bytes(mask, s.dtype, t, vpt);
        if (!detail::copies_to_shared_async(dev) || smem + kFusedScratchBytes > dev.smem_per_block_optin ||
            best_per_sm > shared_mask_blocks)
          return;
      }
      const int per_sm = blocks_per_sm(dev, static_cast<int>(t), smem);
      const std::int64_t resident = std::int64_t(per_sm) * std::min(nv, t * vpt);
      if (resident > best) {
        best = resident;
        best_per_sm = per_sm;
        v.strategy = FusedStrategy::block_row;
        v.vpt = vpt;
        threads = static_cast<int>(t);
        stash_bytes = smem;
      }
    };
    if (!options.force_stream) {  // DUET_STRATEGY=split_stream: stream_row below
      if (vec > 1)
        for (int b = 0; b < int(kFusedBlockVpt.size()); ++b) consider(fused_block_vpt(s.op, mask, b));
      else
        consider(fused_scalar_block_vpt(s.op, mask));
    }
    if (best > 0) {
      why = "row of " + packs + " fits one block of " + std::to_string(threads) + " threads x " +
            std::to_string(v.vpt) + (vec > 1 ? " packs" : " elements") + " in registers";
      if (stash_bytes > 0)
        why += ", its mask packs in shared memory (" + std::to_string(stash_bytes / 1024) + " KiB, cp.async)";
      // block_row_ahead: where the row takes the SM's registers (one block
      // an SM), nothing runs under a block's reduction and writes, and
      // each row would start with the memory's latency; the block copies
      // its next row into shared memory meanwhile (cp.async: the copies
      // need no registers), the grid one wave walking the rows. The
      // catalogue's entries: the cross-entropy forward at block_row's most
      // packs a thread. Planned for the loss alone (nothing written), which
      // gained 0.03-0.09 of copy on the H100 and the H200; where the
      // gradient is written it lost 0.04-0.045 on the H100 (bf16 50257,
      // f32 20001) and gained 0.01-0.015 on the H200 in blocks of fewer
      // than 1024 threads, so it runs there only when forced
      // (force_fused_ahead: bench/NOTES.md v114, v116).
      const std::int64_t ahead_bytes = std::int64_t(threads) * v.vpt * fused_item_bytes(s.op, mask, s.dtype);
      const bool ahead_gains = !s.gradient || options.force_fused_ahead;
      if (options.fused_ahead && best_per_sm == 1 && stash_bytes == 0 && s.op == FusedOp::cross_entropy && vec > 1 &&
          ahead_gains &&
          v.vpt == kFusedAheadVpt && detail::copies_to_shared_async(dev) && s.rows > std::max(dev.sm_count, 1) &&
          ahead_bytes + kFusedScratchBytes <= block_smem_share(dev, 1)) {
        v.strategy = FusedStrategy::block_row_ahead;
        stash_bytes = ahead_bytes;
        why += "; one block an SM, so each block copies its next row into shared memory (" +
               std::to_string(ahead_bytes / 1024) + " KiB, cp.async) while it reduces and writes this one";
      }
    } else {
      v.strategy = FusedStrategy::stream_row;
      v.vpt = fused_stream_vpt(s.op, mask, vec);
      const bool writes = (s.op != FusedOp::cross_entropy || s.gradient) && s.op != FusedOp::shard_stats;
      const bool reduces = s.op != FusedOp::cross_entropy_backward && s.op != FusedOp::shard_softmax;
      const std::int64_t item = fused_item_bytes(s.op, mask, s.dtype);
      const std::int64_t out_bytes =
          writes && !s.in_place ? s.cols * dtype_size(fused_out_dtype(s.op, s.dtype)) : 0;
      const std::int64_t row_bytes = nv * item + out_bytes;  // what a row reads, and writes unless in place
      const auto mib = [](std::int64_t b) { return std::to_string((b + (1 << 19)) >> 20) + " MiB"; };
      // Two blocks of half the threads an SM (the vector path's entries
      // compiled for it), where there are rows for them and their resident
      // rows move at most twice what L2 holds: one block's reductions and
      // writes then overlap the other's loads (bench/NOTES.md v56, v57;
      // measured for rows that write).
      // Longer rows read again from L2 miss it more often at twice the
      // rows resident, and one block an SM measured faster. Not in place
      // either: there one block an SM measured faster on the H100 (issue
      // 19's cross-entropy at 128256 classes), though slower on the H200.
      const std::int64_t sms = std::max(dev.sm_count, 1);
      const int whole_per_sm = blocks_per_sm(dev, kFusedStreamBlock);
      const int half_per_sm = blocks_per_sm(dev, kFusedStreamBlock / 2);
      const std::int64_t half_rows = std::min<std::int64_t>(s.rows, sms * half_per_sm);
      const bool halves = vec > 1 && writes && !s.in_place && dev.l2_bytes > 0 && half_per_sm > whole_per_sm &&
                          s.rows > sms * whole_per_sm && half_rows * row_bytes <= 2 * dev.l2_bytes;
      threads = halves ? kFusedStreamBlock / 2 : kFusedStreamBlock;
      v.block = threads;
      const int stream_per_sm = halves ? half_per_sm : whole_per_sm;
      const std::int64_t chunk = std::int64_t(threads) * v.vpt;
      why = "row of " + packs +
            (options.force_stream ? " streamed (DUET_STRATEGY=split_stream)" : " exceeds a block's registers") +
            ": one block a row, " + std::to_string(cdiv(nv, chunk)) +
            " chunks of " + std::to_string(chunk) + (vec > 1 ? " packs" : " elements") +
            (reduces && writes ? ", an online (max, sum) pass, then the writing pass in reverse chunk order"
             : reduces         ? ", one online (max, sum) pass (nothing to write)"
                               : ", one elementwise pass");
      if (halves)
        why += "; " + std::to_string(half_per_sm) + " blocks of " + std::to_string(threads) +
               " an SM (their rows move " + mib(half_rows * row_bytes) + ", within twice L2's " + mib(dev.l2_bytes) +
               ": one block's reductions and writes overlap another's loads)";
      // The stash: a row's first slots (a pack a thread each) in the
      // dynamic shared memory the block may opt into beside its scratch
      // (its share of the SM's where two share one), so the writing pass
      // reads them on chip; the rest again from L2, the latest read first.
      // Filled by cp.async (NVIDIA sm_80+, Items of x's 16-byte pack), it
      // also puts a row's stashed bytes in flight at once, and is planned
      // wherever it fits (bench/NOTES.md v62). Filled through registers,
      // only where the rows between their passes (one a block) move more
      // than L2 holds: within it pass 2 finds them there and that stash
      // measured slower (v46).
      const std::int64_t slot = std::int64_t(threads) * item;
      const std::int64_t smem_block = block_smem_share(dev, stream_per_sm);
      const std::int64_t fit = std::max<std::int64_t>(smem_block - kFusedScratchBytes, 0) / slot;
      const std::int64_t slots = std::min(fit, cdiv(nv, threads));
      const std::int64_t resident_rows = std::min<std::int64_t>(s.rows, sms * stream_per_sm);
      const std::int64_t between = resident_rows * row_bytes;
      const bool in_l2 = dev.l2_bytes > 0 && between <= dev.l2_bytes;
      // cluster_row: where the resident rows' packs past a full stash (what
      // the writing pass reads again) are more than L2 holds, so that pass
      // would read them from DRAM (but for DUET_STRATEGY=split_stream), or
      // wherever stream_row would run with DUET_CLUSTER=prefer; the vector
      // path of rows of whole packs, the catalogue's cluster entries (the
      // cross-entropy forward), two blocks an SM (each stash its half of
      // the SM's shared memory beside the cluster's exchange).
      const int cluster_per_sm = blocks_per_sm(dev, kFusedClusterBlock);
      const std::int64_t cluster_slot = std::int64_t(kFusedClusterBlock) * item;
      const std::int64_t cluster_slots =
          std::max<std::int64_t>(block_smem_share(dev, cluster_per_sm) - kFusedScratchBytes - kFusedClusterAccsBytes,
                                 0) /
          cluster_slot;
      const std::int64_t read_again = resident_rows * std::max<std::int64_t>(nv - fit * threads, 0) * item;
      const bool cluster_entry = s.op == FusedOp::cross_entropy && s.gradient && vec > 1 && !edges;
      if (cluster_entry && dev.cluster_launch && options.allow_clusters && cluster_slots > 0 &&
          (options.prefer_clusters || (!options.force_stream && dev.l2_bytes > 0 && read_again > dev.l2_bytes))) {
        cluster_blocks = cluster_row_blocks(dev, nv, item, sms * cluster_per_sm, cluster_slots, options);
        v.strategy = FusedStrategy::cluster_row;
        v.block = kFusedClusterBlock;
        threads = kFusedClusterBlock;
        const std::int64_t slice = cdiv(cdiv(nv, cluster_blocks), threads) * threads;
        const std::int64_t slots = std::min(cluster_slots, slice / threads);
        stash_bytes = slots * cluster_slot;
        why = "row of " + packs + " past what stream_row finds again in L2 (" +
              (options.prefer_clusters ? std::string("DUET_CLUSTER=prefer") : mib(read_again) + " of the resident rows " +
                                                                                 "read again, past L2's " + mib(dev.l2_bytes)) +
              "): cut over a cluster of " + std::to_string(cluster_blocks) + " blocks of " +
              std::to_string(threads) + " threads, slices of " + std::to_string(slice) + " packs, each " +
              (slots * threads >= slice ? std::string("kept whole")
                                        : "its first " + std::to_string(slots * threads) + " packs kept") +
              " in shared memory between an online (max, sum) pass and the writing pass (" +
              std::to_string(stash_bytes / 1024) + " KiB, cp.async), the slices' partial results traded through "
              "distributed shared memory";
      } else if (reduces && writes) {
        // The kernels' cp.async copies (bench/NOTES.md v59).
        const bool by_copy = detail::copies_to_shared_async(dev) && fused_stash_by_copy(s.op, mask, s.dtype);
        const bool stash = options.fused_stash == FusedStash::always ||
                           (options.fused_stash == FusedStash::planned && (by_copy || !in_l2));
        if (vec > 1 && stash && slots > 0) {
          stash_bytes = slots * slot;
          const std::int64_t kept = std::min(nv, slots * threads);
          why += kept == nv ? ", the whole row" : ", its first " + std::to_string(kept) + " packs";
          why += " kept in shared memory between them (" + std::to_string(stash_bytes / 1024) + " KiB";
          if (by_copy)
            why += ", copied there by cp.async, a row's all in flight at once";
          else
            why += ": the rows between their passes move " + mib(between) +
                   (in_l2 ? ", within L2's " + mib(dev.l2_bytes) + " (DUET_FUSED_STASH=always)"
                          : ", past L2's " + mib(dev.l2_bytes));
          why += ")";
          if (kept < nv) why += ", the rest read again from L2";
        } else {
          why += ", the second reading it again from L2";
          if (vec > 1 && options.fused_stash == FusedStash::off) why += " (DUET_FUSED_STASH=0)";
          if (vec > 1 && options.fused_stash != FusedStash::off && in_l2)
            why += " (the rows between their passes move " + mib(between) + ", within L2's " + mib(dev.l2_bytes) + ")";
        }
      }
    }
  }
  const int variant = find_fused_variant(v);
  if (variant < 0) throw Error(Status::internal, "no compiled fused kernel for " + fused_variant_name(v));

  const std::int64_t rows_per_block = v.strategy == FusedStrategy::group_rows ? kFusedGroupBlock / v.group : 1;
  const bool block_smem = v.strategy == FusedStrategy::block_row || v.strategy == FusedStrategy::block_row_ahead;
  const int per_sm = blocks_per_sm(dev, threads, block_smem ? stash_bytes : 0);
  const std::int64_t resident = std::int64_t(std::max(dev.sm_count, 1)) * per_sm;
  // stream_row: one wave, each block walking rows one at a time, so the
  // rows between their two passes are at most one a block; block_row_ahead
  // one wave, each block copying the row it walks to next; the others as
  // well with DUET_PERSISTENT=1. Else up to kGridWaves (one block a unit of
  // work for the usual shapes, as the softmax planner's rows), or
  // PlanOptions::max_waves; up to kShortGridWaves where a mask tensor is read
  // (H200, 256 MB of scores, boolean and additive [B, 1, Sq, Sk] masks at
  // Sk = 128..4096: +0.02-0.05 of copy, where the scale-only softmax lost
  // up to 0.03 and causal rows and cross-entropy moved either way;
  // bench/NOTES.md v83).
  const bool reads_mask = mask == MaskKind::boolean || mask == MaskKind::additive;
  const bool one_wave = v.strategy == FusedStrategy::stream_row || v.strategy == FusedStrategy::block_row_ahead;
  const int own_waves = one_wave ? 1 : reads_mask ? kShortGridWaves : kGridWaves;
  const std::int64_t waves = detail::grid_waves(own_waves, options.persistent, options.max_waves);
  const std::int64_t work = std::max<std::int64_t>(cdiv(s.rows, rows_per_block), 1);
  std::int64_t grid = std::min({work, resident * waves, detail::max_grid_blocks(dev, threads)});
  // cluster_row: whole clusters, a row each at a time, as many as the SMs
  // hold at two blocks an SM (the launch takes fewer where the vendor fits
  // fewer together).
  if (v.strategy == FusedStrategy::cluster_row)
    grid = std::min<std::int64_t>(work, std::max<std::int64_t>(resident / cluster_blocks, 1)) * cluster_blocks;

  FusedPlan plan;
  plan.launch.variant = variant;
  plan.launch.geometry = LaunchGeometry{grid, threads, stash_bytes};
  plan.launch.cluster_blocks = cluster_blocks;
  plan.kernel = fused_variant_name(v);
  // Appended piece by piece: one long chain of operator+ trips GCC 12's
  // -Wrestrict false positive.
  plan.why = why;
  plan.why += "; grid " + std::to_string(grid);
  plan.why += " of " + std::to_string(threads) + " threads (";
  plan.why += std::to_string(per_sm);
  plan.why += per_sm == 1 ? " block an SM x " : " blocks an SM x ";
  plan.why += std::to_string(dev.sm_count) + " SMs, ";
  if (v.strategy == FusedStrategy::cluster_row)
    plan.why += "one cluster per row, " + std::to_string(grid / cluster_blocks) + " clusters walking " +
                std::to_string(s.rows) + " rows)";
  else if (grid < work)
    plan.why += "grid-stride over " + std::to_string(s.rows) + " rows)";
  else if (rows_per_block > 1)
    plan.why += "one block per " + std::to_string(rows_per_block) + " rows)";
  else
    plan.why += "one block per row)";
  return plan;
}

}  // namespace duet
