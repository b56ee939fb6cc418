#!/usr/bin/env bash
# The host backend under resource limits, in a real process: out of address
# space (ulimit -v) and out of threads (ulimit -u) give a right answer or a
# clean out_of_memory, never an abort. Usage: host_limits.sh DUET_HOST_LIMITS
set -u
prog=$1
fail=0

run() {  # run NAME COMMAND...: the command must exit 0 without "terminate"
  local name=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  echo "$name: rc $rc: $out"
  if [ $rc -ne 0 ] || grep -q "terminate" <<<"$out"; then fail=1; fi
}

# Under ASan (DUET_SANITIZED=1, set by CMake) the shadow memory needs
# terabytes of address space, so ulimit -v cannot apply, and LeakSanitizer
# needs a thread of its own.
if [ "${DUET_SANITIZED:-0}" = 1 ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  echo "ulimit -v: not under ASan: skipped"
else
# Two rows of 2^26 f32 (256 MiB each, in and out: 1 GiB) in 1.3 GB of address
# space: a per-row buffer in a worker used to abort with std::bad_alloc.
run "ulimit -v, 2 x 2^26" bash -c "ulimit -v 1300000 && DUET_HOST_THREADS=2 exec '$prog' 2 67108864"
# Address space for the buffers but not for the pool's threads' stacks.
run "ulimit -v, 8 threads wanted" bash -c "ulimit -v 600000 && DUET_HOST_THREADS=8 exec '$prog' 64 262144"
fi

# Threads: RLIMIT_NPROC counts the user's threads and does not bind root, so
# run as an unprivileged user where we are root (setpriv, util-linux).
as_user=()
if [ "$(id -u)" = 0 ]; then
  if command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null &&
     setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$prog"; then
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  else
    echo "ulimit -u: root, and no unprivileged user can run $prog: skipped"
    [ $fail = 0 ] && exit 77 || exit 1
  fi
fi
for limit in 1 2 3; do
  run "ulimit -u $limit, 8 threads wanted" "${as_user[@]}" bash -c "ulimit -u $limit && DUET_HOST_THREADS=8 exec '$prog' 64 262144"
done
exit $fail
