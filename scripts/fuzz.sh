#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang in build-fuzz/ (host
# backend only, duet_core under ASan+UBSan) and runs each for FUZZ_SECONDS
# (default 60) from the seed corpus. New corpus entries go to a temporary copy;
# crash inputs and logs go to build-fuzz/. Exits non-zero if a fuzzer finds
# anything (crash, sanitizer report, invariant violation, leak, timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
build=${src}/build-fuzz
secs=${FUZZ_SECONDS:-60}

mkdir -p "${build}"
CC=clang CXX=clang++ cmake -S "${src}" -B "${build}" -G Ninja \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDUET_ENABLE_CUDA=OFF -DDUET_ENABLE_HIP=OFF \
  -DDUET_BUILD_TESTS=OFF -DDUET_BUILD_TOOLS=OFF -DDUET_BUILD_FUZZERS=ON >"${build}/configure.log" 2>&1 || {
  cat "${build}/configure.log"
  exit 1
}
if ! grep -q 'build fuzz_props' "${build}/build.ninja"; then
  grep -E 'DUET_BUILD_FUZZERS|fuzz' "${build}/configure.log" || true
  echo "fuzz.sh: no fuzz targets configured (is include(DuetFuzz) in CMakeLists.txt, clang and libclang-rt-14-dev installed?)" >&2
  exit 1
fi
cmake --build "${build}" --target fuzz_props fuzz_occupancy

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
mkdir -p "${build}/artifacts" "${build}/logs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && ! command -v llvm-symbolizer >/dev/null && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer  # stack traces with function names
fi

failed=0
summary=()
for target in fuzz_props fuzz_occupancy; do
  corpus=${work}/${target}
  mkdir -p "${corpus}"
  seeds=${src}/tests/fuzz/corpus/${target#fuzz_}
  if [ -d "${seeds}" ]; then cp -R "${seeds}/." "${corpus}/"; fi
  dict=()
  if [ -f "${src}/tests/fuzz/${target#fuzz_}.dict" ]; then dict=(-dict="${src}/tests/fuzz/${target#fuzz_}.dict"); fi
  seeded=$(find "${corpus}" -type f | wc -l)
  log=${build}/logs/${target}.log
  rm -f "${build}/artifacts/${target}-"*
  start=$(date +%s)
  rc=0
  "${build}/${target}" "${corpus}" "${dict[@]}" -max_total_time="${secs}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="${build}/artifacts/${target}-" >"${log}" 2>&1 || rc=$?
  elapsed=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "${log}" | tail -n 1)
  units=$(find "${corpus}" -type f | wc -l)
  findings=$(find "${build}/artifacts" -name "${target}-*" -type f | wc -l)
  if [ "${rc}" -ne 0 ] && [ "${findings}" -eq 0 ]; then findings=1; fi  # died without an artifact
  line="${target}: ${execs:-?} executions in ${elapsed} s (${rate:-?}/s), corpus ${seeded} -> ${units}, crashes found = ${findings}"
  summary+=("${line}")
  if [ "${findings}" -ne 0 ]; then
    failed=1
    echo "=== ${target}: finding (exit ${rc}); log ${log}" >&2
    grep -E '^(==[0-9]+==ERROR|SUMMARY|\*\*\* |.*runtime error|    #[0-9]+ )' "${log}" | head -n 40 >&2 || true
    find "${build}/artifacts" -name "${target}-*" -type f -exec echo "  input: {}" \; >&2
  fi
done
printf '%s\n' "${summary[@]}"
exit "${failed}"
