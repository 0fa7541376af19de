"""Positional information: rotary (RoPE), sinusoidal and learned absolute positions (chapter 3).

Self-attention on its own cannot tell token orders apart: permute the tokens and the
outputs are permuted the same way. This module gives the three common ways of telling it
where each token sits.

* ``apply_rope`` rotates each pair of query/key coordinates by an angle
  position × frequency, one frequency per pair (RoFormer, Su et al., 2021). Because a
  rotation's transpose is the rotation backwards, ``(R_m q)ᵀ (R_n k) = qᵀ R_(n-m) k``: the
  rotation part of a score depends only on the offset n - m.
* ``sinusoidal_positions`` is the fixed table of "Attention Is All You Need" (Vaswani et
  al., 2017), a formula that can be evaluated at any position.
* ``LearnedPositions`` is a trained table with one row per position and nothing past
  its end.

Shape letters used in the comments:
    ...  any leading axes (batch, heads)
    N    tokens (positions)
    D    width of the vectors being rotated (a head's d_k); always even for RoPE
    P    coordinate pairs, D / 2

Two layouts of the pairs are in use, and a checkpoint only works with the one it was
trained with:
    "half"         pairs coordinate i with i + D/2 (GPT-NeoX, LLaMA in the Hugging Face
                   format, HF ``rotate_half``);
    "interleaved"  pairs coordinate 2i with 2i + 1 (RoFormer, GPT-J, Meta's own LLaMA code).
The two compute the same thing up to a fixed permutation of the coordinates.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
from torch import nn

from lib.validation import is_integer, non_negative_int, positive_int

__all__ = [
    "LAYOUTS",
    "rope_frequencies",
    "rope_angles",
    "apply_rope",
    "rope_rotation_matrix",
    "sinusoidal_positions",
    "LearnedPositions",
]

LAYOUTS = ("half", "interleaved")


def _check_width(dim: int, name: str = "dim") -> None:
    if not is_integer(dim) or dim < 2 or dim % 2:
        raise ValueError(f"{name} must be a positive even integer (coordinates are rotated in pairs), got {dim!r}")


def _check_base(base: float) -> None:
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not math.isfinite(base) or base <= 1:
        raise ValueError(f"base must be a finite real number greater than 1, got {base!r}")


def rope_frequencies(dim: int, base: float = 10000.0, *, dtype: torch.dtype | None = None, device=None) -> torch.Tensor:
    """The (D/2,) angular frequencies base^(-2i/D), i = 0 .. D/2 - 1, in radians per position.

    Pair 0 turns by one radian per position; each later pair turns more slowly, down to
    about 1/base radians per position for the last one. The fast pairs tell neighbours
    apart, the slow ones separate distant positions.

    >>> rope_frequencies(4, base=100.0)
    tensor([1.0000, 0.1000])
    """
    _check_width(dim)
    _check_base(base)
    exponents = torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim  # (P,)
    return (float(base) ** -exponents).to(dtype or torch.get_default_dtype())  # (P,)


def _as_positions(positions, n_tokens: int, device) -> torch.Tensor:
    """(N,) float64 positions; integers or floats, default 0 .. N-1."""
    if positions is None:
        return torch.arange(n_tokens, dtype=torch.float64, device=device)  # (N,)
    if not isinstance(positions, torch.Tensor):
        # a Python list of floats would become float32 by default: keep every digit
        positions = torch.as_tensor(positions, dtype=torch.float64)  # (N,)
    positions = positions.to(device)
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"positions must hold integers or real numbers, got {positions.dtype}")
    if positions.shape != (n_tokens,):
        raise ValueError(
            f"positions must have shape (N,) = ({n_tokens},), one per token of x, got {tuple(positions.shape)}"
        )
    positions = positions.to(torch.float64)  # (N,)
    if not torch.isfinite(positions).all():
        raise ValueError("positions must be finite")
    return positions


def _as_frequencies(freqs, dim: int, base: float, device) -> torch.Tensor:
    """(P,) float64 frequencies: the given ones, or base^(-2i/D)."""
    if freqs is None:
        return rope_frequencies(dim, base, dtype=torch.float64, device=device)  # (P,)
    if not isinstance(freqs, torch.Tensor):
        freqs = torch.as_tensor(freqs, dtype=torch.float64)  # (P,), not float32 by default
    freqs = freqs.to(device)
    if freqs.dtype == torch.bool or freqs.is_complex():
        raise TypeError(f"freqs must hold real numbers, got {freqs.dtype}")
    freqs = freqs.to(torch.float64).reshape(-1)  # (P,)
    if freqs.numel() != dim // 2:
        raise ValueError(f"freqs must hold D/2 = {dim // 2} frequencies for a width of D = {dim}, got {freqs.numel()}")
    return freqs


def rope_angles(positions, freqs) -> torch.Tensor:
    """(N, P) float64 angles: positions[n] × freqs[p], the turn of pair p at token n.

    Computed in float64 whatever the dtype of x: at position 100,000 a float32 angle is
    already off by about 0.004 rad, enough to move a score.
    """
    return positions[:, None] * freqs[None, :]  # (N, P)


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[float] | None = None,
    *,
    base: float = 10000.0,
    freqs: torch.Tensor | Sequence[float] | None = None,
    layout: str = "half",
) -> torch.Tensor:
    """Rotate each coordinate pair of x's last axis by the angle position × frequency.

    Args:
        x: queries or keys, (..., N, D) with D even: any leading axes (batch, heads).
        positions: (N,) integers or floats, the position of each token; default 0 .. N-1.
            With a KV cache the new tokens sit at cache_length, cache_length + 1, ...
        base: sets the frequencies base^(-2i/D) (10000 in RoFormer and LLaMA 1-2; LLaMA 3
            uses 500000).
        freqs: (D/2,) frequencies in radians per position; overrides ``base``.
        layout: "half" pairs i with i + D/2 (GPT-NeoX, LLaMA in the Hugging Face format);
            "interleaved" pairs 2i with 2i + 1 (RoFormer, GPT-J, Meta's own LLaMA code).
            ``interleaved_to_half`` converts a checkpoint's W_q and W_k between the two.

    Returns:
        A tensor like x (same shape, dtype and device): each pair (a, b) becomes
        (a cos θ - b sin θ, a sin θ + b cos θ). Rotations keep lengths, so the norm of every
        token vector is unchanged.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"x must be a floating-point tensor, got {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., N, D), got {tuple(x.shape)}")
    n_tokens, dim = x.shape[-2], x.shape[-1]
    if dim % 2:
        raise ValueError(
            f"x's last axis D must be even to rotate coordinates in pairs, got D={dim} (x: {tuple(x.shape)})"
        )
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if dim == 0:
        return x.clone()
    if freqs is None:
        _check_base(base)

    angles = rope_angles(_as_positions(positions, n_tokens, x.device), _as_frequencies(freqs, dim, base, x.device))
    cos = torch.cos(angles).to(x.dtype)  # (N, P)
    sin = torch.sin(angles).to(x.dtype)  # (N, P)
    return rotate_pairs(x, cos, sin, layout=layout)


def rope_cos_sin(positions: torch.Tensor, freqs: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, P) cos and sin of the angles position × frequency, computed in float64, cast to ``dtype``.

    A model rotates q and k of every layer at the same positions: it computes these tables
    once per forward pass and hands them to ``rotate_pairs`` (what ``apply_rope`` does in one go).
    """
    angles = rope_angles(positions.to(torch.float64), freqs.to(torch.float64))  # (N, P)
    return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half") -> torch.Tensor:
    """Rotate the coordinate pairs of x (..., N, D) by the angles whose (N, D/2) cos and sin are given."""
    dim = x.shape[-1]
    if cos.shape != (x.shape[-2], dim // 2) or sin.shape != cos.shape:
        raise ValueError(
            f"cos and sin must be (N, D/2) = {(x.shape[-2], dim // 2)} for x {tuple(x.shape)}, "
            f"got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if layout == "half":
        first, second = x[..., : dim // 2], x[..., dim // 2 :]  # (..., N, P) each
        return torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)  # (..., N, D)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., N, P) each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., N, P, 2)
    return rotated.flatten(-2)  # (..., N, D): back to 2i, 2i+1 order


def rope_rotation_matrix(
    position: float, dim: int, *, base: float = 10000.0, freqs=None, layout: str = "half", dtype=torch.float64
) -> torch.Tensor:
    """The (D, D) orthogonal matrix R_position that ``apply_rope`` applies: the plain twin.

    ``apply_rope(x, [p])`` equals ``x @ rope_rotation_matrix(p, D).T`` for a one-token x.
    Written out to show the algebra: R_mᵀ R_n = R_(n-m), so (R_m q)ᵀ (R_n k) = qᵀ R_(n-m) k.
    """
    _check_width(dim)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if freqs is None:
        _check_base(base)
    freqs = _as_frequencies(freqs, dim, base, None)  # (P,)
    angles = float(position) * freqs  # (P,)
    half = dim // 2
    matrix = torch.zeros(dim, dim, dtype=torch.float64)  # (D, D)
    for pair in range(half):
        # the coordinates of this pair: (i, i + D/2) for "half", (2i, 2i + 1) for "interleaved"
        a, b = (pair, pair + half) if layout == "half" else (2 * pair, 2 * pair + 1)
        cos, sin = math.cos(angles[pair]), math.sin(angles[pair])
        matrix[a, a], matrix[a, b] = cos, -sin
        matrix[b, a], matrix[b, b] = sin, cos
    return matrix.to(dtype)  # (D, D)


def sinusoidal_positions(
    n: int, dim: int, base: float = 10000.0, *, start: int = 0, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """The (n, dim) fixed position table of Vaswani et al. (2017), rows start .. start+n-1.

    Column 2i holds sin(pos · base^(-2i/dim)) and column 2i+1 holds cos of the same angle.
    It is a formula, so any row can be computed, including positions no model was trained
    on; whether a model *uses* such a row well is a separate question that only an
    evaluation answers.
    """
    _check_width(dim)
    _check_base(base)
    n, start = non_negative_int("n", n), non_negative_int("start", start)
    positions = torch.arange(start, start + n, dtype=torch.float64)  # (n,)
    angles = rope_angles(positions, rope_frequencies(dim, base, dtype=torch.float64))  # (n, dim/2)
    table = torch.empty(n, dim, dtype=torch.float64)  # (n, dim)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table.to(dtype or torch.get_default_dtype())  # (n, dim)


class LearnedPositions(nn.Module):
    """A trained (max_len, dim) table, one vector per position, as in BERT and GPT-2.

    ``forward(positions)`` looks up rows; positions must lie in 0 .. max_len-1. There is
    no row for position max_len or beyond: the model never learned one, and the table
    says so instead of silently wrapping or clamping.
    """

    def __init__(self, max_len: int, dim: int):
        super().__init__()
        self.max_len, self.dim = positive_int("max_len", max_len), positive_int("dim", dim)
        self.weight = nn.Parameter(torch.empty(self.max_len, self.dim))  # (max_len, dim)
        nn.init.normal_(self.weight, std=0.02)  # as nanoGPT; OpenAI's GPT-2 code used 0.01

    def forward(self, positions: torch.Tensor | Sequence[int]) -> torch.Tensor:
        """Rows of the table: positions of any shape (...,) give (..., dim)."""
        positions = torch.as_tensor(positions, device=self.weight.device)
        if positions.dtype.is_floating_point or positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"positions must be integers, got {positions.dtype}")
        outside = (positions < 0) | (positions >= self.max_len)
        if outside.any():
            bad = int(positions[outside].flatten()[0])
            raise ValueError(
                f"positions must lie in 0..{self.max_len - 1} (max_len={self.max_len}): "
                f"there is no vector for position {bad}"
            )
        return self.weight[positions]  # (..., dim)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.dim}"


# --- checkpoint layouts ----------------------------------------------------------------------


def interleaved_to_half(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Reorder a query or key projection trained for the interleaved layout so that the half
    layout computes the same scores: what Hugging Face's LLaMA converter does to W_q and W_k.

    ``weight`` is an ``nn.Linear`` weight, (H·D, C): head h's output features are rows
    h·D .. h·D + D - 1. Within each head the rows are put in the order 0, 2, 4, ..., D-2,
    1, 3, ..., D-1 (evens first, then odds), so the pair (2i, 2i+1) that Meta's reference
    code rotates lands on (i, i + D/2), the pair ``rotate_half`` rotates. The query and the
    key of a head are reordered alike, so their dot products are unchanged; the values and
    the output projection need nothing.
    """
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        raise ValueError(f"weight must be a 2-D (H·D, C) tensor, got {getattr(weight, 'shape', type(weight))}")
    n_heads = positive_int("n_heads", n_heads)
    rows, columns = weight.shape
    if rows % n_heads or (rows // n_heads) % 2:
        raise ValueError(
            f"weight has {rows} rows, which must be n_heads={n_heads} heads of an even width D "
            f"(weight: {tuple(weight.shape)})"
        )
    head_dim = rows // n_heads
    # (H, D/2, 2, C): row 2i + j of a head is [i, j]; swapping the two middle axes lists the
    # j = 0 rows (evens) first, then the j = 1 rows (odds).
    return weight.reshape(n_heads, head_dim // 2, 2, columns).transpose(1, 2).reshape(rows, columns)  # (H·D, C)
