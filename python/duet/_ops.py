"""duet's ops registered with torch, and the public functions over them.

Registered ops (torch.ops.duet.*), with torch's argument names:

    softmax(Tensor input, int dim, ScalarType? dtype) -> Tensor
    log_softmax(Tensor input, int dim, ScalarType? dtype) -> Tensor
    softmax_out(Tensor input, int dim, ScalarType? dtype, Tensor(a!) out) -> ()
    log_softmax_out(Tensor input, int dim, ScalarType? dtype, Tensor(a!) out) -> ()
    softmax_backward(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor
    log_softmax_backward(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor

With torch >= 2.4 they are torch.library.custom_op ops with fake kernels
(torch.compile(fullgraph=True) and torch.export trace them) and autograd
through the backward ops; with older torch, torch.library.Library ops with
Meta kernels and an Autograd kernel.

Any `dim` runs without copies where the tensors allow: over rows where
`dim` is last or moving it last gives rows (a channels-last tensor over its
channels), else as interleaved rows (the dimensions before `dim` collapse
to one, those after to one of unit stride: every contiguous tensor); other
layouts are copied first. Results are laid out as torch.softmax lays them
out (the input's strides where it is dense).

dtype=float32 of f16/bf16 input (torch's softmax(x, dim, dtype=torch.float32))
runs the cast inside the kernel's one pass, forward and backward (the
gradient leaves in the input's dtype), wherever the result has rows over
`dim`; other casts, and the interleaved layouts, cast first with torch (a
copy) and run duet in place over that copy, which becomes the result.
"""
import torch
from torch.autograd.function import once_differentiable

from . import _cai
from . import _lib
from . import _tensor as T

FORWARD_SCHEMA = "(Tensor input, int dim, ScalarType? dtype) -> Tensor"
OUT_SCHEMA = "(Tensor input, int dim, ScalarType? dtype, Tensor(a!) out) -> ()"
BACKWARD_SCHEMA = "(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor"
NAMES = ("softmax", "log_softmax")  # indexed by `log`


# ------------------------------------------------------------------ kernels (real and fake)

def _forward_kernel(log, input, dim, dtype, out=None, run=True):
    """The result of softmax/log_softmax (into `out` if given). run=False
    computes only the result's shape, dtype and layout: the fake kernel."""
    fn = NAMES[log]
    result_dtype = T.result_dtype(input, dtype, fn)
    T.check_device(input, fn, "input")
    dim = T.normalize_dim(dim, input.dim(), fn)
    if out is not None:
        T.check_like(input, out, fn, "out", "input", dtype=result_dtype)
    if input.dtype == result_dtype:
        x = input
        y = T.result_like(x, dim, result_dtype) if out is None else out
    elif T.widens(input.dtype, result_dtype) and T.has_rows(input, dim):
        # f16/bf16 into float32: the kernel reads x as it is and writes y
        # as float32, one pass.
        y = T.result_like(input, dim, result_dtype) if out is None else out
        if not run or T.launch_widening(log, (input,), y, dim, fn):
            return y
        x = input.to(result_dtype)
    elif out is None and run:
        # The cast is a fresh tensor laid out as the result would be: the
        # kernel runs in place over it, so the call holds one result-sized
        # buffer, not two.
        x = y = input.to(result_dtype, copy=True)
    else:
        x = input.to(result_dtype)
        y = T.result_like(x, dim, result_dtype) if out is None else out
    if run:
        T.launch_over(log, (x,), y, dim, fn)
    return y


def _backward_kernel(log, grad_output, output, dim, input_dtype, out=None, run=True):
    """The gradient of the input from the forward's output and the gradient
    of that output, over `dim`, in `input_dtype` (cast after the kernel
    where the forward cast its input)."""
    fn = NAMES[log] + "_backward"
    T.result_dtype(output, None, fn)
    T.check_device(output, fn, "output")
    T.check_like(output, grad_output, fn, "grad_output", "output")
    dim = T.normalize_dim(dim, output.dim(), fn)
    if out is not None:
        T.check_like(output, out, fn, "out", "output")
    if out is None and input_dtype is not None and T.widens(input_dtype, output.dtype) and T.has_rows(output, dim):
        # The forward widened f16/bf16 into float32: dx in the input's
        # dtype, the cast in the kernel's pass.
        dx = T.result_like(output, dim, input_dtype)
        if not run or T.launch_widening(log, (output, grad_output), dx, dim, fn):
            return dx
    dx = T.result_like(output, dim, output.dtype) if out is None else out
    if run:
        T.launch_over(log, (output, grad_output), dx, dim, fn)
    return dx if input_dtype is None or input_dtype == dx.dtype else dx.to(input_dtype)


def _kernels(log):
    """(forward, forward fake, out, out fake, backward, backward fake) for one
    op, as functions with the schemas' argument names."""
    def forward(input, dim, dtype):
        # The eager fast path first: inside a compiled graph the op's
        # kernel is what runs on every call, so its host time counts.
        if dtype is None:
            result = T.fast_call(log, input, (), dim, None)
            if result is not None:
                return result
        return _forward_kernel(log, input, dim, dtype)

    def forward_fake(input, dim, dtype):
        return _forward_kernel(log, input, dim, dtype, run=False)

    def forward_out(input, dim, dtype, out):
        _forward_kernel(log, input, dim, dtype, out=out)

    def forward_out_fake(input, dim, dtype, out):
        _forward_kernel(log, input, dim, dtype, out=out, run=False)

    def backward(grad_output, output, dim, input_dtype):
        if input_dtype is None or input_dtype == output.dtype:
            result = T.fast_call(log, output, (grad_output,), dim, None)
            if result is not None:
                return result
        return _backward_kernel(log, grad_output, output, dim, input_dtype)

    def backward_fake(grad_output, output, dim, input_dtype):
        return _backward_kernel(log, grad_output, output, dim, input_dtype, run=False)

    return forward, forward_fake, forward_out, forward_out_fake, backward, backward_fake


def _save_for_backward(ctx, inputs, output):
    input, dim, _ = inputs
    ctx.save_for_backward(output)
    ctx.dim = dim
    ctx.input_dtype = input.dtype


# ------------------------------------------------------------------ registration

_library = None  # the torch.library.Library of the older API, kept alive


def _register_custom_ops():
    """torch >= 2.4: custom_op, register_fake, register_autograd."""
    for log, name in enumerate(NAMES):
        forward, forward_fake, forward_out, forward_out_fake, backward, backward_fake = _kernels(bool(log))
        bwd = torch.library.custom_op(f"duet::{name}_backward", backward, mutates_args=(), schema=BACKWARD_SCHEMA)
        bwd.register_fake(backward_fake)
        fwd = torch.library.custom_op(f"duet::{name}", forward, mutates_args=(), schema=FORWARD_SCHEMA)
        fwd.register_fake(forward_fake)
        out = torch.library.custom_op(f"duet::{name}_out", forward_out, mutates_args=("out",), schema=OUT_SCHEMA)
        out.register_fake(forward_out_fake)

        def grad(ctx, grad_output, bwd_op=getattr(torch.ops.duet, f"{name}_backward").default):
            (output,) = ctx.saved_tensors
            return bwd_op(grad_output, output, ctx.dim, ctx.input_dtype), None, None

        fwd.register_autograd(grad, setup_context=_save_for_backward)


def _register_library():
    """Older torch (Debian's 1.13): torch.library.Library with Meta kernels
    and an Autograd kernel around an autograd.Function."""
    global _library
    _library = torch.library.Library("duet", "DEF")
    for log, name in enumerate(NAMES):
        forward, forward_fake, forward_out, forward_out_fake, backward, backward_fake = _kernels(bool(log))
        for op, schema, kernel, fake in ((name, FORWARD_SCHEMA, forward, forward_fake),
                                         (f"{name}_out", OUT_SCHEMA, forward_out, forward_out_fake),
                                         (f"{name}_backward", BACKWARD_SCHEMA, backward, backward_fake)):
            _library.define(op + schema)
            for key in ("CPU", "CUDA"):
                _library.impl(op, kernel, key)
            _library.impl(op, fake, "Meta")
            if op != name:  # 1.13 has no autograd fallthrough for meta tensors; the forward has its Autograd kernel
                _library.impl(op, fake, "AutogradMeta")
        _library.impl(name, _autograd_kernel(name, forward, forward_fake), "Autograd")


def _autograd_kernel(name, forward_kernel, forward_fake):
    """The Autograd kernel of op `name`: an autograd.Function whose forward
    runs the op's kernel (the same for every device the dispatch below
    autograd would pick; the fake one for meta tensors)."""
    backward_op = getattr(torch.ops.duet, f"{name}_backward").default

    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, dim, dtype):
            kernel = forward_fake if input.device.type == "meta" else forward_kernel
            output = kernel(input, dim, dtype)
            _save_for_backward(ctx, (input, dim, dtype), output)
            return output

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_output):
            (output,) = ctx.saved_tensors
            return backward_op(grad_output, output, ctx.dim, ctx.input_dtype), None, None

    return Function.apply


def registered(name):
    """Whether torch.ops.duet.<name> exists already (registered by another
    copy of this package loaded in the same process)."""
    try:
        getattr(torch.ops.duet, name)
        return True
    except (AttributeError, RuntimeError):
        return False


if not registered("softmax_backward"):
    if hasattr(torch.library, "custom_op"):
        _register_custom_ops()
    else:
        _register_library()

_FORWARD = (torch.ops.duet.softmax.default, torch.ops.duet.log_softmax.default)
_FORWARD_OUT = (torch.ops.duet.softmax_out.default, torch.ops.duet.log_softmax_out.default)
_BACKWARD = (torch.ops.duet.softmax_backward.default, torch.ops.duet.log_softmax_backward.default)

_compiler = getattr(torch, "compiler", None)
_compiling = getattr(_compiler, "is_compiling", None) or (lambda: False)


# ------------------------------------------------------------------ eager autograd

class _EagerAutograd(torch.autograd.Function):
    """softmax/log_softmax of a plain tensor that requires grad, in eager
    mode: forward and backward straight to libduet (the fast path where the
    tensors allow it, else the general launch). The registered op's autograd
    does the same work behind torch's custom-op dispatch, which costs tens
    of microseconds a call on the host (bench/NOTES.md, v40); compiled
    graphs, functorch transforms and dispatch modes keep the registered op.
    dtype: None, or float32 of f16/bf16 input (the widening kernels; the
    gradient in the input's dtype). Once differentiable, as the registered
    op's backward."""

    @staticmethod
    def forward(ctx, input, log, dim, dtype):
        output = None
        if dtype is None:
            output = T.fast_call(log, input, (), dim, None)  # autograd is off inside forward
        if output is None:
            output = _forward_kernel(log, input, dim, dtype)
        ctx.save_for_backward(output)
        ctx.log, ctx.dim = log, dim
        ctx.input_dtype = None if dtype is None else input.dtype
        return output

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (output,) = ctx.saved_tensors
        grad_input = None
        if ctx.input_dtype is None:
            grad_input = T.fast_call(ctx.log, output, (grad_output,), ctx.dim, None)
        if grad_input is None:
            grad_input = _backward_kernel(ctx.log, grad_output, output, ctx.dim, ctx.input_dtype)
        return grad_input, None, None, None


_eager_autograd = _EagerAutograd.apply
_Tensor = torch.Tensor


def _takes_eager_autograd(input, dtype, out):
    """Whether a call goes through _EagerAutograd: a plain tensor of a
    supported dtype on a device duet has seen, needing autograd, no dtype=
    (or float32 of f16/bf16 input: the widening kernels) and no out=,
    nothing intercepting torch's dispatch."""
    return (out is None and type(input) is _Tensor and input.requires_grad and T._is_grad_enabled()
            and input.dtype in T.DTYPE_CODES and (dtype is None or T.widens(input.dtype, dtype))
            and input.dim() > 0 and not input.is_meta and input.get_device() in T._DEVICE_OF
            and T.dispatch_is_plain())


# ------------------------------------------------------------------ public functions

def _coerce(t, fn, what):
    """t as a torch tensor: a tensor as it is, a __cuda_array_interface__
    object as a view (no copy); anything else is a TypeError."""
    if isinstance(t, torch.Tensor):
        return t
    if hasattr(t, "__cuda_array_interface__"):
        _cai.check_typestr(_cai.interface(t, fn, what), fn, what, torch_available=True)
        return torch.as_tensor(t)
    raise TypeError(f"duet.{fn}: {what} must be a torch.Tensor or have __cuda_array_interface__, "
                    f"got {type(t).__name__}")


def _forward(log, input, dim, dtype, out):
    if _compiling():
        if out is None:
            return _FORWARD[log](input, dim, dtype)
        _FORWARD_OUT[log](input, dim, dtype, out)
        return out
    if dtype is None:
        result = T.fast_call(log, input, (), dim, out)
        if result is not None:
            return result
    if _takes_eager_autograd(input, dtype, out):
        T.normalize_dim(dim, input.dim(), NAMES[log])  # an IndexError naming dim
        return _eager_autograd(input, log, dim, dtype)
    fn = NAMES[log]
    x = _coerce(input, fn, "input")
    T.normalize_dim(dim, x.dim(), fn)  # a TypeError/IndexError naming dim, not the dispatcher's schema error
    if out is None:
        return _FORWARD[log](x, dim, dtype)
    y = _coerce(out, fn, "out")
    if torch.is_grad_enabled() and (x.requires_grad or y.requires_grad):
        raise RuntimeError(f"duet.{fn}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    _FORWARD_OUT[log](x, dim, dtype, y)
    return out


def _backward(log, output, grad_output, dim, out):
    if not _compiling():
        result = T.fast_call(log, output, (grad_output,), dim, out)
        if result is not None:
            return result
        fn = NAMES[log] + "_backward"
        output, grad_output = _coerce(output, fn, "output"), _coerce(grad_output, fn, "grad_output")
        T.normalize_dim(dim, output.dim(), fn)
        if out is not None:
            with torch.no_grad():
                _backward_kernel(log, grad_output, output, dim, None, out=_coerce(out, fn, "out"))
            return out
    result = _BACKWARD[log](grad_output, output, dim, output.dtype)
    if out is None:
        return result
    out.copy_(result)
    return out


def softmax(input, dim=-1, dtype=None, *, out=None):
    """torch.softmax(input, dim, dtype) through duet's kernels; differentiable.

    input: float32, float16 or bfloat16 (any dtype with dtype= one of those),
    on a CUDA/ROCm device or the CPU (duet's host backend), or an object with
    __cuda_array_interface__. dtype: the result's, input cast to it first
    (float32 of f16/bf16 input: in the kernel's pass, no copy). out: written
    and returned (no autograd, like torch's out=)."""
    return _forward(0, input, dim, dtype, out)


def log_softmax(input, dim=-1, dtype=None, *, out=None):
    """torch.log_softmax(input, dim, dtype) through duet's kernels; differentiable."""
    return _forward(1, input, dim, dtype, out)


def softmax_backward(output, grad_output, dim=-1, *, out=None):
    """The input's gradient of softmax: output * (grad_output - sum(grad_output * output)) over dim."""
    return _backward(0, output, grad_output, dim, out)


def log_softmax_backward(output, grad_output, dim=-1, *, out=None):
    """The input's gradient of log_softmax: grad_output - exp(output) * sum(grad_output) over dim."""
    return _backward(1, output, grad_output, dim, out)


def copy_kernel(dst, src):
    """dst.copy_(src) by duet's own copy kernel (16-byte accesses, any byte
    offset; duet/device.hpp's duet::copy_kernel) on torch's current stream,
    for the benchmarks' copy ceiling (bench/compare.py). dst and src:
    contiguous tensors on one device, of the same number of bytes (any
    dtypes: the bytes are copied), not overlapping. CPU tensors are copied by
    the host backend (memcpy). Returns dst."""
    for name, t in (("dst", dst), ("src", src)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"duet.copy_kernel: {name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_contiguous():
            raise ValueError(f"duet.copy_kernel: {name} is not contiguous")
    if dst.device != src.device:
        raise ValueError(f"duet.copy_kernel: dst is on {dst.device}, src on {src.device}")
    nbytes = dst.numel() * dst.element_size()
    if nbytes != src.numel() * src.element_size():
        raise ValueError(f"duet.copy_kernel: dst holds {nbytes} bytes, src "
                         f"{src.numel() * src.element_size()}")
    if nbytes == 0:
        return dst
    dev = T.duet_device(src, "copy_kernel")
    index = src.get_device()
    _lib.copy_kernel(dev, dst.data_ptr(), src.data_ptr(), nbytes, T.raw_stream(index) if index >= 0 else None)
    return dst
