// duet::copy_kernel (and duet_copy_kernel) on every device: the host
// always, each GPU where there is one. Random bytes, every source and
// destination offset 0..15 for the small sizes (the pairs whose addresses
// differ by a multiple of 16 take 16-byte accesses, the others 8, 4, 2 or 1),
// a large copy at a few offsets, a poisoned destination whose bytes outside
// the copy must stay poison, and the refused calls. Public API only: the CPU
// suite and the GPU suite compile this same file.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "duet/device.hpp"
#include "duet/duet.h"
#include "duet/error.hpp"
#include "expect_refused.hpp"

namespace {

constexpr std::uint8_t kPoison = 0xa5;
// Room past the largest copy for the largest offset and a poisoned margin.
constexpr std::size_t kMargin = 32;

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t r = rng();
    for (std::size_t b = 0; b < 8 && i + b < n; ++b) v[i + b] = static_cast<std::uint8_t>(r >> (8 * b));
  }
  return v;
}

// A source of `size` random bytes and a poisoned destination, each with
// kMargin spare bytes, on one device.
struct CopyRig {
  duet::Device dev;
  std::vector<std::uint8_t> host_src;
  duet::Buffer src, dst;
  CopyRig(const duet::Device& d, std::size_t size)
      : dev(d), host_src(random_bytes(size + kMargin, size * 31 + 7)), src(d, size + kMargin), dst(d, size + kMargin) {
    src.upload(host_src.data(), host_src.size());
  }

  // Copies `n` bytes from src + src_off to dst + dst_off with the copy
  // kernel; returns "" when dst holds exactly those bytes there and poison
  // everywhere else, else where it does not.
  std::string check(std::size_t n, std::size_t src_off, std::size_t dst_off) {
    dst.fill(kPoison);
    duet::copy_kernel(dev, static_cast<char*>(dst.data()) + dst_off, static_cast<const char*>(src.data()) + src_off, n);
    duet::synchronize(dev);
    std::vector<std::uint8_t> got(n + 2 * 16);
    dst.download(got.data(), std::min(got.size(), dst.size()));
    for (std::size_t i = 0; i < got.size() && i < dst.size(); ++i) {
      const bool inside = i >= dst_off && i < dst_off + n;
      const std::uint8_t want = inside ? host_src[src_off + (i - dst_off)] : kPoison;
      if (got[i] != want)
        return "byte " + std::to_string(i) + " of dst is " + std::to_string(got[i]) + ", not " + std::to_string(want) +
               (inside ? " (copied)" : " (poison, outside the copy)");
    }
    return "";
  }
};

std::string where(const duet::Device& dev, std::size_t n, std::size_t src_off, std::size_t dst_off) {
  return dev.label() + ": " + std::to_string(n) + " bytes, src + " + std::to_string(src_off) + ", dst + " +
         std::to_string(dst_off);
}

}  // namespace

TEST_CASE("the copy kernel copies exactly: sizes 0 to 4097 at every byte offset, on every device") {
  const std::vector<std::size_t> sizes{0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1023, 4097};
  for (const duet::Device& dev : duet::devices()) {
    CopyRig rig(dev, sizes.back() + 16);
    int failures = 0;
    for (const std::size_t n : sizes)
      for (std::size_t src_off = 0; src_off < 16; ++src_off)
        for (std::size_t dst_off = 0; dst_off < 16; ++dst_off) {
          const std::string problem = rig.check(n, src_off, dst_off);
          if (!problem.empty() && ++failures <= 8) FAIL_CHECK(where(dev, n, src_off, dst_off), ": ", problem);
        }
    CHECK_MESSAGE(failures == 0, dev.label(), ": ", failures, " of ", sizes.size() * 256, " copies wrong");
  }
}

TEST_CASE("the copy kernel copies exactly: a large odd size at aligned and unaligned offsets, on every device") {
  // 48 MiB + 7: on a GPU, more than one wave's worth of unrolled 16-byte
  // loads (an H100 holds 132 x 2048 threads x 64 bytes, 17 MB), so the grid
  // strides; the 7 leaves a tail.
  const std::size_t n = (std::size_t(48) << 20) + 7;
  const std::vector<std::pair<std::size_t, std::size_t>> offsets{{0, 0}, {1, 1}, {15, 15}, {3, 7},
                                                                 {8, 0}, {4, 12}, {2, 10}, {0, 1}};
  for (const duet::Device& dev : duet::devices()) {
    CopyRig rig(dev, n);
    for (const auto& [src_off, dst_off] : offsets) {
      INFO(where(dev, n, src_off, dst_off));
      CHECK(rig.check(n, src_off, dst_off) == "");
    }
  }
}

TEST_CASE("the copy kernel on a stream, and through the C ABI, on every device") {
  for (const duet::Device& dev : duet::devices()) {
    INFO(dev.label());
    const std::size_t n = (std::size_t(1) << 20) + 3;
    const auto bytes = random_bytes(n, 99);
    duet::Buffer src(dev, n), dst(dev, n);
    src.upload(bytes.data(), n);
    {
      duet::Stream stream(dev);
      dst.fill(kPoison);
      duet::copy_kernel(dev, dst.data(), src.data(), n, stream.handle());
      duet::synchronize(dev, stream.handle());
      std::vector<std::uint8_t> back(n);
      dst.download(back.data(), n);
      CHECK(back == bytes);
    }
    const duet_device_t c_dev{dev.backend() == duet::BackendKind::cuda  ? DUET_BACKEND_CUDA
                              : dev.backend() == duet::BackendKind::hip ? DUET_BACKEND_HIP
                                                                        : DUET_BACKEND_HOST,
                              dev.ordinal()};
    dst.fill(kPoison);
    CHECK(duet_copy_kernel(c_dev, static_cast<char*>(dst.data()) + 5, static_cast<const char*>(src.data()) + 3, n - 5,
                           nullptr) == DUET_SUCCESS);
    CHECK(duet_synchronize(c_dev, nullptr) == DUET_SUCCESS);
    std::vector<std::uint8_t> back(n);
    dst.download(back.data(), n);
    CHECK(std::equal(back.begin() + 5, back.end(), bytes.begin() + 3));
    CHECK(std::all_of(back.begin(), back.begin() + 5, [](std::uint8_t b) { return b == kPoison; }));
    // Refused through the C ABI: a status and the message, nothing written.
    dst.fill(kPoison);
    CHECK(duet_copy_kernel(c_dev, dst.data(), nullptr, 16, nullptr) == DUET_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(duet_last_error()).find("src is a null pointer") != std::string::npos);
    dst.download(back.data(), 16);
    CHECK(std::all_of(back.begin(), back.begin() + 16, [](std::uint8_t b) { return b == kPoison; }));
  }
}

TEST_CASE("the copy kernel refuses null pointers, overlapping ranges and another device's memory") {
  using duet::testing::expect_refused;
  for (const duet::Device& dev : duet::devices()) {
    INFO(dev.label());
    duet::Buffer a(dev, 4096), b(dev, 4096);
    char* p = static_cast<char*>(a.data());
    expect_refused([&] { duet::copy_kernel(dev, nullptr, p, 16); }, "dst is a null pointer");
    expect_refused([&] { duet::copy_kernel(dev, p, nullptr, 16); }, "src is a null pointer");
    expect_refused([&] { duet::copy_kernel(dev, p + 8, p, 16); }, "src and dst overlap");
    expect_refused([&] { duet::copy_kernel(dev, p, p + 15, 16); }, "src and dst overlap");
    expect_refused([&] { duet::copy_kernel(dev, p, p, 1); }, "src and dst overlap");
    // Adjacent ranges, and nothing at all, are fine.
    duet::copy_kernel(dev, p + 16, p, 16);
    duet::copy_kernel(dev, nullptr, nullptr, 0);
    duet::synchronize(dev);
    if (dev.is_gpu()) {
      std::vector<std::uint8_t> host(64);
      expect_refused([&] { duet::copy_kernel(dev, b.data(), host.data(), 64); }, "src is not");
      expect_refused([&] { duet::copy_kernel(dev, host.data(), b.data(), 64); }, "dst is not");
    }
  }
  // GPU memory on the host backend (where a GPU is here).
  for (const duet::Device& dev : duet::devices()) {
    if (!dev.is_gpu()) continue;
    duet::Buffer g(dev, 64);
    std::vector<std::uint8_t> host(64);
    expect_refused([&] { duet::copy_kernel(duet::Device(duet::BackendKind::host, 0), host.data(), g.data(), 64); },
                   "src is");
  }
}
