// How many thread-block clusters of each size fit an NVIDIA sm_90 device
// at once (cudaOccupancyMaxActiveClusters) for kernels with the fused
// cluster_row's resources: blocks of 512 threads, two an SM, 104 KiB of
// stash plus 1552 bytes of static shared memory; and blocks of 1024, one
// an SM, 224 KiB (NOTES v111). A cluster's blocks share a GPC, so the
// sizes that divide the GPCs' SMs badly leave SMs idle.
// nvcc -arch=sm_90 bench/experiments/cluster_fit_probe.cu -o probe && ./probe
#include <cstdio>
#include <cuda_runtime.h>
__global__ void __launch_bounds__(512, 2) k512(float* p) { extern __shared__ float s[]; if (p) p[threadIdx.x] = s[threadIdx.x]; }
__global__ void __launch_bounds__(1024, 1) k1024(float* p) { extern __shared__ float s[]; if (p) p[threadIdx.x] = s[threadIdx.x]; }
template <class F>
void q(const char* name, F fn, int threads, int smem, int cluster) {
  cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (cluster > 8) cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaLaunchConfig_t c{};
  c.gridDim = dim3(cluster); c.blockDim = dim3(threads); c.dynamicSmemBytes = smem;
  cudaLaunchAttribute a; a.id = cudaLaunchAttributeClusterDimension; a.val.clusterDim.x = cluster; a.val.clusterDim.y = 1; a.val.clusterDim.z = 1;
  c.attrs = &a; c.numAttrs = 1;
  int n = -1; cudaError_t e = cudaOccupancyMaxActiveClusters(&n, (void*)fn, &c);
  printf("%s threads %d smem %d cluster %2d: %d clusters (%d blocks) %s\n", name, threads, smem, cluster, n, n * cluster, cudaGetErrorString(e));
}
int main() {
  for (int g : {2, 4, 6, 8, 10, 12, 14, 16}) q("k512", k512, 512, 106496 + 1552, g);
  for (int g : {2, 4, 8, 12, 16}) q("k1024", k1024, 1024, 229376 + 1552, g);
}
