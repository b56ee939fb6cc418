#!/usr/bin/env python3
"""The ratio to copy of each row length for several duet-bench runs of the
same points (one run a plan: default, DUET_CLUSTER=0, ...), one panel per
dtype (and operation, where the runs hold several), one line per run
labelled by its --commit text, or by LABEL where a file is given as
FILE=LABEL (and, with --by-mask, each result's mask kind); runs with the
same label are averaged point by point.

    python3 bench/variants_plot.py bench/results/h100/wide_rows_v47_*.json \\
        --out bench/results/h100/wide_rows_v47.png
"""
import argparse
import collections
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+", help="duet-bench --json files, each FILE or FILE=LABEL")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--title", default="", help="title above the panels")
    ap.add_argument("--by-mask", action="store_true", help="one line a mask kind (duet-bench --op masked_softmax)")
    ap.add_argument("--columns", type=int, default=3, help="panels a row (default 3)")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("matplotlib is needed for the plot")
    # (dtype, label) -> cols -> [ratios], and the kernel families it ran
    points = collections.defaultdict(lambda: collections.defaultdict(list))
    variants = collections.defaultdict(set)
    device = ""
    runs = []
    for arg in args.json:
        path, _, given = arg.partition("=")
        with open(path) as f:
            runs.append((json.load(f), given or None, path))
    ops = {r.get("op", "") for run, _, _ in runs for r in run.get("results", [])}
    for run, given, path in runs:
        device = run.get("device", {}).get("name", device)
        label = given or run.get("commit") or path
        for r in run.get("results", []):
            panel = r["dtype"] if len(ops) <= 1 else f"{r.get('op', '')} {r['dtype']}"
            key = (panel, f"{label}, mask {r.get('mask', 'boolean')}" if args.by_mask else label)
            points[key][r["cols"]].append(r["ratio"])
            variants[key].add(r["variant"].split("<")[0])
    dtypes = sorted({d for d, _ in points})
    if not dtypes:
        sys.exit("no results in " + ", ".join(args.json))
    # At most --columns panels a row (one per dtype of an operation, where
    # the runs hold several).
    ncols = min(len(dtypes), args.columns)
    nrows = (len(dtypes) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(6 * ncols, 4.2 * nrows), squeeze=False)
    for ax in axes.flat[len(dtypes):]:
        ax.set_visible(False)
    for ax, dtype in zip(axes.flat, dtypes):
        for (d, label), by_cols in sorted(points.items()):
            if d != dtype:
                continue
            cols = sorted(by_cols)
            ratios = [sum(by_cols[c]) / len(by_cols[c]) for c in cols]
            ax.plot(cols, ratios, "o-", label=f"{label} ({', '.join(sorted(variants[(d, label)]))})")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("row length N")
        ax.set_ylabel("ratio to copy")
        ax.set_title(dtype)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(args.title or device)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
