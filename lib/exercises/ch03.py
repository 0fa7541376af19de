"""Chapter 3's check-yourself exercises: masks and positions.

Value exercises are plain data; each number is written as the arithmetic that produces it.
The numbers are picked so that each mistake this chapter warns about lands on its own wrong
answer (``tests/test_exercises.py`` checks that no two coincide).
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

from lib.drawn_cases import integer, normal, sizes
from lib.exercises.base import Case, FunctionExercise, ValueExercise, WrongAnswer
from lib.rope import apply_rope
from lib.variants import Param

# --- RoPE scores, one pair ---------------------------------------------------------------
# q = k = [1, 0], frequency π/10: the score is cos((n - m)·π/10), whatever m and n are.
_THETA = math.pi / 10

# q = [1, 0], k = [0, 1], frequency π/12, m = 3, n (the book: 7): (R_m q)·(R_n k) = -sin((n - m)·π/12).
_THETA_GAP = math.pi / 12
_QM = 3

# --- pair frequencies ------------------------------------------------------------------------


def _shifted_score(m: int, n: int) -> ValueExercise:
    """3.shifted-score with the query at position m and the key at position n (the book: 13, 16)."""
    gap = n - m
    score = math.cos(gap * _THETA)
    return ValueExercise(
        id="3.shifted-score",
        question=(
            "RoPE on one pair: q = k = [1, 0], frequency π/10 radians per position. The query sits at "
            f"position {m} and the key at position {n}. What is the score (R_m q)·(R_n k)?"
            " Give it to 2 decimal places."
        ),
        expected=score,
        explanation=(
            f"Only the gap n - m = {gap} counts: cos({gap}·π/10) = {score:.4f}, the same as at positions (0, {gap}) "
            f"or (100, {100 + gap})."
        ),
        hints=("(R_m q)ᵀ(R_n k) = qᵀ R_(n-m) k. For q = k = [1, 0], that is cos of the angle for the gap.",),
        wrong_answers=(
            WrongAnswer(
                math.cos(n * _THETA),
                "You rotated only the key. Both are rotated, q by mθ and k by nθ; the score sees the difference.",
            ),
            WrongAnswer(
                math.cos(m * _THETA),
                "You rotated only the query. Both are rotated, q by mθ and k by nθ; the score sees the difference.",
            ),
            WrongAnswer(
                math.cos((m + n) * _THETA),
                "You added the two angles. The query's rotation is undone by the transpose, R_mᵀ R_n = R_(n-m): "
                "the angles subtract.",
            ),
            WrongAnswer(math.sin(gap * _THETA), "That is the sine. The dot product of two unit vectors is cos(angle)."),
            WrongAnswer(
                math.cos(gap * math.pi / 4),
                "That used the chapter example's frequency π/4. Here each position turns by π/10.",
            ),
            WrongAnswer(1.0, f"Without rotation q·k would be 1, but here the two are {gap} positions apart."),
        ),
        decimals=2,
        params=(Param("m", 13, (3, 5, 13)), Param("n", 16, (2, 12, 16))),  # no two mistakes meet
        make=_shifted_score,
    )


def _pair_period(pair: int, d_k: int) -> ValueExercise:
    """3.pair-period for pair ``pair`` of a head of width d_k, base 500000 (the book: 32, 128)."""
    omega = 500000 ** (-2 * pair / d_k)
    period = 2 * math.pi / omega
    return ValueExercise(
        id="3.pair-period",
        question=(
            f"A head of width d_k = {d_k} uses RoPE with base 500000 (as LLaMA 3 does). How many positions does "
            f"pair i = {pair} take to turn a full circle, 2π radians?"
            " Give it to 1 decimal place."
        ),
        expected=period,
        explanation=(
            f"ω = 500000^(-2·{pair}/{d_k}) ≈ {omega:.6f} rad/position, so a full turn takes "
            f"2π/ω ≈ {period:.1f} positions."
        ),
        hints=("Pair i turns base^(-2i/d_k) radians per position.",),
        wrong_answers=(
            WrongAnswer(1 / omega, "That is 1/ω, positions per radian. A full turn is 2π radians."),
            WrongAnswer(
                2 * math.pi * 500000 ** (pair / d_k),
                "The exponent is -2i/d_k: pairs are numbered by i, and pair i holds coordinates 2i and 2i+1.",
            ),
            WrongAnswer(2 * math.pi * 10000 ** (2 * pair / d_k), "That used base 10000; this model uses 500000."),
            WrongAnswer(omega, "That is the frequency ω in radians per position; the question asks for the period."),
        ),
        decimals=1,
        # every pair exists in every head: d_k / 2 > 32 (a head of 64 has pairs 0..31 only)
        params=(Param("pair", 32, (8, 16, 24, 32)), Param("d_k", 128, (96, 128, 256))),
        make=_pair_period,
    )


def _passes(positions: int, tokens: int) -> ValueExercise:
    """3.passes for a training sequence of ``positions`` and ``tokens`` new ones (the book: 9 and 9)."""
    return ValueExercise(
        id="3.passes",
        question=(
            f"A causal model (no KV cache) must (a) produce next-token predictions for all {positions} positions "
            f"of a known training sequence and (b) generate {tokens} new tokens. How many forward passes does "
            "each need? Answer [a, b]."
        ),
        expected=[1, tokens],
        explanation=(
            f"In training every input token is known, so one causal pass gives all {positions} predictions at "
            "once. In generation the next input is not known until it has been chosen, so the passes are "
            "sequential."
        ),
        hints=("Which inputs are known in advance in each case?",),
        wrong_answers=(
            WrongAnswer(
                [positions, tokens],
                "Training does not need one pass per position: the causal mask lets one pass compute every "
                "prefix's prediction at once, each position reading only its past.",
            ),
            WrongAnswer(
                [1, 1],
                "Generation cannot run in one pass: token i+1 is an input to the next step, and it is not "
                "known until it has been selected.",
            ),
            WrongAnswer([positions, 1], "Swapped: training is the parallel one, generation the sequential one."),
            WrongAnswer(
                [1, tokens + 1],
                "One pass too many: the pass over the prompt already predicts the first new token, and each "
                f"pass gives one more. {tokens} new tokens take {tokens} passes.",
            ),
        ),
        whole=True,
        params=(Param("positions", 9, (9, 12, 16, 32)), Param("tokens", 9, (5, 7, 9, 10))),
        make=_passes,
    )


def _angle(steps: int) -> str:
    """steps·π/12 in lowest terms: 4 -> 'π/3', 8 -> '2π/3', 5 -> '5π/12'."""
    turn = Fraction(steps, 12)
    top = "π" if turn.numerator == 1 else f"{turn.numerator}π"
    return top if turn.denominator == 1 else f"{top}/{turn.denominator}"


def _gap_score(n: int) -> ValueExercise:
    """3.gap-score with the key at position n, the query at 3 (the book: n = 7)."""
    m, gap = _QM, n - _QM
    score = -math.sin(gap * _THETA_GAP)
    return ValueExercise(
        id="3.gap-score",
        question=(
            f"Now q = [1, 0] and k = [0, 1], frequency π/12 radians per position, the query at position {m} "
            f"and the key at position {n}. What is the score (R_m q)·(R_n k)?"
            " Give it to 2 decimal places."
        ),
        expected=score,
        explanation=(
            f"R_{n} k = [-sin({n}π/12), cos({n}π/12)] and R_{m} q = [cos({m}π/12), sin({m}π/12)]; their dot "
            f"product is sin({m}π/12 - {n}π/12) = -sin({_angle(gap)}) ≈ {score:.4f}. Only the gap {gap} enters."
        ),
        hints=(
            f"Rotate k by the gap: qᵀ R_(n-m) k with n - m = {gap} and θ = π/12. Rotating [0, 1] by α gives "
            "[-sin α, cos α].",
        ),
        wrong_answers=(
            WrongAnswer(
                -score,
                "The sign is flipped: you rotated by m - n instead of n - m (or turned the wrong way). "
                "For q ≠ k the direction matters.",
            ),
            WrongAnswer(
                math.cos(gap * _THETA_GAP),
                "cos(gap·θ) is the score only when q = k. Here k starts a quarter turn from q.",
            ),
            WrongAnswer(0.0, f"0 is q·k with no positions. RoPE rotates k by {gap} steps relative to q first."),
            WrongAnswer(
                -math.sin((n + m) * _THETA_GAP),
                "You added the angles. The transpose undoes the query's rotation: the angles subtract.",
            ),
            WrongAnswer(
                -math.sin(n * _THETA_GAP),
                f"You rotated only the key, by {n} steps. The query is rotated too; only the gap of {gap} remains.",
            ),
            WrongAnswer(
                math.sin(m * _THETA_GAP),
                f"You rotated only the query, by {m} steps. The key is rotated too, by {n}; only the gap of {gap} "
                "remains.",
            ),
        ),
        decimals=2,
        # the query stays at 3: with θ = π/12 most pairs of positions make two mistakes meet. These keys
        # keep every mistake at least 0.03 from the answer and the others, and give six different answers
        # (gaps 1, 2, 4, 5, 13, 14; the sine repeats, so gaps 7, 8, 10, 11 would copy those of 5, 4, 2, 1)
        params=(Param("n", 7, (4, 5, 7, 8, 16, 17)),),
        make=_gap_score,
    )


_NUMBER_WORDS = {1: "one", 2: "two"}


def _count(length: int) -> str:
    """The book writes its seven tokens as a word; a variant's count is written in digits."""
    return "seven" if length == 7 else str(length)


def _causal_reads(length: int, target: int) -> ValueExercise:
    """3.causal-reads: ``length`` input tokens, the prediction of t_target (the book: seven, t5). The target
    is at least 2 and at most length - 2, so reading one position more or less stays a mistake of its own."""
    p = target - 1  # position i predicts token i + 1
    count = _count(length)
    answer = [int(j <= p) for j in range(length)]
    return ValueExercise(
        id="3.causal-reads",
        question=(
            f"A causal language model is trained on {count} input tokens t0..t{length - 1} with shifted targets. "
            f"The representation that predicts t{target}: which input positions may it read? Answer with "
            f"{count} numbers, 1 where it may read and 0 where it may not."
        ),
        expected=answer,
        explanation=(
            f"Position i predicts token i+1, so t{target} is predicted at position {p}, which reads 0..{p}. "
            f"Reading position {target} would show it the very token it must predict."
        ),
        hints=(f"Which position's output is trained to predict t{target}? A causal query at i reads keys j ≤ i.",),
        wrong_answers=(
            WrongAnswer(
                [int(j <= target) for j in range(length)],
                f"That reads position {target}, the token being predicted: with shifted targets the prediction of "
                f"t{target} comes from position {p}, and letting it see t{target} would leak the answer.",
            ),
            WrongAnswer(
                [int(j >= p) for j in range(length)],
                "That is the transposed triangle (j ≥ i): it reads itself and the future. A causal query "
                "reads itself and the past, keys j ≤ i.",
            ),
            WrongAnswer(
                [1 - r for r in answer],
                "The polarity is flipped: you marked the positions it may NOT read. Here 1 (True) means "
                "'may read', as in torch's scaled_dot_product_attention.",
            ),
            WrongAnswer(
                [int(j < p) for j in range(length)],
                f"Off by one the other way: position {p} may read itself. Keys 0..i, inclusive.",
            ),
            WrongAnswer(
                [1] * length,
                "That is bidirectional (encoder) attention: without the causal mask every prediction "
                "could read the tokens it is trained to predict.",
            ),
        ),
        whole=True,
        params=(
            Param("length", 7, (7, 9, 10), shown=_count),
            Param("target", 5, (3, 4, 5)),
        ),
        make=_causal_reads,
    )


def _xs(order: tuple[int, ...]) -> str:
    """(2, 0, 3, 1) -> 'x2, x0, x3, x1', as the question writes the tokens fed in."""
    return ", ".join(f"x{i}" for i in order)


# the orders a student may feed in: none is its own inverse, so the inverse stays a mistake of its own
_ORDERS = ((2, 0, 3, 1), (3, 2, 0, 1), (1, 3, 2, 0), (2, 3, 1, 0), (1, 2, 3, 0), (3, 0, 1, 2), (1, 3, 0, 2))


def _permuted_outputs(order: tuple[int, ...]) -> ValueExercise:
    """3.permuted-outputs with the tokens fed in the order ``order`` (the book: x2, x0, x3, x1). No order is
    its own inverse, so the inverse permutation stays a mistake apart from the answer."""
    answer = list(order)
    inverse = [answer.index(i) for i in range(len(answer))]
    ys = ", ".join(f"y{i}" for i in order)
    return ValueExercise(
        id="3.permuted-outputs",
        question=(
            "Self-attention with no positions and no mask maps tokens [x0, x1, x2, x3] to outputs "
            f"[y0, y1, y2, y3]. Now feed [{_xs(order)}]. The output rows are which y's, in order? Answer "
            "with their indices, e.g. [0, 1, 2, 3] for y0, y1, y2, y3."
        ),
        expected=answer,
        explanation=(
            f"Permutation equivariance: permuting the inputs permutes the outputs the same way, [{ys}]. "
            "Each token's output depends on its own query and the unordered set of keys and values."
        ),
        hints=(f"Which output does token x{order[0]} get, wherever it sits?",),
        wrong_answers=(
            WrongAnswer(
                [0, 1, 2, 3],
                "That is invariance: the ordered output unchanged. Self-attention is equivariant instead; "
                "each token carries its own output along.",
            ),
            WrongAnswer(
                inverse,
                f"That is the inverse permutation. Row 0 holds x{order[0]}'s output, y{order[0]}: the outputs "
                "follow the inputs.",
            ),
            WrongAnswer(
                [i + 1 for i in answer],
                "The order is right, but counted from 1: the outputs are y0..y3, so answer with indices from 0, "
                "as the example [0, 1, 2, 3] does.",
            ),
            WrongAnswer(
                [i + 1 for i in inverse],
                f"That is the inverse permutation, and counted from 1. Row 0 holds x{order[0]}'s output, "
                f"y{order[0]}: the outputs follow the inputs, indexed from 0.",
            ),
        ),
        whole=True,
        params=(Param("order", (2, 0, 3, 1), _ORDERS, shown=_xs),),
        make=_permuted_outputs,
    )


def _cross_attention_row(source: int, padding: int, targets: int, query: int) -> ValueExercise:
    """3.cross-attention-row: a source of ``source`` positions, the last ``padding`` of them padding, and
    ``targets`` target tokens; which source positions target query ``query`` reads (the book: 7, 1, 4, 1).
    The answer is the source's padding mask alone. A causal mask aligned bottom-right would put the query at
    position source - targets + query; where that is the last real position (4 targets, 2 padding, query 1)
    the mistake reads what the answer reads, and is left out."""
    real = source - padding
    answer = [int(j < real) for j in range(source)]
    at = source - targets + query  # the query's position under a bottom-right causal mask
    pad_words = _NUMBER_WORDS[padding]
    at_padding = str(real) if padding == 1 else f"{real}..{source - 1}"
    named = [
        WrongAnswer(
            [int(j <= query) for j in range(source)],
            "That applies a causal mask (top-left: query i reads keys 0..i) to cross-attention. Causality "
            "orders the target tokens among themselves; the source is read whole.",
        )
    ]
    if at != real - 1:
        named.append(
            WrongAnswer(
                [int(j <= at) for j in range(source)],
                f"That applies a causal mask aligned bottom-right (query i at position M - N + i = {at}). "
                "Cross-attention has no causal mask: the source is known before decoding starts.",
            )
        )
    named += [
        WrongAnswer(
            [1] * source,
            f"That reads the padding position{'' if padding == 1 else 's'} too. The padding mask removes source "
            f"position{'' if padding == 1 else 's'} {at_padding} as {'a key' if padding == 1 else 'keys'} for every "
            "query.",
        ),
        WrongAnswer(
            [1 - r for r in answer],
            "The polarity is flipped: you marked the positions it may NOT read. Here 1 (True) means "
            "'may read', as in torch's scaled_dot_product_attention.",
        ),
    ]
    return ValueExercise(
        id="3.cross-attention-row",
        question=(
            f"A translation model's encoder reads a source of {source} positions, the last {pad_words} padding; its "
            f"decoder has produced {targets} target tokens. Which source positions may the cross-attention query "
            f"of target token {query} (counting from 0) read? Answer with one number per source position, 1 where "
            "it may read and 0 where it may not."
        ),
        expected=answer,
        explanation=(
            "Cross-attention reads the encoder's outputs, the whole source, which is known before decoding "
            "starts: no causal mask applies to it, only the source's padding. Every target query reads "
            f"source positions 0..{real - 1} and never the padding at {at_padding}."
        ),
        hints=("Which sequence do the keys come from, and is any of it in the target's future?",),
        wrong_answers=tuple(named),
        whole=True,
        params=(
            Param("source", 7, (7, 8, 10)),
            Param("padding", 1, (1, 2), shown=lambda n: _NUMBER_WORDS[n]),
            Param("targets", 4, (4, 5, 6)),
            Param("query", 1, (0, 1)),
        ),
        make=_cross_attention_row,
    )


CHAPTER_3 = (
    _causal_reads(7, 5),
    _passes(9, 9),
    _shifted_score(13, 16),
    _gap_score(7),
    _permuted_outputs((2, 0, 3, 1)),
    _cross_attention_row(7, 1, 4, 1),
    _pair_period(32, 128),
)


# --- write RoPE ------------------------------------------------------------------------------


def _rope_pairs_reference(x: torch.Tensor, positions: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    return apply_rope(x, positions, freqs=freqs, layout="interleaved")


def _case_x(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _draw_rope(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x of 0 to 2 leading axes, (N, d_k); positions anywhere in [0, 4), not whole; freqs in (0, 1]. Small
    angles, as the declared small cases': float32 angles fail only the large-position case, which says why."""
    lead = sizes(generator, integer(generator, 0, 2), 1, 3)
    n, pairs = integer(generator, 1, 5), integer(generator, 1, 4)
    x = normal(generator, (*lead, n, 2 * pairs), dtype=torch.float64)
    positions = torch.rand(n, generator=generator, dtype=torch.float64) * 4
    freqs = 1 - torch.rand(pairs, generator=generator, dtype=torch.float64)
    return x, positions, freqs


def _f64(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


CHAPTER_3_FUNCTIONS = (
    FunctionExercise(
        id="3.rope-pairs",
        question=(
            "Write rope_pairs(x, positions, freqs): x is (..., N, d_k), positions (N,), freqs (d_k/2,). Rotate "
            "each pair of coordinates (2i, 2i+1) of token n counterclockwise by positions[n] · freqs[i]: "
            "(a, b) becomes (a cos θ - b sin θ, a sin θ + b cos θ)."
        ),
        reference=_rope_pairs_reference,
        cases=(
            Case(
                "the 2-D example: q = [1, 0], frequency π/4",
                lambda: (_f64([[1.0, 0.0], [1.0, 0.0]]), _f64([1.0, 2.0]), _f64([math.pi / 4])),
                "With one pair, x = [1, 0] at position 1 and frequency π/4 becomes [cos π/4, sin π/4].",
            ),
            Case(
                "three pairs, three frequencies",
                lambda: (_case_x(3, 6, seed=1), _f64([0.0, 3.0, 7.0]), _f64([1.0, 0.1, 0.01])),
                "Pair i is coordinates (2i, 2i+1) and turns at freqs[i]: x[..., 0::2] and x[..., 1::2].",
            ),
            Case(
                "fractional positions",
                lambda: (_case_x(2, 4, seed=2), _f64([0.5, 2.25]), _f64([0.8, 0.2])),
                "Positions may be any real numbers: the angle is positions[n] · freqs[i].",
            ),
            Case(
                "leading batch and head axes",
                lambda: (_case_x(2, 3, 4, 4, seed=3), _f64([5.0, 6.0, 7.0, 8.0]), _f64([1.0, 0.01])),
                "Work on the last two axes, (..., N, d_k): positions index the second-to-last axis.",
            ),
            Case(
                "large positions",
                lambda: (_case_x(3, 4, seed=4), _f64([100_003.0, 250_007.0, 999_983.0]), _f64([0.9, 0.0137])),
                "Your formula passes every small case, so it is right; what fails is precision. At position "
                "10⁶ a float32 angle is off by up to about 0.03 rad (float32 keeps 24 bits), and the "
                "rotated vector with it. Compute positions[:, None] * freqs in float64, the dtype of "
                "the inputs, and cast only the result.",
            ),
        ),
        wrong_answers=(
            WrongAnswer(
                lambda x, positions, freqs: apply_rope(x, -positions, freqs=freqs, layout="interleaved"),
                "Your rotation turns clockwise: (a, b) → (a cos θ + b sin θ, -a sin θ + b cos θ). Swap the "
                "signs of the sine terms. (Consistently, the scores still depend only on the gap, but a "
                "checkpoint trained one way breaks the other way.)",
            ),
            WrongAnswer(
                lambda x, positions, freqs: apply_rope(x, None, freqs=freqs, layout="interleaved"),
                "You used the token index 0..N-1 instead of the given positions. With a KV cache, or shifted "
                "windows, tokens do not start at 0.",
            ),
            WrongAnswer(
                lambda x, positions, freqs: apply_rope(x, positions, freqs=freqs, layout="half"),
                "You paired coordinate i with i + d_k/2 (the 'half' layout of GPT-NeoX and Hugging Face's LLaMA). This "
                "exercise pairs neighbours, 2i with 2i+1 (RoFormer, GPT-J, Meta's LLaMA code). A checkpoint "
                "works only with its own layout.",
            ),
            WrongAnswer(
                lambda x, positions, freqs: apply_rope(
                    x, positions, freqs=freqs[:1].expand(freqs.shape), layout="interleaved"
                ),
                "Every pair turned at freqs[0]. Pair i has its own frequency freqs[i]: different pairs rotate "
                "at different speeds.",
            ),
        ),
        explanation=(
            "Take even = x[..., 0::2] and odd = x[..., 1::2]; the angles are positions[:, None] * freqs; "
            "stack (even cos - odd sin, even sin + odd cos) on a new last axis and flatten it back."
        ),
        hints=("angles = positions[:, None] * freqs[None, :] has shape (N, d_k/2), one angle per token and pair.",),
        # Loose enough that float32 angles pass the small cases (their error there is ~1e-7), so a
        # precision problem fails only the large-position case, whose feedback names it.
        atol=1e-6,
        rtol=1e-6,
        stands_for=("lib.rope.apply_rope", "lib.rope.rotate_pairs"),
        forbids=("lib.rope.rope_rotation_matrix", "lib.rope.rope_cos_sin", "lib.rope.rope_angles"),
        draw=_draw_rope,
        dtype_feedback=(
            "Your function returned float32 for float64 inputs. The formula may well be right; the precision "
            "is not: near position 10⁶ a float32 angle is off by up to about 0.03 rad. Keep the angles and "
            "the rotation in the input's dtype (float64 here)."
        ),
    ),
)

EXERCISES = CHAPTER_3 + CHAPTER_3_FUNCTIONS
