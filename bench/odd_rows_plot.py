#!/usr/bin/env python3
"""Rows off the 16-byte pack grid beside their aligned neighbours: the
ratio to copy of each row length, one panel per dtype and direction, one
line per kind of kernel (rows of whole packs; odd rows on the kernels with
edges; odd rows on flat_rows), from duet-bench JSON files (any number,
merged by point and kind).

    python3 bench/odd_rows_plot.py bench/results/h100/bench_odd_v35.json \\
        bench/results/h100/bench_odd_short_v35.json bench/results/h100/bench_flat_v35.json \\
        --out bench/results/h100/bench_odd_v35.png
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+", help="duet-bench --json files")
    ap.add_argument("--out", required=True, help="PNG to write")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("matplotlib is needed for the plot")
    kinds = (("rows of whole 16-byte packs", "o-"), ("odd rows, kernels with edges", "s--"),
             ("odd rows, flat_rows", "^:"))

    def kind(variant):
        return kinds[2][0] if variant.startswith("flat_rows") else kinds[1][0] if ",edges" in variant else kinds[0][0]

    points, device, commits = {}, "", []
    for path in args.json:
        doc = json.load(open(path))
        device = doc["device"]["name"]
        commits.append(doc["commit"])
        for r in doc["results"]:
            points[(r["op"], r["dtype"], kind(r["variant"]), r["cols"])] = r["ratio"]  # later files win
    panels = sorted({(op, dt) for op, dt, _, _ in points})
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2), squeeze=False)
    for ax, (op, dt) in zip(axes[0], panels):
        for label, style in kinds:
            xs = sorted(c for o, d, k, c in points if (o, d, k) == (op, dt, label))
            if xs:
                ax.plot(xs, [points[(op, dt, label, c)] for c in xs], style, label=label, markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1.1)
        ax.set_xlabel("N (row length)")
        ax.set_ylabel("ratio to copy")
        ax.set_title(f"{op} {dt}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{device}, duet {', '.join(dict.fromkeys(commits))}", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
