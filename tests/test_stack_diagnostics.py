"""lib.stack_diagnostics: a fresh pre-norm and post-norm stack, seeded, at toy sizes."""

import math

import pytest
import torch

from lib.stack_diagnostics import CopyModel, copy_batch, diagnose_stack, train_copy_task


def test_diagnose_stack_post_norm_pins_the_stream_and_pre_norm_lets_it_grow():
    state = torch.random.get_rng_state()
    post = diagnose_stack(6, norm_first=False, d_model=16, n_heads=2, tokens=8)
    pre = diagnose_stack(6, norm_first=True, d_model=16, n_heads=2, tokens=8)
    assert torch.equal(state, torch.random.get_rng_state())  # the global RNG is left alone
    assert len(post.grad_norms) == len(pre.stream_rms) == len(pre.ffn_out_grad_norms) == 6
    assert all(abs(r - 1) < 1e-3 for r in post.stream_rms)  # each block ends in LayerNorm(weight 1, bias 0)
    assert pre.stream_rms[-1] > pre.stream_rms[0] > 0.5  # residual adds, nothing rescales the stream
    assert all(g > 0 and g == g for g in post.grad_norms + pre.grad_norms)
    assert diagnose_stack(6, norm_first=True, d_model=16, n_heads=2, tokens=8) == pre  # seeded


def test_ffn_out_grad_norms_is_the_down_projection_weights_share_of_the_block_gradient():
    run = diagnose_stack(3, norm_first=True, d_model=16, n_heads=2, tokens=8)
    # W2 is one of the block's parameters: its gradient is part of the block's, never all of it
    assert all(0 < w2 < whole for w2, whole in zip(run.ffn_out_grad_norms, run.grad_norms, strict=True))


def test_pre_norm_last_block_gradient_shrinks_with_depth_and_post_norm_does_not():
    """Xiong et al.'s depth result at toy size: the last W2's gradient under pre-norm falls from
    3 to 24 blocks; under post-norm it stays within a factor 1.5."""

    def last(n_layers, norm_first):
        return diagnose_stack(n_layers, norm_first=norm_first, d_model=32, n_heads=4, tokens=8).ffn_out_grad_norms[-1]

    assert last(24, True) < 0.8 * last(3, True)
    assert 1 / 1.5 < last(24, False) / last(3, False) < 1.5


def test_copy_batch_repeats_its_first_half():
    ids = copy_batch(4, 5, 7, torch.Generator().manual_seed(0))
    assert ids.shape == (4, 10)
    assert torch.equal(ids[:, :5], ids[:, 5:])
    assert ids.min() >= 0 and ids.max() < 7


def test_copy_model_is_causal():
    torch.manual_seed(0)
    model = CopyModel(norm_first=True, n_layers=2, d_model=16, n_heads=2, vocab=5, max_len=6).eval()
    ids = torch.tensor([[1, 2, 3, 4, 0, 1]])
    changed = ids.clone()
    changed[0, 4] = 3
    with torch.no_grad():
        before, after = model(ids), model(changed)
    assert before.shape == (1, 6, 5)
    assert torch.allclose(before[:, :4], after[:, :4])  # positions before 4 cannot read it
    assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_train_copy_task_learns_at_a_modest_rate_and_is_seeded():
    state = torch.random.get_rng_state()
    losses = train_copy_task(norm_first=True, lr=3e-2, steps=40, n_layers=2, d_model=16, n_heads=2, vocab=8, half=4)
    assert torch.equal(state, torch.random.get_rng_state())
    assert len(losses) == 40 and all(math.isfinite(x) for x in losses)
    assert abs(losses[0] - math.log(8)) < 0.3  # starts near a uniform guess over 8 tokens
    assert sum(losses[-10:]) / 10 < 0.5 * math.log(8)  # and learns to copy
    again = train_copy_task(norm_first=True, lr=3e-2, steps=40, n_layers=2, d_model=16, n_heads=2, vocab=8, half=4)
    assert again == losses


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"lr": 0.0}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"lr": 1e-3, "steps": 0}, "steps"),
        ({"lr": 1e-3, "half": -1}, "half"),
    ],
)
def test_train_copy_task_refuses_bad_arguments(kwargs, named):
    with pytest.raises(ValueError, match=named):
        train_copy_task(norm_first=True, **kwargs)
