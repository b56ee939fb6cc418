// The CPU host backend: describes the machine and runs the same operations
// on host memory with a pool of threads, so duet's API works with no GPU.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <chrono>
#include <vector>

#include <unistd.h>

#include "duet/float16.hpp"

#define DUET_NS host
#include "backend_api.hpp"
#undef DUET_NS

namespace duet::host {
namespace {

long sysconf_or_zero(int name) {
  const long v = ::sysconf(name);
  return v > 0 ? v : 0;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "host CPU";
}

// Widest vector unit the compiler targets for this build.
constexpr int simd_width_bytes() {
#if defined(__AVX512F__)
  return 64;
#elif defined(__AVX__)
  return 32;
#else
  return 16;  // SSE2 / NEON baseline
#endif
}

template <class T> float load(const void* p, std::int64_t i);
template <> float load<float>(const void* p, std::int64_t i) { return static_cast<const float*>(p)[i]; }
template <> float load<std::uint16_t>(const void* p, std::int64_t i) {
  return f16_to_float(static_cast<const std::uint16_t*>(p)[i]);
}
struct bf16_tag {};
template <> float load<bf16_tag>(const void* p, std::int64_t i) {
  return bf16_to_float(static_cast<const std::uint16_t*>(p)[i]);
}
template <class T> void store(void* p, std::int64_t i, float v);
template <> void store<float>(void* p, std::int64_t i, float v) { static_cast<float*>(p)[i] = v; }
template <> void store<std::uint16_t>(void* p, std::int64_t i, float v) {
  static_cast<std::uint16_t*>(p)[i] = float_to_f16(v);
}
template <> void store<bf16_tag>(void* p, std::int64_t i, float v) {
  static_cast<std::uint16_t*>(p)[i] = float_to_bf16(v);
}

// One row, float32 arithmetic, the same formulas as the device kernels.
template <class T>
void run_row(const SoftmaxArgs& a, bool backward, std::int64_t r, std::vector<float>& buf) {
  constexpr std::int64_t kSize = std::is_same_v<T, float> ? 4 : 2;
  const std::int64_t n = a.cols;
  const void* x = static_cast<const char*>(a.x) + r * a.x_stride * kSize;
  void* out = static_cast<char*>(a.out) + r * a.out_stride * kSize;
  buf.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) buf[std::size_t(i)] = load<T>(x, i);  // in-place safe: read first
  if (!backward) {
    float m = -std::numeric_limits<float>::infinity();
    for (float v : buf) m = std::fmax(m, v);
    // The host sums in double: a sequential float sum over a long row drifts
    // (1e-4 relative at 70k elements), where the device's tree does not.
    double sd = 0.0;
    for (float v : buf) sd += std::exp(v - m);
    const float s = static_cast<float>(sd);
    const float log_s = static_cast<float>(std::log(sd));
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = buf[std::size_t(i)];
      store<T>(out, i, a.log ? (v - m) - log_s : std::exp(v - m) / s);
    }
  } else {
    const void* dy = static_cast<const char*>(a.dy) + r * a.dy_stride * kSize;
    double sd = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const float g = load<T>(dy, i);
      sd += a.log ? g : double(g) * buf[std::size_t(i)];
    }
    const float s = static_cast<float>(sd);
    for (std::int64_t i = 0; i < n; ++i) {
      const float y = buf[std::size_t(i)];
      const float g = load<T>(dy, i);
      store<T>(out, i, a.log ? g - std::exp(y) * s : y * (g - s));
    }
  }
}

template <class T>
void run_rows(const SoftmaxArgs& a, bool backward) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  // Below ~64k elements a thread costs more than it saves.
  const std::int64_t work = a.rows * std::max<std::int64_t>(a.cols, 1);
  const auto threads = static_cast<unsigned>(
      std::clamp<std::int64_t>(work / 65536, 1, std::min<std::int64_t>(hw, a.rows)));
  auto body = [&](unsigned t) {
    std::vector<float> buf;
    for (std::int64_t r = t; r < a.rows; r += threads) run_row<T>(a, backward, r, buf);
  };
  if (threads == 1) return body(0);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(body, t);
  for (auto& th : pool) th.join();
}

void require_host_ordinal(int ordinal) {
  if (ordinal != 0)
    throw Error(Status::no_device, "host device " + std::to_string(ordinal) + " does not exist (1 found)");
}

}  // namespace

int device_count() noexcept { return 1; }
std::string no_device_reason() { return ""; }
int runtime_version() noexcept { return 0; }
int driver_version() noexcept { return 0; }
std::string compiled_targets() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "host";
#endif
}

DeviceProps device_props(int ordinal) {
  require_host_ordinal(ordinal);
  DeviceProps d;
  d.name = cpu_model_name();
  d.vendor = Vendor::host;
  d.backend = BackendKind::host;
  d.arch = compiled_targets();
  d.family = "CPU";
  d.sm_count = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  d.simd_width_bytes = simd_width_bytes();
  d.warp_size = d.simd_width_bytes / 4;  // float lanes of one vector register
  d.max_threads_per_block = 1;
  d.max_threads_per_sm = 1;
  d.max_blocks_per_sm = 1;
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  d.l1d_bytes = sysconf_or_zero(_SC_LEVEL1_DCACHE_SIZE);
  d.l2_bytes = sysconf_or_zero(_SC_LEVEL2_CACHE_SIZE);
  d.l3_bytes = sysconf_or_zero(_SC_LEVEL3_CACHE_SIZE);
#endif
  d.memory_bytes = static_cast<std::int64_t>(sysconf_or_zero(_SC_PHYS_PAGES)) * sysconf_or_zero(_SC_PAGE_SIZE);
  d.source = "sysconf + /proc/cpuinfo";
  return d;
}

KernelAttributes kernel_attributes(int ordinal, int variant, bool finalize) {
  require_host_ordinal(ordinal);
  KernelAttributes k;
  k.name = variant_name(kCatalogue.at(static_cast<std::size_t>(variant))) + (finalize ? ".finalize" : "");
  k.regs_per_thread = 1;
  k.max_threads_per_block = 1;
  k.source = "host";
  return k;
}

int occupancy_blocks_per_sm(int ordinal, int, bool, int, std::int64_t) {
  require_host_ordinal(ordinal);
  return 1;
}

int max_active_clusters(int ordinal, int, int, int) {
  require_host_ordinal(ordinal);
  return 0;  // no clusters on the host: the planner never asks for one there
}

void launch_softmax(int ordinal, int variant, const SoftmaxArgs& args, const LaunchGeometry&, const LaunchGeometry&,
                    void*) {
  require_host_ordinal(ordinal);
  const Variant& v = kCatalogue.at(static_cast<std::size_t>(variant));
  switch (v.dtype) {
    case DType::f32: return run_rows<float>(args, v.backward);
    case DType::f16: return run_rows<std::uint16_t>(args, v.backward);
    case DType::bf16: return run_rows<bf16_tag>(args, v.backward);
  }
}

void* device_alloc(int ordinal, std::size_t bytes) {
  require_host_ordinal(ordinal);
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr && bytes != 0) throw Error(Status::out_of_memory, "host allocation of " + std::to_string(bytes) + " bytes failed");
  return p;
}
void device_free(int, void* p) noexcept { std::free(p); }
void copy_to_device(int, void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void copy_to_host(int, void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void copy_device_to_device(int, void* dst, const void* src, std::size_t bytes, void*) { std::memcpy(dst, src, bytes); }
void fill_bytes(int, void* dst, int value, std::size_t bytes) { std::memset(dst, value, bytes); }
void synchronize(int, void*) {}
void* stream_create(int) { return nullptr; }
void stream_destroy(int, void*) noexcept {}
int pointer_device(const void*) { return -1; }
// Host "events" are timestamps: host work is synchronous, so recording one
// after a launch marks its end.
void* event_create(int) { return new std::chrono::steady_clock::time_point(); }
void event_destroy(int, void* event) noexcept { delete static_cast<std::chrono::steady_clock::time_point*>(event); }
void event_record(int, void* event, void*) {
  *static_cast<std::chrono::steady_clock::time_point*>(event) = std::chrono::steady_clock::now();
}
float event_elapsed_ms(int, void* start, void* stop) {
  const auto d = *static_cast<std::chrono::steady_clock::time_point*>(stop) -
                 *static_cast<std::chrono::steady_clock::time_point*>(start);
  return std::chrono::duration<float, std::milli>(d).count();
}

}  // namespace duet::host
