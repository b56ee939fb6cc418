// Does compute-sanitizer's synccheck fail any kernel with clusters of 16
// blocks, or only duet's cluster_row? (bench/NOTES.md, v21 and v23.)
//
// One kernel, none of duet's kernels: each block of a 1-D cluster contributes a value
// a "row", every block gathers all of them, and block 0 thread 0 writes
// their sum, checked on the host. Two ways to exchange:
//   mode 0 (as cluster_row): st.async of 8 bytes into every peer's shared
//          memory, counted on the peer's mbarrier; wait with try_wait
//          (acquire at cluster scope); buffers alternate by row.
//   mode 1: plain distributed-shared-memory stores and cluster.sync()
//          twice a row (no mbarrier, no st.async);
//   mode 2: no exchange at all: each block adds the values up itself, with
//          cluster.sync() once a row (the cluster barrier alone).
// Mode 0 uses duet's own PTX helpers (backends/vendor/hopper_ptx.h), so it
// exchanges exactly as cluster_row does.
// Run natively and under each tool, for clusters of 8 and 16 and blocks of
// 128..512 threads:
//   nvcc -O2 -arch=sm_90 -Ibackends/vendor -o repro bench/experiments/synccheck_cluster_repro.cu
//   compute-sanitizer --tool synccheck ./repro MODE CLUSTER THREADS
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "hopper_ptx.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

#define CHECK(call)                                                                             \
  do {                                                                                          \
    const cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s failed: %s (%s)\n", #call, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
      std::exit(2);                                                                             \
    }                                                                                           \
  } while (0)

constexpr int kMaxBlocks = 16;

struct Pairs {
  float2 v[2][kMaxBlocks];
  unsigned long long arrived[2];
};

__global__ void exchange(float* out, int rows, int mode) {
#if DUET_DEVICE_CLUSTERS
  __shared__ Pairs cp;
  __shared__ float plain[kMaxBlocks];
  const cg::cluster_group cluster = cg::this_cluster();
  const int blocks = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int tid = threadIdx.x;
  if (tid == 0) {
    duet_mbarrier_init(&cp.arrived[0], 1);
    duet_mbarrier_init(&cp.arrived[1], 1);
    duet_mbarrier_init_fence();
  }
  cluster.sync();
  unsigned phases = 0;
  int parity = 0;
  const int clusters = gridDim.x / blocks;
  for (int row = blockIdx.x / blocks; row < rows; row += clusters, parity ^= 1) {
    const float mine = float(row * kMaxBlocks + rank);
    __syncthreads();  // as a block reduction would
    float total = 0.0f;
    if (mode == 0) {
      if (tid == 0) duet_mbarrier_expect(&cp.arrived[parity], unsigned(blocks * sizeof(float2)));
      if (tid < blocks) duet_store_async(&cp.v[parity][rank], make_float2(mine, 1.0f), &cp.arrived[parity], tid);
      while (!duet_mbarrier_try_wait_cluster(&cp.arrived[parity], (phases >> parity) & 1u)) {
      }
      phases ^= 1u << parity;
      for (int b = 0; b < blocks; ++b) total += cp.v[parity][b].x;
    } else if (mode == 2) {
      for (int b = 0; b < blocks; ++b) total += float(row * kMaxBlocks + b);
      cluster.sync();
    } else {
      if (tid < blocks) cluster.map_shared_rank(plain, tid)[rank] = mine;
      cluster.sync();
      for (int b = 0; b < blocks; ++b) total += plain[b];
      cluster.sync();  // nobody overwrites plain[] before every block read it
    }
    if (rank == 0 && tid == 0) out[row] = total;
  }
  cluster.sync();  // no block leaves while a peer may still store into it
#else
  (void)out, (void)rows, (void)mode;
#endif  // DUET_DEVICE_CLUSTERS
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODE(0 st.async, 1 DSMEM + cluster.sync, 2 cluster.sync only) CLUSTER THREADS\n",
                 argv[0]);
    return 2;
  }
  const int mode = std::atoi(argv[1]), cluster = std::atoi(argv[2]), threads = std::atoi(argv[3]);
  const int rows = 1000;
  if (cluster > 8) CHECK(cudaFuncSetAttribute(exchange, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(threads);
  config.attrs = &attr;
  config.numAttrs = 1;
  int clusters = 0;
  config.gridDim = dim3(cluster);
  CHECK(cudaOccupancyMaxActiveClusters(&clusters, exchange, &config));
  if (clusters < 1) {
    std::printf("mode %d cluster %d threads %d: the device holds no such cluster\n", mode, cluster, threads);
    return 0;
  }
  config.gridDim = dim3(clusters * cluster);
  float* out = nullptr;
  CHECK(cudaMalloc(&out, rows * sizeof(float)));
  CHECK(cudaMemset(out, 0xff, rows * sizeof(float)));  // NaN until written
  CHECK(cudaLaunchKernelEx(&config, exchange, out, rows, mode));
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> got(rows);
  CHECK(cudaMemcpy(got.data(), out, rows * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int r = 0; r < rows; ++r) {
    const float want = float(cluster) * float(r * kMaxBlocks) + float(cluster * (cluster - 1) / 2);
    bad += got[r] != want;
  }
  std::printf("mode %d cluster %d threads %d: %d clusters resident, %d of %d rows wrong\n", mode, cluster, threads,
              clusters, bad, rows);
  CHECK(cudaFree(out));
  return bad == 0 ? 0 : 1;
}
