#!/usr/bin/env bash
# The open issues' target points on one GPU, as duet-bench JSON: what the
# README's per-device tables quote. One file a step under $OUT
# (sweep_<step>.json); bench/sweep_plot.py merges them into one JSON and a
# plot. Every step measures its own copy ceiling (duet-bench does) on 256 MB
# inputs unless noted, without the correctness check (the GPU tests cover it).
#
#   BENCH=path/to/duet-bench OUT=dir COMMIT=abc1234 bash bench/issue_sweep.sh
#   STEPS="aligned odd" ...   a subset, in this order:
#     aligned odd wide past ce ce_wide masked causal
set -u
BENCH=${BENCH:?BENCH: the duet-bench to run}
OUT=${OUT:?OUT: where the JSON goes}
COMMIT=${COMMIT:-unknown}
STEPS=${STEPS:-aligned odd wide past ce ce_wide masked causal}
mkdir -p "$OUT"
T0=$(date +%s)
bench() {  # bench STEP ARGS...: one duet-bench run into sweep_STEP.json
  local step=$1
  shift
  echo "== $step ($(($(date +%s) - T0)) s)"
  timeout 240 "$BENCH" --no-check --commit "$COMMIT" --json "$OUT/sweep_$step.json" "$@" 2>&1 |
    grep -vE "^\s*$" | cut -c1-120
  echo "rc ${PIPESTATUS[0]}"
}
BOTH="--op softmax,softmax_backward"
for step in $STEPS; do
  case $step in
    aligned)  # issue 15: N = 32..32768 at >= 0.97 (32..128: >= 0.95)
      bench aligned $BOTH --dtype f32,bf16 --repeats 7 \
        --cols 32,64,128,256,512,1024,2048,4096,8192,16384,24576,32768 ;;
    odd)  # issue 15: odd N within 5% of the aligned neighbour, >= 0.92
      bench odd $BOTH --dtype f32,bf16 --repeats 7 \
        --cols 9,17,33,65,127,1025,4097,12289,32769,65537 ;;
    wide)  # issue 15: on chip in a cluster, f32 to 1M, 16-bit to 2M
      bench wide $BOTH --dtype f32,bf16 --repeats 7 \
        --cols 65536,131072,262144,524288,1048576,2097152 ;;
    past)  # issue 15: past on chip, f32 4M and 16M at >= 0.80
      bench past $BOTH --dtype f32,bf16 --repeats 5 --warmup 2 --cols 4194304,16777216 ;;
    ce)  # issue 19: 8192 x 128256 bf16 forward + backward >= 0.90; GPT-2's and Llama's vocabularies
      bench ce --op cross_entropy,cross_entropy_in_place --dtype bf16 --rows 8192 --repeats 7 \
        --cols 32000,50257,70001,128256,151936
      bench ce_f32 --op cross_entropy,cross_entropy_in_place --dtype f32 --rows 8192 --repeats 7 \
        --cols 32000,50257,128256 ;;
    ce_wide)  # issue 19: vocab 1M f32 >= 0.85, the forward alone and with its gradient (1 GiB of logits)
      bench ce_wide --op cross_entropy,cross_entropy_in_place,cross_entropy_forward --dtype f32,bf16 \
        --mbytes 1074 --repeats 5 --cols 262144,524288,1048576 ;;
    masked)  # issue 19: [8, 32, Sq, Sk] scores with a [8, 1, Sq, Sk] mask, Sk = 128..32768, >= 0.93
      bench masked_bool --op masked_softmax --mask boolean --dtype bf16,f32 --repeats 7 \
        --cols 128,256,512,1024,2048,4096,8192,16384,32768
      bench masked_additive --op masked_softmax --mask additive --dtype bf16 --repeats 7 \
        --cols 128,512,2048,8192,32768 ;;
    causal)  # issue 19: causal scaled softmax [8, 32, 2048, 2048] bf16 >= 0.95
      bench causal --op causal_softmax,causal_softmax_backward --dtype bf16,f32 --batch-size 8 --heads 32 \
        --repeats 7 --cols 2048 ;;
    *) echo "unknown step $step" ;;
  esac
done
echo "== done ($(($(date +%s) - T0)) s)"
