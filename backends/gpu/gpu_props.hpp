// Mapping of the vendor's device-property struct (plus the attributes the
// struct lacks) onto duet::DeviceProps. Separate from the query so tests can
// build the vendor struct by hand and check the mapping without a GPU.
#pragma once

#include "duet/device_props.hpp"
#include "vendor.h"

namespace duet::DUET_NS {

// Values read with cudaDeviceGetAttribute / hipDeviceGetAttribute; -1 where
// the query failed or the vendor does not answer it (HIP answers several of
// these "CUDA only").
struct DeviceAttributeValues {
  int memory_clock_khz = -1;       // cudaDevAttrMemoryClockRate (CUDA 13 dropped the struct field)
  int regs_per_sm = -1;            // cudaDevAttrMaxRegistersPerMultiprocessor
  int smem_per_sm = -1;            // cudaDevAttrMaxSharedMemoryPerMultiprocessor
  int smem_per_block_optin = -1;   // cudaDevAttrMaxSharedMemoryPerBlockOptin
  int smem_reserved_per_block = -1;// cudaDevAttrReservedSharedMemoryPerBlock
  int max_blocks_per_sm = -1;      // cudaDevAttrMaxBlocksPerMultiprocessor
  int cluster_launch = -1;         // cudaDevAttrClusterLaunch (CUDA 12+; no HIP counterpart)
};

DeviceProps map_device_props(const cudaDeviceProp& p, const DeviceAttributeValues& a, int ordinal,
                             int driver_version, int runtime_version);

}  // namespace duet::DUET_NS
