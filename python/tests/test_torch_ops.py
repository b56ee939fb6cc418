"""duet as a PyTorch op: torch.ops.duet.*, autograd through duet's kernels,
torch's signature (dim=, dtype=, out=), duet.nn, fake/meta kernels,
torch.compile(fullgraph=True), torch.export and CUDA graph capture.

Tests that need torch >= 2.4 (custom_op, compile, export) skip on older
torch, saying so; CUDA tests skip without a GPU.
"""
import os
import pathlib
import re
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")

from test_duet_torch import (DEVICES, OPS, ROOT, assert_rowwise_close, duet, floor_for, make,  # noqa: E402
                             needs_cuda, reference, sync)

needs_custom_op = pytest.mark.skipif(
    not hasattr(torch.library, "custom_op"),
    reason=f"needs torch >= 2.4 (torch.library.custom_op, torch.compile, torch.export); this is torch {torch.__version__}")
MODULES = {"softmax": duet.nn.Softmax, "log_softmax": duet.nn.LogSoftmax}
TORCH_OPS = {"softmax": torch.ops.duet.softmax, "log_softmax": torch.ops.duet.log_softmax}


def test_version_is_the_cmake_project_version():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert duet.__version__ == re.search(r"project\(\s*duet\s+VERSION\s+([0-9.]+)", cmake).group(1)
    assert duet.__version__ == duet.version()


def test_ops_are_registered():
    for name in ("softmax", "log_softmax"):
        for suffix in ("", "_out", "_backward"):
            assert hasattr(getattr(torch.ops.duet, name + suffix), "default"), name + suffix
    x = make((5, 40), torch.float32, "cpu", seed=30)
    assert torch.equal(torch.ops.duet.softmax(x, -1, None), duet.softmax(x))
    assert torch.equal(torch.ops.duet.log_softmax(x, 0, None), duet.log_softmax(x, 0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(OPS))
def test_requires_grad_gives_a_grad_fn(op, device):
    """The issue's first symptom: gradients were dropped silently."""
    x = make((6, 33), torch.float32, device, seed=31).requires_grad_(True)
    for y in (OPS[op][0](x), OPS[op][0](x, 0), MODULES[op](dim=1)(x), TORCH_OPS[op](x, -1, None)):
        assert y.grad_fn is not None and y.requires_grad
    with torch.no_grad():
        assert OPS[op][0](x).grad_fn is None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(OPS))
def test_module_gradient_matches_torch(op, device):
    x = make((4, 7, 9), torch.float32, device, seed=32)
    w = make((4, 7, 9), torch.float32, device, scale=1.0, seed=33)
    for dim in (-1, 1, 0):
        xd = x.clone().requires_grad_(True)
        MODULES[op](dim=dim)(xd).mul(w).sum().backward()
        xr = x.double().requires_grad_(True)
        OPS[op][2](xr, dim).mul(w.double()).sum().backward()
        assert_rowwise_close(xd.grad, xr.grad, 1e-5, dim=dim, floor=float(w.abs().max()) / x.shape[dim],
                             what=f"duet.nn {op} dim={dim}")
    assert repr(MODULES[op](dim=2)).endswith("(dim=2)")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(OPS))
def test_gradcheck(op, device):
    # duet has no float64 kernels: float32 finite differences with a step and
    # tolerances for float32 rounding (eps 1e-3: truncation ~1e-6, rounding ~1e-4).
    for shape, dim in (((3, 8), -1), ((5, 4), 0), ((2, 3, 4), 1)):
        x = make(shape, torch.float32, device, scale=1.0, seed=34).requires_grad_(True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "not double precision"
            assert torch.autograd.gradcheck(lambda t: OPS[op][0](t, dim), (x,), eps=1e-3, atol=2e-3, rtol=1e-2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(OPS))
def test_dim_dtype_and_out(op, device):
    x = make((3, 5, 6), torch.bfloat16, device, seed=35)
    for dim in (0, 1, 2, -1, -2, -3):
        y = OPS[op][0](x, dim)
        assert y.dtype == torch.bfloat16 and y.shape == x.shape
        assert_rowwise_close(y, reference(op, x, dim), 1e-2, dim=dim, floor=floor_for(op), what=f"dim={dim}")
        y32 = OPS[op][0](x, dim, dtype=torch.float32)  # bf16 in, f32 out
        assert y32.dtype == torch.float32
        assert_rowwise_close(y32, OPS[op][2](x.float(), dim), 1e-5, dim=dim, floor=floor_for(op),
                             what=f"dtype=float32 dim={dim}")
        out = torch.full(x.shape, float("nan"), dtype=torch.float32, device=device)
        assert OPS[op][0](x, dim=dim, dtype=torch.float32, out=out) is out
        assert torch.equal(out, y32)
    ints = torch.arange(12, device=device).reshape(3, 4)
    assert_rowwise_close(OPS[op][0](ints, 0, torch.float16), OPS[op][2](ints.double(), 0), 1e-2, dim=0,
                         floor=floor_for(op), what="integer input with dtype=")
    # the gradient of a cast input comes back in the input's dtype
    xg = x.clone().requires_grad_(True)
    OPS[op][0](xg, 1, dtype=torch.float32).sum().backward()
    assert xg.grad.dtype == torch.bfloat16 and xg.grad.shape == x.shape


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(OPS))
def test_dtype_float32_casts_in_the_kernel(monkeypatch, op, device):
    """dtype=float32 of f16/bf16 input where the result has rows over dim:
    one libduet pass reads x as it is and writes float32 (no copy of the
    input); the gradient comes back in the input's dtype from one pass too.
    Values and gradients match torch's softmax(x, dim, dtype=torch.float32)."""
    from duet import _tensor
    widened, plain = [], []
    launch_widening, launch_over = _tensor.launch_widening, _tensor.launch_over

    def spy_widening(log, inputs, out, dim, fn):
        widened.append((len(inputs), out.dtype))
        return launch_widening(log, inputs, out, dim, fn)

    def spy_over(log, inputs, out, dim, fn):
        plain.append(out.dtype)
        return launch_over(log, inputs, out, dim, fn)

    monkeypatch.setattr(_tensor, "launch_widening", spy_widening)
    monkeypatch.setattr(_tensor, "launch_over", spy_over)
    for dtype in (torch.bfloat16, torch.float16):
        # dim 2 of a contiguous tensor, and dim 1 of one whose dim 1 is
        # innermost (channels last): both rows over dim.
        x = make((3, 5, 67), dtype, device, seed=38)
        cl = make((2, 3, 4, 33), dtype, device, seed=39).permute(0, 3, 1, 2)  # dim 1 has stride 1
        for t, dim in ((x, 2), (x, -1), (cl, 1)):
            before = t.clone()
            widened.clear()
            plain.clear()
            y = OPS[op][0](t, dim, dtype=torch.float32)
            assert widened == [(1, torch.float32)] and plain == []
            assert y.dtype == torch.float32 and y.stride() == torch.empty_like(t).stride()
            assert_rowwise_close(y, OPS[op][2](t.float(), dim), 1e-5, dim=dim, floor=floor_for(op),
                                 what=f"{dtype} dim={dim}")
            assert torch.equal(t, before)
            # The gradient: dx in the input's dtype, from one widening pass.
            w = make(t.shape, torch.float32, device, scale=1.0, seed=40)
            td = t.clone().requires_grad_(True)
            widened.clear()
            OPS[op][0](td, dim, dtype=torch.float32).mul(w).sum().backward()
            assert widened == [(1, torch.float32), (2, dtype)] and plain == []
            tr = t.double().requires_grad_(True)
            OPS[op][2](tr, dim).mul(w.double()).sum().backward()
            assert td.grad.dtype == dtype
            assert_rowwise_close(td.grad, tr.grad, 1e-2, dim=dim, floor=2 * float(w.abs().max()) / t.shape[dim],
                                 what=f"{dtype} dim={dim} gradient")
    # An interleaved layout (dim 1 of a contiguous tensor) casts with torch
    # and runs in place over that copy.
    x = make((3, 5, 6), torch.bfloat16, device, seed=41)
    plain.clear()
    y = OPS[op][0](x, 1, dtype=torch.float32)
    assert y.dtype == torch.float32 and plain == [torch.float32]
    assert_rowwise_close(y, OPS[op][2](x.float(), 1), 1e-5, dim=1, floor=floor_for(op), what="dim=1")
    if device == "cuda":
        big = make((256, 8192), torch.bfloat16, device, seed=37)
        sync(device)
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
        y = OPS[op][0](big, -1, dtype=torch.float32)
        sync(device)
        assert torch.cuda.max_memory_allocated() - held <= y.numel() * 4 + (1 << 20)


@pytest.mark.parametrize("device", DEVICES)
def test_errors_name_the_argument(device):
    x = make((4, 8), torch.float32, device)
    with pytest.raises(TypeError, match="dim must be an int"):
        duet.softmax(x, dim=1.0)
    with pytest.raises(IndexError, match="dim out of range"):
        duet.log_softmax(x, -3)
    with pytest.raises(TypeError, match="dtype=torch.float64 is not supported"):
        duet.softmax(x, dtype=torch.float64)
    with pytest.raises(TypeError, match="complex"):
        duet.softmax(torch.ones(4, 8, dtype=torch.complex64, device=device))
    with pytest.raises(TypeError, match="out has dtype torch.float16, want torch.float32"):
        duet.softmax(x, out=torch.empty(4, 8, dtype=torch.float16, device=device))
    with pytest.raises(ValueError, match="out has shape"):
        duet.softmax(x, out=torch.empty(8, 4, device=device))
    with pytest.raises(TypeError, match="grad_output has dtype"):
        duet.softmax_backward(x, x.half())
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        duet.softmax(x.clone().requires_grad_(), out=torch.empty_like(x))
    with pytest.raises(TypeError, match="input must be a torch.Tensor"):
        duet.softmax("x")


class _Cai:
    def __init__(self, **interface):
        self.__cuda_array_interface__ = interface


def test_malformed_cuda_array_interface_names_the_field():
    good = {"shape": (2, 3), "typestr": "<f4", "data": (0, False), "version": 3}
    for field in ("shape", "typestr", "data"):
        broken = {k: v for k, v in good.items() if k != field}
        with pytest.raises(ValueError, match=f"no '{field}' field"):
            duet.softmax(_Cai(**broken))
    with pytest.raises(ValueError, match=r"\['shape'\]"):
        duet.softmax(_Cai(**dict(good, shape=(2, -1))))
    with pytest.raises(ValueError, match=r"\['data'\]"):
        duet.softmax(_Cai(**dict(good, data=0)))
    with pytest.raises(ValueError, match=r"\['strides'\]"):
        duet.softmax(_Cai(**dict(good, strides=(4,))))


def _run_python(code, **env):
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), capture_output=True, text=True,
                       timeout=120)
    return r.returncode, r.stdout + r.stderr


def test_a_library_that_is_not_libduet_is_an_oserror(tmp_path):
    package_parent = str(pathlib.Path(duet.__file__).parent.parent)
    not_a_library = tmp_path / "libduet.so"
    not_a_library.write_text("not an ELF file")
    code = ("import duet\ntry:\n    duet.version()\nexcept OSError as e:\n    print('OSError', e)\n")
    rc, out = _run_python(code, DUET_LIBRARY=str(not_a_library), PYTHONPATH=package_parent)
    assert rc == 0 and "OSError" in out and str(not_a_library) in out, out
    # a real shared library that is not libduet: the missing symbols are named
    libc = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6")
                 if os.path.exists(p)), None)
    if libc is not None:
        rc, out = _run_python(code, DUET_LIBRARY=libc, PYTHONPATH=package_parent)
        assert rc == 0 and "OSError" in out and "lacks duet_version" in out, out


def test_autograd_without_torch_is_an_import_error_naming_torch():
    code = ("import sys; sys.modules['torch'] = None\nimport duet\n"
            "for name in ('autograd', 'nn'):\n"
            "    try:\n        getattr(duet, name)\n    except ImportError as e:\n        assert 'torch' in str(e), e\n"
            "    else:\n        raise SystemExit(name + ' without torch')\nprint('ok')\n")
    rc, out = _run_python(code, PYTHONPATH=str(pathlib.Path(duet.__file__).parent.parent))
    assert rc == 0 and out.strip().endswith("ok"), out


@pytest.mark.parametrize("op", list(OPS))
def test_meta_kernels_give_the_real_layout(op):
    x = make((3, 4, 5), torch.float32, "cpu", seed=36)
    for dim in (-1, 0, 1):
        real = TORCH_OPS[op](x, dim, None)
        meta = TORCH_OPS[op](x.to("meta"), dim, None)
        assert meta.device.type == "meta" and meta.shape == real.shape and meta.stride() == real.stride()
    meta32 = TORCH_OPS[op](x.to("meta").bfloat16(), 1, torch.float32)
    assert meta32.dtype == torch.float32
    backward = getattr(torch.ops.duet, f"{op}_backward")
    y = TORCH_OPS[op](x, 1, None)
    real = backward(torch.ones_like(y), y, 1, torch.bfloat16)
    meta = backward(torch.ones_like(y, device="meta"), y.to("meta"), 1, torch.bfloat16)
    assert meta.dtype == real.dtype == torch.bfloat16 and meta.stride() == real.stride()


# ============================================================ torch >= 2.4: custom_op, compile, export

@needs_custom_op
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(OPS))
def test_opcheck(op, device):
    x = make((4, 33), torch.float32, device, seed=37).requires_grad_(True)
    for args in ((x, -1, None), (x, 0, None), (x.detach().bfloat16(), -1, torch.float32)):
        torch.library.opcheck(TORCH_OPS[op].default, args)
    y = TORCH_OPS[op](x.detach(), -1, None)
    backward = getattr(torch.ops.duet, f"{op}_backward").default
    torch.library.opcheck(backward, (torch.randn_like(y), y, -1, torch.float32))


class _Block(torch.nn.Module):
    """Attention scores through duet.softmax, the output through duet.nn.LogSoftmax."""

    def __init__(self, width=32, classes=11):
        super().__init__()
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.head = torch.nn.Linear(width, classes)
        self.log_softmax = duet.nn.LogSoftmax(dim=-1)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        attention = duet.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
        return self.log_softmax(self.head(attention @ v))


@needs_custom_op
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_without_graph_breaks(device):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _Block().to(device)
    x = torch.randn(2, 16, 32, device=device)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    backend = "inductor" if device == "cuda" else "aot_eager"  # inductor on the CPU would compile C++
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    want = model(x)
    got = compiled(x)
    assert_rowwise_close(got, want, 1e-5, floor=1.0, what="compiled forward")
    want.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled(x).sum().backward()
    for g, p in zip(grads, model.parameters()):
        assert torch.allclose(p.grad, g, rtol=1e-4, atol=1e-5)
    # dim= and dtype= compile too
    f = torch.compile(lambda t: duet.softmax(t, 0, dtype=torch.float32) + duet.log_softmax(t, out=torch.empty_like(t)),
                      fullgraph=True, backend=backend)
    t = torch.randn(8, 5, device=device)
    assert torch.allclose(f(t), torch.softmax(t, 0) + torch.log_softmax(t, -1), atol=1e-5)


@needs_custom_op
@pytest.mark.parametrize("device", DEVICES)
def test_export(device):
    torch.manual_seed(0)
    model = _Block().to(device)
    x = torch.randn(2, 16, 32, device=device)
    exported = torch.export.export(model, (x,))
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert "duet.softmax.default" in targets and "duet.log_softmax.default" in targets, targets
    assert_rowwise_close(exported.module()(x), model(x), 1e-5, floor=1.0, what="exported")


# ============================================================ CUDA graphs

# One row length per strategy: group_rows, block_row, cluster_row (Hopper;
# block_row_smem elsewhere), cluster_row_smem (Hopper forward; split_stream
# elsewhere) and past a cluster on chip grid_row (sm_80+, a cooperative
# launch and a caller workspace; split_stream elsewhere and backward past
# the GPU's capacity).
GRAPH_SHAPES = [(64, 33), (32, 4096), (8, 65536), (3, (1 << 20) + 5), (2, (1 << 22) + 5)]


@needs_cuda
@pytest.mark.parametrize("shape", GRAPH_SHAPES, ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_cuda_graph_capture_every_strategy(op, shape):
    """Capture forward and backward on a fresh stream (wide rows take their
    workspace from torch's allocator, so nothing is allocated with
    cudaMalloc during capture), replay on new data, compare with eager."""
    fwd, bwd = OPS[op][0], (duet.softmax_backward if op == "softmax" else duet.log_softmax_backward)
    x = make(shape, torch.float32, "cuda", seed=38)
    g = make(shape, torch.float32, "cuda", scale=1.0, seed=39)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up, as torch.cuda.graph asks
        bwd(fwd(x), g)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = fwd(x)
        dx = bwd(y, g)
    for seed in (40, 41):
        x.copy_(make(shape, torch.float32, "cuda", seed=seed))
        y.fill_(float("nan"))
        dx.fill_(float("nan"))
        graph.replay()
        sync("cuda")
        want_y = fwd(x)
        # Replay and eager agree to rounding, not always to the bit: wide rows
        # combine partial sums in the order their chunks finish.
        assert_rowwise_close(y, want_y, 1e-5, floor=floor_for(op), what=f"{op} {shape} forward replay vs eager")
        assert_rowwise_close(dx, bwd(want_y, g), 1e-4, floor=floor_for(op), what=f"{op} {shape} backward replay vs eager")
        assert_rowwise_close(y, reference(op, x), 1e-5, floor=floor_for(op), what=f"{op} {shape} replay")


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_graph_capture_over_dim_0(dtype):
    """Softmax over dim 0 of a tall matrix (interleaved_stream on GPUs: its
    queue in a workspace from torch's allocator) captured on a fresh stream,
    forward and backward, replayed on new data, against the reference."""
    shape, tol = (100000, 64), (1e-5 if dtype == torch.float32 else 1e-2)
    x = make(shape, dtype, "cuda", seed=42)
    g = make(shape, dtype, "cuda", scale=1.0, seed=43)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        duet.softmax_backward(duet.softmax(x, 0), g, 0)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = duet.softmax(x, 0)
        dx = duet.softmax_backward(y, g, 0)
    x.copy_(make(shape, dtype, "cuda", seed=44))
    y.fill_(float("nan"))
    dx.fill_(float("nan"))
    graph.replay()
    sync("cuda")
    assert_rowwise_close(y.double(), reference("softmax", x, 0), tol, dim=0, what="dim 0 replay")
    x64 = x.double().requires_grad_(True)
    (want_dx,) = torch.autograd.grad(torch.softmax(x64, 0), x64, g.double())
    assert_rowwise_close(dx.double(), want_dx, 1e-4 if dtype == torch.float32 else 3e-2, dim=0,
                         floor=float(g.abs().max()) / shape[0], what="dim 0 backward replay")


@needs_cuda
def test_cuda_graph_capture_with_autograd():
    x = make((16, 4096), torch.float32, "cuda", seed=42).requires_grad_(True)
    w = make((16, 4096), torch.float32, "cuda", scale=1.0, seed=43)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        duet.log_softmax(x).mul(w).sum().backward()
    torch.cuda.current_stream().wait_stream(side)
    x.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        duet.log_softmax(x).mul(w).sum().backward()
    graph.replay()
    sync("cuda")
    xr = x.detach().double().requires_grad_(True)
    torch.log_softmax(xr, -1).mul(w.double()).sum().backward()
    assert_rowwise_close(x.grad, xr.grad, 1e-5, floor=float(w.abs().max()) / x.shape[-1], what="graph autograd")


@needs_custom_op
@needs_cuda
def test_compile_with_cuda_graphs():
    torch._dynamo.reset()
    model = _Block().cuda()
    x = torch.randn(4, 64, 32, device="cuda")
    compiled = torch.compile(model, fullgraph=True, mode="reduce-overhead")
    with torch.no_grad():
        want = model(x)
        for _ in range(3):  # recorded on the second or third call, then replayed
            got = compiled(x)
    assert_rowwise_close(got, want, 1e-5, floor=1.0, what="compiled with CUDA graphs")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_any_dim_runs_natively_without_copies(monkeypatch, op, dtype, device):
    """Softmax over a non-last dimension of a contiguous tensor runs as
    interleaved rows (no transposed copy: the rows path is refused), forward
    and backward, with torch's result layout and values."""
    from duet import _tensor
    tol = 1e-5 if dtype == torch.float32 else 1e-2

    def refuse(*args, **kwargs):
        raise AssertionError("a copy through the rows path ran")

    monkeypatch.setattr(_tensor, "launch", refuse)
    for shape, dim in (((2, 21, 5, 7), 1), ((300, 40), 0), ((3, 4, 600), 1), ((2, 3, 4, 5), 2)):
        x = make(shape, dtype, device, seed=60 + dim).requires_grad_(True)
        y = OPS[op][0](x, dim)
        want = reference(op, x, dim)
        assert y.shape == want.shape and y.stride() == torch.empty_like(x).stride(), (shape, dim)
        assert_rowwise_close(y.double(), want, tol, dim=dim, floor=floor_for(op), what=f"{shape} dim={dim}")
        g = make(shape, dtype, device, scale=1.0, seed=70 + dim)
        (dx,) = torch.autograd.grad(y, x, g)
        x64 = x.detach().double().requires_grad_(True)
        (want_dx,) = torch.autograd.grad(OPS[op][2](x64, dim), x64, g.double())
        assert_rowwise_close(dx.double(), want_dx, 1e-5 if dtype == torch.float32 else 3e-2, dim=dim,
                             floor=float(g.abs().max()) / shape[dim], what=f"{shape} dim={dim} backward")
        sync(device)


@pytest.mark.parametrize("device", DEVICES)
def test_other_layouts_over_a_dim(device):
    """Layouts that are not interleaved rows (a slice inside the inner
    dimensions, a channels-last tensor, an out= of another layout) give the
    same values through the rows path."""
    x = make((4, 6, 10, 12), torch.float32, device, seed=80)
    for t, dim in ((x[:, :, :, ::2], 1), (x.to(memory_format=torch.channels_last), 1), (x[:, 1:5], 1),
                   (x.transpose(1, 3), 2), (x[:, :1], 1)):
        y = duet.softmax(t, dim)
        assert_rowwise_close(y.double(), reference("softmax", t, dim), 1e-5, dim=dim, what=f"dim={dim}")
        out = torch.full(t.shape, float("nan"), device=device)
        duet.log_softmax(t, dim, out=out)
        assert_rowwise_close(out.double(), reference("log_softmax", t, dim), 1e-5, dim=dim, floor=1.0)
    sync(device)
