"""Text tables of a result and its error analysis, and the per-image CSV."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from segiou.outputs import write_atomic

if TYPE_CHECKING:
    from segiou.confusion import ConfusionMatrix
    from segiou.results import Result

__all__ = ["render_analysis", "render_slices", "render_text", "write_per_image_csv"]


def _safe(text: object) -> Any:
    """Return a user-given name as table text: control characters escaped, never markup.

    Names come from files and stores: an ANSI escape or a newline printed raw would rewrite the
    terminal or break the table, and rich would read ``[red]`` as a style.
    """
    from rich.text import Text

    s = str(text)
    return Text("".join(c if c.isprintable() else repr(c)[1:-1] for c in s))


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:6.2f}"


def _ci(iv: list[float] | None) -> str:
    """Show an interval in percent, ``[lo, hi]`` (``-`` when undefined)."""
    return "-" if iv is None else f"[{100 * iv[0]:.2f}, {100 * iv[1]:.2f}]"


def _interval_note(iv: dict[str, Any]) -> str:
    unit = "images" if iv["unit"] == "image" else f"groups ({iv['unit'].partition(':')[2]})"
    return (
        f"intervals: {100 * iv['level']:g}% {iv['method']} over {unit}, {iv['resamples']:,} "
        f"resamples, seed {iv['seed']}"
    )


def render_text(result: Result, *, width: int = 100) -> str:
    """Render a result as plain-text tables (per class, per category, summary, rules).

    Parameters
    ----------
    result : Result
        What :func:`segiou.evaluate` returned.
    width : int
        Maximum line width.

    Returns
    -------
    str
        Scores in percent; ``-`` marks an undefined score (the class is outside the averaged
        classes, see the rules printed below the tables).
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False,
                      markup=False, highlight=False)  # fmt: skip
    pc = result.per_class
    t = Table(title=_safe(f"per class ({result.labels}, convention {result.convention.name!r})"),
              box=box.SIMPLE_HEAD, title_justify="left")  # fmt: skip
    iv = result.intervals
    level = f"{100 * iv['level']:g}% CI" if iv else ""
    cols = ("id", "class", "IoU", *((f"IoU {level}",) if iv else ()), "Dice", "prec", "recall",
            "TP", "FP", "FN", "void")  # fmt: skip
    for col in cols:
        t.add_column(col, justify="left" if col == "class" else "right")
    for i, name in enumerate(result.class_names):
        ci = (_ci(iv["classes"]["iou"][i]),) if iv else ()
        t.add_row(
            str(i), _safe(name), _pct(pc["iou"][i]), *ci, _pct(pc["dice"][i]),
            _pct(pc["precision"][i]), _pct(pc["recall"][i]), f"{pc['tp'][i]:,}",
            f"{pc['fp'][i]:,}", f"{pc['fn'][i]:,}", f"{pc['void'][i]:,}",
        )  # fmt: skip
    console.print(t)
    if result.categories is not None:
        c = result.categories
        ct = Table(title="per category (classes merged)", box=box.SIMPLE_HEAD, title_justify="left")
        cat_iv = iv["categories"] if iv else None
        for col in ("category", "IoU", *((f"IoU {level}",) if cat_iv else ()), "TP", "FP", "FN"):
            ct.add_column(col, justify="left" if col == "category" else "right")
        for i, name in enumerate(c["names"]):
            ci = (_ci(cat_iv["iou"][i]),) if cat_iv else ()
            ct.add_row(_safe(name), _pct(c["iou"][i]), *ci, f"{c['tp'][i]:,}", f"{c['fp'][i]:,}",
                       f"{c['fn'][i]:,}")  # fmt: skip
        console.print(ct)
    st = Table(title="summary", box=box.SIMPLE_HEAD, title_justify="left")
    st.add_column("metric")
    st.add_column("value", justify="right")
    if iv:
        st.add_column(level, justify="right")
    for k, v in result.summary.items():
        st.add_row(k, _pct(v), *((_ci(iv["summary"].get(k)),) if iv else ()))
    console.print(st)
    if iv:
        console.print(_interval_note(iv))
    px = result.pixels
    unexpected = sum(px["unexpected_gt"].values()) + sum(px["unexpected_pred"].values())
    console.print(
        f"pixels: {px['total']:,} total = {px['counted']:,} counted + {px['void']:,} void "
        f"+ {px['ignored']:,} ignored + {unexpected:,} unexpected; images {result.images:,}, "
        f"batches {result.batches:,}"
    )
    for side in ("gt", "pred"):  # per value: "reported per value", not only a total
        found = px[f"unexpected_{side}"]
        if found:
            items = sorted(found.items(), key=lambda kv: -kv[1])
            shown = ", ".join(f"{v} ({c:,} px)" for v, c in items[:10])
            more = f", and {len(items) - 10} more values" if len(items) > 10 else ""
            what = "ground truth" if side == "gt" else "predictions"
            console.print(f"unexpected values in {what}: {shown}{more}")
    console.print("rules: " + "; ".join(result.convention.rules()))
    if result.counting.get("ignore_rule"):
        console.print(f"ignored: {result.counting['ignore_rule']}")
    return buf.getvalue()


def render_slices(result: Result, *, width: int = 100, listed: int = 10) -> str:
    """Render the slices of a result: one table per metadata column, and the unmatched names.

    Parameters
    ----------
    result : Result
        A result with ``slices`` (:func:`segiou.stats.evaluate_with_intervals`).
    width : int
        Maximum line width.
    listed : int
        Names of unmatched images (and metadata rows) shown before "and N more".

    Returns
    -------
    str
        Per value: images, mIoU with its interval, fwIoU, pixel accuracy, and a flag on slices
        with fewer images than the minimum; empty when the result has no slices.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    sl = result.slices
    if not sl:
        return ""
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False,
                      markup=False, highlight=False)  # fmt: skip
    for column, values in sl["columns"].items():
        t = Table(title=_safe(f"slices by {column!r}"), box=box.SIMPLE_HEAD, title_justify="left")
        for col in ("value", "images", "mIoU", "mIoU CI", "fwIoU", "pixel acc", "note"):
            t.add_column(col, justify="left" if col in ("value", "note") else "right")
        for value, item in values.items():
            s, iv = item["summary"], item["intervals"]
            t.add_row(
                _safe(value if value else "(empty)"), f"{item['images']:,}",
                _pct(_undef(s["miou"])), _ci(iv["summary"]["miou"]) if iv else "-",
                _pct(_undef(s["fwiou"])), _pct(_undef(s["pixel_accuracy"])),
                f"fewer than {sl['min_images']} images" if item["small"] else "",
            )  # fmt: skip
        console.print(t)
    for key, what in (("images_without_metadata", "image(s) without metadata"),
                      ("metadata_without_image", "metadata row(s) without an image")):  # fmt: skip
        names = sl["unmatched"][key]
        if names:
            more = f", and {len(names) - listed} more" if len(names) > listed else ""
            console.print(_safe(f"{len(names):,} {what}: {', '.join(names[:listed])}{more}"))
    return buf.getvalue()


def _undef(x: float | None) -> float:
    return math.nan if x is None else x


def render_analysis(cm: ConfusionMatrix, *, top: int = 5, width: int = 100) -> str:
    """Per-class error analysis: the worst classes, what they are confused with, and where.

    Parameters
    ----------
    cm : ConfusionMatrix
        Counts (with per-image rows for the "worst images" column).
    top : int
        How many classes, confusions and images to list.
    width : int
        Maximum line width.

    Returns
    -------
    str
        A table of the ``top`` classes with the lowest IoU: each with its largest confusions
        (share of its ground-truth pixels predicted as another class, or void) and the images
        where its IoU is lowest.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from segiou.metrics import iou

    names = list(cm.spec.classes)
    scores = iou(cm.counts, void=cm.void)
    gt_px = cm.counts.sum(axis=1) + cm.void
    order = [int(c) for c in np.argsort(np.nan_to_num(scores, nan=np.inf)) if gt_px[c] > 0][:top]
    per_image = cm.images if cm.per_image and cm.n_images else None
    img_iou = per_image.iou() if per_image is not None else None
    t = Table(title=f"error analysis: {len(order)} weakest classes", box=box.SIMPLE_HEAD,
              title_justify="left")  # fmt: skip
    for col in ("class", "IoU", "confused with (share of its gt pixels)", "worst images (IoU)"):
        t.add_column(col, justify="right" if col == "IoU" else "left")
    for c in order:
        row = cm.counts[c].astype(np.float64)
        row[c] = 0
        conf = [(row[d] / gt_px[c], names[d]) for d in np.argsort(-row)[:top] if row[d] > 0]
        if cm.void[c]:
            conf.append((cm.void[c] / gt_px[c], "void"))
        conf = sorted(conf, reverse=True)[:top]
        worst = ""
        if img_iou is not None and per_image is not None:
            one = img_iou[:, c]
            idx = [
                int(i) for i in np.argsort(np.nan_to_num(one, nan=np.inf)) if not np.isnan(one[i])
            ]
            worst = ", ".join(
                f"{_safe(per_image.names[i])} ({100 * one[i]:.1f})" for i in idx[:top]
            )
        t.add_row(
            _safe(names[c]),
            _pct(scores[c]),
            _safe(", ".join(f"{n} {100 * s:.1f}%" for s, n in conf)),
            _safe(worst),
        )
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False, markup=False,
            highlight=False).print(t)  # fmt: skip
    return buf.getvalue()


def write_per_image_csv(cm: ConfusionMatrix, path: str | Path) -> Path:
    """Write one row per image: name, ignored and unexpected pixels, mIoU, per-class IoU.

    The per-image mIoU averages the classes present in that image (TP+FP+FN > 0). It describes
    one image; dataset scores are never averages of these rows.

    Parameters
    ----------
    cm : ConfusionMatrix
        Counts with per-image rows (created with ``per_image=True``).
    path : str or Path
        CSV file to write (replaced if it exists). Columns: ``image``, ``miou``, ``ignored``,
        ``unexpected``, then ``iou:<class>`` per class; an undefined score is an empty cell.

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    UsageError
        ``cm`` has no per-image rows (it was created without ``per_image=True``), or ``path``
        is no regular file (see :func:`segiou.outputs.write_atomic`).
    OutputError
        The file cannot be written; an existing file is left as it was.
    """
    import csv

    t = cm.images
    scores = t.iou()
    with io.StringIO(newline="") as f:
        w = csv.writer(f)
        w.writerow(["image", "miou", "ignored", "unexpected",
                    *(f"iou:{n}" for n in cm.spec.classes)])  # fmt: skip
        for i, name in enumerate(t.names):
            row = scores[i]
            present = row[~np.isnan(row)]
            miou = f"{present.mean():.6f}" if present.size else ""
            w.writerow([name, miou, int(t.ignored[i]), int(t.unexpected[i]),
                        *("" if np.isnan(v) else f"{v:.6f}" for v in row)])  # fmt: skip
        text = f.getvalue()
    return write_atomic(path, text, what="per-image CSV")
