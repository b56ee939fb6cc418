"""duet's Python binding (python/duet) against torch.

    DUET_LIBRARY=/path/to/libduet.so python3 -m pytest -q python/tests

CPU tensors run on duet's host backend, so the CPU tests need torch but no GPU;
the CUDA tests skip without torch.cuda.is_available(). Without DUET_LIBRARY the
tests look for build*/libduet.so in the repository and skip if there is none.

Accuracy is checked as duet's contract states it (runtime/include/duet/
reference.hpp): per reduction row, max |got - ref| / max |ref| at most 1e-5 for
float32 and 1e-2 for float16/bfloat16, the reference being torch in float64 on
the same (rounded) input.
"""
import os
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _installed_with_library():
    """Whether an installed duet (pip install .) with its bundled libduet is importable."""
    import importlib.util
    spec = importlib.util.find_spec("duet")
    return spec is not None and spec.origin is not None and (pathlib.Path(spec.origin).parent / "libduet.so").exists()


def _find_library():
    path = os.environ.get("DUET_LIBRARY")
    if path:
        return path
    for build in ("build-cuda", "build", "build-hip", "build-host"):
        candidate = ROOT / build / "libduet.so"
        if candidate.exists():
            os.environ["DUET_LIBRARY"] = str(candidate)
            return str(candidate)
    return None


# The installed package where there is one and DUET_LIBRARY is not set; else
# the source tree with a libduet from a build folder.
if os.environ.get("DUET_LIBRARY") or not _installed_with_library():
    sys.path.insert(0, str(ROOT / "python"))
    if _find_library() is None:
        pytest.skip("libduet.so not found: set DUET_LIBRARY or pip install .", allow_module_level=True)

import duet  # noqa: E402
import duet.autograd as dag  # noqa: E402  (the same functions as duet.softmax / duet.log_softmax)

TOL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
OPS = {
    "softmax": (duet.softmax, dag.softmax, torch.softmax),
    "log_softmax": (duet.log_softmax, dag.log_softmax, torch.log_softmax),
}
# GPU tests need a GPU for torch and a libduet built with its backend (a host
# preset build has none: scripts/install_test.sh runs these tests on one).
DUET_GPUS = [d for d in duet.devices() if not d.startswith("host")]
HAS_CUDA = torch.cuda.is_available() and bool(DUET_GPUS)
needs_cuda = pytest.mark.skipif(
    not HAS_CUDA,
    reason="no CUDA device for torch" if not torch.cuda.is_available()
    else f"{duet.library_path()} has no GPU backend (devices {duet.devices()})")
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])


def _name(dtype):
    return str(dtype).replace("torch.", "")


def rowwise_error(got, want, dim=-1, floor=1e-6):
    """max over reduction rows of max|got - want| / max|want|, the row's scale
    taken over its finite values and floored at `floor` (a row whose reference
    is ~0, such as log_softmax or a gradient of one element, is measured
    against the floor). Equal values (infinities included) and NaN in both
    count as exact; NaN in only one fails."""
    assert got.shape == want.shape, (got.shape, want.shape)
    g = got.detach().double().movedim(dim, -1).reshape(-1, got.shape[dim]).cpu()
    w = want.detach().double().movedim(dim, -1).reshape(-1, want.shape[dim]).cpu()
    if g.numel() == 0:
        return 0.0
    nan_mismatch = torch.isnan(g) != torch.isnan(w)
    assert not bool(nan_mismatch.any()), f"NaN in one but not the other at {nan_mismatch.nonzero()[:5].tolist()}"
    same = (g == w) | (torch.isnan(g) & torch.isnan(w))
    diff = torch.where(same, torch.zeros_like(g), (g - w).abs()).amax(dim=1)
    scale = w.abs().masked_fill(~torch.isfinite(w), 0.0).amax(dim=1).clamp_min(floor)
    return float((diff / scale).max())


def assert_rowwise_close(got, want, tol, dim=-1, floor=1e-6, what=""):
    err = rowwise_error(got, want, dim, floor)
    assert err <= tol, f"{what}: row-relative error {err:.3g} > {tol:g}"


def floor_for(op):
    """Scale floor of a forward result: log-probabilities are O(1) (a row of
    one element is exactly 0 in the reference but ~1e-7 after the kernel's
    exp2(x log2e - m log2e)); softmax rows have max >= 1/cols anyway."""
    return 1.0 if op == "log_softmax" else 1e-6


def reference(op, x, dim=-1):
    """torch's op in float64 on exactly x's values."""
    return OPS[op][2](x.detach().double(), dim)


def make(shape, dtype, device, scale=4.0, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float32) * scale).to(dtype=dtype, device=device)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def test_library_has_gpu_backend_when_required():
    # Like the C++ suite: DUET_REQUIRE_GPU=1 turns "GPU tests skipped" into a failure.
    if os.environ.get("DUET_REQUIRE_GPU") == "1":
        assert torch.cuda.is_available(), "DUET_REQUIRE_GPU=1 but torch sees no CUDA device"
        assert DUET_GPUS, f"DUET_REQUIRE_GPU=1 but {duet.library_path()} has no GPU device: {duet.devices()}"


# ============================================================ CPU: the host backend

@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
@pytest.mark.parametrize("shape", [(1,), (1, 1), (3, 1), (4, 33), (2, 1000), (2, 4097), (2, 3, 17)], ids=str)
def test_cpu_forward_matches_torch(op, dtype, shape):
    x = make(shape, dtype, "cpu")
    y = OPS[op][0](x)
    assert y.shape == x.shape and y.dtype == dtype and y.device.type == "cpu"
    assert_rowwise_close(y, reference(op, x), TOL[dtype], floor=floor_for(op), what=f"{op} {_name(dtype)} {shape}")
    # and against torch in the tensor's own dtype, where torch's CPU kernels have it
    if dtype == torch.float32:
        assert_rowwise_close(y, OPS[op][2](x, -1), TOL[dtype], floor=floor_for(op), what="vs torch float32")


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_cpu_any_dim_via_autograd(op, dtype):
    x = make((4, 5, 6), dtype, "cpu", seed=1)
    for dim in (0, 1, 2, -1, -3):
        y = OPS[op][1](x, dim=dim)
        assert y.shape == x.shape and y.dtype == dtype
        assert_rowwise_close(y, reference(op, x, dim), TOL[dtype], dim=dim, floor=floor_for(op), what=f"{op} dim={dim}")
    s = OPS[op][1](torch.tensor(2.5, dtype=dtype))  # 0-d, like torch
    assert s.dim() == 0 and float(s) == pytest.approx(1.0 if op == "softmax" else 0.0)


@pytest.mark.parametrize("op", list(OPS))
def test_cpu_layouts(op):
    fwd = OPS[op][0]
    base = make((33, 40), torch.float32, "cpu", seed=2)
    xt = base.t()  # last dimension not unit-stride: copied
    assert_rowwise_close(fwd(xt), reference(op, xt), 1e-5, what="transposed input")
    xs = base[:, 3:36]  # padded rows at an unaligned offset: used in place
    assert_rowwise_close(fwd(xs), reference(op, xs), 1e-5, what="strided input")
    xe = base[:1].expand(5, 40)  # overlapping rows
    assert_rowwise_close(fwd(xe), reference(op, xe), 1e-5, what="expanded input")

    out = torch.empty(33, 40)
    r = fwd(base, out=out)
    assert r is out
    assert_rowwise_close(out, reference(op, base), 1e-5, what="out=")
    out_t = torch.empty(40, 33).t()  # an out without a row view: written through a copy
    r = fwd(base, out=out_t)
    assert r is out_t
    assert_rowwise_close(out_t, reference(op, base), 1e-5, what="transposed out=")
    out_s = torch.full((33, 50), 7.0)
    fwd(base, out=out_s[:, 5:45])  # strided out, written in place, the rest untouched
    assert_rowwise_close(out_s[:, 5:45], reference(op, base), 1e-5, what="strided out=")
    assert bool((out_s[:, :5] == 7).all()) and bool((out_s[:, 45:] == 7).all())

    inplace = base.clone()
    r = fwd(inplace, out=inplace)
    assert r is inplace
    assert_rowwise_close(inplace, reference(op, base), 1e-5, what="in place")


def test_cpu_empty():
    for shape in [(0, 5), (3, 0), (2, 0, 4)]:
        x = torch.empty(shape)
        assert duet.softmax(x).shape == x.shape
        assert duet.log_softmax(x).shape == x.shape
        assert dag.softmax(x, dim=0).shape == x.shape


@pytest.mark.parametrize("device", DEVICES)
def test_special_values(device):
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[0.0, -inf, 1.0], [nan, 0.0, 1.0], [-inf] * 3, [1e30, 1e30, -1e30], [inf, 0.0, 1.0]],
                     device=device)
    assert_rowwise_close(duet.softmax(x), torch.softmax(x.double(), -1), 1e-5, what="special values")
    assert_rowwise_close(duet.log_softmax(x), torch.log_softmax(x.double(), -1), 1e-5, what="special values")


def _grad_check(op, x, w, dim, tol):
    """Gradient of op(x, dim) * w summed, duet vs torch in float64."""
    xd = x.detach().clone().requires_grad_(True)
    OPS[op][1](xd, dim=dim).mul(w).sum().backward()
    xr = x.detach().double().requires_grad_(True)
    OPS[op][2](xr, dim).mul(w.double()).sum().backward()
    assert xd.grad.dtype == x.dtype and xd.grad.shape == x.shape
    # dx = y * (w - sum(w y)) is of order max|w| / cols: the floor of a row
    # whose reference gradient is ~0 (one element: exactly 0).
    floor = float(w.abs().max()) / x.shape[dim]
    assert_rowwise_close(xd.grad, xr.grad, tol, dim=dim, floor=floor,
                         what=f"{op} gradient, dim={dim}, shape {tuple(x.shape)}")


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_cpu_backward_matches_torch(op, dtype):
    # 16-bit: inputs of scale 1, so that no row is one dominant element whose
    # gradient y (w - sum(w y)) is a cancellation of 16-bit-rounded terms.
    scale = 4.0 if dtype == torch.float32 else 1.0
    for shape, dim in [((1, 1), -1), ((5, 33), -1), ((3, 1000), -1), ((4, 6, 7), 1), ((9, 4), 0)]:
        x = make(shape, dtype, "cpu", scale=scale, seed=3)
        w = make(shape, dtype, "cpu", scale=1.0, seed=4)
        _grad_check(op, x, w, dim, TOL[dtype])


def test_cpu_backward_broadcast_gradient():
    # y.sum() sends an expanded (stride 0) gradient into the backward.
    x = make((4, 9), torch.float32, "cpu").requires_grad_(True)
    dag.log_softmax(x).sum().backward()
    assert_rowwise_close(x.grad, 1 - 9 * torch.softmax(x.detach().double(), -1), 1e-5, what="expanded dy")
    x.grad = None
    dag.softmax(x).sum().backward()
    assert float(x.grad.abs().max()) < 1e-6


def test_backward_functions_directly():
    x = make((6, 50), torch.float32, "cpu", seed=5)
    dy = make((6, 50), torch.float32, "cpu", scale=1.0, seed=6)
    y = duet.softmax(x)
    yd = torch.softmax(x.double(), -1)
    assert_rowwise_close(duet.softmax_backward(y, dy), yd * (dy.double() - (dy.double() * yd).sum(-1, keepdim=True)),
                         1e-5, what="softmax_backward")
    ly = duet.log_softmax(x)
    out = torch.empty_like(x)
    assert duet.log_softmax_backward(ly, dy, out=out) is out
    assert_rowwise_close(out, dy.double() - yd * dy.double().sum(-1, keepdim=True), 1e-5, what="log_softmax_backward")


class _FakeCai:
    """A __cuda_array_interface__ over host memory: enough to reach every
    check of the raw path, which must then refuse the pointer."""

    def __init__(self, tensor, typestr="<f4", strides=None, readonly=False, shape=None):
        self._tensor = tensor
        self.__cuda_array_interface__ = {"shape": tuple(shape or tensor.shape), "typestr": typestr,
                                         "data": (tensor.data_ptr(), readonly), "strides": strides, "version": 3,
                                         "stream": None}


def test_cuda_array_interface_checks_without_a_gpu():
    def fwd(x, out):
        return duet._cai.forward(False, "softmax", x, -1, None, out)
    x, y = torch.zeros(3, 8), torch.zeros(3, 8)
    with pytest.raises(TypeError, match="out="):
        fwd(_FakeCai(x), None)
    with pytest.raises(TypeError, match="typestr"):
        fwd(_FakeCai(x, typestr="<i4"), _FakeCai(y))
    with pytest.raises(ValueError, match="C-contiguous"):
        fwd(_FakeCai(x, strides=(4, 12)), _FakeCai(y))
    with pytest.raises(ValueError, match="read-only"):
        fwd(_FakeCai(x), _FakeCai(y, readonly=True))
    with pytest.raises(ValueError, match="shape"):
        fwd(_FakeCai(x), _FakeCai(y, shape=(4, 6)))
    # explicit C-contiguous strides are fine; host memory is then refused, never read as device memory
    with pytest.raises(ValueError, match="not device memory"):
        fwd(_FakeCai(x, strides=(32, 4)), _FakeCai(y))
    assert fwd(_FakeCai(torch.zeros(0, 8)), _FakeCai(torch.zeros(0, 8))) is not None


def test_import_without_torch():
    # `import duet` must not need torch; duet.autograd does.
    import subprocess
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import duet\n"
        "assert duet.version() and 'host:0' in duet.devices()\n"
        "try:\n    duet.autograd\nexcept ImportError:\n    pass\nelse:\n    raise SystemExit('autograd without torch')\n"
        "try:\n    duet.softmax([1.0])\nexcept TypeError:\n    pass\nelse:\n    raise SystemExit('list accepted')\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(duet.__file__).parent.parent))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


@pytest.mark.parametrize("device", DEVICES)
def test_copy_kernel_copies_exactly(device):
    """duet.copy_kernel, the other half of bench/compare.py's copy ceiling:
    odd sizes at byte offsets (pairs a multiple of 16 apart and not), a
    poisoned destination whose bytes outside the copy stay poison."""
    g = torch.Generator(device="cpu").manual_seed(40)
    src = torch.randint(0, 256, (4 << 20,), dtype=torch.uint8, generator=g).to(device)
    for n in (0, 1, 15, 16, 17, 4097, (4 << 20) - 32):
        for s_off, d_off in ((0, 0), (1, 1), (3, 7), (0, 15), (8, 0)):
            dst = torch.full((n + 32,), 0xa5, dtype=torch.uint8, device=device)
            assert duet.copy_kernel(dst[d_off:d_off + n], src[s_off:s_off + n]) is not None
            sync(device)
            assert torch.equal(dst[d_off:d_off + n], src[s_off:s_off + n]), (n, s_off, d_off)
            assert bool((dst[:d_off] == 0xa5).all()) and bool((dst[d_off + n:] == 0xa5).all()), (n, s_off, d_off)
    x = make((1000,), torch.float32, device, seed=41)
    y = torch.empty_like(x)
    assert torch.equal(duet.copy_kernel(y, x), x)  # bytes, whatever the dtype
    with pytest.raises(ValueError, match="not contiguous"):
        duet.copy_kernel(y[::2], x[::2])
    with pytest.raises(ValueError, match="bytes"):
        duet.copy_kernel(y[:10], x)
    with pytest.raises(duet.DuetError, match="overlap"):
        duet.copy_kernel(x[1:], x[:-1])


# ============================================================ errors, on every device

@pytest.mark.parametrize("device", DEVICES)
def test_bad_input_raises(device):
    x = make((4, 8), torch.float32, device)
    for bad in (torch.arange(32, device=device).reshape(4, 8), torch.ones(4, 8, dtype=torch.float64, device=device),
                torch.ones(4, 8, dtype=torch.bool, device=device)):
        with pytest.raises(TypeError, match="dtype"):
            duet.softmax(bad)
        with pytest.raises(TypeError, match="dtype"):
            dag.log_softmax(bad, dim=0)
    with pytest.raises(ValueError, match="shape"):
        duet.softmax(x, out=torch.empty(4, 9, device=device))
    with pytest.raises(ValueError, match="shape"):
        duet.log_softmax(x, out=torch.empty(8, 4, device=device))
    with pytest.raises(TypeError, match="out has dtype"):
        duet.softmax(x, out=torch.empty(4, 8, dtype=torch.float16, device=device))
    with pytest.raises(ValueError, match="shape"):
        duet.softmax_backward(x, torch.ones(4, 7, device=device))
    assert float(duet.softmax(torch.tensor(1.0, device=device))) == 1.0  # 0-d, like torch
    with pytest.raises(TypeError):
        duet.softmax([[1.0, 2.0]])
    with pytest.raises(IndexError):
        dag.softmax(x, dim=2)
    # overlapping in and out (not exactly in place) is refused by duet itself
    buf = torch.zeros(4 * 8 + 1, device=device)
    buf[:32] = x.reshape(-1)
    with pytest.raises(duet.DuetError, match="overlap"):
        duet.softmax(buf[:32].view(4, 8), out=buf[1:33].view(4, 8))


@needs_cuda
def test_cuda_cpu_mix_raises():
    x = make((4, 8), torch.float32, "cuda")
    with pytest.raises(RuntimeError, match="out is on cpu"):
        duet.softmax(x, out=torch.empty(4, 8))
    with pytest.raises(RuntimeError, match="grad_output is on cpu"):
        duet.softmax_backward(x, torch.ones(4, 8))


# ============================================================ CUDA

CUDA_SHAPES = [(7, 1), (5, 33), (1, 33), (4096, 33), (9, 1000), (6, 4097), (3, 70000), (2, 3, 1000)]


@needs_cuda
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
@pytest.mark.parametrize("shape", CUDA_SHAPES, ids=str)
def test_cuda_forward_matches_torch(op, dtype, shape):
    x = make(shape, dtype, "cuda", seed=sum(shape))
    y = OPS[op][0](x)
    sync("cuda")
    assert y.shape == x.shape and y.dtype == dtype and y.device == x.device
    assert_rowwise_close(y, reference(op, x), TOL[dtype], floor=floor_for(op), what=f"{op} {_name(dtype)} {shape}")
    assert_rowwise_close(y, OPS[op][2](x.float(), -1), TOL[dtype], floor=floor_for(op),
                         what=f"{op} {_name(dtype)} {shape} vs torch float32")


@needs_cuda
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_cuda_strided_and_unaligned(op, dtype):
    for rows, cols in [(5, 33), (8, 1000), (3, 4097)]:
        base = make((rows, cols + 3), dtype, "cuda", seed=cols)
        x = base[:, 1:cols + 1]  # row stride cols + 3, start one element in: the scalar path
        out_buf = torch.full((rows, cols + 8), 3.0, dtype=dtype, device="cuda")
        out = out_buf[:, 2:cols + 2]
        OPS[op][0](x, out=out)
        sync("cuda")
        assert_rowwise_close(out, reference(op, x), TOL[dtype], what=f"{op} strided {rows}x{cols}")
        assert bool((out_buf[:, :2] == 3).all()) and bool((out_buf[:, cols + 2:] == 3).all())


@needs_cuda
@pytest.mark.parametrize("op", list(OPS))
def test_cuda_3d_and_dim(op):
    x = make((4, 5, 333), torch.float32, "cuda", seed=7)
    for dim in (-1, 0, 1):
        y = OPS[op][1](x, dim=dim)
        sync("cuda")
        assert_rowwise_close(y, reference(op, x, dim), 1e-5, dim=dim, what=f"{op} 3-D dim={dim}")
    x2 = make((1000, 33), torch.float32, "cuda", seed=8)
    y2 = OPS[op][1](x2, dim=0)
    sync("cuda")
    assert_rowwise_close(y2, reference(op, x2, 0), 1e-5, dim=0, what=f"{op} dim=0")
    assert_rowwise_close(y2, OPS[op][2](x2, 0), 1e-5, dim=0, what=f"{op} dim=0 vs torch float32")


@needs_cuda
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("shape", [(7, 1), (5, 33), (9, 1000), (6, 4097), (3, 70000), (2, 3, 50)], ids=str)
def test_cuda_backward_matches_torch(op, shape):
    x = make(shape, torch.float32, "cuda", seed=11)
    w = make(shape, torch.float32, "cuda", scale=1.0, seed=12)
    _grad_check(op, x, w, -1, 1e-5)
    # and against torch's own float32 autograd
    xd = x.clone().requires_grad_(True)
    OPS[op][1](xd).mul(w).sum().backward()
    xt = x.clone().requires_grad_(True)
    OPS[op][2](xt, -1).mul(w).sum().backward()
    assert_rowwise_close(xd.grad, xt.grad, 1e-5, floor=float(w.abs().max()) / x.shape[-1],
                         what=f"{op} gradient vs torch float32")


@needs_cuda
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=_name)
def test_cuda_backward_16bit(op, dtype):
    for shape, dim in [((5, 33), -1), ((9, 1000), -1), ((64, 20), 0)]:
        x = make(shape, dtype, "cuda", scale=1.0, seed=13)  # see test_cpu_backward_matches_torch
        w = make(shape, dtype, "cuda", scale=1.0, seed=14)
        _grad_check(op, x, w, dim, 1e-2)


@needs_cuda
def test_cuda_side_stream():
    x = make((256, 1000), torch.float32, "cuda", seed=15)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = duet.softmax(x)
        ly = dag.log_softmax(x, dim=0)
    s.synchronize()
    assert_rowwise_close(y, reference("softmax", x), 1e-5, what="side stream")
    assert_rowwise_close(ly, reference("log_softmax", x, 0), 1e-5, dim=0, what="side stream dim=0")


@pytest.mark.parametrize("device", DEVICES)
def test_common_call_takes_the_fast_path(monkeypatch, device):
    """Contiguous tensors that need no autograd skip the registered op (bench/NOTES.md, v24)
    and give bit for bit what it gives; other layouts still take the general launch."""
    from duet import _tensor
    x = make((64, 1000), torch.float32, device, seed=21)
    g = make((64, 1000), torch.float32, device, seed=22)
    general = duet.softmax(x.t().contiguous().t())  # columns not unit-stride: the general path (and a copy)
    general_bwd = duet.softmax_backward(general, g.t().contiguous().t())
    out = torch.full_like(x, float("nan"))
    dx = torch.full_like(x, float("nan"))

    def refuse(*args, **kwargs):
        raise AssertionError("the general path ran")

    monkeypatch.setattr(_tensor, "launch", refuse)
    monkeypatch.setattr(_tensor, "launch_over", refuse)
    y = duet.softmax(x)
    duet.softmax(x, out=out)
    dy = duet.softmax_backward(y, g)
    duet.softmax_backward(y, g, out=dx)
    sync(device)
    assert torch.equal(y, general) and torch.equal(out, general)
    assert torch.equal(dy, general_bwd) and torch.equal(dx, general_bwd)
    with pytest.raises(AssertionError, match="general path"):
        duet.softmax(x[:, :999])  # rows not contiguous
    with pytest.raises(AssertionError, match="general path"):
        duet.softmax(x, dim=0)  # not the last dimension
    # Autograd needs the registered op; its kernel then takes the same fast
    # launch (inside a compiled graph the op's kernel runs on every call).
    z = duet.softmax(x.requires_grad_())
    assert z.grad_fn is not None
    sync(device)
    assert torch.equal(z.detach(), general)


@pytest.mark.parametrize("device", DEVICES)
def test_eager_autograd_skips_the_registered_op(monkeypatch, device):
    """Tensors that require grad in eager mode take _EagerAutograd (libduet
    directly, forward and backward), not the registered op's dispatch, and
    give bit for bit the registered op's results and gradients: last and
    other dims, a broadcast upstream gradient, both ops, 16-bit inputs, and
    dtype=float32 of 16-bit inputs (the widening kernels where the result
    has rows over dim, the cast first where it does not)."""
    from duet import _ops
    f32 = torch.float32
    cases = [("softmax", f32, (32, 300), -1, None), ("log_softmax", f32, (6, 50, 7), 1, None),
             ("softmax", torch.bfloat16, (8, 4, 129), 0, None), ("log_softmax", torch.float16, (16, 1000), -1, None),
             ("softmax", torch.bfloat16, (8, 300), -1, f32), ("log_softmax", torch.float16, (5, 77), -1, f32),
             ("softmax", torch.float16, (6, 50, 7), 1, f32)]
    wanted = []
    for op, dtype, shape, dim, call_dtype in cases:  # through the registered op
        x = make(shape, dtype, device, seed=70).requires_grad_()
        g = make(shape, call_dtype or dtype, device, seed=71)
        y = getattr(torch.ops.duet, op)(x, dim, call_dtype)
        y.backward(g)
        x2 = x.detach().clone().requires_grad_()
        getattr(torch.ops.duet, op)(x2, dim, call_dtype).sum().backward()  # an expanded upstream gradient
        wanted.append((y.detach(), x.grad, x2.grad))

    def refuse(*args, **kwargs):
        raise AssertionError("the registered op ran")

    monkeypatch.setattr(_ops, "_FORWARD", (refuse, refuse))
    monkeypatch.setattr(_ops, "_BACKWARD", (refuse, refuse))
    for (op, dtype, shape, dim, call_dtype), (y_want, grad_want, grad_sum_want) in zip(cases, wanted):
        x = make(shape, dtype, device, seed=70).requires_grad_()
        g = make(shape, call_dtype or dtype, device, seed=71)
        y = getattr(duet, op)(x, dim, dtype=call_dtype)
        assert type(y.grad_fn).__name__ == "_EagerAutogradBackward", (op, dim)
        y.backward(g)
        x2 = x.detach().clone().requires_grad_()
        getattr(duet, op)(x2, dim, dtype=call_dtype).sum().backward()
        sync(device)
        assert y.dtype == (call_dtype or dtype) and x.grad.dtype == dtype
        assert torch.equal(y.detach(), y_want), (op, dtype, dim, call_dtype)
        assert torch.equal(x.grad, grad_want), (op, dtype, dim, call_dtype)
        assert torch.equal(x2.grad, grad_sum_want), (op, dtype, dim, call_dtype)
    with pytest.raises(IndexError):
        duet.softmax(make((4, 8), torch.float32, device).requires_grad_(), dim=2)
    with torch.no_grad():  # no autograd: the fast path, no graph
        assert duet.softmax(make((4, 8), torch.float32, device).requires_grad_()).grad_fn is None


@pytest.mark.parametrize("device", DEVICES)
def test_fast_path_from_many_threads(device):
    """The fast path packs each call's arguments into a buffer of its thread:
    threads calling at once each get their own rows' results."""
    import threading
    xs = [make((16, 300 + 7 * i), torch.float32, device, seed=60 + i) for i in range(6)]
    expected = [duet.softmax(x.t().contiguous().t()) for x in xs]  # the general path
    results, errors = [None] * len(xs), []

    def work(i):
        try:
            out = torch.empty_like(xs[i])
            for _ in range(200):
                out.fill_(float("nan"))
                duet.softmax(xs[i], out=out)
            results[i] = out
        except Exception as e:  # reported below, in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sync(device)
    assert not errors, errors
    for i, (got, want) in enumerate(zip(results, expected)):
        assert torch.equal(got, want), i


class _CudaArray:
    """The least an array library offers: __cuda_array_interface__ and nothing else."""

    def __init__(self, tensor):
        self._tensor = tensor  # keeps the memory alive
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


@needs_cuda
def test_cuda_array_interface():
    x = make((6, 77), torch.float32, "cuda", seed=16)
    y = duet.softmax(_CudaArray(x))  # viewed through torch: a torch tensor comes back
    sync("cuda")
    assert isinstance(y, torch.Tensor)
    assert_rowwise_close(y, reference("softmax", x), 1e-5, what="CAI input")
    out = torch.empty_like(x)
    wrapped = _CudaArray(out)
    assert duet.log_softmax(_CudaArray(x), out=wrapped) is wrapped
    sync("cuda")
    assert_rowwise_close(out, reference("log_softmax", x), 1e-5, what="CAI out")
    # the raw path, as taken without torch: C-contiguous arrays, out= required
    x16 = make((3, 4, 40), torch.float16, "cuda", seed=17)
    raw_out = torch.empty_like(x16)
    duet._cai.forward(False, "softmax", _CudaArray(x16), -1, None, _CudaArray(raw_out))
    sync("cuda")
    assert_rowwise_close(raw_out, reference("softmax", x16), 1e-2, what="raw CAI")
    with pytest.raises(ValueError, match="C-contiguous"):
        duet._cai.forward(False, "softmax", _CudaArray(x.t()), -1, None, _CudaArray(out.t()))
    with pytest.raises(TypeError, match="out="):
        duet._cai.forward(False, "softmax", _CudaArray(x), -1, None, None)
    with pytest.raises(TypeError, match="typestr"):
        duet.softmax(_CudaArray(torch.ones(4, 8, dtype=torch.int32, device="cuda")))
    with pytest.raises(TypeError, match="typestr"):
        duet._cai.forward(False, "softmax", _CudaArray(torch.ones(4, 8, dtype=torch.float64, device="cuda")), -1,
                          None, _CudaArray(out))


@needs_cuda
def test_cupy_if_installed():
    cupy = pytest.importorskip("cupy")
    a = cupy.random.standard_normal((5, 300), dtype=cupy.float32)
    y = duet.softmax(a)
    sync("cuda")
    ref = torch.softmax(torch.as_tensor(a).double(), -1)
    assert_rowwise_close(y, ref, 1e-5, what="cupy input")
    out = cupy.empty_like(a)
    assert duet.softmax(a, out=out) is out
    sync("cuda")
    assert_rowwise_close(torch.as_tensor(out), ref, 1e-5, what="cupy out")
