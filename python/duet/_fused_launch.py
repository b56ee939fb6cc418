"""The fused operations' launches over torch tensors: masked softmax,
cross-entropy and the vocabulary-parallel halves (duet.distributed).
Argument checks, views, devices and streams come from _tensor.py, which
holds the plain softmax's; nothing here is registered with torch.
"""
import torch

from . import _lib
from ._tensor import DTYPE_CODES, _as_2d, _collapse, _row_stride, _view_2d, duet_device, raw_stream


# ------------------------------------------------------------------ fused operations: masked softmax

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
    gradient grad_loss (float32, [N] for reduction none, else []): the
    backward over a shard that is every class (vocab_start 0, vocab 0, as
    duet_cross_entropy_backward is), its refused targets named on the host."""
    cols = x.shape[-1]
    return launch_shard_cross_entropy_backward(
        x, target, lse, grad_loss, grad, 0, 0, ignore_index, reduction, label_smoothing, z_loss, fn,
        check=lambda status, plain_target: _ce_check(status, plain_target, cols, ignore_index))


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
                                        label_smoothing, z_loss, fn, check=None):
    """grad (x's shape and dtype; may be x) of the cross-entropy over the
    shard x of classes [vocab_start, vocab_start + cols) of vocab, from the
    whole rows' lse and the upstream gradient grad_loss. check(status,
    target) replaces _lib.check(status)."""
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
    if check is None:
        _lib.check(status)
    else:
        check(status, target)
    del ws_keep
    return grad

