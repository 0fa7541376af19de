"""Chapter 8's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py):
torch's own unfold, nn.Linear and nn.Conv2d count the patches, parameters and output shape; the
position table's rows are counted by listing the new grid's cells."""

import torch
from _variant_answers import variant_answer_tests
from torch import nn
from torch.nn import functional as F


def _patch_grid(height, width):
    patches = F.unfold(torch.zeros(1, 3, height, width), 32, stride=32)  # (1, C·p·p, N)
    return [patches.shape[2], patches.shape[1]]


def _conv_output(height, width):
    with torch.no_grad():
        return list(nn.Conv2d(3, 512, 32, stride=32)(torch.zeros(1, 3, height, width)).shape[1:])


ANSWERS = {
    "8.patch-grid": _patch_grid,
    "8.projection-params": lambda d: sum(p.numel() for p in nn.Linear(3 * 32 * 32, d).parameters()),
    "8.conv-output": _conv_output,
    "8.tokens-with-cls": lambda side, patch: (
        1 + len([(r, c) for r in range(0, side, patch) for c in range(0, side, patch)])
    ),
    "8.resolution": lambda height, width: 1 + len(range(0, height, 16)) * len(range(0, width, 16)),
}

test_has_answers, test_variants_agree = variant_answer_tests(8, ANSWERS)
