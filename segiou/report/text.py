"""Text tables of a result (or a report) and its error analysis, and the per-image CSV."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from segiou.outputs import write_atomic
from segiou.report.document import (
    fmt_ci,
    fmt_pct,
    printable,
    slice_classes,
    slice_metrics,
    summary_label,
)
from segiou.report.quality import quality_sections
from segiou.report.view import Report, void_label

if TYPE_CHECKING:
    from segiou.confusion import ConfusionMatrix
    from segiou.conventions import Convention
    from segiou.report.document import ResultDoc
    from segiou.results import Result

__all__ = [
    "render_analysis",
    "render_per_image_csv",
    "render_quality",
    "render_text",
    "write_per_image_csv",
]


def _exact(v: float) -> str:
    """Write a float as the shortest decimal that reads back to it, without an exponent.

    ``0.0000125``, not ``1.25e-05`` (``repr``), so that a CSV sorts as text too.
    """
    return np.format_float_positional(float(v), unique=True, trim="0")


def _safe(text: object) -> Any:
    """Return a user-given name as table text: control characters escaped, never markup.

    Names come from files and stores: an ANSI escape or a newline printed raw would rewrite the
    terminal or break the table, and rich would read ``[red]`` as a style.
    """
    from rich.text import Text

    return Text(printable(text))


def _pct(x: float | None) -> str:
    return fmt_pct(x)


def _console(buf: io.StringIO, width: int) -> Any:
    from rich.console import Console

    return Console(file=buf, width=width, color_system=None, force_terminal=False, markup=False,
                   highlight=False)  # fmt: skip


def _print_table(console: Any, table: Any) -> None:
    """Print a table, wider than the console when it needs to be: a number is never cut.

    rich shrinks a table that does not fit by cutting cells with an ellipsis; a report must
    show every digit it has, so a table too wide for ``width`` is printed at its natural width.
    """
    from rich.measure import Measurement

    width = console.width
    natural = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    console.width = max(width, natural)
    try:
        console.print(table)
    finally:
        console.width = width


def _as_report(source: Result | Mapping[str, Any] | Report) -> Report:
    if isinstance(source, Report):
        return source
    return Report.from_result(source)


def render_text(result: Result | Mapping[str, Any] | Report, *, width: int = 100) -> str:
    """Render a result as plain-text tables (per class, per category, summary, rules).

    Parameters
    ----------
    result : Result, dict or Report
        What :func:`segiou.evaluate` returned, its :meth:`~segiou.Result.to_dict` document
        (version 1 or 2), or a :class:`~segiou.report.Report` (whose state adds the top
        confused pairs and the worst images, as in the HTML report).
    width : int
        Maximum line width.

    Returns
    -------
    str
        Scores in percent; ``-`` marks an undefined score (the class is outside the averaged
        classes, see the rules printed below the tables). Intervals and slices are shown when
        the result has them (else a line says there are no intervals).

    Raises
    ------
    ResultDocumentError
        A malformed result document.
    """
    from rich import box
    from rich.table import Table

    report = _as_report(result)
    doc = report.doc
    ivs = doc.intervals
    buf = io.StringIO()
    console = _console(buf, width)
    console.print(
        "Scores in percent (ratios x 100; exact ratios in the JSON document); - is "
        "undefined (see the rules at the end).",
        soft_wrap=True,
    )
    for note in report.missing_parts() if isinstance(result, Report) else []:
        console.print(_safe(f"note: {note}"))
    t = Table(title=_safe(f"per class ({doc.labels}, convention {doc.preset!r})"),
              box=box.SIMPLE_HEAD, title_justify="left")  # fmt: skip
    cols = ["id", "class", "IoU", *([ivs.level_label] if ivs else []), "Dice", "prec", "recall",
            *(["F-beta"] if doc.has_fbeta else []), "TP", "FP", "FN", "void"]  # fmt: skip
    for col in cols:
        t.add_column(col, justify="left" if col == "class" else "right")
    for c in doc.classes:
        t.add_row(
            str(c.id), _safe(c.name), _pct(c.iou), *([fmt_ci(c.iou_ci)] if ivs else []),
            _pct(c.dice), _pct(c.precision), _pct(c.recall),
            *([_pct(c.fbeta)] if doc.has_fbeta else []),
            _n(c.tp), _n(c.fp), _n(c.fn), _n(c.void),
        )  # fmt: skip
    _print_table(console, t)
    if doc.categories is not None:
        cat_ci = ivs is not None and ivs.categories is not None
        ct = Table(title="per category (classes merged)", box=box.SIMPLE_HEAD, title_justify="left")
        for col in ("category", "IoU", *(["CI"] if cat_ci else []), "TP", "FP", "FN"):
            ct.add_column(col, justify="left" if col == "category" else "right")
        for cat in doc.categories:
            ct.add_row(_safe(cat.name), _pct(cat.iou), *([fmt_ci(cat.iou_ci)] if cat_ci else []),
                       _n(cat.tp), _n(cat.fp), _n(cat.fn))  # fmt: skip
        _print_table(console, ct)
    st = Table(title="summary", box=box.SIMPLE_HEAD, title_justify="left")
    st.add_column("metric")
    st.add_column("value", justify="right")
    if ivs:
        st.add_column(ivs.level_label, justify="right")
    for _, label, v, iv in doc.summary_rows():  # named as in Markdown and HTML (with beta)
        st.add_row(_safe(label), _pct(v), *([fmt_ci(iv)] if ivs else []))
    _print_table(console, st)
    no_ivs = report.no_intervals
    console.print(_safe(ivs.describe() if ivs else no_ivs))
    if ivs is not None:
        for prefix, line in (("note", ivs.note), ("warning", ivs.few_units())):
            if line:
                console.print(_safe(f"{prefix}: {line}"), soft_wrap=True)
    px = doc.pixels
    console.print(
        f"pixels: {px.total:,} total = {px.counted:,} counted + {px.void:,} void "
        f"+ {px.ignored:,} ignored + {px.unexpected:,} unexpected; images {doc.images:,}, "
        f"batches {doc.batches:,}"
    )
    for found, what in ((px.unexpected_gt, "ground truth"), (px.unexpected_pred, "predictions")):
        if found:  # per value: "reported per value", not only a total
            items = sorted(found.items(), key=lambda kv: -kv[1])
            shown = ", ".join(f"{v} ({c:,} px)" for v, c in items[:10])
            more = f", and {len(items) - 10} more values" if len(items) > 10 else ""
            console.print(_safe(f"unexpected values in {what}: {shown}{more}"))
    _print_slices(console, doc)
    _print_state(console, report)
    console.print("counting rules and preset:")  # as in Markdown and HTML
    for name, rule in doc.counting_rules():
        console.print(_safe(f"  {name}: {rule}"), soft_wrap=True)  # a line: never cut
    diffs = doc.convention.get("differences", [])
    if diffs:
        console.print("what the preset's tool does differently:")
        for d in diffs:
            console.print(_safe(f"  - {d}"), soft_wrap=True)
    return buf.getvalue() + render_quality(doc.data, width=width)


def _pct_ci(x: float | None, iv: tuple[float, float] | None) -> str:
    return _pct(x) + (f" {fmt_ci(iv)}" if iv is not None else "")


def _n(x: int | None) -> str:
    return "-" if x is None else f"{x:,}"


def _print_slices(console: Any, doc: ResultDoc) -> None:
    from rich import box
    from rich.table import Table

    sl = doc.slices
    if sl is None:
        return
    flag = f" (small: fewer than {sl.min_images} images)" if sl.min_images is not None else ""
    for col, values in sl.columns.items():
        keys = slice_metrics(values)
        t = Table(title=_safe(f"slices by {col}{flag}"), box=box.SIMPLE_HEAD, title_justify="left")
        t.add_column(_safe(col))
        t.add_column("images", justify="right")
        for k in keys:  # named as in Markdown and HTML
            t.add_column(_safe(summary_label(k, doc.beta)), justify="right")
        for v in values:
            cells = [_pct_ci(v.summary.get(k), v.ci_of(k)) for k in keys]
            t.add_row(_safe(v.value + (" (small)" if v.small else "")), f"{v.images:,}", *cells)
        _print_table(console, t)
        names = slice_classes(values)
        if names:
            ct = Table(title=_safe(f"IoU per class by {col}"), box=box.SIMPLE_HEAD,
                       title_justify="left")  # fmt: skip
            ct.add_column("class")
            for v in values:
                ct.add_column(_safe(v.value), justify="right")
            for n in names:
                ct.add_row(_safe(n), *(_pct_ci(v.iou_of(n), v.iou_ci_of(n)) for v in values))
            _print_table(console, ct)
    for items, what in ((sl.images_without_metadata, "images without a metadata row"),
                        (sl.metadata_without_image, "metadata rows without an image")):  # fmt: skip
        if items:
            more = f", and {len(items) - 50} more" if len(items) > 50 else ""
            console.print(_safe(f"{what} ({len(items)}): {', '.join(items[:50])}{more}"))


def _print_state(console: Any, report: Report) -> None:
    from rich import box
    from rich.table import Table

    state = report.state
    if state is None:
        return
    t = Table(title="top confused pairs", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("ground truth", "predicted as", "pixels", "share of the class"):
        t.add_column(col, justify="right" if col in ("pixels", "share of the class") else "left")
    for p in state.pairs:
        t.add_row(_safe(p.gt), _safe(p.pred), f"{p.pixels:,}", _pct(p.share))
    _print_table(console, t)
    if state.per_image_note:
        console.print(_safe(f"worst images: none ({state.per_image_note})"))
        return
    w = Table(title="worst images", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("image", "mIoU", "weakest class", "its IoU", "ignored px"):
        w.add_column(col, justify="left" if col in ("image", "weakest class") else "right")
    for s in state.worst:
        w.add_row(_safe(s.name), _pct(s.miou), _safe(s.weakest or "-"), _pct(s.weakest_iou),
                  f"{s.ignored:,}")  # fmt: skip
    _print_table(console, w)
    console.print(_safe(f"{state.image_rule}."), soft_wrap=True)  # the result's convention


def render_analysis(cm: ConfusionMatrix, *, top: int = 5, width: int = 100,
                    preset: str | Convention = "segiou") -> str:  # fmt: skip
    """Per-class error analysis: the worst classes, what they are confused with, and where.

    Parameters
    ----------
    cm : ConfusionMatrix
        Counts (with per-image rows for the "worst images" column).
    top : int
        How many classes, confusions and images to list.
    width : int
        Maximum line width.
    preset : str or Convention, default "segiou"
        The result's convention: the classes ranked are those it scores (present in either
        mask and averaged: under ``detectron2`` a class only predicted is left out), and each
        IoU shown, the whole run's and each image's, is as it reports it
        (:func:`segiou.results.image_scores` for the images).

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

    from segiou.conventions import get_convention
    from segiou.metrics import iou, tp_fp_fn
    from segiou.results import image_scores

    conv = get_convention(preset)
    names = list(cm.spec.classes)
    tp, fp, fn = tp_fp_fn(cm.counts, void=cm.void)
    scores = conv.reported(iou(cm.counts, void=cm.void), tp, fp, fn)
    gt_px = cm.counts.sum(axis=1) + cm.void
    # a class only predicted (IoU 0, no ground truth) counts in mIoU: it is ranked too, unless
    # the convention leaves it out; a class in neither mask is never ranked (even where a
    # convention reports it as 0)
    ranked = np.argsort(np.nan_to_num(scores, nan=np.inf), kind="stable")
    shown = conv.averaged(tp, fp, fn) & ((tp + fp + fn) > 0) & ~np.isnan(scores)
    order = [int(c) for c in ranked if shown[c]][:top]
    per_image = cm.images if cm.per_image and cm.n_images else None
    img_iou = None
    if per_image is not None:
        img_iou = image_scores(per_image, preset=conv)[0]
        in_image = (per_image.tp + per_image.fp + per_image.fn) > 0
        img_iou[~(in_image & conv.averaged(per_image.tp, per_image.fp, per_image.fn))] = np.nan
    t = Table(title=f"error analysis: {len(order)} weakest classes (preset {conv.name!r})",
              box=box.SIMPLE_HEAD, title_justify="left")  # fmt: skip
    for col in ("class", "IoU", "confused with (share of its gt pixels)", "worst images (IoU)"):
        t.add_column(col, justify="right" if col == "IoU" else "left")
    for c in order:
        if gt_px[c] == 0:
            px = int(cm.counts[:, c].sum())
            what = f"predicted on {px:,} px but absent from the ground truth"
            t.add_row(_safe(names[c]), _pct(scores[c]), what, "")
            continue
        row = cm.counts[c].astype(np.float64)
        row[c] = 0
        conf = [(row[d] / gt_px[c], names[d]) for d in np.argsort(-row)[:top] if row[d] > 0]
        if cm.void[c]:
            conf.append((cm.void[c] / gt_px[c], void_label(names)))
        conf = sorted(conf, reverse=True)[:top]
        worst = ""
        if img_iou is not None and per_image is not None:
            one = img_iou[:, c]
            idx = [
                int(i) for i in np.argsort(np.nan_to_num(one, nan=np.inf)) if not np.isnan(one[i])
            ]
            worst = ", ".join(
                f"{printable(per_image.names[i])} ({fmt_pct(one[i], 1)})" for i in idx[:top]
            )
        t.add_row(
            _safe(names[c]),
            _pct(scores[c]),
            _safe(", ".join(f"{n} {fmt_pct(s, 1)}%" for s, n in conf)),
            _safe(worst),
        )
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False, markup=False,
            highlight=False).print(t)  # fmt: skip
    return buf.getvalue()


def render_per_image_csv(cm: ConfusionMatrix, *, preset: str | Convention = "segiou") -> str:
    """Return the per-image CSV (see :func:`write_per_image_csv`) as text.

    Parameters
    ----------
    cm : ConfusionMatrix
        Counts with per-image rows (created with ``per_image=True``).
    preset : str or Convention, default "segiou"
        The convention each image is scored under: the result's (``--preset``), so that the
        rows follow its rules (:func:`segiou.results.image_scores`).

    Returns
    -------
    str
        The CSV text, with the line ends the ``csv`` module writes (CR LF).

    Raises
    ------
    UsageError
        ``cm`` has no per-image rows (it was created without ``per_image=True``), or
        ``preset`` is unknown.
    """
    import csv

    from segiou.conventions import get_convention
    from segiou.results import image_scores

    conv = get_convention(preset)
    t = cm.images
    scores, mious = image_scores(t, preset=conv)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["image", "miou", "ignored", "unexpected",
                *(f"iou:{n}" for n in cm.spec.classes), "preset"])  # fmt: skip
    for i, name in enumerate(t.names):
        miou = "" if np.isnan(mious[i]) else _exact(mious[i])  # exact: it reads back
        w.writerow([name, miou, int(t.ignored[i]), int(t.unexpected[i]),
                    *("" if np.isnan(v) else _exact(v) for v in scores[i]), conv.name])  # fmt: skip
    return buf.getvalue()


def write_per_image_csv(
    cm: ConfusionMatrix, path: str | Path, *, preset: str | Convention = "segiou"
) -> Path:
    """Write one row per image: name, mIoU, ignored and unexpected pixels, per-class IoU.

    Each image is scored under ``preset``, as :func:`segiou.evaluate` scores the whole run
    (:func:`segiou.results.image_scores`): its mIoU averages the classes the convention
    averages in that image's counts (``segiou``: the classes present in it, TP+FP+FN > 0;
    ``detectron2``: those with ground-truth pixels in it; ``sklearn_all_labels``: every class),
    and a class outside them is reported as the convention's fill. A row describes one image;
    dataset scores are never averages of these rows.

    Parameters
    ----------
    cm : ConfusionMatrix
        Counts with per-image rows (created with ``per_image=True``).
    path : str or Path
        CSV file to write (replaced if it exists). Columns: ``image``, ``miou``, ``ignored``,
        ``unexpected``, then ``iou:<class>`` per class, then ``preset`` (the convention's
        name, on every row, so that a CSV reader keeps it); an undefined score is an empty
        cell.
    preset : str or Convention, default "segiou"
        The result's convention (``--preset``).

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    UsageError
        ``cm`` has no per-image rows (it was created without ``per_image=True``), ``preset``
        is unknown, or ``path`` is no regular file (see :func:`segiou.outputs.write_atomic`).
    OutputError
        The file cannot be written; an existing file is left as it was.
    """
    return write_atomic(path, render_per_image_csv(cm, preset=preset), what="per-image CSV")


def render_quality(doc: Mapping[str, Any], *, width: int = 100) -> str:
    """Render a result's Boundary IoU, iIoU and absent chunks as text (empty when it has none).

    Parameters
    ----------
    doc : mapping
        A result document (:meth:`segiou.Result.to_dict`, or its JSON read back); documents
        without these fields (``segiou.result`` version 1 and 2) render as empty.
    width : int
        Maximum line width (a table that needs more is printed wider: no number is cut).

    Returns
    -------
    str
        The tables of :func:`~segiou.report.quality.quality_sections` in percent (``-``:
        undefined), and a line per kind of absent chunk report.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    tables, lines = quality_sections(doc)
    buf = io.StringIO()
    console = _console(buf, width)
    for qt in tables:
        console.print(Text(printable(qt.title)))  # a line: never wrapped
        t = Table(box=box.SIMPLE_HEAD)
        for i, col in enumerate(qt.columns):
            t.add_column(col, justify="left" if i == qt.name_column else "right")
        for row in qt.rows:
            t.add_row(*(Text(cell) for cell in row))
        _print_table(console, t)
        console.print(Text(printable(qt.note)))
        if qt.rule:
            console.print(Text(qt.rule), soft_wrap=True)  # a line: never cut
    for line in lines:
        console.print(Text(line))
    return buf.getvalue()
