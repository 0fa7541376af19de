"""Tokenizer benchmark: our fast BPE trainer against its naive twin and HF tokenizers.

The text is English found wherever Python is: CPython's own help texts
(``pydoc_data.topics``, about 0.47 MB), repeated to reach the requested size.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from lib.tokenizer import GPT4_SPLIT_PATTERN, BPETokenizer


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


def main(args: argparse.Namespace) -> None:
    run(args)
