"""duet from Python: the softmax family on PyTorch tensors (or anything with
__cuda_array_interface__) through duet's C ABI (libduet, loaded with ctypes
from $DUET_LIBRARY, else libduet.so on the loader path).

    import duet
    y = duet.softmax(x)            # x: CUDA tensor (or CPU tensor: host backend), last dimension reduced
    duet.log_softmax(x, out=y)
    y = duet.autograd.softmax(x, dim=0)   # differentiable, any dim (needs torch)
"""
from ._abi import (DuetError, devices, library, log_softmax, log_softmax_backward, softmax, softmax_backward,
                   version)

__all__ = ["DuetError", "library", "version", "devices", "softmax", "log_softmax", "softmax_backward",
           "log_softmax_backward", "autograd"]


def __getattr__(name):
    # duet.autograd imports torch: loaded on first use, so that `import duet`
    # works without torch (raw __cuda_array_interface__ arrays, version()).
    if name == "autograd":
        import importlib
        return importlib.import_module(".autograd", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
