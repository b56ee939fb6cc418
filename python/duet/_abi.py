"""ctypes binding of duet/duet.h."""
import ctypes
import os

_DTYPES = {}  # torch dtype -> duet_dtype_t, filled on first use


class DuetError(RuntimeError):
    """A duet call failed; .status holds the C status code."""

    def __init__(self, status, message):
        super().__init__(f"duet: {message} (status {status})")
        self.status = status


class _Device(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("ordinal", ctypes.c_int)]


_lib = None


def library():
    """libduet, from $DUET_LIBRARY or the default loader path."""
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL(os.environ.get("DUET_LIBRARY", "libduet.so"))
        _lib.duet_last_error.restype = ctypes.c_char_p
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        fwd = [_Device, ctypes.c_int, i64, i64, vp, i64, vp, i64, vp]
        bwd = [_Device, ctypes.c_int, i64, i64, vp, i64, vp, i64, vp, i64, vp]
        for name, args in (("duet_softmax", fwd), ("duet_log_softmax", fwd),
                           ("duet_softmax_backward", bwd), ("duet_log_softmax_backward", bwd)):
            getattr(_lib, name).argtypes = args
            getattr(_lib, name).restype = ctypes.c_int
        _lib.duet_device_of_pointer.argtypes = [vp, ctypes.POINTER(_Device)]
    return _lib


def _check(status):
    if status != 0:
        raise DuetError(status, library().duet_last_error().decode())


def _dtype_code(t):
    import torch
    if not _DTYPES:
        _DTYPES.update({torch.float32: 0, torch.float16: 1, torch.bfloat16: 2})
    if t.dtype not in _DTYPES:
        raise TypeError(f"duet: unsupported dtype {t.dtype} (float32, float16, bfloat16)")
    return _DTYPES[t.dtype]


def _as_2d(t, name):
    if t.dim() == 0:
        raise ValueError(f"duet: {name} must have at least one dimension")
    if t.stride(-1) != 1:
        t = t.contiguous()
    m = t.reshape(-1, t.shape[-1]) if t.dim() != 2 else t
    if m.dim() == 2 and m.shape[0] > 1 and m.stride(0) < m.shape[1]:
        m = m.contiguous()
    return m


def _device(t):
    dev = _Device()
    _check(library().duet_device_of_pointer(ctypes.c_void_p(t.data_ptr()), ctypes.byref(dev)))
    return dev


def _stream(t):
    import torch
    return ctypes.c_void_p(torch.cuda.current_stream(t.device).cuda_stream) if t.is_cuda else None


def _forward(fn, x, out):
    import torch
    x2 = _as_2d(x, "x")
    y = torch.empty_like(x2) if out is None else _as_2d(out, "out")
    if y.shape != x2.shape or y.dtype != x2.dtype:
        raise ValueError("duet: out must match x in shape and dtype")
    rows, cols = x2.shape
    _check(fn(_device(x2), _dtype_code(x2), rows, cols, ctypes.c_void_p(x2.data_ptr()), x2.stride(0) if rows > 1 else cols,
              ctypes.c_void_p(y.data_ptr()), y.stride(0) if rows > 1 else cols, _stream(x2)))
    return y.view(x.shape) if out is None else out


def _backward(fn, y, dy, out):
    import torch
    y2, g2 = _as_2d(y, "y"), _as_2d(dy, "dy")
    if y2.shape != g2.shape or y2.dtype != g2.dtype:
        raise ValueError("duet: y and dy must match in shape and dtype")
    dx = torch.empty_like(y2) if out is None else _as_2d(out, "out")
    rows, cols = y2.shape
    s = lambda t: t.stride(0) if rows > 1 else cols
    _check(fn(_device(y2), _dtype_code(y2), rows, cols, ctypes.c_void_p(y2.data_ptr()), s(y2),
              ctypes.c_void_p(g2.data_ptr()), s(g2), ctypes.c_void_p(dx.data_ptr()), s(dx), _stream(y2)))
    return dx.view(y.shape) if out is None else out


def softmax(x, out=None):
    return _forward(library().duet_softmax, x, out)


def log_softmax(x, out=None):
    return _forward(library().duet_log_softmax, x, out)


def softmax_backward(y, dy, out=None):
    return _backward(library().duet_softmax_backward, y, dy, out)


def log_softmax_backward(y, dy, out=None):
    return _backward(library().duet_log_softmax_backward, y, dy, out)
