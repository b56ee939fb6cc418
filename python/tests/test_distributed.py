"""duet.distributed across processes: vocabulary-parallel softmax,
log_softmax and cross-entropy, forward and backward, equal to the
single-process ops on the whole rows; and bad input on any rank raising on
every rank, the group still usable afterwards.

Each test starts 2 or 3 processes (torch.multiprocessing, spawn) that
join a gloo group over TCP on this machine and run CPU tensors on duet's
host backend; with two CUDA devices, the NCCL tests run the same checks on
the GPUs. A process that hangs fails the test at a deadline.
"""
import datetime
import faulthandler
import math
import os
import socket
import time

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
mp = pytest.importorskip("torch.multiprocessing")

import duet  # noqa: E402

if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

DEADLINE_S = 240
TOL = {torch.float32: (1e-6, 2.5e-7), torch.float16: (2e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5)}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, world, port, backend, check):
    # A process still running near the deadline prints where it waits.
    faulthandler.dump_traceback_later(DEADLINE_S - 30, exit=False)
    os.environ.setdefault("DUET_HOST_THREADS", "1")
    torch.set_num_threads(1)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    # A failing check leaves the group as it is: the process exits with the
    # error (which run_group reports), where destroying the group could
    # wait on ranks still inside a collective.
    check(rank, world, "cuda" if backend == "nccl" else "cpu")
    dist.destroy_process_group()


def run_group(world, check, backend="gloo"):
    """Runs check(rank, world, device) in `world` processes of one group;
    re-raises the first failure; fails if they are not done by the deadline."""
    ctx = mp.start_processes(_entry, args=(world, _free_port(), backend, check), nprocs=world, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    while not ctx.join(timeout=5):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"the {world} processes did not finish within {DEADLINE_S} s (a hang)")


def assert_close(got, want, dtype, what, scale=None):
    """Elementwise within TOL[dtype] relative; `scale` (a tensor broadcasting
    to want) replaces |want| as the measure, for results that cancel (a
    gradient dy - exp(y) sum(dy) is exact only to the rounding of its terms)."""
    rtol, atol = TOL[dtype]
    got, want = got.double().cpu(), want.double().cpu()
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    measure = want.abs() if scale is None else torch.maximum(want.abs(), scale.double().cpu())
    bad = ~((got - want).abs() <= atol + rtol * measure)
    bad &= ~(got.isnan() & want.isnan()) & ~(got == want)  # NaN and infinities where the op has them
    assert not bool(bad.any()), (f"{what}: {int(bad.sum())} of {got.numel()} differ, e.g. got "
                                 f"{got[bad][:3].tolist()} want {want[bad][:3].tolist()}")


def _full(shape, dtype, device, seed, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype).to(device)


def _shard(full, rank, world):
    cols = full.shape[-1] // world
    return full[..., rank * cols:(rank + 1) * cols]


# ------------------------------------------------------------------ equal to the single-process ops

def check_softmax_family(rank, world, device):
    import duet.distributed as dd
    seed = 0
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for shape in ((5, 1), (3, 4, 7), (6, 33), (4, 256), (2, 3000)):
            for log in (False, True):
                seed += 1
                full = _full(shape[:-1] + (shape[-1] * world,), dtype, device, seed)
                if seed % 3 == 0:
                    full[0, ..., : shape[-1] + 1] = -math.inf  # a row of -inf across the first shard
                g = _full(full.shape, dtype, device, seed + 1000, 1.0)
                x = _shard(full, rank, world).clone().requires_grad_(True)
                fn = dd.log_softmax if log else dd.softmax
                y = fn(x)
                y.backward(_shard(g, rank, world))
                single = full.clone().requires_grad_(True)
                ys = (duet.log_softmax if log else duet.softmax)(single, -1)
                ys.backward(g)
                what = f"rank {rank}/{world} {'log_' if log else ''}softmax {dtype} {shape}"
                assert y.dtype == dtype and y.shape == x.shape
                assert_close(y.detach(), _shard(ys.detach(), rank, world), dtype, what)
                # The gradient's terms: |dy| and |y| * |sum over the row|.
                gs = _shard(g, rank, world).double().abs()
                assert_close(x.grad, _shard(single.grad, rank, world), dtype, what + " backward",
                             scale=gs.amax(-1, keepdim=True) * (2 if log else 1))


def check_cross_entropy(rank, world, device):
    import duet.distributed as dd
    seed = 100
    for dtype in (torch.float32, torch.bfloat16):
        for cols in (1, 7, 64, 1001):
            for reduction in ("mean", "sum", "none"):
                for eps, z in ((0.0, 0.0), (0.1, 1e-3)):
                    for index_dtype in (torch.int64, torch.int32):
                        seed += 1
                        rows, vocab = 9, cols * world
                        full = _full((rows, vocab), dtype, device, seed)
                        gt = torch.Generator().manual_seed(seed)
                        target = torch.randint(0, vocab, (rows,), generator=gt)
                        target[1] = -100
                        target[3] = vocab - 1
                        target = target.to(index_dtype).to(device)
                        x = _shard(full, rank, world).clone().requires_grad_(True)
                        loss = dd.cross_entropy(x, target, reduction=reduction, label_smoothing=eps, z_loss=z)
                        single = full.clone().requires_grad_(True)
                        want = duet.cross_entropy(single, target, reduction=reduction, label_smoothing=eps,
                                                  z_loss=z)
                        up = _full(want.shape, torch.float32, device, seed + 7, 1.0).to(want.dtype)
                        loss.backward(up)
                        want.backward(up)
                        what = (f"rank {rank}/{world} cross_entropy {dtype} V={vocab} {reduction} eps={eps} "
                                f"z={z} {index_dtype}")
                        assert loss.dtype == dtype and loss.shape == want.shape, what
                        assert_close(loss.detach(), want.detach(), dtype, what)
                        # The gradient's target column p_t - 1 cancels: measured
                # against the row's largest gradient.
                want_grad = _shard(single.grad, rank, world)
                assert_close(x.grad, want_grad, dtype, what + " backward",
                             scale=single.grad.double().abs().amax(-1, keepdim=True))


def check_modes(rank, world, device):
    """inplace_backward and validate=False give the same results as the defaults."""
    import duet.distributed as dd
    full = _full((7, 40 * world), torch.float32, device, 5)
    target = torch.tensor([0, 5, -100, 40 * world - 1, 41, 3, 77], device=device)
    want_x = _shard(full, rank, world).clone().requires_grad_(True)
    want = dd.cross_entropy(want_x, target, label_smoothing=0.05)
    want.backward()
    for validate in (True, False):
        for inplace in (False, True):
            leaf = _shard(full, rank, world).clone().requires_grad_(True)
            x = leaf * 1.0  # not a leaf: the in-place mode overwrites it
            loss = dd.cross_entropy(x, target, label_smoothing=0.05, inplace_backward=inplace, validate=validate)
            loss.backward()
            what = f"rank {rank} validate={validate} inplace={inplace}"
            assert_close(loss.detach(), want.detach(), torch.float32, what)
            assert_close(leaf.grad, want_x.grad, torch.float32, what + " backward")
            y = dd.softmax(_shard(full, rank, world), validate=validate)
            assert_close(y, _shard(torch.softmax(full.double(), -1), rank, world).float(), torch.float32,
                         what + " softmax")


@pytest.mark.parametrize("world", [2, 3])
def test_softmax_family_matches_single_process(world):
    run_group(world, check_softmax_family)


@pytest.mark.parametrize("world", [2, 3])
def test_cross_entropy_matches_single_process(world):
    run_group(world, check_cross_entropy)


def test_modes_agree():
    run_group(2, check_modes)


# ------------------------------------------------------------------ bad input: every rank raises

def _expect_raise_everywhere(rank, call, words, what):
    """call() raises ValueError on this rank (every rank runs this), with
    each of `words` in the message."""
    try:
        call()
    except ValueError as e:
        message = str(e)
        for w in words:
            assert w in message, f"rank {rank}, {what}: {w!r} not in {message!r}"
        return
    raise AssertionError(f"rank {rank}, {what}: no ValueError")


def check_bad_input(rank, world, device):
    import duet.distributed as dd
    good = _full((4, 8), torch.float32, device, 1)
    target = torch.tensor([0, 3, 8 * world - 1, -100], device=device)
    last = rank == world - 1
    cases = [
        ("a wider shard on the last rank", lambda: dd.softmax(_full((4, 9 if last else 8), torch.float32, device, 2)),
         ["shard width", "differ"]),
        ("more rows on the last rank", lambda: dd.cross_entropy(
            _full((5 if last else 4, 8), torch.float32, device, 3),
            torch.zeros(5 if last else 4, dtype=torch.int64, device=device)), ["rows", "differ"]),
        ("a target past the whole vocabulary", lambda: dd.cross_entropy(
            good, torch.tensor([0, 1, 8 * world, 2], device=device)), ["outside", str(8 * world)]),
        ("a negative target", lambda: dd.cross_entropy(good, torch.tensor([0, -1, 2, 3], device=device)),
         ["outside"]),
        ("targets that differ across ranks", lambda: dd.cross_entropy(
            good, torch.tensor([0, 1, 2, rank], device=device)), ["targets differ"]),
        ("float64 input on the last rank", lambda: dd.softmax(good.double() if last else good),
         [f"rank {world - 1}", "dtype"]),
        ("a different label_smoothing on the last rank", lambda: dd.cross_entropy(
            good, target, label_smoothing=0.1 if last else 0.0), ["label_smoothing", "differ"]),
        ("an empty last dimension on rank 0", lambda: dd.log_softmax(
            good[:, :0] if rank == 0 else good), ["rank 0"]),
    ]
    for what, call, words in cases:
        _expect_raise_everywhere(rank, call, words, what)
        # The group is still in step: a good call after each refusal.
        loss = dd.cross_entropy(good, target)
        assert math.isfinite(float(loss)), what


@pytest.mark.parametrize("world", [2, 3])
def test_bad_input_raises_on_every_rank(world):
    run_group(world, check_bad_input)


def check_group_of_one(rank, world, device):
    import duet.distributed as dd
    full = _full((3, 17), torch.float32, device, 9)
    target = torch.tensor([0, 16, -100], device=device)
    group = dist.new_group([0])
    if rank == 0:
        assert torch.equal(dd.softmax(full, group), duet.softmax(full, -1))
        assert torch.equal(dd.log_softmax(full, group), duet.log_softmax(full, -1))
        assert torch.equal(dd.cross_entropy(full, target, group), duet.cross_entropy(full, target))


def test_group_of_one_is_the_single_device_op():
    run_group(2, check_group_of_one)


def test_uninitialized_is_a_clear_error():
    import duet.distributed as dd
    with pytest.raises(RuntimeError, match="init_process_group"):
        dd.softmax(torch.zeros(2, 3))


# ------------------------------------------------------------------ NCCL (two CUDA devices)

needs_two_gpus = pytest.mark.skipif(not (torch.cuda.is_available() and torch.cuda.device_count() >= 2
                                         and dist.is_nccl_available()),
                                    reason="needs two CUDA devices and NCCL")


def check_wrong_device(rank, world, device):
    import duet.distributed as dd
    x = _full((4, 8), torch.float32, device, 1)
    # Rank 0's tensor on the next rank's GPU, made before any collective
    # runs there.
    elsewhere = x.to(torch.device("cuda", (rank + 1) % world)) if rank == 0 else x
    torch.cuda.synchronize()
    _expect_raise_everywhere(rank, lambda: dd.softmax(x.cpu() if rank == 1 else x), ["rank 1", "backend"], "cpu")
    _expect_raise_everywhere(rank, lambda: dd.softmax(elsewhere), ["rank 0", "device"], "wrong GPU")


@needs_two_gpus
def test_nccl_matches_single_process():
    run_group(2, check_softmax_family, "nccl")
    run_group(2, check_cross_entropy, "nccl")
    run_group(2, check_modes, "nccl")


@needs_two_gpus
def test_nccl_bad_input_raises_on_every_rank():
    run_group(2, check_bad_input, "nccl")
    run_group(2, check_wrong_device, "nccl")
