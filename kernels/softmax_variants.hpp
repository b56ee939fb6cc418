// The catalogue of compiled softmax kernel variants: plain data, shared by
// the vendor backends (which instantiate one kernel per entry) and the
// vendor-free planner (which picks an entry for a shape). No vendor header.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "duet/export.h"

namespace duet {

enum class DType : int { f32 = 0, f16 = 1, bf16 = 2 };
enum class Op : int { softmax = 0, log_softmax = 1 };

constexpr int dtype_size(DType d) { return d == DType::f32 ? 4 : 2; }
// Elements in one 16-byte vector access.
constexpr int dtype_vec16(DType d) { return 16 / dtype_size(d); }

enum class Strategy : int {
  // THREADS_PER_ROW (1..32) threads hold a row in registers; several rows
  // per warp; reductions by warp shuffles only (no barrier).
  group_rows = 0,
  // One block per row, the row in registers (VECS_PER_THREAD vectors a thread).
  block_row = 1,
  // Rows too wide for one block's on-chip memory: each block reduces a chunk
  // of a row to a running (max, sum) pair (online softmax), a second kernel
  // combines a row's pairs and writes the chunk. Reads twice, writes once.
  // An experiment: catalogued always, its kernels built only with
  // -DDUET_EXPERIMENTS=ON (split_stream does the same in one launch).
  split_row = 2,
  // block_row for rows past one block's registers: the rest of the row in
  // dynamic shared memory, up to the opt-in limit.
  block_row_smem = 3,
  // Rows past one block's registers, cut over a thread-block cluster of
  // 2..kMaxClusterBlocks blocks (sm_90+): each block keeps its slice in
  // registers as block_row does; the blocks exchange (max, sum) pairs through
  // distributed shared memory. Reads once, writes once. Forward only.
  cluster_row = 4,
  // split_row's two passes in one launch: blocks take chunk visits from a
  // ticket queue, the second pass trailing the first by a window the L2
  // holds, so the second read of a chunk mostly hits L2.
  split_stream = 5,
  // Short rows off the pack grid stored back to back: a block moves a tile
  // of rows as the aligned packs that cover it through shared memory, a
  // thread a row.
  flat_rows = 6,
  // Rows whose elements lie col_stride apart and whose neighbours are
  // adjacent (softmax over a non-last dimension): a block takes a tile of
  // neighbouring rows, its threads split each row's elements; VPT elements a
  // thread in registers, or (VPT = 0) two passes, the second from L2.
  interleaved_rows = 7,
  // cluster_row for rows past a cluster's registers: each block keeps the
  // rest of its slice in dynamic shared memory, up to the opt-in (one block
  // an SM). Reads once, writes once. Forward and backward.
  cluster_row_smem = 8,
  // interleaved_rows for rows too long for a tile in registers: the block
  // keeps its tile in dynamic shared memory, read once, and the next tile's
  // copies are in flight while this one is written.
  interleaved_smem = 9,
  // interleaved_smem for tiles too tall for one block: a cluster's blocks
  // (sm_90+) split the tile's rows, exchanging their partial pairs through
  // distributed shared memory.
  interleaved_cluster = 10,
  // cluster_row_smem over any number of blocks of one grid (sm_80+, no
  // cluster needed): a row's blocks exchange their pairs through global
  // memory. float32 rows past a cluster's shared memory, up to the GPU's.
  // Reads once, writes once. Forward and backward.
  grid_row = 11,
  // interleaved_rows for rows past a tile on chip (softmax over dim 0 of a
  // tall matrix: few tiles, each a long column): split_stream's two passes
  // over chunks of a tile's column that any block takes from a queue, the
  // second pass from L2. Packs of rows only.
  interleaved_stream = 12,
  // interleaved_rows for rows past a tile on chip whose tiles' columns are
  // too tall for the L2 to hold between interleaved_stream's passes: each
  // block reduces a slab of whole lines of a tile (memory read back to
  // back), the slabs' pairs meet through global memory, and a second
  // kernel writes, starting with the lines the first read last. Packs of
  // rows only.
  interleaved_slabs = 13,
  // interleaved_rows through a ring of shared-memory buffers: a block's
  // tiles (lines of up to 512 bytes of rows, 16-byte packs) pass through two
  // buffers filled by cp.async (sm_80+), so that the next tile is in flight
  // while the block reduces and writes this one. Reads once, writes once.
  interleaved_ring = 14,
};

struct Variant {
  Strategy strategy;
  DType dtype;
  bool backward;
  int vec;          // elements per memory access: 16/sizeof(T), or 1 (scalar path)
  int group;        // group_rows: threads per row; otherwise 0
  int vpt;          // vectors each thread keeps in registers (split_row: loads in flight)
  int rows = 1;     // group_rows: rows a group loads before reducing the first; otherwise 1
  // Vector entries only: rows at any element offset and of any length, a
  // body of whole packs and the elements before and after it held apart
  // (kernels/common/row_edges.cuh). Every family but split_row has them;
  // group_rows from kEdgesMinGroup threads a row.
  bool edges = false;
};

// Element offset of p within a pack of `vec` elements of `elem` bytes, or
// -1 where p is not on an element.
inline std::int64_t pack_phase(const void* p, int elem, int vec) {
  const auto u = reinterpret_cast<std::uintptr_t>(p);
  if (u % std::uintptr_t(elem) != 0) return -1;
  return static_cast<std::int64_t>((u / std::uintptr_t(elem)) % std::uintptr_t(vec));
}
// Whether a tensor (p, row stride) starts each of `rows` rows at the same
// offset within a pack as x does (pointers and strides congruent modulo
// vec): then one head leaves the body of whole packs aligned in both.
inline bool rows_congruent(int elem, int vec, std::int64_t rows, const void* x, std::int64_t x_stride, const void* p,
                           std::int64_t stride) {
  const std::int64_t phase = pack_phase(x, elem, vec);
  return phase >= 0 && pack_phase(p, elem, vec) == phase && (rows <= 1 || (stride - x_stride) % vec == 0);
}
// Whether every row of x is whole packs from a pack boundary: x on a pack,
// its row stride and the row length whole packs.
inline bool rows_on_packs(int elem, int vec, std::int64_t rows, std::int64_t cols, const void* x,
                          std::int64_t x_stride) {
  return pack_phase(x, elem, vec) == 0 && cols % vec == 0 && (rows <= 1 || x_stride % vec == 0);
}

// What a softmax call's tensors allow the vector kernels: every tensor's
// rows congruent with x's (the vector path), every row whole packs from a
// pack boundary (no edges needed), every tensor's rows back to back (row
// stride = cols: flat_rows). The runtime plans from it; the launch checks
// the entry it is handed against it.
struct RowLayout {
  bool congruent = false;
  bool on_packs = false;
  bool dense = false;
};
inline RowLayout row_layout(DType dtype, bool backward, std::int64_t rows, std::int64_t cols, const void* x,
                            std::int64_t x_stride, const void* dy, std::int64_t dy_stride, const void* out,
                            std::int64_t out_stride) {
  const int elem = dtype_size(dtype), vec = dtype_vec16(dtype);
  RowLayout l;
  l.congruent = rows_congruent(elem, vec, rows, x, x_stride, out, out_stride) &&
                (!backward || rows_congruent(elem, vec, rows, x, x_stride, dy, dy_stride));
  l.on_packs = rows_on_packs(elem, vec, rows, cols, x, x_stride);
  l.dense = rows <= 1 || (x_stride == cols && out_stride == cols && (!backward || dy_stride == cols));
  return l;
}

// Block size of group_rows, split_row and split_stream kernels (block_row
// chooses its own).
inline constexpr int kGroupRowsBlock = 128;
inline constexpr int kSplitRowBlock = 512;
// split_stream's block, a compile-time constant so that a thread's vectors
// sit at constant offsets from its first.
inline constexpr int kSplitStreamBlock = 512;
inline constexpr int kSplitStreamMinBlocksPerSm = 1024 / kSplitStreamBlock;  // 64 registers a thread
// Vectors a split_stream thread holds: a chunk is 512 x 8 x 16 bytes = 64 KiB
// (backward: 4 vectors of each of two tensors), 32 registers of data in
// blocks of 512 threads, two an SM (64 registers). A visit costs a few round
// trips whatever its size, so a chunk half as large runs at a lower share
// of copy (bench/NOTES.md v16).
constexpr int split_stream_vpt(bool backward) { return backward ? 4 : 8; }
inline constexpr int kBlockRowMaxThreads = 1024;
// cluster_row: blocks of at most 512 threads and 64 registers, so two fit an
// SM (__launch_bounds__(512, 2)), and clusters of up to 8 blocks, the
// portable cluster size, or 16, the size Hopper allows a kernel that opts in
// (CUDA C Programming Guide, "Thread Block Clusters":
// cudaFuncAttributeNonPortableClusterSizeAllowed; the runtime falls back to
// 8 where the device holds none of 16).
inline constexpr int kClusterRowMaxThreads = 512;
inline constexpr int kPortableClusterBlocks = 8;
inline constexpr int kMaxClusterBlocks = 16;
// Vectors a cluster_row thread holds: 8, so 8 blocks of 512 threads hold a
// row of 32768 vectors, 16 blocks 65536. Holding 4 and prefetching the next
// row's 4 needs twice the blocks and is slower (bench/NOTES.md v11).
inline constexpr int kClusterRowVpt = 8;
// cluster_row_smem's blocks: 512 threads, 8 vectors a thread in registers
// (backward 4 of each tensor), the rest of a block's slice in shared
// memory.
inline constexpr int kClusterRowSmemThreads = 512;
constexpr int cluster_row_smem_vpt(bool backward) { return backward ? 4 : kClusterRowVpt; }
// grid_row's blocks: cluster_row_smem's (its rows are the same code).
inline constexpr int kGridRowThreads = kClusterRowSmemThreads;

// Vectors each group_rows thread has in flight of each tensor it reads: the
// rows it loads before reducing the first x the vectors it holds of each.
// Two (32 bytes; 64 KiB an SM at 2048 threads): on the H200 two is at
// least as fast as four or eight at every row length it serves
// (bench/NOTES.md v22).
inline constexpr int kGroupRowsInFlight = 2;
constexpr int group_rows_rows_per_step(int vpt) { return vpt >= kGroupRowsInFlight ? 1 : kGroupRowsInFlight / vpt; }

// Shapes of the group_rows family: (threads a row, vectors a thread, rows a
// step), the planner's choice for rows of 1, 2, 4, 8, 16, 32, 64, 128 and
// 256 vectors. At least 8 threads a row (8 x 16 bytes: a warp's load covers
// whole 128-byte lines; 1 to 4 threads a row scatter each load over many
// lines, under half the copy rate), then 2
// vectors a thread up to a warp a row, then more vectors.
inline constexpr std::array<std::array<int, 3>, 9> kGroupShapes{{
    {1, 1, 2}, {2, 1, 2}, {4, 1, 2}, {8, 1, 2}, {8, 2, 1}, {16, 2, 1}, {32, 2, 1}, {32, 4, 1}, {32, 8, 1}}};
static_assert([] {
  for (const auto& g : kGroupShapes)
    if (g[2] != group_rows_rows_per_step(g[1])) return false;
  return true;
}());
// Vectors per thread block_row keeps in registers. 1024-thread blocks cap a
// thread at 64 registers: the register-only kernel holds 8 vectors (4 for
// backward, which keeps two tensors) without spilling (ptxas -v, sm_90).
inline constexpr std::array<int, 4> kBlockVpt{1, 2, 4, 8};
inline constexpr std::array<int, 3> kBlockVptBackward{1, 2, 4};
// block_row_smem keeps fewer, 4 (backward 2): its shared-memory code costs
// registers of its own, and 8 (backward 4) spill beside it.
constexpr int block_row_smem_vpt(bool backward) { return backward ? 2 : 4; }

// Per dtype and direction, three paths: 16-byte vectors (rows of whole
// packs), the same with edges, and scalar accesses.
enum class Path : int { vector = 0, vector_edges = 1, scalar = 2 };
// group_rows with edges: a row's first 4 lanes hold its up to 2 x 7 edge
// elements in four slots at most. Fewer lanes a row than the rows of whole
// packs get would halve the rows a warp takes at short rows.
inline constexpr int kEdgesMinGroup = 4;
// flat_rows: rows a block (one a thread). Rows of at most 6 whole packs
// take it, in both directions, where their tensors' rows lie back to back:
// up to there it leads group_rows with edges on the H100 (by up to 0.36 of
// copy at bf16 N = 41) or trails it by under 0.01 (f32 N = 27), with a
// compiled instance a length (kernels/families/flat_rows.cuh; bench/NOTES.md
// v119). The 16-bit forward takes it to 11 whole packs (95 elements),
// worked in chunks of 8 elements past the 6 (an instance a remainder): it
// leads group_rows there by up to 0.12 (bf16 N = 81), where its larger
// tiles leave fewer blocks an SM at 113 and past (0.78 against 0.96) and
// in the backward (bench/NOTES.md v120).
inline constexpr int kFlatRowsBlock = 128;
// flat_rows' tiles of each tensor a block: it works one while the next
// one's copies land (bench/NOTES.md v118).
inline constexpr int kFlatRowsTiles = 2;
// flat_rows' whole packs a row at most, and up to where each length has
// its own instance.
constexpr int flat_rows_max_packs(int vec, bool backward) { return vec == 8 && !backward ? 11 : 6; }
inline constexpr int kFlatRowsUnrolledPacks = 6;
// The longest row flat_rows takes: its whole packs and up to vec - 1
// elements of edges.
constexpr int flat_rows_max_cols(int vec, bool backward) { return (flat_rows_max_packs(vec, backward) + 1) * vec - 1; }
// The longest row with an instance of its own length; longer rows are
// worked in chunks of kFlatRowsChunk elements.
constexpr int flat_rows_unrolled_cols(int vec) { return (kFlatRowsUnrolledPacks + 1) * vec - 1; }
inline constexpr int kFlatRowsChunk = 8;
// interleaved_rows: a lane holds VEC neighbouring rows, a pack of
// kInterleavedPack elements where every tensor sits on packs (16 bytes of
// f32, 8 of 16-bit types: a lane's running state is per row, and lanes of
// eight 16-bit rows took 100-112 registers on sm_90, bench/NOTES.md v37),
// else single elements. A thread holds interleaved_vpt loads of its lane
// as they arrive (VPT; 0: two passes, kernels/families/interleaved_rows.cuh
// says how many loads in flight): 64 bytes of packs forward (48 of 16-bit
// types), 32 of each of two tensors backward, 8 single elements (4 of each
// tensor backward); blocks of at most 1024 threads (512 for packs, whose
// slots' partials take VEC times the shared memory), at most 64 registers
// a thread, fewer for some entries (kInterleavedRegisters,
// kernels/families/interleaved_rows.cuh), no spills (ptxas -v, sm_80 and
// sm_90).
// 16-bit forwards on packs also have 7 loads a thread (64 registers on
// sm_90, no spills; sm_80 spills, so they are built for NVIDIA sm_90 and
// later only; interleaved_vpt_wide), taken where a row then needs fewer
// slots: rows of 100 as 15 slots of a line-wide tile instead of 17 of half
// a line, rows of 21 as 3 full slots instead of 4. With the same slots, 6
// ran faster (bench/NOTES.md v66).
inline constexpr int kInterleavedPack = 4;
constexpr int interleaved_max_threads(int vec) { return vec == 1 ? 1024 : 512; }
constexpr int interleaved_vpt(DType dtype, int vec, bool backward) {
  if (vec == 1) return backward ? 4 : 8;
  if (dtype_size(dtype) == 2 && !backward) return 6;  // 8 spilled 4 bytes
  return (backward ? 32 : 64) / (dtype_size(dtype) * vec);
}
constexpr int interleaved_vpt_wide(DType dtype, int vec, bool backward) {
  return vec > 1 && dtype_size(dtype) == 2 && !backward ? 7 : 0;
}
// Whether an interleaved_rows entry is a wide one (built for sm_90+ only).
constexpr bool interleaved_is_wide(DType dtype, int vec, int vpt, bool backward) {
  return vpt > 0 && vpt == interleaved_vpt_wide(dtype, vec, backward);
}
// Whether an interleaved_rows entry is capped below its launch bounds'
// registers (kInterleavedRegisters says how far): the register entries on
// packs, every backward and the float32 forward. On NVIDIA the cap
// (__maxnreg__) replaces the launch bounds, so the device reports the most
// threads the cap allows.
constexpr bool interleaved_is_register_capped(DType dtype, int vec, int vpt, bool backward) {
  return vpt > 0 && vec > 1 && (backward || dtype_size(dtype) == 4);
}
// interleaved_smem: blocks of 512 threads holding a tile of packs of rows in
// shared memory, copied there by cp.async where the device has it (sm_80+).
inline constexpr int kInterleavedSmemThreads = 512;
// The most lanes an interleaved_smem or interleaved_cluster tile has (its
// planner's widest: a 128-byte line of rows, 16 lanes of 16-bit packs).
inline constexpr int kInterleavedLanesMax = 32;
// interleaved_stream: blocks of 512 threads, two an SM (64 registers a
// thread); a thread holds 64 bytes of packs of its lane forward (f32 4
// packs, 16-bit types 8), 32 bytes of each tensor backward, so a chunk is
// 32 KiB of x (twice that spilled 16-180 bytes, ptxas -v sm_90: the four
// rows' running pairs and the packs' addresses beside the packs). Its tiles
// are at most a 128-byte line (16 lanes of 16-bit packs).
inline constexpr int kInterleavedStreamThreads = 512;
inline constexpr int kInterleavedStreamLanesMax = 16;
constexpr int interleaved_stream_vpt(DType dtype, bool backward) {
  return (backward ? 32 : 64) / (dtype_size(dtype) * kInterleavedPack);
}
// interleaved_slabs: blocks of 512 threads, two an SM, both kernels; a
// tile is up to 256 lanes of packs (a 4 KiB line of f32 rows, 2 KiB of
// 16-bit ones) and a thread's loads are interleaved_stream's.
inline constexpr int kInterleavedSlabsThreads = 512;
inline constexpr int kInterleavedSlabsLanesMax = 256;
constexpr int interleaved_slabs_vpt(DType dtype, bool backward) { return interleaved_stream_vpt(dtype, backward); }
// interleaved_ring: blocks of 128 threads; a lane is a 16-byte pack of
// neighbouring rows (4 f32, 8 16-bit), a tile up to kInterleavedLanesMax
// lanes (a 512-byte line of rows), and a block's shared memory two buffers
// of its tile (an entry's vpt: its buffers), the f32 forward's also three.
// Fewer threads a block give each thread more of a tile against the fixed
// cost of its reduction; three buffers at half the line ran the f32
// forward faster than two at the whole line, the 16-bit forwards slower
// (bench/NOTES.md v85, v87).
inline constexpr int kInterleavedRingThreads = 128;
inline constexpr int kInterleavedRingBuffers = 2;
constexpr bool interleaved_ring_three_buffers(DType dtype, bool backward) { return dtype_size(dtype) == 4 && !backward; }
// The shortest rows it takes: a thread's share of a tile must outweigh the
// tile's reduction (rows of 16 and 21 ran slower, of 100 faster).
inline constexpr int kInterleavedRingMinCols = 64;
// Whether interleaved rows (SoftmaxCall::inner) sit on packs of `vec`
// elements (kInterleavedPack, or a 16-byte pack for interleaved_ring) in
// every tensor: pointers on a pack, inner rows, col strides and strides
// whole packs, so a lane reads a pack of neighbouring rows.
inline bool interleaved_on_packs(DType dtype, bool backward, std::int64_t rows, std::int64_t cols,
                                 std::int64_t inner, const void* x, std::int64_t x_stride,
                                 std::int64_t x_col_stride, const void* dy, std::int64_t dy_stride,
                                 std::int64_t dy_col_stride, const void* out, std::int64_t out_stride,
                                 std::int64_t out_col_stride, int vec = kInterleavedPack) {
  const int elem = dtype_size(dtype);
  const auto on = [&](const void* p, std::int64_t stride, std::int64_t col_stride) {
    return pack_phase(p, elem, vec) == 0 && (cols <= 1 || col_stride % vec == 0) && (rows <= 1 || stride % vec == 0);
  };
  return inner % vec == 0 && on(x, x_stride, x_col_stride) && on(out, out_stride, out_col_stride) &&
         (!backward || on(dy, dy_stride, dy_col_stride));
}

// What the vendor-free runtime knows of each family without its kernels:
// the name its kernels carry, how a compiler report's kernel name maps to
// a catalogue entry, its block limit, how its grid counts work, how it is
// launched and what it asks of the tensors' layout. A family is this row,
// its Strategy value and catalogue entries (for_each_variant), its kernel
// file in kernels/families/ (with its kFamilyKernels specialization) and
// the planner's rule for choosing it (docs/ARCHITECTURE.md).

// A kernel template argument after the storage type: the Variant field it
// sets, or a constant of the family.
enum class KernelParam : int { end = 0, vec, group, vpt, rows, backward, edges, constant };
// What one block of the grid takes.
enum class WorkUnit : int {
  row_tile,     // rows_per_block rows
  row,          // a row
  row_chunk,    // a chunk of a row (chunks_per_row a row)
  chunk_visit,  // one of a chunk's two visits (a work queue's item)
  inner_tile,   // a tile of an outer row's interleaved rows
};
// What the family's vector entries need of the tensors (the launch checks
// it): every tensor's rows congruent with x's, on packs unless the entry
// has edges; the same with rows back to back; or interleaved rows on packs
// (interleaved_on_packs).
enum class LayoutRule : int { rows, dense_rows, interleaved };
// Grids of at most 64 waves of resident blocks, so for the usual shapes one
// block a unit of work, and at most 16 for interleaved tiles (and the fused
// softmax reading a mask tensor), so that each block of a large tensor
// takes two or more units (grid_for, runtime/src/planner/planner.cpp, says
// why; bench/NOTES.md v6, v82, v83).
inline constexpr int kGridWaves = 64;
inline constexpr int kShortGridWaves = 16;

struct FamilyInfo {
  Strategy strategy;
  // Its kernels are kernels::<name>_kernel, or with two_kernels
  // <name>_partial_kernel and <name>_finalize_kernel.
  const char* name;
  bool two_kernels;
  std::array<KernelParam, 6> params;  // after the storage type, in order
  int max_threads;        // the block limit of its scalar entries (vec = 1)
  int max_threads_packs;  // and of its vector entries
  WorkUnit work;
  // The most waves of resident blocks its grid takes (the grid-stride loops
  // cover the rest): 1 for a work queue and for clusters that keep their
  // rows, kShortGridWaves for interleaved tiles, kGridWaves elsewhere
  // (grid_for, runtime/src/planner/planner.cpp, says why).
  int waves;
  bool cluster_launch;   // blocks launched as clusters of chunks_per_row
  bool zeroed_counters;  // a work queue's counters zeroed before each launch
  bool always_edges;     // every entry takes rows off the pack grid
  LayoutRule layout;
  // Launched cooperatively: its blocks wait on each other, so the vendor
  // must hold the whole grid (whole groups of chunks_per_row) at once.
  bool cooperative = false;
};

namespace family_params {
using P = KernelParam;
inline constexpr std::array<P, 6> kGroupRows{P::vec, P::group, P::vpt, P::rows, P::backward, P::edges};
inline constexpr std::array<P, 6> kPackVpt{P::vec, P::vpt, P::backward, P::edges};
inline constexpr std::array<P, 6> kPackVptForward{P::vec, P::vpt, P::edges};
inline constexpr std::array<P, 6> kPackVptNoEdges{P::vec, P::vpt, P::backward};
// interleaved_rows: the same, then the constant that picks its kernel's
// register bounds (kernels/families/interleaved_rows.cuh).
inline constexpr std::array<P, 6> kPackVptBounds{P::vec, P::vpt, P::backward, P::constant};
// flat_rows: the pack, its block (a constant), the direction, then the
// longest row with an instance of its own and the longest it takes
// (flat_rows_unrolled_cols and flat_rows_max_cols of the pack and the
// direction).
inline constexpr std::array<P, 6> kFlat{P::vec, P::constant, P::backward, P::constant, P::constant};
inline constexpr std::array<P, 6> kPackDirection{P::vec, P::backward};
}  // namespace family_params

// Indexed by Strategy.
inline constexpr std::array<FamilyInfo, 15> kFamilies{{
    {Strategy::group_rows, "group_rows", false, family_params::kGroupRows, kGroupRowsBlock, kGroupRowsBlock,
     WorkUnit::row_tile, kGridWaves, false, false, false, LayoutRule::rows},
    {Strategy::block_row, "block_row", false, family_params::kPackVpt, kBlockRowMaxThreads, kBlockRowMaxThreads,
     WorkUnit::row, kGridWaves, false, false, false, LayoutRule::rows},
    {Strategy::split_row, "split_row", true, family_params::kPackVptNoEdges, kSplitRowBlock, kSplitRowBlock,
     WorkUnit::row_chunk, kGridWaves, false, false, false, LayoutRule::rows},
    {Strategy::block_row_smem, "block_row_smem", false, family_params::kPackVpt, kBlockRowMaxThreads,
     kBlockRowMaxThreads, WorkUnit::row, kGridWaves, false, false, false, LayoutRule::rows},
    {Strategy::cluster_row, "cluster_row", false, family_params::kPackVptForward, kClusterRowMaxThreads,
     kClusterRowMaxThreads, WorkUnit::row_chunk, 1, true, false, false, LayoutRule::rows},
    {Strategy::split_stream, "split_stream", false, family_params::kPackVpt, kSplitStreamBlock, kSplitStreamBlock,
     WorkUnit::chunk_visit, 1, false, true, false, LayoutRule::rows},
    {Strategy::flat_rows, "flat_rows", false, family_params::kFlat, kFlatRowsBlock, kFlatRowsBlock,
     WorkUnit::row_tile, kGridWaves, false, false, true, LayoutRule::dense_rows},
    {Strategy::interleaved_rows, "interleaved_rows", false, family_params::kPackVptBounds,
     interleaved_max_threads(1), interleaved_max_threads(kInterleavedPack), WorkUnit::inner_tile, kShortGridWaves, false, false,
     false, LayoutRule::interleaved},
    {Strategy::cluster_row_smem, "cluster_row_smem", false, family_params::kPackVpt, kClusterRowSmemThreads,
     kClusterRowSmemThreads, WorkUnit::row_chunk, 1, true, false, false, LayoutRule::rows},
    {Strategy::interleaved_smem, "interleaved_smem", false, family_params::kPackDirection, kInterleavedSmemThreads,
     kInterleavedSmemThreads, WorkUnit::inner_tile, kShortGridWaves, false, false, false, LayoutRule::interleaved},
    {Strategy::interleaved_cluster, "interleaved_cluster", false, family_params::kPackDirection,
     kInterleavedSmemThreads, kInterleavedSmemThreads, WorkUnit::inner_tile, 1, true, false, false,
     LayoutRule::interleaved},
    {Strategy::grid_row, "grid_row", false, family_params::kPackVpt, kGridRowThreads, kGridRowThreads,
     WorkUnit::row_chunk, 1, false, true, false, LayoutRule::rows, true},
    {Strategy::interleaved_stream, "interleaved_stream", false, family_params::kPackVptNoEdges,
     kInterleavedStreamThreads, kInterleavedStreamThreads, WorkUnit::inner_tile, 1, false, true, false,
     LayoutRule::interleaved},
    {Strategy::interleaved_slabs, "interleaved_slabs", true, family_params::kPackVptNoEdges,
     kInterleavedSlabsThreads, kInterleavedSlabsThreads, WorkUnit::inner_tile, kGridWaves, false, true, false,
     LayoutRule::interleaved},
    {Strategy::interleaved_ring, "interleaved_ring", false, family_params::kPackVptNoEdges, kInterleavedRingThreads,
     kInterleavedRingThreads, WorkUnit::inner_tile, 1, false, false, false, LayoutRule::interleaved},
}};
static_assert([] {
  for (std::size_t i = 0; i < kFamilies.size(); ++i)
    if (kFamilies[i].strategy != static_cast<Strategy>(i)) return false;
  return true;
}(), "kFamilies is indexed by Strategy");

constexpr const FamilyInfo& family_of(Strategy s) { return kFamilies[static_cast<std::size_t>(s)]; }
// The most threads a block of entry v launches with: its __launch_bounds__.
constexpr int max_threads_per_block(const Variant& v) {
  const FamilyInfo& f = family_of(v.strategy);
  return v.vec > 1 ? f.max_threads_packs : f.max_threads;
}

// Calls f(variant) for every compiled variant, in a fixed order: dtype,
// direction, path, strategy. The catalogue and its size both come from here.
template <class F>
constexpr void for_each_variant(F&& f) {
  for (int d = 0; d < 3; ++d)
    for (int bwd = 0; bwd < 2; ++bwd)
      for (int v = 0; v < 3; ++v) {
        const DType dt = static_cast<DType>(d);
        const Path path = static_cast<Path>(v);
        const int vec = path == Path::scalar ? 1 : dtype_vec16(dt);
        const bool e = path == Path::vector_edges;
        const bool back = bwd != 0;
        for (const auto& g : kGroupShapes)
          if (!e || g[0] >= kEdgesMinGroup) f(Variant{Strategy::group_rows, dt, back, vec, g[0], g[1], g[2], e});
        if (bwd)
          for (int vpt : kBlockVptBackward) f(Variant{Strategy::block_row, dt, true, vec, 0, vpt, 1, e});
        else
          for (int vpt : kBlockVpt) f(Variant{Strategy::block_row, dt, false, vec, 0, vpt, 1, e});
        f(Variant{Strategy::block_row_smem, dt, back, vec, 0, block_row_smem_vpt(back), 1, e});
        if (!e) f(Variant{Strategy::split_row, dt, back, vec, 0, 4});
        f(Variant{Strategy::split_stream, dt, back, vec, 0, split_stream_vpt(back), 1, e});
        if (!bwd && path != Path::scalar)  // forward, 16-byte vectors
          f(Variant{Strategy::cluster_row, dt, false, vec, 0, kClusterRowVpt, 1, e});
        if (path != Path::scalar)  // 16-byte vectors
          for (Strategy held : {Strategy::cluster_row_smem, Strategy::grid_row})
            f(Variant{held, dt, back, vec, 0, cluster_row_smem_vpt(back), 1, e});
        if (e) f(Variant{Strategy::flat_rows, dt, back, vec, 0, 0, 1, true});
        if (path != Path::vector_edges) {
          const int lane = path == Path::scalar ? 1 : kInterleavedPack;
          const auto interleaved = [&](int vpt) {
            f(Variant{Strategy::interleaved_rows, dt, back, lane, 0, vpt, 1, false});
          };
          interleaved(interleaved_vpt(dt, lane, back));
          if (const int wide = interleaved_vpt_wide(dt, lane, back); wide > 0) interleaved(wide);
          interleaved(0);  // two passes
        }
        if (path == Path::vector) {  // packs of rows
          for (Strategy held : {Strategy::interleaved_smem, Strategy::interleaved_cluster})
            f(Variant{held, dt, back, kInterleavedPack, 0, 0, 1, false});
          f(Variant{Strategy::interleaved_stream, dt, back, kInterleavedPack, 0, interleaved_stream_vpt(dt, back), 1,
                    false});
          f(Variant{Strategy::interleaved_slabs, dt, back, kInterleavedPack, 0, interleaved_slabs_vpt(dt, back), 1,
                    false});
          for (int buffers : {kInterleavedRingBuffers, 3})  // 16-byte packs of rows
            if (buffers == kInterleavedRingBuffers || interleaved_ring_three_buffers(dt, back))
              f(Variant{Strategy::interleaved_ring, dt, back, vec, 0, buffers, 1, false});
        }
      }
}

constexpr int count_variants() {
  int n = 0;
  for_each_variant([&n](const Variant&) { ++n; });
  return n;
}
inline constexpr int kVariantCount = count_variants();

constexpr std::array<Variant, kVariantCount> make_catalogue() {
  std::array<Variant, kVariantCount> out{};
  int i = 0;
  for_each_variant([&](const Variant& v) { out[i++] = v; });
  return out;
}
inline constexpr std::array<Variant, kVariantCount> kCatalogue = make_catalogue();

// Whether some catalogue entry of family `s` satisfies pred.
template <class Pred>
constexpr bool any_entry(Strategy s, Pred pred) {
  for (const Variant& v : kCatalogue)
    if (v.strategy == s && pred(v)) return true;
  return false;
}

constexpr int find_variant(const Variant& want) {
  for (int i = 0; i < kVariantCount; ++i) {
    const Variant& v = kCatalogue[i];
    if (v.strategy == want.strategy && v.dtype == want.dtype && v.backward == want.backward &&
        v.vec == want.vec && v.group == want.group && v.vpt == want.vpt && v.rows == want.rows &&
        v.edges == want.edges)
      return i;
  }
  return -1;
}

DUET_API std::string to_string(DType d);
DUET_API std::string to_string(Strategy s);
DUET_API std::string variant_name(const Variant& v);  // "group_rows<f32,vec4,g32,v2,r2>", "...,edges>"

}  // namespace duet
