// The CPU host backend: describes the machine and runs the same operations
// on host memory, with SIMD row kernels (host_kernels.hpp) on a persistent
// pool of threads (thread_pool.hpp), so duet's API works with no GPU.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "duet/device.hpp"
#include "host/host_interleaved.hpp"
#include "host/host_kernels.hpp"
#include "host/host_pool.hpp"
#include "host/thread_pool.hpp"
#include "host/work_split.hpp"

#define DUET_NS host
#include "backend_api.hpp"
#undef DUET_NS

namespace duet::host {
namespace {

long sysconf_or_zero(int name) {
  const long v = ::sysconf(name);
  return v > 0 ? v : 0;
}

// One cache level as Linux describes it for CPU 0 (/sys/devices/system/
// cpu/cpu0/cache/index*): its size and how many logical CPUs share it;
// zero bytes where there is no such entry. In a virtual machine sysconf can
// report the whole host's L3 (320 MB on a 2-core KVM guest whose L3 slice is
// 32 MB), where these entries give the slice the guest's CPUs share.
struct CacheLevel {
  std::int64_t bytes = 0;
  int shared_by = 1;
};

// The number of CPUs in a list such as "0-3,8,10-11".
int count_cpu_list(const std::string& list) {
  int count = 0;
  std::size_t pos = 0;
  while (pos < list.size()) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    const long first = std::strtol(item.c_str(), nullptr, 10);
    const long last = dash == std::string::npos ? first : std::strtol(item.c_str() + dash + 1, nullptr, 10);
    count += static_cast<int>(std::max(0L, last - first + 1));
    pos = comma + 1;
  }
  return std::max(1, count);
}

CacheLevel sys_cache(int level) {
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level");
    int found = 0;
    if (!(level_file >> found)) break;
    std::string type, size, shared;
    std::ifstream(dir + "type") >> type;
    if (found != level || type == "Instruction") continue;
    std::ifstream(dir + "size") >> size;  // "32768K"
    std::ifstream(dir + "shared_cpu_list") >> shared;
    char* unit = nullptr;
    std::int64_t bytes = std::strtoll(size.c_str(), &unit, 10);
    if (unit && (*unit == 'K' || *unit == 'k')) bytes <<= 10;
    if (unit && *unit == 'M') bytes <<= 20;
    if (unit && *unit == 'G') bytes <<= 30;
    return {std::max<std::int64_t>(0, bytes), shared.empty() ? 1 : count_cpu_list(shared)};
  }
  return {};
}

// A cache level's size: Linux's entry, else sysconf's.
std::int64_t cache_bytes(int level) {
  if (const CacheLevel c = sys_cache(level); c.bytes > 0) return c.bytes;
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  const int names[] = {_SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE};
  if (level >= 1 && level <= 3) return sysconf_or_zero(names[level - 1]);
#endif
  return 0;
}

// The longest softmax row that keeps its exps in a thread's scratch: a
// quarter of one CPU's share of the last-level cache in floats, so the
// scratch and the row's input stay there between the passes, and at least
// 64K elements (256 KB: within any L2 of the last decade).
std::int64_t scratch_row_limit() {
  static const std::int64_t limit = [] {
    CacheLevel last = sys_cache(3);
    if (last.bytes == 0) last = sys_cache(2);
    const std::int64_t share = last.bytes / last.shared_by;
    return std::clamp<std::int64_t>(share / 4 / std::int64_t(sizeof(float)), 65536, kMaxScratchElems);
  }();
  return limit;
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

std::string machine_name() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "host";
#endif
}

// Logical CPUs this process may run on (its affinity mask), else the
// hardware's count.
int usable_cpus() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// DUET_HOST_THREADS when it is a whole number in [1, kMaxHostThreads]
// (anything else is ignored), else one thread per usable CPU.
constexpr int kMaxHostThreads = 1024;
int default_host_threads() {
  if (const char* env = std::getenv("DUET_HOST_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= kMaxHostThreads) return static_cast<int>(n);
  }
  return usable_cpus();
}

// The one pool every call shares, made on first use and remade after
// set_host_threads. Its mutex is held for a whole call: a call that finds it
// taken (another application thread is running one) runs on its own thread
// instead of adding threads.
std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;
int g_threads_setting = 0;  // 0: default_host_threads()

ThreadPool& pool_locked() {
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(g_threads_setting > 0 ? g_threads_setting : default_host_threads());
  return *g_pool;
}

// Outputs at least this large bypass the cache (non-temporal stores): they
// would not stay there, and the stores spare a read for ownership.
constexpr std::int64_t kStreamOutputBytes = std::int64_t(32) << 20;

void run_split(ThreadPool* pool, const SoftmaxArgs& a, DType dtype, bool backward, const HostWorkSplit& split,
               int elem_bytes) {
  const bool stream = a.rows * a.cols * elem_bytes >= kStreamOutputBytes;
  const std::int64_t scratch = scratch_row_limit();
  if (pool == nullptr || split.threads <= 1) return run_rows(a, dtype, backward, 0, a.rows, stream, scratch);
  if (split.parts_per_row <= 1) {
    return pool->run(split.tasks, [&](std::int64_t t) {
      const std::int64_t begin = t * split.rows_per_task;
      run_rows(a, dtype, backward, begin, std::min(a.rows, begin + split.rows_per_task), stream, scratch);
    });
  }
  // Few wide rows: every range's partial, then every range written with its
  // row's combined partial.
  std::vector<RowPartial> partials(static_cast<std::size_t>(split.tasks));
  auto range = [&](std::int64_t t) {
    const std::int64_t begin = (t % split.parts_per_row) * split.part_elems;
    return std::pair{begin, std::min(a.cols, begin + split.part_elems)};
  };
  pool->run(split.tasks, [&](std::int64_t t) {
    const auto [begin, end] = range(t);
    partials[std::size_t(t)] = row_partial(a, dtype, backward, t / split.parts_per_row, begin, end);
  });
  pool->run(split.tasks, [&](std::int64_t t) {
    const std::int64_t row = t / split.parts_per_row;
    RowPartial whole = partials[std::size_t(row * split.parts_per_row)];
    for (std::int64_t p = 1; p < split.parts_per_row; ++p)
      whole = combine(whole, partials[std::size_t(row * split.parts_per_row + p)]);
    const auto [begin, end] = range(t);
    write_row_range(a, dtype, backward, row, begin, end, whole, stream);
  });
}

void require_host_ordinal(int ordinal) {
  if (ordinal != 0)
    throw Error(Status::no_device, "host device " + std::to_string(ordinal) + " does not exist (1 found)");
}

}  // namespace

PoolLease::PoolLease() : lock_(g_pool_mutex, std::defer_lock) {
  if (!ThreadPool::on_worker_thread() && lock_.try_lock()) pool_ = &pool_locked();
}

int device_count() noexcept { return 1; }
std::string no_device_reason() { return ""; }
int runtime_version() noexcept { return 0; }
int driver_version() noexcept { return 0; }
std::string compiled_targets() { return machine_name() + ": " + compiled_simd_targets(); }

DeviceProps device_props(int ordinal) {
  require_host_ordinal(ordinal);
  DeviceProps d;
  d.name = cpu_model_name();
  d.vendor = Vendor::host;
  d.backend = BackendKind::host;
  d.arch = machine_name();
  // The SIMD target the kernels run on, chosen at run time ("CPU AVX3").
  d.family = "CPU " + simd_target_name();
  d.sm_count = usable_cpus();
  d.warp_size = simd_float_lanes();
  d.simd_width_bytes = d.warp_size * 4;
  d.max_threads_per_block = 1;
  d.max_threads_per_sm = 1;
  d.max_blocks_per_sm = 1;
  d.l1d_bytes = cache_bytes(1);
  d.l2_bytes = cache_bytes(2);
  d.l3_bytes = cache_bytes(3);
  d.memory_bytes = static_cast<std::int64_t>(sysconf_or_zero(_SC_PHYS_PAGES)) * sysconf_or_zero(_SC_PAGE_SIZE);
  d.source = "/sys cache entries (else sysconf) + /proc/cpuinfo + Highway run-time dispatch";
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

int max_active_clusters(int ordinal, int, int, int, std::int64_t) {
  require_host_ordinal(ordinal);
  return 0;  // no clusters on the host: the planner never asks for one there
}

void launch_softmax(int ordinal, int variant, const SoftmaxArgs& args, const LaunchGeometry&, const LaunchGeometry&,
                    void*) {
  require_host_ordinal(ordinal);
  const Variant& v = kCatalogue.at(static_cast<std::size_t>(variant));
  const int elem_bytes = v.dtype == DType::f32 ? 4 : 2;
  try {
    const PoolLease lease;
    ThreadPool* pool = lease.pool();
    if (v.strategy == Strategy::interleaved_rows) return run_interleaved(pool, args, v.dtype, v.backward);
    const HostWorkSplit split =
        host_work_split(args.rows, args.cols, elem_bytes, v.backward, pool ? pool->threads() : 1);
    run_split(pool, args, v.dtype, v.backward, split, elem_bytes);
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, "the host backend ran out of memory for a " + std::to_string(args.rows) + " x " +
                                           std::to_string(args.cols) + " call");
  }
}

void* device_alloc(int ordinal, std::size_t bytes) {
  require_host_ordinal(ordinal);
  auto failed = [&] { return Error(Status::out_of_memory, "host allocation of " + std::to_string(bytes) + " bytes failed"); };
  // Rounded up to whole 64-byte lines; a size that wraps in the rounding
  // cannot be had either.
  if (bytes > std::numeric_limits<std::size_t>::max() - 63) throw failed();
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr && bytes != 0) throw failed();
  return p;
}
void device_free(int, void* p) noexcept { std::free(p); }
void copy_to_device(int, void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void copy_to_host(int, void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
// Large copies run on the pool, a contiguous piece a task, so a copy is as
// fast as the softmax's threads can move memory (duet-bench's ceiling).
// The host has no copy kernel of its own: copy_kernel is this copy too.
void copy_device_to_device(int, void* dst, const void* src, std::size_t bytes, void*) {
  constexpr std::size_t kPiece = std::size_t(1) << 22;
  std::unique_lock lock(g_pool_mutex, std::defer_lock);
  if (bytes < 2 * kPiece || ThreadPool::on_worker_thread() || !lock.try_lock()) return void(std::memcpy(dst, src, bytes));
  ThreadPool& pool = pool_locked();
  const std::size_t piece = std::max(kPiece, (bytes / std::size_t(pool.threads()) + 63) / 64 * 64);
  pool.run(static_cast<std::int64_t>((bytes + piece - 1) / piece), [&](std::int64_t t) {
    const std::size_t begin = std::size_t(t) * piece;
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, std::min(piece, bytes - begin));
  });
}
void copy_kernel(int ordinal, void* dst, const void* src, std::size_t bytes, void* stream) {
  copy_device_to_device(ordinal, dst, src, bytes, stream);
}
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

namespace duet {

void set_host_threads(int threads) {
  require(threads >= 0 && threads <= host::kMaxHostThreads, Status::invalid_argument,
          "host threads " + std::to_string(threads) + " is out of range (0 = one per CPU, up to " +
              std::to_string(host::kMaxHostThreads) + ")");
  require(!host::ThreadPool::on_worker_thread(), Status::invalid_argument,
          "set_host_threads cannot be called from a host worker thread");
  std::lock_guard lock(host::g_pool_mutex);
  host::g_pool.reset();  // the next call starts the new pool
  host::g_threads_setting = threads;
}

int host_threads() {
  if (host::ThreadPool::on_worker_thread()) return 1;
  std::lock_guard lock(host::g_pool_mutex);
  return host::pool_locked().threads();
}

}  // namespace duet
