# The HIP backend: the same backends/gpu and kernels/ sources compiled by
# hipcc into namespace duet::hip.
#
# Why a custom compile rule and not enable_language(HIP): CMake 3.25's HIP
# language support looks for <rocm root>/lib/cmake/hip-lang, which Debian's
# ROCm 5.2 keeps under the multiarch folder, and it does not identify
# Debian's clang++-15 as a HIP compiler. Driving hipcc directly, one object
# per source with a depfile for header changes, works with any hipcc and
# keeps the flags in one visible place.
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
set(DUET_HIP_FLAGS ${_hip_flags})

set(_hip_objects)
foreach(_src IN LISTS DUET_GPU_SOURCES)
  get_filename_component(_name ${_src} NAME_WE)
  set(_obj ${_hip_out}/${_name}.o)
  add_custom_command(
    OUTPUT ${_obj}
    COMMAND ${DUET_HIPCC} ${_hip_flags} -MD -MF ${_obj}.d -c ${_src} -o ${_obj}
    DEPENDS ${_src}
    DEPFILE ${_obj}.d
    COMMENT "hipcc ${_name}.cu (${DUET_HIP_ARCHITECTURES})"
    VERBATIM)
  list(APPEND _hip_objects ${_obj})
endforeach()
# The objects go into libduet (and duet_internal) as sources; duet_hip
# carries what linking them needs.
set(DUET_HIP_OBJECTS ${_hip_objects})
set_source_files_properties(${DUET_HIP_OBJECTS} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
add_library(duet_hip INTERFACE)
target_link_libraries(duet_hip INTERFACE ${DUET_AMDHIP64})
