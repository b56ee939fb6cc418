// Arguments of every softmax kernel: plain data, passed by value.
#pragma once

#include <cstdint>

#include "host_device.hpp"

namespace duet {

struct SoftmaxArgs {
  const void* x;        // forward: input; backward: y, the forward output
  const void* dy;       // backward: the upstream gradient; forward: unused
  void* out;            // forward: y; backward: dx
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t x_stride;   // in elements
  std::int64_t dy_stride;
  std::int64_t out_stride;
  int log;              // 0: softmax, 1: log_softmax
  union {
    // block_row_smem and cluster_row_smem: vectors per thread kept in
    // dynamic shared memory
    int smem_vecs;
    // interleaved_stream: neighbouring tiles whose chunks alternate in its
    // queue
    int tiles_together;
  };
  // split_row and cluster_row: a row is cut in chunks_per_row chunks of
  // chunk_elems (cluster_row: one per block of a cluster, chunks_per_row =
  // the cluster size); interleaved_stream: a tile's column in chunks_per_row;
  // interleaved_slabs: a tile's column in chunks_per_row slabs
  int chunks_per_row;
  // interleaved_rows: lanes a block (each kernel's rows a lane in its vec)
  int tile;
  // One family's fields or another's, never both: the struct stays as
  // small as before interleaved_rows, whose fields grew it by 40 bytes and
  // made split_stream and cluster_row spill on sm_80 and sm_90 (ptxas -v;
  // 8 bytes more with interleaved_stream's workspace did too).
  union {
    struct {
      std::int64_t chunk_elems;
      // split_row's partials hold one (max, sum) pair of floats per (row,
      // chunk); split_stream: the work queue's counters (a 64-bit ticket
      // counter, then one count of finished chunks per row; zeroed before
      // each launch) and how many work items the second pass trails the
      // first by; grid_row: its groups' arrival counts (zeroed before each
      // launch) and pairs
      float* partials;
      unsigned* counters;
      std::int64_t lag;
    };
    struct {
      // interleaved_rows: each of `rows` outer rows holds `inner` rows
      // whose neighbours are adjacent; element c of row (r, i) is at r *
      // stride + c * col_stride + i.
      std::int64_t inner;
      std::int64_t x_col_stride;
      std::int64_t dy_col_stride;
      std::int64_t out_col_stride;
      // interleaved_stream and interleaved_slabs: their counters and pairs
      // (interleaved_stream_* and interleaved_slabs_* below; the counters
      // zeroed before each launch)
      void* workspace;
    };
  };
};

// split_stream's workspace: the counters (a 64-bit ticket counter, then a
// 32-bit count per row), then the partials at the next 16-byte boundary (a
// pair per chunk, then a pair per row: the row's result).
constexpr std::int64_t split_stream_counter_bytes(std::int64_t rows) { return (2 + rows) * 4; }
constexpr std::int64_t split_stream_partials_offset(std::int64_t rows) {
  return (split_stream_counter_bytes(rows) + 15) / 16 * 16;
}

// interleaved_stream's workspace: the counters (a 64-bit ticket counter,
// then a 32-bit count per group: a tile of an outer row), then at the next
// 16-byte boundary a (max, sum) pair of floats per work item and row of its
// tile, then a pair per group and row (the rows' results).
DUET_HOST_DEVICE constexpr std::int64_t interleaved_stream_counter_bytes(std::int64_t groups) { return (2 + groups) * 4; }
DUET_HOST_DEVICE constexpr std::int64_t interleaved_stream_partials_offset(std::int64_t groups) {
  return (interleaved_stream_counter_bytes(groups) + 15) / 16 * 16;
}
constexpr std::int64_t interleaved_stream_workspace_bytes(std::int64_t groups, std::int64_t chunks,
                                                          std::int64_t tile_rows) {
  return interleaved_stream_partials_offset(groups) + groups * (chunks + 1) * tile_rows * 8;
}

// interleaved_slabs: the planner sizes a group's (a tile of an outer row's)
// slabs at slab_length positions of its column of `cols`, whole slots, and
// plans ceil(cols / slab_length) of them; the kernels deal the column's
// steps to that many slabs in turn (interleaved_slabs.cuh).
DUET_HOST_DEVICE constexpr std::int64_t interleaved_slab_length(std::int64_t cols, std::int64_t slabs, int slots) {
  return ((cols + slabs * slots - 1) / (slabs * slots)) * slots;
}
// Its slabs meet in bundles of kInterleavedSlabBundle, the last of each
// bundle to finish folding the bundle's pairs.
inline constexpr int kInterleavedSlabBundle = 16;
DUET_HOST_DEVICE constexpr std::int64_t interleaved_slab_bundles(std::int64_t slabs) {
  return (slabs + kInterleavedSlabBundle - 1) / kInterleavedSlabBundle;
}
// Its workspace: per group, a 32-bit count of finished slabs for each
// bundle and one of finished bundles (zeroed before each launch); then at
// the next 16-byte boundary a (max, sum) pair of floats per (group, slab)
// and row of its tile, a pair per (group, bundle) and row, and a pair per
// group and row (the rows' results).
DUET_HOST_DEVICE constexpr std::int64_t interleaved_slabs_counter_bytes(std::int64_t groups, std::int64_t slabs) {
  return groups * (interleaved_slab_bundles(slabs) + 1) * 4;
}
DUET_HOST_DEVICE constexpr std::int64_t interleaved_slabs_pairs_offset(std::int64_t groups, std::int64_t slabs) {
  return (interleaved_slabs_counter_bytes(groups, slabs) + 15) / 16 * 16;
}
constexpr std::int64_t interleaved_slabs_workspace_bytes(std::int64_t groups, std::int64_t slabs,
                                                         std::int64_t tile_rows) {
  return interleaved_slabs_pairs_offset(groups, slabs) +
         groups * (slabs + interleaved_slab_bundles(slabs) + 1) * tile_rows * 8;
}

// grid_row's workspace: a 32-bit arrival count per group of blocks, then
// at the next 16-byte boundary two buffers of a 64-bit pair per block of
// each group.
constexpr std::int64_t grid_row_counter_bytes(std::int64_t groups) { return (groups * 4 + 15) / 16 * 16; }
constexpr std::int64_t grid_row_workspace_bytes(std::int64_t groups, std::int64_t blocks) {
  return grid_row_counter_bytes(groups) + groups * 2 * blocks * 8;
}

struct LaunchGeometry {
  std::int64_t grid = 0;
  int block = 0;
  std::int64_t dynamic_smem = 0;
};

}  // namespace duet
