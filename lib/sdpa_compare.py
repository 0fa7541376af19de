"""Our attention against torch's SDPA: kernels, precision, fused vs plain (chapter 2 and the appendix).

``lib.attention.MultiHeadAttention`` has two paths, the fused one through
``F.scaled_dot_product_attention`` (SDPA) and the plain one through ``lib.attention.attention``;
this module holds the comparisons chapter 2 and the appendix on attention backends make
between them:

* ``sdpa_backends`` asks which SDPA kernels agree to run a given input here;
* ``precision_comparison`` compares the plain ``attention`` with torch's SDPA in fp32,
  fp16 and bf16, each against a float64 reference;
* ``fused_vs_plain`` compares the two paths of ``MultiHeadAttention`` in outputs and
  gradients.

Shape letters: B batch, H query heads, N queries, M keys, D = d_k head width, C = d_model.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from lib.attention import MultiHeadAttention, attention

__all__ = ["sdpa_backends", "PrecisionRow", "TOLERANCES", "precision_comparison", "FusedVsPlain", "fused_vs_plain"]


def sdpa_backends(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs) -> dict[str, bool]:
    """For each SDPA backend: does it run these inputs on this machine when pinned?

    Unpinned, SDPA picks the first backend that accepts the inputs; which ones accept them
    depends on the device, dtype, shapes, mask and flags, so the answer varies by machine.
    """
    verdicts = {}
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                    SDPBackend.MATH):  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a refusing backend warns why, then raises
            try:
                with sdpa_kernel(backend):
                    F.scaled_dot_product_attention(q, k, v, **kwargs)
                verdicts[backend.name.lower()] = True
            except RuntimeError:
                verdicts[backend.name.lower()] = False
    return verdicts


@dataclass(frozen=True)
class PrecisionRow:
    dtype: str
    ours_vs_sdpa: float  # max |attention - SDPA| in this dtype
    ours_error: float  # max |attention - float64 reference|
    sdpa_error: float  # max |SDPA - float64 reference|
    tolerance: float
    largest_output: float  # max |float64 reference|: the size the errors are measured against
    mean_output: float  # mean |float64 reference|

    @property
    def within(self) -> bool:
        return max(self.ours_vs_sdpa, self.ours_error, self.sdpa_error) <= self.tolerance


# Outputs are O(1): a few units in the last place of each format. float32 keeps 24
# significant bits (eps 1.2e-7), float16 11 (eps 9.8e-4), bfloat16 8 (eps 7.8e-3).
TOLERANCES = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 4e-2}


def precision_comparison(
    batch: int = 2, n_heads: int = 4, tokens: int = 64, head_dim: int = 32, seed: int = 0
) -> list[PrecisionRow]:
    """Causal attention in fp32, fp16 and bf16: ours against SDPA and both against float64."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, n_heads, tokens, head_dim, generator=gen, dtype=torch.float64) for _ in range(3))
    exact = attention(q, k, v, is_causal=True)  # (B, H, N, D), float64
    rows = []
    for dtype, tolerance in TOLERANCES.items():
        low = [t.to(dtype) for t in (q, k, v)]
        ours = attention(*low, is_causal=True).double()  # (B, H, N, D)
        sdpa = F.scaled_dot_product_attention(*low, is_causal=True).double()  # N == M: top-left = bottom-right
        rows.append(
            PrecisionRow(
                str(dtype).removeprefix("torch."),
                (ours - sdpa).abs().max().item(),
                (ours - exact).abs().max().item(),
                (sdpa - exact).abs().max().item(),
                tolerance,
                exact.abs().max().item(),
                exact.abs().mean().item(),
            )
        )
    return rows


@dataclass(frozen=True)
class FusedVsPlain:
    output_diff: float  # max |fused - plain| over the outputs
    input_grad_diff: float  # max |∂loss/∂x, fused - plain|
    weight_grad_diff: float  # max over every parameter of max |∂loss/∂w, fused - plain|


def fused_vs_plain(module: MultiHeadAttention, x: torch.Tensor, *, is_causal: bool = True) -> FusedVsPlain:
    """Run ``module`` through SDPA and through the plain ``attention`` on the same x, and
    compare outputs and the gradients of a fixed random loss, (output · r).sum()."""
    was_fused = module.fused
    results = []
    for fused in (True, False):
        module.fused = fused
        module.zero_grad()
        x_in = x.detach().clone().requires_grad_(True)
        out = module(x_in, is_causal=is_causal)  # (B, N, C)
        weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(0))  # the loss's direction
        (out * weight).sum().backward()
        grads = [p.grad.detach().clone() for p in module.parameters()]
        results.append((out.detach(), x_in.grad.detach(), grads))
    module.fused = was_fused
    module.zero_grad()
    (out_a, gx_a, gw_a), (out_b, gx_b, gw_b) = results
    return FusedVsPlain(
        (out_a - out_b).abs().max().item(),
        (gx_a - gx_b).abs().max().item(),
        max((a - b).abs().max().item() for a, b in zip(gw_a, gw_b, strict=True)),
    )
