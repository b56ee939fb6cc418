"""duet from Python: softmax and log_softmax on PyTorch tensors through
libduet's kernels, registered with torch as torch.ops.duet.* (so
torch.compile, torch.export, CUDA graphs and autograd see them).

    import torch, duet
    y = duet.softmax(x, dim=-1)              # torch.softmax's signature; differentiable
    duet.log_softmax(x, dtype=torch.float32, out=y)
    layer = duet.nn.LogSoftmax(dim=-1)
    p = duet.masked_softmax(scores, mask, scale=d ** -0.5)   # or causal=True
    loss = duet.cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.1)

CUDA (and ROCm) tensors run on their GPU on torch's current stream; CPU
tensors on duet's host backend. Without torch, softmax/log_softmax take
C-contiguous arrays with __cuda_array_interface__ and out=.
libduet is the one `pip install` bundles beside this file, or $DUET_LIBRARY.
"""
from ._lib import DuetError, devices, library, library_path, version

try:
    import torch as _torch
except ImportError:
    _torch = None

if _torch is not None:
    from ._ops import copy_kernel, log_softmax, log_softmax_backward, softmax, softmax_backward
    from ._fused import cross_entropy, masked_softmax, masked_softmax_backward
else:
    from ._cai import log_softmax, log_softmax_backward, softmax, softmax_backward

__all__ = ["DuetError", "library", "library_path", "version", "devices", "softmax", "log_softmax",
           "softmax_backward", "log_softmax_backward", "masked_softmax", "masked_softmax_backward", "cross_entropy",
           "copy_kernel", "nn", "autograd", "__version__"]


def __getattr__(name):
    # __version__ is libduet's own (CMake's project version, the one source
    # of the package version too); nn and autograd need torch and load on
    # first use, so that `import duet` works without torch.
    if name == "__version__":
        return version()
    if name in ("nn", "autograd"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
