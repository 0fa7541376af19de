"""The capstone's corpus, baselines and cached training run, at toy sizes."""

import importlib
import math

import pytest
import torch
import torch.nn as nn

import lib.capstone as capstone
from lib.capstone import (
    PARTS,
    CorpusConfig,
    _bigram_loss_loop,
    baseline_losses,
    bigram_loss,
    prepare_data,
    scored_targets,
    time_generation,
    train_capstone,
    uniform_loss,
    unigram_loss,
)
from lib.stories import tiny_stories
from lib.training import TrainConfig, evaluate

TOY_CORPUS = CorpusConfig(n_paragraphs=60, vocab_size=300)
TOY_MODEL = dict(n_layers=1, d_model=16, n_heads=2, n_kv_heads=1, max_len=64)
TOY_TRAINING = TrainConfig(steps=20, batch_size=4, context=16, lr=1e-2, min_lr=1e-3, warmup_steps=3,
                           eval_every=10, eval_batches=2)  # fmt: skip


@pytest.fixture(scope="module")
def toy_data():
    return prepare_data(TOY_CORPUS)


def test_bad_sizes_raise():
    with pytest.raises(ValueError, match="held_out"):
        CorpusConfig(held_out=1.0)
    with pytest.raises(ValueError, match="vocab_size"):
        uniform_loss(0)


def test_data_round_trips_and_held_out_is_apart(toy_data):
    tokenizer = toy_data.tokenizer
    assert len(tokenizer) == TOY_CORPUS.vocab_size
    assert tokenizer.decode(toy_data.train_ids.tolist()) == toy_data.train_text
    assert tokenizer.decode(toy_data.val_ids.tolist()) == toy_data.val_text
    paragraphs = tiny_stories(TOY_CORPUS.n_paragraphs, TOY_CORPUS.seed)
    assert toy_data.val_text.strip() == "\n\n".join(paragraphs[-6:])  # the last 10% (none seen in training)
    assert toy_data.train_text.strip() == "\n\n".join(paragraphs[:-6])
    assert toy_data.fingerprint == prepare_data(TOY_CORPUS).fingerprint


def test_held_out_paragraphs_seen_in_training_are_dropped():
    """Counting lines repeat (the grammar has only 420): a held-out copy of a training line is dropped."""
    config = CorpusConfig(n_paragraphs=200, vocab_size=260)
    paragraphs = tiny_stories(config.n_paragraphs, config.seed)
    train_part, last = paragraphs[:-20], paragraphs[-20:]
    repeated = [p for p in last if p in set(train_part)]
    assert len(repeated) == 1 and repeated[0].startswith("Count by")  # the case this test is about
    data = prepare_data(config)
    held_out = data.val_text.strip().split("\n\n")
    assert held_out == [p for p in last if p not in repeated]
    assert not set(held_out) & set(data.train_text.strip().split("\n\n"))
    assert data.repeats_dropped == 1


def test_bigram_next_probabilities_counts_followers(toy_data):
    tokenizer = toy_data.tokenizer
    ids = toy_data.train_ids.tolist()
    prompt = "The dog that the cat"
    previous = tokenizer.encode(prompt)[-1]
    followers = [b for a, b in zip(ids[:-1], ids[1:], strict=True) if a == previous]  # a plain loop
    candidates = [tokenizer.decode([t]) for t in sorted(set(followers))[:3]]
    assert len(candidates) >= 2 and all(len(tokenizer.encode(c)) == 1 for c in candidates)
    p = capstone.bigram_next_probabilities(toy_data, prompt, candidates)
    for text in candidates:
        (token,) = tokenizer.encode(text)
        assert p[text] == pytest.approx(followers.count(token) / len(followers))
    with pytest.raises(ValueError, match="exactly one"):
        capstone.bigram_next_probabilities(toy_data, "The", [" happy dog"])


# --- baselines --------------------------------------------------------------------------------
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
    losses = baseline_losses(toy_data, TOY_TRAINING.context)
    assert losses["bigram"] < losses["unigram"] < losses["uniform"] == pytest.approx(math.log(300))


# --- the cached run ---------------------------------------------------------------------------
def test_train_capstone_trains_once_then_loads(toy_data, tmp_path, monkeypatch):
    calls, threads_before, rng_before = [], torch.get_num_threads(), torch.random.get_rng_state()
    real_train = capstone.train
    monkeypatch.setattr(capstone, "train", lambda *a, **k: calls.append(1) or real_train(*a, **k))
    first = train_capstone(TOY_CORPUS, TOY_MODEL, TOY_TRAINING, data=toy_data, cache_dir=tmp_path, progress=False)
    second = train_capstone(TOY_CORPUS, TOY_MODEL, TOY_TRAINING, data=toy_data, cache_dir=tmp_path, progress=False)
    assert len(calls) == 1
    assert torch.equal(torch.random.get_rng_state(), rng_before)  # seeding the weights left ours alone
    for name, tensor in first.model.state_dict().items():
        assert torch.equal(tensor, second.model.state_dict()[name]), name
    history = second.history
    assert history["val_steps"] == [0, 10, 20]
    assert history["val_loss"][-1] < history["val_loss"][0]  # it learned something
    assert history["val_loss"][0] == pytest.approx(math.log(300), abs=0.1)  # starts near a uniform guess
    full = evaluate(second.model, toy_data.val_ids, context=TOY_TRAINING.context, batch_size=4)
    assert history["val_loss_full"] == pytest.approx(full, abs=1e-5)
    assert torch.get_num_threads() == threads_before  # restored after training on one thread
    other = TrainConfig(**{**TOY_TRAINING.__dict__, "steps": 10})
    train_capstone(TOY_CORPUS, TOY_MODEL, other, data=toy_data, cache_dir=tmp_path, progress=False)
    assert len(calls) == 2  # a new configuration trains again


def test_generation_with_and_without_the_cache(toy_data, tmp_path):
    result = train_capstone(TOY_CORPUS, TOY_MODEL, TOY_TRAINING, data=toy_data, cache_dir=tmp_path, progress=False)
    prompt = torch.tensor([result.tokenizer.encode("Once upon a time")])
    timing = time_generation(result.model, prompt, 12, repeats=1)
    assert timing["same_tokens"] is True
    assert timing["cached_s"] > 0 and timing["uncached_s"] > 0


def test_parts_name_real_modules():
    for part, modules, chapter in PARTS:
        assert 1 <= chapter <= 9, part
        for name in modules.split(", "):
            importlib.import_module(name)


def test_ngram_orders_one_and_two_match_hand_counts(toy_data):
    from lib.capstone import NGramCounts, ngram_loss

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
    from lib.capstone import NGramCounts, ngram_ladder

    counts = NGramCounts(toy_data.train_ids, len(toy_data.tokenizer), 4)
    context = tuple(toy_data.train_ids[:3].tolist())
    total = sum(counts.probability(t, context, 0.3) for t in range(len(toy_data.tokenizer)))
    assert total == pytest.approx(1.0)
    ladder = ngram_ladder(toy_data, 16, orders=(1, 2, 4))
    assert ladder[1] > ladder[2] > ladder[4]


def test_entropy_floor_is_below_every_baseline(toy_data):
    from lib.capstone import entropy_floor, ngram_ladder

    floor = entropy_floor(TOY_CORPUS, toy_data)
    assert 0 < floor < min(ngram_ladder(toy_data, 16, orders=(1, 2, 4)).values())
    with pytest.raises(ValueError, match="held-out"):
        entropy_floor(CorpusConfig(n_paragraphs=61, vocab_size=300), toy_data)


def test_sampling_probabilities_are_what_sample_next_draws():
    from lib.capstone import sampling_probabilities
    from lib.gpt import sample_next

    logits = torch.tensor([2.0, 1.6, 1.4, 0.0, -1.0])
    probs = sampling_probabilities(logits[None], 0.5, 3)[0]
    assert probs[3:].sum() == 0 and probs.sum() == pytest.approx(1.0)
    draws = sample_next(logits.expand(40_000, -1), temperature=0.5, top_k=3, generator=torch.Generator().manual_seed(0))
    frequencies = torch.bincount(draws, minlength=5).float() / 40_000
    assert torch.allclose(frequencies, probs, atol=0.01)
    with pytest.raises(ValueError, match="temperature"):
        sampling_probabilities(logits[None], 0.0)


def test_text_data_splits_any_text_like_prepare_data():
    from lib.capstone import text_data

    paragraphs = [f"Paragraph {i} says {'ab' * (i % 5)} and more." for i in range(40)] + ["Paragraph 0 says  and more."]
    data = text_data("\n\n".join(paragraphs), held_out=0.1, vocab_size=280)
    assert data.tokenizer.decode(data.train_ids.tolist()) == data.train_text
    assert data.tokenizer.decode(data.val_ids.tolist()) == data.val_text
    assert all(p not in data.train_text.split("\n\n") for p in data.val_text.split("\n\n") if p)
    assert data.repeats_dropped == 1  # the last paragraph repeats the first
    with pytest.raises(ValueError, match="text"):
        text_data("   ")
