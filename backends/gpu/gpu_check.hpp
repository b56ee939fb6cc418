// Checking vendor calls: every call's status is tested, and a failure
// becomes duet::Error naming the call, the file, the line and the message.
#pragma once

#include <string>

#include "duet/error.hpp"
#include "vendor.h"

namespace duet::DUET_NS {

[[noreturn]] inline void throw_vendor_error(cudaError_t err, const char* expr, const char* file, int line) {
  const Status status = err == cudaErrorMemoryAllocation ? Status::out_of_memory
                        : err == cudaErrorNoDevice       ? Status::no_device
                                                         : Status::vendor_error;
  throw Error(status, std::string(vendor::kName) + " error " + cudaGetErrorName(err) + " (" +
                          cudaGetErrorString(err) + ") in " + expr + " at " + file + ":" + std::to_string(line));
}

// Makes `ordinal` current for a scope and restores the previous device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace duet::DUET_NS

#define DUET_GPU_CHECK(expr)                                                          \
  do {                                                                                \
    const cudaError_t duet_err_ = (expr);                                             \
    if (duet_err_ != cudaSuccess) {                                                   \
      (void)cudaGetLastError(); /* clear a sticky-free error so later calls start clean */ \
      ::duet::DUET_NS::throw_vendor_error(duet_err_, #expr, __FILE__, __LINE__);      \
    }                                                                                 \
  } while (0)
