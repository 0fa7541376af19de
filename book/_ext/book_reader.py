"""A Sphinx extension of the book's own: what a reader needs to run a chapter from its page.

* The student notebooks, the copies that ``make lab`` writes to ``student/`` (solutions
  stripped, outputs cleared, citations and figure references in plain text:
  ``lib.student.make_student_copy``), are made once per build: each chapter's download button
  (``.ipynb``) gives that chapter's copy, not the notebook with the reference solutions, and
  ``book/_static/student-notebooks.zip`` holds them all with the references page beside
  them, as ``student/`` in a clone holds them (the introduction links it).
* Under each chapter's title, one line says how to run it: the clone and the one command.
  Without a repository address it says where the clone comes from instead.
* Setting ``repository.url`` in ``book/_config.yml`` names the repository in that line and
  turns on the repository and issue buttons and the launch buttons (Binder and Colab, from
  ``book_launch_buttons``): jupyter-book refuses the buttons without a URL, so
  ``_config.yml`` leaves them off and this turns them on when a URL is given.
* Every control is named by what it shows (WCAG 2.5.3, "label in name"; axe-core's rule
  label-content-name-mismatch): myst-nb names each folded cell's summary "Toggle hidden
  content" while it shows "Show the solution", so the label goes and the summary is named
  by its visible text; ``accessible-names.js`` does the same for the theme's search and
  colour-mode buttons, which exist only where scripts run.
* Each notebook's first code cell (id ``install-lib``, hidden on the page) installs the book's
  library where Python cannot import it, on Colab or Binder, from the repository it names:
  ``python book/_ext/book_reader.py --repository URL`` writes the URL there and into
  ``_config.yml``, and a build whose cells name another repository than ``_config.yml`` stops.

tests/test_browser.py checks the line and the download on every chapter page, and runs
axe-core on every page; tests/test_book_reader.py the zip, the buttons a URL turns on and the
install cells.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import zipfile
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError

CHAPTERS = "chapters/"
NO_URL = "<the address of this book's repository>"
ZIP = Path("book") / "_static" / "student-notebooks.zip"  # from the repository root (the source folder)
ZIP_FOLDER = "student"  # unzipped in a clone, the copies land where `make lab` keeps them
INTRO, DOWNLOAD_SECTION = "book/intro", "download-the-student-notebooks"
# Binder and Colab, shown only once repository.url is set (book/_config.yml, sphinx.config)
LAUNCH_BUTTONS = {
    "binderhub_url": "https://mybinder.org",
    "colab_url": "https://colab.research.google.com",
    "notebook_interface": "jupyterlab",
}


# The first code cell of every notebook: on Colab (a notebook alone) it clones the repository and
# installs lib from it; on Binder (a clone without lib installed) it installs lib from the clone.
INSTALL_CELL_ID = "install-lib"
INSTALL_SOURCE = """\
# On Colab or Binder: install the book's library, lib, when Python cannot
# import it. In a clone, `make lab` installed it and this cell does nothing.
import importlib.util
import os
import subprocess
import sys

REPOSITORY = {url}  # the book's repository.url (book/_config.yml)
if importlib.util.find_spec("lib") is None:
    if not os.path.isfile("../lib/checks.py"):  # not in a clone: fetch it
        if not REPOSITORY:
            raise RuntimeError(
                "this notebook needs the book's library, lib: open it in a "
                "clone of the book's repository (its chapters/ folder)"
            )
        clone = ["git", "clone", "--depth=1", REPOSITORY, "book"]
        subprocess.run(clone, check=True)
        os.chdir("book/chapters")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "-e", ".."]
    subprocess.run(pip, check=True)
    sys.path.insert(0, os.path.abspath(".."))"""
_CONFIG_URL = re.compile(r'(^repository:\n(?:[ \t]+.*\n|\s*#.*\n)*?[ \t]+url:[ \t]*)("[^"\n]*"|\S*)', re.M)


def install_source(url: str) -> str:
    return INSTALL_SOURCE.format(url=json.dumps(url))


def install_cells(root: Path) -> dict[str, str]:
    """Each notebook of ``root/chapters`` -> the source of its install cell ("" when it has none)."""
    found = {}
    for path in sorted((Path(root) / CHAPTERS).glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found[path.name] = next(("".join(c["source"]) for c in cells if c.get("id") == INSTALL_CELL_ID), "")
    return found


def check_install_cells(app, config) -> None:
    """The install cells must name the repository that _config.yml names, or Colab installs another's lib."""
    url = config.html_theme_options.get("repository_url", "") or ""
    wrong = [name for name, source in install_cells(Path(app.srcdir)).items() if source != install_source(url)]
    if wrong:
        raise ExtensionError(
            f"the install cell (id {INSTALL_CELL_ID!r}) of {', '.join(wrong)} does not name repository.url "
            f"({url!r}): run python book/_ext/book_reader.py --repository {url or 'URL'}"
        )


def set_repository(root: Path, url: str) -> None:
    """Write ``url`` as ``repository.url`` in ``root/book/_config.yml`` and into every notebook's
    install cell (added as the first code cell where a notebook has none)."""
    config = Path(root) / "book" / "_config.yml"
    text, count = _CONFIG_URL.subn(lambda m: m.group(1) + json.dumps(url), config.read_text(encoding="utf-8"))
    if count != 1:
        raise SystemExit(f"{config}: no repository.url setting found to write")
    config.write_text(text, encoding="utf-8")
    for path in sorted((Path(root) / CHAPTERS).glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = notebook["cells"]
        cell = next((c for c in cells if c.get("id") == INSTALL_CELL_ID), None)
        if cell is None:
            cell = {"cell_type": "code", "execution_count": None, "id": INSTALL_CELL_ID}
            cell |= {"metadata": {"tags": ["remove-cell"]}, "outputs": [], "source": []}
            first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
            cells.insert(first_code, cell)
        cell["source"] = install_source(url).splitlines(keepends=True)
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def repository_url(app) -> str:
    return (app.config.html_theme_options or {}).get("repository_url", "") or ""


def buttons_follow_the_url(app, config) -> None:
    options = config.html_theme_options
    if options.get("repository_url"):
        options["use_repository_button"] = True
        options["use_issues_button"] = True
        options["launch_buttons"] = dict(config.book_launch_buttons)
    else:
        options["launch_buttons"] = {}


def clone_command(url: str) -> str:
    folder = url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git") if url else "<its folder>"
    return f"git clone {url or NO_URL} && cd {folder}"


def run_line(app, docname: str) -> nodes.paragraph:
    notebook = Path(docname).name + ".ipynb"
    url = repository_url(app)
    line = nodes.paragraph(classes=["run-this-chapter"])
    line += nodes.strong(text="Run this chapter: ")
    line += nodes.literal(text=clone_command(url))
    line += nodes.Text(", then ")
    line += nodes.literal(text="make lab")
    line += nodes.Text(f" opens your copy, student/{notebook}, in JupyterLab (the .ipynb download is that copy).")
    if not url:
        line += nodes.Text(
            " This build of the book does not name its repository: clone it from wherever you got this "
            "book; a folder that holds the book's Makefile is a clone already. Your copies of all the "
            "chapters are also "
        )
        page = app.builder.get_relative_uri(docname, INTRO).split("#")[0]  # one page: "#document-..."
        line += nodes.reference("", "one download", internal=True, refuri=f"{page}#{DOWNLOAD_SECTION}")
        line += nodes.Text(", to unzip in that folder.")
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
    from lib.student import make_student_copy

    return make_student_copy


def write_student_zip(srcdir: Path, path: Path) -> list[str]:
    """Zip the student copy of every notebook in ``srcdir/chapters`` (and the files they link
    to, the references page) into ``path``, under ``student/``; the names written, in order."""
    make_student_copy = _import_student(Path(srcdir))
    with tempfile.TemporaryDirectory() as folder:
        for notebook in sorted((Path(srcdir) / CHAPTERS).glob("*.ipynb")):
            make_student_copy(notebook, Path(folder))
        files = sorted(p for p in Path(folder).iterdir() if p.is_file())
        path.parent.mkdir(parents=True, exist_ok=True)
        names = []
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for file in files:
                info = zipfile.ZipInfo(f"{ZIP_FOLDER}/{file.name}", date_time=(2026, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, file.read_bytes())
                names.append(info.filename)
    return names


def make_student_zip(app) -> None:
    """Before the pages are read: the introduction's {download} link needs the file."""
    if app.builder.format == "html":
        write_student_zip(Path(app.srcdir), Path(app.srcdir) / ZIP)


def download_student_copies(app, exception) -> None:
    """Each chapter page's download button gives that chapter's copy, the zip's own file."""
    if exception is not None or app.builder.format != "html":
        return
    with zipfile.ZipFile(Path(app.srcdir) / ZIP) as archive:
        for docname in app.env.found_docs:
            name = f"{ZIP_FOLDER}/{Path(docname).name}.ipynb"
            if not docname.startswith(CHAPTERS) or name not in archive.namelist():
                continue
            target = Path(app.outdir) / "_sources" / f"{docname}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(name))


def one_page_at_the_root(app, exception) -> None:
    """``make book-print``: Sphinx's singlehtml builder writes the one page where the root
    document lives, ``book/intro.html``, but with every link, style sheet and image relative to
    the build's root (``_static/...``, ``book/intro.html#id100``), so there it shows unstyled and
    without its figures. Move it to ``index.html``, at the root, its own links made anchors."""
    if exception is not None or app.builder.name != "singlehtml":
        return
    page_name = app.config.root_doc + app.builder.out_suffix
    written = Path(app.outdir) / page_name
    if "/" not in app.config.root_doc or not written.is_file():
        return
    html = written.read_text(encoding="utf-8").replace(f'href="{page_name}#', 'href="#')
    (Path(app.outdir) / "index.html").write_text(html.replace(f'href="{page_name}"', 'href="#"'), encoding="utf-8")
    written.unlink()


# myst-nb 1.x writes this for every folded (hide-input, hide-output, hide-cell) cell
FOLDED_CELL_SUMMARY = '<summary aria-label="Toggle hidden content">'


# docutils writes a bibliography as role="list" whose entries are role="doc-biblioentry", a role
# ARIA 1.2 deprecates: a list without list items is a critical fault to axe-core. Each entry is
# a list item.
def name_summaries_by_their_text(app, pagename, templatename, context, doctree) -> None:
    """Folded cells' summaries named by their text; bibliography entries as list items."""
    if "body" in context:
        body = context["body"].replace(FOLDED_CELL_SUMMARY, "<summary>")
        context["body"] = re.sub(r'(class="citation" id="[^"]*") role="doc-biblioentry"', r'\1 role="listitem"', body)


def setup(app):
    app.add_config_value("book_launch_buttons", LAUNCH_BUTTONS, "html")
    app.connect("config-inited", buttons_follow_the_url)
    app.connect("config-inited", check_install_cells)
    app.connect("builder-inited", make_student_zip)
    app.connect("doctree-resolved", add_run_line)
    app.connect("build-finished", download_student_copies)
    app.connect("html-page-context", name_summaries_by_their_text)
    app.add_js_file("accessible-names.js")
    app.connect("build-finished", one_page_at_the_root, priority=100)  # before etoc writes a redirect there
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python book/_ext/book_reader.py",
        description="Name the book's repository: repository.url in book/_config.yml and the notebooks' install cells.",
    )
    parser.add_argument("--repository", required=True, metavar="URL", help='e.g. https://github.com/OWNER/REPO, or ""')
    set_repository(Path(__file__).resolve().parents[2], parser.parse_args().repository)
