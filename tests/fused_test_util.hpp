// What the fused operations' differential tests share: the devices they run
// on, device copies of host data, poisoned outputs, strided matrices and
// targets.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "duet/cross_entropy.hpp"
#include "duet/device.hpp"
#include "duet/error.hpp"
#include "duet/fused_planner.hpp"
#include "duet/reference.hpp"
#include "fused_dispatch.hpp"

namespace duet::testing {

// Bytes that read as NaN in f32, f16 and bf16 (an output left unwritten
// shows as a NaN mismatch), and bytes that read as finite values in all
// three (for outputs where NaN is the right answer).
constexpr std::uint8_t kNaNPoison = 0xff;
constexpr std::uint8_t kFinitePoison = 0x3c;

inline std::mt19937_64& rng() {
  static std::mt19937_64 r(std::random_device{}());
  return r;
}

// Normal values rounded through `dtype`, so the reference reads what the
// device reads.
inline std::vector<float> random_values(std::size_t n, float stddev, DType dtype) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng());
  return reference::round_trip(v, dtype);
}

// A rows x cols matrix of `dtype` at row stride `stride` (elements), the
// gaps between rows filled with `gap` bytes.
inline std::vector<std::uint8_t> strided(const std::vector<float>& dense, std::int64_t rows, std::int64_t cols,
                                         std::int64_t stride, DType dtype, std::uint8_t gap) {
  const std::size_t elem = std::size_t(dtype_size(dtype));
  std::vector<std::uint8_t> out(std::size_t(rows > 0 ? (rows - 1) * stride + cols : 0) * elem, gap);
  const auto bytes = reference::encode(dense, dtype);
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + std::size_t(r * stride) * elem, bytes.data() + std::size_t(r * cols) * elem,
                std::size_t(cols) * elem);
  return out;
}
// The rows x cols values of a strided matrix.
inline std::vector<float> dense(const std::vector<std::uint8_t>& bytes, std::int64_t rows, std::int64_t cols,
                                std::int64_t stride, DType dtype) {
  const std::size_t elem = std::size_t(dtype_size(dtype));
  std::vector<float> out;
  out.reserve(std::size_t(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = reference::decode(bytes.data() + std::size_t(r * stride) * elem, std::size_t(cols), dtype);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}
// Whether every byte between the rows still holds `gap`.
inline bool gaps_hold(const std::vector<std::uint8_t>& bytes, std::int64_t rows, std::int64_t cols,
                      std::int64_t stride, DType dtype, std::uint8_t gap) {
  const std::size_t elem = std::size_t(dtype_size(dtype));
  for (std::int64_t r = 0; r + 1 < rows; ++r)
    for (std::size_t b = std::size_t(r * stride + cols) * elem; b < std::size_t((r + 1) * stride) * elem; ++b)
      if (bytes[b] != gap) return false;
  return true;
}

// Targets in their index type at their stride, gaps filled with junk.
inline std::vector<std::uint8_t> target_bytes(const std::vector<std::int64_t>& t, IndexType type, std::int64_t stride) {
  const std::size_t size = type == IndexType::i32 ? 4 : 8;
  std::vector<std::uint8_t> out(t.empty() ? 0 : ((t.size() - 1) * std::size_t(stride) + 1) * size, 0x77);
  for (std::size_t r = 0; r < t.size(); ++r) {
    if (type == IndexType::i32) {
      const std::int32_t v = static_cast<std::int32_t>(t[r]);
      std::memcpy(out.data() + r * std::size_t(stride) * size, &v, 4);
    } else {
      std::memcpy(out.data() + r * std::size_t(stride) * size, &t[r], 8);
    }
  }
  return out;
}

// Magnitude of a cross-entropy row's loss terms before they cancel (x
// dense, rows x cols): a float32 loss can only be as close as eps times this.
inline double loss_scale(const std::vector<float>& x, std::int64_t cols, std::int64_t r, std::int64_t t,
                         double lse, const CrossEntropyOptions& o) {
  double mean_abs = 0.0;
  for (std::int64_t j = 0; j < cols; ++j) mean_abs += std::abs(double(x[std::size_t(r * cols + j)]));
  mean_abs /= double(cols);
  return std::abs(lse) + std::abs(double(x[std::size_t(r * cols + t)])) + o.label_smoothing * mean_abs +
         o.z_loss * lse * lse;
}

// The same for a gradient row: |g| (max_j p_j |1 + 2 z lse| + 1 + eps / V).
inline double grad_scale(const std::vector<float>& x, std::int64_t cols, std::int64_t r, double lse, double g,
                         const CrossEntropyOptions& o) {
  double p = 0.0;
  for (std::int64_t j = 0; j < cols; ++j) p = std::max(p, std::exp(double(x[std::size_t(r * cols + j)]) - lse));
  return std::abs(g) * (p * std::abs(1.0 + 2.0 * o.z_loss * lse) + 1.0 + o.label_smoothing / double(cols));
}

// A strided matrix placed `offset` elements into its buffer (a view that
// starts off the buffer's 16-byte alignment), `gap` bytes before it, between
// its rows and for kGuardElems elements after it: a write before the first
// element or past the last shows there.
constexpr std::int64_t kGuardElems = 16;
inline std::size_t placed_bytes(std::int64_t rows, std::int64_t cols, std::int64_t stride, std::int64_t offset,
                                DType dtype) {
  return std::size_t(offset + (rows - 1) * stride + cols + kGuardElems) * std::size_t(dtype_size(dtype));
}
inline std::vector<std::uint8_t> placed(const std::vector<float>& dense, std::int64_t rows, std::int64_t cols,
                                        std::int64_t stride, std::int64_t offset, DType dtype, std::uint8_t gap) {
  std::vector<std::uint8_t> out(placed_bytes(rows, cols, stride, offset, dtype), gap);
  const auto m = strided(dense, rows, cols, stride, dtype, gap);
  std::copy(m.begin(), m.end(), out.begin() + offset * dtype_size(dtype));
  return out;
}
// The rows x cols values of a placed matrix.
inline std::vector<float> dense(const std::vector<std::uint8_t>& bytes, std::int64_t rows, std::int64_t cols,
                                std::int64_t stride, std::int64_t offset, DType dtype) {
  const std::vector<std::uint8_t> m(bytes.begin() + offset * dtype_size(dtype), bytes.end());
  return dense(m, rows, cols, stride, dtype);
}
// Whether every byte of a placed matrix's buffer outside its rows still
// holds `gap`.
inline bool gaps_hold(const std::vector<std::uint8_t>& bytes, std::int64_t rows, std::int64_t cols,
                      std::int64_t stride, std::int64_t offset, DType dtype, std::uint8_t gap) {
  const std::size_t elem = std::size_t(dtype_size(dtype));
  const std::size_t begin = std::size_t(offset) * elem, end = begin + std::size_t((rows - 1) * stride + cols) * elem;
  for (std::size_t b = 0; b < bytes.size(); ++b)
    if ((b < begin || b >= end) && bytes[b] != gap) return false;
  const std::vector<std::uint8_t> m(bytes.begin() + std::ptrdiff_t(begin), bytes.begin() + std::ptrdiff_t(end));
  return gaps_hold(m, rows, cols, stride, dtype, gap);
}

// Host bytes on a device and back.
class DeviceCopy {
 public:
  DeviceCopy(const Device& dev, const void* host, std::size_t bytes)
      : buffer_(dev, std::max<std::size_t>(bytes, 16)), bytes_(bytes) {
    if (bytes > 0) buffer_.upload(host, bytes);
  }
  template <class T>
  DeviceCopy(const Device& dev, const std::vector<T>& host) : DeviceCopy(dev, host.data(), host.size() * sizeof(T)) {}
  void* data() const { return buffer_.data(); }
  template <class T>
  std::vector<T> get() const {
    std::vector<T> out(bytes_ / sizeof(T));
    if (bytes_ > 0) buffer_.download(out.data(), bytes_);
    return out;
  }

 private:
  Buffer buffer_;
  std::size_t bytes_;
};

// Runs `body` on every device: the host always, each GPU when there is one
// (the same differential cases). A GPU whose build has no fused kernels yet
// (unsupported) is skipped with a message.
inline void on_every_device(const std::function<void(const Device&)>& body) {
  for (const Device& dev : devices()) {
    try {
      body(dev);
    } catch (const Error& e) {
      if (!dev.is_gpu() || e.status() != Status::unsupported) throw;
      MESSAGE("skipping ", dev.label(), ": ", e.what());
    }
  }
}

// The kernel a GPU runs a call of these arguments with (the planner's pick
// for the path fused_vector_ok and fused_row_edges give), for the failure
// messages.
inline std::string fused_kernel(const Device& dev, const FusedArgs& a) {
  if (!dev.is_gpu()) return "host rows";
  FusedShape s;
  s.op = a.op;
  s.dtype = a.dtype;
  s.rows = a.rows;
  s.cols = a.cols;
  s.mask_kind = a.mask_kind;
  s.gradient = a.op == FusedOp::cross_entropy && a.out != nullptr;
  s.vector_ok = detail::fused_vector_ok(a);
  s.row_edges = s.vector_ok && detail::fused_row_edges(a);
  return plan_fused(dev.props(), s).kernel;
}

// On a GPU, whether the planned kernel is the path `vector` says (1: the
// vector kernels, with edges where a row is not whole packs from its
// start; 0: the scalar kernels): the cases meant for the edges run them.
inline bool runs_path(const Device& dev, const FusedArgs& a, const std::string& kernel, int vector) {
  if (!dev.is_gpu() || vector < 0) return true;
  const bool scalar = kernel.find(",vec1,") != std::string::npos;
  const bool edges = kernel.find(",edges>") != std::string::npos;
  return vector == 0 ? scalar : !scalar && edges == detail::fused_row_edges(a);
}

inline std::string label(const Device& dev, DType dtype) { return dev.label() + " " + to_string(dtype); }

}  // namespace duet::testing
