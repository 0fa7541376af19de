"""Pre-norm against post-norm at initialization: gradients and the residual stream (chapter 4).

``diagnose_stack`` builds a fresh causal stack of ``lib.blocks.Block`` with the norms
placed before each branch (pre-norm) or after each residual add (post-norm), runs one
batch forward and backward, and records per block:

    grad_norms    ‖∂loss/∂θ‖ over the block's parameters, input side first
    stream_rms    the root mean square of the residual stream the block hands on

Post-norm ends every block in a LayerNorm, so the stream it hands on stays at unit scale;
pre-norm never normalizes the stream, which grows as each block adds its branch to it.
What the gradients show, and how that compares with Xiong et al. (2020), is chapter 4's.

Shape letters used in the comments:
    B    batch                 N    tokens (positions)
    d    model width, d_model
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.blocks import Block, make_norm

__all__ = ["StackDiagnostics", "diagnose_stack"]


# --- Pre-norm vs post-norm at initialization ---------------------------------------------
@dataclass
class StackDiagnostics:
    grad_norms: list[float]  # per block, input side first: ‖∂loss/∂θ‖ over the block's parameters
    stream_rms: list[float]  # per block: root mean square of the residual stream after it


def diagnose_stack(
    n_layers: int = 24, *, norm_first: bool, d_model: int = 64, n_heads: int = 4, tokens: int = 32, seed: int = 0
) -> StackDiagnostics:
    """One backward pass through a freshly initialized causal stack, recording per block the
    gradient norm of its parameters and the scale of the residual stream it hands on.

    The loss is the mean squared error of the stack's output, through a final LayerNorm
    for pre-norm (post-norm's last block already ends in one), against a random target.
    Global RNG state is left as it was.
    """
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        blocks = nn.ModuleList(Block(d_model, n_heads, norm_first=norm_first) for _ in range(n_layers))
        final = make_norm("layer", d_model) if norm_first else nn.Identity()
        x = torch.randn(8, tokens, d_model)  # (B, N, d): unit-scale token embeddings
        target = torch.randn(8, tokens, d_model)  # (B, N, d)
    stream_rms = []
    for block in blocks:
        x = block(x, is_causal=True)  # (B, N, d)
        stream_rms.append(x.detach().pow(2).mean().sqrt().item())
    F.mse_loss(final(x), target).backward()
    grad_norms = [math.sqrt(sum(p.grad.pow(2).sum().item() for p in block.parameters())) for block in blocks]
    return StackDiagnostics(grad_norms, stream_rms)
