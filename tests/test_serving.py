"""The serving snapshot against hand counts, and the issue's targets on the seeded mix."""

import pytest

from lib.kv_cache import blocks_needed
from lib.serving import Request, fill_contiguous, fill_paged, prefix_sharing, sample_requests


def test_requests_are_seeded_and_bounded():
    first, again = sample_requests(50, max_len=512, seed=3), sample_requests(50, max_len=512, seed=3)
    assert first == again and first != sample_requests(50, max_len=512, seed=4)
    assert all(1 <= r.prompt_len and 1 <= r.output_len and r.total <= 512 for r in first)
    with pytest.raises(ValueError, match="max_len"):
        sample_requests(5, max_len=1)


def test_small_mix_by_hand():
    requests = [Request(10, 5), Request(3, 1), Request(20, 20), Request(1, 1)]
    contiguous = fill_contiguous(requests, budget_tokens=130, max_len=64)
    assert (contiguous.admitted, contiguous.tokens, contiguous.reserved_tokens) == (2, 19, 128)
    paged = fill_paged(requests, budget_tokens=64, block_size=8)  # 8 blocks: 2 + 1 + 5 = 8, then full
    assert (paged.admitted, paged.tokens, paged.reserved_tokens) == (3, 59, 64)
    assert paged.wasted_fraction == pytest.approx(5 / 64)


def test_paged_fits_twice_as_many_and_wastes_under_four_percent():
    requests = sample_requests(300, max_len=2048, seed=0)
    budget = 32 * 2048
    contiguous = fill_contiguous(requests, budget_tokens=budget, max_len=2048)
    paged = fill_paged(requests, budget_tokens=budget, block_size=16)
    assert contiguous.admitted == 32
    assert paged.admitted >= 2 * contiguous.admitted
    assert paged.wasted_fraction < 0.04
    # brute force: the paged reservation is the sum of ceil(T / 16) blocks over the admitted requests
    admitted = requests[: paged.admitted]
    assert paged.reserved_tokens == 16 * sum(blocks_needed(r.total, 16) for r in admitted)
    assert paged.tokens == sum(r.total for r in admitted)


def test_prefix_sharing_counts():
    # system prompt of 40 tokens with S=16: 2 full blocks shared, the third (8 tokens) copied per request
    shared = prefix_sharing(40, [5, 20, 8], block_size=16)
    assert shared.blocks_without_sharing == 3 + 4 + 3
    # the system sequence's 3 blocks, plus per request: a copy of block 3, and more blocks as they grow
    assert shared.blocks_with_fork == 3 + 1 + 2 + 1
    assert shared.blocks_saved == 3


def test_plots_draw(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from lib.serving import plot_kv_memory, plot_occupancy

    requests = sample_requests(20, max_len=256, seed=1)
    results = [fill_contiguous(requests, budget_tokens=1024, max_len=256), fill_paged(requests, budget_tokens=1024)]
    axes = plot_occupancy(results)
    assert [bar.get_height() for bar in axes[0].patches] == [r.admitted for r in results]
    ax = plot_kv_memory([1024, 4096], {"MHA": 32, "GQA": 8}, layers=32, head_dim=128)
    assert ax.lines[1].get_ydata()[-1] == 0.5  # the lesson's 512 MiB at N=4096 with 8 KV heads
