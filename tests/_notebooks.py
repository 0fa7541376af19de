"""Small student notebooks for the grading tests, written to a temporary folder."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parent.parent
CHAPTER_1 = ROOT / "chapters" / "01_one_attention_read.ipynb"
SOLVED = ("check('1.equal-scores', [1, 2])", "check('1.wider-variance', [1024, 1 / 32])")


def stored_record(exercise_id: str) -> dict:
    """A display output as an earlier run of check() might have stored it: a correct result."""
    record = {"id": exercise_id, "status": "correct", "cell": 3, "mistake": "", "message": "right"}
    return new_output(
        "display_data", data={"text/plain": f"[{exercise_id}] ✓ correct"}, metadata={"lib.checks": record}
    )


def write_notebook(path: Path, *sources: str, kernel: str = "python3", stored: bool = False) -> Path:
    """A student's notebook: a markdown cell, the import (cell 2), then one code cell per source.
    ``stored`` gives each check() cell the output of a correct result, as a solved run leaves it."""
    cells = [new_markdown_cell("# a student's notebook"), new_code_cell("from lib.checks import check")]
    for source in sources:
        cell = new_code_cell(source)
        if stored and "check(" in source:
            cell.outputs = [stored_record(source.split("'")[1])]
            cell.execution_count = len(cells)
        cells.append(cell)
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def sandboxed_processes(owner: Path) -> list[int]:
    """The processes running now in a PID namespace other than this one's whose mounts include a
    folder under ``owner`` (the ``sandbox_owner`` fixture): the sandboxes a test's grader started, with
    everything they started (a worker, a kernel, a hidden run, a setsid child). A sandboxed
    process cannot change its mounts, so it cannot hide from this by renaming or moving itself."""
    import os

    ours = os.readlink("/proc/self/ns/pid")
    mark = owner.name.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            namespace = os.readlink(f"/proc/{entry}/ns/pid")
            with open(f"/proc/{entry}/mountinfo", "rb") as file:
                mounts = file.read()
        except OSError:  # it ended while we looked
            continue
        if namespace != ours and mark in mounts:
            found.append(int(entry))
    return found
