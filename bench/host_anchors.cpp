// Side-by-side timing on the CPU: duet's host backend, oneDNN's softmax and
// memcpy of the same bytes, on the same tensors, one JSON object a line.
// bench/host_compare.py runs it (and torch) and plots the results.
//
//   host_anchors --threads 2 --mbytes 1024 --dtype f32 --cols 256 4096
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "duet/device.hpp"
#include "duet/reference.hpp"
#include "duet/softmax.hpp"

namespace {

struct Options {
  int threads = 0;
  double mbytes = 1024;
  int repeats = 7;
  bool log = false;
  std::vector<std::string> dtypes{"f32"};
  std::vector<std::int64_t> cols{256, 4096, 65536, 1048576};
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto list = [&](auto add) {
      while (i + 1 < argc && argv[i + 1][0] != '-') add(std::string(argv[++i]));
    };
    if (a == "--threads" && i + 1 < argc) o.threads = std::stoi(argv[++i]);
    else if (a == "--mbytes" && i + 1 < argc) o.mbytes = std::stod(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc) o.repeats = std::stoi(argv[++i]);
    else if (a == "--log") o.log = true;
    else if (a == "--dtype") o.dtypes.clear(), list([&](std::string s) { o.dtypes.push_back(s); });
    else if (a == "--cols") o.cols.clear(), list([&](std::string s) { o.cols.push_back(std::stoll(s)); });
    else {
      std::fprintf(stderr, "host_anchors: unknown argument '%s'\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

// Median seconds of `repeats` calls, after one untimed call.
double median_seconds(int repeats, const std::function<void()>& call) {
  call();
  std::vector<double> s;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

// memcpy of `bytes` cut into one contiguous piece per thread.
void parallel_copy(void* dst, const void* src, std::size_t bytes, int threads) {
  std::vector<std::thread> pool;
  const std::size_t piece = (bytes / std::size_t(threads) + 63) / 64 * 64;
  for (int t = 1; t < threads; ++t) {
    const std::size_t begin = std::min(bytes, piece * std::size_t(t)), end = std::min(bytes, begin + piece);
    pool.emplace_back([=] { std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, end - begin); });
  }
  std::memcpy(dst, src, std::min(bytes, piece));
  for (auto& th : pool) th.join();
}

// A buffer on a 64-byte boundary, as torch's CPU allocator and oneDNN's
// place tensors (std::vector's 16-byte alignment would deny every
// implementation its aligned, non-temporal stores).
struct AlignedBuffer {
  explicit AlignedBuffer(std::size_t bytes)
      : ptr(static_cast<std::uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), &std::free) {
    if (!ptr) throw std::bad_alloc();
  }
  std::uint8_t* data() const { return ptr.get(); }
  std::unique_ptr<std::uint8_t, decltype(&std::free)> ptr;
};

void print_result(const char* impl, const std::string& dtype, std::int64_t rows, std::int64_t cols, int threads,
                  double bytes_moved, double seconds) {
  std::printf("{\"impl\": \"%s\", \"dtype\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"threads\": %d, "
              "\"seconds\": %.6g, \"gbps\": %.3f}\n",
              impl, dtype.c_str(), static_cast<long long>(rows), static_cast<long long>(cols), threads, seconds,
              bytes_moved / seconds / 1e9);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.threads > 0) duet::set_host_threads(o.threads);
  const int threads = duet::host_threads();
  const duet::Device host = duet::device(duet::BackendKind::host, 0);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (const std::string& dt_name : o.dtypes) {
    const duet::DType dt = dt_name == "f32" ? duet::DType::f32 : dt_name == "f16" ? duet::DType::f16 : duet::DType::bf16;
    const std::size_t elem = dt == duet::DType::f32 ? 4 : 2;
    for (const std::int64_t cols : o.cols) {
      const std::int64_t rows = std::max<std::int64_t>(1, std::int64_t(o.mbytes * 1e6) / (cols * std::int64_t(elem)));
      const std::size_t count = std::size_t(rows * cols), bytes = count * elem;
      std::vector<float> sample(std::min<std::size_t>(count, std::size_t(1) << 20));
      for (auto& v : sample) v = dist(rng);
      const auto encoded = duet::reference::encode(sample, dt);
      const AlignedBuffer x(bytes), y(bytes);
      for (std::size_t off = 0; off < bytes; off += encoded.size())
        std::memcpy(x.data() + off, encoded.data(), std::min(encoded.size(), bytes - off));
      std::memset(y.data(), 0, bytes);
      const double moved = 2.0 * double(bytes);

      print_result("memcpy", dt_name, rows, cols, threads, moved,
                   median_seconds(o.repeats, [&] { parallel_copy(y.data(), x.data(), bytes, threads); }));
      print_result("duet", dt_name, rows, cols, threads, moved, median_seconds(o.repeats, [&] {
                     if (o.log)
                       duet::log_softmax(host, dt, rows, cols, x.data(), cols, y.data(), cols);
                     else
                       duet::softmax(host, dt, rows, cols, x.data(), cols, y.data(), cols);
                   }));
      const auto dnnl_type = dt == duet::DType::f32   ? dnnl::memory::data_type::f32
                             : dt == duet::DType::f16 ? dnnl::memory::data_type::f16
                                                      : dnnl::memory::data_type::bf16;
      try {
        const dnnl::memory::desc md({rows, cols}, dnnl_type, dnnl::memory::format_tag::ab);
        dnnl::memory src(md, engine, x.data()), dst(md, engine, y.data());
        const auto prop = dnnl::prop_kind::forward_inference;
        dnnl::primitive prim;
        if (o.log)
          prim = dnnl::logsoftmax_forward(dnnl::logsoftmax_forward::primitive_desc({prop, md, 1}, engine));
        else
          prim = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc({prop, md, 1}, engine));
        print_result("onednn", dt_name, rows, cols, threads, moved, median_seconds(o.repeats, [&] {
                       prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
                       stream.wait();
                     }));
      } catch (const dnnl::error& e) {
        std::fprintf(stderr, "host_anchors: oneDNN has no %s softmax here (%s)\n", dt_name.c_str(), e.what());
      }
    }
  }
  return 0;
}
