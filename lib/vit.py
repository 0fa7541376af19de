"""The vision transformer: an image read as a sequence of patch tokens (chapter 8).

A ViT (Dosovitskiy et al., 2020) cuts an image into non-overlapping p×p patches, flattens
each patch, projects it to the model width d with one shared linear map, prepends a
learned class token, adds learned positions, and runs ordinary transformer blocks
(``lib.blocks``). The class token's final state goes through a norm and a linear head.

    images (B, C, H, W) -> patches (B, N, C·p·p) -> tokens (B, N, d) -> (B, 1 + N, d)
        -> blocks -> norm -> class token (B, d) -> logits (B, K)

The shared projection of non-overlapping patches is exactly a convolution with kernel p
and stride p: ``PatchEmbed.to_conv`` builds that ``nn.Conv2d`` and the tests compare them.

Shape letters used in the comments:
    B    batch                  C    channels (3 for RGB, 1 for the digits)
    H, W image height and width in pixels          p    patch side in pixels
    Hp, Wp  patches per column and per row (H/p, W/p)   N    patches, Hp·Wp
    d    model width            T    tokens, 1 + N with the class token
    K    classes                L    layers          h    attention heads
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.attention import attention
from lib.blocks import Block, LayerNorm

__all__ = [
    "patch_grid",
    "patchify",
    "patchify_loop",
    "conv_weight",
    "PatchEmbed",
    "PatchCost",
    "patch_cost",
    "ViT",
    "SmallCNN",
    "DigitsSplit",
    "load_digits_split",
    "accuracy",
    "DigitsResult",
    "train_digits",
    "train_digits_baseline",
]


# --- Patches ----------------------------------------------------------------------------------
def _pair(name: str, value: int | tuple[int, int]) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value
    if (
        not isinstance(pair, (tuple, list))
        or len(pair) != 2
        or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1 for v in pair)
    ):
        raise ValueError(f"{name} must be a positive integer or a pair (height, width) of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def patch_grid(image_size: int | tuple[int, int], patch: int) -> tuple[int, int]:
    """(Hp, Wp): how many p×p patches fit down and across an image of ``image_size`` pixels.

    The patches must tile the image exactly: 224 at p=16 gives (14, 14), 196 patches; 225
    at p=16 raises, rather than silently dropping the last column of pixels.
    """
    height, width = _pair("image_size", image_size)
    if isinstance(patch, bool) or not isinstance(patch, numbers.Integral) or patch < 1:
        raise ValueError(f"patch must be a positive integer, got {patch!r}")
    if height % patch or width % patch:
        raise ValueError(
            f"image size {height}x{width} is not a multiple of the patch size {patch}: "
            f"{height} % {patch} = {height % patch}, {width} % {patch} = {width % patch}"
        )
    return height // patch, width // patch


def _check_images(images: object, patch: int) -> tuple[int, int, int, int]:
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    if images.ndim != 4:
        raise ValueError(f"images must have shape (B, C, H, W), got {tuple(images.shape)} ({images.ndim}-D)")
    batch, channels, height, width = images.shape
    patch_grid((height, width), patch)  # raises, naming both sizes, if the patches do not tile the image
    return batch, channels, height, width


def patchify(images: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C·p·p): non-overlapping p×p patches in row-major order.

    Patch n covers rows (n // Wp)·p ... +p and columns (n % Wp)·p ... +p, and is flattened in
    (C, p, p) order: channel first, then row, then column. That is the order in which
    ``nn.Conv2d`` lays out its kernel (d, C, p, p), so a linear map of these vectors equals
    the strided convolution with the same weights reshaped.

    Subtle: ``images.reshape(B, N, C·p·p)`` also runs and returns the right shape, but each
    "patch" it makes is a strip of consecutive pixels of one row, not a square.
    """
    batch, channels, height, width = _check_images(images, patch)
    rows, cols = height // patch, width // patch
    grid = images.reshape(batch, channels, rows, patch, cols, patch)  # (B, C, Hp, p, Wp, p)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # (B, Hp, Wp, C, p, p): patch position first, contents last
    return grid.reshape(batch, rows * cols, channels * patch * patch)  # (B, N, C·p·p)


def patchify_loop(images: torch.Tensor, patch: int) -> torch.Tensor:
    """The plain twin of ``patchify``: cut each patch out with slicing, one at a time."""
    batch, channels, height, width = _check_images(images, patch)
    patches = []
    for top in range(0, height, patch):  # row-major: finish a row of patches before the next
        for left in range(0, width, patch):
            square = images[:, :, top : top + patch, left : left + patch]  # (B, C, p, p)
            patches.append(square.reshape(batch, channels * patch * patch))  # (B, C·p·p)
    return torch.stack(patches, dim=1)  # (B, N, C·p·p)


def conv_weight(linear_weight: torch.Tensor, in_channels: int, patch: int) -> torch.Tensor:
    """A patch projection's ``nn.Linear`` weight (d, C·p·p) as a ``nn.Conv2d`` kernel (d, C, p, p).

    A plain reshape, because ``patchify`` flattens each patch in the kernel's own (C, p, p)
    order. Subtle: ``nn.Linear`` stores its weight as (out, in) = (d, C·p·p); transposing
    it first gives the right number of entries in the wrong places.
    """
    if not isinstance(linear_weight, torch.Tensor) or linear_weight.ndim != 2:
        raise ValueError(
            f"linear_weight must be a (d, C·p·p) matrix, got {getattr(linear_weight, 'shape', linear_weight)}"
        )
    if linear_weight.shape[1] != in_channels * patch * patch:
        raise ValueError(
            f"linear_weight has {linear_weight.shape[1]} inputs, but C·p·p = {in_channels}·{patch}·{patch} = "
            f"{in_channels * patch * patch} (linear_weight: {tuple(linear_weight.shape)})"
        )
    return linear_weight.reshape(linear_weight.shape[0], in_channels, patch, patch)  # (d, C, p, p)


class PatchEmbed(nn.Module):
    """One linear projection shared by every patch: (B, C, H, W) -> (B, N, d).

    ``proj`` is an ``nn.Linear(C·p·p, d)``. ``to_conv()`` returns the equal
    ``nn.Conv2d(C, d, kernel_size=p, stride=p)``; ``from_conv`` goes the other way.
    """

    def __init__(self, image_size: int | tuple[int, int], patch: int, in_channels: int, d_model: int):
        super().__init__()
        self.image_size = _pair("image_size", image_size)
        self.grid = patch_grid(self.image_size, patch)  # (Hp, Wp)
        for name, value in (("in_channels", in_channels), ("d_model", d_model)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"PatchEmbed: {name} must be a positive integer, got {value!r}")
        self.patch, self.in_channels, self.d_model = patch, in_channels, d_model
        self.n_patches = self.grid[0] * self.grid[1]
        self.patch_length = in_channels * patch * patch
        self.proj = nn.Linear(self.patch_length, d_model)  # C·p·p -> d

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        _check_images(images, self.patch)
        expected = (self.in_channels, *self.image_size)
        if tuple(images.shape[1:]) != expected:
            raise ValueError(
                f"PatchEmbed was built for images (B, C, H, W) = (B, {expected[0]}, {expected[1]}, {expected[2]}), "
                f"got {tuple(images.shape)}"
            )
        return self.proj(patchify(images, self.patch))  # (B, N, d)

    def to_conv(self) -> nn.Conv2d:
        """The ``nn.Conv2d(C, d, kernel_size=p, stride=p)`` that computes the same thing.

        Its output (B, d, Hp, Wp) flattened to (B, d, N) and transposed is ``self(images)``.
        """
        conv = nn.Conv2d(self.in_channels, self.d_model, kernel_size=self.patch, stride=self.patch)
        conv = conv.to(device=self.proj.weight.device, dtype=self.proj.weight.dtype)
        with torch.no_grad():
            conv.weight.copy_(conv_weight(self.proj.weight, self.in_channels, self.patch))  # (d, C, p, p)
            conv.bias.copy_(self.proj.bias)  # (d,)
        return conv

    @classmethod
    def from_conv(cls, conv: nn.Conv2d, image_size: int | tuple[int, int]) -> PatchEmbed:
        """A PatchEmbed with the weights of a kernel-p, stride-p, unpadded convolution."""
        if not isinstance(conv, nn.Conv2d):
            raise TypeError(f"conv must be an nn.Conv2d, got {type(conv).__name__}")
        kernel, stride = conv.kernel_size, conv.stride
        if kernel[0] != kernel[1] or stride != kernel or conv.padding != (0, 0) or conv.dilation != (1, 1):
            raise ValueError(
                f"only a square kernel with stride equal to it, no padding or dilation, is a patch projection; "
                f"got kernel {kernel}, stride {stride}, padding {conv.padding}, dilation {conv.dilation}"
            )
        if conv.groups != 1 or conv.bias is None:
            raise ValueError(f"conv must have groups=1 and a bias, got groups={conv.groups}, bias={conv.bias}")
        embed = cls(image_size, kernel[0], conv.in_channels, conv.out_channels)
        embed = embed.to(device=conv.weight.device, dtype=conv.weight.dtype)
        with torch.no_grad():
            embed.proj.weight.copy_(conv.weight.reshape(conv.out_channels, -1))  # (d, C, p, p) -> (d, C·p·p)
            embed.proj.bias.copy_(conv.bias)
        return embed


@dataclass(frozen=True)
class PatchCost:
    """What a patch size costs for one image: token count and the work that scales with it."""

    image_size: tuple[int, int]
    patch: int
    in_channels: int
    d_model: int
    class_token: bool
    patches: int = field(init=False)  # N = (H/p)(W/p)
    patch_length: int = field(init=False)  # C·p·p entries per flattened patch
    tokens: int = field(init=False)  # T = N (+ 1 with a class token)
    score_entries: int = field(init=False)  # T² scores per head per layer
    projection_macs: int = field(init=False)  # N·(C·p·p)·d multiply-adds of the patch projection
    attention_macs: int = field(init=False)  # 2·T²·d per layer: q·kᵀ over all heads, then weights·v

    def __post_init__(self):
        rows, cols = patch_grid(self.image_size, self.patch)
        patches = rows * cols
        tokens = patches + int(self.class_token)
        for name, value in (
            ("patches", patches),
            ("patch_length", self.in_channels * self.patch**2),
            ("tokens", tokens),
            ("score_entries", tokens**2),
            ("projection_macs", patches * self.in_channels * self.patch**2 * self.d_model),
            ("attention_macs", 2 * tokens**2 * self.d_model),
        ):
            object.__setattr__(self, name, value)


def patch_cost(
    image_size: int | tuple[int, int], patch: int, *, in_channels: int = 3, d_model: int = 768, class_token: bool = True
) -> PatchCost:
    """Tokens and attention work for one image at one patch size (see ``PatchCost``).

    Halving p quadruples N, so the T² attention terms grow about 16-fold, while the patch
    projection's total work stays put: four times the patches, each a quarter as long.
    """
    return PatchCost(_pair("image_size", image_size), patch, in_channels, d_model, class_token)


# --- The model --------------------------------------------------------------------------------
class ViT(nn.Module):
    """Patch embedding, class token, learned positions, pre-norm blocks, final norm, linear head.

    Args:
        image_size: H (square) or (H, W) in pixels, a multiple of ``patch``.
        patch: the patch side p.
        in_channels: C.
        n_classes: K, the width of the head.
        d_model, n_layers, n_heads: width, depth and heads of the transformer.
        hidden: the FFN width (``lib.blocks.FeedForward``'s default 4d if None).
        dropout: passed to every block (attention weights, FFN hidden, both branches).
    """

    def __init__(
        self,
        image_size: int | tuple[int, int],
        patch: int,
        in_channels: int,
        n_classes: int,
        d_model: int,
        n_layers: int,
        n_heads: int,
        *,
        hidden: int | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        for name, value in (("n_classes", n_classes), ("n_layers", n_layers)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"ViT: {name} must be a positive integer, got {value!r}")
        self.patch_embed = PatchEmbed(image_size, patch, in_channels, d_model)
        self.n_tokens = 1 + self.patch_embed.n_patches  # T
        # The class token owns no pixels: it is one learned vector that every image starts
        # with, and whose final state, having read the patches, is classified.
        self.class_token = nn.Parameter(torch.zeros(1, 1, d_model))  # (1, 1, d)
        # Learned positions, one row per token. Without them the blocks see an unordered set
        # of patches: attention is permutation-equivariant.
        self.positions = nn.Parameter(0.02 * torch.randn(1, self.n_tokens, d_model))  # (1, T, d)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, hidden=hidden, dropout=dropout, norm_first=True) for _ in range(n_layers)
        )
        self.norm = LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)  # d -> K

    def tokens(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, T, d): patch tokens behind the class token, positions added."""
        patches = self.patch_embed(images)  # (B, N, d)
        cls = self.class_token.expand(patches.shape[0], -1, -1)  # (B, 1, d)
        return torch.cat([cls, patches], dim=1) + self.positions  # (B, T, d)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, K) logits."""
        x = self.tokens(images)  # (B, T, d)
        for block in self.blocks:
            x = block(x)  # (B, T, d)
        return self.head(self.norm(x[:, 0]))  # (B, K): only the class token is classified

    def shapes(self, images: torch.Tensor) -> list[tuple[str, tuple[int, ...]]]:
        """The shape after each stage of ``forward``, for one look at the whole pipeline."""
        batch = images.shape[0]
        patches = patchify(images, self.patch_embed.patch)  # (B, N, C·p·p)
        embedded = self.patch_embed.proj(patches)  # (B, N, d)
        x = self.tokens(images)  # (B, T, d)
        steps = [
            ("images (B, C, H, W)", images.shape),
            ("patches (B, N, C·p·p)", patches.shape),
            ("patch tokens (B, N, d)", embedded.shape),
            ("class token (1, 1, d)", self.class_token.shape),
            ("with class token (B, 1+N, d)", (batch, *x.shape[1:])),
            ("positions (1, 1+N, d)", self.positions.shape),
        ]
        for index, block in enumerate(self.blocks):
            x = block(x)  # (B, T, d)
            steps.append((f"after block {index + 1} (B, 1+N, d)", x.shape))
        pooled = self.norm(x[:, 0])  # (B, d)
        steps += [("class token, normed (B, d)", pooled.shape), ("logits (B, K)", self.head(pooled).shape)]
        return [(name, tuple(shape)) for name, shape in steps]

    @torch.no_grad()
    def class_token_attention(self, images: torch.Tensor) -> torch.Tensor:
        """(B, L, h, T): how much the class token reads each token, per layer and head.

        Recomputed with ``lib.attention.attention`` from each block's own projections
        (pre-norm: the block attends over ``norm1`` of its input). Entry 0 is the class token
        reading itself; entries 1..N are the patches in row-major order. Each row sums to 1.
        """
        x = self.tokens(images)  # (B, T, d)
        maps = []
        for block in self.blocks:
            q, k, v = block.attn.project(block.norm1(x))  # (B, h, T, D) each
            _, weights = attention(q[:, :, :1], k, v, return_weights=True)  # (B, h, 1, T)
            maps.append(weights[:, :, 0])  # (B, h, T)
            x = block(x)  # (B, T, d)
        return torch.stack(maps, dim=1)  # (B, L, h, T)


class SmallCNN(nn.Module):
    """A small convolutional baseline for the 8×8 digits, about the size of the default ViT.

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


# --- Training on scikit-learn's 8×8 digits -----------------------------------------------------
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


@dataclass
class DigitsResult:
    model: nn.Module  # trained, in eval mode
    test_accuracy: float  # on the held-out split
    losses: list[float]  # mean training loss per epoch
    test_accuracies: list[float]  # held-out accuracy after each epoch (watched, never used to choose)
    config: dict
    n_parameters: int


def _interactive() -> bool:
    """A terminal or a notebook kernel is watching: worth drawing a progress bar."""
    if sys.stderr is not None and sys.stderr.isatty():
        return True
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return getattr(shell, "kernel", None) is not None


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction of ``images`` whose highest logit is the right label."""
    was_training = model.training
    model.eval()
    correct = (model(images).argmax(dim=-1) == labels).float().mean().item()
    model.train(was_training)
    return correct


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


def _fit(name: str, build: Callable[[], nn.Module], config: dict, progress: bool | None, retrain: bool) -> DigitsResult:
    from lib.trained import cached

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


# Shared by the ViT and the CNN baseline. "recipe" is part of every cache key: bump it when the
# training code or a model's code changes, so that weights trained by the old code are not reused.
_TRAINING = {
    "recipe": 1,
    "epochs": 40,
    "lr": 3e-3,
    "weight_decay": 0.05,
    "batch_size": 64,
    "test_fraction": 0.2,
    "split_seed": 0,
}


def train_digits(
    seed: int = 0,
    *,
    patch: int = 2,
    d_model: int = 48,
    n_layers: int = 2,
    n_heads: int = 4,
    hidden: int = 96,
    dropout: float = 0.1,
    epochs: int = _TRAINING["epochs"],
    progress: bool | None = None,
    retrain: bool = False,
) -> DigitsResult:
    """Train a small ViT on scikit-learn's 8×8 digits; report accuracy on the held-out fifth.

    At p=2 an image is 16 patch tokens of 4 pixels, plus the class token. Training takes
    about 15-20 s of CPU time (one thread; see ``_one_thread``). The trained weights are
    cached on disk (``lib.trained``) under a key made of every setting below, so a second
    call with the same settings loads them instead of training. ``progress``
    draws a tqdm bar (default: when a terminal or notebook is watching).
    """
    config = {
        "model": "vit",
        "seed": seed,
        "patch": patch,
        "d_model": d_model,
        "n_layers": n_layers,
        "n_heads": n_heads,
        "hidden": hidden,
        "dropout": dropout,
        **_TRAINING,
        "epochs": epochs,
    }

    def build() -> ViT:
        return ViT(8, patch, 1, 10, d_model, n_layers, n_heads, hidden=hidden, dropout=dropout)

    return _fit("vit-digits", build, config, progress, retrain)


def train_digits_baseline(
    seed: int = 0,
    *,
    width: int = 32,
    epochs: int = _TRAINING["epochs"],
    progress: bool | None = None,
    retrain: bool = False,
) -> DigitsResult:
    """``SmallCNN`` trained exactly like ``train_digits``: same split, optimizer, schedule, epochs."""
    config = {"model": "cnn", "seed": seed, "width": width, **_TRAINING, "epochs": epochs}
    return _fit("cnn-digits", lambda: SmallCNN(1, 10, width), config, progress, retrain)
