// One kernel instantiation per catalogue entry, and the launch of an entry.
// Compiled once per vendor (nvcc, hipcc), into namespace duet::DUET_NS.
#include <array>
#include <string>
#include <utility>

#include "gpu_check.hpp"
#include "smem_opt_in.hpp"
#include "backend_api.hpp"
#include "families/block_row.cuh"
#include "families/cluster_row.cuh"
#include "families/flat_rows.cuh"
#include "families/grid_row.cuh"
#include "families/group_rows.cuh"
#include "families/interleaved_ring.cuh"
#include "families/interleaved_rows.cuh"
#include "families/interleaved_slabs.cuh"
#include "families/interleaved_stream.cuh"
#include "families/split_row.cuh"
#include "families/split_stream.cuh"

namespace duet::DUET_NS {
namespace {

using kernels::KernelFn;
using kernels::KernelPair;

template <int... I>
constexpr std::array<KernelPair, sizeof...(I)> make_table(std::integer_sequence<int, I...>) {
  return {kernels::kFamilyKernels<kCatalogue[I].strategy, I>...};
}

const std::array<KernelPair, kVariantCount>& kernel_table() {
  static const auto table = make_table(std::make_integer_sequence<int, kVariantCount>{});
  return table;
}

KernelFn pick(int variant, bool finalize) {
  if (variant < 0 || variant >= kVariantCount)
    throw Error(Status::invalid_argument, "kernel variant " + std::to_string(variant) + " is not in the catalogue");
  const KernelPair& k = kernel_table()[variant];
  if (k.main == nullptr)
    throw Error(Status::unsupported, variant_name(kCatalogue[variant]) +
                                         " is an experiment this build leaves out (configure with -DDUET_EXPERIMENTS=ON)");
  if (finalize && k.finalize == nullptr)
    throw Error(Status::invalid_argument, variant_name(kCatalogue[variant]) + " has no finalize kernel");
  return finalize ? k.finalize : k.main;
}

// Each entry's kernels (main, then finalize) that run with dynamic shared memory.
SmemOptIn<2 * kVariantCount> g_smem;

}  // namespace

KernelAttributes kernel_attributes(int ordinal, int variant, bool finalize) {
  const KernelFn fn = pick(variant, finalize);
  DeviceGuard guard(ordinal);
  cudaFuncAttributes attr{};
  DUET_GPU_CHECK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(fn)));
  KernelAttributes out;
  out.name = variant_name(kCatalogue[variant]) + (finalize ? ".finalize" : "");
  out.regs_per_thread = attr.numRegs;
  out.static_smem_bytes = static_cast<std::int64_t>(attr.sharedSizeBytes);
  out.local_bytes_per_thread = static_cast<std::int64_t>(attr.localSizeBytes);
  out.max_threads_per_block = attr.maxThreadsPerBlock;
  out.source = std::string(vendor::kName) + "FuncGetAttributes";
  return out;
}

int occupancy_blocks_per_sm(int ordinal, int variant, bool finalize, int threads, std::int64_t dynamic_smem) {
  const KernelFn fn = pick(variant, finalize);
  DeviceGuard guard(ordinal);
  // Raised as a launch would (never lowered: a launch after this query
  // keeps what it was allowed).
  g_smem.allow(ordinal, 2 * variant + (finalize ? 1 : 0), reinterpret_cast<const void*>(fn), dynamic_smem);
  int blocks = 0;
  DUET_GPU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, static_cast<size_t>(dynamic_smem)));
  return blocks;
}

int max_active_clusters(int ordinal, int variant, int threads, int cluster_blocks, std::int64_t dynamic_smem) {
  const KernelFn fn = pick(variant, false);
  DeviceGuard guard(ordinal);
  // Raised as a launch would: the count is for a kernel allowed its size.
  g_smem.allow(ordinal, 2 * variant, reinterpret_cast<const void*>(fn), dynamic_smem);
  int clusters = 0;
  DUET_GPU_CHECK(vendor::max_active_clusters(&clusters, reinterpret_cast<const void*>(fn),
                                             dim3(static_cast<unsigned>(threads)), static_cast<size_t>(dynamic_smem),
                                             static_cast<unsigned>(cluster_blocks)));
  return clusters;
}

namespace {
// A vector entry's packs are aligned in every tensor: each starts its rows
// at x's offset within a pack, and an entry without edges has rows of whole
// packs from a pack boundary.
void check_layout(const Variant& v, const SoftmaxArgs& a) {
  if (v.vec <= 1 || a.rows == 0) return;
  const LayoutRule rule = family_of(v.strategy).layout;
  if (rule == LayoutRule::interleaved) {
    if (!interleaved_on_packs(v.dtype, v.backward, a.rows, a.cols, a.inner, a.x, a.x_stride, a.x_col_stride, a.dy,
                              a.dy_stride, a.dy_col_stride, a.out, a.out_stride, a.out_col_stride, v.vec))
      throw Error(Status::invalid_argument,
                  variant_name(v) + " needs every tensor on " + std::to_string(v.vec) +
                      "-element packs: pointers on a pack, inner, col strides and strides whole packs");
    return;
  }
  const RowLayout l =
      row_layout(v.dtype, v.backward, a.rows, a.cols, a.x, a.x_stride, a.dy, a.dy_stride, a.out, a.out_stride);
  if (!l.congruent)
    throw Error(Status::invalid_argument,
                variant_name(v) + " needs every tensor's rows to start at the same offset within a " +
                    std::to_string(v.vec) + "-element pack (pointers and row strides congruent modulo " +
                    std::to_string(v.vec) + " elements)");
  if (rule == LayoutRule::dense_rows && !l.dense)
    throw Error(Status::invalid_argument, variant_name(v) + " needs every tensor's rows back to back (row stride = cols)");
  if (!v.edges && !l.on_packs)
    throw Error(Status::invalid_argument, variant_name(v) + " needs rows of whole " + std::to_string(v.vec) +
                                              "-element packs from a pack boundary; the entry with edges serves others");
}
}  // namespace

void launch_softmax(int ordinal, int variant, const SoftmaxArgs& args, const LaunchGeometry& geometry,
                    const LaunchGeometry& finalize_geometry, void* stream) {
  (void)pick(variant, false);  // an index outside the catalogue throws
  const Variant& v = kCatalogue[variant];
  const FamilyInfo& family = family_of(v.strategy);
  check_layout(v, args);
  if (v.strategy == Strategy::flat_rows && args.cols > flat_rows_max_cols(v.vec, v.backward))
    throw Error(Status::invalid_argument, variant_name(v) + " takes rows of at most " +
                                              std::to_string(flat_rows_max_cols(v.vec, v.backward)) + " elements, not " +
                                              std::to_string(args.cols));
  DeviceGuard guard(ordinal);
  const auto s = static_cast<cudaStream_t>(stream);
  auto launch_one = [&](bool finalize, const LaunchGeometry& g) {
    const KernelFn fn = pick(variant, finalize);
    // Any dynamic size opts in: 48 KiB of dynamic memory plus the kernel's
    // static scratch failed to launch without it.
    g_smem.allow(ordinal, 2 * variant + (finalize ? 1 : 0), reinterpret_cast<const void*>(fn), g.dynamic_smem);
    const dim3 grid(static_cast<unsigned>(g.grid)), block(static_cast<unsigned>(g.block));
    if (family.cluster_launch) {
      DUET_GPU_CHECK(vendor::launch_cluster(fn, grid, block, static_cast<size_t>(g.dynamic_smem), s,
                                            static_cast<unsigned>(args.chunks_per_row), args));
    } else if (family.cooperative) {
      DUET_GPU_CHECK(vendor::launch_cooperative(fn, grid, block, static_cast<size_t>(g.dynamic_smem), s, args));
    } else {
      fn<<<grid, block, static_cast<size_t>(g.dynamic_smem), s>>>(args);
    }
    DUET_GPU_CHECK(cudaGetLastError());
  };
  // The work queue starts empty (split_stream, interleaved_stream); no
  // group of blocks has arrived (a cooperative family, grid_row); no slab
  // has finished (interleaved_slabs).
  if (family.zeroed_counters) {
    if (family.work == WorkUnit::inner_tile) {  // a count per tile of an outer row (interleaved_slabs: and bundle)
      const std::int64_t tile_rows = std::int64_t(args.tile) * v.vec;
      const std::int64_t groups = args.rows * ((args.inner + tile_rows - 1) / tile_rows);
      const std::int64_t bytes = v.strategy == Strategy::interleaved_slabs
                                     ? interleaved_slabs_counter_bytes(groups, args.chunks_per_row)
                                     : interleaved_stream_counter_bytes(groups);
      DUET_GPU_CHECK(cudaMemsetAsync(args.workspace, 0, static_cast<size_t>(bytes), s));
    } else {
      const std::int64_t bytes = family.cooperative ? grid_row_counter_bytes(geometry.grid / args.chunks_per_row)
                                                    : split_stream_counter_bytes(args.rows);
      DUET_GPU_CHECK(cudaMemsetAsync(args.counters, 0, static_cast<size_t>(bytes), s));
    }
  }
  launch_one(false, geometry);
  if (family.two_kernels) launch_one(true, finalize_geometry);
}

}  // namespace duet::DUET_NS
