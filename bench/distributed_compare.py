#!/usr/bin/env python3
"""Vocabulary-parallel cross-entropy over NCCL (issue 20's comparison), in
one run of `world` processes, one GPU each:

  duet_tp        duet.distributed.cross_entropy forward + backward on each
                 rank's [M, V / world] shard (validate=False and True; both
                 combines: one all-gather of the statistics, or a MAX then a
                 SUM all-reduce)
  megatron_tp    a pure-torch vocabulary-parallel cross-entropy written the
                 way Megatron-LM's tensor_parallel/cross_entropy.py computes
                 it (float32 logits, max all-reduce, target logit
                 all-reduce, sum-of-exp all-reduce; softmax saved for the
                 backward), on the same shards
  single         rank 0 alone on the whole [M, V] tensor: duet.cross_entropy
                 (default mode: lse saved, a backward pass; and the in-place
                 mode) and F.cross_entropy

Device time with CUDA events, the median of repeats after warm-up, every
rank in step (a barrier before each timed batch); the ratio the issue asks
for is duet_tp / single (the default mode, the same passes).

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


def time_ms(fn, warmup=3, repeats=15, batch=3):
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--out", default=None, help="path prefix of the JSON (rank 0 writes it)")
    args = ap.parse_args()

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
    loss_err = abs(float(loss) - float(want))
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

    ms = {}
    for combine in ("gather", "allreduce"):
        dd.COMBINE = combine
        ms[f"duet_tp_{combine}"] = time_ms(duet_tp(False, False))
        ms[f"duet_tp_{combine}_validate"] = time_ms(duet_tp(True, False))
    dd.COMBINE = "gather"
    ms["megatron_tp"] = time_ms(megatron_tp)

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

    if rank == 0:
        best = min(ms[f"duet_tp_{c}"] for c in ("gather", "allreduce"))
        doc = {
            "device": torch.cuda.get_device_name(), "gpus": world,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())), "torch": torch.__version__,
            "duet": duet.__version__, "date": time.strftime("%Y-%m-%d"),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip() or "unknown",
            "shape": [m, cols * world], "dtype": "bfloat16", "shard_cols": cols,
            "loss_abs_err": loss_err, "grad_max_abs_err": grad_err,
            "ms_tp": ms, "ms_single_gpu": single,
            "ratio_tp_to_single_duet": best / single["duet"],
            "speedup_over_megatron_style": ms["megatron_tp"] / best,
        }
        print(json.dumps(doc, indent=1))
        if args.out:
            os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
            with open(args.out + ".json", "w") as f:
                json.dump(doc, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
