"""The score scale is validated the same way by attention and tiled_attention.

D = 0 with the default scale names the argument (not a ZeroDivisionError); any finite
real number is a scale, numpy scalars included; inf, NaN, booleans and non-numbers are
refused by both the plain and the tiled path.
"""

import math

import numpy as np
import pytest
import torch

from lib.attention import attention
from lib.tiled_softmax import tiled_attention

PATHS = [attention, tiled_attention]


def _qkv(d_k=4, n=3, m=5, d_v=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(n, d_k, generator=gen),
        torch.randn(m, d_k, generator=gen),
        torch.randn(m, d_v, generator=gen),
    )


@pytest.mark.parametrize("path", PATHS, ids=lambda f: f.__name__)
def test_zero_width_with_default_scale_names_d_k(path):
    q, k, v = _qkv(d_k=0)
    with pytest.raises(ValueError, match=r"d_k=0") as error:
        path(q, k, v)
    assert "(3, 0)" in str(error.value)  # the shape seen


def test_zero_width_with_an_explicit_scale_reads_equally():
    """Empty q and k give all-zero scores, so every key gets the same weight 1/M."""
    q, k, v = _qkv(d_k=0)
    out = attention(q, k, v, scale=1.0)
    torch.testing.assert_close(out, v.mean(dim=0).expand(3, -1))


@pytest.mark.parametrize("path", PATHS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("scale", [np.float32(0.5), np.float64(0.5), np.int64(2), 2, 0.5, math.pi])
def test_any_finite_real_scale_is_accepted(path, scale):
    q, k, v = _qkv()
    expected = torch.softmax((q @ k.T) * float(scale), dim=-1) @ v  # independent reference
    torch.testing.assert_close(path(q, k, v, scale=scale), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("path", PATHS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    "scale",
    [math.inf, -math.inf, math.nan, np.float32("inf"), np.float64("nan"), True, "0.5", torch.tensor(0.5)],
    ids=repr,
)
def test_non_finite_or_non_real_scale_is_refused(path, scale):
    q, k, v = _qkv()
    with pytest.raises((ValueError, TypeError), match="scale"):
        path(q, k, v, scale=scale)
