"""A Sphinx extension of the book's own: the book reads offline, and each page loads each script once.

Whatever command builds the book (``make book``, or the jupyter-book command written in
``book/_config.yml``, run alone), the build first puts in ``book/_static``:

* ``exercises.js``, the value exercises for the check-yourself boxes, written from
  ``lib.checks`` as ``python -m lib.checks --export-js`` does;
* ``playground-data.js``, the CPU times recorded in ``chapters/results/`` that the live
  complexity playground plots and notes (``lib.playgrounds.complexity.page_data``);
* ``mathjax/``, MathJax 2.7, copied from the ``jupyter-server-mathjax`` package when it is
  not there yet (``make mathjax`` does the same). Without that package the build stops and
  says so, rather than making a book whose formulas show as raw TeX.

sphinx-thebe and sphinx-togglebutton register their inline scripts on an event that
jupyter-book fires twice, so every page declared ``const THEBE_JS_URL`` twice, and the
second declaration is a JavaScript error in every reader's console. This drops repeated
entries (same file or same inline body, same attributes) from each page's script list,
keeping the first. The browser test (tests/test_browser.py) fails on any console error.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _key(script) -> tuple:
    attributes = getattr(script, "attributes", {}) or {}
    filename = getattr(script, "filename", script) or ""  # an inline script's is None or "", either way
    return (str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items())))


def _dedupe_in_place(scripts: list) -> None:
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique  # in place: Sphinx renders from this very list


def drop_repeated_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if isinstance(scripts, list):
        _dedupe_in_place(scripts)


def _static_dir(app) -> Path:
    return Path(app.srcdir) / app.config.html_static_path[0]


def write_exercises_js(app) -> None:
    if str(app.srcdir) not in sys.path:
        sys.path.insert(0, str(app.srcdir))  # the repository root, where the package ``lib`` lives
    try:
        from lib.checks import main as checks_main
    except ImportError as error:
        raise ExtensionError(f"the book needs the package lib (run from the repository root): {error}") from error
    path = _static_dir(app) / "exercises.js"
    checks_main(["--export-js", str(path)])
    logger.info(f"book_offline: wrote {path.relative_to(app.srcdir)} from lib.checks")


def write_playground_data_js(app) -> None:
    try:
        from lib.playgrounds.complexity import page_data
    except ImportError as error:
        raise ExtensionError(f"the book needs the package lib (run from the repository root): {error}") from error
    path = _static_dir(app) / "playground-data.js"
    path.write_text(f"window.BOOK_PLAYGROUND_DATA = {json.dumps(page_data())};\n", encoding="utf-8")
    logger.info(f"book_offline: wrote {path.relative_to(app.srcdir)} from chapters/results")


def copy_mathjax(app) -> None:
    target = _static_dir(app) / "mathjax"
    if (target / "MathJax.js").is_file():
        return
    try:
        import jupyter_server_mathjax
    except ImportError as error:
        raise ExtensionError(
            f"MathJax is missing: {target.relative_to(app.srcdir)}/MathJax.js is not there, and the package "
            "jupyter-server-mathjax that holds a copy is not installed (pip install -r requirements.txt); "
            "without it every formula would show as raw TeX"
        ) from error
    shutil.copytree(Path(jupyter_server_mathjax.__file__).parent / "static", target, dirs_exist_ok=True)
    logger.info(f"book_offline: copied MathJax into {target.relative_to(app.srcdir)}")


def put_assets_in_place(app) -> None:
    if app.builder.format == "html":
        write_exercises_js(app)  # puts the repository root on sys.path first
        write_playground_data_js(app)
        copy_mathjax(app)


def setup(app):
    app.connect("builder-inited", put_assets_in_place)
    # Late, after the extensions that add per-page scripts (the repeats are added then).
    app.connect("html-page-context", drop_repeated_scripts, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
