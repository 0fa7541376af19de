"""Test-wide setup.

Triton reads TRITON_INTERPRET when triton.language is first imported, and torch may import
triton on its own (FlopCounterMode pulls in torch's compiler stack). Set it before any test
module is imported, so that on a machine without CUDA the kernels run in the interpreter.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def needs_sandbox():
    """For a test that grades notebooks: they run in a bubblewrap sandbox (tests/_requirements.py)."""
    from _requirements import require_sandbox

    require_sandbox()


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "browser: drives headless Chromium over the built book (`make browser-test`, after `make book`)",
    )


def random_qkv(batch, n_heads, n_kv_heads, n_queries, n_keys, d_k, d_v=None, *, dtype, seed=0, device="cpu"):
    """Seeded q (*batch, H, N, D), k (*batch, Hkv, M, D), v (*batch, Hkv, M, Dv) for the attention tests.

    ``batch`` is a tuple of batch axes (or one int); ``d_v`` defaults to ``d_k``. The dtype is
    always stated at the call: float64 for exact comparisons, float32 or lower where a test
    is about that precision. Half-precision inputs are drawn in float32 and rounded.
    """
    batch = (batch,) if isinstance(batch, int) else tuple(batch)
    d_v = d_k if d_v is None else d_v
    draw_dtype = dtype if dtype in (torch.float32, torch.float64) else torch.float32
    gen = torch.Generator().manual_seed(seed)
    shapes = [(*batch, n_heads, n_queries, d_k), (*batch, n_kv_heads, n_keys, d_k), (*batch, n_kv_heads, n_keys, d_v)]
    return tuple(
        torch.randn(*shape, generator=gen, dtype=draw_dtype).to(device=device, dtype=dtype) for shape in shapes
    )
