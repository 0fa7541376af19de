"""Chapter 1's check-yourself exercises: one attention read.

Value exercises are plain data: the expected answer, its tolerance, and the wrong answers
the lesson warns about with the feedback each earns. The numbers are written as the
arithmetic that produces them, so a reader can follow where each comes from.
Function exercises name a reference in lib and hidden cases, each with what failing it
usually means. ``tests/test_exercises.py`` proves each accepts its reference answer and
rejects each wrong one with its own feedback.
"""

from __future__ import annotations

import math

import torch

from lib.attention import softmax
from lib.exercises.base import Case, FunctionExercise, ValueExercise, WrongAnswer

# --- Chapter 1: one attention read ----------------------------------------------------
# The lesson's example: q = [1, 0]; keys [1, 0] and [0, 1]; values [2, 0] and [0, 4]; d_k = 2.
_SCORE = 1 / math.sqrt(2)  # q·k1 / √2; q·k2 / √2 is 0
_W1 = math.exp(_SCORE) / (math.exp(_SCORE) + 1)  # softmax([0.7071, 0])[0] ≈ 0.6698
_W2 = 1 - _W1  # ≈ 0.3302
_OUTPUT = [2 * _W1, 4 * _W2]  # _W1·[2, 0] + _W2·[0, 4] ≈ [1.3395, 1.3210]

_NOT_BEST_MATCH = (
    "That is the value of the best-matching key. Attention does not pick a winner: it returns "
    "the weighted average Σ wᵢ vᵢ of all the values it may read."
)

CHAPTER_1 = (
    ValueExercise(
        id="1.scaled-scores",
        question="In the worked example, what are the two scores after scaling, just before the softmax?",
        expected=[_SCORE, 0.0],
        explanation=f"The dot products [1, 0] divided by √d_k = √2 give [{_SCORE:.4f}, 0].",
        hints=("Take the dot product of q with each key, then divide by √d_k, with d_k = 2.",),
        wrong_answers=(
            WrongAnswer([1.0, 0.0], "Those are the raw dot products: you forgot to divide by √d_k = √2."),
            WrongAnswer([0.5, 0.0], "You divided by d_k = 2; the scale is 1/√d_k, so divide by √2."),
            WrongAnswer([math.sqrt(2), 0.0], "You multiplied by √2; the scores are divided by √d_k."),
            WrongAnswer([_W1, _W2], "Those are the weights, after the softmax. The scores come before it."),
        ),
    ),
    ValueExercise(
        id="1.equal-scores",
        question="If both allowed scores are equal, what is the output, with values [2, 0] and [0, 4]?",
        expected=[1.0, 2.0],
        explanation="Equal scores give weights [0.5, 0.5], so the output is 0.5·[2, 0] + 0.5·[0, 4] = [1, 2].",
        hints=("Equal scores make equal weights. The output is the weighted sum of the values.",),
        wrong_answers=(
            WrongAnswer([2.0, 0.0], _NOT_BEST_MATCH),
            WrongAnswer([0.0, 4.0], "That is the larger value vector. " + _NOT_BEST_MATCH),
            WrongAnswer([2.0, 4.0], "You added the values without weights; the weights sum to 1, so halve each."),
            WrongAnswer([0.5, 0.5], "Those are the weights. The question asks for the output, Σ wᵢ vᵢ."),
            WrongAnswer(_OUTPUT, f"That is the worked example's output, with unequal scores [{_SCORE:.4f}, 0]."),
        ),
    ),
    ValueExercise(
        id="1.causal-output",
        question=(
            "The query is at the first position of a two-token causal sequence. "
            "What output does it read from values [2, 0] and [0, 4]?"
        ),
        expected=[2.0, 0.0],
        explanation="The second score becomes -inf before the softmax, so the weights are [1, 0] and the output is v1.",
        hints=("Set the disallowed score to -inf before the softmax, then normalize.",),
        wrong_answers=(
            WrongAnswer(
                _OUTPUT,
                "That is the unmasked output: the mask was not applied, or the masked score was set to 0 "
                "(which here equals its unmasked value) instead of -inf.",
            ),
            WrongAnswer(
                [2 * _W1, 0.0],
                "You zeroed the weight after the softmax without renormalizing: the disallowed score still "
                "sits in the denominator, so the weights no longer sum to 1. Mask before the softmax.",
            ),
            WrongAnswer(
                [0.0, 4.0],
                "The mask's polarity is flipped: the first position may read key 1 (itself), not key 2 (the future).",
            ),
        ),
    ),
    ValueExercise(
        id="1.doubled-values-weights",
        question="Double both value vectors in the worked example. What are the attention weights now?",
        expected=[_W1, _W2],
        explanation="The weights come from q and the keys only. The values do not enter the softmax.",
        hints=("Which of q, k and v enter the scores?",),
        wrong_answers=(
            WrongAnswer([2 * _W1, 2 * _W2], "Weights always sum to 1, and they depend only on q and the keys."),
            WrongAnswer([2 * _W1, 4 * _W2], "That is the original output, not the weights."),
        ),
    ),
    ValueExercise(
        id="1.doubled-values-output",
        question="Double both value vectors in the worked example. What is the output now?",
        expected=[4 * _W1, 8 * _W2],
        explanation=f"Same weights, twice the values: the output doubles to about [{4 * _W1:.4f}, {8 * _W2:.4f}].",
        hints=("The weights are unchanged; the output is linear in the values.",),
        wrong_answers=(
            WrongAnswer(_OUTPUT, "The values decide what the query receives: doubling them doubles the output."),
            WrongAnswer([4.0, 0.0], "That is the best-matching (doubled) value. " + _NOT_BEST_MATCH),
        ),
    ),
    ValueExercise(
        id="1.dot-variance",
        question=(
            "q and k have d_k = 64 independent coordinates, each with mean 0 and variance 1. "
            "What is the variance of q·k before scaling?"
        ),
        expected=64.0,
        explanation="q·k sums 64 independent products, each of variance 1, so its variance is 64 (std 8).",
        hints=("Each product qᵢkᵢ has variance 1. Variances of independent terms add.",),
        wrong_answers=(
            WrongAnswer(8.0, "8 is the standard deviation, √64. The variance is its square."),
            WrongAnswer(1.0, "That is the variance after dividing by √d_k. Before scaling it grows with d_k."),
            WrongAnswer(4096.0, "Variances of independent terms add: 64 terms of variance 1, not 64²."),
        ),
        atol=0.5,
    ),
)


def _rows(*rows: list[float]) -> tuple[torch.Tensor]:
    return (torch.tensor(rows, dtype=torch.float32),)


CHAPTER_1_FUNCTIONS = (
    FunctionExercise(
        id="1.stable-softmax",
        question=(
            "Write stable_softmax(scores) that normalizes a float tensor over its last axis, "
            "survives large scores, and turns a row of all -inf into zeros."
        ),
        reference=softmax,
        cases=(
            Case("small scores", lambda: _rows([1.0, 0.0]), "Compute exp of each score and divide by the row's sum."),
            Case(
                "several rows",
                lambda: _rows([1.0, 2.0, 3.0], [0.0, 0.0, 5.0]),
                "Normalize each row over the last axis (keys): sum with dim=-1, keepdim=True.",
            ),
            Case(
                "large scores",
                lambda: _rows([1000.0, 1001.0], [-1000.0, -1002.0]),
                "exp(1000) overflows to inf and inf/inf is NaN (and exp(-1000) underflows to 0/0). "
                "Subtract each row's maximum before exp: softmax does not change.",
            ),
            Case(
                "masked entries",
                lambda: _rows([2.0, float("-inf"), 0.0]),
                "A -inf score must get weight exactly 0: exp(-inf) = 0.",
            ),
            Case(
                "all -inf row",
                lambda: _rows([float("-inf"), float("-inf")], [0.0, 1.0]),
                "A fully masked row has max -inf, and -inf - (-inf) is NaN. Shift such rows by 0 "
                "instead and return zeros: a query with nothing to read receives nothing.",
            ),
            Case(
                "batched 3-D input",
                lambda: (torch.arange(24, dtype=torch.float32).reshape(2, 3, 4).sin() * 3,),
                "Work on the last axis of any tensor (dim=-1), not only 2-D matrices.",
            ),
        ),
        wrong_answers=(
            WrongAnswer(
                lambda x: torch.softmax(x, dim=0),
                "You normalized over the first axis. Each query's weights run over the keys: the last axis, dim=-1.",
            ),
            WrongAnswer(
                lambda x: x / x.sum(dim=-1, keepdim=True),
                "You divided the scores by their sum without exponentiating: softmax is exp(x) / Σ exp(x), "
                "which keeps every weight positive.",
            ),
            WrongAnswer(
                lambda x: torch.exp(x - x.amax(dim=-1, keepdim=True)),
                "You shifted and exponentiated but did not divide by the row sum: the weights must sum to 1.",
            ),
        ),
        explanation="Subtracting the row max keeps every exponent ≤ 0; guarding the all -inf row keeps NaN out.",
        hints=("x - x.amax(dim=-1, keepdim=True) is the stable shift; torch.where can guard the all -inf row.",),
    ),
)

EXERCISES = CHAPTER_1 + CHAPTER_1_FUNCTIONS
