"""Every exercise's answer, computed again without the code that declared it (issue 32 item 5).

The declarations compute their expected values with the library (``lib.costs.block_weights``,
``lib.tokenizer.pair_counts``, ``lib.attention``); accepting those values proves nothing about
them. Here each value exercise's answer is computed another way, by a hand-derived formula, a
brute force over every case, or a peer library (torch.nn, torch.nn.functional, unicodedata),
and each function exercise's reference is compared with a peer implementation on its hidden
cases. No module of ``lib`` but the exercises themselves is imported.
"""

import itertools
import math
import unicodedata
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lib.checks import CORRECT, FunctionExercise, ValueExercise, exercises, grade
from lib.value_grading import tolerance

KEYS, VALUES = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[2.0, 0.0], [0.0, 4.0]])


def sdpa(q, k, v, mask=None):
    """One query's read through torch's own attention: (d,) query -> (d_v,) output."""
    return F.scaled_dot_product_attention(q[None, None], k[None], v[None], attn_mask=mask)[0, 0].tolist()


def rotation(angle: float) -> torch.Tensor:
    return torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])


def rope_score(q, k, theta, m, n):
    return float((rotation(m * theta) @ torch.tensor(q)) @ (rotation(n * theta) @ torch.tensor(k)))


def changed_positions() -> list[int]:
    """4.what-changes by experiment: a random FFN and a random causal block, position 5 changed."""
    torch.manual_seed(0)
    ffn = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    block = nn.MultiheadAttention(8, 2, batch_first=True)
    blocked = torch.ones(8, 8, dtype=torch.bool).triu(1)  # nn.MultiheadAttention: True = may NOT read

    def layer(x):
        return ffn(x + block(x, x, x, attn_mask=blocked)[0])

    x = torch.randn(1, 8, 8)
    y = x.clone()
    y[0, 5] += 1.0
    counts = [int(((f(x) - f(y)).abs().amax(-1) > 1e-6).sum()) for f in (ffn, layer)]
    return counts


def causal_tiles(n: int, tile: int) -> int:
    return sum(kj * tile <= qi * tile + tile - 1 for qi in range(n // tile) for kj in range(n // tile))


def pair_count(n: int, allowed) -> int:
    return sum(allowed(i, j) for i in range(n) for j in range(n))


def bpe_first_merge(chunks: dict[str, int]) -> list[int]:
    pairs = Counter()
    for chunk, count in chunks.items():
        for a, b in zip(chunk, chunk[1:], strict=False):
            pairs[(a, b)] += count
    best = max(pairs.values())
    return [ord(c) for c in min(p for p, c in pairs.items() if c == best)]


def bpe_encode(word: str, merges: list[tuple[str, str]]) -> list[str]:
    pieces, rank = list(word), {pair: i for i, pair in enumerate(merges)}
    while True:
        found = [(rank[p], i) for i, p in enumerate(zip(pieces, pieces[1:], strict=False)) if p in rank]
        if not found:
            return pieces
        _, i = min(found)
        pieces[i : i + 2] = [pieces[i] + pieces[i + 1]]


def best_segmentation(word: str, scores: dict[str, float]) -> float:
    best = -math.inf
    for cuts in itertools.product([0, 1], repeat=len(word) - 1):
        pieces, start = [], 0
        for i, cut in enumerate(cuts, start=1):
            if cut:
                pieces.append(word[start:i])
                start = i
        pieces.append(word[start:])
        if all(p in scores for p in pieces):
            best = max(best, sum(scores[p] for p in pieces))
    return best


def numel(*modules: nn.Module) -> int:
    return sum(p.numel() for m in modules for p in m.parameters())


def layer_flops(n: int, d: int) -> int:
    """Multiply-adds ×2 of one layer: four d×d projections, a 4d FFN, QKᵀ and AV."""
    return 2 * n * (4 * d * d + 2 * d * 4 * d) + 2 * 2 * n * n * d


def online_state(m, l, block):
    """(m, l) after a block, through logsumexp: l·e^m is the running sum of e^x."""
    total = torch.logaddexp(torch.tensor(m + math.log(l)), torch.logsumexp(torch.tensor(block), 0))
    m_new = max(m, *block)
    return [m_new, math.exp(total.item() - m_new)]


MERGES = [("w", "e"), ("l", "o"), ("e", "r"), ("o", "w"), ("lo", "w"), ("we", "r")]
LATTICE = {"a": -3, "b": -3, "c": -3, "d": -3, "ab": -4, "bc": -2.5, "cd": -4, "abc": -6, "bcd": -5.5}
GIB = 2**30

INDEPENDENT = {
    "1.longer-query": lambda: sdpa(torch.tensor([2.0, 0.0]), KEYS, VALUES),
    "1.equal-scores": lambda: sdpa(torch.tensor([1.0, 1.0]), KEYS, VALUES),
    "1.masked-read": lambda: (
        torch.softmax(torch.tensor([1.0, -math.inf, 0.0]), 0) @ torch.tensor([[2.0, 0.0], [0.0, 4.0], [6.0, 2.0]])
    ).tolist(),  # fmt: skip
    "1.new-values": lambda: sdpa(torch.tensor([1.0, 0.0]), KEYS, torch.tensor([[3.0, 0.0], [0.0, -2.0]])),
    "1.wider-variance": lambda: [64 * 4 * 4, 1 / 32],  # 64 products of variance 4·4; 1/√1024
    "2.score-shape": lambda: list((torch.zeros(4, 12, 10, 8) @ torch.zeros(4, 12, 8, 6)).shape),
    "2.mask-after-softmax": lambda: (
        torch.softmax(torch.tensor([2.0, 1.0, -math.inf]), 0) @ torch.tensor([1.0, 3.0, 8.0])
    ).item(),  # fmt: skip
    "2.cache-causal-row": lambda: [int(j <= 7 - 3 + 1) for j in range(7)],  # query 1 sits at position M - N + 1
    "2.causal-alignment": lambda: [[1, 1, 1], [1, 0, 0]],  # bottom-right: the last key; top-left: the first
    "2.gqa-kv-params": lambda: numel(nn.Linear(768, 4 * 64, bias=False), nn.Linear(768, 4 * 64, bias=False)),
    "2.concat-width": lambda: 4 * 24,
    "3.causal-reads": lambda: [int(j <= 4) for j in range(7)],  # t5 is predicted at position 4
    "3.passes": lambda: [1, 9],
    "3.shifted-score": lambda: rope_score([1.0, 0.0], [1.0, 0.0], math.pi / 10, 13, 16),
    "3.gap-score": lambda: rope_score([1.0, 0.0], [0.0, 1.0], math.pi / 12, 3, 7),
    "3.permuted-outputs": lambda: [2, 0, 3, 1],  # measured in test_permuted_outputs_measured
    "3.cross-attention-row": lambda: [1] * 6 + [0],
    "3.pair-period": lambda: 2 * math.pi * math.sqrt(500000),  # ω = 500000^(-64/128)
    "4.ffn-params": lambda: numel(nn.Linear(96, 320), nn.Linear(320, 96)),
    "4.swiglu-width": lambda: 8 * math.ceil(8 * 400 / 3 / 8),
    "4.block-weights": lambda: numel(
        *(nn.Linear(i, o, bias=False) for i, o in [(320, 320), (320, 80), (320, 80), (320, 320)]),
        *(nn.Linear(i, o, bias=False) for i, o in [(320, 856), (320, 856), (856, 320)]),
    ),
    "4.layernorm-by-hand": lambda: F.layer_norm(torch.tensor([2.0, 4.0, 6.0, 8.0]), (4,), eps=0.0).tolist(),
    "4.prenorm-zero-branches": lambda: [1.0, 3.0, 4.0, 8.0],
    "4.postnorm-zero-branches": lambda: F.layer_norm(F.layer_norm(torch.tensor([1.0, 3.0, 4.0, 8.0]), (4,)), (4,)),
    "4.what-changes": changed_positions,
    "4.residual-gradient": lambda: (1 + 0.5) * (1 - 0.8),  # measured in test_residual_gradient_measured
    "5.score-mib": lambda: 3 * 16 * 2048 * 2048 * 4 / 2**20,
    "5.total-doubling": lambda: layer_flops(12288, 2048) / layer_flops(6144, 2048),
    "5.raised-max": lambda: online_state(2.0, 1.5, [1.0, 4.0]),
    "5.is-flash-exact": lambda: 2,
    "5.causal-tiles": lambda: causal_tiles(1024, 64),
    "5.window-edges": lambda: pair_count(12, lambda i, j: i - 4 < j <= i),
    "5.global-edges": lambda: pair_count(16, lambda i, j: abs(i - j) < 3 or min(i, j) < 2),
    "5.accumulator": lambda: (
        torch.tensor([3.0, -1.0]) * math.exp(1 - 2)
        + torch.exp(torch.tensor([2.0, 0.0]) - 2) @ torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    ).tolist(),  # fmt: skip
    "6.double-length-and-batch": lambda: 2 * 2,
    "6.kv-bytes": lambda: 2 * 40 * 4 * 2048 * 8 * 128 * 2 / GIB,
    "6.gqa-cache": lambda: 16 * 8 / 64,
    "6.blocks-needed": lambda: sum(math.ceil(n / 16) for n in (1000, 1010, 1024)),
    "6.next-position": lambda: 37,
    "6.decode-read": lambda: (4500 / 1500) * (8 / 64),
    "6.fork-blocks": lambda: 192 // 16 + 10 * math.ceil(50 / 16),
    "6.weights-gb": lambda: 13e9 * 2 / 1e9,
    "6.serving-budget": lambda: [
        (80 - 26 - 6) * GIB // (128 * 1024) // 4096,
        (80 - 26 - 6) * GIB // (128 * 1024) // 16 // math.ceil(1000 / 16),
    ],
    "6.bandwidth-floor": lambda: (13e9 * 2 + 8 * 0.5e9) / 3.35e12 * 1e3,
    "7.next-merge": lambda: bpe_first_merge({"hug": 4, "pug": 3, "pun": 12, "bun": 5, "hugs": 2}),
    "7.encode-word": lambda: (
        [2, 257, 256 + MERGES.index(("we", "r"))] if bpe_encode("lower", MERGES) == ["lo", "wer"] else None
    ),  # fmt: skip
    "7.viterbi": lambda: best_segmentation("abcd", LATTICE),
    "7.utf8-bytes": lambda: [0xF0, 0x9F, 0x99, 0x82],
    "7.nfkc": lambda: [0, 0, 0, 1, 1, 0],  # é composes, ㎏ -> kg, ½ -> 1⁄2, ß and ï stay, Å sign -> Å
    "7.embedding-params": lambda: 2 * 1024 * (128_000 - 32_000) / 1e6,
    "7.quadratic-loop": lambda: 0.12 * (8000 / 1000) ** 2,
    "8.patch-grid": lambda: list(F.unfold(torch.zeros(1, 3, 192, 320), 32, stride=32).shape[:0:-1]),
    "8.projection-params": lambda: numel(nn.Linear(3 * 32 * 32, 512)),
    "8.conv-output": lambda: list(nn.Conv2d(3, 512, 32, stride=32)(torch.zeros(1, 3, 192, 320)).shape[1:]),
    "8.tokens-with-cls": lambda: (384 // 16) ** 2 + 1,
    "8.halve-patch-attention": lambda: ((224 // 14) ** 2 / (224 // 28) ** 2) ** 2,
    "8.halve-patch-projection": lambda: ((224 // 14) ** 2 * 3 * 14 * 14) / ((224 // 28) ** 2 * 3 * 28 * 28),
    "8.resolution": lambda: (320 // 16) * (480 // 16) + 1,
    "9.parameters": lambda: 2 * (2 * 64 * 64 + 2 * 64 * 16 + 3 * 64 * 160 + 2 * 64) + 1000 * 64 + 64,
    "9.uniform-loss": lambda: F.cross_entropy(torch.zeros(1, 2048, dtype=torch.float64), torch.tensor([0])).item(),
    "9.cache-bytes": lambda: torch.zeros(2, 300, 2, 32, dtype=torch.bfloat16).nbytes,
    "9.top-k-one": lambda: 1.0,
    "9.top-k-two": lambda: torch.softmax(torch.tensor([2.0, 1.6]) / 0.5, 0)[1].item(),
}

VALUE_EXERCISES = [e for e in exercises().values() if isinstance(e, ValueExercise)]


def test_every_value_exercise_has_an_independent_answer():
    assert sorted(INDEPENDENT) == sorted(e.id for e in VALUE_EXERCISES)


@pytest.mark.parametrize("exercise", VALUE_EXERCISES, ids=lambda e: e.id)
def test_expected_answer_agrees_with_an_independent_computation(exercise):
    answer = INDEPENDENT[exercise.id]()
    answer = answer.tolist() if isinstance(answer, torch.Tensor) else answer
    assert grade(exercise, answer).status == CORRECT, (answer, exercise.expected)
    precise = 1e-6 if exercise.whole else tolerance(exercise).atol / 50
    assert np.allclose(np.asarray(exercise.expected, dtype=np.float64), answer, atol=precise, rtol=0), answer


def test_permuted_outputs_measured():
    torch.manual_seed(0)
    attend = nn.MultiheadAttention(4, 1, batch_first=True)
    x = torch.randn(1, 4, 4)
    y = attend(x, x, x)[0][0]
    order = [2, 0, 3, 1]
    permuted = attend(x[:, order], x[:, order], x[:, order])[0][0]
    rows = [int(torch.cdist(row[None], y).argmin()) for row in permuted]
    assert rows == order and grade(exercises()["3.permuted-outputs"], rows).correct


def test_residual_gradient_measured():
    x = torch.tensor(2.0, requires_grad=True)
    y1 = x + 0.5 * x
    (y1 + -0.8 * y1).backward()
    assert grade(exercises()["4.residual-gradient"], x.grad.item()).correct


def test_nfkc_answer_is_what_unicodedata_gives():
    strings = ["cafe\u0301", "\u338f", "\u00bd", "Stra\u00dfe", "na\u00efve", "\u212b"]
    unchanged = [int(unicodedata.normalize("NFKC", s) == s) for s in strings]
    assert unchanged == INDEPENDENT["7.nfkc"]()


# --- function exercises: each reference against a peer implementation on its hidden cases ------


def _merge(x):
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)  # heads side by side


def _causal_padding(lengths, n, m):
    out = torch.zeros(len(lengths), 1, n, m)
    for b, i, j in itertools.product(range(len(lengths)), range(n), range(m)):
        out[b, 0, i, j] = float(j < lengths[b] and j <= m - n + i)
    return out


def _rope(x, positions, freqs):
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    turned = pairs * torch.polar(torch.ones_like(freqs), positions[:, None].to(freqs.dtype) * freqs)
    return torch.view_as_real(turned).reshape(x.shape)


def _online(m, l, block):
    old = torch.where(l > 0, m + l.log(), torch.full_like(m, -math.inf))
    total = torch.logaddexp(old, torch.logsumexp(block, -1))
    m_new = torch.maximum(m, block.amax(-1))
    return torch.stack((m_new, torch.where(total > -math.inf, (total - m_new.nan_to_num(neginf=0)).exp(), 0.0)))


def _decode_mask(n, c):
    return torch.tensor([[float(j <= c + i) for j in range(c + n)] for i in range(n)])


def _sample(logits, t, k):
    scaled = logits.float() / t
    if k is None or k >= scaled.shape[-1]:
        return torch.softmax(scaled, -1)
    kth = scaled.topk(k, -1).values[:, -1:]
    return torch.softmax(scaled.masked_fill(scaled < kth, -math.inf), -1)


def _conv_weight_through_conv(w, c, p):
    """The conv kernel that makes a strided conv equal the linear map of unfolded patches: found by F.conv2d."""
    return w.reshape(w.shape[0], c, p, p)


PEERS = {
    "1.stable-softmax": lambda x: torch.softmax(x, -1).nan_to_num(0.0),
    "2.merge-heads": _merge,
    "2.causal-padding-mask": _causal_padding,
    "3.rope-pairs": _rope,
    "4.rms-norm": lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps),
    "5.online-softmax-update": _online,
    "6.decode-mask": _decode_mask,
    "8.patchify": lambda images, p: F.unfold(images, p, stride=p).transpose(1, 2),
    "8.conv-weight": _conv_weight_through_conv,
    "9.sample-probs": _sample,
}
FUNCTION_EXERCISES = [e for e in exercises().values() if isinstance(e, FunctionExercise)]


def test_every_function_exercise_has_a_peer():
    assert sorted(PEERS) == sorted(e.id for e in FUNCTION_EXERCISES)


@pytest.mark.parametrize("exercise", FUNCTION_EXERCISES, ids=lambda e: e.id)
def test_reference_agrees_with_a_peer_on_every_hidden_case(exercise):
    for case in exercise.cases:
        expected = torch.as_tensor(exercise.reference(*case.args())).to(torch.float64)
        peer = torch.as_tensor(PEERS[exercise.id](*case.args())).to(torch.float64)
        assert peer.shape == expected.shape, case.name
        assert torch.allclose(peer, expected, atol=1e-5, rtol=1e-4, equal_nan=True), case.name


def test_conv_weight_makes_the_convolution_equal_the_patch_projection():
    """8.conv-weight's peer above is a reshape: check that it is the right one, through F.conv2d."""
    torch.manual_seed(0)
    images, w = torch.randn(2, 3, 8, 12), torch.randn(5, 3 * 4 * 4)
    projected = F.unfold(images, 4, stride=4).transpose(1, 2) @ w.T  # (B, N, d)
    kernel = exercises()["8.conv-weight"].reference(w, 3, 4)
    convolved = F.conv2d(images, kernel, stride=4).flatten(2).transpose(1, 2)
    assert torch.allclose(projected, convolved, atol=1e-4)
