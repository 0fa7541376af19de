"""Pre-norm against post-norm: gradients at initialization and a short training run (chapter 4).

``diagnose_stack`` builds a fresh causal stack of ``lib.blocks.Block`` with the norms
placed before each branch (pre-norm) or after each residual add (post-norm), runs one
batch forward and backward, and records per block:

    grad_norms          ‖∂loss/∂θ‖ over the block's parameters, input side first
    ffn_out_grad_norms  ‖∂loss/∂W2‖ for the FFN's output matrix, the one Xiong et al. (2020) bound
    stream_rms          the root mean square of the residual stream the block hands on

Post-norm ends every block in a LayerNorm, so the stream it hands on stays at unit scale
while that LayerNorm's learned gain is 1 and its bias 0, as at initialization; pre-norm
never normalizes the stream, which grows as each block adds its branch to it.

``train_copy_task`` trains a small stack of either kind with Adam at a constant learning
rate, no warmup, on a task it can learn only through attention: repeat the first half of
a random sequence. Whether it learns, or stays at the loss of a uniform guess, ln V, is
what the learning rate and the placement decide. What the gradients and the runs show,
and how that compares with Xiong et al. (2020), is chapter 4's.

Shape letters used in the comments:
    B    batch                 N    tokens (positions)
    d    model width, d_model  V    vocabulary
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.blocks import Block, make_norm
from lib.validation import positive_int

__all__ = ["StackDiagnostics", "diagnose_stack", "CopyModel", "copy_batch", "train_copy_task"]


# --- Pre-norm vs post-norm at initialization ---------------------------------------------
@dataclass
class StackDiagnostics:
    grad_norms: list[float]  # per block, input side first: ‖∂loss/∂θ‖ over the block's parameters
    ffn_out_grad_norms: list[float]  # per block: ‖∂loss/∂W2‖, the FFN's output matrix (weights only)
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
    ffn_out = [block.ffn.down_proj.weight.grad.norm().item() for block in blocks]
    return StackDiagnostics(grad_norms, ffn_out, stream_rms)


# --- Pre-norm vs post-norm in training --------------------------------------------------------
class CopyModel(nn.Module):
    """Token and learned position embeddings, a causal stack of ``Block``, a read-out to V logits.

    A pre-norm stack ends in a final LayerNorm before the read-out; a post-norm one already
    ends in one. Default (PyTorch) initialization, as in ``diagnose_stack``.
    """

    def __init__(self, *, norm_first: bool, n_layers: int, d_model: int, n_heads: int, vocab: int, max_len: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, norm_first=norm_first) for _ in range(n_layers))
        self.final = make_norm("layer", d_model) if norm_first else nn.Identity()
        self.readout = nn.Linear(d_model, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, N) token ids -> (B, N, V) next-token logits."""
        x = self.embed(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))  # (B, N, d)
        for block in self.blocks:
            x = block(x, is_causal=True)  # (B, N, d)
        return self.readout(self.final(x))  # (B, N, V)


def copy_batch(batch: int, half: int, vocab: int, generator: torch.Generator) -> torch.Tensor:
    """(B, 2·half) token ids: ``half`` uniformly random tokens, then the same tokens again.

    The first half cannot be predicted; the second can, but only by reading back ``half``
    positions, which only attention can do.
    """
    first = torch.randint(0, vocab, (batch, half), generator=generator)  # (B, half)
    return torch.cat([first, first], dim=1)  # (B, 2·half)


def train_copy_task(
    *,
    norm_first: bool,
    lr: float,
    steps: int = 80,
    n_layers: int = 4,
    d_model: int = 32,
    n_heads: int = 4,
    vocab: int = 16,
    half: int = 8,
    batch: int = 16,
    seed: int = 0,
) -> list[float]:
    """Train a fresh ``CopyModel`` with Adam at the constant learning rate ``lr`` (no warmup,
    no clipping) and return the loss of every step, in nats.

    The loss is the cross-entropy of the second half's predictions, the ones the first half
    makes possible; a model that has learned nothing scores ln(vocab). Seeded: the model,
    the data and so the losses depend only on the arguments. Global RNG state is left as it was.
    """
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < math.inf:
        raise ValueError(f"lr must be a positive finite number, got {lr!r}")
    steps, half, batch = positive_int("steps", steps), positive_int("half", half), positive_int("batch", batch)
    vocab = positive_int("vocab", vocab)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = CopyModel(
            norm_first=norm_first, n_layers=n_layers, d_model=d_model, n_heads=n_heads, vocab=vocab, max_len=2 * half
        )
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98))  # Vaswani et al.'s betas
    data = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        ids = copy_batch(batch, half, vocab, data)  # (B, 2·half)
        logits = model(ids[:, :-1])  # (B, 2·half - 1, V): position t predicts token t + 1
        # positions half - 1 .. 2·half - 2 predict the second half, tokens half .. 2·half - 1
        loss = F.cross_entropy(logits[:, half - 1 :].reshape(-1, vocab), ids[:, half:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
