#!/usr/bin/env python3
"""Softmax over a non-last dimension: duet's interleaved rows against
torch.softmax on the same tensors and against the copy ceiling, in one
process (issue 17: >= 0.85 of copy without transposed copies).

Each shape is a contiguous tensor of about 256 MB (two input sets rotated,
so no call reads from L2), forward (read x, write y) and backward (read y
and dy, write dx); bytes that must move over device time, as a ratio to the
faster copy measured in the same run (bench/compare.py's copy_ceiling and
time_ms). torch's result is checked against duet's. Writes JSON and a PNG.

    DUET_LIBRARY=build/libduet.so PYTHONPATH=python python3 bench/dim_compare.py --out bench/results/h100/dim_compare
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

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
# (label, shape, dim): None as the first size is sized to about 256 MB.
SHAPES = [
    ("[N,21,256,256] dim 1", (None, 21, 256, 256), 1),
    ("[N,100,64,64] dim 1", (None, 100, 64, 64), 1),
    ("[N,200,32,32] dim 1", (None, 200, 32, 32), 1),
    ("[N,512,32,32] dim 1", (None, 512, 32, 32), 1),
    ("[N,1000,56] dim 1", (None, 1000, 56), 1),
    ("[N,32,16,1024] dim 2", (None, 32, 16, 1024), 2),
    ("[4096,M] dim 0", (4096, None), 0),
    ("[M,1024] dim 0", (None, 1024), 0),
]


def full_shape(shape, dtype, target_bytes):
    known = 1
    for s in shape:
        known *= s or 1
    fill = max(1, target_bytes // (known * torch.empty((), dtype=dtype).element_size()))
    return tuple(fill if s is None else s for s in shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="path prefix of the .json and .png")
    ap.add_argument("--mbytes", type=int, default=256)
    ap.add_argument("--only", action="append", default=[],
                    help="run the shapes whose label contains this text (repeatable; default: all)")
    ap.add_argument("--commit", help="the revision measured (default: git rev-parse of this checkout)")
    args = ap.parse_args()
    found = {}
    ceiling = compare.copy_ceiling(found)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "duet": duet.version(),
           "commit": args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                   text=True).stdout.strip(),
           "plan_env": {k: v for k, v in os.environ.items() if k.startswith("DUET_") and k != "DUET_LIBRARY"},
           "copy_GBps": ceiling, **found, "points": []}
    for dt_name, dtype in DTYPES.items():
        for label, rest, dim in SHAPES:
            if args.only and not any(o in label for o in args.only):
                continue
            shape = full_shape(rest, dtype, args.mbytes << 20)
            xs = [torch.randn(shape, device="cuda").mul_(3).to(dtype) for _ in range(2)]
            gs = [torch.randn(shape, device="cuda").to(dtype) for _ in range(2)]
            ys = [duet.softmax(x, dim) for x in xs]
            want = torch.softmax(xs[0].double(), dim)
            err = ((ys[0].double() - want).abs().max() / want.abs().max()).item()
            assert err <= (1e-5 if dtype == torch.float32 else 1e-2), f"{label} {dt_name}: error {err}"
            del want
            nbytes = xs[0].numel() * xs[0].element_size()
            point = {"label": label, "dtype": dt_name, "shape": list(shape), "dim": dim, "bytes": nbytes}
            for name, fn, moved in (
                    ("duet", lambda i: duet.softmax(xs[i], dim), 2),
                    ("torch", lambda i: torch.softmax(xs[i], dim), 2),
                    ("duet_bwd", lambda i: duet.softmax_backward(ys[i], gs[i], dim), 3),
                    ("torch_bwd", lambda i: torch._softmax_backward_data(gs[i], ys[i], dim, dtype), 3)):
                ms = compare.time_ms(fn, 2)
                point[name + "_ms"] = ms
                point[name + "_ratio"] = moved * nbytes / (ms * 1e-3) / 1e9 / ceiling
            doc["points"].append(point)
            print(f"{dt_name:5} {label:32} duet {point['duet_ratio']:.3f} torch {point['torch_ratio']:.3f} | "
                  f"bwd duet {point['duet_bwd_ratio']:.3f} torch {point['torch_bwd_ratio']:.3f}", flush=True)
            del xs, gs, ys
            torch.cuda.empty_cache()
    with open(args.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    plot(doc, args.out + ".png")


def plot(doc, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(DTYPES), figsize=(7 * len(DTYPES), 4.5), squeeze=False)
    for ax, dt in zip(axes[0], DTYPES):
        pts = [p for p in doc["points"] if p["dtype"] == dt]
        xs = range(len(pts))
        w = 0.2
        for k, (key, name) in enumerate((("duet_ratio", "duet fwd"), ("torch_ratio", "torch fwd"),
                                         ("duet_bwd_ratio", "duet bwd"), ("torch_bwd_ratio", "torch bwd"))):
            ax.bar([x + (k - 1.5) * w for x in xs], [p[key] for p in pts], w, label=name)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([p["label"] for p in pts], rotation=30, ha="right", fontsize=7)
        ax.axhline(0.85, color="gray", linestyle="--", linewidth=0.8)
        ax.set_ylim(0, 1.1)
        ax.set_ylabel("ratio to copy")
        ax.set_title(f"{doc['device']}, {dt}: softmax over a non-last dim ({doc['commit']})", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
