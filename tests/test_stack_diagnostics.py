"""lib.stack_diagnostics: a fresh pre-norm and post-norm stack, seeded, at toy sizes."""

import torch

from lib.stack_diagnostics import diagnose_stack


def test_diagnose_stack_post_norm_pins_the_stream_and_pre_norm_lets_it_grow():
    state = torch.random.get_rng_state()
    post = diagnose_stack(6, norm_first=False, d_model=16, n_heads=2, tokens=8)
    pre = diagnose_stack(6, norm_first=True, d_model=16, n_heads=2, tokens=8)
    assert torch.equal(state, torch.random.get_rng_state())  # the global RNG is left alone
    assert len(post.grad_norms) == len(pre.stream_rms) == 6
    assert all(abs(r - 1) < 1e-3 for r in post.stream_rms)  # each block ends in LayerNorm(weight 1, bias 0)
    assert pre.stream_rms[-1] > pre.stream_rms[0] > 0.5  # residual adds, nothing rescales the stream
    assert all(g > 0 and g == g for g in post.grad_norms + pre.grad_norms)
    assert diagnose_stack(6, norm_first=True, d_model=16, n_heads=2, tokens=8) == pre  # seeded
