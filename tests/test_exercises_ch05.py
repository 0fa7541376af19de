"""Chapter 5's exercise answers, worked out independently of their declarations: brute-force
masks, byte counts of real tensors, the tiled loop's own tile list, a hand-written update."""

import math

import torch

from lib.attention import sliding_window_mask
from lib.checks import CORRECT, exercises, grade
from lib.costs import MIB, pattern_mask
from lib.tiling import _key_tiles


def test_value_answers_agree_with_brute_force():
    scores = torch.empty(3, 16, 2048, 2048, dtype=torch.float32, device="meta")
    n_tiles = sum(len(_key_tiles(True, None, start, 64, 1024, 1024, 64)) for start in range(0, 1024, 64))
    l_new = 1.5 * math.exp(2 - 4) + math.exp(1 - 4) + math.exp(4 - 4)
    d, f = 2048, 4 * 2048

    def flops(n):  # QKᵀ, AV: 2·N·N·d each; 4 projections 2·N·d·d; FFN 2·N·d·f twice
        return 2 * (2 * n * n * d) + 4 * (2 * n * d * d) + 2 * (2 * n * d * f)

    answers = {
        "5.score-mib": scores.numel() * scores.element_size() / MIB,
        "5.total-doubling": flops(12288) / flops(6144),
        "5.raised-max": [4.0, l_new],
        "5.causal-tiles": n_tiles,
        "5.window-edges": int(sliding_window_mask(12, 12, 4).sum()),
        "5.global-edges": int(pattern_mask("global+local", 16, window=3, n_global=2).sum()),
    }
    for exercise_id, answer in answers.items():
        assert grade(exercises()[exercise_id], answer).status == CORRECT, exercise_id


def test_online_softmax_update_exercise_accepts_a_hand_written_update():
    def update(m, l, block):
        rows = []
        for m_row, l_row, block_row in zip(m.tolist(), l.tolist(), block.tolist(), strict=True):
            m_new = max([m_row, *block_row])
            if m_new == -math.inf:
                rows.append((m_new, l_row))
                continue
            total = l_row * math.exp(m_row - m_new) + sum(math.exp(x - m_new) for x in block_row)
            rows.append((m_new, total))
        return torch.tensor(rows).T

    result = grade(exercises()["5.online-softmax-update"], update)
    assert result.status == CORRECT, result.message


def test_online_softmax_update_nan_on_all_masked_rows_is_named():
    def unguarded(m, l, block):
        m_new = torch.maximum(m, block.amax(dim=-1))
        return torch.stack((m_new, l * torch.exp(m - m_new) + torch.exp(block - m_new[:, None]).sum(dim=-1)))

    result = grade(exercises()["5.online-softmax-update"], unguarded)
    assert "still nothing to read" in result.message and "NaN" in result.feedback


def test_doubling_mistakes_are_worked_out_independently():
    """Each named mistake of 5.total-doubling, recomputed from a FLOP formula written here."""
    d, n = 2048, 6144

    def flops(n, *, products=2, ffn=True):  # products: QKᵀ and AV, or QKᵀ only
        return products * 2 * n * n * d + 8 * n * d * d + (16 * n * d * d if ffn else 0)

    exercise = exercises()["5.total-doubling"]
    mistakes = {
        "FFN": flops(2 * n, ffn=False) / flops(n, ffn=False),
        "AV": flops(2 * n, products=1) / flops(n, products=1),
        "averaged": 3.0,
    }
    for word, answer in mistakes.items():
        result = grade(exercise, answer)
        assert result.status != CORRECT and word in result.feedback, (word, answer, result.feedback)
    assert grade(exercise, flops(8192) / flops(4096)).status != CORRECT  # N = 2d: the x2.50 the chapter prints


def test_accumulator_answer_from_the_tiled_loop():
    """5.accumulator's acc is what two tiles of the real loop leave before the final division."""
    from lib.tiled_softmax import tiled_attention

    # The first tile holds two keys of score 1 whose values sum to [3, -1]: it leaves m = 1,
    # l = 2, acc = [3, -1]. The second tile is the exercise's: scores [2, 0], values [1, 0], [0, 2].
    q = torch.tensor([[[1.0, 0.0]]])  # (H=1, N=1, D=2); scale 1 makes the score q·k
    k = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [2.0, 0.0], [0.0, 0.0]]])  # scores 1, 1, 2, 0
    v = torch.tensor([[[1.0, -1.0], [2.0, 0.0], [1.0, 0.0], [0.0, 2.0]]])
    out = tiled_attention(q, k, v, scale=1.0, block_q=1, block_k=2)  # acc / l after both tiles
    acc = exercises()["5.accumulator"].expected
    l_new = 2 * math.exp(-1) + math.exp(0) + math.exp(-2)
    torch.testing.assert_close(out[0, 0], torch.tensor(acc) / l_new)
    assert grade(exercises()["5.accumulator"], [round(x, 3) for x in acc]).status == CORRECT


def test_online_softmax_update_returned_as_a_tuple_is_told_to_stack():
    def update(m, l, block):  # right numbers, wrong container
        m_new = torch.maximum(m, block.amax(dim=-1))
        shift = torch.nan_to_num(m_new, neginf=0.0)
        return m_new, l * torch.exp(m - shift) + torch.exp(block - shift[:, None]).sum(dim=-1)

    result = grade(exercises()["5.online-softmax-update"], update)
    assert result.status != CORRECT and "torch.stack" in result.feedback
    assert "rescale" not in result.feedback
