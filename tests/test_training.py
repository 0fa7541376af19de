"""lib.training: the schedule by hand, batches, evaluation against cross-entropy, a toy run learned."""

import pytest
import torch
import torch.nn.functional as F

from lib.gpt import GPT, GPTConfig
from lib.training import TrainConfig, evaluate, learning_rate, random_batch, train


def _model(seed=0, **overrides):
    torch.manual_seed(seed)
    config = dict(vocab_size=50, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, max_len=40)
    return GPT(GPTConfig(**{**config, **overrides})).eval()


def test_learning_rate_schedule():
    config = TrainConfig(steps=101, lr=1.0, min_lr=0.1, warmup_steps=10)
    assert learning_rate(0, config) == pytest.approx(0.1)
    assert learning_rate(9, config) == pytest.approx(1.0)
    assert learning_rate(10, config) == pytest.approx(1.0)
    assert learning_rate(55, config) == pytest.approx(0.55)  # halfway down the cosine
    assert learning_rate(100, config) == pytest.approx(0.1)
    assert all(learning_rate(s, config) >= learning_rate(s + 1, config) for s in range(10, 100))


def test_random_batch_targets_are_shifted_inputs():
    ids = torch.arange(100)
    inputs, targets = random_batch(ids, context=8, batch_size=4, generator=torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (4, 8)
    assert torch.equal(targets, inputs + 1)
    again, _ = random_batch(ids, context=8, batch_size=4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(inputs, again)
    with pytest.raises(ValueError, match="needs 9"):
        random_batch(torch.arange(8), context=8, batch_size=1, generator=torch.Generator())


def test_evaluate_equals_cross_entropy_by_hand():
    model = _model()
    ids = torch.randint(0, 50, (33,), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        windows = ids[:32].view(4, 8), ids[1:33].view(4, 8)
        expected = F.cross_entropy(model(windows[0]).flatten(0, 1), windows[1].flatten()).item()
    assert evaluate(model, ids, context=8, batch_size=3) == pytest.approx(expected, rel=1e-5)


def test_training_learns_a_repeating_pattern_and_is_seeded():
    """A toy stream (a repeated 12-token cycle) is learned well below the uniform loss ln(V)."""
    pattern = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8])
    train_ids, val_ids = pattern.repeat(40), pattern.roll(5).repeat(10)
    config = TrainConfig(
        steps=40, batch_size=8, context=16, lr=1e-2, min_lr=1e-3, warmup_steps=5, eval_every=10, eval_batches=2
    )
    runs = []
    for _ in range(2):
        model = _model(seed=0, vocab_size=10, max_len=32)
        history = train(model, train_ids, val_ids, config, progress=False)
        runs.append((history, model))
    history = runs[0][0]
    assert len(history["train_loss"]) == 40 and history["val_steps"] == [0, 10, 20, 30, 40]
    assert history["val_loss"][0] > 2.0  # about ln(10) = 2.30 at initialization
    assert history["val_loss"][-1] < 0.5
    assert history["train_loss"] == runs[1][0]["train_loss"]  # the seed fixes the whole run
    assert not runs[0][1].training
