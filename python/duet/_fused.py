"""The fused operations registered with torch, and the public functions over
them: scaled, masked softmax and cross-entropy.

Registered ops (torch.ops.duet.*):

    masked_softmax(Tensor input, Tensor? mask, float scale, bool causal, int causal_offset,
                   bool zero_masked_rows) -> Tensor
    masked_softmax_backward(Tensor grad_output, Tensor output, float scale) -> Tensor
    cross_entropy(Tensor input, Tensor target, int ignore_index, str reduction, float label_smoothing,
                  float z_loss, bool check_targets) -> (Tensor loss, Tensor lse)
    cross_entropy_backward(Tensor grad_loss, Tensor input, Tensor target, Tensor lse, int ignore_index,
                           str reduction, float label_smoothing, float z_loss) -> Tensor
    cross_entropy_inplace(Tensor(a!) input, Tensor target, int ignore_index, str reduction,
                          float label_smoothing, float z_loss, bool check_targets) -> (Tensor loss, Tensor lse)

The cross-entropy ops take input [N, C] and target [N]; loss and lse are
float32 (loss [N] for reduction "none", else []). cross_entropy_inplace
overwrites input with the gradient for an upstream gradient of 1.

Registration follows _ops.py: torch >= 2.4 custom_op with register_fake
and register_autograd (masked_softmax, cross_entropy); older torch the
Library API (the one _ops.py defines the namespace with) with Meta
kernels and Autograd kernels.
"""
import math
import numbers

import torch
from torch.autograd.function import once_differentiable

from . import _ops
from . import _fused_launch as FL
from . import _tensor as T
from ._lib import REDUCTIONS

MASKED_SOFTMAX_SCHEMA = ("(Tensor input, Tensor? mask, float scale, bool causal, int causal_offset, "
                         "bool zero_masked_rows) -> Tensor")
MASKED_SOFTMAX_BACKWARD_SCHEMA = "(Tensor grad_output, Tensor output, float scale) -> Tensor"
_CE_ARGS = "int ignore_index, str reduction, float label_smoothing, float z_loss"
CROSS_ENTROPY_SCHEMA = f"(Tensor input, Tensor target, {_CE_ARGS}, bool check_targets) -> (Tensor, Tensor)"
CROSS_ENTROPY_BACKWARD_SCHEMA = f"(Tensor grad_loss, Tensor input, Tensor target, Tensor lse, {_CE_ARGS}) -> Tensor"
CROSS_ENTROPY_INPLACE_SCHEMA = (f"(Tensor(a!) input, Tensor target, {_CE_ARGS}, bool check_targets) "
                                "-> (Tensor, Tensor)")
INDEX_DTYPES = (torch.int64, torch.int32)


# ------------------------------------------------------------------ masked softmax: checks and kernels

def _check_masked_softmax(input, mask, scale, causal, fn="masked_softmax"):
    """Refuses what duet cannot run (torch's exception types); returns the
    mask as the kernel takes it (a float mask cast to input's dtype)."""
    T.result_dtype(input, None, fn)
    T.check_device(input, fn, "input")
    if input.dim() == 0:
        raise ValueError(f"duet.{fn}: input is 0-d; it needs a last dimension to take the softmax over")
    if not math.isfinite(scale):
        raise ValueError(f"duet.{fn}: scale must be finite, got {scale}")
    if mask is None:
        return None
    if causal:
        raise ValueError(f"duet.{fn}: causal=True takes no mask tensor (the causal mask is generated); "
                         "fold the causal pattern into `mask` instead")
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"duet.{fn}: mask must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(f"duet.{fn}: mask has dtype {mask.dtype}; it must be bool (True = masked out) or "
                        f"floating point (added to the scores)")
    if mask.device != input.device:
        raise RuntimeError(f"duet.{fn}: mask is on {mask.device}, but input is on {input.device}")
    try:
        shape = torch.broadcast_shapes(mask.shape, input.shape)
    except RuntimeError:
        shape = None
    if shape != input.shape:
        raise ValueError(f"duet.{fn}: mask of shape {tuple(mask.shape)} does not broadcast to input's shape "
                         f"{tuple(input.shape)}")
    if mask.dtype != torch.bool and mask.dtype != input.dtype:
        mask = mask.to(input.dtype)
    return mask


def _masked_softmax(input, mask, scale, causal, causal_offset, zero_masked_rows, run):
    mask = _check_masked_softmax(input, mask, scale, causal)
    y = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    if run:
        FL.launch_masked_softmax(input, y, scale, mask, causal, causal_offset, zero_masked_rows, "masked_softmax")
    return y


# The registered kernels have exactly the schemas' arguments.
def masked_softmax_kernel(input, mask, scale, causal, causal_offset, zero_masked_rows):
    return _masked_softmax(input, mask, scale, causal, causal_offset, zero_masked_rows, True)


def masked_softmax_fake(input, mask, scale, causal, causal_offset, zero_masked_rows):
    return _masked_softmax(input, mask, scale, causal, causal_offset, zero_masked_rows, False)


def _masked_softmax_backward(grad_output, output, scale, run):
    fn = "masked_softmax_backward"
    T.result_dtype(output, None, fn)
    T.check_device(output, fn, "output")
    T.check_like(output, grad_output, fn, "grad_output", "output")
    dx = torch.empty(output.shape, dtype=output.dtype, device=output.device)
    if run:
        FL.launch_masked_softmax_backward(output, grad_output, dx, scale, fn)
    return dx


def masked_softmax_backward_kernel(grad_output, output, scale):
    return _masked_softmax_backward(grad_output, output, scale, True)


def masked_softmax_backward_fake(grad_output, output, scale):
    return _masked_softmax_backward(grad_output, output, scale, False)


def _masked_softmax_setup(ctx, inputs, output):
    input, mask, scale = inputs[:3]
    ctx.save_for_backward(output)
    ctx.scale = scale
    ctx.mask_shape = None if mask is None else mask.shape
    ctx.mask_dtype = None if mask is None else mask.dtype


def _masked_softmax_grad(ctx, grad_output):
    """The gradients of input and (a float mask that requires grad) mask:
    with z = scale * x + mask, dz = y * (dy - sum(dy * y)), dx = scale * dz,
    dmask = dz summed over the dimensions the mask was broadcast over."""
    (output,) = ctx.saved_tensors
    need_input, need_mask = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    grad_input = grad_mask = None
    if need_mask and ctx.mask_shape is not None:
        dz = _MASKED_SOFTMAX_BACKWARD(grad_output, output, 1.0)
        grad_mask = dz.sum_to_size(ctx.mask_shape).to(ctx.mask_dtype)
        if need_input:
            grad_input = dz * ctx.scale
    elif need_input:
        grad_input = _MASKED_SOFTMAX_BACKWARD(grad_output, output, ctx.scale)
    return grad_input, grad_mask, None, None, None, None


# ------------------------------------------------------------------ cross-entropy: checks and kernels

def _check_cross_entropy(input, target, ignore_index, reduction, label_smoothing, z_loss, fn="cross_entropy"):
    """The op's arguments: input [N, C] of a supported dtype, target [N] of
    int64/int32 on input's device, the options in range."""
    T.result_dtype(input, None, fn)
    T.check_device(input, fn, "input")
    if input.dim() != 2:
        raise ValueError(f"duet.{fn}: the op takes input [N, C], got shape {tuple(input.shape)}")
    if input.shape[1] == 0:
        raise ValueError(f"duet.{fn}: input has no classes (shape {tuple(input.shape)})")
    if not isinstance(target, torch.Tensor):
        raise TypeError(f"duet.{fn}: target must be a torch.Tensor, got {type(target).__name__}")
    if target.dtype not in INDEX_DTYPES:
        what = (" (class-probability targets are not supported: duet takes class indices)"
                if target.is_floating_point() else "")
        raise TypeError(f"duet.{fn}: target has dtype {target.dtype}; duet takes int64 or int32 class "
                        f"indices{what}")
    if target.dim() != 1 or target.shape[0] != input.shape[0]:
        raise ValueError(f"duet.{fn}: Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0] if target.dim() == 1 else tuple(target.shape)}).")
    if target.device != input.device:
        raise RuntimeError(f"duet.{fn}: target is on {target.device}, but input is on {input.device}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"duet.{fn}: {reduction!r} is not a valid value for reduction "
                         f"(one of {', '.join(map(repr, REDUCTIONS))})")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"duet.{fn}: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if not (math.isfinite(z_loss) and z_loss >= 0.0):
        raise ValueError(f"duet.{fn}: z_loss must be finite and >= 0, got {z_loss}")


def _ce_outputs(input, reduction):
    rows = input.shape[0]
    loss = torch.empty((rows,) if reduction == "none" else (), dtype=torch.float32, device=input.device)
    return loss, torch.empty(rows, dtype=torch.float32, device=input.device)


def _ce_forward(input, target, ignore_index, reduction, label_smoothing, z_loss, check_targets, inplace, run):
    fn = "cross_entropy_inplace" if inplace else "cross_entropy"
    _check_cross_entropy(input, target, ignore_index, reduction, label_smoothing, z_loss, fn)
    loss, lse = _ce_outputs(input, reduction)
    if run:
        if input.shape[0] == 0:  # torch's values for no rows: the mean is 0 / 0
            loss.fill_(math.nan if reduction == "mean" else 0.0)
        else:
            FL.launch_cross_entropy(input, target, loss, lse, input if inplace else None, ignore_index, reduction,
                                   label_smoothing, z_loss, check_targets, fn)
    return loss, lse


def cross_entropy_kernel(input, target, ignore_index, reduction, label_smoothing, z_loss, check_targets):
    return _ce_forward(input, target, ignore_index, reduction, label_smoothing, z_loss, check_targets, False, True)


def cross_entropy_fake(input, target, ignore_index, reduction, label_smoothing, z_loss, check_targets):
    return _ce_forward(input, target, ignore_index, reduction, label_smoothing, z_loss, check_targets, False, False)


def cross_entropy_inplace_kernel(input, target, ignore_index, reduction, label_smoothing, z_loss, check_targets):
    return _ce_forward(input, target, ignore_index, reduction, label_smoothing, z_loss, check_targets, True, True)


def cross_entropy_inplace_fake(input, target, ignore_index, reduction, label_smoothing, z_loss, check_targets):
    return _ce_forward(input, target, ignore_index, reduction, label_smoothing, z_loss, check_targets, True, False)


def _cross_entropy_backward(grad_loss, input, target, lse, ignore_index, reduction, label_smoothing, z_loss, run):
    fn = "cross_entropy_backward"
    _check_cross_entropy(input, target, ignore_index, reduction, label_smoothing, z_loss, fn)
    rows = input.shape[0]
    want = (rows,) if reduction == "none" else ()
    if tuple(grad_loss.shape) != want:
        raise ValueError(f"duet.{fn}: grad_loss has shape {tuple(grad_loss.shape)}, want {want} for "
                         f"reduction {reduction!r}")
    if tuple(lse.shape) != (rows,) or lse.dtype != torch.float32:
        raise ValueError(f"duet.{fn}: lse must be float32 of shape ({rows},), got {lse.dtype} {tuple(lse.shape)}")
    grad = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    if run and rows > 0:
        FL.launch_cross_entropy_backward(input, target, lse, grad_loss, grad, ignore_index, reduction,
                                        label_smoothing, z_loss, fn)
    return grad


def cross_entropy_backward_kernel(grad_loss, input, target, lse, ignore_index, reduction, label_smoothing, z_loss):
    return _cross_entropy_backward(grad_loss, input, target, lse, ignore_index, reduction, label_smoothing, z_loss,
                                   True)


def cross_entropy_backward_fake(grad_loss, input, target, lse, ignore_index, reduction, label_smoothing, z_loss):
    return _cross_entropy_backward(grad_loss, input, target, lse, ignore_index, reduction, label_smoothing, z_loss,
                                   False)


def _cross_entropy_setup(ctx, inputs, output):
    input, target, ignore_index, reduction, label_smoothing, z_loss = inputs[:6]
    ctx.save_for_backward(input, target, output[1])
    ctx.mark_non_differentiable(output[1])
    ctx.options = (ignore_index, reduction, label_smoothing, z_loss)


def _cross_entropy_grad(ctx, grad_loss, _grad_lse):
    input, target, lse = ctx.saved_tensors
    grad = None
    if ctx.needs_input_grad[0]:
        grad = _CROSS_ENTROPY_BACKWARD(grad_loss, input, target, lse, *ctx.options)
    return grad, None, None, None, None, None, None


# ------------------------------------------------------------------ registration

_OPS = (
    # name, schema, kernel, fake, (setup_context, backward) or None, mutated argument
    ("masked_softmax_backward", MASKED_SOFTMAX_BACKWARD_SCHEMA, masked_softmax_backward_kernel,
     masked_softmax_backward_fake, None, ()),
    ("masked_softmax", MASKED_SOFTMAX_SCHEMA, masked_softmax_kernel, masked_softmax_fake,
     (_masked_softmax_setup, _masked_softmax_grad), ()),
    ("cross_entropy_backward", CROSS_ENTROPY_BACKWARD_SCHEMA, cross_entropy_backward_kernel,
     cross_entropy_backward_fake, None, ()),
    ("cross_entropy", CROSS_ENTROPY_SCHEMA, cross_entropy_kernel, cross_entropy_fake,
     (_cross_entropy_setup, _cross_entropy_grad), ()),
    ("cross_entropy_inplace", CROSS_ENTROPY_INPLACE_SCHEMA, cross_entropy_inplace_kernel, cross_entropy_inplace_fake,
     None, ("input",)),
)


def _register_custom_ops():
    """torch >= 2.4: custom_op, register_fake, register_autograd."""
    for name, schema, kernel, fake, autograd, mutates in _OPS:
        op = torch.library.custom_op(f"duet::{name}", kernel, mutates_args=mutates, schema=schema)
        op.register_fake(fake)
        if autograd is not None:
            setup, backward = autograd
            op.register_autograd(backward, setup_context=setup)


def _register_library(library):
    """Older torch (Debian's 1.13): the Library of _ops.py, Meta kernels, and
    an Autograd kernel (an autograd.Function) for the differentiable ops."""
    for name, schema, kernel, fake, autograd, _ in _OPS:
        library.define(name + schema)
        for key in ("CPU", "CUDA"):
            library.impl(name, kernel, key)
        library.impl(name, fake, "Meta")
        if autograd is None:
            library.impl(name, fake, "AutogradMeta")
        else:
            library.impl(name, _autograd_kernel(name, kernel, fake, *autograd), "Autograd")


def _autograd_kernel(name, kernel, fake, setup, backward):
    """An Autograd kernel: an autograd.Function whose forward runs the op's
    kernel (the fake one for meta tensors), with the same setup_context and
    backward as the torch >= 2.4 registration."""

    def forward(ctx, *inputs):
        output = (fake if inputs[0].device.type == "meta" else kernel)(*inputs)
        setup(ctx, inputs, output)
        return output

    def grad(ctx, *grads):
        return backward(ctx, *grads)

    # named so that grad_fn reads e.g. DuetCrossEntropyBackward
    cls_name = "Duet" + "".join(part.capitalize() for part in name.split("_"))
    function = type(cls_name, (torch.autograd.Function,),
                    {"forward": staticmethod(forward), "backward": staticmethod(once_differentiable(grad))})
    return function.apply


if not _ops.registered("cross_entropy_inplace"):
    if hasattr(torch.library, "custom_op"):
        _register_custom_ops()
    else:
        _register_library(_ops._library)

_MASKED_SOFTMAX = torch.ops.duet.masked_softmax.default
_MASKED_SOFTMAX_BACKWARD = torch.ops.duet.masked_softmax_backward.default
_CROSS_ENTROPY = torch.ops.duet.cross_entropy.default
_CROSS_ENTROPY_BACKWARD = torch.ops.duet.cross_entropy_backward.default
_CROSS_ENTROPY_INPLACE = torch.ops.duet.cross_entropy_inplace.default
_compiling = _ops._compiling


# ------------------------------------------------------------------ the in-place (memory-saving) mode

def _capturing(t):
    """Whether t is a CUDA tensor of a stream under CUDA graph capture (where
    reading a value back is not allowed)."""
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


class DuetCrossEntropyInplace(torch.autograd.Function):
    """The forward writes the gradient (for an upstream gradient of 1) over
    the logits and keeps it; the backward scales it in place by the upstream
    gradient, which it skips when that is exactly 1 (a scalar read: on a GPU,
    a synchronization)."""

    @staticmethod
    def forward(ctx, input, target, ignore_index, reduction, label_smoothing, z_loss, check_targets):
        loss, lse = _CROSS_ENTROPY_INPLACE(input, target, ignore_index, reduction, label_smoothing, z_loss,
                                           check_targets)
        ctx.save_for_backward(input)  # now the gradient
        ctx.mark_non_differentiable(lse)
        ctx.reduction = reduction
        return loss, lse

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss, _grad_lse):
        (grad,) = ctx.saved_tensors
        if ctx.reduction == "none":
            torch.mul(grad, grad_loss.unsqueeze(1), out=grad)
        elif not (T.dispatch_is_plain() and not _capturing(grad_loss) and bool(grad_loss == 1)):
            torch.mul(grad, grad_loss, out=grad)
        return grad, None, None, None, None, None, None


# ------------------------------------------------------------------ public functions

def _number(value, kind, fn, name):
    """value as a Python int or float (numpy's scalars included; bool and
    tensors refused, as torch's schemas refuse them)."""
    if not isinstance(value, bool) and not isinstance(value, torch.Tensor):
        if kind is int and isinstance(value, numbers.Integral):
            return int(value)
        if kind is float and isinstance(value, numbers.Real):
            return float(value)
    raise TypeError(f"duet.{fn}: {name} must be {'a float' if kind is float else 'an int'}, "
                    f"got {type(value).__name__}")


def _flag(value, fn, name):
    if not isinstance(value, bool):
        raise TypeError(f"duet.{fn}: {name} must be a bool, got {type(value).__name__}")
    return value


def masked_softmax(input, mask=None, *, scale=1.0, causal=False, causal_offset=0, zero_masked_rows=False):
    """softmax(scale * input + mask) over the last dimension, in input's
    dtype (arithmetic in float32); differentiable with respect to input (and
    to a floating-point mask).

    input: float32, float16 or bfloat16, at least 1-d. An input of ndim >= 2
      is seen as [..., seq_q, seq_k] scores: rows of seq_k elements, query i
      the second-to-last index (the causal mask and broadcast masks use it).
    mask: None; a bool tensor, True = masked out (as Tensor.masked_fill and
      Megatron take it: the opposite of F.scaled_dot_product_attention's
      attn_mask, where True means "take part"; pass ~attn_mask); or a
      floating-point tensor added to the scaled scores (-inf masks out),
      cast to input's dtype if it has another. It broadcasts to input's
      shape like any torch operand; broadcast dimensions are read through
      strides of 0 (a [B, 1, Sq, Sk] mask over [B, H, Sq, Sk] scores is read
      once per head, not copied). Layouts the kernel cannot address with
      (batch, head, row) strides (more than three separate strided leading
      groups, e.g. [B1, 1, B2, 1, Sk] over [B1, H1, B2, H2, Sk]) are copied
      into a dense mask of input's shape; a broadcast or strided last
      dimension is copied to contiguous columns.
    scale: the scores' factor (1 / temperature for sampling; 1/sqrt(d) for
      attention), applied before the mask is added.
    causal: generates the causal mask (no tensor read): column j of query i
      is masked out when j > i + causal_offset. causal_offset=0 is
      torch.tril's convention (top-left aligned); seq_k - seq_q gives the
      bottom-right alignment of FlashAttention and of
      scaled_dot_product_attention with a KV cache. Takes no `mask`.
    zero_masked_rows: a row whose every element is masked out gives NaN
      (False, torch's softmax of a row of -inf) or zeros (True, what
      attention wants). Its gradient is 0 either way.
    """
    fn = "masked_softmax"
    if not _compiling():
        if not isinstance(input, torch.Tensor):
            raise TypeError(f"duet.{fn}: input must be a torch.Tensor, got {type(input).__name__}")
        scale = _number(scale, float, fn, "scale")
        causal = _flag(causal, fn, "causal")
        causal_offset = _number(causal_offset, int, fn, "causal_offset")
        zero_masked_rows = _flag(zero_masked_rows, fn, "zero_masked_rows")
    return _MASKED_SOFTMAX(input, mask, float(scale), causal, causal_offset, zero_masked_rows)


def masked_softmax_backward(output, grad_output, *, scale=1.0):
    """The input's gradient of masked_softmax from its output:
    scale * output * (grad_output - sum(grad_output * output)) over the last dimension."""
    return _MASKED_SOFTMAX_BACKWARD(grad_output, output, float(scale))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0, *, z_loss=0.0, return_lse=False, inplace_backward=False,
                  check_targets=False):
    """torch.nn.functional.cross_entropy with class-index targets through
    duet's fused kernels: the forward reads the logits once; arithmetic in
    float32; the loss in input's dtype (like torch). Differentiable with
    respect to input.

    Supported subset of torch's arguments (same names and order):
      input: [N, C] logits (or [C] with a 0-d target), float32, float16 or
        bfloat16; the class dimension last. [N, C, d1, ...] (class dimension
        1) is refused: move the class dimension last and flatten to [M, C].
      target: int64 or int32 class indices [N] (or 0-d); class-probability
        targets are refused.
      weight, size_average, reduce: only None (NotImplementedError
        otherwise; size_average and reduce are deprecated in torch).
      ignore_index, reduction ('none', 'mean', 'sum'), label_smoothing: as
        torch. The mean over rows that are all ignored is NaN, like torch's.
    duet's own (keyword-only):
      z_loss: adds z_loss * lse**2 to each non-ignored row's loss (PaLM's
        auxiliary loss; lse = logsumexp of the row).
      return_lse: returns (loss, lse), lse the float32 logsumexp of each row
        [N] (detached: no gradient flows back through it).
      inplace_backward: the memory-saving mode (as Liger-Kernel and quack
        have it): the forward writes the gradient into the logits' own
        memory, OVERWRITING THE LOGITS, and the backward only scales it by the
        upstream gradient (in place; skipped when that is exactly 1 for
        mean/sum, a scalar read that synchronizes on a GPU). The logits must
        not be used again, by the caller or by the layer that made them
        (a layer that saved its output for its backward, such as tanh
        soft-capping, gets the gradient instead; torch >= 2.4 detects that
        through the version counter, 1.13 does not); a leaf tensor that
        requires grad is refused (its .grad would share its memory). Logits
        that need no gradient are not overwritten. Under torch.compile the
        default mode runs instead (in-place writes inside an autograd.Function
        are not traced reliably by dynamo).
      check_targets: a target outside [0, C) other than ignore_index raises
        IndexError on the CPU always; on a GPU that row's loss is NaN, and
        check_targets=True reads the count of such rows after the call (a
        synchronization; not inside CUDA graph capture) and raises IndexError.

    The default mode saves the logits and lse (N floats) for the backward,
    which reads the logits once and writes the gradient once.
    """
    fn = "cross_entropy"
    # The unsupported arguments and shapes are refused under torch.compile too
    # (constants and tensor metadata to dynamo); the type checks of the
    # numbers only in eager (dynamo may pass an int as a SymInt).
    for name, value in (("weight", weight), ("size_average", size_average), ("reduce", reduce)):
        if value is not None:
            raise NotImplementedError(f"duet.{fn}: {name}= is not supported (only None); use "
                                      f"torch.nn.functional.cross_entropy for {name}")
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"duet.{fn}: input must be a torch.Tensor, got {type(input).__name__}")
    if not isinstance(target, torch.Tensor):
        raise TypeError(f"duet.{fn}: target must be a torch.Tensor, got {type(target).__name__}")
    if target.is_floating_point():
        raise NotImplementedError(f"duet.{fn}: class-probability targets (target of dtype {target.dtype}) are "
                                  "not supported; duet takes int64 or int32 class indices")
    if input.dim() not in (1, 2):
        raise NotImplementedError(
            f"duet.{fn}: input of shape {tuple(input.shape)}: duet takes [N, C] or [C] (the class dimension "
            "last); for torch's [N, C, d1, ...] use input.movedim(1, -1).reshape(-1, C) and target.reshape(-1)")
    if input.dim() == 1 and target.dim() != 0:
        raise ValueError(f"duet.{fn}: input of shape {tuple(input.shape)} takes a 0-d target, got shape "
                         f"{tuple(target.shape)}")
    if not _compiling():
        ignore_index = _number(ignore_index, int, fn, "ignore_index")
        label_smoothing = _number(label_smoothing, float, fn, "label_smoothing")
        z_loss = _number(z_loss, float, fn, "z_loss")
        return_lse = _flag(return_lse, fn, "return_lse")
        inplace_backward = _flag(inplace_backward, fn, "inplace_backward")
        check_targets = _flag(check_targets, fn, "check_targets")
        if not isinstance(reduction, str):
            raise TypeError(f"duet.{fn}: reduction must be a str, got {type(reduction).__name__}")
    one_row = input.dim() == 1
    x, t = (input.unsqueeze(0), target.reshape(1)) if one_row else (input, target)
    args = (x, t, ignore_index, reduction, float(label_smoothing), float(z_loss), check_targets)
    if inplace_backward and not _compiling() and torch.is_grad_enabled() and input.requires_grad:
        if input.is_leaf:
            raise ValueError(f"duet.{fn}: inplace_backward=True overwrites the logits with their gradient, and "
                             "input is a leaf tensor that requires grad (its .grad would share its memory); pass "
                             "the output of the layer that makes the logits, or inplace_backward=False")
        loss, lse = DuetCrossEntropyInplace.apply(*args)
    else:
        loss, lse = _CROSS_ENTROPY(*args)
    if loss.dtype != input.dtype:
        loss = loss.to(input.dtype)
    if one_row:
        loss, lse = loss.reshape(()), lse.reshape(())
    if return_lse:
        return loss, lse.detach()
    return loss
