"""lib.rope against independent references: rotate-half, complex numbers, 2x2 rotation matrices."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.rope import (
    LearnedPositions,
    apply_rope,
    rope_frequencies,
    rope_rotation_matrix,
    sinusoidal_positions,
)

# ---------------------------------------------------------------------------------------------
# Three references, each written the way a different codebase writes RoPE, sharing no code
# with lib.rope. Angles in float64 throughout.


def reference_inverse_frequencies(dim, base):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))  # (D/2,)


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def reference_rotate_half(x, positions, base):
    """HF LLaMA style: cos/sin of the angles concatenated twice, x cos + rotate_half(x) sin."""
    angles = torch.outer(positions.to(torch.float64), reference_inverse_frequencies(x.shape[-1], base))
    emb = torch.cat((angles, angles), dim=-1)  # (N, D)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def reference_complex(x, positions, base):
    """RoFormer / LLaMA-reference style: pairs (2i, 2i+1) as complex numbers times e^{iθ}."""
    angles = torch.outer(positions.to(torch.float64), reference_inverse_frequencies(x.shape[-1], base))
    as_complex = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())  # (..., N, D/2)
    rotated = as_complex * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(rotated).flatten(-2)


def reference_block_rotation(position, dim, base):
    """Block-diagonal 2x2 rotations on pairs (2i, 2i+1), built with plain math.cos/sin."""
    blocks = []
    for i in range(dim // 2):
        theta = position * base ** (-2 * i / dim)
        c, s = math.cos(theta), math.sin(theta)
        blocks.append(torch.tensor([[c, -s], [s, c]], dtype=torch.float64))
    return torch.block_diag(*blocks)


def half_to_interleaved_permutation(dim):
    """perm with x[perm] putting interleaved pair (2i, 2i+1) at positions (i, i + D/2)."""
    return torch.cat((torch.arange(0, dim, 2), torch.arange(1, dim, 2)))


def random_x(shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---------------------------------------------------------------------------------------------
# Agreement with the references: widths 2..128, bases 100..500000, positions offset up to 1000.

widths = st.integers(1, 64).map(lambda half: 2 * half)
bases = st.floats(100.0, 500000.0)
offsets = st.integers(0, 1000)


@settings(max_examples=60, deadline=None)
@given(dim=widths, base=bases, offset=offsets, n=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_half_layout_matches_rotate_half(dim, base, offset, n, seed):
    x = random_x((2, 3, n, dim), seed)
    positions = torch.arange(offset, offset + n)
    expected = reference_rotate_half(x, positions, base)
    torch.testing.assert_close(apply_rope(x, positions, base=base), expected, atol=1e-9, rtol=1e-9)


@settings(max_examples=60, deadline=None)
@given(dim=widths, base=bases, offset=offsets, n=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_interleaved_layout_matches_complex_numbers(dim, base, offset, n, seed):
    x = random_x((2, n, dim), seed)
    positions = torch.arange(offset, offset + n)
    expected = reference_complex(x, positions, base)
    got = apply_rope(x, positions, base=base, layout="interleaved")
    torch.testing.assert_close(got, expected, atol=1e-9, rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(dim=widths, base=bases, position=st.floats(0.0, 1000.0), seed=st.integers(0, 2**16))
def test_matches_explicit_2x2_rotation_matrices(dim, base, position, seed):
    x = random_x((1, dim), seed)  # one token
    rotation = reference_block_rotation(position, dim, base)  # interleaved pairs
    got = apply_rope(x, [position], base=base, layout="interleaved")
    torch.testing.assert_close(got, x @ rotation.T, atol=1e-9, rtol=1e-9)
    # the lib's own plain twin is the same matrix, and for "half" the permuted one
    torch.testing.assert_close(rope_rotation_matrix(position, dim, base=base, layout="interleaved"), rotation)
    perm = half_to_interleaved_permutation(dim)
    half_matrix = rope_rotation_matrix(position, dim, base=base, layout="half")
    torch.testing.assert_close(half_matrix, rotation[perm][:, perm])
    torch.testing.assert_close(apply_rope(x, [position], base=base), x @ half_matrix.T, atol=1e-9, rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(dim=widths, base=bases, offset=offsets, seed=st.integers(0, 2**16))
def test_layouts_agree_up_to_a_fixed_permutation(dim, base, offset, seed):
    x = random_x((3, 5, dim), seed)
    positions = torch.arange(offset, offset + 5)
    perm = half_to_interleaved_permutation(dim)
    interleaved = apply_rope(x, positions, base=base, layout="interleaved")
    half = apply_rope(x[..., perm], positions, base=base, layout="half")
    torch.testing.assert_close(half, interleaved[..., perm], atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("dim", [2, 128])
@pytest.mark.parametrize("base", [100.0, 500000.0])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_extremes_of_the_range(dim, base, layout):
    x = random_x((4, 7, dim), seed=dim)
    positions = torch.arange(994, 1001)
    expected = (reference_rotate_half if layout == "half" else reference_complex)(x, positions, base)
    torch.testing.assert_close(apply_rope(x, positions, base=base, layout=layout), expected, atol=1e-9, rtol=1e-9)


def test_frequencies():
    torch.testing.assert_close(rope_frequencies(8, 10000.0, dtype=torch.float64), reference_inverse_frequencies(8, 1e4))
    assert rope_frequencies(4, base=100.0).tolist() == pytest.approx([1.0, 0.1])
    assert rope_frequencies(64).dtype == torch.get_default_dtype() and rope_frequencies(64).shape == (32,)


# ---------------------------------------------------------------------------------------------
# The relative-offset identity, the lesson's 2-D example, and the properties.


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("shift", [0, 1, 7, 100, 499, 500])
def test_scores_depend_only_on_the_offset_float32(layout, shift):
    gen = torch.Generator().manual_seed(shift)
    q = torch.randn(64, generator=gen)  # fixed content vectors, float32
    k = torch.randn(64, generator=gen)
    m, n = torch.randint(0, 500, (2, 20), generator=gen)  # 20 (m, n) pairs

    def scores(query_positions, key_positions):
        rotated_q = apply_rope(q.expand(20, 64), query_positions, layout=layout)  # (20, 64)
        rotated_k = apply_rope(k.expand(20, 64), key_positions, layout=layout)
        return (rotated_q * rotated_k).sum(-1)  # (20,)

    scale = q.norm() * k.norm()  # scores are bounded by |q||k|; tolerance relative to that
    torch.testing.assert_close(scores(m + shift, n + shift) / scale, scores(m, n) / scale, atol=2e-6, rtol=0)
    # and equal to qᵀ R_(n-m) k, the rotation by the offset alone
    offsets = (n - m).tolist()
    by_offset = torch.stack([q.double() @ rope_rotation_matrix(o, 64, layout=layout) @ k.double() for o in offsets])
    torch.testing.assert_close(scores(m + shift, n + shift).double() / scale, by_offset / scale, atol=2e-6, rtol=0)


def test_rotation_matrices_compose():
    r_m = rope_rotation_matrix(3, 16)
    r_n = rope_rotation_matrix(10, 16)
    torch.testing.assert_close(r_m.T @ r_n, rope_rotation_matrix(7, 16), atol=1e-12, rtol=0)
    torch.testing.assert_close(r_m.T @ r_m, torch.eye(16, dtype=torch.float64), atol=1e-12, rtol=0)


@pytest.mark.parametrize("m, n", [(1, 2), (5, 6), (40, 41)])
def test_lesson_two_dimensional_example(m, n):
    q = k = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    freqs = torch.tensor([math.pi / 4], dtype=torch.float64)
    score = (apply_rope(q, [m], freqs=freqs) @ apply_rope(k, [n], freqs=freqs).T).item()
    assert round(score, 4) == 0.7071
    assert score == pytest.approx(math.cos(math.pi / 4), abs=1e-12)


def test_changing_the_gap_changes_the_score():
    q = k = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    freqs = [math.pi / 4]
    score = (apply_rope(q, [1], freqs=freqs) @ apply_rope(k, [3], freqs=freqs).T).item()
    assert score == pytest.approx(0.0, abs=1e-12)  # gap 2: a quarter turn


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_keeps_dtype_shape_and_norm(dtype, layout):
    x = random_x((2, 4, 9, 32), seed=1).to(dtype)
    out = apply_rope(x, torch.arange(100, 109), layout=layout)
    assert out.dtype == dtype and out.shape == x.shape
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 5e-2, torch.float32: 1e-5, torch.float64: 1e-12}[dtype]
    torch.testing.assert_close(out.double().norm(dim=-1), x.double().norm(dim=-1), atol=0, rtol=tolerance)


def test_default_positions_and_integer_or_float_positions():
    x = random_x((3, 6, 8))
    torch.testing.assert_close(apply_rope(x), apply_rope(x, torch.arange(6)))
    torch.testing.assert_close(apply_rope(x, [0, 1, 2, 3, 4, 5]), apply_rope(x, torch.arange(6.0)))
    # fractional positions (position interpolation): position p/2 == frequencies halved at p
    halved = rope_frequencies(8, dtype=torch.float64) / 2
    torch.testing.assert_close(apply_rope(x, torch.arange(6) / 2), apply_rope(x, freqs=halved))


def test_position_zero_is_the_identity_and_gradients_flow():
    x = random_x((5, 8)).requires_grad_()
    torch.testing.assert_close(apply_rope(x, torch.zeros(5)), x.detach())
    weights = random_x((5, 8), seed=2)
    (apply_rope(x, torch.arange(5)) * weights).sum().backward()
    # d/dx of wᵀ R x is Rᵀ w: rotating the gradient backwards
    expected = torch.stack([rope_rotation_matrix(p, 8).T @ weights[p] for p in range(5)])
    torch.testing.assert_close(x.grad, expected)


def test_bad_inputs_raise_clear_errors():
    x = torch.zeros(2, 3, 8)
    with pytest.raises(ValueError, match="D must be even.*D=7"):
        apply_rope(torch.zeros(3, 7))
    with pytest.raises(ValueError, match=r"positions must have shape \(N,\) = \(3,\).*\(4,\)"):
        apply_rope(x, torch.arange(4))
    with pytest.raises(ValueError, match=r"positions must have shape.*\(1, 3\)"):
        apply_rope(x, torch.arange(3)[None])
    with pytest.raises(ValueError, match="layout must be one of.*'rotate'"):
        apply_rope(x, layout="rotate")
    with pytest.raises(ValueError, match="freqs must hold D/2 = 4"):
        apply_rope(x, freqs=[1.0, 2.0])
    with pytest.raises(TypeError, match="floating-point"):
        apply_rope(torch.zeros(3, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        apply_rope([[1.0, 0.0]])
    with pytest.raises(ValueError, match=r"shape \(\.\.\., N, D\)"):
        apply_rope(torch.zeros(8))
    with pytest.raises(TypeError, match="positions"):
        apply_rope(x, torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="finite"):
        apply_rope(x, torch.tensor([0.0, float("nan"), 1.0]))
    with pytest.raises(ValueError, match="base"):
        apply_rope(x, base=1.0)
    with pytest.raises(ValueError, match="dim must be a positive even integer"):
        rope_frequencies(5)


# ---------------------------------------------------------------------------------------------
# Absolute positions.


def test_sinusoidal_matches_the_paper_formula():
    n, dim = 12, 10
    expected = torch.zeros(n, dim, dtype=torch.float64)
    for pos in range(n):
        for i in range(dim // 2):
            expected[pos, 2 * i] = math.sin(pos / 10000 ** (2 * i / dim))
            expected[pos, 2 * i + 1] = math.cos(pos / 10000 ** (2 * i / dim))
    torch.testing.assert_close(sinusoidal_positions(n, dim, dtype=torch.float64), expected, atol=1e-12, rtol=0)
    assert sinusoidal_positions(n, dim).dtype == torch.get_default_dtype()


def test_sinusoidal_rows_past_any_length_are_computable():
    long = sinusoidal_positions(300, 16, dtype=torch.float64)
    torch.testing.assert_close(sinusoidal_positions(50, 16, start=250, dtype=torch.float64), long[250:])
    with pytest.raises(ValueError, match="dim must be a positive even integer"):
        sinusoidal_positions(4, 3)


def test_learned_positions_refuse_positions_past_the_table():
    torch.manual_seed(0)
    table = LearnedPositions(8, 4)
    assert table.weight.shape == (8, 4)
    rows = table(torch.tensor([[0, 7], [3, 3]]))
    assert rows.shape == (2, 2, 4)
    torch.testing.assert_close(rows[0, 1], table.weight[7].detach())
    torch.testing.assert_close(rows[1, 0], rows[1, 1])
    with pytest.raises(ValueError, match=r"0\.\.7.*max_len=8.*position 8"):
        table(torch.tensor([2, 8]))
    with pytest.raises(ValueError, match="position -1"):
        table([-1, 0])
    with pytest.raises(TypeError, match="integers"):
        table(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="max_len"):
        LearnedPositions(0, 4)


def test_precomputed_tables_rotate_as_apply_rope_does():
    """rope_cos_sin + rotate_pairs (what lib.gpt does once per forward) equals apply_rope, both layouts."""
    from lib.rope import rope_cos_sin, rotate_pairs

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 16, generator=gen, dtype=torch.float64)
    positions = torch.arange(7, 12)
    freqs = rope_frequencies(16, 500.0).double()
    for layout in ("half", "interleaved"):
        cos, sin = rope_cos_sin(positions, freqs, x.dtype)
        torch.testing.assert_close(
            rotate_pairs(x, cos, sin, layout=layout),
            apply_rope(x, positions, freqs=freqs, layout=layout),
            rtol=0,
            atol=1e-12,
        )
    with pytest.raises(ValueError, match="cos and sin"):
        rotate_pairs(x, cos[:4], sin[:4])
