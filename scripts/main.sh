#!/usr/bin/env bash
# The main job: build what this machine can run, list every device and the
# plan duet picks, then benchmark the first device.
#   * An NVIDIA GPU (nvidia-smi) and nvcc: the CUDA backend for that GPU's
#     architecture only, and the host.
#   * An AMD GPU (rocm_agent_enumerator / rocminfo): the HIP backend for that
#     GPU's gfx target only (Debian's hipcc installed if missing), and the host.
#   * Neither: the host backend alone.
# Only libduet and its tools are built (no tests) in build-main/;
# scripts/test.sh builds every backend and runs the tests. Results:
# build-main/bench.json (and bench.csv with a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
stamp() { echo "== $1 ($(( $(date +%s) - start )) s)"; }

# The architectures of the GPUs present, one per line, deduplicated.
nvidia_archs() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | grep -E '^[0-9]+$' | sort -u || true
}
amd_archs() {
  local enumerator=/opt/rocm/bin/rocm_agent_enumerator
  if [[ -x $enumerator ]]; then
    "$enumerator" 2>/dev/null | grep -Eo '^gfx[0-9a-f]+' | grep -v '^gfx000$' | sort -u || true
  elif command -v rocminfo >/dev/null 2>&1; then
    rocminfo 2>/dev/null | grep -Eo 'gfx[0-9a-f]+' | grep -v '^gfx000$' | sort -u || true
  fi
}
join() { paste -sd';' -; }

stamp "detecting devices"
cuda_archs=$(nvidia_archs | join)
hip_archs=$(amd_archs | join)
deps=(base)
backend_flags=(-DDUET_ENABLE_CUDA=OFF -DDUET_ENABLE_HIP=OFF)
what="host"
if [[ -n $cuda_archs ]]; then
  if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
    backend_flags=(-DDUET_ENABLE_CUDA=ON "-DDUET_CUDA_ARCHITECTURES=${cuda_archs}" -DDUET_ENABLE_HIP=OFF)
    [[ -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null 2>&1 && \
      backend_flags+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
    what="cuda (${cuda_archs}) + host"
  else
    echo "an NVIDIA GPU (compute capability ${cuda_archs}) but no nvcc: building the host backend only"
  fi
elif [[ -n $hip_archs ]]; then
  deps+=(hip)
  backend_flags=(-DDUET_ENABLE_CUDA=OFF -DDUET_ENABLE_HIP=ON "-DDUET_HIP_ARCHITECTURES=${hip_archs}")
  what="hip (${hip_archs}) + host"
fi
echo "building: ${what}"

stamp "dependencies"
bash scripts/install-deps.sh "${deps[@]}"

stamp "configure"
build=build-main
mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDUET_BUILD_TESTS=OFF -DDUET_BUILD_TOOLS=ON \
  "${backend_flags[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }

stamp "build"
cmake --build "$build" -j "$(nproc)"

stamp "devices and plans"
"./$build/tools/deviceinfo" --plan 4096x8192:f32
if "./$build/tools/deviceinfo" --require-gpu >/dev/null 2>&1; then
  stamp "benchmark (GPU)"
  "./$build/tools/duet-bench" --sweep cold --dtype f32 --dtype bf16 --json "$build/bench.json" --csv "$build/bench.csv"
else
  # 32 MB inputs (past the last-level cache of most machines), few samples:
  # seconds, not minutes, on two cores.
  stamp "benchmark (no GPU: the host backend on a small sweep)"
  "./$build/tools/duet-bench" --mbytes 32 --cols 256 --cols 4096 --cols 65536 --warmup 1 --repeats 5 --batch 2 \
    --json "$build/bench.json"
fi
stamp "done"
