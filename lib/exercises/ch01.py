"""Chapter 1's check-yourself exercises: one attention read.

Value exercises are plain data: the expected answer, its tolerance, and the wrong answers
this chapter warns about with the feedback each earns. The numbers are written as the
arithmetic that produces them, so a reader can follow where each comes from.
Function exercises name a reference in lib and hidden cases, each with what failing it
usually means. ``tests/test_exercises.py`` proves each accepts its reference answer and
rejects each wrong one with its own feedback.
"""

from __future__ import annotations

import math

import torch

from lib.attention import softmax
from lib.drawn_cases import integer, normal, sizes
from lib.exercises.base import Case, FunctionExercise, ValueExercise, WrongAnswer
from lib.variants import Param

# --- Chapter 1: one attention read ----------------------------------------------------
# The worked example: q = [1, 0]; keys [1, 0] and [0, 1]; values [2, 0] and [0, 4]; d_k = 2.
_SCORE = 1 / math.sqrt(2)  # q·k1 / √2; q·k2 / √2 is 0
_W1 = math.exp(_SCORE) / (math.exp(_SCORE) + 1)  # softmax([0.7071, 0])[0] ≈ 0.6698
_W2 = 1 - _W1  # ≈ 0.3302
_OUTPUT = [2 * _W1, 4 * _W2]  # _W1·[2, 0] + _W2·[0, 4] ≈ [1.3395, 1.3210]

_NOT_BEST_MATCH = (
    "That is the value of the best-matching key. Attention does not pick a winner: it returns "
    "the weighted average Σ wᵢ vᵢ of all the values it may read."
)


def _softmax2(s1: float, s2: float) -> tuple[float, float]:
    """The two weights of softmax([s1, s2])."""
    w1 = 1 / (1 + math.exp(s2 - s1))
    return w1, 1 - w1


def _read(w1: float) -> list[float]:
    """The output w1·[2, 0] + (1 - w1)·[0, 4] with the worked example's values."""
    return [2 * w1, 4 * (1 - w1)]


# Exercise 1.1: the query [2, 0], twice as long as the worked example's and pointing the same way.
_LONG_W1, _LONG_W2 = _softmax2(2 / math.sqrt(2), 0.0)  # scores [√2, 0]: weights ≈ [0.8044, 0.1956]
_LONG_NO_SCALE = _read(_softmax2(2.0, 0.0)[0])  # scores [2, 0] ≈ [1.7616, 0.4768]
_LONG_BY_D_K = _read(_softmax2(1.0, 0.0)[0])  # scores [1, 0] ≈ [1.4621, 1.0758]

# Exercise 1.3: three keys with scores [1, 2, 0] (already scaled), values [2, 0], [0, 4] and
# [6, 2]; key 2 (the best-scoring one) may not be read, so keys 1 and 3 remain, with unequal scores.
_MASK_SCORES = (1.0, 2.0, 0.0)
_MASK_VALUES = ((2.0, 0.0), (0.0, 4.0), (6.0, 2.0))


def _softmax_list(scores: tuple[float, ...]) -> list[float]:
    """softmax(scores) as a list of floats."""
    exps = [math.exp(s - max(scores)) for s in scores]
    return [e / sum(exps) for e in exps]


def _mix(weights: list[float]) -> list[float]:
    """Σ wᵢ vᵢ over exercise 1.3's three values."""
    return [sum(w * v[j] for w, v in zip(weights, _MASK_VALUES, strict=True)) for j in range(2)]


_MASK_W1, _MASK_W3 = _softmax_list((1.0, 0.0))  # keys 1 and 3 only: ≈ [0.7311, 0.2689]
_MASK_READ = _mix([_MASK_W1, 0.0, _MASK_W3])  # ≈ [3.0758, 0.5379]
_MASK_NONE = _mix(_softmax_list(_MASK_SCORES))  # no mask: ≈ [1.0296, 2.8410]
_MASK_TO_ZERO = _mix(_softmax_list((1.0, 0.0, 0.0)))  # key 2's score set to 0, not -inf: ≈ [2.4239, 1.2716]
_MASK_AFTER = _mix([w if i != 1 else 0.0 for i, w in enumerate(_softmax_list(_MASK_SCORES))])  # ≈ [1.0296, 0.1801]


def _new_values(a: int, b: int) -> ValueExercise:
    """1.new-values with the values v1 = [a, 0] and v2 = [0, b] (the book: a = 3, b = -2)."""
    return ValueExercise(
        id="1.new-values",
        question=(
            "Keep q = [1, 0] and the keys [1, 0] and [0, 1] of the worked example, but give the "
            f"keys new values v1 = [{a}, 0] and v2 = [0, {b}]. What is the output?"
            " Give each number to 2 decimal places."
        ),
        expected=[a * _W1, b * _W2],
        explanation=(
            f"The weights come from q and the keys only, so they stay [{_W1:.4f}, {_W2:.4f}]; the output "
            f"mixes the new values: {_W1:.4f}·[{a}, 0] + {_W2:.4f}·[0, {b}] ≈ [{a * _W1:.4f}, {b * _W2:.4f}]."
        ),
        hints=("Which of q, k and v enter the scores? The values enter only the final weighted sum.",),
        wrong_answers=(
            WrongAnswer(_OUTPUT, "That is the worked example's output: the values decide what the query receives."),
            WrongAnswer([float(a), 0.0], _NOT_BEST_MATCH),
            WrongAnswer([a / 2, b / 2], "That is the plain average of the values; the weights are not equal here."),
            WrongAnswer([_W1, _W2], "Those are the weights. The question asks for the output, Σ wᵢ vᵢ."),
            WrongAnswer(
                [a * _W1, -b * _W2],
                f"Mind the sign: v2 = [0, {b}], so the second coordinate is negative. A convex mix of "
                "values can point anywhere the values do.",
            ),
        ),
        decimals=2,
        params=(Param("a", 3, (3, 5, 6, 7)), Param("b", -2, (-2, -3, -5, -6))),
        make=_new_values,
    )


def _wider_variance(variance: int, d_k: int) -> ValueExercise:
    """1.wider-variance with coordinates of this variance at this d_k (the book: 4 and 64)."""
    total = d_k * variance**2  # each product qᵢkᵢ has variance variance², and d_k of them add up
    std = math.sqrt(total)
    return ValueExercise(
        id="1.wider-variance",
        question=(
            f"Now the coordinates of q and k are independent with mean 0 and variance {variance} (not 1), and "
            f"d_k = {d_k}. What is Var(q·k), and what factor must the scores be multiplied by to bring their "
            "variance back to 1? Answer [variance, factor]."
            " Give each number to 3 decimal places."
        ),
        expected=[total, 1 / std],
        explanation=(
            f"Each product qᵢkᵢ has variance {variance} · {variance} = {variance**2}, and {d_k} of them add up to "
            f"{total}. Multiplying by 1/√{total} = 1/{std:g} brings it back to 1; the usual 1/√d_k = "
            f"1/{math.sqrt(d_k):g} assumes variance-1 coordinates and would leave a variance of {variance**2}."
        ),
        hints=("Var(qᵢkᵢ) = Var(qᵢ)·Var(kᵢ) for independent zero-mean factors; scaling by c multiplies Var by c².",),
        wrong_answers=(
            WrongAnswer(
                [float(d_k), 1 / math.sqrt(d_k)],
                f"That is the variance-1 case. Each product now has variance {variance} · {variance} = "
                f"{variance**2}, not 1.",
            ),
            WrongAnswer(
                [d_k * variance, 1 / math.sqrt(d_k * variance)],
                f"You counted the variance {variance} once (or multiplied the standard deviations). Variances "
                f"multiply: a product of two independent zero-mean factors of variance {variance} has variance "
                f"{variance} · {variance} = {variance**2}.",
            ),
            WrongAnswer(
                [total, 1 / math.sqrt(d_k)],
                f"The variance is right, but 1/√d_k = 1/{math.sqrt(d_k):g} restores 1 only for variance-1 "
                f"coordinates: it leaves {total}/{d_k} = {variance**2}. Divide by the standard deviation, "
                f"√{total} = {std:g}.",
            ),
            WrongAnswer(
                [total, 1 / total],
                "Multiplying by c multiplies the variance by c²: dividing by the variance itself overshoots. "
                f"Divide by the standard deviation, √{total} = {std:g}.",
            ),
            WrongAnswer(
                [total, std],
                f"{std:g} is what the scores must be divided by. The question asks for the factor to multiply "
                f"them by: 1/{std:g}.",
            ),
            WrongAnswer(
                [std, 1 / std], f"{std:g} is the standard deviation of q·k; its variance is the square, {total}."
            ),
        ),
        decimals=3,
        params=(Param("variance", 4, (2, 3, 4, 5)), Param("d_k", 64, (16, 64, 256))),
        make=_wider_variance,
    )


CHAPTER_1 = (
    ValueExercise(
        id="1.longer-query",
        question=(
            "Keep the worked example's keys [1, 0], [0, 1] and values [2, 0], [0, 4] (d_k = 2), but make "
            "the query twice as long: q = [2, 0]. What output does it read?"
            " Give each number to 2 decimal places."
        ),
        expected=_read(_LONG_W1),
        explanation=(
            f"The scores double to [{2 / math.sqrt(2):.4f}, 0], so the weights sharpen to "
            f"[{_LONG_W1:.4f}, {_LONG_W2:.4f}] and the output moves toward v1: "
            f"[{2 * _LONG_W1:.4f}, {4 * _LONG_W2:.4f}]. Same direction, longer query: q·k = |q||k|cos θ grows "
            "with length, not only with alignment."
        ),
        hints=("Dot products with each key, divide by √2, softmax, then mix the values.",),
        wrong_answers=(
            WrongAnswer([2.0, 0.0], _NOT_BEST_MATCH),
            WrongAnswer(_LONG_NO_SCALE, "You forgot to divide the scores by √d_k = √2: you used [2, 0]."),
            WrongAnswer(
                _LONG_BY_D_K,
                "Your scores were [1, 0]: you divided [2, 0] by d_k = 2 (the scale is 1/√d_k, so the scores "
                "are [√2, 0]), or you kept the old query [1, 0] and did not scale it.",
            ),
            WrongAnswer(
                _OUTPUT,
                "That is the output for q = [1, 0]. Doubling the query doubles its dot products, "
                "so the scores, and with them the weights, change.",
            ),
            WrongAnswer(
                [2 * o for o in _OUTPUT],
                "That is twice the worked example's output: what doubling the values gives, with the weights "
                "unchanged. Doubling the query acts earlier, on the scores: they double to [√2, 0], the "
                "softmax sharpens, and the output moves toward v1 instead of growing.",
            ),
            WrongAnswer([_LONG_W1, _LONG_W2], "Those are the weights. The question asks for the output, Σ wᵢ vᵢ."),
            WrongAnswer(
                [2 * math.sqrt(2), 0.0],
                "You mixed the values with the scores [√2, 0] themselves. Take the softmax first: the "
                "weights must be positive and sum to 1.",
            ),
        ),
        decimals=2,
    ),
    ValueExercise(
        id="1.equal-scores",
        question=(
            "If both scores are equal, what is the output, with values [2, 0] and [0, 4]? Give each number "
            "to 2 decimal places."
        ),
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
        decimals=2,
    ),
    ValueExercise(
        id="1.masked-read",
        question=(
            "A query has scores [1, 2, 0] (already scaled) for keys 1, 2 and 3, whose values are [2, 0], "
            "[0, 4] and [6, 2]. A mask forbids key 2. What output does the query read? Give each number "
            "to 2 decimal places."
        ),
        expected=_MASK_READ,
        explanation=(
            f"Key 2's score becomes -inf before the softmax, so the softmax runs over keys 1 and 3 alone: "
            f"weights [{_MASK_W1:.4f}, 0, {_MASK_W3:.4f}], and the output is {_MASK_W1:.4f}·[2, 0] + "
            f"{_MASK_W3:.4f}·[6, 2] = [{_MASK_READ[0]:.4f}, {_MASK_READ[1]:.4f}], however high key 2 scored."
        ),
        hints=("Set the forbidden score to -inf, then take the softmax over what is left.",),
        wrong_answers=(
            WrongAnswer(
                _MASK_NONE,
                "That is the read without the mask: key 2 still took most of the weight. "
                "Set its score to -inf before the softmax.",
            ),
            WrongAnswer(
                _MASK_TO_ZERO,
                "You set the forbidden score to 0 instead of -inf. A score of 0 is an ordinary score "
                "(weight e⁰ = 1 before normalizing); only -inf gives weight 0.",
            ),
            WrongAnswer(
                _MASK_AFTER,
                "You zeroed key 2's weight after the softmax without renormalizing: its score still sat in "
                "the denominator, so the weights no longer sum to 1. Mask before the softmax.",
            ),
            WrongAnswer(
                [0.0, 4.0],
                "The mask's polarity is flipped: you let the query read key 2 only, the one it may not read "
                "(or you read the best match and ignored the mask).",
            ),
            WrongAnswer(
                [(2.0 + 6.0) / 2, (0.0 + 2.0) / 2],
                "That is the plain average of the two allowed values: the mask is right, but the scores still "
                "weigh what is read. Take the softmax of the allowed scores [1, 0]: key 1 gets more weight.",
            ),
            WrongAnswer(
                [6.0, 2.0],
                "That is the value of the best allowed key. Attention does not pick a winner: after the mask, "
                "keys 1 and 3 still share the weight.",
            ),
        ),
        decimals=2,
    ),
    _new_values(3, -2),
    _wider_variance(4, 64),
)


_SOFTMAXES = (  # any softmax does this exercise's work, torch's or the library's
    "torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "torch.special.softmax",
    "torch.log_softmax", "torch.Tensor.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax",
    "torch.nn.functional.softmin", "torch.nn.functional.gumbel_softmax", "torch.nn.Softmax", "torch.nn.LogSoftmax",
    "torch.nn.Softmin", "torch.nn.functional.scaled_dot_product_attention", "torch.nn.MultiheadAttention",
    "lib.online_softmax.online_softmax", "lib.online_softmax.online_softmax_update", "lib.attention.attention",
    "lib.tiled_softmax.tiled_attention",
    # torch's own kernels under private and operator names, and the sparse twins (a hostile batch found these)
    "torch._softmax", "torch._log_softmax", "torch._safe_softmax", "torch._masked_softmax", "torch.sparse.softmax",
    "torch.sparse.log_softmax", "torch.ops.aten.softmax", "torch.ops.aten.log_softmax", "torch.ops.aten._softmax",
    "torch.ops.aten._log_softmax", "torch.ops.aten._safe_softmax", "torch.ops.aten._masked_softmax",
    "torch.ops.aten._sparse_softmax", "torch.ops.aten._sparse_log_softmax",
)  # fmt: skip


def _draw_scores(generator: torch.Generator) -> tuple[torch.Tensor]:
    """Scores of 1 to 3 axes, some rows shifted by ±1000, some entries -inf, sometimes a whole row
    (the first, when there are several): no drawn input gives all zeros, so no guess of zeros passes."""
    shape = sizes(generator, integer(generator, 1, 3), 1, 5)
    x = normal(generator, shape, scale=3.0, dtype=torch.float64)
    if integer(generator, 0, 1):
        x = x + normal(generator, (*shape[:-1], 1), scale=1000.0, dtype=torch.float64).round()
    masked = torch.rand(shape, generator=generator) < 0.25
    masked[..., -1] = False  # every row reads something, but the one made all -inf below
    x = x.masked_fill(masked, float("-inf"))
    if math.prod(shape[:-1]) > 1 and integer(generator, 0, 1):  # one row of several
        x[(0,) * (len(shape) - 1)] = float("-inf")
    return (x.float(),)


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
        stands_for=("lib.attention.softmax",),
        forbids=_SOFTMAXES,
        draw=_draw_scores,
    ),
)

EXERCISES = CHAPTER_1 + CHAPTER_1_FUNCTIONS
