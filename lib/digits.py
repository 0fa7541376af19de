"""Scikit-learn's 8×8 digits as a small image benchmark that trains on a CPU (chapter 8).

Everything here is model-agnostic: a fixed, stratified held-out split; a convolutional
baseline, ``SmallCNN``; and one training loop, ``fit_classifier``, that trains any
classifier of images (B, 1, 8, 8) -> logits (B, K) the same way and caches its weights
with ``lib.trained``. ``train_digits`` uses it for the vision transformer (``lib.vit.ViT``), and
``train_digits_baseline`` for the CNN, so the two are trained exactly alike. The data and
the training live here; ``lib.vit`` holds the model alone and does not import this module.

Shape letters used in the comments:
    B    batch          K    classes (10 digits)         w    CNN width (channels)
    n_train, n_test     images in the training and held-out parts of the split
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.validation import is_integer
from lib.vit import MeanPoolViT, ViT

__all__ = [
    "cnn_variant_logits",
    "DigitsSplit",
    "load_digits_split",
    "accuracy",
    "DigitsResult",
    "TRAINING",
    "fit_classifier",
    "SmallCNN",
    "train_digits_baseline",
    "train_digits",
    "shifted",
]


# --- The data ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class DigitsSplit:
    train_images: torch.Tensor  # (n_train, 1, 8, 8), scaled to [-1, 1]
    train_labels: torch.Tensor  # (n_train,)
    test_images: torch.Tensor  # (n_test, 1, 8, 8), held out: never trained on
    test_labels: torch.Tensor  # (n_test,)


def load_digits_split(test_fraction: float = 0.2, seed: int = 0) -> DigitsSplit:
    """The 1,797 8×8 digits that ship inside scikit-learn, split once, stratified by class.

    Pixels are 0..16 in the data set; we map them to [-1, 1]. Nothing is downloaded.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction!r}")
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32)[:, None] / 8.0 - 1.0  # (1797, 1, 8, 8)
    labels = torch.tensor(digits.target, dtype=torch.long)  # (1797,)
    train_index, test_index = train_test_split(
        torch.arange(len(labels)).numpy(), test_size=test_fraction, random_state=seed, stratify=digits.target
    )
    train_index, test_index = torch.from_numpy(train_index), torch.from_numpy(test_index)
    return DigitsSplit(images[train_index], labels[train_index], images[test_index], labels[test_index])


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction of ``images`` whose highest logit is the right label."""
    was_training = model.training
    model.eval()
    correct = (model(images).argmax(dim=-1) == labels).float().mean().item()
    model.train(was_training)
    return correct


# --- Training ---------------------------------------------------------------------------------
@dataclass
class DigitsResult:
    model: nn.Module  # trained, in eval mode
    test_accuracy: float  # on the held-out split
    losses: list[float]  # mean training loss per epoch
    test_accuracies: list[float]  # held-out accuracy after each epoch (watched, never used to choose)
    config: dict
    n_parameters: int


# Shared by every model trained here. "recipe" is part of every cache key: bump it when the
# training code or a model's code changes, so that weights trained by the old code are not reused.
TRAINING = {
    "recipe": 1,
    "epochs": 40,
    "lr": 3e-3,
    "weight_decay": 0.05,
    "batch_size": 64,
    "test_fraction": 0.2,
    "split_seed": 0,
}


def _interactive() -> bool:
    """A terminal or a notebook kernel is watching: worth drawing a progress bar."""
    if sys.stderr is not None and sys.stderr.isatty():
        return True
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return getattr(shell, "kernel", None) is not None


def _train(model: nn.Module, split: DigitsSplit, config: dict, progress: bool) -> dict:
    """AdamW with a one-cycle schedule over shuffled mini-batches; returns what the cache stores."""
    from tqdm.auto import tqdm

    generator = torch.Generator().manual_seed(config["seed"])  # the data order
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=config["weight_decay"])
    n_train, batch_size = len(split.train_labels), config["batch_size"]
    steps_per_epoch = math.ceil(n_train / batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, config["lr"], total_steps=config["epochs"] * steps_per_epoch, pct_start=0.1
    )
    losses, test_accuracies = [], []
    bar = tqdm(range(config["epochs"]), desc=f"training {config['model']}", disable=not progress, leave=False)
    for _ in bar:
        model.train()
        order = torch.randperm(n_train, generator=generator)  # (n_train,)
        total = 0.0
        for start in range(0, n_train, batch_size):
            batch = order[start : start + batch_size]  # (b,)
            loss = F.cross_entropy(model(split.train_images[batch]), split.train_labels[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.item() * len(batch)
        losses.append(total / n_train)
        test_accuracies.append(accuracy(model, split.test_images, split.test_labels))
        bar.set_postfix(loss=f"{losses[-1]:.3f}", held_out=f"{test_accuracies[-1]:.3f}")
    bar.close()
    return {"state": model.state_dict(), "losses": losses, "test_accuracies": test_accuracies}


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run torch on one CPU thread, then restore the previous count.

    Why: the matrices of a model this small are too small to split usefully between
    threads, and every operation makes the threads wait for one another. On a busy shared
    machine that wait dominates: one training step of the default ViT took 47 ms on one
    thread and 900 ms on two, measured side by side on the 2-core machine this book is
    built on while other jobs ran.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fit_classifier(
    name: str, build: Callable[[], nn.Module], config: dict, *, progress: bool | None = None, retrain: bool = False
) -> DigitsResult:
    """Train ``build()`` on the digits split under ``config`` (cached), and measure it held out.

    ``config`` holds every setting of the run: ``TRAINING``'s keys, a "model" name, the
    "seed" and the model's own settings. It is the cache key (with ``name``), so a second
    call with the same settings loads the weights instead of training. ``progress`` draws
    a tqdm bar (default: when a terminal or notebook is watching).
    """
    from lib.trained import cached

    missing = sorted((set(TRAINING) | {"model", "seed"}) - set(config))
    if missing:
        raise ValueError(f"config is missing the training settings {missing} (got keys {sorted(config)})")
    split = load_digits_split(config["test_fraction"], config["split_seed"])
    # fork_rng: init and dropout draw from the global RNG; seed it here, restore it after.
    with torch.random.fork_rng(devices=[]), _one_thread():
        torch.manual_seed(config["seed"])
        model = build()
        progress = _interactive() if progress is None else progress
        stored = cached(name, config, lambda: _train(model, split, config, progress), retrain=retrain)
    model.load_state_dict(stored["state"])
    model.eval()
    return DigitsResult(
        model=model,
        test_accuracy=accuracy(model, split.test_images, split.test_labels),
        losses=list(stored["losses"]),
        test_accuracies=list(stored["test_accuracies"]),
        config=dict(config),
        n_parameters=sum(p.numel() for p in model.parameters()),
    )


# --- The convolutional baseline ---------------------------------------------------------------
class SmallCNN(nn.Module):
    """A small convolutional baseline for the 8×8 digits, about the size of chapter 8's ViT.

    Its priors are built in: 3×3 kernels see only neighbouring pixels (locality), every
    position shares them (translation equivariance), and pooling discards where a feature was.
    """

    def __init__(self, in_channels: int = 1, n_classes: int = 10, width: int = 32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1),  # (B, w, 8, 8)
            nn.GELU(),
            nn.Conv2d(width, 2 * width, 3, padding=1),  # (B, 2w, 8, 8)
            nn.GELU(),
            nn.MaxPool2d(2),  # (B, 2w, 4, 4)
            nn.Conv2d(2 * width, width, 3, padding=1),  # (B, w, 4, 4)
            nn.GELU(),
            nn.AdaptiveAvgPool2d(1),  # (B, w, 1, 1)
        )
        self.head = nn.Linear(width, n_classes)  # w -> K

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).flatten(1))  # (B, K)


@torch.no_grad()
def cnn_variant_logits(
    model: SmallCNN, images: torch.Tensor, first_padding: float = 0.0, pool_rows: slice | None = None
) -> torch.Tensor:
    """A trained ``SmallCNN``'s logits with two of its choices changed at evaluation time:
    its first convolution padded with ``first_padding`` instead of zeros (blank paper is
    -1), and its final average pool taken over the rows and columns ``pool_rows`` of the
    last feature map only (for an image on a larger canvas, the digit's own positions).
    With the defaults it is the model's own forward pass."""
    if not isinstance(model, SmallCNN):
        raise TypeError(f"model must be a SmallCNN, got {type(model).__name__}")
    layers = list(model.features)
    conv = layers[0]
    x = F.conv2d(F.pad(images, (1, 1, 1, 1), value=float(first_padding)), conv.weight, conv.bias)
    for layer in layers[1:-1]:  # everything up to the average pool
        x = layer(x)
    if pool_rows is not None:
        x = x[..., pool_rows, pool_rows]
        if x.shape[-1] == 0:
            raise ValueError(f"pool_rows {pool_rows} selects no position of the {tuple(x.shape)} map")
    return model.head(x.mean(dim=(-2, -1)))


def train_digits_baseline(
    seed: int = 0,
    *,
    width: int = 32,
    epochs: int = TRAINING["epochs"],
    progress: bool | None = None,
    retrain: bool = False,
) -> DigitsResult:
    """``SmallCNN`` trained exactly like ``train_digits``: same split, optimizer, schedule, epochs."""
    config = {"model": "cnn", "seed": seed, "width": width, **TRAINING, "epochs": epochs}
    return fit_classifier("cnn-digits", lambda: SmallCNN(1, 10, width), config, progress=progress, retrain=retrain)


def train_digits(
    seed: int = 0,
    *,
    patch: int = 2,
    d_model: int = 48,
    n_layers: int = 2,
    n_heads: int = 4,
    hidden: int = 96,
    dropout: float = 0.1,
    epochs: int = TRAINING["epochs"],
    pool: str = "class",
    progress: bool | None = None,
    retrain: bool = False,
) -> DigitsResult:
    """Train a small ViT on scikit-learn's 8×8 digits; report accuracy on the held-out fifth.

    At p=2 an image is 16 patch tokens of 4 pixels, plus the class token. Training
    (``fit_classifier``, on one CPU thread) takes about 20 s of CPU time. The
    weights are cached on disk (``lib.trained``) under a key made of every setting below,
    so a second call with the same settings loads them instead of training. ``progress``
    draws a tqdm bar (default: when a terminal or notebook is watching). ``pool="mean"``
    trains ``lib.vit.MeanPoolViT`` instead: no class token, the mean patch token classified.
    """
    if pool not in ("class", "mean"):
        raise ValueError(f"pool must be 'class' or 'mean', got {pool!r}")
    config = {
        "model": "vit",
        "seed": seed,
        "patch": patch,
        "d_model": d_model,
        "n_layers": n_layers,
        "n_heads": n_heads,
        "hidden": hidden,
        "dropout": dropout,
        **TRAINING,
        "epochs": epochs,
    }
    if pool != "class":
        config["pool"] = pool  # only then: the class-token runs keep the cache keys they had

    def build() -> ViT:
        model = MeanPoolViT if pool == "mean" else ViT
        return model(8, patch, 1, 10, d_model, n_layers, n_heads, hidden=hidden, dropout=dropout)

    return fit_classifier("vit-digits", build, config, progress=progress, retrain=retrain)


def shifted(images: torch.Tensor, dx: int) -> torch.Tensor:
    """(B, C, H, W) images moved ``dx`` pixels to the right; the columns uncovered on the left are background.

    Background is each image's lowest value (the digits' blank paper, -1 after scaling);
    the ``dx`` rightmost columns fall off the edge.
    """
    if images.ndim != 4:
        raise ValueError(f"images must have shape (B, C, H, W), got {tuple(images.shape)}")
    if not is_integer(dx) or not 0 <= dx < images.shape[-1]:
        raise ValueError(f"dx must be an integer in 0..{images.shape[-1] - 1} (the width W - 1), got {dx!r}")
    background = images.amin(dim=(1, 2, 3), keepdim=True).expand_as(images)  # (B, C, H, W)
    out = background.clone()
    out[..., dx:] = images[..., : images.shape[-1] - dx]
    return out
