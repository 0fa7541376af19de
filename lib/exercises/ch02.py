"""Chapter 2's check-yourself exercises: batches, heads and cross-attention.

Value exercises are plain data; each number is written as the arithmetic that produces it.
Function exercises name a reference in lib and hidden cases that catch the section's
traps: a transposed head axis, a flipped mask polarity, top-left causal alignment.
``tests/test_exercises.py`` proves each accepts its reference and names each mistake.
"""

from __future__ import annotations

import math

import torch

from lib.attention import MultiHeadAttention, causal_mask, padding_mask
from lib.drawn_cases import integer, normal, sizes
from lib.exercises.base import Case, FunctionExercise, ValueExercise, WrongAnswer
from lib.variants import Param


def _softmax(scores: list[float]) -> list[float]:
    exps = [math.exp(s) for s in scores]
    return [e / sum(exps) for e in exps]


# --- 2.mask-after-softmax: scores [2, 1, 2.5], key 3 disallowed, scalar values [v1, v2, v3] (the book:
# [1, 3, 8]). The values keep every known mistake's read away from the answer and from each other at 2 decimals.
_SCORES = [2.0, 1.0, 2.5]
_MASKED = _softmax(_SCORES[:2])  # softmax over the two allowed keys
_ALL = _softmax(_SCORES)  # softmax over all three


def _score_shape(b: int, n: int, m: int) -> ValueExercise:
    """2.score-shape with batch b, n target tokens and m source tokens (d = 96, h = 12)."""
    return ValueExercise(
        id="2.score-shape",
        question=(
            f"A decoder of width d = 96 with h = 12 heads cross-attends from N = {n} target tokens to "
            f"M = {m} source tokens, batch B = {b}. What is the shape of the score tensor? Answer as a list "
            "of four sizes."
        ),
        expected=[b, 12, n, m],
        explanation="Scores are B × h × N × M: one row per query and head, one column per key.",
        hints=("Each head scores every query against every key; queries come first.",),
        wrong_answers=(
            WrongAnswer(
                [b, 12, m, n],
                f"Rows and columns are swapped: the scores are Q Kᵀ, so queries (N = {n}) index the rows "
                f"and keys (M = {m}) the columns.",
            ),
            WrongAnswer(
                [b, 12, n, n],
                f"That is self-attention's shape. In cross-attention the keys come from the source, M = {m}.",
            ),
            WrongAnswer(
                [b, 12, n, 8],
                "That is the per-head output (B × h × N × d_v, with d_v = 96/12 = 8). The scores have one "
                "column per key.",
            ),
            WrongAnswer(
                [b, n, 12, m],
                "The head axis comes before the token axis: (B, h, N, M), after the transpose that makes "
                "each head a batch of its own.",
            ),
        ),
        whole=True,
        params=(Param("b", 4, (2, 3, 4, 5)), Param("n", 10, (7, 9, 10, 14)), Param("m", 6, (5, 6, 11, 13))),
        make=_score_shape,
    )


def _gqa_kv_params(d: int, h: int, h_kv: int) -> ValueExercise:
    """2.gqa-kv-params with width d, h query heads and h_kv KV heads (the book: 768, 12, 4)."""
    d_k = d // h
    kv_params = 2 * d * h_kv * d_k  # k_proj and v_proj: d × (h_kv · d_k) each
    full_kv = 2 * d * d  # ordinary multi-head attention
    return ValueExercise(
        id="2.gqa-kv-params",
        question=(
            f"A layer has d = {d}, h = {h} query heads and grouped-query attention with {h_kv} KV heads, "
            "no biases, d_k = d_v = d/h. How many parameters do k_proj and v_proj hold together?"
        ),
        expected=float(kv_params),
        explanation=(
            f"Each projection maps d = {d} to n_kv_heads · d_k = {h_kv} · {d_k} = {h_kv * d_k} features: "
            f"2 · {d} · {h_kv * d_k} = {kv_params}, 1/{h // h_kv} of ordinary multi-head attention's {full_kv}."
        ),
        hints=("Each KV projection is a d × (n_kv_heads · d_k) matrix.",),
        wrong_answers=(
            WrongAnswer(float(full_kv), f"That is ordinary multi-head attention, with {h} KV heads."),
            WrongAnswer(float(kv_params // 2), "That is one projection; count k_proj and v_proj."),
            WrongAnswer(float(2 * d * d_k), "That is multi-query attention, with a single KV head."),
            WrongAnswer(
                float(full_kv // h_kv),
                f"The projections shrink by n_heads / n_kv_heads = {h // h_kv}, not by n_kv_heads.",
            ),
        ),
        whole=True,
        # h_kv of 3, 4 or 6 keeps every mistake apart (with 2 KV heads one projection is MQA's count).
        params=(Param("d", 768, (768, 960, 1152)), Param("h", 12, (12, 24)), Param("h_kv", 4, (3, 4, 6))),
        make=_gqa_kv_params,
    )


def _concat_width(h: int, d_k: int, d_v: int) -> ValueExercise:
    """2.concat-width with h heads, d_k and d_v (d = 64; the book: 4, 12, 24)."""
    return ValueExercise(
        id="2.concat-width",
        question=(
            f"A layer with d = 64 and h = {h} heads uses d_k = {d_k} but d_v = {d_v}. How wide is the "
            "concatenation of the head outputs that W_O receives?"
        ),
        expected=float(h * d_v),
        explanation=(
            f"Each head returns d_v = {d_v} features; {h} heads concatenate to h · d_v = {h * d_v}, and W_O maps "
            f"{h * d_v} → 64."
        ),
        hints=("The outputs are weighted values: their width is d_v, not d_k.",),
        wrong_answers=(
            WrongAnswer(
                64.0,
                "That is d, the width W_O maps back to. Its input is the concatenation of the heads: "
                "h · d_v, which need not equal d.",
            ),
            WrongAnswer(
                float(h * d_k),
                "That is h · d_k, the width of the concatenated queries or keys. The heads output weighted "
                "values, so the concatenation is h · d_v.",
            ),
            WrongAnswer(float(d_v), "That is one head's output; W_O reads all heads concatenated."),
            WrongAnswer(
                float(d_k), "That is d_k, the width of one head's queries and keys. Outputs are weighted values."
            ),
        ),
        whole=True,
        params=(Param("h", 4, (3, 4, 6)), Param("d_k", 12, (10, 12)), Param("d_v", 24, (20, 24, 28))),
        make=_concat_width,
    )


def _mask_after_softmax(v1: int, v2: int, v3: int) -> ValueExercise:
    """2.mask-after-softmax with the values [v1, v2, v3] (the book: 1, 3, 8); the scores stay [2, 1, 2.5]."""
    values = [float(v1), float(v2), float(v3)]
    read = _MASKED[0] * v1 + _MASKED[1] * v2
    return ValueExercise(
        id="2.mask-after-softmax",
        question=(
            "One query has scaled scores [2, 1, 2.5] over three keys whose values are the numbers "
            f"[{v1}, {v2}, {v3}], and the mask forbids the third key. What does the query read? Give it to 2 "
            "decimal places."
        ),
        expected=read,
        explanation=(
            f"Set the third score to -inf before the softmax: the weights are softmax([2, 1]) ≈ "
            f"[{_MASKED[0]:.4f}, {_MASKED[1]:.4f}], and the read is ≈ {read:.4f}."
        ),
        hints=("Mask before the softmax, so the forbidden key is not in the denominator.",),
        wrong_answers=(
            WrongAnswer(
                _ALL[0] * v1 + _ALL[1] * v2,  # weight of key 3 zeroed, no renormalizing
                "You zeroed the third weight after the softmax without renormalizing: the forbidden score "
                "still sat in the denominator, so the two remaining weights sum to less than 1.",
            ),
            WrongAnswer(
                sum(w * v for w, v in zip(_ALL, values, strict=True)),
                f"That ignores the mask: the third key (value {v3}) was read.",
            ),
            WrongAnswer(
                sum(w * v for w, v in zip(_softmax([2.0, 1.0, 0.0]), values, strict=True)),
                "You set the forbidden score to 0. A score of 0 still gets weight exp(0); it must be -inf.",
            ),
            WrongAnswer(
                values[2],
                "The mask polarity is flipped: you read only the forbidden key. True/allowed means 'may read'.",
            ),
            WrongAnswer(
                values[0],
                "That is the value of the best allowed key. Attention does not pick a winner: the two allowed "
                "keys share the weight, softmax([2, 1]).",
            ),
            WrongAnswer(
                (values[0] + values[1]) / 2,
                "That is the plain average of the allowed values: the mask is right, but the scores still weigh "
                "what is read. Take softmax([2, 1]) and mix the values with it.",
            ),
        ),
        decimals=2,
        # every mistake's read at least 0.03 from the answer and from each other, on every choice
        params=(Param("v1", 1, (1, 2, 4)), Param("v2", 3, (3, 5, 7)), Param("v3", 8, (8, 10, 12))),
        make=_mask_after_softmax,
    )


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


def _row(reads: int, length: int) -> list[int]:
    """A 0/1 row of ``length`` keys that reads keys 0..reads-1."""
    return [int(j < reads) for j in range(length)]


def _cache_causal_row(m: int, n: int, query: str) -> ValueExercise:
    """2.cache-causal-row: a cache of ``m`` keys, the ``n`` newest new, and the ``query`` new query ("second"
    or "next-to-last"; the book: 7, 3, "second"). The query is never the first or the last new one (the
    first's off-by-one row would be the cache alone, the last's row everything), and m - n ≥ 3 keeps the
    top-left row apart from the off-by-one one. Where the top-left row is the cache alone (i + 1 = m - n),
    one answer carries both mistakes, and its feedback names both."""
    i = 1 if query == "second" else n - 2
    p = m - n + i  # the query's absolute position: aligned bottom-right
    answer = _row(p + 1, m)
    before = _ORDINALS[i - 1]
    top_left = (
        "That is top-left alignment (query i reads keys 0..i), what torch's SDPA is_causal does when N ≠ M. "
        "The new queries are the last N positions: align bottom-right."
    )
    cached_only = (
        f"You let the query read only the cached keys. The cache holds the {n} new tokens' keys too, and a "
        "causal query reads every key up to its own position, itself included."
    )
    if i + 1 == m - n:
        named = [WrongAnswer(_row(i + 1, m), f"{top_left} (Or {cached_only[0].lower()}{cached_only[1:]})")]
    else:
        named = [WrongAnswer(_row(i + 1, m), top_left)]
    last_note = (
        "That is the last new query's row (or you" if i + 1 == n - 1 else "That is the next new query's row (you"
    )
    named += [
        WrongAnswer(
            [1 - r for r in answer],
            "The polarity is flipped: 1 marks the keys the query MAY read (SDPA's and our convention).",
        ),
        WrongAnswer(
            _row(p + 2, m),
            f"{last_note} counted the new queries from 1: {m} - {n} + {i + 1} = {p + 1}). Counting from 0, the "
            f"{query} new query is i = {i}, at position {p}, and may not read key {p + 1}.",
        ),
        WrongAnswer(
            _row(p, m),
            f"Off by one: that is the {before} new query's row, position {p - 1}. The {query} new query is i = {i}, "
            f"at position M - N + i = {p}, and reads itself too.",
        ),
        WrongAnswer(
            [int(m - n <= j <= p) for j in range(m)],
            "You let the query read only the new tokens. The cached keys are the past of every new "
            "token: a causal query reads the whole cache before it, then the new tokens up to itself.",
        ),
    ]
    if i + 1 != m - n:
        named.append(WrongAnswer(_row(m - n, m), cached_only))
    named.append(
        WrongAnswer(
            [int(j == p) for j in range(m)],
            "A causal query reads every key up to and including its own position, not only its own key.",
        )
    )
    return ValueExercise(
        id="2.cache-causal-row",
        question=(
            f"A KV cache holds M = {m} keys (the {n} newest tokens included), and the queries of those N = {n} "
            f"new tokens attend causally. Which keys may the {query} new query read? Answer with a 0/1 "
            f"list of length {m}."
        ),
        expected=answer,
        explanation=(
            f"Aligned bottom-right, the new query i sits at absolute position M - N + i = {m} - {n} + {i} = {p} and "
            f"reads keys 0..{p}."
        ),
        hints=("The last new query is the last token and reads everything; count back from there.",),
        wrong_answers=tuple(named),
        whole=True,
        params=(Param("m", 7, (7, 9, 12)), Param("n", 3, (3, 4)), Param("query", "second", ("second", "next-to-last"))),
        make=_cache_causal_row,
    )


def _keys(reads: list[int]) -> str:
    """The keys a 0/1 row reads, in words: [1, 1, 1] -> 'keys 0, 1 and 2', [1, 0] -> 'key 0'."""
    read = [str(j) for j, r in enumerate(reads) if r]
    return f"key {read[0]}" if len(read) == 1 else "keys " + ", ".join(read[:-1]) + f" and {read[-1]}"


def _causal_alignment(n: int, m: int, query: str) -> ValueExercise:
    """2.causal-alignment: ``n`` queries against ``m`` > ``n`` keys, asking about the ``query`` one ("first" or
    "last"; the book: 1, 3, "first", the lone query). The book aligns bottom-right, SDPA top-left."""
    i = 0 if query == "first" else n - 1
    p = m - n + i  # the query's position under the book's bottom-right alignment
    book, sdpa = _row(p + 1, m), _row(i + 1, m)
    who = "the lone query" if n == 1 else f"the {query} query"
    who_sdpa = f"its query {i}"
    book_reads = "all three keys" if m == 3 and p == 2 else "every key" if p == m - 1 else _keys(book)
    return ValueExercise(
        id="2.causal-alignment",
        question=(
            f"Causal attention runs N queries against M keys, with N = {n} and M = {m}. Which keys may the "
            f"{query} query read, as 1 (may read) or 0 (may not) per key, under the book's is_causal=True and "
            "under torch's scaled_dot_product_attention(is_causal=True)? Answer [[book], [SDPA]]."
        ),
        expected=[[float(r) for r in book], [float(r) for r in sdpa]],
        explanation=(
            f"The book aligns bottom-right: {who} is query {i}, at position M - N + {i} = {p}, and reads "
            f"{_keys(book)}. SDPA aligns top-left: {who_sdpa} sits at position {i} and reads {_keys(sdpa)} only."
            if n > 1
            else f"The book aligns bottom-right: the lone query is the newest token, at position M - N = {p}, and "
            f"reads keys {', '.join(map(str, range(m)))}. SDPA aligns top-left: its query 0 sits at position 0 "
            "and reads key 0 only."
        ),
        hints=(f"Where does each convention put query {i}: at position M - N + {i}, or at position {i}?",),
        wrong_answers=(
            WrongAnswer(
                [sdpa, book],
                "You swapped the two conventions: the book aligns bottom-right "
                + (
                    "(the query is the last position), SDPA top-left (the query is position 0)."
                    if n == 1
                    else "(the queries are the last N positions), SDPA top-left (they are positions 0, 1, ...)."
                ),
            ),
            WrongAnswer(
                [book, book],
                f"The book's answer is right, but SDPA aligns top-left when N ≠ M: {who_sdpa} sits at "
                f"position {i} and may read {_keys(sdpa)} only.",
            ),
            WrongAnswer(
                [sdpa, sdpa],
                f"SDPA's answer is right, but the book aligns bottom-right: {who} is "
                + ("the newest token, " if n == 1 else "")
                + f"at position M - N{'' if n == 1 else f' + {i}'} = {p}, so it reads {book_reads}.",
            ),
            WrongAnswer(
                [[1 - r for r in book], [1 - r for r in sdpa]],
                "The polarity is flipped: you marked the keys the query may NOT read. Here, as in SDPA's "
                "boolean masks, 1 (True) means 'may read'.",
            ),
            WrongAnswer(
                [[int(j == p) for j in range(m)], sdpa],
                "A causal query reads every key up to and including its own position, not only its own: "
                f"at position {p} that is {_keys(book)}.",
            ),
        ),
        whole=True,
        # m > n keeps the two conventions apart
        params=(Param("n", 1, (1, 2)), Param("m", 3, (3, 5, 6)), Param("query", "first", ("first", "last"))),
        make=_causal_alignment,
    )


CHAPTER_2 = (
    _score_shape(4, 10, 6),
    _mask_after_softmax(1, 3, 8),
    _cache_causal_row(7, 3, "second"),
    _causal_alignment(1, 3, "first"),
    _gqa_kv_params(768, 12, 4),
    _concat_width(4, 12, 24),
)


# --- function exercises -----------------------------------------------------------------


def causal_padding_mask(lengths: torch.Tensor, n_queries: int, n_keys: int) -> torch.Tensor:
    """Reference: (B, 1, N, M) True where query i may read key j: j < lengths[b] and j <= M - N + i."""
    return padding_mask(lengths, n_keys) & causal_mask(n_queries, n_keys)  # (B, 1, N, M)


def _causal_padding_reference(lengths, n_queries, n_keys):
    # The grader compares numbers: as 0./1. the learner's bool mask converts to match.
    return causal_padding_mask(lengths, n_queries, n_keys).float()  # (B, 1, N, M)


def _top_left(lengths, n_queries, n_keys):
    tril = torch.ones(n_queries, n_keys, dtype=torch.bool).tril()  # (N, M), query i reads 0..i
    return padding_mask(lengths, n_keys) & tril


def _strictly_past(lengths, n_queries, n_keys):
    """Causal with j < M - N + i: a query that may not read its own position."""
    strict = torch.ones(n_queries, n_keys, dtype=torch.bool).tril(n_keys - n_queries - 1)  # (N, M)
    return padding_mask(lengths, n_keys) & strict


def _padding_on_queries(lengths, n_queries, n_keys):
    rows = torch.arange(n_queries)[None, :] < torch.as_tensor(lengths)[:, None]  # (B, N)
    return rows[:, None, :, None] & causal_mask(n_queries, n_keys)  # (B, 1, N, M)


def _merge_without_transpose(x):
    batch, heads, tokens, width = x.shape
    return x.reshape(batch, tokens, heads * width)


def _merge_swapped_tokens_and_features(x):
    batch, heads, tokens, width = x.shape
    return x.transpose(2, 3).reshape(batch, tokens, heads * width)


def _merge_interleaved(x):
    batch, heads, tokens, width = x.shape
    return x.permute(0, 2, 3, 1).reshape(batch, tokens, heads * width)


MASK_BUILDERS = (  # what builds a causal (or banded) mask, the library's or torch's
    "lib.masks.sliding_window_mask", "lib.masks.mask_from_torch", "lib.tiling.Tiling.band", "lib.costs.pattern_mask",
    "torch.nn.attention.bias.causal_lower_right", "torch.nn.attention.bias.causal_upper_left",
    "torch.nn.attention.bias.CausalBias", "torch.nn.attention.bias.CausalBias._materialize",
)  # fmt: skip


def _draw_heads(generator: torch.Generator) -> tuple[torch.Tensor]:
    """(B, h, N, d_v) per-head outputs of any sizes."""
    return (normal(generator, sizes(generator, 4, 1, 4)),)


def _draw_lengths(generator: torch.Generator) -> tuple[torch.Tensor, int, int]:
    """A batch of lengths 0..M, and N <= M queries aligned to the last of M keys: small and large
    M alike, so no table of the inputs can be written down."""
    n_keys = integer(generator, 1, 7) if integer(generator, 0, 1) else integer(generator, 8, 300)
    lengths = torch.randint(0, n_keys + 1, (integer(generator, 1, 4),), generator=generator)
    return lengths, integer(generator, 1, n_keys), n_keys


def _heads(*shape: int) -> tuple[torch.Tensor]:
    return (torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape).sin(),)  # (B, h, N, D)


CHAPTER_2_FUNCTIONS = (
    FunctionExercise(
        id="2.merge-heads",
        question=(
            "Write merge_heads(x) that turns per-head outputs x of shape (B, h, N, d_v) into the "
            "concatenation (B, N, h·d_v): for each token, head 0's features, then head 1's, ..."
        ),
        reference=MultiHeadAttention.merge_heads,
        cases=(
            Case("one head", lambda: _heads(1, 1, 3, 2), "Return shape (B, N, h·d_v)."),
            Case(
                "two heads",
                lambda: _heads(1, 2, 3, 2),
                "Token n's row must hold x[:, 0, n], then x[:, 1, n], ...: move the head axis next to the "
                "feature axis (transpose(1, 2)) before reshaping. The transposed tensor is not contiguous, "
                "so .view() refuses it: use .reshape().",
            ),
            Case("a batch", lambda: _heads(2, 3, 4, 2), "Keep the batch axis first and untouched."),
            Case(
                "more heads than tokens",
                lambda: _heads(2, 5, 2, 3),
                "Read the sizes from x.shape; do not assume h, N or d_v.",
            ),
        ),
        wrong_answers=(
            WrongAnswer(
                _merge_swapped_tokens_and_features,
                "You transposed the token and feature axes (2 and 3): the shape fits, but each row now holds "
                "features of several tokens. The axis to move is the head axis, 1, next to the features: "
                "transpose(1, 2), then reshape.",
            ),
            WrongAnswer(
                _merge_without_transpose,
                "You reshaped (B, h, N, d_v) straight to (B, N, h·d_v): the head axis was never moved, so "
                "each new row mixes features of different tokens. transpose(1, 2) first, then reshape.",
            ),
            WrongAnswer(
                _merge_interleaved,
                "Your heads are interleaved feature by feature. Concatenation keeps each head's d_v "
                "features together: (B, N, h, d_v) -> (B, N, h·d_v).",
            ),
        ),
        explanation="x.transpose(1, 2) gives (B, N, h, d_v); reshape(B, N, h·d_v) then lays the heads side by side.",
        hints=("Which axis must sit next to d_v before the last two axes are flattened together?",),
        stands_for=("lib.attention.MultiHeadAttention.merge_heads",),
        forbids=("lib.attention.MultiHeadAttention", "torch.nn.MultiheadAttention"),
        draw=_draw_heads,
    ),
    FunctionExercise(
        id="2.causal-padding-mask",
        question=(
            "Write causal_padding_mask(lengths, n_queries, n_keys) returning a boolean (B, 1, N, M) mask, "
            "True where query i of sequence b may read key j: j is not padding (j < lengths[b]) and j is "
            "not in the future, with the queries aligned to the last N of the M key positions."
        ),
        reference=_causal_padding_reference,
        cases=(
            Case(
                "square, no padding",
                lambda: (torch.tensor([4]), 4, 4),
                "With nothing padded this is the causal lower triangle; True means 'may read'.",
            ),
            Case(
                "padding",
                lambda: (torch.tensor([4, 2]), 4, 4),
                "Padding removes keys (columns), whatever the query: key j of sequence b is readable only "
                "if j < lengths[b].",
            ),
            Case(
                "fewer queries than keys",
                lambda: (torch.tensor([6, 5]), 2, 6),
                "Query i sits at position M - N + i (bottom-right); the last query reads every real key.",
            ),
            Case(
                "one token",
                lambda: (torch.tensor([1, 0]), 1, 1),
                "A sequence of length 0 has no key at all: its row is all False.",
            ),
        ),
        wrong_answers=(
            WrongAnswer(
                lambda lengths, n, m: ~causal_padding_mask(lengths, n, m),
                "The polarity is flipped: True must mean 'may read' (SDPA's and our convention). "
                "nn.MultiheadAttention reads True as 'blocked'; that is the other convention.",
            ),
            WrongAnswer(
                lambda lengths, n, m: padding_mask(lengths, m) | causal_mask(n, m),
                "You combined with | (or): a key must be both real AND not in the future: use &.",
            ),
            WrongAnswer(
                _padding_on_queries,
                "You applied the padding along the query axis: padding removes keys, so the lengths "
                "compare with the last (key) axis.",
            ),
            WrongAnswer(
                _strictly_past,
                "Each query lost its own key: a causal query reads the past and itself, keys j ≤ M - N + i. "
                "With a strict < the first query of a sequence reads nothing at all.",
            ),
            WrongAnswer(
                _top_left,
                "That is top-left alignment (query i reads keys 0..i). With N < M the queries are the last "
                "N positions: query i reads keys 0..M - N + i.",
            ),
        ),
        explanation="padding_mask(lengths, M) (B, 1, 1, M) & causal_mask(N, M) (N, M) broadcast to (B, 1, N, M).",
        hints=("Build the key-padding part and the causal part separately, then combine them with &.",),
        atol=0.0,
        rtol=0.0,
        stands_for=("lib.attention.padding_mask", "lib.attention.causal_mask"),
        forbids=MASK_BUILDERS,
        draw=_draw_lengths,
    ),
)

EXERCISES = CHAPTER_2 + CHAPTER_2_FUNCTIONS
