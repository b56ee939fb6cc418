#!/usr/bin/env python3
"""Rows off the 16-byte pack grid beside their aligned neighbours: the
ratio to copy of each row length, odd and aligned, one panel per dtype and
direction, from duet-bench JSON files (any number, merged by point).

    python3 bench/odd_rows_plot.py bench/results/h100/bench_odd_v35.json \\
        bench/results/h100/bench_odd_short_v35.json --out bench/results/h100/bench_odd_v35.png
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
    points, device, commits = {}, "", []
    for path in args.json:
        doc = json.load(open(path))
        device = doc["device"]["name"]
        commits.append(doc["commit"])
        for r in doc["results"]:
            points[(r["op"], r["dtype"], r["cols"])] = r["ratio"]  # later files win
    panels = sorted({(op, dt) for op, dt, _ in points})
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2), squeeze=False)
    for ax, (op, dt) in zip(axes[0], panels):
        cols = sorted(c for o, d, c in points if (o, d) == (op, dt))
        vec = 4 if dt == "f32" else 8
        for label, keep, style in (("rows of whole 16-byte packs", lambda c: c % vec == 0, "o-"),
                                   ("odd rows (edges)", lambda c: c % vec != 0, "s--")):
            xs = [c for c in cols if keep(c)]
            ax.plot(xs, [points[(op, dt, c)] for c in xs], style, label=label, markersize=4)
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
