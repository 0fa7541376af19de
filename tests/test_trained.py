"""The on-disk cache of trained weights: trains once per configuration, reloads after."""

import pytest
import torch

from lib.trained import cache_path, cached, config_key


def test_trains_once_then_loads(tmp_path):
    calls = []

    def train():
        calls.append(1)
        return {"weight": torch.arange(3.0), "losses": [2.0, 1.0]}

    first = cached("toy", {"lr": 0.1, "steps": 3}, train, cache_dir=tmp_path)
    second = cached("toy", {"steps": 3, "lr": 0.1}, train, cache_dir=tmp_path)  # same config, other order
    assert len(calls) == 1
    assert torch.equal(first["weight"], second["weight"]) and second["losses"] == [2.0, 1.0]
    cached("toy", {"lr": 0.2, "steps": 3}, train, cache_dir=tmp_path)  # another config trains again
    assert len(calls) == 2
    cached("toy", {"lr": 0.1, "steps": 3}, train, cache_dir=tmp_path, retrain=True)
    assert len(calls) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        {
            cache_path("toy", {"lr": 0.1, "steps": 3}, tmp_path).name,
            cache_path("toy", {"lr": 0.2, "steps": 3}, tmp_path).name,
        }
    )


def test_key_depends_on_every_setting():
    assert config_key({"a": 1}) != config_key({"a": 2}) != config_key({"a": 1, "b": 1})


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="name"):
        cached("../escape", {}, dict, cache_dir=tmp_path)
    with pytest.raises(TypeError, match="config"):
        cached("toy", [1, 2], dict, cache_dir=tmp_path)
    with pytest.raises(TypeError, match="train"):
        cached("toy", {}, lambda: [1], cache_dir=tmp_path)
