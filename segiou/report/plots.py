"""The report's plots with matplotlib (Agg, no display): SVG for the HTML report, PNG to export.

Needs the ``report`` extra (``pip install 'segiou[report]'``). Figures are built with
:class:`matplotlib.figure.Figure` directly (never ``pyplot``: no global state, no display, safe in
threads). Text is drawn as paths (the SVG needs no font) and never read as mathtext, so a class
name with ``$`` stays as written.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from segiou.errors import UsageError
from segiou.outputs import write_atomic
from segiou.report.document import fmt_pct

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from segiou.report.view import Report

__all__ = ["PLOTS", "export_plots", "plot_figures", "require_plotting"]

#: The plots a report can hold: file stem -> title.
PLOTS = {
    "confusion": "Confusion matrix (rows: ground truth, normalised)",
    "class_iou": "IoU per class",
    "image_miou": "Per-image mIoU",
}
_RC: Any = {
    "svg.fonttype": "path",  # no font needed to show the SVG
    "svg.hashsalt": "segiou",  # the same report gives the same file
    "text.parse_math": False,  # "$x$" in a class name is text, not mathtext
    "font.size": 9,
    "axes.titlesize": 11,
}


def require_plotting(what: str = "the HTML report") -> None:
    """Check that the ``report`` extra (matplotlib, jinja2) is installed.

    Parameters
    ----------
    what : str
        How to name what needs it in the message.

    Raises
    ------
    UsageError
        matplotlib or jinja2 is missing; the message says what to install.
    """
    import importlib.util

    missing = [m for m in ("matplotlib", "jinja2") if importlib.util.find_spec(m) is None]
    if missing:
        msg = (
            f"{what} needs {' and '.join(missing)}, which are not installed: "
            "pip install 'segiou[report]'"
        )
        raise UsageError(msg)


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _confusion(report: Report) -> Figure | None:
    from segiou.report.view import void_label

    state = report.state
    if state is None:
        return None
    share = state.row_share
    k = share.shape[0]
    side = float(np.clip(1.8 + 0.3 * k, 5.5, 40.0))
    fig = _figure(side + 1.4, side)
    ax = fig.add_subplot()
    shown = np.ma.masked_invalid(share)
    cmap = _cmap("Blues").with_extremes(bad="#dddddd")  # grey: no ground-truth pixel
    im = ax.imshow(shown, cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
    names = state.class_names
    at, shown_names, note = _class_ticks(names)
    size = _tick_size(len(at))
    ax.set_xticks([*at, k], [*shown_names, void_label(names)], rotation=90, fontsize=size)
    ax.set_yticks(at, shown_names, fontsize=size)
    ax.set_xlabel(f"predicted{note}")
    ax.set_ylabel(f"ground truth{note}")
    ax.set_title(PLOTS["confusion"])
    if k <= 25:  # a share in each cell that is worth reading
        for g in range(k):
            for p in range(k + 1):
                v = share[g, p]
                if not np.isnan(v) and v >= 0.005:
                    ax.text(float(p), float(g), fmt_pct(v, 0), ha="center", va="center", fontsize=size - 1,
                            color="white" if v > 0.6 else "black")  # fmt: skip
    fig.colorbar(im, ax=ax, shrink=0.6, label="share of the class's ground-truth pixels")
    return fig


#: Most class names along an axis: beyond, every n-th class is named (a thousand names
#: overlapped unreadably, and laying them out took a minute of a 1000-class report's 74 s).
MAX_NAMED_TICKS = 120


def _class_ticks(names: list[str]) -> tuple[list[int], list[str], str]:
    """Positions and names of the classes named along an axis, and a note when not all are."""
    step = -(-len(names) // MAX_NAMED_TICKS)
    if step <= 1:
        return list(range(len(names))), list(names), ""
    at = list(range(0, len(names), step))
    return at, [names[i] for i in at], f" (one in {step} of {len(names):,} classes named)"


def _tick_size(k: int) -> float:
    """Font size of k class names along an axis: readable, yet not overlapping."""
    return float(np.clip(150 / max(k, 1), 4.5, 9))


def _cmap(name: str) -> Any:
    import matplotlib as mpl

    return mpl.colormaps[name].copy()


def _class_iou(report: Report) -> Figure:
    doc = report.doc
    k = len(doc.classes)
    fig = _figure(7.5, float(np.clip(1.2 + 0.24 * k, 2.5, 45.0)))
    ax = fig.add_subplot()
    y = np.arange(k)
    iou = np.array([np.nan if c.iou is None else 100 * c.iou for c in doc.classes])
    ax.barh(y, np.nan_to_num(iou), color="#4c78a8", height=0.7)
    lo = np.array([np.nan if c.iou_ci is None else 100 * c.iou_ci[0] for c in doc.classes])
    hi = np.array([np.nan if c.iou_ci is None else 100 * c.iou_ci[1] for c in doc.classes])
    has = ~np.isnan(lo) & ~np.isnan(iou)
    if has.any():
        err = np.vstack([np.maximum(iou[has] - lo[has], 0), np.maximum(hi[has] - iou[has], 0)])
        ax.errorbar(iou[has], y[has], xerr=err, fmt="none", ecolor="black", capsize=2.5,
                    linewidth=1)  # fmt: skip
    for i in np.flatnonzero(np.isnan(iou)):
        ax.text(1.0, float(i), "undefined", va="center", fontsize=7, color="#777777")
    at, shown_names, note = _class_ticks([c.name for c in doc.classes])
    ax.set_yticks(at, shown_names, fontsize=_tick_size(len(at)))
    if note:
        ax.set_ylabel(f"class{note}")
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("IoU (%)")
    miou = doc.miou
    if miou is not None:
        ax.axvline(100 * miou, color="#e45756", linestyle="--", linewidth=1,
                   label=f"mIoU {fmt_pct(miou)}")  # fmt: skip
        ax.legend(loc="lower right", fontsize=8)
    what = (f"whiskers: {doc.intervals.level_label}" if doc.intervals is not None
            else "no intervals")  # fmt: skip
    ax.set_title(f"{PLOTS['class_iou']} ({what})")
    ax.grid(axis="x", alpha=0.3)
    return fig


def _image_miou(report: Report) -> Figure | None:
    state = report.state
    if state is None or not state.image_miou.size:
        return None
    values = state.image_miou[~np.isnan(state.image_miou)]
    fig = _figure(7.5, 3.4)
    ax = fig.add_subplot()
    ax.hist(100 * values, bins=20, range=(0, 100), color="#72b7b2", edgecolor="white")
    miou = report.doc.miou
    if miou is not None:
        ax.axvline(100 * miou, color="#e45756", linestyle="--", linewidth=1,
                   label=f"dataset mIoU {fmt_pct(miou)}")  # fmt: skip
        ax.legend(loc="upper left", fontsize=8)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(0, 100)
    ax.set_xlabel("mIoU of one image, over the classes present in it (%)")
    ax.set_ylabel("images")
    left = state.image_miou.size - values.size
    extra = f"; {left} without a counted class" if left else ""
    ax.set_title(f"{PLOTS['image_miou']} ({values.size:,} images{extra})")
    return fig


_MAKERS: dict[str, Callable[[Report], Figure | None]] = {
    "confusion": _confusion,
    "class_iou": _class_iou,
    "image_miou": _image_miou,
}


def plot_figures(report: Report, fmt: str = "svg", *, dpi: int = 110) -> dict[str, bytes]:
    """Draw the report's plots and return each as an image file's bytes.

    Parameters
    ----------
    report : Report
        The report (the confusion heatmap and the per-image histogram need its state).
    fmt : {"svg", "png"}
        Image format.
    dpi : int, default 110
        Resolution of PNG images.

    Returns
    -------
    dict of str to bytes
        File stem (``"confusion"``, ``"class_iou"``, ``"image_miou"``; see :data:`PLOTS`) ->
        image bytes, for the plots the report can draw.

    Raises
    ------
    UsageError
        matplotlib is not installed (``pip install 'segiou[report]'``), or ``fmt`` is
        neither ``"svg"`` nor ``"png"``.
    """
    if fmt not in ("svg", "png"):
        msg = f"plot format {fmt!r}: choose 'svg' or 'png'"
        raise UsageError(msg)
    require_plotting("plotting")
    import matplotlib as mpl

    out: dict[str, bytes] = {}
    with mpl.rc_context(_RC), warnings.catch_warnings():
        # a glyph the font lacks (a class name in another script) is drawn as a box; the tables
        # show the name itself
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font")
        warnings.filterwarnings("ignore", message=r"Matplotlib currently does not support")
        for stem, make in _MAKERS.items():
            fig = make(report)
            if fig is None:
                continue
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, dpi=dpi, metadata=_metadata(fmt))
            out[stem] = buf.getvalue()
    return out


def _metadata(fmt: str) -> dict[str, Any]:
    """No creation date in the files: the same report gives the same bytes."""
    return {"Date": None} if fmt == "svg" else {"Software": "segiou (matplotlib)"}


def export_plots(report: Report, folder: str | Path, *, dpi: int = 110) -> list[Path]:
    """Write the report's plots as PNG files into a folder.

    Parameters
    ----------
    report : Report
        The report.
    folder : str or Path
        Created if needed. Files: ``confusion.png``, ``class_iou.png``, ``image_miou.png``
        (those the report can draw; see :func:`plot_figures`), each written atomically.
    dpi : int, default 110
        Resolution.

    Returns
    -------
    list of Path
        The files written.

    Raises
    ------
    UsageError
        matplotlib is missing, or ``folder`` is a file.
    OutputError
        A file cannot be written.
    """
    out = Path(folder)
    if out.exists() and not out.is_dir():
        msg = f"plots folder {str(out)!r} is a file; give a folder (it is created if needed)"
        raise UsageError(msg)
    images = plot_figures(report, "png", dpi=dpi)
    out.mkdir(parents=True, exist_ok=True)
    return [write_atomic(out / f"{stem}.png", data, what=f"{stem} plot")
            for stem, data in images.items()]  # fmt: skip
