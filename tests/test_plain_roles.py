"""A student's copy of a chapter, read in JupyterLab, shows the book's citations and figure
references in plain text (lib.plain_roles): no `{cite:t}`key`` or `{numref}`fig-...`` left raw."""

import re
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from lib import plain_roles
from lib.student import make_student_copy

ROOT = Path(__file__).parent.parent
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
CHAPTERS = [path for path in NOTEBOOKS if path.name[:2].isdigit()]
CHAPTER_1 = next(c for c in CHAPTERS if c.name.startswith("01_"))


def _markdown(path) -> str:
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")


BOOK = ROOT / "book"


def test_a_copy_names_every_source_in_plain_text_linked_to_the_references(tmp_path):
    """JupyterLab does not resolve the book's {cite} roles and would show `{cite:t}`vaswani2017``
    raw: a copy names the source as the book's page does, "Vaswani et al. (2017)", linked to the
    references page beside it, which lists every cited source in plain markdown."""
    entries = plain_roles.read_bibliography(BOOK / "references.bib")
    cited = set()
    for notebook in NOTEBOOKS:
        source = _markdown(notebook)
        cited |= {key for roles in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", source) for key in roles.split(",")}
        text = _markdown(make_student_copy(notebook, tmp_path)[0])
        assert "{cite" not in text and "{numref}" not in text, notebook.name
    cited = {re.sub(r"\{[^}]*\}", "", key).strip() for key in cited}
    assert cited and cited <= set(entries)  # every citation names an entry of the bibliography
    assert set(entries) <= cited  # and the bibliography holds nothing the chapters do not cite
    chapter_1 = _markdown(tmp_path / CHAPTER_1.name)
    assert "*Source: [Vaswani et al. (2017)](references.md), section 3.2.1" in chapter_1
    chapter_5 = _markdown(tmp_path / next(c.name for c in CHAPTERS if c.name.startswith("05_")))
    assert "FlashAttention ([Dao et al., 2022](references.md); [Dao, 2023](references.md)) runs" in chapter_5
    assert "IO count ([Dao et al., 2022, Theorem 2](references.md)) is" in chapter_5
    references = (tmp_path / "references.md").read_text()
    assert "```" not in references and references.count("\n- **") == len(entries)
    assert "- **Vaswani et al., 2017.** *Attention Is All You Need.* Advances in Neural" in references
    assert "- **Loshchilov and Hutter, 2019.** *Decoupled Weight Decay Regularization.*" in references


def test_plain_citations_write_each_role_as_the_book_does():
    entries = {
        "s": {"author": "Shazeer, Noam", "year": "2019"},
        "lh": {"author": "Loshchilov, Ilya and Hutter, Frank", "year": "2017"},
        "v": {"author": "Vaswani, A. and Shazeer, N. and Parmar, N.", "year": "2017"},
    }
    textual = plain_roles.plain_citations("{cite:t}`s` and {cite:t}`lh`", entries)
    assert textual == "Shazeer (2019) and Loshchilov and Hutter (2017)"
    assert plain_roles.plain_citations("(MQA; {cite:alp}`s`)", entries) == "(MQA; Shazeer, 2019)"
    assert plain_roles.plain_citations("as {cite:author}`v` find", entries) == "as Vaswani et al. find"
    assert plain_roles.plain_citations("{cite:p}`v,s`", entries) == "(Vaswani et al., 2017; Shazeer, 2019)"
    assert plain_roles.plain_citations("{cite:t}`v{Figure 2}`", entries) == "Vaswani et al. (2017, Figure 2)"
    try:
        plain_roles.plain_citations("{cite:t}`nobody2020`", entries)
    except ValueError as error:
        assert "nobody2020" in str(error)
    else:
        raise AssertionError("a citation of a key the bibliography lacks was written out")


def _figure_cell(name: str):
    return new_code_cell("plot()", metadata={"mystnb": {"figure": {"name": name, "caption": "c"}}})


def test_a_figure_reference_names_the_figure_by_where_its_cell_is():
    notebook = new_notebook(
        cells=[
            new_markdown_cell("{numref}`fig-a` shows it; see {numref}`Figure %s <fig-b>` too."),
            _figure_cell("fig-a"),
            new_markdown_cell("As in {numref}`fig-a`:\n\n- {numref}`fig-a` again"),
            _figure_cell("fig-b"),
        ]
    )
    plain_roles.plain_figure_references(notebook)
    assert notebook.cells[0].source == "The figure below shows it; see the figure below too."
    assert notebook.cells[2].source == "As in the figure above:\n\n- The figure above again"
    notebook.cells[0].source = "{numref}`fig-nowhere`"
    try:
        plain_roles.plain_figure_references(notebook)
    except ValueError as error:
        assert "fig-nowhere" in str(error)
    else:
        raise AssertionError("a reference to a figure the notebook does not draw was written out")


def test_the_chapters_figure_references_read_well_in_a_copy(tmp_path):
    """The book's pages number the figures ("Fig. 9"); a copy's figures carry no number."""
    numbered = 0
    for chapter in CHAPTERS:
        numbered += _markdown(chapter).count("{numref}`")
        make_student_copy(chapter, tmp_path)
    assert numbered >= 10
    copies = {path.name[:2]: _markdown(path) for path in tmp_path.glob("*.ipynb")}
    assert "and is not in the figure above." in copies["04"]
    assert "The figure below shows the cut," in copies["08"]
    assert "The numbers below and the figure below are the default state" in copies["01"]


def test_a_copy_names_each_source_as_the_books_pages_label_it():
    """The references page labels an entry "[Vaswani et al., 2017]" (book/_ext/book_citations.py,
    from pybtex's reading of the file); a copy's citation must read the same for every entry."""
    import sys

    from pybtex.database import parse_file

    sys.path.insert(0, str(BOOK / "_ext"))
    import book_citations

    entries = plain_roles.read_bibliography(BOOK / "references.bib")
    parsed = parse_file(str(BOOK / "references.bib"))
    assert set(parsed.entries) == set(entries)
    for key, entry in parsed.entries.items():
        assert plain_roles.plain_citations(f"{{cite:alp}}`{key}`", entries) == book_citations.author_year_label(entry)
