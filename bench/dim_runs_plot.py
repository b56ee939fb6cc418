#!/usr/bin/env python3
"""duet's ratio to copy for softmax over a non-last dimension, several
bench/dim_compare.py runs side by side: one panel a dtype and direction, a
bar a shape and run. Each file is FILE or FILE=LABEL (default label: the
run's commit text); runs with the same label are averaged point by point.

    python3 bench/dim_runs_plot.py --out bench/results/h200/dim_compare_v85.png \\
        bench/results/h200/dim_compare_v85_final_off_{1,2}.json=before \\
        bench/results/h200/dim_compare_v85_final_{1,2}.json=interleaved_ring
"""
import argparse
import collections
import json
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("runs", nargs="+", help="dim_compare JSON files, each FILE or FILE=LABEL")
    args = ap.parse_args()

    # label -> (shape label, dtype, direction) -> ratios
    ratios = collections.OrderedDict()
    shapes, device = [], None
    for spec in args.runs:
        path, _, label = spec.partition("=")
        with open(path) as f:
            doc = json.load(f)
        device = device or doc["device"]
        label = label or doc["commit"]
        runs = ratios.setdefault(label, collections.defaultdict(list))
        for p in doc["points"]:
            if p["label"] not in shapes:
                shapes.append(p["label"])
            runs[(p["label"], p["dtype"], "forward")].append(p["duet_ratio"])
            runs[(p["label"], p["dtype"], "backward")].append(p["duet_bwd_ratio"])

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtypes = sorted({k[1] for runs in ratios.values() for k in runs}, key=lambda d: d != "float32")
    panels = [(dt, d) for dt in dtypes for d in ("forward", "backward")]
    fig, axes = plt.subplots(len(dtypes), 2, figsize=(14, 4.2 * len(dtypes)), squeeze=False)
    width = 0.8 / max(len(ratios), 1)
    for ax, (dt, direction) in zip(axes.flat, panels):
        xs = range(len(shapes))
        for k, (label, runs) in enumerate(ratios.items()):
            ys = [statistics.mean(runs[(s, dt, direction)]) if runs.get((s, dt, direction)) else 0 for s in shapes]
            ax.bar([x + (k - (len(ratios) - 1) / 2) * width for x in xs], ys, width, label=label)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(shapes, rotation=30, ha="right", fontsize=7)
        ax.axhline(0.85, color="gray", linestyle="--", linewidth=0.8)
        ax.set_ylim(0, 1.1)
        ax.set_ylabel("ratio to copy")
        ax.set_title(f"{device}, {dt} {direction}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)


if __name__ == "__main__":
    main()
