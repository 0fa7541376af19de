"""The capstone's corpus, cached training run and generation helpers, at toy sizes (baselines: test_ngram.py)."""

import importlib
import math

import pytest
import torch

import lib.capstone as capstone
from lib.capstone import (
    PARTS,
    CorpusConfig,
    prepare_data,
    time_generation,
    train_capstone,
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


def test_help_text_data_is_pythons_own_help_split_into_paragraphs():
    from pydoc_data.topics import topics

    data = capstone.help_text_data(vocab_size=300)
    first = topics[sorted(topics)[0]].strip().split("\n\n")[0].strip()
    assert data.train_text.startswith(first)
    assert data.tokenizer.decode(data.val_ids.tolist()) == data.val_text
    assert len(data.tokenizer) == 300


def test_the_cache_key_holds_the_cpu_kernel_family(toy_data, tmp_path, monkeypatch):
    # AVX-512 and AVX2 kernels train different runs: one must not load the other's weights
    calls = []
    real_train = capstone.train

    def counting_train(*args, **kwargs):
        calls.append(1)
        return real_train(*args, **kwargs)

    monkeypatch.setattr(capstone, "train", counting_train)
    options = dict(cache_dir=tmp_path, progress=False, data=toy_data)
    train_capstone(TOY_CORPUS, TOY_MODEL, TOY_TRAINING, **options)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "SOME_OTHER_KERNELS")
    train_capstone(TOY_CORPUS, TOY_MODEL, TOY_TRAINING, **options)
    train_capstone(TOY_CORPUS, TOY_MODEL, TOY_TRAINING, **options)
    assert len(calls) == 2


def test_losses_by_kind_splits_each_part_by_generator(toy_data, tmp_path):
    import random

    from lib import stories

    rng = random.Random(0)
    for write, name in ((stories.story, "story"), (stories.agreement, "agreement"), (stories.counting, "counting")):
        assert capstone.paragraph_kind(write(rng)) == name
    result = train_capstone(TOY_CORPUS, TOY_MODEL, TOY_TRAINING, data=toy_data, cache_dir=tmp_path, progress=False)
    losses = capstone.losses_by_kind(result.model, toy_data, context=16, n_training=20)
    held = toy_data.val_text.split("\n\n")[:-1]
    ids = torch.tensor(toy_data.tokenizer.encode("\n\n".join(held) + "\n\n"))
    assert losses["held-out"]["all"] == (
        pytest.approx(evaluate(result.model, ids, context=16, batch_size=16)),
        ids.numel(),
    )
    for part in ("training", "held-out"):
        assert list(losses[part]) == [*capstone.KINDS, "all"]
        assert all(math.isfinite(loss) or tokens <= 1 for loss, tokens in losses[part].values())
