"""The built book as a reader's browser shows it, with the network cut off.

Headless Chromium (Debian's chromium + chromium-driver, driven by selenium) opens every
page of the built book, served from 127.0.0.1, with its proxy pointed at a closed port so
that anything the page asks of the internet fails. On every page:

* MathJax renders every formula: 0 raw TeX spans (``\\(...\\)``, ``\\[...\\]``) remain;
* the console holds no error (a JavaScript error, or a script that failed to load);
* no asset is missing: every local file the page asks for exists, and nothing is asked
  of another host;
* code cells do not scroll sideways at a 1280-pixel window;
* no formula, display or inline, is clipped at a 400-pixel window (a phone): a wide one
  scrolls to its end.

At 400 and 800 px (a phone, a tablet) the chapter-list and the page-contents toggles open
their panels; at 1280 px the chapter-list toggle hides and shows the list.

On each chapter page it types a right and a wrong answer into every check-yourself box
and reads the feedback, which must agree with ``lib.checks`` for the same numbers (the box's
placeholder and typed text keep WCAG's 4.5:1 contrast in light and dark mode); it
reads the "Run this chapter" line, follows the download button to the student copy, and
finds the "checked by the tests" mark on the outputs that nbval compares.

On the pages of chapters 1, 3 and 5 it moves the controls of the live playground
(book/_static/playgrounds.js) and compares what the page prints with the Python function
behind the notebook's widgets (``lib.playgrounds``), at each setting.

Two checks concern what the chapters' notebooks hold, and name the page and the figure or
output at fault: ``test_outputs_fit_at_1280`` (no output cut off at the right edge) and
``test_figures_have_captions_and_alt_text`` (myst-nb figure metadata on every figure).

Figures and accessibility (the last section): every figure's smallest text, as the PNG
records it (``lib.figures``), shows at 11 px or more at 1280 px and no PNG is enlarged; at
400 px each figure links to its own full-size image and a tap opens it; axe-core 4 finds no
serious or critical violation on any page (``make browser-test`` installs it with npm).

Runs after ``make book`` (``make browser-test``; ``.ci/run`` does both). Outside CI
(the environment variable CI unset) it skips, in one line, when Chromium or the built
book is missing; in CI those are failures.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest
import yaml
from _chromium import start_chromium, unavailable

from lib.checks import CORRECT, INCORRECT, ValueExercise, exercises, grade

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
BOOK = Path(os.environ.get("BOOK_HTML", ROOT / "book" / "_build" / "html"))
# the repository the book was built from (BOOK_HTML may name another checkout's build)
SOURCE = BOOK.parents[2] if BOOK.parts[-3:] == ("book", "_build", "html") else ROOT
WINDOW = (1280, 900)
PHONE, TABLET = 400, 800  # the widths a reader's phone and tablet give a page
SKIPPED_PAGES = {"search.html", "genindex.html", "py-modindex.html"}


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
CHAPTER_PAGES = [p for p in PAGES if p.parent.name == "chapters"]


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
        unavailable(f"no built book at {BOOK}: run `make book` first")
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
    browser = start_chromium(
        WINDOW, extra_flags=("--disable-background-networking", "--no-first-run"), page_load_timeout=60
    )
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


# Any part of a cell's output that reaches past the output's right edge, or that would
# need sideways scrolling to be read (the reader of a 1280-px window does not see it).
OUTPUTS_CUT_OFF = """
const out = [];
for (const [i, cell] of [...document.querySelectorAll("div.cell_output")].entries()) {
  const box = cell.getBoundingClientRect();
  for (const el of cell.querySelectorAll("pre, img, table, svg, div.output")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0) continue;  // in a folded solution
    const scrolls = el.tagName !== "IMG" && el.scrollWidth > el.clientWidth + 1;
    if (scrolls || r.right > box.right + 1) {
      const text = (el.textContent || el.getAttribute("src") || "").trim().split("\\n");
      const longest = text.reduce((a, b) => (b.length > a.length ? b : a), "").slice(0, 90);
      out.push(`output ${i + 1} (${el.tagName.toLowerCase()}): ${Math.round(Math.max(el.scrollWidth, r.width))} px `
               + `wide in ${Math.round(box.width)} px: ${longest}`);
      break;
    }
  }
}
return out;
"""

# Each figure of the page: its caption (myst-nb's figure metadata makes a <figcaption>) and
# alt text. An alt text that is the image's file path (myst-nb's default) says nothing.
FIGURES = """
return [...document.querySelectorAll("article img")].map((img, i) => {
  const figure = img.closest("figure");
  const caption = figure && figure.querySelector("figcaption");
  return {figure: i + 1, src: img.getAttribute("src").split("/").pop().slice(0, 16),
          alt: img.getAttribute("alt") || "", caption: caption ? caption.textContent.trim() : ""};
});
"""

# Scroll every scrollable part of each formula, display (div.math) and inline (sphinx's
# span.math around MathJax's own), to its end; a formula is clipped when some of it still
# lies past the right edge of its box.
CLIPPED_FORMULAS = """
const clipped = [];
const parts = (root) => [...root.querySelectorAll("*")].filter(
  (x) => !x.closest(".MJX_Assistive_MathML, .MathJax_Preview, script"));
const formulas = [...document.querySelectorAll("div.math, span.math.notranslate")].filter(
  (m) => m.tagName === "DIV" || !m.parentElement.closest("div.math"));
for (const m of formulas) {
  const box = m.getBoundingClientRect();
  if (box.width === 0) continue;
  const right = () => Math.max(0, ...parts(m).map((x) => x.getBoundingClientRect().right));
  if (right() <= box.right + 1) continue;
  const scrollers = [m, ...m.querySelectorAll("*")].filter((x) => /auto|scroll/.test(getComputedStyle(x).overflowX));
  for (const s of scrollers) s.scrollLeft = s.scrollWidth;
  const hidden = right() - box.right;
  for (const s of scrollers) s.scrollLeft = 0;
  if (hidden > 1) {
    const source = (m.querySelector("script") || m).textContent.trim().slice(0, 60);
    clipped.push(`${Math.round(hidden)} px of ${m.tagName === "DIV" ? "display" : "inline"} ${source}`);
  }
}
return clipped;
"""


class _Width:
    """The page as a window of ``width`` CSS pixels shows it (headless Chromium's windows
    are no narrower than 500 px, so the viewport is set rather than the window)."""

    def __init__(self, driver, width: int):
        self.driver, self.width = driver, width

    def __enter__(self):
        metrics = {"width": self.width, "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False}
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        return self

    def __exit__(self, *exc):
        self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


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


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(BOOK).as_posix())
def test_outputs_fit_at_1280(driver, server, page):
    """What the notebooks print fits the page: no output is cut off at the right edge."""
    base, _ = server
    _open(driver, base, page)
    cut = driver.execute_script(OUTPUTS_CUT_OFF)
    assert cut == [], f"{page.name}: {len(cut)} cell outputs cut off at {WINDOW[0]} px:\n  " + "\n  ".join(cut)


def _alt_is_a_path(alt: str) -> bool:
    return alt == "" or "/" in alt or alt.lower().endswith((".png", ".svg", ".jpg", ".jpeg", ".gif"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(BOOK).as_posix())
def test_figures_have_captions_and_alt_text(driver, server, page):
    """Every figure has a (numbered) caption and an alt text that says what it shows. In a
    notebook: the cell's metadata {"mystnb": {"figure": {"caption": ..., "name": ...},
    "image": {"alt": ..., "width": ...}}}."""
    base, _ = server
    _open(driver, base, page)
    faults = []
    for figure in driver.execute_script(FIGURES):
        missing = [what for what, bad in (("caption", not figure["caption"]),
                                          ("alt text", _alt_is_a_path(figure["alt"]))) if bad]  # fmt: skip
        if missing:
            faults.append(f"figure {figure['figure']} ({figure['src']}...): no {' and no '.join(missing)}"
                          f" (alt {figure['alt'][:40]!r})")  # fmt: skip
    assert faults == [], f"{page.name}: {len(faults)} figures lack a caption or alt text:\n  " + "\n  ".join(faults)


MATH_PAGES = [p for p in PAGES if 'class="math notranslate nohighlight"' in p.read_text(errors="replace")]


@pytest.mark.parametrize("page", MATH_PAGES, ids=lambda p: p.relative_to(BOOK).as_posix())
def test_no_formula_is_clipped_on_a_phone(driver, server, page):
    """Display and inline maths: what does not fit a phone's column scrolls, never clips."""
    base, _ = server
    with _Width(driver, PHONE):
        _open(driver, base, page)
        clipped = driver.execute_script(CLIPPED_FORMULAS)
    assert clipped == [], f"{page.name}: formulas cut off at {PHONE} px (they must scroll): {clipped}"


# --- the chapter list and page contents on a phone, a tablet and a desktop ----------------

PANEL = """
const dialog = document.getElementById(arguments[0]);
const links = dialog ? [...dialog.querySelectorAll("a")].filter((a) => a.getClientRects().length > 0) : [];
const box = dialog ? dialog.getBoundingClientRect() : {width: 0};
return {open: !!(dialog && dialog.open), width: box.width, links: links.length};
"""

PRIMARY_SIDEBAR = """
const bar = document.getElementById("pst-primary-sidebar");
const box = bar.getBoundingClientRect();
return getComputedStyle(bar).visibility !== "hidden" && box.right > 0 && box.width > 0;
"""


def _visible(driver, selector: str):
    from selenium.webdriver.common.by import By

    shown = [e for e in driver.find_elements(By.CSS_SELECTOR, selector) if e.is_displayed()]
    assert shown, f"no visible {selector} button"
    return shown[0]


def _close_dialog(driver) -> None:
    from selenium.webdriver.common.keys import Keys

    driver.switch_to.active_element.send_keys(Keys.ESCAPE)


TOGGLE_PAGES = sorted({PAGES[0], *CHAPTER_PAGES[:1], PAGES[-1]} if PAGES else set())


@pytest.mark.parametrize("width", [PHONE, TABLET])
@pytest.mark.parametrize("page", TOGGLE_PAGES, ids=lambda p: p.relative_to(BOOK).as_posix())
def test_toggles_open_the_chapter_list_and_contents(driver, server, page, width):
    base, _ = server
    with _Width(driver, width):
        _open(driver, base, page)
        for toggle, dialog, least_links in ((".primary-toggle", "pst-primary-sidebar-modal", 9),
                                            (".secondary-toggle", "pst-secondary-sidebar-modal", 1)):  # fmt: skip
            if toggle == ".secondary-toggle" and not driver.execute_script(
                "return !!document.querySelector('#pst-secondary-sidebar .toc-entry, #pst-secondary-sidebar nav a')"
            ):
                continue  # a page without sections has no contents to show
            _visible(driver, toggle).click()
            panel = driver.execute_script(PANEL, dialog)
            assert panel["open"] and panel["width"] > 100, f"{toggle} at {width} px opened nothing: {panel}"
            assert panel["links"] >= least_links, f"{toggle} at {width} px: the panel shows {panel['links']} links"
            _close_dialog(driver)
            assert not driver.execute_script(PANEL, dialog)["open"], f"Escape did not close {dialog}"
        assert _console_errors(driver) == []


def test_the_chapter_list_toggle_hides_and_shows_it_at_1280(driver, server):
    if not PAGES:
        unavailable(f"no built book at {BOOK}: run `make book` first")
    base, _ = server
    _open(driver, base, CHAPTER_PAGES[0] if CHAPTER_PAGES else PAGES[0])
    assert _settles(driver, PRIMARY_SIDEBAR, True), "the chapter list is not shown at 1280 px"
    _visible(driver, ".primary-toggle").click()
    assert _settles(driver, PRIMARY_SIDEBAR, False), "the toggle did not hide the chapter list"
    _visible(driver, ".primary-toggle").click()
    assert _settles(driver, PRIMARY_SIDEBAR, True), "the toggle did not show the chapter list again"


def _settles(driver, script: str, expected, seconds: float = 5.0) -> bool:
    """Whether ``script`` returns ``expected`` within a few seconds (the sidebar slides)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        WebDriverWait(driver, seconds, poll_frequency=0.1).until(lambda d: d.execute_script(script) == expected)
    except TimeoutException:
        return False
    return True


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


def test_there_are_chapter_pages_to_check():
    if not PAGES:
        unavailable(f"no built book at {BOOK}: run `make book` first")
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


# The colours of an answer box's placeholder (which states the answer's format), of what is typed,
# and of the background behind them, as the browser computes them (transparent: the parent's).
BOX_COLOURS = """
const input = document.querySelector(".check-yourself input");
if (!input) return null;
let back = input, bg = "rgba(0, 0, 0, 0)";
while (back && /rgba\\(.*, 0\\)$|transparent/.test(bg)) {
  bg = getComputedStyle(back).backgroundColor;
  back = back.parentElement;
}
const placeholder = getComputedStyle(input, "::placeholder").color;
return {placeholder: placeholder, text: getComputedStyle(input).color, background: bg};
"""


def _contrast(one: str, two: str) -> float:
    """WCAG 2's contrast ratio of two CSS rgb() colours."""

    def luminance(colour: str) -> float:
        r, g, b = (float(v) / 255 for v in colour[colour.index("(") + 1 : colour.index(")")].split(",")[:3])
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(one), luminance(two)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_answer_box_text_has_contrast_in_light_and_dark_mode(driver, server):
    """WCAG's 4.5:1 for the placeholder and the typed text, in the theme's light and dark modes
    (dark mode's placeholder was 2.43:1 when the browser chose its colours)."""
    base, _ = server
    page = next((p for p in CHAPTER_PAGES if 'class="check-yourself"' in p.read_text()), None)
    if page is None:
        pytest.skip("no page with a check-yourself box")
    _open(driver, base, page)
    for theme in ("light", "dark"):
        driver.execute_script(f"document.documentElement.dataset.theme = {theme!r};")
        colours = driver.execute_script(BOX_COLOURS)
        assert colours is not None, page.name
        for part in ("placeholder", "text"):
            ratio = _contrast(colours[part], colours["background"])
            assert ratio >= 4.5, (theme, part, colours, round(ratio, 2))


# --- running a chapter from its page ------------------------------------------------------


@pytest.mark.parametrize("page", CHAPTER_PAGES, ids=lambda p: p.stem)
def test_chapter_page_says_how_to_run_it_and_downloads_the_student_copy(driver, server, page, tmp_path):
    import nbformat
    from selenium.webdriver.common.by import By

    from lib.student import make_student_copy

    base, _ = server
    _open(driver, base, page)
    line = driver.find_element(By.CSS_SELECTOR, ".run-this-chapter").text
    assert "git clone" in line and "make lab" in line and f"student/{page.stem}.ipynb" in line, line
    url = ((yaml.safe_load((SOURCE / "book" / "_config.yml").read_text()) or {}).get("repository") or {}).get("url")
    repository_links = driver.find_elements(
        By.CSS_SELECTOR, "a.btn-source-repository-button, a.btn-source-issues-button"
    )
    if url:  # named in _config.yml: the line clones it, and the repository and issue buttons link to it
        assert f"git clone {url}" in line, line
        assert len(repository_links) == 2 and all(a.get_attribute("href").startswith(url) for a in repository_links)
    else:  # the clone's address is a placeholder: the line says where a clone comes from, and links the zip
        assert "git clone <the address of this book's repository>" in line, line
        assert "does not name its repository: clone it from wherever you got this book" in line, line
        assert repository_links == []
        zip_link = driver.find_element(By.CSS_SELECTOR, ".run-this-chapter a").get_attribute("href")
        assert zip_link.endswith("/book/intro.html#download-the-student-notebooks"), zip_link
        intro = (BOOK / "book" / "intro.html").read_text()
        assert 'id="download-the-student-notebooks"' in intro and "student-notebooks.zip" in intro
    links = driver.find_elements(By.CSS_SELECTOR, "a.btn-download-source-button")
    hrefs = {a.get_attribute("href") for a in links}
    assert len(hrefs) == 1 and next(iter(hrefs)).endswith(f"/{page.stem}.ipynb"), hrefs
    served = BOOK / unquote(urlparse(next(iter(hrefs))).path).lstrip("/")
    downloaded = nbformat.read(served, as_version=4)
    # the copy `make lab` writes (citations and figure references in plain text, lib.plain_roles)
    expected = nbformat.read(make_student_copy(SOURCE / "chapters" / f"{page.stem}.ipynb", tmp_path)[0], as_version=4)
    assert [c.source for c in downloaded.cells] == [c.source for c in expected.cells]
    assert not any(c.get("outputs") for c in downloaded.cells), "the download holds outputs (and answers)"
    assert "# BEGIN SOLUTION" not in served.read_text()


CHECKED_MARKS = """
const cells = [...document.querySelectorAll("div.cell.tag_nbval-check-output > div.cell_output")];
return cells.map((o) => getComputedStyle(o, "::before").content);
"""


def test_checked_outputs_carry_the_mark(driver, server):
    if not CHAPTER_PAGES:
        unavailable(f"no built book at {BOOK}: run `make book` first")
    base, _ = server
    _open(driver, base, CHAPTER_PAGES[0])
    marks = driver.execute_script(CHECKED_MARKS)
    assert marks, f"{CHAPTER_PAGES[0].name}: no output of a cell tagged nbval-check-output"
    assert all("checked by the tests" in mark for mark in marks), set(marks)


# --- the live playgrounds -----------------------------------------------------------------

PLAYGROUND_CHAPTERS = {
    "self-attention": "01_one_attention_read",
    "rope": "03_masks_and_positions",
    "complexity": "05_costs_and_flashattention",
}


def _playground_page(name: str) -> Path:
    page = BOOK / "chapters" / f"{PLAYGROUND_CHAPTERS[name]}.html"
    if not page.exists():
        unavailable(f"no built book at {BOOK}: run `make book` first")
    return page


def _mount(driver, server, name: str):
    from selenium.webdriver.common.by import By

    base, _ = server
    page = _playground_page(name)
    _open(driver, base, page)
    roots = driver.find_elements(By.CSS_SELECTOR, f'.live-playground[data-playground="{name}"]')
    assert roots, (
        f"{page.name} has no live playground: its notebook needs, after the playground's static figure, a markdown "
        f'cell <div class="live-playground" data-playground="{name}"></div>'
    )
    root = roots[0]
    assert "live-playground-mounted" in root.get_attribute("class"), f"{page.name}: playgrounds.js did not mount it"
    return root


def _control(root, name: str):
    from selenium.webdriver.common.by import By

    return root.find_element(By.CSS_SELECTOR, f'[data-control="{name}"]')


def _choose(control, value) -> None:
    from selenium.webdriver.support.ui import Select

    Select(control).select_by_value(str(value))


def _slide(driver, control, value) -> None:
    """Move a range input, as a drag would: the value, then the input event."""
    driver.execute_script(
        "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input', {bubbles: true}));",
        control,
        str(value),
    )


def _type(control, value) -> None:
    from selenium.webdriver.common.keys import Keys

    control.send_keys(Keys.CONTROL, "a")
    control.send_keys(str(value))


def _shown(root) -> tuple[str, dict, dict]:
    import json

    from selenium.webdriver.common.by import By

    out = root.find_element(By.CSS_SELECTOR, "[data-readout]")
    return out.text, json.loads(out.get_attribute("data-state")), json.loads(out.get_attribute("data-values"))


def test_self_attention_playground_is_live_and_agrees_with_python(driver, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from lib.playgrounds.self_attention import describe, self_attention_read

    root = _mount(driver, server, "self-attention")
    seen = []

    def check(expected_query=None):
        text, state, values = _shown(root)
        if expected_query is not None:
            assert state["query"] == list(expected_query), state
        read = self_attention_read(
            state["query"], state["position"], scaling=state["scaling"], temperature=state["temperature"],
            causal=state["causal"],
        )  # fmt: skip
        assert text == describe(read), (state, text)
        np.testing.assert_allclose(values["weights"], read.weights.tolist(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(values["output"], read.output.tolist(), rtol=0, atol=1e-12)
        scores = [float("-inf") if s is None else s for s in values["scores"]]
        assert scores == pytest.approx(read.scores.tolist(), abs=1e-12)
        seen.append(text)

    check(expected_query=(1.0, 0.0))  # the worked example
    _control(root, "causal").click()
    check()
    _choose(_control(root, "position"), 1)  # token 2's query is loaded into the boxes
    check(expected_query=(0.0, 1.0))
    _control(root, "causal").click()
    _choose(_control(root, "scaling"), "none")
    _type(_control(root, "qx"), "0.3")
    _type(_control(root, "qy"), "-1.2")  # typing in q[1] ends the entry in q[0]
    check(expected_query=(0.3, 1.0))  # q[1] is applied when its entry is done, as in the notebook
    _type(_control(root, "qy"), "-1.2" + Keys.ENTER)
    check(expected_query=(0.3, -1.2))
    _choose(_control(root, "scaling"), "temperature")
    for exponent in (-1, -0.5, 0.35, 1):
        _slide(driver, _control(root, "temperature"), exponent)
        check()
    assert len(set(seen)) == len(seen), "a control changed nothing on the page"
    _type(_control(root, "qx"), "1e300" + Keys.ENTER)  # Python writes all of 1e300's digits with :.4f
    check(expected_query=(1e300, -1.2))
    assert "e+" not in _shown(root)[0]

    # A box holding no number: the notebook's FloatText keeps its last number and puts it back
    # when the entry is done. The page does the same, and says so while the box is unfinished.
    _type(_control(root, "qx"), "0.5" + Keys.ENTER)
    check(expected_query=(0.5, -1.2))
    before = _shown(root)[0]
    warning = root.find_element(By.CSS_SELECTOR, "[data-warning]")
    assert not warning.is_displayed()
    for unfinished in ("-", "1e", "1e400", Keys.BACKSPACE):  # the last empties the box
        _type(_control(root, "qx"), unfinished)
        check(expected_query=(0.5, -1.2))  # not 0
        assert _shown(root)[0] == before, unfinished
        assert warning.is_displayed() and "q[0] is not a number" in warning.text and "q[0] = 0.5" in warning.text
        _control(root, "qx").send_keys(Keys.ENTER)  # the entry is done: the box gets its number back
        assert _control(root, "qx").get_attribute("value") == "0.5"
        assert not warning.is_displayed()
        check(expected_query=(0.5, -1.2))
    _type(_control(root, "qy"), "-0" + Keys.ENTER)  # the widget sends no -0: JSON has none
    check(expected_query=(0.5, 0.0))
    assert _console_errors(driver) == []


def test_rope_playground_is_live_and_agrees_with_python(driver, server):
    from selenium.webdriver.common.by import By

    from lib.playgrounds.rope import describe_rope_read, rope_read

    root = _mount(driver, server, "rope")
    seen = []

    def check(m, n):
        text, state, values = _shown(root)
        assert (state["m"], state["n"]) == (m, n), state
        assert int(_control(root, "gap").get_attribute("value")) == n - m
        read = rope_read(state["m"], state["n"], frequency=state["frequency"])
        assert text == describe_rope_read(read), (state, text)
        assert values["score"] == pytest.approx(read.score, abs=1e-12)
        assert values["score_from_gap"] == pytest.approx(read.score_from_gap, abs=1e-12)
        assert values["rotated_key"] == pytest.approx(read.rotated_key.tolist(), abs=1e-12)
        seen.append(text)

    check(1, 2)  # the worked example
    _slide(driver, _control(root, "m"), 5)  # the key moves along: the gap stays 1
    check(5, 6)
    _slide(driver, _control(root, "gap"), 3)  # the key moves
    check(5, 8)
    _slide(driver, _control(root, "n"), 4)  # the gap follows the key
    check(5, 4)
    _slide(driver, _control(root, "frequency"), 6)  # steps of π/64, as the notebook's slider
    check(5, 4)
    assert _shown(root)[1]["frequency"] == 6 * np.pi / 64
    _slide(driver, _control(root, "m"), 33)
    check(33, 32)
    _slide(driver, _control(root, "frequency"), 64)  # the notebook's slider reaches π
    check(33, 32)
    assert _shown(root)[1]["frequency"] == np.pi
    assert "frequency 3.1416 rad/position" in _shown(root)[0]
    assert root.find_element(By.CSS_SELECTOR, '[data-shows="frequency"]').text == "3.1416"
    assert len(set(seen)) == len(seen), "a control changed nothing on the page"
    assert _console_errors(driver) == []


def test_complexity_playground_is_live_and_agrees_with_python(driver, server):
    from selenium.webdriver.common.by import By

    from lib.playgrounds.complexity import SIZES, complexity_curves, describe

    root = _mount(driver, server, "complexity")
    seen = []

    def check(pattern, n, window, n_global):
        text, state, values = _shown(root)
        assert state == {"pattern": pattern, "n": n, "window": window, "n_global": n_global}
        curves = complexity_curves(pattern, n, window=window, n_global=n_global)
        assert text == describe(curves), (state, text)  # with the note on what was not measured
        assert values["sizes"] == list(SIZES)
        assert values["pairs"] == (None if curves.pairs is None else list(curves.pairs))
        assert values["flops"] == list(curves.flops) and values["dense_pairs"] == list(curves.dense_pairs)
        assert values["dense_flops"] == list(curves.dense_flops)
        assert (values["pairs_at_n"], values["flops_at_n"]) == (curves.pairs_at_n, curves.flops_at_n)
        # the recorded CPU times of chapters/results/, as the notebook's third panel plots them
        assert values["measured"] == [[label, [list(p) for p in points]] for label, points in curves.measured.items()]
        assert values["note"] == curves.note
        panels = root.find_elements(By.CSS_SELECTOR, ".playground-figure svg")
        assert [p.get_attribute("aria-label").split(",")[0] for p in panels] == [
            "allowed query-key pairs", "modeled attention FLOPs", "measured on a CPU (recorded)",
        ]  # fmt: skip
        for label in curves.measured:
            assert label in panels[2].get_attribute("aria-label")
        seen.append(text)

    check("window", 4096, 256, 16)  # the notebook's default
    _slide(driver, _control(root, "n"), SIZES.index(65536))
    check("window", 65536, 256, 16)
    _slide(driver, _control(root, "window"), 1000)
    check("window", 65536, 1000, 16)
    _choose(_control(root, "pattern"), "global+local")
    _slide(driver, _control(root, "n_global"), 200)
    check("global+local", 65536, 1000, 200)
    _slide(driver, _control(root, "n"), 0)
    _slide(driver, _control(root, "window"), 4096)  # wider than N: the band covers every pair
    check("global+local", 256, 4096, 200)
    for pattern in ("dense", "causal", "linear"):
        _choose(_control(root, "pattern"), pattern)
        check(pattern, 256, 4096, 200)
    _choose(_control(root, "pattern"), "window")
    check("window", 256, 4096, 200)  # no windowed run recorded at w=4096: the fourth line says so
    assert "no windowed run recorded at w=4096" in _shown(root)[0]
    assert len(set(seen)) == len(seen), "a control changed nothing on the page"
    assert _console_errors(driver) == []


# --- figures that read at any width, and accessibility (axe-core) ---------------------------

# Every figure of a page: the image's file, its natural and displayed widths, and the link
# that wraps it (Sphinx wraps a scaled image in a link to the image itself).
FIGURE_IMAGES = """
return [...document.querySelectorAll("article img")].map((img) => {
  const figure = img.closest("figure"), link = img.closest("a");
  return {id: figure ? figure.id : "", src: img.src, natural: img.naturalWidth,
          shown: img.getBoundingClientRect().width, link: link ? link.href : null};
});
"""

# lib.figures stores each figure as a PNG at 200 dpi, in whose text chunks it records the
# size of the smallest text it drew. In the 660-px column, 11 px needs 1.2 pt of text per inch of
# width: 10-pt text in a figure at most 8.3 inches wide (the playgrounds' included).
LEAST_TEXT_PX = 11.0
FIGURE_PAGES = [p for p in PAGES if "<img" in p.read_text(errors="replace")]


def _served_file(url: str) -> Path:
    return BOOK / unquote(urlparse(url).path).lstrip("/")


def _text_px_at_natural_size(png: Path) -> float:
    """The smallest text's size in the PNG's own pixels, as lib.figures recorded it when it drew
    the figure, checked against the points and dpi the PNG also records."""
    from lib.figures import SMALLEST_TEXT_PT, SMALLEST_TEXT_PX, png_dpi, png_text_chunks

    data = png.read_bytes()
    chunks = png_text_chunks(data)
    assert SMALLEST_TEXT_PX in chunks, (
        f"{png.name} does not record its smallest text: its chapter's first cell must call"
        " lib.figures.book_figures() before the figure is drawn, and the notebook be run again"
    )
    px, pt, dpi = float(chunks[SMALLEST_TEXT_PX]), float(chunks[SMALLEST_TEXT_PT]), png_dpi(data)
    assert dpi and px == pytest.approx(pt * dpi / 72, rel=0.01), (png.name, chunks, dpi)
    return px


def _figures(driver) -> list[dict]:
    figures = driver.execute_script(FIGURE_IMAGES)
    for figure in figures:
        assert figure["natural"] > 0, f"{figure['id']}: the image did not load"
        figure["text_px"] = _text_px_at_natural_size(_served_file(figure["src"]))
        figure["text_shown"] = figure["text_px"] * figure["shown"] / figure["natural"]
    return figures


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: p.relative_to(BOOK).as_posix())
def test_figure_text_reads_at_1280(driver, server, page):
    """The smallest text of every figure shows at 11 px or more in a 1280-px window: its size
    in the PNG's pixels x the width the page shows the PNG at / the PNG's width. And the PNG is
    never enlarged (drawn at 200 dpi, a figure has more pixels than the column shows)."""
    base, _ = server
    _open(driver, base, page)
    figures = _figures(driver)
    small, enlarged = [], []
    for f in figures:
        line = (
            f"{f['id']}: {f['text_shown']:.1f} px ({f['text_px']:.1f} px in a {f['natural']}-px PNG"
            f" shown {f['shown']:.0f} px wide)"
        )
        print(line)
        if f["text_shown"] < LEAST_TEXT_PX:
            small.append(line)
        if f["natural"] < f["shown"]:
            enlarged.append(line)
    assert enlarged == [], f"{page.name}: figures enlarged, hence blurred:\n  " + "\n  ".join(enlarged)
    assert small == [], f"{page.name}: figure text under {LEAST_TEXT_PX} px at {WINDOW[0]} px:\n  " + "\n  ".join(small)


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: p.relative_to(BOOK).as_posix())
def test_figures_open_full_size_on_a_phone(driver, server, page):
    """At 400 px a figure is shown 337 px wide, and its text shrinks with it (about 6 px for
    10-pt text in an 8-inch figure): no size of text keeps a figure that wide legible in a
    phone's column. So on a phone a figure is a link to its full-size image, and the test
    asserts that: every figure is wrapped in a link to its own image file, a tap on the first
    opens that image, and at full size (one image pixel per CSS pixel) its text is at least
    11 px. The size in the column is printed."""
    from selenium.webdriver.common.by import By

    base, _ = server
    with _Width(driver, PHONE):
        _open(driver, base, page)
        figures = _figures(driver)
        if not figures:
            pytest.skip(f"{page.name} shows no figure")
        for f in figures:
            print(
                f"{f['id']}: {f['text_shown']:.1f} px in the column at {PHONE} px, {f['text_px']:.1f} px at full size"
            )
            assert f["link"] == f["src"], f"{page.name}: {f['id']} is not a link to its own image ({f['link']})"
            assert f["text_px"] >= LEAST_TEXT_PX, f"{page.name}: {f['id']}'s text is {f['text_px']:.1f} px at full size"
        first = driver.find_elements(By.CSS_SELECTOR, "article img")[0]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", first)
        first.click()
        opened = driver.execute_script(
            "const img = document.querySelector('img');"
            "return {url: location.href, type: document.contentType, natural: img ? img.naturalWidth : 0};"
        )
    assert opened == {"url": figures[0]["src"], "type": "image/png", "natural": figures[0]["natural"]}, opened


AXE_CORE = Path(os.environ.get("AXE_CORE_JS", ROOT / ".cache" / "npm" / "node_modules" / "axe-core" / "axe.min.js"))

RUN_AXE = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then(
  (r) => done(r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
                                         nodes: v.nodes.map((n) => n.target.join(" "))}))),
  (e) => done(String(e)));
"""


@pytest.fixture(scope="module")
def axe_core() -> str:
    if not AXE_CORE.is_file():
        unavailable(f"axe-core not found at {AXE_CORE}: `make browser-test` installs it with npm")
    return AXE_CORE.read_text()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(BOOK).as_posix())
def test_axe_finds_no_serious_accessibility_fault(driver, server, axe_core, page):
    """axe-core 4 (WCAG 2 A and AA and best practices) on every page at 1280 px: no critical
    and no serious violation. The moderate and minor ones are printed."""
    base, _ = server
    _open(driver, base, page)
    driver.execute_script(axe_core)
    driver.set_script_timeout(120)
    violations = driver.execute_async_script(RUN_AXE)
    assert isinstance(violations, list), f"axe-core failed: {violations}"
    for v in violations:
        print(f"{v['impact']}: {v['id']} ({v['help']}), {len(v['nodes'])} nodes: {v['nodes'][:3]}")
    serious = [
        f"{v['impact']} {v['id']}: {v['help']}: {v['nodes'][:5]}"
        for v in violations
        if v["impact"] in ("serious", "critical")
    ]
    assert serious == [], f"{page.name}: {len(serious)} serious or critical axe-core violations:\n  " + "\n  ".join(
        serious
    )


# The colour-mode button's accessible name and the title of the one icon it shows (the others
# are hidden), as book/_static/accessible-names.js keeps them.
COLOUR_BUTTON = """
const button = document.querySelector(".theme-switch-button");
const shown = [...button.querySelectorAll(".theme-switch")].find((i) => getComputedStyle(i).display !== "none");
const title = shown ? (shown.getAttribute("title") || (shown.querySelector("title") || {}).textContent || "") : "";
return {label: button.getAttribute("aria-label"), shows: title.trim(), mode: document.documentElement.dataset.mode};
"""


def test_colour_button_is_named_by_the_mode_it_shows(driver, server):
    """The theme's colour-mode button keeps "Color mode" and the mode its icon shows in its name
    as a click moves it from mode to mode (axe-core checks one state; this checks all three)."""
    if not PAGES:
        unavailable(f"no built book at {BOOK}: run `make book` first")
    base, _ = server
    _open(driver, base, PAGES[0])
    seen = []
    for _ in range(3):
        state = driver.execute_script(COLOUR_BUTTON)
        assert state["shows"] and state["label"] == f"Color mode: {state['shows']}", state
        seen.append(state["mode"])
        _visible(driver, ".theme-switch-button").click()
    assert len(set(seen)) == 3, seen
