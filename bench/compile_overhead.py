#!/usr/bin/env python3
"""Host time of one softmax call through each way a PyTorch user reaches
duet, on a tensor small enough that the kernel is negligible: duet.softmax
eager (the fast path), the registered op called directly, both inside
torch.compile(fullgraph=True), and torch.softmax eager and compiled as the
anchors. With --profile, the Python functions the compiled duet call spends
its time in (cProfile, top 25 by cumulative time).

    python3 bench/compile_overhead.py [--json out.json] [--profile]
"""
import argparse
import cProfile
import io
import json
import pstats
import time

import torch

import duet


def per_call_us(fn, x, calls):
    for _ in range(20):
        fn(x)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    x = torch.randn(4, 256, device="cuda")
    ways = {
        "duet.softmax eager": lambda t: duet.softmax(t),
        "torch.ops.duet.softmax eager": lambda t: torch.ops.duet.softmax.default(t, -1, None),
        "torch.softmax eager": lambda t: torch.softmax(t, -1),
        "duet.softmax compiled": torch.compile(lambda t: duet.softmax(t), fullgraph=True),
        "torch.softmax compiled": torch.compile(lambda t: torch.softmax(t, -1), fullgraph=True),
    }
    results = {}
    for name, fn in ways.items():
        results[name] = per_call_us(fn, x, args.calls)
        print(f"{name:32s} {results[name]:8.1f} us a call")
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "us_per_call": results}
    if args.profile:
        fn = ways["duet.softmax compiled"]
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(500):
            fn(x)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
        print(out.getvalue())
        report["profile"] = out.getvalue()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
