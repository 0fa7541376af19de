"""Student copies of the chapters, and the command line for copies and grading (DESIGN: "What a learner opens").

The notebooks in ``chapters/`` carry reference answers between solution markers::

    # BEGIN SOLUTION
    answer = [1.0, 2.0]
    # END SOLUTION
    check("1.equal-scores", answer)

``make_student_copy`` replaces each marked block with ``name = ...`` for every name the
block defines, so the ``check`` below it reads "not attempted" until the student answers,
and clears every output (the solutions' outputs would give the answers away, and the
learner's own run should produce the rest). ``make lab`` opens these copies, in
``student/``; a copy that exists already is the learner's work and is never overwritten.
A copy is never written with an answer in it: a solution marker left unmatched (``# END
SOLUTON``) stops that chapter's copy with an error that names the cell.

A copy opens in JupyterLab as it was written, not already marked modified: its ``kernelspec``
and ``language_info`` are those of the kernel Lab starts for it (the chapters store "Python 3",
and Lab, once the kernel is up, rewrote that to the kernel's "Python 3 (ipykernel)"). A file
outside the chapters that a chapter links to (``../book/references.md``) is copied beside the
copies and the link rewritten to it, since ``make lab`` serves ``student/`` alone.

The book's MyST roles that only Sphinx resolves are written out for JupyterLab, which would
show them raw: a citation, ``{cite:t}`vaswani2017```, becomes "Vaswani et al. (2017)", linked
to the references (``plain_citations``, from ``book/references.bib``), and the references page
gets its lists from the same file (``plain_references``); a figure reference,
``{numref}`fig-04-norm-placement```, becomes "the figure below" or "above", where that figure's
cell is (``plain_figure_references``), since a copy's figures carry no numbers.

Grading lives in ``lib.batch_grading`` (a notebook executed afresh in a sandbox, its recorded
answers graded outside it), ``lib.grading_process`` and ``lib.sandbox`` (the supervised,
sandboxed process each notebook runs in), ``lib.answer_grading`` and ``lib.hidden_runs`` (the
grade, computed with the answer key), ``lib.grade_reports`` (table, summary, feedback
files), ``lib.gradebook`` and ``lib.gradebook_csv`` (a row per student and chapter, in points; the CSV files) and
``lib.grade_command`` (the grade and merge command lines):

    python -m lib.student copy chapters student            # write missing student copies
    python -m lib.student copy chapters student --variant ada        # with Ada's own numbers
    python -m lib.student copy chapters copies --roster class.csv    # copies/<name>/ for each student
    python -m lib.student grade submissions/*/*.ipynb      # run and grade; a table per student
    python -m lib.student grade ... --json grades.json     # the same, with what check() said
    python -m lib.student grade ... --roster class.txt --csv book.csv  # a row per student and chapter
    python -m lib.student grade ... --gradebook gb.json    # the gradebook's state: --update, merge
    python -m lib.student grade new/*/*.ipynb --update gb.json --overrides fixes.csv --csv book.csv
    python -m lib.student grade ... --seed 7 --shard 2/4 --gradebook part2.json   # one machine's share
    python -m lib.student merge part*.json --gradebook gb.json --csv book.csv --canvas canvas.csv
    python -m lib.student grade ... --feedback out/        # out/<student>/<notebook>.md to send back
    python -m lib.student grade ... --jobs 4 --kernel NAME # 4 at once; another Jupyter kernel
    python -m lib.student grade ... --seed 7               # the hidden inputs a run drew, again
    python -m lib.student grade ... --no-sandbox           # where no bwrap runs: unprotected

A notebook's student is the name of its folder (``submissions/ada/01_...ipynb`` is Ada's).
"""

from __future__ import annotations

import argparse
import ast
import platform
import re
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote

import nbformat

from lib import grade_command, variants
from lib.plain_roles import plain_roles, write_linked
from lib.roster import RosterError, read_roster

__all__ = ["BEGIN", "END", "defined_names", "strip_solutions", "student_notebook", "make_student_copy", "main"]
__all__ += ["kernel_metadata", "relative_links"]

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
_SOLUTION_BLOCK = re.compile(rf"^([ \t]*){BEGIN}[ \t]*\r?\n(.*?)^[ \t]*{END}[ \t]*\r?$", re.S | re.M)
# Any line that looks like a solution marker ("#END SOLUTON", "# begin solution"): one left over
# after stripping means a block was not recognised, and its answer would reach the student.
_MARKER_LINE = re.compile(r"^[ \t]*#[ \t]*(BEGIN|END)[ \t_-]*SOLU", re.I | re.M)


def defined_names(solution: str) -> list[str]:
    """Top-level names a solution block defines (functions, classes, assignments)."""
    names: list[str] = []
    try:
        body = ast.parse(textwrap.dedent(solution)).body
    except SyntaxError:  # the placeholder falls back to `answer`; the reference is never copied
        return names
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)]
    return list(dict.fromkeys(names))


def _names_read(code: str) -> set[str]:
    """The names some code reads (not the words in its strings); every word if it does not parse."""
    try:
        tree = ast.parse(_SOLUTION_BLOCK.sub("", code))
    except SyntaxError:
        return set(re.findall(r"\w+", code))
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def strip_solutions(source: str) -> str:
    """The cell source with every solution block replaced by ``name = ...`` placeholders:
    one for each name the block defines that the rest of the cell uses (the ``check`` call
    reads ``answer``; a helper the solution made up along the way is not asked for)."""

    def placeholder(match: re.Match) -> str:
        indent, block = match.group(1), match.group(2)
        defined = defined_names(block)
        used = [name for name in defined if name in _names_read(source[match.end() :])]
        names = used or defined or ["answer"]
        return "\n".join(f"{indent}{name} = ...  # your answer here" for name in names)

    stripped = _SOLUTION_BLOCK.sub(placeholder, source)
    leftover = _MARKER_LINE.search(stripped)
    if leftover:
        number = stripped[: leftover.start()].count("\n") + 1
        line = stripped.splitlines()[number - 1].strip()
        raise ValueError(
            f"solution marker on line {number} ({line!r}) has no partner: write exactly {BEGIN!r} "
            f"and {END!r}, each on its own line, or the answer would be copied to the student"
        )
    return stripped


def student_notebook(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A student copy of ``notebook`` (changed in place and returned): solutions stripped,
    every output and execution count cleared, stored widget state dropped."""
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        cell.metadata.pop("execution", None)
        if _MARKER_LINE.search(cell.source) or "solution" in cell.metadata.get("tags", []):
            if not _SOLUTION_BLOCK.search(cell.source):
                raise ValueError(f"cell {number} is a solution cell without a {BEGIN!r} ... {END!r} block")
            try:
                cell.source = strip_solutions(cell.source)
            except ValueError as error:
                raise ValueError(f"cell {number}: {error}") from None
            cell.metadata.pop("mystnb", None)
            tags = [t for t in cell.metadata.get("tags", []) if t not in ("hide-cell", "solution")]
            if tags:
                cell.metadata["tags"] = tags
            else:
                cell.metadata.pop("tags", None)
    notebook.metadata.pop("widgets", None)
    return notebook


def with_numbers(notebook: nbformat.NotebookNode, variant: str | None = None) -> nbformat.NotebookNode:
    """``notebook`` (changed in place) with its questions' MyST substitutions (``{{ ex_1_new_values_a }}``)
    written out: the student ``variant``'s numbers (``lib.variants``), the book's when None."""
    values = variants.substitutions(variant)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = variants.render(cell.source, values)
    myst = notebook.metadata.get("myst", {})
    myst.pop("substitutions", None)
    if not myst:
        notebook.metadata.pop("myst", None)
    return notebook


# A relative link in markdown: [text](target) or ![alt](target), and href="..." or src="..." in HTML.
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']")
_NOT_A_PATH = re.compile(r"^(?:[a-zA-Z][\w+.-]*:|#|/)")  # a URL (https:, mailto:), an anchor, an absolute path


def relative_links(markdown: str) -> list[tuple[int, int, str]]:
    """(start, end, target) of every link in ``markdown`` to a relative path (anchor and query kept)."""
    links = []
    for match in _LINK.finditer(markdown):
        group = 1 if match.group(1) is not None else 2
        target = match.group(group)
        if not _NOT_A_PATH.match(target):
            links.append((match.start(group), match.end(group), target))
    return links


def _link_outside(notebook: nbformat.NotebookNode, source_dir: Path) -> dict[str, Path]:
    """The notebook's links to files outside ``source_dir`` (``../book/references.md``): the file
    each names, rewritten in place to the file's name, which the copy's folder gets beside it."""
    files: dict[str, Path] = {}
    source_dir = source_dir.resolve()
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        text = cell.source
        for start, end, target in reversed(relative_links(text)):
            path, anchor = re.match(r"([^#?]*)(.*)", target, re.S).groups()  # references.md, #section
            linked = (source_dir / unquote(path)).resolve()
            if linked.parent == source_dir or not linked.is_file():
                continue
            files[linked.name] = linked
            text = text[:start] + linked.name + anchor + text[end:]
        cell.source = text
    return files


def kernel_metadata() -> dict:
    """The ``kernelspec`` and ``language_info`` JupyterLab writes into a notebook once its kernel
    (Jupyter's python3, run by this Python) is up: a copy that stores others opens marked modified."""
    display_name = "Python 3 (ipykernel)"  # ipykernel's own kernelspec, when Jupyter finds none
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

        try:
            display_name = KernelSpecManager().get_kernel_spec("python3").display_name
        except NoSuchKernel:
            pass
    except ImportError:
        pass
    return {
        "kernelspec": {"display_name": display_name, "language": "python", "name": "python3"},
        "language_info": {
            "codemirror_mode": {"name": "ipython", "version": sys.version_info[0]},
            "file_extension": ".py",
            "mimetype": "text/x-python",
            "name": "python",
            "nbconvert_exporter": "python",
            "pygments_lexer": f"ipython{sys.version_info[0]}",
            "version": platform.python_version(),
        },
    }


def make_student_copy(
    notebook_path: Path, out_dir: Path, *, overwrite: bool = False, variant: str | None = None
) -> tuple[Path, bool]:
    """Write the student copy of ``notebook_path`` into ``out_dir``, its questions showing the
    numbers of the student ``variant`` (``lib.variants``; the book's numbers when None).

    Returns (path, written). A copy that exists already is the learner's work: it is kept
    as it is (written is False) unless ``overwrite`` is given. With a variant, ``out_dir``
    also gets the ``lib.variants.VARIANT_FILE`` that makes check() grade those numbers there.
    """
    out_path = Path(out_dir) / Path(notebook_path).name
    if out_path.exists() and not overwrite:
        return out_path, False
    notebook = with_numbers(student_notebook(nbformat.read(notebook_path, as_version=4)), variant)
    plain_roles(notebook, Path(notebook_path))
    notebook.metadata.update(kernel_metadata())
    linked = _link_outside(notebook, Path(notebook_path).parent)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    for name, source in linked.items():  # book material, not the learner's: refreshed
        write_linked(source, out_path.parent / name)
    nbformat.write(notebook, out_path)
    if variant is not None:
        (out_path.parent / variants.VARIANT_FILE).write_text(variant.strip() + "\n", encoding="utf-8")
    return out_path, True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lib.student", description="Student copies and grading.")
    commands = parser.add_subparsers(dest="command", required=True)
    copy_command = commands.add_parser(
        "copy", help="write student copies of every notebook in a folder (keeps existing ones)"
    )
    copy_command.add_argument("source", type=Path)
    copy_command.add_argument("out", type=Path)
    copy_command.add_argument(
        "--overwrite", action="store_true", help="replace existing copies (a learner's work is lost)"
    )
    who = copy_command.add_mutually_exclusive_group()
    who.add_argument("--variant", metavar="NAME", help="the questions show the numbers drawn for this student")
    who.add_argument("--roster", type=Path, metavar="FILE", help="a copy per student of the class list, in OUT/<name>/")
    grade = commands.add_parser("grade", help="execute notebooks and report each exercise's status")
    grade_command.add_grade_arguments(grade)
    merge = commands.add_parser("merge", help="join the gradebooks of --shard 1/N ... N/N into one")
    grade_command.add_merge_arguments(merge)
    args = parser.parse_args(argv)
    if args.command == "copy":
        return _copy(args)
    return grade_command.run_merge(args) if args.command == "merge" else grade_command.run_grade(args)


def _copy(args: argparse.Namespace) -> int:
    if args.roster is not None:
        try:
            students = [(name, args.out / name) for name in read_roster(args.roster)]
        except RosterError as error:
            print(f"no copies written: {error}", file=sys.stderr)
            return 2
        for name, _ in students:
            if Path(name).name != name or name in (".", ".."):
                print(f"no copies written: roster name {name!r} cannot be a folder name", file=sys.stderr)
                return 2
    else:
        students = [(args.variant, args.out)]
    if args.variant is not None and not args.variant.strip():
        print("no copies written: --variant needs a student name", file=sys.stderr)
        return 2
    failed = 0
    for name, folder in students:
        for path in sorted(args.source.glob("*.ipynb")):
            try:
                out, written = make_student_copy(path, folder, overwrite=args.overwrite, variant=name)
            except ValueError as error:  # nothing is written: a copy must never carry an answer
                print(f"{path}: no copy written: {error}")
                failed += 1
                continue
            print(f"{out}  ({'written' if written else 'kept: it exists already'})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
