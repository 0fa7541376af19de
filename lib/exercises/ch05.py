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


def _total_doubling(d: int, n: int) -> ValueExercise:
    """5.total-doubling: width d, f = 4d, N going from n to 2n (the book: 2048, 6144, N = 3d).

    No choice gives N/d = 2, 4 or 8, the ratios the chapter prints (its x2.50, x2.80, x3.14 do not
    answer this), nor N = 6d (the total x3, the averaged mistake) or N = 12d (where forgetting AV gives
    x3): each mistake below gives its own factor."""
    small, large = layer_flops(n, d), layer_flops(2 * n, d)
    factor = large.total / small.total
    share = small.pairwise / small.total
    no_ffn = layer_flops(2 * n, d, ffn_width=0).total / layer_flops(n, d, ffn_width=0).total

    def scores_only_total(tokens: int) -> int:
        """The layer's FLOPs with AV forgotten: QKᵀ, the projections and the FFN only."""
        flops = layer_flops(tokens, d)
        return flops.scores + flops.linear

    no_av = scores_only_total(2 * n) / scores_only_total(n)
    return ValueExercise(
        id="5.total-doubling",
        question=(
            f"A layer has d = {d}, an FFN of width 4d, and dense attention. N goes from {n} to {2 * n}. "
            "By what factor do its modeled FLOPs (QKᵀ, AV, four projections, FFN) grow?"
            " Give it to 2 decimal places."
        ),
        expected=factor,
        explanation=(
            f"At N = {n} the pairwise terms (4N²d) are {share:.0%} of the total and the linear ones (24Nd²) "
            f"{1 - share:.0%}: their ratio is 4N : 24d = N : 6d. Doubling N multiplies the first by 4 and the "
            f"second by 2: {share:.3f}·4 + {1 - share:.3f}·2 = {factor:.2f}. The total need not quadruple."
        ),
        hints=(f"Split the FLOPs into the N²d terms and the Nd² terms; compare their sizes at N = {n} first.",),
        wrong_answers=(
            WrongAnswer(4.0, "Only the pairwise terms quadruple; projections and the FFN just double."),
            WrongAnswer(2.0, "The attention scores and AV grow with N², so they quadruple: the total grows by more."),
            WrongAnswer(3.0, f"You averaged 4 and 2; weight each by its share of the FLOPs at N = {n}."),
            WrongAnswer(
                no_ffn,
                "You left out the FFN (16Nd²): it is the largest term that grows only linearly in N.",
            ),
            WrongAnswer(
                no_av,
                "You counted QKᵀ but not AV: the weighted sum of values is a second 2N²d product.",
            ),
        ),
        decimals=2,
        params=(Param("d", 2048, (2048, 2560, 4096)), Param("n", 6144, (6144, 14336, 18432))),
        make=_total_doubling,
    )


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _exp_term(power: float) -> str:
    """e to a whole power, as the explanations write it: -2 -> 'e⁻²'."""
    return "e" + str(round(power)).translate(_SUPERSCRIPT)


def _shown_list(values: tuple[float, ...]) -> str:
    """A tuple of scores as the questions write it: (1.0, 4.0) -> '[1.0, 4.0]'."""
    return str(list(values))


def _shown_number(x: float) -> str:
    return f"{x:g}"


def _raised_max(m: float, l: float, block: tuple[float, ...]) -> ValueExercise:
    """5.raised-max: state (m, l), next block of whole scores whose max is above m (the book: 2, 1.5, [1, 4])."""
    m_new = max(m, *block)
    block_sum = sum(math.exp(x - m_new) for x in block)
    l_new = l * math.exp(m - m_new) + block_sum
    terms = " + ".join(_exp_term(x - m_new) for x in block)
    return ValueExercise(
        id="5.raised-max",
        question=(
            f"An online softmax row has m = {m:g} and l = {l:g}. The next block of scores is "
            f"{list(block)}. What are [m, l] after the block?"
            " Give each number to 3 decimal places."
        ),
        expected=[m_new, l_new],
        explanation=(
            f"The block raises the max to {m_new:g}. The old sum was taken against exp(x - {m:g}), so it is "
            f"rescaled by exp({m:g} - {m_new:g}): {l:g}·{_exp_term(m - m_new)} + {terms} ≈ {l_new:.4f}."
        ),
        hints=("New m = max(old m, block max). Multiply the old l by exp(m_old − m_new), then add the block's terms.",),
        wrong_answers=(
            WrongAnswer(
                [m_new, l + block_sum],
                f"You added the block without rescaling the old sum: it was computed against m = {m:g}, and must be "
                f"multiplied by exp({m:g} − {m_new:g}) before it can be added to terms taken against m = {m_new:g}.",
            ),
            WrongAnswer(
                [m_new, l * math.exp(m_new - m) + block_sum],
                "The rescale factor is upside down: it is exp(m_old − m_new) ≤ 1, which shrinks the old sum.",
            ),
            WrongAnswer(
                [m_new, block_sum],
                "That is the block's sum alone: the state keeps everything seen so far, so add the rescaled old l.",
            ),
            WrongAnswer(
                [m, l + sum(math.exp(x - m) for x in block)],
                f"You kept m = {m:g} although the block holds a {m_new:g}: m is the running maximum and must be "
                "raised.",
            ),
        ),
        decimals=3,
        params=(
            Param("m", 2.0, (1.0, 2.0, 3.0), shown=_shown_number),
            Param("l", 1.5, (1.5, 2.5, 3.0), shown=_shown_number),
            Param("block", (1.0, 4.0), ((1.0, 4.0), (5.0, 0.0), (2.0, 6.0)), shown=_shown_list),
        ),
        make=_raised_max,
    )


def _causal_tiles(n: int, tile: int) -> ValueExercise:
    """5.causal-tiles: N = n in tile × tile tiles (the book: 1024, 64)."""
    blocks = n // tile
    visited = blocks * (blocks + 1) // 2  # query block i visits i unmasked tiles and 1 diagonal
    return ValueExercise(
        id="5.causal-tiles",
        question=(
            f"Causal self-attention with N = {n} runs in {tile}×{tile} tiles ({tile} queries by {tile} keys). "
            "The loop skips every tile wholly in the future. How many tiles does it visit?"
        ),
        expected=visited,
        explanation=(
            f"There are {blocks} query blocks; block i (from 0) visits i tiles below the diagonal and 1 on it: "
            f"1 + 2 + … + {blocks} = {visited}, a little over half of the {blocks**2} dense tiles."
        ),
        hints=("Count the tiles row of tiles by row of tiles: the first query block reads one tile, the next two, …",),
        wrong_answers=(
            WrongAnswer(blocks**2, "That is every tile: the tiles above the diagonal are in the future and skipped."),
            WrongAnswer(blocks**2 // 2, "Exactly half leaves out the diagonal: those tiles are half readable."),
            WrongAnswer(
                blocks * (blocks - 1) // 2,
                "You left out the diagonal tiles. Each query reads its own key, so the diagonal must be visited.",
            ),
            WrongAnswer(causal_pairs(n), f"That counts query-key pairs, not {tile}×{tile} tiles."),
        ),
        whole=True,
        params=(Param("n", 1024, (512, 1024, 2048, 4096)), Param("tile", 64, (32, 64, 128))),
        make=_causal_tiles,
    )


def _global_edges(n: int, w: int, g: int) -> ValueExercise:
    """5.global-edges: n tokens, a band |i - j| < w, the first g tokens global (the book: 16, 3, 2)."""
    band = global_local_pairs(n, w, 0)  # the band alone
    edges = global_local_pairs(n, w, g)
    cross = 2 * g * n - g**2  # pairs in the global rows and columns
    overlap = band + cross - edges  # of those, already in the band
    return ValueExercise(
        id="5.global-edges",
        question=(
            f"A sparse pattern on N = {n} tokens: every query reads the keys with |i − j| < {w} (a two-sided "
            f"band), and the first {g} tokens are global: they read every key and every query reads them. "
            "How many query-key pairs are allowed?"
        ),
        expected=edges,
        explanation=(
            f"The band alone has {band} pairs. The global rows and columns hold 2·g·N − g² = {cross} "
            f"pairs, {overlap} of which are already in the band: {band} + {cross} − {overlap} = "
            f"{edges}. Sparse patterns cost what their actual edges cost, plus the kernel's overhead."
        ),
        hints=("Count the band, then the global rows and columns, then subtract every pair you counted twice.",),
        wrong_answers=(
            WrongAnswer(band, "That is the band alone: the global tokens' rows and columns add pairs."),
            WrongAnswer(
                band + 2 * g * n - g**2,
                "You counted the pairs where the band and the global rows/columns overlap twice.",
            ),
            WrongAnswer(
                band + 2 * g * n,
                "You counted the global block (global to global) and the band's overlap twice.",
            ),
            WrongAnswer(n * n, "That is dense attention."),
        ),
        whole=True,
        params=(Param("n", 16, (16, 20, 24)), Param("w", 3, (2, 3, 4)), Param("g", 2, (2, 3, 4))),
        make=_global_edges,
    )


_AVALUES = ((1.0, 0.0), (0.0, 2.0))  # the tile's values, the same in every variant


def _accumulator(m: float, l: float, acc: tuple[float, ...], scores: tuple[float, ...]) -> ValueExercise:
    """5.accumulator: the row's state (m, l, acc) and the next tile's scores on fixed values, a tile whose
    max is above m (the book: 1, 2, [3, -1], [2, 0])."""
    m_new = max(m, *scores)

    def update(*, rescale: bool = True, inverted: bool = False, shift: float = m_new) -> list[float]:
        """acc after the tile; the keywords reproduce the known mistakes."""
        factor = math.exp(m_new - m) if inverted else math.exp(m - m_new) if rescale else 1.0
        return [
            acc[i] * factor + sum(math.exp(s - shift) * v[i] for s, v in zip(scores, _AVALUES, strict=True))
            for i in range(2)
        ]

    acc_new = update()
    l_new = l * math.exp(m - m_new) + sum(math.exp(s - m_new) for s in scores)
    return ValueExercise(
        id="5.accumulator",
        question=(
            f"One query row of tiled attention holds m = {m:g}, l = {l:g} and the value accumulator "
            f"acc = {list(acc)} (the sum of exp(s − m)·v so far, not yet divided by l). The next tile has "
            f"scores {list(scores)} for the values {[list(v) for v in _AVALUES]}. What is acc after the tile? "
            "Give each number to 3 decimal places."
        ),
        expected=acc_new,
        explanation=(
            f"The tile raises m to {m_new:g}, so the old acc, taken against m = {m:g}, is rescaled by "
            f"exp({m:g} − {m_new:g}) = {math.exp(m - m_new):.4f} before the tile's terms "
            f"exp(s − {m_new:g})·v "
            f"are added: {[round(x, 4) for x in acc_new]}. l gets the same rescale, and the output, acc / l, "
            "is divided only once, after the last tile."
        ),
        hints=("m_new = max(m, max(scores)); acc_new = acc·exp(m − m_new) + Σ exp(s_j − m_new)·v_j.",),
        wrong_answers=(
            WrongAnswer(
                update(rescale=False), "You added the tile without rescaling acc: multiply it by exp(m − m_new)."
            ),
            WrongAnswer(
                update(inverted=True),
                "The rescale factor is exp(m_old − m_new), at most 1; you multiplied by its inverse.",
            ),
            WrongAnswer(
                update(shift=m),
                "You took the tile's exponentials against the old m; every term of acc must use the new one, "
                "and the old acc must be rescaled to it.",
            ),
            WrongAnswer(
                [x / l_new for x in acc_new],
                "That is acc / l, the output after this tile. acc itself stays unnormalized until the last tile.",
            ),
        ),
        decimals=3,
        params=(
            Param("m", 1.0, (0.0, 1.0, 1.5), shown=_shown_number),
            Param("l", 2.0, (1.5, 2.0, 3.0), shown=_shown_number),
            Param("acc", (3.0, -1.0), ((3.0, -1.0), (2.0, 1.0), (-1.0, 4.0)), shown=_shown_list),
            Param("scores", (2.0, 0.0), ((2.0, 0.0), (0.0, 3.0), (2.5, 1.0)), shown=_shown_list),
        ),
        make=_accumulator,
    )


CHAPTER_5 = (
    _score_mib(3, 16, 2048),
    _total_doubling(2048, 6144),
    _raised_max(2.0, 1.5, (1.0, 4.0)),
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
    _causal_tiles(1024, 64),
    _window_edges(12, 4),
    _global_edges(16, 3, 2),
    _accumulator(1.0, 2.0, (3.0, -1.0), (2.0, 0.0)),
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
