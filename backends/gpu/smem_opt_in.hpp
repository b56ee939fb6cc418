// Raising a kernel's dynamic shared-memory limit: past 48 KiB a block's
// shared memory needs the kernel's explicit opt-in (CUDA C Programming
// Guide, "Shared Memory"; HIP accepts the call). The limit each kernel of a
// catalogue was last raised to is kept per device, so the vendor call is
// made once, not on every launch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "gpu_check.hpp"

namespace duet::DUET_NS {

template <int KERNELS>
class SmemOptIn {
 public:
  // `fn` is kernel `index` of the catalogue, about to run on `ordinal`
  // (the current device) with `bytes` of dynamic shared memory.
  void allow(int ordinal, int index, const void* fn, std::int64_t bytes) {
    if (bytes <= 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto& limit = limits_.at(static_cast<std::size_t>(ordinal)).at(static_cast<std::size_t>(index));
    if (limit >= bytes) return;
    DUET_GPU_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    limit = bytes;
  }

 private:
  std::mutex mutex_;
  std::array<std::array<std::int64_t, KERNELS>, 64> limits_{};
};

}  // namespace duet::DUET_NS
