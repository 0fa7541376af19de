"""lib.figures: the PNG every chapter stores for a figure, and the text size it records."""

import base64
import struct

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from lib.figures import (  # noqa: E402
    DPI,
    SMALLEST_TEXT_PT,
    SMALLEST_TEXT_PX,
    book_figures,
    drawn_font_sizes,
    figure_png,
    png_dpi,
    png_text_chunks,
    smallest_text_pt,
)


@pytest.fixture
def fig():
    figure, ax = plt.subplots(figsize=(6, 3))
    yield figure
    plt.close(figure)


def _png(fig) -> bytes:
    return base64.b64decode(figure_png(fig))


def test_the_smallest_drawn_text_is_found_whatever_draws_it(fig):
    ax = fig.axes[0]
    ax.plot([0, 1], label="a line")
    ax.set_title("title", fontsize=14)
    assert smallest_text_pt(fig) == 10.0  # matplotlib's tick labels, font.size 10
    ax.legend(fontsize="small")  # matplotlib: 0.833 x font.size
    assert smallest_text_pt(fig) == pytest.approx(8.33)
    ax.annotate("note", (0.5, 0.5), fontsize=7)
    assert smallest_text_pt(fig) == 7.0
    ax.text(0.2, 0.2, r"$\sqrt{2}$", fontsize=6.5)  # maths goes through the same call
    assert smallest_text_pt(fig) == 6.5


def test_text_that_is_not_drawn_does_not_count(fig):
    ax = fig.axes[0]
    ax.text(0.5, 0.5, "hidden", fontsize=4).set_visible(False)
    ax.text(0.5, 0.5, "   ", fontsize=3)  # nothing to see
    ax.set_xlabel("")
    assert min(drawn_font_sizes(fig)) == 10.0


def test_a_figure_without_text_records_none():
    figure = plt.figure(figsize=(2, 2))
    figure.add_axes((0, 0, 1, 1)).set_axis_off()
    try:
        assert smallest_text_pt(figure) is None
        chunks = png_text_chunks(_png(figure))
        assert SMALLEST_TEXT_PT not in chunks and SMALLEST_TEXT_PX not in chunks
    finally:
        plt.close(figure)


def test_the_png_is_at_200_dpi_and_records_the_smallest_text(fig):
    fig.axes[0].plot([0, 1], label="a line")
    fig.axes[0].set_ylabel("label", fontsize=12)
    fig.axes[0].legend(fontsize=9)
    png = _png(fig)
    chunks = png_text_chunks(png)
    assert chunks[SMALLEST_TEXT_PT] == "9.00"
    assert float(chunks[SMALLEST_TEXT_PX]) == pytest.approx(9 * DPI / 72, abs=0.01)
    assert png_dpi(png) == pytest.approx(DPI, abs=0.01)
    width, height = struct.unpack(">II", png[16:24])  # IHDR
    # cropped to what is drawn (bbox_inches="tight"), as Jupyter's own PNGs: at most the
    # figure's 6 x 3 inches at 200 dpi, plus the 0.1-inch pad on each side
    assert 0.6 * 6 * DPI < width <= (6 + 0.2) * DPI and 0.6 * 3 * DPI < height <= (3 + 0.2) * DPI


def test_png_text_chunks_refuses_what_is_not_a_png():
    with pytest.raises(ValueError, match="not a PNG"):
        png_text_chunks(b"GIF89a...")


def test_book_figures_makes_an_ipython_shell_store_the_books_png(fig):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        book_figures()
        data, _ = shell.display_formatter.format(fig)
        png = base64.b64decode(data["image/png"])
        assert png_text_chunks(png)[SMALLEST_TEXT_PT] == "10.00"
        assert png_dpi(png) == pytest.approx(DPI, abs=0.01)
    finally:
        InteractiveShell.clear_instance()


def test_book_figures_outside_ipython_does_nothing():
    assert book_figures() is None
