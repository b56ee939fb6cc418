#!/usr/bin/env python3
"""Host time of one duet call from Python (4 x 1024 float32 on the GPU: a
launch-bound size), through the fast path for contiguous CUDA tensors and
through the general path (the fast path switched off), alternating, with
torch.softmax beside (bench/NOTES.md, v24).

    DUET_LIBRARY=build/libduet.so PYTHONPATH=python python3 bench/host_time.py
"""
import time

import torch

import duet
from duet import _abi


def us_a_call(f, n=20000):
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    x = torch.randn(4, 1024, device="cuda")
    y = torch.empty_like(x)
    g = torch.randn_like(x)
    for _ in range(100):
        duet.softmax(x)  # the first call fills the binding's device cache
    torch.cuda.synchronize()
    fast = _abi._fast_call
    for _ in range(3):
        for use_fast in (False, True):
            _abi._fast_call = fast if use_fast else (lambda *a: None)
            print(f"{'fast path   ' if use_fast else 'general path'} us a call:"
                  f" softmax(x) {us_a_call(lambda: duet.softmax(x)):.1f}"
                  f" softmax(x, out=y) {us_a_call(lambda: duet.softmax(x, out=y)):.1f}"
                  f" softmax_backward(y, g) {us_a_call(lambda: duet.softmax_backward(y, g)):.1f}"
                  f" | torch.softmax {us_a_call(lambda: torch.softmax(x, -1)):.1f}", flush=True)
            torch.cuda.synchronize()
    _abi._fast_call = fast


if __name__ == "__main__":
    main()
