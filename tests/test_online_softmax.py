"""lib.online_softmax: the blockwise pass equals softmax, and its state rescales as worked by hand."""

import math

import pytest
import torch

from lib.attention import softmax
from lib.online_softmax import finite_or_zero, online_softmax, online_softmax_steps, online_softmax_update


def test_online_softmax_equals_softmax():
    x = torch.randn(4, 37, generator=torch.Generator().manual_seed(0)) * 10
    x[1] = float("-inf")  # a fully masked row
    x[2, :20] = float("-inf")  # a row whose first blocks are all masked
    for block in (1, 5, 16, 37, 100):
        torch.testing.assert_close(online_softmax(x, block), softmax(x))


def test_online_softmax_state_rescales_when_the_max_grows():
    steps = list(online_softmax_steps(torch.tensor([1.0, 5.0, 2.0]), block_size=1))
    assert [end for end, _, _ in steps] == [1, 2, 3]
    assert [m.item() for _, m, _ in steps] == [1.0, 5.0, 5.0]
    # after block 2 the old sum exp(1 - 1) = 1 is rescaled to exp(1 - 5), then exp(0) is added
    expected_l = [1.0, math.exp(-4) + 1, math.exp(-4) + 1 + math.exp(-3)]
    assert [l.item() for _, _, l in steps] == pytest.approx(expected_l)


def test_online_softmax_update_by_hand():
    # a block that raises nothing keeps m and only adds; a row of -inf so far takes the block as is
    m, l = torch.tensor([3.0, float("-inf")]), torch.tensor([2.0, 0.0])
    block = torch.tensor([[1.0, 3.0], [0.5, float("-inf")]])
    m_new, l_new = online_softmax_update(m, l, block)
    assert m_new.tolist() == [3.0, 0.5]
    assert l_new.tolist() == pytest.approx([2.0 + math.exp(-2) + 1.0, 1.0])
    m_all, l_all = online_softmax_update(
        torch.tensor([float("-inf")]), torch.tensor([0.0]), torch.full((1, 3), -math.inf)
    )
    assert m_all.item() == float("-inf") and l_all.item() == 0.0


def test_finite_or_zero_only_replaces_minus_infinity():
    m = torch.tensor([float("-inf"), -2.0, 0.0, 7.5])
    assert finite_or_zero(m).tolist() == [0.0, -2.0, 0.0, 7.5]


def test_online_softmax_steps_rejects_a_bad_block_size_by_name():
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match=f"block_size must be a positive integer, got {bad!r}"):
            list(online_softmax_steps(torch.zeros(3), bad))
