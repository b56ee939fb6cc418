// The interface every backend library exports, in namespace duet::DUET_NS
// (duet::cuda, duet::hip or duet::host). Vendor-free: the runtime includes it
// once per built backend, with DUET_NS set, to reach all of them from one
// process.
//
// No include guard on purpose: it is meant to be included once per namespace.
#include <cstdint>
#include <string>
#include <vector>

#include "duet/device_props.hpp"
#include "duet/error.hpp"
#include "duet/occupancy.hpp"
#include "fused_args.hpp"
#include "softmax_args.hpp"
#include "softmax_variants.hpp"

#ifndef DUET_NS
#error "DUET_NS must name the backend namespace (cuda, hip or host)"
#endif

namespace duet::DUET_NS {

// Devices this backend sees; 0 (never an error) without a driver or device.
int device_count() noexcept;
// Why device_count() found none ("no CUDA-capable device", ...), or "".
std::string no_device_reason();

// Uncached query; throws duet::Error(no_device) for an ordinal not there.
DeviceProps device_props(int ordinal);

// Runtime and driver versions, or 0 where unknown (no driver).
int runtime_version() noexcept;
int driver_version() noexcept;

// GPU targets this library was compiled for, e.g. "sm_80;sm_90".
std::string compiled_targets();

// Attributes of the compiled kernel for catalogue entry `variant` on a live
// device (its first kernel, or the finalize kernel of a split_row entry).
KernelAttributes kernel_attributes(int ordinal, int variant, bool finalize);
// The vendor's own occupancy answer, for cross-checking the exact model.
int occupancy_blocks_per_sm(int ordinal, int variant, bool finalize, int threads,
                            std::int64_t dynamic_smem);

// Clusters of `cluster_blocks` blocks of a cluster_row variant the device
// holds at once (cudaOccupancyMaxActiveClusters); 0 where none fits or the
// vendor has no clusters.
int max_active_clusters(int ordinal, int variant, int threads, int cluster_blocks);
void launch_softmax(int ordinal, int variant, const SoftmaxArgs& args, const LaunchGeometry& geometry,
                    const LaunchGeometry& finalize_geometry, void* stream);

// The fused row operations (masked softmax, cross-entropy): every kernel the
// operation needs, enqueued on `stream` (cross-entropy: counting targets,
// the rows, the reduction). `launch` is the fused planner's choice on GPUs;
// the host backend ignores it. Throws duet::Error.
void launch_fused(int ordinal, const FusedArgs& args, const FusedLaunch& launch, void* stream);

// Memory and streams (used by the runtime's workspace, tests and tools).
void* device_alloc(int ordinal, std::size_t bytes);       // throws out_of_memory
void device_free(int ordinal, void* p) noexcept;
void copy_to_device(int ordinal, void* dst, const void* src, std::size_t bytes);
void copy_to_host(int ordinal, void* dst, const void* src, std::size_t bytes);
void copy_device_to_device(int ordinal, void* dst, const void* src, std::size_t bytes, void* stream);
// The same copy by duet's own kernel (GPUs: kernels/copy_launch.cu, 16-byte
// accesses; host: the pooled memcpy of copy_device_to_device). The runtime
// has checked the pointers (non-null, no overlap).
void copy_kernel(int ordinal, void* dst, const void* src, std::size_t bytes, void* stream);
void fill_bytes(int ordinal, void* dst, int value, std::size_t bytes);
void synchronize(int ordinal, void* stream);
void* stream_create(int ordinal);
void stream_destroy(int ordinal, void* stream) noexcept;

// Which device memory `p` lives on: -1 for host (or unknown) memory.
int pointer_device(const void* p);

// Device-side timing for the benchmark: events on `stream`.
void* event_create(int ordinal);
void event_destroy(int ordinal, void* event) noexcept;
void event_record(int ordinal, void* event, void* stream);
float event_elapsed_ms(int ordinal, void* start, void* stop);

}  // namespace duet::DUET_NS
