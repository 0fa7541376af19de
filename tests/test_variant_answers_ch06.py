"""Chapter 6's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py)."""

from fractions import Fraction

from _variant_answers import variant_answer_tests

GIB = 1 << 30


def _blocks(n_tokens: int, block_size: int = 16) -> int:
    """Blocks a sequence holds, counted by filling them: one block opens at every 16th token."""
    return len(range(0, n_tokens, block_size))


def _kv_gib(layers, kv_heads, batch, seq_len):
    per_token_per_layer = 2 * kv_heads * 128 * 2  # a key and a value per KV head, 128 wide, 2 bytes each
    return Fraction(layers * batch * seq_len * per_token_per_layer, GIB)


def _fork(requests, system, own):
    shared = _blocks(system)  # stored once: every request's table points at the same blocks
    return shared + sum(_blocks(own) for _ in range(requests))


def _serving(gpu, weights, buffers, per_token_kib):
    slots = (gpu - weights - buffers) * GIB // (per_token_kib * 1024)
    reserved = slots // 4096
    paged, free_blocks = 0, slots // 16
    while free_blocks >= _blocks(1000):  # admit requests of 1,000 tokens while their blocks fit
        free_blocks -= _blocks(1000)
        paged += 1
    return [reserved, paged]


def _floor_ms(billions, batch, cache_gb, tb_per_s):
    bytes_read = Fraction(billions) * 10**9 * 2 + batch * Fraction(cache_gb) * 10**9
    return float(1000 * bytes_read / (Fraction(tb_per_s) * 10**12))


def _cache_growth(factors):
    """Count a toy cache's entries, one key and one value per layer, sequence, token and KV head, before and
    after N and B grow by ``factors``."""

    def entries(batch, seq_len, layers=2, kv_heads=2, head_dim=3):
        return sum(1 for _ in range(layers) for _ in range(batch) for _ in range(seq_len) for _ in ("k", "v")) * (
            kv_heads * head_dim
        )

    n, b = factors
    return entries(5 * b, 7 * n) / entries(5, 7)


ANSWERS = {
    "6.double-length-and-batch": _cache_growth,
    "6.next-position": lambda prompt: len(range(prompt)),  # positions 0..prompt-1 are taken
    "6.weights-gb": lambda billions: billions * 10**9 * 2 / 10**9,
    "6.kv-bytes": lambda **p: float(_kv_gib(**p)),
    "6.gqa-cache": lambda mha_gib, kv_heads: float(Fraction(mha_gib) / 64 * kv_heads),  # per KV head, times h_kv
    "6.decode-read": lambda kv_heads, old, new: float(Fraction(new * kv_heads, old * 64)),
    "6.blocks-needed": lambda first, second, aligned: sum(_blocks(n) for n in (first, second, aligned)),
    "6.fork-blocks": _fork,
    "6.serving-budget": _serving,
    "6.bandwidth-floor": _floor_ms,
}

test_has_answers, test_variants_agree = variant_answer_tests(6, ANSWERS)
