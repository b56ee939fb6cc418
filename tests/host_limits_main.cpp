// One host softmax of ROWS x COLS f32 through the C ABI, for
// tests/host_limits.sh to run under resource limits. Prints the status and
// exits 0 when the call succeeded with a right answer or failed cleanly with
// out_of_memory, 1 otherwise.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "duet/device.hpp"
#include "duet/duet.h"

// Every row holds 0..6 repeating: softmax of v is exp(v - 6) / sum.
int check(const float* y, long long rows, long long cols) {
  double row_sum = 0;
  for (long long c = 0; c < cols; ++c) row_sum += std::exp(double(c % 7) - 6.0);
  for (long long r = 0; r < rows; ++r)
    for (long long c = 0; c < cols; c += cols / 5 + 1) {
      const double want = std::exp(double(c % 7) - 6.0) / row_sum;
      if (std::fabs(y[r * cols + c] - want) > 1e-5 / row_sum) {
        std::printf("wrong result at %lld,%lld: %g, want %g\n", r, c, double(y[r * cols + c]), want);
        return 1;
      }
    }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: duet_host_limits ROWS COLS\n");
    return 2;
  }
  const long long rows = std::atoll(argv[1]), cols = std::atoll(argv[2]);
  float* x = static_cast<float*>(std::malloc(std::size_t(rows * cols) * sizeof(float)));
  float* y = static_cast<float*>(std::malloc(std::size_t(rows * cols) * sizeof(float)));
  if (!x || !y) {
    std::printf("the test's own buffers do not fit: skipped\n");
    std::free(x);
    std::free(y);
    return 77;
  }
  for (long long r = 0; r < rows; ++r)
    for (long long c = 0; c < cols; ++c) x[r * cols + c] = float(c % 7);
  const duet_device_t host{DUET_BACKEND_HOST, 0};
  const duet_status_t s = duet_softmax(host, DUET_F32, rows, cols, x, cols, y, cols, nullptr);
  std::printf("%s %s (host threads %d)\n", duet_status_string(s), duet_last_error(), duet::host_threads());
  const int verdict = s == DUET_SUCCESS ? check(y, rows, cols) : s == DUET_ERROR_OUT_OF_MEMORY ? 0 : 1;
  std::free(x);
  std::free(y);
  return verdict;
}
