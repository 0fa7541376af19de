"""lib.tokenizer.lattice: forward-backward and Viterbi over all chunks at once equal the plain
chunk-by-chunk versions (which tests/test_unigram.py holds to brute force)."""

import pytest

from lib.tokenizer.lattice import Lattice, expected_counts_plain
from lib.tokenizer.unigram import UnigramTokenizer

SCORES = {"a": -2.0, "b": -2.5, "ab": -3.0, "ba": -4.0, "aba": -4.2, "bb": -1.0, "c": -3.0}


def hand_made(scores, max_len=3):
    tokenizer = UnigramTokenizer()
    tokenizer.scores, tokenizer.max_piece_len = dict(scores), max_len
    tokenizer._byte_score = tokenizer.byte_score(tokenizer.scores)
    return tokenizer


def test_lattice_forward_backward_equals_the_plain_loop():
    chunks = {"abab": 3, "babba": 2, "cabc": 1, "zz": 4}  # "z" has no piece: that chunk adds nothing
    lattice = Lattice(chunks, SCORES, 3)
    fast, plain = lattice.expected_counts(SCORES), expected_counts_plain(chunks, SCORES, 3)
    assert fast.keys() == plain.keys()
    for piece, count in plain.items():
        assert fast[piece] == pytest.approx(count, rel=1e-9)


@pytest.mark.parametrize("keep", [None, {"a", "ab", "bb"}])
def test_lattice_viterbi_uses_equal_segment_chunk_by_chunk(keep):
    chunks = {"abab": 3, "babba": 2, "cabc": 1, "zzab": 4, "abbabab": 1}
    scores = dict(SCORES) if keep is None else {p: s for p, s in SCORES.items() if p in keep or len(p) == 1}
    tokenizer = hand_made(scores)
    lattice = Lattice(chunks, SCORES, 3)
    if keep is not None:
        lattice.keep(set(scores))
    expected = {}
    for chunk, freq in chunks.items():
        for piece in tokenizer.segment(chunk):
            expected[piece] = expected.get(piece, 0) + freq
    assert lattice.viterbi_uses(scores, tokenizer._byte_score) == expected
