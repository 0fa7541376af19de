"""lib.validation: each check names the argument and the shapes it saw."""

import math

import numpy as np
import pytest
import torch

from lib.validation import check_mask_shape, check_mask_type, positive_int, resolve_scale, validate_attention_inputs


def test_positive_int_accepts_integers_and_refuses_the_rest():
    assert positive_int("n_heads", 4) == 4 and positive_int("n_heads", np.int64(2)) == 2
    for bad in (0, -3, 2.0, True, "4", None):
        with pytest.raises(ValueError, match=r"n_heads must be a positive integer, got"):
            positive_int("n_heads", bad)


def test_resolve_scale_defaults_and_errors():
    assert resolve_scale(None, torch.zeros(2, 16)) == 0.25
    assert resolve_scale(np.float32(0.5), torch.zeros(2, 16)) == 0.5
    with pytest.raises(ValueError, match="d_k=0"):
        resolve_scale(None, torch.zeros(2, 0))
    for bad in (math.inf, float("nan"), True, "0.1"):
        with pytest.raises(ValueError, match="scale must be a finite real number"):
            resolve_scale(bad, torch.zeros(2, 4))


def test_check_mask_type():
    check_mask_type(torch.ones(2, dtype=torch.bool))
    check_mask_type(torch.zeros(2))
    with pytest.raises(TypeError, match="mask must be a torch.Tensor"):
        check_mask_type([[True]])
    with pytest.raises(TypeError, match="mask must be bool"):
        check_mask_type(torch.ones(2, dtype=torch.int64))


@pytest.mark.parametrize("shape", [(5, 7), (2, 1, 1, 7), (2, 4, 5, 7), (1, 7), ()])
def test_check_mask_shape_accepts_broadcasting_masks(shape):
    check_mask_shape(torch.ones(shape, dtype=torch.bool), (2, 4, 5, 7), "")


@pytest.mark.parametrize("shape", [(7, 5), (3, 1, 1, 7), (2, 4, 5, 7, 1), (1, 2, 4, 5, 7)])
def test_check_mask_shape_refuses_masks_that_do_not_fit(shape):
    with pytest.raises(ValueError) as info:
        check_mask_shape(torch.ones(shape, dtype=torch.bool), (2, 4, 5, 7), "(q: ...)")
    message = str(info.value)
    assert f"mask of shape {shape}" in message and "(2, 4, 5, 7)" in message and "(q: ...)" in message


def test_validate_attention_inputs_names_grouped_heads():
    q, k = torch.randn(1, 6, 3, 4), torch.randn(1, 4, 3, 4)
    with pytest.raises(ValueError, match="q has 6 heads, which is not a multiple of the 4 KV heads"):
        validate_attention_inputs(q, k, k, None)
    validate_attention_inputs(q, torch.randn(1, 3, 3, 4), torch.randn(1, 3, 3, 2), None)


def test_integer_checks_accept_numpy_integers_and_refuse_bools():
    from lib.validation import is_integer, non_negative_int, optional_positive_int

    assert is_integer(np.int32(3)) and is_integer(7) and not is_integer(True) and not is_integer(3.0)
    assert non_negative_int("n", np.int64(0)) == 0 and type(non_negative_int("n", np.int64(5))) is int
    for bad in (-1, 1.0, False, "0"):
        with pytest.raises(ValueError, match=r"n must be a non-negative integer, got"):
            non_negative_int("n", bad)
    assert optional_positive_int("top_k", None) is None and optional_positive_int("top_k", np.uint8(2)) == 2
    with pytest.raises(ValueError, match=r"top_k must be a positive integer or None, got 0"):
        optional_positive_int("top_k", 0)
