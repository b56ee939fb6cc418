// The vendor property struct, built by hand, maps onto DeviceProps (H200
// values as cudaGetDeviceProperties reports them).
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "gpu_check.hpp"
#include "gpu_props.hpp"

using namespace duet;

#if defined(DUET_VENDOR_HIP)
namespace {
// An MI300X as hipGetDeviceProperties (ROCm 5.2's struct) reports it.
hipDeviceProp_t mi300x() {
  hipDeviceProp_t p{};
  std::strcpy(p.name, "AMD Instinct MI300X");
  std::strcpy(p.gcnArchName, "gfx942:sramecc+:xnack-");
  p.major = 9;
  p.minor = 4;
  p.multiProcessorCount = 304;
  p.warpSize = 64;
  p.regsPerBlock = 65536;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsPerMultiProcessor = 2048;
  p.sharedMemPerBlock = 65536;
  p.maxSharedMemoryPerMultiProcessor = 65536;
  p.l2CacheSize = 4194304;
  p.totalGlobalMem = 206141652992ull;
  p.memoryBusWidth = 8192;
  p.cooperativeLaunch = 1;
  return p;
}
}  // namespace

TEST_CASE("hipDeviceProp_t of an MI300X maps onto DeviceProps (ROCm 7 attributes)") {
  DUET_NS::DeviceAttributeValues a;
  a.memory_clock_khz = 2600000;
  a.regs_per_sm = 131072;  // ROCm 7: the unified VGPR+AGPR pool
  a.smem_per_sm = 65536;
  a.smem_per_block_optin = 65536;
  a.max_blocks_per_sm = 32;
  const DeviceProps d = DUET_NS::map_device_props(mi300x(), a, 2, 60000000, 60000000);
  CHECK(d.vendor == Vendor::amd);
  CHECK(d.backend == BackendKind::hip);
  CHECK(d.arch == "gfx942:sramecc+:xnack-");
  CHECK(d.family == "CDNA3");
  CHECK(d.ordinal == 2);
  CHECK(d.sm_count == 304);
  CHECK(d.warp_size == 64);
  CHECK(d.regs_per_sm == 131072);
  CHECK(d.register_pool == RegisterPoolReport::unified_pool);
  CHECK(d.smem_per_sm == 65536);
  CHECK(d.max_blocks_per_sm == 32);
  CHECK(d.cooperative_launch);
  CHECK_FALSE(d.cluster_launch);  // no thread-block clusters on AMD
  CHECK(d.peak_bandwidth_gbps() == doctest::Approx(2.0 * 2.6e6 * 1e3 * 1024 / 1e9));
}

TEST_CASE("hipDeviceProp_t without the attributes HIP answers only on NVIDIA") {
  const DUET_NS::DeviceAttributeValues none;  // every query failed (-1)
  const DeviceProps d = DUET_NS::map_device_props(mi300x(), none, 0, 0, 0);
  CHECK(d.regs_per_sm == 65536);  // from regsPerBlock, older ROCm's arch VGPRs
  CHECK(d.register_pool == RegisterPoolReport::arch_vgprs_only);
  CHECK(d.smem_per_sm == 65536);  // maxSharedMemoryPerMultiProcessor
  CHECK(d.smem_per_block_optin == 65536);
  CHECK(d.smem_reserved_per_block == 0);
  CHECK(d.max_blocks_per_sm == 32);
  CHECK(d.memory_clock_khz == 0);
  CHECK(d.peak_bandwidth_gbps() == 0.0);
}
#else
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
  a.cluster_launch = 1;  // cudaDevAttrClusterLaunch
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
  CHECK(d.cluster_launch);
  // A failed attribute query (-1) means no clusters, not a guess.
  DUET_NS::DeviceAttributeValues failed;
  CHECK_FALSE(DUET_NS::map_device_props(p, failed, 0, 13000, 13000).cluster_launch);
}
#endif

// Vendor errors become duet::Error with the status the C ABI returns: out of
// memory and no device keep their meaning, everything else is a vendor error
// naming the call.
TEST_CASE("vendor error codes map onto duet statuses") {
  auto status_of = [](cudaError_t err) {
    try {
      DUET_NS::throw_vendor_error(err, "cudaMalloc(&p, n)", "file.cu", 7);
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("cudaMalloc(&p, n)") != std::string::npos);
      CHECK(std::string(e.what()).find("file.cu:7") != std::string::npos);
      return e.status();
    }
    return Status::success;
  };
  CHECK(status_of(cudaErrorMemoryAllocation) == Status::out_of_memory);
  CHECK(status_of(cudaErrorNoDevice) == Status::no_device);
  CHECK(status_of(cudaErrorInvalidValue) == Status::vendor_error);
  CHECK(status_of(cudaErrorInsufficientDriver) == Status::vendor_error);
}
