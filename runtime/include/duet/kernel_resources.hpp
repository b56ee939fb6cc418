// Kernel attributes without a GPU: parsed from the compilers' resource
// reports that the build records (ptxas -v for NVIDIA, the AMDGPU
// kernel-resource-usage remarks for AMD) and embeds in the library.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "duet/export.h"
#include "duet/device_props.hpp"
#include "duet/occupancy.hpp"

namespace duet {

// Mangled kernel name -> attributes, for one target.
DUET_API std::map<std::string, KernelAttributes> parse_ptxas_report(const std::string& text, const std::string& target);
DUET_API std::map<std::string, KernelAttributes> parse_amdgpu_report(const std::string& text,
                                                                     const std::string& target);

// Which catalogue entry a (mangled) kernel name is; -1 if none.
// `finalize` tells a split_row finalize kernel from its first kernel.
DUET_API int variant_of_kernel(const std::string& mangled, bool* finalize);

// Targets recorded in this build: {"cuda", "sm_90"}, {"hip", "gfx90a"}, ...
DUET_API std::vector<std::pair<std::string, std::string>> recorded_targets();

// The recorded target that stands in for `dev`: its own arch if recorded,
// else the nearest one of the same vendor and family (sm_89 -> sm_80,
// gfx942 -> gfx940). Empty if this build recorded none for the vendor.
DUET_API std::string recorded_target_for(const DeviceProps& dev);

// Attributes of catalogue entry `variant` for `dev`, from the recorded
// report; throws duet::Error(unsupported) if the build recorded none.
DUET_API KernelAttributes recorded_kernel_attributes(const DeviceProps& dev, int variant, bool finalize);

}  // namespace duet
