"""lib.validation: each check names the argument and the shapes it saw."""

import math
import re

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


def test_check_heads_names_the_argument_and_the_values():
    from lib.validation import check_heads

    assert check_heads(8, None, 64) == (8, 8, 64)
    assert check_heads(np.int64(8), np.int32(2)) == (8, 2, None)
    with pytest.raises(ValueError, match=r"^X: d_model=30 is not a multiple of n_heads=4: each head takes"):
        check_heads(4, 2, 30, where="X")
    with pytest.raises(ValueError, match=r"^n_heads=6 is not a multiple of kv_heads=4: each KV head serves"):
        check_heads(6, 4, kv_name="kv_heads")
    with pytest.raises(ValueError, match=r"^X: n_kv_heads must be a positive integer, got 0"):
        check_heads(4, 0, where="X")
    with pytest.raises(ValueError, match=r"^n_heads must be a positive integer, got True"):
        check_heads(True)


# Every module that takes head counts, called with heads that do not divide: the one check's message.
def _heads_callers():
    import torch

    from lib.attention import MultiHeadAttention
    from lib.blocks import Block
    from lib.costs import block_weights
    from lib.decode_costs import decode_step
    from lib.gpt import GPTConfig
    from lib.tiled_softmax import tiled_attention

    q, k = torch.zeros(1, 6, 4, 8), torch.zeros(1, 4, 4, 8)
    return [
        (lambda: MultiHeadAttention(32, 4, n_kv_heads=3), "n_heads=4 is not a multiple of n_kv_heads=3"),
        (lambda: Block(30, 4), "Block: d_model=30 is not a multiple of n_heads=4"),
        (lambda: block_weights(64, n_heads=4, n_kv_heads=3), "block_weights: n_heads=4 is not a multiple of n_kv"),
        (
            lambda: decode_step(params=10, layers=1, n_heads=4, kv_heads=3, head_dim=8, context=4),
            "decode_step: n_heads=4 is not a multiple of kv_heads=3",
        ),
        (lambda: GPTConfig(d_model=30, n_heads=4, n_kv_heads=2), "GPTConfig: d_model=30 is not a multiple of n_heads"),
        (lambda: tiled_attention(q, k, k), "q has 6 heads, which is not a multiple of the 4 KV heads"),
    ]


@pytest.mark.parametrize("index", range(6))
def test_every_module_reports_heads_that_do_not_divide_alike(index):
    call, message = _heads_callers()[index]
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_mean_pooling_to_a_kv_head_count_that_does_not_divide_is_named():
    from lib.gpt import GPT, GPTConfig
    from lib.serving import mean_pool_kv_heads

    model = GPT(GPTConfig(vocab_size=20, n_layers=1, d_model=32, n_heads=4, n_kv_heads=4, max_len=8))
    with pytest.raises(ValueError, match=re.escape("the model's n_kv_heads=4 is not a multiple of n_kv_heads=3")):
        mean_pool_kv_heads(model, 3)
