"""The transformer block: normalization, feed-forward networks, residual adds (chapter 4).

One common pre-norm block reads

    U = X + Attention(Norm1(X))        attention mixes information across positions
    Y = U + FFN(Norm2(U))              the FFN transforms each token on its own

and the post-norm block of "Attention Is All You Need" (Vaswani et al., 2017) normalizes
after each addition instead: U = Norm1(X + Attention(X)), Y = Norm2(U + FFN(U)).
How the two placements treat the residual stream and the gradients of a fresh stack is
``lib.stack_diagnostics``.

Shape letters used in the comments:
    B    batch                 N    tokens (positions)
    d    model width, d_model  F    FFN hidden width (f in chapter 4)

The attention branch can also turn q and k by RoPE (chapter 3) and read and extend a KV
cache (chapter 6): ``lib.gpt``'s decoder stacks this same block with both.

Each norm has a plain twin written out (``layer_norm``, ``rms_norm``) beside the fused
kernel its module calls; the tests check that the two agree, outputs and gradients.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.attention import MultiHeadAttention
from lib.kv_cache import KVCache
from lib.rope import rotate_pairs
from lib.validation import check_heads, positive_int

__all__ = [
    "layer_norm",
    "rms_norm",
    "LayerNorm",
    "RMSNorm",
    "make_norm",
    "swiglu_hidden",
    "ffn_parameters",
    "FeedForward",
    "SwiGLU",
    "Block",
]

NORMS = ("layer", "rms")
FFNS = ("mlp", "swiglu")
ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu}  # gelu is the exact (erf) form, as torch's "gelu"
Rotation = tuple[torch.Tensor, torch.Tensor]  # RoPE's (cos, sin) at the new positions, (N, D/2) each


def _check_width(x: torch.Tensor, d: int, who: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{who} expects a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0 or x.shape[-1] != d:
        raise ValueError(f"{who} was built for width d={d}, but x has shape {tuple(x.shape)}")


# --- Normalization ------------------------------------------------------------------------
def layer_norm(
    x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None, eps: float = 1e-5
) -> torch.Tensor:
    """LayerNorm written out: center each token's d features, divide by their std, then scale and shift.

    The variance is the biased one (divide by d, not d - 1), as in torch. Half-precision
    inputs are normalized in float32: a sum of squares over d features overflows fp16.
    """
    compute = x.to(torch.promote_types(x.dtype, torch.float32))  # (..., d)
    mean = compute.mean(dim=-1, keepdim=True)  # (..., 1)
    variance = (compute - mean).pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
    out = (compute - mean) * torch.rsqrt(variance + eps)  # (..., d): mean 0, variance ≈ 1
    if weight is not None:
        out = out * weight  # (..., d)
    if bias is not None:
        out = out + bias  # (..., d)
    return out.to(x.dtype)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm written out: divide each token by the root mean square of its d features.

    No centering: the mean is not subtracted, so a constant added to every feature is not
    removed (LayerNorm removes it). Then an elementwise scale; no shift.
    """
    compute = x.to(torch.promote_types(x.dtype, torch.float32))  # (..., d)
    mean_square = compute.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
    out = compute * torch.rsqrt(mean_square + eps)  # (..., d): root mean square ≈ 1
    if weight is not None:
        out = out * weight  # (..., d)
    return out.to(x.dtype)


class LayerNorm(nn.Module):
    """Same parameters (``weight`` ones, ``bias`` zeros) and results as ``torch.nn.LayerNorm(d)``.

    ``fused`` (class default True) calls ``F.layer_norm``; set it False on an instance to
    run the plain ``layer_norm`` above instead.
    """

    fused = True

    def __init__(self, d: int, eps: float = 1e-5, *, bias: bool = True):
        super().__init__()
        self.d, self.eps = d, eps
        self.weight = nn.Parameter(torch.ones(d))  # (d,)
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None  # (d,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_width(x, self.d, "LayerNorm")
        if self.fused:
            return F.layer_norm(x, (self.d,), self.weight, self.bias, self.eps)  # (..., d)
        return layer_norm(x, self.weight, self.bias, self.eps)  # (..., d)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, bias={self.bias is not None}"


class RMSNorm(nn.Module):
    """Same parameter (``weight``, ones) and results as ``torch.nn.RMSNorm(d, eps=1e-6)``.

    Subtle: torch's own default ``eps=None`` means the dtype's machine epsilon (1.2e-7 in
    float32); pass ``eps`` explicitly when comparing the two.
    """

    fused = True

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.d, self.eps = d, eps
        self.weight = nn.Parameter(torch.ones(d))  # (d,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_width(x, self.d, "RMSNorm")
        if self.fused:
            return F.rms_norm(x, (self.d,), self.weight, self.eps)  # (..., d)
        return rms_norm(x, self.weight, self.eps)  # (..., d)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}"


def make_norm(kind: str, d: int, *, eps: float | None = None, bias: bool = True) -> LayerNorm | RMSNorm:
    """``"layer"`` -> LayerNorm (eps 1e-5), ``"rms"`` -> RMSNorm (eps 1e-6, never a bias).

    Also the final norm a pre-norm stack puts after its last block: without it the residual
    stream reaches the output head unnormalized.
    """
    if kind == "layer":
        return LayerNorm(d, 1e-5 if eps is None else eps, bias=bias)
    if kind == "rms":
        return RMSNorm(d, 1e-6 if eps is None else eps)
    raise ValueError(f"norm must be one of {NORMS}, got {kind!r}")


# --- Feed-forward networks ------------------------------------------------------------
def swiglu_hidden(d: int, multiple_of: int = 8) -> int:
    """The default SwiGLU width: 8d/3, rounded UP to a multiple of ``multiple_of``.

    Why 8d/3: an MLP with hidden width 4d has two d×4d matrices, 8d² weights; SwiGLU has
    three d×f matrices, 3df, which equals 8d² at f = 8d/3. Rounding up to a multiple of 8
    keeps the matrices friendly to vector units and adds at most 7 columns (d=512 -> 1368).
    """
    return multiple_of * math.ceil(8 * d / 3 / multiple_of)


def ffn_parameters(d: int, hidden: int, *, gated: bool = False, bias: bool = True) -> int:
    """Parameters of a two-projection FFN (d·f + f·d) or a gated one (3·d·f), biases included if asked."""
    if gated:
        return 3 * d * hidden + (2 * hidden + d if bias else 0)
    return 2 * d * hidden + (hidden + d if bias else 0)


def _check_sizes(d: int, hidden: int, who: str) -> None:
    for name, value in (("d", d), ("hidden", hidden)):
        positive_int(f"{who}: {name}", value)


class FeedForward(nn.Module):
    """activation(x W1 + b1) W2 + b2, the same map applied to every token on its own.

    ``up_proj`` is W1 (d -> F), ``down_proj`` is W2 (F -> d); F defaults to 4d. Dropout, if
    any, acts on the hidden activations, where torch's encoder layer puts it.
    """

    def __init__(
        self, d: int, hidden: int | None = None, *, activation: str = "gelu", bias: bool = True, dropout: float = 0.0
    ):
        super().__init__()
        hidden = 4 * d if hidden is None else hidden
        _check_sizes(d, hidden, "FeedForward")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {tuple(ACTIVATIONS)}, got {activation!r}")
        self.d, self.hidden, self.activation = d, hidden, activation
        self.up_proj = nn.Linear(d, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, d, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_width(x, self.d, "FeedForward")
        hidden = ACTIVATIONS[self.activation](self.up_proj(x))  # (..., F)
        return self.down_proj(self.dropout(hidden))  # (..., d)


class SwiGLU(nn.Module):
    """(SiLU(x W_gate) ⊙ (x W_up)) W_down, the gated FFN of Shazeer (2020).

    Three matrices instead of two, so the default width is ``swiglu_hidden(d)`` ≈ 8d/3 to
    keep about the parameters of a 4d MLP. No biases by default, as in the paper.
    """

    def __init__(self, d: int, hidden: int | None = None, *, bias: bool = False, dropout: float = 0.0):
        super().__init__()
        hidden = swiglu_hidden(d) if hidden is None else hidden
        _check_sizes(d, hidden, "SwiGLU")
        self.d, self.hidden = d, hidden
        self.gate_proj = nn.Linear(d, hidden, bias=bias)
        self.up_proj = nn.Linear(d, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, d, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_width(x, self.d, "SwiGLU")
        hidden = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (..., F): the gate scales each feature
        return self.down_proj(self.dropout(hidden))  # (..., d)


# --- The block -----------------------------------------------------------------------------
class Block(nn.Module):
    """A transformer block: attention then FFN, each inside a residual add, with norms placed
    before (``norm_first=True``, pre-norm) or after (post-norm) each addition.

    Sub-modules: ``norm1``, ``attn`` (``MultiHeadAttention``), ``norm2``, ``ffn``, and
    ``dropout1``/``dropout2`` on each branch output. How attention reads is the
    ``attention_branch``: ``attn.project`` -> RoPE on q and k (if a ``rotation`` is given)
    -> append k, v to the cache (if one is given) -> ``attn.attend`` -> ``attn.merge_heads``
    -> ``attn.out_proj``. The residual wiring and the norms are the same for every use.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        n_kv_heads: int | None = None,
        ffn: str = "mlp",
        hidden: int | None = None,
        norm: str = "layer",
        norm_first: bool = True,
        activation: str = "gelu",
        dropout: float = 0.0,
        bias: bool = True,
    ):
        super().__init__()
        n_heads, _, d_model = check_heads(n_heads, n_kv_heads, d_model, where="Block")
        if ffn not in FFNS:
            raise ValueError(f"Block: ffn must be one of {FFNS}, got {ffn!r}")
        if norm not in NORMS:
            raise ValueError(f"Block: norm must be one of {NORMS}, got {norm!r}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"Block: activation must be one of {tuple(ACTIVATIONS)}, got {activation!r}")
        if ffn == "swiglu" and activation != "gelu":
            raise ValueError(f"Block: ffn='swiglu' has its own SiLU gate; activation={activation!r} would be ignored")
        self.d_model, self.norm_first = d_model, norm_first
        self.norm1 = make_norm(norm, d_model, bias=bias)
        self.attn = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, bias=bias, dropout=dropout)
        self.norm2 = make_norm(norm, d_model, bias=bias)
        if ffn == "mlp":
            self.ffn = FeedForward(d_model, hidden, activation=activation, bias=bias, dropout=dropout)
        else:
            self.ffn = SwiGLU(d_model, hidden, bias=bias, dropout=dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def attention_branch(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        is_causal: bool,
        rotation: Rotation | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """The attention branch on its (already normalized, if pre-norm) input: (B, N, d) -> (B, N, d).

        ``rotation``: RoPE's (cos, sin) at the N new positions, (N, D/2) each (``lib.rope.rope_cos_sin``),
        applied to q and k. ``cache``: a ``KVCache`` holding L earlier tokens; the new keys
        (rotated first, so never again) and values join it, and the queries read all L + N,
        causal bottom-right (query i at position L + i).
        """
        if rotation is None and cache is None:
            return self.attn(x, mask=mask, is_causal=is_causal)  # (B, N, d)
        q, k, v = self.attn.project(x)  # (B, H, N, D), (B, Hkv, N, D), (B, Hkv, N, D)
        if rotation is not None:
            q = rotate_pairs(q, *rotation)  # (B, H, N, D)
            k = rotate_pairs(k, *rotation)  # (B, Hkv, N, D): rotated once, then cached
        if cache is not None:
            k, v = cache.append(k, v)  # (B, Hkv, L + N, D) each: Hkv heads, never expanded to H
        heads = self.attn.attend(q, k, v, mask, is_causal=is_causal)  # (B, H, N, D)
        return self.attn.out_proj(self.attn.merge_heads(heads))  # (B, N, d)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
        rotation: Rotation | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """(B, N, d) -> (B, N, d). ``mask`` and ``is_causal`` follow lib.attention (True = may read);
        ``rotation`` and ``cache`` as in ``attention_branch``."""
        _check_width(x, self.d_model, "Block")
        if x.ndim != 3:
            raise ValueError(f"Block expects x of shape (B, N, d_model={self.d_model}), got {tuple(x.shape)}")
        if self.norm_first:
            # Pre-norm: each branch reads a normalized copy; the residual stream itself is never normalized.
            attended = self.attention_branch(self.norm1(x), mask, is_causal, rotation, cache)  # (B, N, d)
            x = x + self.dropout1(attended)  # (B, N, d): U
            x = x + self.dropout2(self.ffn(self.norm2(x)))  # (B, N, d): Y
        else:
            # Post-norm: normalize the sum, so the stream is rescaled after every addition.
            x = self.norm1(x + self.dropout1(self.attention_branch(x, mask, is_causal, rotation, cache)))  # U
            x = self.norm2(x + self.dropout2(self.ffn(x)))  # (B, N, d): Y
        return x

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> Block:
        """A Block with the weights of ``layer``, giving the same outputs.

        Our Block is batch-first: for a layer built with ``batch_first=False`` feed it
        ``x.transpose(0, 1)``. Subtle: torch's ``src_mask`` marks with True the keys that
        may NOT be read; our ``mask`` (like SDPA's) marks those that may.
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"from_torch expects an nn.TransformerEncoderLayer, got {type(layer).__name__}")
        act = layer.activation
        if act is F.relu or isinstance(act, nn.ReLU):
            activation = "relu"
        elif act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
            activation = "gelu"
        else:
            raise ValueError(f"from_torch: activation {act!r} is neither relu nor exact gelu")
        if not isinstance(layer.norm1, nn.LayerNorm):
            raise TypeError(f"from_torch: expected LayerNorm norms, got {type(layer.norm1).__name__}")
        attn = layer.self_attn
        weight = layer.linear1.weight
        block = cls(
            layer.linear1.in_features,
            attn.num_heads,
            hidden=layer.linear1.out_features,
            norm_first=layer.norm_first,
            activation=activation,
            dropout=layer.dropout.p,
            bias=layer.linear1.bias is not None,
        ).to(device=weight.device, dtype=weight.dtype)  # before copying, so float64 stays float64
        block.attn = MultiHeadAttention.from_torch(attn)
        for ours, theirs in ((block.norm1, layer.norm1), (block.norm2, layer.norm2)):
            ours.eps = theirs.eps
            ours.load_state_dict(theirs.state_dict())
        block.ffn.up_proj.load_state_dict(layer.linear1.state_dict())
        block.ffn.down_proj.load_state_dict(layer.linear2.state_dict())
        return block.train(layer.training)
