// strip_copy: what DRAM gives a read-once softmax over dim 0 of a tall
// [M, 1024] float32 matrix, whose column groups the whole GPU holds on chip
// one at a time (bench/NOTES.md v76). A copy of the matrix as column strips
// of w bytes: g groups of G = 2 x SMs / g blocks (512 threads, two an SM),
// group j walking strips j, j + g, ...; a block reads its share of a strip's
// rows into shared memory, then (with the barrier) waits until every block
// of its group has, as a softmax's exchange of pairs would make it, then
// writes. No arithmetic: the ceiling of that access pattern, as a ratio to
// the faster of cudaMemcpyAsync and a vector copy kernel of the same bytes.
// Build and run on an NVIDIA GPU (sm_80+):
//   nvcc -std=c++17 -O2 -arch=sm_90 -o strip_copy bench/strip_copy.cu && ./strip_copy [M]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(x)                                                                     \
  do {                                                                                    \
    const cudaError_t e = (x);                                                            \
    if (e != cudaSuccess) {                                                               \
      std::printf("%s failed at line %d: %s\n", #x, __LINE__, cudaGetErrorString(e));     \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

constexpr int kThreads = 512;
constexpr long kCols = 1024;
constexpr int kMaxSmem = 110 * 1024;  // two blocks an SM

__global__ void __launch_bounds__(kThreads, 2) strip_copy(const float4* in, float4* out, long rows, int lanes, int G,
                                                           int barrier, unsigned* arrived) {
  extern __shared__ float4 held[];
  const int slots = kThreads / lanes, lane = threadIdx.x % lanes, slot = threadIdx.x / lanes;
  const int groups = gridDim.x / G, group = blockIdx.x / G, rank = blockIdx.x % G;
  const long row_vecs = kCols / 4, strips = row_vecs / lanes;
  const long share = (rows + G - 1) / G, r0 = rank * share, r1 = r0 + share < rows ? r0 + share : rows;
  unsigned expected = 0;
  for (long s = group; s < strips; s += groups) {
    int k = 0;
    for (long r = r0 + slot; r < r1; r += slots, ++k) held[k * kThreads + threadIdx.x] = in[r * row_vecs + s * lanes + lane];
    if (barrier) {
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(arrived + group, 1u);
        expected += G;
        while (*static_cast<volatile unsigned*>(arrived + group) < expected) {
        }
        __threadfence();
      }
      __syncthreads();
    }
    k = 0;
    for (long r = r0 + slot; r < r1; r += slots, ++k) out[r * row_vecs + s * lanes + lane] = held[k * kThreads + threadIdx.x];
  }
}

__global__ void vector_copy(const float4* in, float4* out, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) out[i] = in[i];
}

int main(int argc, char** argv) {
  const long rows = argc > 1 ? std::atol(argv[1]) : 65536;
  const long n = rows * kCols / 4;  // float4s
  float4 *in, *out;
  unsigned* arrived;
  CHECK_CUDA(cudaMalloc(&in, n * 16));
  CHECK_CUDA(cudaMalloc(&out, n * 16));
  CHECK_CUDA(cudaMalloc(&arrived, 4096));
  CHECK_CUDA(cudaMemset(in, 0, n * 16));
  CHECK_CUDA(cudaFuncSetAttribute(strip_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  // The fastest of 6 timed runs after 2 warm-ups, in ms.
  const auto fastest = [&](auto launch) {
    float best = 1e30f;
    for (int i = 0; i < 8; ++i) {
      CHECK_CUDA(cudaEventRecord(start));
      launch();
      CHECK_CUDA(cudaEventRecord(stop));
      CHECK_CUDA(cudaEventSynchronize(stop));
      CHECK_CUDA(cudaGetLastError());
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      if (i >= 2 && ms < best) best = ms;
    }
    return best;
  };
  const float kernel = fastest([&] { vector_copy<<<sms * 8, 256>>>(in, out, n); });
  const float memcpy = fastest([&] { CHECK_CUDA(cudaMemcpyAsync(out, in, n * 16, cudaMemcpyDeviceToDevice)); });
  const float copy = kernel < memcpy ? kernel : memcpy;
  std::printf("%s, %d SMs; [%ld, %ld] float32 (%ld MB); copy %.1f us (%.0f GB/s, read + write)\n", prop.name, sms, rows,
              kCols, n * 16 >> 20, copy * 1e3, 2.0 * n * 16 / copy / 1e6);
  const int resident = 2 * sms;
  for (int strip_bytes : {64, 128, 256, 512})
    for (int groups : {1, 2, 3, 6, 12})
      for (int barrier : {0, 1}) {
        const int lanes = strip_bytes / 16, slots = kThreads / lanes, G = resident / groups;
        const long share = (rows + G - 1) / G, held = (share + slots - 1) / slots * kThreads * 16;
        if (held > kMaxSmem) continue;  // the group does not hold a strip
        const float t = fastest([&] {
          CHECK_CUDA(cudaMemsetAsync(arrived, 0, 4096));
          strip_copy<<<G * groups, kThreads, held>>>(in, out, rows, lanes, G, barrier, arrived);
        });
        std::printf("strip %4d B, %2d groups of %3d blocks, %s: %.1f us, %.3f of copy\n", strip_bytes, groups, G,
                    barrier ? "a barrier a strip" : "no barrier       ", t * 1e3, copy / t);
      }
  return 0;
}
