"""duet's fused operations from Python: masked softmax (scale, bool and
additive masks, broadcast masks, causal with offsets, fully masked rows) and
cross-entropy (reductions, ignore_index, label smoothing, z-loss, lse, the
in-place backward), forward and backward, against torch's composites in
float64 on the same (rounded) inputs.

CPU tensors run on duet's host backend; the CUDA tests (graph capture,
check_targets) skip without a GPU, and the torch.compile/opcheck tests
without torch >= 2.4, saying so.
"""
import math
import warnings

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from test_duet_torch import DEVICES, assert_rowwise_close, duet, make, needs_cuda, sync  # noqa: E402
from test_torch_ops import needs_custom_op  # noqa: E402

from duet import _fused_launch  # noqa: E402

LOWP = [torch.float16, torch.bfloat16]
DTYPES = [torch.float32] + LOWP
TOL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}


def _id(v):
    return str(v).replace("torch.", "")


def bool_mask(shape, device, p=0.3, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.rand(shape, generator=g) < p).to(device)


def masked_reference(x, mask=None, scale=1.0, causal_offset=None, zero_masked_rows=False):
    """softmax(scale * x + mask) in float64 through torch's composite."""
    z = x.double() * scale
    if causal_offset is not None:
        sq, sk = (x.shape[-2] if x.dim() >= 2 else 1), x.shape[-1]
        mask = ~torch.ones(sq, sk, dtype=torch.bool, device=x.device).tril(causal_offset)
        mask = mask if x.dim() >= 2 else mask[0]
    if mask is not None:
        z = z.masked_fill(mask, -math.inf) if mask.dtype == torch.bool else z + mask.to(x.dtype).double()
    y = torch.softmax(z, -1)
    if zero_masked_rows:
        y = torch.nan_to_num(y, nan=0.0)
    return y


# ============================================================ masked softmax: forward

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("kind", ["none", "bool", "additive"])
def test_masked_softmax_matches_torch(kind, dtype, device):
    x = make((2, 3, 5, 37), dtype, device, seed=1)
    mask = None
    if kind == "bool":
        mask = bool_mask((2, 1, 5, 37), device, seed=2)
    elif kind == "additive":
        mask = make((5, 37), dtype, device, scale=2.0, seed=3)
        mask[1, ::3] = -math.inf
    for scale in (1.0, 0.125, 3.0):
        y = duet.masked_softmax(x, mask, scale=scale)
        assert y.dtype == dtype and y.shape == x.shape
        assert_rowwise_close(y, masked_reference(x, mask, scale), TOL[dtype], what=f"{kind} scale={scale}")


# mask shapes over [2, 3, 4, 9] scores: broadcast over batch, heads, rows,
# several at once, a broadcast last dimension (copied to contiguous
# columns), fewer dimensions than the scores.
MASK_SHAPES = [(2, 3, 4, 9), (2, 1, 4, 9), (1, 3, 4, 9), (4, 9), (9,), (2, 3, 1, 9), (2, 1, 1, 9), (1, 1, 4, 9),
               (2, 3, 4, 1), (3, 1, 9)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mask_shape", MASK_SHAPES, ids=str)
def test_masked_softmax_broadcast_masks(mask_shape, device):
    x = make((2, 3, 4, 9), torch.float32, device, seed=4)
    bmask = bool_mask(mask_shape, device, p=0.4, seed=5)
    amask = make(mask_shape, torch.float32, device, seed=6)
    for mask in (bmask, amask):
        assert_rowwise_close(duet.masked_softmax(x, mask, scale=0.5), masked_reference(x, mask, 0.5), 1e-5,
                             what=f"mask {mask_shape} {mask.dtype}")


def test_mask_layout_uses_strides_not_copies():
    shape = (2, 3, 4, 9)
    mask = bool_mask((2, 1, 4, 9), "cpu")
    m, heads, seq_q, batch_stride, head_stride, row_stride = _fused_launch.mask_layout(mask, shape)
    assert m.data_ptr() == mask.data_ptr()  # no copy
    assert (heads, seq_q, batch_stride, head_stride, row_stride) == (3, 4, 36, 0, 9)
    # a [Sq, Sk] mask over every batch and head: one (row) group
    m, heads, seq_q, batch_stride, head_stride, row_stride = _fused_launch.mask_layout(bool_mask((4, 9), "cpu"), shape)
    assert (heads, seq_q, batch_stride, head_stride, row_stride) == (6, 4, 0, 0, 9)
    # a per-row mask of a slice of a wider array: its row stride, no copy
    wide = bool_mask((2, 3, 4, 16), "cpu")
    m, *layout = _fused_launch.mask_layout(wide[..., :9], shape)
    assert m.data_ptr() == wide.data_ptr() and layout == [1, 24, 0, 0, 16]
    # four separate strided groups do not fit (batch, head, row): a dense copy
    shape5 = (2, 3, 2, 3, 7)
    mask5 = bool_mask((2, 1, 2, 1, 7), "cpu")
    m, *_ = _fused_launch.mask_layout(mask5, shape5)
    assert m.is_contiguous() and m.shape == shape5
    x = make(shape5, torch.float32, "cpu", seed=7)
    assert_rowwise_close(duet.masked_softmax(x, mask5), masked_reference(x, mask5), 1e-5, what="dense fallback")


@pytest.mark.parametrize("device", DEVICES)
def test_masked_softmax_strided_inputs_and_masks(device):
    wide = make((3, 4, 50), torch.float32, device, seed=8)
    x = wide[..., 5:38]  # rows of a wider array
    mask = bool_mask((3, 4, 33 * 2), device, seed=9)[..., ::2]  # strided mask columns: copied
    assert_rowwise_close(duet.masked_softmax(x, mask, scale=0.7), masked_reference(x, mask, 0.7), 1e-5)
    xt = make((33, 12), torch.float32, device, seed=10).t()  # columns not contiguous: copied
    assert_rowwise_close(duet.masked_softmax(xt), masked_reference(xt), 1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("offset", [0, 3, -1, -5, 20])
def test_masked_softmax_causal_offsets(offset, dtype, device):
    """causal_offset 0 is torch.tril's square convention; 3 = seq_k - seq_q
    is the bottom-right alignment; -1 and -5 mask the first rows entirely
    (NaN, or zeros with zero_masked_rows); 20 masks nothing."""
    x = make((2, 3, 5, 8), dtype, device, seed=11)
    for zero in (False, True):
        y = duet.masked_softmax(x, causal=True, causal_offset=offset, scale=0.3, zero_masked_rows=zero)
        assert_rowwise_close(y, masked_reference(x, None, 0.3, offset, zero), TOL[dtype],
                             what=f"causal offset={offset} zero_masked_rows={zero}")
    # 1-d and 2-d scores: one query, and [Sq, Sk]
    v = make((8,), dtype, device, seed=12)
    assert_rowwise_close(duet.masked_softmax(v, causal=True, causal_offset=2),
                         masked_reference(v, None, 1.0, 2), TOL[dtype], what="1-d causal")
    m = make((6, 4), dtype, device, seed=13)
    assert_rowwise_close(duet.masked_softmax(m, causal=True, causal_offset=offset, zero_masked_rows=True),
                         masked_reference(m, None, 1.0, offset, True), TOL[dtype], what="2-d causal")


@pytest.mark.parametrize("device", DEVICES)
def test_fully_masked_rows_nan_or_zeros(device):
    x = make((4, 16), torch.float32, device, seed=14)
    mask = torch.zeros(4, 16, dtype=torch.bool, device=device)
    mask[1] = True
    additive = torch.zeros(4, 16, device=device)
    additive[2] = -math.inf
    for m, row in ((mask, 1), (additive, 2)):
        y = duet.masked_softmax(x, m)
        assert bool(torch.isnan(y[row]).all()), "torch's default: NaN"
        assert bool(torch.isnan(torch.softmax(x.masked_fill(mask, -math.inf), -1)[1]).all())
        z = duet.masked_softmax(x, m, zero_masked_rows=True)
        assert bool((z[row] == 0).all())
        others = [r for r in range(4) if r != row]
        assert torch.equal(z[others], y[others])
        # the gradient of a fully masked row is 0 with zero_masked_rows
        xg = x.clone().requires_grad_(True)
        duet.masked_softmax(xg, m, zero_masked_rows=True).mul(make((4, 16), torch.float32, device)).sum().backward()
        assert bool((xg.grad[row] == 0).all()) and bool(torch.isfinite(xg.grad).all())


# ============================================================ masked softmax: backward

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("kind", ["none", "bool", "additive", "causal"])
def test_masked_softmax_gradient_matches_torch(kind, dtype, device):
    shape = (2, 3, 6, 21)
    x = make(shape, dtype, device, seed=15)
    w = make(shape, torch.float32, device, scale=1.0, seed=16)
    mask = {"bool": bool_mask((2, 1, 6, 21), device, seed=17), "additive": make((6, 21), dtype, device, seed=18)
            }.get(kind)
    causal = kind == "causal"
    scale = 0.25
    xd = x.clone().requires_grad_(True)
    y = duet.masked_softmax(xd, mask, scale=scale, causal=causal, causal_offset=15)
    assert y.grad_fn is not None
    y.float().mul(w).sum().backward()
    xr = x.detach().double().requires_grad_(True)
    masked_reference(xr, mask, scale, 15 if causal else None).mul(w.double()).sum().backward()
    # xd.grad is scale * y * (w - sum(w y)): rows scale with max|w| * scale
    assert xd.grad.dtype == dtype
    assert_rowwise_close(xd.grad, xr.grad, 4 * TOL[dtype], floor=scale * float(w.abs().max()) / shape[-1],
                         what=f"{kind} gradient")
    # the backward op directly
    dx = duet.masked_softmax_backward(y.detach(), w.to(dtype), scale=scale)
    assert_rowwise_close(dx, xr.grad, 4 * TOL[dtype], floor=scale * float(w.abs().max()) / shape[-1],
                         what=f"{kind} masked_softmax_backward")


@pytest.mark.parametrize("device", DEVICES)
def test_additive_mask_gradient(device):
    """A float mask that requires grad (a learned bias, ALiBi-style) gets its
    gradient, summed over the dimensions it was broadcast over."""
    x = make((2, 3, 4, 10), torch.float32, device, seed=19)
    bias = make((3, 1, 10), torch.float32, device, scale=1.0, seed=20)
    w = make((2, 3, 4, 10), torch.float32, device, scale=1.0, seed=21)
    xd, bd = x.clone().requires_grad_(True), bias.clone().requires_grad_(True)
    duet.masked_softmax(xd, bd, scale=0.5).mul(w).sum().backward()
    xr, br = x.double().requires_grad_(True), bias.double().requires_grad_(True)
    torch.softmax(xr * 0.5 + br, -1).mul(w.double()).sum().backward()
    torch.testing.assert_close(xd.grad.double(), xr.grad, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(bd.grad.double(), br.grad, rtol=1e-4, atol=1e-6)
    assert bd.grad.shape == bias.shape


@pytest.mark.parametrize("device", DEVICES)
def test_masked_softmax_gradcheck(device):
    # float32 finite differences (duet has no float64 kernels), as test_torch_ops does
    x = make((2, 3, 7), torch.float32, device, scale=1.0, seed=22).requires_grad_(True)
    mask = bool_mask((3, 7), device, seed=23)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for f in (lambda t: duet.masked_softmax(t, mask, scale=0.8),
                  lambda t: duet.masked_softmax(t, causal=True, causal_offset=1, scale=1.5)):
            assert torch.autograd.gradcheck(f, (x,), eps=1e-3, atol=2e-3, rtol=1e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_masked_softmax_module_and_op(device):
    x = make((2, 4, 11), torch.float32, device, seed=24)
    mask = bool_mask((4, 11), device, seed=25)
    layer = duet.nn.MaskedSoftmax(scale=0.5)
    assert torch.equal(layer(x, mask), duet.masked_softmax(x, mask, scale=0.5))
    assert torch.equal(torch.ops.duet.masked_softmax(x, mask, 0.5, False, 0, False), layer(x, mask))
    causal = duet.nn.MaskedSoftmax(causal=True, causal_offset=2, zero_masked_rows=True)
    assert torch.equal(causal(x), duet.masked_softmax(x, causal=True, causal_offset=2, zero_masked_rows=True))
    assert "causal=True" in repr(causal)


def test_masked_softmax_meta():
    x = torch.empty(2, 3, 4, 5, device="meta", dtype=torch.bfloat16)
    y = duet.masked_softmax(x, torch.empty(2, 1, 4, 5, dtype=torch.bool, device="meta"), scale=0.1)
    assert y.device.type == "meta" and y.shape == x.shape and y.dtype == x.dtype and y.is_contiguous()
    dx = torch.ops.duet.masked_softmax_backward(y, y, 0.1)
    assert dx.device.type == "meta" and dx.shape == x.shape


@pytest.mark.parametrize("device", DEVICES)
def test_masked_softmax_errors(device):
    x = make((2, 4, 8), torch.float32, device)
    with pytest.raises(TypeError, match="mask has dtype torch.int64"):
        duet.masked_softmax(x, torch.zeros(4, 8, dtype=torch.long, device=device))
    with pytest.raises(ValueError, match="does not broadcast"):
        duet.masked_softmax(x, torch.zeros(3, 8, dtype=torch.bool, device=device))
    with pytest.raises(ValueError, match="does not broadcast"):
        duet.masked_softmax(x, torch.zeros(5, 2, 4, 8, dtype=torch.bool, device=device))
    with pytest.raises(ValueError, match="causal=True takes no mask"):
        duet.masked_softmax(x, torch.zeros(4, 8, dtype=torch.bool, device=device), causal=True)
    with pytest.raises(ValueError, match="scale must be finite"):
        duet.masked_softmax(x, scale=math.inf)
    with pytest.raises(TypeError, match="scale must be a float"):
        duet.masked_softmax(x, scale="2")
    with pytest.raises(TypeError, match="causal must be a bool"):
        duet.masked_softmax(x, causal=1)
    with pytest.raises(TypeError, match="float64"):
        duet.masked_softmax(x.double())
    with pytest.raises(ValueError, match="0-d"):
        duet.masked_softmax(x[0, 0, 0])
    with pytest.raises(TypeError, match="input must be a torch.Tensor"):
        duet.masked_softmax([1.0, 2.0])


# ============================================================ cross-entropy: forward

def ce_reference(x, t, ignore_index=-100, reduction="mean", label_smoothing=0.0, z_loss=0.0):
    """torch's F.cross_entropy in float64 on x's values, plus the z-loss
    composite z_loss * lse**2 on the rows not ignored."""
    xd = x.double()
    loss = F.cross_entropy(xd, t.long(), ignore_index=ignore_index, reduction="none", label_smoothing=label_smoothing)
    keep = t != ignore_index
    if z_loss:
        loss = loss + z_loss * torch.logsumexp(xd, -1) ** 2 * keep
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / keep.sum()


def targets(n, classes, device, dtype=torch.int64, ignore_every=0, ignore_index=-100, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    t = torch.randint(0, classes, (n,), generator=g)
    if ignore_every:
        t[::ignore_every] = ignore_index
    return t.to(dtype=dtype, device=device)


def assert_loss_close(got, want, dtype, what=""):
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    assert got.dtype == dtype, (got.dtype, dtype)
    torch.testing.assert_close(got.double(), want.double(), rtol=tol, atol=tol, equal_nan=True, msg=what)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_matches_torch(reduction, dtype, device):
    x = make((13, 301), dtype, device, seed=30)
    for tdtype in (torch.int64, torch.int32):
        for ignore_every, ignore_index, smoothing in ((0, -100, 0.0), (3, -100, 0.0), (4, 7, 0.1), (2, -1, 0.25)):
            t = targets(13, 301, device, tdtype, ignore_every, ignore_index, seed=31)
            got = duet.cross_entropy(x, t, ignore_index=ignore_index, reduction=reduction, label_smoothing=smoothing)
            want = F.cross_entropy(x.double(), t.long(), ignore_index=ignore_index, reduction=reduction,
                                   label_smoothing=smoothing)
            assert_loss_close(got, want, dtype, f"{reduction} {tdtype} ignore {ignore_index} ls {smoothing}")
            assert got.shape == want.shape


@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_all_rows_ignored(device):
    x = make((5, 40), torch.float32, device, seed=32).requires_grad_(True)
    t = torch.full((5,), -100, dtype=torch.int64, device=device)
    for reduction in ("mean", "sum", "none"):
        got = duet.cross_entropy(x, t, reduction=reduction)
        want = F.cross_entropy(x.detach(), t, reduction=reduction)
        torch.testing.assert_close(got, want, equal_nan=True)  # mean: NaN (0 / 0), as torch
        x.grad = None
        got.sum().backward()
        assert bool((x.grad == 0).all()), reduction


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
def test_cross_entropy_z_loss_and_lse(dtype, device):
    x = make((9, 77), dtype, device, seed=33)
    t = targets(9, 77, device, ignore_every=4, seed=34)
    for reduction in ("none", "mean", "sum"):
        for smoothing in (0.0, 0.2):
            got, lse = duet.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing, z_loss=1e-2,
                                          return_lse=True)
            assert_loss_close(got, ce_reference(x, t, -100, reduction, smoothing, 1e-2), dtype,
                              f"z_loss {reduction} ls {smoothing}")
            assert lse.dtype == torch.float32 and lse.shape == (9,) and lse.grad_fn is None
            keep = t != -100
            torch.testing.assert_close(lse[keep].double(), torch.logsumexp(x.double(), -1)[keep], rtol=1e-6,
                                       atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_layouts(device):
    wide = make((7, 130), torch.float32, device, seed=35)
    x = wide[:, 3:103]  # rows of a wider array: read in place
    t = targets(14, 100, device, seed=36)[::2]  # strided targets
    torch.testing.assert_close(duet.cross_entropy(x, t, reduction="none"),
                               F.cross_entropy(x, t, reduction="none"), rtol=1e-5, atol=1e-5)
    xt = make((100, 7), torch.float32, device, seed=37).t()  # columns not contiguous: copied
    torch.testing.assert_close(duet.cross_entropy(xt, t), F.cross_entropy(xt, t), rtol=1e-5, atol=1e-5)
    # one row: [C] logits and a 0-d target, like torch
    v, c = make((50,), torch.bfloat16, device, seed=38), torch.tensor(3, device=device)
    for reduction in ("none", "mean", "sum"):
        got, lse = duet.cross_entropy(v, c, reduction=reduction, return_lse=True)
        want = F.cross_entropy(v.double(), c, reduction=reduction)
        assert got.shape == want.shape == () and lse.shape == ()
        assert_loss_close(got, want, torch.bfloat16)
    # no rows: torch's values (the mean is NaN)
    empty = torch.empty(0, 10, device=device)
    no_t = torch.empty(0, dtype=torch.int64, device=device)
    for reduction in ("none", "mean", "sum"):
        torch.testing.assert_close(duet.cross_entropy(empty, no_t, reduction=reduction),
                                   F.cross_entropy(empty, no_t, reduction=reduction), equal_nan=True)
    # one class and two
    for classes in (1, 2):
        y = make((6, classes), torch.float32, device, seed=39)
        tt = targets(6, classes, device, seed=40)
        torch.testing.assert_close(duet.cross_entropy(y, tt, reduction="sum"), F.cross_entropy(y, tt, reduction="sum"),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_extreme_logits(device):
    x = make((4, 64), torch.float32, device, seed=41)
    x[0, 5] = 1e4  # one dominant logit
    x[1] = -1e4
    x[2, 7] = -math.inf  # a class that can never be picked
    t = torch.tensor([5, 3, 1, 0], device=device)
    torch.testing.assert_close(duet.cross_entropy(x, t, reduction="none"), F.cross_entropy(x, t, reduction="none"),
                               rtol=1e-5, atol=1e-4)


# ============================================================ cross-entropy: backward

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_gradient_matches_torch(reduction, dtype, device):
    n, c = 11, 203
    x = make((n, c), dtype, device, seed=42)
    t = targets(n, c, device, torch.int32, ignore_every=5, seed=43)
    g = make((n,), torch.float32, device, scale=1.0, seed=44) if reduction == "none" else torch.tensor(2.5)
    for smoothing, z in ((0.0, 0.0), (0.1, 1e-3)):
        xr = x.detach().double().requires_grad_(True)
        ce_reference(xr, t, -100, reduction, smoothing, z).backward(g.to(device=device, dtype=torch.float64))
        for inplace in (False, True):
            w = x.clone().requires_grad_(True)
            logits = w * 1  # a non-leaf, as a layer's output is (inplace_backward overwrites it)
            loss = duet.cross_entropy(logits, t, reduction=reduction, label_smoothing=smoothing, z_loss=z,
                                      inplace_backward=inplace)
            loss.backward(g.to(device=device, dtype=dtype))
            assert w.grad.dtype == dtype
            assert_rowwise_close(w.grad, xr.grad, 2 * TOL[dtype], floor=float(g.abs().max()) / n,
                                 what=f"{reduction} ls={smoothing} z={z} inplace={inplace}")


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_backward_overwrites_the_logits(device):
    x = make((8, 50), torch.float32, device, seed=45)
    t = targets(8, 50, device, ignore_every=3, seed=46)
    xr = x.clone().requires_grad_(True)
    F.cross_entropy(xr, t).backward()
    w = x.clone().requires_grad_(True)
    logits = w * 1.0  # a non-leaf: the layer's output
    loss = duet.cross_entropy(logits, t, inplace_backward=True)
    torch.testing.assert_close(loss, F.cross_entropy(x, t), rtol=1e-5, atol=1e-5)
    # the forward wrote the gradient (for an upstream gradient of 1) over the logits
    torch.testing.assert_close(logits.detach(), xr.grad, rtol=1e-5, atol=1e-7)
    loss.backward()
    torch.testing.assert_close(w.grad, xr.grad, rtol=1e-5, atol=1e-7)
    # a leaf that requires grad is refused; logits needing no gradient are not overwritten
    with pytest.raises(ValueError, match="leaf tensor"):
        duet.cross_entropy(x.clone().requires_grad_(True), t, inplace_backward=True)
    plain = x.clone()
    duet.cross_entropy(plain, t, inplace_backward=True)
    assert torch.equal(plain, x)
    with torch.no_grad():
        duet.cross_entropy(logits.detach().copy_(x), t, inplace_backward=True)
    assert torch.equal(logits.detach(), x)


@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_gradcheck(device):
    x = make((4, 9), torch.float32, device, scale=1.0, seed=47).requires_grad_(True)
    t = torch.tensor([1, -100, 8, 0], device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for reduction in ("none", "mean", "sum"):
            f = (lambda r: lambda v: duet.cross_entropy(v, t, reduction=r, label_smoothing=0.1, z_loss=0.01))(reduction)
            assert torch.autograd.gradcheck(f, (x,), eps=1e-3, atol=2e-3, rtol=1e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_module(device):
    x = make((6, 30), torch.bfloat16, device, seed=48)
    t = targets(6, 30, device, ignore_every=4, ignore_index=0, seed=49)
    loss = duet.nn.CrossEntropyLoss(ignore_index=0, reduction="sum", label_smoothing=0.05)
    want = torch.nn.CrossEntropyLoss(ignore_index=0, reduction="sum", label_smoothing=0.05)(x.double(), t)
    assert_loss_close(loss(x, t), want, torch.bfloat16)
    assert "reduction='sum'" in repr(loss)
    with pytest.raises(NotImplementedError, match="weight= is not supported"):
        duet.nn.CrossEntropyLoss(weight=torch.ones(30))
    z = duet.nn.CrossEntropyLoss(z_loss=1e-3)
    assert "z_loss=0.001" in repr(z)
    assert_loss_close(z(x, t), ce_reference(x, t, z_loss=1e-3), torch.bfloat16)


def test_cross_entropy_meta():
    x = torch.empty(5, 11, device="meta", dtype=torch.float16)
    t = torch.empty(5, dtype=torch.int64, device="meta")
    loss, lse = duet.cross_entropy(x, t, reduction="none", return_lse=True)
    assert loss.shape == (5,) and loss.dtype == torch.float16 and lse.shape == (5,) and lse.dtype == torch.float32
    loss, lse = torch.ops.duet.cross_entropy(x, t, -100, "mean", 0.0, 0.0, False)
    assert loss.shape == () and loss.dtype == torch.float32
    grad = torch.ops.duet.cross_entropy_backward(loss, x, t, lse, -100, "mean", 0.0, 0.0)
    assert grad.shape == x.shape and grad.dtype == x.dtype and grad.device.type == "meta"


@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_errors(device):
    x = make((4, 10), torch.float32, device)
    t = torch.tensor([1, 2, 3, 4], device=device)
    with pytest.raises(NotImplementedError, match="weight="):
        duet.cross_entropy(x, t, weight=torch.ones(10, device=device))
    with pytest.raises(NotImplementedError, match="size_average="):
        duet.cross_entropy(x, t, size_average=True)
    with pytest.raises(NotImplementedError, match="reduce="):
        duet.cross_entropy(x, t, reduce=False)
    with pytest.raises(NotImplementedError, match=r"\[N, C\] or \[C\]"):
        duet.cross_entropy(x.reshape(4, 10, 1), t.reshape(4, 1))
    with pytest.raises(NotImplementedError, match="class-probability targets"):
        duet.cross_entropy(x, torch.softmax(x, -1))
    with pytest.raises(TypeError, match="target has dtype torch.int16"):
        duet.cross_entropy(x, t.short())
    with pytest.raises(ValueError, match=r"Expected input batch_size \(4\) to match target batch_size \(3\)"):
        duet.cross_entropy(x, t[:3])
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        duet.cross_entropy(x, t, reduction="max")
    with pytest.raises(ValueError, match="label_smoothing must be between"):
        duet.cross_entropy(x, t, label_smoothing=1.5)
    with pytest.raises(ValueError, match="z_loss"):
        duet.cross_entropy(x, t, z_loss=-1.0)
    with pytest.raises(TypeError, match="float64"):
        duet.cross_entropy(x.double(), t)
    with pytest.raises(TypeError, match="ignore_index must be an int"):
        duet.cross_entropy(x, t, ignore_index=1.5)
    with pytest.raises(ValueError, match="0-d target"):
        duet.cross_entropy(x[0], t)


def test_out_of_range_targets_raise_on_the_cpu():
    x = make((4, 10), torch.float32, "cpu")
    for bad in (10, -1, 1 << 40):
        t = torch.tensor([1, bad, 3, -100])
        with pytest.raises(IndexError, match=f"Target {bad} is out of bounds"):
            duet.cross_entropy(x, t)
        with pytest.raises(IndexError):
            F.cross_entropy(x, t)  # torch's too
    with pytest.raises(IndexError, match="Target 10 is out of bounds"):
        duet.cross_entropy(x, torch.tensor([1, 10, 3, 0], dtype=torch.int32), ignore_index=10 + 1)
    # the backward op names them too (its launch is the shard backward's over every class)
    lse = torch.zeros(4)
    with pytest.raises(IndexError, match="Target 10 is out of bounds"):
        torch.ops.duet.cross_entropy_backward(torch.ones(()), x, torch.tensor([1, 10, 3, -100]), lse, -100, "mean",
                                              0.0, 0.0)
    # ignore_index may be any value, in range or not
    torch.testing.assert_close(duet.cross_entropy(x, torch.tensor([1, 10, 3, 0]), ignore_index=10),
                               F.cross_entropy(x, torch.tensor([1, 10, 3, 0]), ignore_index=10))


# ============================================================ torch >= 2.4: opcheck, compile

@needs_custom_op
@pytest.mark.parametrize("device", DEVICES)
def test_fused_opcheck(device):
    x = make((2, 3, 4, 9), torch.float32, device, seed=50).requires_grad_(True)
    mask = bool_mask((2, 1, 4, 9), device)
    torch.library.opcheck(torch.ops.duet.masked_softmax.default, (x, mask, 0.5, False, 0, False))
    torch.library.opcheck(torch.ops.duet.masked_softmax.default, (x, None, 0.5, True, 1, True))
    logits = make((6, 40), torch.float32, device, seed=51).requires_grad_(True)
    t = targets(6, 40, device, ignore_every=3)
    for reduction in ("none", "mean", "sum"):
        torch.library.opcheck(torch.ops.duet.cross_entropy.default, (logits, t, -100, reduction, 0.1, 1e-3, False))
    torch.library.opcheck(torch.ops.duet.cross_entropy_inplace.default,
                          (logits.detach().clone(), t, -100, "mean", 0.0, 0.0, False))


@needs_custom_op
@pytest.mark.parametrize("device", DEVICES)
def test_fused_compile_fullgraph(device):
    torch._dynamo.reset()
    backend = "inductor" if device == "cuda" else "aot_eager"

    def f(scores, mask, logits, target):
        p = duet.masked_softmax(scores, mask, scale=0.5) + duet.masked_softmax(scores, causal=True, causal_offset=1)
        loss = duet.cross_entropy(logits, target, label_smoothing=0.1, z_loss=1e-3)
        loss2 = duet.cross_entropy(logits * 1, target, reduction="sum", inplace_backward=True)  # default mode here
        return p.sum() + loss + loss2

    scores = make((2, 3, 5, 8), torch.float32, device, seed=52)
    mask = bool_mask((2, 1, 5, 8), device)
    logits = make((6, 33), torch.float32, device, seed=53)
    target = targets(6, 33, device, ignore_every=4)
    explanation = torch._dynamo.explain(f)(scores, mask, logits, target)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(f, fullgraph=True, backend=backend)
    grads = []
    for fn in (f, compiled):
        s, lg = scores.clone().requires_grad_(True), logits.clone().requires_grad_(True)
        out = fn(s, mask, lg, target)
        out.backward()
        grads.append((out.detach(), s.grad, lg.grad))
    for want, got in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# ============================================================ CUDA: graph capture, check_targets

@needs_cuda
def test_check_targets_on_cuda():
    x = make((6, 100), torch.float32, "cuda", seed=54)
    t = torch.tensor([1, 100, 3, -100, -7, 5], device="cuda")
    loss = duet.cross_entropy(x, t, reduction="none")  # no check: the invalid rows' losses are NaN
    sync("cuda")
    assert bool(torch.isnan(loss[[1, 4]]).all()) and bool(torch.isfinite(loss[[0, 2, 3, 5]]).all())
    assert bool(torch.isnan(duet.cross_entropy(x, t)).all())
    with pytest.raises(IndexError, match="2 target"):
        duet.cross_entropy(x, t, check_targets=True)
    good = torch.tensor([1, 99, 3, -100, 0, 5], device="cuda")
    torch.testing.assert_close(duet.cross_entropy(x, good, check_targets=True), F.cross_entropy(x, good))


@needs_cuda
@pytest.mark.parametrize("shape", [(64, 1000), (8, 128256)], ids=str)
def test_cross_entropy_cuda_graph_capture(shape):
    """Forward and backward captured on a side stream (the workspace comes
    from torch's allocator, so nothing is cudaMalloc'ed during capture),
    replayed on new data, compared with eager."""
    n, c = shape
    x = make(shape, torch.bfloat16, "cuda", seed=55).requires_grad_(True)
    t = targets(n, c, "cuda", ignore_every=5, seed=56)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        duet.cross_entropy(x, t, label_smoothing=0.1).backward()
    torch.cuda.current_stream().wait_stream(side)
    x.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = duet.cross_entropy(x, t, label_smoothing=0.1)
        loss.backward()
    for seed in (57, 58):
        with torch.no_grad():
            x.copy_(make(shape, torch.bfloat16, "cuda", seed=seed))
        graph.replay()
        sync("cuda")
        xr = x.detach().clone().requires_grad_(True)
        want = duet.cross_entropy(xr, t, label_smoothing=0.1)
        want.backward()
        torch.testing.assert_close(loss, want, rtol=1e-2, atol=1e-2)
        assert_rowwise_close(x.grad, xr.grad, 1e-2, floor=1.0 / n, what="graph replay gradient")


@needs_cuda
def test_masked_softmax_cuda_graph_capture():
    x = make((2, 4, 128, 128), torch.bfloat16, "cuda", seed=59)
    mask = bool_mask((2, 1, 128, 128), "cuda", seed=60)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        duet.masked_softmax(x, mask, scale=0.1)
        duet.masked_softmax(x, causal=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = duet.masked_softmax(x, mask, scale=0.1)
        yc = duet.masked_softmax(x, causal=True)
    x.copy_(make(x.shape, torch.bfloat16, "cuda", seed=61))
    graph.replay()
    sync("cuda")
    assert_rowwise_close(y, masked_reference(x, mask, 0.1), 1e-2, what="masked replay")
    assert_rowwise_close(yc, masked_reference(x, None, 1.0, 0), 1e-2, what="causal replay")
