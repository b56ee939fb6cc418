"""The ctypes binding of duet/duet.h: finding and loading libduet, the
function signatures, status checks. No tensor logic and no torch here.

libduet is looked for, in order: $DUET_LIBRARY; the libduet.so that
`pip install` puts beside this file; libduet.so on the loader path.
"""
import ctypes
import os
import pathlib
import struct

# duet_dtype_t and duet_backend_t of duet/duet.h
F32, F16, BF16 = 0, 1, 2
BACKEND_HOST, BACKEND_CUDA, BACKEND_HIP = 0, 1, 2
_BACKEND_NAMES = {BACKEND_HOST: "host", BACKEND_CUDA: "cuda", BACKEND_HIP: "hip"}


class DuetError(RuntimeError):
    """A duet call failed; .status holds the C status code."""

    def __init__(self, status, message):
        super().__init__(f"duet: {message} (status {status})")
        self.status = status


class Device(ctypes.Structure):
    """duet_device_t."""
    _fields_ = [("backend", ctypes.c_int), ("ordinal", ctypes.c_int)]

    def __repr__(self):
        return f"{_BACKEND_NAMES.get(self.backend, self.backend)}:{self.ordinal}"


# duet_mask_kind_t, duet_index_t, duet_reduction_t
MASK_NONE, MASK_ADDITIVE, MASK_BOOLEAN, MASK_CAUSAL = 0, 1, 2, 3
INDEX_I32, INDEX_I64 = 0, 1
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}
# duet_status_t values the binding maps to torch's exception types
STATUS_INVALID_ARGUMENT, STATUS_UNSUPPORTED = 1, 3


class Mask(ctypes.Structure):
    """duet_mask_t: a mask of rows = batch * heads * seq_q rows (strides in elements, 0 broadcasts)."""
    _fields_ = [("kind", ctypes.c_int), ("data", ctypes.c_void_p), ("heads", ctypes.c_int64),
                ("seq_q", ctypes.c_int64), ("batch_stride", ctypes.c_int64), ("head_stride", ctypes.c_int64),
                ("row_stride", ctypes.c_int64), ("causal_offset", ctypes.c_int64)]


class CrossEntropyOptions(ctypes.Structure):
    """duet_cross_entropy_options_t."""
    _fields_ = [("ignore_index", ctypes.c_int64), ("label_smoothing", ctypes.c_float),
                ("z_loss", ctypes.c_float), ("reduction", ctypes.c_int)]


_i32, _i64, _vp, _size = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_size_t
_f32 = ctypes.c_float
_FORWARD = [Device, _i32, _i64, _i64, _vp, _i64, _vp, _i64]
_BACKWARD = [Device, _i32, _i64, _i64, _vp, _i64, _vp, _i64, _vp, _i64]
# name -> (argument types, result type): every function this binding calls.
_SIGNATURES = {
    "duet_version": ([], ctypes.c_char_p),
    "duet_status_string": ([_i32], ctypes.c_char_p),
    "duet_last_error": ([], ctypes.c_char_p),
    "duet_device_count": ([ctypes.POINTER(_i32)], _i32),
    "duet_get_device": ([_i32, ctypes.POINTER(Device)], _i32),
    "duet_device_of_pointer": ([_vp, ctypes.POINTER(Device)], _i32),
    "duet_synchronize": ([Device, _vp], _i32),
    "duet_softmax_workspace_size": ([Device, _i32, _i64, _i64, _i32, ctypes.POINTER(_size)], _i32),
}
for _name in ("duet_softmax", "duet_log_softmax"):
    _SIGNATURES[_name] = (_FORWARD + [_vp], _i32)
    _SIGNATURES[_name + "_ws"] = (_FORWARD + [_vp, _size, _vp], _i32)
for _name in ("duet_softmax_backward", "duet_log_softmax_backward"):
    _SIGNATURES[_name] = (_BACKWARD + [_vp], _i32)
    _SIGNATURES[_name + "_ws"] = (_BACKWARD + [_vp, _size, _vp], _i32)

# The fused operations (duet/masked_softmax.hpp, duet/cross_entropy.hpp);
# float* and int32_t* arguments are passed as addresses (c_void_p):
# optional, so that a libduet from before them still loads for softmax;
# using one that the library lacks raises (see `fused`).
_OPTIONAL_SIGNATURES = {
    "duet_masked_softmax": ([Device, _i32, _i64, _i64, _vp, _i64, _vp, _i64, _f32, ctypes.POINTER(Mask), _i32, _vp],
                            _i32),
    "duet_masked_softmax_backward": ([Device, _i32, _i64, _i64, _vp, _i64, _vp, _i64, _vp, _i64, _f32, _vp], _i32),
    "duet_cross_entropy_workspace_size": ([Device, _i64, _i32, ctypes.POINTER(_size)], _i32),
    "duet_cross_entropy": ([Device, _i32, _i64, _i64, _vp, _i64, _i32, _vp, _i64, ctypes.POINTER(CrossEntropyOptions),
                            _vp, _vp, _vp, _i64, _vp, _vp, _size, _vp], _i32),
    "duet_cross_entropy_backward": ([Device, _i32, _i64, _i64, _vp, _i64, _i32, _vp, _i64,
                                     ctypes.POINTER(CrossEntropyOptions), _vp, _vp, _vp, _i64, _vp, _size, _vp], _i32),
    # The vocabulary-parallel halves (duet/vocab_parallel.hpp).
    "duet_shard_stats": ([Device, _i32, _i64, _i64, _vp, _i64, _i32, _vp, _i64, _i64, _i64, _i64, _vp, _vp], _i32),
    "duet_shard_softmax": ([Device, _i32, _i64, _i64, _vp, _i64, _vp, _vp, _i32, _vp, _i64, _vp], _i32),
    "duet_shard_combine": ([Device, _i64, _i64, _vp, _i32, _vp, _i64, _i64, ctypes.POINTER(CrossEntropyOptions), _vp,
                            _vp, _vp, _vp, _vp, _vp, _size, _vp], _i32),
    "duet_shard_cross_entropy_backward": ([Device, _i32, _i64, _i64, _vp, _i64, _i32, _vp, _i64, _i64, _i64,
                                           ctypes.POINTER(CrossEntropyOptions), _vp, _vp, _vp, _i64, _vp, _size, _vp],
                                          _i32),
    # Interleaved rows, softmax over a non-last dimension (duet/softmax.hpp,
    # SoftmaxCall::inner): (device, dtype, log, rows, cols, inner, then
    # (pointer, stride, col_stride) per tensor, stream).
    "duet_softmax_interleaved": ([Device, _i32, _i32, _i64, _i64, _i64, _vp, _i64, _i64, _vp, _i64, _i64, _vp], _i32),
    "duet_softmax_interleaved_backward": ([Device, _i32, _i32, _i64, _i64, _i64, _vp, _i64, _i64, _vp, _i64, _i64,
                                           _vp, _i64, _i64, _vp], _i32),
    # The same with the caller's workspace (workspace, bytes before the
    # stream), and its size: (device, dtype, backward, rows, cols, inner, &bytes).
    "duet_softmax_interleaved_ws": ([Device, _i32, _i32, _i64, _i64, _i64, _vp, _i64, _i64, _vp, _i64, _i64, _vp,
                                     _size, _vp], _i32),
    "duet_softmax_interleaved_backward_ws": ([Device, _i32, _i32, _i64, _i64, _i64, _vp, _i64, _i64, _vp, _i64,
                                              _i64, _vp, _i64, _i64, _vp, _size, _vp], _i32),
    "duet_softmax_interleaved_workspace_size": ([Device, _i32, _i32, _i64, _i64, _i64, ctypes.POINTER(_size)], _i32),
    # duet/device.hpp's copy_kernel: (device, dst, src, bytes, stream)
    "duet_copy_kernel": ([Device, _vp, _vp, _size, _vp], _i32),
    # One softmax call from a packed duet_softmax_args_t (SOFTMAX_ARGS), passed
    # by address: the eager fast path's entry.
    "duet_softmax_call": ([Device, _vp], _i32),
}

# duet.h's duet_softmax_args_t as struct.pack lays it out (little-endian,
# no padding: every field is 8 bytes or a pair of 4-byte ones): size, log,
# backward, dtype, flags, rows, cols, x, x_stride, dy, dy_stride, out,
# out_stride, workspace, workspace_bytes, stream. Pointers are integers (0
# for NULL).
SOFTMAX_ARGS = struct.Struct("<QiiiIqqQqQqQqQQQ")
CALL_DEVICES_CHECKED = 1
# The same struct with out_dtype and reserved after stream, read by libduet
# where flags has CALL_OUT_DTYPE (out of another dtype than x: the widening
# calls, duet::SoftmaxCall::out_dtype). The fast path packs the shorter one,
# which every libduet with duet_softmax_call takes.
SOFTMAX_ARGS_OUT_DTYPE = struct.Struct("<QiiiIqqQqQqQqQQQiI")
CALL_OUT_DTYPE = 2


def library_path():
    """The path `library()` loads: $DUET_LIBRARY, else the bundled libduet.so,
    else the bare name for the loader's search path."""
    path = os.environ.get("DUET_LIBRARY")
    if path:
        return path
    bundled = pathlib.Path(__file__).resolve().with_name("libduet.so")
    return str(bundled) if bundled.exists() else "libduet.so"


def _load(path):
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        where = "$DUET_LIBRARY" if os.environ.get("DUET_LIBRARY") else "duet"
        raise OSError(f"duet: cannot load libduet from {path!r} ({where}): {e}. Install the package with "
                      f"`pip install .` or set DUET_LIBRARY to a libduet.so") from e
    missing = [name for name in _SIGNATURES if not hasattr(lib, name)]
    if missing:
        raise OSError(f"duet: {path!r} is not a libduet this binding can use: it lacks "
                      f"{', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
    for name, (args, result) in (*_SIGNATURES.items(), *_OPTIONAL_SIGNATURES.items()):
        if not hasattr(lib, name):
            continue  # an optional function (checked on use by `fused`)
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = result
    return lib


_lib = None


def library():
    """libduet, loaded on first use (see library_path)."""
    global _lib
    if _lib is None:
        _lib = _load(library_path())
    return _lib


def check(status):
    """Raises DuetError with libduet's message for a failed status."""
    if status != 0:
        raise DuetError(status, library().duet_last_error().decode())


def version():
    """The version string of the loaded libduet (CMake's project version)."""
    return library().duet_version().decode()


def devices():
    """Every device of the loaded libduet, as "cuda:0", ..., "host:0" (GPUs first)."""
    lib = library()
    n = ctypes.c_int()
    check(lib.duet_device_count(ctypes.byref(n)))
    out = []
    for i in range(n.value):
        d = Device()
        check(lib.duet_get_device(i, ctypes.byref(d)))
        out.append(repr(d))
    return out


def device_of_pointer(ptr):
    """The duet device whose memory holds `ptr` (host:0 if none)."""
    dev = Device()
    check(library().duet_device_of_pointer(ctypes.c_void_p(ptr), ctypes.byref(dev)))
    return dev


def workspace_size(dev, dtype_code, rows, cols, backward):
    """Bytes of caller workspace a call of this shape needs (0 for most)."""
    n = ctypes.c_size_t()
    check(library().duet_softmax_workspace_size(dev, dtype_code, rows, cols, int(backward), ctypes.byref(n)))
    return n.value


def interleaved_workspace_size(dev, dtype_code, rows, cols, inner, backward):
    """Bytes of caller workspace an interleaved call of this shape needs (0
    for most)."""
    n = ctypes.c_size_t()
    check(library().duet_softmax_interleaved_workspace_size(dev, dtype_code, int(backward), rows, cols, inner,
                                                            ctypes.byref(n)))
    return n.value


def fused(name):
    """libduet's function `name` of the fused operations, or an OSError
    saying that the loaded libduet predates them."""
    lib = library()
    if not hasattr(lib, name):
        raise OSError(f"duet: {library_path()!r} (libduet {version()}) has no {name}: it predates the fused "
                      "operations (masked softmax, cross-entropy, vocabulary shards); rebuild or reinstall duet")
    return getattr(lib, name)


def cross_entropy_workspace_size(dev, rows, reduction):
    """Bytes of caller workspace a cross-entropy call of `rows` rows needs
    (0 on the host backend)."""
    n = ctypes.c_size_t()
    check(fused("duet_cross_entropy_workspace_size")(dev, rows, reduction, ctypes.byref(n)))
    return n.value


def copy_kernel(dev, dst, src, nbytes, stream=None):
    """Copies `nbytes` from address `src` to address `dst`, both memory of
    `dev`, with duet's own copy kernel, asynchronously on `stream` (a raw
    cudaStream_t / hipStream_t handle, None for the default stream). The
    benchmarks time it beside the vendor's copy for the copy ceiling."""
    lib = library()
    if not hasattr(lib, "duet_copy_kernel"):
        raise OSError(f"duet: {library_path()!r} (libduet {version()}) has no duet_copy_kernel: it predates the "
                      "copy kernel; rebuild or reinstall duet")
    check(lib.duet_copy_kernel(dev, dst, src, nbytes, stream))
