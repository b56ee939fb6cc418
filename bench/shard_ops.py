#!/usr/bin/env python3
"""The vocabulary-parallel local halves on one GPU (duet/vocab_parallel.hpp),
each as a ratio to the copy ceiling measured in the same run over the bytes
it must move, on shards of a vocabulary split in two (odd widths included):

  stats     the statistics pass (targets given): read the shard once
  softmax   the normalize pass from lse: read the shard, write the result
  xent_bwd  the shard's cross-entropy gradient from lse: read, write

Also the single-GPU cross-entropy forward + backward of the whole tensor
against the shard's stats + gradient passes (what one rank of two runs,
communication aside).

    DUET_LIBRARY=build/libduet.so PYTHONPATH=python python3 bench/shard_ops.py --out bench/results/h100/shard_ops
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (time_ms and the copy ceiling, shared)

import duet  # noqa: E402
from duet import _fused_launch as FL  # noqa: E402

compare.torch = torch
compare.duet = duet


def timed(fn, sets=2):
    return compare.time_ms(lambda i: fn(i), sets, warmup=3, repeats=9, batch=5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    ceiling = compare.copy_ceiling()
    points = []
    for dtype in (torch.bfloat16, torch.float32):
        for rows, vocab in ((4096, 128256), (4096, 50257 + 1), (8192, 32000), (1024, 262144)):
            cols = vocab // 2
            shape = (rows, cols)
            xs = [torch.randn(shape, device="cuda", dtype=dtype) for _ in range(2)]
            target = torch.randint(0, vocab, (rows,), device="cuda")
            stats = torch.empty(rows, 4, device="cuda")
            lse = torch.randn(rows, device="cuda") + 12
            ys = [torch.empty_like(x) for x in xs]
            one = torch.ones((), device="cuda")
            nbytes = xs[0].numel() * xs[0].element_size()
            ms = {
                "stats": timed(lambda i: FL.launch_shard_stats(xs[i], target, -100, cols, vocab, stats, "bench")),
                "softmax": timed(lambda i: FL.launch_shard_softmax(xs[i], None, lse, False, ys[i], "bench")),
                "xent_bwd": timed(lambda i: FL.launch_shard_cross_entropy_backward(
                    xs[i], target, lse, one, ys[i], cols, vocab, -100, "mean", 0.0, 0.0, "bench")),
            }
            moved = {"stats": nbytes, "softmax": 2 * nbytes, "xent_bwd": 2 * nbytes}
            ratio = {k: moved[k] / (ms[k] * 1e-3) / 1e9 / ceiling for k in ms}
            # The whole tensor on one GPU: duet.cross_entropy forward + backward (default mode).
            whole = torch.randn(rows, cols * 2, device="cuda", dtype=dtype).requires_grad_()

            def single(_):
                duet.cross_entropy(whole, target).backward()
                whole.grad = None

            single_ms = timed(single, 1)
            shard_ms = ms["stats"] + ms["xent_bwd"]
            points.append({"rows": rows, "vocab": cols * 2, "shard_cols": cols, "dtype": str(dtype)[6:],
                           "ms": ms, "ratio": ratio, "single_gpu_fwd_bwd_ms": single_ms,
                           "shard_passes_ms": shard_ms, "shard_over_single": shard_ms / single_ms})
            print(json.dumps(points[-1]), flush=True)
            del xs, ys, whole
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "duet": duet.__version__,
           "date": time.strftime("%Y-%m-%d"),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True).stdout.strip() or "unknown",
           "copy_GBps": ceiling, "points": points}
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out + ".json", "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
