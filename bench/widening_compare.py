#!/usr/bin/env python3
"""softmax(x, dim, dtype=torch.float32) of f16/bf16 x, and its backward into
the input's dtype: duet's one-pass widening kernels against torch's (whose
CUDA softmax fuses the cast for float16 only, half_to_float; bfloat16 is
cast to float32 first, and its gradient cast back), against duet's previous
path (torch casts x to float32, then duet runs in place over the copy), and
against the copy ceiling, in one process (issue 17: dtype= fused into the
kernel).

Bytes that must move: forward 2 + 4 a element (read x, write y), backward
4 + 4 + 2 (read y and dy, write dx). Each shape is about 256 MB of x (two
input sets rotated, so no call reads from L2); device time a call as
bench/compare.py's time_ms measures it; ratios to the faster copy of the
same run (compare.copy_ceiling); torch's cast alone (x.to(float32): read 2,
write 4, no softmax) shows what an elementwise pass with these bytes gets.
Every provider's result is checked against duet's first. Writes JSON and a PNG.

    DUET_LIBRARY=build/libduet.so PYTHONPATH=python python3 bench/widening_compare.py --out bench/results/h200/widening
"""
import argparse
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (its timer and copy ceiling)

import duet  # noqa: E402

compare.torch, compare.duet = torch, duet

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
COLS = [1024, 4096, 32768, 50257, 128256]
OPS = {"softmax": (duet.softmax, torch.softmax, torch.ops.duet.softmax_backward, torch._softmax_backward_data),
       "log_softmax": (duet.log_softmax, torch.log_softmax, torch.ops.duet.log_softmax_backward,
                       torch._log_softmax_backward_data)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="path prefix of the .json and .png")
    ap.add_argument("--mbytes", type=int, default=256, help="MB of x a shape")
    ap.add_argument("--cols", type=int, action="append", help=f"row lengths (repeatable; default {COLS})")
    ap.add_argument("--op", choices=list(OPS), action="append", help="operations (repeatable; default both)")
    ap.add_argument("--dtype", choices=list(DTYPES), action="append", help="input dtypes (repeatable; default both)")
    ap.add_argument("--commit", help="the commit to record (default: git's HEAD here)")
    args = ap.parse_args()
    found = {}
    ceiling = compare.copy_ceiling(found)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "duet": duet.version(),
           "commit": args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                   text=True).stdout.strip(),
           "copy_GBps": ceiling, **found, "bytes_per_element": {"forward": 6, "backward": 10}, "points": []}
    f32 = torch.float32
    for op, (duet_fwd, torch_fwd, duet_bwd, torch_bwd) in OPS.items():
        if args.op and op not in args.op:
            continue
        for dt_name, dtype in DTYPES.items():
            if args.dtype and dt_name not in args.dtype:
                continue
            for cols in args.cols or COLS:
                rows = max(1, (args.mbytes << 20) // (2 * cols))
                xs = [torch.randn(rows, cols, device="cuda").mul_(3).to(dtype) for _ in range(2)]
                gs = [torch.randn(rows, cols, device="cuda") for _ in range(2)]
                ys = [duet_fwd(x, -1, dtype=f32) for x in xs]
                want = torch_fwd(xs[0].double(), -1)
                err = ((ys[0].double() - want).abs().max() / want.abs().max()).item()
                assert ys[0].dtype == f32 and err <= 1e-5, f"{op} {dt_name} {cols}: duet's error {err}"
                mine = torch_fwd(xs[0], -1, dtype=f32)
                assert (mine - ys[0]).abs().max().item() <= 1e-5 * ys[0].abs().max().item()
                # torch fuses the cast into its CUDA kernels for float16 only
                # (half_to_float); bfloat16 input is cast to float32 first,
                # and autograd casts the float32 gradient back.
                if dtype == torch.float16:
                    torch_bwd_call = lambda i: torch_bwd(gs[i], ys[i], -1, dtype)  # noqa: E731
                else:
                    torch_bwd_call = lambda i: torch_bwd(gs[i], ys[i], -1, f32).to(dtype)  # noqa: E731
                dx = duet_bwd(gs[0], ys[0], -1, dtype)
                ref = torch_bwd_call(0)
                assert dx.dtype == dtype and ref.dtype == dtype
                scale = ref.float().abs().max().item() + 1e-30
                assert (dx.float() - ref.float()).abs().max().item() <= 2e-2 * scale, f"{op} {dt_name} {cols} backward"
                del want, mine, dx, ref
                n = rows * cols
                point = {"op": op, "dtype": dt_name, "rows": rows, "cols": cols}
                for name, fn, moved in (
                        ("duet", lambda i: duet_fwd(xs[i], -1, dtype=f32), 6),
                        ("duet_cast_first", lambda i: duet_fwd(xs[i].to(f32), -1), 6),
                        ("torch_cast_alone", lambda i: xs[i].to(f32), 6),
                        ("torch", lambda i: torch_fwd(xs[i], -1, dtype=f32), 6),
                        ("duet_bwd", lambda i: duet_bwd(gs[i], ys[i], -1, dtype), 10),
                        ("duet_bwd_cast_after", lambda i: duet_bwd(gs[i], ys[i], -1, f32).to(dtype), 10),
                        ("torch_bwd", torch_bwd_call, 10)):
                    ms = compare.time_ms(fn, 2)
                    point[name + "_ms"] = ms
                    point[name + "_ratio"] = moved * n / (ms * 1e-3) / 1e9 / ceiling
                doc["points"].append(point)
                print(f"{op:11} {dt_name:4} N={cols:6} fwd duet {point['duet_ratio']:.3f} (cast first "
                      f"{point['duet_cast_first_ratio']:.3f}) torch {point['torch_ratio']:.3f} (its cast alone "
                      f"{point['torch_cast_alone_ratio']:.3f}) | bwd duet "
                      f"{point['duet_bwd_ratio']:.3f} (cast after {point['duet_bwd_cast_after_ratio']:.3f}) torch "
                      f"{point['torch_bwd_ratio']:.3f}", flush=True)
                del xs, gs, ys
                torch.cuda.empty_cache()
    with open(args.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    plot(doc, args.out + ".png")


def plot(doc, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = (("duet_ratio", "duet fwd"), ("duet_cast_first_ratio", "duet fwd, cast first"), ("torch_ratio", "torch fwd"),
              ("duet_bwd_ratio", "duet bwd"), ("duet_bwd_cast_after_ratio", "duet bwd, cast after"),
              ("torch_bwd_ratio", "torch bwd"))
    panels = sorted({(p["op"], p["dtype"]) for p in doc["points"]}, key=lambda k: (list(OPS).index(k[0]), k[1]))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.5), squeeze=False)
    for ax, (op, dt) in zip(axes[0], panels):
        pts = [p for p in doc["points"] if p["op"] == op and p["dtype"] == dt]
        xs = range(len(pts))
        w = 0.8 / len(series)
        for k, (key, name) in enumerate(series):
            ax.bar([x + (k - (len(series) - 1) / 2) * w for x in xs], [p[key] for p in pts], w, label=name)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([str(p["cols"]) for p in pts], fontsize=8)
        ax.set_xlabel("row length")
        ax.set_ylim(0, 1.1)
        ax.set_ylabel("ratio to copy (bytes that must move)")
        ax.set_title(f"{op}(x {dt}, dtype=float32)\n{doc['device']} ({doc['commit']})", fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
