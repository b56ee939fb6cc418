#!/usr/bin/env python3
"""Vocabulary-parallel cross-entropy over NCCL (issue 20's comparison), in
one run of `world` processes, one GPU each:

  duet_tp        duet.distributed.cross_entropy forward + backward on each
                 rank's [M, V / world] shard (validate=False, the training
                 loop's mode, and the checking default validate=True)
  megatron_tp    a pure-torch vocabulary-parallel cross-entropy written the
                 way Megatron-LM's tensor_parallel/cross_entropy.py computes
                 it (float32 logits, max all-reduce, target logit
                 all-reduce, sum-of-exp all-reduce; softmax saved for the
                 backward), on the same shards
  single         rank 0 alone on the whole [M, V] tensor: duet.cross_entropy
                 (default mode: lse saved, a backward pass; and the in-place
                 mode) and F.cross_entropy

Device time with CUDA events, the median of repeats after warm-up, every
rank in step (a barrier before each timed batch), two ways: calls made one
after another from Python (ms_tp, ms_single_gpu; where the host takes
longer to enqueue a call than the GPU to run it, that is the host's time,
host_issue_ms_rank0 says), and the same calls enqueued while the GPU
spins (host_ahead: the device's time, as a training step whose host runs
ahead of its GPU sees it). The ratio the issue asks for is
duet_tp / single (duet's default mode, the same passes).

    DUET_LIBRARY=build/libduet.so PYTHONPATH=python torchrun --nproc-per-node 2 \\
        bench/distributed_compare.py --out bench/results/h200x2/distributed
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import duet
import duet.distributed as dd


def time_ms(fn, warmup=3, repeats=10, batch=10):
    """Median device time of one fn() call, every rank starting together."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / batch)
    t = torch.tensor([statistics.median(times)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's
    return float(t)


def device_ms(fn, repeats=10, batch=10, head_start_cycles=40_000_000):
    """Median device time of one fn() call with the host ahead of the GPU:
    each batch is enqueued while the GPU spins (torch.cuda._sleep, about
    20 ms at the H200's clock), so the events time the GPU's work without the
    host's launch gaps. Also gives the host's enqueue time of a batch, which
    must stay below the head start."""
    for _ in range(3):
        fn()
    times, enqueue = [], []
    for _ in range(repeats):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(head_start_cycles)
        start.record()
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        enqueue.append((time.perf_counter() - t0) * 1e3)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / batch)
    t = torch.tensor([statistics.median(times), max(enqueue)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return {"ms": float(t[0]), "host_enqueue_ms_a_batch": float(t[1])}


def issue_ms(fn, calls=30):
    """Host time to enqueue one fn() call (no synchronization inside): where
    it exceeds the device time, the host, not the GPU, sets the pace."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    issued = time.perf_counter() - start
    torch.cuda.synchronize()
    return issued * 1e3 / calls


class MegatronStyleCrossEntropy(torch.autograd.Function):
    """Vocabulary-parallel cross-entropy in plain torch, the computation of
    Megatron-LM's _VocabParallelCrossEntropy (float32, three all-reduces)."""

    @staticmethod
    def forward(ctx, logits, target, start, end):
        logits = logits.float()
        logits_max = logits.max(dim=-1).values
        dist.all_reduce(logits_max, op=dist.ReduceOp.MAX)
        logits = logits - logits_max.unsqueeze(-1)
        outside = (target < start) | (target >= end)
        local = (target - start).masked_fill(outside, 0)
        rows = torch.arange(logits.shape[0], device=logits.device)
        predicted = logits[rows, local].masked_fill(outside, 0.0)
        dist.all_reduce(predicted)
        exp_logits = logits.exp_()
        sum_exp = exp_logits.sum(dim=-1)
        dist.all_reduce(sum_exp)
        loss = torch.log(sum_exp) - predicted
        exp_logits.div_(sum_exp.unsqueeze(-1))
        ctx.save_for_backward(exp_logits, outside, local)
        return loss.mean()

    @staticmethod
    def backward(ctx, grad_output):
        softmax, outside, local = ctx.saved_tensors
        grad = softmax
        rows = torch.arange(grad.shape[0], device=grad.device)
        grad[rows, local] -= (~outside).float()
        grad.mul_(grad_output / grad.shape[0])
        return grad.to(torch.bfloat16), None, None, None


def plot(doc, path):
    """Bars of the per-call times: duet over the shards, the whole tensor on
    one GPU, the Megatron-style torch code over the shards."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ahead, eager = doc["host_ahead"], doc["ms_tp"]
    bars = [("duet, 2 shards", ahead["duet_tp"]["ms"], eager["duet_tp"]),
            ("duet, 1 GPU", ahead["single_duet"]["ms"], doc["ms_single_gpu"]["duet"]),
            ("F.cross_entropy, 1 GPU", ahead["single_torch"]["ms"], doc["ms_single_gpu"]["torch"]),
            ("Megatron-style torch, 2 shards", ahead["megatron_tp"]["ms"], eager["megatron_tp"])]
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    y = range(len(bars))
    ax.barh([i + 0.2 for i in y], [b[1] for b in bars], height=0.4, label="device time (host ahead)")
    ax.barh([i - 0.2 for i in y], [b[2] for b in bars], height=0.4, label="calls one after another (host-paced)")
    ax.set_yticks(list(y), [b[0] for b in bars])
    ax.invert_yaxis()
    ax.set_xlabel("ms per forward + backward")
    m, v = doc["shape"]
    ax.set_title(f"cross-entropy {m} x {v} {doc['dtype']}, {doc['gpus']} x {doc['device']}, NCCL {doc['nccl']}",
                 fontsize=9)
    ax.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replot", default=None, help="a JSON this script wrote: draw its plot (.png beside it) and exit")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--out", default=None, help="path prefix of the JSON (rank 0 writes it)")
    args = ap.parse_args()
    if args.replot:
        with open(args.replot) as f:
            plot(json.load(f), args.replot[:-len(".json")] + ".png")
        return

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dtype = torch.bfloat16
    m, v = args.rows, args.vocab
    cols = v // world
    g = torch.Generator(device="cuda").manual_seed(0)
    full = torch.randn(m, cols * world, device="cuda", dtype=dtype, generator=g) * 2
    target = torch.randint(0, cols * world, (m,), device="cuda", generator=g)
    shard = full[:, rank * cols:(rank + 1) * cols].contiguous()
    leaf = shard.clone().requires_grad_()

    # Correctness on this tensor: duet_tp's loss and gradient against the
    # single-device op on the whole rows.
    loss = dd.cross_entropy(leaf, target)
    loss.backward()
    whole = full.clone().requires_grad_()
    want = duet.cross_entropy(whole, target)
    want.backward()
    loss_err = abs(float(loss.detach()) - float(want.detach()))
    grad_err = float((leaf.grad.float() - whole.grad[:, rank * cols:(rank + 1) * cols].float()).abs().max())
    leaf.grad = None

    def duet_tp(validate, inplace):
        def step():
            x = (leaf * 1) if inplace else leaf
            dd.cross_entropy(x, target, validate=validate, inplace_backward=inplace).backward()
            leaf.grad = None
        return step

    def megatron_tp():
        MegatronStyleCrossEntropy.apply(leaf, target, rank * cols, (rank + 1) * cols).backward()
        leaf.grad = None

    ms = {"duet_tp": time_ms(duet_tp(False, False)), "duet_tp_inplace": time_ms(duet_tp(False, True)),
          "duet_tp_validate": time_ms(duet_tp(True, False)), "megatron_tp": time_ms(megatron_tp)}
    dist.barrier()
    host_ms = {"duet_tp": issue_ms(duet_tp(False, False))}
    ahead = {"duet_tp": device_ms(duet_tp(False, False)), "megatron_tp": device_ms(megatron_tp)}

    # The whole tensor on one GPU (rank 0; the other ranks wait at the barriers).
    single = {}
    whole = full.clone().requires_grad_() if rank == 0 else None

    def on_rank0(fn):
        def step():
            if rank == 0:
                fn()
        return step

    def duet_single():
        duet.cross_entropy(whole, target).backward()
        whole.grad = None

    def duet_single_inplace():
        duet.cross_entropy(whole * 1, target, inplace_backward=True).backward()
        whole.grad = None

    def torch_single():
        F.cross_entropy(whole, target).backward()
        whole.grad = None

    single["duet"] = time_ms(on_rank0(duet_single))
    single["duet_inplace"] = time_ms(on_rank0(duet_single_inplace))
    single["torch"] = time_ms(on_rank0(torch_single))
    ahead["single_duet"] = device_ms(on_rank0(duet_single))
    ahead["single_torch"] = device_ms(on_rank0(torch_single))

    if rank == 0:
        doc = {
            "device": torch.cuda.get_device_name(), "gpus": world,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())), "torch": torch.__version__,
            "duet": duet.__version__, "date": time.strftime("%Y-%m-%d"),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip() or "unknown",
            "shape": [m, cols * world], "dtype": "bfloat16", "shard_cols": cols,
            "loss_abs_err": loss_err, "grad_max_abs_err": grad_err,
            "ms_tp": ms, "ms_single_gpu": single, "host_issue_ms_rank0": host_ms, "host_ahead": ahead,
            "ratio_tp_to_single_duet": ms["duet_tp"] / single["duet"],
            "ratio_tp_validate_to_single_duet": ms["duet_tp_validate"] / single["duet"],
            "speedup_over_megatron_style": ms["megatron_tp"] / ms["duet_tp"],
            "ratio_tp_to_single_duet_host_ahead": ahead["duet_tp"]["ms"] / ahead["single_duet"]["ms"],
            "speedup_over_megatron_style_host_ahead": ahead["megatron_tp"]["ms"] / ahead["duet_tp"]["ms"],
        }
        print(json.dumps(doc, indent=1))
        if args.out:
            os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
            with open(args.out + ".json", "w") as f:
                json.dump(doc, f, indent=1)
            plot(doc, args.out + ".png")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
