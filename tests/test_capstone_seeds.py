"""lib.capstone_seeds: the drop step, the table's runner, and the committed table chapter 9 reads."""

import math

import pytest

from lib import capstone, capstone_probes, capstone_seeds


def test_drop_step_finds_the_largest_fall_after_step_150():
    steps = [0, 50, 100, 150, 200, 250, 300]
    # the fall from ln V onto the plateau is larger (to step 150 included), but it is not the drop
    losses = [6.2, 1.0, 0.80, 0.59, 0.58, 0.41, 0.40]
    assert capstone_seeds.drop_step(steps, losses) == (250, 0.17)


def test_drop_step_agrees_with_a_brute_force_scan():
    steps = list(range(0, 1050, 50))
    losses = [6.0 / (1 + s) + 0.01 * ((s // 50) % 3) for s in steps]
    later = [(s, v) for s, v in zip(steps, losses, strict=True) if s >= 150]
    best = max(range(1, len(later)), key=lambda i: later[i - 1][1] - later[i][1])
    step, fall = capstone_seeds.drop_step(steps, losses)
    assert step == later[best][0]
    assert fall == pytest.approx(later[best - 1][1] - later[best][1], abs=1e-4)


def test_drop_step_needs_two_evaluations_after_step_150():
    with pytest.raises(ValueError, match="two evaluations"):
        capstone_seeds.drop_step([0, 50, 100, 150], [6.0, 1.0, 0.5, 0.4])


def test_an_unknown_kernel_is_refused_before_anything_trains():
    with pytest.raises(ValueError, match="kernels must be among"):
        capstone_seeds.run_table([0], ["avx512_vnni"])


def test_kernels_name_the_environment_that_forces_them():
    assert capstone_seeds.KERNELS["native"] == {}
    assert capstone_seeds.KERNELS["avx2"]["ATEN_CPU_CAPABILITY"] == "avx2"
    assert capstone_seeds.KERNELS["no-avx"]["ATEN_CPU_CAPABILITY"] == "default"


def test_a_family_that_repeats_an_earlier_one_is_left_out():
    chosen = capstone_seeds.distinct_kernels(["no-avx", "native", "no-avx"])
    assert list(chosen)[0] == "no-avx" and chosen["no-avx"] == "DEFAULT"
    assert len(set(chosen.values())) == len(chosen)  # native is kept only where it is not DEFAULT


@pytest.fixture(scope="module")
def table():
    return capstone_seeds.load_table()


def test_the_committed_table_holds_five_seeds_on_two_kernel_families_or_more(table):
    runs = {(run["seed"], run["kernel"]) for run in table["runs"]}
    assert runs == {(seed, kernel) for seed in range(5) for kernel in table["kernels"]}
    assert len(set(table["kernels"].values())) == len(table["kernels"]) >= 2
    for run in table["runs"]:
        assert run["cpu_capability"] == table["kernels"][run["kernel"]]
    assert table["torch"] and table["machine"] and table["date"]


def test_the_committed_table_was_made_with_the_current_recipe(table):
    from dataclasses import asdict

    assert table["training"] == {**asdict(capstone.CAPSTONE_TRAINING), "seed": table["training"]["seed"]}
    assert table["model"] == capstone.CAPSTONE_MODEL


def test_every_run_in_the_table_is_complete_and_consistent(table):
    for run in table["runs"]:
        for label, n_layers in (("two_layers", 2), ("one_layer", 1)):
            model = run["models"][label]
            assert set(model["probes"]) == set(capstone_probes.PROBES)
            assert len(model["curve"]) == len(model["curve_steps"])
            step, fall = capstone_seeds.drop_step(model["curve_steps"], model["curve"])  # the curve is rounded
            assert model["drop_step"] == step and model["drop"] == pytest.approx(fall, abs=2e-4)
            assert all(0 <= s["mean_p"] <= 1 for s in model["probes"].values())
            assert len(model["prefix_matching"]) == n_layers
            for probe, heads in model["ablation"].items():
                assert probe in capstone_probes.PROBES
                assert len(heads) == n_layers and all(len(row) == capstone.CAPSTONE_MODEL["n_heads"] for row in heads)
            # the loss at the end of the curve is the full held-out loss, up to windowing
            assert math.isfinite(model["loss"]) and 0 < model["loss"] < math.log(512)
        pooled = run["kv_pooling"]
        assert pooled["loss_after"] > pooled["loss_before"]
        assert 0 <= pooled["top1_agreement"] <= 1
