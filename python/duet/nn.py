"""torch.nn modules over duet's ops.

    layer = duet.nn.Softmax(dim=-1)     # like torch.nn.Softmax(dim=-1)
    out = duet.nn.LogSoftmax(dim=1)(x)  # like torch.nn.LogSoftmax(dim=1)
"""
from ._require_torch import torch
from ._ops import log_softmax, softmax

__all__ = ["Softmax", "LogSoftmax"]


class _OverDim(torch.nn.Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_OverDim):
    """softmax over `dim` (default: the last dimension) through duet; differentiable."""

    def forward(self, input):
        return softmax(input, self.dim)


class LogSoftmax(_OverDim):
    """log_softmax over `dim` (default: the last dimension) through duet; differentiable."""

    def forward(self, input):
        return log_softmax(input, self.dim)
