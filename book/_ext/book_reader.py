"""A Sphinx extension of the book's own: what a reader needs to run a chapter from its page.

* The download button (``.ipynb``) gives the learner's copy of the chapter, the one that
  ``make lab`` writes to ``student/`` (solutions stripped, outputs cleared,
  ``lib.student.student_notebook``), not the notebook with the reference solutions.
* Under each chapter's title, one line says how to run it: the clone and the one command.
* Setting ``repository.url`` in ``book/_config.yml`` names the repository in that line and
  turns on the repository and issue buttons (jupyter-book refuses the buttons without a
  URL, so ``_config.yml`` leaves them off and this turns them on when a URL is given).
* Every control is named by what it shows (WCAG 2.5.3, "label in name"; axe-core's rule
  label-content-name-mismatch): myst-nb names each folded cell's summary "Toggle hidden
  content" while it shows "Show the solution", so the label goes and the summary is named
  by its visible text; ``accessible-names.js`` does the same for the theme's search and
  colour-mode buttons, which exist only where scripts run.

tests/test_browser.py checks the line and the download on every chapter page, and runs
axe-core on every page.
"""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes

CHAPTERS = "chapters/"
NO_URL = "<the address of this book's repository>"


def repository_url(app) -> str:
    return (app.config.html_theme_options or {}).get("repository_url", "") or ""


def buttons_follow_the_url(app, config) -> None:
    options = config.html_theme_options
    if options.get("repository_url"):
        options["use_repository_button"] = True
        options["use_issues_button"] = True


def clone_command(url: str) -> str:
    folder = url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git") if url else "<its folder>"
    return f"git clone {url or NO_URL} && cd {folder}"


def run_line(app, docname: str) -> nodes.paragraph:
    notebook = Path(docname).name + ".ipynb"
    line = nodes.paragraph(classes=["run-this-chapter"])
    line += nodes.strong(text="Run this chapter: ")
    line += nodes.literal(text=clone_command(repository_url(app)))
    line += nodes.Text(", then ")
    line += nodes.literal(text="make lab")
    line += nodes.Text(f" opens your copy, student/{notebook}, in JupyterLab (the .ipynb download is that copy).")
    return line


def add_run_line(app, doctree, docname: str) -> None:
    if not docname.startswith(CHAPTERS):
        return
    for section in doctree.findall(nodes.section):
        title = section.next_node(nodes.title)
        if title is not None:
            section.insert(section.index(title) + 1, run_line(app, docname))
            return


def _import_student(srcdir: Path):
    if str(srcdir) not in sys.path:
        sys.path.insert(0, str(srcdir))  # the repository root, where the package ``lib`` lives
    import nbformat

    from lib.student import student_notebook

    return nbformat, student_notebook


def download_student_copies(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    srcdir = Path(app.srcdir)
    nbformat, student_notebook = _import_student(srcdir)
    for docname in app.env.found_docs:
        source = srcdir / f"{docname}.ipynb"
        if not docname.startswith(CHAPTERS) or not source.is_file():
            continue
        target = Path(app.outdir) / "_sources" / f"{docname}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student_notebook(nbformat.read(source, as_version=4)), target)


# myst-nb 1.x writes this for every folded (hide-input, hide-output, hide-cell) cell
FOLDED_CELL_SUMMARY = '<summary aria-label="Toggle hidden content">'


def name_summaries_by_their_text(app, pagename, templatename, context, doctree) -> None:
    if "body" in context:
        context["body"] = context["body"].replace(FOLDED_CELL_SUMMARY, "<summary>")


def setup(app):
    app.connect("config-inited", buttons_follow_the_url)
    app.connect("doctree-resolved", add_run_line)
    app.connect("build-finished", download_student_copies)
    app.connect("html-page-context", name_summaries_by_their_text)
    app.add_js_file("accessible-names.js")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
