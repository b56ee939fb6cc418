// The launch planner: from a device's properties, a shape, and the compiled
// kernels' attributes, pick the kernel variant and the persistent grid.
//
// Strategy by row length (vectors of 16 bytes per row, nv):
//   short, off the pack grid  flat_rows: rows back to back move as one run
//                             of packs through shared memory, a thread a row
//   nv <= 256                 group_rows: 1..32 threads a row, in registers
//   fits one block on chip    block_row: registers, then shared memory
//   fits a cluster's registers cluster_row (sm_90+, forward): 2..16 blocks a
//                             row, each slice in registers; before
//                             block_row_smem and split_row
//   fits a cluster on chip    cluster_row_smem (sm_90+, f32; 16-bit with
//                             DUET_CLUSTER=prefer): 2..16 blocks a row,
//                             each slice in registers and shared memory,
//                             one block an SM; forward past cluster_row,
//                             backward past block_row_smem
//   fits the GPU on chip      grid_row (sm_80+, f32): cluster_row_smem's
//                             rows over G blocks of one grid, the pairs
//                             through global memory, G up to every SM
//   wider                     split_stream: chunks, online (max, sum), two
//                             passes in one launch, the second reading
//                             from L2 (split_row: the same in two kernels,
//                             DUET_STRATEGY=split_row)
// Blocks per SM come from the exact occupancy model; the grid is up to 64
// waves of SMs x blocks per SM (16 for interleaved tiles, one for work
// queues and clusters: FamilyInfo::waves), capped by the work and by the
// vendor's grid limit (CUDA: 2^31 - 1 blocks; HIP: also 2^32 - 1 threads).
// The kernels walk rows with grid-stride loops, so the Triton tutorial's
// persistent grid (one wave, DUET_PERSISTENT=1) runs too; it measured ~10%
// slower (bench/NOTES.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "duet/export.h"
#include "duet/device_props.hpp"
#include "duet/occupancy.hpp"
#include "softmax_args.hpp"
#include "softmax_variants.hpp"

namespace duet {

// The planner's switches, for comparison runs and for devices where a
// default does not suit. Every field has an environment variable, read once
// per process by plan_options_from_environment(); duet::set_plan_options
// (duet/softmax.hpp) sets them from code.
//
// | variable | field | effect |
// |---|---|---|
// | DUET_CLUSTER=0 | allow_clusters = false | no thread-block clusters |
// | DUET_CLUSTER=portable | max_cluster_blocks = 8 | clusters of at most the portable 8 blocks |
// | DUET_CLUSTER=prefer | prefer_clusters = true | clusters also where one block_row holds a row once an SM, cluster_row_smem for 16-bit rows, interleaved_cluster where one block holds the tile once an SM, and the fused cluster_row wherever its stream_row would run |
// | DUET_CLUSTER_BLOCKS=n | min_cluster_blocks = n | clusters of at least n blocks (2, 4, 8, 16); the fused cluster_row's from n (by default from 8) |
// | DUET_STRATEGY=split_row | force_split = true | split_row wherever group_rows does not fit |
// | DUET_STRATEGY=split_stream | force_stream = true | split_stream wherever group_rows does not fit; the fused operations' stream_row wherever their group_rows does not |
// | DUET_STRATEGY=grid_row | force_grid_row = true | grid_row wherever group_rows does not fit and it holds the row (16-bit rows too) |
// | DUET_GRID_ROW=0 | allow_grid_row = false | no grid_row (float32 rows past a cluster on chip take split_stream) |
// | DUET_GRID_BLOCKS=n | grid_row_blocks = n | grid_row's rows over at least n blocks each (up to the SMs), then as many more as fill the SMs |
// | DUET_STREAM_SLACK=n | stream_slack = n | split_stream's second pass n items further behind than a row's chunks |
// | DUET_BLOCK_VPT=n | block_vpt = n | block_row at n vectors a thread (1, 2, 4, 8) where that holds the row |
// | DUET_PERSISTENT=1 | persistent = true | grids of one wave (the Triton tutorial's) |
// | DUET_WAVES=n | max_waves = n | grids of at most n waves, where a family's grid is not one wave |
// | DUET_FUSED_STASH=0 | fused_stash = off | the fused stream_row re-reads every chunk of a row from L2 |
// | DUET_FUSED_STASH=always | fused_stash = always | the fused stream_row's stash also where it is filled through registers and L2 holds the rows between their passes |
// | DUET_FUSED_AHEAD=0 | fused_ahead = false | the fused block_row where one block an SM holds a row, no next row copied ahead (no block_row_ahead) |
// | DUET_FUSED_AHEAD=always | force_fused_ahead = true | block_row_ahead also where the cross-entropy writes its gradient |
// | DUET_INTERLEAVED_STASH=0 | interleaved_stash = off | interleaved rows past registers in two passes, the second from L2 (no interleaved_smem) |
// | DUET_INTERLEAVED_STASH=always | interleaved_stash = always | interleaved_smem also for rows registers hold |
// | DUET_INTERLEAVED_STREAM=0 | allow_interleaved_stream = false | interleaved rows past a tile on chip in two passes of one block a tile (no interleaved_stream) |
// | DUET_INTERLEAVED_RING=0 | allow_interleaved_ring = false | interleaved rows by the other interleaved families (no interleaved_ring) |
// | DUET_INTERLEAVED_RING=always | force_interleaved_ring = true | interleaved_ring also for the float32 backward |
// | DUET_INTERLEAVED_SLABS=0 | allow_interleaved_slabs = false | no interleaved_slabs (interleaved_stream wherever the L2 does not hold its columns between passes) |
// | DUET_INTERLEAVED_SLABS=always | force_interleaved_slabs = true | interleaved_slabs wherever interleaved_stream would run, also where the L2 holds its columns |
// | DUET_STREAM_TILES=n | interleaved_stream_tiles = n | interleaved_stream's chunks of n neighbouring tiles alternate in its queue |
// | DUET_INTERLEAVED_TILE=n | interleaved_tile_bytes = n | interleaved tiles in registers or shared memory n bytes of rows wide (16 .. 512, powers of two; at most 32 lanes) where that fits |
// Where interleaved rows keep their tile in shared memory (interleaved_smem,
// interleaved_cluster) instead of registers or two passes.
enum class InterleavedStash {
  off,             // nowhere: rows past registers read twice
  past_registers,  // rows too long for registers, where the tile fits
  always,          // also rows registers hold (a comparison)
};

// Where the fused operations' stream_row keeps what fits of a row in shared
// memory between its passes (its stash).
enum class FusedStash {
  off,      // nowhere: pass 2 reads every chunk again from L2
  planned,  // where cp.async fills it, else where the rows between their
            // passes move more than L2 holds (duet/fused_planner.hpp)
  always,   // also a stash filled through registers where L2 holds them
            // (a comparison)
};

struct PlanOptions {
  // cluster_row may be planned where the device launches clusters (the
  // planner also drops them where the vendor says none of the shape fits).
  bool allow_clusters = true;
  // Also for rows one block_row holds at one block an SM, cluster_row_smem
  // for 16-bit rows (float32 only otherwise), and interleaved_cluster where
  // one block holds an interleaved tile at one block an SM.
  bool prefer_clusters = false;
  // cluster_row's blocks a cluster at least (2, 4, 8 or 16; 0: the
  // planner's choice).
  int min_cluster_blocks = 0;
  // cluster_row's blocks a cluster at most: 16 (the planner lowers it to
  // the portable 8 where the vendor says no cluster of 16 fits).
  int max_cluster_blocks = kMaxClusterBlocks;
  // split_row for every row past group_rows.
  bool force_split = false;
  // split_stream for every row past group_rows (the fused operations:
  // stream_row for every row past theirs).
  bool force_stream = false;
  // grid_row where the device has it, for float32 rows past a cluster on
  // chip.
  bool allow_grid_row = true;
  // grid_row for every row past group_rows that it holds, every dtype.
  bool force_grid_row = false;
  // grid_row's blocks a row at least (0: the planner's choice).
  int grid_row_blocks = 0;
  // split_stream's slack: how many items its second pass trails the first
  // by beyond a row's chunks (0: one per resident block).
  std::int64_t stream_slack = 0;
  // block_row's vectors a thread (0: the planner's choice of 4 or 8,
  // backward 2 or 4).
  int block_vpt = 0;
  // Grids of one wave of resident blocks instead of up to 64.
  bool persistent = false;
  // Grids of at most this many waves of resident blocks (0: each family's
  // own, FamilyInfo::waves); families of one wave keep it.
  int max_waves = 0;
  // Where the fused operations' stream_row keeps what fits of a row in
  // shared memory between its passes (duet/fused_planner.hpp).
  FusedStash fused_stash = FusedStash::planned;
  // block_row_ahead where the fused block_row holds a row at one block an
  // SM and writes nothing (the cross-entropy's loss alone); force: also
  // where it writes the gradient (duet/fused_planner.hpp).
  bool fused_ahead = true;
  bool force_fused_ahead = false;
  InterleavedStash interleaved_stash = InterleavedStash::past_registers;
  // interleaved_stream for interleaved rows on packs past a tile on chip
  // (else interleaved_rows' two passes, one block a tile).
  bool allow_interleaved_stream = true;
  // interleaved_ring for interleaved rows of 64 or more elements whose
  // line-wide tiles fit two buffers in half an SM's shared memory (forward,
  // and the 16-bit backward); force: the float32 backward too.
  bool allow_interleaved_ring = true;
  bool force_interleaved_ring = false;
  // interleaved_slabs for interleaved rows on packs past a tile on chip
  // whose tiles' columns the L2 does not hold between interleaved_stream's
  // passes; force: wherever interleaved_stream would run.
  bool allow_interleaved_slabs = true;
  bool force_interleaved_slabs = false;
  // interleaved_stream's neighbouring tiles whose chunks alternate in its
  // queue (0: the planner's choice).
  int interleaved_stream_tiles = 0;
  // The width in bytes of rows of interleaved_rows' register tiles and
  // interleaved_smem's tiles (16 .. 512; 0: the planner's choice).
  int interleaved_tile_bytes = 0;
};

// The options the environment asks for (the table above); throws
// duet::Error(invalid_argument) naming the variable for a malformed value.
DUET_API PlanOptions plan_options_from_environment();

struct SoftmaxShape {
  DType dtype = DType::f32;
  bool backward = false;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  // 16-byte accesses are possible: every tensor starts each row at the same
  // element offset within a 16-byte pack (pointers and row strides
  // congruent modulo the pack's elements). The library's calls set it from
  // their tensors.
  bool vector_ok = true;
  // vector_ok rows that do not all start on a pack boundary (a view at an
  // odd element, a row stride not a whole number of packs): the vector
  // kernels with edges serve them. A row length not a whole number of packs
  // needs them whatever this says.
  bool row_edges = false;
  // Every tensor's rows lie back to back (row stride = cols), as in a
  // contiguous tensor: flat_rows may serve short rows off the pack grid.
  // The library's calls set it from their tensors.
  bool dense_rows = true;
  // Interleaved rows (softmax over a non-last dimension): each of `rows`
  // outer rows holds `inner` rows of `cols` elements whose neighbours are
  // adjacent in memory (SoftmaxCall::inner). 0: rows of adjacent elements.
  std::int64_t inner = 0;
  // Switches for comparison runs: the process's (plan_options()) unless set.
  PlanOptions options{};
  // Interleaved rows on 16-byte packs in every tensor (interleaved_ring's
  // lanes: 4 f32 or 8 16-bit rows): pointers on 16 bytes, inner, col
  // strides and strides whole packs. Unless set, the planner assumes not;
  // the library's calls set it from their tensors.
  bool wide_packs = false;
};

struct Plan {
  int variant = -1;
  Variant kernel{};
  KernelAttributes attributes;          // of the main kernel
  LaunchShape launch;                   // threads and dynamic shared memory
  Occupancy exact;                      // chosen by this one
  Occupancy tutorial;                   // for comparison
  int rows_per_block = 1;               // group_rows packs several rows in a block; interleaved_rows: its tile
  std::int64_t inner_tiles = 0;         // interleaved_rows: tiles of rows_per_block rows an outer row
  int tiles_together = 1;               // interleaved_stream: neighbouring tiles whose chunks alternate
  std::int64_t resident_blocks = 0;     // SMs x exact blocks per SM
  std::int64_t max_grid = 0;            // the vendor's grid limit for this block size (blocks)
  LaunchGeometry geometry;              // main kernel
  LaunchGeometry finalize_geometry;     // split_row's second kernel
  int smem_vecs = 0;                    // block_row_smem, cluster_row_smem: vectors a thread keeps in shared memory
  int chunks_per_row = 0;               // split_row: chunks; cluster_row(_smem), grid_row: a row's blocks
  std::int64_t chunk_elems = 0;         // elements of a chunk (cluster_row(_smem), grid_row: of a block's slice)
  std::int64_t workspace_bytes = 0;     // split_row partials; split_stream, grid_row counters and partials
  std::int64_t stream_lag = 0;          // split_stream: items the second pass trails the first by
  bool persistent = false;              // grids of one wave (PlanOptions::persistent)
  int max_waves = 0;                    // grids of at most this many waves (PlanOptions::max_waves; 0: the family's)
  std::string why;                      // one line: why this strategy
  std::string fallback;                 // why not the first choice (no cluster fits the device), or empty
};

// Where kernel attributes come from: a live device (cudaFuncGetAttributes),
// or the compiler's report recorded at build time.
using AttributeSource = std::function<KernelAttributes(int variant, bool finalize)>;

// How many clusters of `cluster_blocks` blocks of a kernel, each block with
// `dynamic_smem` bytes, find room on the device at once: the vendor's answer
// on a live device (cudaOccupancyMaxActiveClusters; 0 where none fits).
using ClusterSource = std::function<int(int variant, int threads, int cluster_blocks, std::int64_t dynamic_smem)>;

// The plan a call launches. A plan of clusters (cluster_row,
// cluster_row_smem) has its waves sized by
// `clusters` where given (a live device), else by the occupancy model (a
// property file: as many clusters as its resident blocks make). Where no
// cluster fits, it plans clusters of at most the portable 8 blocks if it
// had more, then none. Throws duet::Error(invalid_argument) for a bad shape
// and duet::Error(unsupported) when nothing fits the device.
DUET_API Plan plan_softmax(const DeviceProps& dev, const SoftmaxShape& shape, const AttributeSource& attributes,
                           const ClusterSource& clusters = {});

// Whether `rows` rows are few for the device: one block a row would leave
// at least half its SMs idle. Where they are, a row that one block holds
// only once an SM is spread over a cluster's blocks (more SMs, each with a
// shorter share to load), as DUET_CLUSTER=prefer does for every row count.
// Plans are cached by this bit and lone_rows', not by the row count.
DUET_API bool few_rows(const DeviceProps& dev, std::int64_t rows);
// Fewer still: clusters of the most blocks would fill at most a quarter of
// the SMs (a row or two on an H100). Such rows take clusters of the most
// blocks the device allows.
DUET_API bool lone_rows(const DeviceProps& dev, std::int64_t rows);

// The part of a plan that depends on the row count: grid sizes and the
// workspace. grid_for computes it; set_grid stores it in the plan. Both throw
// duet::Error(invalid_argument) for more rows than one launch addresses
// (rows x chunks per row above 2^59).
struct Grid {
  LaunchGeometry main;
  LaunchGeometry finalize;  // split_row's second kernel
  std::int64_t workspace_bytes = 0;
};
DUET_API Grid grid_for(const Plan& plan, std::int64_t rows);
DUET_API void set_grid(Plan& plan, std::int64_t rows);

DUET_API std::int64_t ceil_div(std::int64_t a, std::int64_t b);

}  // namespace duet
