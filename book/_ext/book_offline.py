"""A Sphinx extension of the book's own: each page loads each script once.

sphinx-thebe and sphinx-togglebutton register their inline scripts on an event that
jupyter-book fires twice, so every page declared ``const THEBE_JS_URL`` twice, and the
second declaration is a JavaScript error in every reader's console. This drops repeated
entries (same file or same inline body, same attributes) from each page's script list,
keeping the first. The browser test (tests/test_browser.py) fails on any console error.
"""

from __future__ import annotations


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


def setup(app):
    # Late, after the extensions that add per-page scripts (the repeats are added then).
    app.connect("html-page-context", drop_repeated_scripts, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
