"""Trained weights cached on disk, keyed by the training configuration (chapters 8 and 9).

A chapter that trains a model calls ``cached(name, config, train)``: the first run trains
and saves what ``train`` returns (a state dict, a loss history, ...) under
``.cache/trained/<name>-<key>.pt``, where the key is a hash of ``config``; every later run
with the same configuration loads the file instead of training again. Change any setting
and the key changes, so a stale model is never reused. Delete the folder (or pass
``retrain=True``) to train from scratch. The folder is git-ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

__all__ = ["CACHE_DIR", "config_key", "cache_path", "cached"]

# BOOK_CACHE_DIR moves the folder (tests point it at a temporary one).
CACHE_DIR = Path(os.environ.get("BOOK_CACHE_DIR", Path(__file__).resolve().parent.parent / ".cache" / "trained"))
FORMAT_VERSION = 1  # bump when what is stored changes shape


def config_key(config: Mapping[str, Any]) -> str:
    """A short, stable hash of a JSON-able configuration (key order does not matter)."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping of settings, got {type(config).__name__}")
    text = json.dumps({"format": FORMAT_VERSION, **config}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def cache_path(name: str, config: Mapping[str, Any], cache_dir: Path | None = None) -> Path:
    if not name or not all(ch.isalnum() or ch in "-_" for ch in name):
        raise ValueError(f"name must be letters, digits, '-' or '_', got {name!r}")
    return Path(cache_dir or CACHE_DIR) / f"{name}-{config_key(config)}.pt"


def cached(
    name: str,
    config: Mapping[str, Any],
    train: Callable[[], dict],
    *,
    retrain: bool = False,
    cache_dir: Path | None = None,
) -> dict:
    """Load what ``train()`` returned for this configuration, training (and saving) only if needed.

    ``train`` returns a dict of tensors, numbers, strings and lists of them (a state dict
    and a loss history, say); it is loaded back with ``torch.load(weights_only=True)``.
    """
    path = cache_path(name, config, cache_dir)
    if path.exists() and not retrain:
        return torch.load(path, weights_only=True)
    result = train()
    if not isinstance(result, dict):
        raise TypeError(f"train() must return a dict to cache, got {type(result).__name__}")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    torch.save(result, partial)
    os.replace(partial, path)  # atomic: a run killed mid-save never leaves a broken file
    return result
