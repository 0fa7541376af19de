"""Reading numbers, with their precision and unit, from a chapter's prose and its outputs.

``tests/test_prose_numbers.py`` holds each number a chapter's markdown states against what
the chapter's code cells print. The reading rules:

- A number is a figure as written (a denominator, the 471 of ``600/471``, is part of its
  fraction and not read alone): ``512``, ``146,240``, ``4_096``, ``0.6698``, ``1e-5``,
  ``2.5 \\times 10^{-3}``, ``10^6``, with a scale suffix (``69.39M``, ``70B``: the value is
  scaled and the precision stays the written one, so ``69.39M`` is 69,390,000 to the nearest
  10,000) or a ratio suffix (``1.47x``, ``4×``).
- Its unit is the word that follows it, maybe after one modifier (``512 MiB``, ``8 KV heads``,
  ``29.2 ms``, ``0.377 nats``, ``four times as much``); a list shares its last member's unit
  (``7.4, 9.5 and 25.2 ms``). Bytes keep their prefix and base, so GB is not GiB. "times"
  is a ratio only before a comparison (``256 times smaller``), not in ``occurs 5 times``.
- Number words are read when a unit follows them (``two GiB``, ``eight times as much``,
  ``two hundred times less``); single digits, written as digits, when they carry a unit.
- In an output, a number's unit is the word after it, else a label just before it with
  no number between (``peak MiB: 34``, ``h_kv = 8``, ``n_layers=2``, ``tiled / SDPA 1.47``
  is a ratio), else its column's header in a table; any number of an output that speaks
  of nats or of a loss is in nats.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from typing import NamedTuple

UNITS = {
    **{unit: unit for unit in ("B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "GB/s", "TB/s", "MB/s")},
    "bytes": "B",
    "byte": "B",
    "s": "s",
    "seconds": "s",
    "second": "s",
    "ms": "ms",
    "µs": "µs",
    "us": "µs",
    "ns": "ns",
    "minutes": "min",
    "minute": "min",
    "min": "min",
    "x": "x",
    "×": "x",
    "times": "x",
    "%": "%",
    "percent": "%",
    "heads": "heads",
    "head": "heads",
    "layers": "layers",
    "layer": "layers",
    "parameters": "parameters",
    "parameter": "parameters",
    "params": "parameters",
    "nats": "nats",
    "nat": "nats",
    "bits": "bits",
    "bit": "bits",
    "FLOPs": "FLOPs",
    "FLOP": "FLOPs",
    "TFLOPS": "TFLOPS",
}
_UNIT_ALT = "|".join(sorted((re.escape(unit) for unit in UNITS), key=len, reverse=True))
_MODIFIER = r"(?:KV|query|key|value|attention|decoder|encoder|more|fewer|new|extra)"
_UNIT_AFTER = re.compile(rf"\s*(?:\\,|~|\\ )?\s*(?:{_MODIFIER}\s+)?({_UNIT_ALT})(?![\w/])")
_COMPARATIVE = re.compile(
    r"\s+(?:as|more|less|fewer|smaller|larger|bigger|longer|shorter|faster|slower|higher|lower|likelier|"
    r"the|that|over|cheaper|dearer|costlier|greater)\b"
)
_SCALE = {"k": 3, "K": 3, "M": 6, "B": 9, "G": 9, "T": 12}
_NUMBER = re.compile(
    r"(?<![\w./])(?<![A-Za-z]-)(?P<int>\d{1,3}(?:,\d{3})+|\d{1,3}(?:_\d{3})+|\d+)(?P<frac>\.\d+)?"
    r"(?:[eE](?P<exp>[+-]?\d+)|\s*(?:\\times|×|\\cdot)\s*10\^\{?(?P<exp2>[+-]?\d+)\}?)?"
    r"(?P<scale>[kKMBGT](?!\w))?(?P<x>x|×)?(?![\w^])"
)
_POWER = re.compile(r"(?<![\d.])10\^\{?(?P<exp>[+-]?\d+)\}?")
_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "sixteen": 16, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
}  # fmt: skip
_WORD_NUMBER = re.compile(rf"\b(?P<word>{'|'.join(_WORDS)})(?:\s+(?P<mult>hundred|thousand))?\b", re.IGNORECASE)
_LIST_GAP = re.compile(r"\s*(?:,|,?\s*and|,?\s*or|to|–|-)\s*")
_PRODUCT = re.compile(r"\s*[\d$\\(]")  # "8 × 0.5 GB" multiplies; it is not a ratio


class Number(NamedTuple):
    value: Decimal
    quantum: Decimal  # the precision it is written at: 0.01 for 1.47, 10,000 for 69.39M
    unit: str | None
    text: str
    start: int
    end: int


def read_numbers(text: str, words: bool = False) -> list[Number]:
    """Every number in ``text`` (number words too, with ``words``), in order."""
    found = []
    powers = []
    for match in _POWER.finditer(text):
        value = Decimal(1).scaleb(int(match["exp"]))
        found.append(Number(value, value, None, match[0], match.start(), match.end()))
        powers.append((match.start(), match.end()))
    for match in _NUMBER.finditer(text):
        if any(a <= match.start() < b for a, b in powers):
            continue
        frac = match["frac"] or ""
        exp = int(match["exp"] or match["exp2"] or 0) + _SCALE.get(match["scale"] or "", 0)
        value = Decimal(match["int"].replace(",", "").replace("_", "") + frac).scaleb(exp)
        quantum = Decimal(1).scaleb(exp - max(len(frac) - 1, 0))
        unit, end = ("x", match.end()) if match["x"] else _unit_after(text, match.end())
        found.append(Number(value, quantum, unit, text[match.start() : end], match.start(), end))
    if words:
        for match in _WORD_NUMBER.finditer(text):
            unit, end = _unit_after(text, match.end())
            if unit is not None:
                value = _WORDS[match["word"].lower()] * {"hundred": 100, "thousand": 1000}.get(
                    (match["mult"] or "").lower(), 1
                )
                found.append(Number(Decimal(value), Decimal(1), unit, text[match.start() : end], match.start(), end))
    spans = [(n.start, n.end) for n in found if not n.text.startswith("10^")]
    found = sorted((n for n in found if not any(a < n.start < b for a, b in spans)), key=lambda n: n.start)
    for i in range(len(found) - 2, -1, -1):  # "7.4, 9.5 and 25.2 ms": the list shares its unit
        left, right = found[i], found[i + 1]
        if (
            left.unit is None
            and right.unit
            and right.text[0].isdigit()
            and _LIST_GAP.fullmatch(text, left.end, right.start)
        ):
            found[i] = left._replace(unit=right.unit)
    return found


def _unit_after(text: str, end: int) -> tuple[str | None, int]:
    after = _UNIT_AFTER.match(text, end)
    if after is None:
        return None, end
    if after[1] == "times" and not _COMPARATIVE.match(text, after.end()):
        return None, end
    if UNITS[after[1]] == "x" and _PRODUCT.match(text, after.end()):
        return None, end
    return UNITS[after[1]], after.end()


def rounds_to(shown: Decimal, number: Number) -> bool:
    """Whether a value an output shows, rounded at the precision ``number`` is written at, is it."""
    steps = (shown / number.quantum).to_integral_value(rounding=ROUND_HALF_UP)
    return steps * number.quantum == number.value


# --- outputs -------------------------------------------------------------------------------

_LABEL = re.compile(rf"(?<![A-Za-z0-9])({_UNIT_ALT})(?![\w/])")
_ID_LABELS = [
    (re.compile(r"(?<![A-Za-z0-9])(?:h|h_kv|H|Hkv|n_heads|n_kv_heads|n_head|heads)\s*[=:]"), "heads"),
    (re.compile(r"(?<![A-Za-z0-9])(?:L|n_layers|n_layer|layers)\s*[=:]"), "layers"),
    (re.compile(r"ratio|e\^\w*|\w+ / \w+"), "x"),
]
_NATS = re.compile(r"nats|loss", re.IGNORECASE)


def output_texts(cells: list[dict]):
    """The text of every stored output of the code cells (never their source)."""
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        for output in cell.get("outputs", []):
            if "text" in output:
                yield "".join(output["text"])
            data = output.get("data", {})
            for mime in ("text/plain", "text/markdown", "text/latex"):
                if mime in data:
                    yield "".join(data[mime])
            if "text/html" in data and "text/plain" not in data:
                yield re.sub(r"<[^>]+>", " ", "".join(data["text/html"]))


def _labels(line: str, numbers: list[Number]) -> list[tuple[int, int, str]]:
    found = [
        (m.start(), m.end(), UNITS[m[1]])
        for m in _LABEL.finditer(line)
        if len(m[1]) > 1 and m[1] not in ("times", "us") and not any(n.start <= m.start() < n.end for n in numbers)
    ]
    for pattern, unit in _ID_LABELS:
        found += [(m.start(), m.end(), unit) for m in pattern.finditer(line)]
    return found


def shown_numbers(cells: list[dict]) -> list[tuple[Decimal, frozenset]]:
    """(value, the units it is shown with) for every number the outputs print."""
    shown = []
    for text in output_texts(cells):
        lines = text.splitlines() or [""]
        header = _labels(lines[0], read_numbers(lines[0]))
        whole = {"nats"} if _NATS.search(text) else set()
        for row, line in enumerate(lines):
            numbers = read_numbers(line)
            labels = _labels(line, numbers)
            for number in numbers:
                units = {number.unit} | whole
                if number.unit is None:
                    for _, label_end, unit in labels:  # "peak MiB: 34.0"
                        if next((n for n in numbers if n.start >= label_end), None) == number:
                            units.add(unit)
                if row:
                    units |= {unit for a, b, unit in header if a < number.end and number.start < b}
                shown.append((number.value, frozenset(units)))
    return shown
