#!/usr/bin/env python3
"""Host time of one duet call from Python (4 x 1024 float32 on the GPU: a
launch-bound size), through the fast path for contiguous CUDA tensors and
through the general path (the fast path switched off), alternating, with
torch.softmax beside (bench/NOTES.md, v24).

    DUET_LIBRARY=build/libduet.so PYTHONPATH=python python3 bench/host_time.py
"""
import time, torch, duet
from duet import _abi
x = torch.randn(4, 1024, device="cuda"); y = torch.empty_like(x)
g = torch.randn_like(x)
for _ in range(100): duet.softmax(x)
torch.cuda.synchronize()
fast_fwd, fast_bwd = _abi._forward_fast, _abi._backward_fast
def loop(n, f):
    t0 = time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter() - t0) / n * 1e6
for k in range(3):
    for fast in (False, True):
        _abi._forward_fast = fast_fwd if fast else (lambda *a: None)
        _abi._backward_fast = fast_bwd if fast else (lambda *a: None)
        print(f"{'fast path   ' if fast else 'general path'} us a call: softmax(x) {loop(20000, lambda: duet.softmax(x)):.1f}"
              f" softmax(x, out=y) {loop(20000, lambda: duet.softmax(x, out=y)):.1f}"
              f" softmax_backward(y, g) {loop(20000, lambda: duet.softmax_backward(y, g)):.1f}"
              f" | torch.softmax {loop(20000, lambda: torch.softmax(x, -1)):.1f}", flush=True)
        torch.cuda.synchronize()
