"""How every chapter's matplotlib figures are stored: the one place that sets their resolution.

Each chapter with figures calls ``book_figures()`` once, in its first cell. From then on a
figure the notebook shows is stored as a PNG drawn at ``DPI`` (200: twice matplotlib's 100),
so that the book, which shows a figure as wide as its column (660 px at a 1280-px window,
337 px on a phone), never enlarges it and a high-density screen gets the pixels it draws.
The PNG carries no display size, so the book's ``width: 100%``, JupyterLab and GitHub all
fit it to their column.

The PNG also records, in two text chunks, the size of the smallest text the figure draws:
``SMALLEST_TEXT_PT`` (points) and ``SMALLEST_TEXT_PX`` (pixels of this PNG: points x DPI / 72).
The size is read while the figure is drawn, from every piece of text it draws (titles,
labels, ticks, legends, annotations), not from rcParams. The book's browser test reads it to
find how large that text shows on the page: its pixels x displayed width / the PNG's width.
At a 1280-px window that is at least 11 px when a figure's smallest text has at least
1.2 points per inch of the figure's width (10 pt in an 8-inch figure).

>>> import base64
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> import matplotlib.pyplot as plt
>>> fig, ax = plt.subplots(figsize=(4, 3))
>>> _ = ax.plot([0, 1], label="a line")
>>> _ = ax.legend(fontsize=9)
>>> smallest_text_pt(fig)
9.0
>>> png = base64.b64decode(figure_png(fig))
>>> info = png_text_chunks(png)
>>> info[SMALLEST_TEXT_PT], info[SMALLEST_TEXT_PX]
('9.00', '25.00')
>>> round(png_dpi(png))
200
>>> plt.close(fig)
"""

from __future__ import annotations

import struct
import zlib

from matplotlib.figure import Figure

DPI = 200  # pixels per inch of a stored figure: twice matplotlib's default of 100
SMALLEST_TEXT_PT = "Smallest text (pt)"  # PNG text chunk: the smallest text the figure draws, in points
SMALLEST_TEXT_PX = "Smallest text (px)"  # the same in pixels of the PNG (points x DPI / 72)


def drawn_font_sizes(fig: Figure) -> list[float]:
    """The font size, in points, of every non-empty piece of text that drawing ``fig`` draws.

    The figure is drawn once with a renderer whose ``draw_text`` records the size instead of
    drawing: every text a figure shows (a tick label, a legend entry, an annotation, maths)
    goes through it, and text that is not drawn (a hidden artist, a tick outside the axes'
    view) does not.
    """
    sizes: list[float] = []
    renderer = fig.canvas.get_renderer()

    def record(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            sizes.append(prop.get_size_in_points())

    renderer.draw_text = record  # the instance's attribute hides the class's method for this draw
    try:
        fig.draw(renderer)
    finally:
        del renderer.draw_text
    return sizes


def smallest_text_pt(fig: Figure) -> float | None:
    """The smallest font size (points) among the texts ``fig`` draws; None when it draws none."""
    sizes = drawn_font_sizes(fig)
    return min(sizes) if sizes else None


def figure_png(fig: Figure) -> str | None:
    """``fig`` as the book stores it, base64-encoded: a PNG at ``DPI``, cropped to what is drawn (as Jupyter's
    own PNGs are), with the smallest text's size in its text chunks. None for an empty figure
    (nothing is shown, as in Jupyter)."""
    from IPython.core.pylabtools import print_figure

    smallest = smallest_text_pt(fig)
    metadata = {"Software": "lib.figures"}
    if smallest is not None:
        metadata[SMALLEST_TEXT_PT] = f"{smallest:.2f}"
        metadata[SMALLEST_TEXT_PX] = f"{smallest * DPI / 72:.2f}"
    return print_figure(fig, "png", bbox_inches="tight", dpi=DPI, base64=True, metadata=metadata) or None


def png_text_chunks(png: bytes) -> dict[str, str]:
    """The tEXt chunks of a PNG, keyword -> text (how the browser test reads the sizes back)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"not a PNG: it starts {png[:8]!r}")
    chunks: dict[str, str] = {}
    at = 8
    while at + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[at : at + 8])
        body = png[at + 8 : at + 8 + length]
        if kind == b"tEXt":
            keyword, _, text = body.partition(b"\0")
            chunks[keyword.decode("latin-1")] = text.decode("latin-1")
        elif kind == b"zTXt":
            keyword, _, rest = body.partition(b"\0")
            chunks[keyword.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        at += 12 + length
    return chunks


def png_dpi(png: bytes) -> float | None:
    """The pixels per inch a PNG's pHYs chunk declares (matplotlib writes the figure's dpi)."""
    at = 8
    while at + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[at : at + 8])
        if kind == b"pHYs":
            per_metre, _, unit = struct.unpack(">IIB", png[at + 8 : at + 17])
            return per_metre * 0.0254 if unit == 1 else None
        at += 12 + length
    return None


def book_figures() -> None:
    """Store every figure this notebook shows as ``figure_png`` draws it (call it once, in a
    chapter's first cell). Outside IPython (a script, a test) it does nothing."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return
    import matplotlib.pyplot as plt

    # Let the inline backend start first: when it starts it registers its own PNG formatter,
    # which would replace this one.
    plt.close(plt.figure())
    shell.display_formatter.formatters["image/png"].for_type(Figure, figure_png)
