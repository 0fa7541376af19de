"""The book's MyST roles in plain text, for a student's copy of a chapter (``lib.student``).

A copy is read in JupyterLab, which resolves none of the roles that Sphinx resolves for the
book's pages and would show them raw:

* a citation, ``{cite:t}`vaswani2017```, becomes "Vaswani et al. (2017)", as the page shows
  it (``book/_ext/book_citations.py``), linked to the references (``plain_citations``, from
  ``book/references.bib``);
* the references page, copied beside the copies, gets its ``{bibliography}`` lists written
  out as plain markdown lists from the same file (``plain_references``);
* a figure reference, ``{numref}`fig-04-norm-placement```, becomes "the figure below" or
  "the figure above", by where the cell that draws it is (``plain_figure_references``): a
  copy's figures appear when the learner runs the cell, with no caption and no number.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat

__all__ = ["read_bibliography", "plain_citations", "plain_references", "plain_figure_references", "plain_roles"]
__all__ += ["write_linked", "BIBLIOGRAPHY", "REFERENCES"]

# {cite:t}`key`, {cite:p}`a,b`, {cite:alp}`key`, {cite:author}`key`, {cite:t}`key{Figure 2}`
_CITE = re.compile(r"\{cite(?::(?P<role>[a-z]+))?\}`(?P<targets>[^`]+)`")
_TARGET = re.compile(r"\s*(?:\{(?P<pre>[^{}]+)\})?(?P<key>[^\s{},]+)(?:\{(?P<post>[^{}]+)\})?\s*")
_ENTRY = re.compile(r"@(?P<type>\w+)\s*\{\s*(?P<key>[^,\s]+)\s*,")
_FIELD = re.compile(r"\s*(?P<name>\w+)\s*=\s*")
# the bibliography lists of book/references.md: ```{bibliography} with a keywords filter
_BIBLIOGRAPHY = re.compile(r'^```\{bibliography\}[^\n]*\n:filter: keywords % "(?P<keyword>[^"]+)"\n```[ \t]*$', re.M)
BIBLIOGRAPHY = Path("..") / "book" / "references.bib"  # from the chapters' folder
REFERENCES = Path("..") / "book" / "references.md"


def _braced(text: str, start: int) -> tuple[str, int]:
    """The text of the brace group that opens at ``text[start]``, and the index after it."""
    depth = 0
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[start + 1 : index], index + 1
    raise ValueError(f"an unclosed brace from character {start}")


def read_bibliography(path: Path) -> dict[str, dict[str, str]]:
    r"""The entries of a BibTeX file as written in ``book/references.bib`` (every field braced):
    key -> fields, with ``type`` and the outer braces of a protected word (``{GQA}``) dropped.

    >>> import tempfile
    >>> bib = Path(tempfile.mkdtemp()) / "r.bib"
    >>> _ = bib.write_text("@misc{a2020,\n  author = {Ba, Jimmy and Kiros, Jamie},\n  title = {{GQA} heads},\n}\n")
    >>> read_bibliography(bib)["a2020"]["title"]
    'GQA heads'
    """
    text = Path(path).read_text(encoding="utf-8")
    entries: dict[str, dict[str, str]] = {}
    for entry in _ENTRY.finditer(text):
        fields = {"type": entry["type"].lower()}
        position = entry.end()
        while (field := _FIELD.match(text, position)) and text.startswith("{", field.end()):
            value, position = _braced(text, field.end())
            fields[field["name"].lower()] = " ".join(value.replace("{", "").replace("}", "").split())
            position = text.find(",", position) + 1 if text[position:].lstrip().startswith(",") else position
        entries[entry["key"]] = fields
    return entries


def _authors(entry: dict[str, str]) -> str:
    """The authors as the book's author-year citations name them: "Shazeer", "Loshchilov and
    Hutter", "Vaswani et al." (three or more)."""
    surnames = []
    for person in entry["author"].split(" and "):
        surname = person.split(",")[0] if "," in person else person.split()[-1]
        surnames.append(surname.strip())
    if len(surnames) >= 3:
        return f"{surnames[0]} et al."
    return " and ".join(surnames)


def plain_citations(markdown: str, entries: dict[str, dict[str, str]], link: str | None = None) -> str:
    """``markdown`` with each ``{cite}`` role written out as the book's pages show it ("Vaswani et
    al. (2017)", "(Dao et al., 2022, Theorem 2)"), a link to ``link`` (the references) when given.

    >>> entries = {"v": {"author": "Vaswani, A. and Shazeer, N. and Parmar, N.", "year": "2017"}}
    >>> plain_citations("as {cite:t}`v` show {cite:p}`v{section 3}`", entries)
    'as Vaswani et al. (2017) show (Vaswani et al., 2017, section 3)'
    >>> plain_citations("{cite:p}`v`", entries, link="references.md")
    '([Vaswani et al., 2017](references.md))'
    """

    def written(match: re.Match) -> str:
        role = match["role"] or "p"
        parts = []
        for target in match["targets"].split(","):
            found = _TARGET.fullmatch(target)
            key = found["key"] if found else target.strip()
            if key not in entries:
                raise ValueError(f"the citation {match[0]} names {key!r}, which the bibliography does not hold")
            entry = entries[key]
            authors, year = _authors(entry), entry["year"]
            post = f", {found['post']}" if found and found["post"] else ""
            pre = f"{found['pre']} " if found and found["pre"] else ""
            part = {
                "t": f"{authors} ({pre}{year}{post})",
                "author": authors,
                "year": f"{year}{post}",
                "yearpar": f"({year}{post})",
            }.get(role, f"{pre}{authors}, {year}{post}")
            parts.append(f"[{part}]({link})" if link else part)
        text = "; ".join(parts)
        return f"({text})" if role in ("p", "ps") else text

    return _CITE.sub(written, markdown)


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def plain_references(markdown: str, entries: dict[str, dict[str, str]]) -> str:
    """The references page with each ``{bibliography}`` list written out as a plain markdown list
    of the entries its keywords filter selects, in the order of the book's page (by author)."""

    def listed(match: re.Match) -> str:
        chosen = [entry for entry in entries.values() if match["keyword"] in entry.get("keywords", "")]
        lines = []
        for entry in sorted(chosen, key=lambda entry: (entry["author"].lower(), entry["year"])):
            venue = entry.get("booktitle") or entry.get("howpublished") or entry.get("journal")
            line = f"- **{_authors(entry)}, {entry['year']}.** *{_sentence(entry['title'])}*"
            line += f" {_sentence(venue)}" if venue else ""
            line += f" {_sentence(entry['note'])}" if entry.get("note") else ""
            lines.append(line)
        return "\n".join(lines)

    return _BIBLIOGRAPHY.sub(listed, markdown)


# {numref}`fig-04-norm-placement`, or with its own text: {numref}`Figure %s <fig-04-norm-placement>`
_NUMREF = re.compile(r"\{numref\}`(?:[^`<]*<)?(?P<name>[^`<>]+?)>?`")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n\s*\n|(?:^|\n)\s*[-*]\s+)$")  # text before a sentence's start


def plain_figure_references(notebook: nbformat.NotebookNode) -> None:
    """Write each ``{numref}`` to a figure of ``notebook`` (changed in place) as "the figure
    below" or "the figure above", by where the cell that draws it is: a copy's figures,
    drawn when the learner runs the cell, carry no caption and no number."""
    where = {}
    for index, cell in enumerate(notebook.cells):
        name = cell.metadata.get("mystnb", {}).get("figure", {}).get("name")
        if name:
            where[name] = index
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "markdown":
            continue

        def written(match: re.Match, index=index, source=cell.source) -> str:
            name = match["name"].strip()
            if name not in where:
                raise ValueError(f"{match[0]} names no figure of this notebook")
            text = "the figure " + ("below" if where[name] > index else "above")
            return text.capitalize() if _SENTENCE_START.search(source[: match.start()]) else text

        cell.source = _NUMREF.sub(written, cell.source)


def _bibliography_for(notebook_path: Path) -> Path:
    """``book/references.bib`` beside the chapters' folder, else beside this library (a clone)."""
    for path in (Path(notebook_path).parent / BIBLIOGRAPHY, Path(__file__).parents[1] / "book" / "references.bib"):
        if path.is_file():
            return path
    raise ValueError(f"its citations need the book's bibliography, {BIBLIOGRAPHY}, which is not there")


def plain_roles(notebook: nbformat.NotebookNode, notebook_path: Path) -> nbformat.NotebookNode:
    """``notebook`` (changed in place) with its citations and figure references in plain text."""
    plain_figure_references(notebook)
    cells = [cell for cell in notebook.cells if cell.cell_type == "markdown" and _CITE.search(cell.source)]
    if cells:
        entries = read_bibliography(_bibliography_for(notebook_path))
        for cell in cells:
            cell.source = plain_citations(cell.source, entries, link=REFERENCES.as_posix())
    return notebook


def write_linked(source: Path, target: Path) -> None:
    """Copy a file a chapter links to beside the copies; a markdown page with a bibliography
    beside it (``references.md`` and ``references.bib``) gets its lists written out."""
    bibliography = source.with_suffix(".bib")
    if source.suffix == ".md" and bibliography.is_file():
        text = plain_references(source.read_text(encoding="utf-8"), read_bibliography(bibliography))
        target.write_text(text, encoding="utf-8")
    else:
        shutil.copyfile(source, target)
