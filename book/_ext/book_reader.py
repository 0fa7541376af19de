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

tests/test_browser.py checks the line and the download on every chapter page;
tests/test_book_reader.py the zip and the buttons a URL turns on.
"""

from __future__ import annotations

import sys
import tempfile
import zipfile
from pathlib import Path

from docutils import nodes

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


def setup(app):
    app.add_config_value("book_launch_buttons", LAUNCH_BUTTONS, "html")
    app.connect("config-inited", buttons_follow_the_url)
    app.connect("builder-inited", make_student_zip)
    app.connect("doctree-resolved", add_run_line)
    app.connect("build-finished", download_student_copies)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
