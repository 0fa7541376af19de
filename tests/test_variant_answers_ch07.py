"""Chapter 7's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py)."""

import itertools
import math
from collections import Counter

from _variant_answers import variant_answer_tests


def first_merge(**chunks: int) -> list[int]:
    """Count each adjacent pair of characters, times its chunk's count; the most frequent pair's bytes."""
    pairs = Counter()
    for chunk, count in chunks.items():
        for a, b in zip(chunk, chunk[1:], strict=False):
            pairs[a + b] += count
    (best, top), (_, second) = pairs.most_common(2)
    assert top > second  # one clear winner, no tie rule needed
    return [ord(c) for c in best]


def encode_lower(order: str) -> list[int]:
    """Replay the merges on 'lower' by rank, the order written as the merged tokens: 'we lo ...' -> 256, 257, ..."""
    merged = order.split()
    rank = {token: 256 + i for i, token in enumerate(merged)}
    pieces = list("lower")
    while True:
        found = [(rank[a + b], i) for i, (a, b) in enumerate(itertools.pairwise(pieces)) if a + b in rank]
        if not found:
            break
        _, i = min(found)
        pieces[i : i + 2] = [pieces[i] + pieces[i + 1]]
    ids = [rank[p] if len(p) > 1 else ord(p) for p in pieces]
    return [len(ids), ids[0], ids[-1]]


def best_split(ab: float, cd: float, abc: float, bcd: float) -> float:
    """Every way to cut 'abcd' (2^3 choices of cut points), kept where each piece has a score."""
    scores = {"a": -3, "b": -3, "c": -3, "d": -3, "ab": ab, "bc": -2.5, "cd": cd, "abc": abc, "bcd": bcd}
    best = -math.inf
    for cuts in itertools.product([False, True], repeat=3):
        pieces, start = [], 0
        for i, cut in enumerate(cuts, start=1):
            if cut:
                pieces.append("abcd"[start:i])
                start = i
        pieces.append("abcd"[start:])
        if all(p in scores for p in pieces):
            best = max(best, sum(scores[p] for p in pieces))
    return best


def utf8_by_hand(char: str) -> list[int]:
    """The four-byte form: 11110xxx 10xxxxxx 10xxxxxx 10xxxxxx over the code point's 21 bits."""
    cp = ord(char)
    assert 0x10000 <= cp <= 0x10FFFF
    return [0xF0 | cp >> 18, 0x80 | (cp >> 12) & 0x3F, 0x80 | (cp >> 6) & 0x3F, 0x80 | cp & 0x3F]


ANSWERS = {
    "7.next-merge": first_merge,
    "7.encode-word": encode_lower,
    "7.viterbi": best_split,
    "7.utf8-bytes": utf8_by_hand,
    "7.embedding-params": lambda d_model, v_small, v_large: (v_large * d_model - v_small * d_model) * 2 / 10**6,
    "7.quadratic-loop": lambda seconds, small, large: seconds * large * large / (small * small),
}

test_has_answers, test_variants_agree = variant_answer_tests(7, ANSWERS)
