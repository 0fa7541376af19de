"""lib.rope.interleaved_to_half: a checkpoint's W_q/W_k reordered between RoPE layouts."""

import numpy as np
import pytest
import torch

from lib.rope import apply_rope, interleaved_to_half


def _heads(t: torch.Tensor, n_heads: int) -> torch.Tensor:  # (N, H·D) -> (H, N, D)
    return t.view(t.shape[0], n_heads, -1).transpose(0, 1)


def test_rows_are_evens_then_odds_within_each_head():
    weight = torch.arange(12.0)[:, None].expand(12, 3)  # row r holds r
    got = interleaved_to_half(weight, n_heads=2)[:, 0].tolist()
    assert got == [0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11]


def test_half_layout_on_reordered_weights_gives_the_interleaved_scores():
    gen = torch.Generator().manual_seed(0)
    n_heads, head_dim, d_model, tokens = 3, 8, 16, 6
    x = torch.randn(tokens, d_model, generator=gen, dtype=torch.float64)
    w_q, w_k = (torch.randn(n_heads * head_dim, d_model, generator=gen, dtype=torch.float64) for _ in range(2))
    positions = torch.tensor([0.0, 1.0, 2.0, 5.0, 9.0, 40.0], dtype=torch.float64)

    def scores(wq, wk, layout):
        q = apply_rope(_heads(x @ wq.T, n_heads), positions, layout=layout)  # (H, N, D)
        k = apply_rope(_heads(x @ wk.T, n_heads), positions, layout=layout)
        return q @ k.transpose(-2, -1)  # (H, N, N)

    meta = scores(w_q, w_k, "interleaved")
    hf = scores(interleaved_to_half(w_q, n_heads), interleaved_to_half(w_k, n_heads), "half")
    torch.testing.assert_close(hf, meta, atol=1e-12, rtol=0)
    unconverted = scores(w_q, w_k, "half")
    assert (unconverted - meta).abs().max() > 0.1 * meta.abs().max()


@pytest.mark.parametrize(("shape", "n_heads"), [((12, 4), 5), ((15, 4), 5), ((4,), 1)])
def test_bad_shapes_are_refused(shape, n_heads):
    with pytest.raises(ValueError, match="weight"):
        interleaved_to_half(torch.zeros(shape), n_heads)


def test_interleaved_to_half_takes_numpy_heads_and_refuses_a_bool():
    weight = torch.arange(32.0).reshape(8, 4)
    assert torch.equal(interleaved_to_half(weight, np.int64(2)), interleaved_to_half(weight, 2))
    with pytest.raises(ValueError, match="n_heads must be a positive integer, got True"):
        interleaved_to_half(weight, True)
