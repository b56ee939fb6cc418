// Compiler resource reports recorded at build time (cmake/DuetResourceReports.cmake).
#pragma once

#include <string>
#include <vector>

namespace duet::detail {

struct RecordedReport {
  std::string backend;  // "cuda" or "hip"
  std::string target;   // "sm_90", "gfx90a"
  std::string text;     // ptxas -v lines, or amdgpu remark lines
};

const std::vector<RecordedReport>& recorded_reports();

}  // namespace duet::detail
