"""lib.ngram: the capstone's count-based baselines against hand counts, plain loops and evaluate(), at toy sizes."""

import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from lib.capstone import CorpusConfig, prepare_data
from lib.ngram import (
    NGramCounts,
    _bigram_loss_loop,
    baseline_losses,
    bigram_loss,
    bigram_next_probabilities,
    entropy_floor,
    ngram_ladder,
    ngram_loss,
    scored_targets,
    uniform_loss,
    unigram_loss,
)
from lib.training import evaluate

TOY_CORPUS = CorpusConfig(n_paragraphs=60, vocab_size=300)
CONTEXT = 16  # the window the toy capstone run of test_capstone.py trains and evaluates on


@pytest.fixture(scope="module")
def toy_data():
    return prepare_data(TOY_CORPUS)


def test_uniform_loss_rejects_a_bad_vocabulary_size():
    with pytest.raises(ValueError, match="vocab_size"):
        uniform_loss(0)


def test_bigram_next_probabilities_counts_followers(toy_data):
    tokenizer = toy_data.tokenizer
    ids = toy_data.train_ids.tolist()
    prompt = "The dog that the cat"
    previous = tokenizer.encode(prompt)[-1]
    followers = [b for a, b in zip(ids[:-1], ids[1:], strict=True) if a == previous]  # a plain loop
    candidates = [tokenizer.decode([t]) for t in sorted(set(followers))[:3]]
    assert len(candidates) >= 2 and all(len(tokenizer.encode(c)) == 1 for c in candidates)
    p = bigram_next_probabilities(toy_data, prompt, candidates)
    for text in candidates:
        (token,) = tokenizer.encode(text)
        assert p[text] == pytest.approx(followers.count(token) / len(followers))
    with pytest.raises(ValueError, match="exactly one"):
        bigram_next_probabilities(toy_data, "The", [" happy dog"])


class TableModel(nn.Module):
    """A 'model' whose logits are a fixed row of log-probabilities per previous token (a bigram)."""

    def __init__(self, log_probs):
        super().__init__()
        self.table = nn.Parameter(log_probs.float())

    def forward(self, idx):
        return self.table[idx]  # (B, T, V)


def _bigram_table(train_ids, vocab_size, add_k):
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    for a, b in zip(train_ids[:-1].tolist(), train_ids[1:].tolist(), strict=True):
        counts[a, b] += 1
    counts += add_k
    return (counts / counts.sum(1, keepdim=True)).log()


def test_baselines_score_the_tokens_evaluate_scores():
    """evaluate() on a model that IS the bigram table gives bigram_loss; same for a unigram row."""
    gen = torch.Generator().manual_seed(0)
    vocab, context = 7, 5
    train_ids = torch.randint(0, vocab, (400,), generator=gen)
    val_ids = torch.randint(0, vocab, (53,), generator=gen)  # 10 windows of 5, and 2 tokens left over
    table = _bigram_table(train_ids, vocab, 0.5)
    model_loss = evaluate(TableModel(table), val_ids, context=context, batch_size=3)
    assert bigram_loss(train_ids, val_ids, vocab, context=context, add_k=0.5) == pytest.approx(model_loss, abs=1e-5)
    counts = torch.bincount(train_ids, minlength=vocab).double() + 1
    unigram_row = (counts / counts.sum()).log()
    unigram_model = evaluate(TableModel(unigram_row.expand(vocab, vocab)), val_ids, context=context, batch_size=3)
    assert unigram_loss(train_ids, val_ids, vocab, context=context) == pytest.approx(unigram_model, abs=1e-5)


def test_bigram_matches_its_plain_twin():
    gen = torch.Generator().manual_seed(1)
    train_ids = torch.randint(0, 11, (300,), generator=gen)
    val_ids = torch.randint(0, 11, (90,), generator=gen)
    fast = bigram_loss(train_ids, val_ids, 11, context=8, add_k=0.1)
    plain = _bigram_loss_loop(train_ids.tolist(), val_ids.tolist(), 11, context=8, add_k=0.1)
    assert fast == pytest.approx(plain, rel=1e-9)


def test_hand_worked_unigram_and_uniform():
    # training "0 0 0 1": counts 3, 1 (+1 each) -> P(0) = 4/6, P(1) = 2/6; held-out "1 0 1" scores 0 then 1.
    loss = unigram_loss(torch.tensor([0, 0, 0, 1]), torch.tensor([1, 0, 1]), 2, context=2)
    assert loss == pytest.approx(-(math.log(4 / 6) + math.log(2 / 6)) / 2)
    assert uniform_loss(512) == pytest.approx(math.log(512))


def test_scored_targets_layout():
    previous, targets = scored_targets(11, 3)  # windows [0..3], [3..6], [6..9]; token 10 left over
    assert targets.tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert previous.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    with pytest.raises(ValueError, match="context=5"):
        scored_targets(5, 5)


def test_baselines_reject_ids_outside_the_vocabulary():
    with pytest.raises(ValueError, match="val_ids"):
        bigram_loss(torch.tensor([0, 1, 2]), torch.tensor([0, 5, 1]), 3, context=2)
    with pytest.raises(ValueError, match="train_ids"):
        unigram_loss(torch.tensor([[0, 1]]), torch.tensor([0, 1, 1]), 3, context=2)


def test_baselines_are_ordered_on_the_toy_corpus(toy_data):
    losses = baseline_losses(toy_data, CONTEXT)
    assert losses["bigram"] < losses["unigram"] < losses["uniform"] == pytest.approx(math.log(300))


def test_ngram_orders_one_and_two_match_hand_counts(toy_data):
    train = torch.tensor([0, 1, 0, 1, 0, 2, 0, 1])
    counts = NGramCounts(train, 3, 2)
    # unigram add-one: counts 4, 3, 1 over 8 tokens + 3
    assert counts.probability(1, (), 1.0) == pytest.approx(4 / 11)
    # bigram after 0: 1 three times, 2 once; strength 1 toward the unigram
    assert counts.probability(1, (0,), 1.0) == pytest.approx((3 + 4 / 11) / (4 + 1))
    # an unseen context (2 is followed by 0 only, 1 by 0 only) still gives a distribution
    assert sum(counts.probability(t, (2,), 0.5) for t in range(3)) == pytest.approx(1.0)
    val = torch.tensor([0, 1, 0, 2, 0])
    # windows of 3 tokens overlapping by one: targets 1|0, 0|1, then 2|0, 0|2
    pairs = ((1, 0), (0, 1), (2, 0), (0, 2))
    expected = -sum(math.log(counts.probability(t, (c,), 1.0)) for t, c in pairs) / 4
    assert ngram_loss(counts, val, 2, context=2, strength=1.0) == pytest.approx(expected)


def test_ngram_rows_sum_to_one_and_longer_contexts_help(toy_data):
    counts = NGramCounts(toy_data.train_ids, len(toy_data.tokenizer), 4)
    context = tuple(toy_data.train_ids[:3].tolist())
    total = sum(counts.probability(t, context, 0.3) for t in range(len(toy_data.tokenizer)))
    assert total == pytest.approx(1.0)
    ladder = ngram_ladder(toy_data, 16, orders=(1, 2, 4))
    assert ladder[1] > ladder[2] > ladder[4]


def test_entropy_floor_is_below_every_baseline(toy_data):
    floor = entropy_floor(TOY_CORPUS, toy_data)
    assert 0 < floor < min(ngram_ladder(toy_data, 16, orders=(1, 2, 4)).values())
    with pytest.raises(ValueError, match="held-out"):
        entropy_floor(CorpusConfig(n_paragraphs=61, vocab_size=300), toy_data)


def test_ngram_counts_take_a_numpy_order_and_refuse_a_float():
    assert NGramCounts(torch.tensor([0, 1, 2, 1]), 3, np.int64(2)).max_order == 2
    with pytest.raises(ValueError, match=r"max_order must be a positive integer, got 2\.0"):
        NGramCounts(torch.tensor([0, 1]), 3, 2.0)
