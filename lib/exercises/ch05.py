"""Chapter 5's check-yourself exercises: costs, online softmax, tiles, windows, sparse patterns.

Every expected value is computed by lib (``lib.costs``, ``lib.tiled_softmax``) from numbers
other than the ones the chapter prints, and each wrong answer is the result of one mistake
the chapter warns about, with numbers picked so that no two mistakes give the same answer.
"""

from __future__ import annotations

import math

import torch

from lib.costs import MIB, causal_pairs, global_local_pairs, layer_flops, score_matrix_bytes, window_pairs
from lib.drawn_cases import integer, normal
from lib.exercises.base import Case, FunctionExercise, ValueExercise, WrongAnswer
from lib.online_softmax import online_softmax_update
from lib.variants import Param

INF = float("inf")


# --- 5.total-doubling: d = 2048, f = 4d, N = 6144 -> 12288 --------------------------------
# N = 3d: a ratio N/d the chapter never prints (it shows N/d = 2, 4, 8 ...), so its x2.50 and
# x2.80 do not answer this. Each mistake below gives its own factor.
_TD, _TN = 2048, 6144
_SMALL, _LARGE = layer_flops(_TN, _TD), layer_flops(2 * _TN, _TD)
_TOTAL_FACTOR = _LARGE.total / _SMALL.total  # pairwise is a third of the work at N = 3d: 8/3
_SHARE = _SMALL.pairwise / _SMALL.total
_NO_FFN = layer_flops(2 * _TN, _TD, ffn_width=0).total / layer_flops(_TN, _TD, ffn_width=0).total  # 3.2


def _scores_only_total(n: int) -> int:
    """The layer's FLOPs with AV forgotten: QKᵀ, the projections and the FFN only."""
    flops = layer_flops(n, _TD)
    return flops.scores + flops.linear


_NO_AV = _scores_only_total(2 * _TN) / _scores_only_total(_TN)  # 2.4

# --- 5.raised-max: state (m, l) = (2, 1.5), next block [1, 4] ------------------------------
_M_OLD, _L_OLD, _BLOCK = 2.0, 1.5, (1.0, 4.0)
_M_NEW = max(_M_OLD, *_BLOCK)
_BLOCK_SUM = sum(math.exp(x - _M_NEW) for x in _BLOCK)  # e^-3 + 1
_L_NEW = _L_OLD * math.exp(_M_OLD - _M_NEW) + _BLOCK_SUM  # ≈ 1.2528

# --- 5.causal-tiles: N = 1024, 64 x 64 tiles -----------------------------------------------
_BLOCKS = 1024 // 64
_CAUSAL_TILES = _BLOCKS * (_BLOCKS + 1) // 2  # query block i visits i unmasked tiles and 1 diagonal: 136


# --- 5.global-edges: N = 16, |i - j| < 3, g = 2 global tokens -----------------------------
_GN, _GW, _GG = 16, 3, 2
_BAND = global_local_pairs(_GN, _GW, 0)  # the band alone: 74
_GLOBAL_EDGES = global_local_pairs(_GN, _GW, _GG)  # 124
_GLOBAL_CROSS = 2 * _GG * _GN - _GG**2  # pairs in the global rows and columns: 60
_OVERLAP = _BAND + _GLOBAL_CROSS - _GLOBAL_EDGES  # of those, already in the band: 10

# --- 5.accumulator: m = 1, l = 2, acc = [3, -1]; next tile scores [2, 0] on values [1, 0], [0, 2] ---
_AM, _AL, _AACC = 1.0, 2.0, (3.0, -1.0)
_ASCORES, _AVALUES = (2.0, 0.0), ((1.0, 0.0), (0.0, 2.0))
_AM_NEW = max(_AM, *_ASCORES)


def _acc_update(*, rescale: bool = True, inverted: bool = False, shift: float = _AM_NEW) -> list[float]:
    """acc after the tile; the keywords reproduce the known mistakes."""
    factor = math.exp(_AM_NEW - _AM) if inverted else math.exp(_AM - _AM_NEW) if rescale else 1.0
    return [
        _AACC[i] * factor + sum(math.exp(s - shift) * v[i] for s, v in zip(_ASCORES, _AVALUES, strict=True))
        for i in range(2)
    ]


_ACC_NEW = _acc_update()  # [3/e + 1, -1/e + 2/e²] ≈ [2.1036, -0.0972]
_AL_NEW = _AL * math.exp(_AM - _AM_NEW) + sum(math.exp(s - _AM_NEW) for s in _ASCORES)


def _score_mib(b: int, h: int, n: int) -> ValueExercise:
    """5.score-mib for a batch of b sequences, h heads, n tokens, float32 (the book: 3, 16, 2048)."""
    mib = score_matrix_bytes(n, heads=h, batch=b, bytes_per_element=4) / MIB
    return ValueExercise(
        id="5.score-mib",
        question=(
            f"Naive attention stores one score matrix for a batch of B = {b} sequences, h = {h} heads, "
            f"N = {n} tokens, in float32 (4 bytes). How many MiB is that one matrix?"
            " Give it to 1 decimal place."
        ),
        expected=mib,
        explanation=(
            f"B·h·N²·s = {b}·{h}·{n}²·4 bytes = {mib:.1f} MiB (1 MiB = 2²⁰ bytes). "
            "The weights after the softmax are another matrix of the same size."
        ),
        hints=("Count the entries, B·h·N·N, then multiply by the bytes per entry.",),
        wrong_answers=(
            WrongAnswer(mib / 1024, "That is in GiB (2³⁰ bytes); the question asks for MiB (2²⁰ bytes)."),
            WrongAnswer(mib / b, "That is one sequence: every sequence in the batch has its own matrix (×B)."),
            WrongAnswer(mib / h, "That is one head: every head has its own N×N scores (×h)."),
            WrongAnswer(mib / 2, "You used 2 bytes per entry; float32 takes 4."),
            WrongAnswer(mib / 4, "You counted entries, not bytes: multiply by 4 bytes per float32."),
            WrongAnswer(mib / n, "You used N entries per head instead of N²: every query scores every key."),
            WrongAnswer(
                2 * mib, "That is two matrices, the scores and the softmax weights; the question asks for one."
            ),
            WrongAnswer(mib * MIB / 1e6, "That is in decimal megabytes (10⁶ bytes); a MiB is 2²⁰ = 1,048,576 bytes."),
        ),
        decimals=1,
        params=(Param("b", 3, (3, 5, 6)), Param("h", 16, (8, 12, 16)), Param("n", 2048, (2048, 3072, 4096))),
        make=_score_mib,
    )


def _window_edges(n: int, w: int) -> ValueExercise:
    """5.window-edges: a causal window of w keys over n tokens (the book: 12, 4)."""
    edges = window_pairs(n, w)
    return ValueExercise(
        id="5.window-edges",
        question=(
            f"A causal sliding window of w = {w}: each query reads itself and the {w - 1} keys before it, if they "
            f"exist. How many query-key pairs does it allow in a sequence of N = {n} tokens?"
        ),
        expected=edges,
        explanation=(
            f"The first {w - 1} queries have fewer than {w} keys to read (1, ..., {w - 1}); the remaining "
            f"{n - w + 1} read {w} each: {edges} in all. At fixed w, that grows like N·w."
        ),
        hints=("Write down how many keys queries 0, 1, 2, … may read.",),
        wrong_answers=(
            WrongAnswer(n * w, "N·w forgets that the first queries have fewer than w keys before them."),
            WrongAnswer(
                window_pairs(n, w + 1),
                f"Off by one: each query reads itself and the {w - 1} keys before it, w = {w} keys in all, "
                f"not itself and {w}.",
            ),
            WrongAnswer(
                window_pairs(n, w - 1), f"Off by one: the window counts the query's own key, so w = {w} keys in all."
            ),
            WrongAnswer(causal_pairs(n), "That is full causal attention, with no window."),
            WrongAnswer(n * n, "That is dense attention: every query reads every key."),
            WrongAnswer(
                global_local_pairs(n, w, 0),
                f"That is a two-sided window, |i − j| < {w}. This window is causal: no key after the query.",
            ),
        ),
        whole=True,
        # at N = 10 and w = 4 the off-by-one window (w = 5) would allow N·w pairs too: no such pair here
        params=(Param("n", 12, (12, 13, 17)), Param("w", 4, (3, 4, 5))),
        make=_window_edges,
    )


CHAPTER_5 = (
    _score_mib(3, 16, 2048),
    ValueExercise(
        id="5.total-doubling",
        question=(
            f"A layer has d = {_TD}, an FFN of width 4d, and dense attention. N goes from {_TN} to {2 * _TN}. "
            "By what factor do its modeled FLOPs (QKᵀ, AV, four projections, FFN) grow?"
            " Give it to 2 decimal places."
        ),
        expected=_TOTAL_FACTOR,
        explanation=(
            f"At N = {_TN} the pairwise terms (4N²d) are {_SHARE:.0%} of the total and the linear ones (24Nd²) "
            f"{1 - _SHARE:.0%}: their ratio is 4N : 24d = N : 6d. Doubling N multiplies the first by 4 and the "
            f"second by 2: {_SHARE:.3f}·4 + {1 - _SHARE:.3f}·2 = {_TOTAL_FACTOR:.2f}. The total need not quadruple."
        ),
        hints=(f"Split the FLOPs into the N²d terms and the Nd² terms; compare their sizes at N = {_TN} first.",),
        wrong_answers=(
            WrongAnswer(4.0, "Only the pairwise terms quadruple; projections and the FFN just double."),
            WrongAnswer(2.0, "The attention scores and AV grow with N², so they quadruple: the total grows by more."),
            WrongAnswer(3.0, f"You averaged 4 and 2; weight each by its share of the FLOPs at N = {_TN}."),
            WrongAnswer(
                _NO_FFN,
                "You left out the FFN (16Nd²): it is the largest term that grows only linearly in N.",
            ),
            WrongAnswer(
                _NO_AV,
                "You counted QKᵀ but not AV: the weighted sum of values is a second 2N²d product.",
            ),
        ),
        decimals=2,
    ),
    ValueExercise(
        id="5.raised-max",
        question=(
            f"An online softmax row has m = {_M_OLD:g} and l = {_L_OLD:g}. The next block of scores is "
            f"{list(_BLOCK)}. What are [m, l] after the block?"
            " Give each number to 3 decimal places."
        ),
        expected=[_M_NEW, _L_NEW],
        explanation=(
            f"The block raises the max to {_M_NEW:g}. The old sum was taken against exp(x - {_M_OLD:g}), so it is "
            f"rescaled by exp({_M_OLD:g} - {_M_NEW:g}): {_L_OLD:g}·e⁻² + e⁻³ + e⁰ ≈ {_L_NEW:.4f}."
        ),
        hints=("New m = max(old m, block max). Multiply the old l by exp(m_old − m_new), then add the block's terms.",),
        wrong_answers=(
            WrongAnswer(
                [_M_NEW, _L_OLD + _BLOCK_SUM],
                "You added the block without rescaling the old sum: it was computed against m = 2, and must be "
                "multiplied by exp(2 − 4) before it can be added to terms taken against m = 4.",
            ),
            WrongAnswer(
                [_M_NEW, _L_OLD * math.exp(_M_NEW - _M_OLD) + _BLOCK_SUM],
                "The rescale factor is upside down: it is exp(m_old − m_new) ≤ 1, which shrinks the old sum.",
            ),
            WrongAnswer(
                [_M_NEW, _BLOCK_SUM],
                "That is the block's sum alone: the state keeps everything seen so far, so add the rescaled old l.",
            ),
            WrongAnswer(
                [_M_OLD, _L_OLD + sum(math.exp(x - _M_OLD) for x in _BLOCK)],
                "You kept m = 2 although the block holds a 4: m is the running maximum and must be raised.",
            ),
        ),
        decimals=3,
    ),
    ValueExercise(
        id="5.is-flash-exact",
        question=(
            "Which statement is true? Answer 1, 2, 3 or 4. "
            "(1) FlashAttention approximates softmax attention by dropping small scores. "
            "(2) FlashAttention computes the same softmax attention, exact up to floating-point rounding, "
            "and mainly saves memory traffic. "
            "(3) FlashAttention turns the N² attention arithmetic into O(N). "
            "(4) elu+1 linear attention gives the same outputs as FlashAttention with less work."
        ),
        expected=2,
        explanation=(
            "Tiling and the online softmax reproduce one global softmax; the outputs differ from naive attention "
            "only by rounding. The arithmetic stays quadratic (the backward pass even recomputes the scores); "
            "what shrinks is the memory that holds them and the traffic to it."
        ),
        hints=("Compare the maximum difference between tiled and naive attention in float64 in this chapter.",),
        wrong_answers=(
            WrongAnswer(
                1, "Nothing is dropped: every score enters the softmax, one tile at a time (exact, not sparse)."
            ),
            WrongAnswer(
                3,
                "Every query still meets every key: QKᵀ and AV are still N²d work, and backward recomputes them. "
                "FlashAttention saves memory and data movement, not arithmetic.",
            ),
            WrongAnswer(
                4,
                "Linear attention replaces exp(q·k) by φ(q)·φ(k): a different (approximate) model whose outputs "
                "differ, as the chapter's printed error shows. FlashAttention computes the exact softmax.",
            ),
        ),
        whole=True,
    ),
    ValueExercise(
        id="5.causal-tiles",
        question=(
            "Causal self-attention with N = 1024 runs in 64×64 tiles (64 queries by 64 keys). The loop skips every "
            "tile wholly in the future. How many tiles does it visit?"
        ),
        expected=_CAUSAL_TILES,
        explanation=(
            f"There are {_BLOCKS} query blocks; block i (from 0) visits i tiles below the diagonal and 1 on it: "
            f"1 + 2 + … + {_BLOCKS} = {_CAUSAL_TILES}, a little over half of the {_BLOCKS**2} dense tiles."
        ),
        hints=("Count the tiles row of tiles by row of tiles: the first query block reads one tile, the next two, …",),
        wrong_answers=(
            WrongAnswer(_BLOCKS**2, "That is every tile: the tiles above the diagonal are in the future and skipped."),
            WrongAnswer(_BLOCKS**2 // 2, "Exactly half leaves out the diagonal: those tiles are half readable."),
            WrongAnswer(
                _BLOCKS * (_BLOCKS - 1) // 2,
                "You left out the diagonal tiles. Each query reads its own key, so the diagonal must be visited.",
            ),
            WrongAnswer(causal_pairs(1024), "That counts query-key pairs, not 64×64 tiles."),
        ),
        whole=True,
    ),
    _window_edges(12, 4),
    ValueExercise(
        id="5.global-edges",
        question=(
            f"A sparse pattern on N = {_GN} tokens: every query reads the keys with |i − j| < {_GW} (a two-sided "
            f"band), and the first {_GG} tokens are global: they read every key and every query reads them. "
            "How many query-key pairs are allowed?"
        ),
        expected=_GLOBAL_EDGES,
        explanation=(
            f"The band alone has {_BAND} pairs. The global rows and columns hold 2·g·N − g² = {_GLOBAL_CROSS} "
            f"pairs, {_OVERLAP} of which are already in the band: {_BAND} + {_GLOBAL_CROSS} − {_OVERLAP} = "
            f"{_GLOBAL_EDGES}. Sparse patterns cost what their actual edges cost, plus the kernel's overhead."
        ),
        hints=("Count the band, then the global rows and columns, then subtract every pair you counted twice.",),
        wrong_answers=(
            WrongAnswer(_BAND, "That is the band alone: the global tokens' rows and columns add pairs."),
            WrongAnswer(
                _BAND + 2 * _GG * _GN - _GG**2,
                "You counted the pairs where the band and the global rows/columns overlap twice.",
            ),
            WrongAnswer(
                _BAND + 2 * _GG * _GN,
                "You counted the global block (global to global) and the band's overlap twice.",
            ),
            WrongAnswer(_GN * _GN, "That is dense attention."),
        ),
        whole=True,
    ),
    ValueExercise(
        id="5.accumulator",
        question=(
            f"One query row of tiled attention holds m = {_AM:g}, l = {_AL:g} and the value accumulator "
            f"acc = {list(_AACC)} (the sum of exp(s − m)·v so far, not yet divided by l). The next tile has "
            f"scores {list(_ASCORES)} for the values {[list(v) for v in _AVALUES]}. What is acc after the tile? "
            "Give each number to 3 decimal places."
        ),
        expected=_ACC_NEW,
        explanation=(
            f"The tile raises m to {_AM_NEW:g}, so the old acc, taken against m = {_AM:g}, is rescaled by "
            f"exp({_AM:g} − {_AM_NEW:g}) = {math.exp(_AM - _AM_NEW):.4f} before the tile's terms "
            f"exp(s − {_AM_NEW:g})·v "
            f"are added: {[round(x, 4) for x in _ACC_NEW]}. l gets the same rescale, and the output, acc / l, "
            "is divided only once, after the last tile."
        ),
        hints=("m_new = max(m, max(scores)); acc_new = acc·exp(m − m_new) + Σ exp(s_j − m_new)·v_j.",),
        wrong_answers=(
            WrongAnswer(
                _acc_update(rescale=False), "You added the tile without rescaling acc: multiply it by exp(m − m_new)."
            ),
            WrongAnswer(
                _acc_update(inverted=True),
                "The rescale factor is exp(m_old − m_new), at most 1; you multiplied by its inverse.",
            ),
            WrongAnswer(
                _acc_update(shift=_AM),
                "You took the tile's exponentials against the old m; every term of acc must use the new one, "
                "and the old acc must be rescaled to it.",
            ),
            WrongAnswer(
                [x / _AL_NEW for x in _ACC_NEW],
                "That is acc / l, the output after this tile. acc itself stays unnormalized until the last tile.",
            ),
        ),
        decimals=3,
    ),
)


def online_softmax_update_stacked(m: torch.Tensor, l: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """The reference for 5.online-softmax-update: ``online_softmax_update`` as one (2, ...) tensor."""
    return torch.stack(online_softmax_update(m, l, block))


def _state(m: list[float], l: list[float], block: list[list[float]]) -> tuple[torch.Tensor, ...]:
    return torch.tensor(m), torch.tensor(l), torch.tensor(block)


def _draw_state(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """R rows: some fresh (m = -inf, l = 0), the rest with l >= 1; a block with some -inf scores."""
    rows, width = integer(generator, 1, 4), integer(generator, 1, 5)
    fresh = torch.rand(rows, generator=generator) < 0.3
    m = normal(generator, (rows,), scale=3.0).masked_fill(fresh, -INF)
    l = (1 + torch.rand(rows, generator=generator) * 4).masked_fill(fresh, 0.0)
    block = normal(generator, (rows, width), scale=3.0)
    block = block.masked_fill(torch.rand(rows, width, generator=generator) < 0.25, -INF)
    return m, l, block


def _no_rescale(m, l, block):
    m_new = torch.maximum(m, block.amax(dim=-1))
    return torch.stack((m_new, l + torch.exp(block - m_new[..., None]).sum(dim=-1)))


def _inverted_rescale(m, l, block):
    m_new = torch.maximum(m, block.amax(dim=-1))
    return torch.stack((m_new, l * torch.exp(m_new - m) + torch.exp(block - m_new[..., None]).sum(dim=-1)))


def _unguarded(m, l, block):
    m_new = torch.maximum(m, block.amax(dim=-1))
    return torch.stack((m_new, l * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)))


def _unshifted(m, l, block):
    return torch.stack((torch.maximum(m, block.amax(dim=-1)), l + torch.exp(block).sum(dim=-1)))


def _tile_alone(m, l, block):
    """The lesson's misconception: each tile normalised on its own, the running state dropped."""
    m_tile = block.amax(dim=-1)
    return torch.stack((m_tile, torch.exp(block - m_tile[..., None]).sum(dim=-1)))


def _tile_normalised(m, l, block):
    """The same misconception the other way round: each tile's softmax sums to 1, so l gains 1 per tile."""
    m_new = torch.maximum(m, block.amax(dim=-1))
    return torch.stack((m_new, l * torch.exp(m - m_new) + 1))


_EACH_TILE = (
    "You normalised each tile on its own, as if it were the whole row. The tiles of a row share one softmax: "
    "carry the running max and sum, rescale the old l by exp(m_old − m_new), and add the tile's exp(block − m_new)."
)

CHAPTER_5_FUNCTIONS = (
    FunctionExercise(
        id="5.online-softmax-update",
        question=(
            "Write update(m, l, block): m and l are (R,) tensors, the running max and running sum of exp(x − m) "
            "of R rows; block is (R, b), the rows' next scores. Return torch.stack((m_new, l_new)), shape (2, R). "
            "A row that has seen nothing yet has m = -inf and l = 0."
        ),
        reference=online_softmax_update_stacked,
        cases=(
            # First, so that a function that returns the right numbers in the wrong container (a tuple,
            # a list) hears about the container, not about a rescaling this case does not need.
            Case(
                "block that raises nothing",
                lambda: _state([5.0], [2.0], [[1.0, 2.0]]),
                "Return one tensor, torch.stack((m_new, l_new)), of shape (2, R). Here the block is below the "
                "current max: m stays as it is and l only gains exp(block − m).",
            ),
            Case(
                "block raises the max",
                lambda: _state([1.0], [1.0], [[3.0, 0.0]]),
                "When the block holds a larger score, m rises and the old l must be rescaled by exp(m_old − m_new).",
            ),
            Case(
                "row that starts at -inf",
                lambda: _state([-INF], [0.0], [[0.5, 1.5]]),
                "A fresh row (m = -inf, l = 0) takes the block's max and the block's own sum.",
            ),
            Case(
                "still nothing to read",
                lambda: _state([-INF, 0.0], [0.0, 1.0], [[-INF, -INF], [-INF, -INF]]),
                "A fully masked block on a fresh row leaves m = -inf and l = 0: -inf − (-inf) is NaN, so shift "
                "such rows by 0 instead (exp(-inf) = 0).",
            ),
            Case(
                "large scores",
                lambda: _state([1000.0], [1.0], [[1001.0, 999.0]]),
                "exp(1001) overflows: take every exponential relative to the (new) max.",
            ),
            Case(
                "several rows",
                lambda: _state([0.0, 3.0, -1.0], [1.0, 2.5, 0.5], [[2.0, -1.0], [1.0, 0.0], [-1.0, -1.0]]),
                "Work row by row: the max over the last axis, with one m and one l per row.",
            ),
        ),
        # The unguarded update comes first: on the all -inf case every update without the guard
        # gives NaN, and only this one is otherwise right.
        wrong_answers=(
            WrongAnswer(
                _unguarded,
                "The update is right until a row has seen only -inf: then m_new = -inf and exp(-inf − (-inf)) is "
                "NaN. Shift such rows by 0 instead.",
            ),
            WrongAnswer(
                _no_rescale,
                "You added the block without rescaling the old l: multiply it by exp(m_old − m_new) first.",
            ),
            WrongAnswer(
                _inverted_rescale, "The rescale factor is exp(m_old − m_new), at most 1; yours is its inverse."
            ),
            WrongAnswer(_tile_alone, _EACH_TILE),
            WrongAnswer(_tile_normalised, _EACH_TILE),
            WrongAnswer(
                _unshifted,
                "You summed exp(block) without subtracting the max: l is the sum of exp(x − m), and without the "
                "shift large scores overflow.",
            ),
        ),
        explanation=(
            "m_new = max(m, max(block)); l_new = l·exp(m − m_new) + Σ exp(block − m_new), guarding m_new = -inf."
        ),
        hints=("m_new = torch.maximum(m, block.amax(dim=-1)); torch.nan_to_num(m_new, neginf=0.0) is a safe shift.",),
        stands_for=("lib.online_softmax.online_softmax_update",),
        forbids=(
            "lib.online_softmax.online_softmax",
            "lib.online_softmax.online_softmax_steps",
            "lib.attention.softmax",
        ),
        draw=_draw_state,
    ),
)

EXERCISES = CHAPTER_5 + CHAPTER_5_FUNCTIONS
