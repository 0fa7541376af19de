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


# Test files whose notebooks or hidden runs go through a bubblewrap sandbox. Two of them count
# every sandbox process on the machine (tests/_notebooks.sandboxed_processes), so under
# pytest-xdist (make test) these files take turns: each holds a lock file while it runs.
SANDBOX_FILES = {
    "test_answer_grading.py",
    "test_batch_grading.py",
    "test_checks.py",
    "test_grade_command.py",
    "test_gradebook.py",
    "test_grading_process.py",
    "test_hidden_runs.py",
    "test_hostile_grading.py",
    "test_sandbox.py",
    "test_student.py",
}


@pytest.fixture(scope="module", autouse=True)
def _one_sandboxed_file_at_a_time(request):
    """A sandboxed test file holds an exclusive lock for as long as it runs (module fixtures
    included: autouse fixtures come first), so no other worker's sandbox runs beside it."""
    if request.path.name not in SANDBOX_FILES:
        yield
        return
    import fcntl
    import tempfile
    from pathlib import Path

    with open(Path(tempfile.gettempdir()) / "transformers-book-sandbox-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


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
