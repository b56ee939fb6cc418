// The strategies of the fused row operations, one family for every FusedOp
// through its policy (families/fused_ops.cuh):
//   fused_group_kernel   GROUP threads a row, VPT packs each in registers,
//                        kFusedGroupBlock / GROUP rows a block; shuffles only.
//   fused_block_kernel   one block a row (run-time size), VPT packs a thread
//                        in registers (a mask tensor's packs in the widest
//                        entries in dynamic shared memory); one barrier a row.
//   fused_stream_kernel  one block a row at a time, rows of any length: a
//                        first pass of VPT-pack chunks into the thread's
//                        online pair, one barrier, then a second pass over
//                        the chunks in reverse order that writes. Its
//                        packs come from the row's first packs kept in
//                        shared memory (RowStash: what the launch gives,
//                        up to the block's opt-in), the rest again from L2
//                        (the latest read first). Ops without an output
//                        (cross-entropy's forward without the gradient) read
//                        the row once; ops without a reduction (its
//                        backward) only make the second pass.
// Each thread issues the loads of all its packs before it reduces any, so a
// thread has VPT loads in flight. Grids are grid-stride (runtime/src/
// planner/fused_planner.cpp sizes them); no workspace but cross-entropy's.
// Each has a twin with edges (fused_*_edges_kernel, vector path only) for
// rows that need not start or end on a pack: a row's body of whole packs
// runs at aligned addresses as in the kernel without, and its few elements
// before and after the body (RowSpan) ride along in registers of the row's
// first threads (RowEdges), added and written with the packs. The kernels
// without edges serve rows of whole packs and carry none of it.
// Plus cross-entropy's two helpers: the count of its targets before the
// rows (the mean's divisor, needed by the gradient in the same pass) and
// the fixed-order sum of the rows' losses after.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/reduce.cuh"
#include "common/row_edges.cuh"
#include "families/fused_ops.cuh"
#include "fused_variants.hpp"

namespace duet::DUET_NS::kernels {

// A row on the vector path: RowSpan (common/row_edges.cuh), its head from
// x's row start; every other tensor of the row starts at the same offset
// within a pack (the launch checks it: fused_rows_congruent), so the body
// is aligned in all of them.
template <class T, int PACK>
__device__ __forceinline__ RowSpan row_span(const FusedArgs& a, std::int64_t row) {
  return row_span<T, PACK>(a.x, row, a.x_stride, a.cols);
}

// An Item made ready for accumulate and store (the policy's prepare, where
// it has one: fused_ops.cuh): once an Item, after its loads, before its
// first accumulate or store.
template <class Op, class = void>
struct Prepares : std::false_type {};
template <class Op>
struct Prepares<Op, std::void_t<decltype(Op::kPrepares)>> : std::bool_constant<Op::kPrepares> {};
template <class Op>
__device__ __forceinline__ void prepare_item(const Op& op, typename Op::Item& it, std::int64_t p) {
  if constexpr (Prepares<Op>::value) op.prepare(it, p);
}
// A held Item prepared, then added to the thread's partial results.
template <class Op>
__device__ __forceinline__ void accumulate_item(const Op& op, RowAcc& acc, typename Op::Item& it, std::int64_t p) {
  prepare_item(op, it, p);
  op.accumulate(acc, it, p);
}

// The edge elements a thread of a row holds, in registers next to its
// packs: the head's and the tail's elements, at most 2 (PACK - 1), are
// numbered e = 0.. (head first) and thread t of the row's THREADS holds
// e = t, t + THREADS, ... (one slot where THREADS >= 2 (PACK - 1): every
// strategy but group_rows of 8 threads over 16-bit rows). The Scalar policy
// is built from the body's, so both address the row from the same element
// with the same pointers, causal limit and target column: head element e is
// its element e - head, tail element e its element body * PACK + e - head.
// The kernels take the edges first (loads, sums, stores): their registers
// are then free while the packs' values are worked on.
template <class Op, int PACK, int THREADS>
struct RowEdges {
  using Edge = typename Op::Scalar;
  static_assert(PACK > 1, "edges are the vector path's");
  static_assert(std::is_same_v<typename Edge::Final, typename Op::Final>, "the edges store with the body's Final");
  static constexpr int kSlots = (2 * (PACK - 1) + THREADS - 1) / THREADS;
  const Edge op;
  bool has[kSlots];
  int p[kSlots];
  typename Edge::Item it[kSlots];

  __device__ __forceinline__ RowEdges(const Op& body, const RowSpan& s, int thread, bool ok) : op(body) {
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int e = thread + k * THREADS;
      has[k] = ok && e < s.head + s.tail;
      p[k] = e - s.head + (e < s.head ? 0 : s.body * PACK);
    }
  }

  template <LoadHint H>
  __device__ __forceinline__ void load() {
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (has[k]) op.template load<H>(it[k], p[k]);
  }
  // After load: the Items made ready for accumulate and store.
  __device__ __forceinline__ void prepare() {
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (has[k]) prepare_item(op, it[k], p[k]);
  }
  // Prepares the Items, then adds them.
  __device__ __forceinline__ void accumulate(RowAcc& acc) {
    prepare();
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (has[k]) op.accumulate(acc, it[k], p[k]);
  }
  __device__ __forceinline__ void store(const typename Op::Final& f, bool streaming) const {
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (has[k]) op.store(it[k], p[k], f, streaming);
  }
};

// The partial results of WIDTH consecutive lanes combined; every lane gets
// the row's.
template <class Op, int WIDTH>
__device__ __forceinline__ RowAcc combine_lanes(RowAcc r) {
  if constexpr (Op::kSoftmax) {
    const float2 pair = group_reduce_pair<WIDTH>(r.m, r.s);
    r.m = pair.x;
    r.s = pair.y;
  }
  if constexpr (Op::kSums >= 1) r.a = group_reduce<WIDTH>(r.a, SumOp{});
  if constexpr (Op::kSums >= 2) r.b = group_reduce<WIDTH>(r.b, SumOp{});
  return r;
}

// Per-warp partial results of a block, two buffers: a row uses buffer
// `parity`, the next row the other, so a row's writes never meet the
// previous row's reads (the barrier of the row between protects them).
using FusedScratch = float4[2][kMaxWarpsPerBlock];
static_assert(sizeof(FusedScratch) == kFusedScratchBytes, "the planner counts the scratch beside a stash");

// stream_row's stash (fused_variants.hpp, fused_item_bytes): a row's
// first `slots` slots in the dynamic shared memory, slot k = c * VPT + j
// holding each thread's Item of pack j of chunk c. An Item is moved as
// 16- or 8-byte words (one shared-memory access each), word w of slot k of
// thread t at [k][w][t], so a warp's access covers consecutive banks (a
// struct copied member by member was split into 4-byte accesses at the
// Item's stride: bank conflicts). A thread reads back only the Items it
// wrote, so no barrier orders them.
template <class Item, int VPT, int BLOCK>
struct RowStash {
  // The scalar path's Items (a few bytes; never planned a stash) as they are.
  using Word = std::conditional_t<sizeof(Item) % 16 == 0, uint4, std::conditional_t<sizeof(Item) % 8 == 0, uint2, Item>>;
  static constexpr int kWords = sizeof(Item) / sizeof(Word);
  Word* words;  // this thread's word 0 of slot 0
  int slots;

  __device__ __forceinline__ explicit RowStash(std::int64_t bytes) {
    extern __shared__ float4 dynamic_smem[];
    words = reinterpret_cast<Word*>(dynamic_smem) + threadIdx.x;
    slots = static_cast<int>(bytes / (std::int64_t(sizeof(Item)) * BLOCK));
  }
  __device__ __forceinline__ bool holds(int chunk, int j) const { return chunk * VPT + j < slots; }
  __device__ __forceinline__ bool holds_all(int chunk) const { return (chunk + 1) * VPT <= slots; }
  // Of a row's `chunks`, those with a slot here.
  __device__ __forceinline__ int chunks_held(int chunks) const { return min(chunks, (slots + VPT - 1) / VPT); }
  // This thread's word 0 of slot (chunk, j): the whole Item where kWords
  // is 1.
  __device__ __forceinline__ Word* slot(int chunk, int j) const { return words + (chunk * VPT + j) * kWords * BLOCK; }
  __device__ __forceinline__ void put(int chunk, int j, const Item& it) const {
    Word w[kWords];
    __builtin_memcpy(w, &it, sizeof(Item));
#pragma unroll
    for (int k = 0; k < kWords; ++k) words[((chunk * VPT + j) * kWords + k) * BLOCK] = w[k];
  }
  __device__ __forceinline__ Item get(int chunk, int j) const {
    Word w[kWords];
#pragma unroll
    for (int k = 0; k < kWords; ++k) w[k] = words[((chunk * VPT + j) * kWords + k) * BLOCK];
    Item it;
    __builtin_memcpy(&it, w, sizeof(Item));
    return it;
  }
};

// Pass 1's loads of chunk c from pack c0 (`left` packs of the row from
// there): packs the stash keeps are read once from memory (evict first),
// the others asked to stay in L2 for pass 2.
template <class Op, int VPT, int BLOCK>
__device__ __forceinline__ void stream_load(const Op& op, const RowStash<typename Op::Item, VPT, BLOCK>& stash,
                                            typename Op::Item (&it)[VPT], int c, int c0, int left) {
  constexpr int nt = BLOCK;
  const int tid = threadIdx.x;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    if (j * nt + tid >= left) continue;
    if (stash.holds(c, j))
      op.template load<LoadHint::last_use>(it[j], c0 + j * nt + tid);
    else
      op.template load<LoadHint::keep>(it[j], c0 + j * nt + tid);
  }
}

// Pass 2 of stream_row over chunk c from pack c0 (`left` packs of the row
// from there): each pack's Item from the stash or loaded again, its output
// stored streaming. A chunk wholly in the stash is written a pack at a
// time (shared memory's latency needs no loads in flight); the others
// issue their loads first, as pass 1 does.
template <class Op, int VPT, int BLOCK>
__device__ __forceinline__ void stream_write(const Op& op, const typename Op::Final& f,
                                             const RowStash<typename Op::Item, VPT, BLOCK>& stash, int c, int c0,
                                             int left) {
  constexpr int nt = BLOCK;
  const int tid = threadIdx.x;
  if (stash.holds_all(c)) {
#pragma unroll
    for (int j = 0; j < VPT; ++j)
      if (j * nt + tid < left) op.store(stash.get(c, j), c0 + j * nt + tid, f, true);
    return;
  }
  typename Op::Item it[VPT];
#pragma unroll
  for (int j = 0; j < VPT; ++j)
    if (j * nt + tid < left && !stash.holds(c, j)) op.template load<LoadHint::last_use>(it[j], c0 + j * nt + tid);
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    if (j * nt + tid >= left) continue;
    if (stash.holds(c, j)) {
      op.store(stash.get(c, j), c0 + j * nt + tid, f, true);
    } else {
      prepare_item(op, it[j], c0 + j * nt + tid);
      op.store(it[j], c0 + j * nt + tid, f, true);
    }
  }
}

// A pass-1 chunk c of stream_row: its loads, then its sums, each pack into
// the stash as it is added where the chunk is kept; WITH_EDGES, the row's
// edges first. The chunks run from the row's pack `base` (a cluster_row
// block's slice; 0 for a whole row) to pack `packs`.
template <class Op, int VPT, int BLOCK, bool WITH_EDGES, class Edges>
__device__ __forceinline__ void stream_accumulate(const Op& op, Edges& edges, RowAcc& acc,
                                                  const RowStash<typename Op::Item, VPT, BLOCK>& stash, int c,
                                                  int packs, int base = 0) {
  constexpr int nt = BLOCK;
  const int tid = threadIdx.x;
  const int c0 = base + c * nt * VPT, left = packs - c0;
  typename Op::Item it[VPT];
  if constexpr (WITH_EDGES) edges.template load<LoadHint::keep>();
  stream_load<Op, VPT, BLOCK>(op, stash, it, c, c0, left);
  if constexpr (WITH_EDGES) edges.accumulate(acc);
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    if (j * nt + tid >= left) continue;
    prepare_item(op, it[j], c0 + j * nt + tid);  // the stash keeps the prepared Item
    if (stash.holds(c, j)) stash.put(c, j, it[j]);
    op.accumulate(acc, it[j], c0 + j * nt + tid);
  }
}

// stream_row's stash filled by cp.async, where the device has it and the
// op's Item is x's 16-byte pack alone (Op::kItemIsX: the vector path of
// cross-entropy's forward and of the softmax without a mask tensor; the
// widening softmax's 8-byte packs take the loads): at the start of a row's
// pass 1 every thread copies its stashed packs straight to their slots, a
// commit group a chunk, so all of them are in flight at once; pass 1 then
// waits for each chunk's group only (chunk c of `held` stash chunks leaves
// held - 1 - c groups in flight) and adds it from shared memory
// (bench/NOTES.md v59). A thread reads only the slots it copied: no barrier
// orders them. Pass 2's reads of a row's slots come before the next row's
// copies into them in the thread's program order, and each feeds a store
// that issues before those copies do.
template <class Op, class = void>
struct ItemIsX : std::false_type {};
template <class Op>
struct ItemIsX<Op, std::void_t<decltype(Op::kItemIsX)>> : std::bool_constant<Op::kItemIsX> {};
template <class Op>
inline constexpr bool kAsyncStash =
    DUET_DEVICE_CP_ASYNC && reduces<Op> && ItemIsX<Op>::value && sizeof(typename Op::Item) == 16;

// The copies of chunk c's stashed packs of a row (`src`: the row's pack 0,
// the chunks from pack `base` to pack `packs`) as one group of this
// thread's copies; every thread commits one, copies or not.
template <class Item, int VPT, int BLOCK, class V>
__device__ __forceinline__ void stash_fetch(const RowStash<Item, VPT, BLOCK>& stash, const V* src, int c, int packs,
                                            int base = 0) {
  static_assert(sizeof(Item) == sizeof(V) && RowStash<Item, VPT, BLOCK>::kWords == 1, "the Item is x's pack alone");
  const int c0 = base + c * BLOCK * VPT;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int p = c0 + j * BLOCK + static_cast<int>(threadIdx.x);
    if (stash.holds(c, j) && p < packs)
      copy_to_shared<LoadHint::last_use>(reinterpret_cast<V*>(stash.slot(c, j)), src + p);
  }
  shared_copies_commit();
}
// A row's `held` stash chunks, a group each, in chunk order.
template <class Item, int VPT, int BLOCK, class V>
__device__ __forceinline__ void stash_fetch_row(const RowStash<Item, VPT, BLOCK>& stash, const V* src, int held,
                                                int packs, int base = 0) {
  for (int c = 0; c < held; ++c) stash_fetch(stash, src, c, packs, base);
}

// Pass 1's chunk c of a row whose stash comes by cp.async: the chunk's
// packs past the stash loaded into registers first (kept in L2 for pass
// 2), then the stash's copies waited for (`pending` groups may stay in
// flight), then every pack added; WITH_EDGES, the row's edges first.
template <class Op, int VPT, int BLOCK, bool WITH_EDGES, class Edges>
__device__ __forceinline__ void stream_accumulate_stashed(const Op& op, Edges& edges, RowAcc& acc,
                                                          const RowStash<typename Op::Item, VPT, BLOCK>& stash, int c,
                                                          int packs, int pending, int base = 0) {
  static_assert(!Prepares<Op>::value, "the stash's copies are x's packs as loaded");
  constexpr int nt = BLOCK;
  const int tid = threadIdx.x;
  const int c0 = base + c * nt * VPT, left = packs - c0;
  typename Op::Item it[VPT];
  if constexpr (WITH_EDGES) edges.template load<LoadHint::keep>();
#pragma unroll
  for (int j = 0; j < VPT; ++j)
    if (j * nt + tid < left && !stash.holds(c, j)) op.template load<LoadHint::keep>(it[j], c0 + j * nt + tid);
  shared_copies_wait(pending);
  if constexpr (WITH_EDGES) edges.accumulate(acc);
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    if (j * nt + tid >= left) continue;
    op.accumulate(acc, stash.holds(c, j) ? stash.get(c, j) : it[j], c0 + j * nt + tid);
  }
}

// Ops that copy a pack's mask to shared memory (MaskedSoftmaxOp's SHARED)
// wait for a row's copies after its loads, before its first accumulate.
template <class Op, class = void>
struct MaskInShared : std::false_type {};
template <class Op>
struct MaskInShared<Op, std::void_t<decltype(Op::kMaskInShared)>> : std::bool_constant<Op::kMaskInShared> {};
template <class Op>
__device__ __forceinline__ void wait_mask_copies() {
  if constexpr (MaskInShared<Op>::value) {
    shared_copies_commit();
    shared_copies_wait<0>();
  }
}

template <class Op>
__device__ __forceinline__ RowAcc combine_block(RowAcc r, FusedScratch& scratch, int parity) {
  constexpr int W = DUET_DEVICE_WARP_SIZE;
  r = combine_lanes<Op, W>(r);
  const int lane = threadIdx.x % W;
  const int warp = threadIdx.x / W;
  if (lane == 0) scratch[parity][warp] = make_float4(r.m, r.s, r.a, r.b);
  __syncthreads();
  const int warps = (blockDim.x + W - 1) / W;
  RowAcc q;
  if (lane < warps) {
    const float4 v = scratch[parity][lane];
    q.m = v.x;
    q.s = v.y;
    q.a = v.z;
    q.b = v.w;
  }
  return combine_lanes<Op, W>(q);
}

template <class Op, int PACK, int GROUP, int VPT>
__global__ void __launch_bounds__(kFusedGroupBlock, 8) fused_group_kernel(FusedArgs a) {
  constexpr int kRowsPerBlock = kFusedGroupBlock / GROUP;
  const int lane = threadIdx.x % GROUP;
  const int group = threadIdx.x / GROUP;
  const int packs = static_cast<int>(a.cols / PACK);  // cols < 2^31 (validate.cpp)
  // The bound is uniform across the block, so whole warps stay converged
  // for the shuffles when the last rows run out.
  for (std::int64_t base = std::int64_t(blockIdx.x) * kRowsPerBlock; base < a.rows;
       base += std::int64_t(gridDim.x) * kRowsPerBlock) {
    const std::int64_t row = base + group;
    const bool row_ok = row < a.rows;
    const Op op(a, row_ok ? row : 0, 0);
    typename Op::Item it[VPT];
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * GROUP + lane;
      if (row_ok && p < packs) op.template load<LoadHint::keep>(it[j], p);
    }
    RowAcc acc;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * GROUP + lane;
      if (row_ok && p < packs) accumulate_item(op, acc, it[j], p);
    }
    if constexpr (reduces<Op>) acc = combine_lanes<Op, GROUP>(acc);
    const auto f = op.finish(acc);
    if (row_ok && lane == 0) op.epilogue(f, row);
    if (row_ok && op.writes()) {
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const int p = j * GROUP + lane;
        if (p < packs) op.store(it[j], p, f, false);
      }
    }
  }
}

template <class Op, int PACK, int VPT>
__global__ void __launch_bounds__(kFusedBlockMaxThreads) fused_block_kernel(FusedArgs a) {
  __shared__ FusedScratch scratch;
  const int tid = threadIdx.x;
  const int nt = blockDim.x;
  const int packs = static_cast<int>(a.cols / PACK);  // cols < 2^31 (validate.cpp)
  int parity = 0;
  for (std::int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const Op op(a, row, 0);
    typename Op::Item it[VPT];
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * nt + tid;
      if (p < packs) op.template load<LoadHint::keep>(it[j], p);
    }
    wait_mask_copies<Op>();
    RowAcc acc;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * nt + tid;
      if (p < packs) accumulate_item(op, acc, it[j], p);
    }
    if constexpr (reduces<Op>) {
      acc = combine_block<Op>(acc, scratch, parity);
      parity ^= 1;
    }
    const auto f = op.finish(acc);
    if (tid == 0) op.epilogue(f, row);
    if (op.writes()) {
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const int p = j * nt + tid;
        if (p < packs) op.store(it[j], p, f, false);
      }
    }
  }
}

template <class Op, int PACK, int VPT, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kFusedStreamBlock / BLOCK) fused_stream_kernel(FusedArgs a) {
  __shared__ FusedScratch scratch;
  constexpr int nt = BLOCK;
  constexpr int kChunk = nt * VPT;  // packs a chunk
  const int tid = threadIdx.x;
  const int packs = static_cast<int>(a.cols / PACK);  // cols < 2^31 (validate.cpp)
  const int chunks = packs / kChunk + (packs % kChunk != 0);
  const RowStash<typename Op::Item, VPT, BLOCK> stash(reduces<Op> ? a.stash_bytes : 0);  // pass 1 fills it
  const int held = stash.chunks_held(chunks);
  int parity = 0;
  for (std::int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const Op op(a, row, 0);
    RowAcc acc;
    if constexpr (kAsyncStash<Op>) {
      // Pass 1: the stashed chunks in flight at once, then the chunks
      // one at a time as below.
      stash_fetch_row(stash, op.x, held, packs);
      int no_edges = 0;  // WITH_EDGES is false: never used
      for (int c = 0; c < chunks; ++c) {
        if (c < held)
          stream_accumulate_stashed<Op, VPT, BLOCK, false>(op, no_edges, acc, stash, c, packs, held - 1 - c);
        else
          stream_accumulate<Op, VPT, BLOCK, false>(op, no_edges, acc, stash, c, packs);
      }
      acc = combine_block<Op>(acc, scratch, parity);
      parity ^= 1;
    } else if constexpr (reduces<Op>) {
      // Pass 1: every chunk into the thread's partial results; the stash
      // keeps the first packs, the reads of the rest ask L2 to keep the
      // lines for pass 2.
      for (int c = 0; c < chunks; ++c) {
        const int c0 = c * kChunk, left = packs - c0;
        typename Op::Item it[VPT];
        stream_load<Op, VPT, BLOCK>(op, stash, it, c, c0, left);
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
          if (j * nt + tid >= left) continue;
          prepare_item(op, it[j], c0 + j * nt + tid);  // the stash keeps the prepared Item
          if (stash.holds(c, j)) stash.put(c, j, it[j]);
          op.accumulate(acc, it[j], c0 + j * nt + tid);
        }
      }
      acc = combine_block<Op>(acc, scratch, parity);
      parity ^= 1;
    }
    const auto f = op.finish(acc);
    if (tid == 0) op.epilogue(f, row);
    if (op.writes()) {
      // Pass 2, last chunk first (the last read, evicted first); the
      // output stored streaming, so it does not push pass 1's lines out
      // of L2.
      for (int c = chunks - 1; c >= 0; --c)
        stream_write<Op, VPT, BLOCK>(op, f, stash, c, c * kChunk, packs - c * kChunk);
    }
  }
}

// ------------------------------------------------------------ with edges
template <class Op, int PACK, int GROUP, int VPT>
__global__ void __launch_bounds__(kFusedGroupBlock, 8) fused_group_edges_kernel(FusedArgs a) {
  static_assert(GROUP >= 8, "a row's first lanes hold its edges");
  constexpr int kRowsPerBlock = kFusedGroupBlock / GROUP;
  const int lane = threadIdx.x % GROUP;
  const int group = threadIdx.x / GROUP;
  // The bound is uniform across the block, so whole warps stay converged
  // for the shuffles when the last rows run out; rows' spans differ only in
  // which loads and stores a lane makes.
  for (std::int64_t base = std::int64_t(blockIdx.x) * kRowsPerBlock; base < a.rows;
       base += std::int64_t(gridDim.x) * kRowsPerBlock) {
    const std::int64_t row = base + group;
    const bool row_ok = row < a.rows;
    const std::int64_t r = row_ok ? row : 0;
    const RowSpan span = row_span<typename Op::Elem, PACK>(a, r);
    const Op op(a, r, span.head);
    RowEdges<Op, PACK, GROUP> edges(op, span, lane, row_ok);
    typename Op::Item it[VPT];
    edges.template load<LoadHint::keep>();
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * GROUP + lane;
      if (row_ok && p < span.body) op.template load<LoadHint::keep>(it[j], p);
    }
    RowAcc acc;
    edges.accumulate(acc);
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * GROUP + lane;
      if (row_ok && p < span.body) accumulate_item(op, acc, it[j], p);
    }
    if constexpr (reduces<Op>) acc = combine_lanes<Op, GROUP>(acc);
    const auto f = op.finish(acc);
    if (row_ok && lane == 0) op.epilogue(f, row);
    if (row_ok && op.writes()) {
      edges.store(f, false);
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const int p = j * GROUP + lane;
        if (p < span.body) op.store(it[j], p, f, false);
      }
    }
  }
}

template <class Op, int PACK, int VPT>
__global__ void __launch_bounds__(kFusedBlockMaxThreads) fused_block_edges_kernel(FusedArgs a) {
  __shared__ FusedScratch scratch;
  const int tid = threadIdx.x;
  const int nt = blockDim.x;
  int parity = 0;
  for (std::int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const RowSpan span = row_span<typename Op::Elem, PACK>(a, row);
    const Op op(a, row, span.head);
    RowEdges<Op, PACK, kFusedBlockEdgesMinThreads> edges(op, span, tid, true);
    typename Op::Item it[VPT];
    edges.template load<LoadHint::keep>();
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * nt + tid;
      if (p < span.body) op.template load<LoadHint::keep>(it[j], p);
    }
    wait_mask_copies<Op>();
    RowAcc acc;
    edges.accumulate(acc);
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int p = j * nt + tid;
      if (p < span.body) accumulate_item(op, acc, it[j], p);
    }
    if constexpr (reduces<Op>) {
      acc = combine_block<Op>(acc, scratch, parity);
      parity ^= 1;
    }
    const auto f = op.finish(acc);
    if (tid == 0) op.epilogue(f, row);
    if (op.writes()) {
      edges.store(f, false);
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const int p = j * nt + tid;
        if (p < span.body) op.store(it[j], p, f, false);
      }
    }
  }
}

// The edges once a row: in pass 1 with the first chunk (their loads in
// flight with the chunk's, their registers free after it); in pass 2 read
// again and written before the chunks (the threads that hold them wait one
// load while the block's other warps go on).
template <class Op, int PACK, int VPT, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kFusedStreamBlock / BLOCK) fused_stream_edges_kernel(FusedArgs a) {
  __shared__ FusedScratch scratch;
  constexpr int kChunk = BLOCK * VPT;  // packs a chunk
  const int tid = threadIdx.x;
  const RowStash<typename Op::Item, VPT, BLOCK> stash(reduces<Op> ? a.stash_bytes : 0);  // pass 1 fills it
  int parity = 0;
  for (std::int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const RowSpan span = row_span<typename Op::Elem, PACK>(a, row);
    const int packs = span.body;
    const int chunks = packs / kChunk + (packs % kChunk != 0);
    const Op op(a, row, span.head);
    RowEdges<Op, PACK, BLOCK> edges(op, span, tid, true);
    RowAcc acc;
    if constexpr (kAsyncStash<Op>) {
      const int held = stash.chunks_held(chunks);
      stash_fetch_row(stash, op.x, held, packs);
      for (int c = 0; c < (chunks > 0 ? chunks : 1); ++c) {  // the edges with chunk 0, if only they
        const int pending = held - 1 - c;
        if (c == 0 && held > 0)
          stream_accumulate_stashed<Op, VPT, BLOCK, true>(op, edges, acc, stash, c, packs, pending);
        else if (c == 0)
          stream_accumulate<Op, VPT, BLOCK, true>(op, edges, acc, stash, c, packs);
        else if (c < held)
          stream_accumulate_stashed<Op, VPT, BLOCK, false>(op, edges, acc, stash, c, packs, pending);
        else
          stream_accumulate<Op, VPT, BLOCK, false>(op, edges, acc, stash, c, packs);
      }
      acc = combine_block<Op>(acc, scratch, parity);
      parity ^= 1;
    } else if constexpr (reduces<Op>) {
      stream_accumulate<Op, VPT, BLOCK, true>(op, edges, acc, stash, 0, packs);
      for (int c = 1; c < chunks; ++c) stream_accumulate<Op, VPT, BLOCK, false>(op, edges, acc, stash, c, packs);
      acc = combine_block<Op>(acc, scratch, parity);
      parity ^= 1;
    }
    const auto f = op.finish(acc);
    if (tid == 0) op.epilogue(f, row);
    if (op.writes()) {
      edges.template load<LoadHint::last_use>();
      edges.prepare();
      edges.store(f, true);
      for (int c = chunks - 1; c >= 0; --c)
        stream_write<Op, VPT, BLOCK>(op, f, stash, c, c * kChunk, packs - c * kChunk);
    }
  }
}

// ------------------------------------------------------------ cross-entropy helpers
inline constexpr int kCeHelperBlock = 256;

// Rows not ignored (counter 0) and rows with an invalid target (counter 1),
// added to the workspace's zeroed counters.
__global__ void __launch_bounds__(kCeHelperBlock) ce_count_kernel(FusedArgs a) {
  __shared__ int block_counts[2];
  if (threadIdx.x == 0) block_counts[0] = block_counts[1] = 0;
  __syncthreads();
  int counted = 0, invalid = 0;
  for (std::int64_t row = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; row < a.rows;
       row += std::int64_t(gridDim.x) * blockDim.x) {
    const CeRow r = ce_row(a, row);
    counted += r.ignored ? 0 : 1;
    invalid += r.invalid ? 1 : 0;
  }
  if (counted) atomicAdd(&block_counts[0], counted);
  if (invalid) atomicAdd(&block_counts[1], invalid);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (block_counts[0]) atomicAdd(&ce_counters(a)[0], block_counts[0]);
    if (block_counts[1]) atomicAdd(&ce_counters(a)[1], block_counts[1]);
  }
}

// One block: the rows' losses summed in double in a fixed order (thread t
// takes rows t, t + 256, ...; then a fixed tree), so a run gives the same
// bits every time; mean divides by the rows counted (0 / 0 = NaN when all
// are ignored). Also copies the invalid count out where asked.
__global__ void __launch_bounds__(kCeHelperBlock) ce_finalize_kernel(FusedArgs a) {
  __shared__ double partial[kCeHelperBlock];
  const int tid = threadIdx.x;
  double sum = 0.0;
  if (a.reduction != Reduction::none) {
    const float* losses = ce_row_losses(a);
    for (std::int64_t row = tid; row < a.rows; row += kCeHelperBlock) sum += losses[row];
  }
  partial[tid] = sum;
  __syncthreads();
  for (int half = kCeHelperBlock / 2; half > 0; half /= 2) {
    if (tid < half) partial[tid] += partial[tid + half];
    __syncthreads();
  }
  if (tid == 0) {
    if (a.reduction == Reduction::sum) a.loss[0] = static_cast<float>(partial[0]);
    if (a.reduction == Reduction::mean) a.loss[0] = static_cast<float>(partial[0] / double(ce_counters(a)[0]));
    if (a.invalid_targets) *a.invalid_targets = ce_counters(a)[1];
  }
}

}  // namespace duet::DUET_NS::kernels
