"""torch.nn modules over duet's ops.

    layer = duet.nn.Softmax(dim=-1)     # like torch.nn.Softmax(dim=-1)
    out = duet.nn.LogSoftmax(dim=1)(x)  # like torch.nn.LogSoftmax(dim=1)
    attn = duet.nn.MaskedSoftmax(scale=d ** -0.5, causal=True)(scores)
    loss = duet.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.1)(logits, target)
"""
from ._require_torch import torch
from ._fused import cross_entropy, masked_softmax
from ._ops import log_softmax, softmax

__all__ = ["Softmax", "LogSoftmax", "MaskedSoftmax", "CrossEntropyLoss"]


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


class MaskedSoftmax(torch.nn.Module):
    """softmax(scale * input + mask) over the last dimension through duet
    (duet.masked_softmax): forward(input, mask=None)."""

    def __init__(self, scale=1.0, causal=False, causal_offset=0, zero_masked_rows=False):
        super().__init__()
        self.scale = scale
        self.causal = causal
        self.causal_offset = causal_offset
        self.zero_masked_rows = zero_masked_rows

    def forward(self, input, mask=None):
        return masked_softmax(input, mask, scale=self.scale, causal=self.causal, causal_offset=self.causal_offset,
                              zero_masked_rows=self.zero_masked_rows)

    def extra_repr(self):
        return (f"scale={self.scale}, causal={self.causal}, causal_offset={self.causal_offset}, "
                f"zero_masked_rows={self.zero_masked_rows}")


class CrossEntropyLoss(torch.nn.Module):
    """torch.nn.CrossEntropyLoss's supported subset through duet
    (duet.cross_entropy): forward(input, target). weight, size_average and
    reduce must be None (NotImplementedError otherwise, at construction);
    z_loss, inplace_backward and check_targets are duet's (see
    duet.cross_entropy)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0, *, z_loss=0.0, inplace_backward=False, check_targets=False):
        super().__init__()
        for name, value in (("weight", weight), ("size_average", size_average), ("reduce", reduce)):
            if value is not None:
                raise NotImplementedError(f"duet.nn.CrossEntropyLoss: {name}= is not supported (only None); use "
                                          f"torch.nn.CrossEntropyLoss for {name}")
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = label_smoothing
        self.z_loss = z_loss
        self.inplace_backward = inplace_backward
        self.check_targets = check_targets

    def forward(self, input, target):
        return cross_entropy(input, target, ignore_index=self.ignore_index, reduction=self.reduction,
                             label_smoothing=self.label_smoothing, z_loss=self.z_loss,
                             inplace_backward=self.inplace_backward, check_targets=self.check_targets)

    def extra_repr(self):
        extra = "".join(f", {k}={getattr(self, k)}" for k in ("z_loss", "inplace_backward", "check_targets")
                        if getattr(self, k))
        return (f"ignore_index={self.ignore_index}, reduction={self.reduction!r}, "
                f"label_smoothing={self.label_smoothing}{extra}")
