"""The references some tests compare against (Node.js, tiktoken, HF tokenizers, Triton), and the sandbox.

On a reader's machine a missing reference skips the test, in one line that says what to
install. Where the environment variable CI is set the same test fails instead, so a CI
machine that lost a reference cannot pass by skipping what it was meant to check
(tests/test_browser.py does the same for Chromium).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

IN_CI = bool(os.environ.get("CI"))


def require(name: str, available: bool, install: str) -> None:
    """Skip the calling test when ``name`` is not ``available``, or fail it in CI."""
    if available:
        return
    reason = f"{name} is not installed ({install})"
    if IN_CI:
        pytest.fail(f"{reason}; CI requires it", pytrace=False)
    pytest.skip(reason)


def require_module(module: str, install: str) -> ModuleType:
    """Import ``module`` for a whole test file: skip the file when it is missing; in CI the
    file fails to collect, which stops the run (``pytest.importorskip``, except in CI)."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        reason = f"{module} is not installed ({install}): {error}"
        if IN_CI:
            pytest.fail(f"{reason}; CI requires it", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def require_sandbox() -> None:
    """Skip the calling test where no bubblewrap sandbox runs (grading refuses there), or fail it in CI."""
    from lib import sandbox

    available, why = sandbox.available()
    require("a bubblewrap sandbox", available, f"apt-get install bubblewrap; {why}")
