"""Chapter 2's exercises: answers worked out independently with lib.attention and torch,
and learner-style wrong functions (written differently from the declared ones) named."""

import torch
from torch import nn

from lib.attention import MultiHeadAttention, attention, causal_mask
from lib.checks import CORRECT, INCORRECT, exercises, grade


def test_chapter_2_value_answers_agree_with_lib():
    module = MultiHeadAttention(96, 12)
    x, source = torch.randn(4, 10, 96), torch.randn(4, 6, 96)
    q, k, v = module.project(x, source)
    _, weights = attention(q, k, v, return_weights=True)
    scores = torch.tensor([[2.0, 1.0, 2.5]])  # (1, M=3), already scaled; d_k = 1 makes the scale 1
    read = attention(
        scores.new_ones(1, 1), scores.T, torch.tensor([[1.0], [3.0], [8.0]]), torch.tensor([[True, True, False]])
    )  # q = [1], keys = the scores themselves, so q·k = score
    gqa = MultiHeadAttention(768, 12, n_kv_heads=4, bias=False)
    heads = torch.randn(2, 4, 5, 24)  # (B, h, N, d_v) with d_v = 24
    answers = {
        "2.score-shape": list(weights.shape),
        "2.mask-after-softmax": read.item(),
        "2.cache-causal-row": causal_mask(3, 7)[1].int().tolist(),
        "2.gqa-kv-params": sum(p.numel() for p in (*gqa.k_proj.parameters(), *gqa.v_proj.parameters())),
        "2.concat-width": MultiHeadAttention.merge_heads(heads).shape[-1],
    }
    for exercise_id, answer in answers.items():
        assert grade(exercises()[exercise_id], answer).status == CORRECT, exercise_id


def test_mask_after_softmax_matches_torch_softmax():
    """The same read through torch: softmax over allowed scores, weighted values."""
    weights = torch.softmax(torch.tensor([2.0, 1.0]), 0)
    assert grade(exercises()["2.mask-after-softmax"], (weights * torch.tensor([1.0, 3.0])).sum()).correct


def test_mask_after_softmax_names_each_rounded_mistake():
    """Each known mistake, rounded to the 2 decimals the question asks for, still gets its own feedback."""
    exercise = exercises()["2.mask-after-softmax"]
    values = torch.tensor([1.0, 3.0, 8.0])
    mistakes = {
        "no mask": torch.softmax(torch.tensor([2.0, 1.0, 2.5]), 0) @ values,
        "score set to 0": torch.softmax(torch.tensor([2.0, 1.0, 0.0]), 0) @ values,
        "zeroed after the softmax": torch.softmax(torch.tensor([2.0, 1.0, 2.5]), 0)[:2] @ values[:2],
    }
    feedbacks = set()
    for name, read in mistakes.items():
        result = grade(exercise, round(read.item(), 2))
        assert result.status == INCORRECT and result.feedback, name
        feedbacks.add(result.feedback)
    assert len(feedbacks) == len(mistakes)
    assert grade(exercise, round((torch.softmax(torch.tensor([2.0, 1.0]), 0) @ values[:2]).item(), 2)).correct


def test_merge_heads_catches_a_transposed_axis_and_view_on_a_view():
    exercise = exercises()["2.merge-heads"]

    def head_major(x):  # flattens (h, N) together: a learner who forgot the transpose
        return x.flatten(1, 2).reshape(x.shape[0], x.shape[2], -1)

    result = grade(exercise, head_major)
    assert result.status == INCORRECT and "head axis was never moved" in result.feedback

    def with_view(x):
        b, h, n, d = x.shape
        return x.transpose(1, 2).view(b, n, h * d)

    result = grade(exercise, with_view)
    assert result.status == INCORRECT and "two heads" in result.message and "use .reshape()" in result.feedback
    assert grade(exercise, lambda x: x.permute(0, 2, 1, 3).flatten(2)).correct


def test_causal_padding_mask_catches_flipped_polarity_and_top_left():
    exercise = exercises()["2.causal-padding-mask"]

    def torch_polarity(lengths, n, m):  # nn.MultiheadAttention's convention, built by hand
        keys = torch.arange(m)
        padded = keys[None, :] >= lengths[:, None]  # (B, M) True = padding
        future = torch.ones(n, m, dtype=torch.bool).triu(m - n + 1)  # True = blocked
        return padded[:, None, None, :] | future

    result = grade(exercise, torch_polarity)
    assert result.status == INCORRECT and "polarity is flipped" in result.feedback

    def top_left(lengths, n, m):
        keys = torch.arange(m)
        allowed = (keys[None, :] <= torch.arange(n)[:, None])[None, None]
        return allowed & (keys < lengths[:, None])[:, None, None, :]

    result = grade(exercise, top_left)
    assert result.status == INCORRECT and "top-left" in result.feedback

    def by_hand(lengths, n, m):  # a correct answer written from scratch, via nn's own helper
        blocked = nn.Transformer.generate_square_subsequent_mask(m)[m - n :] < 0  # (N, M) True = future
        return ~blocked & (torch.arange(m) < lengths[:, None])[:, None, None, :]

    assert grade(exercise, by_hand).correct
