# libFuzzer targets (tests/fuzz/): fuzz_props (property-file parser, round
# trip, occupancy and planner on parsed devices) and fuzz_occupancy
# (structured hostile input to the occupancy models).
#
# Included from the top-level CMakeLists.txt once duet_core exists. With
# DUET_BUILD_FUZZERS=ON and clang as the C++ compiler, duet_core is compiled
# with coverage instrumentation and ASan+UBSan, so use a separate build
# directory for it: scripts/fuzz.sh configures build-fuzz/ with clang++, the
# host backend only, tests and tools off.
option(DUET_BUILD_FUZZERS "Build the libFuzzer targets (clang only; instruments duet_core with ASan+UBSan)" OFF)
if(NOT DUET_BUILD_FUZZERS)
  return()
endif()

if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(WARNING "DUET_BUILD_FUZZERS needs clang (libFuzzer); the C++ compiler is "
                  "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER}: fuzzers skipped. "
                  "Configure a separate build with -DCMAKE_CXX_COMPILER=clang++ (scripts/fuzz.sh does).")
  return()
endif()

# The libFuzzer runtime and FuzzedDataProvider.h (Debian: libclang-rt-14-dev)
# must be there; otherwise say so instead of failing at link time.
include(CheckCXXSourceCompiles)
set(_duet_fuzz_flags -fsanitize=fuzzer,address,undefined)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,address,undefined")
set(CMAKE_REQUIRED_LINK_OPTIONS ${_duet_fuzz_flags})
set(CMAKE_REQUIRED_QUIET ON)
check_cxx_source_compiles([=[
#include <fuzzer/FuzzedDataProvider.h>
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {
  FuzzedDataProvider p(d, n);
  return p.ConsumeBool() ? 0 : 0;
}
]=] DUET_HAVE_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
unset(CMAKE_REQUIRED_QUIET)
if(NOT DUET_HAVE_LIBFUZZER)
  message(WARNING "DUET_BUILD_FUZZERS: ${CMAKE_CXX_COMPILER} cannot link -fsanitize=fuzzer,address,undefined "
                  "or lacks <fuzzer/FuzzedDataProvider.h> (install libclang-rt-14-dev): fuzzers skipped.")
  return()
endif()

# Sanitizer errors abort (a finding), frames stay walkable for the reports.
set(_duet_fuzz_common -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g)

# duet_core: coverage-instrumented, ASan+UBSan. Whatever links it gets the
# sanitizer runtimes (the shared duet library, tests and tools alike).
target_compile_options(duet_core PRIVATE -fsanitize=fuzzer-no-link,address,undefined ${_duet_fuzz_common})
target_link_options(duet_core INTERFACE -fsanitize=address,undefined)

set(_duet_fuzz_dir ${CMAKE_CURRENT_LIST_DIR}/../tests/fuzz)
foreach(_t IN ITEMS fuzz_props fuzz_occupancy)
  add_executable(${_t} ${_duet_fuzz_dir}/${_t}.cpp)
  target_link_libraries(${_t} PRIVATE duet_core)
  target_compile_options(${_t} PRIVATE ${_duet_fuzz_flags} ${_duet_fuzz_common})
  target_link_options(${_t} PRIVATE ${_duet_fuzz_flags})
endforeach()
add_custom_target(duet_fuzzers DEPENDS fuzz_props fuzz_occupancy)
message(STATUS "  fuzz : fuzz_props, fuzz_occupancy (libFuzzer + ASan + UBSan; scripts/fuzz.sh runs them)")
