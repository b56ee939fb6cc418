// Device queries, memory, streams and events for one GPU vendor, compiled
// once per vendor into namespace duet::DUET_NS.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend_api.hpp"
#include "gpu_check.hpp"
#include "gpu_props.hpp"

#ifndef DUET_GPU_TARGETS
#define DUET_GPU_TARGETS ""
#endif

namespace duet::DUET_NS {

DeviceGuard::DeviceGuard(int ordinal) {
  DUET_GPU_CHECK(cudaGetDevice(&previous_));
  if (previous_ != ordinal) DUET_GPU_CHECK(cudaSetDevice(ordinal));
}
DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_) (void)cudaSetDevice(previous_);
}

namespace {
cudaError_t count_devices(int* n) {
  *n = 0;
  const cudaError_t err = cudaGetDeviceCount(n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    *n = 0;
  }
  return err;
}

void check_ordinal(int ordinal) {
  const int n = device_count();
  if (ordinal < 0 || ordinal >= n)
    throw Error(Status::no_device, std::string(vendor::kName) + " device " + std::to_string(ordinal) +
                                       " does not exist (" + std::to_string(n) + " found" +
                                       (n == 0 ? ": " + no_device_reason() : std::string()) + ")");
}

int attribute_or(cudaDeviceAttr attr, int ordinal) {
  int value = -1;
  if (cudaDeviceGetAttribute(&value, attr, ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return value;
}
}  // namespace

int device_count() noexcept {
  int n = 0;
  (void)count_devices(&n);
  return n;
}

// What is missing, in words, then the runtime's error name. Without any
// NVIDIA driver cudaGetDeviceCount says cudaErrorInsufficientDriver ("CUDA
// driver version is insufficient"), as it does for a driver older than the
// runtime; cudaDriverGetVersion tells the two apart: it gives 0 where
// libcuda.so.1 cannot be loaded (CUDA Runtime API, cudaDriverGetVersion).
std::string no_device_reason() {
  int n = 0;
  const cudaError_t err = count_devices(&n);
  if (err == cudaSuccess) return n == 0 ? "the runtime reports zero devices" : "";
  const std::string code = std::string(" (") + cudaGetErrorName(err) + ")";
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
  (void)cudaGetLastError();
#if defined(DUET_VENDOR_CUDA)
  const auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  if (driver == 0) return "no NVIDIA driver installed (libcuda.so.1 not found)" + code;
  if (err == cudaErrorInsufficientDriver)
    return "the NVIDIA driver supports CUDA " + version(driver) + ", older than this runtime's " + version(runtime) +
           code;
  if (err == cudaErrorNoDevice) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return "the NVIDIA driver (CUDA " + version(driver) + ") finds no device" +
           (visible != nullptr ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : std::string()) + code;
  }
#else
  if (err == cudaErrorNoDevice) return "no AMD GPU found" + code;
  if (err == cudaErrorInsufficientDriver) return "no AMD GPU driver (amdgpu/KFD), or one older than this runtime" + code;
#endif
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

int runtime_version() noexcept {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
}
int driver_version() noexcept {
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess ? v : 0;
}

std::string compiled_targets() { return DUET_GPU_TARGETS; }

DeviceProps map_device_props(const cudaDeviceProp& p, const DeviceAttributeValues& a, int ordinal,
                             int driver, int runtime) {
  DeviceProps d;
  d.name = p.name;
  d.ordinal = ordinal;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.warp_size = p.warpSize;
  d.regs_per_block = p.regsPerBlock;
  d.max_threads_per_block = p.maxThreadsPerBlock;
  d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  d.smem_per_block = static_cast<std::int64_t>(p.sharedMemPerBlock);
  d.l2_bytes = p.l2CacheSize;
  d.memory_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
  d.memory_bus_width_bits = p.memoryBusWidth;
  d.memory_clock_khz = std::max(a.memory_clock_khz, 0);
  d.driver_version = driver;
  d.runtime_version = runtime;
  d.cooperative_launch = p.cooperativeLaunch != 0;
#if defined(DUET_VENDOR_HIP)
  d.vendor = Vendor::amd;
  d.backend = BackendKind::hip;
  d.arch = p.gcnArchName;
  d.family = amd_family(d.arch);
  // hipDeviceProp_t (ROCm 5.2) has no regsPerMultiprocessor,
  // sharedMemPerMultiprocessor or sharedMemPerBlockOptin: take the attribute,
  // else the nearest struct field.
  d.regs_per_sm = a.regs_per_sm > 0 ? a.regs_per_sm : p.regsPerBlock;
  d.smem_per_sm = a.smem_per_sm > 0 ? a.smem_per_sm : static_cast<std::int64_t>(p.maxSharedMemoryPerMultiProcessor);
  d.smem_per_block_optin = a.smem_per_block_optin > 0 ? a.smem_per_block_optin : d.smem_per_block;
  d.smem_reserved_per_block = std::max(a.smem_reserved_per_block, 0);
  // HIP answers the blocks-per-CU attribute only on NVIDIA ("Cuda only" in
  // hip_runtime_api.h); without it, assume 32 workgroups per CU, as the
  // property files in tools/deviceinfo/devices/ do.
  d.max_blocks_per_sm = a.max_blocks_per_sm > 0 ? a.max_blocks_per_sm : 32;
  d.register_pool = !amd_is_cdna(d.arch)       ? RegisterPoolReport::arch_vgprs_only
                    : d.regs_per_sm >= 131072 ? RegisterPoolReport::unified_pool
                                              : RegisterPoolReport::arch_vgprs_only;
  d.source = "hipGetDeviceProperties + hipDeviceGetAttribute";
#else
  d.vendor = Vendor::nvidia;
  d.backend = BackendKind::cuda;
  d.arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
  d.family = nvidia_family(p.major, p.minor);
  d.regs_per_sm = p.regsPerMultiprocessor;
  d.smem_per_sm = static_cast<std::int64_t>(p.sharedMemPerMultiprocessor);
  d.smem_per_block_optin = static_cast<std::int64_t>(p.sharedMemPerBlockOptin);
  d.smem_reserved_per_block = static_cast<std::int64_t>(p.reservedSharedMemPerBlock);
  d.max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
  d.cluster_launch = a.cluster_launch > 0;
  d.register_pool = RegisterPoolReport::not_applicable;
  d.source = "cudaGetDeviceProperties + cudaDeviceGetAttribute";
#endif
  return d;
}

DeviceProps device_props(int ordinal) {
  check_ordinal(ordinal);
  cudaDeviceProp p{};
  DUET_GPU_CHECK(cudaGetDeviceProperties(&p, ordinal));
  DeviceAttributeValues a;
  a.memory_clock_khz = attribute_or(cudaDevAttrMemoryClockRate, ordinal);
  a.regs_per_sm = attribute_or(cudaDevAttrMaxRegistersPerMultiprocessor, ordinal);
  a.smem_per_sm = attribute_or(cudaDevAttrMaxSharedMemoryPerMultiprocessor, ordinal);
  a.smem_per_block_optin = attribute_or(cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal);
  a.smem_reserved_per_block = attribute_or(cudaDevAttrReservedSharedMemoryPerBlock, ordinal);
  a.max_blocks_per_sm = attribute_or(cudaDevAttrMaxBlocksPerMultiprocessor, ordinal);
#if !defined(DUET_VENDOR_HIP)
  a.cluster_launch = attribute_or(cudaDevAttrClusterLaunch, ordinal);
#endif
  return map_device_props(p, a, ordinal, driver_version(), runtime_version());
}

void* device_alloc(int ordinal, std::size_t bytes) {
  check_ordinal(ordinal);
  DeviceGuard guard(ordinal);
  void* p = nullptr;
  DUET_GPU_CHECK(cudaMalloc(&p, bytes));
  return p;
}
void device_free(int ordinal, void* p) noexcept {
  if (p == nullptr) return;
  int previous = -1;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(ordinal);
  (void)cudaFree(p);
  (void)cudaSetDevice(previous);
}
void copy_to_device(int ordinal, void* dst, const void* src, std::size_t bytes) {
  DeviceGuard guard(ordinal);
  DUET_GPU_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void copy_to_host(int ordinal, void* dst, const void* src, std::size_t bytes) {
  DeviceGuard guard(ordinal);
  DUET_GPU_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void copy_device_to_device(int ordinal, void* dst, const void* src, std::size_t bytes, void* stream) {
  DeviceGuard guard(ordinal);
  DUET_GPU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
}
void fill_bytes(int ordinal, void* dst, int value, std::size_t bytes) {
  DeviceGuard guard(ordinal);
  DUET_GPU_CHECK(cudaMemset(dst, value, bytes));
}
void synchronize(int ordinal, void* stream) {
  DeviceGuard guard(ordinal);
  if (stream != nullptr)
    DUET_GPU_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  else
    DUET_GPU_CHECK(cudaDeviceSynchronize());
}
void* stream_create(int ordinal) {
  DeviceGuard guard(ordinal);
  cudaStream_t s = nullptr;
  DUET_GPU_CHECK(cudaStreamCreate(&s));
  return s;
}
void stream_destroy(int ordinal, void* stream) noexcept {
  (void)ordinal;
  if (stream != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

int pointer_device(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // unregistered host memory on older runtimes
    return -1;
  }
  return vendor::memory_type(attr) == cudaMemoryTypeDevice ? attr.device : -1;
}

void* event_create(int ordinal) {
  DeviceGuard guard(ordinal);
  cudaEvent_t e = nullptr;
  DUET_GPU_CHECK(cudaEventCreate(&e));
  return e;
}
void event_destroy(int ordinal, void* event) noexcept {
  (void)ordinal;
  if (event != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}
void event_record(int ordinal, void* event, void* stream) {
  DeviceGuard guard(ordinal);
  DUET_GPU_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}
float event_elapsed_ms(int ordinal, void* start, void* stop) {
  DeviceGuard guard(ordinal);
  DUET_GPU_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(stop)));
  float ms = 0.0f;
  DUET_GPU_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(stop)));
  return ms;
}

}  // namespace duet::DUET_NS
