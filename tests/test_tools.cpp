// deviceinfo and duet-bench as a user runs them: exit codes, what they print
// and the files they write (issue findings D, E, I/J, K and the tools'
// polish), and the public calls duet-bench times with.
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "duet/config.hpp"
#include "duet/device.hpp"
#include "duet/error.hpp"
#include "softmax_args.hpp"
#include "tool_runner.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kSource = DUET_SOURCE_DIR;
const fs::path kDeviceinfo = DUET_DEVICEINFO;
const fs::path kBench = kDeviceinfo.parent_path() / "duet-bench";  // built beside it (tools/)
const fs::path kHostFile = kSource / "tests" / "fuzz" / "corpus" / "props" / "host_cpu.json";

using duet::testing::quoted;
using duet::testing::Result;
using duet::testing::run;

Result deviceinfo(const std::string& args) { return run(quoted(kDeviceinfo) + " " + args); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A fresh directory, removed with what it holds.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("duet_tools_" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// The H100 file with some fields replaced.
std::string h100_with(const json& fields) {
  auto j = json::parse(read(kSource / "tools" / "deviceinfo" / "devices" / "h100_sxm.json"));
  j["props"].update(fields);
  return j.dump();
}

}  // namespace

TEST_CASE("deviceinfo --props refuses a FIFO or a directory at once (D)") {
  TempDir dir;
  const fs::path fifo = dir.path / "props.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // `timeout` turns a regression (open() waiting for a writer) into exit 124.
  const Result timed = run("timeout 20 " + quoted(kDeviceinfo) + " --props " + quoted(fifo));
  INFO(timed.out);
  CHECK(timed.code == 2);
  CHECK(has(timed.out, "is not a regular file"));
  const Result directory = deviceinfo("--props " + quoted(dir.path));
  CHECK(directory.code == 2);
  CHECK(has(directory.out, "is not a regular file"));
}

TEST_CASE("a host property file is planned from the file (E)") {
  // Before: *e.live on an empty optional (abort under _GLIBCXX_ASSERTIONS).
  const Result text = deviceinfo("--props " + quoted(kHostFile) + " --plan 4x4096");
  INFO(text.out);
  REQUIRE(text.code == 0);
  CHECK(has(text.out, "kernel:                      SIMD rows"));
  CHECK(has(text.out, "tasks:                       1 of 4 rows"));
  const Result j = deviceinfo("--props " + quoted(kHostFile) + " --plan 4x4096 --json");
  REQUIRE(j.code == 0);
  const auto plan = json::parse(j.out)["plans"].at(0);
  CHECK(plan["noop"] == false);
  CHECK(plan["grid"] == 4);
  CHECK(plan["attributes_from"] == "host");
  CHECK(plan["host"]["tasks"] == 1);
  CHECK(plan["host"]["rows_per_task"] == 4);
}

TEST_CASE("deviceinfo refuses an impossible property file when it reads it (I/J)") {
  TempDir dir;
  const std::vector<std::pair<json, std::string>> cases{
      {{{"warp_size", 64}}, "warp_size = 64: an NVIDIA warp is 32 threads"},
      {{{"cc_major", 0}, {"cc_minor", 0}, {"arch", "sm_00"}}, "compute capability = 0.0"},
      {{{"max_threads_per_sm", 1}}, "max_threads_per_sm = 1"},
      {{{"smem_per_sm", 0}, {"smem_per_block_optin", 0}}, "smem_per_sm = 0"},
  };
  for (const auto& [fields, says] : cases) {
    INFO(says);
    const fs::path file = dir.path / "absurd.json";
    write(file, h100_with(fields));
    const Result r = deviceinfo("--props " + quoted(file));  // listing only, no plan
    CHECK(r.code == 1);
    CHECK(has(r.out, file.string() + ": " + says));
  }
}

TEST_CASE("a no-op plan says so instead of printing a grid (J)") {
  const Result r = deviceinfo("--props " + quoted(kHostFile) + " --plan 0x4096,4x0");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "0 x 4096 f32\n  launch:                      none (0 rows: a no-op, nothing is launched)"));
  CHECK(has(r.out, "4 x 0 f32\n  launch:                      none (0 columns: a no-op, nothing is launched)"));
  CHECK_FALSE(has(r.out, "grid 0"));
  const Result j = deviceinfo("--props " + quoted(kHostFile) + " --plan 0x4096 --json");
  REQUIRE(j.code == 0);
  const auto plan = json::parse(j.out)["plans"].at(0);
  CHECK(plan["noop"] == true);
  CHECK_FALSE(plan.contains("grid"));
}

TEST_CASE("deviceinfo's usage errors exit 2 and name the argument in the user's terms (K)") {
  const Result rows = deviceinfo("--props " + quoted(kHostFile) + " --plan 2305843009213693951x2");
  CHECK(rows.code == 2);
  CHECK(has(rows.out, "--plan 2305843009213693951x2: rows = 2305843009213693951 is too many for one launch"));
  CHECK_FALSE(has(rows.out, "set_grid"));
  const Result huge = deviceinfo("--plan 99999999999999999999x2");
  CHECK(huge.code == 2);
  CHECK(has(huge.out, "--plan"));
  const Result negative = deviceinfo("--device -1");
  CHECK(negative.code == 2);
  CHECK(has(negative.out, "--device: expected a device index 0, 1, ... (as listed), got '-1'"));
  CHECK(negative.out.size() < 200);  // was a 300-digit range
  const Result missing = deviceinfo("--device 99");
  CHECK(missing.code == 2);
  CHECK(has(missing.out, "--device 99: no such device"));
  CHECK(deviceinfo("--device x").code == 2);
  CHECK(deviceinfo("--device 0").code == 0);
}

TEST_CASE("bytes that are not UTF-8 are escaped in text and JSON (K)") {
  const Result plan = deviceinfo("--plan '4x\xff'");
  CHECK(plan.code == 2);
  CHECK(has(plan.out, "4x\\xff"));
  CHECK_FALSE(has(plan.out, "\xff"));
  // A file name with such a byte, and a device name with a terminal escape.
  TempDir dir;
  const fs::path file = dir.path / "dev\xff.json";
  write(file, h100_with({{"name", "\x1b[2Jcleared"}}));
  const Result text = deviceinfo("--props " + quoted(file));
  INFO(text.out);
  REQUIRE(text.code == 0);
  CHECK(has(text.out, "dev\\xff.json"));
  CHECK(has(text.out, "\"\\x1b[2Jcleared\""));
  CHECK_FALSE(has(text.out, "\xff"));
  CHECK_FALSE(has(text.out, "\x1b"));
  const Result j = deviceinfo("--props " + quoted(file) + " --json");
  REQUIRE(j.code == 0);  // was nlohmann's type_error 316: invalid UTF-8
  const auto doc = json::parse(j.out);
  CHECK(doc["devices"][0]["label"] == (dir.path / "dev\\xff.json").string());
}

TEST_CASE("--version prints duet's version and backends, and --help the exit codes") {
  for (const fs::path& tool : {kDeviceinfo, kBench}) {
    INFO(tool.filename().string());
    const Result v = run(quoted(tool) + " --version");
    CHECK(v.code == 0);
    CHECK(has(v.out, tool.filename().string() + " (duet " + DUET_VERSION + "): backends "));
    CHECK(has(v.out, "host"));
    if (DUET_HAVE_CUDA) CHECK(has(v.out, std::string("cuda (") + DUET_CUDA_TARGETS + ")"));
    const Result h = run(quoted(tool) + " --help");
    CHECK(h.code == 0);
    CHECK(has(h.out, "Exit codes:\n  0  success"));
    CHECK(has(h.out, "  2  bad usage"));
    CHECK(run(quoted(tool) + " --no-such-option").code == 2);
  }
  CHECK(has(run(quoted(kBench) + " --help").out, "  3  a forward result differs"));
}

TEST_CASE("duet-bench takes comma lists and writes CSV a CSV reader reads back") {
  TempDir dir;
  const fs::path csv = dir.path / "bench.csv", out = dir.path / "bench.json";
  const Result r = run(quoted(kBench) + " --device host --cols 64,1024 --dtype f32,bf16 --op softmax,log_softmax" +
                       " --mbytes 0.05 --copy-mbytes 1 --warmup 0 --repeats 1 --batch 1 --csv " + quoted(csv) +
                       " --json " + quoted(out));
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto doc = json::parse(read(out));
  const auto results = doc["results"];
  CHECK(results.size() == 2 * 2 * 2);
  // The host's ceiling is its memcpy alone (its copy_kernel is the same copy).
  CHECK(doc["copy_source"] == "memcpy");
  CHECK(doc["copy_memcpy_gbps"].get<double>() > 0);
  CHECK(doc["copy_gbps"] == doc["copy_memcpy_gbps"]);
  CHECK(doc["copy_kernel_gbps"].is_null());
  CHECK(doc["copy_bytes"] == 1000000);
  CHECK(results[0]["ratio"].get<double>() == doctest::Approx(results[0]["gbps"].get<double>() / doc["copy_gbps"].get<double>()));
  CHECK(results[0]["cols"] == 64);
  CHECK(results[1]["cols"] == 1024);
  CHECK(has(results[0]["variant"].get<std::string>(), ","));  // the case that broke the CSV
  const char* python = std::getenv("PYTHON");
  const Result check = run(std::string(python != nullptr ? python : "python3") + " " +
                           quoted(kSource / "tests" / "check_bench_csv.py") + " " + quoted(csv) + " " + quoted(out));
  INFO(check.out);
  CHECK(check.code == 0);
  // A device that is not here, a value out of range: bad usage.
  CHECK(run(quoted(kBench) + " --device cuda:9").code == 2);
  CHECK(run(quoted(kBench) + " --device gpu0").code == 2);
  CHECK(run(quoted(kBench) + " --cols 64,0").code == 2);
  const Result warmup = run(quoted(kBench) + " --warmup -1");
  CHECK(warmup.code == 2);
  CHECK(has(warmup.out, "--warmup: expected a number >= 0, got '-1'"));
  CHECK(warmup.out.size() < 200);  // CLI11's own check names a 300-digit bound
}

TEST_CASE("duet-bench times cross-entropy with its gradient to its own buffer and into the logits") {
  TempDir dir;
  const fs::path out = dir.path / "ce.json";
  const Result r = run(quoted(kBench) + " --device host --op cross_entropy,cross_entropy_in_place --rows 16" +
                       " --cols 1000,4097 --dtype f32,bf16 --copy-mbytes 1 --warmup 0 --repeats 1 --batch 1 --json " +
                       quoted(out));
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto results = json::parse(read(out))["results"];
  REQUIRE(results.size() == 2 * 2 * 2);
  for (const auto& row : results) {
    INFO(row.dump());
    CHECK(row["check_error"] == 0.0);  // checked before timing: a finite loss
    CHECK(row["rows"] == 16);
    // Both read the logits once and write the gradient once.
    CHECK(row["bytes_moved"].get<double>() ==
          2.0 * 16 * row["cols"].get<double>() * (row["dtype"] == "f32" ? 4 : 2));
    CHECK(row["ratio"].get<double>() > 0);
  }
  CHECK(results[0]["op"] == "cross_entropy");
  CHECK(results[4]["op"] == "cross_entropy_in_place");
}

TEST_CASE("duet-bench on a GPU takes the faster of the vendor copy and the copy kernel as its ceiling") {
  int gpus = 0;
  for (const duet::Device& dev : duet::devices()) {
    if (!dev.is_gpu()) continue;
    ++gpus;
    INFO(dev.label());
    TempDir dir;
    const fs::path out = dir.path / "bench.json";
    const Result r = run(quoted(kBench) + " --device " + dev.label() + " --cols 1024 --mbytes 8 --copy-mbytes 64" +
                         " --warmup 1 --repeats 3 --batch 2 --json " + quoted(out));
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK(has(r.out, "copy ceiling: the faster of "));
    const auto doc = json::parse(read(out));
    const double memcpy_gbps = doc["copy_memcpy_gbps"].get<double>(), kernel_gbps = doc["copy_kernel_gbps"].get<double>();
    CHECK(memcpy_gbps > 0);
    CHECK(kernel_gbps > 0);
    CHECK(doc["copy_gbps"].get<double>() == std::max(memcpy_gbps, kernel_gbps));
    CHECK(doc["copy_source"] == (kernel_gbps > memcpy_gbps ? "kernel" : "memcpy"));
  }
  if (gpus == 0) MESSAGE("skipping: no GPU here (the host's run is checked by the CSV case)");
}

TEST_CASE("the public copy and event calls duet-bench times with") {
  const duet::Device host(duet::BackendKind::host, 0);
  std::vector<unsigned char> bytes(1 << 16);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  duet::Buffer a(host, bytes.size()), b(host, bytes.size());
  a.upload(bytes.data(), bytes.size());
  b.fill(0);
  duet::Event start(host), stop(host);
  start.record();
  duet::copy_device_to_device(host, b.data(), a.data(), bytes.size());
  stop.record();
  CHECK(stop.elapsed_ms_since(start) >= 0.0f);
  std::vector<unsigned char> back(bytes.size());
  b.download(back.data(), back.size());
  CHECK(back == bytes);
  b.fill(0);
  duet::copy_kernel(host, b.data(), a.data(), bytes.size());
  b.download(back.data(), back.size());
  CHECK(back == bytes);
}

#if DUET_HAVE_CUDA
// Without any NVIDIA driver the runtime says "CUDA driver version is
// insufficient"; the reason must say the driver is missing (it is what
// `deviceinfo --require-gpu` prints).
TEST_CASE("the CUDA backend says what is missing when it finds no device") {
  for (const auto& b : duet::backend_info()) {
    if (b.kind != duet::BackendKind::cuda || b.device_count > 0) continue;
    INFO(b.no_device_reason);
    void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    CHECK(has(b.no_device_reason, "no NVIDIA driver installed") == (libcuda == nullptr));
    CHECK_FALSE(has(b.no_device_reason, "insufficient"));
    if (libcuda != nullptr) dlclose(libcuda);
  }
}
#endif

TEST_CASE("deviceinfo explains grid_row: float32 rows past a cluster over blocks of the whole GPU") {
  if (!DUET_HAVE_CUDA) return;  // the H100's plans come from the CUDA build's recorded reports
  const fs::path h100 = kSource / "tools" / "deviceinfo" / "devices" / "h100_sxm.json";
  const Result r = deviceinfo("--props " + quoted(h100) + " --plan 16x4194304:f32 --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto plan = json::parse(r.out)["plans"].at(0);
  CHECK(plan["variant"] == "grid_row<f32,vec4,v8>");
  CHECK(plan["grid_row"]["blocks_per_row"] == 66);  // two groups fill the 132 SMs
  CHECK(plan["grid_row"]["groups"] == 2);
  CHECK(plan["grid"] == 132);
  CHECK(plan["grid_row"]["workspace_bytes"].get<std::int64_t>() > 0);
  CHECK(has(plan["why"].get<std::string>(), "pairs through global memory"));
  const Result text = deviceinfo("--props " + quoted(h100) + " --plan 16x4194304:f32");
  CHECK(has(text.out, "over 66 blocks of one grid"));
}

TEST_CASE("deviceinfo explains interleaved_stream and interleaved_slabs: columns past a tile on chip") {
  if (!DUET_HAVE_CUDA) return;  // the H100's plans come from the CUDA build's recorded reports
  const fs::path h100 = kSource / "tools" / "deviceinfo" / "devices" / "h100_sxm.json";
  {
    // 32 rows an outer row, each 100000 elements: one 128-byte tile whose
    // column (12.8 MB) the L2 holds between a chunk's two visits.
    const Result r = deviceinfo("--props " + quoted(h100) + " --plan 1x100000x32:f32 --json");
    INFO(r.out);
    REQUIRE(r.code == 0);
    const auto plan = json::parse(r.out)["plans"].at(0);
    CHECK(plan["variant"] == "interleaved_stream<f32,vec4,v4>");
    CHECK(plan["interleaved"]["tile_rows"] == 32);
    CHECK(plan["interleaved"]["tiles_per_outer_row"] == 1);
    CHECK(plan["interleaved"]["chunks_per_tile"] == 391);  // of 64 slots x 4 packs
    CHECK(plan["interleaved"]["chunk_positions"] == 256);
    CHECK(plan["interleaved"]["tiles_together"] == 1);
    CHECK(plan["interleaved"]["lag_chunks"] == 391 + 264);  // 132 SMs, two blocks each
    CHECK(plan["interleaved"]["workspace_bytes"].get<std::int64_t>() > 0);
  }
  // Dim 0 of [65536, 1024]: 8 line tiles' columns are 64 MiB, past the L2;
  // one tile of 1024 rows (256 lanes, 2 slots) in slabs that fill the 264
  // blocks two an SM hold.
  const Result r = deviceinfo("--props " + quoted(h100) + " --plan 1x65536x1024:f32 --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto plan = json::parse(r.out)["plans"].at(0);
  CHECK(plan["variant"] == "interleaved_slabs<f32,vec4,v4>");
  CHECK(plan["interleaved"]["tile_rows"] == 1024);
  CHECK(plan["interleaved"]["tiles_per_outer_row"] == 1);
  CHECK(plan["interleaved"]["slab_positions"] == 250);  // ceil(65536 / (264 x 2)) slots of 2
  CHECK(plan["interleaved"]["slabs_per_tile"] == 263);
  CHECK(plan["interleaved"]["slab_bundles"] == 17);
  CHECK(plan["interleaved"]["workspace_bytes"] == duet::interleaved_slabs_workspace_bytes(1, 263, 1024));
  const Result text = deviceinfo("--props " + quoted(h100) + " --plan 1x65536x1024:f32");
  CHECK(has(text.out, "263 slabs of 250 elements (steps of 8 lines dealt to the slabs in turn) read line by line"));
}

TEST_CASE("deviceinfo explains interleaved_ring: a block's tiles through two shared-memory buffers") {
  if (!DUET_HAVE_CUDA) return;  // the H100's plans come from the CUDA build's recorded reports
  const fs::path h100 = kSource / "tools" / "deviceinfo" / "devices" / "h100_sxm.json";
  // Dim 1 of [327, 100, 4096] bf16 (contiguous, so on 16-byte packs): a
  // 512-byte line of rows (32 lanes of 8), 4 slots, 25 packs a thread.
  const Result r = deviceinfo("--props " + quoted(h100) + " --plan 327x100x4096:bf16 --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto plan = json::parse(r.out)["plans"].at(0);
  CHECK(plan["variant"] == "interleaved_ring<bf16,vec8,v2>");
  CHECK(plan["interleaved"]["tile_rows"] == 256);
  CHECK(plan["interleaved"]["tiles_per_outer_row"] == 16);
  CHECK(plan["interleaved"]["ring_buffers"] == 2);
  CHECK(plan["interleaved"]["ring_packs_per_thread"] == 25);
  CHECK(plan["grid"] == 264);  // one wave: 132 SMs, two blocks each
  const Result text = deviceinfo("--props " + quoted(h100) + " --plan 327x100x4096:bf16");
  CHECK(has(text.out, "25 packs a thread through a ring of 2 buffers in shared memory (102400 B a block, 2 blocks an SM)"));
  // An inner size off the 16-byte packs (4100 bf16 rows) keeps the other plans.
  const Result off = deviceinfo("--props " + quoted(h100) + " --plan 327x100x4100:bf16 --json");
  REQUIRE(off.code == 0);
  CHECK(json::parse(off.out)["plans"].at(0)["variant"] != "interleaved_ring<bf16,vec8,v2>");
}

TEST_CASE("deviceinfo --op plans the fused operations from a property file") {
  const fs::path h100 = kSource / "tools" / "deviceinfo" / "devices" / "h100_sxm.json";
  // Causal attention scores [8, 32, 2048, 2048] bf16: a row of 256 packs in
  // a warp's registers.
  const Result causal = deviceinfo("--props " + quoted(h100) + " --op causal_softmax --plan 524288x2048:bf16");
  INFO(causal.out);
  REQUIRE(causal.code == 0);
  CHECK(has(causal.out, "masked_softmax (mask causal)"));
  CHECK(has(causal.out, "group_rows<masked_softmax:causal,bf16,vec8,g32,v8>"));
  const Result backward =
      deviceinfo("--props " + quoted(h100) + " --op causal_softmax --backward --plan 524288x2048:bf16 --json");
  REQUIRE(backward.code == 0);
  const auto bwd = json::parse(backward.out)["plans"].at(0);
  CHECK(bwd["op"] == "masked_softmax_backward");
  CHECK(bwd["variant"] == "block_row<masked_softmax_backward,bf16,vec8,v4>");
  CHECK(bwd["block"] == 64);  // 256 packs: 64 threads of 4

  // Cross-entropy over Llama 3's vocabulary: past a block's registers.
  const Result ce = deviceinfo("--props " + quoted(h100) + " --op cross_entropy --plan 8192x128256:bf16 --json");
  INFO(ce.out);
  REQUIRE(ce.code == 0);
  const auto plan = json::parse(ce.out)["plans"].at(0);
  CHECK(plan["op"] == "cross_entropy");
  CHECK(plan["gradient"] == true);
  CHECK(plan["variant"] == "stream_row<cross_entropy,bf16,vec8,v4>");
  CHECK(plan["block"] == 1024);
  CHECK(plan["grid"] == 132);  // one block an SM, a wave
  CHECK(has(plan["why"].get<std::string>(), "reverse chunk order"));
  // An odd vocabulary takes the vector path with its rows' edges apart; the
  // forward without the gradient reads each row once.
  // In place (the gradient into the logits): the same kernel, its stash filled by cp.async.
  const Result in_place =
      deviceinfo("--props " + quoted(h100) + " --op cross_entropy_in_place --plan 8192x128256:bf16 --json");
  INFO(in_place.out);
  REQUIRE(in_place.code == 0);
  const auto in_place_plan = json::parse(in_place.out)["plans"].at(0);
  CHECK(in_place_plan["in_place"] == true);
  CHECK(in_place_plan["gradient"] == true);
  CHECK(in_place_plan["variant"] == "stream_row<cross_entropy,bf16,vec8,v4>");
  CHECK(in_place_plan["dynamic_smem_bytes"] == 14 * 16384);
  CHECK(has(deviceinfo("--props " + quoted(h100) + " --op cross_entropy_in_place --plan 8192x128256:bf16").out,
            "with the gradient into the logits"));
  CHECK(deviceinfo("--props " + quoted(h100) + " --op cross_entropy_in_place --backward --plan 8x128").code == 2);
  const Result odd = deviceinfo("--props " + quoted(h100) + " --op cross_entropy_forward --plan 4096x100003:bf16");
  REQUIRE(odd.code == 0);
  CHECK(has(odd.out, "stream_row<cross_entropy,bf16,vec8,v4,edges>"));
  CHECK(has(odd.out, "one online (max, sum) pass (nothing to write)"));

  // softmax(x, dtype=torch.float32) of bf16 logits and its backward: packs
  // of 4 elements, 16 bytes of the float32 tensor.
  const Result widening = deviceinfo("--props " + quoted(h100) + " --op widening_softmax --plan 64x4097:bf16 --json");
  REQUIRE(widening.code == 0);
  CHECK(json::parse(widening.out)["plans"].at(0)["variant"] == "block_row<widening_softmax,bf16,vec4,v8,edges>");
  const Result widening_bwd =
      deviceinfo("--props " + quoted(h100) + " --op widening_softmax --backward --plan 64x4097:bf16 --json");
  REQUIRE(widening_bwd.code == 0);
  const auto wb = json::parse(widening_bwd.out)["plans"].at(0);
  CHECK(wb["backward"] == true);
  CHECK(wb["variant"] == "block_row<widening_softmax_backward,bf16,vec4,v4,edges>");
  const Result widening_f32 = deviceinfo("--props " + quoted(h100) + " --op widening_softmax --plan 64x4097:f32");
  CHECK(widening_f32.code != 0);
  CHECK(has(widening_f32.out, "widens f16 or bf16, not f32"));

  // A boolean mask over rows of 4096 bf16: one block a row.
  const Result masked = deviceinfo("--props " + quoted(h100) + " --op masked_softmax --plan 65536x4096:bf16");
  REQUIRE(masked.code == 0);
  CHECK(has(masked.out, "block_row<masked_softmax:boolean,bf16,vec8,"));
  // An AMD wavefront of 64: the same catalogue, planned from the file.
  const Result mi300 = deviceinfo("--props " + quoted(kSource / "tools" / "deviceinfo" / "devices" / "mi300x.json") +
                                  " --op cross_entropy --plan 8192x32000:bf16 --json");
  REQUIRE(mi300.code == 0);
  CHECK(json::parse(mi300.out)["plans"].at(0)["variant"] == "block_row<cross_entropy,bf16,vec8,v8>");
  // A host file has no GPU plan for these.
  const Result host = deviceinfo("--props " + quoted(kHostFile) + " --op cross_entropy --plan 4x4096");
  REQUIRE(host.code == 0);
  CHECK(has(host.out, "no GPU plan"));
}
