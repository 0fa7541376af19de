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


def _next_merge(hug: int, pug: int, pun: int, bun: int, hugs: int) -> ValueExercise:
    """7.next-merge from chunks with these counts (the book: hug 4, pug 3, pun 12, bun 5, hugs 2).

    Every choice keeps the two pairs that pun shares, (p, u) with pug and (u, n) with bun, far above
    the rest, and never tied: the answer is the likelier of the two, the named mistake the other."""
    chunk_counts = {"hug": hug, "pug": pug, "pun": pun, "bun": bun, "hugs": hugs}
    answer = next_merge(chunk_counts)
    counted = {"un": pun + bun, "pu": pug + pun, "ug": hug + pug + hugs, "hu": hug + hugs, "bu": bun, "gs": hugs}
    ranked = sorted(counted, key=lambda pair: -counted[pair])  # ties keep the order written above
    shares = {"un": f" (pun {pun} + bun {bun})", "pu": f" (pug {pug} + pun {pun})"}
    winner, runner_up = ("un", "pu") if counted["un"] > counted["pu"] else ("pu", "un")
    listed = ", ".join(f"{pair} {counted[pair]}" + (shares[pair] if pair == winner else "") for pair in ranked)
    if winner == "un":
        close_call = (
            f"(p, u) occurs {counted['pu']} times, but (u, n) occurs in both pun and bun: {counted['un']} times."
        )
    else:
        close_call = (
            f"(u, n) occurs {counted['un']} times, but (p, u) occurs in both pug and pun: {counted['pu']} times."
        )
    first, second = winner
    return ValueExercise(
        id="7.next-merge",
        question=(
            f"A pre-split gave these chunks, with how often each occurs: hug ×{hug}, pug ×{pug}, pun ×{pun}, "
            f"bun ×{bun}, hugs ×{hugs}. Which pair does BPE merge first? Answer with the two characters' byte "
            "values, as two numbers: for the pair (h, u) you would type 104, 117 (in Python, ord('h') and ord('u'))."
        ),
        expected=answer,
        explanation=f"Pair counts weighted by chunk counts: {listed}.",
        hints=("Count every adjacent pair inside each chunk, times how often the chunk occurs.",),
        wrong_answers=(
            WrongAnswer(
                _unweighted_merge(chunk_counts),
                f"You counted each distinct chunk once. A chunk that occurs {pun} times adds {pun} to each of its "
                "pairs.",
            ),
            WrongAnswer([ord(c) for c in runner_up], close_call),
            WrongAnswer(
                answer[::-1],
                "That is the right pair, reversed: a pair is read in the order its characters occur, the "
                f"first one first ({first} before {second} in pun).",
            ),
        ),
        whole=True,
        params=(
            Param("hug", 4, (3, 4, 5)),
            Param("pug", 3, (3, 6, 8)),
            Param("pun", 12, (12, 15, 20)),
            Param("bun", 5, (5, 7)),
            Param("hugs", 2, (1, 2, 3)),
        ),
        make=_next_merge,
    )


# --- 7.encode-word: merges in the order learned ---------------------------------------
# A merge order is written as the merged tokens in the order learned (ids 256, 257, ...). Every order a
# variant may draw learns (w, e) first, so that it takes the e of 'lower' from (e, r) and the w from
# (o, w) and (lo, w), and learns (l, o) before (lo, w) and (we, r): the word always ends as lo wer.
PIECES = {
    "we": ("w", "e"),
    "lo": ("l", "o"),
    "er": ("e", "r"),
    "ow": ("o", "w"),
    "low": ("lo", "w"),
    "wer": ("we", "r"),
}
MERGE_ORDER = "we lo er ow low wer"  # the book's: (w, e) → 256, (l, o) → 257, ...
MERGE_ORDERS = ("we lo er ow low wer", "we er lo ow wer low", "we lo wer er low ow", "we ow er lo wer low",
                "we er ow lo low wer")  # fmt: skip
MERGES = [PIECES[token] for token in MERGE_ORDER.split()]  # ids 256, 257, ...
WORD = "lower"


def _merges(order: str) -> list[tuple[str, str]]:
    return [PIECES[token] for token in order.split()]


def _listing(order: str) -> str:
    """The question's way of writing a merge order: (w, e) → 256, (l, o) → 257, ..."""
    return ", ".join(f"({a}, {b}) → {new_id}" for new_id, (a, b) in enumerate(_merges(order), start=256))


def _merge_table(merges: list[tuple[str, str]]) -> tuple[dict[tuple[int, int], int], dict[str, int]]:
    ids = {chr(b): b for b in range(128)}
    table = {}
    for new_id, (a, b) in enumerate(merges, start=256):
        table[(ids[a], ids[b])] = new_id
        ids[a + b] = new_id
    return table, ids


def encode_word(word: str, merges: list[tuple[str, str]] = MERGES) -> list[int]:
    table, _ = _merge_table(merges)
    return bpe_merge_simple(list(word.encode()), table)


def _summary(ids: list[int]) -> list[int]:
    """The answer's form: [number of tokens, first id, last id] (the same length whatever the split)."""
    return [len(ids), ids[0], ids[-1]]


def _one_merge_early(word: str, merges: list[tuple[str, str]] = MERGES) -> list[int]:
    """The mistake: stop before the last merge that applies ((we, r) here)."""
    table, _ = _merge_table(merges)
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


def _leftmost_first(word: str, merges: list[tuple[str, str]] = MERGES) -> list[int]:
    """The mistake: merge the leftmost pair that has any merge, ignoring the order learned."""
    table, _ = _merge_table(merges)
    ids = list(word.encode())
    while True:
        for i, pair in enumerate(pairwise(ids)):
            if pair in table:
                ids[i : i + 2] = [table[pair]]
                break
        else:
            return ids


def _encode_word(order: str) -> ValueExercise:
    """7.encode-word with the merges learned in this order (the book: MERGE_ORDER)."""
    merges = _merges(order)
    _, token = _merge_table(merges)
    lo, er, wer = token["lo"], token["er"], token["wer"]
    return ValueExercise(
        id="7.encode-word",
        question=(
            f"Merges learned in this order: {_listing(order)}. BPE encodes the word 'lower'. Answer "
            "[number of tokens, first id, last id]."
        ),
        expected=_summary(encode_word(WORD, merges)),
        explanation=(
            "Merges apply in the order they were learned: (w, e) first gives l o we r; then (l, o) gives "
            f"lo we r; then (we, r) gives lo wer: [{lo}, {wer}], so [2, {lo}, {wer}]. (lo, w) never applies: w was "
            "taken by we."
        ),
        hints=("At each step, merge the adjacent pair whose merge was learned earliest (the lowest id).",),
        wrong_answers=(
            WrongAnswer(
                _summary(_leftmost_first(WORD, merges)),
                "You merged from left to right (or took the longest token that fits). BPE replays merges "
                "in the order learned, whatever their place in the word: (w, e) comes first here.",
            ),
            WrongAnswer(
                _summary(_one_merge_early(WORD, merges)),
                f"You stopped one merge early, at lo we r: (we, r) → {wer} is learned, so it applies too.",
            ),
            WrongAnswer(
                [4, ord("l"), ord("r")],
                "You applied only the first merge (l o we r); keep going while any learned pair is adjacent.",
            ),
            WrongAnswer(
                [3, lo, er],
                "You merged (e, r) before (w, e), giving lo w er. (w, e) → 256 was learned first, so it takes "
                "the e, and (e, r) never applies.",
            ),
            WrongAnswer(
                [2, lo, er],
                f"Two tokens, lo and wer, is right, but {er} is er. wer is (we, r) → {wer}.",
            ),
        ),
        whole=True,
        params=(Param("order", MERGE_ORDER, MERGE_ORDERS, shown=_listing),),
        make=_encode_word,
    )


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


def _splits(text: str, scores: dict[str, float] = LATTICE_SCORES):
    if not text:
        yield []
        return
    for cut in range(1, len(text) + 1):
        if text[:cut] in scores:
            for rest in _splits(text[cut:], scores):
                yield [text[:cut], *rest]


def _score(split: list[str], scores: dict[str, float] = LATTICE_SCORES) -> float:
    return sum(scores[piece] for piece in split)


def _greedy(text: str, scores: dict[str, float], pick) -> list[str]:
    """The split that takes, at each place, the piece ``pick`` prefers among those that start there."""
    split = []
    while text:
        piece = max((text[:cut] for cut in range(1, len(text) + 1) if text[:cut] in scores), key=pick)
        split.append(piece)
        text = text[len(piece) :]
    return split


def _minus(x: float) -> str:
    """A score as the question writes it: −4, −2.5 (a minus sign, not a hyphen)."""
    return f"{x:g}".replace("-", "−")


def _viterbi(ab: float, cd: float, abc: float, bcd: float) -> ValueExercise:
    """7.viterbi with these scores for ab, cd, abc and bcd (the book: −4, −4, −6, −5.5); a, b, c, d and bc
    keep theirs. Every choice keeps ab + cd the best split, a + bc + d the greedy-by-score one (ab and abc
    below a's −3, bcd below bc's −2.5) and abc + d the longest-match one, each scoring apart."""
    scores = {**LATTICE_SCORES, "ab": ab, "cd": cd, "abc": abc, "bcd": bcd}
    splits = list(_splits(LATTICE_WORD, scores))
    best_split = max(splits, key=lambda split: _score(split, scores))
    best = _score(best_split, scores)
    forward = math.log(sum(math.exp(_score(split, scores)) for split in splits))
    longest = _greedy(LATTICE_WORD, scores, len)
    by_score = _greedy(LATTICE_WORD, scores, lambda piece: scores[piece])
    rivals = [["a", "bc", "d"], ["a", "bcd"], ["abc", "d"]]
    beaten = [f"{' + '.join(split)} = {_minus(_score(split, scores))}" for split in rivals]
    return ValueExercise(
        id="7.viterbi",
        question=(
            f"A unigram vocabulary has these log-probabilities: a, b, c, d −3 each; ab {_minus(ab)}; bc −2.5; "
            f"cd {_minus(cd)}; abc {_minus(abc)}; bcd {_minus(bcd)}. What is the total log-probability of the best "
            "segmentation of 'abcd'? Give it to 1 decimal place."
        ),
        expected=best,
        explanation=(f"{' + '.join(best_split)} = {_minus(best)} beats {beaten[0]}, {beaten[1]} and {beaten[2]}."),
        hints=("Write down every segmentation into pieces of the vocabulary and add their scores.",),
        wrong_answers=(
            WrongAnswer(
                _score(longest, scores),
                f"That is greedy longest match ({' + '.join(longest)}). Viterbi compares whole paths.",
            ),
            WrongAnswer(
                _score(by_score, scores),
                f"That is greedy by score (the best piece at each step: {', then '.join(by_score)}). "
                f"Viterbi compares whole paths: {' + '.join(best_split)} is better.",
            ),
            WrongAnswer(
                forward,
                "That sums the probabilities of all segmentations (the forward pass, used "
                "in training). Viterbi takes the best one: a max, not a sum.",
            ),
            WrongAnswer(
                _score(list(LATTICE_WORD), scores), "That is one piece per character. Longer pieces can score better."
            ),
            WrongAnswer(
                -best,
                "Mind the sign: the scores are log-probabilities, all negative, and so is their sum. A "
                "log-probability is never above 0.",
            ),
            WrongAnswer(
                math.exp(best),
                f"That is the probability of the best segmentation, e^({_minus(best)}). The question asks for its "
                "log-probability, the sum of the pieces' scores.",
            ),
        ),
        decimals=1,
        params=(
            Param("ab", -4.0, (-4.0, -3.5), shown=_minus),
            Param("cd", -4.0, (-4.0, -3.5, -3.0), shown=_minus),
            Param("abc", -6.0, (-6.0, -6.5, -7.0), shown=_minus),
            Param("bcd", -5.5, (-5.5, -6.0), shown=_minus),
        ),
        make=_viterbi,
    )


# --- 7.utf8-bytes -------------------------------------------------------------------------
CHAR = "\U0001f642"  # 🙂 SLIGHTLY SMILING FACE
# Other characters above U+FFFF (four UTF-8 bytes, a UTF-16 surrogate pair): 🚀 ROCKET, 🐍 SNAKE,
# 🎉 PARTY POPPER, 💡 ELECTRIC LIGHT BULB.
CHARS = (CHAR, "\U0001f680", "\U0001f40d", "\U0001f389", "\U0001f4a1")


def _named(char: str) -> str:
    """A character as the question writes it: 🙂 (U+1F642)."""
    return f"{char} (U+{ord(char):04X})"


def _utf8_bytes(char: str) -> ValueExercise:
    """7.utf8-bytes of this character above U+FFFF (the book: 🙂, U+1F642)."""
    utf8 = list(char.encode("utf-8"))
    return ValueExercise(
        id="7.utf8-bytes",
        question=f"What are the UTF-8 bytes of {_named(char)}, as a list of integers?",
        expected=utf8,
        explanation=(
            "Above U+FFFF UTF-8 uses four bytes: 11110xxx 10xxxxxx 10xxxxxx 10xxxxxx = "
            f"{' '.join(f'{b:02X}' for b in utf8)}."
        ),
        hints=("Code points from U+10000 take four bytes in UTF-8; the first starts 11110.",),
        wrong_answers=(
            WrongAnswer(list(char.encode("utf-16-be")), "Those are UTF-16 bytes (a surrogate pair), not UTF-8."),
            WrongAnswer(list(char.encode("utf-16-le")), "Those are UTF-16 little-endian bytes, not UTF-8."),
            WrongAnswer(
                list(char.encode("utf-32-be")),
                f"Those are the code point's number, 0x{ord(char):08X}, in four bytes (UTF-32). UTF-8 spreads "
                "its 21 bits over four bytes with marker bits: 11110xxx, then 10xxxxxx three times.",
            ),
        ),
        whole=True,
        params=(Param("char", CHAR, CHARS, shown=_named),),
        make=_utf8_bytes,
    )


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
    _next_merge(**CHUNK_COUNTS),
    _encode_word(MERGE_ORDER),
    _viterbi(*(LATTICE_SCORES[piece] for piece in ("ab", "cd", "abc", "bcd"))),
    _utf8_bytes(CHAR),
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


def _quadratic_loop(seconds: float, small: int, large: int) -> ValueExercise:
    """7.quadratic-loop: ``small`` bytes in ``seconds``, then ``large`` bytes (the book: 0.12 s, 1,000, 8,000).
    Every choice makes ``large`` a whole multiple of ``small``, at least 4 (at 2, squaring would equal doubling)."""
    ratio = large // small
    quadratic = seconds * (large / small) ** 2
    return ValueExercise(
        id="7.quadratic-loop",
        question=(
            f"The plain BPE loop encodes a chunk of {small:,} bytes in {seconds} s. Its time grows as the "
            f"square of the length. About how many seconds does a chunk of {large:,} bytes take? "
            "Give it to 2 decimal places."
        ),
        expected=quadratic,
        explanation=(
            f"{large:,} bytes is {ratio} times as long, so {ratio**2} times the time: {seconds} × {ratio**2} = "
            f"{quadratic:.2f} s. The heap, linear up to a log, would take about {ratio} times."
        ),
        hints=("Quadratic: double the length, four times the time.",),
        wrong_answers=(
            WrongAnswer(seconds * large / small, f"That is linear growth ({ratio} times); the loop is quadratic."),
            WrongAnswer(
                seconds * (large / small) ** 3, f"That is cubic ({ratio}³ times); quadratic is {ratio}² times."
            ),
            WrongAnswer(
                seconds * 2 * large / small, f"Squaring {ratio} gives {ratio**2}, not 2 × {ratio} = {2 * ratio}."
            ),
        ),
        atol=0.01,
        decimals=2,
        params=(
            Param("seconds", _LOOP_S, (0.05, 0.12, 0.3)),
            Param("small", _N_SMALL, (500, 1_000), shown=lambda n: f"{n:,}"),
            Param("large", _N_LARGE, (4_000, 6_000, 8_000, 10_000), shown=lambda n: f"{n:,}"),
        ),
        make=_quadratic_loop,
    )


EXERCISES = EXERCISES + (_quadratic_loop(_LOOP_S, _N_SMALL, _N_LARGE),)
