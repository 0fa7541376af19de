"""Every number a chapter's prose states is printed or written by a cell of that chapter.

The book's promise is that its numbers are computed. A number typed into the markdown can
go stale when a default changes (the cell prints the new value, the prose keeps the old
one), and nbval cannot see it: nbval compares outputs, not prose. This test reads each
chapter and fails on a number that its markdown states but that no code cell (source or
stored output) of the same chapter shows, naming the chapter, the cell and the number.

What counts as a number: a figure with at least two significant digits (``0.6698``,
``146,240``, ``512``, ``2.5``), read in prose, inline code and maths alike. Left out, as
structure rather than claims: single digits, chapter/section/exercise/figure/cell
references, citation years ("Dao, 2023", "Kwon et al. 2023"), link targets and HTML
attributes. A prose number is backed when a cell shows the same value, or a value that
rounds to it at the prose's precision (``0.67`` is backed by an output ``0.6698``;
``60`` by ``59.8``); thousands separators and a trailing ``%`` do not matter.

``ALLOWED`` lists, per chapter, numbers the chapter states without a cell today; each
entry is a debt, and the test also fails when an allowed number no longer needs allowing,
so the list only shrinks.
"""

from __future__ import annotations

import json
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

CHAPTERS = sorted((Path(__file__).parent.parent / "chapters").glob("[0-9][0-9]_*.ipynb"))

# Unbacked numbers allowed for now, by chapter (the notebook's stem). Empty a chapter's
# entry by printing the number in a cell or correcting the prose, never by widening it.
ALLOWED: dict[str, set[str]] = {
    "01_one_attention_read": set(),
    "02_batches_and_heads": set(),
    "03_masks_and_positions": set(),
    "04_transformer_block": set(),
    "05_costs_and_flashattention": set(),
    "06_kv_cache_and_serving": set(),
    "07_tokenizers": set(),
    "08_vision_transformer": set(),
    "09_capstone_tiny_gpt": set(),
}

_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w])")
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


def _prose_numbers(markdown: str) -> list[str]:
    """The numbers a markdown cell states, as written (separators removed)."""
    text = markdown.replace("{,}", ",")  # LaTeX's thousands separator, 33{,}088
    text = _LINK_TARGET.sub(" ", text)
    text = _ID.sub(" ", text)
    text = _NUMBERED_LIST.sub(" ", text)
    text = _CITATION.sub(" ", text)
    text = _STRUCTURE.sub(" ", text)
    found = []
    for match in _NUMBER.finditer(text):
        whole, fraction = match.group(1).replace(",", ""), match.group(2) or ""
        digits = (whole + fraction[1:]).lstrip("0")
        if len(digits) < 2:  # single digits (and 0.5, 0.1) are structure, not figures
            continue
        found.append(whole + fraction)
    return found


def _cell_numbers(cells: list[dict]) -> set[Decimal]:
    """Every number shown by a code cell: in its source, or in its stored outputs."""
    texts = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        texts.append("".join(cell["source"]))
        for output in cell.get("outputs", []):
            if "text" in output:
                texts.append("".join(output["text"]))
            for mime in ("text/plain", "text/html", "text/markdown", "text/latex"):
                if mime in output.get("data", {}):
                    texts.append("".join(output["data"][mime]))
    numbers = set()
    for text in texts:
        for match in re.finditer(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:e([+-]?\d+))?", text):
            value = Decimal(match.group(1).replace(",", "") + (match.group(2) or ""))
            if match.group(3):
                value = value.scaleb(int(match.group(3)))
            numbers.add(value)
        for match in re.finditer(r"\b\d{1,3}(?:_\d{3})+\b", text):  # Python literals such as 4_096
            numbers.add(Decimal(match.group(0).replace("_", "")))
    return numbers


def _backed(number: str, shown: set[Decimal]) -> bool:
    value = Decimal(number)
    if value in shown:
        return True
    places = -value.as_tuple().exponent
    quantum = Decimal(1).scaleb(-places)
    return any(
        s != s.to_integral_value() or places > 0  # an integer is backed by a rounded decimal, not another integer
        for s in shown
        if s.quantize(quantum, rounding=ROUND_HALF_UP) == value
    )


def unbacked_numbers(cells: list[dict]) -> list[tuple[int, str]]:
    """(cell index, number) for each number the markdown states that no code cell shows."""
    shown = _cell_numbers(cells)
    missing = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        for number in _prose_numbers("".join(cell["source"])):
            if not _backed(number, shown):
                missing.append((index, number))
    return missing


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_prose_number_is_shown_by_a_cell(path):
    allowed = ALLOWED.get(path.stem, set())
    missing = unbacked_numbers(_cells(path))
    new = [(cell, number) for cell, number in missing if number not in allowed]
    assert not new, f"{path.name}: numbers in the prose that no code cell shows: " + ", ".join(
        f"cell {cell}: {number}" for cell, number in new
    )
    settled = allowed - {number for _, number in missing}
    assert not settled, f"{path.name}: ALLOWED lists {sorted(settled)}, which a cell now shows: remove them"


def test_allow_list_names_existing_chapters():
    assert set(ALLOWED) <= {path.stem for path in CHAPTERS}


# --- the test of the test ------------------------------------------------------------------


def _chapter(markdown: str, output: str, source: str = "x = 1") -> list[dict]:
    return [
        {"cell_type": "markdown", "source": [markdown]},
        {"cell_type": "code", "source": [source], "outputs": [{"output_type": "stream", "text": [output]}]},
    ]


def test_a_number_edited_by_hand_is_caught():
    """Take a real chapter, change one backed prose number by hand: the test names it."""
    path = next(p for p in CHAPTERS if p.stem.startswith("01_"))
    cells = _cells(path)
    before = set(unbacked_numbers(cells))
    index, number = next(
        (i, n)
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "markdown"
        for n in _prose_numbers("".join(cell["source"]))
        if "." in n and (i, n) not in before
    )
    edited = str(Decimal(number) + Decimal(1).scaleb(Decimal(number).as_tuple().exponent) * 3)
    cells[index] = dict(cells[index], source=["".join(cells[index]["source"]).replace(number, edited, 1)])
    assert (index, edited) in unbacked_numbers(cells)


@pytest.mark.parametrize(
    ("markdown", "output", "expected"),
    [
        ("each extra query visits 511 keys", "visits 639 keys", ["511"]),  # stale after a default changed
        ("each extra query visits 639 keys", "visits 639 keys", []),
        ("the weight is 0.67", "weight 0.6698", []),  # rounded at the prose's precision
        ("the weight is 0.66", "weight 0.6698", ["0.66"]),  # mis-rounded
        ("146,240 parameters", "146240", []),  # separators do not matter
        ("about 60 % masked", "masked: 59.8%", []),
        ("about 61 % masked", "masked: 60%", ["61"]),
        ("see chapter 12 and exercise 5.3, step 16", "", []),  # structure, not figures
        ("as Kwon et al. (2023) and Dao, 2023 show", "", []),  # citations
        ("[chapter 5](05_costs_and_flashattention.ipynb)", "", []),  # link targets
        ("check 3.rope-pairs and $d_k = 64$", "d_k = 64", []),
        ("$d_k = 64$", "d_k = 32", ["64"]),
        ("a single digit such as 4 or 0.5 is structure", "", []),
    ],
)
def test_prose_number_rules(markdown, output, expected):
    assert [number for _, number in unbacked_numbers(_chapter(markdown, output))] == expected
