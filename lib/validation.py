"""Input checks shared by the attention functions and modules (chapters 1 and 2).

Each check fails fast with a TypeError or ValueError that names the argument and shows the
shapes it saw, so that a wrong axis is found at the call, not three layers later.
Shape letters as in ``lib.attention``.

The integer checks serve every module, torch-free ones included (the tokenizers, the
corpus): torch is imported inside the tensor checks only, so importing this module for
``positive_int`` costs nothing.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["validate_attention_inputs", "validate_module_inputs", "resolve_scale", "check_mask_type"]
__all__ += ["check_mask_shape"]
__all__ += ["is_integer", "positive_int", "non_negative_int", "optional_positive_int", "probability"]
__all__ += ["multiple_of", "check_heads"]


def validate_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> None:
    """Raise a TypeError/ValueError naming the argument and the shapes seen."""
    import torch

    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if not tensor.dtype.is_floating_point:
            raise TypeError(f"{name} must be a floating-point tensor, got {tensor.dtype}")
        if tensor.ndim < 2:
            raise ValueError(f"{name} must have shape (..., heads, tokens, width), got {tuple(tensor.shape)}")
    shapes = f"(q: {tuple(q.shape)}, k: {tuple(k.shape)}, v: {tuple(v.shape)})"
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    if not q.ndim == k.ndim == v.ndim:
        raise ValueError(f"q, k and v must have the same number of dimensions {shapes}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has d_k={q.shape[-1]} but k has d_k={k.shape[-1]} {shapes}")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"k and v must agree on every axis but the last {shapes}")
    if q.ndim >= 3:
        if q.shape[:-3] != k.shape[:-3]:
            raise ValueError(f"q and k must have the same batch axes {shapes}")
        n_heads, n_kv_heads = q.shape[-3], k.shape[-3]
        if n_kv_heads == 0 or n_heads % n_kv_heads:
            raise ValueError(
                f"q has {n_heads} heads, which is not a multiple of the {n_kv_heads} KV heads of k and v {shapes}"
            )
    if mask is not None:
        check_mask_type(mask)
        if mask.device != q.device:
            raise ValueError(f"mask is on {mask.device} but q is on {q.device}")
        check_mask_shape(mask, (*q.shape[:-1], k.shape[-2]), shapes)  # (..., H, N, M)


def resolve_scale(scale: float | None, q: torch.Tensor) -> float:
    """The score scale: 1/sqrt(d_k) by default, else any finite real number (int, float, numpy scalar)."""
    if scale is None:
        if q.shape[-1] == 0:
            raise ValueError(f"q has d_k=0, so the default scale 1/sqrt(d_k) is undefined (q: {tuple(q.shape)})")
        return 1.0 / math.sqrt(q.shape[-1])
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(float(scale)):
        raise ValueError(f"scale must be a finite real number or None, got {scale!r}")
    return float(scale)


def check_mask_type(mask: object) -> None:
    """A mask is a bool tensor (True = may read) or a float one (added to the scores)."""
    import torch

    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.dtype.is_floating_point:
        raise TypeError(f"mask must be bool (True = may read) or float (added to scores), got {mask.dtype}")


def check_mask_shape(mask: torch.Tensor, score_shape: tuple[int, ...], shapes: str) -> None:
    """The mask must broadcast to the scores' shape (..., H, N, M) without growing it."""
    import torch

    try:
        broadcast = torch.broadcast_shapes(mask.shape, score_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(score_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(score_shape)} {shapes}"
        )


def validate_module_inputs(
    x: torch.Tensor, context: torch.Tensor | None, mask: torch.Tensor | None, *, d_model: int, n_heads: int
) -> None:
    """A multi-head module's inputs: x (B, N, C), context (B, M, C) or None, a mask for (B, H, N, M)."""
    import torch

    for name, tensor in (("x", x), ("context", context)):
        if tensor is None:
            continue
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.ndim != 3 or tensor.shape[-1] != d_model:
            raise ValueError(f"{name} must have shape (B, tokens, d_model={d_model}), got {tuple(tensor.shape)}")
    if context is not None and context.shape[0] != x.shape[0]:
        raise ValueError(
            f"context has batch size {context.shape[0]} but x has {x.shape[0]} "
            f"(x: {tuple(x.shape)}, context: {tuple(context.shape)})"
        )
    if mask is not None:
        check_mask_type(mask)
        n_keys = x.shape[1] if context is None else context.shape[1]
        context_shape = "" if context is None else f", context: {tuple(context.shape)}"
        score_shape = (x.shape[0], n_heads, x.shape[1], n_keys)  # (B, H, N, M)
        check_mask_shape(mask, score_shape, f"(B, H, N, M) (x: {tuple(x.shape)}{context_shape})")


def is_integer(value: object) -> bool:
    """True for a Python or numpy integer (anything registered as ``numbers.Integral``), never a bool.

    Subtle: ``isinstance(np.int64(3), int)`` is False, so a size read from an array fails a
    plain ``int`` check; and ``isinstance(True, int)`` is True, so a flag passes one.
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(name: str, value: object) -> int:
    """``value`` as an int if it is an integer >= 1, else a ValueError naming ``name``.

    >>> positive_int("n_heads", 4)
    4
    """
    if not is_integer(value) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def non_negative_int(name: str, value: object) -> int:
    """``value`` as an int if it is an integer >= 0, else a ValueError naming ``name``."""
    if not is_integer(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def optional_positive_int(name: str, value: object) -> int | None:
    """None stays None; anything else must be a positive integer (``positive_int``)."""
    if value is None:
        return None
    if not is_integer(value) or value < 1:
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
    return int(value)


def multiple_of(name: str, value: int, divisor_name: str, divisor: int, why: str = "") -> None:
    """A ValueError naming both arguments and their values unless ``divisor`` divides ``value``.

    >>> multiple_of("d_model", 30, "n_heads", 4)
    Traceback (most recent call last):
    ...
    ValueError: d_model=30 is not a multiple of n_heads=4
    """
    if value % divisor:
        raise ValueError(f"{name}={value} is not a multiple of {divisor_name}={divisor}" + (f": {why}" if why else ""))


def check_heads(
    n_heads: object, n_kv_heads: object = None, d_model: object = None, *, where: str = "", kv_name: str = "n_kv_heads"
) -> tuple[int, int, int | None]:
    """(n_heads, n_kv_heads, d_model) as ints, after the checks every multi-head module shares.

    Each is a positive integer; ``n_kv_heads`` None means one KV head per query head and
    ``d_model`` None skips its check. n_heads must divide d_model (each head takes d_model /
    n_heads) and n_kv_heads must divide n_heads (each KV head serves as many query heads).
    ``where`` (the caller's name) starts each message; ``kv_name`` is the caller's name for
    its KV-head argument.

    >>> check_heads(8, 2, 256)
    (8, 2, 256)
    >>> check_heads(4, 3, where="Block")
    Traceback (most recent call last):
    ...
    ValueError: Block: n_heads=4 is not a multiple of n_kv_heads=3: each KV head serves the same number of query heads
    """
    prefix = f"{where}: " if where else ""
    n_heads = positive_int(f"{prefix}n_heads", n_heads)
    n_kv_heads = n_heads if n_kv_heads is None else positive_int(f"{prefix}{kv_name}", n_kv_heads)
    if d_model is not None:
        d_model = positive_int(f"{prefix}d_model", d_model)
        multiple_of(f"{prefix}d_model", d_model, "n_heads", n_heads, "each head takes d_model / n_heads")
    multiple_of(f"{prefix}n_heads", n_heads, kv_name, n_kv_heads, "each KV head serves the same number of query heads")
    return n_heads, n_kv_heads, d_model


def probability(name: str, value: object) -> float:
    """``value`` as a float if it is a real number in [0, 1) (a dropout rate), else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1), got {value!r}")
    return float(value)
