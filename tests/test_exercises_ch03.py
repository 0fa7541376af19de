"""Chapter 3's exercises: answers worked out independently, and learner-style functions that
tell a precision problem apart from a wrong formula."""

import torch

from lib.attention import attention, causal_mask, padding_mask
from lib.checks import CORRECT, INCORRECT, exercises, grade


def _reads(mask_row: torch.Tensor) -> list[float]:
    """Which of 7 source keys a query reads, found by reading one-hot values through attention."""
    q, k, v = torch.zeros(1, 2), torch.zeros(7, 2), torch.eye(7)
    return (attention(q, k, v, mask_row[None])[0] > 0).float().tolist()


def test_cross_attention_row_against_attention():
    exercise = exercises()["3.cross-attention-row"]
    source = padding_mask([6], 7)[0, 0, 0]  # (M,): 6 real source tokens, 1 pad
    assert grade(exercise, _reads(source)).status == CORRECT
    bottom_right = source & causal_mask(4, 7)[1]
    result = grade(exercise, _reads(bottom_right))
    assert result.status == INCORRECT and "bottom-right" in result.feedback


def _rope_pairs(x, positions, freqs, angle_dtype=torch.float64, sign=1.0):
    angles = positions.to(angle_dtype)[:, None] * freqs.to(angle_dtype)[None, :]  # (N, P)
    cos, sin = angles.cos().to(x.dtype), (sign * angles.sin()).to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
    return out


def test_rope_pairs_tells_float32_angles_from_a_wrong_formula():
    exercise = exercises()["3.rope-pairs"]
    assert grade(exercise, _rope_pairs).status == CORRECT
    result = grade(exercise, lambda x, p, f: _rope_pairs(x, p, f, angle_dtype=torch.float32))
    assert result.status == INCORRECT
    assert "fails 1 of 9" in result.message and "large positions" in result.message  # 5 declared, 4 drawn
    assert "precision" in result.feedback and "float64" in result.feedback
    clockwise = grade(exercise, lambda x, p, f: _rope_pairs(x, p, f, sign=-1.0))
    assert clockwise.status == INCORRECT and "clockwise" in clockwise.feedback
    assert "precision" not in clockwise.feedback


def test_rope_pairs_in_float32_is_told_about_precision_not_the_formula():
    """A correct formula computed in float32 gets 3.rope-pairs' own message about precision."""
    import torch

    from lib.checks import exercises, grade

    def in_float32(x, positions, freqs):  # the right rotation of pairs (2i, 2i+1), all in float32
        angles = positions.float()[:, None] * freqs.float()[None, :]  # (N, D/2)
        cos, sin = angles.cos(), angles.sin()
        even, odd = x.float()[..., 0::2], x.float()[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)

    result = grade(exercises()["3.rope-pairs"], in_float32)
    assert result.status == "incorrect"
    assert "precision" in result.feedback and "float16" not in result.feedback, result
