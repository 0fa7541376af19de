"""Student copies hide every reference answer and never overwrite a learner's work; the
command line's batch grading survives any notebook and reports each one."""

import json
import re
from pathlib import Path
from urllib.parse import unquote

import nbformat
from _notebooks import write_notebook
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from lib import plain_roles, student, variants
from lib.grade_reports import TABLE_WIDTH
from lib.student import BEGIN, defined_names, make_student_copy, strip_solutions

# Chapters only: an appendix (appendix_*.ipynb) has no exercises.
CHAPTERS = sorted(Path(__file__).parent.parent.joinpath("chapters").glob("[0-9][0-9]_*.ipynb"))


def test_defined_names():
    assert defined_names("answer = [1, 2]") == ["answer"]
    assert defined_names("def f(x):\n    y = 2\n    return y\nalpha, beta = 1, 2\nalpha += 1") == ["f", "alpha", "beta"]


def test_strip_solutions_keeps_the_check_call():
    source = "# BEGIN SOLUTION\ndef f(x):\n    return x\n# END SOLUTION\ncheck('1.x', f)"
    assert strip_solutions(source) == "f = ...  # your answer here\ncheck('1.x', f)"


def test_only_the_names_the_check_reads_become_placeholders():
    source = "# BEGIN SOLUTION\nhelper = 2\nanswer = [helper, 1]\n# END SOLUTION\ncheck('1.helper', answer)"
    assert strip_solutions(source) == "answer = ...  # your answer here\ncheck('1.helper', answer)"


def test_student_copies_of_every_chapter_hide_the_answers_and_clear_outputs(tmp_path):
    assert CHAPTERS
    for chapter in CHAPTERS:
        path, written = make_student_copy(chapter, tmp_path)
        assert written
        copy = nbformat.read(path, as_version=4)
        original = nbformat.read(chapter, as_version=4)
        n_solutions = sum(BEGIN in cell.source for cell in original.cells)
        placeholders = [cell for cell in copy.cells if "= ...  # your answer here" in cell.source]
        assert len(placeholders) == n_solutions > 0, chapter.name
        for cell in placeholders:
            assert "SOLUTION" not in cell.source
            assert "hide-cell" not in cell.metadata.get("tags", [])
        for cell in copy.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, chapter.name
        assert "widgets" not in copy.metadata
        # nothing but the solution cells changed, the questions' numbers written out (the book's) and
        # the citations and figure references in plain text
        book_numbers = variants.substitutions(None)
        plain_roles.plain_roles(original, chapter)
        assert [c.source for c in copy.cells if BEGIN not in c.source and "your answer here" not in c.source] == [
            variants.render(c.source, book_numbers).replace("](../book/", "](")
            if c.cell_type == "markdown"
            else c.source
            for c in original.cells
            if BEGIN not in c.source
        ]


# Every chapter and appendix: `make lab` copies them all into student/ and serves that folder alone.
NOTEBOOKS = sorted(Path(__file__).parent.parent.joinpath("chapters").glob("*.ipynb"))


def test_every_relative_link_in_a_copy_resolves_inside_its_folder(tmp_path):
    """JupyterLab, rooted in student/, reaches nothing outside it: a link to ../book/references.md
    was broken in every copy. Each link must name a file in the copy's own folder."""
    folder = (tmp_path / "student").resolve()
    for notebook in NOTEBOOKS:
        make_student_copy(notebook, folder)
    links = 0
    for copy in sorted(folder.glob("*.ipynb")):
        for cell in nbformat.read(copy, as_version=4).cells:
            if cell.cell_type != "markdown":
                continue
            for _, _, target in student.relative_links(cell.source):
                links += 1
                linked = (folder / unquote(re.match(r"[^#?]*", target).group())).resolve()
                assert linked.is_file() and linked.is_relative_to(folder), (copy.name, target)
    assert links > len(NOTEBOOKS)  # the chapters' links to each other and to the references
    # the references page beside the copies, its bibliography lists written out (JupyterLab shows no directive)
    book = NOTEBOOKS[0].parents[1] / "book"
    entries = plain_roles.read_bibliography(book / "references.bib")
    plain = plain_roles.plain_references((book / "references.md").read_text(), entries)
    assert (folder / "references.md").read_text() == plain


def test_relative_links_finds_markdown_and_html_links_but_no_urls():
    text = '[a](../book/references.md) ![b](fig.png "t") <a href="02.ipynb#x">c</a> [d](https://x.org) [e](#here)'
    assert [target for _, _, target in student.relative_links(text)] == [
        "../book/references.md",
        "fig.png",
        "02.ipynb#x",
    ]


def test_a_copy_stores_the_kernel_jupyterlab_starts_for_it(tmp_path):
    """A copy opened in JupyterLab was marked modified before the learner typed anything: once its
    kernel was up, Lab wrote the kernel's kernelspec ("Python 3 (ipykernel)") over the one the
    chapters store ("Python 3"), and would write its language_info (the Python version) over
    another machine's. A copy stores both as the kernel that runs it reports them."""
    from ipykernel.ipkernel import IPythonKernel
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    for chapter in CHAPTERS[:2]:
        stored = nbformat.read(chapter, as_version=4).metadata
        copy = nbformat.read(make_student_copy(chapter, tmp_path)[0], as_version=4)
        assert copy.nbformat_minor >= 5 and all("id" in cell for cell in copy.cells)  # no upgrade on opening
        copy = copy.metadata
        assert copy.kernelspec == {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
        assert copy.language_info == IPythonKernel.language_info
        assert stored.kernelspec.name == "python3"  # the kernel the chapters ask for is the one found


def test_student_copy_never_overwrites_a_learners_work(tmp_path, capsys):
    chapter = CHAPTERS[0]
    path, written = make_student_copy(chapter, tmp_path)
    work = nbformat.read(path, as_version=4)
    work.cells[0].source = "my notes"
    nbformat.write(work, path)
    again, written = make_student_copy(chapter, tmp_path)
    assert again == path and not written
    assert nbformat.read(path, as_version=4).cells[0].source == "my notes"
    # the command line keeps it too, and says so; --overwrite is the explicit way to replace it
    assert student.main(["copy", str(chapter.parent), str(tmp_path)]) == 0
    assert "kept" in capsys.readouterr().out
    assert nbformat.read(path, as_version=4).cells[0].source == "my notes"
    make_student_copy(chapter, tmp_path, overwrite=True)
    assert nbformat.read(path, as_version=4).cells[0].source != "my notes"


def test_batch_grading_survives_loops_dead_kernels_and_syntax_errors(tmp_path, capsys, needs_sandbox):
    """One notebook loops forever, one kills its kernel, one has a syntax error: each gets
    its line, within the time limit, and the good notebook after them is still graded."""
    notebooks = [
        write_notebook(tmp_path / "a_loop" / "ch.ipynb", "check('1.equal-scores', [1, 2])", "while True:\n    pass"),
        write_notebook(tmp_path / "b_dies" / "ch.ipynb", "check('1.equal-scores', [2, 0])", "import os\nos._exit(1)"),
        write_notebook(
            tmp_path / "c_syntax" / "ch.ipynb",
            "x = 1\nanswer = [1,\ncheck('1.equal-scores', answer)",
            "assert open('data.txt').read() == 'beside'\nopen('data.txt', 'w').write('changed')\n"
            "check('1.wider-variance', [1024, 1 / 32])",
        ),
        write_notebook(tmp_path / "d_fine" / "ch.ipynb", "check('1.equal-scores', [1, 2])"),
    ]
    (tmp_path / "c_syntax" / "data.txt").write_text("beside")  # the kernel works on a private copy of its folder
    (tmp_path / "e_broken").mkdir()
    (tmp_path / "e_broken" / "ch.ipynb").write_text("{not json")
    notebooks.append(tmp_path / "e_broken" / "ch.ipynb")
    out = tmp_path / "grades.json"
    args = ["grade", *map(str, notebooks), "--time-limit", "8", "--json", str(out)]
    assert student.main(args) == 0
    printed = capsys.readouterr().out
    graded = {row["student"]: row for row in json.loads(out.read_text())}
    assert list(graded) == ["a_loop", "b_dies", "c_syntax", "d_fine", "e_broken"]
    assert graded["a_loop"]["problems"] == ["timed out in cell 4 (8 s for the notebook)"]
    assert graded["a_loop"]["exercises"] == {"1.equal-scores": "correct"}
    assert graded["b_dies"]["problems"] == ["kernel died in cell 4"]
    assert graded["b_dies"]["exercises"] == {"1.equal-scores": "incorrect"}
    assert graded["c_syntax"]["problems"] == ["syntax error in cell 3, line 3: incomplete input"]
    # the kernel ran in the notebook's folder, so the cell after the syntax error passed
    assert graded["c_syntax"]["exercises"] == {"1.equal-scores": "not run", "1.wider-variance": "correct"}
    assert (tmp_path / "c_syntax" / "data.txt").read_text() == "beside"
    assert graded["d_fine"] == {**graded["d_fine"], "problems": [], "correct": 1, "total": 1}
    assert graded["e_broken"]["problems"][0].startswith("could not read the notebook")
    # the printed table: one row per student, exercises in numbered columns with a legend
    header = next(line for line in printed.splitlines() if line.startswith("student "))
    assert header.split()[:5] == ["student", "notebook", "1", "2", "score"]
    table = printed[printed.index(header) :]
    assert "kernel died in cell 4" in table and "timed out in cell 4" in table
    assert "ch: 1 1.equal-scores" in table and "ch: 1 1.equal-scores   2 1.wider-variance" in table
    assert max(len(line) for line in table.splitlines()) <= TABLE_WIDTH


def test_a_misspelt_marker_stops_the_copy_instead_of_leaking_the_answer(tmp_path, capsys):
    for source in (
        "# BEGIN SOLUTION\nanswer = [1, 2]\n# END SOLUTON\ncheck('1.equal-scores', answer)",  # typo in END
        "#BEGIN SOLUTION\nanswer = [1, 2]\n#END SOLUTION\ncheck('1.equal-scores', answer)",  # no space
        "# BEGIN SOLUTION\nanswer = [1, 2]\ncheck('1.equal-scores', answer)",  # END forgotten
    ):
        try:
            strip_solutions(source)
        except ValueError as error:
            assert "line 1" in str(error) and "SOLUTION" in str(error)
        else:
            raise AssertionError(f"no error for {source!r}")
    # a cell tagged "solution" but without markers would be copied whole
    tagged = new_code_cell("answer = [1, 2]\ncheck('1.equal-scores', answer)", metadata={"tags": ["solution"]})
    bad = new_notebook(cells=[new_markdown_cell("q"), new_code_cell("x = 1"), tagged])
    (tmp_path / "src").mkdir()
    nbformat.write(bad, tmp_path / "src" / "02_bad.ipynb")
    chapter = CHAPTERS[0]
    nbformat.write(nbformat.read(chapter, as_version=4), tmp_path / "src" / chapter.name)
    assert student.main(["copy", str(tmp_path / "src"), str(tmp_path / "out")]) == 1
    printed = capsys.readouterr().out
    assert "02_bad.ipynb: no copy written: cell 3 " in printed
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [chapter.name]  # the good one is still written


def test_indented_or_unparsable_solutions_are_stripped_without_crashing():
    indented = "def f(x):\n    # BEGIN SOLUTION\n    y = 2 * x\n    return y\n    # END SOLUTION\ncheck('1.x', f)"
    assert strip_solutions(indented) == "def f(x):\n    y = ...  # your answer here\ncheck('1.x', f)"
    crlf = "# BEGIN SOLUTION\r\nanswer = [1, 2]\r\n# END SOLUTION\r\ncheck('1.x', answer)"
    assert strip_solutions(crlf) == "answer = ...  # your answer here\ncheck('1.x', answer)"
    broken = "# BEGIN SOLUTION\nanswer = [1,\n# END SOLUTION\ncheck('1.x', answer)"
    assert strip_solutions(broken) == "answer = ...  # your answer here\ncheck('1.x', answer)"


def test_grade_makes_the_folders_of_its_reports_before_grading(tmp_path, monkeypatch):
    # a missing --json/--csv folder used to lose the whole graded batch at the very end
    from _notebooks import CHAPTER_1

    linked = tmp_path / "class" / "h_link" / CHAPTER_1.name
    linked.parent.mkdir(parents=True)
    linked.symlink_to(CHAPTER_1)  # refused at once: no kernel starts, so the test is quick
    out = tmp_path / "not" / "yet"
    assert student.main(["grade", str(linked), "--json", str(out / "g.json"), "--csv", str(out / "g.csv")]) == 0
    rows = json.loads((out / "g.json").read_text())
    assert rows[0]["problems"] == ["not graded: the hand-in is a symbolic link, not a notebook of its own"]
    assert (out / "g.csv").exists()


CHAPTER_1 = next(c for c in CHAPTERS if c.name.startswith("01_"))


def _markdown(path) -> str:
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")


def test_a_copy_shows_the_book_numbers_or_a_students_own(tmp_path):
    book, _ = make_student_copy(CHAPTER_1, tmp_path / "book")
    ada, _ = make_student_copy(CHAPTER_1, tmp_path / "ada", variant="ada")
    assert "{{" not in _markdown(book) and "{{" not in _markdown(ada)
    assert not (tmp_path / "book" / variants.VARIANT_FILE).exists()
    assert (tmp_path / "ada" / variants.VARIANT_FILE).read_text().strip() == "ada"
    numbers = variants.substitutions("ada")
    defaults = variants.substitutions(None)
    chapter_keys = [k for k in numbers if k.startswith("ex_1_")]
    assert chapter_keys
    text = _markdown(ada)
    assert f"[{numbers['ex_1_new_values_a']}, 0] and $v_2$ = [0, {numbers['ex_1_new_values_b']}]" in text
    assert f"[{defaults['ex_1_new_values_a']}, 0] and $v_2$ = [0, {defaults['ex_1_new_values_b']}]" in _markdown(book)
    assert "myst" not in nbformat.read(ada, as_version=4).metadata  # the defaults are not left beside the numbers


def test_copy_roster_writes_each_student_a_folder_of_their_own(tmp_path, capsys):
    chapters = tmp_path / "chapters"
    chapters.mkdir()
    (chapters / CHAPTER_1.name).write_bytes(CHAPTER_1.read_bytes())
    roster = tmp_path / "class.csv"
    roster.write_text("email,student\na@x,ada\ng@x,grace\n")
    assert student.main(["copy", str(chapters), str(tmp_path / "out"), "--roster", str(roster)]) == 0
    for name in ("ada", "grace"):
        assert (tmp_path / "out" / name / variants.VARIANT_FILE).read_text().strip() == name
        assert (tmp_path / "out" / name / CHAPTER_1.name).exists()
    assert _markdown(tmp_path / "out" / "ada" / CHAPTER_1.name) != _markdown(
        tmp_path / "out" / "grace" / CHAPTER_1.name
    )
    roster.write_text("ada\n../evil\n")
    assert student.main(["copy", str(chapters), str(tmp_path / "x"), "--roster", str(roster)]) == 2
    assert "cannot be a folder name" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert student.main(["copy", str(chapters), str(tmp_path / "y"), "--variant", "ada"]) == 0
    assert (tmp_path / "y" / variants.VARIANT_FILE).exists()
