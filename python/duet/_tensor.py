"""torch tensors through libduet: argument checks, (rows, cols) views,
devices, streams, the caller workspace, and the launches. The registered
ops (_ops.py) and the eager fast path call these; nothing here is
registered with torch.

CUDA (and ROCm) tensors run on the GPU that holds them, on torch's current
stream, with any workspace taken from torch's caching allocator on that
stream (so CUDA graph capture works for every strategy); CPU tensors run on
duet's host backend.
"""
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


_ENTRIES = {}


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
            args = [a for t, l in zip(tensors, layouts) for a in (t.data_ptr(), l[3], l[4])]
            _lib.check(getattr(_lib.library(), name)(dev, DTYPE_CODES[first.dtype], int(log), rows, cols, inner, *args,
                                                     raw_stream(index) if index >= 0 else None))
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
    the pointers and overlaps on every call. Written for host time: every
    attribute read and call here costs a share of a microsecond."""
    if type(first) is not _Tensor:
        return None
    code = DTYPE_CODES.get(first.dtype)
    ndim = first.dim()
    if (code is None or ndim == 0 or type(dim) is not int or (dim != -1 and dim != ndim - 1) or not first.is_contiguous()
            or (first.requires_grad and _is_grad_enabled())):
        return None
    index = first.get_device()
    dev = _DEVICE_OF.get(index)
    numel = first.numel()
    if dev is None or numel == 0 or not dispatch_is_plain():
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
    stream = raw_stream(index) if index >= 0 else None
    if backward:
        status = _entry(log, True)(dev, code, rows, cols, first.data_ptr(), cols, others[0].data_ptr(), cols,
                                   result.data_ptr(), cols, ws_ptr, ws_bytes, stream)
    else:
        status = _entry(log, False)(dev, code, rows, cols, first.data_ptr(), cols, result.data_ptr(), cols, ws_ptr,
                                    ws_bytes, stream)
    if status:
        _lib.check(status)
    del ws_keep
    return result


# ------------------------------------------------------------------ fused operations: masked softmax

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


def mask_layout(mask, shape):
    """A mask tensor broadcast to the scores' `shape` as duet_mask_t sees it:
    (tensor, heads, seq_q, batch_stride, head_stride, row_stride) with the
    row of scores r = (b * heads + h) * seq_q + i reading its mask row at
    b * batch_stride + h * head_stride + i * row_stride (elements) from the
    tensor's start, the mask row's columns contiguous.

    The broadcast dimensions become strides of 0 (no copy): a [B, 1, Sq, Sk]
    mask over [B, H, Sq, Sk] scores is (heads H, head_stride 0). Copies are
    made only where the kernel's layout cannot express the mask's:
      * a mask row whose columns are not contiguous (a broadcast last
        dimension, a sliced mask) is copied to contiguous columns (the mask's
        own size with seq_k columns, still broadcast over the rest);
      * leading dimensions that do not fold into three (size, stride) groups
        (e.g. a [B1, 1, B2, 1, Sk] mask over [B1, H1, B2, H2, Sk] scores, or
        strides that no slice of one array has) are materialized as a dense
        mask of the scores' shape."""
    cols = shape[-1]
    m = mask[(None,) * (len(shape) - mask.dim())] if mask.dim() < len(shape) else mask
    if cols > 1 and (m.shape[-1] != cols or m.stride(-1) != 1):
        m = m.expand(*m.shape[:-1], cols).contiguous()
    m = m.expand(shape)
    groups = _collapse(shape[:-1], m.stride()[:-1])
    if len(groups) > 3:
        m = m.contiguous()
        groups = _collapse(shape[:-1], m.stride()[:-1])
    groups = [[1, 0]] * (3 - len(groups)) + groups
    (_, batch_stride), (heads, head_stride), (seq_q, row_stride) = groups
    return m, heads, seq_q, batch_stride, head_stride, row_stride


def _stream(index):
    return raw_stream(index) if index >= 0 else None


def launch_masked_softmax(x, y, scale, mask, causal, causal_offset, zero_masked_rows, fn):
    """y = softmax(scale * x + mask) over the last dimension; y is a new
    contiguous tensor of x's shape and dtype; mask a bool or x-dtype tensor
    broadcastable to x, or None; causal masks column j of query i (the
    second-to-last dimension) when j > i + causal_offset."""
    if y.numel() == 0:
        return y
    xm, ym = _as_2d(x), _view_2d(y)
    rows, cols = xm.shape
    dev = duet_device(xm, fn)
    index = xm.get_device()
    m = _lib.Mask()
    keep = None
    if causal:
        seq_q = x.shape[-2] if x.dim() >= 2 else 1
        m.kind, m.heads, m.seq_q, m.causal_offset = _lib.MASK_CAUSAL, rows // seq_q, seq_q, causal_offset
    elif mask is not None:
        keep, m.heads, m.seq_q, m.batch_stride, m.head_stride, m.row_stride = mask_layout(mask, tuple(x.shape))
        m.kind = _lib.MASK_BOOLEAN if mask.dtype == torch.bool else _lib.MASK_ADDITIVE
        m.data = keep.data_ptr()
    else:
        m.kind, m.seq_q = _lib.MASK_NONE, rows
    _lib.check(_lib.fused("duet_masked_softmax")(
        dev, DTYPE_CODES[xm.dtype], rows, cols, xm.data_ptr(), _row_stride(xm), ym.data_ptr(), _row_stride(ym),
        scale, m, int(zero_masked_rows), _stream(index)))
    del keep
    return y


def launch_masked_softmax_backward(output, grad_output, dx, scale, fn):
    """dx = scale * output * (grad_output - sum(grad_output * output)) over
    the last dimension; dx is a new contiguous tensor of output's shape."""
    if dx.numel() == 0:
        return dx
    ym, dym, dxm = _as_2d(output), _as_2d(grad_output), _view_2d(dx)
    rows, cols = ym.shape
    dev = duet_device(ym, fn)
    _lib.check(_lib.fused("duet_masked_softmax_backward")(
        dev, DTYPE_CODES[ym.dtype], rows, cols, ym.data_ptr(), _row_stride(ym), dym.data_ptr(), _row_stride(dym),
        dxm.data_ptr(), _row_stride(dxm), scale, _stream(ym.get_device())))
    return dx


# ------------------------------------------------------------------ fused operations: cross-entropy

INDEX_CODES = {torch.int64: _lib.INDEX_I64, torch.int32: _lib.INDEX_I32}


def _ce_options(ignore_index, reduction, label_smoothing, z_loss):
    return _lib.CrossEntropyOptions(ignore_index, label_smoothing, z_loss, _lib.REDUCTIONS[reduction])


_CE_WORKSPACE_BYTES = {}  # (device index, rows, reduction) -> bytes: a call's size, asked once


def _ce_workspace(dev, rows, reduction, index, device):
    """(pointer, bytes, tensor): cross-entropy's workspace (a few counters and,
    for mean and sum, a float a row) from torch's caching allocator on the
    current stream; none on the host backend."""
    if index < 0:
        return None, 0, None
    key = (index, rows, reduction)
    nbytes = _CE_WORKSPACE_BYTES.get(key)
    if nbytes is None:
        nbytes = _CE_WORKSPACE_BYTES[key] = _lib.cross_entropy_workspace_size(dev, rows, _lib.REDUCTIONS[reduction])
    if nbytes == 0:
        return None, 0, None
    buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return buffer.data_ptr(), nbytes, buffer


def _plain_target(target):
    """target with a positive element stride (an expanded one is copied)."""
    return target if target.shape[0] <= 1 or target.stride(0) > 0 else target.contiguous()


def _target_stride(target):
    return target.stride(0) if target.shape[0] > 1 else 1


def _check_targets_on_host(target, cols, ignore_index):
    """torch's IndexError for a target outside [0, cols) other than
    ignore_index, before libduet refuses the call with a status."""
    bad = (target != ignore_index) & ((target < 0) | (target >= cols))
    if bool(bad.any()):
        raise IndexError(f"Target {int(target[bad][0])} is out of bounds.")


def _ce_check(status, target, cols, ignore_index):
    if status == _lib.STATUS_INVALID_ARGUMENT and "target" in _lib.library().duet_last_error().decode().lower():
        _check_targets_on_host(target.cpu(), cols, ignore_index)
    _lib.check(status)


def launch_cross_entropy(x, target, loss, lse, grad, ignore_index, reduction, label_smoothing, z_loss,
                         check_targets, fn):
    """The forward over rows of x [N, C] into loss (float32, [N] or []) and
    lse (float32, [N]); with `grad` (x's shape and dtype; x itself for the
    in-place mode) also the gradient for an upstream gradient of 1. Returns
    grad. Invalid targets: IndexError on the CPU; on a GPU, with
    check_targets, the count of invalid rows is read back (a synchronization)
    and raised as an IndexError."""
    xm = _as_2d(x)
    rows, cols = xm.shape
    if xm.device.type == "cpu":
        _check_targets_on_host(target, cols, ignore_index)
    dev = duet_device(xm, fn)
    index = xm.get_device()
    target = _plain_target(target)
    gm, copy_back = None, None
    if grad is x:  # the in-place mode: the gradient goes over the logits (through x's copy where xm is one)
        gm, copy_back = xm, (x if xm.data_ptr() != x.data_ptr() else None)
    elif grad is not None:
        gm = _view_2d(grad)
    invalid = None
    if check_targets and index >= 0:
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"duet.{fn}: check_targets=True reads the count of invalid targets back, which "
                               "CUDA graph capture does not allow; capture with check_targets=False")
        invalid = torch.zeros(1, dtype=torch.int32, device=x.device)
    ws_ptr, ws_bytes, ws_keep = _ce_workspace(dev, rows, reduction, index, x.device)
    options = _ce_options(ignore_index, reduction, label_smoothing, z_loss)
    status = _lib.fused("duet_cross_entropy")(
        dev, DTYPE_CODES[xm.dtype], rows, cols, xm.data_ptr(), _row_stride(xm), INDEX_CODES[target.dtype],
        target.data_ptr(), _target_stride(target), options, loss.data_ptr(), lse.data_ptr(),
        None if gm is None else gm.data_ptr(), 0 if gm is None else _row_stride(gm),
        None if invalid is None else invalid.data_ptr(), ws_ptr, ws_bytes, _stream(index))
    _ce_check(status, target, cols, ignore_index)
    del ws_keep
    if copy_back is not None:
        copy_back.copy_(gm.view(copy_back.shape))
    if invalid is not None:
        count = int(invalid.item())
        if count:
            raise IndexError(f"duet.{fn}: {count} target(s) out of bounds: not in [0, {cols}) and not "
                             f"ignore_index ({ignore_index}); those rows' losses are NaN")
    return grad


def launch_cross_entropy_backward(x, target, lse, grad_loss, grad, ignore_index, reduction, label_smoothing, z_loss,
                                  fn):
    """grad (x's shape and dtype) from the forward's lse and the upstream
    gradient grad_loss (float32, [N] for reduction none, else [])."""
    xm = _as_2d(x)
    rows, cols = xm.shape
    dev = duet_device(xm, fn)
    index = xm.get_device()
    gm = _view_2d(grad)
    target = _plain_target(target)
    g = grad_loss.to(torch.float32).contiguous()
    lse = lse.contiguous()
    ws_ptr, ws_bytes, ws_keep = _ce_workspace(dev, rows, reduction, index, x.device)
    options = _ce_options(ignore_index, reduction, label_smoothing, z_loss)
    status = _lib.fused("duet_cross_entropy_backward")(
        dev, DTYPE_CODES[xm.dtype], rows, cols, xm.data_ptr(), _row_stride(xm), INDEX_CODES[target.dtype],
        target.data_ptr(), _target_stride(target), options, lse.data_ptr(), g.data_ptr(),
        gm.data_ptr(), _row_stride(gm), ws_ptr, ws_bytes, _stream(index))
    _ce_check(status, target, cols, ignore_index)
    del ws_keep
    return grad


# ------------------------------------------------------------------ vocabulary shards (duet.distributed)

def launch_shard_stats(x, target, ignore_index, vocab_start, vocab, stats, fn):
    """stats (float32 [rows, 4], contiguous) = each row's {max, sum exp(x - max),
    x[target - vocab_start] or 0, sum x} over the shard x [rows, cols];
    target [rows] or None."""
    xm = _as_2d(x)
    rows, cols = xm.shape
    if rows == 0:
        return stats
    dev = duet_device(xm, fn)
    index = xm.get_device()
    if target is not None:
        target = _plain_target(target)
    status = _lib.fused("duet_shard_stats")(
        dev, DTYPE_CODES[xm.dtype], rows, cols, xm.data_ptr(), _row_stride(xm),
        INDEX_CODES[target.dtype] if target is not None else _lib.INDEX_I64,
        None if target is None else target.data_ptr(), 1 if target is None else _target_stride(target),
        ignore_index, vocab_start, vocab, stats.data_ptr(), _stream(index))
    _lib.check(status)
    return stats


def launch_shard_softmax(x, row_max, lse, log, y, fn):
    """y (x's shape and dtype; may be x) = exp(x - lse) or x - lse over the
    shard x, lse the whole rows' (float32 [rows]); with row_max (float32
    [rows] or None), exp((x - max) - lse) or (x - max) - lse, lse = log S."""
    if y.numel() == 0:
        return y
    xm = _as_2d(x)
    rows, cols = xm.shape
    ym = xm if y is x and xm.data_ptr() == x.data_ptr() else _view_2d(y)
    dev = duet_device(xm, fn)
    index = xm.get_device()
    lse = lse.contiguous()
    row_max = None if row_max is None else row_max.contiguous()
    _lib.check(_lib.fused("duet_shard_softmax")(
        dev, DTYPE_CODES[xm.dtype], rows, cols, xm.data_ptr(), _row_stride(xm),
        None if row_max is None else row_max.data_ptr(), lse.data_ptr(), int(log),
        ym.data_ptr(), _row_stride(ym), _stream(index)))
    return y


def launch_shard_combine(every, target, vocab, ignore_index, reduction, label_smoothing, z_loss, row_max, log_sum,
                         lse, loss, fn):
    """Every shard's statistics (float32 [shards, rows, 4], contiguous: an
    all-gather of launch_shard_stats' outputs) combined into the whole rows'
    max, log S, lse (float32 [rows] each, or None) and, with target, the
    cross-entropy loss (float32 [rows] for reduction none, else [])."""
    shards, rows = every.shape[0], every.shape[1]
    if rows == 0:
        return
    dev = duet_device(every, fn)
    index = every.get_device()
    if target is not None:
        target = _plain_target(target)
    ws_ptr, ws_bytes, ws_keep = (_ce_workspace(dev, rows, reduction, index, every.device) if loss is not None
                                 else (None, 0, None))
    ptr = (lambda t: None if t is None else t.data_ptr())
    _lib.check(_lib.fused("duet_shard_combine")(
        dev, shards, rows, every.data_ptr(), INDEX_CODES[target.dtype] if target is not None else _lib.INDEX_I64,
        ptr(target), 1 if target is None else _target_stride(target), vocab,
        _ce_options(ignore_index, reduction, label_smoothing, z_loss), ptr(row_max), ptr(log_sum), ptr(lse),
        ptr(loss), None, ws_ptr, ws_bytes, _stream(index)))
    del ws_keep


def launch_shard_cross_entropy_backward(x, target, lse, grad_loss, grad, vocab_start, vocab, ignore_index, reduction,
                                        label_smoothing, z_loss, fn):
    """grad (x's shape and dtype; may be x) of the cross-entropy over the
    shard x of classes [vocab_start, vocab_start + cols) of vocab, from the
    whole rows' lse and the upstream gradient grad_loss."""
    xm = _as_2d(x)
    rows, cols = xm.shape
    if rows == 0:
        return grad
    gm = xm if grad is x and xm.data_ptr() == x.data_ptr() else _view_2d(grad)
    dev = duet_device(xm, fn)
    index = xm.get_device()
    target = _plain_target(target)
    g = grad_loss.to(torch.float32).contiguous()
    lse = lse.contiguous()
    ws_ptr, ws_bytes, ws_keep = _ce_workspace(dev, rows, reduction, index, x.device)
    options = _ce_options(ignore_index, reduction, label_smoothing, z_loss)
    status = _lib.fused("duet_shard_cross_entropy_backward")(
        dev, DTYPE_CODES[xm.dtype], rows, cols, xm.data_ptr(), _row_stride(xm), INDEX_CODES[target.dtype],
        target.data_ptr(), _target_stride(target), vocab_start, vocab, options, lse.data_ptr(), g.data_ptr(),
        gm.data_ptr(), _row_stride(gm), ws_ptr, ws_bytes, _stream(index))
    _lib.check(status)
    del ws_keep
    return grad

