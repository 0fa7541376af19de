"""Every declared exercise accepts its reference answer and rejects each known wrong answer
with that answer's own feedback, and keeps the book's tolerance policy (lib/grading.py):
whole answers are whole, decimal answers state their precision, function exercises refuse
the library functions they stand for."""

import dataclasses
import re

import numpy as np
import pytest
import torch

import lib.attention
from lib.attention import MultiHeadAttention, attention, causal_mask, padding_mask, softmax
from lib.blocks import rms_norm
from lib.checks import CORRECT, INCORRECT, FunctionExercise, ValueExercise, exercises, grade
from lib.grading import WHOLE_FEEDBACK, precision_feedback, tolerance
from lib.online_softmax import online_softmax_update
from lib.rope import apply_rope
from lib.vit import conv_weight, patchify

ALL = list(exercises().values())
VALUES = [e for e in ALL if isinstance(e, ValueExercise)]
FUNCTIONS = [e for e in ALL if isinstance(e, FunctionExercise)]
WHOLE = [e for e in VALUES if e.whole]
DECIMAL = [e for e in VALUES if e.decimals is not None]


def unguarded(exercise: FunctionExercise) -> FunctionExercise:
    """The exercise without its library guard: the declared wrong answers are written with the
    library's functions (apply_rope with the wrong layout), which the guard would refuse."""
    return dataclasses.replace(exercise, stands_for=(), forbids=())


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
        assert result.mistake == wrong.feedback


@pytest.mark.parametrize("exercise", VALUES, ids=lambda e: e.id)
def test_wrong_answers_are_distinguishable(exercise):
    """No wrong answer lies within the grader's tolerance of the right one or of another wrong one."""
    rule = tolerance(exercise)
    points = [exercise.expected] + [w.value for w in exercise.wrong_answers]
    for i, a in enumerate(points):
        for b in points[i + 1 :]:
            assert not np.allclose(a, b, atol=2 * rule.atol, rtol=rule.rtol), (a, b)


@pytest.mark.parametrize("exercise", VALUES, ids=lambda e: e.id)
def test_every_value_exercise_declares_its_policy(exercise):
    """Whole (a count, index or choice) or decimals (stated in the question): never both, never neither."""
    assert exercise.whole != (exercise.decimals is not None), exercise.id
    if exercise.whole:
        expected = np.asarray(exercise.expected, dtype=np.float64)
        assert np.array_equal(expected, np.round(expected)), "a whole exercise's answer is whole"
    else:
        places = f"{exercise.decimals} decimal place" + ("" if exercise.decimals == 1 else "s")
        assert re.search(rf"Give (it|each number) to {places}\.", exercise.question), exercise.question


@pytest.mark.parametrize("exercise", WHOLE, ids=lambda e: e.id)
def test_whole_exercise_rejects_its_answer_plus_a_fraction(exercise):
    expected = np.asarray(exercise.expected, dtype=np.float64)
    for shifted in (expected + 0.4, expected - 0.4, expected + np.eye(1, expected.size).reshape(expected.shape) * 0.4):
        result = grade(exercise, shifted.tolist())
        assert result.status == INCORRECT and result.feedback == WHOLE_FEEDBACK, (shifted, result)
        assert "a count is a whole number" in result.feedback and result.mistake == WHOLE_FEEDBACK
    assert grade(exercise, expected + 1e-9).status == CORRECT  # float noise in a computed count is fine


@pytest.mark.parametrize("exercise", DECIMAL, ids=lambda e: e.id)
def test_decimal_exercise_takes_any_answer_rounded_to_its_precision(exercise):
    d = exercise.decimals
    expected = np.asarray(exercise.expected, dtype=np.float64)
    for rounded in (np.round(expected, d), np.floor(expected * 10**d + 0.5) / 10**d, expected + 0.49 * 10.0**-d):
        assert grade(exercise, rounded.tolist()).status == CORRECT, rounded
    for wrong in exercise.wrong_answers:  # a wrong answer rounded to the same precision is still that mistake
        result = grade(exercise, np.round(np.asarray(wrong.value, dtype=np.float64), d).tolist())
        assert result.status == INCORRECT and result.feedback == wrong.feedback, (wrong.value, result.feedback)
    coarse = np.round(expected, d - 1)  # one place short: close, and a word about the precision asked for
    if not np.allclose(coarse, expected, atol=tolerance(exercise).atol, rtol=0):
        result = grade(exercise, coarse.tolist())
        assert result.status == INCORRECT
        known = {w.feedback for w in exercise.wrong_answers}
        assert result.feedback == precision_feedback(d) or result.feedback in known, (coarse, result.feedback)
    far = expected + 0.6 * 10.0 ** -(d - 1)  # further than one place short: no word about precision
    result = grade(exercise, far.tolist())
    assert result.status == INCORRECT and result.feedback != precision_feedback(d)


@pytest.mark.parametrize("exercise", FUNCTIONS, ids=lambda e: e.id)
def test_function_exercise_accepts_reference_and_names_each_mistake(exercise):
    free = unguarded(exercise)
    assert grade(free, exercise.reference).status == CORRECT
    for wrong in exercise.wrong_answers:
        result = grade(free, wrong.value)
        assert result.status == INCORRECT
        assert result.feedback == wrong.feedback
        assert result.mistake == wrong.feedback


# Small functions that call the library function an exercise asks the learner to write, the
# way a learner who read the chapter might: one per library function the exercise stands for.
CALLERS = {
    "1.stable-softmax": [lambda x: softmax(x), lambda x: lib.attention.softmax(x, dim=-1)],
    "2.merge-heads": [lambda x: MultiHeadAttention.merge_heads(x), lambda x: MultiHeadAttention(4, 2).merge_heads(x)],
    "2.causal-padding-mask": [
        lambda lengths, n, m: padding_mask(lengths, m) & causal_mask(n, m),
        lambda lengths, n, m: padding_mask(lengths, m) & torch.ones(n, m, dtype=torch.bool).tril(m - n),
        lambda lengths, n, m: (torch.arange(m) < lengths[:, None])[:, None, None, :] & lib.attention.causal_mask(n, m),
    ],
    "3.rope-pairs": [lambda x, positions, freqs: apply_rope(x, positions, freqs=freqs, layout="interleaved")],
    "4.rms-norm": [lambda x, w, eps: rms_norm(x, w, eps)],
    "5.online-softmax-update": [lambda m, l, block: torch.stack(online_softmax_update(m, l, block))],
    "6.decode-mask": [lambda n, c: causal_mask(n, n + c)],
    "8.patchify": [lambda images, p: patchify(images, p)],
    "8.conv-weight": [lambda w, c, p: conv_weight(w, c, p)],
    "9.sample-probs": [lambda x, t, k: lib.capstone.sampling_probabilities(x, t, k)],
}


def _calls_it(exercise):
    def wrapper(*args):  # a def that hands everything to the exercise's own reference
        return exercise.reference(*args)

    return wrapper


@pytest.mark.parametrize("exercise", FUNCTIONS, ids=lambda e: e.id)
def test_function_exercise_refuses_the_library_it_stands_for(exercise):
    """The reference, the library function itself, and a small function that calls either, all
    are refused, naming the library function; the guard leaves nothing behind."""
    assert exercise.stands_for, f"{exercise.id} declares no library function it stands for"
    import importlib

    library = []
    for dotted in exercise.stands_for:
        module, _, name = dotted.rpartition(".")
        try:
            owner = importlib.import_module(module)
        except ImportError:  # a class attribute: lib.attention.MultiHeadAttention.merge_heads
            module, _, cls = module.rpartition(".")
            owner = getattr(importlib.import_module(module), cls)
        library.append((getattr(owner, name), name))
    before = {id(f): f for f, _ in library}
    for answer in [exercise.reference, *(f for f, _ in library), _calls_it(exercise), *CALLERS[exercise.id]]:
        result = grade(exercise, answer)
        assert result.status == INCORRECT, (exercise.id, answer)
        named = exercise.stands_for + exercise.forbids  # MultiHeadAttention(4, 2).merge_heads: the class is named
        assert any(dotted in result.feedback for dotted in named), (exercise.id, result)
        assert result.mistake == result.feedback
    for function, _ in library:  # every library function is back where it was
        assert before[id(function)] is function
    assert lib.attention.softmax is softmax and lib.attention.causal_mask is causal_mask
    assert isinstance(vars(MultiHeadAttention)["merge_heads"], staticmethod)
    assert MultiHeadAttention.merge_heads(torch.zeros(1, 2, 3, 4)).shape == (1, 3, 8)


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
    result = grade(unguarded(softmax_exercise), lambda x: torch.softmax(x, dim=-1))  # NaN on an all -inf row
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
