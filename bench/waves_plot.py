#!/usr/bin/env python3
"""Ratio to copy against the grid's waves, from bench/dim_compare.py runs.

Each JSON is one dim_compare run; its waves are the DUET_WAVES it ran with
(plan_env), 64 where unset (the planner's cap before interleaved tiles got
their own). Runs of the same waves are averaged. One panel a direction, one
line a shape and dtype; shapes whose ratio moves by less than `--min-spread`
across the runs are left out.

    python3 bench/waves_plot.py --out bench/results/h200/waves_v82.png bench/results/h200/dim_compare_v82_waves_*.json

--bench: the JSONs instead hold duet-bench runs under "runs", each with its
"waves" and the tool's JSON as "bench" (bench/results/h200/waves_fused_*);
one panel, the ratio at each row length, a line an op, mask and dtype at
each waves.
"""
import argparse
import collections
import json
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("--min-spread", type=float, default=0.01)
    ap.add_argument("--bench", action="store_true", help="the files hold duet-bench runs (see above)")
    ap.add_argument("runs", nargs="+", help="dim_compare JSON files")
    args = ap.parse_args()
    if args.bench:
        return plot_bench(args)

    # (label, dtype, direction) -> waves -> ratios
    found = collections.defaultdict(lambda: collections.defaultdict(list))
    device = set()
    for path in args.runs:
        with open(path) as f:
            doc = json.load(f)
        device.add(doc["device"])
        waves = int(doc.get("plan_env", {}).get("DUET_WAVES", 64))
        for p in doc["points"]:
            for direction, key in (("forward", "duet_ratio"), ("backward", "duet_bwd_ratio")):
                found[(p["label"], p["dtype"], direction)][waves].append(p[key])

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = sorted({label for label, _, _ in found})
    colour = {label: plt.cm.tab10(i % 10) for i, label in enumerate(labels)}  # a colour a shape, a dash a dtype
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), sharey=True)
    for ax, direction in zip(axes, ("forward", "backward")):
        for (label, dtype, d), by_waves in sorted(found.items()):
            if d != direction:
                continue
            xs = sorted(by_waves)
            ys = [statistics.mean(by_waves[x]) for x in xs]
            if max(ys) - min(ys) < args.min_spread:
                continue
            ax.plot(xs, ys, marker="o", color=colour[label], linestyle="-" if dtype == "f32" else "--",
                    label=f"{dtype} {label}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("grid: waves of resident blocks (DUET_WAVES)")
        ax.set_title(direction)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("ratio to copy (same run)")
    fig.suptitle(f"softmax over a non-last dim, 256 MB tensors: {', '.join(sorted(device))}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print("wrote", args.out)


def plot_bench(args):
    # (op, mask, dtype) -> waves -> cols -> ratios
    found = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
    for path in args.runs:
        with open(path) as f:
            doc = json.load(f)
        for run in doc["runs"]:
            for r in run["bench"]["results"]:
                found[(r["op"], r.get("mask", ""), r["dtype"])][run["waves"]][r["cols"]].append(r["ratio"])

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(found)
    colour = {k: plt.cm.tab20(i % 20) for i, k in enumerate(keys)}
    fig, ax = plt.subplots(figsize=(12, 6))
    for key in keys:
        for waves, by_cols in sorted(found[key].items()):
            xs = sorted(by_cols)
            ys = [statistics.mean(by_cols[x]) for x in xs]
            ax.plot(xs, ys, marker="o", color=colour[key], linestyle="-" if waves == 64 else ":",
                    label=f"{' '.join(k for k in key if k)}, {waves} waves")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("row length")
    ax.set_ylabel("ratio to copy (same run)")
    ax.set_title("fused row operations on the H200 (256 MB): grids of 64 waves (solid) and fewer (dotted)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
