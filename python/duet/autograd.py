"""duet's softmax family as differentiable torch operations.

    import duet
    y = duet.autograd.softmax(x, dim=1)         # like torch.softmax(x, dim=1)
    loss = duet.autograd.log_softmax(x).sum()   # backward runs duet's kernels

Forward runs duet.softmax / duet.log_softmax, backward runs
duet.softmax_backward / duet.log_softmax_backward on the saved output. duet
reduces over the last dimension; another `dim` is moved last (a contiguous
copy) and the result moved back (a transposed view). CUDA tensors run on
their GPU on torch's current stream, CPU tensors on duet's host backend.
Not twice differentiable.
"""
import torch
from torch.autograd.function import once_differentiable

from . import _abi

__all__ = ["Softmax", "LogSoftmax", "softmax", "log_softmax"]


class Softmax(torch.autograd.Function):
    """softmax over the last dimension: Softmax.apply(x)."""

    @staticmethod
    def forward(ctx, x):
        y = _abi.softmax(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return _abi.softmax_backward(y, dy)


class LogSoftmax(torch.autograd.Function):
    """log_softmax over the last dimension: LogSoftmax.apply(x)."""

    @staticmethod
    def forward(ctx, x):
        y = _abi.log_softmax(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return _abi.log_softmax_backward(y, dy)


def _apply(fn, name, x, dim, dtype):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"duet.autograd.{name}: x must be a torch.Tensor, got {type(x).__name__}")
    if dtype is not None:
        x = x.to(dtype)
    if x.dim() == 0:
        if dim not in (0, -1):
            raise IndexError(f"duet.autograd.{name}: dim {dim} out of range for a 0-d tensor")
        return fn.apply(x.reshape(1)).reshape(())
    n = x.dim()
    if not -n <= dim < n:
        raise IndexError(f"duet.autograd.{name}: dim {dim} out of range for a {n}-d tensor ([{-n}, {n - 1}])")
    dim %= n
    if dim == n - 1:
        return fn.apply(x)
    return fn.apply(x.transpose(dim, -1).contiguous()).transpose(dim, -1)


def softmax(x, dim=-1, dtype=None):
    """torch.softmax(x, dim) through duet, differentiable."""
    return _apply(Softmax, "softmax", x, dim, dtype)


def log_softmax(x, dim=-1, dtype=None):
    """torch.log_softmax(x, dim) through duet, differentiable."""
    return _apply(LogSoftmax, "log_softmax", x, dim, dtype)
