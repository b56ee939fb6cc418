/* Downstream use of an installed duet through the C ABI alone (duet/duet.h),
 * as C11: find the host device, run softmax and log_softmax, check the rows,
 * and check that a bad call returns a status with a message. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <duet/duet.h>

#define ROWS 3
#define COLS 5

static int fail(const char* what, duet_status_t s) {
  fprintf(stderr, "duet_c_consumer: %s: %s (%d): %s\n", what, duet_status_string(s), (int)s, duet_last_error());
  return 1;
}

int main(void) {
  int count = 0;
  duet_status_t s = duet_device_count(&count);
  if (s != DUET_SUCCESS) return fail("duet_device_count", s);

  /* The host is listed last; look for it rather than assume. */
  duet_device_t host = {DUET_BACKEND_HOST, -1};
  for (int i = 0; i < count; ++i) {
    duet_device_t d;
    s = duet_get_device(i, &d);
    if (s != DUET_SUCCESS) return fail("duet_get_device", s);
    if (d.backend == DUET_BACKEND_HOST) host = d;
  }
  if (host.ordinal < 0) {
    fprintf(stderr, "duet_c_consumer: no host device among %d\n", count);
    return 1;
  }

  float x[ROWS * COLS], y[ROWS * COLS], ly[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; ++i) x[i] = (float)(i % 7) - 2.5f;

  s = duet_softmax(host, DUET_F32, ROWS, COLS, x, COLS, y, COLS, NULL);
  if (s != DUET_SUCCESS) return fail("duet_softmax", s);
  s = duet_log_softmax(host, DUET_F32, ROWS, COLS, x, COLS, ly, COLS, NULL);
  if (s != DUET_SUCCESS) return fail("duet_log_softmax", s);
  s = duet_synchronize(host, NULL);
  if (s != DUET_SUCCESS) return fail("duet_synchronize", s);

  for (int r = 0; r < ROWS; ++r) {
    double sum = 0.0;
    for (int c = 0; c < COLS; ++c) {
      const int i = r * COLS + c;
      sum += y[i];
      if (fabs(exp((double)ly[i]) - (double)y[i]) > 1e-6) {
        fprintf(stderr, "duet_c_consumer: exp(log_softmax) != softmax at row %d col %d: %g vs %g\n", r, c,
                exp((double)ly[i]), (double)y[i]);
        return 1;
      }
    }
    if (fabs(sum - 1.0) > 1e-5) {
      fprintf(stderr, "duet_c_consumer: row %d sums to %.9g\n", r, sum);
      return 1;
    }
  }

  /* A bad call: a null input must be rejected with a status and a message,
   * and the next good call must clear the message. */
  s = duet_softmax(host, DUET_F32, ROWS, COLS, NULL, COLS, y, COLS, NULL);
  if (s != DUET_ERROR_INVALID_ARGUMENT || duet_last_error()[0] == '\0') {
    fprintf(stderr, "duet_c_consumer: a null input gave status %d (\"%s\"), want %d with a message\n", (int)s,
            duet_last_error(), (int)DUET_ERROR_INVALID_ARGUMENT);
    return 1;
  }
  char message[256];
  snprintf(message, sizeof message, "%s", duet_last_error());
  s = duet_softmax(host, DUET_F32, ROWS, COLS, x, COLS, y, COLS, NULL);
  if (s != DUET_SUCCESS) return fail("duet_softmax after an error", s);
  if (strcmp(duet_last_error(), "") != 0) {
    fprintf(stderr, "duet_c_consumer: the last error was not cleared: \"%s\"\n", duet_last_error());
    return 1;
  }

  printf("duet_c_consumer: duet %s, %d device(s); softmax and log_softmax %dx%d on host:%d agree, rows sum to 1; "
         "a null input gives %s: \"%s\"\n",
         duet_version(), count, ROWS, COLS, host.ordinal, duet_status_string(DUET_ERROR_INVALID_ARGUMENT), message);
  return 0;
}
