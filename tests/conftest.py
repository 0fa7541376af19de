"""Test-wide setup.

Triton reads TRITON_INTERPRET when triton.language is first imported, and torch may import
triton on its own (FlopCounterMode pulls in torch's compiler stack). Set it before any test
module is imported, so that on a machine without CUDA the kernels run in the interpreter.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "browser: drives headless Chromium over the built book (`make browser-test`, after `make book`)",
    )
