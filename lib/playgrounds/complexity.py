"""Chapter 5: the attention-complexity playground.

Pick a sequence length N, a window w, a number of global tokens g and a pattern (dense,
causal, windowed, sparse/global, linear). See how many query-key pairs (edges) the
pattern allows and the attention FLOPs it models, against N on log-log axes, with dense
attention for reference; and beside them the CPU times recorded by
``python -m lib.bench attention`` (``chapters/results/*.csv``) where we have them.

Counts are not latency. A count says how much arithmetic a kernel that skips exactly the
disallowed pairs would do; a measured time also pays for memory traffic, tiles that are
partly masked, Python and kernel overheads, and whatever else the machine was doing.

Three layers, as in every playground: ``complexity_curves`` computes (pure, tested),
``plot_complexity`` draws one state (the static figure in the built book), and
``complexity_playground`` wires widgets to the two.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from lib.costs import PATTERNS, pattern_flops, pattern_pairs
from lib.validation import is_integer

RESULTS = Path(__file__).resolve().parents[2] / "chapters" / "results"
SIZES = tuple(2**p for p in range(8, 18))  # N = 256 .. 131072
LABELS = {
    "dense": "dense",
    "causal": "causal",
    "window": "windowed",
    "global+local": "sparse/global",
    "linear": "linear (elu+1)",
}


@dataclass(frozen=True)
class ComplexityCurves:
    """Modeled work of one pattern against N, and what was measured for it on a CPU."""

    pattern: str
    n: int  # the chosen length, marked on the curves
    window: int
    n_global: int
    sizes: tuple[int, ...]
    pairs: tuple[int, ...] | None  # edges per N; None for linear attention, which forms no pairs
    flops: tuple[int, ...]
    dense_pairs: tuple[int, ...]
    dense_flops: tuple[int, ...]
    pairs_at_n: int | None
    flops_at_n: int
    doubling: float  # modeled work at 2N / work at N
    measured: dict[str, tuple[tuple[int, float], ...]] = field(default_factory=dict)  # label -> ((N, ms), ...)
    note: str = ""  # why nothing, or only part, was measured
    heads: int = 8  # the FLOP model's heads and head width (the measured runs used 8 and 64)
    head_dim: int = 64


def _read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _series(rows: list[dict], impl: str, causal: bool, window: int | None = None) -> tuple[tuple[int, float], ...]:
    points = [
        (int(row["n"]), float(row["median_ms"]))
        for row in rows
        if row["impl"] == impl
        and row["causal"] == str(causal)
        and (window is None or row.get("window") == str(window))
        and row.get("head_dim", "64") == "64"
    ]
    return tuple(sorted(points))


def measured_times(
    pattern: str, window: int, results: Path = RESULTS
) -> tuple[dict[str, tuple[tuple[int, float], ...]], str]:
    """CPU times recorded for a pattern, as label -> ((N, ms), ...), and a note on what is missing."""
    dense_rows = _read_rows(results / "attention_cpu.csv")
    pattern_rows = _read_rows(results / "attention_window_cpu.csv")
    series: dict[str, tuple[tuple[int, float], ...]] = {}
    note = ""
    if pattern in ("dense", "causal"):
        causal = pattern == "causal"
        series = {
            f"tiled ({pattern})": _series(dense_rows, "tiled", causal),
            f"torch SDPA ({pattern})": _series(dense_rows, "sdpa", causal),
        }
    elif pattern == "window":
        recorded = sorted({int(row["window"]) for row in pattern_rows if row["impl"] == "tiled-window"})
        series = {f"windowed tiled (w={window})": _series(pattern_rows, "tiled-window", True, window)}
        if not series[f"windowed tiled (w={window})"]:
            note = f"no windowed run recorded at w={window}" + (f" (recorded: w={recorded})" if recorded else "")
    elif pattern == "linear":
        series = {"linear, causal (chunked)": _series(pattern_rows, "linear-causal", True)}
    else:
        note = "no kernel here skips the sparse/global pattern's work: nothing measured"
    if pattern != "dense":  # dense tiled for reference, from the same run as the pattern's where there is one
        same_run = pattern_rows if pattern in ("window", "linear") else dense_rows
        series["tiled (dense, for reference)"] = _series(same_run, "tiled", False) or _series(
            dense_rows, "tiled", False
        )
    series = {label: points for label, points in series.items() if points}
    if not series and not note:
        note = f"no CPU results under {results.name}/ (run python -m lib.bench attention)"
    return series, note


def page_data(results: Path = RESULTS) -> dict:
    """What ``measured_times`` reads, for the live playground of the built book (no kernel there).

    The rows of both CSVs as ``csv.DictReader`` gives them, and the folder's name for the note;
    ``book/_ext/book_offline.py`` writes them to ``book/_static/playground-data.js``, and
    ``book/_static/playgrounds.js`` redoes ``measured_times`` on them.
    """
    return {
        "results_name": results.name,
        "attention_cpu": _read_rows(results / "attention_cpu.csv"),
        "attention_window_cpu": _read_rows(results / "attention_window_cpu.csv"),
    }


def complexity_curves(
    pattern: str = "window",
    n: int = 4096,
    *,
    window: int = 256,
    n_global: int = 16,
    head_dim: int = 64,
    heads: int = 8,
    results: Path = RESULTS,
) -> ComplexityCurves:
    """The modeled edges and FLOPs of ``pattern`` at N in SIZES (and at ``n``), and its CPU times.

    FLOPs are attention only (QKᵀ and AV, or linear attention's two products) for ``heads``
    heads of width ``head_dim``, from ``lib.costs.pattern_flops``.
    """
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")
    for name, value, least in (("n", n, 1), ("window", window, 1), ("n_global", n_global, 0)):
        if not is_integer(value) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    options = {"window": window, "n_global": n_global}

    def flops(pattern_name: str, length: int) -> int:
        return pattern_flops(pattern_name, length, head_dim=head_dim, heads=heads, **options)

    pairs = None if pattern == "linear" else tuple(pattern_pairs(pattern, size, **options) for size in SIZES)
    measured, note = measured_times(pattern, window, results)
    return ComplexityCurves(
        pattern=pattern,
        n=n,
        window=window,
        n_global=n_global,
        sizes=SIZES,
        pairs=pairs,
        flops=tuple(flops(pattern, size) for size in SIZES),
        dense_pairs=tuple(pattern_pairs("dense", size) for size in SIZES),
        dense_flops=tuple(flops("dense", size) for size in SIZES),
        pairs_at_n=pattern_pairs(pattern, n, **options),
        flops_at_n=flops(pattern, n),
        doubling=flops(pattern, 2 * n) / flops(pattern, n),
        measured=measured,
        note=note,
        heads=heads,
        head_dim=head_dim,
    )


def describe(curves: ComplexityCurves) -> str:
    """The chosen point in words: edges, FLOPs, the share of dense, and what doubling N does."""
    dense = pattern_pairs("dense", curves.n)
    label = LABELS[curves.pattern]
    edges = (
        "no query-key pairs (a fixed-size summary of the keys instead)"
        if curves.pairs_at_n is None
        else f"{curves.pairs_at_n:,} edges ({curves.pairs_at_n / dense:.2%} of dense)"
    )
    lines = [
        f"{label} at N = {curves.n:,}: {edges}",
        f"modeled attention FLOPs: {curves.flops_at_n / 1e9:,.2f} GFLOP; doubling N multiplies them by "
        f"{curves.doubling:.2f}",
        "counts are a model of arithmetic, not measured latency",
    ]
    if curves.note:
        lines.append(curves.note)
    return "\n".join(lines)


def plot_complexity(curves: ComplexityCurves) -> Figure:
    """Edges, FLOPs and measured CPU time against N, all log-log, dense for reference."""
    # 8 in wide, text 10 pt or more: figure text reads at 11 px or more in the book's column at 1280 px
    fig, axes = plt.subplot_mosaic([["pairs", "flops"], ["time", "time"]], figsize=(8, 6.6), layout="constrained")
    ax_pairs, ax_flops, ax_time = axes["pairs"], axes["flops"], axes["time"]
    label = LABELS[curves.pattern]
    sizes = curves.sizes
    ax_pairs.loglog(sizes, curves.dense_pairs, color="tab:gray", linestyle="--", label="dense")
    if curves.pairs is not None:
        ax_pairs.loglog(sizes, curves.pairs, marker="o", markersize=3, label=label)
        ax_pairs.plot([curves.n], [curves.pairs_at_n], marker="*", markersize=12, color="tab:red", linestyle="")
    else:
        ax_pairs.text(0.5, 0.5, "linear attention\nforms no pairs", transform=ax_pairs.transAxes, ha="center")
    ax_pairs.set(title="allowed query-key pairs", xlabel="sequence length N (tokens)", ylabel="edges")
    ax_pairs.legend(loc="upper left", fontsize=10)

    ax_flops.loglog(sizes, curves.dense_flops, color="tab:gray", linestyle="--", label="dense")
    ax_flops.loglog(sizes, curves.flops, marker="o", markersize=3, label=label)
    ax_flops.plot([curves.n], [curves.flops_at_n], marker="*", markersize=12, color="tab:red", linestyle="")
    ax_flops.set(xlabel="sequence length N (tokens)", ylabel="FLOPs")
    ax_flops.set_title(f"modeled attention FLOPs ({curves.heads} heads, d={curves.head_dim})", fontsize=11)
    ax_flops.legend(loc="upper left", fontsize=10)

    for series_label, points in curves.measured.items():
        style = {"color": "tab:gray", "linestyle": "--"} if "reference" in series_label else {}
        ax_time.loglog(*zip(*points, strict=True), marker="o", markersize=3, label=series_label, **style)
    if curves.measured:
        ax_time.legend(loc="upper left", fontsize=10)
    if curves.note:
        ax_time.text(0.5, 0.08, curves.note, transform=ax_time.transAxes, ha="center", fontsize=10, wrap=True)
    ax_time.set(title="measured on a CPU (recorded)", xlabel="sequence length N (tokens)", ylabel="time (ms)")
    if not curves.measured:
        ax_time.set(xscale="log", yscale="log", xlim=(sizes[0], sizes[-1]), ylim=(1, 1e4))
    for ax in (ax_pairs, ax_flops, ax_time):
        ax.xaxis.set_minor_formatter(NullFormatter())  # no crowded labels between the powers of ten
    measured_sizes = sorted({size for points in curves.measured.values() for size, _ in points})
    if measured_sizes:  # the recorded runs span less than a decade: label each N they measured
        ax_time.set_xticks(
            measured_sizes, [f"{size // 1024}k" if size >= 1024 else str(size) for size in measured_sizes]
        )
        ax_time.minorticks_off()
    extra = {"window": f", w={curves.window}", "global+local": f", w={curves.window}, g={curves.n_global}"}
    fig.suptitle(f"{label}{extra.get(curves.pattern, '')}: counts are a model, not latency")
    return fig


def complexity_playground() -> widgets.Widget:
    """Widgets for ``complexity_curves``: N, window, global tokens and pattern."""
    style = {"description_width": "initial"}
    pattern = widgets.Dropdown(
        options=[(LABELS[name], name) for name in PATTERNS], value="window", description="pattern", style=style
    )
    n = widgets.SelectionSlider(options=list(SIZES), value=4096, description="N (tokens)", style=style)
    window = widgets.IntSlider(value=256, min=1, max=4096, step=1, description="window w", style=style)
    n_global = widgets.IntSlider(value=16, min=0, max=256, step=1, description="global tokens g", style=style)

    def show(pattern, n, window, n_global):
        curves = complexity_curves(pattern, n, window=window, n_global=n_global)
        print(describe(curves))
        plot_complexity(curves)
        plt.show()

    controls = {"pattern": pattern, "n": n, "window": window, "n_global": n_global}
    output = widgets.interactive_output(show, controls)
    return widgets.VBox([widgets.HBox([pattern, n]), widgets.HBox([window, n_global]), output])
