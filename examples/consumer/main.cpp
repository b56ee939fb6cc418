// Downstream use of an installed duet through the C++ API: softmax of a small
// matrix on the host backend; every row must sum to 1 (exit 1 otherwise).
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include <duet/config.hpp>
#include <duet/device.hpp>
#include <duet/error.hpp>
#include <duet/softmax.hpp>

int main() {
  try {
    constexpr std::int64_t rows = 4, cols = 37;  // 37: not a multiple of the vector width
    std::vector<float> x(rows * cols), y(rows * cols, -1.0f);
    for (std::int64_t i = 0; i < rows * cols; ++i) x[i] = std::sin(0.37f * float(i)) * float(1 + i % 5);

    const duet::Device host = duet::device(duet::BackendKind::host, 0);
    duet::softmax(host, duet::DType::f32, rows, cols, x.data(), cols, y.data(), cols);

    double worst = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const float v = y[r * cols + c];
        if (!(v > 0.0f && v <= 1.0f)) {
          std::fprintf(stderr, "duet_consumer: y[%lld][%lld] = %g is not in (0, 1]\n", (long long)r, (long long)c, v);
          return 1;
        }
        sum += v;
      }
      worst = std::fmax(worst, std::fabs(sum - 1.0));
    }
    if (!(worst <= 1e-5)) {
      std::fprintf(stderr, "duet_consumer: a row sums to 1 %+g\n", worst);
      return 1;
    }
    std::printf("duet_consumer: duet %s, softmax %lldx%lld on %s (%s): rows sum to 1 (worst |sum - 1| = %.2g)\n",
                DUET_VERSION, (long long)rows, (long long)cols, host.label().c_str(), host.props().name.c_str(), worst);
    return 0;
  } catch (const duet::Error& e) {
    std::fprintf(stderr, "duet_consumer: duet error (%d): %s\n", static_cast<int>(e.status()), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "duet_consumer: %s\n", e.what());
  }
  return 1;
}
