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


def _swiglu_width(d: int) -> ValueExercise:
    """4.swiglu-width for a model of width d (the book: 400); d is never a multiple of 3, so 8d/3 is
    never whole, and 8d/3 never rounds to the multiple of 8 above it."""
    exact = 8 * d / 3  # 3·d·f = 2·d·4d  ->  f = 8d/3, not a whole width
    width = swiglu_hidden(d)  # rounded up to a multiple of 8
    return ValueExercise(
        id="4.swiglu-width",
        question=(
            f"A model with d = {d} swaps its 4d MLP for SwiGLU with about the same number of weights "
            "(ignore biases), and, as swiglu_hidden does, rounds the hidden width up to a multiple of 8. "
            "What hidden width f does the SwiGLU get?"
        ),
        expected=width,
        explanation=(
            f"The MLP holds 2·d·4d = 8d² weights; SwiGLU holds three d×f matrices, 3df. 3df = 8d² gives "
            f"f = 8d/3 = {exact:.2f}, not a whole width; the next multiple of 8 is {width}, "
            f"which gives 3·{d}·{width} = {3 * d * width:,} weights against 8d² = {8 * d * d:,}: "
            f"{3 * width / (8 * d) - 1:.1%} more."
        ),
        hints=("Set 3df = 8d², then round f up to the next multiple of 8.",),
        wrong_answers=(
            WrongAnswer(
                round(exact),
                "You rounded 8d/3 to the nearest whole number; the width is rounded up to a multiple of 8.",
            ),
            WrongAnswer(exact, "8d/3 is not a whole width: round it up to a multiple of 8."),
            *(
                WrongAnswer(round(exact, places), "8d/3 is not a whole width: round it up to a multiple of 8.")
                for places in (1, 2)
            ),
            WrongAnswer(
                width - 8, "You rounded down to a multiple of 8; swiglu_hidden rounds up (at most 7 more columns)."
            ),
            WrongAnswer(4 * d, "4d is the MLP's width. SwiGLU has three matrices, so f must shrink to match."),
            WrongAnswer(
                swiglu_hidden(d // 2), "You matched a single d×4d matrix; the MLP has two, 8d² weights in all."
            ),
            WrongAnswer(2 * d, "That matches 8d² with four d×f matrices; SwiGLU has three (gate, up, down)."),
        ),
        whole=True,
        params=(Param("d", 400, (200, 400, 512, 640, 1000)),),
        make=_swiglu_width,
    )


def _block_weights(d: int, h: int, h_kv: int) -> ValueExercise:
    """4.block-weights: width d, h query heads sharing h_kv KV heads, SwiGLU (the book: 320, 8, 2).
    No d is a multiple of 3 and 8d/3 never rounds to a multiple of 8, so each rounding mistake differs."""
    f = swiglu_hidden(d)
    exact = 8 * d / 3
    block = block_weights(d, n_heads=h, n_kv_heads=h_kv, hidden=f, gated=True)
    d_h = d // h
    kv_width = h_kv * d_h
    return ValueExercise(
        id="4.block-weights",
        question=(
            f"A pre-norm block has d = {d}, {h} query heads that share {h_kv} KV heads (grouped-query "
            f"attention), and a SwiGLU FFN whose width is 8d/3 rounded up to a multiple of 8. How many weights do "
            "its matrices hold (W_Q, W_K, W_V, W_O and the three SwiGLU matrices; no biases, no norms)?"
        ),
        expected=block.total,
        explanation=(
            f"Head width d_h = {d}/{h} = {d_h}, so W_K and W_V map d to h_kv·d_h = {kv_width}: "
            f"attention holds 2·d² + 2·d·{kv_width} = {block.attention:,} (not 4d² = {4 * d * d:,}). "
            f"SwiGLU's f = {exact:.1f} rounds up to {f}: 3·d·f = {block.ffn:,}. In all {block.total:,}."
        ),
        hints=("Count each matrix as (inputs × outputs); the KV projections output h_kv·d_h features.",),
        wrong_answers=(
            WrongAnswer(
                4 * d * d + block.ffn,
                "That counts 4d² for attention, as if every query head had its own KV head. Under GQA, W_K and "
                f"W_V output only h_kv·d_h = {kv_width} features each.",
            ),
            WrongAnswer(
                block.attention + 8 * d * d,
                f"That is 8d² for the FFN: f = 8d/3 is not a whole width; rounded up to a multiple of 8 it is {f}.",
            ),
            WrongAnswer(
                2 * d * d + 2 * d * h_kv * d + block.ffn,
                f"W_K and W_V output h_kv heads of width d_h = {d_h}, not of width d.",
            ),
            WrongAnswer(
                d * d + 2 * d * kv_width + block.ffn,
                "You left out the output projection W_O (d × d), which maps the heads back to the stream.",
            ),
            WrongAnswer(block.attention + 2 * d * f, "SwiGLU has three matrices (gate, up, down), not two."),
            WrongAnswer(
                block.attention + 3 * d * math.floor(exact),
                f"You cut f = 8d/3 = {exact:.1f} down to {math.floor(exact)}: the question rounds it up to a "
                f"multiple of 8, {f}.",
            ),
            WrongAnswer(
                block.attention + 3 * d * math.ceil(exact),
                f"You rounded f = 8d/3 = {exact:.1f} up to a whole {math.ceil(exact)}: the question rounds it up to "
                f"a multiple of 8, {f} (widths that divide into 8s suit the hardware).",
            ),
        ),
        whole=True,
        params=(Param("d", 320, (320, 448, 512, 640)), Param("h", 8, (8, 16)), Param("h_kv", 2, (2, 4))),
        make=_block_weights,
    )


def _shown_token(token: tuple[float, ...]) -> str:
    """A token as the questions write it: (2.0, 4.0, 6.0, 8.0) -> '[2, 4, 6, 8]'."""
    return "[" + ", ".join(f"{x:g}" for x in token) + "]"


def _layernorm_by_hand(token: tuple[float, ...]) -> ValueExercise:
    """4.layernorm-by-hand on a token of 4 numbers with a whole mean (the book: [2, 4, 6, 8])."""
    mean = sum(token) / 4
    dev = [t - mean for t in token]
    var = sum(e * e for e in dev) / 4
    normed = [e / math.sqrt(var) for e in dev]
    unbiased = [e / math.sqrt(sum(e * e for e in dev) / 3) for e in dev]
    rms = [t / math.sqrt(sum(t * t for t in token) / 4) for t in token]
    return ValueExercise(
        id="4.layernorm-by-hand",
        question=(
            f"Apply LayerNorm (weight 1, bias 0, eps negligible) to the token {_shown_token(token)}. "
            "What are the four outputs?"
            " Give each number to 2 decimal places."
        ),
        expected=normed,
        explanation=(
            f"Mean {mean:g}; deviations {[round(e) for e in dev]}; the variance divides by d = 4: {var:g}. "
            f"Dividing by √{var:g} ≈ {math.sqrt(var):.4f} gives about {[round(v, 4) for v in normed]}."
        ),
        hints=("Subtract the mean, then divide by the square root of the mean squared deviation.",),
        wrong_answers=(
            WrongAnswer(
                unbiased,
                "You used the unbiased variance (divide by d - 1 = 3). LayerNorm divides by d = 4.",
            ),
            WrongAnswer(rms, "That is RMSNorm: it rescales without subtracting the mean. LayerNorm centers first."),
            WrongAnswer([e / var for e in dev], "You divided by the variance; divide by its square root."),
            WrongAnswer(dev, "You centered the token but did not rescale it by its standard deviation."),
        ),
        decimals=2,
        params=(
            Param(
                "token",
                (2.0, 4.0, 6.0, 8.0),
                ((2.0, 4.0, 6.0, 8.0), (1.0, 2.0, 5.0, 8.0), (1.0, 6.0, 2.0, 3.0), (2.0, 7.0, 3.0, 8.0)),
                shown=_shown_token,
            ),
        ),
        make=_layernorm_by_hand,
    )


# Tokens for the zero-branch blocks: whole means, none already normalized (the book: [1, 3, 4, 8])
_ZERO_BRANCH_TOKENS = ((1.0, 3.0, 4.0, 8.0), (2.0, 5.0, 6.0, 11.0), (3.0, 1.0, 9.0, 3.0), (6.0, 2.0, 5.0, 3.0))


def _unbiased_norm(x: torch.Tensor) -> torch.Tensor:
    """LayerNorm with the mistake: the variance divided by d - 1 (torch.std's default)."""
    return (x - x.mean()) / x.std()


def _prenorm_zero_branches(token: tuple[float, ...]) -> ValueExercise:
    """4.prenorm-zero-branches for a lone token (the book: [1, 3, 4, 8])."""
    x = list(token)
    return ValueExercise(
        id="4.prenorm-zero-branches",
        question=(
            "A pre-norm block (LayerNorm, weight 1, bias 0) has all its attention and FFN weights and biases "
            f"set to zero, so both branches output zeros. What does it output for a lone token {_shown_token(token)}?"
            " Give each number to 2 decimal places."
        ),
        expected=x,
        explanation=(
            "U = X + Attention(Norm1(X)) = X + 0 and Y = U + FFN(Norm2(U)) = U: the token passes unchanged. "
            "Pre-norm normalizes what each branch reads, never the residual stream itself."
        ),
        hints=("Write U = X + Attention(Norm1(X)) and Y = U + FFN(Norm2(U)) with zero branches.",),
        wrong_answers=(
            WrongAnswer(
                layer_norm(torch.tensor(x)).tolist(),  # what LayerNorm (weight 1, bias 0) gives
                "That is the normalized token, what post-norm's Norm(X + 0) gives. In a pre-norm block the "
                "norm feeds the branch only; the residual stream passes unnormalized.",
            ),
            WrongAnswer([0.0] * 4, "The residual adds the input back: a zero branch leaves X, not zero."),
        ),
        decimals=2,
        params=(Param("token", _ZERO_BRANCH_TOKENS[0], _ZERO_BRANCH_TOKENS, shown=_shown_token),),
        make=_prenorm_zero_branches,
    )


def _postnorm_zero_branches(token: tuple[float, ...]) -> ValueExercise:
    """4.postnorm-zero-branches for a lone token (the book: [1, 3, 4, 8])."""
    x = list(token)
    mean = sum(x) / 4
    var = sum((t - mean) ** 2 for t in x) / 4
    normed = layer_norm(torch.tensor(x)).tolist()
    twice = layer_norm(layer_norm(torch.tensor(x))).tolist()  # post-norm: Norm2(Norm1(x + 0) + 0)
    twice_unbiased = _unbiased_norm(_unbiased_norm(torch.tensor(x))).tolist()
    return ValueExercise(
        id="4.postnorm-zero-branches",
        question=(
            "Now the post-norm version of that block, U = Norm1(X + Attention(X)), Y = Norm2(U + FFN(U)), with "
            f"the same zero branches. What does it output for the token {_shown_token(token)}?"
            " Give each number to 2 decimal places."
        ),
        expected=twice,
        explanation=(
            f"X + 0 is normalized: mean {mean:g}, variance {var:g}, giving about "
            f"{[round(v, 4) for v in normed]}. Normalizing that again changes nothing visible: "
            "its mean is already 0 and its variance 1. Post-norm rescales the residual stream itself."
        ),
        hints=("The norm now sits after the addition: normalize X + 0.",),
        wrong_answers=(
            WrongAnswer(x, "That is pre-norm's answer. Post-norm normalizes the sum X + branch, the stream itself."),
            WrongAnswer([0.0] * 4, "The residual adds the input back before the norm: X + 0 = X, then Norm(X)."),
            WrongAnswer(
                twice_unbiased,
                "You used the unbiased variance (divide by d - 1 = 3, torch.std's default). LayerNorm divides "
                "by d = 4.",
            ),
        ),
        decimals=2,
        params=(Param("token", _ZERO_BRANCH_TOKENS[0], _ZERO_BRANCH_TOKENS, shown=_shown_token),),
        make=_postnorm_zero_branches,
    )


def _span(first: int, last: int) -> str:
    """Positions first..last in words: '5, 6 and 7', '6 and 7', '0 to 4'."""
    if last == first + 1:
        return f"{first} and {last}"
    if last == first + 2:
        return f"{first}, {first + 1} and {last}"
    return f"{first} to {last}"


_NOT_MIXING = (
    "The FFN applies the same map to each token on its own: only the changed token's FFN output "
    "moves. Mixing across positions is attention's job."
)


def _what_changes(n: int, position: int) -> ValueExercise:
    """4.what-changes: n causal tokens, the input at ``position`` changed (the book: 8, 5). At least 3
    positions read it, and n is neither 2·position + 1 nor 2·position + 2, so no two mistakes meet."""
    p = position
    later = n - p  # positions p..n-1 read position p
    return ValueExercise(
        id="4.what-changes",
        question=(
            f"A causal sequence has {n} tokens, positions 0 to {n - 1}. You change the input at position {p}. "
            f"(a) Applying the FFN to these {n} inputs, how many positions' outputs change? "
            "(b) Through a whole causal block (attention, then FFN), how many positions' outputs change? "
            "Answer [a, b]."
        ),
        expected=[1, later],
        explanation=(
            f"The FFN is per-token, so only position {p} moves. Causal attention lets positions {_span(p, n - 1)} "
            f"read position {p}, so {later} outputs of the block change; positions {_span(0, p - 1)} cannot see it."
        ),
        hints=(f"Which positions may read position {p} under a causal mask? Does the FFN read any other position?",),
        wrong_answers=(
            WrongAnswer([later, later], _NOT_MIXING),
            WrongAnswer([n, n], _NOT_MIXING + " And with a causal mask, earlier positions cannot read later ones."),
            WrongAnswer([1, 1], f"The FFN does not mix, but attention does: later positions read position {p}."),
            WrongAnswer(
                [1, n],
                f"Without a mask all {n} would change; the causal mask hides position {p} from {_span(0, p - 1)}.",
            ),
            WrongAnswer(
                [1, later - 1],
                f"Positions {_span(p + 1, n - 1)} read position {p}, but position {p}'s own output changes too: "
                "it reads itself (and its FFN input changed). Keys j ≤ i include i.",
            ),
            WrongAnswer(
                [1, p + 1],
                f"Flipped direction: a causal query reads the past, so positions {p}..{n - 1} read position {p}, "
                f"not 0..{p}.",
            ),
        ),
        whole=True,
        params=(Param("n", 8, (8, 13, 16)), Param("position", 5, (2, 4, 5))),
        make=_what_changes,
    )


CHAPTER_4 = (
    _ffn_params(96, 320),
    _swiglu_width(400),
    _block_weights(320, 8, 2),
    _layernorm_by_hand((2.0, 4.0, 6.0, 8.0)),
    _prenorm_zero_branches((1.0, 3.0, 4.0, 8.0)),
    _postnorm_zero_branches((1.0, 3.0, 4.0, 8.0)),
    _what_changes(8, 5),
    _residual_gradient(0.5, -0.8),
)


def _rows(*rows: list[float], weight: list[float] | None = None, eps: float = 1e-6) -> tuple:
    x = torch.tensor(rows, dtype=torch.float32)  # (tokens, d)
    w = torch.ones(x.shape[-1]) if weight is None else torch.tensor(weight)  # (d,)
    return x, w, eps


_NORMS = (  # every norm, torch's and the library's
    "torch.nn.functional.rms_norm", "torch.nn.RMSNorm", "torch.nn.functional.layer_norm", "torch.nn.LayerNorm",
    "torch.nn.functional.normalize", "lib.blocks.RMSNorm", "lib.blocks.LayerNorm", "lib.blocks.make_norm",
    "lib.blocks.layer_norm", "torch.rms_norm", "torch.layer_norm", "torch.native_layer_norm",
    "torch.ops.aten.rms_norm", "torch.ops.aten.layer_norm", "torch.ops.aten.native_layer_norm",
    # a fourth hostile batch: the fused kernel, and group norm of [x, -x] (mean 0, variance mean(x²))
    "torch._fused_rms_norm", "torch.group_norm", "torch.native_group_norm", "torch.batch_norm",
    "torch.native_batch_norm", "torch.instance_norm", "torch.nn.functional.group_norm",
    "torch.nn.functional.batch_norm", "torch.nn.functional.instance_norm", "torch.nn.GroupNorm",
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
