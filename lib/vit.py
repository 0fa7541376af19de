"""The vision transformer: an image read as a sequence of patch tokens (chapter 8).

A ViT (Dosovitskiy et al., 2020) cuts an image into non-overlapping p×p patches, flattens
each patch, projects it to the model width d with one shared linear map, prepends a
learned class token, adds learned positions, and runs ordinary transformer blocks
(``lib.blocks``). The class token's final state goes through a norm and a linear head.

    images (B, C, H, W) -> patches (B, N, C·p·p) -> tokens (B, N, d) -> (B, 1 + N, d)
        -> blocks -> norm -> class token (B, d) -> logits (B, K)

The shared projection of non-overlapping patches is exactly a convolution with kernel p
and stride p: ``PatchEmbed.to_conv`` builds that ``nn.Conv2d`` and the tests compare them.
This module holds the model alone; ``lib.digits.train_digits`` trains it on scikit-learn's
8×8 digits (the data, the training loop and the CNN baseline live there), and
``lib.vit_resolution`` holds what a patch size costs and how the model reads another
resolution (its learned positions resized).

Shape letters used in the comments:
    B    batch                  C    channels (3 for RGB, 1 for the digits)
    H, W image height and width in pixels          p    patch side in pixels
    Hp, Wp  patches per column and per row (H/p, W/p)   N    patches, Hp·Wp
    d    model width            T    tokens, 1 + N with the class token
    K    classes                L    layers          h    attention heads
    D    width of one head, d/h
"""

from __future__ import annotations

import torch
import torch.nn as nn

from lib.attention import attention
from lib.blocks import Block, LayerNorm
from lib.validation import is_integer, positive_int

__all__ = [
    "size_pair",
    "patch_grid",
    "patchify",
    "patchify_loop",
    "conv_weight",
    "PatchEmbed",
    "ViT",
    "MeanPoolViT",
]


# --- Patches ----------------------------------------------------------------------------------
def size_pair(name: str, value: int | tuple[int, int]) -> tuple[int, int]:
    """An image or patch size as (height, width): 32 is (32, 32); a ValueError naming ``name`` otherwise."""
    pair = (value, value) if is_integer(value) else value
    if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not all(is_integer(v) and v >= 1 for v in pair):
        raise ValueError(f"{name} must be a positive integer or a pair (height, width) of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def patch_grid(image_size: int | tuple[int, int], patch: int) -> tuple[int, int]:
    """(Hp, Wp): how many p×p patches fit down and across an image of ``image_size`` pixels.

    The patches must tile the image exactly: 224 at p=16 gives (14, 14), 196 patches; 225
    at p=16 raises, rather than silently dropping the last column of pixels.
    """
    height, width = size_pair("image_size", image_size)
    patch = positive_int("patch", patch)
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
        self.image_size = size_pair("image_size", image_size)
        self.grid = patch_grid(self.image_size, patch)  # (Hp, Wp)
        for name, value in (("in_channels", in_channels), ("d_model", d_model)):
            positive_int(f"PatchEmbed: {name}", value)
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
            positive_int(f"ViT: {name}", value)
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


# --- The other pooling: no class token --------------------------------------------------------
class MeanPoolViT(ViT):
    """``ViT`` without a class token: the mean of the final patch tokens is classified.

    The other pooling Dosovitskiy et al. (2020) compare: every patch token feeds the head
    equally, and no token is set apart to gather the others. Positions cover the N patches.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.class_token = None  # no class token: every token is a patch
        self.n_tokens -= 1
        self.positions = nn.Parameter(self.positions.detach()[:, 1:].clone())  # (1, N, d)

    def tokens(self, images: torch.Tensor) -> torch.Tensor:
        return self.patch_embed(images) + self.positions  # (B, N, d)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.tokens(images)  # (B, N, d)
        for block in self.blocks:
            x = block(x)  # (B, N, d)
        return self.head(self.norm(x.mean(dim=1)))  # (B, K): the mean of the patch tokens
