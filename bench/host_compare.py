#!/usr/bin/python3
"""Side by side on the CPU: duet's host backend, oneDNN's softmax, torch's CPU
softmax and memcpy of the same bytes, on the same tensors and thread count.

duet, oneDNN and memcpy are timed by bench/host_anchors (built by CMake where
oneDNN is installed); torch here, in this Python (Debian's python3-torch:
run it with /usr/bin/python3 or set PYTHON for the torch part). Writes
compare.json (with the CPU model) and compare.png under --out.

    /usr/bin/python3 bench/host_compare.py --build build-host
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

DTYPES = ["f32", "bf16", "f16"]
COLS = [256, 4096, 65536, 1048576]
ELEM_BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def git_commit(here):
    try:
        return subprocess.run(["git", "-C", here, "describe", "--always", "--dirty"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def lscpu():
    try:
        return subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""


def run_anchors(exe, args, log):
    cmd = [exe, "--threads", str(args.threads), "--mbytes", str(args.mbytes), "--repeats", str(args.repeats),
           "--dtype", *args.dtype, "--cols", *map(str, args.cols)]
    if log:
        cmd.append("--log")
    # Passive: OpenMP threads of oneDNN that spin after its run would take
    # the cores from the next measurement in the same process.
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="PASSIVE")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"host_compare: {' '.join(cmd)} failed:\n{out.stderr}")
    sys.stderr.write(out.stderr)
    return [dict(json.loads(line), op="log_softmax" if log else "softmax") for line in out.stdout.splitlines() if line]


TORCH_SNIPPET = r"""
import json, sys, time, torch
args = json.loads(sys.argv[1])
torch.set_num_threads(args["threads"])
types = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
for dt in args["dtype"]:
    for cols in args["cols"]:
        elem = 4 if dt == "f32" else 2
        rows = max(1, int(args["mbytes"] * 1e6) // (cols * elem))
        x = (torch.randn(rows, cols) * 4).to(types[dt])
        y = torch.empty_like(x)
        # The out= forms, so torch writes into a buffer it already has, as
        # duet and oneDNN do.
        fn = torch._log_softmax if args["log"] else torch._softmax
        try:
            fn(x, -1, False, out=y)
        except RuntimeError as e:
            print(json.dumps({"impl": "torch", "dtype": dt, "rows": rows, "cols": cols, "unsupported": str(e)}))
            sys.stdout.flush()
            continue
        times = []
        for _ in range(args["repeats"] + 1):
            t0 = time.perf_counter()
            fn(x, -1, False, out=y)
            times.append(time.perf_counter() - t0)
        s = sorted(times[1:])[len(times[1:]) // 2]
        print(json.dumps({"impl": "torch", "dtype": dt, "rows": rows, "cols": cols, "threads": args["threads"],
                          "seconds": s, "gbps": 2.0 * rows * cols * elem / s / 1e9}))
        sys.stdout.flush()
"""


def run_torch(python, args, log):
    payload = json.dumps({"threads": args.threads, "mbytes": args.mbytes, "repeats": args.repeats,
                          "dtype": args.dtype, "cols": args.cols, "log": log})
    out = subprocess.run([python, "-c", TORCH_SNIPPET, payload], capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(f"host_compare: torch run failed, left out:\n{out.stderr}\n")
        return []
    return [dict(json.loads(line), op="log_softmax" if log else "softmax") for line in out.stdout.splitlines() if line]


def plot(results, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = sorted({r["op"] for r in results})
    dtypes = [d for d in DTYPES if any(r["dtype"] == d for r in results)]
    fig, axes = plt.subplots(len(ops), len(dtypes), figsize=(5 * len(dtypes), 4 * len(ops)), squeeze=False)
    styles = {"memcpy": ("k", "--"), "duet": ("tab:red", "-"), "onednn": ("tab:blue", "-"), "torch": ("tab:green", "-")}
    for i, op in enumerate(ops):
        for j, dt in enumerate(dtypes):
            ax = axes[i][j]
            for impl, (color, ls) in styles.items():
                pts = sorted((r["cols"], r["gbps"]) for r in results
                             if r["op"] == op and r["dtype"] == dt and r["impl"] == impl and "gbps" in r)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, ls=ls, marker="o", label=impl)
            ax.set_xscale("log", base=2)
            ax.set_ylim(bottom=0)
            ax.set_xlabel("N (row length)")
            ax.set_ylabel("GB/s (read + write)")
            ax.set_title(f"{op} {dt}")
            ax.grid(alpha=0.3)
            ax.legend(loc="lower left")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(here, "..", "build-host"), help="build folder with host_anchors")
    ap.add_argument("--out", default=os.path.join(here, "results", "host"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--mbytes", type=float, default=1024, help="input MB per point (several times the L3)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--dtype", nargs="+", default=DTYPES)
    ap.add_argument("--cols", nargs="+", type=int, default=COLS)
    ap.add_argument("--log", action="store_true", help="log_softmax too")
    ap.add_argument("--python", default=os.environ.get("PYTHON", "/usr/bin/python3"), help="Python with torch")
    args = ap.parse_args()

    exe = os.path.join(args.build, "host_anchors")
    if not os.path.exists(exe):
        sys.exit(f"host_compare: {exe} not found (configure with libdnnl-dev installed, build target host_anchors)")
    results = []
    for log in [False, True] if args.log else [False]:
        results += run_anchors(exe, args, log)
        results += run_torch(args.python, args, log)
    # Each op's points divide by the memcpy timed with that op's run (with
    # --log the two runs are minutes apart).
    memcpy = {(r["op"], r["dtype"], r["cols"]): r["gbps"] for r in results if r["impl"] == "memcpy"}
    for r in results:
        key = (r["op"], r["dtype"], r["cols"])
        if "gbps" in r and key in memcpy:
            r["ratio_to_memcpy"] = round(r["gbps"] / memcpy[key], 3)

    os.makedirs(args.out, exist_ok=True)
    meta = {"commit": git_commit(here), "cpu_model": cpu_model(), "cpus": os.cpu_count(), "threads": args.threads, "mbytes": args.mbytes,
            "repeats": args.repeats, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_average": os.getloadavg(), "lscpu": lscpu()}
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump({"machine": meta, "results": results}, f, indent=1)
    plot(results, os.path.join(args.out, "compare.png"),
         f"{meta['cpu_model']}, {args.threads} threads, {args.mbytes:g} MB inputs")
    print(f"{'op':12} {'dtype':5} {'N':>8} " + " ".join(f"{k:>14}" for k in ["memcpy", "duet", "onednn", "torch"]))
    for op in sorted({r["op"] for r in results}):
        for dt in args.dtype:
            for n in args.cols:
                row = {r["impl"]: r for r in results if r["op"] == op and r["dtype"] == dt and r["cols"] == n}
                cells = []
                for impl in ["memcpy", "duet", "onednn", "torch"]:
                    r = row.get(impl)
                    cells.append(f"{r['gbps']:6.2f} ({r.get('ratio_to_memcpy', 1):.2f})" if r and "gbps" in r else
                                 f"{'-':>14}")
                print(f"{op:12} {dt:5} {n:8} " + " ".join(f"{c:>14}" for c in cells))
    print(f"GB/s (ratio to memcpy); written to {args.out}/compare.json and compare.png")


if __name__ == "__main__":
    main()
