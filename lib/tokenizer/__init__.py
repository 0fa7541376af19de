"""Tokenizers (chapter 7): byte-level BPE, its merge loops, and unigram.

The package holds one idea per module:
    ``base``       what every tokenizer shares: pre-split patterns, text and id checks,
                   normalization, decode, the saved file format;
    ``bpe``        ``BPETokenizer``: training (naive and incremental), encoding, and
                   published vocabularies (``from_ranks``, GPT-4's cl100k_base);
    ``bpe_merge``  the merge loops encoding replays: the plain O(n²) loop and its fast twins;
    ``lattice``    the lattice of every training chunk at once: expected counts (EM), Viterbi;
    ``unigram``    ``UnigramTokenizer`` (Kudo, 2018), trained by EM on that lattice.

``from lib.tokenizer import BPETokenizer, ...`` gives the names the chapter uses.
"""

from lib.tokenizer.bpe import (
    GPT2_SPLIT_PATTERN,
    GPT4_SPLIT_PATTERN,
    BPETokenizer,
    Tokenizer,
    check_ids,
    check_text,
    check_vocab_size,
    merge,
    nfkc_changes,
    normalize,
    pair_counts,
    utf8,
)

__all__ = [
    "GPT2_SPLIT_PATTERN",
    "GPT4_SPLIT_PATTERN",
    "BPETokenizer",
    "Tokenizer",
    "check_ids",
    "check_text",
    "check_vocab_size",
    "merge",
    "nfkc_changes",
    "normalize",
    "pair_counts",
    "utf8",
]
