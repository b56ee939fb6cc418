// The fused row operations' kernels: one instantiation per catalogue entry
// (kernels/fused_variants.hpp), and launch_fused, which enqueues every
// kernel an operation needs. Compiled once per vendor (nvcc, hipcc), into
// namespace duet::DUET_NS.
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "gpu_check.hpp"
#include "smem_opt_in.hpp"
#include "backend_api.hpp"
#include "families/fused_ahead.cuh"
#include "families/fused_cluster.cuh"
#include "families/fused_rows.cuh"
#include "families/shard_combine.cuh"
#include "fused_variants.hpp"

namespace duet::DUET_NS {
namespace {

using FusedKernelFn = void (*)(FusedArgs);

template <int I>
constexpr FusedKernelFn make_fused_entry() {
  constexpr FusedVariant v = kFusedCatalogue[I];
  using T = typename kernels::StorageOf<v.dtype>::type;
  using Op = typename kernels::OpOf<v.op, v.mask, T, v.vec>::type;
  static_assert(v.vec == 1 || sizeof(typename Op::Item) == fused_item_bytes(v.op, v.mask, v.dtype),
                "the planner sizes stream_row's stash by fused_item_bytes");
  constexpr bool kStashByCopy =
      kernels::ItemIsX<Op>::value && kernels::reduces<Op> && sizeof(typename Op::Item) == 16;
  static_assert(v.vec == 1 || kStashByCopy == fused_stash_by_copy(v.op, v.mask, v.dtype),
                "the planner says which stashes cp.async fills by fused_stash_by_copy");
  if constexpr (v.strategy == FusedStrategy::cluster_row) {
    static_assert(!v.edges && v.vec > 1, "cluster_row runs rows of whole packs");
    return &kernels::fused_cluster_kernel<Op, v.vec, v.vpt, v.block>;
  } else if constexpr (v.strategy == FusedStrategy::block_row_ahead) {
    static_assert(v.vec > 1, "block_row_ahead copies 16-byte packs");
    return &kernels::fused_block_ahead_kernel<Op, v.vec, v.vpt, v.edges>;
  } else if constexpr (fused_mask_in_shared(v)) {
    using SharedMaskOp = kernels::MaskedSoftmaxOp<T, v.vec, v.mask, true>;
    static_assert(sizeof(typename SharedMaskOp::MaskPack) == fused_mask_pack_bytes(v.mask, v.dtype),
                  "the planner sizes the shared mask by fused_mask_pack_bytes");
    if constexpr (v.edges)
      return &kernels::fused_block_edges_kernel<SharedMaskOp, v.vec, v.vpt>;
    else
      return &kernels::fused_block_kernel<SharedMaskOp, v.vec, v.vpt>;
  } else if constexpr (v.edges) {
    if constexpr (v.strategy == FusedStrategy::group_rows)
      return &kernels::fused_group_edges_kernel<Op, v.vec, v.group, v.vpt>;
    else if constexpr (v.strategy == FusedStrategy::block_row)
      return &kernels::fused_block_edges_kernel<Op, v.vec, v.vpt>;
    else
      return &kernels::fused_stream_edges_kernel<Op, v.vec, v.vpt, v.block>;
  } else {
    if constexpr (v.strategy == FusedStrategy::group_rows)
      return &kernels::fused_group_kernel<Op, v.vec, v.group, v.vpt>;
    else if constexpr (v.strategy == FusedStrategy::block_row)
      return &kernels::fused_block_kernel<Op, v.vec, v.vpt>;
    else
      return &kernels::fused_stream_kernel<Op, v.vec, v.vpt, v.block>;
  }
}

template <int... I>
constexpr std::array<FusedKernelFn, sizeof...(I)> make_fused_table(std::integer_sequence<int, I...>) {
  return {make_fused_entry<I>()...};
}

const std::array<FusedKernelFn, kFusedVariantCount>& fused_table() {
  static const auto table = make_fused_table(std::make_integer_sequence<int, kFusedVariantCount>{});
  return table;
}

SmemOptIn<kFusedVariantCount> g_smem;  // stream_row's stash, block_row's shared masks, block_row_ahead's next row

bool aligned(const void* p, std::int64_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// The catalogue entry fits the call: the planner picked it for this op,
// mask and dtype, and a vector entry's packs are aligned in every tensor:
// each tensor starts its rows at x's offset within a pack
// (fused_rows_congruent), and an entry without edges has rows of whole
// packs from their start (fused_rows_on_packs).
void check_variant(const FusedArgs& a, const FusedLaunch& l) {
  if (l.variant < 0 || l.variant >= kFusedVariantCount)
    throw Error(Status::invalid_argument, "fused kernel variant " + std::to_string(l.variant) + " is not in the catalogue");
  const FusedVariant& v = kFusedCatalogue[l.variant];
  const MaskKind mask = a.op == FusedOp::masked_softmax ? a.mask_kind : MaskKind::none;
  if (a.op == FusedOp::shard_stats && !aligned(a.stats, 16))
    throw Error(Status::invalid_argument, "shard_stats needs its stats 16-byte aligned");
  if (v.op != a.op || v.mask != mask || v.dtype != a.dtype)
    throw Error(Status::invalid_argument, fused_variant_name(v) + " does not serve " + to_string(a.op) + " (" +
                                              to_string(mask) + ", " + to_string(a.dtype) + ")");
  if (l.geometry.grid < 1 || l.geometry.block < 1)
    throw Error(Status::invalid_argument, "fused launch of " + fused_variant_name(v) + " has an empty grid");
  if (v.vec > 1 && !fused_rows_congruent(a, v.vec))
    throw Error(Status::invalid_argument,
                fused_variant_name(v) + " needs every tensor's rows to start at the same offset within a " +
                    std::to_string(v.vec) + "-element pack as x's (pointers and row strides congruent modulo " +
                    std::to_string(v.vec) + " elements); plan with vector_ok = false");
  const bool shared_mask = fused_mask_in_shared(v);
  if (l.geometry.dynamic_smem < 0 ||
      (l.geometry.dynamic_smem > 0 && v.strategy != FusedStrategy::stream_row &&
       v.strategy != FusedStrategy::cluster_row && v.strategy != FusedStrategy::block_row_ahead && !shared_mask))
    throw Error(Status::invalid_argument, fused_variant_name(v) + " takes no dynamic shared memory (asked for " +
                                              std::to_string(l.geometry.dynamic_smem) + " bytes)");
  if (shared_mask) {
    const std::int64_t need = fused_shared_mask_bytes(v.mask, v.dtype, l.geometry.block, v.vpt);
    if (l.geometry.dynamic_smem < need)
      throw Error(Status::invalid_argument, fused_variant_name(v) + " keeps its mask packs in shared memory: " +
                                                std::to_string(need) + " bytes for blocks of " +
                                                std::to_string(l.geometry.block) + " threads, given " +
                                                std::to_string(l.geometry.dynamic_smem));
  }
  if (v.strategy == FusedStrategy::block_row_ahead) {
    // Each thread's packs of the next row, and the rows in registers.
    const std::int64_t need = l.geometry.block * std::int64_t(v.vpt) * fused_item_bytes(v.op, v.mask, v.dtype);
    if (l.geometry.dynamic_smem < need)
      throw Error(Status::invalid_argument, fused_variant_name(v) + " copies a row ahead into shared memory: " +
                                                std::to_string(need) + " bytes for blocks of " +
                                                std::to_string(l.geometry.block) + " threads, given " +
                                                std::to_string(l.geometry.dynamic_smem));
    if (l.geometry.block * std::int64_t(v.vpt) * v.vec < a.cols)
      throw Error(Status::invalid_argument, fused_variant_name(v) + " holds rows of at most " +
                                                std::to_string(l.geometry.block * std::int64_t(v.vpt) * v.vec) +
                                                " elements in blocks of " + std::to_string(l.geometry.block) +
                                                " threads, given " + std::to_string(a.cols));
  }
  if (v.strategy == FusedStrategy::cluster_row &&
      (l.cluster_blocks < 2 || l.cluster_blocks > kMaxClusterBlocks || l.geometry.grid % l.cluster_blocks != 0))
    throw Error(Status::invalid_argument, fused_variant_name(v) + " needs clusters of 2.." +
                                              std::to_string(kMaxClusterBlocks) + " blocks and a grid of whole ones (" +
                                              std::to_string(l.cluster_blocks) + " blocks a cluster, grid " +
                                              std::to_string(l.geometry.grid) + ")");
  if ((v.strategy == FusedStrategy::stream_row || v.strategy == FusedStrategy::cluster_row) &&
      l.geometry.block != v.block)
    throw Error(Status::invalid_argument, fused_variant_name(v) + " runs blocks of " + std::to_string(v.block) +
                                              " threads, given " + std::to_string(l.geometry.block));
  if (v.edges && (v.strategy == FusedStrategy::block_row || v.strategy == FusedStrategy::block_row_ahead) &&
      l.geometry.block < kFusedBlockEdgesMinThreads)
    throw Error(Status::invalid_argument, fused_variant_name(v) + " needs blocks of at least " +
                                              std::to_string(kFusedBlockEdgesMinThreads) + " threads (a row's edges)");
  if (v.vec > 1 && !v.edges && !fused_rows_on_packs(a, v.vec))
    throw Error(Status::invalid_argument, fused_variant_name(v) + " needs rows of whole " + std::to_string(v.vec) +
                                              "-element packs from a pack boundary (the row length and stride in "
                                              "packs); plan with row_edges = true");
}

// cluster_row's clusters that fit on the device at once and their size:
// the planned size, or the portable 8 where the vendor counts none of it
// (16 blocks need the device's consent). Whole clusters walk the rows, so
// the grid is at most these: a cluster beyond them would start only when
// another has ended every row of its own. Asked once per device, entry,
// size and shared memory.
std::mutex g_clusters_mutex;
std::map<std::tuple<int, int, int, std::int64_t>, std::pair<int, int>> g_clusters;

std::pair<int, int> fitting_clusters(int ordinal, const FusedLaunch& l) {
  const auto key = std::make_tuple(ordinal, l.variant, l.cluster_blocks, l.geometry.dynamic_smem);
  {
    std::lock_guard<std::mutex> lock(g_clusters_mutex);
    const auto it = g_clusters.find(key);
    if (it != g_clusters.end()) return it->second;
  }
  const FusedKernelFn fn = fused_table()[static_cast<std::size_t>(l.variant)];
  const auto count = [&](int size) {
    int clusters = 0;
    DUET_GPU_CHECK(vendor::max_active_clusters(&clusters, reinterpret_cast<const void*>(fn),
                                               dim3(static_cast<unsigned>(l.geometry.block)),
                                               static_cast<size_t>(l.geometry.dynamic_smem), static_cast<unsigned>(size)));
    return clusters;
  };
  int size = l.cluster_blocks;
  int clusters = count(size);
  if (clusters < 1 && size > kPortableClusterBlocks) {
    size = kPortableClusterBlocks;
    clusters = count(size);
  }
  if (clusters < 1)
    throw Error(Status::unsupported, "no cluster of " + std::to_string(l.cluster_blocks) + " x " +
                                         fused_variant_name(kFusedCatalogue[l.variant]) + " fits this device");
  std::lock_guard<std::mutex> lock(g_clusters_mutex);
  g_clusters[key] = {clusters, size};
  return {clusters, size};
}

}  // namespace

void launch_fused(int ordinal, const FusedArgs& args, const FusedLaunch& launch, void* stream) {
  const bool combine = args.op == FusedOp::shard_combine;
  if (!combine) check_variant(args, launch);
  if (args.rows == 0 || args.cols == 0) return;
  // A loss: the cross-entropy forward, and the combine of a shard's
  // statistics where asked (both reduce through the workspace).
  const bool loss = args.op == FusedOp::cross_entropy || (combine && args.loss != nullptr);
  const bool ce = loss || args.op == FusedOp::cross_entropy_backward;
  if (ce && args.workspace == nullptr)
    throw Error(Status::invalid_argument, "cross-entropy needs its workspace (cross_entropy_workspace_bytes)");
  DeviceGuard guard(ordinal);
  const auto s = static_cast<cudaStream_t>(stream);
  // Counting targets: a loss always (the invalid count, and the mean's
  // divisor, which the forward's gradient written in the same pass needs
  // too); the backward for the mean's divisor.
  const bool count = loss || (args.op == FusedOp::cross_entropy_backward && args.reduction == Reduction::mean);
  const auto helper_blocks = [&] {
    return dim3(static_cast<unsigned>(
        std::min<std::int64_t>((args.rows + kernels::kCeHelperBlock - 1) / kernels::kCeHelperBlock, 1024)));
  };
  if (count) {
    DUET_GPU_CHECK(cudaMemsetAsync(args.workspace, 0, kCrossEntropyCountersBytes, s));
    kernels::ce_count_kernel<<<helper_blocks(), dim3(kernels::kCeHelperBlock), 0, s>>>(args);
    DUET_GPU_CHECK(cudaGetLastError());
  }
  if (combine) {
    kernels::shard_combine_kernel<<<helper_blocks(), dim3(kernels::kCeHelperBlock), 0, s>>>(args);
  } else {
    const FusedKernelFn fn = fused_table()[static_cast<std::size_t>(launch.variant)];
    const dim3 grid(static_cast<unsigned>(launch.geometry.grid)), block(static_cast<unsigned>(launch.geometry.block));
    g_smem.allow(ordinal, launch.variant, reinterpret_cast<const void*>(fn), launch.geometry.dynamic_smem);
    FusedArgs k = args;
    k.stash_bytes = launch.geometry.dynamic_smem;  // stream_row's stash: all of it
    k.seq_q_divisor = row_divisor(args.seq_q, args.rows);
    k.heads_divisor = row_divisor(args.heads, args.rows);
    if (kFusedCatalogue[launch.variant].strategy == FusedStrategy::cluster_row) {
      // The planned blocks as whole clusters of the size taken, at most
      // those that fit.
      const auto [clusters, size] = fitting_clusters(ordinal, launch);
      const std::int64_t planned = launch.geometry.grid / size;
      const dim3 cluster_grid(static_cast<unsigned>(std::min<std::int64_t>(planned, clusters) * size));
      DUET_GPU_CHECK(vendor::launch_cluster(fn, cluster_grid, block, static_cast<size_t>(launch.geometry.dynamic_smem),
                                            s, static_cast<unsigned>(size), k));
    } else {
      fn<<<grid, block, static_cast<size_t>(launch.geometry.dynamic_smem), s>>>(k);
    }
  }
  DUET_GPU_CHECK(cudaGetLastError());
  if (loss) {
    if (args.reduction != Reduction::none) {
      kernels::ce_finalize_kernel<<<dim3(1), dim3(kernels::kCeHelperBlock), 0, s>>>(args);
      DUET_GPU_CHECK(cudaGetLastError());
    } else if (args.invalid_targets) {
      DUET_GPU_CHECK(cudaMemcpyAsync(args.invalid_targets, static_cast<char*>(args.workspace) + 4, 4,
                                     cudaMemcpyDeviceToDevice, s));
    }
  }
}

}  // namespace duet::DUET_NS
