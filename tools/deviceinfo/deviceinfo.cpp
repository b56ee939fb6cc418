// deviceinfo: every device of every built backend, in the aligned
// `key: value` style of deviceQuery / hipInfo, or as JSON; and the launch
// plan duet would pick for a shape (--plan), also for devices described by a
// property file (--props) on a machine without them.
//
// Exit codes: 0 success (zero GPUs included), 1 API error, 2 bad usage
// (kExitCodes below says which is which).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "duet/config.hpp"
#include "duet/device.hpp"
#include "duet/error.hpp"
#include "duet/fused_planner.hpp"
#include "fused_variants.hpp"
#include "duet/kernel_resources.hpp"
#include "duet/planner.hpp"
#include "duet/props_json.hpp"
#include "duet/softmax.hpp"
#include "../tool_common.hpp"
#include "host/host_interleaved.hpp"
#include "host/work_split.hpp"

namespace {

using json = nlohmann::json;
using duet::printable;

constexpr const char* kExitCodes =
    "  0  success, zero GPUs included\n"
    "  1  API error: a property file duet refuses or cannot read, a failed device query, no kernel that\n"
    "     fits the device, no recorded compiler report to plan a file's GPU with, --require-gpu without one\n"
    "  2  bad usage: an unknown option or a malformed value, a --props path that is not a regular file,\n"
    "     a --device index past the devices listed, a --plan shape the planner refuses";

// A --plan shape the planner refuses, or a --device past the list: bad usage.
struct UsageError {
  std::string message;
};

struct Entry {
  std::string label;                 // "cuda:0" or the property file
  duet::DeviceProps props;
  std::optional<duet::Device> live;  // present for a live device
};

// CUDA encodes 13.0 as 13000 (1000 x major + 10 x minor); HIP encodes 5.2.21153
// as 50221153 (10000000 x major + 100000 x minor + patch).
std::string version_string(int v, duet::BackendKind backend) {
  if (v <= 0) return "n/a";
  if (backend == duet::BackendKind::hip)
    return std::to_string(v / 10000000) + "." + std::to_string(v / 100000 % 100) + "." + std::to_string(v % 100000);
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string bytes_string(std::int64_t b) {
  char buf[64];
  if (b >= (std::int64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%lld (%.1f GiB)", static_cast<long long>(b), b / 1073741824.0);
  else if (b >= (1 << 20)) std::snprintf(buf, sizeof buf, "%lld (%.1f MiB)", static_cast<long long>(b), b / 1048576.0);
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%lld (%.1f KiB)", static_cast<long long>(b), b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(b));
  return buf;
}

void print_kv(const std::string& key, const std::string& value) {
  std::printf("  %-28s %s\n", (key + ":").c_str(), printable(value).c_str());
}

void print_props(int index, const Entry& e) {
  const auto& d = e.props;
  std::printf("Device %d: \"%s\" (%s)\n", index, printable(d.name).c_str(), printable(e.label).c_str());
  print_kv("vendor", std::string(duet::to_string(d.vendor)));
  print_kv("backend", std::string(duet::to_string(d.backend)));
  print_kv("arch", d.arch);
  print_kv("family", d.family);
  if (d.is_gpu()) print_kv("compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
  print_kv(d.is_gpu() ? "sm_count" : "cores", std::to_string(d.sm_count));
  print_kv(d.is_gpu() ? "warp_size" : "simd_float_lanes", std::to_string(d.warp_size));
  if (d.is_gpu()) {
    print_kv("regs_per_sm", std::to_string(d.regs_per_sm));
    print_kv("regs_per_block", std::to_string(d.regs_per_block));
    if (d.vendor == duet::Vendor::amd) print_kv("register_pool", std::string(duet::to_string(d.register_pool)));
    print_kv("max_threads_per_block", std::to_string(d.max_threads_per_block));
    print_kv("max_threads_per_sm", std::to_string(d.max_threads_per_sm));
    print_kv("max_blocks_per_sm", std::to_string(d.max_blocks_per_sm));
    print_kv("cluster_launch", d.cluster_launch ? "yes" : "no");
    print_kv("smem_per_sm", bytes_string(d.smem_per_sm));
    print_kv("smem_per_block", bytes_string(d.smem_per_block));
    print_kv("smem_per_block_optin", bytes_string(d.smem_per_block_optin));
    print_kv("smem_reserved_per_block", bytes_string(d.smem_reserved_per_block));
    print_kv("l2_bytes", bytes_string(d.l2_bytes));
    print_kv("memory_bytes", bytes_string(d.memory_bytes));
    print_kv("memory_bus_width_bits", std::to_string(d.memory_bus_width_bits));
    print_kv("memory_clock_khz", std::to_string(d.memory_clock_khz));
    char bw[32];
    std::snprintf(bw, sizeof bw, "%.0f GB/s", d.peak_bandwidth_gbps());
    print_kv("peak_bandwidth", bw);
    print_kv("driver_version", version_string(d.driver_version, d.backend));
    print_kv("runtime_version", version_string(d.runtime_version, d.backend));
  } else {
    print_kv("simd_width_bytes", std::to_string(d.simd_width_bytes));
    if (e.live) print_kv("threads_in_use", std::to_string(duet::host_threads()));
    print_kv("l1d_bytes", bytes_string(d.l1d_bytes));
    print_kv("l2_bytes", bytes_string(d.l2_bytes));
    print_kv("l3_bytes", bytes_string(d.l3_bytes));
    print_kv("memory_bytes", bytes_string(d.memory_bytes));
  }
  print_kv("source", d.source);
}

struct PlanRequest {
  std::string text;  // as given: "4096x8192:bf16"
  std::int64_t rows = 0, cols = 0;
  std::int64_t inner = 0;  // ROWSxCOLSxINNER: softmax over the middle dimension (interleaved rows)
  duet::DType dtype = duet::DType::f32;
};

PlanRequest parse_plan(const std::string& s) {
  static const std::regex re(R"(([0-9]{1,19})x([0-9]{1,19})(?:x([0-9]{1,19}))?(?::(\w+))?)");
  std::smatch m;
  if (!std::regex_match(s, m, re))
    throw CLI::ValidationError("--plan", "expected ROWSxCOLS[xINNER][:dtype], e.g. 4096x8192:bf16, got '" + s + "'");
  PlanRequest p;
  p.text = s;
  for (auto [field, value] :
       {std::pair{&p.rows, m.str(1)}, std::pair{&p.cols, m.str(2)}, std::pair{&p.inner, m.str(3)}}) {
    if (value.empty()) continue;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), *field);
    if (ec != std::errc() || end != value.data() + value.size())
      throw CLI::ValidationError("--plan", "size " + value + " in '" + s + "' is past 2^63 - 1");
  }
  if (m[4].matched) {
    try {
      p.dtype = duet::dtype_from_string(m[4]);
    } catch (const duet::Error& e) {
      throw CLI::ValidationError("--plan", e.what());
    }
  }
  return p;
}

// --device: a non-negative index, in words where it is not one.
int parse_device_index(const std::string& s) {
  int index = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), index);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || index < 0)
    throw CLI::ValidationError("--device", "expected a device index 0, 1, ... (as listed), got '" + s + "'");
  return index;
}

// --props: a regular file (links followed), checked before anything opens it.
std::string regular_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return "'" + path + "' does not exist";
  if (!std::filesystem::is_regular_file(status)) return "'" + path + "' is not a regular file";
  return {};
}

json occupancy_json(const duet::Occupancy& o) {
  return {{"blocks_per_sm", o.blocks_per_sm}, {"limiter", std::string(duet::to_string(o.limiter))},
          {"by_registers", o.by_registers},    {"by_shared_memory", o.by_shared_memory},
          {"by_warps", o.by_warps},            {"by_blocks", o.by_blocks},
          {"note", o.note}};
}

// Where a plan's kernel attributes come from: a live device's own
// (cudaFuncGetAttributes); for a GPU property file the compiler's reports
// recorded at build time; for a host property file this build's host
// kernels, the ones any CPU runs.
duet::AttributeSource attribute_source(const Entry& e) {
  if (e.props.is_gpu() && !e.live) {
    const duet::DeviceProps props = e.props;
    return [props](int v, bool f) { return duet::recorded_kernel_attributes(props, v, f); };
  }
  const duet::Device dev = e.live ? *e.live : duet::Device(duet::BackendKind::host, 0);
  return [dev](int v, bool f) { return duet::live_kernel_attributes(dev, v, f); };
}

json plan_entry(const Entry& e, const PlanRequest& req, bool backward) {
  json j = {{"device", printable(e.label)},
            {"rows", req.rows},
            {"cols", req.cols},
            {"dtype", duet::to_string(req.dtype)},
            {"backward", backward}};
  if (req.inner > 0) j["inner"] = req.inner;
  // Nothing to launch: the API returns at once (README, "Semantics").
  if (req.rows == 0 || req.cols == 0) {
    j["noop"] = true;
    j["why"] = std::string(req.rows == 0 ? "0 rows" : "0 columns") + ": a no-op, nothing is launched";
    return j;
  }
  // Dense rows from the start of an allocation, as a contiguous tensor:
  // the vector kernels, with edges for row lengths off the pack grid (with
  // INNER, the middle dimension of a contiguous ROWS x COLS x INNER tensor).
  // With the switches a call plans with.
  duet::SoftmaxShape shape{req.dtype, backward, req.rows, req.cols, true, false, true, req.inner, duet::plan_options()};
  shape.wide_packs = req.inner % duet::dtype_vec16(req.dtype) == 0;
  duet::Plan p;
  try {
    // On a live GPU the vendor's count of active clusters, as a call's plan.
    duet::ClusterSource clusters;
    if (e.live && e.live->is_gpu()) {
      const duet::Device dev = *e.live;
      clusters = [dev](int v, int threads, int blocks, std::int64_t smem) {
        return duet::live_max_active_clusters(dev, v, threads, blocks, smem);
      };
    }
    p = duet::plan_softmax(e.props, shape, attribute_source(e), clusters);
  } catch (const duet::Error& err) {
    if (err.status() != duet::Status::invalid_argument) throw;
    throw UsageError{"--plan " + req.text + ": " + err.what()};
  }
  j.update(json{{"noop", false},
            {"variant", duet::variant_name(p.kernel)},
            {"why", p.why},
            {"registers_per_thread", p.attributes.regs_per_thread},
            {"agprs_per_thread", p.attributes.agprs_per_thread},
            {"static_smem_bytes", p.attributes.static_smem_bytes},
            {"dynamic_smem_bytes", p.launch.dynamic_smem_bytes},
            {"attributes_from", p.attributes.source},
            {"exact", occupancy_json(p.exact)},
            {"tutorial", occupancy_json(p.tutorial)},
            {"grid", p.geometry.grid},
            {"block", p.geometry.block},
            {"rows_per_block", p.rows_per_block},
            {"resident_blocks", p.resident_blocks}});
  if (!p.fallback.empty()) j["fallback"] = p.fallback;
  if (p.kernel.strategy == duet::Strategy::split_row || p.kernel.strategy == duet::Strategy::split_stream) {
    j["split"] = {{"chunks_per_row", p.chunks_per_row},
                  {"chunk_elems", p.chunk_elems},
                  {"workspace_bytes", p.workspace_bytes}};
    if (p.kernel.strategy == duet::Strategy::split_stream) j["split"]["lag_chunks"] = p.stream_lag;
  }
  if (p.kernel.strategy == duet::Strategy::grid_row && p.chunks_per_row > 0) {
    j["grid_row"] = {{"blocks_per_row", p.chunks_per_row},
                     {"slice_elems", p.chunk_elems},
                     {"smem_vecs_per_thread", p.smem_vecs},
                     {"groups", p.geometry.grid / p.chunks_per_row},
                     {"workspace_bytes", p.workspace_bytes}};
  }
  if (duet::family_of(p.kernel.strategy).work == duet::WorkUnit::inner_tile) {
    j["interleaved"] = {{"tile_rows", p.rows_per_block}, {"tiles_per_outer_row", p.inner_tiles}};
    if (p.kernel.strategy == duet::Strategy::interleaved_smem) j["interleaved"]["smem_packs_per_thread"] = p.smem_vecs;
    if (p.kernel.strategy == duet::Strategy::interleaved_ring) {
      j["interleaved"]["ring_buffers"] = p.kernel.vpt;
      j["interleaved"]["ring_packs_per_thread"] = p.smem_vecs / p.kernel.vpt;
    }
    if (p.kernel.strategy == duet::Strategy::interleaved_stream) {
      j["interleaved"]["chunks_per_tile"] = p.chunks_per_row;
      j["interleaved"]["chunk_positions"] = p.chunk_elems;
      j["interleaved"]["tiles_together"] = p.tiles_together;
      j["interleaved"]["lag_chunks"] = p.stream_lag;
      j["interleaved"]["workspace_bytes"] = p.workspace_bytes;
    }
    if (p.kernel.strategy == duet::Strategy::interleaved_slabs) {
      j["interleaved"]["slabs_per_tile"] = p.chunks_per_row;
      j["interleaved"]["slab_positions"] = p.chunk_elems;
      j["interleaved"]["slab_bundles"] = duet::interleaved_slab_bundles(p.chunks_per_row);
      j["interleaved"]["workspace_bytes"] = p.workspace_bytes;
    }
  }
  if (duet::family_of(p.kernel.strategy).cluster_launch) {
    j["cluster"] = {{"blocks", p.chunks_per_row}, {"slice_elems", p.chunk_elems}};
    if (p.smem_vecs > 0) j["cluster"]["smem_vecs_per_thread"] = p.smem_vecs;
    if (e.live && e.live->is_gpu())
      j["cluster"]["vendor_max_active_clusters"] = duet::live_max_active_clusters(
          *e.live, p.variant, p.launch.threads_per_block, p.chunks_per_row, p.launch.dynamic_smem_bytes);
  }
  if (!e.props.is_gpu() && p.kernel.strategy == duet::Strategy::interleaved_rows) {
    // A task a run of neighbouring rows of one outer row.
    const std::int64_t lanes = duet::host::kInterleavedLanes;
    j["host"] = {{"simd", e.props.family},
                 {"threads", e.live ? duet::host_threads() : e.props.sm_count},
                 {"tasks", req.rows * ((req.inner + lanes - 1) / lanes)},
                 {"rows_per_task", lanes}};
  } else if (!e.props.is_gpu()) {
    // The host runs SIMD rows on its thread pool: how this call is cut up.
    const auto split = duet::host::host_work_split(req.rows, req.cols, duet::dtype_size(req.dtype), backward,
                                                   e.live ? duet::host_threads() : e.props.sm_count);
    j["host"] = {{"simd", e.props.family},         {"threads", split.threads},
                 {"tasks", split.tasks},           {"rows_per_task", split.rows_per_task},
                 {"parts_per_row", split.parts_per_row}, {"part_elems", split.part_elems}};
  }
  if (e.live && e.live->is_gpu())
    j["vendor_occupancy"] = duet::live_occupancy(*e.live, p.variant, false, p.launch.threads_per_block,
                                                 p.launch.dynamic_smem_bytes);
  return j;
}

// The fused operations --op names: which FusedOp, mask and gradient.
struct FusedRequest {
  std::string name;  // as given
  duet::FusedShape shape;
};

std::optional<FusedRequest> fused_request(const std::string& op, bool backward) {
  FusedRequest r;
  r.name = op;
  auto& s = r.shape;
  if (op == "softmax") return std::nullopt;
  if (op == "masked_softmax" || op == "causal_softmax" || op == "additive_masked_softmax" || op == "scaled_softmax") {
    s.op = backward ? duet::FusedOp::masked_softmax_backward : duet::FusedOp::masked_softmax;
    s.mask_kind = op == "causal_softmax"            ? duet::MaskKind::causal
                  : op == "additive_masked_softmax" ? duet::MaskKind::additive
                  : op == "scaled_softmax"          ? duet::MaskKind::none
                                                    : duet::MaskKind::boolean;
  } else if (op == "widening_softmax") {  // f16/bf16 into float32, the cast fused
    s.op = backward ? duet::FusedOp::widening_softmax_backward : duet::FusedOp::widening_softmax;
  } else if (op == "shard_stats" || op == "shard_softmax") {  // vocabulary-parallel halves
    s.op = op == "shard_stats" ? duet::FusedOp::shard_stats : duet::FusedOp::shard_softmax;
  } else {  // cross_entropy (the forward writing the gradient; _in_place: into the logits), cross_entropy_forward
    s.op = backward ? duet::FusedOp::cross_entropy_backward : duet::FusedOp::cross_entropy;
    s.gradient = !backward && op != "cross_entropy_forward";
    s.in_place = !backward && op == "cross_entropy_in_place";
  }
  return r;
}

json fused_plan_entry(const Entry& e, const PlanRequest& req, const FusedRequest& f) {
  if (req.inner > 0) throw UsageError{"--plan " + req.text + ": ROWSxCOLSxINNER plans softmax only, not --op " + f.name};
  duet::FusedShape shape = f.shape;
  shape.dtype = req.dtype;
  shape.rows = req.rows;
  shape.cols = req.cols;
  // Dense rows from the start of an allocation: every tensor's rows at the
  // same offsets, so the vector kernels (with edges for odd lengths).
  shape.vector_ok = true;
  json j = {{"device", printable(e.label)}, {"rows", req.rows},          {"cols", req.cols},
            {"dtype", duet::to_string(req.dtype)}, {"op", duet::to_string(shape.op)},
            {"mask", duet::to_string(shape.mask_kind)}, {"gradient", shape.gradient}, {"in_place", shape.in_place},
            {"backward", shape.op == duet::FusedOp::masked_softmax_backward ||
                             shape.op == duet::FusedOp::cross_entropy_backward ||
                             shape.op == duet::FusedOp::widening_softmax_backward}};
  if (req.rows == 0 || req.cols == 0) {
    j["noop"] = true;
    j["why"] = std::string(req.rows == 0 ? "0 rows" : "0 columns") + ": a no-op, nothing is launched";
    return j;
  }
  if (!e.props.is_gpu()) {
    j["noop"] = false;
    j["host"] = true;
    j["why"] = "the host backend runs its own row loops: no GPU plan";
    return j;
  }
  duet::FusedPlan p;
  try {
    p = duet::plan_fused(e.props, shape, duet::plan_options());
  } catch (const duet::Error& err) {
    if (err.status() != duet::Status::invalid_argument) throw;
    throw UsageError{"--plan " + req.text + ": " + err.what()};
  }
  j.update(json{{"noop", false},
                {"variant", p.kernel},
                {"variant_index", p.launch.variant},
                {"why", p.why},
                {"grid", p.launch.geometry.grid},
                {"block", p.launch.geometry.block},
                {"dynamic_smem_bytes", p.launch.geometry.dynamic_smem},
                {"cluster_blocks", p.launch.cluster_blocks}});
  return j;
}

void print_fused_plan(const json& j) {
  std::string what = j["op"].get<std::string>();
  if (j["mask"] != "none") what += " (mask " + j["mask"].get<std::string>() + ")";
  if (j["gradient"].get<bool>())
    what += j["in_place"].get<bool>() ? " with the gradient into the logits" : " with the gradient";
  std::printf("Plan for %s: %lld x %lld %s %s\n", j["device"].get<std::string>().c_str(), j["rows"].get<long long>(),
              j["cols"].get<long long>(), j["dtype"].get<std::string>().c_str(), what.c_str());
  if (j["noop"].get<bool>()) {
    print_kv("launch", "none (" + j["why"].get<std::string>() + ")");
    return;
  }
  if (j.contains("host")) {
    print_kv("kernel", j["why"].get<std::string>());
    return;
  }
  print_kv("variant", j["variant"].get<std::string>());
  print_kv("why", j["why"].get<std::string>());
  std::string launch =
      "grid " + std::to_string(j["grid"].get<long long>()) + " x block " + std::to_string(j["block"].get<int>());
  if (j["dynamic_smem_bytes"].get<long long>() > 0)
    launch += ", " + std::to_string(j["dynamic_smem_bytes"].get<long long>()) + " B dynamic shared memory";
  if (j["cluster_blocks"].get<int>() > 0) launch += ", clusters of " + std::to_string(j["cluster_blocks"].get<int>());
  print_kv("launch", launch);
}

void print_plan(const json& j) {
  if (j.contains("op")) {
    print_fused_plan(j);
    return;
  }
  const std::string inner =
      j.contains("inner") ? " x " + std::to_string(j["inner"].get<long long>()) + " (over the middle dimension)" : "";
  std::printf("Plan for %s: %lld x %lld%s %s%s\n", j["device"].get<std::string>().c_str(), j["rows"].get<long long>(),
              j["cols"].get<long long>(), inner.c_str(), j["dtype"].get<std::string>().c_str(),
              j["backward"].get<bool>() ? " backward" : "");
  if (j["noop"].get<bool>()) {
    print_kv("launch", "none (" + j["why"].get<std::string>() + ")");
    return;
  }
  if (j.contains("host")) {
    const auto& h = j["host"];
    print_kv("kernel", j.contains("inner") ? std::string("interleaved rows, a step across neighbouring rows")
                                           : "SIMD rows (" + h["simd"].get<std::string>() + ")");
    print_kv("threads", std::to_string(h["threads"].get<int>()));
    if (j.contains("inner"))
      print_kv("tasks", std::to_string(h["tasks"].get<long long>()) + " of up to " +
                            std::to_string(h["rows_per_task"].get<long long>()) + " neighbouring interleaved rows");
    else if (h["parts_per_row"].get<long long>() > 1)
      print_kv("tasks", std::to_string(h["tasks"].get<long long>()) + ": each row in " +
                            std::to_string(h["parts_per_row"].get<long long>()) + " ranges of " +
                            std::to_string(h["part_elems"].get<long long>()) + " elements, two phases");
    else
      print_kv("tasks", std::to_string(h["tasks"].get<long long>()) + " of " +
                            std::to_string(h["rows_per_task"].get<long long>()) + " rows");
    return;
  }
  print_kv("variant", j["variant"].get<std::string>());
  print_kv("why", j["why"].get<std::string>());
  if (j.contains("fallback")) print_kv("fallback", j["fallback"].get<std::string>());
  std::string regs = std::to_string(j["registers_per_thread"].get<int>());
  if (j["agprs_per_thread"].get<int>() > 0) regs += " VGPRs + " + std::to_string(j["agprs_per_thread"].get<int>()) + " AGPRs";
  print_kv("registers_per_thread", regs + " (" + j["attributes_from"].get<std::string>() + ")");
  print_kv("shared_memory", std::to_string(j["static_smem_bytes"].get<long long>()) + " B static + " +
                                std::to_string(j["dynamic_smem_bytes"].get<long long>()) + " B dynamic");
  for (const char* model : {"exact", "tutorial"}) {
    const auto& o = j[model];
    print_kv(std::string(model) + "_occupancy",
             std::to_string(o["blocks_per_sm"].get<int>()) + " blocks/SM, limited by " + o["limiter"].get<std::string>() +
                 " (regs " + std::to_string(o["by_registers"].get<int>()) + ", smem " +
                 std::to_string(o["by_shared_memory"].get<int>()) + ", warps " + std::to_string(o["by_warps"].get<int>()) +
                 ", blocks " + std::to_string(o["by_blocks"].get<int>()) + ")");
  }
  if (j.contains("vendor_occupancy")) print_kv("vendor_occupancy", std::to_string(j["vendor_occupancy"].get<int>()) + " blocks/SM");
  print_kv("launch", "grid " + std::to_string(j["grid"].get<long long>()) + " x block " +
                         std::to_string(j["block"].get<int>()) + " (" + std::to_string(j["rows_per_block"].get<int>()) +
                         " rows a block)");
  if (j.contains("cluster")) {
    std::string line = std::to_string(j["cluster"]["blocks"].get<int>()) + " blocks a row, " +
                       std::to_string(j["cluster"]["slice_elems"].get<long long>()) + " elements each";
    if (j["cluster"].contains("vendor_max_active_clusters"))
      line += "; the device holds " + std::to_string(j["cluster"]["vendor_max_active_clusters"].get<int>()) +
              " such clusters at once (vendor)";
    print_kv("cluster", line);
  }
  if (j.contains("split"))
    print_kv("split", std::to_string(j["split"]["chunks_per_row"].get<int>()) + " chunks of " +
                          std::to_string(j["split"]["chunk_elems"].get<long long>()) + " elements, workspace " +
                          std::to_string(j["split"]["workspace_bytes"].get<long long>()) + " B" +
                          (j["split"].contains("lag_chunks")
                               ? ", second pass " + std::to_string(j["split"]["lag_chunks"].get<long long>()) +
                                     " chunks behind the first"
                               : std::string()));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"deviceinfo: duet's view of every device, and the launch plan it would pick"};
  duet_tools::describe(app, "deviceinfo", kExitCodes);
  bool as_json = false, require_gpu = false, backward = false;
  std::optional<std::string> device_text;
  std::vector<std::string> props_files;
  std::vector<std::string> plans;
  app.add_flag("--json", as_json, "print JSON (stable snake_case keys) instead of text");
  app.add_option("--device", device_text, "only device N (index in the list)");
  app.add_flag("--require-gpu", require_gpu, "exit 1 when no GPU is found");
  // Not comma-split: a file name may hold a comma. Repeat the option instead.
  app.add_option("--props", props_files,
                 "describe a device that is not present, from a JSON property file (repeatable)")
      ->check(CLI::Validator(regular_file, "FILE"));
  app.add_option("--plan", plans, "print the launch plan for ROWSxCOLS[:f32|f16|bf16] (repeatable, or a comma list); ROWSxCOLSxINNER plans "
                 "softmax over the middle dimension of a contiguous tensor of those sizes")
      ->delimiter(',');
  app.add_flag("--backward", backward, "plan the backward kernels");
  std::string op_name = "softmax";
  app.add_option("--op", op_name,
                 "the operation --plan plans: softmax (default); masked_softmax (a boolean mask), causal_softmax, "
                 "additive_masked_softmax, scaled_softmax (no mask); cross_entropy (the forward writing the "
                 "gradient), cross_entropy_in_place (the same, the gradient into the logits), cross_entropy_forward "
                 "(the loss only); shard_stats, shard_softmax (a vocabulary shard's statistics and "
                 "normalize passes); widening_softmax (f16 or bf16, the plan's dtype, into float32: torch's dtype=); "
                 "--backward plans the backward of those that have one")
      ->check(CLI::IsMember({"softmax", "masked_softmax", "causal_softmax", "additive_masked_softmax", "scaled_softmax",
                             "cross_entropy", "cross_entropy_in_place", "cross_entropy_forward", "shard_stats",
                             "shard_softmax", "widening_softmax"}));
  try {
    app.parse(argc, argv);
    if (backward && op_name == "cross_entropy_in_place")
      throw UsageError{"--op cross_entropy_in_place has no backward (its forward writes the gradient; the "
                       "backward from lse is --op cross_entropy --backward)"};
    if (backward && op_name.rfind("shard_", 0) == 0)
      throw UsageError{"--op " + op_name + " has no backward (the cross-entropy gradient of a shard is "
                       "--op cross_entropy --backward)"};
    std::vector<PlanRequest> requests;
    for (const auto& p : plans) requests.push_back(parse_plan(p));
    const int device_index = device_text ? parse_device_index(*device_text) : -1;  // -1: every device

    std::vector<Entry> entries;
    for (const auto& f : props_files) entries.push_back({f, duet::load_props_file(f), std::nullopt});
    const bool only_files = !props_files.empty();
    if (!only_files)
      for (const auto& d : duet::devices()) entries.push_back({d.label(), d.props(), d});
    if (device_index >= 0) {
      if (static_cast<std::size_t>(device_index) >= entries.size())
        throw UsageError{"--device " + std::to_string(device_index) + ": no such device (" +
                         std::to_string(entries.size()) + " listed" +
                         (entries.empty() ? ")" : ", 0 to " + std::to_string(entries.size() - 1) + ")")};
      entries = {entries[static_cast<std::size_t>(device_index)]};
    }
    const int gpus = duet::gpu_count();
    if (require_gpu && gpus == 0) {
      std::string why;
      for (const auto& b : duet::backend_info())
        if (b.kind != duet::BackendKind::host) why += " " + std::string(duet::to_string(b.kind)) + ": " + b.no_device_reason + ";";
      std::fprintf(stderr, "deviceinfo: no GPU found (--require-gpu);%s\n", printable(why).c_str());
      return duet_tools::kApiError;
    }

    json out = {{"devices", json::array()}, {"backends", json::array()}, {"plans", json::array()}};
    std::vector<json> plan_json;
    for (const auto& e : entries) {
      // Live devices: plan the GPUs only, not the host beside them. A
      // property file is planned whatever this machine has.
      const bool host_beside_gpus = !only_files && !e.props.is_gpu() && gpus > 0 && device_index < 0;
      if (!host_beside_gpus)
        for (const auto& r : requests) {
          const auto fused = fused_request(op_name, backward);
          plan_json.push_back(fused ? fused_plan_entry(e, r, *fused) : plan_entry(e, r, backward));
        }
    }

    const auto infos = duet::backend_info();
    if (as_json) {
      for (const auto& e : entries) {
        json d = json::parse(duet::props_to_json(e.props));
        d["label"] = printable(e.label);
        out["devices"].push_back(d);
      }
      for (const auto& b : infos)
        out["backends"].push_back({{"backend", duet::to_string(b.kind)},
                                   {"device_count", b.device_count},
                                   {"runtime_version", b.runtime_version},
                                   {"driver_version", b.driver_version},
                                   {"targets", b.targets},
                                   {"no_device_reason", printable(b.no_device_reason)}});
      for (auto& p : plan_json) out["plans"].push_back(p);
      out["version"] = DUET_VERSION;
      std::cout << out.dump(2) << "\n";
      return duet_tools::kOk;
    }
    for (std::size_t i = 0; i < entries.size(); ++i) {
      print_props(static_cast<int>(i), entries[i]);
      std::printf("\n");
    }
    for (const auto& p : plan_json) {
      print_plan(p);
      std::printf("\n");
    }
    std::string summary;
    for (const auto& b : infos) {
      summary += (summary.empty() ? "" : ", ") + std::string(duet::to_string(b.kind));
      if (b.kind != duet::BackendKind::host)
        summary += " (runtime " + version_string(b.runtime_version, b.kind) + ", driver " +
                   version_string(b.driver_version, b.kind) +
                   ", targets " + b.targets + ", " + std::to_string(b.device_count) + " device" +
                   (b.device_count == 1 ? "" : "s") + ")";
    }
    std::printf("duet %s: backends %s; %d GPU%s, %zu device%s listed\n", DUET_VERSION, summary.c_str(), gpus,
                gpus == 1 ? "" : "s", entries.size(), entries.size() == 1 ? "" : "s");
    return duet_tools::kOk;
  } catch (const CLI::ParseError& e) {
    return duet_tools::usage_error(app, "deviceinfo", e);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "deviceinfo: %s\nRun with --help for more information.\n", printable(e.message).c_str());
    return duet_tools::kUsage;
  } catch (const std::exception& e) {  // duet::Error and anything else: one line, never an abort
    std::fprintf(stderr, "deviceinfo: %s\n", printable(e.what()).c_str());
    return duet_tools::kApiError;
  }
}
