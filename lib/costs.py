"""What attention costs as the context grows: arithmetic, memory, and edge counts (chapter 5).

Models, not measurements: FLOPs count the multiply-adds of the matrix products (2 per
multiply-add), bytes count what a tensor holds. Measured latency depends on kernels,
hardware and memory traffic; see ``python -m lib.bench attention`` for that.

Symbols as in chapter 5: N queries (= keys in self-attention), d model width, h heads,
d_k = d_v = d / h per head, f the FFN hidden width, w a window width, g global tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lib.validation import check_heads

MIB, GIB = 2**20, 2**30


def score_matrix_bytes(
    n_queries: int, n_keys: int | None = None, *, heads: int = 1, batch: int = 1, bytes_per_element: int = 2
) -> int:
    """Bytes of one materialized (B, h, N, M) score (or weight) matrix."""
    n_keys = n_queries if n_keys is None else n_keys
    return batch * heads * n_queries * n_keys * bytes_per_element


@dataclass(frozen=True)
class LayerFlops:
    """FLOPs of one transformer layer's forward pass at sequence length n."""

    scores: int  # Q Kᵀ: quadratic in n
    weighted_values: int  # A V: quadratic in n
    projections: int  # W_Q, W_K, W_V, W_O: linear in n
    ffn: int  # two projections d -> f -> d: linear in n

    @property
    def pairwise(self) -> int:
        return self.scores + self.weighted_values

    @property
    def linear(self) -> int:
        return self.projections + self.ffn

    @property
    def total(self) -> int:
        return self.pairwise + self.linear


def layer_flops(n: int, d_model: int, *, ffn_width: int | None = None, n_keys: int | None = None) -> LayerFlops:
    """Dense attention with h·d_k = h·d_v = d, and a two-projection FFN (f = 4d by default).

    QKᵀ is, per head, an (N, d_k) by (d_k, M) product: 2·N·M·d_k FLOPs, so 2·N·M·d over
    all heads, whatever h is; AV likewise. The four projections are (N, d) by (d, d)
    products, and the FFN is (N, d)(d, f) then (N, f)(f, d).
    """
    ffn_width = 4 * d_model if ffn_width is None else ffn_width
    n_keys = n if n_keys is None else n_keys
    return LayerFlops(
        scores=2 * n * n_keys * d_model,
        weighted_values=2 * n * n_keys * d_model,
        projections=4 * 2 * n * d_model * d_model,
        ffn=2 * 2 * n * d_model * ffn_width,
    )


# --- which query-key pairs a pattern allows -----------------------------------------------


def dense_pairs(n: int) -> int:
    return n * n


def causal_pairs(n: int) -> int:
    """Query i reads keys 0..i: 1 + 2 + ... + n."""
    return n * (n + 1) // 2


def window_pairs(n: int, window: int) -> int:
    """Causal sliding window: query i reads itself and the ``window - 1`` keys before it."""
    window = min(window, n)
    return window * (window + 1) // 2 + (n - window) * window  # the first rows are cut short


def global_local_pairs(n: int, window: int, n_global: int) -> int:
    """Sparse local + global (Longformer-style, bidirectional): query i reads keys with
    |i - j| < window, and the first ``n_global`` tokens read and are read by everyone."""
    radius = window - 1
    band = n + 2 * sum(n - offset for offset in range(1, min(radius, n - 1) + 1))  # |i - j| <= radius
    g = min(n_global, n)
    # Inclusion-exclusion: the global rows and columns hold 2gn - g² pairs; take away those
    # already in the band (the band is symmetric, so rows and columns overlap it equally).
    band_in_global_rows = sum(min(n, i + radius + 1) - max(0, i - radius) for i in range(g))
    band_in_global_block = sum(min(g, i + radius + 1) - max(0, i - radius) for i in range(g))
    return band + (2 * g * n - g * g) - (2 * band_in_global_rows - band_in_global_block)


def linear_attention_cost(n: int, feature_dim: int) -> int:
    """Linear attention never forms pairs: it builds φ(K)ᵀV once (n rows of a feature_dim-wide
    map) and each query reads it, so its cost grows as n · feature_dim, not n²."""
    return n * feature_dim


def linear_attention_flops(n_queries: int, n_keys: int, head_dim: int, value_dim: int | None = None) -> int:
    """Matrix-product FLOPs of non-causal linear attention for one head (``lib.linear_attention``):
    S = φ(K)ᵀV is 2·M·D·Dv, the reads φ(q)ᵀS and φ(q)ᵀz are 2·N·D·Dv and 2·N·D.
    Linear in N and M, but growing with D·Dv: softmax attention is the reverse, 4·N·M·D."""
    value_dim = head_dim if value_dim is None else value_dim
    return 2 * n_keys * head_dim * value_dim + 2 * n_queries * head_dim * value_dim + 2 * n_queries * head_dim


PATTERNS = ("dense", "causal", "window", "global+local", "linear")


def pattern_pairs(pattern: str, n: int, *, window: int = 256, n_global: int = 16) -> int | None:
    """Query-key pairs (edges) a pattern allows at length n; None for linear, which forms none."""
    if pattern == "dense":
        return dense_pairs(n)
    if pattern == "causal":
        return causal_pairs(n)
    if pattern == "window":
        return window_pairs(n, window)
    if pattern == "global+local":
        return global_local_pairs(n, window, n_global)
    if pattern == "linear":
        return None
    raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")


def pattern_flops(
    pattern: str, n: int, *, head_dim: int = 64, heads: int = 1, window: int = 256, n_global: int = 16
) -> int:
    """Modeled attention FLOPs of one layer (the attention part only, no projections).

    Each allowed pair costs a q·k product and a weighted add of v: 2·D + 2·D FLOPs per head.
    A kernel that skips exactly the disallowed pairs would do this much work; real kernels
    work in tiles and do somewhat more at the band's edges. Linear attention: its formula.
    """
    pairs = pattern_pairs(pattern, n, window=window, n_global=n_global)
    if pairs is None:
        return heads * linear_attention_flops(n, n, head_dim)
    return heads * 4 * pairs * head_dim


def pattern_mask(pattern: str, n: int, *, window: int = 0, n_global: int = 0) -> torch.Tensor:
    """The boolean (N, N) mask of a pattern, True = may read: the brute-force reference."""
    rows = torch.arange(n)[:, None]  # (N, 1)
    cols = torch.arange(n)[None, :]  # (1, N)
    if pattern == "dense":
        return torch.ones(n, n, dtype=torch.bool)
    if pattern == "causal":
        return cols <= rows
    if pattern == "window":
        return (cols <= rows) & (cols > rows - window)
    if pattern == "global+local":
        is_global = torch.arange(n) < n_global
        return ((rows - cols).abs() < window) | is_global[:, None] | is_global[None, :]
    raise ValueError(f"pattern must be dense, causal, window or global+local, got {pattern!r}")


def edge_counts(n: int, *, window: int = 256, n_global: int = 16, feature_dim: int = 64) -> dict[str, int]:
    """Modeled work units of each pattern at length n (pairs; n · feature_dim for linear)."""
    return {
        "dense": dense_pairs(n),
        "causal": causal_pairs(n),
        f"window (w={window})": window_pairs(n, window),
        f"global+local (w={window}, g={n_global})": global_local_pairs(n, window, n_global),
        f"linear (features={feature_dim})": linear_attention_cost(n, feature_dim),
    }


# --- one block's parameters, and the FLOPs they cost per token (chapter 4's ledger) ---------


@dataclass(frozen=True)
class BlockWeights:
    """The weight matrices of one transformer block (no biases, no norm vectors)."""

    attention: int  # W_Q and W_O: d·d each; W_K and W_V: d·(h_kv·d_h) each
    ffn: int  # 2·d·f for a two-projection MLP, 3·d·f for SwiGLU

    @property
    def total(self) -> int:
        return self.attention + self.ffn

    def forward_flops(self, tokens: int) -> int:
        """2 FLOPs (a multiply and an add) per weight per token: every token meets every weight once."""
        return 2 * self.total * tokens


def block_weights(
    d_model: int, *, n_heads: int = 1, n_kv_heads: int | None = None, hidden: int | None = None, gated: bool = False
) -> BlockWeights:
    """The ledger of one block: attention 4d² (2d² + 2d·h_kv·d_h under GQA), FFN 2df (or 3df).

    With f = 4d and no GQA that is 4d² + 8d² = 12d², so a forward pass over N tokens costs
    2 · 12d² · N = 24Nd² FLOPs in its matrices: chapter 5's linear term.
    """
    n_heads, n_kv_heads, d_model = check_heads(n_heads, n_kv_heads, d_model, where="block_weights")
    hidden = 4 * d_model if hidden is None else hidden
    kv_width = n_kv_heads * (d_model // n_heads)
    attention = 2 * d_model * d_model + 2 * d_model * kv_width
    ffn = (3 if gated else 2) * d_model * hidden
    return BlockWeights(attention, ffn)


# --- memory traffic: what attention reads from and writes to slow memory (HBM) ------------


def standard_attention_io(n: int, head_dim: int) -> int:
    """Elements naive attention moves between HBM and the chip, per head (Dao et al. 2022, Alg. 0).

    Read Q, K (2Nd), write S (N²); read S, write P (2N²); read P and V, write O (N² + 2Nd):
    4Nd + 4N², which the N² terms dominate.
    """
    return 4 * n * head_dim + 4 * n * n


@dataclass(frozen=True)
class FlashIO:
    block_k: int  # B_c = ceil(M / 4d): key/value rows per tile
    block_q: int  # B_r = min(B_c, d): query rows per tile
    elements: int  # HBM reads and writes, in elements


def flash_attention_io(n: int, head_dim: int, sram_elements: int) -> FlashIO:
    """Elements FlashAttention's Algorithm 1 moves between HBM and the chip, per head.

    Block sizes follow from the on-chip memory M (in elements): B_c = ceil(M / 4d) keys and
    B_r = min(B_c, d) queries per tile. The outer loop loads each K_j, V_j tile once (2Nd in
    all); for each of the T_c = ceil(N / B_c) key tiles the inner loop reads Q_i, O_i, ℓ_i,
    m_i and writes O_i, ℓ_i, m_i for every query tile: N(3d + 4) per key tile. In all
    2Nd + T_c·N(3d + 4) ≈ 12N²d²/M: Θ(N²d²/M), against naive attention's Θ(Nd + N²).
    """
    if min(n, head_dim, sram_elements) < 1:
        raise ValueError(f"need positive n, head_dim, sram_elements, got {n}, {head_dim}, {sram_elements}")
    block_k = -(-sram_elements // (4 * head_dim))
    block_q = min(block_k, head_dim)
    key_tiles = -(-n // block_k)
    return FlashIO(block_k, block_q, 2 * n * head_dim + key_tiles * n * (3 * head_dim + 4))
