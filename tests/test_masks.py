"""lib.masks: sliding-window and segment masks and the zeroing of unread keys against brute force, and the
translation of nn.MultiheadAttention's masks checked against torch's module itself."""

import pytest
import torch
from torch import nn

from lib.attention import MultiHeadAttention, causal_mask
from lib.masks import mask_from_torch, segment_mask, sliding_window_mask, zero_unread_keys


@pytest.mark.parametrize("n, m, window", [(5, 5, 2), (2, 7, 3), (6, 4, 1), (3, 3, 10)])
def test_sliding_window_matches_brute_force(n, m, window):
    expected = torch.tensor(
        [[(m - n + i) - window < j <= (m - n + i) for j in range(m)] for i in range(n)], dtype=torch.bool
    )
    assert torch.equal(sliding_window_mask(n, m, window), expected)
    if window >= m:
        assert torch.equal(sliding_window_mask(n, m, window), causal_mask(n, m))


def test_sliding_window_rejects_bad_windows():
    for window in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="window must be a positive integer"):
            sliding_window_mask(3, 3, window)


def test_segment_mask_packs_documents():
    ids = torch.tensor([0, 0, 1, 1, 1])
    mask = segment_mask(ids)
    assert mask.shape == (5, 5)
    assert mask[1].tolist() == [True, True, False, False, False]
    both = segment_mask(ids) & causal_mask(5, 5)
    assert both[3].tolist() == [False, False, True, True, False]
    # batched ids broadcast over heads; a cache case: 2 new queries against 5 keys
    batched = segment_mask(torch.tensor([[1, 1], [2, 2]]), torch.tensor([[0, 1, 1, 1, 1], [0, 0, 0, 2, 2]]))
    assert batched.shape == (2, 1, 2, 5)
    with_cache = batched & causal_mask(2, 5)
    assert with_cache[1, 0].tolist() == [[False, False, False, True, False], [False, False, False, True, True]]


def test_segment_mask_brute_force():
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 3, (2, 6), generator=gen)
    mask = segment_mask(ids)
    for b in range(2):
        for i in range(6):
            for j in range(6):
                assert mask[b, 0, i, j] == (ids[b, i] == ids[b, j])


@pytest.mark.parametrize(
    "args, words",
    [
        ((torch.tensor([0.5, 1.0]),), "query_segments must be integer ids"),
        ((torch.zeros(2, 2, 2, dtype=torch.long),), "query_segments must be integer ids"),
        ((torch.tensor([0, 1]), torch.tensor([[0, 1]])), "must both be 1-D or both (B, ...)"),
        ((torch.tensor([[0, 1]]), torch.tensor([[0, 1], [1, 1]])), "same batch size"),
    ],
)
def test_segment_mask_errors_name_the_argument(args, words):
    with pytest.raises(ValueError) as info:
        segment_mask(*args)
    assert words in str(info.value)


def test_mask_from_torch_flips_boolean_polarity():
    blocked = torch.tensor([[False, True], [False, False]])
    padding = torch.tensor([[False, False], [False, True]])
    assert mask_from_torch() is None
    assert torch.equal(mask_from_torch(blocked), ~blocked)
    both = mask_from_torch(blocked, padding)
    assert both.shape == (2, 1, 2, 2)
    assert both[1, 0].tolist() == [[True, False], [True, False]]


def test_mask_from_torch_mixed_bool_and_float_is_additive():
    bias = torch.tensor([[0.5, -1.0], [0.0, 2.0]])
    padding = torch.tensor([[False, True]])
    mixed = mask_from_torch(bias, padding)
    assert mixed.dtype == torch.float32 and mixed.shape == (1, 1, 2, 2)
    assert mixed[0, 0, :, 0].tolist() == [0.5, 0.0] and torch.all(mixed[0, 0, :, 1] == float("-inf"))


@pytest.mark.parametrize("use_float", [False, True])
def test_mask_from_torch_gives_torch_modules_output(use_float):
    torch.manual_seed(1)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(3, 5, 16)
    gen = torch.Generator().manual_seed(2)
    blocked = torch.rand(3 * 4, 5, 5, generator=gen) > 0.6  # (B * h, N, M), True = blocked
    blocked[..., 0] = False  # every row keeps a key
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    if use_float:
        blocked = torch.zeros(blocked.shape).masked_fill(blocked, float("-inf"))
        padding = torch.zeros(padding.shape).masked_fill(padding, float("-inf"))
    expected, _ = theirs(x, x, x, attn_mask=blocked, key_padding_mask=padding, need_weights=False)
    got = ours(x, mask=mask_from_torch(blocked, padding, n_heads=4))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_mask_from_torch_errors():
    with pytest.raises(ValueError, match="n_heads"):
        mask_from_torch(torch.zeros(6, 2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="n_heads"):
        mask_from_torch(torch.zeros(6, 2, 2, dtype=torch.bool), n_heads=4)
    with pytest.raises(ValueError, match=r"attn_mask must be \(N, M\)"):
        mask_from_torch(torch.zeros(2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"key_padding_mask must be \(B, M\)"):
        mask_from_torch(key_padding_mask=torch.zeros(2, dtype=torch.bool))


def test_zero_unread_keys_zeroes_only_what_no_query_reads():
    """Brute force: key j of KV head g survives iff some query of some head of g may read it."""
    torch.manual_seed(0)
    n_kv_heads, group, n, m = 2, 3, 4, 6
    x = torch.randn(1, n_kv_heads, m, 5)  # (B, Hkv, M, D)
    allowed = torch.rand(1, n_kv_heads * group, n, m) > 0.8  # (B, H, N, M)
    allowed[:, :group, :, 2] = False  # key 2 of KV head 0: read by no head of its group
    out = zero_unread_keys(x, allowed)
    for g in range(n_kv_heads):
        for j in range(m):
            read = bool(allowed[0, g * group : (g + 1) * group, :, j].any())
            assert torch.equal(out[0, g, j], x[0, g, j] if read else torch.zeros(5))
    assert zero_unread_keys(x, torch.ones(n, m, dtype=torch.bool)) is x  # nothing hidden: no copy


def test_zero_unread_keys_stops_a_nan_at_a_padded_position():
    v = torch.ones(1, 1, 4, 2)
    v[..., 3, :] = float("nan")
    out = zero_unread_keys(v, torch.tensor([True, True, True, False]))
    assert torch.isfinite(out).all() and torch.equal(out[..., :3, :], v[..., :3, :])
