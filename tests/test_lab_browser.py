"""A learner's student copy as JupyterLab shows it: MyST admonitions render as boxes.

``make lab`` opens the student copies in JupyterLab, whose own markdown renderer knows
nothing of MyST: without ``jupyterlab-myst`` every ``{warning}`` or ``{admonition}`` block
shows as a grey code block with its fence, and every ``{ref}`` role as raw text. This test
makes the student copies (``python -m lib.student copy chapters <tmp>``), starts a headless
JupyterLab on a free local port, opens chapter 1 in headless Chromium (selenium) and checks:

* every admonition the notebook's markdown declares renders as a box (an ``aside``) whose
  title is the one declared (the directive's name, "Warning", or the admonition's own title);
* no rendered markdown shows a raw fence (```), a raw ``{ref}``, ``{cite}`` or ``{numref}`` role or a
  ``(label)=`` target (a copy writes citations and figure references out: ``lib.plain_roles``);
* once its kernel is up, the notebook is not marked modified (a copy stores the kernel's metadata).

Outside CI (the environment variable CI unset) it skips, in one line, when Chromium,
chromedriver or jupyterlab-myst is missing; in CI those are failures.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from _chromium import start_chromium, unavailable

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "01_one_attention_read.ipynb"  # a {warning}, two {admonition}s, a {ref} and a (label)= target
DIRECTIVE = re.compile(r"^(`{3,}|:{3,})\{(\w+)\}[ \t]*(.*)$", re.MULTILINE)
ADMONITIONS = {"admonition", "attention", "caution", "danger", "error", "hint", "important", "note", "tip", "warning"}


def declared_admonitions(notebook: Path) -> list[str]:
    """The title each admonition in the notebook's markdown should show, in order."""
    titles = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "markdown":
            continue
        for _, name, argument in DIRECTIVE.findall(cell.source):
            if name in ADMONITIONS:
                titles.append(argument.strip() if name == "admonition" else name.capitalize())
    return titles


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A headless JupyterLab serving fresh student copies; yields (url of chapter 1, its copy)."""
    if subprocess.run([sys.executable, "-c", "import jupyterlab_myst"], capture_output=True).returncode:
        unavailable("jupyterlab-myst is not installed: pip install -r requirements.txt")
    home = tmp_path_factory.mktemp("lab")
    copies = home / "copies"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "lib.student", "copy", str(ROOT / "chapters"), str(copies)],
        check=True,
        capture_output=True,
        cwd=ROOT,
        env=env,
    )
    # Render every cell, not only those scrolled into view, and start from no saved workspace.
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    env |= {"JUPYTERLAB_SETTINGS_DIR": str(home / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(home / "ws")}
    port = _free_port()
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1"]
    command += ["--ServerApp.token=", "--ServerApp.password=", "--allow-root", f"--ServerApp.root_dir={copies}"]
    log = (home / "lab.log").open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not start: {(home / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}", copies / NOTEBOOK
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def driver():
    browser = start_chromium((1280, 900), extra_flags=(), page_load_timeout=120)
    yield browser
    browser.quit()


READ_PAGE = """
// What each markdown cell shows rendered: the input area's widget beside the prompt and the
// (hidden) editor, whichever renderer made it (JupyterLab's .jp-RenderedMarkdown, MyST's .myst).
const cells = [...document.querySelectorAll(
  '.jp-MarkdownCell .jp-InputArea > .lm-Widget:not(.jp-InputPrompt):not(.jp-InputArea-editor):not(.jp-Toolbar)')];
return {
  cells: cells.length,
  boxes: cells.flatMap((cell) => [...cell.querySelectorAll('aside')]).map((box) => {
    const header = box.querySelector('[class*=admonition-header]');
    return { title: header ? header.innerText.trim() : null, body: box.innerText.length };
  }),
  texts: cells.map((cell) => cell.innerText),
};
"""


def test_student_copy_renders_myst_admonitions_in_jupyterlab(lab, driver):
    url, notebook = lab
    titles = declared_admonitions(notebook)
    assert len(titles) >= 2, titles  # the copy still holds the book's boxes
    n_markdown = sum(cell.cell_type == "markdown" for cell in nbformat.read(notebook, as_version=4).cells)
    driver.get(url)
    deadline = time.monotonic() + 120
    page = driver.execute_script(READ_PAGE)
    while time.monotonic() < deadline and (page["cells"] < n_markdown or len(page["boxes"]) < len(titles)):
        time.sleep(1)
        page = driver.execute_script(READ_PAGE)
    assert page["cells"] == n_markdown, f"{page['cells']} of {n_markdown} markdown cells rendered"
    assert [box["title"] for box in page["boxes"]] == titles, page["boxes"]
    assert all(box["body"] > len(box["title"]) for box in page["boxes"])  # a title and a body, not an empty box
    for text in page["texts"]:
        assert "```" not in text, text[:300]
        assert "{ref}" not in text and "{warning}" not in text and "{admonition}" not in text, text[:300]
        # citations and figure references, which JupyterLab cannot resolve, are plain text (lib.plain_roles)
        assert "{cite" not in text and "{numref}" not in text, text[:300]
        assert not re.search(r"^\([\w-]+\)=\s*$", text, re.MULTILINE), text[:300]
    assert any("Vaswani et al. (2017)" in text for text in page["texts"])  # chapter 1 cites the transformer paper


# The notebook tabs JupyterLab marks modified, and whether the kernel's status reads Idle.
DIRTY_TABS = "return [...document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty')].map((tab) => tab.innerText);"
KERNEL_IDLE = """
return [...document.querySelectorAll('.jp-StatusBar-TextItem')].some((item) => /\\bIdle$/.test(item.innerText.trim()));
"""


def test_student_copy_opens_unmodified(lab, driver):
    """Once its kernel is up, the copy is not marked modified: Lab rewrote the kernelspec the
    chapters stored ("Python 3") to its kernel's ("Python 3 (ipykernel)") before the copy step wrote it."""
    url, notebook = lab
    if notebook.name not in driver.current_url:
        driver.get(url)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not driver.execute_script(KERNEL_IDLE):
        time.sleep(1)
    assert driver.execute_script(KERNEL_IDLE), "the kernel did not start"
    time.sleep(2)  # Lab writes the kernel's metadata once it has the kernel's info
    assert driver.execute_script(DIRTY_TABS) == []
