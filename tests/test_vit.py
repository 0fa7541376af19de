"""lib.vit against nn.Conv2d, a slicing loop, hand-counted patch numbers, and the digits benchmark."""

import pytest
import torch
import torch.nn as nn

from lib.blocks import Block
from lib.digits import SmallCNN
from lib.vit import (
    PatchEmbed,
    ViT,
    patch_grid,
    patchify,
    patchify_loop,
)

# (batch, channels, height, width, patch): square and not, one channel and several, a
# patch as large as the image, and p = 1 (every pixel its own token).
SHAPES = [
    (2, 3, 224, 224, 16),
    (1, 1, 8, 8, 2),
    (3, 1, 8, 8, 4),
    (2, 4, 12, 20, 4),
    (1, 2, 6, 9, 3),
    (2, 3, 7, 7, 7),
    (1, 3, 5, 4, 1),
]


def images_of(batch, channels, height, width, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, channels, height, width, generator=gen, dtype=dtype)


def test_lesson_numbers_224_rgb_at_patch_16():
    patches = patchify(torch.zeros(1, 3, 224, 224), 16)
    assert patches.shape == (1, 196, 768)  # 14 x 14 patches of 3 x 16 x 16 entries
    assert patch_grid(224, 16) == (14, 14)


@pytest.mark.parametrize("shape", SHAPES)
def test_patchify_equals_slicing_loop(shape):
    *size, patch = shape
    images = images_of(*size)
    assert torch.equal(patchify(images, patch), patchify_loop(images, patch))


def test_patchify_order_by_hand():
    # One 4x4 channel with pixel value = 10 * row + column; 2x2 patches.
    image = (10 * torch.arange(4)[:, None] + torch.arange(4)[None, :]).float()[None, None]  # (1, 1, 4, 4)
    patches = patchify(image, 2)[0]
    expected = torch.tensor(
        [[0, 1, 10, 11], [2, 3, 12, 13], [20, 21, 30, 31], [22, 23, 32, 33]], dtype=torch.float32
    )  # row-major patches; each read row by row
    assert torch.equal(patches, expected)
    # Two channels: each patch holds all of channel 0's pixels, then channel 1's: (C, p, p) order.
    two = torch.cat([image, 100 + image], dim=1)  # (1, 2, 4, 4)
    assert patchify(two, 2)[0, 0].tolist() == [0, 1, 10, 11, 100, 101, 110, 111]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("d_model", [1, 8, 33])
def test_patch_embed_equals_strided_conv(shape, d_model):
    batch, channels, height, width, patch = shape
    torch.manual_seed(d_model)
    conv = nn.Conv2d(channels, d_model, kernel_size=patch, stride=patch)
    embed = PatchEmbed.from_conv(conv, (height, width))
    images = images_of(batch, channels, height, width, seed=1)
    expected = conv(images).flatten(2).transpose(1, 2)  # (B, d, Hp, Wp) -> (B, N, d)
    got = embed(images)
    assert got.shape == (batch, (height // patch) * (width // patch), d_model)
    assert (got - expected).abs().max().item() < 1e-5
    # and back: the conv rebuilt from the linear weights is the original one
    rebuilt = embed.to_conv()
    assert torch.equal(rebuilt.weight, conv.weight) and torch.equal(rebuilt.bias, conv.bias)


def test_patch_embed_gradients_match_conv():
    conv = nn.Conv2d(3, 16, kernel_size=4, stride=4).double()
    embed = PatchEmbed.from_conv(conv, (8, 12))
    images = images_of(2, 3, 8, 12, dtype=torch.float64)
    images_a, images_b = images.clone().requires_grad_(), images.clone().requires_grad_()
    conv(images_a).flatten(2).transpose(1, 2).pow(2).sum().backward()
    embed(images_b).pow(2).sum().backward()
    torch.testing.assert_close(images_b.grad, images_a.grad)
    torch.testing.assert_close(embed.proj.weight.grad, conv.weight.grad.reshape(16, -1))


@pytest.mark.parametrize("size, patch", [((225, 224), 16), ((8, 10), 4), ((7, 7), 2)])
def test_sizes_that_do_not_tile_are_refused_with_the_sizes(size, patch):
    images = torch.zeros(1, 3, *size)
    with pytest.raises(ValueError, match=rf"{size[0]}x{size[1]}.*patch size {patch}"):
        patchify(images, patch)
    with pytest.raises(ValueError, match=rf"{size[0]}x{size[1]}"):
        PatchEmbed(size, patch, 3, 8)


@pytest.mark.parametrize("shape", [(3, 224, 224), (224, 224), (1, 1, 3, 224, 224)])
def test_non_4d_input_is_refused_with_its_shape(shape):
    with pytest.raises(ValueError, match=r"\(B, C, H, W\).*" + str(len(shape)) + "-D"):
        patchify(torch.zeros(shape), 16)
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        PatchEmbed(224, 16, 3, 8)(torch.zeros(shape))


def test_patch_embed_refuses_other_image_sizes_and_channels():
    embed = PatchEmbed(8, 2, 1, 4)
    with pytest.raises(ValueError, match=r"\(B, 1, 8, 8\).*\(2, 3, 8, 8\)"):
        embed(torch.zeros(2, 3, 8, 8))
    with pytest.raises(ValueError, match=r"\(B, 1, 8, 8\).*\(2, 1, 16, 16\)"):
        embed(torch.zeros(2, 1, 16, 16))


@pytest.mark.parametrize("bad", [0, -2, 2.0, True, "16"])
def test_bad_patch_sizes_are_named(bad):
    with pytest.raises(ValueError, match="patch"):
        patchify(torch.zeros(1, 1, 8, 8), bad)


def tiny_vit(**kwargs):
    torch.manual_seed(0)
    return ViT(8, 2, 1, 10, 16, 2, 4, hidden=32, **kwargs)


def test_vit_forward_equals_a_hand_assembled_pipeline():
    model = tiny_vit().eval()
    images = images_of(3, 1, 8, 8)
    x = model.patch_embed.proj(patchify_loop(images, 2))  # (3, 16, 16)
    x = torch.cat([model.class_token.expand(3, 1, 16), x], dim=1) + model.positions  # (3, 17, 16)
    for block in model.blocks:
        normed = block.norm1(x)
        heads = nn.MultiheadAttention(16, 4, batch_first=True)
        heads.in_proj_weight.data = torch.cat(
            [block.attn.q_proj.weight, block.attn.k_proj.weight, block.attn.v_proj.weight]
        )
        heads.in_proj_bias.data = torch.cat([block.attn.q_proj.bias, block.attn.k_proj.bias, block.attn.v_proj.bias])
        heads.out_proj.load_state_dict(block.attn.out_proj.state_dict())
        x = x + heads(normed, normed, normed, need_weights=False)[0]
        x = x + block.ffn(block.norm2(x))
    expected = model.head(nn.functional.layer_norm(x[:, 0], (16,), model.norm.weight, model.norm.bias))
    torch.testing.assert_close(model(images), expected, atol=1e-5, rtol=1e-5)


def test_vit_shapes_through_the_model():
    model = ViT(224, 16, 3, 10, 32, 1, 4).eval()
    shapes = dict(model.shapes(torch.zeros(2, 3, 224, 224)))
    assert shapes["patches (B, N, C·p·p)"] == (2, 196, 768)
    assert shapes["with class token (B, 1+N, d)"] == (2, 197, 32)
    assert shapes["positions (1, 1+N, d)"] == (1, 197, 32)
    assert shapes["logits (B, K)"] == (2, 10)
    assert all(isinstance(block, Block) for block in model.blocks)


def test_positions_make_the_model_see_patch_order():
    model = tiny_vit().eval()
    images = images_of(2, 1, 8, 8)
    swapped = images.clone()
    swapped[..., :2, :2], swapped[..., :2, 2:4] = images[..., :2, 2:4], images[..., :2, :2]  # swap patches 0 and 1
    assert not torch.allclose(model(images), model(swapped), atol=1e-4)
    with torch.no_grad():
        model.positions.zero_()  # without positions the patches are an unordered set
    torch.testing.assert_close(model(images), model(swapped), atol=1e-5, rtol=1e-5)


def test_class_token_attention_equals_torch_weights():
    model = tiny_vit().eval()
    images = images_of(2, 1, 8, 8)
    maps = model.class_token_attention(images)
    assert maps.shape == (2, 2, 4, 17)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 2, 4))
    x = model.tokens(images)
    block = model.blocks[0]
    heads = nn.MultiheadAttention(16, 4, batch_first=True)
    heads.in_proj_weight.data = torch.cat(
        [block.attn.q_proj.weight, block.attn.k_proj.weight, block.attn.v_proj.weight]
    )
    heads.in_proj_bias.data = torch.cat([block.attn.q_proj.bias, block.attn.k_proj.bias, block.attn.v_proj.bias])
    normed = block.norm1(x)
    _, weights = heads(normed[:, :1], normed, normed, average_attn_weights=False)  # (B, h, 1, T)
    torch.testing.assert_close(maps[:, 0], weights[:, :, 0], atol=1e-6, rtol=1e-5)


def test_small_cnn_is_about_the_size_of_the_vit():
    vit = ViT(8, 2, 1, 10, 48, 2, 4, hidden=96)
    sizes = [sum(p.numel() for p in m.parameters()) for m in (vit, SmallCNN())]
    assert 0.8 < sizes[0] / sizes[1] < 1.25


def test_mean_pool_vit_without_positions_ignores_patch_order():
    from lib.vit import MeanPoolViT

    torch.manual_seed(0)
    model = MeanPoolViT(4, 2, 1, 3, 8, 1, 2).eval()
    assert model.positions.shape == (1, 4, 8) and model.class_token is None
    with torch.no_grad():
        model.positions.zero_()
        images = torch.randn(1, 1, 4, 4)
        swapped = images.clone()
        swapped[..., :2, :2], swapped[..., :2, 2:] = images[..., :2, 2:], images[..., :2, :2]
        assert torch.allclose(model(images), model(swapped), atol=1e-5)
