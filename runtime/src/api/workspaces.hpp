// The per-stream workspace cache that calls without a caller's workspace
// use (softmax's split kernels, cross-entropy's counters and row losses).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "duet/device.hpp"

namespace duet::detail {

// Grow-only workspace per (device, stream). A call's kernels must run back
// to back on their stream with nothing else writing the workspace in
// between, and a buffer must outlive the launch that uses it, so a caller
// holds the slot's lock from taking the buffer until its kernels are
// enqueued (stream order does the rest), and a grown-out buffer is freed
// only when its last user lets go (cudaFree then waits for the device).
class Workspaces {
 public:
  struct Lease {
    std::unique_lock<std::mutex> lock;
    std::shared_ptr<Buffer> buffer;
  };
  Lease get(const Device& dev, void* stream, std::int64_t bytes);

 private:
  struct Slot {
    std::mutex mutex;
    std::shared_ptr<Buffer> buffer;
  };
  std::mutex mutex_;
  std::map<std::tuple<BackendKind, int, void*>, std::unique_ptr<Slot>> slots_;
};

// The process's one cache, never destroyed: device memory outlives static
// teardown order.
Workspaces& workspaces();

}  // namespace duet::detail
