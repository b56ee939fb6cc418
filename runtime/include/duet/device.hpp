// Devices across every built backend (CUDA, HIP, host), with properties
// queried once per device and cached (thread-safe).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "duet/export.h"
#include "duet/device_props.hpp"

namespace duet {

class DUET_API Device {
 public:
  Device(BackendKind backend, int ordinal) : backend_(backend), ordinal_(ordinal) {}
  BackendKind backend() const noexcept { return backend_; }
  int ordinal() const noexcept { return ordinal_; }
  bool is_gpu() const noexcept { return backend_ != BackendKind::host; }
  // Cached after the first call; throws duet::Error(no_device) if absent.
  const DeviceProps& props() const;
  std::string label() const;  // "cuda:0", "hip:1", "host:0"
  bool operator==(const Device& o) const noexcept { return backend_ == o.backend_ && ordinal_ == o.ordinal_; }

 private:
  BackendKind backend_;
  int ordinal_;
};

// Every device of every built backend: GPUs first (CUDA, then HIP), the host last.
DUET_API std::vector<Device> devices();
// GPUs only; 0 without a driver or device, never an error.
DUET_API int gpu_count() noexcept;
// A device by backend and ordinal; throws duet::Error(no_device) if absent
// and duet::Error(unsupported) if that backend is not built.
DUET_API Device device(BackendKind backend, int ordinal);
// Parses "cuda:0", "hip:1", "host"; throws duet::Error(invalid_argument).
DUET_API Device device(const std::string& label);
// The first GPU, else the host.
DUET_API Device default_device();

// Backends compiled into this library, with their versions and targets.
struct BackendInfo {
  BackendKind kind;
  int device_count;
  int runtime_version;
  int driver_version;
  std::string targets;           // "sm_80;sm_90", "gfx908;gfx90a;..."
  std::string no_device_reason;  // why no device was found, if none
};
DUET_API std::vector<BackendInfo> backend_info();

// RAII memory on a device (plain cudaMalloc / hipMalloc; host: aligned malloc).
class DUET_API Buffer {
 public:
  Buffer() = default;
  Buffer(const Device& dev, std::size_t bytes);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return bytes_; }
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
  void fill(int byte_value);

 private:
  Device device_{BackendKind::host, 0};
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// RAII stream on a device (cudaStream_t / hipStream_t; nullptr on the host).
// Any stream handle of the same device works with duet's calls too.
class DUET_API Stream {
 public:
  explicit Stream(const Device& dev);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* handle() const noexcept { return handle_; }

 private:
  Device device_;
  void* handle_ = nullptr;
};

// Waits for all work on `stream` (nullptr: the whole device).
DUET_API void synchronize(const Device& dev, void* stream = nullptr);

// Copies `bytes` between two allocations of `dev` on `stream` (asynchronous
// on GPUs: cudaMemcpyAsync / hipMemcpyAsync device to device).
DUET_API void copy_device_to_device(const Device& dev, void* dst, const void* src, std::size_t bytes, void* stream = nullptr);

// The same copy by duet's own kernel, asynchronous on `stream`: a one-wave
// grid-stride loop, each thread with four 16-byte loads in flight
// (kernels/copy_launch.cu). Any byte offsets and sizes: pointers whose
// addresses differ by a multiple of 16 are copied 16 bytes at a time (the
// bytes before the first aligned 16 and after the last one by themselves);
// others at the widest width they share (8, 4, 2 or 1 bytes), so slower.
// The host backend copies as copy_device_to_device does (memcpy on its
// thread pool). duet-bench times both copies and takes the faster as the
// ceiling its ratios divide by.
// Throws duet::Error(invalid_argument) for a null pointer (bytes > 0),
// ranges that overlap, or memory of another device (a GPU call needs device
// memory of `dev`: cudaMalloc / hipMalloc, not managed or host memory);
// bytes == 0 does nothing.
DUET_API void copy_kernel(const Device& dev, void* dst, const void* src, std::size_t bytes, void* stream = nullptr);

// RAII timing event (cudaEvent_t / hipEvent_t; a timestamp on the host).
class DUET_API Event {
 public:
  explicit Event(const Device& dev);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(void* stream = nullptr);
  // Milliseconds from `start` to this event; waits for this one to complete.
  float elapsed_ms_since(const Event& start) const;

 private:
  Device device_;
  void* handle_ = nullptr;
};

// Threads the host backend runs a call on: 0 = one per CPU (or the
// DUET_HOST_THREADS environment variable), else 1..1024; invalid_argument
// otherwise. host_threads() is the count in use (fewer if threads could not
// be started).
DUET_API void set_host_threads(int threads);
DUET_API int host_threads();

}  // namespace duet
