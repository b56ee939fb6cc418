"""Vocabulary-parallel softmax, log_softmax and cross-entropy over
torch.distributed: each rank of a group holds an equal shard of every row's
last dimension (the vocabulary of a tensor-parallel output layer, as
Megatron-LM's vocab_parallel_cross_entropy splits it), and the results
equal the single-device ops on the whole rows.

    import torch.distributed as dist
    import duet.distributed as dd
    dist.init_process_group("nccl")           # "gloo" for CPU tensors
    # logits: this rank's [N, V / world] columns, rank r holding r * V / world onwards
    loss = dd.cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.1)
    loss.backward()
    probs = dd.softmax(scores)                # [..., V / world], this rank's part of softmax(all scores)

    torchrun --nproc-per-node 2 train.py

Each call runs duet's local halves (duet/vocab_parallel.hpp): a pass over
the shard gives every row's (max, sum of exp), and for cross-entropy the
target's logit where the target falls in this shard and the sum of the
logits; one all-gather of these 16 bytes a row brings every rank's to each
rank, where one more launch combines them into the whole rows' statistics
and loss; a second pass writes the shard's softmax or log_softmax. (One
all-gather beats a MAX then a SUM all-reduce: bench/NOTES.md v31.) Cross-entropy's backward needs no communication: it reads the
shard's logits once and writes their gradient (or, with
inplace_backward=True, the forward writes it over the logits). softmax's and
log_softmax's backwards all-reduce one float a row.

Checks on every rank at once (validate=True, the default): before any
data moves, one all-gather of a few integers a rank compares the ranks'
shapes, dtypes, devices, options and targets, so input that is wrong on any
rank (shards of different widths or row counts, targets outside the whole
vocabulary, a tensor on a device other than the rank's, a tensor the
group's backend cannot take) raises ValueError on every rank, naming the
ranks, instead of hanging in a collective. It costs that all-gather and one
read of its result (a synchronization on a GPU); validate=False skips it
and trusts the input (each rank then raises only its own local errors).
A rank that never makes the call leaves the others waiting in the
collective until the group's timeout (init_process_group(timeout=...)):
gloo then raises RuntimeError on the waiting ranks; NCCL's watchdog aborts
the process (torch's TORCH_NCCL_ASYNC_ERROR_HANDLING default).

A group of one runs the single-device op (duet.softmax, duet.log_softmax,
duet.cross_entropy).
"""
import math
import struct

import torch
import torch.distributed as dist
from torch.autograd.function import once_differentiable

from . import _fused
from . import _fused_launch as FL
from . import _ops
from . import _tensor as T
from ._lib import REDUCTIONS

__all__ = ["softmax", "log_softmax", "cross_entropy"]


# ------------------------------------------------------------------ the group and the checks

def _group_info(group, fn):
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(f"duet.distributed.{fn}: torch.distributed is not initialized; call "
                           "torch.distributed.init_process_group first (or use duet.{fn} on one device)")
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    if rank < 0:
        raise RuntimeError(f"duet.distributed.{fn}: this process is not a member of the group")
    return rank, world, str(dist.get_backend(group)).lower()


def _comm_device(backend):
    """Where the group's collectives take their tensors: NCCL the rank's
    current CUDA device, the others (gloo) the CPU."""
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# Problems a rank finds in its own input, exchanged as codes so that every
# rank can name them.
_PROBLEMS = {
    1: "a tensor on a device the group's backend does not take",
    2: "a tensor on another device than the rank's",
    3: "an unsupported dtype or shape",
    4: "targets of the wrong shape or dtype, or on another device",
    5: "targets outside the whole vocabulary",
}


def _local_problem(x, target, backend, comm_device):
    """(code, message) of what is wrong with this rank's own input, or (0, None)."""
    if not isinstance(x, torch.Tensor) or x.dtype not in T.DTYPE_CODES or x.dim() == 0 or x.shape[-1] == 0:
        what = (type(x).__name__ if not isinstance(x, torch.Tensor)
                else f"dtype {x.dtype}, shape {tuple(x.shape)}")
        return 3, f"input ({what}) must be a float32, float16 or bfloat16 tensor with a non-empty last dimension"
    if (backend == "nccl") != x.is_cuda:
        return 1, (f"input is on {x.device}, and the group's backend {backend!r} takes "
                   f"{'CUDA' if backend == 'nccl' else 'CPU'} tensors")
    if x.is_cuda and x.device != comm_device:
        return 2, f"input is on {x.device}, but this rank's device is {comm_device}"
    if target is None:
        return 0, None
    if (not isinstance(target, torch.Tensor) or target.dtype not in _fused.INDEX_DTYPES or target.dim() != 1
            or x.dim() != 2 or target.shape[0] != x.shape[0] or target.device != x.device):
        what = (type(target).__name__ if not isinstance(target, torch.Tensor)
                else f"{target.dtype} {tuple(target.shape)} on {target.device}")
        return 4, (f"target ({what}) must be int64 or int32 of shape [N] on input's device, input [N, C] "
                   f"(got input {tuple(x.shape)})")
    return 0, None


def _float_bits(v):
    return struct.unpack("<i", struct.pack("<f", float(v)))[0]


def _exchange_checks(x, target, rank, world, group, backend, options, fn):
    """One all-gather of every rank's shape, dtype, options and a fingerprint
    of its targets; raises ValueError on every rank if any rank's input is
    wrong or the ranks disagree. Returns the shard width."""
    comm_device = _comm_device(backend)
    cols = x.shape[-1] if isinstance(x, torch.Tensor) and x.dim() > 0 else 0
    code, message = _local_problem(x, target, backend, comm_device)
    rows = x.numel() // cols if code == 0 and cols else 0
    meta = torch.zeros(12, dtype=torch.int64)
    meta[0], meta[1], meta[2] = code, rows, cols
    if code == 0:
        meta[3] = T.DTYPE_CODES[x.dtype]
        meta[4] = 1 if x.is_cuda else 0
        meta[5] = options[0]
        meta[6] = REDUCTIONS.get(options[1], -1) if options[1] is not None else -1
        meta[7] = _float_bits(options[2])
        meta[8] = _float_bits(options[3])
    meta = meta.to(comm_device)
    if code == 0 and target is not None and target.numel() > 0:
        # On the device, no read back before the collective: the count of
        # targets outside [0, vocab) (not ignore_index), and two sums that
        # tell the ranks' targets apart.
        t = target.to(torch.int64)
        bad = (t != options[0]) & ((t < 0) | (t >= cols * world))
        weights = torch.arange(1, t.numel() + 1, device=t.device, dtype=torch.int64) % 1000003
        meta[9] = bad.sum().to(comm_device)
        meta[10] = t.sum().to(comm_device)
        meta[11] = (t * weights).sum().to(comm_device)
    gathered = [torch.empty_like(meta) for _ in range(world)]
    dist.all_gather(gathered, meta, group=group)
    table = torch.stack(gathered).cpu().tolist()
    problems = []
    for r, row in enumerate(table):
        if row[0] != 0:
            problems.append(f"rank {r}: " + (message if r == rank else _PROBLEMS.get(row[0], f"problem {row[0]}")))
    if not problems:
        names = ("rows", "shard width (last dimension)", "dtype", "device type", "ignore_index", "reduction",
                 "label_smoothing", "z_loss")
        for i, name in enumerate(names, start=1):
            values = [row[i] for row in table]
            if len(set(values)) > 1:
                shown = values if i < 3 else ["rank %d differs" % r for r, v in enumerate(values) if v != values[0]]
                problems.append(f"the ranks' {name} differ ({', '.join(map(str, shown))})")
        if target is not None:
            if len({(row[10], row[11]) for row in table}) > 1:
                problems.append("the ranks' targets differ (every rank takes the same targets)")
            bad = [(r, row[9]) for r, row in enumerate(table) if row[9]]
            if bad:
                problems.append(f"{bad[0][1]} target(s) outside [0, {cols * world}) (the whole vocabulary of "
                                f"{world} shards of {cols}) and not ignore_index ({options[0]})")
    if problems:
        raise ValueError(f"duet.distributed.{fn}: " + "; ".join(problems))
    return cols


# ------------------------------------------------------------------ the combine

def _gather_stats(stats, world, group):
    """[world, rows, 4]: every rank's statistics, rank r's at [r]."""
    every = torch.empty((world,) + tuple(stats.shape), dtype=stats.dtype, device=stats.device)
    if hasattr(dist, "all_gather_into_tensor") and stats.is_cuda:
        dist.all_gather_into_tensor(every, stats, group=group)
    else:
        dist.all_gather(list(every.unbind(0)), stats, group=group)
    return every


def _stats(x2, target, ignore_index, vocab_start, vocab, fn):
    stats = torch.empty((x2.shape[0], 4), dtype=torch.float32, device=x2.device)
    return FL.launch_shard_stats(x2, target, ignore_index, vocab_start, vocab, stats, fn)


def _prepare(input, target, group, options, validate, fn):
    rank, world, backend = _group_info(group, fn)
    if world == 1:
        return rank, world, None
    if validate:
        cols = _exchange_checks(input, target, rank, world, group, backend, options, fn)
    else:
        code, message = _local_problem(input, target, backend, _comm_device(backend))
        if code:
            raise ValueError(f"duet.distributed.{fn}: rank {rank}: {message}")
        cols = input.shape[-1]
    return rank, world, cols


# ------------------------------------------------------------------ softmax and log_softmax

class _ShardSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, log, group, world, fn):
        x2 = T._as_2d(input)
        every = _gather_stats(_stats(x2, None, -100, 0, 0, fn), world, group)
        m = torch.empty(x2.shape[0], dtype=torch.float32, device=input.device)
        log_s = torch.empty_like(m)
        FL.launch_shard_combine(every, None, 0, -100, "none", 0.0, 0.0, m, log_s, None, None, fn)
        y = torch.empty(input.shape, dtype=input.dtype, device=input.device)
        FL.launch_shard_softmax(x2, m, log_s, log, T._view_2d(y), fn)
        ctx.save_for_backward(y)
        ctx.log, ctx.group = log, group
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        # softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - exp(y) sum(dy);
        # the sums over the whole row: one SUM all-reduce of a float a row.
        (y,) = ctx.saved_tensors
        yf, dy = y.float(), grad_output.float()
        total = (dy if ctx.log else dy * yf).sum(-1, keepdim=True)
        dist.all_reduce(total, group=ctx.group)
        dx = dy - torch.exp(yf) * total if ctx.log else yf * (dy - total)
        return dx.to(y.dtype), None, None, None, None


def _softmax(input, group, validate, log):
    fn = "log_softmax" if log else "softmax"
    rank, world, _ = _prepare(input, None, group, (-100, None, 0.0, 0.0), validate, fn)
    if world == 1:
        return _ops.log_softmax(input, -1) if log else _ops.softmax(input, -1)
    if input.numel() == 0:
        return torch.empty_like(input)
    return _ShardSoftmax.apply(input, log, group, world, fn)


def softmax(input, group=None, *, validate=True):
    """This rank's part of softmax over the last dimension, that dimension
    split across the group's ranks in equal shards, rank r holding columns
    [r * C, (r + 1) * C) of C * world. input: float32, float16 or bfloat16,
    any leading shape; the result has input's shape and dtype and is
    differentiable (the backward all-reduces a float a row)."""
    return _softmax(input, group, validate, False)


def log_softmax(input, group=None, *, validate=True):
    """This rank's part of log_softmax over the sharded last dimension (see softmax)."""
    return _softmax(input, group, validate, True)


# ------------------------------------------------------------------ cross-entropy

class _ShardCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, target, group, rank, world, ignore_index, reduction, label_smoothing, z_loss, inplace,
                fn):
        cols = input.shape[1]
        vocab, start = cols * world, rank * cols
        x2 = T._as_2d(input)
        every = _gather_stats(_stats(x2, target, ignore_index, start, vocab, fn), world, group)
        lse = torch.empty(x2.shape[0], dtype=torch.float32, device=input.device)
        loss = torch.empty(x2.shape[0] if reduction == "none" else (), dtype=torch.float32, device=input.device)
        FL.launch_shard_combine(every, target, vocab, ignore_index, reduction, label_smoothing, z_loss, None, None, lse,
                                loss, fn)
        ctx.options = (start, vocab, ignore_index, reduction, label_smoothing, z_loss)
        ctx.inplace = inplace
        if inplace:
            # The gradient for an upstream 1 over the logits now; the
            # backward scales it.
            one = torch.ones(input.shape[0] if reduction == "none" else (), dtype=torch.float32,
                             device=input.device)
            FL.launch_shard_cross_entropy_backward(x2, target, lse, one, x2, start, vocab, ignore_index,
                                                   reduction, label_smoothing, z_loss, fn)
            # Autograd's record that input changed (torch >= 2.1), so a layer
            # that saved the logits for its backward is refused, not misled.
            if hasattr(torch.autograd.graph, "increment_version"):
                torch.autograd.graph.increment_version(input)
            ctx.save_for_backward(input)
        else:
            ctx.save_for_backward(input, target, lse)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss):
        if ctx.inplace:
            (grad,) = ctx.saved_tensors
            scale = grad_loss.unsqueeze(1) if ctx.options[3] == "none" else grad_loss
            grad.mul_(scale.to(grad.dtype) if grad.dtype != torch.float32 else scale)
        else:
            input, target, lse = ctx.saved_tensors
            start, vocab, ignore_index, reduction, label_smoothing, z_loss = ctx.options
            grad = torch.empty_like(input)
            FL.launch_shard_cross_entropy_backward(input, target, lse, grad_loss, grad, start, vocab, ignore_index,
                                                   reduction, label_smoothing, z_loss, "cross_entropy")
        return grad, None, None, None, None, None, None, None, None, None, None


def cross_entropy(input, target, group=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, *,
                  z_loss=0.0, inplace_backward=False, validate=True):
    """Cross-entropy of logits whose vocabulary is split across the group's
    ranks: input is this rank's [N, C] shard (rank r holding classes
    [r * C, (r + 1) * C) of C * world), target the [N] class indices of the
    whole vocabulary (int64 or int32, the same on every rank). The loss, the
    same on every rank, is duet.cross_entropy's of the whole logits (float32
    arithmetic, the loss in input's dtype); differentiable with respect to
    input, and the backward needs no communication.

    ignore_index, reduction ('none', 'mean', 'sum'), label_smoothing: as
    torch.nn.functional.cross_entropy; z_loss, inplace_backward: as
    duet.cross_entropy (inplace_backward overwrites the shard's logits with
    their gradient during the forward).
    """
    fn = "cross_entropy"
    if reduction not in REDUCTIONS:
        raise ValueError(f"duet.distributed.{fn}: {reduction!r} is not a valid value for reduction "
                         f"(one of {', '.join(map(repr, REDUCTIONS))})")
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"duet.distributed.{fn}: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if not (math.isfinite(z_loss) and z_loss >= 0.0):
        raise ValueError(f"duet.distributed.{fn}: z_loss must be finite and >= 0, got {z_loss}")
    options = (int(ignore_index), reduction, float(label_smoothing), float(z_loss))
    rank, world, _ = _prepare(input, target, group, options, validate, fn)
    if world == 1:
        return _fused.cross_entropy(input, target, ignore_index=options[0], reduction=reduction,
                                    label_smoothing=options[2], z_loss=options[3], inplace_backward=inplace_backward)
    if input.shape[0] == 0:
        return torch.full((0,) if reduction == "none" else (), 0.0 if reduction != "mean" else math.nan,
                          dtype=input.dtype, device=input.device)
    # In place only where the logits' own memory is a [N, C] matrix.
    inplace = (inplace_backward and torch.is_grad_enabled() and input.requires_grad
               and T._view_2d(input) is not None)
    if inplace and input.is_leaf:
        raise ValueError(f"duet.distributed.{fn}: inplace_backward=True overwrites the logits with their gradient, "
                         "and input is a leaf tensor that requires grad; pass the output of the layer that makes "
                         "the logits, or inplace_backward=False")
    loss = _ShardCrossEntropy.apply(input, target, group, rank, world, *options, inplace, fn)
    return loss.to(input.dtype) if loss.dtype != input.dtype else loss
