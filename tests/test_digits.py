"""lib.digits: the held-out split, accuracy by hand, the shared training loop and its cache."""

import numpy as np
import pytest
import torch
import torch.nn as nn

import lib.trained
from lib.digits import (
    TRAINING,
    SmallCNN,
    accuracy,
    cnn_variant_logits,
    fit_classifier,
    load_digits_split,
    train_digits,
    train_digits_baseline,
)
from lib.vit import ViT


def test_digits_split_is_stratified_held_out_and_local():
    split = load_digits_split()
    assert split.train_images.shape == (1437, 1, 8, 8) and split.test_images.shape == (360, 1, 8, 8)
    assert split.train_images.min() == -1.0 and split.train_images.max() == 1.0
    counts = torch.bincount(split.test_labels, minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37  # every digit about a tenth of the held-out set
    train_rows = {tuple(row.tolist()) for row in split.train_images.flatten(1)}
    overlap = sum(tuple(row.tolist()) in train_rows for row in split.test_images.flatten(1))
    assert overlap == 0  # no held-out image also appears among the training images


def test_split_matches_scikit_learn_pixels():
    from sklearn.datasets import load_digits

    split = load_digits_split()
    raw = {tuple(row) for row in load_digits().images.reshape(-1, 64).astype(int).tolist()}
    back = ((split.test_images.flatten(1) + 1.0) * 8.0).round().int().tolist()  # undo the [-1, 1] scaling
    assert all(tuple(row) in raw for row in back)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_bad_test_fraction_is_named(fraction):
    with pytest.raises(ValueError, match="test_fraction"):
        load_digits_split(fraction)


class FixedLogits(nn.Module):
    """Returns the logits it was built with, whatever the images: accuracy can be counted by hand."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, images):
        return self.logits[: len(images)]


def test_accuracy_counted_by_hand_and_mode_restored():
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0], [0.0, 0.0, 5.0], [1.0, 0.5, 0.0]])  # argmax 1, 0, 2, 0
    labels = torch.tensor([1, 0, 1, 2])
    model = FixedLogits(logits).train()
    assert accuracy(model, torch.zeros(4, 1, 8, 8), labels) == 0.5
    assert model.training  # accuracy evaluates in eval mode, then puts the mode back


def test_small_cnn_shapes():
    assert SmallCNN()(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    assert SmallCNN(in_channels=2, n_classes=4, width=8)(torch.zeros(1, 2, 8, 8)).shape == (1, 4)


def tiny_config(epochs=3, seed=0):
    return {"model": "linear", "seed": seed, **TRAINING, "epochs": epochs}


def linear_model():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 10))


def test_fit_classifier_trains_measures_and_caches(tmp_path, monkeypatch):
    monkeypatch.setattr(lib.trained, "CACHE_DIR", tmp_path)
    threads, rng = torch.get_num_threads(), torch.random.get_rng_state()
    result = fit_classifier("linear-digits", linear_model, tiny_config(), progress=False)
    assert torch.get_num_threads() == threads  # the one-thread setting is undone
    assert torch.equal(torch.random.get_rng_state(), rng)  # and the caller's RNG is untouched

    assert len(result.losses) == 3 and result.losses[-1] < result.losses[0]
    assert len(result.test_accuracies) == 3 and not result.model.training
    assert result.n_parameters == 64 * 10 + 10
    # the held-out accuracy, recounted with numpy from the model's logits
    split = load_digits_split()
    with torch.no_grad():
        predicted = result.model(split.test_images).numpy().argmax(axis=1)
    assert result.test_accuracy == pytest.approx(np.mean(predicted == split.test_labels.numpy()))
    assert result.test_accuracy > 0.7  # three epochs of a linear classifier: far above 10% guessing

    assert len(list(tmp_path.glob("linear-digits-*.pt"))) == 1
    again = fit_classifier("linear-digits", linear_model, tiny_config(), progress=False)  # loads
    assert again.losses == result.losses
    assert all(torch.equal(a, b) for a, b in zip(again.model.parameters(), result.model.parameters(), strict=True))
    other = fit_classifier("linear-digits", linear_model, tiny_config(seed=1), progress=False)
    assert len(list(tmp_path.glob("linear-digits-*.pt"))) == 2  # another seed is another cache entry
    assert other.losses != result.losses


def test_fit_classifier_names_missing_settings():
    with pytest.raises(ValueError, match=r"missing the training settings \['lr'"):
        fit_classifier("x", linear_model, {k: v for k, v in tiny_config().items() if k != "lr"})


def test_cnn_baseline_reaches_97_percent_held_out():
    """Trains once (well under a minute on one core) and caches; the chapter reuses the cache."""
    result = train_digits_baseline(seed=0)
    assert isinstance(result.model, SmallCNN) and not result.model.training
    assert result.test_accuracy >= 0.97, result.test_accuracy
    assert result.config["epochs"] == TRAINING["epochs"] == len(result.losses)


def test_train_digits_reaches_97_percent_held_out():
    """Trains once (about half a minute on one core) and caches; the chapter reuses the cache."""
    result = train_digits(seed=0)
    assert result.test_accuracy >= 0.97, result.test_accuracy
    assert len(result.losses) == result.config["epochs"] and result.losses[-1] < result.losses[0] / 5
    assert isinstance(result.model, ViT) and not result.model.training
    again = train_digits(seed=0)  # loaded from the cache: same weights
    assert again.test_accuracy == result.test_accuracy
    ours, theirs = again.model.state_dict(), result.model.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[name], theirs[name]) for name in ours)


def test_shifted_moves_columns_right_and_fills_with_background():
    from lib.digits import shifted

    images = torch.arange(2 * 1 * 2 * 3, dtype=torch.float32).reshape(2, 1, 2, 3)
    out = shifted(images, 1)
    assert torch.equal(out[0, 0], torch.tensor([[0.0, 0.0, 1.0], [0.0, 3.0, 4.0]]))
    assert torch.equal(out[1, 0], torch.tensor([[6.0, 6.0, 7.0], [6.0, 9.0, 10.0]]))
    assert torch.equal(shifted(images, 0), images)
    with pytest.raises(ValueError, match="dx"):
        shifted(images, 3)


def test_shifted_takes_a_numpy_shift_and_refuses_a_bool():
    from lib.digits import shifted

    images = torch.rand(1, 1, 4, 4)
    assert torch.equal(shifted(images, np.int64(1)), shifted(images, 1))
    with pytest.raises(ValueError, match=r"dx must be an integer in 0\.\.3"):
        shifted(images, True)


def test_cnn_variant_logits_is_the_forward_pass_by_default_and_changes_what_it_says():
    torch.manual_seed(0)
    model = SmallCNN(width=4).eval()
    images = torch.rand(3, 1, 8, 8) * 2 - 1
    assert torch.allclose(cnn_variant_logits(model, images), model(images), atol=1e-6)
    # padding with -1 equals padding the image by hand and convolving without padding
    padded = torch.nn.functional.pad(images, (1, 1, 1, 1), value=-1.0)
    conv = model.features[0]
    manual = torch.nn.functional.conv2d(padded, conv.weight, conv.bias)
    x = manual
    for layer in list(model.features)[1:-1]:
        x = layer(x)
    expected = model.head(x.mean(dim=(-2, -1)))
    assert torch.allclose(cnn_variant_logits(model, images, first_padding=-1.0), expected, atol=1e-6)
    # pooling over every row and column of the 4 x 4 map is the model's own pool
    assert torch.allclose(cnn_variant_logits(model, images, pool_rows=slice(0, 4)), model(images), atol=1e-6)
    assert not torch.allclose(cnn_variant_logits(model, images, pool_rows=slice(1, 3)), model(images), atol=1e-6)
    with pytest.raises(ValueError, match="selects no position"):
        cnn_variant_logits(model, images, pool_rows=slice(9, 12))
    with pytest.raises(TypeError, match="model must be a SmallCNN"):
        cnn_variant_logits(torch.nn.Linear(2, 2), images)
