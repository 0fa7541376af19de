"""tools/run.py is what `make trained`, `make test` and `make test-lib` run, and what README gives
for a machine without make: its command lines, the Makefile's recipes and README's block must
agree. Nothing here runs pytest or trains (the two training processes are stood in for by two
short scripts).
"""

import doctest
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "tools" / "run.py"

_spec = importlib.util.spec_from_file_location("tools_run", SCRIPT)
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)


def recipe(target: str) -> list[str]:
    """The recipe lines of a Makefile target (continuation lines joined)."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)*)", text, re.M)
    assert match, f"the Makefile has no target {target}"
    return [line.strip() for line in match.group(1).splitlines()]


def readme_without_make() -> str:
    """README's code block under "Without `make`"."""
    text = (ROOT / "README.md").read_text()
    after = text[text.index("**Without `make`**") :]
    return after[after.index("```\n") + 4 : after.index("\n```", after.index("```\n") + 4)]


def test_the_test_command_is_the_one_make_test_ran():
    assert run.test_command(workers=2) == [
        sys.executable,
        *["-m", "pytest", "tests", "chapters", "-m", "not browser", "-n", "2", "--dist", "loadscope"],
        *["--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=300", "-p", "tests.nbval_rerun"],
        *["-p", "no:cacheprovider"],
    ]
    avx2 = run.test_command(workers=3, cell_timeout=60, paths=["chapters"], extra=["--deselect", "x::Cell 1"])
    assert avx2[3:4] == ["chapters"] and avx2[-2:] == ["--deselect", "x::Cell 1"]
    assert "-n" in avx2 and avx2[avx2.index("-n") + 1] == "3" and "--nbval-cell-timeout=60" in avx2
    assert run.test_lib_command() == [sys.executable, "-m", "pytest", "tests", "-m", "not browser"]
    assert run.ONE_THREAD == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert doctest.testmod(run).failed == 0


def test_workers_and_cell_timeout_come_from_the_environment(monkeypatch):
    monkeypatch.delenv("TEST_WORKERS", raising=False)
    monkeypatch.delenv("NBVAL_CELL_TIMEOUT", raising=False)
    monkeypatch.setattr(run.os, "cpu_count", lambda: 16)
    assert run.default_workers() == 4 and run.default_cell_timeout() == 300
    monkeypatch.setattr(run.os, "cpu_count", lambda: None)
    assert run.default_workers() == 1
    monkeypatch.setenv("TEST_WORKERS", "7")
    monkeypatch.setenv("NBVAL_CELL_TIMEOUT", "600")
    command = run.test_command()
    assert command[command.index("-n") + 1] == "7" and "--nbval-cell-timeout=600" in command


def test_the_training_is_make_trained_s_six_models_in_two_processes():
    gpt, other = run.TRAINING
    assert gpt.count("c.train_capstone(") == 2 and "ONE_LAYER_MODEL" in gpt
    for call in ("train_digits()", "train_digits(patch=4)", "train_digits(pool='mean')", "train_digits_baseline()"):
        assert f"d.{call}" in other
    assert "c.train_capstone(data=c.help_text_data()" in other
    assert [command[:2] for command in run.training_commands()] == [[sys.executable, "-c"]] * 2
    # Each is Python, and what it calls is in lib (read, not imported: importing lib loads torch)
    for code in run.TRAINING:
        compile(code, "<trained>", "exec")
    capstone, digits = ((ROOT / "lib" / name).read_text() for name in ("capstone.py", "digits.py"))
    assert all(f"def {name}(" in capstone for name in ("train_capstone", "help_text_data"))
    assert "ONE_LAYER_MODEL = " in capstone
    assert all(f"def {name}(" in digits for name in ("train_digits", "train_digits_baseline"))


def test_trained_runs_both_processes_at_once_on_one_thread_and_needs_both(monkeypatch, tmp_path, capsys):
    flag = tmp_path / "second-started"
    # The first waits for the second to start (they run at once); both read one thread.
    waits = (
        f"import os, pathlib, time; assert os.environ['OMP_NUM_THREADS'] == os.environ['MKL_NUM_THREADS'] == '1'\n"
        f"end = time.time() + 20\nwhile not pathlib.Path({str(flag)!r}).exists():\n"
        f"    assert time.time() < end, 'the second process never started'; time.sleep(0.01)"
    )
    starts = f"import os, pathlib; assert os.environ['OMP_NUM_THREADS'] == '1'; pathlib.Path({str(flag)!r}).touch()"
    monkeypatch.setattr(run, "TRAINING", (waits, starts))
    assert run.trained() == 0
    assert "trained" in capsys.readouterr().out
    flag.unlink()
    monkeypatch.setattr(run, "TRAINING", (waits, starts + "; raise SystemExit(3)"))
    assert run.trained() == 3
    assert "failed (exit status 3)" in capsys.readouterr().err


def test_trained_takes_no_pytest_arguments():
    with pytest.raises(SystemExit):
        run.main(["trained", "--", "-x"])


def test_the_makefile_runs_the_script():
    assert "RUN := $(BIN)/python tools/run.py" in (ROOT / "Makefile").read_text()
    assert recipe("trained") == ["$(RUN) trained"]
    assert recipe("test") == ["$(RUN) test $(TEST_OPTIONS) $(TO_PYTEST)"]
    assert recipe("test-lib") == ["$(RUN) test-lib $(TO_PYTEST)"]
    [avx2] = recipe("test-avx2")
    assert avx2.startswith("$(AVX2_ENV) $(RUN) test chapters $(TEST_OPTIONS) -- $(AVX2_LEFT_OUT)")
    # The commands live in the script alone: the Makefile trains and calls pytest nowhere else.
    makefile = (ROOT / "Makefile").read_text()
    for command_text in ("train_capstone", "train_digits", "--nbval-lax", "OMP_NUM_THREADS"):
        assert command_text not in makefile


def test_readme_gives_the_script_s_commands():
    block = readme_without_make()
    for command in ("trained", "test", "test-lib"):
        assert f".venv/bin/python tools/run.py {command}\n" in block + "\n"
    assert "-m pytest" not in block and "train_capstone" not in block
    named = set(re.findall(r"tools/run\.py ([a-z-]+)", (ROOT / "README.md").read_text()))
    assert named <= {"trained", "test", "test-lib"}


def test_the_avx2_run_leaves_out_chapter_2s_precision_cells_and_no_other():
    """make test-avx2 deselects chapter 2's bf16/fp16 SDPA cells by nbval's index (code cells counted
    from 0): a cell added above them moves them, and the run would leave out the wrong four."""
    import json
    import re

    makefile = (ROOT / "Makefile").read_text()
    numbers = re.search(r"^AVX2_LEFT_OUT := \$\(foreach n,([\d ]+),", makefile, re.M).group(1).split()
    notebook = json.loads((ROOT / "chapters" / "02_batches_and_heads.ipynb").read_text())
    code = ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]
    precision = [str(n) for n, source in enumerate(code) if re.search(r"\bprecision\b(?!=)", source)]  # not precision=4
    assert numbers == precision, (numbers, precision)
