#!/usr/bin/env python3
"""Host time of one duet call from Python at a launch-bound size (4 x 1024
float32), beside torch.softmax: through the fast path for plain contiguous
tensors, and through the registered op (torch.ops.duet.*, the fast path
switched off), alternating, several rounds (bench/NOTES.md, v24); then an
input that requires grad, through duet's eager autograd, the registered
op's autograd, and torch.softmax (NOTES v40). On a GPU
each batch of calls is queued behind a spin kernel, so that the time is the
host's, never the GPU's.

    python3 bench/host_time.py [--device cuda|cpu] [--json out.json] [--parts]

--parts also times the pieces of one fast-path call alone (the output's
allocation, the stream and pointer reads, a bare ctypes call, libduet's call
with and without its pointer checks' vendor query), so the gap to
torch.softmax can be placed.

(with the package installed, or DUET_LIBRARY=build/libduet.so PYTHONPATH=python)
"""
import argparse
import json
import statistics
import time

import torch

import duet
from duet import _tensor


# On a GPU, calls go out in batches of BATCH, each behind a spin kernel
# long enough to hold the whole batch in the launch queue: the host is then
# never made to wait for the GPU (a tiny kernel can take longer on the GPU
# than its launch on the host, and a full queue blocks the launching
# thread), so the time is the host's alone. 1024 is the depth that blocks;
# the spin covers BATCH calls of up to SPIN_US_A_CALL each.
BATCH = 200
SPIN_US_A_CALL = 100
_cycles_a_us = None


def _spin(us):
    """Queues a kernel that spins about `us` microseconds."""
    global _cycles_a_us
    if _cycles_a_us is None:  # the spin's clock, measured once
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(10_000_000)
        stop.record()
        stop.synchronize()
        _cycles_a_us = 10_000_000 / (start.elapsed_time(stop) * 1e3)
    torch.cuda._sleep(int(us * _cycles_a_us))


def us_a_call(f, n, gpu=False):
    if not gpu:
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t0) / n * 1e6
    total, done = 0.0, 0
    while done < n:
        k = min(BATCH, n - done)
        _spin(k * SPIN_US_A_CALL)
        t0 = time.perf_counter()
        for _ in range(k):
            f()
        total += time.perf_counter() - t0
        done += k
        torch.cuda.synchronize()
    return total / n * 1e6


def parts(x, y):
    """us a call of each piece of duet.softmax(x)'s fast path, alone."""
    import ctypes
    from duet import _lib
    lib = _lib.library()
    index = x.get_device()
    dev = _tensor._DEVICE_OF[index]
    code = _tensor.DTYPE_CODES[x.dtype]
    rows, cols = x.shape
    entry = _tensor._entry(0, False)
    stream = _tensor.raw_stream(index) if index >= 0 else None
    xp, yp = x.data_ptr(), y.data_ptr()
    found = _lib.Device()
    packed, call = _tensor._PACKED, _tensor._softmax_call()

    def pack():
        _lib.SOFTMAX_ARGS.pack_into(packed.buffer, 0, _lib.SOFTMAX_ARGS.size, 0, 0, code, _lib.CALL_DEVICES_CHECKED,
                                    rows, cols, xp, cols, 0, cols, yp, cols, 0, 0, stream or 0)
    pieces = {
        "torch.empty_like(x)": lambda: torch.empty_like(x),
        "raw_stream(index)": lambda: _tensor.raw_stream(index) if index >= 0 else None,
        "x.data_ptr()": x.data_ptr,
        "ctypes: duet_version()": lib.duet_version,
        "ctypes: duet_device_of_pointer(x)": lambda: lib.duet_device_of_pointer(ctypes.c_void_p(xp), ctypes.byref(found)),
        "libduet softmax, pointers as ints": lambda: entry(dev, code, rows, cols, xp, cols, yp, cols, None, 0, stream),
        "pack duet_softmax_args_t": lambda: pack(),
        "pack + duet_softmax_call": lambda: (pack(), call(dev, packed.address)),
        "dispatch_is_plain()": _tensor.dispatch_is_plain,
        "_plain(y) (out's checks)": lambda: _tensor._plain(y, index, x),
        "fast_call(x, out=y)": lambda: _tensor.fast_call(0, x, (), -1, y),
        "duet.softmax(x, out=y)": lambda: duet.softmax(x, out=y),
        "torch.softmax(x, -1)": lambda: torch.softmax(x, -1),
    }
    return pieces


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the medians here")
    parser.add_argument("--parts", action="store_true", help="also time the fast path's pieces alone")
    args = parser.parse_args()
    gpu = args.device == "cuda"

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
                    us = us_a_call(f, args.calls, gpu)
                    times.setdefault(f"{path}: {name}", []).append(us)
                    line.append(f"{name} {us:.1f}")
                    sync()
                us = us_a_call(lambda: torch.softmax(x, -1), args.calls, gpu)
                times.setdefault("torch.softmax(x, -1)", []).append(us)
                sync()
                print(f"{path:13} us a call ({args.device}): {' '.join(line)} | torch.softmax {us:.1f}", flush=True)
    finally:
        _tensor.fast_call = fast
    # An input that requires grad (a training step's): eager autograd straight
    # to libduet, and the registered op's autograd, against torch.softmax.
    # Each call's graph is dropped with its output.
    from duet import _ops
    xg = x.clone().requires_grad_()
    eager = getattr(_ops, "_takes_eager_autograd", None)
    grad_calls = {"eager autograd": lambda: duet.softmax(xg), "registered op": lambda: duet.softmax(xg),
                  "torch": lambda: torch.softmax(xg, -1)}
    try:
        for _ in range(args.rounds):
            line = []
            for name, f in grad_calls.items():
                if eager is None and name == "eager autograd":
                    continue  # a binding from before it
                if eager is not None:
                    _ops._takes_eager_autograd = eager if name == "eager autograd" else (lambda *a: False)
                for _ in range(100):
                    f()
                us = us_a_call(f, args.calls, gpu)
                times.setdefault(f"requires grad, {name}: softmax(x)", []).append(us)
                line.append(f"{name} {us:.1f}")
                sync()
            print(f"requires grad us a call ({args.device}): {' | '.join(line)}", flush=True)
    finally:
        if eager is not None:
            _ops._takes_eager_autograd = eager
    if args.parts:
        pieces = parts(x, y)
        for _ in range(args.rounds):
            for name, f in pieces.items():
                for _ in range(100):
                    f()
                times.setdefault(f"part: {name}", []).append(us_a_call(f, args.calls, gpu))
                sync()
        for name in pieces:
            print(f"  {name:40} {statistics.median(times['part: ' + name]):6.2f} us")
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
