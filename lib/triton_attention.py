"""FlashAttention's forward pass as a Triton kernel (chapter 5).

The same algorithm as ``lib.tiled_softmax``, but one program instance per (query block,
batch × head) runs on the GPU: its query tile, running max m, running sum l and
accumulator live in registers and shared memory (SRAM); keys and values stream in from
HBM one block at a time; the (BLOCK_Q, BLOCK_K) score tile never leaves the chip.

Without CUDA the kernel runs in Triton's interpreter (numpy under the hood): slow, but the
same code, so tests check it on a CPU. Triton reads ``TRITON_INTERPRET=1`` when it is imported
(its own library functions, tl.zeros and the rest, are built then) and again while a kernel is
interpreted; this module sets it only for those moments, its import of triton and its own
launches, and restores it after, so the rest of the process (torch's own Triton use included)
never sees it. Subtle: torch can import triton first (its compiler stack does, FlopCounterMode
included), without the interpreter; ``triton_attention`` then says so and what to do
(tests/conftest.py imports this module before any test can).
Where triton is not installed, ``TRITON_MISSING`` says so and ``triton_attention`` raises.

Supported: q (B, H, N, D), k and v (B, Hkv, M, D) with H a multiple of Hkv; no mask or
``is_causal`` (bottom-right, as everywhere in the book); fp32, fp16, bf16 (bf16 on a GPU
only: the interpreter computes tl.dot in numpy, which has no bfloat16, and is refused
there); any N, M and D <= 256. Forward only.
"""

from __future__ import annotations

import contextlib
import math
import os

import torch

from lib.validation import validate_attention_inputs

INTERPRETED = not torch.cuda.is_available()  # no GPU: the kernel runs in Triton's interpreter


@contextlib.contextmanager
def _interpreter_on(on: bool = True):
    """TRITON_INTERPRET=1 while the block runs (when ``on``), then as it was: unset, or the caller's value."""
    before = os.environ.get("TRITON_INTERPRET")
    if on:
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = before


with _interpreter_on(INTERPRETED):  # only while triton builds its library (if it is imported first here)
    try:
        import triton
        import triton.language as tl
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError as error:  # pragma: no cover - exercised where triton is absent
        triton = None
        TRITON_MISSING = f"triton is not installed ({error}); `pip install triton` to run this kernel"
    else:
        TRITON_MISSING = ""

if triton is not None:

    def _attention_forward_kernel(
        q_ptr, k_ptr, v_ptr, out_ptr,
        stride_qb, stride_qh, stride_qn, stride_qd,
        stride_kb, stride_kh, stride_kn, stride_kd,
        stride_vb, stride_vh, stride_vn, stride_vd,
        stride_ob, stride_oh, stride_on, stride_od,
        n_heads, n_groups, n_queries, n_keys, head_dim, scale_log2,
        IS_CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
        INPUT_PRECISION: tl.constexpr,
    ):  # fmt: skip
        query_block = tl.program_id(0)
        batch_head = tl.program_id(1)
        batch, head = batch_head // n_heads, batch_head % n_heads
        kv_head = head // n_groups  # grouped-query attention: consecutive heads share a KV head

        rows = query_block * BLOCK_Q + tl.arange(0, BLOCK_Q)  # (BLOCK_Q,) query indices
        dims = tl.arange(0, BLOCK_D)  # (BLOCK_D,) head dimensions, padded to a power of two
        row_ok, dim_ok = rows < n_queries, dims < head_dim

        # Load this program's query tile once; it stays on chip for the whole key loop.
        q_tile = tl.load(
            q_ptr + batch * stride_qb + head * stride_qh + rows[:, None] * stride_qn + dims[None, :] * stride_qd,
            mask=row_ok[:, None] & dim_ok[None, :], other=0.0,
        )  # (BLOCK_Q, BLOCK_D)  # fmt: skip
        m = tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32)  # running max, in log2 units
        l = tl.zeros([BLOCK_Q], dtype=tl.float32)  # running sum of exp2(score - m)
        acc = tl.zeros([BLOCK_Q, BLOCK_D], dtype=tl.float32)  # running sum of exp2(score - m) · v

        # Causal (bottom-right): query i reads keys j <= i + M - N, so this block needs keys
        # below (last row + 1) + M - N, and the loop stops there instead of masking the rest.
        key_end = n_keys
        if IS_CAUSAL:
            key_end = tl.minimum(n_keys, (query_block + 1) * BLOCK_Q + n_keys - n_queries)
        k_base = k_ptr + batch * stride_kb + kv_head * stride_kh
        v_base = v_ptr + batch * stride_vb + kv_head * stride_vh
        for start in range(0, key_end, BLOCK_K):
            cols = start + tl.arange(0, BLOCK_K)  # (BLOCK_K,) key indices
            col_ok = cols < n_keys
            # Stream one key block in from HBM, transposed for the dot product.
            k_tile = tl.load(
                k_base + cols[None, :] * stride_kn + dims[:, None] * stride_kd,
                mask=col_ok[None, :] & dim_ok[:, None], other=0.0,
            )  # (BLOCK_D, BLOCK_K)  # fmt: skip
            # Scores in log2 units: exp2(x · log2 e) = exp(x), and exp2 is the faster instruction.
            scores = tl.dot(q_tile, k_tile, input_precision=INPUT_PRECISION) * scale_log2  # (BLOCK_Q, BLOCK_K)
            allowed = col_ok[None, :]
            if IS_CAUSAL:
                allowed = allowed & (cols[None, :] <= rows[:, None] + n_keys - n_queries)
            scores = tl.where(allowed, scores, float("-inf"))

            # Online softmax: raise the max, rescale what was accumulated, add this block.
            m_new = tl.maximum(m, tl.max(scores, 1))
            shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that have read nothing yet
            probs = tl.exp2(scores - shift[:, None])  # (BLOCK_Q, BLOCK_K)
            rescale = tl.exp2(m - shift)
            l = l * rescale + tl.sum(probs, 1)
            v_tile = tl.load(
                v_base + cols[:, None] * stride_vn + dims[None, :] * stride_vd,
                mask=col_ok[:, None] & dim_ok[None, :], other=0.0,
            )  # (BLOCK_K, BLOCK_D)  # fmt: skip
            acc = acc * rescale[:, None]
            acc = tl.dot(probs.to(v_tile.dtype), v_tile, acc, input_precision=INPUT_PRECISION)
            m = m_new

        # Normalize once, write the tile back to HBM. Rows with no allowed key have l = 0: zeros.
        out_tile = acc / tl.where(l > 0, l, 1.0)[:, None]
        tl.store(
            out_ptr + batch * stride_ob + head * stride_oh + rows[:, None] * stride_on + dims[None, :] * stride_od,
            out_tile.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & dim_ok[None, :],
        )  # fmt: skip

    with _interpreter_on(INTERPRETED):
        _attention_forward_kernel = triton.jit(_attention_forward_kernel)
    # Interpreting needs triton's library functions built for the interpreter too: not so if torch
    # imported triton before this module did.
    INTERPRETER_BROKEN = INTERPRETED and not isinstance(tl.zeros, InterpretedFunction)


def triton_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_q: int = 64,
    block_k: int = 64,
) -> torch.Tensor:
    """FlashAttention forward in Triton: (B, H, N, D) queries, (B, Hkv, M, D) keys/values.

    Block sizes: 64 × 64 keeps the fp32 accumulator, the query tile and one key/value tile
    of width 128 within a GPU's registers and shared memory; bigger tiles reuse each loaded
    key more often but spill. They must be powers of two, at least 16 (tl.dot's minimum).
    """
    if TRITON_MISSING:
        raise RuntimeError(TRITON_MISSING)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 4:
            raise ValueError(f"{name} must be (B, heads, tokens, D), got {tuple(t.shape)}")
    validate_attention_inputs(q, k, v, None)  # dtypes, devices, batch axes, heads: as every attention path
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape (d_v = d_k here), got k {tuple(k.shape)}, v {tuple(v.shape)}")
    batch, n_heads, n_queries, head_dim = q.shape
    n_kv_heads, n_keys = k.shape[1], k.shape[2]
    if head_dim > 256:
        raise ValueError(f"head width {head_dim} > 256 is not supported")
    if INTERPRETED and INTERPRETER_BROKEN:
        raise RuntimeError(
            "triton was imported before lib.triton_attention without TRITON_INTERPRET=1 (torch's compiler stack, "
            "FlopCounterMode included, imports it), so its library is built for a GPU and cannot be interpreted: "
            "import lib.triton_attention first, or set TRITON_INTERPRET=1 before starting Python"
        )
    if INTERPRETED != (q.device.type == "cpu"):
        where = "Triton's interpreter (no CUDA here) takes CPU" if INTERPRETED else "the compiled kernel takes CUDA"
        raise ValueError(f"{where} tensors, got q on {q.device}")
    if INTERPRETED and q.dtype == torch.bfloat16:
        raise TypeError(
            "bfloat16 runs on a GPU only: on CPU tensors Triton's interpreter computes tl.dot in numpy, "
            "which has no bfloat16 (pass float16 or float32 on a CPU)"
        )
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    out = torch.empty_like(q)  # (B, H, N, D)
    grid = (triton.cdiv(n_queries, block_q), batch * n_heads)
    with _interpreter_on(INTERPRETED):  # the interpreter reads it while it runs, too
        _attention_forward_kernel[grid](
            q, k, v, out, *q.stride(), *k.stride(), *v.stride(), *out.stride(),
            n_heads, n_heads // n_kv_heads, n_queries, n_keys, head_dim, scale * math.log2(math.e),
            IS_CAUSAL=is_causal, BLOCK_Q=block_q, BLOCK_K=block_k,
            BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
            INPUT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",  # fp32 stays exact; halves ignore it
        )  # fmt: skip
    return out
