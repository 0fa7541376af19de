"""Student copies and grading, for a teacher (DESIGN: "Check-yourself exercises").

The notebooks in ``chapters/`` carry reference answers between solution markers::

    # BEGIN SOLUTION
    answer = [1.0, 2.0]
    # END SOLUTION
    check("1.equal-scores", answer)

``make_student_copy`` replaces each marked block with ``name = ...`` for every name the
block defines, so the ``check`` below it reads "not attempted" until the student answers,
and drops the solution cells' outputs (they would give the answer away).

``grade_notebook`` executes a (student's) notebook and collects what each ``check`` call
reported; ``python -m lib.student grade student/*.ipynb`` prints one line per notebook.

    python -m lib.student copy chapters student      # write student copies
    python -m lib.student grade student/*.ipynb      # run and grade them
"""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Sequence
from pathlib import Path

import nbformat

from lib.checks import RESULT_KEY

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
_SOLUTION_BLOCK = re.compile(rf"^[ \t]*{BEGIN}[ \t]*\n(.*?)^[ \t]*{END}[ \t]*$", re.S | re.M)
_CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([^"']+)["']""")


def defined_names(solution: str) -> list[str]:
    """Top-level names a solution block defines (functions, classes, assignments)."""
    names: list[str] = []
    for node in ast.parse(solution).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)]
    return list(dict.fromkeys(names))


def strip_solutions(source: str) -> str:
    """The cell source with every solution block replaced by ``name = ...`` placeholders."""

    def placeholder(match: re.Match) -> str:
        names = defined_names(match.group(1)) or ["answer"]
        return "\n".join(f"{name} = ...  # your answer here" for name in names)

    return _SOLUTION_BLOCK.sub(placeholder, source)


def make_student_copy(notebook_path: Path, out_dir: Path) -> Path:
    notebook = nbformat.read(notebook_path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code" and BEGIN in cell.source:
            cell.source = strip_solutions(cell.source)
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("mystnb", None)
            cell.metadata["tags"] = [t for t in cell.metadata.get("tags", []) if t not in ("hide-cell", "solution")]
    out_dir.mkdir(parents=True, exist_ok=True)
    out_path = out_dir / notebook_path.name
    nbformat.write(notebook, out_path)
    return out_path


def grade_notebook(notebook_path: Path, timeout: int = 600) -> dict[str, str]:
    """Execute the notebook and return {exercise id: status} from its check() outputs.

    A cell that raises does not stop the run: the exercises after it are still graded.
    An exercise whose check() never reported (its cell raised first) reads "not run".
    """
    from nbclient import NotebookClient

    notebook = nbformat.read(notebook_path, as_version=4)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    results = dict.fromkeys(_CHECK_CALL.findall(code), "not run")
    NotebookClient(notebook, timeout=timeout, allow_errors=True, resources={"metadata": {"path": "."}}).execute()
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get(RESULT_KEY)
            if record:
                results[record["id"]] = record["status"]
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lib.student", description="Student copies and grading.")
    commands = parser.add_subparsers(dest="command", required=True)
    copy = commands.add_parser("copy", help="write student copies of every notebook in a folder")
    copy.add_argument("source", type=Path)
    copy.add_argument("out", type=Path)
    grade = commands.add_parser("grade", help="execute notebooks and report each exercise's status")
    grade.add_argument("notebooks", type=Path, nargs="+")
    args = parser.parse_args(argv)
    if args.command == "copy":
        for path in sorted(args.source.glob("*.ipynb")):
            print(make_student_copy(path, args.out))
        return 0
    for path in args.notebooks:
        results = grade_notebook(path)
        n_correct = sum(status == "correct" for status in results.values())
        detail = ", ".join(f"{exercise_id}: {status}" for exercise_id, status in results.items())
        print(f"{path}: {n_correct}/{len(results)} correct  ({detail})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
