# Records, at build time, the resources the compilers report for every
# kernel and target, so a plan for a device that is not present (a property
# file) uses real register and shared-memory counts, not guesses:
#   NVIDIA: ptxas -v (registers, static shared memory, stack frame)
#   AMD:    clang -Rpass-analysis=kernel-resource-usage (VGPRs, AGPRs,
#           SGPRs, scratch, LDS) from the library's own device compiles,
#           one a target (DuetHip.cmake), since the remarks do not name
#           the target.
# The reports are reduced to the lines that matter and embedded in the
# library (runtime/src/planner/kernel_resources.cpp parses them).
set(_rep_dir ${CMAKE_CURRENT_BINARY_DIR}/resource_usage)
file(MAKE_DIRECTORY ${_rep_dir})
set(_reports)
set(_launch_src ${CMAKE_CURRENT_SOURCE_DIR}/kernels/softmax_launch.cu)
# The headers the launch source compiles: a changed kernel makes a new
# report (a target-level dependency on the backend does not re-run these
# commands).
file(GLOB_RECURSE _kernel_headers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/*.cuh
     ${CMAKE_CURRENT_SOURCE_DIR}/kernels/*.hpp ${CMAKE_CURRENT_SOURCE_DIR}/backends/vendor/*.h)

if(DUET_ENABLE_CUDA)
  set(_nv_incs)
  foreach(_inc IN LISTS DUET_BACKEND_INCLUDES)
    list(APPEND _nv_incs -I${_inc})
  endforeach()
  foreach(_cc IN LISTS DUET_CUDA_ARCHITECTURES)
    set(_rep ${_rep_dir}/cuda_sm_${_cc}.txt)
    add_custom_command(
      OUTPUT ${_rep}
      COMMAND sh -c "\"$0\" \"$@\" 2>&1 >/dev/null | grep -E 'Compiling entry|Used [0-9]+ registers|stack frame' > ${_rep}"
              ${CMAKE_CUDA_COMPILER} -std=c++17 -O3 -ccbin ${CMAKE_CXX_COMPILER} -DDUET_VENDOR_CUDA -DDUET_NS=cuda
              ${DUET_EXPERIMENTS_FLAG} ${_nv_incs} -arch=sm_${_cc} -cubin -Xptxas -v ${_launch_src} -o ${_rep}.cubin
      DEPENDS ${_launch_src} ${_kernel_headers} duet_cuda
      COMMENT "ptxas resource report for sm_${_cc}"
      VERBATIM)
    list(APPEND _reports "cuda|sm_${_cc}|${_rep}")
  endforeach()
endif()

if(DUET_ENABLE_HIP)
  # Written by the compiles that build the library's device code
  # (DuetHip.cmake), one a target.
  list(APPEND _reports ${DUET_HIP_RESOURCE_REPORTS})
endif()

set(DUET_RESOURCE_REPORTS_CPP ${CMAKE_CURRENT_BINARY_DIR}/recorded_reports.cpp)
set(_report_files)
foreach(_r IN LISTS _reports)
  string(REPLACE "|" ";" _parts "${_r}")
  list(GET _parts 2 _f)
  list(APPEND _report_files ${_f})
endforeach()
string(REPLACE ";" "," _reports_arg "${_reports}")
add_custom_command(
  OUTPUT ${DUET_RESOURCE_REPORTS_CPP}
  COMMAND ${CMAKE_COMMAND} "-DREPORTS=${_reports_arg}" -DOUT=${DUET_RESOURCE_REPORTS_CPP}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_reports.cmake
  DEPENDS ${_report_files} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_reports.cmake
  COMMENT "embedding compiler resource reports"
  VERBATIM)
