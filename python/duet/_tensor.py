"""torch tensors through libduet: argument checks, (rows, cols) views,
devices, streams, the caller workspace, and the plain softmax's launches
(the fused operations' are in _fused_launch.py). The registered ops
(_ops.py) and the eager fast path call these; nothing here is registered
with torch.

CUDA (and ROCm) tensors run on the GPU that holds them, on torch's current
stream, with any workspace taken from torch's caching allocator on that
stream (so CUDA graph capture works for every strategy); CPU tensors run on
duet's host backend.
"""
import ctypes
import threading

import torch

from . import _lib

DTYPE_CODES = {torch.float32: _lib.F32, torch.float16: _lib.F16, torch.bfloat16: _lib.BF16}
SUPPORTED = "float32, float16 or bfloat16"


# ------------------------------------------------------------------ checks (torch's exception types)

def normalize_dim(dim, ndim, fn):
    """dim in [0, max(ndim, 1)), IndexError like torch's otherwise."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"duet.{fn}: dim must be an int, got {type(dim).__name__}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"duet.{fn}: dim out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def result_dtype(input, dtype, fn):
    """The dtype duet computes and returns in: `dtype` if given (input is
    cast to it first), else input's. TypeError for what duet has no kernel for."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"duet.{fn}: input must be a torch.Tensor, got {type(input).__name__}")
    if input.is_complex():
        raise TypeError(f"duet.{fn}: input has dtype {input.dtype}; duet supports {SUPPORTED} (complex has no softmax)")
    if dtype is not None:
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"duet.{fn}: dtype must be a torch.dtype or None, got {type(dtype).__name__}")
        if dtype not in DTYPE_CODES:
            raise TypeError(f"duet.{fn}: dtype={dtype} is not supported; duet computes in {SUPPORTED}")
        return dtype
    if input.dtype not in DTYPE_CODES:
        hint = " (pass dtype= to cast an integer input)" if not input.is_floating_point() else ""
        raise TypeError(f"duet.{fn}: input has dtype {input.dtype}; duet supports {SUPPORTED}{hint}")
    return input.dtype


def check_device(t, fn, what):
    if t.device.type not in ("cuda", "cpu", "meta"):
        raise RuntimeError(f"duet.{fn}: {what} is on {t.device}; duet runs on CUDA/ROCm devices and the CPU")


def check_like(ref, t, fn, what, ref_name, dtype=None):
    """`t` (out=, a gradient) has ref's shape, the given dtype (default
    ref's) and ref's device."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"duet.{fn}: {what} must be a torch.Tensor, got {type(t).__name__}")
    if t.shape != ref.shape:
        raise ValueError(f"duet.{fn}: {what} has shape {tuple(t.shape)}, but {ref_name} has {tuple(ref.shape)}")
    want = ref.dtype if dtype is None else dtype
    if t.dtype != want:
        raise TypeError(f"duet.{fn}: {what} has dtype {t.dtype}, want {want}")
    if t.device != ref.device:
        raise RuntimeError(f"duet.{fn}: {what} is on {t.device}, but {ref_name} is on {ref.device}")


# ------------------------------------------------------------------ layouts

def result_like(t, dim, dtype):
    """An uninitialised result for softmax of `t` over `dim`, laid out as
    torch lays out torch.softmax's: t's strides where t is dense (no gaps, no
    element twice), else contiguous. The registered ops' fake kernels use it
    too: the layout is the same."""
    return torch.empty_like(t, dtype=dtype, memory_format=torch.preserve_format)


def rows_of(t, dim):
    """t with `dim` last (a view), a 0-d tensor as one element."""
    return t.reshape(1) if t.dim() == 0 else t.movedim(dim, -1)


def _collapse(sizes, strides):
    """The dimensions (sizes, strides), outermost first, as the fewest
    [size, stride] groups that address the same elements: dimensions of size
    1 dropped, neighbours merged where the outer stride steps over the inner
    dimension (a stride of 0 merges with a stride of 0)."""
    groups = []
    for size, stride in zip(sizes, strides):
        if size == 1:
            continue
        if groups and groups[-1][1] == stride * size:
            groups[-1] = [groups[-1][0] * size, stride]
        else:
            groups.append([size, stride])
    return groups


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


# ------------------------------------------------------------------ devices, streams, workspace

# torch device index (-1: the CPU) -> duet device, filled by the first call
# on each device (libduet checks every pointer again on every call: the
# wrong device, or host memory, is still refused there).
_DEVICE_OF = {}


def duet_device(t, fn):
    """The duet device of a tensor's memory; refuses GPU memory that this
    libduet has no backend for (the host backend would read it as host memory)."""
    index = t.get_device()
    dev = _DEVICE_OF.get(index)
    if dev is not None:
        return dev
    dev = _lib.device_of_pointer(t.data_ptr())
    if index < 0:
        if dev.backend != _lib.BACKEND_HOST:
            raise RuntimeError(f"duet.{fn}: a CPU tensor whose memory duet sees on {dev!r}")
    elif dev.backend == _lib.BACKEND_HOST:
        raise RuntimeError(f"duet.{fn}: a tensor on {t.device}, but the loaded libduet ({_lib.version()}) has no "
                           f"GPU backend for that memory (its devices: {', '.join(_lib.devices())})")
    _DEVICE_OF[index] = dev
    return dev


def _current_raw_stream():
    """torch's current stream on a CUDA device index, as an integer handle:
    the raw handle without building a torch.cuda.Stream object (Triton's
    launcher reads it the same way), the public call where that is absent."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else (lambda i: torch.cuda.current_stream(i).cuda_stream)


raw_stream = _current_raw_stream()

# (device index, dtype code, cols, backward) -> whether a call of that row
# length needs a workspace: the planner picks the strategy from the row
# length alone, so only the first call of a row length asks libduet.
_NEEDS_WORKSPACE = {}


def workspace(dev, code, rows, cols, backward, index, device):
    """(pointer, bytes, tensor) of the workspace a call needs: (None, 0, None)
    for most shapes, else a uint8 tensor from torch's caching allocator on
    the current stream (stream-ordered reuse; a graph's private pool under
    capture). The tensor must stay referenced until the call is enqueued."""
    key = (index, code, cols, backward)
    needs = _NEEDS_WORKSPACE.get(key)
    if needs is False:
        return None, 0, None
    nbytes = _lib.workspace_size(dev, code, rows, cols, backward)
    _NEEDS_WORKSPACE[key] = nbytes > 0
    if nbytes == 0:
        return None, 0, None
    buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return buffer.data_ptr(), nbytes, buffer


class _PackedArgs(threading.local):
    """A duet_softmax_args_t buffer of `size` bytes a thread (a call fills
    it, then passes its address)."""

    def __init__(self, size):
        self.buffer = ctypes.create_string_buffer(size)
        self.address = ctypes.addressof(self.buffer)


_PACKED = _PackedArgs(_lib.SOFTMAX_ARGS.size)
_PACKED_OUT_DTYPE = _PackedArgs(_lib.SOFTMAX_ARGS_OUT_DTYPE.size)
_pack_into = _lib.SOFTMAX_ARGS.pack_into
_ARGS_SIZE = _lib.SOFTMAX_ARGS.size
_DEVICES_CHECKED = _lib.CALL_DEVICES_CHECKED
_ENTRIES = {}


def _softmax_call():
    """libduet's duet_softmax_call, or None for a libduet from before it."""
    fn = _ENTRIES.get("call", False)
    if fn is False:
        fn = _ENTRIES["call"] = getattr(_lib.library(), "duet_softmax_call", None)
    return fn


def _entry(log, backward):
    """libduet's function for (log, backward), the variant with a workspace."""
    fn = _ENTRIES.get((log, backward))
    if fn is None:
        name = f"duet_{'log_' if log else ''}softmax{'_backward' if backward else ''}_ws"
        fn = _ENTRIES[(log, backward)] = getattr(_lib.library(), name)
    return fn


# ------------------------------------------------------------------ launches

def launch(log, inputs, out, fn):
    """Runs the forward (inputs = (x,)) or backward (inputs = (y, dy)) over
    the last dimension of same-shaped tensors into `out`: directly where out
    has a (rows, cols) view, else through a temporary copied into out."""
    if out.numel() == 0:
        return out
    matrices = [_as_2d(t) for t in inputs]
    first = matrices[0]
    rows, cols = first.shape
    dev = duet_device(first, fn)
    code = DTYPE_CODES[first.dtype]
    index = first.get_device()
    backward = len(inputs) == 2
    stream = raw_stream(index) if index >= 0 else None
    ws_ptr, ws_bytes, ws_keep = workspace(dev, code, rows, cols, backward, index, first.device)
    call = _entry(log, backward)

    def run(dst):
        args = [a for m in matrices for a in (m.data_ptr(), _row_stride(m))]
        _lib.check(call(dev, code, rows, cols, *args, dst.data_ptr(), _row_stride(dst), ws_ptr, ws_bytes, stream))

    dst = _view_2d(out)
    if dst is not None:
        run(dst)
    else:
        tmp = torch.empty((rows, cols), dtype=out.dtype, device=out.device)
        run(tmp)
        out.copy_(tmp.view(out.shape))
    del ws_keep
    return out


def has_rows(t, dim):
    """Whether t over `dim` is (rows, cols) of its own memory."""
    return _view_2d(rows_of(t, dim)) is not None


def widens(narrow, wide):
    """Whether libduet casts between these dtypes in its pass: f16 or bf16
    and float32 (SoftmaxCall::out_dtype)."""
    return wide == torch.float32 and (narrow == torch.float16 or narrow == torch.bfloat16)


def launch_widening(log, inputs, out, dim, fn):
    """The forward of 16-bit x into a float32 out (inputs = (x,)), or the
    backward of float32 (y, dy) into a 16-bit out, over `dim`, with the cast
    in libduet's one pass (duet_softmax_call with CALL_OUT_DTYPE). Returns
    False, having run nothing, where out has no (rows, cols) view over `dim`
    (the caller then casts and runs the plain call), or where libduet has no
    duet_softmax_call."""
    dst = _view_2d(rows_of(out, dim))
    call = _softmax_call()
    if dst is None or call is None:
        return False
    if out.numel() == 0:
        return True
    matrices = [_as_2d(rows_of(t, dim)) for t in inputs]
    first = matrices[0]
    rows, cols = first.shape
    dev = duet_device(first, fn)
    index = first.get_device()
    backward = len(inputs) == 2
    args, packed = _lib.SOFTMAX_ARGS_OUT_DTYPE, _PACKED_OUT_DTYPE
    args.pack_into(packed.buffer, 0, args.size, int(log), int(backward), DTYPE_CODES[first.dtype], _lib.CALL_OUT_DTYPE,
                   rows, cols, first.data_ptr(), _row_stride(first),
                   matrices[1].data_ptr() if backward else 0, _row_stride(matrices[1]) if backward else 0,
                   dst.data_ptr(), _row_stride(dst), 0, 0, raw_stream(index) if index >= 0 else 0,
                   DTYPE_CODES[out.dtype], 0)
    _lib.check(call(dev, packed.address))
    return True


def interleaved_layout(t, dim):
    """(rows, cols, inner, stride, col_stride) of t over `dim` as interleaved
    rows (duet/softmax.hpp, SoftmaxCall::inner): the dimensions before `dim`
    as one outer dimension, those after as one of unit stride; None where
    they do not collapse so."""
    sizes, strides = list(t.shape), list(t.stride())
    outer = _collapse(sizes[:dim], strides[:dim])
    inner = _collapse(sizes[dim + 1:], strides[dim + 1:])
    if len(outer) > 1 or len(inner) > 1 or (inner and inner[0][1] != 1):
        return None
    cols, col_stride = sizes[dim], strides[dim]
    n_inner = inner[0][0] if inner else 1
    if cols == 1:
        col_stride = n_inner
    rows, stride = outer[0] if outer else (1, (cols - 1) * col_stride + n_inner)
    if col_stride < n_inner or (rows > 1 and stride < (cols - 1) * col_stride + n_inner):
        return None  # elements shared (an expanded tensor) or interleaved differently
    return rows, cols, n_inner, stride, col_stride


# (device index, dtype code, cols, inner, backward) -> whether interleaved
# calls of that shape class need a workspace (the plan depends on those).
_INTERLEAVED_NEEDS_WORKSPACE = {}


def launch_over(log, inputs, out, dim, fn):
    """launch() over any dimension: as rows where `dim` is last or every
    tensor moved to put it last is a (rows, cols) view; else as interleaved
    rows where every tensor has that layout and libduet has the call; else
    through copies."""
    if out.numel() == 0 or out.dim() == 0 or dim == out.dim() - 1:
        return launch(log, tuple(rows_of(t, dim) for t in inputs), rows_of(out, dim), fn)
    tensors = (*inputs, out)
    moved = [rows_of(t, dim) for t in tensors]
    if any(_view_2d(m) is None for m in moved):
        layouts = [interleaved_layout(t, dim) for t in tensors]
        name = "duet_softmax_interleaved" + ("_backward" if len(inputs) == 2 else "")
        if (all(l is not None for l in layouts) and len({l[:3] for l in layouts}) == 1
                and hasattr(_lib.library(), name)):
            rows, cols, inner = layouts[0][:3]
            first = inputs[0]
            dev = duet_device(first, fn)
            index = first.get_device()
            code = DTYPE_CODES[first.dtype]
            args = [a for t, l in zip(tensors, layouts) for a in (t.data_ptr(), l[3], l[4])]
            stream = raw_stream(index) if index >= 0 else None
            lib = _lib.library()
            if hasattr(lib, name + "_ws"):
                # The workspace (interleaved_stream's queue, interleaved_slabs'
                # pairs) from torch's caching allocator on the current stream,
                # as for rows; a shape class that needs none is asked about
                # once.
                key = (index, code, cols, inner, len(inputs) == 2)
                nbytes = 0
                if _INTERLEAVED_NEEDS_WORKSPACE.get(key) is not False:
                    nbytes = _lib.interleaved_workspace_size(dev, code, rows, cols, inner, len(inputs) == 2)
                    _INTERLEAVED_NEEDS_WORKSPACE[key] = nbytes > 0
                keep = torch.empty(nbytes, dtype=torch.uint8, device=first.device) if nbytes else None
                _lib.check(getattr(lib, name + "_ws")(dev, code, int(log), rows, cols, inner, *args,
                                                      keep.data_ptr() if nbytes else None, nbytes, stream))
                del keep
            else:
                _lib.check(getattr(lib, name)(dev, code, int(log), rows, cols, inner, *args, stream))
            return out
    return launch(log, tuple(moved[:-1]), moved[-1], fn)


# ------------------------------------------------------------------ the eager fast path

def _dispatch_is_plain():
    """A predicate: no torch function or dispatch mode and no functorch
    transform is active (under those, tensors must go through the
    dispatcher, not straight to libduet). Built from what this torch has."""
    c = torch._C
    function_mode = getattr(c, "_is_torch_function_mode_enabled", None) or (lambda: False)
    dispatch_modes = getattr(c, "_len_torch_dispatch_stack", None) or (lambda: 0)
    transform = getattr(getattr(c, "_functorch", None), "peek_interpreter_stack", None) or (lambda: None)
    return lambda: not function_mode() and not dispatch_modes() and transform() is None


dispatch_is_plain = _dispatch_is_plain()
_is_grad_enabled = torch.is_grad_enabled
_Tensor = torch.Tensor


def _plain(t, index, like):
    return (type(t) is _Tensor and t.is_contiguous() and t.get_device() == index and t.dtype == like.dtype
            and t.shape == like.shape and not t.requires_grad)


def fast_call(log, first, others, dim, out):
    """The common call straight to libduet: plain contiguous tensors of one
    shape, dtype and device that duet has seen before, nothing needing
    autograd, reduction over the last dimension, a new output or a
    contiguous one. Returns None where the call is not that; the caller then
    takes the registered op, which also raises the errors. libduet checks
    the pointers' alignment, the strides and overlaps on every call; the
    tensors' device is torch's, so libduet does not ask the vendor again
    (duet_softmax_call with DUET_CALL_DEVICES_CHECKED). Written for host
    time: every attribute read and call here costs a share of a
    microsecond."""
    if type(first) is not _Tensor:
        return None
    code = DTYPE_CODES.get(first.dtype)
    ndim = first.dim()
    if (code is None or ndim == 0 or type(dim) is not int or (dim != -1 and dim != ndim - 1) or not first.is_contiguous()
            or (first.requires_grad and _is_grad_enabled())):
        return None
    index = first.get_device()
    if index < 0 and first.is_meta:
        return None  # the registered op's fake kernel gives meta results
    dev = _DEVICE_OF.get(index)
    numel = first.numel()
    call = _softmax_call()
    if dev is None or numel == 0 or call is None or not dispatch_is_plain():
        return None
    for t in others:
        if not _plain(t, index, first):
            return None
    if out is None:
        result = torch.empty_like(first)
    elif _plain(out, index, first):
        result = out
    else:
        return None
    cols = first.shape[-1]
    rows = numel // cols
    backward = bool(others)
    ws_keep = None
    if _NEEDS_WORKSPACE.get((index, code, cols, backward)) is False:
        ws_ptr, ws_bytes = None, 0
    else:
        ws_ptr, ws_bytes, ws_keep = workspace(dev, code, rows, cols, backward, index, first.device)
    stream = raw_stream(index) if index >= 0 else 0
    # The tensors' device is torch's own (checked above): libduet need not
    # ask the vendor for each pointer's.
    packed = _PACKED
    _pack_into(packed.buffer, 0, _ARGS_SIZE, log, backward, code, _DEVICES_CHECKED, rows, cols,
               first.data_ptr(), cols, others[0].data_ptr() if backward else 0, cols, result.data_ptr(), cols,
               ws_ptr or 0, ws_bytes, stream)
    status = call(dev, packed.address)
    if status:
        _lib.check(status)
    del ws_keep
    return result
