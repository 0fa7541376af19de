"""Chapter 4's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py):
torch.nn's own layers (Linear, LayerNorm, TransformerEncoderLayer), autograd, and brute force."""

import torch
import torch.nn.functional as F
from _variant_answers import variant_answer_tests
from torch import nn


def numel(*modules: nn.Module) -> int:
    return sum(p.numel() for m in modules for p in m.parameters())


def swiglu_width(d: int) -> int:
    """The smallest multiple of 8 whose three d×f matrices hold at least the MLP's 8d² weights."""
    return next(f for f in range(8, 8 * d, 8) if 3 * d * f >= 8 * d * d)


def block_weights(d: int, h: int, h_kv: int) -> int:
    kv = h_kv * (d // h)
    f = swiglu_width(d)
    shapes = [(d, d), (d, kv), (d, kv), (d, d), (d, f), (d, f), (f, d)]  # W_Q, W_K, W_V, W_O; gate, up, down
    return numel(*(nn.Linear(i, o, bias=False) for i, o in shapes))


def zero_branch_block(token: tuple[float, ...], *, norm_first: bool) -> list[float]:
    """torch's own encoder layer, its attention and FFN zeroed (norms left at weight 1, bias 0)."""
    layer = nn.TransformerEncoderLayer(4, 1, dim_feedforward=8, dropout=0.0, norm_first=norm_first, batch_first=True)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if not name.startswith("norm"):
                p.zero_()
        return layer.eval()(torch.tensor([[token]]))[0, 0].tolist()


def changed_positions(n: int, position: int) -> list[int]:
    """By experiment: a random FFN and a random causal block over n tokens, one input changed."""
    torch.manual_seed(0)
    ffn = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    attention = nn.MultiheadAttention(8, 2, batch_first=True)
    blocked = torch.ones(n, n, dtype=torch.bool).triu(1)  # True = may NOT read

    def block(x):
        return ffn(x + attention(x, x, x, attn_mask=blocked)[0])

    x = torch.randn(1, n, 8)
    y = x.clone()
    y[0, position] += 1.0
    with torch.no_grad():
        return [int(((f(x) - f(y)).abs().amax(-1) > 1e-6).sum()) for f in (ffn, block)]


def residual_gradient(a1: float, a2: float) -> float:
    x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    y1 = x + a1 * x
    y2 = y1 + a2 * y1
    y2.backward()
    return x.grad.item()


ANSWERS = {
    "4.ffn-params": lambda d, f: numel(nn.Linear(d, f), nn.Linear(f, d)),
    "4.swiglu-width": swiglu_width,
    "4.block-weights": block_weights,
    "4.layernorm-by-hand": lambda token: F.layer_norm(torch.tensor(token, dtype=torch.float64), (4,), eps=0.0),
    "4.prenorm-zero-branches": lambda token: zero_branch_block(token, norm_first=True),
    "4.postnorm-zero-branches": lambda token: zero_branch_block(token, norm_first=False),
    "4.what-changes": changed_positions,
    "4.residual-gradient": residual_gradient,
}

test_has_answers, test_variants_agree = variant_answer_tests(4, ANSWERS)
