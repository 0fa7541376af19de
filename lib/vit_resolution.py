"""What the patch size and the resolution change in a ViT: tokens, cost, positions (chapter 8).

The model is ``lib.vit``'s; this module holds the chapter's analysis of it:

    patch_cost                   tokens and attention work for one image at one patch size
    layer_macs                   one layer's multiply-adds: the linear part against attention
    position_similarity_by_distance
                                 do the learned positions hold the 2-D grid?
    resize_positions             the position table resampled for a new grid of patches
    at_resolution                a trained ViT that reads images of another size

Halving the patch side quadruples the tokens, and attention's T² terms grow about 16-fold;
a new resolution changes the grid, so the learned positions must be resized to fit.

Shape letters used in the comments (as in ``lib.vit``):
    C    channels               H, W image height and width in pixels
    p    patch side in pixels   Hp, Wp  patches per column and per row (H/p, W/p)
    N    patches, Hp·Wp         T    tokens, 1 + N with the class token
    d    model width
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn as nn

from lib.vit import PatchEmbed, ViT, patch_grid, size_pair

__all__ = [
    "PatchCost",
    "patch_cost",
    "layer_macs",
    "position_similarity_by_distance",
    "resize_positions",
    "at_resolution",
]


# --- What a patch size costs ------------------------------------------------------------------
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
    return PatchCost(size_pair("image_size", image_size), patch, in_channels, d_model, class_token)


def layer_macs(image_size: int | tuple[int, int], patch: int, *, d_model: int = 768) -> dict[str, float]:
    """Multiply-adds of one ViT layer on one image: the linear part, attention, and attention's share.

    Linear: the four d×d projections (4·T·d²) and an FFN of width 4d (8·T·d²), 12·T·d² in
    all. Attention: q·kᵀ and weights·v, 2·T²·d. Attention's share is T / (T + 6d): it
    passes half once T > 6d.
    """
    tokens = patch_cost(image_size, patch, d_model=d_model).tokens
    linear, attn = 12 * tokens * d_model**2, 2 * tokens**2 * d_model
    return {"tokens": tokens, "linear": linear, "attention": attn, "attention_share": attn / (linear + attn)}


# --- What the trained positions hold, and positions for a new resolution ---------------------------
def position_similarity_by_distance(model: ViT) -> dict[float, float]:
    """Mean cosine similarity of two patches' learned position vectors, by their distance on the grid.

    Distance is Euclidean in patch units (1 for neighbours in a row or column, √2 for
    diagonal neighbours, ...). The class token's row is left out. A table that had learned
    the 2-D layout would give near patches more alike vectors than distant ones.
    """
    rows, cols = model.patch_embed.grid
    table = model.positions[0, 1:].detach()  # (N, d): one row per patch, row-major
    unit = table / table.norm(dim=-1, keepdim=True)  # (N, d)
    cosine = unit @ unit.T  # (N, N)
    r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    where = torch.stack([r.flatten(), c.flatten()], dim=-1).float()  # (N, 2)
    distance = torch.cdist(where, where)  # (N, N)
    off_diagonal = ~torch.eye(len(table), dtype=torch.bool)
    out = {}
    for value in sorted(set(distance[off_diagonal].round(decimals=4).tolist())):
        pick = off_diagonal & ((distance - value).abs() < 1e-3)
        out[value] = float(cosine[pick].mean())
    return out


def resize_positions(positions: torch.Tensor, grid: tuple[int, int], new_grid: tuple[int, int]) -> torch.Tensor:
    """(1, 1 + Hp·Wp, d) -> (1, 1 + Hp'·Wp', d): the patch rows resampled bicubically on the 2-D grid.

    What timm does to run a ViT at a resolution it was not trained at: the class token's
    row is kept, the patch rows are laid back on their (Hp, Wp) grid and interpolated to
    (Hp', Wp'). The table then fits; whether the model still works is another question
    (each patch now covers a different share of the object).
    """
    if positions.ndim != 3 or positions.shape[0] != 1 or positions.shape[1] != 1 + grid[0] * grid[1]:
        raise ValueError(f"positions must have shape (1, 1 + {grid[0]}·{grid[1]}, d), got {tuple(positions.shape)}")
    cls, patches = positions[:, :1], positions[:, 1:]  # (1, 1, d), (1, N, d)
    d = positions.shape[-1]
    laid = patches.reshape(1, grid[0], grid[1], d).permute(0, 3, 1, 2)  # (1, d, Hp, Wp)
    resized = nn.functional.interpolate(laid, size=new_grid, mode="bicubic", align_corners=False)  # (1, d, Hp', Wp')
    return torch.cat([cls, resized.permute(0, 2, 3, 1).reshape(1, -1, d)], dim=1)  # (1, 1 + N', d)


def at_resolution(model: ViT, image_size: int | tuple[int, int]) -> ViT:
    """A copy of ``model`` that reads images of ``image_size``: same patch size and weights, positions resized."""
    import copy

    new = copy.deepcopy(model)
    old = model.patch_embed
    embed = PatchEmbed(image_size, old.patch, old.in_channels, old.proj.out_features)
    embed.proj.load_state_dict(old.proj.state_dict())
    new.patch_embed = embed
    new.positions = nn.Parameter(resize_positions(model.positions.detach(), old.grid, embed.grid))
    new.n_tokens = 1 + embed.n_patches
    return new
