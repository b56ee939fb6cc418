#!/usr/bin/env python3
"""duet against torch.softmax on the same tensors, in one process.

Each point: a fresh input several times the L2 (256 MB by default, two input
sets rotated), torch's result checked against duet's, both timed with CUDA
events (warm-up, then the median of many launches). Writes JSON and a PNG
like the Triton tutorial's: GB/s against N, one line per provider, the
copy ceiling measured in the same run drawn across: the faster of torch's
copy_ (the vendor's device-to-device memcpy) and duet's own copy kernel.

    DUET_LIBRARY=build/libduet.so PYTHONPATH=python python3 bench/compare.py --out bench/results/h200/compare
    python3 bench/compare.py --replot bench/results/h200/compare.json   # the PNG again, from the JSON
"""
import argparse
import gc
import json
import statistics
import subprocess
import sys
import time

torch = None  # imported in main(): --replot needs neither torch nor duet
duet = None


def time_ms(fn, sets, warmup=5, repeats=15, batch=10, stats=None, budget_s=2.0):
    """Median per-launch device time of `batch` back-to-back launches between
    two events, rotating over `sets` inputs. A call so slow that `repeats`
    batches would take more than `budget_s` (torch's softmax over dim 0 of
    a tall matrix: 80-150 ms a call, a minute of device time a shape) is
    timed in fewer: batches of one, at least three of them. A device-side
    spin is queued before the start event, so the host enqueues the batch
    while the device is still busy: without it the host time of the first
    call (Python, ctypes, argument checks) counted as device time, 1-4% at
    256 MB for whichever provider had the slower Python path. Host time per call is
    reported on its own (host_us_per_call). `stats`, if given, receives the
    fastest and slowest batch (ms a launch) and the host's time to enqueue a
    batch, per launch (us): a host slower than the device would show there."""
    for i in range(warmup):
        fn(i % sets)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn(warmup % sets)  # the next input of the rotation, as the timed calls go on
    stop.record()
    stop.synchronize()
    one_s = start.elapsed_time(stop) * 1e-3
    if one_s * batch * repeats > budget_s:
        batch = 1
        repeats = max(3, min(repeats, int(budget_s / max(one_s, 1e-9))))
    times, host, k = [], [], warmup + 1
    # Python's garbage collector off while timing, as timeit does (it did
    # not remove the host stalls described at SPIN_CYCLES, but costs nothing).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    for _ in range(repeats):
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        t0 = time.perf_counter()
        for _ in range(batch):
            fn(k % sets)
            k += 1
        host.append((time.perf_counter() - t0) / batch * 1e6)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / batch)
    if gc_was_enabled:
        gc.enable()
    if stats is not None:
        stats.update(min_ms=min(times), max_ms=max(times), host_enqueue_us=statistics.median(host),
                     host_enqueue_max_us=max(host))
    return statistics.median(times)


# About 5 ms at 2 GHz: long enough for the host to enqueue the whole batch
# before the device reaches the start event, so the events time the device
# alone. 100 us (enough for one call) was not enough on the H100 machine,
# whose host stalled now and then for milliseconds: a batch with a stall
# measured up to 3x slower (host_enqueue_us up to 620 a launch), more often
# for duet, whose Python path is slower (bench/NOTES.md, v22).
SPIN_CYCLES = 10_000_000


def host_us_per_call(fn, calls=2000):
    """Host time of one call, the device kept busy enough to never wait:
    what a caller's thread pays per launch."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def copy_ceiling(found=None):
    """The copy ceiling in GB/s (bytes read + written): the faster of torch's
    copy_ (cudaMemcpyAsync device to device; hipMemcpyAsync on ROCm) and
    duet's own copy kernel (duet.copy_kernel), timed on the same 2 GiB
    buffers, as duet-bench does. `found`, if given, receives both
    (copy_torch_GBps, copy_duet_kernel_GBps: None where the loaded libduet
    has no copy kernel) and which was faster (copy_source)."""
    a = torch.randint(0, 256, (2 << 30,), dtype=torch.uint8, device="cuda")
    b = torch.zeros_like(a)
    gbps = {}
    ms = time_ms(lambda _: b.copy_(a), 1, 3, 10, 5)
    gbps["torch_copy"] = 2 * a.numel() / (ms * 1e-3) / 1e9
    try:
        b.zero_()
        duet.copy_kernel(b, a)  # checked once before it is timed
        if not torch.equal(a, b):
            raise RuntimeError(f"duet.copy_kernel copied {a.numel()} bytes wrong: {int((a != b).sum())} differ")
        ms = time_ms(lambda _: duet.copy_kernel(b, a), 1, 3, 10, 5)
        gbps["duet_copy_kernel"] = 2 * a.numel() / (ms * 1e-3) / 1e9
    except (AttributeError, OSError) as e:  # a libduet or package from before the copy kernel
        print(f"duet's copy kernel unavailable ({e}): the ceiling is torch's copy_ alone", file=sys.stderr)
        gbps["duet_copy_kernel"] = None
    source = max((k for k in gbps if gbps[k] is not None), key=lambda k: gbps[k])
    kernel = gbps["duet_copy_kernel"]
    print(f"copy ceiling {gbps[source]:.0f} GB/s ({source}): torch copy_ {gbps['torch_copy']:.0f} GB/s, "
          f"duet copy kernel {'n/a' if kernel is None else f'{kernel:.0f}'} GB/s", flush=True)
    if found is not None:
        found.update(copy_torch_GBps=gbps["torch_copy"], copy_duet_kernel_GBps=kernel, copy_source=source)
    del a, b
    torch.cuda.empty_cache()
    return gbps[source]


def plot(doc, path):
    """GB/s against N, one panel per dtype, one line per provider, the copy
    ceiling across (the Triton tutorial's plot)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no plot", file=sys.stderr)
        return
    dtypes = list(dict.fromkeys(r["dtype"] for r in doc["rows"]))
    ceiling = doc["copy_GBps"]
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6 * len(dtypes), 4.5), squeeze=False)
    for ax, dt_name in zip(axes[0], dtypes):
        rs = [r for r in doc["rows"] if r["dtype"] == dt_name]
        ax.plot([r["N"] for r in rs], [r["duet_GBps"] for r in rs], "o-", label="duet")
        ax.plot([r["N"] for r in rs], [r["torch_GBps"] for r in rs], "s-", label="torch.softmax")
        if any("torch_compile_GBps" in r for r in rs):
            ax.plot([r["N"] for r in rs if "torch_compile_GBps" in r],
                    [r["torch_compile_GBps"] for r in rs if "torch_compile_GBps" in r], "^-", label="torch.compile")
        ax.axhline(ceiling, color="gray", linestyle="--", label=f"copy ceiling {ceiling:.0f} GB/s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N (row length)")
        ax.set_ylabel("GB/s (2*M*N*bytes / time)")
        ax.set_title(f"softmax {dt_name}, {doc['device']}")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{doc['mode']}, duet {doc['commit']}, {doc['date']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="path prefix for .json and .png")
    ap.add_argument("--replot", metavar="JSON", help="only draw the PNG of an earlier run's JSON, beside it")
    ap.add_argument("--mbytes", type=float, default=256)
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--cols", default="")
    ap.add_argument("--tutorial", action="store_true", help="M=4096, N=256..12544, one input reused (as the tutorial)")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile'd softmax")
    ap.add_argument("--commit", default="", help="duet commit recorded with the results (default: git rev-parse)")
    args = ap.parse_args()
    if args.replot:
        with open(args.replot) as f:
            plot(json.load(f), args.replot.rsplit(".json", 1)[0] + ".png")
        return
    if not args.out:
        ap.error("--out is required (or --replot)")
    global torch, duet
    import torch
    import duet
    torch.manual_seed(0)
    copy = {}
    ceiling = copy_ceiling(copy)
    if args.cols:
        cols = [int(c) for c in args.cols.split(",")]
    elif args.tutorial:
        cols = list(range(256, 12545, 384))
    else:
        cols = [32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384, 32768, 65536, 131072, 262144, 1048576]
    compiled = None
    if args.compile:
        try:
            compiled = torch.compile(lambda t: torch.softmax(t, -1))
        except Exception as e:  # offline builds may lack a compiler toolchain
            print("torch.compile unavailable:", e, file=sys.stderr)
    rows_out = []
    host_us = {}
    for dt_name in args.dtypes.split(","):
        dt = getattr(torch, dt_name)
        small = torch.randn(4, 1024, device="cuda", dtype=dt)
        small_out = torch.empty_like(small)
        host_us[dt_name] = {"duet": host_us_per_call(lambda: duet.softmax(small, out=small_out)),
                            "torch": host_us_per_call(lambda: torch.softmax(small, -1))}
        print(f"{dt_name}: host time per call, 4x1024: duet {host_us[dt_name]['duet']:.1f} us, "
              f"torch {host_us[dt_name]['torch']:.1f} us", flush=True)
        for n in cols:
            esize = torch.tensor([], dtype=dt).element_size()
            m = 4096 if args.tutorial else max(1, int(args.mbytes * 1e6 / (n * esize)))
            sets = 1 if args.tutorial else 2
            xs = [torch.randn(m, n, device="cuda", dtype=dt) * 4 for _ in range(sets)]
            ref = torch.softmax(xs[0], -1)
            got = duet.softmax(xs[0])
            err = ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
            # Two float32 implementations, each within 1e-5 of the exact result.
            tol = 3e-5 if dt == torch.float32 else 2e-2
            if not err <= tol:
                print(f"MISMATCH {dt_name} {m}x{n}: {err}", file=sys.stderr)
                sys.exit(1)
            moved = 2 * m * n * esize
            # Both allocate their output through torch's caching allocator,
            # as a caller of either would.
            s_duet, s_torch = {}, {}
            t_duet = time_ms(lambda i: duet.softmax(xs[i]), sets, stats=s_duet)
            t_torch = time_ms(lambda i: torch.softmax(xs[i], -1), sets, stats=s_torch)
            row = {"dtype": dt_name, "M": m, "N": n, "duet_GBps": moved / t_duet / 1e6,
                   "torch_GBps": moved / t_torch / 1e6, "max_rel_err_vs_torch": err,
                   # Spread over the batches (slowest, fastest) and the host's
                   # enqueue time per launch (median, worst batch).
                   "duet_GBps_range": [moved / s_duet["max_ms"] / 1e6, moved / s_duet["min_ms"] / 1e6],
                   "torch_GBps_range": [moved / s_torch["max_ms"] / 1e6, moved / s_torch["min_ms"] / 1e6],
                   "duet_host_enqueue_us": [s_duet["host_enqueue_us"], s_duet["host_enqueue_max_us"]],
                   "torch_host_enqueue_us": [s_torch["host_enqueue_us"], s_torch["host_enqueue_max_us"]]}
            if compiled is not None:
                try:
                    row["torch_compile_GBps"] = moved / time_ms(lambda i: compiled(xs[i]), sets) / 1e6
                except Exception as e:
                    print("torch.compile failed:", e, file=sys.stderr)
                    compiled = None
            row["duet_ratio"] = row["duet_GBps"] / ceiling
            rows_out.append(row)
            print(f"{dt_name:9s} M={m:8d} N={n:8d} duet {row['duet_GBps']:7.0f} GB/s ({row['duet_ratio']:.3f})"
                  f" [{row['duet_GBps_range'][0]:.0f}-{row['duet_GBps_range'][1]:.0f}]"
                  f"  torch {row['torch_GBps']:7.0f} GB/s [{row['torch_GBps_range'][0]:.0f}-{row['torch_GBps_range'][1]:.0f}]"
                  f"  host us/launch duet {row['duet_host_enqueue_us'][1]:.0f} torch {row['torch_host_enqueue_us'][1]:.0f} (worst batch)",
                  flush=True)
            del xs, ref, got
            torch.cuda.empty_cache()
    commit = args.commit
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        except OSError:
            commit = ""
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "date": time.strftime("%Y-%m-%d"), "commit": commit or "unknown", "copy_GBps": ceiling,
           **copy,
           "mode": "tutorial (M=4096, hot)" if args.tutorial else f"cold ({args.mbytes} MB inputs, 2 sets rotated)",
           "timing": "median of 15 batches of 10 launches, event-timed, a 5 ms device spin queued before each batch, "
                     "garbage collector off",
           "host_us_per_call": host_us, "rows": rows_out}
    with open(args.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    plot(doc, args.out + ".png")


if __name__ == "__main__":
    main()
