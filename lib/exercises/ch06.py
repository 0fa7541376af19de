"""Chapter 6's check-yourself exercises: the KV cache and serving memory.

Each number is written as the arithmetic that produces it (through ``kv_cache_bytes`` and
``blocks_needed`` where they apply), and each wrong answer is the result of one mistake
the chapter warns about, with numbers chosen so that no two mistakes give the same answer.
"""

from __future__ import annotations

import torch

from lib.attention import causal_mask
from lib.drawn_cases import integer
from lib.exercises.base import Case, FunctionExercise, ValueExercise, WrongAnswer
from lib.exercises.ch02 import MASK_BUILDERS
from lib.kv_cache import blocks_needed, kv_cache_bytes
from lib.variants import Param

GiB = 2**30

# 6.kv-bytes: 40 layers, batch 4, 2,048 tokens, 32 query heads sharing 8 KV heads of width 128, 2 bytes.
_CONFIG = dict(layers=40, batch=4, seq_len=2048, head_dim=128, bytes_per_element=2)
_KV_GIB = kv_cache_bytes(kv_heads=8, **_CONFIG) / GiB  # 1.25
_KV_BYTES = kv_cache_bytes(kv_heads=8, **_CONFIG)

# 6.gqa-cache: a 64-query-head model whose full multi-head cache would take 16 GiB.
_MHA_GIB, _QUERY_HEADS, _GQA_KV_HEADS = 16.0, 64, 8

# 6.decode-read: 64 -> 8 KV heads while the context grows from 1,500 to 4,500 tokens.
_CONTEXT_RATIO, _KV_RATIO = 4500 / 1500, _GQA_KV_HEADS / _QUERY_HEADS
_READ_FACTOR = _CONTEXT_RATIO * _KV_RATIO  # 3 · 1/8 = 0.375

# 6.fork-blocks: 10 requests, a shared 192-token system prompt, 50 tokens of their own each, S = 16.
_SYSTEM, _OWN, _REQUESTS, _S = 192, 50, 10, 16
_FORK_BLOCKS = blocks_needed(_SYSTEM, _S) + _REQUESTS * blocks_needed(_OWN, _S)  # 12 + 10·4 = 52

# 6.blocks-needed: three sequences in blocks of 16: two end mid-block (pooling their tails would
# save a block), one exactly.
_LENGTHS = (1000, 1010, 1024)
_BLOCKS_TWO = sum(blocks_needed(n, _S) for n in _LENGTHS)  # 63 + 64 + 64 = 191

# 6.serving-budget: an 80 GiB GPU, 26 GiB of weights, 6 GiB of runtime buffers, 128 KiB of KV per token;
# requests may grow to 4,096 tokens and hold 1,000 on average; blocks of 16 tokens.
_GPU, _WEIGHTS, _BUFFERS, _PER_TOKEN_KIB, _MAX, _MEAN = 80, 26, 6, 128, 4096, 1000


def _fits(kv_gib: float) -> list[int]:
    """[requests reserved at the maximum, requests in a paged cache] that a KV budget holds."""
    slots = int(kv_gib * GiB) // (_PER_TOKEN_KIB * 1024)
    return [slots // _MAX, (slots // _S) // blocks_needed(_MEAN, _S)]


_BUDGET_ANSWER = _fits(_GPU - _WEIGHTS - _BUFFERS)  # [96, 390]

# 6.bandwidth-floor: 13B parameters at 2 bytes, a batch of 8, 0.5 GB of cache each, 3.35 TB/s.
_FLOOR_BW, _FLOOR_BATCH, _FLOOR_CACHE = 3.35e12, 8, 0.5e9
_FLOOR_MS = 1e3 * (13e9 * 2 + _FLOOR_BATCH * _FLOOR_CACHE) / _FLOOR_BW  # 30 GB / 3.35 TB/s ≈ 8.96 ms


def _next_position(prompt: int) -> ValueExercise:
    """6.next-position after a prompt of this many tokens (the book: 37)."""
    return ValueExercise(
        id="6.next-position",
        question=(
            f"Positions count from 0. After a prefill of a {prompt}-token prompt, what position index must RoPE "
            "give the first generated token?"
        ),
        expected=prompt,
        explanation=(
            f"The prompt took positions 0..{prompt - 1}, so the next token is at position {prompt} = len(cache). "
            "The decode step sees one token, but it is not at position 0."
        ),
        hints=("The cache length after prefill is the number of positions already used.",),
        wrong_answers=(
            WrongAnswer(
                0,
                "Position 0 is where a one-token input would start without a cache. The new token continues the "
                "sequence: its position is the cache length.",
            ),
            WrongAnswer(
                prompt - 1, f"{prompt - 1} is the position of the last prompt token; the new one comes after it."
            ),
            WrongAnswer(
                prompt + 1,
                f"Positions count from 0: {prompt} tokens use positions 0..{prompt - 1}, and the next is {prompt}.",
            ),
        ),
        whole=True,
        params=(Param("prompt", 37, (23, 37, 58, 101)),),
        make=_next_position,
    )


def _weights_gb(billions: int) -> ValueExercise:
    """6.weights-gb for a model of this many billion parameters at 2 bytes (the book: 13)."""
    return ValueExercise(
        id="6.weights-gb",
        question=(
            f"Raw weights of a {billions}-billion-parameter model at 2 bytes per parameter: how many GB (10^9 bytes)?"
            " Give it to 1 decimal place."
        ),
        expected=billions * 1e9 * 2 / 1e9,
        explanation=(
            f"{billions}·10^9 × 2 bytes = {2 * billions}·10^9 bytes = {2 * billions} GB. Serving needs more: the KV "
            "cache, runtime buffers, and for quantized formats their scales and other metadata."
        ),
        hints=("Bytes = parameters × bytes per parameter; a GB is 10^9 bytes.",),
        wrong_answers=(
            WrongAnswer(billions * 1e9 * 2 / 2**30, "That is GiB (2^30 bytes); the question asks for decimal GB."),
            WrongAnswer(billions * 1e9 * 4 / 1e9, "4 bytes per parameter is float32; the question says 2 bytes."),
            WrongAnswer(float(billions), "You counted one byte per parameter; there are two."),
        ),
        decimals=1,
        params=(Param("billions", 13, (7, 13, 34, 70)),),
        make=_weights_gb,
    )


EXERCISES = (
    ValueExercise(
        id="6.double-length-and-batch",
        question=(
            "A server doubles both the cache length N and the number of active sequences B. "
            "By what factor does the KV cache grow?"
            " Give it to 1 decimal place."
        ),
        expected=4.0,
        explanation=(
            "KV bytes = 2·L·B·N·h_kv·d_h·s is linear in B and linear in N: 2 × 2 = 4. This is not the "
            "quadratic prefill attention term, nor the roughly linear attention read of each decode step."
        ),
        hints=("Which factors of 2·L·B·N·h_kv·d_h·s change, and is the formula linear or quadratic in each?",),
        wrong_answers=(
            WrongAnswer(2.0, "You doubled only one of the two factors: both B and N appear in the formula, once each."),
            WrongAnswer(
                8.0,
                "You treated the cache as quadratic in N, like the N×N attention scores of prefill. The cache "
                "stores one key and one value per token: it is linear in N (and in B), so 2 × 2 = 4.",
            ),
            WrongAnswer(1.0, "The cache size is not fixed: it grows with every token and every sequence it holds."),
        ),
        decimals=1,
    ),
    ValueExercise(
        id="6.kv-bytes",
        question=(
            "A model has 40 layers and 32 query heads that share 8 KV heads of width 128, stored at 2 bytes. "
            "How many GiB does the KV cache take for a batch of 4 sequences of 2,048 tokens?"
            " Give it to 2 decimal places."
        ),
        expected=_KV_GIB,
        explanation=f"2 · 40 · 4 · 2048 · 8 · 128 · 2 = {_KV_BYTES:,} bytes = {_KV_GIB:g} GiB (2^30 bytes).",
        hints=("KV bytes = 2·L·B·N·h_kv·d_h·s; divide by 2^30 for GiB.",),
        wrong_answers=(
            WrongAnswer(_KV_GIB / 2, "You left out the factor 2: the cache stores keys AND values."),
            WrongAnswer(
                _KV_GIB * 32 / 8,
                "You used the 32 query heads. The cache stores the 8 KV heads; queries are never cached.",
            ),
            WrongAnswer(_KV_GIB * 2, "You used 4 bytes per element (float32); the question stores 2 bytes."),
            WrongAnswer(_KV_BYTES / 1e9, "That is decimal gigabytes (10^9 bytes); a GiB is 2^30 bytes."),
            WrongAnswer(_KV_GIB / 40, "You left out the layers: every layer keeps its own keys and values."),
        ),
        decimals=2,
    ),
    ValueExercise(
        id="6.gqa-cache",
        question=(
            "A model with 64 query heads would need a 16 GiB KV cache with one KV head per query head. "
            "How many GiB does the cache take with grouped-query attention using 8 KV heads "
            "(same layers, width, precision and tokens)?"
            " Give it to 2 decimal places."
        ),
        expected=_MHA_GIB * _GQA_KV_HEADS / _QUERY_HEADS,
        explanation=(
            "The cache is proportional to h_kv: 64 → 8 KV heads divides it by 8, so 16 / 8 = 2 GiB. The saving "
            "is the head-count ratio; quality and kernels are separate questions, and the weights must be "
            "trained (or adapted) for GQA, not just reconfigured."
        ),
        hints=("Only h_kv changes in 2·L·B·N·h_kv·d_h·s.",),
        wrong_answers=(
            WrongAnswer(_MHA_GIB / _QUERY_HEADS, "That is multi-query attention, with a single KV head."),
            WrongAnswer(_MHA_GIB, "Query heads are not cached: the cache shrinks with the number of KV heads."),
            WrongAnswer(
                _MHA_GIB * _QUERY_HEADS / _GQA_KV_HEADS, "The ratio goes the other way: fewer KV heads, less cache."
            ),
            WrongAnswer(_QUERY_HEADS / _GQA_KV_HEADS, "8 is the saving factor; the question asks for the size in GiB."),
        ),
        decimals=2,
    ),
    ValueExercise(
        id="6.blocks-needed",
        question=(
            "A paged cache uses blocks of 16 tokens. It holds three sequences, of 1,000, 1,010 and 1,024 "
            "tokens. How many blocks do they hold together?"
        ),
        expected=_BLOCKS_TWO,
        explanation=(
            "A sequence of n tokens holds ceil(n / 16) blocks: 1000 / 16 = 62.5 rounds up to 63 (the last "
            "block holds 8 tokens), 1010 / 16 = 63.125 to 64 (the last holds 2), and 1024 / 16 = 64 exactly. "
            f"Together 63 + 64 + 64 = {_BLOCKS_TWO}."
        ),
        hints=(
            "Round each sequence up to whole blocks, but add no block where n is a multiple of 16; "
            "no block holds two sequences.",
        ),
        wrong_answers=(
            WrongAnswer(
                sum(n // _S for n in _LENGTHS),
                "You rounded down: the last tokens of the 1,000- and 1,010-token sequences still need a "
                "(partly filled) block each.",
            ),
            WrongAnswer(
                sum(n // _S + 1 for n in _LENGTHS),
                "You used n // 16 + 1, which adds a block even when n is a multiple of 16: 1,024 tokens fill "
                "exactly 64 blocks. Round up instead: ceil(n / 16).",
            ),
            WrongAnswer(
                blocks_needed(sum(_LENGTHS), _S),
                "You pooled the tokens before rounding up: each sequence has its own last block, and two "
                "sequences' partly filled tails cannot share one.",
            ),
            WrongAnswer(sum(_LENGTHS) / _S, "Blocks come whole: a sequence cannot hold part of a block."),
        ),
        whole=True,
    ),
    _next_position(37),
    ValueExercise(
        id="6.decode-read",
        question=(
            "A model with 64 query heads caches one KV head per query head. It is retrained with grouped-query "
            "attention, 8 KV heads (same layers, head width and precision), and meanwhile the conversations it "
            "serves grow from 1,500 to 4,500 tokens of context. With a KV cache, each decode step's attention "
            "reads every cached key and value. By what factor do the bytes one decode step's attention reads "
            "change (new / old)? Give it to 3 decimal places."
        ),
        expected=_READ_FACTOR,
        explanation=(
            "One decode step's query reads every cached token once, so the read is proportional to the context "
            "(× 4500 / 1500 = 3) and, per token, to the number of KV heads (× 8 / 64). Together "
            f"3 × 8 / 64 = {_READ_FACTOR:.3f}: the longer context is more than paid for by the smaller cache. "
            "The cache removes recomputation of the prefix, not the growing read."
        ),
        hints=("The read is 2·L·N·h_kv·d_h·s bytes: which two factors change, and by how much each?",),
        wrong_answers=(
            WrongAnswer(_CONTEXT_RATIO, "That is the context's growth alone; the cache per token shrank too."),
            WrongAnswer(_KV_RATIO, "That is GQA's saving alone; every step also reads the 3 times longer context."),
            WrongAnswer(
                _CONTEXT_RATIO**2 * _KV_RATIO,
                "Quadratic in the context is prefill (all N queries against all N keys). A decode step has one "
                "query per head: its read is linear in N.",
            ),
            WrongAnswer(1 / _READ_FACTOR, "That is old / new; the question asks for new / old."),
            WrongAnswer(_CONTEXT_RATIO / _KV_RATIO, "Fewer KV heads mean less to read, not more: multiply by 8/64."),
            WrongAnswer(
                _CONTEXT_RATIO / _QUERY_HEADS, "That is multi-query attention, one KV head; this model keeps 8."
            ),
            WrongAnswer(1.0, "The cache does not make a step constant-time: the new query still reads every entry."),
        ),
        decimals=3,
    ),
    ValueExercise(
        id="6.fork-blocks",
        question=(
            "Ten separate requests begin with the same 192-token system prompt and add 50 tokens each, in a "
            "paged cache with blocks of 16. Prefix caching keeps the system prompt's full blocks, and every "
            "request reuses them instead of computing its own. How many blocks are in use?"
        ),
        expected=_FORK_BLOCKS,
        explanation=(
            "The prompt fills exactly 12 full blocks, stored once and reused by all ten requests. Each request's "
            "50 tokens need ceil(50/16) = 4 "
            f"blocks of its own: 12 + 10 · 4 = {_FORK_BLOCKS}, instead of 10 · ceil(242/16) = 160 without sharing."
        ),
        hints=("192 = 12 · 16: the prompt fills whole blocks, and prefix caching reuses full blocks.",),
        wrong_answers=(
            WrongAnswer(
                _REQUESTS * blocks_needed(_SYSTEM + _OWN, _S),
                "That is without sharing: each request holding its own copy of the prompt.",
            ),
            WrongAnswer(
                _REQUESTS * blocks_needed(_OWN, _S),
                "The shared prompt's 12 blocks are stored once, but they are stored.",
            ),
            WrongAnswer(
                _SYSTEM / _S + _REQUESTS * _OWN / _S, "Blocks are allocated whole: round each request's 50/16 up."
            ),
            WrongAnswer(
                blocks_needed(_SYSTEM, _S) + _REQUESTS * _OWN // _S,
                "You rounded 10 · 50/16 = 31.25 down: each request's last 2 tokens still need a block.",
            ),
            WrongAnswer(
                blocks_needed(_SYSTEM, _S) + blocks_needed(_REQUESTS * _OWN, _S),
                "You pooled the ten requests' own tokens before rounding up: each request's 50 tokens are its "
                "own sequence, ceil(50/16) = 4 blocks each, and no two requests share a partly filled block.",
            ),
        ),
        whole=True,
    ),
    _weights_gb(13),
    ValueExercise(
        id="6.serving-budget",
        question=(
            f"A GPU has {_GPU} GiB. The model's weights take {_WEIGHTS} GiB and the runtime's buffers "
            f"{_BUFFERS} GiB; the rest holds the KV cache, at {_PER_TOKEN_KIB} KiB per token. Requests may grow "
            f"to {_MAX:,} tokens and hold {_MEAN:,} on average. (a) Reserving the maximum length for every "
            f"request, how many run at once? (b) In a paged cache with blocks of {_S} tokens, with every request "
            "at the average length, how many run at once? Answer [a, b]."
        ),
        expected=_BUDGET_ANSWER,
        explanation=(
            f"The cache gets {_GPU} − {_WEIGHTS} − {_BUFFERS} = {_GPU - _WEIGHTS - _BUFFERS} GiB, which is "
            f"{(_GPU - _WEIGHTS - _BUFFERS) * GiB // (_PER_TOKEN_KIB * 1024):,} token slots at {_PER_TOKEN_KIB} KiB "
            f"each. (a) {_BUDGET_ANSWER[0]} reservations of {_MAX:,}. (b) A {_MEAN:,}-token request holds "
            f"ceil({_MEAN}/{_S}) = {blocks_needed(_MEAN, _S)} blocks, so the "
            f"{(_GPU - _WEIGHTS - _BUFFERS) * GiB // (_PER_TOKEN_KIB * 1024) // _S:,} blocks serve "
            f"{_BUDGET_ANSWER[1]}, about four times as many."
        ),
        hints=("First the KV budget: what the GPU holds less the weights and the buffers. Then count token slots.",),
        wrong_answers=(
            WrongAnswer(_fits(_GPU - _WEIGHTS), "You left out the runtime buffers: they take their 6 GiB too."),
            WrongAnswer(_fits(_GPU - _BUFFERS), "You left out the weights: they sit in the same memory."),
            WrongAnswer(_fits(_GPU), "The whole GPU is not the KV budget: take away the weights and the buffers."),
            WrongAnswer(
                [_BUDGET_ANSWER[0], (_GPU - _WEIGHTS - _BUFFERS) * GiB // (_PER_TOKEN_KIB * 1024) // _MEAN],
                f"A paged request holds whole blocks: {_MEAN:,} tokens take {blocks_needed(_MEAN, _S)} blocks of "
                f"{_S}, {blocks_needed(_MEAN, _S) * _S:,} slots.",
            ),
            WrongAnswer(
                [_BUDGET_ANSWER[0], _BUDGET_ANSWER[1] + 1],
                "Round down: a request that does not fit whole does not run.",
            ),
        ),
        whole=True,
    ),
    ValueExercise(
        id="6.bandwidth-floor",
        question=(
            "A 13-billion-parameter model stored at 2 bytes per parameter decodes a batch of 8 sequences on a GPU "
            "that reads 3.35 TB/s (3.35·10^12 bytes per second). Each sequence's KV cache holds 0.5 GB (10^9 "
            "bytes). Ignoring everything else, at least how many milliseconds does one decode step take? "
            "Give it to 2 decimal places."
        ),
        expected=_FLOOR_MS,
        explanation=(
            "A step reads every weight once for the whole batch (26 GB) and every sequence's cache (8 × 0.5 GB): "
            f"30 GB at 3.35 TB/s is {_FLOOR_MS:.2f} ms. Each sequence gets one token per step, so that is also "
            "each sequence's time per token: batching shares the weight read, not the caches."
        ),
        hints=("Bytes read per step: weights once, plus each sequence's cache. Divide by the bandwidth.",),
        wrong_answers=(
            WrongAnswer(
                1e3 * 26e9 / _FLOOR_BW, "You left out the caches: every sequence reads its own keys and values."
            ),
            WrongAnswer(
                1e3 * (8 * 26e9 + 8 * 0.5e9) / _FLOOR_BW,
                "The weights are read once per step for the whole batch, not once per sequence.",
            ),
            WrongAnswer(1e3 * (26e9 + 0.5e9) / _FLOOR_BW, "Each of the 8 sequences reads its own cache: 8 × 0.5 GB."),
            WrongAnswer(
                _FLOOR_MS / _FLOOR_BATCH,
                "Every sequence waits for the whole step: the step time is the time per token of each.",
            ),
            WrongAnswer(1e3 * (52e9 + 4e9) / _FLOOR_BW, "2 bytes per parameter, not 4: the weights are 26 GB."),
        ),
        decimals=2,
    ),
    FunctionExercise(
        id="6.decode-mask",
        question=(
            "Write cached_causal_mask(n_new, n_cached): the boolean (n_new, n_cached + n_new) mask, True where a "
            "query may read a key, for n_new tokens appended after n_cached cached ones."
        ),
        # a boolean reference is compared entry by entry: a bool, 0/1 int or 0./1. float mask all grade
        # the same, and any other number (1.9, 0.2) is wrong
        reference=lambda n_new, n_cached: causal_mask(n_new, n_cached + n_new),
        cases=(
            Case(
                "one decode step",
                lambda: (1, 6),
                "A lone new token sits after all 6 cached ones: it may read all 7 keys (the last one is itself).",
            ),
            Case("prefill", lambda: (4, 0), "With nothing cached it is the ordinary lower triangle."),
            Case(
                "a chunk after the cache",
                lambda: (3, 5),
                "New token i sits at position n_cached + i and reads keys 0..n_cached + i.",
            ),
        ),
        wrong_answers=(
            WrongAnswer(
                lambda n_new, n_cached: torch.ones(n_new, n_cached + n_new, dtype=torch.bool).tril(),
                "That triangle is aligned top-left (torch SDPA's is_causal when N != M): it puts the new tokens "
                "at positions 0, 1, ... Shift it right by n_cached: query i is at position n_cached + i.",
            ),
            WrongAnswer(
                lambda n_new, n_cached: ~causal_mask(n_new, n_cached + n_new),
                "The polarity is flipped: True must mean 'may read' (the past and itself), not 'blocked'.",
            ),
            WrongAnswer(
                lambda n_new, n_cached: torch.ones(n_new, n_cached + n_new, dtype=torch.bool),
                "No causal mask at all: when several new tokens arrive together, the earlier ones must not "
                "read the later ones.",
            ),
        ),
        explanation="Bottom-right alignment: query i at position n_cached + i reads keys 0..n_cached + i.",
        hints=("Compare key positions j with query positions n_cached + i: allowed where j <= n_cached + i.",),
        stands_for=("lib.attention.causal_mask",),
        forbids=MASK_BUILDERS + ("lib.attention.padding_mask",),
        # n_new, n_cached: a domain far too large to tabulate (a table of 66 small cases passed once)
        draw=lambda generator: (integer(generator, 1, 64), integer(generator, 0, 2048)),
    ),
)
