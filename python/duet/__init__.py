"""duet from Python: the softmax family on PyTorch tensors (or anything with
__cuda_array_interface__) through duet's C ABI (libduet, loaded with ctypes).

    import duet
    y = duet.softmax(x)            # x: CUDA tensor, last dimension reduced
    duet.log_softmax(x, out=y)
"""
from ._abi import DuetError, library, softmax, log_softmax, softmax_backward, log_softmax_backward

__all__ = ["DuetError", "library", "softmax", "log_softmax", "softmax_backward", "log_softmax_backward"]
