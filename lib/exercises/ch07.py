"""Chapter 7's check-yourself exercises: tokenizers.

Every expected value is computed here with the chapter's own code (lib.tokenizer,
lib.tokenizer.unigram) or the standard library, so the numbers cannot drift from the code the
chapter teaches. Each known mistake gets its own answer and its own feedback.
"""

from __future__ import annotations

import math
import unicodedata
from itertools import pairwise

from lib.exercises.base import ValueExercise, WrongAnswer
from lib.tokenizer import pair_counts
from lib.tokenizer.bpe_merge import bpe_merge_simple
from lib.variants import Param

# --- 7.next-merge: chunks with counts, as a pre-split would give them -----------------
CHUNK_COUNTS = {"hug": 4, "pug": 3, "pun": 12, "bun": 5, "hugs": 2}


def next_merge(chunk_counts: dict[str, int]) -> list[int]:
    """The first merge BPE learns from these chunks, as the two byte values: the highest
    count weighted by chunk frequency, then the smallest pair (the rule of lib.tokenizer)."""
    counts: dict[tuple[int, int], int] = {}
    for chunk, count in chunk_counts.items():
        pair_counts(list(chunk.encode()), counts, weight=count)
    return list(max(counts, key=lambda p: (counts[p], -p[0], -p[1])))


def _unweighted_merge(chunk_counts: dict[str, int]) -> list[int]:
    return next_merge(dict.fromkeys(chunk_counts, 1))


# --- 7.encode-word: merges in the order learned ---------------------------------------
MERGES = [("w", "e"), ("l", "o"), ("e", "r"), ("o", "w"), ("lo", "w"), ("we", "r")]  # ids 256, 257, ...
WORD = "lower"


def _merge_table() -> tuple[dict[tuple[int, int], int], dict[str, int]]:
    ids = {chr(b): b for b in range(128)}
    table = {}
    for new_id, (a, b) in enumerate(MERGES, start=256):
        table[(ids[a], ids[b])] = new_id
        ids[a + b] = new_id
    return table, ids


def encode_word(word: str) -> list[int]:
    table, _ = _merge_table()
    return bpe_merge_simple(list(word.encode()), table)


def _summary(ids: list[int]) -> list[int]:
    """The answer's form: [number of tokens, first id, last id] (the same length whatever the split)."""
    return [len(ids), ids[0], ids[-1]]


def _one_merge_early(word: str) -> list[int]:
    """The mistake: stop before the last merge that applies ((we, r) here)."""
    table, _ = _merge_table()
    ids = list(word.encode())
    applied = []
    while True:
        pairs = [(table[pair], i) for i, pair in enumerate(pairwise(ids)) if pair in table]
        if not pairs:
            break
        new_id, i = min(pairs)
        applied.append(list(ids))
        ids[i : i + 2] = [new_id]
    return applied[-1] if applied else ids


def _leftmost_first(word: str) -> list[int]:
    """The mistake: merge the leftmost pair that has any merge, ignoring the order learned."""
    table, _ = _merge_table()
    ids = list(word.encode())
    while True:
        for i, pair in enumerate(pairwise(ids)):
            if pair in table:
                ids[i : i + 2] = [table[pair]]
                break
        else:
            return ids


# --- 7.viterbi: a small unigram lattice -------------------------------------------------
LATTICE_SCORES = {
    "a": -3.0,
    "b": -3.0,
    "c": -3.0,
    "d": -3.0,
    "ab": -4.0,
    "bc": -2.5,
    "cd": -4.0,
    "abc": -6.0,
    "bcd": -5.5,
}
LATTICE_WORD = "abcd"


def _splits(text: str):
    if not text:
        yield []
        return
    for cut in range(1, len(text) + 1):
        if text[:cut] in LATTICE_SCORES:
            for rest in _splits(text[cut:]):
                yield [text[:cut], *rest]


def _score(split: list[str]) -> float:
    return sum(LATTICE_SCORES[piece] for piece in split)


_ALL_SPLITS = list(_splits(LATTICE_WORD))
_BEST = max(_score(s) for s in _ALL_SPLITS)
_FORWARD = math.log(sum(math.exp(_score(s)) for s in _ALL_SPLITS))

# --- 7.utf8-bytes -------------------------------------------------------------------------
CHAR = "\U0001f642"  # 🙂 SLIGHTLY SMILING FACE

# --- 7.nfkc ----------------------------------------------------------------------------------
NFKC_CANDIDATES = ["cafe\u0301", "㎏", "½", "Straße", "naïve", "\u212b"]  # decomposed é, kg sign, ½, ß, ï, Å sign


def survives(form: str) -> list[int]:
    return [int(unicodedata.normalize(form, s) == s) for s in NFKC_CANDIDATES]


# --- 7.embedding-params ---------------------------------------------------------------------
D_MODEL, V_SMALL, V_LARGE = 1024, 32_000, 128_000


def _embedding_params(d_model: int, v_small: int, v_large: int) -> ValueExercise:
    """7.embedding-params: width d_model, vocabulary v_small -> v_large (the book: 1024, 32,000, 128,000)."""
    added = 2 * (v_large - v_small) * d_model
    return ValueExercise(
        id="7.embedding-params",
        question=(
            f"A model with d_model = {d_model} and untied input embedding and output layer grows its "
            f"vocabulary from {v_small:,} to {v_large:,} tokens. How many parameters does that add, in millions?"
            " Give it to 1 decimal place."
        ),
        expected=added / 1e6,
        explanation=(
            f"Each of the two V × d matrices grows by {v_large - v_small:,} × {d_model}: "
            f"2 × {v_large - v_small:,} × {d_model} ≈ {added / 1e6:.1f} M."
        ),
        hints=("The embedding is V × d_model, and so is the output layer when it is not tied.",),
        wrong_answers=(
            WrongAnswer(added / 2e6, "That counts one matrix; untied, the output layer grows too."),
            WrongAnswer(2 * v_large * d_model / 1e6, "That is the total for the large vocabulary, not what it adds."),
            WrongAnswer(
                v_large * d_model / 1e6, "That is one matrix of the large vocabulary, not what the change adds."
            ),
            WrongAnswer(
                float(added), "That is the right count, in parameters; the question asks for millions (divide by 10^6)."
            ),
        ),
        decimals=1,
        params=(
            Param("d_model", D_MODEL, (768, 1024, 2048)),
            Param("v_small", V_SMALL, (32_000, 50_000), shown=lambda v: f"{v:,}"),
            Param("v_large", V_LARGE, (128_000, 200_000, 256_000), shown=lambda v: f"{v:,}"),
        ),
        make=_embedding_params,
    )


EXERCISES = (
    ValueExercise(
        id="7.next-merge",
        question=(
            "A pre-split gave these chunks, with how often each occurs: hug ×4, pug ×3, pun ×12, bun ×5, "
            "hugs ×2. Which pair does BPE merge first? Answer with the two characters' byte values, "
            "as two numbers: for the pair (h, u) you would type 104, 117 (in Python, ord('h') and ord('u'))."
        ),
        expected=next_merge(CHUNK_COUNTS),
        explanation="Pair counts weighted by chunk counts: un 17 (pun 12 + bun 5), pu 15, ug 9, hu 6, bu 5, gs 2.",
        hints=("Count every adjacent pair inside each chunk, times how often the chunk occurs.",),
        wrong_answers=(
            WrongAnswer(
                _unweighted_merge(CHUNK_COUNTS),
                "You counted each distinct chunk once. A chunk that occurs 12 times adds 12 to each of its pairs.",
            ),
            WrongAnswer(
                [ord("p"), ord("u")],
                "(p, u) occurs 15 times, but (u, n) occurs in both pun and bun: 17 times.",
            ),
            WrongAnswer(
                next_merge(CHUNK_COUNTS)[::-1],
                "That is the right pair, reversed: a pair is read in the order its characters occur, the "
                "first one first (u before n in pun).",
            ),
        ),
        whole=True,
    ),
    ValueExercise(
        id="7.encode-word",
        question=(
            "Merges learned in this order: (w, e) → 256, (l, o) → 257, (e, r) → 258, (o, w) → 259, "
            "(lo, w) → 260, (we, r) → 261. BPE encodes the word 'lower'. Answer [number of tokens, first id, "
            "last id]."
        ),
        expected=_summary(encode_word(WORD)),
        explanation=(
            "Merges apply in the order they were learned: (w, e) first gives l o we r; then (l, o) gives "
            "lo we r; then (we, r) gives lo wer: [257, 261], so [2, 257, 261]. (lo, w) never applies: w was "
            "taken by we."
        ),
        hints=("At each step, merge the adjacent pair whose merge was learned earliest (the lowest id).",),
        wrong_answers=(
            WrongAnswer(
                _summary(_leftmost_first(WORD)),
                "You merged from left to right (or took the longest token that fits). BPE replays merges "
                "in the order learned, whatever their place in the word: (w, e) comes first here.",
            ),
            WrongAnswer(
                _summary(_one_merge_early(WORD)),
                "You stopped one merge early, at lo we r: (we, r) → 261 is learned, so it applies too.",
            ),
            WrongAnswer(
                [4, ord("l"), ord("r")],
                "You applied only the first merge (l o we r); keep going while any learned pair is adjacent.",
            ),
            WrongAnswer(
                [3, 257, 258],
                "You merged (e, r) before (w, e), giving lo w er. (w, e) → 256 was learned first, so it takes "
                "the e, and (e, r) never applies.",
            ),
            WrongAnswer(
                [2, 257, 258],
                "Two tokens, lo and wer, is right, but 258 is er. wer is (we, r) → 261.",
            ),
        ),
        whole=True,
    ),
    ValueExercise(
        id="7.viterbi",
        question=(
            "A unigram vocabulary has these log-probabilities: a, b, c, d −3 each; ab −4; bc −2.5; cd −4; "
            "abc −6; bcd −5.5. What is the total log-probability of the best segmentation of 'abcd'?"
            " Give it to 1 decimal place."
        ),
        expected=_BEST,
        explanation="ab + cd = −8 beats a + bc + d = −8.5, a + bcd = −8.5 and abc + d = −9.",
        hints=("Write down every segmentation into pieces of the vocabulary and add their scores.",),
        wrong_answers=(
            WrongAnswer(-9.0, "That is greedy longest match (abc + d). Viterbi compares whole paths."),
            WrongAnswer(
                -8.5,
                "That is greedy by score (the best piece at each step: a, then bc, then d). "
                "Viterbi compares whole paths: ab + cd is better.",
            ),
            WrongAnswer(
                _FORWARD,
                "That sums the probabilities of all segmentations (the forward pass, used "
                "in training). Viterbi takes the best one: a max, not a sum.",
            ),
            WrongAnswer(-12.0, "That is one piece per character. Longer pieces can score better."),
            WrongAnswer(
                -_BEST,
                "Mind the sign: the scores are log-probabilities, all negative, and so is their sum. A "
                "log-probability is never above 0.",
            ),
            WrongAnswer(
                math.exp(_BEST),
                "That is the probability of the best segmentation, e^(−8). The question asks for its "
                "log-probability, the sum of the pieces' scores.",
            ),
        ),
        decimals=1,
    ),
    ValueExercise(
        id="7.utf8-bytes",
        question=f"What are the UTF-8 bytes of {CHAR} (U+1F642), as a list of integers?",
        expected=list(CHAR.encode("utf-8")),
        explanation="Above U+FFFF UTF-8 uses four bytes: 11110xxx 10xxxxxx 10xxxxxx 10xxxxxx = F0 9F 99 82.",
        hints=("Code points from U+10000 take four bytes in UTF-8; the first starts 11110.",),
        wrong_answers=(
            WrongAnswer(list(CHAR.encode("utf-16-be")), "Those are UTF-16 bytes (a surrogate pair), not UTF-8."),
            WrongAnswer(list(CHAR.encode("utf-16-le")), "Those are UTF-16 little-endian bytes, not UTF-8."),
            WrongAnswer(
                list(CHAR.encode("utf-32-be")),
                "Those are the code point's number, 0x0001F642, in four bytes (UTF-32). UTF-8 spreads "
                "its 21 bits over four bytes with marker bits: 11110xxx, then 10xxxxxx three times.",
            ),
        ),
        whole=True,
    ),
    ValueExercise(
        id="7.nfkc",
        question=(
            "For each string, answer 1 if NFKC leaves it unchanged, 0 if it changes it: 'cafe' + U+0301 "
            "(combining acute), '㎏' (U+338F SQUARE KG), '½', 'Straße', 'naïve' (precomposed ï), U+212B "
            "(ANGSTROM SIGN)."
        ),
        expected=survives("NFKC"),
        explanation=(
            "NFKC composes e + U+0301 into é, spells ㎏ as kg and ½ as 1⁄2, and turns the Ångström sign "
            "into Å (U+00C5). It does not case-fold, so ß stays; precomposed ï is already normal."
        ),
        hints=(
            "NFKC decomposes compatibility characters (ligatures, unit symbols, fractions, look-alike signs) "
            "and composes a letter with its combining marks. Which strings hold one of those?",
        ),
        wrong_answers=(
            WrongAnswer(
                [0, 0, 0, 1, 1, 1],
                "All right but the last: U+212B ANGSTROM SIGN is a compatibility twin of Å (U+00C5), and NFKC "
                "(NFC too) replaces it.",
            ),
            WrongAnswer(
                [1, 0, 0, 1, 1, 0],
                "All right but the first: 'cafe' + U+0301 is two code points at the end, and NFKC composes "
                "them into the single é.",
            ),
            WrongAnswer(
                [1, 0, 0, 1, 1, 1],
                "Judged by eye: e + combining accent and the Ångström sign look like é and Å, but they are "
                "other code points, and NFKC rewrites them. Byte-level reversibility is about code points.",
            ),
            WrongAnswer([0, 0, 0, 0, 1, 0], "NFKC does not case-fold: ß stays ß (casefold() is another step)."),
            WrongAnswer(
                survives("NFC"),
                "That is NFC. The K (compatibility) in NFKC also rewrites compatibility characters such as ㎏ and ½.",
            ),
        ),
        whole=True,
    ),
    _embedding_params(D_MODEL, V_SMALL, V_LARGE),
)

# --- 7.quadratic-loop (the appendix on BPE performance) ---------------------------------------
_LOOP_S, _N_SMALL, _N_LARGE = 0.12, 1_000, 8_000
_QUADRATIC = _LOOP_S * (_N_LARGE / _N_SMALL) ** 2  # 7.68 s
EXERCISES = EXERCISES + (
    ValueExercise(
        id="7.quadratic-loop",
        question=(
            f"The plain BPE loop encodes a chunk of {_N_SMALL:,} bytes in {_LOOP_S} s. Its time grows as the "
            f"square of the length. About how many seconds does a chunk of {_N_LARGE:,} bytes take? "
            "Give it to 2 decimal places."
        ),
        expected=_QUADRATIC,
        explanation=(
            f"{_N_LARGE:,} bytes is {_N_LARGE // _N_SMALL} times as long, so {(_N_LARGE // _N_SMALL) ** 2} times "
            f"the time: {_LOOP_S} × 64 = {_QUADRATIC:.2f} s. The heap, linear up to a log, would take about 8 times."
        ),
        hints=("Quadratic: double the length, four times the time.",),
        wrong_answers=(
            WrongAnswer(_LOOP_S * _N_LARGE / _N_SMALL, "That is linear growth (8 times); the loop is quadratic."),
            WrongAnswer(_LOOP_S * (_N_LARGE / _N_SMALL) ** 3, "That is cubic (8³ times); quadratic is 8² times."),
            WrongAnswer(_LOOP_S * 2 * _N_LARGE / _N_SMALL, "Squaring 8 gives 64, not 2 × 8 = 16."),
        ),
        atol=0.01,
        decimals=2,
    ),
)
