"""Objects with ``__cuda_array_interface__`` (CuPy, Numba, ...): the
interface checked field by field, and the forward call on a raw array when
torch is absent (C-contiguous float32/float16, ``out=`` required).
"""
import ctypes
import math

from . import _lib

# typestr -> duet_dtype_t. bfloat16 has no typestr.
TYPESTRS = {"<f4": _lib.F32, "<f2": _lib.F16}


def interface(obj, fn, what):
    """obj's __cuda_array_interface__, each field this binding reads checked:
    a malformed one raises naming the field."""
    cai = obj.__cuda_array_interface__
    where = f"duet.{fn}: {what}.__cuda_array_interface__"
    if not isinstance(cai, dict):
        raise TypeError(f"{where} must be a dict, got {type(cai).__name__}")
    for field in ("shape", "typestr", "data"):
        if field not in cai:
            raise ValueError(f"{where} has no {field!r} field")
    shape = cai["shape"]
    if not isinstance(shape, (tuple, list)) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError(f"{where}['shape'] must be a tuple of non-negative ints, got {shape!r}")
    if not isinstance(cai["typestr"], str):
        raise ValueError(f"{where}['typestr'] must be a str, got {cai['typestr']!r}")
    data = cai["data"]
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[0], int)):
        raise ValueError(f"{where}['data'] must be (pointer, read_only), got {data!r}")
    strides = cai.get("strides")
    if strides is not None and (not isinstance(strides, (tuple, list)) or len(strides) != len(shape)
                                or not all(isinstance(s, int) for s in strides)):
        raise ValueError(f"{where}['strides'] must be None or {len(shape)} ints, got {strides!r}")
    return cai


def check_typestr(cai, fn, what, torch_available):
    if cai["typestr"] not in TYPESTRS:
        raise TypeError(f"duet.{fn}: {what} has unsupported typestr {cai['typestr']!r} (float32 '<f4' or float16 "
                        f"'<f2'{'' if torch_available else '; bfloat16 needs torch'})")


def _matrix(obj, fn, what, writable=False):
    """(pointer, shape, dtype code, rows, cols, stream) of a C-contiguous
    float32/float16 array."""
    cai = interface(obj, fn, what)
    check_typestr(cai, fn, what, torch_available=False)
    shape, typestr = tuple(cai["shape"]), cai["typestr"]
    if not shape:
        raise ValueError(f"duet.{fn}: {what} must have at least one dimension")
    if cai.get("mask") is not None:
        raise ValueError(f"duet.{fn}: {what} has a mask, which duet does not support")
    ptr, readonly = cai["data"]
    if writable and readonly:
        raise ValueError(f"duet.{fn}: {what} is read-only")
    strides = cai.get("strides")
    if strides is not None:
        want = int(typestr[2:])
        for n, s in zip(reversed(shape), reversed(tuple(strides))):
            if n != 1 and s != want:
                raise ValueError(f"duet.{fn}: {what} must be C-contiguous without torch (strides {tuple(strides)} "
                                 f"for shape {shape}); copy it first, e.g. cupy.ascontiguousarray")
            want *= n
    cols = shape[-1]
    return ptr, shape, TYPESTRS[typestr], math.prod(shape[:-1]), cols, cai.get("stream")


def forward(log, fn, x, dim, dtype, out):
    """softmax / log_softmax of a raw array into `out`, without torch."""
    if dtype is not None:
        raise TypeError(f"duet.{fn}: dtype= needs torch")
    if out is None:
        raise TypeError(f"duet.{fn}: without torch, pass out= (an array of input's shape and dtype) for "
                        f"{type(x).__name__} input")
    if not hasattr(out, "__cuda_array_interface__"):
        raise TypeError(f"duet.{fn}: out must have __cuda_array_interface__, got {type(out).__name__}")
    xp, xshape, code, rows, cols, stream = _matrix(x, fn, "input")
    yp, yshape, ycode, _, _, _ = _matrix(out, fn, "out", writable=True)
    if not -len(xshape) <= dim < len(xshape):
        raise IndexError(f"duet.{fn}: dim {dim} out of range for a {len(xshape)}-d input")
    if dim % len(xshape) != len(xshape) - 1:
        raise ValueError(f"duet.{fn}: without torch only the last dimension is reduced, got dim={dim}")
    if yshape != xshape:
        raise ValueError(f"duet.{fn}: out has shape {yshape}, want {xshape}")
    if ycode != code:
        raise TypeError(f"duet.{fn}: out has typestr {out.__cuda_array_interface__['typestr']!r}, want "
                        f"{x.__cuda_array_interface__['typestr']!r}")
    if rows == 0 or cols == 0:
        return out
    dev = _lib.device_of_pointer(xp)
    if dev.backend == _lib.BACKEND_HOST:
        raise ValueError(f"duet.{fn}: input is not device memory of any GPU of the loaded libduet "
                         f"(its devices: {', '.join(_lib.devices())})")
    lib = _lib.library()
    call = lib.duet_log_softmax if log else lib.duet_softmax
    # CAI v3 "stream": None (no synchronisation needed), 1 (legacy default
    # stream) or 2 (per-thread default stream) are valid cudaStream_t values too.
    _lib.check(call(dev, code, rows, cols, ctypes.c_void_p(xp), cols, ctypes.c_void_p(yp), cols,
                    ctypes.c_void_p(stream) if stream else None))
    return out


# ------------------------------------------------------------------ the public functions without torch

def _no_torch_forward(log, input, dim, dtype, out):
    fn = "log_softmax" if log else "softmax"
    if not hasattr(input, "__cuda_array_interface__"):
        raise TypeError(f"duet.{fn}: input must have __cuda_array_interface__ without torch, got "
                        f"{type(input).__name__}")
    return forward(log, fn, input, dim, dtype, out)


def softmax(input, dim=-1, dtype=None, *, out=None):
    """softmax over the last dimension of a C-contiguous CUDA array into out= (torch is not installed)."""
    return _no_torch_forward(False, input, dim, dtype, out)


def log_softmax(input, dim=-1, dtype=None, *, out=None):
    """log_softmax over the last dimension of a C-contiguous CUDA array into out= (torch is not installed)."""
    return _no_torch_forward(True, input, dim, dtype, out)


def _needs_torch(name):
    def missing(*args, **kwargs):
        raise ImportError(f"duet.{name} needs torch, which is not importable")
    missing.__name__ = name
    return missing


softmax_backward = _needs_torch("softmax_backward")
log_softmax_backward = _needs_torch("log_softmax_backward")
