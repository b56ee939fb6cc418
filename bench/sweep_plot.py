#!/usr/bin/env python3
"""bench/issue_sweep.sh's duet-bench files (sweep_<step>.json) merged into one
JSON (a run a step, tagged with it) and drawn as one plot: a panel a step,
the ratio to the copy ceiling of each op and dtype against the row length,
with the issues' targets as dashed lines.

    python3 bench/sweep_plot.py OUTDIR --out bench/results/h100/sweep_abc1234 --note "..."
"""
import argparse
import collections
import glob
import json
import math
import os

# The issues' targets a step (issue 15: plain softmax; issue 19: fused ops).
TARGETS = {"aligned": 0.97, "odd": 0.92, "wide": 0.93, "past": 0.80, "ce": 0.90, "ce_f32": 0.90,
           "ce_wide": 0.85, "masked_bool": 0.93, "masked_additive": 0.93, "causal": 0.95}
ORDER = list(TARGETS)


def load_runs(folder):
    runs = []
    for path in glob.glob(os.path.join(folder, "sweep_*.json")):
        step = os.path.basename(path)[len("sweep_"):-len(".json")]
        with open(path) as f:
            run = json.load(f)
        run["tag"] = step
        runs.append(run)
    runs.sort(key=lambda r: ORDER.index(r["tag"]) if r["tag"] in ORDER else len(ORDER))
    return runs


def plot(runs, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(runs)
    cols = 3
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for ax, run in zip(axes.flat, runs):
        lines = collections.defaultdict(list)
        for r in run["results"]:
            lines[(r["op"], r["dtype"])].append((r["cols"], r["ratio"]))
        for (op, dtype), pts in sorted(lines.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=f"{op} {dtype}")
        target = TARGETS.get(run["tag"])
        if target:
            ax.axhline(target, color="grey", ls="--", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{run['tag']} (copy {run['copy_gbps']:.0f} GB/s)", fontsize=9)
        ax.set_xlabel("row length N" if "ce" not in run["tag"] else "vocabulary")
        ax.set_ylabel("ratio to copy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="where issue_sweep.sh wrote sweep_<step>.json")
    ap.add_argument("--out", required=True, help="path prefix of the merged .json and the .png")
    ap.add_argument("--note", default="", help="what was run, recorded in the JSON")
    args = ap.parse_args()
    runs = load_runs(args.folder)
    if not runs:
        raise SystemExit(f"no sweep_*.json under {args.folder}")
    with open(args.out + ".json", "w") as f:
        json.dump({"note": args.note, "runs": runs}, f, indent=1)
    dev = runs[0]["device"]["name"]
    plot(runs, args.out + ".png", f"duet {runs[0]['commit']} on {dev}: ratio to the copy ceiling of the same run")
    for run in runs:
        for r in run["results"]:
            print(f"{run['tag']:16} {r['op']:24} {r['dtype']:5} {r['cols']:>9} {r['ratio']:.3f} {r['variant']}")


if __name__ == "__main__":
    main()
