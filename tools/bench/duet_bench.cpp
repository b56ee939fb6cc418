// duet-bench: effective bandwidth of duet's softmax family against the
// device's copy ceiling, measured in the same run.
//
//   effective GB/s = bytes moved (forward 2*M*N*size, backward 3*M*N*size) / time
//   ceiling        = device-to-device copy, bytes read + bytes written / time:
//                    on GPUs the faster of the vendor's copy (cudaMemcpyAsync /
//                    hipMemcpyAsync) and duet's own copy kernel
//                    (duet::copy_kernel), timed on the same buffers; on the
//                    host, memcpy on the host backend's threads
//
// The fused operations (--op masked_softmax, causal_softmax[_backward],
// cross_entropy[_in_place], cross_entropy_forward) count the bytes each must
// move:
//   masked_softmax         x read, y written, the [B, 1, Sq, Sk] mask read once
//                          (--mask: boolean, the default; additive, in x's
//                          dtype; none)
//   causal_softmax         x read, y written (the masked half counted too)
//   causal_softmax_backward y and dy read, dx written
//   cross_entropy          the logits read once, the gradient written once
//   cross_entropy_in_place the same, the gradient written into the logits
//   cross_entropy_forward  the logits read once
// (targets, losses and lse are a few bytes a row, not counted).
//
// Device events around each launch, warm-up, many repeats, median and
// spread; inputs rotate among buffer sets so no timing reads from L2 unless
// --hot is given. Every configuration is checked against the double
// reference once before it is timed. Public API only (duet/*.hpp).
//
// Exit codes: kExitCodes below.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "duet/config.hpp"
#include "duet/cross_entropy.hpp"
#include "duet/fused_planner.hpp"
#include "duet/masked_softmax.hpp"
#include "duet/device.hpp"
#include "duet/error.hpp"
#include "duet/reference.hpp"
#include "duet/softmax.hpp"
#include "../tool_common.hpp"

namespace {

using json = nlohmann::json;

constexpr int kWrongResult = 3;
constexpr const char* kExitCodes =
    "  0  success\n"
    "  1  API error: a failed device call, an allocation the device refuses\n"
    "  2  bad usage: an unknown option or a malformed value, a --device that is not a device here\n"
    "  3  a forward result differs from the float64 reference, or duet's copy kernel copied wrong (the line before\n"
    "     says where)";

// The CSV's columns, in order: keys of each result's JSON object, then the
// run's copy ceiling (keys of the JSON document, the same on every row).
constexpr const char* kCsvColumns[] = {"op",     "dtype",  "rows", "cols",  "variant",    "median_ms",
                                       "min_ms", "max_ms", "gbps", "ratio", "check_error"};
constexpr const char* kCsvCopyColumns[] = {"copy_gbps", "copy_source", "copy_memcpy_gbps", "copy_kernel_gbps"};

// One CSV field (RFC 4180): quoted where it holds a comma, a quote or a line
// break, its quotes doubled.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string line;
  for (const auto& f : fields) line += (line.empty() ? "" : ",") + csv_field(f);
  return line;
}

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

// Times `launch(set)` with device events: each sample is a batch of
// `batch` back-to-back launches (rotating over `sets` input sets) between two
// events, divided by the batch. The batch keeps the stream full, so the host
// time spent validating and enqueueing a call (a few microseconds, 2-7% of a
// 140 us kernel when timed alone) overlaps the device work instead of
// being counted as device time, as in a real training loop.
template <class F>
Timing time_it(const duet::Device& dev, int warmup, int repeats, int sets, int batch, F&& launch) {
  duet::Event start(dev), stop(dev);
  int next = 0;
  for (int i = 0; i < warmup; ++i) launch(next++ % sets);
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    start.record();
    for (int b = 0; b < batch; ++b) launch(next++ % sets);
    stop.record();
    ms.push_back(stop.elapsed_ms_since(start) / batch);
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), ms.back()};
}

class Progress {
 public:
  explicit Progress(std::size_t total) : total_(total), tty_(isatty(STDERR_FILENO) != 0) {}
  void step(const std::string& what) {
    ++done_;
    if (!tty_) return;
    const int width = 30;
    const int filled = static_cast<int>(width * done_ / std::max<std::size_t>(total_, 1));
    std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu %-40s", filled, "##############################", width - filled, "", done_,
                 total_, what.c_str());
    if (done_ == total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  std::size_t total_, done_ = 0;
  bool tty_;
};

bool is_fused(const std::string& op) {
  return op == "masked_softmax" || op == "causal_softmax" || op == "causal_softmax_backward" ||
         op == "cross_entropy" || op == "cross_entropy_in_place" || op == "cross_entropy_forward";
}

// Row lengths a fused op runs by default: the issue's shapes.
std::vector<std::int64_t> fused_default_cols(const std::string& op, const std::string& dtype) {
  if (op == "masked_softmax") return {128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
  if (op.rfind("causal", 0) == 0) return {2048};
  if (op == "cross_entropy" || op == "cross_entropy_in_place") return {32000, 50257, 128256};
  return dtype == "f32" ? std::vector<std::int64_t>{128256, 1048576} : std::vector<std::int64_t>{128256};
}

std::string now_utc() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"duet-bench: softmax effective bandwidth against the copy ceiling"};
  duet_tools::describe(app, "duet-bench", kExitCodes);
  std::string device_label, json_path, csv_path, sweep = "cold", commit = "unknown";
  std::vector<std::string> dtypes{"f32"};
  std::vector<std::string> ops_list{"softmax"};
  std::vector<std::int64_t> cols_list;
  double mbytes = 256, copy_mbytes = 0;
  std::int64_t fixed_rows = 0;
  int warmup = 5, repeats = 15, batch = 10;
  bool hot = false, check = true;
  app.add_option("--device", device_label, "device label (cuda:0, hip:0, host); default: the first GPU");
  app.add_option("--sweep", sweep, "cold: 256 MB inputs, N = 32..1M; tutorial: M = 4096, N = 256..12544 (the Triton tutorial's)")
      ->check(CLI::IsMember({"cold", "tutorial"}));
  app.add_option("--cols", cols_list, "row lengths to run instead of the sweep's (repeatable, or a comma list)")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t(1), (std::int64_t(1) << 31) - 1));
  app.add_option("--rows", fixed_rows, "fixed row count (default: from --mbytes)")->check(duet_tools::number(false));
  app.add_option("--mbytes", mbytes, "input size in MB (1e6 bytes) when rows are not fixed")
      ->check(duet_tools::number(true));
  app.add_option("--dtype", dtypes, "f32, f16, bf16 (repeatable, or a comma list)")
      ->delimiter(',')
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app.add_option("--op", ops_list,
                 "softmax, log_softmax, softmax_backward, log_softmax_backward (repeatable, or a comma list)")
      ->delimiter(',')
      ->check(CLI::IsMember({"softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "masked_softmax",
                             "causal_softmax", "causal_softmax_backward", "cross_entropy", "cross_entropy_in_place",
                             "cross_entropy_forward"}));
  std::int64_t heads = 32, batch_size = 8;
  std::string mask_name = "boolean";
  app.add_option("--mask", mask_name, "masked_softmax: the [B, 1, Sq, Sk] mask's kind")
      ->check(CLI::IsMember({"boolean", "additive", "none"}));
  app.add_option("--heads", heads, "fused softmax: attention heads H of [B, H, Sq, Sk] scores")
      ->check(duet_tools::number(true));
  app.add_option("--batch-size", batch_size, "fused softmax: batch B (causal: B x H x S rows of S)")
      ->check(duet_tools::number(true));
  app.add_option("--warmup", warmup, "untimed launches first")->check(duet_tools::number(false));
  app.add_option("--repeats", repeats, "timed samples (median reported)")->check(duet_tools::number(true));
  app.add_option("--batch", batch, "back-to-back launches per timed sample")->check(duet_tools::number(true));
  app.add_flag("--hot", hot, "reuse one input set (L2-resident when small), as the Triton tutorial does");
  app.add_flag("!--no-check", check, "skip the correctness check");
  app.add_option("--json", json_path, "write results as JSON");
  app.add_option("--csv", csv_path, "write results as CSV");
  app.add_option("--commit", commit, "commit id recorded with the results");
  app.add_option("--copy-mbytes", copy_mbytes,
                 "bytes the copy ceiling moves, in MB (default: 1 GiB or 8 x the L2, whichever is larger)")
      ->check(duet_tools::number(true));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return duet_tools::usage_error(app, "duet-bench", e);
  }
  duet::Device dev(duet::BackendKind::host, 0);
  try {
    dev = device_label.empty() ? duet::default_device() : duet::device(device_label);
  } catch (const duet::Error& e) {
    std::fprintf(stderr, "duet-bench: --device %s: %s\n", duet::printable(device_label).c_str(),
                 duet::printable(e.what()).c_str());
    return duet_tools::kUsage;
  }
  try {
    const auto& props = dev.props();
    if (sweep == "tutorial" && fixed_rows == 0) fixed_rows = 4096;
    const bool cols_given = !cols_list.empty();
    if (cols_list.empty()) {
      if (sweep == "tutorial")
        for (std::int64_t n = 256; n <= 12544; n += 384) cols_list.push_back(n);
      else
        for (std::int64_t n = 32; n <= (1 << 20); n *= 2) {
          cols_list.push_back(n);
          if (n >= 1024 && n <= 16384) cols_list.push_back(n * 3 / 2);
        }
    }

    // Copy ceiling: device-to-device copies several times the L2, on the
    // same buffers: the vendor's copy and, on GPUs, duet's copy kernel (the
    // host's copy_kernel is the same memcpy). The faster is the ceiling, so
    // a vendor copy slower than what a kernel can move does not flatter the
    // ratios.
    const std::size_t copy_bytes = copy_mbytes > 0 ? static_cast<std::size_t>(copy_mbytes * 1e6)
                                                   : std::max<std::size_t>(std::size_t(1) << 30, std::size_t(props.l2_bytes) * 8);
    double copy_memcpy_gbps = 0, copy_kernel_gbps = 0;
    {
      duet::Buffer a(dev, copy_bytes), b(dev, copy_bytes);
      auto gbps_of = [&](const Timing& t) { return 2.0 * copy_bytes / (t.median_ms * 1e-3) / 1e9; };
      if (dev.is_gpu() && check) {
        // The kernel's copy checked before it is timed: 64 pieces across the
        // destination and its last bytes hold the source's, not the poison.
        a.fill(0x5a);
        b.fill(0);
        duet::copy_kernel(dev, b.data(), a.data(), copy_bytes);
        duet::synchronize(dev);
        std::vector<unsigned char> piece(std::min<std::size_t>(copy_bytes, 4096));
        for (int i = 0; i <= 64; ++i) {
          const std::size_t at = i == 64 ? copy_bytes - piece.size()
                                         : (copy_bytes - piece.size()) / 64 * static_cast<std::size_t>(i);
          b.download(piece.data(), piece.size(), at);
          const auto bad = std::find_if(piece.begin(), piece.end(), [](unsigned char c) { return c != 0x5a; });
          if (bad != piece.end()) {
            std::fprintf(stderr, "duet-bench: WRONG RESULT the copy kernel left byte %zu of %zu as 0x%02x (not 0x5a)\n",
                         at + static_cast<std::size_t>(bad - piece.begin()), copy_bytes, *bad);
            return kWrongResult;
          }
        }
      } else {
        a.fill(1);
      }
      copy_memcpy_gbps = gbps_of(time_it(dev, 3, 10, 1, 5, [&](int) {
        duet::copy_device_to_device(dev, b.data(), a.data(), copy_bytes);
      }));
      if (dev.is_gpu())
        copy_kernel_gbps = gbps_of(time_it(dev, 3, 10, 1, 5, [&](int) {
          duet::copy_kernel(dev, b.data(), a.data(), copy_bytes);
        }));
    }
    const double copy_gbps = std::max(copy_memcpy_gbps, copy_kernel_gbps);
    const std::string copy_source = copy_kernel_gbps > copy_memcpy_gbps ? "kernel" : "memcpy";
    if (dev.is_gpu()) {
      const char* vendor_copy = dev.backend() == duet::BackendKind::hip ? "hipMemcpyAsync" : "cudaMemcpyAsync";
      std::printf("device %s: %s (%s), %d SMs, L2 %.0f MB; copy ceiling %.1f GB/s (read + write)\n",
                  dev.label().c_str(), duet::printable(props.name).c_str(), duet::printable(props.arch).c_str(), props.sm_count, props.l2_bytes / 1e6,
                  copy_gbps);
      std::printf("copy ceiling: the faster of %s %.1f GB/s and duet's copy kernel %.1f GB/s (%s, %.0f MB, median of 10)\n",
                  vendor_copy, copy_memcpy_gbps, copy_kernel_gbps, copy_source.c_str(), copy_bytes / 1e6);
    } else
      std::printf("device %s: %s (%s), %d cores, %d threads, L2 %.1f MB, L3 %.0f MB; memcpy ceiling %.1f GB/s "
                  "(read + write, %d threads)\n",
                  dev.label().c_str(), duet::printable(props.name).c_str(), props.family.c_str(), props.sm_count, duet::host_threads(),
                  props.l2_bytes / 1e6, props.l3_bytes / 1e6, copy_gbps, duet::host_threads());

    // Host time of one call (checks, plan lookup, launch) on a 4 x 1024
    // float32 problem: what a caller's thread pays per launch, and what
    // bounds the small hot shapes of the tutorial sweep.
    double host_us_per_call = 0;
    {
      constexpr int calls = 2000;
      duet::Buffer x(dev, 4 * 1024 * 4), y(dev, 4 * 1024 * 4);
      x.fill(0);
      duet::softmax(dev, duet::DType::f32, 4, 1024, x.data(), 1024, y.data(), 1024);
      duet::synchronize(dev);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) duet::softmax(dev, duet::DType::f32, 4, 1024, x.data(), 1024, y.data(), 1024);
      const auto t1 = std::chrono::steady_clock::now();
      duet::synchronize(dev);
      host_us_per_call = std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
    }
    std::printf("host time per call (4 x 1024 f32): %.2f us\n", host_us_per_call);

    json results = json::array();
    Progress progress(cols_list.size() * dtypes.size() * ops_list.size());
    std::printf("%-22s %-5s %9s %9s %-34s %9s %9s %6s\n", "op", "dtype", "rows", "cols", "variant", "ms", "GB/s", "ratio");
    std::mt19937_64 rng(1234);
    // A fused operation, timed as the others: returns false on a wrong result.
    auto run_fused = [&](const std::string& op_name, const std::string& dt_name, std::int64_t cols) {
      const duet::DType dt = duet::dtype_from_string(dt_name);
      const int es = duet::dtype_size(dt);
      const bool causal = op_name.rfind("causal", 0) == 0;
      const bool ce = op_name.rfind("cross_entropy", 0) == 0;
      const bool bwd = op_name == "causal_softmax_backward";
      const bool in_place = op_name == "cross_entropy_in_place";
      const bool grad = op_name == "cross_entropy" || in_place;
      // Rows: causal [B, H, S, S]; masked [B, H, Sq, Sk] with Sq from the
      // size; cross-entropy --rows or from the size.
      std::int64_t rows = fixed_rows > 0 ? fixed_rows
                                         : std::max<std::int64_t>(1, static_cast<std::int64_t>(mbytes * 1e6 / (double(cols) * es)));
      std::int64_t seq_q = 1;
      if (causal) {
        seq_q = cols;
        rows = batch_size * heads * cols;
      } else if (!ce) {
        seq_q = std::max<std::int64_t>(1, rows / (batch_size * heads));
        rows = batch_size * heads * seq_q;
      }
      const std::size_t bytes = std::size_t(rows * cols) * es;
      const duet::MaskKind mask_kind = causal                       ? duet::MaskKind::causal
                                       : op_name != "masked_softmax" ? duet::MaskKind::none
                                       : mask_name == "boolean"      ? duet::MaskKind::boolean
                                       : mask_name == "additive"     ? duet::MaskKind::additive
                                                                     : duet::MaskKind::none;
      const std::size_t mask_elem = mask_kind == duet::MaskKind::boolean ? 1 : std::size_t(es);
      const std::size_t mask_bytes =
          mask_kind == duet::MaskKind::boolean || mask_kind == duet::MaskKind::additive
              ? std::size_t(batch_size * seq_q * cols) * mask_elem
              : 0;
      const int tensors = bwd ? 3 : 2;
      const int sets = hot ? 1
                           : static_cast<int>(std::clamp<std::int64_t>(
                                 3 * props.l2_bytes / std::max<std::size_t>(bytes, 1) + 2, 2,
                                 std::max<std::int64_t>(2, static_cast<std::int64_t>(props.memory_bytes * 0.6 /
                                                                                     double(bytes * tensors)))));
      std::vector<duet::Buffer> xs, gs, outs;
      std::normal_distribution<float> dist(0.0f, 4.0f);
      std::vector<float> host(std::min<std::size_t>(std::size_t(rows * cols), std::size_t(1) << 22));
      for (auto& v : host) v = dist(rng);
      const auto encoded = duet::reference::encode(host, dt);
      auto filled = [&](std::size_t n) {
        duet::Buffer b(dev, n);
        for (std::size_t off = 0; off < n; off += encoded.size()) b.upload(encoded.data(), std::min(encoded.size(), n - off), off);
        return b;
      };
      for (int s = 0; s < sets; ++s) {
        xs.push_back(filled(bytes));
        if (bwd) gs.push_back(filled(bytes));
        if (!ce || (grad && !in_place)) outs.emplace_back(dev, bytes);
      }
      duet::Buffer mask, target, loss, lse;
      if (mask_bytes) {
        // A quarter of the positions masked: a byte of 1, or -inf added.
        std::bernoulli_distribution masked(0.25);
        std::vector<std::uint8_t> m;
        if (mask_kind == duet::MaskKind::boolean) {
          m.resize(mask_bytes);
          for (auto& b : m) b = masked(rng) ? 1 : 0;
        } else {
          std::vector<float> add(mask_bytes / mask_elem);
          for (auto& v : add) v = masked(rng) ? -INFINITY : 0.0f;
          m = duet::reference::encode(add, dt);
        }
        mask = duet::Buffer(dev, mask_bytes);
        mask.upload(m.data(), m.size());
      }
      std::int64_t workspace = 0;
      if (ce) {
        std::vector<std::int64_t> t(static_cast<std::size_t>(rows));
        std::uniform_int_distribution<std::int64_t> pick(0, cols - 1);
        for (auto& v : t) v = pick(rng);
        target = duet::Buffer(dev, t.size() * 8);
        target.upload(t.data(), t.size() * 8);
        loss = duet::Buffer(dev, 4);
        lse = duet::Buffer(dev, std::size_t(rows) * 4);
        workspace = static_cast<std::int64_t>(duet::cross_entropy_workspace_size(dev, rows, duet::Reduction::mean));
      }
      duet::FusedShape shape;
      shape.dtype = dt;
      shape.rows = rows;
      shape.cols = cols;
      // Dense rows from the buffers' starts: every tensor's rows at the same
      // offsets within a pack (odd lengths take the kernels with edges), but
      // for a [B, 1, Sq, Sk] mask, whose head stride of 0 moves its rows
      // against the scores' unless a head's Sq x Sk scores are whole packs.
      const std::int64_t vec = duet::dtype_vec16(dt);
      shape.vector_ok = mask_bytes == 0 || heads == 1 || (seq_q * cols) % vec == 0;
      shape.gradient = grad;
      shape.in_place = in_place;
      std::function<void(int)> launch;
      if (ce) {
        shape.op = duet::FusedOp::cross_entropy;
        launch = [&](int s) {
          duet::CrossEntropyCall call;
          call.dtype = dt;
          call.rows = rows;
          call.cols = cols;
          call.logits = xs[std::size_t(s)].data();
          call.logits_stride = cols;
          call.target = target.data();
          call.loss = static_cast<float*>(loss.data());
          call.lse = static_cast<float*>(lse.data());
          if (grad) {
            // In place: the gradient overwrites the logits, so later
            // launches read earlier gradients (the same work).
            call.grad = in_place ? xs[std::size_t(s)].data() : outs[std::size_t(s)].data();
            call.grad_stride = cols;
          }
          duet::run(dev, call);
        };
      } else {
        shape.op = bwd ? duet::FusedOp::masked_softmax_backward : duet::FusedOp::masked_softmax;
        shape.mask_kind = bwd ? duet::MaskKind::none : mask_kind;
        launch = [&](int s) {
          duet::MaskedSoftmaxCall call;
          call.backward = bwd;
          call.dtype = dt;
          call.rows = rows;
          call.cols = cols;
          call.x = xs[std::size_t(s)].data();
          call.x_stride = call.out_stride = call.dy_stride = cols;
          call.out = outs[std::size_t(s)].data();
          if (bwd) call.dy = gs[std::size_t(s)].data();
          call.scale = 0.088f;
          call.mask.kind = shape.mask_kind;
          call.mask.heads = heads;
          call.mask.seq_q = seq_q;
          if (mask_bytes) {
            call.mask.data = mask.data();
            call.mask.batch_stride = seq_q * cols;
            call.mask.row_stride = cols;
          }
          duet::run(dev, call);
        };
      }
      const std::string variant =
          dev.is_gpu() ? duet::plan_fused(props, shape, duet::plan_options()).kernel : "host fused rows";
      double check_error = -1;
      if (check) {
        // Without the float64 reference here: a forward softmax row sums to
        // 1, a loss is finite.
        launch(0);
        duet::synchronize(dev);
        if (ce) {
          float l = 0;
          loss.download(&l, 4);
          check_error = std::isfinite(l) ? 0.0 : 1.0;
        } else if (!bwd) {
          std::vector<std::uint8_t> raw(std::size_t(cols) * es);
          outs[0].download(raw.data(), raw.size(), std::size_t(rows / 2) * cols * es);
          double sum = 0;
          for (float v : duet::reference::decode(raw.data(), std::size_t(cols), dt)) sum += v;
          check_error = std::fabs(sum - 1.0);
        }
        if (check_error > 2e-2) {
          std::fprintf(stderr, "\nduet-bench: WRONG RESULT %s %s %lldx%lld: check error %g\n", op_name.c_str(),
                       dt_name.c_str(), static_cast<long long>(rows), static_cast<long long>(cols), check_error);
          return false;
        }
      }
      const Timing t = time_it(dev, warmup, repeats, sets, batch, launch);
      const double moved = double(bytes) * (ce ? (grad ? 2 : 1) : tensors) + double(mask_bytes);
      const double gbps = moved / (t.median_ms * 1e-3) / 1e9;
      std::printf("%-22s %-5s %9lld %9lld %-34s %9.4f %9.2f %6.3f\n", op_name.c_str(), dt_name.c_str(),
                  static_cast<long long>(rows), static_cast<long long>(cols), variant.c_str(), t.median_ms, gbps,
                  gbps / copy_gbps);
      json r = {{"op", op_name}, {"dtype", dt_name}, {"rows", rows}, {"cols", cols}, {"variant", variant},
                {"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"max_ms", t.max_ms}, {"gbps", gbps},
                {"ratio", gbps / copy_gbps}, {"input_sets", sets}, {"check_error", check_error},
                {"bytes_moved", moved}};
      if (!ce) r["shape"] = {batch_size, heads, seq_q, cols};
      if (mask_bytes) r["mask_bytes"] = mask_bytes;
      if (op_name == "masked_softmax") r["mask"] = mask_name;
      if (ce) {
        r["workspace_bytes"] = workspace;
        r["extra_memory_fraction"] = double(workspace) / double(bytes);
      }
      results.push_back(r);
      progress.step(op_name + " " + dt_name + " N=" + std::to_string(cols));
      return true;
    };
    for (const auto& op_name : ops_list)
      for (const auto& dt_name : dtypes) {
        if (is_fused(op_name)) {
          for (std::int64_t cols : cols_given ? cols_list : fused_default_cols(op_name, dt_name))
            if (!run_fused(op_name, dt_name, cols)) return kWrongResult;
          continue;
        }
        for (std::int64_t cols : cols_list) {
          const duet::DType dt = duet::dtype_from_string(dt_name);
          const bool bwd = op_name.find("backward") != std::string::npos;
          const duet::Op op = op_name.rfind("log", 0) == 0 ? duet::Op::log_softmax : duet::Op::softmax;
          const int es = duet::dtype_size(dt);
          const std::int64_t rows =
              fixed_rows > 0 ? fixed_rows : std::max<std::int64_t>(1, static_cast<std::int64_t>(mbytes * 1e6 / (double(cols) * es)));
          const std::size_t bytes = std::size_t(rows * cols) * es;
          // Rotate over enough sets that consecutive launches never find their input in L2.
          const int sets = hot ? 1 : static_cast<int>(std::clamp<std::int64_t>(3 * props.l2_bytes / std::max<std::size_t>(bytes, 1) + 2, 2, 16));
          std::vector<duet::Buffer> xs, gs, outs;
          std::normal_distribution<float> dist(0.0f, 4.0f);
          std::vector<float> host(std::min<std::size_t>(std::size_t(rows * cols), std::size_t(1) << 22));
          for (auto& v : host) v = dist(rng);
          const auto encoded = duet::reference::encode(host, dt);
          for (int s = 0; s < sets; ++s) {
            xs.emplace_back(dev, bytes);
            for (std::size_t off = 0; off < bytes; off += encoded.size())
              xs.back().upload(encoded.data(), std::min(encoded.size(), bytes - off), off);
            if (bwd) {
              gs.emplace_back(dev, bytes);
              for (std::size_t off = 0; off < bytes; off += encoded.size())
                gs.back().upload(encoded.data(), std::min(encoded.size(), bytes - off), off);
            }
            outs.emplace_back(dev, bytes);
          }
          duet::SoftmaxCall call;
          call.op = op;
          call.backward = bwd;
          call.dtype = dt;
          call.rows = rows;
          call.cols = cols;
          call.x_stride = call.out_stride = call.dy_stride = cols;
          auto launch = [&](int s) {
            call.x = xs[std::size_t(s)].data();
            call.out = outs[std::size_t(s)].data();
            if (bwd) call.dy = gs[std::size_t(s)].data();
            duet::run(dev, call);
          };
          call.x = xs[0].data();
          call.out = outs[0].data();
          if (bwd) call.dy = gs[0].data();
          // The host runs its SIMD row kernels whatever GPU variant the
          // planner's catalogue names for the shape.
          const std::string variant = dev.is_gpu() ? duet::variant_name(duet::plan_for(dev, call).kernel)
                                                   : "host SIMD rows (" + props.family + ", " + std::to_string(duet::host_threads()) +
                                                         " threads)";
          double check_error = -1;
          if (check) {
            // Check the first rows (up to 4M elements) of set 0 against the double reference.
            outs[0].fill(0xff);
            launch(0);
            duet::synchronize(dev);
            const std::int64_t crows = std::min<std::int64_t>(rows, std::max<std::int64_t>(1, (1 << 22) / cols));
            std::vector<std::uint8_t> raw(std::size_t(crows * cols) * es);
            xs[0].download(raw.data(), raw.size());
            const auto x = duet::reference::decode(raw.data(), std::size_t(crows * cols), dt);
            outs[0].download(raw.data(), raw.size());
            const auto got = duet::reference::decode(raw.data(), std::size_t(crows * cols), dt);
            std::vector<double> want;
            if (bwd) {
              gs[0].download(raw.data(), raw.size());
              const auto g = duet::reference::decode(raw.data(), std::size_t(crows * cols), dt);
              want = duet::reference::backward(x, g, crows, cols, op);
            } else {
              want = duet::reference::forward(x, crows, cols, op);
            }
            const auto c = duet::reference::compare(got, want, crows, cols, duet::reference::default_tolerance(dt), nullptr,
                                                    duet::reference::default_abs_floor(dt));
            // Backward on random (non-softmax) y is only a timing input: report, don't fail.
            check_error = c.worst;
            if (!c.ok && !bwd) {
              std::fprintf(stderr, "\nduet-bench: WRONG RESULT %s %s %lldx%lld: %s\n", op_name.c_str(), dt_name.c_str(),
                           static_cast<long long>(rows), static_cast<long long>(cols), c.first_failure.c_str());
              return kWrongResult;
            }
          }
          const Timing t = time_it(dev, warmup, repeats, sets, batch, launch);
          const double moved = double(bytes) * (bwd ? 3 : 2);
          const double gbps = moved / (t.median_ms * 1e-3) / 1e9;
          std::printf("%-22s %-5s %9lld %9lld %-34s %9.4f %9.2f %6.3f\n", op_name.c_str(), dt_name.c_str(),
                      static_cast<long long>(rows), static_cast<long long>(cols), variant.c_str(), t.median_ms, gbps,
                      gbps / copy_gbps);
          results.push_back({{"op", op_name}, {"dtype", dt_name}, {"rows", rows}, {"cols", cols}, {"variant", variant},
                             {"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"max_ms", t.max_ms}, {"gbps", gbps},
                             {"ratio", gbps / copy_gbps}, {"input_sets", sets}, {"check_error", check_error}});
          progress.step(op_name + " " + dt_name + " N=" + std::to_string(cols));
        }
      }
    json doc = {{"tool", "duet-bench"},
                {"duet_version", DUET_VERSION},
                {"commit", commit},
                {"date", now_utc()},
                {"sweep", sweep},
                {"hot", hot},
                {"device", {{"label", dev.label()}, {"name", props.name}, {"arch", props.arch}, {"sm_count", props.sm_count},
                            {"l2_bytes", props.l2_bytes}, {"driver_version", props.driver_version},
                            {"runtime_version", props.runtime_version}}},
                {"copy_gbps", copy_gbps},
                {"copy_source", copy_source},
                {"copy_memcpy_gbps", copy_memcpy_gbps},
                // null on the host, whose copy_kernel is the memcpy timed above
                {"copy_kernel_gbps", dev.is_gpu() ? json(copy_kernel_gbps) : json(nullptr)},
                {"copy_bytes", copy_bytes},
                {"host_us_per_call", host_us_per_call},
                {"warmup", warmup},
                {"repeats", repeats},
                {"batch", batch},
                {"results", results}};
    if (!json_path.empty()) std::ofstream(json_path) << doc.dump(1) << "\n";
    if (!csv_path.empty()) {
      // RFC 4180: variant names hold commas ("block_row<f32,vec4,v8>").
      std::ofstream out(csv_path, std::ios::binary);
      std::vector<std::string> header(std::begin(kCsvColumns), std::end(kCsvColumns));
      header.insert(header.end(), std::begin(kCsvCopyColumns), std::end(kCsvCopyColumns));
      out << csv_line(header) << "\r\n";
      // A field as text: strings bare, null empty, numbers as JSON writes them.
      auto field = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.is_null() ? std::string() : v.dump(); };
      for (const auto& r : results) {
        std::vector<std::string> fields;
        for (const char* key : kCsvColumns) fields.push_back(field(r[key]));
        for (const char* key : kCsvCopyColumns) fields.push_back(field(doc[key]));
        out << csv_line(fields) << "\r\n";
      }
      if (!out) throw duet::Error(duet::Status::io_error, "cannot write " + csv_path);
    }
    return duet_tools::kOk;
  } catch (const std::exception& e) {  // duet::Error and anything else: one line, never an abort
    std::fprintf(stderr, "duet-bench: %s\n", duet::printable(e.what()).c_str());
    return duet_tools::kApiError;
  }
}
