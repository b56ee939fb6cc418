// The vendor property struct, built by hand, maps onto DeviceProps (H200
// values as cudaGetDeviceProperties reports them).
#include <doctest/doctest.h>

#include <cstring>

#include "gpu_props.hpp"

using namespace duet;

TEST_CASE("cudaDeviceProp of an H200 maps onto DeviceProps") {
  cudaDeviceProp p{};
  std::strcpy(p.name, "NVIDIA H200");
  p.major = 9;
  p.minor = 0;
  p.multiProcessorCount = 132;
  p.warpSize = 32;
  p.regsPerBlock = 65536;
  p.regsPerMultiprocessor = 65536;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsPerMultiProcessor = 2048;
  p.maxBlocksPerMultiProcessor = 32;
  p.sharedMemPerBlock = 49152;
  p.sharedMemPerMultiprocessor = 233472;
  p.sharedMemPerBlockOptin = 232448;
  p.reservedSharedMemPerBlock = 1024;
  p.l2CacheSize = 62914560;
  p.totalGlobalMem = 150109880320ull;
  p.memoryBusWidth = 6016;
  DUET_NS::DeviceAttributeValues a;
  a.memory_clock_khz = 3201000;
  const DeviceProps d = DUET_NS::map_device_props(p, a, 0, 13000, 13000);
  CHECK(d.vendor == Vendor::nvidia);
  CHECK(d.backend == BackendKind::cuda);
  CHECK(d.arch == "sm_90");
  CHECK(d.family == "Hopper");
  CHECK(d.sm_count == 132);
  CHECK(d.regs_per_sm == 65536);
  CHECK(d.smem_per_sm == 233472);
  CHECK(d.smem_per_block_optin == 232448);
  CHECK(d.smem_reserved_per_block == 1024);
  CHECK(d.max_blocks_per_sm == 32);
  CHECK(d.l2_bytes == 62914560);
  // 2 x 3.201 GHz x 752 bytes = 4814 GB/s, the H200 datasheet's 4.8 TB/s.
  CHECK(d.peak_bandwidth_gbps() == doctest::Approx(4814.3).epsilon(0.001));
  CHECK(d.driver_version == 13000);
}
