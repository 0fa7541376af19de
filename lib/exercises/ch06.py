"""Chapter 6's check-yourself exercises: the KV cache and serving memory.

Each number is written as the arithmetic that produces it (through ``kv_cache_bytes`` and
``blocks_needed`` where they apply), and each wrong answer is the result of one mistake
the chapter warns about, with numbers chosen so that no two mistakes give the same answer, in the
book and in every student's variant (each exercise's params, lib.variants; tests/test_variants.py
tries every choice).
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
_S = 16  # the chapter's block size, in every paged exercise
_QUERY_HEADS = 64  # 6.gqa-cache and 6.decode-read: the model with one KV head per query head
_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


def _kv_bytes(layers: int, kv_heads: int, batch: int, seq_len: int) -> ValueExercise:
    """6.kv-bytes: ``layers`` layers whose 32 query heads share ``kv_heads`` KV heads of width 128 at 2 bytes,
    a batch of ``batch`` sequences of ``seq_len`` tokens (the book: 40, 8, 4, 2,048). 32 query heads are
    never twice the KV heads, so using them is never the same mistake as 4 bytes per element."""
    kv_bytes = kv_cache_bytes(
        layers=layers, batch=batch, seq_len=seq_len, kv_heads=kv_heads, head_dim=128, bytes_per_element=2
    )
    kv_gib = kv_bytes / GiB
    return ValueExercise(
        id="6.kv-bytes",
        question=(
            f"A model has {layers} layers and 32 query heads that share {kv_heads} KV heads of width 128, stored at "
            f"2 bytes. How many GiB does the KV cache take for a batch of {batch} sequences of {seq_len:,} tokens?"
            " Give it to 2 decimal places."
        ),
        expected=kv_gib,
        explanation=(
            f"2 · {layers} · {batch} · {seq_len} · {kv_heads} · 128 · 2 = {kv_bytes:,} bytes = {kv_gib:g} GiB "
            "(2^30 bytes)."
        ),
        hints=("KV bytes = 2·L·B·N·h_kv·d_h·s; divide by 2^30 for GiB.",),
        wrong_answers=(
            WrongAnswer(kv_gib / 2, "You left out the factor 2: the cache stores keys AND values."),
            WrongAnswer(
                kv_gib * 32 / kv_heads,
                f"You used the 32 query heads. The cache stores the {kv_heads} KV heads; queries are never cached.",
            ),
            WrongAnswer(kv_gib * 2, "You used 4 bytes per element (float32); the question stores 2 bytes."),
            WrongAnswer(kv_bytes / 1e9, "That is decimal gigabytes (10^9 bytes); a GiB is 2^30 bytes."),
            WrongAnswer(kv_gib / layers, "You left out the layers: every layer keeps its own keys and values."),
        ),
        decimals=2,
        params=(
            Param("layers", 40, (32, 40, 48, 64)),
            Param("kv_heads", 8, (4, 8)),
            Param("batch", 4, (2, 4, 8)),
            Param("seq_len", 2048, (2048, 4096, 8192), shown=lambda n: f"{n:,}"),
        ),
        make=_kv_bytes,
    )


def _gqa_cache(mha_gib: int, kv_heads: int) -> ValueExercise:
    """6.gqa-cache: a 64-query-head model whose full multi-head cache would take ``mha_gib`` GiB, with
    ``kv_heads`` KV heads (the book: 16, 8). No choice makes the cache equal 64 / kv_heads (the saving
    factor) or makes mha_gib equal it."""
    gqa_gib = mha_gib * kv_heads / _QUERY_HEADS
    factor = _QUERY_HEADS // kv_heads
    return ValueExercise(
        id="6.gqa-cache",
        question=(
            f"A model with {_QUERY_HEADS} query heads would need a {mha_gib} GiB KV cache with one KV head per query "
            f"head. How many GiB does the cache take with grouped-query attention using {kv_heads} KV heads "
            "(same layers, width, precision and tokens)?"
            " Give it to 2 decimal places."
        ),
        expected=gqa_gib,
        explanation=(
            f"The cache is proportional to h_kv: {_QUERY_HEADS} → {kv_heads} KV heads divides it by {factor}, so "
            f"{mha_gib} / {factor} = {gqa_gib:g} GiB. The saving "
            "is the head-count ratio; quality and kernels are separate questions, and the weights must be "
            "trained (or adapted) for GQA, not just reconfigured."
        ),
        hints=("Only h_kv changes in 2·L·B·N·h_kv·d_h·s.",),
        wrong_answers=(
            WrongAnswer(mha_gib / _QUERY_HEADS, "That is multi-query attention, with a single KV head."),
            WrongAnswer(float(mha_gib), "Query heads are not cached: the cache shrinks with the number of KV heads."),
            WrongAnswer(mha_gib * _QUERY_HEADS / kv_heads, "The ratio goes the other way: fewer KV heads, less cache."),
            WrongAnswer(
                _QUERY_HEADS / kv_heads, f"{factor} is the saving factor; the question asks for the size in GiB."
            ),
        ),
        decimals=2,
        params=(Param("mha_gib", 16, (12, 16, 20, 24, 40)), Param("kv_heads", 8, (2, 8, 32))),
        make=_gqa_cache,
    )


def _decode_read(kv_heads: int, old: int, new: int) -> ValueExercise:
    """6.decode-read: 64 -> ``kv_heads`` KV heads while the context grows from ``old`` to ``new`` tokens (the
    book: 8, 1,500, 4,500). The context never grows 4 or 8 times, which would make two mistakes meet."""
    context_ratio, kv_ratio = new / old, kv_heads / _QUERY_HEADS
    read_factor = context_ratio * kv_ratio  # the book: 3 · 1/8 = 0.375
    if read_factor < 1:
        verdict = "the longer context is more than paid for by the smaller cache"
    else:  # never 1: the context never grows 64 / kv_heads times
        verdict = "the smaller cache does not pay for the longer context"
    return ValueExercise(
        id="6.decode-read",
        question=(
            f"A model with {_QUERY_HEADS} query heads caches one KV head per query head. It is retrained with "
            f"grouped-query attention, {kv_heads} KV heads (same layers, head width and precision), and meanwhile "
            f"the conversations it serves grow from {old:,} to {new:,} tokens of context. With a KV cache, each "
            "decode step's attention reads every cached key and value. By what factor do the bytes one decode "
            "step's attention reads change (new / old)? Give it to 3 decimal places."
        ),
        expected=read_factor,
        explanation=(
            "One decode step's query reads every cached token once, so the read is proportional to the context "
            f"(× {new} / {old} = {context_ratio:g}) and, per token, to the number of KV heads "
            f"(× {kv_heads} / {_QUERY_HEADS}). Together "
            f"{context_ratio:g} × {kv_heads} / {_QUERY_HEADS} = {read_factor:.3f}: {verdict}. "
            "The cache removes recomputation of the prefix, not the growing read."
        ),
        hints=("The read is 2·L·N·h_kv·d_h·s bytes: which two factors change, and by how much each?",),
        wrong_answers=(
            WrongAnswer(context_ratio, "That is the context's growth alone; the cache per token shrank too."),
            WrongAnswer(
                kv_ratio,
                f"That is GQA's saving alone; every step also reads the {context_ratio:g} times longer context.",
            ),
            WrongAnswer(
                context_ratio**2 * kv_ratio,
                "Quadratic in the context is prefill (all N queries against all N keys). A decode step has one "
                "query per head: its read is linear in N.",
            ),
            WrongAnswer(1 / read_factor, "That is old / new; the question asks for new / old."),
            WrongAnswer(
                context_ratio / kv_ratio,
                f"Fewer KV heads mean less to read, not more: multiply by {kv_heads}/{_QUERY_HEADS}.",
            ),
            WrongAnswer(
                context_ratio / _QUERY_HEADS,
                f"That is multi-query attention, one KV head; this model keeps {kv_heads}.",
            ),
            WrongAnswer(1.0, "The cache does not make a step constant-time: the new query still reads every entry."),
        ),
        decimals=3,
        params=(
            Param("kv_heads", 8, (2, 4, 8, 16)),
            Param("old", 1500, (1000, 1500, 3000), shown=lambda n: f"{n:,}"),
            Param("new", 4500, (4500, 7500, 9000), shown=lambda n: f"{n:,}"),
        ),
        make=_decode_read,
    )


def _fork_blocks(requests: int, system: int, own: int) -> ValueExercise:
    """6.fork-blocks: ``requests`` requests, a shared ``system``-token system prompt (whole blocks), ``own``
    tokens each (the book: 10, 192, 50; 12 + 10·4 = 52 blocks). The prompt holds at least 12 blocks, more
    than pooling the requests' tails can save (at most requests - 1), so leaving out the prompt never meets
    pooling; no request count times ``own`` is a multiple of 16, so the three rounding mistakes stay apart."""
    prompt_blocks, own_blocks = system // _S, blocks_needed(own, _S)
    fork_blocks = blocks_needed(system, _S) + requests * own_blocks
    count = _WORDS[requests]
    return ValueExercise(
        id="6.fork-blocks",
        question=(
            f"{count.capitalize()} separate requests begin with the same {system}-token system prompt and add "
            f"{own} tokens each, in a paged cache with blocks of {_S}. Prefix caching keeps the system prompt's "
            "full blocks, and every request reuses them instead of computing its own. How many blocks are in use?"
        ),
        expected=fork_blocks,
        explanation=(
            f"The prompt fills exactly {prompt_blocks} full blocks, stored once and reused by all {count} requests. "
            f"Each request's {own} tokens need ceil({own}/{_S}) = {own_blocks} "
            f"blocks of its own: {prompt_blocks} + {requests} · {own_blocks} = {fork_blocks}, instead of "
            f"{requests} · ceil({system + own}/{_S}) = {requests * blocks_needed(system + own, _S)} without sharing."
        ),
        hints=(
            f"{system} = {prompt_blocks} · {_S}: the prompt fills whole blocks, and prefix caching reuses full blocks.",
        ),
        wrong_answers=(
            WrongAnswer(
                requests * blocks_needed(system + own, _S),
                "That is without sharing: each request holding its own copy of the prompt.",
            ),
            WrongAnswer(
                requests * own_blocks,
                f"The shared prompt's {prompt_blocks} blocks are stored once, but they are stored.",
            ),
            WrongAnswer(
                system / _S + requests * own / _S,
                f"Blocks are allocated whole: round each request's {own}/{_S} up.",
            ),
            WrongAnswer(
                blocks_needed(system, _S) + requests * own // _S,
                f"You rounded {requests} · {own}/{_S} = {requests * own / _S} down: each request's last "
                f"{own % _S} tokens still need a block.",
            ),
            WrongAnswer(
                blocks_needed(system, _S) + blocks_needed(requests * own, _S),
                f"You pooled the {count} requests' own tokens before rounding up: each request's {own} tokens "
                f"are its own sequence, ceil({own}/{_S}) = {own_blocks} blocks each, and no two requests share a "
                "partly filled block.",
            ),
        ),
        whole=True,
        params=(
            Param("requests", 10, (6, 10, 12), shown=lambda n: _WORDS[n].capitalize()),
            Param("system", 192, (192, 224, 256, 320)),
            Param("own", 50, (37, 45, 50, 70)),
        ),
        make=_fork_blocks,
    )


def _blocks_needed(first: int, second: int, aligned: int) -> ValueExercise:
    """6.blocks-needed: three sequences in blocks of 16 (the book: 1,000, 1,010, 1,024). ``first`` and
    ``second`` end mid-block, their tails together under 16 tokens (pooling them would save a block, and
    their fractional sum is no whole number of blocks); ``aligned`` is a multiple of 16."""
    lengths = (first, second, aligned)
    total = sum(blocks_needed(n, _S) for n in lengths)  # the book: 63 + 64 + 64 = 191

    def rounded_up(n: int) -> str:
        return f"{n} / {_S} = {n / _S} rounds up to {blocks_needed(n, _S)}"

    return ValueExercise(
        id="6.blocks-needed",
        question=(
            f"A paged cache uses blocks of {_S} tokens. It holds three sequences, of {first:,}, {second:,} and "
            f"{aligned:,} tokens. How many blocks do they hold together?"
        ),
        expected=total,
        explanation=(
            f"A sequence of n tokens holds ceil(n / {_S}) blocks: {rounded_up(first)} (the last "
            f"block holds {first % _S} tokens), {second} / {_S} = {second / _S} to {blocks_needed(second, _S)} "
            f"(the last holds {second % _S}), and {aligned} / {_S} = {aligned // _S} exactly. "
            f"Together {' + '.join(str(blocks_needed(n, _S)) for n in lengths)} = {total}."
        ),
        hints=(
            f"Round each sequence up to whole blocks, but add no block where n is a multiple of {_S}; "
            "no block holds two sequences.",
        ),
        wrong_answers=(
            WrongAnswer(
                sum(n // _S for n in lengths),
                f"You rounded down: the last tokens of the {first:,}- and {second:,}-token sequences still need a "
                "(partly filled) block each.",
            ),
            WrongAnswer(
                sum(n // _S + 1 for n in lengths),
                f"You used n // {_S} + 1, which adds a block even when n is a multiple of {_S}: {aligned:,} tokens "
                f"fill exactly {aligned // _S} blocks. Round up instead: ceil(n / {_S}).",
            ),
            WrongAnswer(
                blocks_needed(sum(lengths), _S),
                "You pooled the tokens before rounding up: each sequence has its own last block, and two "
                "sequences' partly filled tails cannot share one.",
            ),
            WrongAnswer(sum(lengths) / _S, "Blocks come whole: a sequence cannot hold part of a block."),
        ),
        whole=True,
        params=(
            Param("first", 1000, (1000, 1203, 1500, 2020), shown=lambda n: f"{n:,}"),
            Param("second", 1010, (1010, 1283, 1715), shown=lambda n: f"{n:,}"),
            Param("aligned", 1024, (768, 1024, 1600, 2048), shown=lambda n: f"{n:,}"),
        ),
        make=_blocks_needed,
    )


# 6.serving-budget: requests may grow to 4,096 tokens and hold 1,000 on average (about four times as many
# paged); blocks of 16 tokens.
_MAX, _MEAN = 4096, 1000


def _fits(kv_gib: float, per_token_kib: int) -> list[int]:
    """[requests reserved at the maximum, requests in a paged cache] that a KV budget holds."""
    slots = int(kv_gib * GiB) // (per_token_kib * 1024)
    return [slots // _MAX, (slots // _S) // blocks_needed(_MEAN, _S)]


def _serving_budget(gpu: int, weights: int, buffers: int, per_token_kib: int) -> ValueExercise:
    """6.serving-budget: a ``gpu`` GiB GPU, ``weights`` GiB of weights, ``buffers`` GiB of runtime buffers,
    ``per_token_kib`` KiB of KV per token (the book: 80, 26, 6, 128 -> [96, 390]). Every choice leaves a KV
    budget large enough that dividing the slots by 1,000 instead of 63 blocks' 1,008 gains at least two."""
    budget = gpu - weights - buffers
    slots = budget * GiB // (per_token_kib * 1024)
    answer = _fits(budget, per_token_kib)
    return ValueExercise(
        id="6.serving-budget",
        question=(
            f"A GPU has {gpu} GiB. The model's weights take {weights} GiB and the runtime's buffers "
            f"{buffers} GiB; the rest holds the KV cache, at {per_token_kib} KiB per token. Requests may grow "
            f"to {_MAX:,} tokens and hold {_MEAN:,} on average. (a) Reserving the maximum length for every "
            f"request, how many run at once? (b) In a paged cache with blocks of {_S} tokens, with every request "
            "at the average length, how many run at once? Answer [a, b]."
        ),
        expected=answer,
        explanation=(
            f"The cache gets {gpu} − {weights} − {buffers} = {budget} GiB, which is "
            f"{slots:,} token slots at {per_token_kib} KiB "
            f"each. (a) {answer[0]} reservations of {_MAX:,}. (b) A {_MEAN:,}-token request holds "
            f"ceil({_MEAN}/{_S}) = {blocks_needed(_MEAN, _S)} blocks, so the "
            f"{slots // _S:,} blocks serve "
            f"{answer[1]}, about {_WORDS[round(answer[1] / answer[0])]} times as many."
        ),
        hints=("First the KV budget: what the GPU holds less the weights and the buffers. Then count token slots.",),
        wrong_answers=(
            WrongAnswer(
                _fits(gpu - weights, per_token_kib),
                f"You left out the runtime buffers: they take their {buffers} GiB too.",
            ),
            WrongAnswer(_fits(gpu - buffers, per_token_kib), "You left out the weights: they sit in the same memory."),
            WrongAnswer(
                _fits(gpu, per_token_kib), "The whole GPU is not the KV budget: take away the weights and the buffers."
            ),
            WrongAnswer(
                [answer[0], slots // _MEAN],
                f"A paged request holds whole blocks: {_MEAN:,} tokens take {blocks_needed(_MEAN, _S)} blocks of "
                f"{_S}, {blocks_needed(_MEAN, _S) * _S:,} slots.",
            ),
            WrongAnswer(
                [answer[0], answer[1] + 1],
                "Round down: a request that does not fit whole does not run.",
            ),
        ),
        whole=True,
        params=(
            Param("gpu", 80, (80, 94, 141)),
            Param("weights", 26, (14, 26, 34)),
            Param("buffers", 6, (4, 6, 8)),
            Param("per_token_kib", 128, (96, 128, 160)),
        ),
        make=_serving_budget,
    )


def _bandwidth_floor(billions: int, batch: int, cache_gb: float, tb_per_s: float) -> ValueExercise:
    """6.bandwidth-floor: ``billions`` parameters at 2 bytes, a batch of ``batch``, ``cache_gb`` GB of cache
    each, ``tb_per_s`` TB/s (the book: 13, 8, 0.5, 3.35: 30 GB / 3.35 TB/s ≈ 8.96 ms)."""
    bandwidth, weights_gb = tb_per_s * 1e12, 2 * billions
    floor_ms = 1e3 * (billions * 1e9 * 2 + batch * cache_gb * 1e9) / bandwidth
    return ValueExercise(
        id="6.bandwidth-floor",
        question=(
            f"A {billions}-billion-parameter model stored at 2 bytes per parameter decodes a batch of {batch} "
            f"sequences on a GPU that reads {tb_per_s:g} TB/s ({tb_per_s:g}·10^12 bytes per second). Each "
            f"sequence's KV cache holds {cache_gb:g} GB (10^9 bytes). Ignoring everything else, at least how many "
            "milliseconds does one decode step take? Give it to 2 decimal places."
        ),
        expected=floor_ms,
        explanation=(
            f"A step reads every weight once for the whole batch ({weights_gb} GB) and every sequence's cache "
            f"({batch} × {cache_gb:g} GB): {weights_gb + batch * cache_gb:g} GB at {tb_per_s:g} TB/s is "
            f"{floor_ms:.2f} ms. Each sequence gets one token per step, so that is also "
            "each sequence's time per token: batching shares the weight read, not the caches."
        ),
        hints=("Bytes read per step: weights once, plus each sequence's cache. Divide by the bandwidth.",),
        wrong_answers=(
            WrongAnswer(
                1e3 * weights_gb * 1e9 / bandwidth,
                "You left out the caches: every sequence reads its own keys and values.",
            ),
            WrongAnswer(
                1e3 * (batch * weights_gb * 1e9 + batch * cache_gb * 1e9) / bandwidth,
                "The weights are read once per step for the whole batch, not once per sequence.",
            ),
            WrongAnswer(
                1e3 * (weights_gb * 1e9 + cache_gb * 1e9) / bandwidth,
                f"Each of the {batch} sequences reads its own cache: {batch} × {cache_gb:g} GB.",
            ),
            WrongAnswer(
                floor_ms / batch,
                "Every sequence waits for the whole step: the step time is the time per token of each.",
            ),
            WrongAnswer(
                1e3 * (2 * weights_gb * 1e9 + batch * cache_gb * 1e9) / bandwidth,
                f"2 bytes per parameter, not 4: the weights are {weights_gb} GB.",
            ),
        ),
        decimals=2,
        params=(
            Param("billions", 13, (7, 13, 30)),
            Param("batch", 8, (4, 8, 16)),
            Param("cache_gb", 0.5, (0.25, 0.5, 1.0), shown=lambda g: f"{g:g}"),
            Param("tb_per_s", 3.35, (2.0, 3.35, 4.8), shown=lambda t: f"{t:g}"),
        ),
        make=_bandwidth_floor,
    )


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
        params=(Param("prompt", 37, (19, 23, 37, 46, 58, 77, 101, 128)),),
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
        params=(Param("billions", 13, (7, 8, 13, 20, 34, 40, 65, 70)),),
        make=_weights_gb,
    )


_GROWTH = {2: "doubles", 3: "triples", 4: "quadruples"}


def _shown_factors(factors: tuple[int, int]) -> str:
    """What a server does to (N, B): (2, 2) -> 'doubles both', (3, 2) -> 'multiplies N by 3 and B by 2'."""
    n, b = factors
    if n == b:
        return f"{_GROWTH[n]} both"
    return f"multiplies N by {n} and B by {b}"


def _double_length_and_batch(factors: tuple[int, int]) -> ValueExercise:
    """6.double-length-and-batch: the cache length N and the batch B grow by ``factors`` (the book: both
    doubled). The choices keep the answer, each single factor, the quadratic reading and 1 apart."""
    n, b = factors
    growth = n * b
    if n == b:
        one_factor = [
            WrongAnswer(
                float(n),
                f"You {_GROWTH[n][:-1]}d only one of the two factors: both B and N appear in the formula, once each.",
            )
        ]
    else:
        one_factor = [
            WrongAnswer(
                float(n),
                f"You multiplied by N's factor {n} only: B grows by {b} too, and both appear in "
                "the formula, once each.",
            ),
            WrongAnswer(
                float(b),
                f"You multiplied by B's factor {b} only: N grows by {n} too, and both appear in "
                "the formula, once each.",
            ),
        ]
    return ValueExercise(
        id="6.double-length-and-batch",
        question=(
            "A server changes the cache length N and the number of active sequences B: it "
            f"{_shown_factors(factors)}. By what factor does the KV cache grow?"
            " Give it to 1 decimal place."
        ),
        expected=float(growth),
        explanation=(
            f"KV bytes = 2·L·B·N·h_kv·d_h·s is linear in B and linear in N: {n} × {b} = {growth}. This is not the "
            "quadratic prefill attention term, nor the roughly linear attention read of each decode step."
        ),
        hints=("Which factors of 2·L·B·N·h_kv·d_h·s change, and is the formula linear or quadratic in each?",),
        wrong_answers=(
            *one_factor,
            WrongAnswer(
                float(n * n * b),
                "You treated the cache as quadratic in N, like the N×N attention scores of prefill. The cache "
                f"stores one key and one value per token: it is linear in N (and in B), so {n} × {b} = {growth}.",
            ),
            WrongAnswer(1.0, "The cache size is not fixed: it grows with every token and every sequence it holds."),
        ),
        decimals=1,
        params=(Param("factors", (2, 2), ((2, 2), (3, 2), (2, 3), (4, 2), (3, 3)), shown=_shown_factors),),
        make=_double_length_and_batch,
    )


EXERCISES = (
    _double_length_and_batch((2, 2)),
    _kv_bytes(40, 8, 4, 2048),
    _gqa_cache(16, 8),
    _blocks_needed(1000, 1010, 1024),
    _next_position(37),
    _decode_read(8, 1500, 4500),
    _fork_blocks(10, 192, 50),
    _weights_gb(13),
    _serving_budget(80, 26, 6, 128),
    _bandwidth_floor(13, 8, 0.5, 3.35),
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
