# The HIP backend: the same backends/gpu and kernels/ sources compiled by
# hipcc into namespace duet::hip.
#
# Why a custom compile rule and not enable_language(HIP): CMake 3.25's HIP
# language support looks for <rocm root>/lib/cmake/hip-lang, which Debian's
# ROCm 5.2 keeps under the multiarch folder, and it does not identify
# Debian's clang++-15 as a HIP compiler. Driving hipcc directly, with
# depfiles for header changes, works with any hipcc and keeps the flags in
# one visible place.
find_library(DUET_AMDHIP64 amdhip64 REQUIRED)
set(_hip_out ${CMAKE_CURRENT_BINARY_DIR}/hip)
file(MAKE_DIRECTORY ${_hip_out})
# Hidden visibility as the rest of libduet (hipcc applies it to host code;
# the AMDGPU kernels stay visible to the HIP runtime, which looks them up).
set(_hip_flags -std=c++20 -O3 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -DDUET_VENDOR_HIP -DDUET_NS=hip
               "-DDUET_GPU_TARGETS=\"${DUET_HIP_TARGETS_STRING}\"")
list(APPEND _hip_flags ${DUET_EXPERIMENTS_FLAG})
foreach(_inc IN LISTS DUET_BACKEND_INCLUDES)
  list(APPEND _hip_flags -I${_inc})
endforeach()
foreach(_arch IN LISTS DUET_HIP_ARCHITECTURES)
  list(APPEND _hip_flags --offload-arch=${_arch})
endforeach()

# Each source is built in three steps (hipcc -c runs them in one process):
# its device code once a target, each a build job of its own (the targets
# build in parallel, and the compile that builds a target's code gives its
# resource report, DuetResourceReports.cmake); the targets' code objects
# bundled as the driver bundles them; the host code compiled with the
# bundle embedded (cmake/hip_split.sh). The object is byte for byte the
# one `hipcc -c` with every --offload-arch writes given the same -cuid,
# which each source fixes here (the driver derives it from the options,
# and the steps' options differ).
list(GET DUET_HIP_ARCHITECTURES 0 _first_arch)
execute_process(COMMAND ${DUET_HIPCC} --offload-arch=${_first_arch} -print-prog-name=clang-offload-bundler
                OUTPUT_VARIABLE DUET_HIP_BUNDLER OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT EXISTS "${DUET_HIP_BUNDLER}")
  message(FATAL_ERROR "hipcc names no clang-offload-bundler (-print-prog-name gave '${DUET_HIP_BUNDLER}')")
endif()
set(_flags_no_arch ${_hip_flags})
list(FILTER _flags_no_arch EXCLUDE REGEX "^--offload-arch=")
set(_split ${CMAKE_CURRENT_SOURCE_DIR}/cmake/hip_split.sh)
set(_hip_objects)
set(DUET_HIP_RESOURCE_REPORTS)
foreach(_src IN LISTS DUET_GPU_SOURCES)
  get_filename_component(_name ${_src} NAME_WE)
  set(_cuid -cuid=duet_${_name})
  set(_code_objects)
  foreach(_arch IN LISTS DUET_HIP_ARCHITECTURES)
    set(_co ${_hip_out}/${_name}-${_arch}.co)
    set(_report ${_hip_out}/${_name}-${_arch}.resources.txt)
    add_custom_command(
      OUTPUT ${_co} ${_report}
      COMMAND bash ${_split} device ${_co} ${_report} ${DUET_HIP_BUNDLER} --
              ${DUET_HIPCC} ${_flags_no_arch} ${_cuid} --offload-arch=${_arch} --cuda-device-only
              -MD -MF ${_co}.d -MT ${_co} -c ${_src}
      DEPENDS ${_src} ${_split}
      BYPRODUCTS ${_co}.entries
      DEPFILE ${_co}.d
      COMMENT "hipcc ${_name}.cu: device code for ${_arch}"
      VERBATIM)
    list(APPEND _code_objects ${_co})
    # The kernels' catalogue is softmax_launch's: its reports are the ones
    # the planner reads.
    if(_name STREQUAL "softmax_launch")
      list(APPEND DUET_HIP_RESOURCE_REPORTS "hip|${_arch}|${_report}")
    endif()
  endforeach()
  set(_fatbin ${_hip_out}/${_name}.hipfb)
  add_custom_command(
    OUTPUT ${_fatbin}
    COMMAND bash ${_split} bundle ${_fatbin} ${DUET_HIP_BUNDLER} ${_code_objects}
    DEPENDS ${_code_objects} ${_split}
    COMMENT "bundling ${_name}.cu's device code (${DUET_HIP_ARCHITECTURES})"
    VERBATIM)
  set(_obj ${_hip_out}/${_name}.o)
  add_custom_command(
    OUTPUT ${_obj}
    COMMAND ${DUET_HIPCC} ${_hip_flags} ${_cuid} --cuda-host-only -Xclang -fcuda-include-gpubinary -Xclang ${_fatbin}
            -MD -MF ${_obj}.d -MT ${_obj} -c ${_src} -o ${_obj}
    DEPENDS ${_src} ${_fatbin}
    DEPFILE ${_obj}.d
    COMMENT "hipcc ${_name}.cu: host code"
    VERBATIM)
  list(APPEND _hip_objects ${_obj})
endforeach()
# The objects go into libduet (and duet_internal) as sources; duet_hip
# carries what linking them needs.
set(DUET_HIP_OBJECTS ${_hip_objects})
set_source_files_properties(${DUET_HIP_OBJECTS} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
add_library(duet_hip INTERFACE)
target_link_libraries(duet_hip INTERFACE ${DUET_AMDHIP64})
