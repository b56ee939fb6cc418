#!/usr/bin/env bash
# The two steps of a HIP object that DuetHip.cmake runs as build commands
# of their own (hipcc -c runs them in one process):
#
#   hip_split.sh device CODE_OBJECT REPORT BUNDLER -- HIPCC ARGS...
#     One source's device code for one AMD target (ARGS end in
#     --offload-arch=<target> --cuda-device-only -c <source>), with the
#     compiler's resource remarks: the target's code object out of the
#     single-target bundle hipcc writes (CODE_OBJECT, its bundle entries
#     beside it in CODE_OBJECT.entries), and the remarks' lines that
#     matter in REPORT (DuetResourceReports.cmake embeds them,
#     runtime/src/planner/kernel_resources.cpp parses them). Warnings and
#     errors still reach the build log.
#
#   hip_split.sh bundle OUT BUNDLER CODE_OBJECT...
#     The targets' code objects bundled as the hipcc driver bundles them
#     (host entry first, empty; the targets sorted by name), for the host
#     compile's -fcuda-include-gpubinary.
set -euo pipefail

mode=$1
shift
case $mode in
  device)
    co=$1 report=$2 bundler=$3
    [[ $4 == -- ]] || { echo "hip_split.sh device: expected -- before the compiler" >&2; exit 2; }
    shift 4
    log=$co.log
    status=0
    "$@" -Rpass-analysis=kernel-resource-usage -o "$co.bundle" 2>"$log" || status=$?
    if ((status != 0)); then
      cat "$log" >&2
      exit "$status"
    fi
    grep -E '(warning|error):' "$log" >&2 || true
    # (A source without kernels has no remarks: an empty report.)
    { grep -E 'remark: +(Function Name|VGPRs|AGPRs|SGPRs|ScratchSize|LDS Size)' "$log" || true; } |
      sed -E 's/.*remark: +//; s/ \[-Rpass-analysis.*//' >"$report"
    "$bundler" --list -type=o -input="$co.bundle" >"$co.entries"
    target=$(grep -v '^host-' "$co.entries")
    [[ $(wc -l <<<"$target") -eq 1 ]] || { echo "hip_split.sh: $co.bundle holds more than one target" >&2; exit 1; }
    "$bundler" --unbundle -type=o -targets="$target" -input="$co.bundle" -output="$co"
    rm -f "$co.bundle" "$log"
    ;;
  bundle)
    out=$1 bundler=$2
    shift 2
    host=$(grep '^host-' "$1.entries")
    pairs=()
    for co in "$@"; do pairs+=("$(grep -v '^host-' "$co.entries") $co"); done
    targets=$host
    inputs=(-input=/dev/null)
    while read -r target co; do
      targets+=",$target"
      inputs+=("-input=$co")
    done < <(printf '%s\n' "${pairs[@]}" | LC_ALL=C sort)
    "$bundler" -type=o -bundle-align=4096 -targets="$targets" "${inputs[@]}" -output="$out"
    ;;
  *)
    echo "hip_split.sh: unknown mode $mode" >&2
    exit 2
    ;;
esac
