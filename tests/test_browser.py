"""The built book as a reader's browser shows it, with the network cut off.

Headless Chromium (Debian's chromium + chromium-driver, driven by selenium) opens every
page of the built book, served from 127.0.0.1, with its proxy pointed at a closed port so
that anything the page asks of the internet fails. On every page:

* MathJax renders every formula: 0 raw TeX spans (``\\(...\\)``, ``\\[...\\]``) remain;
* the console holds no error (a JavaScript error, or a script that failed to load);
* no asset is missing: every local file the page asks for exists, and nothing is asked
  of another host;
* code cells do not scroll sideways at a 1280-pixel window.

On each chapter page it types a right and a wrong answer into every check-yourself box
and reads the feedback, which must agree with ``lib.checks`` for the same numbers.

Runs after ``make book`` (``make browser-test``; ``.ci/run`` does both). Outside CI
(the environment variable CI unset) it skips, in one line, when Chromium or the built
book is missing; in CI those are failures.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest

from lib.checks import CORRECT, INCORRECT, ValueExercise, exercises, grade

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
BOOK = Path(os.environ.get("BOOK_HTML", ROOT / "book" / "_build" / "html"))
IN_CI = bool(os.environ.get("CI"))
CLOSED_PORT_PROXY = "http://127.0.0.1:9"  # port 9 (discard) is closed: every proxied request fails
WINDOW = (1280, 900)
SKIPPED_PAGES = {"search.html", "genindex.html", "py-modindex.html"}


def _unavailable(reason: str):
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def _find(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or (name if Path(name).is_file() else None)
        if found:
            return found
    return None


def _pages() -> list[Path]:
    if not (BOOK / "index.html").exists():
        return []
    pages = [
        p
        for p in sorted(BOOK.rglob("*.html"))
        if p.name not in SKIPPED_PAGES and not set(p.relative_to(BOOK).parts[:-1]) & {"_static", "_sources", "_images"}
    ]
    # index.html is a redirect to the first page; the first page itself is in the list
    return [p for p in pages if p.name != "index.html" or "http-equiv" not in p.read_text()[:2000]]


PAGES = _pages()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    failures: list[str]

    def log_message(self, format, *args):  # noqa: A002 - the signature http.server calls
        pass

    def send_error(self, code, message=None, explain=None):
        if self.path != "/favicon.ico":  # the browser asks for it on its own; no page links it
            self.failures.append(f"{code} {unquote(self.path)}")
        super().send_error(code, message, explain)


@pytest.fixture(scope="module")
def server():
    if not PAGES:
        _unavailable(f"no built book at {BOOK}: run `make book` first")
    failures: list[str] = []
    handler = functools.partial(type("Handler", (_QuietHandler,), {"failures": failures}), directory=str(BOOK))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", failures
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def driver():
    chromium = _find("chromium", "chromium-browser", "google-chrome")
    chromedriver = _find("chromedriver", "/usr/lib/chromium/chromedriver")
    if not (chromium and chromedriver):
        _unavailable("Chromium not found: `apt-get install chromium chromium-driver` (CI installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--proxy-server={CLOSED_PORT_PROXY}",  # the network is cut off; 127.0.0.1 is never proxied
        "--disable-background-networking",
        "--no-first-run",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    browser.set_page_load_timeout(60)
    yield browser
    browser.quit()


# --- what a page shows ---------------------------------------------------------------------

WAIT_FOR_MATHJAX = """
const done = arguments[arguments.length - 1];
const started = Date.now();
(function poll() {
  const hub = window.MathJax && window.MathJax.Hub;
  if (hub && hub.Queue) { hub.Queue(() => done("typeset")); return; }
  if (Date.now() - started > 20000) { done(window.MathJax ? "no MathJax.Hub" : "no MathJax"); return; }
  setTimeout(poll, 100);
})();
"""

# Text a reader would see that still holds TeX delimiters, outside code, and the maths
# MathJax did render. MathJax 2 moves the source into <script type="math/tex">.
RAW_TEX = r"""
const raw = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
const skip = (node) => node.parentElement.closest("script, style, pre, code, textarea, .highlight");
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  if (skip(node)) continue;
  if (/\\\(|\\\[|\\begin\{|\$\$/.test(node.textContent)) raw.push(node.textContent.trim().slice(0, 80));
}
return {
  raw: raw,
  mathSpans: document.querySelectorAll(".math").length,
  rendered: document.querySelectorAll(".MathJax, .MathJax_Display, .MathJax_SVG, mjx-container").length,
};
"""

ASSETS = """
const urls = new Set();
for (const el of document.querySelectorAll("script[src], img[src], iframe[src]")) urls.add(el.src);
for (const el of document.querySelectorAll("link[href]")) {
  if (/stylesheet|icon|preload|modulepreload/.test(el.rel)) urls.add(el.href);
}
for (const entry of performance.getEntriesByType("resource")) urls.add(entry.name);
return [...urls];
"""

SIDEWAYS = """
const out = [];
for (const pre of document.querySelectorAll(".cell_input pre, div.highlight-ipython3 pre")) {
  if (pre.scrollWidth > pre.clientWidth + 1) {
    const longest = pre.textContent.split("\\n").reduce((a, b) => (b.length > a.length ? b : a), "");
    out.push({width: pre.clientWidth, needed: pre.scrollWidth, line: longest});
  }
}
return out;
"""


def _open(driver, base: str, page: Path) -> None:
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get(f"{base}/{page.relative_to(BOOK).as_posix()}")
    driver.set_script_timeout(30)
    state = driver.execute_async_script(WAIT_FOR_MATHJAX)
    assert state == "typeset", f"{page.name}: MathJax did not run ({state})"


def _console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def _asset_problems(driver, base: str) -> list[str]:
    problems = []
    for url in driver.execute_script(ASSETS):
        parsed = urlparse(url)
        if parsed.scheme in ("data", "blob", "about", "javascript"):
            continue
        if not url.startswith(base):
            problems.append(f"needs the network: {url}")
            continue
        path = BOOK / unquote(parsed.path).lstrip("/")
        if not path.is_file():
            problems.append(f"missing local file: {path.relative_to(BOOK)}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(BOOK).as_posix())
def test_page_renders_offline_without_errors(driver, server, page):
    base, failed_requests = server
    failed_requests.clear()
    _open(driver, base, page)
    tex = driver.execute_script(RAW_TEX)
    assert tex["raw"] == [], f"{len(tex['raw'])} raw TeX spans, e.g. {tex['raw'][:3]}"
    if tex["mathSpans"]:
        assert tex["rendered"] > 0, "the page has maths but MathJax rendered none of it"
    assert _asset_problems(driver, base) == []
    assert failed_requests == [], "the server could not give the page what it asked for"
    assert _console_errors(driver) == []
    sideways = driver.execute_script(SIDEWAYS)
    assert sideways == [], f"code cells scroll sideways at a {WINDOW[0]}-px window: {sideways[:3]}"


def _as_text(value) -> str:
    return ", ".join(f"{x:.12g}" for x in np.asarray(value, dtype=float).ravel())


def _try(driver, box, text: str) -> dict:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    field = box.find_element(By.CSS_SELECTOR, "input")
    field.clear()
    field.send_keys(text, Keys.ENTER)  # Enter presses Check
    result = box.find_element(By.CSS_SELECTOR, ".check-yourself-result")
    return {"status": result.get_attribute("data-status"), "text": result.text}


def _wrong_numbers(exercise: ValueExercise) -> tuple[str, str]:
    """A wrong answer to type and the feedback the book must give for it: the first known
    mistake when the exercise declares one, else the expected answer moved off by a lot."""
    if exercise.wrong_answers:
        wrong = exercise.wrong_answers[0]
        return _as_text(wrong.value), wrong.feedback
    off = np.asarray(exercise.expected, dtype=float) + 10 * (exercise.atol + 1)
    return _as_text(off), ""


CHAPTER_PAGES = [p for p in PAGES if p.parent.name == "chapters"]


def test_there_are_chapter_pages_to_check():
    if not PAGES:
        _unavailable(f"no built book at {BOOK}: run `make book` first")
    assert CHAPTER_PAGES, f"no chapter pages under {BOOK / 'chapters'}"


@pytest.mark.parametrize("page", CHAPTER_PAGES, ids=lambda p: p.stem)
def test_check_yourself_boxes_grade_typed_answers(driver, server, page):
    from selenium.webdriver.common.by import By

    base, _ = server
    _open(driver, base, page)
    registry = exercises()
    boxes = driver.find_elements(By.CSS_SELECTOR, ".check-yourself[data-exercise]")
    graded = 0
    for box in boxes:
        exercise_id = box.get_attribute("data-exercise")
        assert exercise_id in registry, f"{page.name}: a box asks for unknown exercise {exercise_id!r}"
        exercise = registry[exercise_id]
        if not isinstance(exercise, ValueExercise):
            assert "graded in the notebook" in box.text, exercise_id
            continue
        right = _try(driver, box, _as_text(exercise.expected))
        assert right["status"] == CORRECT, (exercise_id, right)
        assert grade(exercise, exercise.expected).status == CORRECT
        typed, feedback = _wrong_numbers(exercise)
        wrong = _try(driver, box, typed)
        assert wrong["status"] == INCORRECT, (exercise_id, typed, wrong)
        if feedback:
            assert f"Feedback: {feedback}" in wrong["text"], (exercise_id, wrong)
            assert grade(exercise, exercise.wrong_answers[0].value).feedback == feedback  # as in the notebook
        junk = _try(driver, box, "two halves")
        assert junk["status"] == INCORRECT and "expected numbers" in junk["text"], (exercise_id, junk)
        graded += 1
    if not boxes:
        pytest.skip(f"{page.name} has no check-yourself boxes")
    assert _console_errors(driver) == []
