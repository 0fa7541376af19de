"""The Triton kernel against lib.attention, on the CPU through Triton's interpreter."""

import pytest
import torch
from _requirements import require
from conftest import random_qkv

from lib.attention import attention
from lib.triton_attention import INTERPRETED, TRITON_MISSING, triton_attention


def needs_triton():
    require("triton", not TRITON_MISSING, "pip install triton")


@pytest.mark.parametrize(
    "b, h, h_kv, n, m, d, is_causal",
    [
        (1, 2, 1, 33, 47, 16, False),  # N, M off the block size; GQA
        (2, 4, 2, 40, 24, 32, True),  # causal with N > M: the first rows read nothing
        (1, 1, 1, 70, 70, 20, True),  # a head width that is not a power of two
        (1, 2, 2, 5, 40, 64, True),  # N < M: the queries are the last positions
        (1, 1, 1, 1, 17, 16, False),  # one query
    ],
)
def test_matches_lib_attention(b, h, h_kv, n, m, d, is_causal):
    needs_triton()
    q, k, v = random_qkv(b, h, h_kv, n, m, d, dtype=torch.float32)
    got = triton_attention(q, k, v, is_causal=is_causal, block_q=16, block_k=16)
    torch.testing.assert_close(got, attention(q, k, v, is_causal=is_causal), atol=1e-5, rtol=1e-5)
    assert torch.isfinite(got).all()


DEVICE = "cpu" if INTERPRETED else "cuda"


@pytest.mark.parametrize("dtype, atol", [(torch.float16, 3e-3), (torch.bfloat16, 3e-2)])
def test_half_precision(dtype, atol):
    needs_triton()
    q, k, v = random_qkv(1, 2, 2, 32, 32, 32, seed=1, dtype=torch.float32, device=DEVICE)
    if dtype == torch.bfloat16 and INTERPRETED:
        # The interpreter computes tl.dot in numpy, which has no bfloat16: the product came back
        # as garbage (errors of 1e8), so the kernel refuses bfloat16 there instead.
        with pytest.raises(TypeError, match="bfloat16 runs on a GPU only"):
            triton_attention(q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True, block_q=16, block_k=16)
        return
    got = triton_attention(q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True, block_q=16, block_k=16)
    assert got.dtype == dtype
    torch.testing.assert_close(got.float(), attention(q, k, v, is_causal=True), atol=atol, rtol=atol)


def test_custom_scale_and_default_blocks():
    needs_triton()
    q, k, v = random_qkv(1, 2, 1, 20, 30, 16, seed=2, dtype=torch.float32)
    torch.testing.assert_close(
        triton_attention(q, k, v, scale=0.3), attention(q, k, v, scale=0.3), atol=1e-5, rtol=1e-5
    )


def test_errors():
    needs_triton()
    q, k, v = random_qkv(1, 3, 2, 4, 4, 16, dtype=torch.float32)
    with pytest.raises(ValueError, match="q has 3 heads, which is not a multiple of the 2 KV heads"):
        triton_attention(q, k, v)
    with pytest.raises(ValueError, match=r"\(B, heads, tokens, D\)"):
        triton_attention(q[0], k[0], v[0])


def test_without_triton_the_module_says_so_in_one_line():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['triton'] = None\n"  # makes `import triton` fail
        "import lib.triton_attention as t\n"
        "print(t.TRITON_MISSING)\n"
        "try:\n    t.triton_attention(None, None, None)\nexcept RuntimeError as e:\n    print('raised:', e)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, second = result.stdout.strip().splitlines()
    assert first.startswith("triton is not installed") and "pip install triton" in first
    assert second == "raised: " + first


def _run_python(code, env=None):
    import os
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"} | (env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)


def test_the_interpreter_setting_is_the_modules_own():
    """Importing the module and running its kernel leave TRITON_INTERPRET as it was: unset, or the caller's."""
    needs_triton()
    code = (
        "import os, torch\n"
        "import lib.triton_attention as t\n"
        "print(os.environ.get('TRITON_INTERPRET'))\n"
        "q = torch.randn(1, 2, 20, 16)\n"
        "t.triton_attention(q, q[:, :1], q[:, :1], block_q=16, block_k=16)\n"
        "print(os.environ.get('TRITON_INTERPRET'))\n"
    )
    if not INTERPRETED:
        code = code.replace("torch.randn(1, 2, 20, 16)", "torch.randn(1, 2, 20, 16, device='cuda')")
    assert _run_python(code).stdout.split() == ["None", "None"]
    assert _run_python(code, {"TRITON_INTERPRET": "1"}).stdout.split() == ["1", "1"]


def test_triton_imported_first_without_the_interpreter_is_named():
    """torch's FlopCounterMode imports triton; if that came first, the interpreted kernel says what to
    do (on a GPU the compiled kernel runs whoever imported triton first)."""
    needs_triton()
    code = (
        "from torch.utils.flop_counter import FlopCounterMode\n"
        "import torch, lib.triton_attention as t\n"
        f"q = torch.randn(1, 1, 16, 16, device={DEVICE!r})\n"
        "try:\n    t.triton_attention(q, q, q)\n    print('ran')\nexcept RuntimeError as e:\n    print(e)\n"
    )
    out = _run_python(code).stdout
    assert ("import lib.triton_attention first" in out) if INTERPRETED else out.strip() == "ran"
