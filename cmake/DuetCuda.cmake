# The CUDA backend: backends/gpu and kernels/ compiled by nvcc into
# namespace duet::cuda, linked with the static CUDA runtime so the library
# runs where only the driver is installed.
if(NOT CMAKE_CUDA_HOST_COMPILER)
  set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
endif()
# CMake 3.25 does not know nvcc 13's C++20 flag (CUDA_STANDARD 20 fails its
# compiler check); the GPU sources are C++17, the rest of duet C++20.
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

# An object library: its objects are folded into libduet (hidden, as the
# rest: CMAKE_CUDA_VISIBILITY_PRESET), the static CUDA runtime follows as a
# link dependency.
add_library(duet_cuda OBJECT ${DUET_GPU_SOURCES})
set_target_properties(duet_cuda PROPERTIES CUDA_ARCHITECTURES "${DUET_CUDA_ARCHITECTURES}"
                                           CUDA_RUNTIME_LIBRARY Static CUDA_STANDARD 17)
target_include_directories(duet_cuda PRIVATE ${DUET_BACKEND_INCLUDES})
target_compile_definitions(duet_cuda PRIVATE DUET_VENDOR_CUDA DUET_NS=cuda
                                             DUET_GPU_TARGETS="${DUET_CUDA_TARGETS_STRING}")
target_compile_options(duet_cuda PRIVATE ${DUET_EXPERIMENTS_FLAG})
target_compile_options(duet_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fPIC>)
target_link_libraries(duet_cuda PUBLIC duet_core CUDA::cudart_static)
