// duet's own device-to-device copy kernel: the other half of duet-bench's
// copy ceiling, beside the vendor's cudaMemcpyAsync / hipMemcpyAsync (the
// ceiling is the faster of the two, measured in the same run). Compiled
// once per vendor (nvcc, hipcc), into namespace duet::DUET_NS; kept out of
// softmax_launch.cu so that the softmax kernels' machine code and resource
// reports do not change with it.
//
// The copy: a one-wave grid (the blocks the device holds at once) walks the
// data with a grid stride; each thread keeps kCopyUnroll wide loads in
// flight before it stores them, a whole block's loads adjacent (coalesced).
// The access width is the widest both pointers can share: 16 bytes when
// their addresses differ by a multiple of 16 (the usual case, whatever the
// offset), else 8, 4, 2 or 1. The bytes before the first aligned unit of
// the destination and after the last (fewer than the width each) are copied
// one byte a thread.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "gpu_check.hpp"
#include "backend_api.hpp"

namespace duet::DUET_NS {
namespace kernels {

// 256 threads: whole warps of 32 and whole wavefronts of 64.
constexpr int kCopyThreads = 256;
// Wide loads each thread has in flight: 4 x 16 bytes.
constexpr int kCopyUnroll = 4;

// dst[0, head) and the tail after head + units * sizeof(Unit) bytes one byte
// a thread; the units between as Unit (dst + head is aligned to Unit, and so
// is src + head: the caller picked Unit so). No overlap (__restrict__).
template <class Unit>
__global__ void __launch_bounds__(kCopyThreads) copy_kernel(char* __restrict__ dst, const char* __restrict__ src,
                                                            std::size_t head, std::size_t units, std::size_t tail) {
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  if (tid < head) dst[tid] = src[tid];
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst + head);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src + head);
  std::size_t i = tid;
  for (; i + (kCopyUnroll - 1) * stride < units; i += kCopyUnroll * stride) {
    Unit v[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) v[u] = s[i + u * stride];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) d[i + u * stride] = v[u];
  }
  for (; i < units; i += stride) d[i] = s[i];
  const std::size_t done = head + units * sizeof(Unit);
  if (tid < tail) dst[done + tid] = src[done + tid];
}

}  // namespace kernels

namespace {

// Blocks of one instance the device holds at once (SMs x resident blocks),
// asked once per device and width.
int wave_blocks(int ordinal, const void* fn, int width) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, int> cache;
  std::lock_guard<std::mutex> lock(mutex);
  int& blocks = cache[{ordinal, width}];
  if (blocks == 0) {
    int sms = 0, per_sm = 0;
    DUET_GPU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal));
    DUET_GPU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kernels::kCopyThreads, 0));
    blocks = std::max(1, sms) * std::max(1, per_sm);
  }
  return blocks;
}

template <class Unit>
void launch_copy(int ordinal, char* dst, const char* src, std::size_t bytes, cudaStream_t stream) {
  constexpr std::size_t width = sizeof(Unit);
  const auto fn = &kernels::copy_kernel<Unit>;
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(dst) % width;
  const std::size_t head = std::min(bytes, misaligned == 0 ? 0 : width - misaligned);
  const std::size_t units = (bytes - head) / width;
  const std::size_t tail = (bytes - head) % width;
  constexpr std::size_t per_block = std::size_t(kernels::kCopyThreads) * kernels::kCopyUnroll;
  const std::size_t wanted = std::max<std::size_t>(1, (units + per_block - 1) / per_block);
  const auto wave = static_cast<std::size_t>(wave_blocks(ordinal, reinterpret_cast<const void*>(fn), int(width)));
  const dim3 grid(static_cast<unsigned>(std::min(wanted, wave))), block(kernels::kCopyThreads);
  fn<<<grid, block, 0, stream>>>(dst, src, head, units, tail);
  DUET_GPU_CHECK(cudaGetLastError());
}

}  // namespace

void copy_kernel(int ordinal, void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return;
  DeviceGuard guard(ordinal);
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const auto s_stream = static_cast<cudaStream_t>(stream);
  // The lowest address bit in which the pointers differ bounds the width
  // both can be aligned to at once.
  const std::uintptr_t apart = (reinterpret_cast<std::uintptr_t>(d) ^ reinterpret_cast<std::uintptr_t>(s)) & 15;
  const std::uintptr_t width = apart == 0 ? 16 : apart & (~apart + 1);
  switch (width) {
    case 16: return launch_copy<DUET_RAW16>(ordinal, d, s, bytes, s_stream);
    case 8: return launch_copy<unsigned long long>(ordinal, d, s, bytes, s_stream);
    case 4: return launch_copy<unsigned int>(ordinal, d, s, bytes, s_stream);
    case 2: return launch_copy<unsigned short>(ordinal, d, s, bytes, s_stream);
    default: return launch_copy<unsigned char>(ordinal, d, s, bytes, s_stream);
  }
}

}  // namespace duet::DUET_NS
