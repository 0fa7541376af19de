"""lib.tiling: the key tiles a block of queries visits cover every readable key, the fast schedule
skips only what no row reads, and visited_pairs counts the scores the tiled loop computes."""

import pytest
import torch
from conftest import random_qkv
from torch.utils.flop_counter import FlopCounterMode

from lib.attention import attention, causal_mask, sliding_window_mask
from lib.tiled_softmax import TiledAttention, tiled_attention
from lib.tiling import GroupedHeads, Tiling, _key_tiles, visited_pairs


@pytest.mark.parametrize("n, m, block_q, block_k, window", [(64, 64, 8, 8, 5), (37, 53, 8, 16, 20), (50, 20, 16, 4, 3)])
def test_window_tiles_cover_the_band_and_little_more(n, m, block_q, block_k, window):
    """Every key a block's rows may read lies in one of its tiles; no tile is wholly outside
    the band; the unmasked tiles hold only keys every row of the block reads."""
    band = sliding_window_mask(n, m, window)
    for q_start in range(0, n, block_q):
        rows = band[q_start : q_start + block_q]
        bq = rows.shape[0]
        tiles = _key_tiles(False, window, q_start, bq, n, m, block_k)
        visited = torch.zeros(m, dtype=torch.bool)
        for start, end, masked in tiles:
            assert not visited[start:end].any(), "a key visited twice"
            visited[start:end] = True
            assert rows[:, start:end].any(), "a tile outside the band"
            if not masked:
                assert rows[:, start:end].all()
        assert not (rows.any(dim=0) & ~visited).any(), "a readable key skipped"


@pytest.mark.parametrize("n, m", [(40, 40), (17, 45), (45, 17)])
@pytest.mark.parametrize("window", [None, 6])
def test_fast_and_plain_schedules_cover_the_same_readable_keys(n, m, window):
    """The plain twin visits every key block; the fast one only tiles holding a key some row reads,
    and a tile it leaves unmasked holds only keys every row of the block reads."""
    allowed = causal_mask(n, m) if window is None else sliding_window_mask(n, m, window)  # (N, M)
    fast, plain = (Tiling(True, window, 1.0, block_q=8, block_k=16, fast=f) for f in (True, False))
    for q_start in range(0, n, 8):
        rows = allowed[q_start : q_start + 8]
        bq = rows.shape[0]
        assert [(a, b) for a, b, _ in plain.key_tiles(q_start, bq, n, m)] == [
            (s, min(s + 16, m)) for s in range(0, m, 16)
        ]
        visited = torch.zeros(m, dtype=torch.bool)
        for start, end, masked in fast.key_tiles(q_start, bq, n, m):
            visited[start:end] = True
            assert masked or rows[:, start:end].all()
        assert not (rows.any(dim=0) & ~visited).any()


def test_band_is_the_causal_or_windowed_mask_cut_to_a_tile():
    n, m = 12, 20
    for window, full in ((None, causal_mask(n, m)), (5, sliding_window_mask(n, m, 5))):
        tiling = Tiling(True, window, 1.0)
        assert torch.equal(tiling.band(4, 6, 9, 7, n, m, "cpu"), full[4:10, 9:16])


def test_grouped_heads_share_each_kv_head_without_a_copy():
    q, k, v = random_qkv((2,), 6, 2, 5, 7, 4, 3, dtype=torch.float32)
    mask = torch.ones(7, dtype=torch.bool)
    heads = GroupedHeads.of(q, k, v, mask)
    assert heads.q.shape == (2, 2, 3, 5, 4) and heads.k.shape == (2, 2, 1, 7, 4) and heads.v.shape == (2, 2, 1, 7, 3)
    assert heads.mask.shape == (2, 2, 3, 5, 7)
    assert heads.k.data_ptr() == k.data_ptr() and heads.mask.data_ptr() == mask.data_ptr()  # views
    torch.testing.assert_close(heads.q[:, 1, 2], q[:, 5])  # query head 5 reads KV head 5 // 3 = 1
    assert (heads.n_queries, heads.n_keys) == (5, 7)


@pytest.mark.parametrize("is_causal, window", [(False, None), (True, None), (True, 40), (False, 7)])
def test_visited_pairs_is_the_forward_work(is_causal, window):
    """4·D FLOPs per visited score (QKᵀ and AV with Dv = D), as torch's counter sees them."""
    n, m, heads, d = 150, 170, 2, 8
    q, k, v = random_qkv((1,), heads, heads, n, m, d, d, dtype=torch.float32, seed=16)
    with FlopCounterMode(display=False) as counter:
        tiled_attention(q, k, v, is_causal=is_causal, window=window, block_q=32, block_k=64)
    pairs = visited_pairs(n, m, is_causal=is_causal, window=window, block_q=32, block_k=64)
    assert counter.get_total_flops() == 4 * d * heads * pairs
    if window:  # every allowed pair, and at most the block_q + window - 1 keys a block's rows may read
        assert sliding_window_mask(n, m, window).sum() <= pairs <= n * (32 + window - 1)
    assert visited_pairs(n, m, block_q=32, block_k=64) == n * m


@pytest.mark.parametrize("n, m", [(40, 40), (23, 61), (61, 23), (33, 34)])
@pytest.mark.parametrize("block_q, block_k, strip", [(16, 8, 4), (16, 32, 5), (12, 12, 12), (20, 64, 3)])
def test_causal_strips_cover_each_readable_pair_once(n, m, block_q, block_k, strip):
    """The fast causal loop's pieces: every (query, key) pair a query may read in exactly one
    piece, no piece past its rows' last position, and a piece left unmasked only when every
    row in it reads every key in it."""
    allowed = causal_mask(n, m)  # (N, M), bottom-right
    tiling = Tiling(True, None, 1.0, block_q, block_k, diagonal_rows=strip)
    covered = torch.zeros(n, m, dtype=torch.int64)
    for q_start in range(0, n, block_q):
        bq = min(block_q, n - q_start)
        for row_start, row_end, start, end, masked in tiling.pieces(q_start, bq, n, m):
            rows = slice(q_start + row_start, q_start + row_end)
            covered[rows, start:end] += 1
            assert allowed[rows, start:end].any(dim=0)[-1], "a key column no row of the piece reads"
            assert masked or allowed[rows, start:end].all()
    assert (covered <= 1).all() and (covered[allowed] == 1).all()
    pairs = visited_pairs(n, m, is_causal=True, block_q=block_q, block_k=block_k, diagonal_rows=strip)
    assert pairs == int(covered.sum())


@pytest.mark.parametrize("n, m", [(45, 45), (30, 52), (52, 30)])
@pytest.mark.parametrize("strip", [1, 4, 7, 16])
def test_causal_strips_give_attentions_output_and_work(n, m, strip):
    """Whatever the strip height, the fast loop equals attention (float64), and torch's FLOP
    counter sees 4·D FLOPs per visited pair."""
    q, k, v = random_qkv((2,), 4, 2, n, m, 8, dtype=torch.float64, seed=strip)
    tiling = Tiling(True, None, 8**-0.5, block_q=16, block_k=8, diagonal_rows=strip)
    with FlopCounterMode(display=False) as counter:
        out = TiledAttention.apply(q, k, v, None, tiling)
    torch.testing.assert_close(out, attention(q, k, v, is_causal=True), rtol=1e-12, atol=1e-12)
    pairs = visited_pairs(n, m, is_causal=True, block_q=16, block_k=8, diagonal_rows=strip)
    assert counter.get_total_flops() == 4 * 8 * 4 * 2 * pairs
    assert pairs < visited_pairs(n, m, is_causal=True, block_q=16, block_k=8, diagonal_rows=16) or strip == 16


@pytest.mark.parametrize("strip", [3, 8])
def test_causal_strips_with_a_mask_and_a_nan_key_nobody_reads(strip):
    """Strips with a caller's bool mask (some rows read nothing) and a NaN key that the mask
    hides from every query: attention's output, zeros for the empty rows, nothing non-finite."""
    n, m = 37, 41
    q, k, v = random_qkv((1,), 2, 2, n, m, 8, dtype=torch.float64, seed=5)
    gen = torch.Generator().manual_seed(6)
    mask = torch.rand(n, m, generator=gen) > 0.3
    mask[4] = False  # a query that reads nothing
    mask[:, 30] = False  # a key nobody reads...
    k[..., 30, :] = float("nan")  # ...holding a NaN
    out = tiled_attention(q, k, v, mask, is_causal=True, block_q=16, block_k=8)  # the default strips
    tiling = Tiling(True, None, 8**-0.5, block_q=16, block_k=8, diagonal_rows=strip)
    k0 = k.masked_fill(torch.isnan(k), 0.0)
    striped = TiledAttention.apply(q, k, v, mask, tiling)  # no zeroing first: the loop itself copes
    expected = attention(q, k0, v, mask, is_causal=True)
    torch.testing.assert_close(striped, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    assert torch.equal(striped[..., 4, :], torch.zeros_like(striped[..., 4, :]))
