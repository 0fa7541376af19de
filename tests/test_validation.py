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


def test_every_size_argument_takes_a_numpy_integer_and_refuses_a_bool():
    """The modules that once checked sizes by hand (``isinstance(value, int)``) now share
    lib.validation: a size read from an array passes, a flag or a float is refused by name."""
    from lib.costs import block_weights
    from lib.decode_costs import decode_step
    from lib.digits import shifted
    from lib.ngram import NGramCounts
    from lib.rope import interleaved_to_half
    from lib.stories import tiny_stories, tiny_stories_nats

    n = np.int64(2)
    assert block_weights(np.int64(64), n_heads=n) == block_weights(64, n_heads=2)
    sizes = dict(params=1000, layers=2, n_heads=4, kv_heads=2, head_dim=8, context=16, batch=1)
    assert decode_step(**{**sizes, "context": np.int32(16)}) == decode_step(**sizes)
    assert tiny_stories(n) == tiny_stories(2) and len(tiny_stories_nats(n)) == 2
    assert NGramCounts(torch.tensor([0, 1, 2, 1]), 3, n).max_order == 2
    weight = torch.arange(32.0).reshape(8, 4)
    assert torch.equal(interleaved_to_half(weight, n), interleaved_to_half(weight, 2))
    images = torch.rand(1, 1, 4, 4)
    assert torch.equal(shifted(images, np.int64(1)), shifted(images, 1))
    refusals = [
        (lambda: block_weights(64, n_heads=True), "block_weights: n_heads must be a positive integer, got True"),
        (lambda: decode_step(**{**sizes, "batch": 1.0}), "decode_step: batch must be a positive integer, got 1.0"),
        (lambda: tiny_stories(False), "n_paragraphs must be a positive integer, got False"),
        (lambda: NGramCounts(torch.tensor([0, 1]), 3, 2.0), "max_order must be a positive integer, got 2.0"),
        (lambda: interleaved_to_half(weight, True), "n_heads must be a positive integer, got True"),
        (lambda: shifted(images, True), "dx must be an integer in 0..3"),
    ]
    for call, message in refusals:
        with pytest.raises(ValueError, match=re.escape(message)):
            call()
