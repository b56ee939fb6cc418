#!/usr/bin/env python3
"""duet's fused row operations against torch on the same tensors, in one
process (issue 19's comparisons), device time with CUDA events as
compare.py takes it, each as a ratio to the copy ceiling measured in the
same run (compare.copy_ceiling: the faster of torch's copy_ and duet's copy
kernel) over the bytes the operation must move:

  causal   scaled causal softmax [B, H, S, S] bf16, forward and backward,
           against torch's composite (scale, masked_fill with a causal mask,
           softmax; autograd's backward) and torch.compile of it;
           bytes: forward read x + write y, backward read y, dy + write dx.
  masked   softmax with a [B, 1, Sq, Sk] bool mask, Sk = 128..32768,
           against torch's masked_fill + softmax; bytes: x, y and the mask.
  xent     cross-entropy forward + backward, [M, V] bf16 logits, against
           F.cross_entropy (forward + backward) and torch.compile of it;
           duet in its gradient-in-the-forward mode (into the logits) and
           in its default mode (lse saved, a backward pass); bytes: read the
           logits once and write the gradient once, targets aside. Also the
           peak memory beyond the inputs each needs.
  xent1m   cross-entropy forward, 256 rows of a vocabulary of 2^20, f32;
           bytes: the logits.

    DUET_LIBRARY=build/libduet.so PYTHONPATH=python python3 bench/fused_compare.py --out bench/results/h100/fused
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (time_ms and the copy ceiling, shared)

import duet  # noqa: E402

compare.torch = torch
compare.duet = duet


def gbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


def timed(fn, sets=2):
    return compare.time_ms(lambda i: fn(i), sets, warmup=3, repeats=9, batch=5)


def causal_points(dtype, scale):
    out = []
    for b, h, s in ((8, 32, 2048),):
        xs = [torch.randn(b, h, s, s, device="cuda", dtype=dtype) for _ in range(2)]
        dys = [torch.randn_like(xs[0]) for _ in range(2)]
        tril = torch.ones(s, s, device="cuda", dtype=torch.bool).triu(1)

        def composite(x):
            return torch.softmax((x * scale).masked_fill(tril, float("-inf")), -1)

        compiled = torch.compile(composite, fullgraph=True, dynamic=False)
        got = duet.masked_softmax(xs[0], scale=scale, causal=True)
        err = (got.float() - composite(xs[0]).float()).abs().max().item()
        nbytes = 2 * xs[0].numel() * xs[0].element_size()
        ms = {"duet": timed(lambda i: duet.masked_softmax(xs[i], scale=scale, causal=True)),
              "torch": timed(lambda i: composite(xs[i])),
              "torch_compile": timed(lambda i: compiled(xs[i]))}
        # Backward: the gradient of the input from y and dy.
        ys = [duet.masked_softmax(x, scale=scale, causal=True) for x in xs]
        xg = [x.detach().requires_grad_() for x in xs]
        tys = [composite(x) for x in xg]
        bwd_bytes = 3 * xs[0].numel() * xs[0].element_size()
        ms_bwd = {"duet": timed(lambda i: duet.masked_softmax_backward(ys[i], dys[i], scale=scale)),
                  "torch": timed(lambda i: torch.autograd.grad(tys[i], xg[i], dys[i], retain_graph=True))}
        out.append({"op": "causal_forward", "shape": [b, h, s, s], "dtype": str(dtype)[6:], "max_abs_err": err,
                    "bytes": nbytes, "ms": ms, "GBps": {k: gbps(nbytes, v) for k, v in ms.items()}})
        out.append({"op": "causal_backward", "shape": [b, h, s, s], "dtype": str(dtype)[6:],
                    "bytes": bwd_bytes, "ms": ms_bwd, "GBps": {k: gbps(bwd_bytes, v) for k, v in ms_bwd.items()}})
        del xs, dys, ys, xg, tys
    return out


def masked_points(dtype, total_bytes):
    out = []
    for sk in (128, 512, 2048, 8192, 32768):
        b, h = 4, 16
        sq = max(1, total_bytes // (b * h * sk * 2))
        xs = [torch.randn(b, h, sq, sk, device="cuda", dtype=dtype) for _ in range(2)]
        masks = [torch.rand(b, 1, sq, sk, device="cuda") < 0.2 for _ in range(2)]

        def composite(i):
            return torch.softmax(xs[i].masked_fill(masks[i], float("-inf")), -1)

        got = duet.masked_softmax(xs[0], masks[0])
        err = (got.float() - composite(0).float()).nan_to_num(0).abs().max().item()
        nbytes = 2 * xs[0].numel() * xs[0].element_size() + masks[0].numel()
        ms = {"duet": timed(lambda i: duet.masked_softmax(xs[i], masks[i])), "torch": timed(composite)}
        out.append({"op": "masked_forward", "shape": [b, h, sq, sk], "dtype": str(dtype)[6:], "max_abs_err": err,
                    "bytes": nbytes, "ms": ms, "GBps": {k: gbps(nbytes, v) for k, v in ms.items()}})
        del xs, masks
    return out


def xent_points(m, v, dtype, with_backward):
    logits = [torch.randn(m, v, device="cuda", dtype=dtype) for _ in range(2)]
    targets = [torch.randint(0, v, (m,), device="cuda") for _ in range(2)]
    elem = logits[0].element_size()
    nbytes = (2 if with_backward else 1) * m * v * elem

    def torch_step(i):
        x = logits[i].detach().requires_grad_()
        loss = F.cross_entropy(x, targets[i])
        if with_backward:
            loss.backward()
        return loss

    compiled_loss = torch.compile(lambda x, t: F.cross_entropy(x, t), fullgraph=True, dynamic=False)

    def torch_compiled_step(i):
        x = logits[i].detach().requires_grad_()
        loss = compiled_loss(x, targets[i])
        if with_backward:
            loss.backward()
        return loss

    def duet_default(i):
        x = logits[i].detach().requires_grad_(with_backward)
        loss = duet.cross_entropy(x, targets[i])
        if with_backward:
            loss.backward()
        return loss

    work = [t.clone() for t in logits]

    def duet_inplace(i):
        # The registered op of the memory-saving mode: the forward writes the
        # gradient for an upstream gradient of 1 (the mean's backward)
        # into the logits' memory, so one call is forward and backward.
        # The values it then reads are the previous run's gradients: the
        # same work.
        return torch.ops.duet.cross_entropy_inplace(work[i], targets[i], -100, "mean", 0.0, 0.0, False)

    want = F.cross_entropy(logits[0].float(), targets[0]).item()
    got = duet.cross_entropy(logits[0], targets[0]).float().item()
    ms = {"duet": timed(duet_inplace if with_backward else duet_default)}
    if with_backward:
        ms["duet_default"] = timed(duet_default)
    ms["torch"] = timed(torch_step)
    ms["torch_compile"] = timed(torch_compiled_step)

    def peak_extra(step):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(0)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    peak = {"duet": peak_extra(duet_inplace if with_backward else duet_default), "torch": peak_extra(torch_step)}
    name = "xent_forward_backward" if with_backward else "xent_forward"
    return [{"op": name, "shape": [m, v], "dtype": str(dtype)[6:], "loss": got, "torch_loss": want,
             "bytes": nbytes, "ms": ms, "GBps": {k: gbps(nbytes, t) for k, t in ms.items()},
             "peak_extra_bytes": peak, "logits_bytes": m * v * elem}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="path prefix for the .json")
    ap.add_argument("--only", default="causal,masked,xent,xent1m")
    ap.add_argument("--mbytes", type=int, default=256, help="masked: scores of about this size")
    args = ap.parse_args()
    only = set(args.only.split(","))
    torch.manual_seed(0)
    copy = {}
    ceiling = compare.copy_ceiling(copy)
    rows = []
    t0 = time.time()
    if "causal" in only:
        rows += causal_points(torch.bfloat16, 0.125)
    if "masked" in only:
        rows += masked_points(torch.bfloat16, args.mbytes << 20)
    if "xent" in only:
        rows += xent_points(8192, 128256, torch.bfloat16, True)
    if "xent1m" in only:
        rows += xent_points(256, 1 << 20, torch.float32, False)
    for r in rows:
        r["ratio_to_copy"] = {k: g / ceiling for k, g in r["GBps"].items()}
        r["duet_speedup"] = {k: r["ms"][k] / r["ms"]["duet"] for k in r["ms"] if k != "duet"}
        print(r["op"], r["shape"], r["dtype"], " ".join(f"{k} {v:.3f}" for k, v in r["ratio_to_copy"].items()),
              "| duet faster by", " ".join(f"{k} {v:.2f}x" for k, v in r["duet_speedup"].items()), flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "commit": commit,
           "date": time.strftime("%Y-%m-%d"), "copy_GBps": ceiling, **copy,
           "seconds": time.time() - t0, "rows": rows}
    with open(args.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
