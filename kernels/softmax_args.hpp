// Arguments of every softmax kernel: plain data, passed by value.
#pragma once

#include <cstdint>

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
  // block_row: vectors per thread kept in dynamic shared memory
  int smem_vecs;
  // split_row and cluster_row: a row is cut in chunks_per_row chunks of
  // chunk_elems (cluster_row: one per block of a cluster, chunks_per_row =
  // the cluster size); split_row's partials hold one (max, sum) pair of
  // floats per (row, chunk)
  int chunks_per_row;
  std::int64_t chunk_elems;
  float* partials;
};

struct LaunchGeometry {
  std::int64_t grid = 0;
  int block = 0;
  std::int64_t dynamic_smem = 0;
};

}  // namespace duet
