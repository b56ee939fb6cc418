#include "fused_dispatch.hpp"

#include <map>
#include <mutex>
#include <tuple>

#include "backend_registry.hpp"
#include "duet/softmax.hpp"
#include "fused_variants.hpp"
#include "log.hpp"

namespace duet::detail {
namespace {

using FusedKey =
    std::tuple<BackendKind, int, FusedOp, DType, std::int64_t, std::int64_t, bool, bool, MaskKind, bool, bool,
               FusedStash, bool, bool, bool, int, int, bool, bool>;

// Plans per device and shape. Rows are part of the key (a plan's grid is
// for its rows), so a run of many shapes could grow the map without bound:
// it is emptied when it reaches kMaxFusedPlans, and plans are copied out.
constexpr std::size_t kMaxFusedPlans = 4096;
std::mutex g_fused_mutex;
std::map<FusedKey, FusedLaunch> g_fused_plans;

FusedLaunch cached_fused_launch(const Device& dev, const FusedShape& s) {
  const PlanOptions options = plan_options();
  const FusedKey key{dev.backend(), dev.ordinal(), s.op,       s.dtype,    s.rows,
                     s.cols,        s.vector_ok,   s.row_edges, s.mask_kind, s.gradient,
                     s.in_place,    options.fused_stash, options.force_stream, options.allow_clusters,
                     options.prefer_clusters, options.min_cluster_blocks, options.max_cluster_blocks,
                     options.fused_ahead, options.force_fused_ahead};
  std::lock_guard<std::mutex> lock(g_fused_mutex);
  auto it = g_fused_plans.find(key);
  if (it != g_fused_plans.end()) return it->second;
  const FusedPlan plan = plan_fused(dev.props(), s, options);
  log::debug("fused plan {} {}x{} {}: {} grid {} block {} smem {} ({})", dev.label(), s.rows, s.cols,
             to_string(s.dtype), plan.kernel, plan.launch.geometry.grid, plan.launch.geometry.block,
             plan.launch.geometry.dynamic_smem, plan.why);
  if (g_fused_plans.size() >= kMaxFusedPlans) g_fused_plans.clear();
  g_fused_plans.emplace(key, plan.launch);
  return plan.launch;
}

}  // namespace

bool fused_vector_ok(const FusedArgs& args) { return fused_rows_congruent(args, fused_vec(args.op, args.dtype)); }

bool fused_row_edges(const FusedArgs& args) {
  return !fused_rows_on_packs(args, fused_vec(args.op, args.dtype));
}

FusedShape fused_shape(const FusedArgs& a) {
  FusedShape s;
  s.op = a.op;
  s.dtype = a.dtype;
  s.rows = a.rows;
  s.cols = a.cols;
  s.gradient = a.op == FusedOp::cross_entropy && a.out != nullptr;
  return s;
}

void launch_fused(const Device& dev, const FusedArgs& args, const FusedShape& shape, void* stream) {
  FusedLaunch launch;
  // The combine is one thread a row, outside the catalogue: nothing to plan.
  if (dev.is_gpu() && args.op != FusedOp::shard_combine) {
    FusedShape s = shape;
    s.vector_ok = fused_vector_ok(args);
    s.row_edges = s.vector_ok && fused_row_edges(args);
    s.in_place = args.out != nullptr && (args.out == args.x || args.out == args.dy);
    launch = cached_fused_launch(dev, s);
  }
  backend(dev.backend()).launch_fused(dev.ordinal(), args, launch, stream);
}

}  // namespace duet::detail
