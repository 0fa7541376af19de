"""book/_ext/book_reader.py: the zip of every student notebook, the "Run this chapter" line, and the
repository, issue and launch buttons (Binder, Colab) that repository.url turns on, all without a network."""

import re
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import yaml

from lib.student import make_student_copy

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import book_reader  # noqa: E402  (a Sphinx extension, loaded from book/_ext as _config.yml loads it)

URL = "https://github.com/example-owner/attention-book"


def test_the_zip_holds_every_chapters_student_copy_and_the_references(tmp_path):
    names = book_reader.write_student_zip(ROOT, tmp_path / "student-notebooks.zip")
    notebooks = sorted((ROOT / "chapters").glob("*.ipynb"))
    assert names == sorted([f"student/{path.name}" for path in notebooks] + ["student/references.md"])
    copies = tmp_path / "copies"
    for notebook in notebooks:
        make_student_copy(notebook, copies)
    with zipfile.ZipFile(tmp_path / "student-notebooks.zip") as archive:
        assert archive.testzip() is None
        for name in names:  # byte for byte what `make lab` writes into student/
            assert archive.read(name) == (copies / Path(name).name).read_bytes(), name
        for notebook in notebooks:
            copy = nbformat.reads(archive.read(f"student/{notebook.name}").decode(), as_version=4)
            assert not any(cell.get("outputs") for cell in copy.cells)
            assert "# BEGIN SOLUTION" not in archive.read(f"student/{notebook.name}").decode()


def _config(url: str) -> SimpleNamespace:
    options = {"repository_url": url, "use_repository_button": False, "use_issues_button": False}
    return SimpleNamespace(html_theme_options=options, book_launch_buttons=dict(book_reader.LAUNCH_BUTTONS))


def test_a_repository_url_turns_the_repository_and_launch_buttons_on():
    config = _config(URL)
    book_reader.buttons_follow_the_url(None, config)
    options = config.html_theme_options
    assert options["use_repository_button"] and options["use_issues_button"]
    assert options["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert options["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    empty = _config("")
    book_reader.buttons_follow_the_url(None, empty)
    assert empty.html_theme_options["launch_buttons"] == {}
    assert not empty.html_theme_options["use_repository_button"]


def test_the_books_own_config_leaves_every_button_to_the_url():
    """jupyter-book refuses the buttons without a URL: _config.yml keeps them off and book_reader
    turns them on from repository.url, so setting the URL alone (README) is enough."""
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert "url" in config["repository"]
    assert not config["html"]["use_repository_button"] and not config["html"]["use_issues_button"]
    assert "launch_buttons" not in config


def test_clone_command_names_the_folder_or_says_what_is_missing():
    assert book_reader.clone_command(URL + ".git") == f"git clone {URL}.git && cd attention-book"
    assert book_reader.clone_command("") == "git clone <the address of this book's repository> && cd <its folder>"


def _tiny_book(source: Path, url: str) -> None:
    (source / "chapters").mkdir()
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# A chapter\n\nText."),
            nbformat.v4.new_code_cell(book_reader.install_source(url), id=book_reader.INSTALL_CELL_ID),
            nbformat.v4.new_code_cell("x = 1"),
        ]
    )
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, source / "chapters" / "01_a.ipynb")
    (source / "book").mkdir()  # the root document in a folder, as the book's own (book/intro)
    (source / "book" / "intro.md").write_text(
        "# Intro\n\nSee {doc}`/chapters/01_a`.\n\n```{toctree}\n/chapters/01_a\n```\n"
    )
    (source / "conf.py").write_text(
        "root_doc = 'book/intro'\n"
        f"import sys\nsys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        "extensions = ['myst_nb', 'book_reader']\nhtml_theme = 'sphinx_book_theme'\n"
        "nb_execution_mode = 'off'\n"
        f"html_theme_options = {{'repository_url': {url!r}, 'repository_branch': 'main', 'path_to_docs': ''}}\n"
    )


def _build(source: Path, out: Path, builder: str) -> None:
    from sphinx.application import Sphinx

    app = Sphinx(source, source, out, out / ".doctrees", builder, status=None, warning=None, freshenv=True)
    app.build()
    assert app.statuscode == 0


def test_make_book_print_builds_the_whole_book_as_one_page(tmp_path):
    """`make book-print` is `make book`'s command with the singlehtml builder (warnings are errors
    there too); the book's extension builds under it, writing the zip the introduction links."""
    recipe = re.search(r"^book-print:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "jupyter-book build . $(JB_FLAGS) --builder singlehtml" in recipe
    assert "-W" in re.search(r"^JB_FLAGS := (.*)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    source = tmp_path / "book"
    source.mkdir()
    _tiny_book(source, "")
    _build(source, tmp_path / "single", "singlehtml")
    # the one page at the root, where its style sheets, images and links are resolved from
    page = (tmp_path / "single" / "index.html").read_text()
    assert "A chapter" in page and "Text." in page  # the chapter is on the one page
    assert not (tmp_path / "single" / "book" / "intro.html").exists()
    assert 'href="_static/' in page and "book/intro.html" not in page
    assert (source / "book" / "_static" / "student-notebooks.zip").is_file()
    assert (ROOT / "book" / "_static" / "print.css").is_file()
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert "print.css" in config["sphinx"]["config"]["html_css_files"]


@pytest.fixture(scope="module")
def built_with_a_url(tmp_path_factory):
    """A one-chapter book built by Sphinx with the book's theme, MyST-NB and book_reader, and a
    repository URL: no network is used (the launch links are only written, never followed)."""
    source = tmp_path_factory.mktemp("book")
    _tiny_book(source, URL)
    out = tmp_path_factory.mktemp("html")
    _build(source, out, "html")
    return source, out


def test_a_build_with_a_url_shows_binder_and_colab_and_the_clone(built_with_a_url):
    source, out = built_with_a_url
    page = (out / "chapters" / "01_a.html").read_text()
    binder = re.findall(r'href="(https://mybinder\.org/[^"]+)"', page)
    colab = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', page)
    assert binder == [
        "https://mybinder.org/v2/gh/example-owner/attention-book/main?urlpath=lab/tree/chapters/01_a.ipynb"
    ]
    assert colab == [
        "https://colab.research.google.com/github/example-owner/attention-book/blob/main/chapters/01_a.ipynb"
    ]
    line = re.sub(r"<[^>]+>", "", re.search(r'<p class="run-this-chapter">(.*?)</p>', page, re.S).group(1))
    assert f"git clone {URL} &amp;&amp; cd attention-book" in line and "does not name its repository" not in line
    with zipfile.ZipFile(source / "book" / "_static" / "student-notebooks.zip") as archive:
        assert archive.namelist() == ["student/01_a.ipynb"]
        assert (out / "_sources" / "chapters" / "01_a.ipynb").read_bytes() == archive.read("student/01_a.ipynb")


def test_every_notebook_installs_lib_from_the_repository_the_config_names():
    """On Colab a chapter is a notebook alone: its first code cell clones the repository that
    _config.yml names and installs lib from it; in a clone it does nothing (nbval runs it)."""
    url = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())["repository"]["url"]
    cells = book_reader.install_cells(ROOT)
    assert cells and all(source == book_reader.install_source(url) for source in cells.values()), cells
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        first_code = next(cell for cell in notebook.cells if cell.cell_type == "code")
        assert first_code.id == book_reader.INSTALL_CELL_ID and "remove-cell" in first_code.metadata.tags


def _clone(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "book").mkdir(parents=True)
    (root / "book" / "_config.yml").write_text((ROOT / "book" / "_config.yml").read_text())
    (root / "chapters").mkdir()
    for path in sorted((ROOT / "chapters").glob("0[12]_*.ipynb")):
        (root / "chapters" / path.name).write_bytes(path.read_bytes())
    return root


def test_setting_the_repository_writes_the_config_and_every_install_cell(tmp_path):
    root = _clone(tmp_path)
    before = {path.name: nbformat.read(path, as_version=4) for path in (root / "chapters").glob("*.ipynb")}
    book_reader.set_repository(root, URL)
    config = yaml.safe_load((root / "book" / "_config.yml").read_text())
    stored = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert config["repository"]["url"] == URL
    config["repository"]["url"] = stored["repository"]["url"]
    assert config == stored  # nothing else in the file changed
    for name, source in book_reader.install_cells(root).items():
        assert f'REPOSITORY = "{URL}"' in source and source == book_reader.install_source(URL), name
        after = nbformat.read(root / "chapters" / name, as_version=4)
        unchanged = [c for c in after.cells if c.get("id") != book_reader.INSTALL_CELL_ID]
        assert unchanged == [c for c in before[name].cells if c.get("id") != book_reader.INSTALL_CELL_ID]
    book_reader.set_repository(root, stored["repository"]["url"])  # and back: byte for byte the book's files
    assert (root / "book" / "_config.yml").read_bytes() == (ROOT / "book" / "_config.yml").read_bytes()
    for path in (root / "chapters").glob("*.ipynb"):
        assert path.read_bytes() == (ROOT / "chapters" / path.name).read_bytes()


def test_a_build_stops_when_the_install_cells_name_another_repository(tmp_path):
    root = _clone(tmp_path)
    app = SimpleNamespace(srcdir=str(root))
    stored = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())["repository"]["url"]
    book_reader.check_install_cells(app, _config(stored))  # as stored: the cells name the config's URL
    other = URL if stored != URL else URL + "-fork"
    with pytest.raises(Exception, match=f"--repository {re.escape(other)}"):
        book_reader.check_install_cells(app, _config(other))  # _config.yml edited by hand, the cells not
