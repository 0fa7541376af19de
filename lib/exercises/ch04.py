"""Chapter 4's check-yourself exercises: the transformer block.

Value exercises are plain data, written as the arithmetic that produces them; the numbers
differ from those the chapter prints, so each asks for the idea applied anew. The function
exercise (write RMSNorm) is graded on hidden cases against ``lib.blocks.rms_norm``.
"""

from __future__ import annotations

import math

import torch

from lib.blocks import layer_norm, rms_norm, swiglu_hidden
from lib.costs import block_weights
from lib.drawn_cases import integer, normal, sizes
from lib.exercises.base import Case, FunctionExercise, ValueExercise, WrongAnswer
from lib.variants import Param

# --- SwiGLU width matching a 4d MLP at d = 400, rounded up to a multiple of 8 ---------------
_DS = 400
_SWIGLU_EXACT = 8 * _DS / 3  # 3·d·f = 2·d·4d  ->  f = 8d/3 = 1066.67, not a whole width
_SWIGLU_F = swiglu_hidden(_DS)  # rounded up to a multiple of 8: 1072

# --- one block's weight matrices: d = 320, 8 query heads sharing 2 KV heads, SwiGLU ------------
_BD, _BH, _BKV = 320, 8, 2
_BF = swiglu_hidden(_BD)  # 8·320/3 = 853.3, rounded up to 856
_BLOCK = block_weights(_BD, n_heads=_BH, n_kv_heads=_BKV, hidden=_BF, gated=True)
_KV_WIDTH = _BKV * _BD // _BH  # h_kv · d_h = 2 · 40

# --- LayerNorm by hand ---------------------------------------------------------------------
_TOKEN = [2.0, 4.0, 6.0, 8.0]  # mean 5, deviations ±3, ±1, biased variance 5
_MEAN = sum(_TOKEN) / 4
_DEV = [t - _MEAN for t in _TOKEN]
_VAR = sum(e * e for e in _DEV) / 4
_LN = [e / math.sqrt(_VAR) for e in _DEV]
_LN_UNBIASED = [e / math.sqrt(sum(e * e for e in _DEV) / 3) for e in _DEV]
_RMS = [t / math.sqrt(sum(t * t for t in _TOKEN) / 4) for t in _TOKEN]

# --- Blocks whose branches output zero: token [1, 3, 4, 8] --------------------------------
_X = [1.0, 3.0, 4.0, 8.0]
_X_NORMED = layer_norm(torch.tensor(_X)).tolist()  # what LayerNorm (weight 1, bias 0) gives
_X_TWICE = layer_norm(layer_norm(torch.tensor(_X))).tolist()  # post-norm: Norm2(Norm1(x + 0) + 0)


def _unbiased_norm(x: torch.Tensor) -> torch.Tensor:
    """LayerNorm with the mistake: the variance divided by d - 1 (torch.std's default)."""
    return (x - x.mean()) / x.std()


_X_TWICE_UNBIASED = _unbiased_norm(_unbiased_norm(torch.tensor(_X))).tolist()


_NOT_MIXING = (
    "The FFN applies the same map to each token on its own: only the changed token's FFN output "
    "moves. Mixing across positions is attention's job."
)


def _ffn_params(d: int, f: int) -> ValueExercise:
    """4.ffn-params with width d and hidden width f, biases included (the book: 96, 320)."""
    weights = 2 * d * f  # W1: d×f and W2: f×d
    params = weights + f + d  # b1 has f entries, b2 has d
    return ValueExercise(
        id="4.ffn-params",
        question=(
            f"A two-projection FFN has d = {d} and hidden width f = {f}, with biases. How many parameters does it have?"
        ),
        expected=params,
        explanation=(
            f"W1 (d×f) and W2 (f×d) hold 2·{d}·{f} = {weights} weights; b1 adds f = {f} "
            f"and b2 adds d = {d}: {params} in all."
        ),
        hints=("Count W1: d×f, b1: f, W2: f×d, b2: d.",),
        wrong_answers=(
            WrongAnswer(weights + d, f"You forgot b1, the bias of the hidden layer: it has f = {f} entries."),
            WrongAnswer(weights + f, f"You forgot b2, the bias of the output layer: it has d = {d} entries."),
            WrongAnswer(weights, "Those are the weights only: add the biases b1 (f entries) and b2 (d entries)."),
            WrongAnswer(d * f + f + d, "You counted one weight matrix. There are two: W1 (d×f) up and W2 (f×d) down."),
            WrongAnswer(weights + 2 * f, "b2 follows W2, which maps back to d features: it has d entries, not f."),
            WrongAnswer(
                8 * d * d + 4 * d + d, f"That is the count for f = 4d. Here the hidden width is given: f = {f}."
            ),
        ),
        whole=True,
        params=(Param("d", 96, (64, 96, 128)), Param("f", 320, (192, 320, 448))),  # f is never 4d
        make=_ffn_params,
    )


def _residual_gradient(a1: float, a2: float) -> ValueExercise:
    """4.residual-gradient with the branch slopes a1 and a2 (the book: 0.5, -0.8)."""
    return ValueExercise(
        id="4.residual-gradient",
        question=(
            f"Two scalar residual blocks: y1 = x + a1·x and y2 = y1 + a2·y1, with a1 = {a1} and a2 = {a2}. "
            "What is dy2/dx?"
            " Give it to 2 decimal places."
        ),
        expected=(1 + a1) * (1 + a2),
        explanation=(
            f"Each block's derivative is 1 + a: identity plus branch. Chained, ({1 + a1:g})·({1 + a2:g}) = "
            f"{(1 + a1) * (1 + a2):.2f}. The identity route is there, but the branch can still shrink the product."
        ),
        hints=("Differentiate each block (1 + a), then chain them by multiplying.",),
        wrong_answers=(
            WrongAnswer(1.0, "That is the identity route alone; each branch's derivative adds to it: 1 + a per block."),
            WrongAnswer(a1 * a2, "That is the branch-only route; the identity routes add 1 to each factor."),
            WrongAnswer(
                1 + a1 + a2, "You added the routes but dropped the cross term a1·a2: multiply (1 + a1)(1 + a2)."
            ),
        ),
        decimals=2,
        params=(Param("a1", 0.5, (0.3, 0.5, 0.7)), Param("a2", -0.8, (-0.8, -0.6, 0.4))),
        make=_residual_gradient,
    )


CHAPTER_4 = (
    _ffn_params(96, 320),
    ValueExercise(
        id="4.swiglu-width",
        question=(
            f"A model with d = {_DS} swaps its 4d MLP for SwiGLU with about the same number of weights "
            "(ignore biases), and, as swiglu_hidden does, rounds the hidden width up to a multiple of 8. "
            "What hidden width f does the SwiGLU get?"
        ),
        expected=_SWIGLU_F,
        explanation=(
            f"The MLP holds 2·d·4d = 8d² weights; SwiGLU holds three d×f matrices, 3df. 3df = 8d² gives "
            f"f = 8d/3 = {_SWIGLU_EXACT:.2f}, not a whole width; the next multiple of 8 is {_SWIGLU_F}, "
            f"which gives 3·{_DS}·{_SWIGLU_F} = {3 * _DS * _SWIGLU_F:,} weights against 8d² = {8 * _DS * _DS:,}: "
            f"{3 * _SWIGLU_F / (8 * _DS) - 1:.1%} more."
        ),
        hints=("Set 3df = 8d², then round f up to the next multiple of 8.",),
        wrong_answers=(
            WrongAnswer(
                round(_SWIGLU_EXACT),
                "You rounded 8d/3 to the nearest whole number; the width is rounded up to a multiple of 8.",
            ),
            WrongAnswer(_SWIGLU_EXACT, "8d/3 is not a whole width: round it up to a multiple of 8."),
            *(
                WrongAnswer(round(_SWIGLU_EXACT, places), "8d/3 is not a whole width: round it up to a multiple of 8.")
                for places in (1, 2)
            ),
            WrongAnswer(
                _SWIGLU_F - 8, "You rounded down to a multiple of 8; swiglu_hidden rounds up (at most 7 more columns)."
            ),
            WrongAnswer(4 * _DS, "4d is the MLP's width. SwiGLU has three matrices, so f must shrink to match."),
            WrongAnswer(
                swiglu_hidden(_DS // 2), "You matched a single d×4d matrix; the MLP has two, 8d² weights in all."
            ),
            WrongAnswer(2 * _DS, "That matches 8d² with four d×f matrices; SwiGLU has three (gate, up, down)."),
        ),
        whole=True,
    ),
    ValueExercise(
        id="4.block-weights",
        question=(
            f"A pre-norm block has d = {_BD}, {_BH} query heads that share {_BKV} KV heads (grouped-query "
            f"attention), and a SwiGLU FFN whose width is 8d/3 rounded up to a multiple of 8. How many weights do "
            "its matrices hold (W_Q, W_K, W_V, W_O and the three SwiGLU matrices; no biases, no norms)?"
        ),
        expected=_BLOCK.total,
        explanation=(
            f"Head width d_h = {_BD}/{_BH} = {_BD // _BH}, so W_K and W_V map d to h_kv·d_h = {_KV_WIDTH}: "
            f"attention holds 2·d² + 2·d·{_KV_WIDTH} = {_BLOCK.attention:,} (not 4d² = {4 * _BD * _BD:,}). "
            f"SwiGLU's f = 853.3 rounds up to {_BF}: 3·d·f = {_BLOCK.ffn:,}. In all {_BLOCK.total:,}."
        ),
        hints=("Count each matrix as (inputs × outputs); the KV projections output h_kv·d_h features.",),
        wrong_answers=(
            WrongAnswer(
                4 * _BD * _BD + _BLOCK.ffn,
                "That counts 4d² for attention, as if every query head had its own KV head. Under GQA, W_K and "
                f"W_V output only h_kv·d_h = {_KV_WIDTH} features each.",
            ),
            WrongAnswer(
                _BLOCK.attention + 8 * _BD * _BD,
                f"That is 8d² for the FFN: f = 8d/3 is not a whole width; rounded up to a multiple of 8 it is {_BF}.",
            ),
            WrongAnswer(
                2 * _BD * _BD + 2 * _BD * _BKV * _BD + _BLOCK.ffn,
                f"W_K and W_V output h_kv heads of width d_h = {_BD // _BH}, not of width d.",
            ),
            WrongAnswer(
                _BD * _BD + 2 * _BD * _KV_WIDTH + _BLOCK.ffn,
                "You left out the output projection W_O (d × d), which maps the heads back to the stream.",
            ),
            WrongAnswer(_BLOCK.attention + 2 * _BD * _BF, "SwiGLU has three matrices (gate, up, down), not two."),
            WrongAnswer(
                _BLOCK.attention + 3 * _BD * math.floor(8 * _BD / 3),
                f"You cut f = 8d/3 = 853.3 down to 853: the question rounds it up to a multiple of 8, {_BF}.",
            ),
            WrongAnswer(
                _BLOCK.attention + 3 * _BD * math.ceil(8 * _BD / 3),
                f"You rounded f = 8d/3 = 853.3 up to a whole 854: the question rounds it up to a multiple of 8, "
                f"{_BF} (widths that divide into 8s suit the hardware).",
            ),
        ),
        whole=True,
    ),
    ValueExercise(
        id="4.layernorm-by-hand",
        question=(
            "Apply LayerNorm (weight 1, bias 0, eps negligible) to the token [2, 4, 6, 8]. What are the four outputs?"
            " Give each number to 2 decimal places."
        ),
        expected=_LN,
        explanation=(
            f"Mean {_MEAN:g}; deviations {[round(e) for e in _DEV]}; the variance divides by d = 4: {_VAR:g}. "
            f"Dividing by √{_VAR:g} ≈ {math.sqrt(_VAR):.4f} gives about {[round(v, 4) for v in _LN]}."
        ),
        hints=("Subtract the mean, then divide by the square root of the mean squared deviation.",),
        wrong_answers=(
            WrongAnswer(
                _LN_UNBIASED,
                "You used the unbiased variance (divide by d - 1 = 3). LayerNorm divides by d = 4.",
            ),
            WrongAnswer(_RMS, "That is RMSNorm: it rescales without subtracting the mean. LayerNorm centers first."),
            WrongAnswer([e / _VAR for e in _DEV], "You divided by the variance; divide by its square root."),
            WrongAnswer(_DEV, "You centered the token but did not rescale it by its standard deviation."),
        ),
        decimals=2,
    ),
    ValueExercise(
        id="4.prenorm-zero-branches",
        question=(
            "A pre-norm block (LayerNorm, weight 1, bias 0) has all its attention and FFN weights and biases "
            "set to zero, so both branches output zeros. What does it output for a lone token [1, 3, 4, 8]?"
            " Give each number to 2 decimal places."
        ),
        expected=_X,
        explanation=(
            "U = X + Attention(Norm1(X)) = X + 0 and Y = U + FFN(Norm2(U)) = U: the token passes unchanged. "
            "Pre-norm normalizes what each branch reads, never the residual stream itself."
        ),
        hints=("Write U = X + Attention(Norm1(X)) and Y = U + FFN(Norm2(U)) with zero branches.",),
        wrong_answers=(
            WrongAnswer(
                _X_NORMED,
                "That is the normalized token, what post-norm's Norm(X + 0) gives. In a pre-norm block the "
                "norm feeds the branch only; the residual stream passes unnormalized.",
            ),
            WrongAnswer([0.0] * 4, "The residual adds the input back: a zero branch leaves X, not zero."),
        ),
        decimals=2,
    ),
    ValueExercise(
        id="4.postnorm-zero-branches",
        question=(
            "Now the post-norm version of that block, U = Norm1(X + Attention(X)), Y = Norm2(U + FFN(U)), with "
            "the same zero branches. What does it output for the token [1, 3, 4, 8]?"
            " Give each number to 2 decimal places."
        ),
        expected=_X_TWICE,
        explanation=(
            "X + 0 is normalized: mean 4, variance 6.5, giving about "
            f"{[round(v, 4) for v in _X_NORMED]}. Normalizing that again changes nothing visible: "
            "its mean is already 0 and its variance 1. Post-norm rescales the residual stream itself."
        ),
        hints=("The norm now sits after the addition: normalize X + 0.",),
        wrong_answers=(
            WrongAnswer(_X, "That is pre-norm's answer. Post-norm normalizes the sum X + branch, the stream itself."),
            WrongAnswer([0.0] * 4, "The residual adds the input back before the norm: X + 0 = X, then Norm(X)."),
            WrongAnswer(
                _X_TWICE_UNBIASED,
                "You used the unbiased variance (divide by d - 1 = 3, torch.std's default). LayerNorm divides "
                "by d = 4.",
            ),
        ),
        decimals=2,
    ),
    ValueExercise(
        id="4.what-changes",
        question=(
            "A causal sequence has 8 tokens, positions 0 to 7. You change the input at position 5. "
            "(a) Applying the FFN to these 8 inputs, how many positions' outputs change? "
            "(b) Through a whole causal block (attention, then FFN), how many positions' outputs change? "
            "Answer [a, b]."
        ),
        expected=[1, 3],
        explanation=(
            "The FFN is per-token, so only position 5 moves. Causal attention lets positions 5, 6 and 7 "
            "read position 5, so 3 outputs of the block change; positions 0 to 4 cannot see it."
        ),
        hints=("Which positions may read position 5 under a causal mask? Does the FFN read any other position?",),
        wrong_answers=(
            WrongAnswer([3, 3], _NOT_MIXING),
            WrongAnswer([8, 8], _NOT_MIXING + " And with a causal mask, earlier positions cannot read later ones."),
            WrongAnswer([1, 1], "The FFN does not mix, but attention does: later positions read position 5."),
            WrongAnswer([1, 8], "Without a mask all 8 would change; the causal mask hides position 5 from 0 to 4."),
            WrongAnswer(
                [1, 2],
                "Positions 6 and 7 read position 5, but position 5's own output changes too: it reads itself "
                "(and its FFN input changed). Keys j ≤ i include i.",
            ),
            WrongAnswer(
                [1, 6],
                "Flipped direction: a causal query reads the past, so positions 5..7 read position 5, not 0..5.",
            ),
        ),
        whole=True,
    ),
    _residual_gradient(0.5, -0.8),
)


def _rows(*rows: list[float], weight: list[float] | None = None, eps: float = 1e-6) -> tuple:
    x = torch.tensor(rows, dtype=torch.float32)  # (tokens, d)
    w = torch.ones(x.shape[-1]) if weight is None else torch.tensor(weight)  # (d,)
    return x, w, eps


_NORMS = (  # every norm, torch's and the library's
    "torch.nn.functional.rms_norm", "torch.nn.RMSNorm", "torch.nn.functional.layer_norm", "torch.nn.LayerNorm",
    "torch.nn.functional.normalize", "lib.blocks.RMSNorm", "lib.blocks.LayerNorm", "lib.blocks.make_norm",
    "lib.blocks.layer_norm",
)  # fmt: skip


def _draw_tokens(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Tokens of 1 to 3 axes and 1 to 8 features, any scale, a learned weight and an eps."""
    shape = sizes(generator, integer(generator, 1, 3), 1, 8)
    scale = (0.01, 1.0, 30.0)[integer(generator, 0, 2)]
    eps = (1e-6, 1e-5, 1e-3, 0.1)[integer(generator, 0, 3)]
    return normal(generator, shape, scale=scale), normal(generator, shape[-1:]), eps


CHAPTER_4_FUNCTIONS = (
    FunctionExercise(
        id="4.rms-norm",
        question=(
            "Write my_rms_norm(x, weight, eps) that divides each token (the last axis of x) by the root mean "
            "square of its features, sqrt(mean(x²) + eps), then multiplies by weight."
        ),
        reference=rms_norm,
        cases=(
            Case("one token", lambda: _rows([3.0, 4.0]), "RMS of [3, 4] is sqrt((9 + 16) / 2); divide by it."),
            Case(
                "several tokens",
                lambda: _rows([1.0, -2.0, 3.0, 0.5], [0.2, 0.1, -0.4, 0.3], [10.0, 20.0, 30.0, 40.0]),
                "Each token gets its own RMS: take the mean over the last axis with keepdim=True.",
            ),
            Case(
                "non-zero mean",
                lambda: _rows([5.0, 6.0, 7.0, 9.0]),
                "RMSNorm does not subtract the mean: a token far from zero keeps its sign pattern.",
            ),
            Case(
                "learned weight",
                lambda: _rows([1.0, 2.0, -3.0, 4.0], weight=[2.0, -1.0, 0.5, 3.0]),
                "Multiply the normalized token by weight, elementwise.",
            ),
            Case(
                "large eps",
                lambda: _rows([0.1, -0.1, 0.2, 0.0], eps=0.1),
                "Use the eps you are given, inside the square root: sqrt(mean(x²) + eps).",
            ),
            Case(
                "all-zero token",
                lambda: _rows([0.0, 0.0, 0.0], [1.0, 2.0, 3.0]),
                "An all-zero token has RMS 0: eps inside the square root keeps it from 0/0 = NaN.",
            ),
            Case(
                "batched 3-D input",
                lambda: (torch.arange(30, dtype=torch.float32).reshape(2, 3, 5).cos() * 4, torch.ones(5), 1e-6),
                "Work on the last axis of any tensor (dim=-1), not only 2-D matrices.",
            ),
        ),
        wrong_answers=(
            WrongAnswer(
                lambda x, w, eps: layer_norm(x, w, None, eps),
                "You subtracted the mean: that is LayerNorm. RMSNorm only rescales, without centering.",
            ),
            WrongAnswer(
                lambda x, w, eps: x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w,
                "You divided by the root of the SUM of squares; RMS uses their MEAN (divide the sum by d).",
            ),
            WrongAnswer(
                lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * w,
                "You averaged over the first axis (across tokens). Normalize each token over its features: dim=-1.",
            ),
            WrongAnswer(
                lambda x, w, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w,
                "eps belongs inside the square root: sqrt(mean(x²) + eps), not sqrt(mean(x²)) + eps.",
            ),
            WrongAnswer(
                lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps),
                "You forgot the learned weight: multiply the normalized token by weight.",
            ),
            WrongAnswer(
                lambda x, w, eps: x * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w,
                "You divided by the standard deviation (which centers inside); RMSNorm divides by sqrt(mean(x²)).",
            ),
        ),
        explanation=(
            "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight: one reduction, no centering, "
            "no shift. It matches torch.nn.RMSNorm(d, eps=eps)."
        ),
        hints=("x.pow(2).mean(dim=-1, keepdim=True) is each token's mean square; torch.rsqrt is 1 / sqrt.",),
        stands_for=("lib.blocks.rms_norm",),
        forbids=_NORMS,
        draw=_draw_tokens,
    ),
)

EXERCISES = CHAPTER_4 + CHAPTER_4_FUNCTIONS
