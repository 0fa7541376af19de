"""Tiled attention: equal to lib.attention (outputs and gradients), and never bigger than a tile."""

import pytest
import torch
from conftest import random_qkv
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from lib.attention import attention, causal_mask, sliding_window_mask
from lib.online_softmax import online_softmax_update
from lib.tiled_softmax import tiled_attention

# (batch, H, Hkv, N, M, D, Dv, block_q, block_k): N and M off the blocks, N = 1, M != N, GQA
SHAPES = [
    ((2,), 4, 2, 37, 53, 16, 8, 8, 16),
    ((1,), 2, 2, 1, 29, 8, 8, 4, 8),
    ((), 3, 1, 20, 7, 5, 6, 16, 3),
    ((2, 2), 4, 4, 64, 64, 8, 8, 16, 16),
    ((1,), 8, 2, 33, 33, 16, 16, 384, 1024),  # the default-sized blocks: one tile
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("mask_kind", [None, "bool", "float"])
def test_matches_lib_attention(shape, is_causal, mask_kind):
    batch, h, h_kv, n, m, d, d_v, block_q, block_k = shape
    q, k, v = random_qkv(batch, h, h_kv, n, m, d, d_v, dtype=torch.float64)
    gen = torch.Generator().manual_seed(1)
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(*batch, 1, n, m, generator=gen) > 0.3
        mask[..., n // 2, :] = False  # a row with nothing to read
    elif mask_kind == "float":
        mask = torch.randn(n, m, generator=gen, dtype=torch.float64)
    expected = attention(q, k, v, mask, is_causal=is_causal)
    got = tiled_attention(q, k, v, mask, is_causal=is_causal, block_q=block_q, block_k=block_k)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("growth", [1.0, 3.0, 40.0])
def test_scores_that_grow_across_tiles(growth, is_causal):
    """Later keys score far higher: the kept running max must be raised (and the tile redone)
    when exp would overflow, and may be kept when it would not."""
    q, k, v = random_qkv((1,), 2, 2, 8, 64, 4, 4, dtype=torch.float32, seed=9)
    k = k * torch.linspace(1.0, growth, 64)[:, None]  # key j's scores grow with j
    q = q.abs() * 10
    k = k.abs()
    expected = attention(q.double(), k.double(), v.double(), is_causal=is_causal)
    got = tiled_attention(q, k, v, is_causal=is_causal, block_q=4, block_k=8)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("n, m", [(6, 3), (3, 6), (1, 1), (9, 9)])
def test_causal_rows_without_keys_are_zero(n, m):
    q, k, v = random_qkv((1,), 2, 1, n, m, 4, 4, dtype=torch.float64)
    got = tiled_attention(q, k, v, is_causal=True, block_q=2, block_k=2)
    torch.testing.assert_close(got, attention(q, k, v, is_causal=True))
    assert torch.isfinite(got).all()


def test_two_dimensional_inputs():
    q, k, v = random_qkv((), 1, 1, 5, 7, 4, 3, dtype=torch.float64)
    torch.testing.assert_close(tiled_attention(q[0], k[0], v[0], block_k=3), attention(q[0], k[0], v[0]))


@pytest.mark.parametrize("shape", SHAPES[:4])
@pytest.mark.parametrize("is_causal", [False, True])
def test_gradients_match_autograd_through_lib_attention(shape, is_causal):
    batch, h, h_kv, n, m, d, d_v, block_q, block_k = shape
    inputs = random_qkv(batch, h, h_kv, n, m, d, d_v, seed=2, dtype=torch.float64)
    mask = torch.rand(n, m, generator=torch.Generator().manual_seed(3)) > 0.2
    mask[0] = False
    ours = [t.clone().requires_grad_() for t in inputs]
    ref = [t.clone().requires_grad_() for t in inputs]
    upstream = torch.randn(*batch, h, n, d_v, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    (tiled_attention(*ours, mask, is_causal=is_causal, block_q=block_q, block_k=block_k) * upstream).sum().backward()
    (attention(*ref, mask, is_causal=is_causal) * upstream).sum().backward()
    for name, a, b in zip("qkv", ours, ref, strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=1e-8, msg=name)
        assert torch.isfinite(a.grad).all()


def test_gradcheck_float64():
    q, k, v = (t.requires_grad_() for t in random_qkv((1,), 4, 2, 5, 7, 3, 2, seed=5, dtype=torch.float64))
    bias = torch.randn(5, 7, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda q, k, v: tiled_attention(q, k, v, block_q=2, block_k=3), (q, k, v))
    assert torch.autograd.gradcheck(
        lambda q, k, v: tiled_attention(q, k, v, bias, is_causal=True, block_q=3, block_k=2), (q, k, v)
    )


@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 2e-2)])
def test_lower_precision_against_float64(dtype, atol):
    q, k, v = random_qkv((2,), 4, 2, 40, 50, 32, 32, seed=6, dtype=torch.float64)
    expected = attention(q, k, v, is_causal=True)
    got = tiled_attention(q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True, block_q=16, block_k=16)
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), expected, atol=atol, rtol=atol)


class LargestAllocation(TorchDispatchMode):
    """Records the largest storage any op creates that is not one of the given inputs."""

    def __init__(self, inputs):
        super().__init__()
        self.inputs = {t.untyped_storage().data_ptr() for t in inputs}
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.inputs:
                self.largest = max(self.largest, t.untyped_storage().nbytes())
        return out


def test_no_intermediate_larger_than_a_tile():
    batch, h, n, d, block_q, block_k = 2, 4, 512, 16, 32, 64
    q, k, v = (t.float().requires_grad_() for t in random_qkv((batch,), h, h, n, n, d, d, seed=7, dtype=torch.float64))
    mask = causal_mask(n, n)
    tile_bytes = batch * h * block_q * block_k * 4
    io_bytes = q.untyped_storage().nbytes()  # the output, dq, dk, dv are this size
    score_bytes = batch * h * n * n * 4
    assert max(tile_bytes, io_bytes) * 8 <= score_bytes  # so the test can tell the two apart

    with LargestAllocation([q, k, v, mask]) as forward:
        out = tiled_attention(q, k, v, mask, block_q=block_q, block_k=block_k)
    assert forward.largest <= max(tile_bytes, io_bytes)
    with LargestAllocation([q, k, v, mask, out]) as backward:
        out.sum().backward()
    assert backward.largest <= max(tile_bytes, io_bytes)

    with LargestAllocation([q, k, v, mask]) as naive:  # the instrument does see a full score matrix
        attention(q, k, v, mask)
    assert naive.largest >= score_bytes


def test_bad_input_is_reported_like_lib_attention():
    q, k, v = random_qkv((1,), 4, 3, 5, 5, 4, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="not a multiple"):
        tiled_attention(q, k, v)
    q, k, v = random_qkv((1,), 2, 2, 5, 5, 4, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="block_q must be a positive integer, got 0"):
        tiled_attention(q, k, v, block_q=0)
    with pytest.raises(ValueError, match="block_k must be a positive integer, got 2.0"):
        tiled_attention(q, k, v, block_k=2.0)


# --- sliding windows: only the band's tiles, equal to masked dense attention ---------------

# (batch, H, Hkv, N, M, D, Dv, block_q, block_k, window): windows narrower and wider than the
# blocks, N != M both ways (rows before the first key read nothing), one query, GQA
WINDOW_SHAPES = [
    ((2,), 4, 2, 37, 53, 8, 6, 8, 16, 5),
    ((1,), 2, 2, 64, 64, 8, 8, 8, 8, 1),
    ((1,), 2, 1, 64, 64, 8, 8, 16, 8, 24),
    ((), 3, 3, 40, 25, 4, 4, 8, 4, 9),
    ((1,), 2, 2, 1, 29, 8, 8, 4, 8, 7),
    ((1,), 2, 2, 30, 30, 4, 4, 8, 16, 100),  # wider than the sequence: plain causal
    ((1,), 8, 2, 70, 70, 16, 16, 384, 1024, 16),  # the default-sized blocks
]


@pytest.mark.parametrize("shape", WINDOW_SHAPES)
def test_window_matches_masked_attention_outputs_and_gradients(shape):
    batch, h, h_kv, n, m, d, d_v, block_q, block_k, window = shape
    inputs = random_qkv(batch, h, h_kv, n, m, d, d_v, seed=11, dtype=torch.float64)
    ours = [t.clone().requires_grad_() for t in inputs]
    ref = [t.clone().requires_grad_() for t in inputs]
    upstream = torch.randn(*batch, h, n, d_v, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    got = tiled_attention(*ours, window=window, block_q=block_q, block_k=block_k)
    expected = attention(*ref, sliding_window_mask(n, m, window))
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=0)
    (got * upstream).sum().backward()
    (expected * upstream).sum().backward()
    for name, a, b in zip("qkv", ours, ref, strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=0, msg=name)


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_window_combines_with_a_mask_and_is_causal(mask_kind):
    q, k, v = random_qkv((2,), 4, 2, 33, 41, 8, 8, seed=13, dtype=torch.float64)
    gen = torch.Generator().manual_seed(14)
    if mask_kind == "bool":
        mask = torch.rand(2, 1, 33, 41, generator=gen) > 0.3
    else:
        mask = torch.randn(33, 41, generator=gen, dtype=torch.float64)
    band = sliding_window_mask(33, 41, 6)
    expected = attention(q, k, v, mask & band if mask_kind == "bool" else mask.masked_fill(~band, float("-inf")))
    for is_causal in (False, True):
        got = tiled_attention(q, k, v, mask, is_causal=is_causal, window=6, block_q=8, block_k=8)
        torch.testing.assert_close(got, expected, atol=1e-10, rtol=0)


def test_window_float32_against_float64():
    q, k, v = random_qkv((1,), 4, 4, 300, 300, 32, 32, seed=15, dtype=torch.float64)
    expected = attention(q, k, v, sliding_window_mask(300, 300, 50))
    got = tiled_attention(q.float(), k.float(), v.float(), window=50, block_q=64, block_k=128)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


def test_window_work_grows_linearly_and_dense_work_quadratically():
    """Counted multiply-adds (torch's FLOP counter), forward and backward: doubling N doubles
    the windowed work and quadruples the dense work."""

    def flops(n, window):
        q, k, v = (t.requires_grad_() for t in random_qkv((1,), 2, 2, n, n, 8, 8, dtype=torch.float32))
        with FlopCounterMode(display=False) as counter:
            tiled_attention(q, k, v, is_causal=True, window=window, block_q=32, block_k=64).sum().backward()
        return counter.get_total_flops()

    windowed = flops(1024, 64) / flops(512, 64)  # 2.07: the first blocks read fewer keys
    dense = flops(1024, None) / flops(512, None)  # 3.88: the diagonal tiles add work linear in N
    assert 1.9 <= windowed <= 2.1
    assert 3.8 <= dense <= 4.2


def test_bad_window_is_reported():
    q, k, v = random_qkv((1,), 2, 2, 5, 5, 4, 4, dtype=torch.float64)
    for window in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="window must be a positive integer"):
            tiled_attention(q, k, v, window=window)


# (H, Hkv, N, M, is_causal, window, block_q, block_k): no row without a key, so SDPA has no NaN
SDPA_CASES = [
    (4, 4, 37, 37, False, None, 16, 8),
    (6, 2, 50, 50, True, None, 16, 32),
    (4, 1, 33, 70, True, None, 8, 16),
    (4, 2, 100, 100, False, 7, 16, 16),
    (8, 4, 45, 80, True, 13, 8, 32),
    (2, 1, 129, 129, True, 64, 32, 16),
]


@pytest.mark.parametrize("case", SDPA_CASES)
def test_matches_torch_sdpa_with_an_explicit_boolean_mask(case):
    """An outside reference: torch's SDPA, told exactly which pairs may be read (float64)."""
    import torch.nn.functional as F

    h, h_kv, n, m, is_causal, window, block_q, block_k = case
    inputs = random_qkv((2,), h, h_kv, n, m, 8, 12, seed=21, dtype=torch.float64)
    ours = [t.clone().requires_grad_() for t in inputs]
    ref = [t.clone().requires_grad_() for t in inputs]
    query_pos = torch.arange(n)[:, None] + (m - n)  # (N, 1), bottom-right
    key_pos = torch.arange(m)[None, :]  # (1, M)
    allowed = torch.ones(n, m, dtype=torch.bool)  # (N, M)
    if is_causal or window is not None:
        allowed &= key_pos <= query_pos
    if window is not None:
        allowed &= key_pos > query_pos - window
    got = tiled_attention(*ours, is_causal=is_causal, window=window, block_q=block_q, block_k=block_k)
    expected = F.scaled_dot_product_attention(*ref, attn_mask=allowed, enable_gqa=h != h_kv)
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=0)
    upstream = torch.randn(got.shape, generator=torch.Generator().manual_seed(22), dtype=torch.float64)
    (got * upstream).sum().backward()
    (expected * upstream).sum().backward()
    for name, a, b in zip("qkv", ours, ref, strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=0, msg=name)


# --- the plain twin (Algorithm 1 as written) and the fast one agree ------------------------

TWIN_CASES = [
    # (batch, H, Hkv, N, M, D, Dv, block_q, block_k, window, mask_kind)
    ((2,), 4, 2, 37, 53, 8, 6, 8, 16, None, None),  # GQA, N != M, ragged last tiles
    ((1,), 4, 1, 40, 40, 8, 8, 16, 8, None, "bool"),  # MQA, a padding-style mask with empty rows
    ((), 2, 2, 33, 45, 4, 4, 8, 8, None, "float"),
    ((1,), 4, 2, 64, 64, 8, 8, 16, 16, 5, None),  # a window narrower than a tile
    ((2,), 2, 1, 30, 50, 8, 4, 8, 32, 12, "bool"),
]


@pytest.mark.parametrize("case", TWIN_CASES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_plain_and_fast_twins_agree_in_outputs_and_gradients(case, is_causal):
    batch, h, h_kv, n, m, d, d_v, block_q, block_k, window, mask_kind = case
    inputs = random_qkv(batch, h, h_kv, n, m, d, d_v, dtype=torch.float64, seed=31)
    gen = torch.Generator().manual_seed(32)
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(*batch, 1, n, m, generator=gen) > 0.3
        mask[..., 3, :] = False  # a row with nothing to read
    elif mask_kind == "float":
        mask = torch.randn(n, m, generator=gen, dtype=torch.float64).masked_fill(
            torch.rand(n, m, generator=gen) < 0.2, float("-inf")
        )
    grad_out = torch.randn(*batch, h, n, d_v, generator=gen, dtype=torch.float64)
    results = []
    for fast in (False, True):
        q, k, v = (t.clone().requires_grad_() for t in inputs)
        options = dict(is_causal=is_causal, window=window, block_q=block_q, block_k=block_k, fast=fast)
        out = tiled_attention(q, k, v, mask, **options)
        out.backward(grad_out)
        results.append((out.detach(), q.grad, k.grad, v.grad))
    q, k, v = (t.clone().requires_grad_() for t in inputs)
    reference_mask = mask
    if window is not None:  # a window means causal attention inside the band
        band = sliding_window_mask(n, m, window)
        reference_mask = (
            band
            if mask is None
            else (mask & band if mask.dtype == torch.bool else mask.masked_fill(~band, float("-inf")))
        )
    expected = attention(q, k, v, reference_mask, is_causal=is_causal)
    expected.backward(grad_out)
    for plain_tensor, fast_tensor, reference in zip(*results, (expected.detach(), q.grad, k.grad, v.grad), strict=True):
        torch.testing.assert_close(fast_tensor, plain_tensor, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(plain_tensor, reference, atol=1e-12, rtol=1e-10)


def test_plain_twin_calls_online_softmax_update_once_per_tile(monkeypatch):
    import lib.tiled_softmax as tiled

    calls = []

    def counting_update(m, l, block):
        calls.append(block.shape[-2:])
        return online_softmax_update(m, l, block)

    monkeypatch.setattr(tiled, "online_softmax_update", counting_update)
    q, k, v = random_qkv((1,), 2, 2, 20, 30, 4, 4, dtype=torch.float64)
    tiled_attention(q, k, v, block_q=8, block_k=16, fast=False)
    assert calls == [(8, 16), (8, 14), (8, 16), (8, 14), (4, 16), (4, 14)]  # 3 query blocks x 2 key blocks


# --- a NaN where no query may read contributes nothing ------------------------------------


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("n", [8, 1000])  # one tile at the default blocks, and several
def test_a_nan_key_reaches_only_the_rows_that_read_it(fast, n):
    q, k, v = random_qkv((1,), 4, 2, n, n, 8, 8, dtype=torch.float32, seed=41)
    k[..., 5, :] = float("nan")
    got = tiled_attention(q, k, v, is_causal=True, fast=fast)  # the default (384, 1024) blocks
    expected = attention(q, k, v, is_causal=True)
    assert torch.isnan(got[..., 5:, :]).all() and torch.isnan(expected[..., 5:, :]).all()
    torch.testing.assert_close(got[..., :5, :], expected[..., :5, :])
    assert torch.isfinite(got[..., :5, :]).all()


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_nan_at_padded_positions_contributes_nothing(fast, mask_kind):
    q, k, v = random_qkv((2,), 4, 2, 12, 12, 8, 8, dtype=torch.float64, seed=42)
    lengths = torch.tensor([12, 7])
    readable = torch.arange(12)[None, :] < lengths[:, None]  # (B, M)
    mask = readable[:, None, None, :]  # (B, 1, 1, M)
    if mask_kind == "float":
        mask = torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    clean = tiled_attention(q, k, v, mask, is_causal=True, block_q=4, block_k=4, fast=fast)
    k[1, :, 7:], v[1, :, 7:] = float("nan"), float("inf")
    got = tiled_attention(q, k, v, mask, is_causal=True, block_q=4, block_k=4, fast=fast)
    torch.testing.assert_close(got, clean, atol=1e-12, rtol=1e-10)  # the NaN tile is redone: rounding may differ
    torch.testing.assert_close(attention(q, k, v, mask, is_causal=True), clean)
