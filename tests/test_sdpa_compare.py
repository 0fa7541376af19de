"""lib.sdpa_compare: the plain attention against torch's SDPA by kernel and dtype, and both paths of MHA."""

import torch

from lib.attention import MultiHeadAttention
from lib.sdpa_compare import fused_vs_plain, precision_comparison, sdpa_backends


def test_precision_rows_within_tolerance_and_ordered():
    rows = precision_comparison(tokens=16, head_dim=8)
    assert [row.dtype for row in rows] == ["float32", "float16", "bfloat16"]
    assert all(row.within for row in rows)
    # lower precision, larger error: the tolerances must follow the formats
    assert rows[0].ours_error < rows[1].ours_error < rows[2].ours_error


def test_sdpa_backends_always_offer_the_math_fallback():
    q = torch.randn(1, 2, 4, 8)
    verdicts = sdpa_backends(q, q, q, is_causal=True)
    assert set(verdicts) == {"flash_attention", "efficient_attention", "cudnn_attention", "math"}
    assert verdicts["math"] is True
    if not torch.cuda.is_available():
        assert verdicts["efficient_attention"] is False and verdicts["cudnn_attention"] is False


def test_precision_rows_report_the_size_of_the_outputs():
    rows = precision_comparison(tokens=16, head_dim=8)
    assert len({row.largest_output for row in rows}) == 1
    assert 0 < rows[0].mean_output <= rows[0].largest_output


def test_fused_and_plain_agree_in_outputs_and_gradients():
    torch.manual_seed(0)
    module = MultiHeadAttention(32, 4)
    result = fused_vs_plain(module, torch.randn(2, 6, 32))
    assert module.fused is True
    assert result.output_diff < 1e-5 and result.input_grad_diff < 1e-5 and result.weight_grad_diff < 1e-5
    assert all(p.grad is None or not p.grad.any() for p in module.parameters())
