"""ctypes binding of duet/duet.h.

Accepted arrays:
  * torch tensors on a CUDA (or ROCm) device, run by the GPU backend of that
    device on torch's current stream;
  * torch tensors on the CPU, run by duet's host backend (synchronously);
  * any object with ``__cuda_array_interface__`` (CuPy, Numba, ...): viewed
    as a torch tensor without a copy when torch is importable, else used raw
    (forward functions only: C-contiguous float32/float16, ``out=`` required).

The reduction is over the last dimension; an input whose last dimension is not
unit-stride is copied with ``.contiguous()`` first.
"""
import ctypes
import math
import os
import sys

# duet_dtype_t and duet_backend_t of duet/duet.h
F32, F16, BF16 = 0, 1, 2
BACKEND_HOST, BACKEND_CUDA, BACKEND_HIP = 0, 1, 2
_BACKEND_NAMES = {BACKEND_HOST: "host", BACKEND_CUDA: "cuda", BACKEND_HIP: "hip"}

_DTYPES = {}  # torch dtype -> duet_dtype_t, filled on first use
# __cuda_array_interface__ typestr -> duet_dtype_t. bfloat16 has no typestr.
_TYPESTRS = {"<f4": F32, "<f2": F16}


class DuetError(RuntimeError):
    """A duet call failed; .status holds the C status code."""

    def __init__(self, status, message):
        super().__init__(f"duet: {message} (status {status})")
        self.status = status


class _Device(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("ordinal", ctypes.c_int)]

    def __repr__(self):
        return f"{_BACKEND_NAMES.get(self.backend, self.backend)}:{self.ordinal}"


_lib = None


def library():
    """libduet, from $DUET_LIBRARY or the default loader path."""
    global _lib
    if _lib is None:
        path = os.environ.get("DUET_LIBRARY", "libduet.so")
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise OSError(f"duet: cannot load {path!r} ({e}); set DUET_LIBRARY to the path of libduet.so") from e
        i32, i64, vp = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
        lib.duet_version.argtypes = []
        lib.duet_version.restype = ctypes.c_char_p
        lib.duet_status_string.argtypes = [i32]
        lib.duet_status_string.restype = ctypes.c_char_p
        lib.duet_last_error.argtypes = []
        lib.duet_last_error.restype = ctypes.c_char_p
        fwd = [_Device, i32, i64, i64, vp, i64, vp, i64, vp]
        bwd = [_Device, i32, i64, i64, vp, i64, vp, i64, vp, i64, vp]
        for name, args in (("duet_softmax", fwd), ("duet_log_softmax", fwd),
                           ("duet_softmax_backward", bwd), ("duet_log_softmax_backward", bwd)):
            getattr(lib, name).argtypes = args
            getattr(lib, name).restype = i32
        lib.duet_device_count.argtypes = [ctypes.POINTER(i32)]
        lib.duet_device_count.restype = i32
        lib.duet_get_device.argtypes = [i32, ctypes.POINTER(_Device)]
        lib.duet_get_device.restype = i32
        lib.duet_device_of_pointer.argtypes = [vp, ctypes.POINTER(_Device)]
        lib.duet_device_of_pointer.restype = i32
        lib.duet_synchronize.argtypes = [_Device, vp]
        lib.duet_synchronize.restype = i32
        _lib = lib
    return _lib


def _check(status):
    if status != 0:
        raise DuetError(status, library().duet_last_error().decode())


def version():
    """The version string of the loaded libduet."""
    return library().duet_version().decode()


def devices():
    """Every device of the loaded libduet, as "cuda:0", ..., "host:0" (GPUs first)."""
    lib = library()
    n = ctypes.c_int()
    _check(lib.duet_device_count(ctypes.byref(n)))
    out = []
    for i in range(n.value):
        d = _Device()
        _check(lib.duet_get_device(i, ctypes.byref(d)))
        out.append(repr(d))
    return out


# ------------------------------------------------------------------ torch tensors

def _torch_module():
    """torch if it is importable, else None."""
    if "torch" in sys.modules:
        return sys.modules["torch"]
    try:
        import torch
    except ImportError:
        return None
    return torch


def _is_tensor(t):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(t, torch.Tensor)


def _dtype_code(t, fn):
    import torch
    if not _DTYPES:
        _DTYPES.update({torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16})
    if t.dtype not in _DTYPES:
        raise TypeError(f"duet.{fn}: unsupported dtype {t.dtype} (float32, float16 or bfloat16)")
    return _DTYPES[t.dtype]


def _check_tensor(t, what, fn):
    if t.dim() == 0:
        raise ValueError(f"duet.{fn}: {what} must have at least one dimension")
    if t.device.type not in ("cuda", "cpu"):
        raise ValueError(f"duet.{fn}: {what} is on {t.device}; duet runs on CUDA/ROCm devices and the CPU")


def _view_2d(t):
    """A (rows, cols) view of t's own memory, rows at one stride >= cols and
    unit-stride columns, or None when t's layout has none."""
    cols = t.shape[-1]
    if t.stride(-1) != 1 and cols != 1:
        return None
    try:
        m = t.view(-1, cols)
    except RuntimeError:
        return None
    if m.shape[0] > 1 and m.stride(0) < cols:
        return None  # rows overlap (an expanded or broadcast tensor)
    return m


def _as_2d(t):
    """t as (rows, cols) with unit-stride columns, copying only when needed."""
    m = _view_2d(t)
    return m if m is not None else _view_2d(t.contiguous())


def _row_stride(m):
    return m.stride(0) if m.shape[0] > 1 else m.shape[1]


# torch device -> duet device, filled by the first call on each torch device
# (libduet checks every pointer again on every call: the wrong device, or
# host memory, is still refused there); the same for CUDA tensors by index.
_DEVICE_OF = {}
_CUDA_DEVICE_OF = {}


def _duet_device(t, fn):
    """The duet device of a tensor's memory; refuses GPU memory that this
    libduet has no backend for (the host backend would read it as host memory)."""
    cached = _DEVICE_OF.get(t.device)
    if cached is not None:
        return cached
    dev = _Device()
    _check(library().duet_device_of_pointer(ctypes.c_void_p(t.data_ptr()), ctypes.byref(dev)))
    if t.device.type == "cpu":
        if dev.backend != BACKEND_HOST:
            raise ValueError(f"duet.{fn}: a CPU tensor whose memory duet sees on {dev!r}")
    elif dev.backend == BACKEND_HOST:
        raise ValueError(f"duet.{fn}: a tensor on {t.device}, but the loaded libduet ({version()}) has no GPU "
                         f"backend for that memory (its devices: {', '.join(devices())})")
    _DEVICE_OF[t.device] = dev
    if t.device.type == "cuda":
        _CUDA_DEVICE_OF[t.get_device()] = dev
    return dev


def _stream(t):
    if t.device.type != "cuda":
        return None
    import torch
    index = t.device.index if t.device.index is not None else torch.cuda.current_device()
    return ctypes.c_void_p(_raw_stream(index))


_raw_stream_fn = None


def _raw_stream(index):
    """torch's current stream on CUDA device `index`, as an integer handle:
    the raw handle without building a torch.cuda.Stream object (Triton's
    launcher reads it the same way), the public call where that is absent."""
    global _raw_stream_fn
    if _raw_stream_fn is None:
        import torch
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _raw_stream_fn = raw if raw is not None else (lambda i: torch.cuda.current_stream(i).cuda_stream)
    return _raw_stream_fn(index)


# The common call: contiguous CUDA tensors of one shape, dtype and device
# that duet has seen before, and a new output or a contiguous one. It skips
# the general path's views and checks, which cost as much as the launch
# (H200 host: 20 us a call through the general path; bench/NOTES.md, v24).
# Anything else returns None and takes the general path, which also raises
# the errors; libduet checks the pointers and overlaps on every call.
def _fast_matrix(t, index, like):
    return (_is_tensor(t) and t.is_cuda and t.is_contiguous() and t.get_device() == index and t.dtype == like.dtype
            and t.shape == like.shape)


def _fast_call(fn, first, others, out):
    """fn(dev, dtype, rows, cols, first, *others, result, stream), each
    matrix as (pointer, row stride), or None where the call is not the
    common one. `first` is x (forward) or y (backward); `others` holds dy."""
    code = _DTYPES.get(first.dtype)
    if code is None or not first.is_cuda or first.dim() == 0 or not first.is_contiguous():
        return None
    index = first.get_device()
    dev = _CUDA_DEVICE_OF.get(index)
    numel = first.numel()
    if dev is None or numel == 0 or not all(_fast_matrix(t, index, first) for t in others):
        return None
    if out is None:
        import torch
        result = torch.empty_like(first, memory_format=torch.contiguous_format)
    elif _fast_matrix(out, index, first):
        result = out
    else:
        return None
    cols = first.shape[-1]
    matrices = [arg for t in (first, *others, result) for arg in (t.data_ptr(), cols)]
    _check(fn(dev, code, numel // cols, cols, *matrices, _raw_stream(index)))
    return result


def _same_layout(a, b, what, fn):
    if a.shape != b.shape:
        raise ValueError(f"duet.{fn}: {what} has shape {tuple(b.shape)}, want {tuple(a.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"duet.{fn}: {what} has dtype {b.dtype}, want {a.dtype}")
    if a.device != b.device:
        raise ValueError(f"duet.{fn}: {what} is on {b.device}, want {a.device}")


def _from_cai(obj, fn, what):
    """A torch view (no copy) of an object with __cuda_array_interface__."""
    import torch
    typestr = obj.__cuda_array_interface__["typestr"]
    if typestr not in _TYPESTRS:
        raise TypeError(f"duet.{fn}: {what} has unsupported typestr {typestr!r} (float32 '<f4' or float16 '<f2')")
    return torch.as_tensor(obj)


def _coerce(t, fn, what):
    """t as a torch tensor: a tensor as it is, a __cuda_array_interface__
    object as a view; anything else is a TypeError."""
    if _is_tensor(t):
        return t
    if hasattr(t, "__cuda_array_interface__"):
        if _torch_module() is None:
            raise TypeError(f"duet.{fn}: {what} is a {type(t).__name__}; without torch only softmax and "
                            "log_softmax take __cuda_array_interface__ arrays (with out=)")
        return _from_cai(t, fn, what)
    raise TypeError(f"duet.{fn}: {what} must be a torch.Tensor or have __cuda_array_interface__, "
                    f"got {type(t).__name__}")


def _into(out, result_2d, launch):
    """Runs launch(dst_2d) into `out`'s memory: directly where out has a
    (rows, cols) view, else through a temporary copied into out."""
    dst = _view_2d(out)
    if dst is not None:
        launch(dst)
    else:
        tmp = result_2d()
        launch(tmp)
        out.copy_(tmp.view(out.shape))
    return out


def _forward_tensor(fn, name, x, out):
    import torch
    code = _dtype_code(x, name)
    _check_tensor(x, "x", name)
    if out is not None:
        out = _coerce(out, name, "out")
        _same_layout(x, out, "out", name)
    if x.numel() == 0:
        return torch.empty_like(x) if out is None else out
    x2 = _as_2d(x)
    rows, cols = x2.shape
    dev, stream = _duet_device(x2, name), _stream(x2)

    def launch(y2):
        _check(fn(dev, code, rows, cols, ctypes.c_void_p(x2.data_ptr()), _row_stride(x2),
                  ctypes.c_void_p(y2.data_ptr()), _row_stride(y2), stream))

    def fresh():
        return torch.empty((rows, cols), dtype=x.dtype, device=x.device)

    if out is None:
        y2 = fresh()
        launch(y2)
        return y2.view(x.shape)
    return _into(out, fresh, launch)


def _backward_tensor(fn, name, y, dy, out):
    import torch
    dy = _coerce(dy, name, "dy")
    code = _dtype_code(y, name)
    _check_tensor(y, "y", name)
    _same_layout(y, dy, "dy", name)
    if out is not None:
        out = _coerce(out, name, "out")
        _same_layout(y, out, "out", name)
    if y.numel() == 0:
        return torch.empty_like(y) if out is None else out
    y2, g2 = _as_2d(y), _as_2d(dy)
    rows, cols = y2.shape
    dev, stream = _duet_device(y2, name), _stream(y2)

    def launch(dx2):
        _check(fn(dev, code, rows, cols, ctypes.c_void_p(y2.data_ptr()), _row_stride(y2),
                  ctypes.c_void_p(g2.data_ptr()), _row_stride(g2),
                  ctypes.c_void_p(dx2.data_ptr()), _row_stride(dx2), stream))

    def fresh():
        return torch.empty((rows, cols), dtype=y.dtype, device=y.device)

    if out is None:
        dx2 = fresh()
        launch(dx2)
        return dx2.view(y.shape)
    return _into(out, fresh, launch)


# ------------------------------------------------------------------ raw __cuda_array_interface__

def _cai_matrix(obj, fn, what, writable=False):
    """(pointer, shape, dtype code, rows, cols, stream) of a C-contiguous
    float32/float16 array described by __cuda_array_interface__."""
    cai = obj.__cuda_array_interface__
    shape = tuple(int(s) for s in cai["shape"])
    typestr = cai["typestr"]
    if typestr not in _TYPESTRS:
        raise TypeError(f"duet.{fn}: {what} has unsupported typestr {typestr!r} (float32 '<f4' or float16 '<f2'; "
                        "bfloat16 needs torch)")
    if not shape:
        raise ValueError(f"duet.{fn}: {what} must have at least one dimension")
    if cai.get("mask") is not None:
        raise ValueError(f"duet.{fn}: {what} has a mask, which duet does not support")
    ptr, readonly = cai["data"]
    if writable and readonly:
        raise ValueError(f"duet.{fn}: {what} is read-only")
    itemsize = int(typestr[2:])
    strides = cai.get("strides")
    if strides is not None:
        want = itemsize
        for n, s in zip(reversed(shape), reversed(tuple(strides))):
            if n != 1 and s != want:
                raise ValueError(f"duet.{fn}: {what} must be C-contiguous without torch (strides {tuple(strides)} "
                                 f"for shape {shape}); copy it first, e.g. cupy.ascontiguousarray")
            want *= n
    cols = shape[-1]
    rows = math.prod(shape[:-1])
    return ptr, shape, _TYPESTRS[typestr], rows, cols, cai.get("stream")


def _forward_cai(fn, name, x, out):
    if out is None:
        raise TypeError(f"duet.{name}: without torch, pass out= (an array of x's shape and dtype) for "
                        f"{type(x).__name__} input")
    if not hasattr(out, "__cuda_array_interface__"):
        raise TypeError(f"duet.{name}: out must have __cuda_array_interface__, got {type(out).__name__}")
    xp, xshape, code, rows, cols, stream = _cai_matrix(x, name, "x")
    yp, yshape, ycode, _, _, _ = _cai_matrix(out, name, "out", writable=True)
    if yshape != xshape or ycode != code:
        raise ValueError(f"duet.{name}: out must match x in shape and dtype")
    if rows == 0 or cols == 0:
        return out
    dev = _Device()
    _check(library().duet_device_of_pointer(ctypes.c_void_p(xp), ctypes.byref(dev)))
    if dev.backend == BACKEND_HOST:
        raise ValueError(f"duet.{name}: x is not device memory of any GPU of the loaded libduet "
                         f"(its devices: {', '.join(devices())})")
    # CAI v3 "stream": None (no synchronisation needed), 1 (legacy default
    # stream) or 2 (per-thread default stream) are valid cudaStream_t values too.
    _check(fn(dev, code, rows, cols, ctypes.c_void_p(xp), cols, ctypes.c_void_p(yp), cols,
              ctypes.c_void_p(stream) if stream else None))
    return out


def _forward(fn, name, x, out):
    if _is_tensor(x):
        y = _fast_call(fn, x, (), out)
        return y if y is not None else _forward_tensor(fn, name, x, out)
    if not hasattr(x, "__cuda_array_interface__"):
        raise TypeError(f"duet.{name}: x must be a torch.Tensor or have __cuda_array_interface__, "
                        f"got {type(x).__name__}")
    if _torch_module() is None:
        return _forward_cai(fn, name, x, out)
    y = _forward_tensor(fn, name, _from_cai(x, name, "x"), out)
    return y if out is None else out


def _backward(fn, name, y, dy, out):
    y = _coerce(y, name, "y")
    result = _fast_call(fn, y, (dy,), out)
    if result is None:
        result = _backward_tensor(fn, name, y, dy, out)
    return result if out is None else out


# ------------------------------------------------------------------ public functions

def softmax(x, out=None):
    """softmax over the last dimension; returns out (a new tensor if None)."""
    return _forward(library().duet_softmax, "softmax", x, out)


def log_softmax(x, out=None):
    """log_softmax over the last dimension; returns out (a new tensor if None)."""
    return _forward(library().duet_log_softmax, "log_softmax", x, out)


def softmax_backward(y, dy, out=None):
    """dx = y * (dy - sum(dy * y)) over the last dimension, y the softmax output."""
    return _backward(library().duet_softmax_backward, "softmax_backward", y, dy, out)


def log_softmax_backward(y, dy, out=None):
    """dx = dy - exp(y) * sum(dy) over the last dimension, y the log_softmax output."""
    return _backward(library().duet_log_softmax_backward, "log_softmax_backward", y, dy, out)
