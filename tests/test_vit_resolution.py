"""lib.vit_resolution: patch costs against hand-counted numbers, resized positions, a ViT at another resolution."""

import pytest
import torch

from lib.vit import ViT
from lib.vit_resolution import (
    at_resolution,
    layer_macs,
    patch_cost,
    position_similarity_by_distance,
    resize_positions,
)


def test_lesson_numbers_224_rgb_at_patch_16():
    cost = patch_cost(224, 16)
    assert (cost.patches, cost.patch_length, cost.tokens) == (196, 768, 197)  # 14 x 14 patches of 3 x 16 x 16
    assert cost.score_entries == 197**2


def test_patch_cost_when_the_patch_halves():
    big, small = patch_cost(224, 16, class_token=False), patch_cost(224, 8, class_token=False)
    assert small.tokens == 4 * big.tokens  # 784 vs 196
    assert small.score_entries == 16 * big.score_entries
    assert small.attention_macs == 16 * big.attention_macs
    assert small.projection_macs == big.projection_macs  # 4x the patches, each 1/4 as long
    assert patch_cost(224, 16, d_model=768).projection_macs == 196 * 768 * 768


def test_position_similarity_by_distance_on_a_known_table():
    model = ViT(4, 2, 1, 2, 2, 1, 1)  # a 2x2 grid
    with torch.no_grad():
        # patches 0 and 3 share a vector, 1 and 2 its opposite: the diagonal pairs agree, the neighbours oppose
        model.positions.copy_(torch.tensor([[[0.0, 1.0], [1.0, 0.0], [-1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]]]))
    similarity = position_similarity_by_distance(model)
    assert similarity[1.0] == pytest.approx(-1.0)
    diagonal = [value for distance, value in similarity.items() if abs(distance - 2**0.5) < 1e-3]
    assert diagonal == [pytest.approx(1.0)]


def test_layer_macs_share_is_t_over_t_plus_6d():
    work = layer_macs(224, 16, d_model=768)
    assert work["tokens"] == 197
    assert work["attention_share"] == pytest.approx(197 / (197 + 6 * 768))


def test_resize_positions_keeps_the_class_row_and_is_identity_on_the_same_grid():
    table = torch.randn(1, 1 + 3 * 4, 5)
    assert torch.allclose(resize_positions(table, (3, 4), (3, 4)), table, atol=1e-5)
    bigger = resize_positions(table, (3, 4), (6, 8))
    assert bigger.shape == (1, 1 + 48, 5) and torch.equal(bigger[:, 0], table[:, 0])
    constant = torch.ones(1, 1 + 4, 2)
    assert torch.allclose(resize_positions(constant, (2, 2), (5, 5)), torch.ones(1, 26, 2), atol=1e-5)
    with pytest.raises(ValueError, match="positions"):
        resize_positions(table, (4, 4), (8, 8))


def test_at_resolution_is_the_same_model_at_the_same_size_and_runs_at_another():
    torch.manual_seed(0)
    model = ViT(8, 2, 1, 10, 16, 1, 2).eval()
    images = torch.randn(3, 1, 8, 8)
    with torch.no_grad():
        assert torch.allclose(at_resolution(model, 8)(images), model(images), atol=1e-5)
        assert at_resolution(model, 12)(torch.randn(2, 1, 12, 12)).shape == (2, 10)
