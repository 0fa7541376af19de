"""Book-wide rules every chapter notebook keeps (see CONTRIBUTING.md)."""

import json
import re
from pathlib import Path

import pytest

CHAPTERS = sorted((Path(__file__).parent.parent / "chapters").glob("*.ipynb"))
NBVAL_COMMENT = re.compile(r"#\s*NBVAL_\w+")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_code_cell_carries_an_nbval_comment(path):
    """nbval's markers are cell tags, so neither the book's reader nor a learner sees them."""
    marked = [i for i, cell in enumerate(_cells(path)) if NBVAL_COMMENT.search("".join(cell["source"]))]
    assert not marked, f"{path.name}: cells {marked} carry an NBVAL comment; use the nbval-check-output tag"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_checked_cells_are_tagged_code_cells_with_outputs(path):
    """A tag on a markdown cell, or on a cell stored without its output, would check nothing."""
    for i, cell in enumerate(_cells(path)):
        if "nbval-check-output" in cell.get("metadata", {}).get("tags", []):
            assert cell["cell_type"] == "code", (
                f"{path.name} cell {i}: nbval-check-output on a {cell['cell_type']} cell"
            )
            assert cell.get("outputs"), f"{path.name} cell {i}: checked cell stored without outputs"


def test_every_chapter_checks_some_outputs():
    for path in CHAPTERS:
        tagged = sum("nbval-check-output" in c.get("metadata", {}).get("tags", []) for c in _cells(path))
        assert tagged >= 5, f"{path.name}: only {tagged} cells tagged nbval-check-output"
