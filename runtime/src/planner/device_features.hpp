// What the planners may assume a device's kernels do, from its properties.
#pragma once

#include "duet/device_props.hpp"

namespace duet::detail {

// The device copies global memory to shared memory without registers
// (cp.async: NVIDIA sm_80+, backends/vendor/hopper_ptx.h): the kernels'
// shared masks, interleaved tiles and stream_row stash copies rely on it.
inline bool copies_to_shared_async(const DeviceProps& dev) {
  return dev.vendor == Vendor::nvidia && dev.cc_major >= 8;
}

}  // namespace duet::detail
