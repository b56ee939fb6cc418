// The catalogue of compiled kernels of the fused row operations (scaled and
// masked softmax, cross-entropy): plain data, shared by the vendor backends
// (kernels/fused_launch.cu instantiates one kernel per entry) and the
// vendor-free fused planner (runtime/src/planner/fused_planner.cpp picks an entry).
// No vendor header.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "duet/export.h"
#include "fused_args.hpp"

namespace duet {

enum class FusedStrategy : int {
  // THREADS_PER_ROW (8 or 32) threads hold a row in registers, several rows
  // a block; reductions by shuffles within the group, no barrier.
  group_rows = 0,
  // One block a row (run-time block size), the row in registers.
  block_row = 1,
  // Rows past one block's registers: one row a block at a time, a first
  // pass of online (max, sum) over chunks, then (ops that write the row) a
  // second pass over the chunks in reverse order, which finds the most
  // recently read ones still in L2.
  stream_row = 2,
  // Rows past what stream_row finds again in L2: a row cut over a
  // thread-block cluster (NVIDIA sm_90+), each block running stream_row's
  // two passes over its slice of the row, the slices' partial results
  // traded through distributed shared memory between them.
  cluster_row = 3,
  // block_row's rows that one block an SM holds (the row needs the SM's
  // registers): a persistent block copies its next row into shared memory
  // (cp.async) while it reduces and writes this one.
  block_row_ahead = 4,
};

// The operation a kernel serves: FusedOp, and for masked_softmax the mask.
struct FusedVariant {
  FusedOp op;
  MaskKind mask;  // masked_softmax only; none otherwise
  DType dtype;
  FusedStrategy strategy;
  int vec;    // elements a memory access: 16 / sizeof(T), or 1 (the scalar path)
  int group;  // group_rows: threads a row; otherwise 0
  int vpt;    // packs each thread holds (stream_row: loads in flight a chunk)
  // Vector path: rows may start or end off the pack grid, the elements
  // before a row's first pack and after its last held apart (its head and
  // tail). The entries without serve rows of whole packs only and carry
  // none of it.
  bool edges = false;
  // stream_row: threads a block, compiled in (kFusedStreamBlock, one block
  // an SM, or half that, two an SM); cluster_row: kFusedClusterBlock;
  // otherwise 0 (a run-time block size).
  int block = 0;
};

// Block sizes: group_rows blocks of kFusedGroupBlock threads; block_row
// blocks of kFusedBlockMinThreads..kFusedBlockMaxThreads threads (multiples
// of 64, whole wavefronts), at least kFusedBlockEdgesMinThreads where the
// rows have edges (a row's first threads hold them); fewer threads a row
// with more packs each spend less of a row's own work an element (bench/
// NOTES.md v100); stream_row blocks of kFusedStreamBlock threads,
// or on the vector path also half that, two an SM (the planner's choice),
// each a compile-time constant of its entry so a thread's packs sit at
// constant offsets.
inline constexpr int kFusedGroupBlock = 128;
inline constexpr int kFusedBlockMinThreads = 64;
inline constexpr int kFusedBlockEdgesMinThreads = 128;
inline constexpr int kFusedBlockMaxThreads = 1024;
inline constexpr int kFusedStreamBlock = 1024;
// Registers a thread may use, as __launch_bounds__ caps them (the planner's
// occupancy estimate assumes the cap): group_rows asks for 8 blocks of 128
// threads an SM, block_row and stream_row for blocks of 1024 threads.
inline constexpr int kFusedRegisterCap = 64;

// How much a row position holds in registers decides how many packs a
// thread keeps: "light" ops hold one 16-byte tensor (masked softmax without
// a mask tensor or causal, cross-entropy's backward); the others hold a
// second tensor (masked softmax's additive or boolean mask, the backward's
// dy) or four running sums (cross-entropy's forward) and keep half as many,
// which fit kFusedRegisterCap without spilling (ptxas -v, sm_90).
constexpr bool fused_light(FusedOp op, MaskKind mask) {
  return op == FusedOp::cross_entropy_backward || op == FusedOp::shard_softmax || op == FusedOp::widening_softmax ||
         (op == FusedOp::masked_softmax && (mask == MaskKind::none || mask == MaskKind::causal));
}
// The softmax backwards, which read y and dy.
constexpr bool fused_backward(FusedOp op) {
  return op == FusedOp::masked_softmax_backward || op == FusedOp::widening_softmax_backward;
}
constexpr bool fused_two_tensors(FusedOp op, MaskKind mask) {
  return fused_backward(op) ||
         (op == FusedOp::masked_softmax && (mask == MaskKind::additive || mask == MaskKind::boolean));
}

// group_rows shapes (threads a row, packs a thread) on the vector path.
// Light ops cover rows of up to 16, 64, 128 and 256 packs (8 x 2, 16 x 4,
// 32 x 4, 32 x 8); the others rows of up to 16, 32, 64 and 128 packs (8 x
// 2, 8 x 4, 16 x 4, 32 x 4). A row's own work (its addresses, a mask row's
// place, the lanes' combine) is paid by each of its threads, so fewer
// threads with more packs each spend less of it an element; one pack a
// thread left too few loads in flight to cover memory latency (bench/
// NOTES.md v96, v97).
// Rows of up to 16 packs without edges take 4 threads of 4 packs
// (kFusedShortShape), but for the backwards, memory-bound over y and dy,
// which ran 0.02 slower so; with edges they keep 8 threads of 2, as the
// edges kernel holds a row's up to 14 edge elements in its first 8 lanes
// (v99).
// With edges (rows off the pack grid), the additive mask keeps 2 packs a
// thread for rows of up to 64 packs and 3 for the longest shape: 4 packs
// of scores and mask and the edges' registers spill past kFusedRegisterCap
// (ptxas -v, sm_80 and sm_90).
inline constexpr std::array<std::array<int, 2>, 4> kFusedGroupShapes{{{8, 2}, {16, 4}, {32, 4}, {32, 8}}};
inline constexpr std::array<int, 2> kFusedShortShape{4, 4};
constexpr std::array<int, 2> fused_group_shape(FusedOp op, MaskKind mask, int i, bool edges = false) {
  if (i == 0 && !edges && !fused_backward(op)) return kFusedShortShape;
  if (fused_light(op, mask) || i == 0) return kFusedGroupShapes[i];
  if (edges && op == FusedOp::masked_softmax && mask == MaskKind::additive) {
    constexpr std::array<std::array<int, 2>, 4> additive_edges{{{8, 2}, {16, 2}, {32, 2}, {32, 3}}};
    return additive_edges[i];
  }
  constexpr std::array<std::array<int, 2>, 4> two_tensors{{{8, 2}, {8, 4}, {16, 4}, {32, 4}}};
  return two_tensors[i];
}
// block_row packs a thread on the vector path (others: half; causal too,
// whose column compares spill 8 packs of 16-bit values on sm_80; the
// widening softmax's forward twice as many: its packs hold 8 bytes of x),
// but for a mask tensor: its 2 and 4 packs hold their mask packs in
// registers, its 8 (fused_mask_in_shared) in shared memory, where 8 packs
// of scores and mask spill past kFusedRegisterCap.
inline constexpr std::array<int, 3> kFusedBlockVpt{2, 4, 8};
constexpr bool fused_mask_tensor(FusedOp op, MaskKind mask) {
  return op == FusedOp::masked_softmax && (mask == MaskKind::additive || mask == MaskKind::boolean);
}
constexpr int fused_block_vpt(FusedOp op, MaskKind mask, int i) {
  if (op == FusedOp::widening_softmax) return 2 * kFusedBlockVpt[i];
  if (fused_mask_tensor(op, mask)) return kFusedBlockVpt[i];
  const bool full = (fused_light(op, mask) && mask != MaskKind::causal) || op == FusedOp::cross_entropy;
  return full ? kFusedBlockVpt[i] : kFusedBlockVpt[i] / 2;
}
// The block_row entries that copy each mask pack into the block's dynamic
// shared memory (cp.async, no register) and read it there: a row's mask,
// pack p at place p, blocks x packs-a-thread places of
// fused_mask_pack_bytes each.
constexpr bool fused_mask_in_shared(FusedOp op, MaskKind mask, FusedStrategy strategy, int vec, int vpt) {
  return fused_mask_tensor(op, mask) && strategy == FusedStrategy::block_row && vec > 1 &&
         vpt == kFusedBlockVpt.back();
}
constexpr bool fused_mask_in_shared(const FusedVariant& v) {
  return fused_mask_in_shared(v.op, v.mask, v.strategy, v.vec, v.vpt);
}
constexpr int fused_mask_pack_bytes(MaskKind mask, DType dtype) {
  return mask == MaskKind::boolean ? 16 / dtype_size(dtype) : 16;  // a byte an element, or a pack of x's dtype
}
// The dynamic shared memory those entries need for blocks of `threads`.
constexpr std::int64_t fused_shared_mask_bytes(MaskKind mask, DType dtype, std::int64_t threads, int vpt) {
  return threads * vpt * fused_mask_pack_bytes(mask, dtype);
}
// The scalar path (vec = 1): one shape each, enough elements a thread in
// flight to cover memory latency with 1- to 4-byte accesses.
inline constexpr std::array<int, 2> kFusedScalarGroup{32, 8};  // threads a row, packs a thread (light ops)
constexpr int fused_scalar_group_vpt(FusedOp op, MaskKind mask) { return fused_light(op, mask) ? 8 : 4; }
// block_row on the scalar path: 8 elements a thread (16 spill on sm_80).
constexpr int fused_scalar_block_vpt(FusedOp, MaskKind) { return 8; }
// stream_row: packs a thread loads a chunk: 4 (64 KiB chunks of 1024
// threads), 2 for two tensors; scalar: 8 elements, 4 for two tensors; the
// widening softmax's forward 8 (64 KiB of its 8-byte packs of x; 1%
// faster than 4 at N = 128256 bf16 on the H200, bench/NOTES.md v44).
constexpr int fused_stream_vpt(FusedOp op, MaskKind mask, int vec) {
  if (op == FusedOp::widening_softmax && vec > 1) return 8;
  return (vec == 1 ? 8 : 4) / (fused_two_tensors(op, mask) ? 2 : 1);
}

// stream_row's stash: the first packs of a row, each thread's own Items
// (the packs of one position: x, and dy or a mask pack) in dynamic shared
// memory, written in the first pass and read in the second instead of
// global memory. Bytes of an Item on the vector path, as the policies
// (families/fused_ops.cuh) lay it out: 16-byte packs of x and of a second
// tensor, a boolean mask's PACK bytes, padded to the Item's alignment (the
// launch checks each entry's sizeof against it).
constexpr int fused_item_bytes(FusedOp op, MaskKind mask, DType dtype) {
  const int vec = fused_vec(op, dtype);
  const int x = vec * dtype_size(fused_x_dtype(op, dtype));  // 16, or the widening forward's 8
  const int second = op == FusedOp::masked_softmax && mask == MaskKind::boolean ? vec  // a byte an element
                     : fused_two_tensors(op, mask)                                ? x
                                                                                  : 0;
  return (x + second + x - 1) / x * x;
}
// Whether stream_row's stash is filled by cp.async where the device has it
// (NVIDIA sm_80+; families/fused_rows.cuh, kAsyncStash): the vector path
// of the ops whose Item is x's 16-byte pack alone and that reduce.
constexpr bool fused_stash_by_copy(FusedOp op, MaskKind mask, DType dtype) {
  const bool x_alone = op == FusedOp::cross_entropy || op == FusedOp::shard_stats ||
                       (op == FusedOp::masked_softmax && mask == MaskKind::none);
  return x_alone && fused_item_bytes(op, mask, dtype) == 16;
}
// The shared memory a fused block declares (FusedScratch,
// families/fused_rows.cuh: two buffers of a float4 a warp of 32).
inline constexpr int kFusedScratchBytes = 2 * (kFusedBlockMaxThreads / 32) * 16;
// cluster_row's exchange beside it (ClusterAccs, families/fused_cluster.cuh:
// two buffers of a float4 for each of up to 16 blocks, two 8-byte barriers).
inline constexpr int kFusedClusterAccsBytes = 2 * 16 * 16 + 2 * 8;

// The op kinds in catalogue order: masked_softmax with each mask, then the
// other operations.
inline constexpr std::array<std::pair<FusedOp, MaskKind>, 11> kFusedOpKinds{{
    {FusedOp::masked_softmax, MaskKind::none},
    {FusedOp::masked_softmax, MaskKind::additive},
    {FusedOp::masked_softmax, MaskKind::boolean},
    {FusedOp::masked_softmax, MaskKind::causal},
    {FusedOp::masked_softmax_backward, MaskKind::none},
    {FusedOp::cross_entropy, MaskKind::none},
    {FusedOp::cross_entropy_backward, MaskKind::none},
    {FusedOp::shard_stats, MaskKind::none},
    {FusedOp::shard_softmax, MaskKind::none},
    {FusedOp::widening_softmax, MaskKind::none},
    {FusedOp::widening_softmax_backward, MaskKind::none},
}};

// The dtypes an op kind is compiled for: every one, but only the 16-bit
// ones for the widening softmax (float32 into float32 is plain softmax).
constexpr DType fused_first_dtype(FusedOp op) { return widening(op) ? DType::f16 : DType::f32; }
constexpr int fused_dtypes(FusedOp op) { return 3 - static_cast<int>(fused_first_dtype(op)); }

constexpr int fused_variants_per_kind() {
  // vector, vector with edges (stream_row at both block sizes), then scalar
  return 2 * (int(kFusedGroupShapes.size()) + int(kFusedBlockVpt.size()) + 2) + 3;
}
constexpr int fused_variant_count() {
  int n = 0;
  for (const auto& kind : kFusedOpKinds) n += fused_dtypes(kind.first) * fused_variants_per_kind();
  return n;
}
// cluster_row: the cross-entropy forward (whose gradient over a vocabulary
// of a million classes is what rows past L2 are in practice), each dtype,
// the vector path, rows of whole packs.
inline constexpr int kFusedClusterEntries = 3;
// cluster_row's blocks: 512 threads, two an SM, so one block's loads run
// under the other's exchange and writes (bench/NOTES.md v111).
inline constexpr int kFusedClusterBlock = kFusedStreamBlock / 2;
// block_row_ahead: the cross-entropy forward (vocabularies of 32K-64K 16-bit
// or 16K-32K float32 logits, which hold one block an SM), each dtype,
// without and with edges, at block_row's most packs a thread (the rows
// fewer packs hold fit two blocks an SM).
inline constexpr int kFusedAheadEntries = 6;
inline constexpr int kFusedAheadVpt = kFusedBlockVpt.back();
inline constexpr int kFusedVariantCount = fused_variant_count() + kFusedClusterEntries + kFusedAheadEntries;

constexpr std::array<FusedVariant, kFusedVariantCount> make_fused_catalogue() {
  std::array<FusedVariant, kFusedVariantCount> out{};
  int i = 0;
  for (const auto& [op, mask] : kFusedOpKinds)
    for (int d = static_cast<int>(fused_first_dtype(op)); d < 3; ++d) {
      const DType dt = static_cast<DType>(d);
      const int vec = fused_vec(op, dt);
      for (const bool edges : {false, true}) {
        for (int g = 0; g < int(kFusedGroupShapes.size()); ++g) {
          const auto shape = fused_group_shape(op, mask, g, edges);
          out[i++] = FusedVariant{op, mask, dt, FusedStrategy::group_rows, vec, shape[0], shape[1], edges};
        }
        for (int b = 0; b < int(kFusedBlockVpt.size()); ++b)
          out[i++] = FusedVariant{op, mask, dt, FusedStrategy::block_row, vec, 0, fused_block_vpt(op, mask, b), edges};
        for (const int block : {kFusedStreamBlock, kFusedStreamBlock / 2})
          out[i++] = FusedVariant{
              op, mask, dt, FusedStrategy::stream_row, vec, 0, fused_stream_vpt(op, mask, vec), edges, block};
      }
      out[i++] = FusedVariant{op, mask, dt, FusedStrategy::group_rows, 1, kFusedScalarGroup[0],
                              fused_scalar_group_vpt(op, mask)};
      out[i++] = FusedVariant{op, mask, dt, FusedStrategy::block_row, 1, 0, fused_scalar_block_vpt(op, mask)};
      out[i++] = FusedVariant{
          op, mask, dt, FusedStrategy::stream_row, 1, 0, fused_stream_vpt(op, mask, 1), false, kFusedStreamBlock};
    }
  for (int d = 0; d < kFusedClusterEntries; ++d) {
    const DType dt = static_cast<DType>(d);
    const FusedOp op = FusedOp::cross_entropy;
    const int vec = fused_vec(op, dt);
    out[i++] = FusedVariant{
        op, MaskKind::none, dt, FusedStrategy::cluster_row, vec, 0, fused_stream_vpt(op, MaskKind::none, vec), false,
        kFusedClusterBlock};
  }
  for (int d = 0; d < kFusedAheadEntries / 2; ++d)
    for (const bool edges : {false, true}) {
      const DType dt = static_cast<DType>(d);
      const FusedOp op = FusedOp::cross_entropy;
      out[i++] = FusedVariant{op, MaskKind::none, dt, FusedStrategy::block_row_ahead, fused_vec(op, dt), 0,
                              kFusedAheadVpt, edges};
    }
  return out;
}
inline constexpr std::array<FusedVariant, kFusedVariantCount> kFusedCatalogue = make_fused_catalogue();

constexpr int find_fused_variant(const FusedVariant& want) {
  for (int i = 0; i < kFusedVariantCount; ++i) {
    const FusedVariant& v = kFusedCatalogue[i];
    if (v.op == want.op && v.mask == want.mask && v.dtype == want.dtype && v.strategy == want.strategy &&
        v.vec == want.vec && v.group == want.group && v.vpt == want.vpt && v.edges == want.edges &&
        v.block == want.block)
      return i;
  }
  return -1;
}

// Whether the vector path (packs of `vec` elements) serves a call: every
// tensor the op reads or writes a row of (x; out; dy; an additive or
// boolean mask) starts each row at the same element offset within a pack
// as x does, so one head (the elements before the row's first whole pack,
// kernels/families/fused_rows.cuh) leaves every tensor's body aligned. The
// base addresses agree in elements modulo vec, and so do the steps from
// row to row: the row strides, and a mask's batch, head and query strides
// against the rows' strides over those dimensions (checked only where the
// dimension has more than one index, so a broadcast over a single head
// passes). Offsets count each tensor's own elements (the widening
// softmax's float32 and 16-bit tensors: a pack of either starts at the
// same column). A pointer that is not a whole number of elements fails. The row
// length is free; rows that are not whole packs from their start
// (fused_rows_on_packs) take the entries with edges.
inline bool fused_rows_congruent(const FusedArgs& a, int vec) {
  if (vec <= 1) return true;
  const std::int64_t v = vec;
  const auto mod = [v](std::int64_t n) { return ((n % v) + v) % v; };
  const auto phase = [vec](const void* p, std::int64_t elem) { return pack_phase(p, int(elem), vec); };
  const std::int64_t es = dtype_size(a.dtype);
  const std::int64_t x_phase = phase(a.x, dtype_size(fused_x_dtype(a.op, a.dtype)));
  if (x_phase < 0) return false;
  // A second tensor (elements of `dtype`) indexed row * stride as x is.
  const auto same_rows = [&](const void* p, std::int64_t stride, DType dtype) {
    return phase(p, dtype_size(dtype)) == x_phase && (a.rows <= 1 || mod(stride - a.x_stride) == 0);
  };
  if (a.out != nullptr && !same_rows(a.out, a.out_stride, fused_out_dtype(a.op, a.dtype))) return false;
  if (fused_backward(a.op) && !same_rows(a.dy, a.dy_stride, fused_x_dtype(a.op, a.dtype)))
    return false;
  if (a.op == FusedOp::masked_softmax && (a.mask_kind == MaskKind::additive || a.mask_kind == MaskKind::boolean)) {
    // Row r is query i of head h of batch b: x's row starts at
    // ((b * heads + h) * seq_q + i) * x_stride, the mask's at
    // b * batch_stride + h * head_stride + i * row_stride.
    const std::int64_t heads = a.heads > 0 ? a.heads : 1, seq_q = a.seq_q > 0 ? a.seq_q : 1;
    const std::int64_t batches = a.rows / heads / seq_q;
    const std::int64_t xs = mod(a.x_stride);
    if (phase(a.mask, a.mask_kind == MaskKind::additive ? es : 1) != x_phase) return false;
    if (seq_q > 1 && mod(a.mask_row_stride - xs) != 0) return false;
    if (heads > 1 && mod(a.mask_head_stride - mod(seq_q) * xs) != 0) return false;
    if (batches > 1 && mod(a.mask_batch_stride - mod(mod(heads) * mod(seq_q)) * xs) != 0) return false;
  }
  return true;
}
// Whether every row is whole packs from its start: x starts on a pack, and
// its row stride and the row length are whole packs (with
// fused_rows_congruent, so is every other tensor's). The vector entries
// without edges need it.
inline bool fused_rows_on_packs(const FusedArgs& a, int vec) {
  return vec <= 1 || rows_on_packs(dtype_size(fused_x_dtype(a.op, a.dtype)), vec, a.rows, a.cols, a.x, a.x_stride);
}

DUET_API std::string to_string(FusedOp op);
DUET_API std::string to_string(MaskKind m);
DUET_API std::string to_string(FusedStrategy s);
// "block_row<masked_softmax:boolean,bf16,vec8,v4>"
DUET_API std::string fused_variant_name(const FusedVariant& v);

}  // namespace duet
