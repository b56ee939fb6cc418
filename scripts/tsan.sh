#!/usr/bin/env bash
# ThreadSanitizer over the host backend: a host-only build in build-tsan/,
# then the 16-thread mixed-shape stress test, the thread pool's own tests and
# the host differential tests. Usage: scripts/tsan.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-tsan -G Ninja -DDUET_ENABLE_CUDA=OFF -DDUET_ENABLE_HIP=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread "$@"
cmake --build build-tsan -j"$(nproc)" --target duet_host_thread_tests duet_host_pool_tests
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
build-tsan/tests/duet_host_pool_tests
build-tsan/tests/duet_host_thread_tests --test-case="host stress*,host backend: eight threads*,host threads*"
echo "tsan: clean"
