"""Every number a chapter's prose states is printed by a cell of that chapter, with its unit.

The book's promise is that its numbers are computed. A number typed into the markdown can
go stale when a default changes (the cell prints the new value, the prose keeps the old
one), and nbval cannot see it: nbval compares outputs, not prose. This test reads each
chapter and appendix and fails on a number that its markdown states but that no stored
output of the same notebook shows, naming the notebook, the cell and the number.

How numbers and units are read is ``tests/_prose_numbers.py``. A prose number is backed
only by an output (a cell's source is the claim's input, not its check), at the prose's
precision (``0.67`` is backed by ``0.6698``, ``60`` by ``59.8``, ``69.39M`` by
``69,386,240``), and, where the prose gives a unit, by an output that shows the same unit
(``512 MiB`` is not backed by ``512`` in a list of token counts). Figures of one
significant digit are read only with a unit (``2 GiB``, ``eight heads``). Left out, as
structure rather than claims: chapter/section/exercise/figure/cell references, citation
years, link targets and HTML attributes, and the givens of an exercise's question (a cell's
text from a line that opens with ``**Exercise`` on), which its ``check()`` grades.

``ALLOWED`` lists, per notebook, numbers the prose states that no output shows today; each
entry is a debt, and the test also fails when an allowed number no longer needs allowing,
so the list only shrinks.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from _prose_numbers import Number, read_numbers, rounds_to, shown_numbers

NOTEBOOKS = sorted((Path(__file__).parent.parent / "chapters").glob("*.ipynb"))

# Numbers the prose states that no output shows, by notebook stem: the third edition's
# list (issue 33) to clear by printing the number in a cell or correcting the prose. Never
# widen it; an entry is the number as the prose writes it, once for each place it is unbacked.
ALLOWED: dict[str, list[str]] = {
    "05_costs_and_flashattention": [
        "1.25 times",
        "16 heads",
        "64",
        "69.21M",
        "69.39M",
        "8 heads",
        "8 heads",
        "two bytes",
    ],
    "06_kv_cache_and_serving": ["200", "70B", "80 layers", "eight times", "two hundred times"],
}

_STRUCTURE = re.compile(
    r"(?:chapters?|sections?|exercises?|figures?|fig\.|cells?|steps?|parts?|items?|equation|eq\.|table|"
    r"algorithm|line|lines|appendix|version|since|v|python|torch|pytorch)\s*\(?\s*\d+(?:\.\d+)*"
    r"(?:\s*(?:,|and|or|-|–|to)\s*\d+(?:\.\d+)*)*",
    re.IGNORECASE,
)
_YEAR = r"(?:19|20)\d\d[a-z]?"
_CITATION = re.compile(
    rf"\(\s*{_YEAR}(?:\s*,\s*{_YEAR})*\s*\)"  # "Attention Is All You Need" (2017), Hutter (2017, 2019)
    rf"|(?:et\s+al\.?|[A-Z][A-Za-z\-]+),?\s+{_YEAR}\b"  # Dao, 2023; Kudo 2018; Kwon et al. 2023
)
_LINK_TARGET = re.compile(r"\]\([^)]*\)|<[^>]*>|https?://\S+|\{(?:ref|doc|numref|eq)\}`[^`]*`|\(([\w-]+)\)=")
_ID = re.compile(r"\b\d+\.[a-z][\w-]*")  # exercise ids such as 1.longer-query
_NUMBERED_LIST = re.compile(r"^\s*\d+\.\s", re.MULTILINE)


def prose_numbers(markdown: str) -> list[Number]:
    """The numbers a markdown cell states, with their units."""
    text = markdown.replace("{,}", ",")  # LaTeX's thousands separator, 33{,}088
    for pattern in (_LINK_TARGET, _ID, _NUMBERED_LIST, _CITATION, _STRUCTURE):
        text = pattern.sub(lambda m: " " * len(m[0]), text)
    numbers = []
    for number in read_numbers(text, words=True):
        digits = str(abs(number.value / number.quantum).to_integral_value()).lstrip("0")
        if number.unit is not None or len(digits) >= 2 or "^" in number.text or re.search(r"\de", number.text):
            # a lone single digit is structure; 1e-5 and 10^6 are figures
            numbers.append(number)
    return numbers


_EXERCISE = re.compile(r"^\*\*Exercise", re.MULTILINE)


def _prose_part(markdown: str) -> str:
    """The markdown before its first exercise question: a question's givens are inputs."""
    match = _EXERCISE.search(markdown)
    return markdown if match is None else markdown[: match.start()]


def unbacked_numbers(cells: list[dict]) -> list[tuple[int, str]]:
    """(cell index, number as written) for each prose number that no output shows."""
    shown = shown_numbers(cells)
    missing = []
    for index, cell in enumerate(cells):
        markdown = _prose_part("".join(cell["source"]))
        if cell["cell_type"] != "markdown":
            continue
        for number in prose_numbers(markdown):
            if not any(
                rounds_to(value, number) and (number.unit is None or number.unit in units) for value, units in shown
            ):
                missing.append((index, " ".join(number.text.split())))
    return missing


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _against_allowed(stem: str, cells: list[dict]) -> tuple[list[tuple[int, str]], Counter, Counter]:
    """The unbacked numbers, those of them ALLOWED does not list, and listed ones now backed."""
    allowed = Counter(ALLOWED.get(stem, []))
    missing = unbacked_numbers(cells)
    found = Counter(number for _, number in missing)
    return missing, found - allowed, allowed - found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_prose_number_is_shown_by_an_output(path):
    missing, new, settled = _against_allowed(path.stem, _cells(path))
    assert not new, f"{path.name}: numbers in the prose that no output shows: " + ", ".join(
        f"cell {cell}: {number}" for cell, number in missing if number in new
    )
    assert not settled, f"{path.name}: ALLOWED lists {sorted(settled)}, which an output now shows: remove them"


def test_allow_list_names_existing_notebooks():
    assert set(ALLOWED) <= {path.stem for path in NOTEBOOKS}
    assert any(path.stem.startswith("appendix") for path in NOTEBOOKS)


# --- the test of the test ------------------------------------------------------------------


def _edited(stem: str, index: int, before: str, after: str) -> list[dict]:
    cells = copy.deepcopy(_cells(next(p for p in NOTEBOOKS if p.stem == stem)))
    source = "".join(cells[index]["source"])
    assert before in source, f"{stem} cell {index} no longer says {before!r}: update this test"
    cells[index]["source"] = [source.replace(before, after, 1)]
    return cells


def _summary_cell(stem: str) -> int:
    cells = _cells(next(p for p in NOTEBOOKS if p.stem == stem))
    return next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## Summary"))


@pytest.mark.parametrize(
    ("stem", "before", "after", "caught"),
    [
        # the five stale edits of chapter 6's summary that the first version of this test let through
        ("06_kv_cache_and_serving", "512 MiB", "256 MiB", "256 MiB"),
        ("06_kv_cache_and_serving", "2 GiB", "3 GiB", "3 GiB"),
        ("06_kv_cache_and_serving", "with 8 KV heads", "with 16 KV heads", "16 KV heads"),
        ("06_kv_cache_and_serving", "are 140 GB", "are 130 GB", "130 GB"),
        ("06_kv_cache_and_serving", "four times as much", "eight times as much", "eight times"),
        # a unit changed but not the number: 140 GB is printed, 140 GiB is not
        ("06_kv_cache_and_serving", "are 140 GB", "are 140 GiB", "140 GiB"),
        ("06_kv_cache_and_serving", "29.2 ms", "29.7 ms", "29.7 ms"),
        ("06_kv_cache_and_serving", "4.125 bits", "4.375 bits", "4.375 bits"),
    ],
)
def test_a_stale_summary_number_is_caught(stem, before, after, caught):
    index = _summary_cell(stem)
    assert (index, caught) not in unbacked_numbers(_cells(next(p for p in NOTEBOOKS if p.stem == stem)))
    assert (index, caught) in unbacked_numbers(_edited(stem, index, before, after))


def _backed(number: Number, shown) -> bool:
    return any(rounds_to(value, number) and (number.unit is None or number.unit in units) for value, units in shown)


def test_an_allowed_number_does_not_cover_a_second_place():
    """Chapter 6 owes "eight times" in one cell; the same words typed into its summary are new."""
    stem = "06_kv_cache_and_serving"
    assert "eight times" in ALLOWED[stem]
    _, new, _ = _against_allowed(stem, _edited(stem, _summary_cell(stem), "four times as much", "eight times as much"))
    assert new == Counter({"eight times": 1})


def test_every_backed_number_of_every_notebook_is_caught_when_changed():
    """Rewrite each backed prose number of every notebook three steps of its own precision
    higher: each is then unbacked, unless an output happens to print the new value too."""
    checked = 0
    for path in NOTEBOOKS:
        cells = _cells(path)
        shown = shown_numbers(cells)
        for cell in cells:
            markdown = _prose_part("".join(cell["source"])).replace("{,}", ",")
            if cell["cell_type"] != "markdown":
                continue
            for number in prose_numbers(markdown):
                digits = re.match(r"[\d,._]+", number.text)
                if digits is None or re.search(r"\de|\^", number.text) or not _backed(number, shown):
                    continue
                written = digits[0].replace(",", "").replace("_", "")
                places = len(written.split(".")[1]) if "." in written else 0
                new = f"{Decimal(written) + 3 * Decimal(1).scaleb(-places):.{places}f}"
                edited = markdown[: number.start] + new + markdown[number.start + len(digits[0]) :]
                again = next(n for n in prose_numbers(edited) if n.start == number.start)
                assert again.value != number.value, (path.stem, number.text, new)
                if not any(rounds_to(value, again) for value, _ in shown):
                    assert not _backed(again, shown), (path.stem, number.text, new)
                    checked += 1
    assert checked > 300


def _chapter(markdown: str, output: str, source: str = "x = 1") -> list[dict]:
    return [
        {"cell_type": "markdown", "source": [markdown]},
        {"cell_type": "code", "source": [source], "outputs": [{"output_type": "stream", "text": [output]}]},
    ]


@pytest.mark.parametrize(
    ("markdown", "output", "expected"),
    [
        ("each extra query visits 511 keys", "visits 639 keys", ["511"]),  # stale after a default changed
        ("each extra query visits 639 keys", "visits 639 keys", []),
        ("the weight is 0.67", "weight 0.6698", []),  # rounded at the prose's precision
        ("the weight is 0.66", "weight 0.6698", ["0.66"]),  # mis-rounded
        ("146,240 parameters", "146240 parameters", []),  # separators do not matter
        ("about 60 % masked", "masked: 59.8%", []),
        ("about 61 % masked", "masked: 60%", ["61 %"]),
        ("see chapter 12 and exercise 5.3, step 16", "", []),  # structure, not figures
        ("as Kwon et al. (2023) and Dao, 2023 show", "", []),  # citations
        ("[chapter 5](05_costs_and_flashattention.ipynb)", "", []),  # link targets
        ("check 3.rope-pairs and $d_k = 64$", "d_k = 64", []),
        ("$d_k = 64$", "d_k = 32", ["64"]),
        ("$d_k = 64$", "", ["64"]),  # a cell's source is not an output
        ("a single digit such as 4 or 0.5 is structure", "", []),
        ("**Exercise 6.10.** A GPU has 80 GiB.", "", []),  # an exercise's givens
        ("It takes 3 GiB.\n\n## Check yourself\n\n**Exercise 6.10.** A GPU has 80 GiB.", "", ["3 GiB"]),
        # units: the same number with another unit, or none, does not back it
        ("the cache takes 512 MiB", "512 tokens", ["512 MiB"]),
        ("the cache takes 512 MiB", "peak MiB: 512.0", []),  # a label before the number
        ("weights take 140 GB", "140 GB (decimal) = 130.4 GiB", []),
        ("weights take 130 GB", "140 GB (decimal) = 130.4 GiB", ["130 GB"]),
        ("it takes 2 GiB", "h_kv = 32: 2 GiB", []),  # single digits are read when they carry a unit
        ("it takes 3 GiB", "h_kv = 32: 2 GiB", ["3 GiB"]),
        ("with eight KV heads", "n_kv_heads=8", []),  # number words with a unit
        ("with eight KV heads", "n_kv_heads=4, 8 steps", ["eight KV heads"]),
        ("four times as much", "ratio 4.0", []),
        ("eight times as much", "ratio 4.0", ["eight times"]),
        ("it occurs 5 times here", "", []),  # a count of events, not a ratio
        ("tiled is 1.47x SDPA", "tiled / SDPA 1.47", []),  # suffixes
        ("tiled is 1.57x SDPA", "tiled / SDPA 1.47", ["1.57x"]),
        ("it moves 69.39M elements", "69,386,240 elements", []),
        ("it moves 69.49M elements", "69,386,240 elements", ["69.49M"]),
        ("with eps = 1e-5", "eps 1e-05", []),
        ("with eps = 1e-6", "eps 1e-05", ["1e-6"]),
        ("under $10^{-12}$", "max diff 1e-12", []),
        ("7.4, 9.5 and 25.2 ms", "7.4 ms 9.5 ms 25.2 ms", []),  # a list shares its unit
        ("7.4, 9.5 and 25.2 ms", "7.4 9.5 25.2 ms", ["7.4", "9.5"]),
        ("ends at 0.377 nats", "loss 0.377", []),  # an output about a loss is in nats
        ("ends at 0.377 nats", "weight 0.377", ["0.377 nats"]),
    ],
)
def test_prose_number_rules(markdown, output, expected):
    assert [number for _, number in unbacked_numbers(_chapter(markdown, output))] == expected
