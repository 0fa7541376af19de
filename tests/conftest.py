"""Test-wide setup.

lib.triton_attention is imported before any test module: without CUDA its kernel runs in
Triton's interpreter, which needs triton imported with TRITON_INTERPRET=1, and torch may import
triton on its own first (FlopCounterMode pulls in torch's compiler stack). The module sets the
variable only for that import and its own launches; the process's environment is left as it
was (tests/test_triton_attention.py checks that).
"""

import pytest
import torch

import lib.triton_attention  # noqa: F401  (before FlopCounterMode can import triton)


@pytest.fixture
def needs_sandbox():
    """For a test that grades notebooks: they run in a bubblewrap sandbox (tests/_requirements.py)."""
    from _requirements import require_sandbox

    require_sandbox()


@pytest.fixture
def sandbox_owner():
    """A new folder, named uniquely, for a test's grader to make its temporary folders in (as
    $TMPDIR, or ``tempfile.tempdir`` in this process): every sandbox binds one of them as its
    shared folder, so ``_notebooks.sandboxed_processes(owner)`` tells this test's sandboxes from
    those of the tests that run beside it on other pytest-xdist workers."""
    import shutil
    import tempfile
    from pathlib import Path

    owner = Path(tempfile.mkdtemp(prefix="book-sandbox-owner-"))
    yield owner
    shutil.rmtree(owner, ignore_errors=True)


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
