#!/usr/bin/env python3
"""Device time of duet.softmax eager, inside torch.compile(fullgraph=True)
and inside a captured CUDA graph, on 256 MB inputs (the kernels' time, not
the host's): each way runs the same calls back to back between CUDA events,
median over rounds. The ratios to eager should be 1 (within --tolerance).

    python3 bench/device_time_check.py [--json out.json]
"""
import argparse
import json
import statistics
import sys

import torch

import duet

# (rows, cols, dtype): block_row, cluster_row (Hopper) and split_stream
# (the workspace from torch's allocator).
SHAPES = [(8192, 8192, torch.float32), (1024, 65536, torch.bfloat16), (64, 1 << 20, torch.float32)]


def time_ms(run, calls, rounds):
    """Median over rounds of the time of `calls` calls of run() (ms a call)."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(rounds):
        start.record()
        run()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / calls)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--json")
    args = parser.parse_args()
    results, ok = [], True
    for rows, cols, dtype in SHAPES:
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        y = torch.empty_like(x)

        def calls_in_one_graph(t, out):
            # out= keeps every call in the graph (a pure op whose result is
            # unused would be dropped), so the graph holds `calls` launches
            # and the host's time per compiled call is spread over them.
            for _ in range(args.calls):
                duet.softmax(t, out=out)
            return out

        compiled = torch.compile(calls_in_one_graph, fullgraph=True, dynamic=False)

        def eager():
            for _ in range(args.calls):
                duet.softmax(x)

        def in_compiled():
            compiled(x, y)

        for f in (eager, in_compiled):
            f()  # warm-up: plans, compilation
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            eager()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            eager()
        torch.cuda.synchronize()
        ms = {name: time_ms(f, args.calls, args.rounds)
              for name, f in (("eager", eager), ("compiled", in_compiled), ("graph", graph.replay))}
        ratios = {name: ms[name] / ms["eager"] for name in ("compiled", "graph")}
        shape_ok = all(abs(r - 1) <= args.tolerance for r in ratios.values())
        ok = ok and shape_ok
        bytes_moved = 2 * x.numel() * x.element_size()
        print(f"{rows} x {cols} {str(dtype)[6:]}: eager {ms['eager'] * 1e3:.1f} us "
              f"({bytes_moved / ms['eager'] / 1e6:.0f} GB/s), compiled {ratios['compiled']:.3f} x eager, "
              f"graph {ratios['graph']:.3f} x eager: {'ok' if shape_ok else 'OFF'}", flush=True)
        results.append({"rows": rows, "cols": cols, "dtype": str(dtype), "ms": ms, "ratio_to_eager": ratios})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "duet": duet.__version__,
                       "calls": args.calls, "rounds": args.rounds, "results": results, "pass": ok}, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
