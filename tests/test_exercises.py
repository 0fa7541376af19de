"""Every declared exercise accepts its reference answer and rejects each known wrong answer
with that answer's own feedback."""

import numpy as np
import pytest
import torch

from lib.attention import attention
from lib.checks import CORRECT, INCORRECT, FunctionExercise, ValueExercise, exercises, grade

ALL = list(exercises().values())
VALUES = [e for e in ALL if isinstance(e, ValueExercise)]
FUNCTIONS = [e for e in ALL if isinstance(e, FunctionExercise)]


def test_ids_are_unique_and_chapter_prefixed():
    ids = [e.id for e in ALL]
    assert len(ids) == len(set(ids))
    assert all(i.split(".")[0].isdigit() for i in ids)


@pytest.mark.parametrize("exercise", VALUES, ids=lambda e: e.id)
def test_value_exercise_accepts_expected_and_names_each_mistake(exercise):
    assert grade(exercise, exercise.expected).status == CORRECT
    for wrong in exercise.wrong_answers:
        result = grade(exercise, wrong.value)
        assert result.status == INCORRECT
        assert result.feedback == wrong.feedback, (wrong.value, result.feedback)


@pytest.mark.parametrize("exercise", VALUES, ids=lambda e: e.id)
def test_wrong_answers_are_distinguishable(exercise):
    """No wrong answer lies within tolerance of the right one or of another wrong one."""
    points = [exercise.expected] + [w.value for w in exercise.wrong_answers]
    for i, a in enumerate(points):
        for b in points[i + 1 :]:
            assert not np.allclose(a, b, atol=exercise.atol, rtol=exercise.rtol), (a, b)


@pytest.mark.parametrize("exercise", FUNCTIONS, ids=lambda e: e.id)
def test_function_exercise_accepts_reference_and_names_each_mistake(exercise):
    assert grade(exercise, exercise.reference).status == CORRECT
    for wrong in exercise.wrong_answers:
        result = grade(exercise, wrong.value)
        assert result.status == INCORRECT
        assert result.feedback == wrong.feedback


# Answers worked out independently of the declarations, with lib.attention and torch.
Q = torch.tensor([[1.0, 0.0]])
KEYS = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
VALS = torch.tensor([[2.0, 0.0], [0.0, 4.0]])


def _allowed_keys(read, n_keys=3):
    """Which keys a lone query reads, found by reading one-hot values: output j > 0 iff key j is read."""
    q, k, v = torch.zeros(1, 1, 2), torch.zeros(1, n_keys, 2), torch.eye(n_keys)[None]
    return (read(q, k, v)[0, 0] > 0).float()


def test_chapter_1_answers_agree_with_lib_attention():
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    answers = {
        "1.longer-query": attention(torch.tensor([[2.0, 0.0]]), KEYS, VALS)[0],
        "1.equal-scores": attention(torch.tensor([[1.0, 1.0]]), KEYS, VALS)[0],
        "1.masked-read": attention(  # scores [1, 2, 0] against one-hot keys, key 2 masked
            torch.tensor([[1.0, 2.0, 0.0]]),
            torch.eye(3),
            torch.tensor([[2.0, 0.0], [0.0, 4.0], [6.0, 2.0]]),
            torch.tensor([[True, False, True]]),
            scale=1.0,
        )[0],
        "2.causal-alignment": torch.stack(
            [
                _allowed_keys(lambda q, k, v: attention(q, k, v, is_causal=True)),
                _allowed_keys(lambda q, k, v: sdpa(q, k, v, is_causal=True)),
            ]
        ),
        "1.new-values": attention(Q, KEYS, torch.tensor([[3.0, 0.0], [0.0, -2.0]]))[0],
        # 64 products of variance 4 · 4 (test_wider_variance_measured measures it)
        "1.wider-variance": [64 * 4.0 * 4.0, (64 * 4.0 * 4.0) ** -0.5],
    }
    for exercise_id, answer in answers.items():
        result = grade(exercises()[exercise_id], answer)
        assert result.status == CORRECT, (exercise_id, answer, result.message)


def test_wider_variance_measured():
    """Var(q·k) for variance-4 coordinates at d_k = 64 is 1024, measured, within sampling error."""
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(100_000, 64, generator=gen, dtype=torch.float64) * 2
    k = torch.randn(100_000, 64, generator=gen, dtype=torch.float64) * 2
    dots = (q * k).sum(-1)
    assert abs(dots.var().item() - 1024) < 0.03 * 1024
    assert abs((dots / 32).var().item() - 1) < 0.03


def test_stable_softmax_mistakes_named():
    softmax_exercise = exercises()["1.stable-softmax"]

    def naive(x):
        return x.exp() / x.exp().sum(-1, keepdim=True)

    result = grade(softmax_exercise, naive)
    assert "large scores" in result.message and "Subtract each row's maximum" in result.feedback
    result = grade(softmax_exercise, lambda x: torch.softmax(x, dim=-1))  # NaN on an all -inf row
    assert "all -inf row" in result.message and "-inf - (-inf) is NaN" in result.feedback
    assert "large scores" not in result.message


def test_masked_read_names_each_rounded_mistake():
    """Exercise 1.3: each known mistake, rounded to the 2 decimals asked for, gets its own feedback."""
    exercise = exercises()["1.masked-read"]
    scores, values = torch.tensor([1.0, 2.0, 0.0]), torch.tensor([[2.0, 0.0], [0.0, 4.0], [6.0, 2.0]])
    after = torch.softmax(scores, 0) * torch.tensor([1.0, 0.0, 1.0])  # zeroed after, not renormalized
    mistakes = {
        "no mask": torch.softmax(scores, 0) @ values,
        "score set to 0": torch.softmax(torch.tensor([1.0, 0.0, 0.0]), 0) @ values,
        "zeroed after the softmax": after @ values,
    }
    feedbacks = set()
    for name, read in mistakes.items():
        result = grade(exercise, [round(x, 2) for x in read.tolist()])
        assert result.status == INCORRECT and result.feedback, name
        feedbacks.add(result.feedback)
    assert len(feedbacks) == len(mistakes)
    right = torch.softmax(torch.tensor([1.0, 0.0]), 0) @ values[[0, 2]]
    assert grade(exercise, [round(x, 2) for x in right.tolist()]).correct
