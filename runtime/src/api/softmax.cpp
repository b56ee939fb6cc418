#include "duet/softmax.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "backend_registry.hpp"
#include "duet/error.hpp"
#include "fused_dispatch.hpp"
#include "log.hpp"
#include "validate.hpp"
#include "workspaces.hpp"

namespace duet {
namespace {

// ------------------------------------------------------------- validation
using detail::Layout;
using detail::layout_of;

// Rows interleaved (a non-last dimension), or with elements apart.
bool interleaved(const SoftmaxCall& c) {
  return c.inner != 1 || c.x_col_stride != 1 || c.out_col_stride != 1 || (c.backward && c.dy_col_stride != 1);
}

// Whether out is of another dtype than x (SoftmaxCall::out_dtype).
bool widening(const SoftmaxCall& c) { return c.out_dtype && *c.out_dtype != c.dtype; }

// The pairs out_dtype serves: f16/bf16 x into float32 y, and back in the backward.
void check_widening(const SoftmaxCall& c) {
  const DType narrow = c.backward ? *c.out_dtype : c.dtype, wide = c.backward ? c.dtype : *c.out_dtype;
  require(narrow != DType::f32 && wide == DType::f32, Status::unsupported, [&] {
    return "out_dtype " + to_string(*c.out_dtype) + " with dtype " + to_string(c.dtype) +
           (c.backward ? ": a backward with out_dtype takes float32 y and dy into an f16 or bf16 dx"
                       : ": a forward with out_dtype takes f16 or bf16 x into a float32 y");
  });
  require(!interleaved(c), Status::unsupported, [] {
    return std::string("out_dtype needs rows of contiguous elements (inner = 1, col strides 1)");
  });
}

// Returns false for an empty call (nothing to do).
bool validate(const Device& dev, const SoftmaxCall& c) {
  // Messages are built only for a failing check (lambdas): this runs on
  // every call.
  constexpr Status bad = Status::invalid_argument;
  require(c.rows >= 0 && c.cols >= 0, bad, [&] {
    return "rows and cols must be >= 0, got " + std::to_string(c.rows) + " x " + std::to_string(c.cols);
  });
  detail::check_dtype(c.dtype);
  if (c.out_dtype) detail::check_dtype(*c.out_dtype);
  require(c.op == Op::softmax || c.op == Op::log_softmax, bad,
          [&] { return "unsupported op code " + std::to_string(static_cast<int>(c.op)); });
  require(c.inner >= 0, bad, [&] { return "inner must be >= 0, got " + std::to_string(c.inner); });
  if (widening(c)) check_widening(c);
  if (c.rows == 0 || c.cols == 0 || c.inner == 0) return false;
  detail::check_cols(c.cols);
  if (c.backward && c.dy == nullptr) throw Error(bad, "dy is a null pointer");
  if (interleaved(c)) {
    detail::check_interleaved_matrices(dev, c.dtype, c.rows, c.cols, c.inner, c.x, c.x_stride, c.x_col_stride,
                                       c.backward ? "y" : "x", c.backward ? c.dy : nullptr, c.dy_stride,
                                       c.dy_col_stride, c.out, c.out_stride, c.out_col_stride,
                                       c.backward ? "dx" : "y");
    return true;
  }
  detail::check_row_matrices(dev, c.dtype, c.out_dtype.value_or(c.dtype), c.rows, c.cols, c.x, c.x_stride,
                             c.backward ? "y" : "x", c.backward ? c.dy : nullptr, c.dy_stride, c.out, c.out_stride,
                             c.backward ? "dx" : "y", !c.caller_checked_devices);
  return true;
}

// The vector kernels serve a call whose tensors start each row at the same
// element offset within a 16-byte pack (RowLayout::congruent); rows not
// whole packs from a pack boundary take their entries with edges. Other
// layouts (a sliced input beside a fresh output) take the scalar kernels.
RowLayout layout_of_call(const SoftmaxCall& c) {
  return row_layout(c.dtype, c.backward, c.rows, c.cols, c.x, c.x_stride, c.dy, c.dy_stride, c.out, c.out_stride);
}

// ------------------------------------------------------------- caches
// (options generation, backend, ordinal, dtype, backward, vector path,
// edges, dense rows, cols, interleaved rows an outer row or 0, few rows,
// lone rows, interleaved outer rows or -1, interleaved rows on 16-byte
// packs)
using PlanKey = std::tuple<int, BackendKind, int, DType, bool, bool, bool, bool, std::int64_t, std::int64_t, bool,
                           bool, std::int64_t, bool>;

// The outer rows an interleaved plan is cached for: interleaved_stream's
// tiles that alternate and interleaved_slabs' slabs a tile follow the
// outer rows (so that their units fill the resident blocks) up to the
// most blocks the device holds at once (32 an SM), past which they are
// the same plan. -1 for plain rows (few_rows and lone_rows classify them).
std::int64_t outer_rows_class(const Device& dev, std::int64_t rows, std::int64_t inner) {
  if (inner <= 0) return -1;
  return std::min<std::int64_t>(rows, std::int64_t(std::max(dev.props().sm_count, 1)) * 32);
}

std::mutex g_plan_mutex;
std::map<PlanKey, Plan> g_plans;
// The options calls plan with, read from the environment at first use;
// each set_plan_options starts a generation of cached plans.
std::optional<PlanOptions> g_options;
int g_options_generation = 0;

const PlanOptions& current_options() {
  // Called with g_plan_mutex held.
  if (!g_options) g_options = plan_options_from_environment();
  return *g_options;
}
std::map<std::tuple<BackendKind, int, int, bool>, KernelAttributes> g_attributes;

KernelAttributes cached_attributes(const Device& dev, int variant, bool finalize) {
  // Called with g_plan_mutex held.
  const auto key = std::make_tuple(dev.backend(), dev.ordinal(), variant, finalize);
  auto it = g_attributes.find(key);
  if (it == g_attributes.end())
    it = g_attributes.emplace(key, detail::backend(dev.backend()).kernel_attributes(dev.ordinal(), variant, finalize)).first;
  return it->second;
}

// The cached plan for a shape class (entries are never erased, so the
// reference stays valid); its grid is for the rows it was planned with.
const Plan& cached_plan(const Device& dev, DType dtype, bool backward, bool vec, bool edges, bool dense,
                        std::int64_t rows, std::int64_t cols, std::int64_t inner = 0, bool wide_packs = false) {
  {
    std::lock_guard<std::mutex> lock(g_plan_mutex);
    const PlanKey key{g_options_generation, dev.backend(), dev.ordinal(), dtype, backward, vec, edges, dense, cols, inner,
                      few_rows(dev.props(), rows), lone_rows(dev.props(), rows), outer_rows_class(dev, rows, inner),
                      wide_packs};
    auto it = g_plans.find(key);
    if (it == g_plans.end()) {
      SoftmaxShape shape{dtype, backward, rows, cols, vec, edges, dense, inner, current_options()};
      shape.wide_packs = wide_packs;
      const AttributeSource attributes = [&](int v, bool f) { return cached_attributes(dev, v, f); };
      const ClusterSource clusters = [&](int variant, int threads, int cluster_blocks, std::int64_t dynamic_smem) {
        return live_max_active_clusters(dev, variant, threads, cluster_blocks, dynamic_smem);
      };
      Plan fresh = plan_softmax(dev.props(), shape, attributes, dev.is_gpu() ? clusters : ClusterSource{});
      if (!fresh.fallback.empty()) log::warn("{}: {}; planned {}", dev.label(), fresh.fallback, variant_name(fresh.kernel));
      log::debug("plan {} {}x{} {}: {} grid {} block {} smem {} ({})", dev.label(), rows, cols, to_string(dtype), variant_name(fresh.kernel), fresh.geometry.grid, fresh.geometry.block,
                 fresh.geometry.dynamic_smem, fresh.why);
      it = g_plans.emplace(key, std::move(fresh)).first;
    }
    return it->second;
  }
}
const Plan& cached_plan(const Device& dev, const SoftmaxCall& c) {
  if (interleaved(c)) {
    const bool packs = interleaved_on_packs(c.dtype, c.backward, c.rows, c.cols, c.inner, c.x, c.x_stride,
                                            c.x_col_stride, c.dy, c.dy_stride, c.dy_col_stride, c.out, c.out_stride,
                                            c.out_col_stride);
    const bool wide = packs && interleaved_on_packs(c.dtype, c.backward, c.rows, c.cols, c.inner, c.x, c.x_stride,
                                                    c.x_col_stride, c.dy, c.dy_stride, c.dy_col_stride, c.out,
                                                    c.out_stride, c.out_col_stride, dtype_vec16(c.dtype));
    return cached_plan(dev, c.dtype, c.backward, packs, false, false, c.rows, c.cols, c.inner, wide);
  }
  const RowLayout l = layout_of_call(c);
  return cached_plan(dev, c.dtype, c.backward, l.congruent, l.congruent && !l.on_packs, l.dense, c.rows, c.cols);
}

// A caller's workspace for a call that needs `needed` bytes, apart from
// the call's matrices.
void check_workspace(const Device& dev, const SoftmaxCall& c, const Workspace& w, std::int64_t needed) {
  const int elem = dtype_size(c.dtype);
  const char* x_name = c.backward ? "y" : "x";
  const char* out_name = c.backward ? "dx" : "y";
  const auto layout = [&](const void* p, std::int64_t stride, std::int64_t col_stride, const char* name) {
    return interleaved(c) ? detail::interleaved_layout(p, c.rows, c.cols, c.inner, stride, col_stride, elem, name)
                          : layout_of(p, c.rows, c.cols, stride, elem, name);
  };
  const Layout x = layout(c.x, c.x_stride, c.x_col_stride, x_name);
  const Layout out = layout(c.out, c.out_stride, c.out_col_stride, out_name);
  const char* size_function = interleaved(c) ? "interleaved_workspace_size" : "workspace_size";
  if (c.backward)
    detail::check_workspace(dev, w, needed, size_function,
                            {{x, x_name}, {out, out_name}, {layout(c.dy, c.dy_stride, c.dy_col_stride, "dy"), "dy"}});
  else
    detail::check_workspace(dev, w, needed, size_function, {{x, x_name}, {out, out_name}});
}

}  // namespace

std::size_t workspace_size(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, bool backward) {
  constexpr Status bad = Status::invalid_argument;
  require(rows >= 0 && cols >= 0, bad, [&] {
    return "rows and cols must be >= 0, got " + std::to_string(rows) + " x " + std::to_string(cols);
  });
  detail::check_dtype(dtype);
  if (rows == 0 || cols == 0) return 0;
  detail::check_cols(cols);
  // The caller's pointers and strides are not known here, so the answer
  // covers every path they may take: scalar, vector with edges, and vector
  // without where the row length is whole packs.
  // (Whether rows lie back to back changes only short rows' kernels, which
  // need no workspace.)
  std::int64_t bytes = grid_for(cached_plan(dev, dtype, backward, false, false, false, rows, cols), rows).workspace_bytes;
  bytes = std::max(bytes,
                   grid_for(cached_plan(dev, dtype, backward, true, true, false, rows, cols), rows).workspace_bytes);
  if (cols % dtype_vec16(dtype) == 0)
    bytes = std::max(
        bytes, grid_for(cached_plan(dev, dtype, backward, true, false, false, rows, cols), rows).workspace_bytes);
  return static_cast<std::size_t>(bytes);
}

std::size_t interleaved_workspace_size(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols,
                                      std::int64_t inner, bool backward) {
  require(rows >= 0 && cols >= 0 && inner >= 0, Status::invalid_argument, [&] {
    return "rows, cols and inner must be >= 0, got " + std::to_string(rows) + " x " + std::to_string(cols) + " x " +
           std::to_string(inner);
  });
  detail::check_dtype(dtype);
  if (rows == 0 || cols == 0 || inner == 0) return 0;
  detail::check_cols(cols);
  // Packs of rows or single ones, whichever the pointers give; inner = 1
  // with unit col strides runs as plain rows.
  std::int64_t bytes = 0;
  for (bool packs : {true, false})
    bytes = std::max(bytes,
                     grid_for(cached_plan(dev, dtype, backward, packs, false, false, rows, cols, inner), rows).workspace_bytes);
  if (inner == 1) bytes = std::max<std::int64_t>(bytes, workspace_size(dev, dtype, rows, cols, backward));
  return static_cast<std::size_t>(bytes);
}

namespace {
// The widening softmax (SoftmaxCall::out_dtype): the fused kernels'.
void run_widening(const Device& dev, const SoftmaxCall& c) {
  FusedArgs a;
  a.op = c.backward ? FusedOp::widening_softmax_backward : FusedOp::widening_softmax;
  a.dtype = c.backward ? *c.out_dtype : c.dtype;  // the 16-bit tensor's
  a.rows = c.rows;
  a.cols = c.cols;
  a.x = c.x;
  a.x_stride = c.x_stride;
  a.out = c.out;
  a.out_stride = c.out_stride;
  if (c.backward) {
    a.dy = c.dy;
    a.dy_stride = c.dy_stride;
  }
  a.log_softmax = c.op == Op::log_softmax ? 1 : 0;
  detail::launch_fused(dev, a, detail::fused_shape(a), c.stream);
}

}  // namespace

Plan plan_for(const Device& dev, const SoftmaxCall& call) {
  if (!validate(dev, call)) throw Error(Status::invalid_argument, "empty call: rows or cols is 0, nothing to plan");
  require(!widening(call), Status::invalid_argument, [] {
    return std::string("a call with out_dtype runs the fused kernels: plan_fused (duet/fused_planner.hpp) plans it");
  });
  Plan plan = cached_plan(dev, call);
  set_grid(plan, call.rows);
  return plan;
}

void run(const Device& dev, const SoftmaxCall& c) {
  if (!validate(dev, c)) return;
  if (widening(c)) return run_widening(dev, c);
  const Plan& plan = cached_plan(dev, c);
  const Grid grid = grid_for(plan, c.rows);
  SoftmaxArgs a{};
  a.x = c.x;
  a.dy = c.dy;
  a.out = c.out;
  a.rows = c.rows;
  a.cols = c.cols;
  a.x_stride = c.x_stride;
  a.dy_stride = c.dy_stride;
  a.out_stride = c.out_stride;
  a.log = c.op == Op::log_softmax ? 1 : 0;
  a.smem_vecs = plan.smem_vecs;
  a.chunks_per_row = plan.chunks_per_row;
  a.chunk_elems = plan.chunk_elems;
  if (family_of(plan.kernel.strategy).work == WorkUnit::inner_tile) {
    a.inner = c.inner;
    a.x_col_stride = c.x_col_stride;
    a.dy_col_stride = c.dy_col_stride;
    a.out_col_stride = c.out_col_stride;
    a.tile = plan.rows_per_block / plan.kernel.vec;
    if (plan.kernel.strategy == Strategy::interleaved_stream) a.tiles_together = plan.tiles_together;  // in smem_vecs' place
  }
  detail::Workspaces::Lease cached;
  if (grid.workspace_bytes > 0) {
    void* workspace = nullptr;
    if (c.workspace) {
      check_workspace(dev, c, *c.workspace, grid.workspace_bytes);
      workspace = c.workspace->data;
    } else {
      cached = detail::workspaces().get(dev, c.stream, grid.workspace_bytes);
      workspace = cached.buffer->data();
    }
    // (SoftmaxArgs' union: the interleaved families' pointer sits beside
    // the interleaved layout, the others' where the layout would be.)
    if (family_of(plan.kernel.strategy).work == WorkUnit::inner_tile)
      a.workspace = workspace;
    else
      a.partials = static_cast<float*>(workspace);
    if (plan.kernel.strategy == Strategy::split_stream) {
      a.counters = static_cast<unsigned*>(workspace);
      a.partials = reinterpret_cast<float*>(static_cast<char*>(workspace) + split_stream_partials_offset(c.rows));
      a.lag = plan.stream_lag;
    }
    if (plan.kernel.strategy == Strategy::grid_row) {
      a.counters = static_cast<unsigned*>(workspace);
      a.partials = reinterpret_cast<float*>(static_cast<char*>(workspace) +
                                            grid_row_counter_bytes(grid.main.grid / plan.chunks_per_row));
    }
  }
  detail::backend(dev.backend())
      .launch_softmax(dev.ordinal(), plan.variant, a, grid.main, grid.finalize, c.stream);
}

namespace {
SoftmaxCall forward_call(Op op, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                         std::int64_t x_stride, void* y, std::int64_t y_stride, void* stream) {
  return {.op = op,
          .dtype = dtype,
          .rows = rows,
          .cols = cols,
          .x = x,
          .x_stride = x_stride,
          .out = y,
          .out_stride = y_stride,
          .stream = stream};
}
SoftmaxCall backward_call(Op op, DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                          std::int64_t y_stride, const void* dy, std::int64_t dy_stride, void* dx,
                          std::int64_t dx_stride, void* stream) {
  SoftmaxCall c = forward_call(op, dtype, rows, cols, y, y_stride, dx, dx_stride, stream);
  c.backward = true;
  c.dy = dy;
  c.dy_stride = dy_stride;
  return c;
}
SoftmaxCall with_workspace(SoftmaxCall c, Workspace workspace) {
  c.workspace = workspace;
  return c;
}
}  // namespace

void softmax(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
             std::int64_t x_stride, void* y, std::int64_t y_stride, void* stream) {
  run(dev, forward_call(Op::softmax, dtype, rows, cols, x, x_stride, y, y_stride, stream));
}
void log_softmax(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                 std::int64_t x_stride, void* y, std::int64_t y_stride, void* stream) {
  run(dev, forward_call(Op::log_softmax, dtype, rows, cols, x, x_stride, y, y_stride, stream));
}
void softmax_backward(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                      std::int64_t y_stride, const void* dy, std::int64_t dy_stride, void* dx, std::int64_t dx_stride,
                      void* stream) {
  run(dev, backward_call(Op::softmax, dtype, rows, cols, y, y_stride, dy, dy_stride, dx, dx_stride, stream));
}
void log_softmax_backward(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                          std::int64_t y_stride, const void* dy, std::int64_t dy_stride, void* dx,
                          std::int64_t dx_stride, void* stream) {
  run(dev, backward_call(Op::log_softmax, dtype, rows, cols, y, y_stride, dy, dy_stride, dx, dx_stride, stream));
}

void softmax(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
             std::int64_t x_stride, void* y, std::int64_t y_stride, Workspace workspace, void* stream) {
  run(dev, with_workspace(forward_call(Op::softmax, dtype, rows, cols, x, x_stride, y, y_stride, stream), workspace));
}
void log_softmax(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                 std::int64_t x_stride, void* y, std::int64_t y_stride, Workspace workspace, void* stream) {
  run(dev,
      with_workspace(forward_call(Op::log_softmax, dtype, rows, cols, x, x_stride, y, y_stride, stream), workspace));
}
void softmax_backward(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                      std::int64_t y_stride, const void* dy, std::int64_t dy_stride, void* dx, std::int64_t dx_stride,
                      Workspace workspace, void* stream) {
  run(dev, with_workspace(
               backward_call(Op::softmax, dtype, rows, cols, y, y_stride, dy, dy_stride, dx, dx_stride, stream),
               workspace));
}
void log_softmax_backward(const Device& dev, DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                          std::int64_t y_stride, const void* dy, std::int64_t dy_stride, void* dx,
                          std::int64_t dx_stride, Workspace workspace, void* stream) {
  run(dev, with_workspace(
               backward_call(Op::log_softmax, dtype, rows, cols, y, y_stride, dy, dy_stride, dx, dx_stride, stream),
               workspace));
}

PlanOptions plan_options() {
  std::lock_guard<std::mutex> lock(g_plan_mutex);
  return current_options();
}

void set_plan_options(const PlanOptions& options) {
  std::lock_guard<std::mutex> lock(g_plan_mutex);
  g_options = options;
  ++g_options_generation;
}

KernelAttributes live_kernel_attributes(const Device& dev, int variant, bool finalize) {
  std::lock_guard<std::mutex> lock(g_plan_mutex);
  return cached_attributes(dev, variant, finalize);
}

int live_max_active_clusters(const Device& dev, int variant, int threads, int cluster_blocks,
                             std::int64_t dynamic_smem) {
  return detail::backend(dev.backend()).max_active_clusters(dev.ordinal(), variant, threads, cluster_blocks,
                                                            dynamic_smem);
}

int live_occupancy(const Device& dev, int variant, bool finalize, int threads, std::int64_t dynamic_smem) {
  return detail::backend(dev.backend()).occupancy_blocks_per_sm(dev.ordinal(), variant, finalize, threads, dynamic_smem);
}

DType dtype_from_string(const std::string& s) {
  if (s == "f32" || s == "float32" || s == "float") return DType::f32;
  if (s == "f16" || s == "float16" || s == "half") return DType::f16;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  throw Error(Status::invalid_argument, "unknown dtype '" + s + "' (expected f32, f16 or bf16)");
}

}  // namespace duet
