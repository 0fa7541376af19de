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


# Exercise 1.1: the query [c, 0], c times as long as the worked example's and pointing the same way
# (the book: c = 2, scores [√2, 0], weights ≈ [0.8044, 0.1956]). The words for c in the question:
_TIMES = {2: "twice", 3: "three times", 4: "four times", 5: "five times"}
_SCALE_VERB = {2: "double", 3: "triple", 4: "quadruple", 5: "quintuple"}
_SCALING = {2: "doubling", 3: "tripling", 4: "quadrupling", 5: "quintupling"}


# Exercise 1.3: three keys with scores [s1, s2, 0] (already scaled), values [2, 0], [0, 4] and
# [x, 2]; key 2 (the best-scoring one) may not be read, so keys 1 and 3 remain, with unequal scores
# (the book: s1 = 1, s2 = 2, x = 6).


def _softmax_list(scores: tuple[float, ...]) -> list[float]:
    """softmax(scores) as a list of floats."""
    exps = [math.exp(s - max(scores)) for s in scores]
    return [e / sum(exps) for e in exps]


def _mix(weights: list[float], values: tuple[tuple[float, float], ...]) -> list[float]:
    """Σ wᵢ vᵢ over exercise 1.3's three values."""
    return [sum(w * v[j] for w, v in zip(weights, values, strict=True)) for j in range(2)]


def _longer_query(c: int) -> ValueExercise:
    """1.longer-query with the query q = [c, 0], c times the worked example's (the book: c = 2)."""
    score = c / math.sqrt(2)  # q·k1 / √2; q·k2 / √2 is 0
    w1, w2 = _softmax2(score, 0.0)
    shown_score = "√2" if c == 2 else f"{c}/√2"
    if c == 2:
        by_d_k = (
            "Your scores were [1, 0]: you divided [2, 0] by d_k = 2 (the scale is 1/√d_k, so the scores "
            "are [√2, 0]), or you kept the old query [1, 0] and did not scale it."
        )
    else:
        by_d_k = (
            f"Your scores were [{c / 2:g}, 0]: you divided [{c}, 0] by d_k = 2 (the scale is 1/√d_k, so the "
            f"scores are [{shown_score}, 0])."
        )
    verb, scaling = _SCALE_VERB[c], _SCALING[c]
    return ValueExercise(
        id="1.longer-query",
        question=(
            "Keep the worked example's keys [1, 0], [0, 1] and values [2, 0], [0, 4] (d_k = 2), but make "
            f"the query {_TIMES[c]} as long: q = [{c}, 0]. What output does it read?"
            " Give each number to 2 decimal places."
        ),
        expected=_read(w1),
        explanation=(
            f"The scores {verb} to [{score:.4f}, 0], so the weights sharpen to "
            f"[{w1:.4f}, {w2:.4f}] and the output moves toward v1: "
            f"[{2 * w1:.4f}, {4 * w2:.4f}]. Same direction, longer query: q·k = |q||k|cos θ grows "
            "with length, not only with alignment."
        ),
        hints=("Dot products with each key, divide by √2, softmax, then mix the values.",),
        wrong_answers=(
            WrongAnswer([2.0, 0.0], _NOT_BEST_MATCH),
            WrongAnswer(
                _read(_softmax2(float(c), 0.0)[0]),
                f"You forgot to divide the scores by √d_k = √2: you used [{c}, 0].",
            ),
            WrongAnswer(_read(_softmax2(c / 2, 0.0)[0]), by_d_k),
            WrongAnswer(
                _OUTPUT,
                f"That is the output for q = [1, 0]. {scaling.capitalize()} the query {verb}s its dot products, "
                "so the scores, and with them the weights, change.",
            ),
            WrongAnswer(
                [c * o for o in _OUTPUT],
                f"That is {_TIMES[c]} the worked example's output: what {scaling} the values gives, with the "
                f"weights unchanged. {scaling.capitalize()} the query acts earlier, on the scores: they {verb} to "
                f"[{shown_score}, 0], the softmax sharpens, and the output moves toward v1 instead of growing.",
            ),
            WrongAnswer([w1, w2], "Those are the weights. The question asks for the output, Σ wᵢ vᵢ."),
            WrongAnswer(
                [c * math.sqrt(2), 0.0],  # 2 · c/√2
                f"You mixed the values with the scores [{shown_score}, 0] themselves. Take the softmax first: the "
                "weights must be positive and sum to 1.",
            ),
        ),
        decimals=2,
        params=(Param("c", 2, (2, 3, 4, 5)),),
        make=_longer_query,
    )


def _equal_scores(a: int, b: int) -> ValueExercise:
    """1.equal-scores with the values [a, 0] and [0, b] (the book: the worked example's, a = 2, b = 4)."""
    if (a, b) == (2, 4):
        worked = f"That is the worked example's output, with unequal scores [{_SCORE:.4f}, 0]."
    else:
        worked = (
            f"You mixed the values with the worked example's weights [{_W1:.4f}, {_W2:.4f}], which come from "
            f"its unequal scores [{_SCORE:.4f}, 0]. Equal scores make equal weights."
        )
    return ValueExercise(
        id="1.equal-scores",
        question=(
            f"If both scores are equal, what is the output, with values [{a}, 0] and [0, {b}]? Give each number "
            "to 2 decimal places."
        ),
        expected=[a / 2, b / 2],
        explanation=(
            f"Equal scores give weights [0.5, 0.5], so the output is 0.5·[{a}, 0] + 0.5·[0, {b}] = "
            f"[{a / 2:g}, {b / 2:g}]."
        ),
        hints=("Equal scores make equal weights. The output is the weighted sum of the values.",),
        wrong_answers=(
            WrongAnswer([float(a), 0.0], _NOT_BEST_MATCH),
            WrongAnswer([0.0, float(b)], "That is the larger value vector. " + _NOT_BEST_MATCH),
            WrongAnswer(
                [float(a), float(b)], "You added the values without weights; the weights sum to 1, so halve each."
            ),
            WrongAnswer([0.5, 0.5], "Those are the weights. The question asks for the output, Σ wᵢ vᵢ."),
            WrongAnswer([a * _W1, b * _W2], worked),
        ),
        decimals=2,
        # b > a always: [0, b] stays the larger value vector
        params=(Param("a", 2, (1, 2, 3)), Param("b", 4, (4, 5, 6, 8))),
        make=_equal_scores,
    )


def _masked_read(s1: float, s2: int, x: int) -> ValueExercise:
    """1.masked-read with scores [s1, s2, 0] and key 3's value [x, 2] (the book: 1, 2, 6)."""
    scores = (s1, s2, 0.0)
    values = ((2.0, 0.0), (0.0, 4.0), (float(x), 2.0))
    w1, w3 = _softmax_list((s1, 0.0))  # keys 1 and 3 only
    read = _mix([w1, 0.0, w3], values)
    everything = _softmax_list(scores)
    return ValueExercise(
        id="1.masked-read",
        question=(
            f"A query has scores [{s1}, {s2}, 0] (already scaled) for keys 1, 2 and 3, whose values are [2, 0], "
            f"[0, 4] and [{x}, 2]. A mask forbids key 2. What output does the query read? Give each number "
            "to 2 decimal places."
        ),
        expected=read,
        explanation=(
            f"Key 2's score becomes -inf before the softmax, so the softmax runs over keys 1 and 3 alone: "
            f"weights [{w1:.4f}, 0, {w3:.4f}], and the output is {w1:.4f}·[2, 0] + "
            f"{w3:.4f}·[{x}, 2] = [{read[0]:.4f}, {read[1]:.4f}], however high key 2 scored."
        ),
        hints=("Set the forbidden score to -inf, then take the softmax over what is left.",),
        wrong_answers=(
            WrongAnswer(
                _mix(everything, values),
                "That is the read without the mask: key 2 still took most of the weight. "
                "Set its score to -inf before the softmax.",
            ),
            WrongAnswer(
                _mix(_softmax_list((s1, 0.0, 0.0)), values),
                "You set the forbidden score to 0 instead of -inf. A score of 0 is an ordinary score "
                "(weight e⁰ = 1 before normalizing); only -inf gives weight 0.",
            ),
            WrongAnswer(
                _mix([w if i != 1 else 0.0 for i, w in enumerate(everything)], values),
                "You zeroed key 2's weight after the softmax without renormalizing: its score still sat in "
                "the denominator, so the weights no longer sum to 1. Mask before the softmax.",
            ),
            WrongAnswer(
                [0.0, 4.0],
                "The mask's polarity is flipped: you let the query read key 2 only, the one it may not read "
                "(or you read the best match and ignored the mask).",
            ),
            WrongAnswer(
                [(2.0 + x) / 2, (0.0 + 2.0) / 2],
                "That is the plain average of the two allowed values: the mask is right, but the scores still "
                f"weigh what is read. Take the softmax of the allowed scores [{s1}, 0]: key 1 gets more weight.",
            ),
            WrongAnswer(
                [float(x), 2.0],
                "That is key 3's value alone. Attention does not pick one key: after the mask, keys 1 and 3 "
                f"share the weight, softmax([{s1}, 0]), and key 1, with the higher score, gets more of it.",
            ),
        ),
        decimals=2,
        # s1 > 0 (key 1 outweighs key 3) and e^s2 > e^s1 + 1 (key 2 takes most of the weight unmasked)
        params=(Param("s1", 1, (0.5, 1, 1.5)), Param("s2", 2, (2, 3)), Param("x", 6, (4, 6, 8))),
        make=_masked_read,
    )


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
    _longer_query(2),
    _equal_scores(2, 4),
    _masked_read(1, 2, 6),
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
    # log-sum-exp is the stable shift and the normaliser in one call: the exercise's whole work
    "torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp", "torch.ops.aten.logsumexp",
    "torch.nn.functional.cross_entropy",  # its log-softmax, read back through exp
    "torch._C._nn.cross_entropy_loss", "torch.nn.functional.nll_loss", "torch.logcumsumexp",
    "torch.Tensor.logcumsumexp", "torch.special.log_softmax", "torch.nn.CrossEntropyLoss",
    # torch's private attention kernels hand back their softmax weights (a third hostile batch used one)
    "torch._scaled_dot_product_attention_math", "torch._scaled_dot_product_flash_attention_for_cpu",
    "torch._scaled_dot_product_efficient_attention", "torch._scaled_dot_product_cudnn_attention",
    "torch._native_multi_head_attention", "torch._transformer_encoder_layer_fwd",
    # torch's Python twins of its kernels, and the softmax of the other installed packages
    "torch._refs.softmax", "torch._refs.log_softmax", "torch._refs.logsumexp", "torch._refs.special.softmax",
    "torch._refs.special.log_softmax", "torch._decomp.decompositions._softmax",
    "torch._decomp.decompositions._log_softmax", "torch._decomp.decompositions.safe_softmax",
    "scipy.special.softmax", "scipy.special.log_softmax", "scipy.special.logsumexp", "sklearn.utils.extmath.softmax",
    # a fourth hostile batch: logcumsumexp's own kernel, and the library's FlashAttention loop under its private names
    "torch._logcumsumexp", "lib.tiled_softmax.TiledAttention", "lib.tiled_softmax._forward_fast",
    "lib.tiled_softmax._forward_plain",
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
