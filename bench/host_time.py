#!/usr/bin/env python3
"""Host time of one duet call from Python at a launch-bound size (4 x 1024
float32), beside torch.softmax: through the fast path for plain contiguous
tensors, and through the registered op (torch.ops.duet.*, the fast path
switched off), alternating, several rounds (bench/NOTES.md, v24).

    python3 bench/host_time.py [--device cuda|cpu] [--json out.json]

(with the package installed, or DUET_LIBRARY=build/libduet.so PYTHONPATH=python)
"""
import argparse
import json
import statistics
import time

import torch

import duet
from duet import _tensor


def us_a_call(f, n):
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the medians here")
    args = parser.parse_args()

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    x = torch.randn(4, 1024, device=args.device)
    y = torch.empty_like(x)
    g = torch.randn_like(x)
    calls = {
        "softmax(x)": lambda: duet.softmax(x),
        "softmax(x, out=y)": lambda: duet.softmax(x, out=y),
        "softmax_backward(y, g)": lambda: duet.softmax_backward(y, g),
    }
    for f in calls.values():
        for _ in range(100):
            f()  # the first call fills the binding's device cache
    sync()
    fast = _tensor.fast_call
    times = {}  # (path, call) -> us a call, one per round
    try:
        for _ in range(args.rounds):
            for path in ("registered op", "fast path"):
                _tensor.fast_call = fast if path == "fast path" else (lambda *a: None)
                line = []
                for name, f in calls.items():
                    us = us_a_call(f, args.calls)
                    times.setdefault(f"{path}: {name}", []).append(us)
                    line.append(f"{name} {us:.1f}")
                    sync()
                us = us_a_call(lambda: torch.softmax(x, -1), args.calls)
                times.setdefault("torch.softmax(x, -1)", []).append(us)
                sync()
                print(f"{path:13} us a call ({args.device}): {' '.join(line)} | torch.softmax {us:.1f}", flush=True)
    finally:
        _tensor.fast_call = fast
    medians = {k: statistics.median(v) for k, v in times.items()}
    gap = medians["fast path: softmax(x)"] - medians["torch.softmax(x, -1)"]
    print(f"median: duet.softmax {medians['fast path: softmax(x)']:.1f} us, torch.softmax "
          f"{medians['torch.softmax(x, -1)']:.1f} us: {gap:+.1f} us a call")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "torch": torch.__version__, "duet": duet.__version__,
                       "shape": list(x.shape), "calls": args.calls, "rounds": times, "median_us": medians,
                       "fast_path_minus_torch_us": gap}, f, indent=1)


if __name__ == "__main__":
    main()
