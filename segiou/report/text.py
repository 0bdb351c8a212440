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

__all__ = ["render_analysis", "render_text", "write_per_image_csv"]


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
    for col in ("id", "class", "IoU", "Dice", "prec", "recall", "TP", "FP", "FN", "void"):
        t.add_column(col, justify="left" if col == "class" else "right")
    for i, name in enumerate(result.class_names):
        t.add_row(
            str(i), _safe(name), _pct(pc["iou"][i]), _pct(pc["dice"][i]), _pct(pc["precision"][i]),
            _pct(pc["recall"][i]), f"{pc['tp'][i]:,}", f"{pc['fp'][i]:,}", f"{pc['fn'][i]:,}",
            f"{pc['void'][i]:,}",
        )  # fmt: skip
    console.print(t)
    if result.categories is not None:
        c = result.categories
        ct = Table(title="per category (classes merged)", box=box.SIMPLE_HEAD, title_justify="left")
        for col in ("category", "IoU", "TP", "FP", "FN"):
            ct.add_column(col, justify="left" if col == "category" else "right")
        for i, name in enumerate(c["names"]):
            ct.add_row(_safe(name), _pct(c["iou"][i]), f"{c['tp'][i]:,}", f"{c['fp'][i]:,}",
                       f"{c['fn'][i]:,}")  # fmt: skip
        console.print(ct)
    st = Table(title="summary", box=box.SIMPLE_HEAD, title_justify="left")
    st.add_column("metric")
    st.add_column("value", justify="right")
    for k, v in result.summary.items():
        st.add_row(k, _pct(v))
    console.print(st)
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
    from segiou.report.quality import render_quality  # issue 13: its own section

    return buf.getvalue() + render_quality(result, width=width)


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
