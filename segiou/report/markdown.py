r"""The Markdown report (the HTML report's content, minus the plots) and the per-class CSV.

Markdown renderers also read inline HTML, so every name from a file is escaped twice over: HTML
special characters become entities and Markdown's punctuation is backslash-escaped; a line
break or another control character is shown as its escape (``\n``), so it cannot end a table
row.
"""

from __future__ import annotations

import csv
import io
import re
from typing import TYPE_CHECKING

from segiou.report.document import (
    fmt_ci,
    fmt_pct,
    slice_classes,
    slice_metrics,
    summary_label,
)

if TYPE_CHECKING:
    from segiou.report.document import ResultDoc
    from segiou.report.view import Report

__all__ = ["md_escape", "render_csv", "render_markdown"]

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~$])")  # $: GitHub's math


def md_escape(text: object) -> str:
    r"""Escape a name for Markdown (GitHub's included): never markup, never a new row.

    Parameters
    ----------
    text : object
        A name (converted with ``str``).

    Returns
    -------
    str

    Examples
    --------
    >>> md_escape("a|b <i>*c*</i>")
    'a\\|b &lt;i&gt;\\*c\\*&lt;/i&gt;'
    """
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(head: list[str], rows: list[list[str]], right_from: int = 1) -> list[str]:
    align = [":---" if i < right_from else "---:" for i in range(len(head))]
    return [_row(head), _row(align), *(_row(r) for r in rows), ""]


def _pct_ci(value: float | None, iv: tuple[float, float] | None) -> str:
    return fmt_pct(value) + (f" {fmt_ci(iv)}" if iv is not None else "")


def _count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _summary(doc: ResultDoc, no_intervals: str) -> list[str]:
    lines = ["## Summary", ""]
    if doc.intervals is not None:
        lines += [f"{md_escape(doc.intervals.describe())}.", ""]
        if doc.intervals.note:
            lines += [f"Note: {md_escape(doc.intervals.note)}.", ""]
        few = doc.intervals.few_units()
        if few:
            lines += [f"> **Warning:** {md_escape(few)}.", ""]
    else:
        lines += [no_intervals, ""]  # segiou's own words
    head = ["metric", "value (%)"] + ([doc.intervals.level_label] if doc.intervals else [])
    rows = [[md_escape(label), fmt_pct(v)] + ([fmt_ci(iv)] if doc.intervals else [])
            for _, label, v, iv in doc.summary_rows()]  # fmt: skip
    lines += _table(head, rows)
    px = doc.pixels
    where = (
        f"Pixels: {px.total:,} total = {px.counted:,} counted + {px.void:,} void + "
        f"{px.ignored:,} ignored + {px.unexpected:,} unexpected; {doc.images:,} images, "
        f"{doc.batches:,} batches."
    )
    lines += [where, ""]
    for found, what in ((px.unexpected_gt, "ground truth"), (px.unexpected_pred, "predictions")):
        if found:
            items = sorted(found.items(), key=lambda kv: -kv[1])
            shown = ", ".join(f"{md_escape(v)} ({n:,} px)" for v, n in items)
            lines += [f"Unexpected values in {what}: {shown}", ""]
    return lines


def _classes(doc: ResultDoc) -> list[str]:
    ci = doc.intervals is not None
    head = ["id", "class", "IoU"] + ([doc.intervals.level_label] if doc.intervals else [])
    head += ["Dice", "precision", "recall"] + (["F-beta"] if doc.has_fbeta else [])
    head += ["TP", "FP", "FN", "void"]
    rows = []
    for c in doc.classes:
        row = [str(c.id), md_escape(c.name), fmt_pct(c.iou)] + ([fmt_ci(c.iou_ci)] if ci else [])
        row += [fmt_pct(c.dice), fmt_pct(c.precision), fmt_pct(c.recall)]
        row += [fmt_pct(c.fbeta)] if doc.has_fbeta else []
        row += [_count(c.tp), _count(c.fp), _count(c.fn), _count(c.void)]
        rows.append(row)
    lines = ["## Per class", "", "Scores in percent; `-` is undefined (see the rules).", ""]
    return [*lines, *_table(head, rows, right_from=2)]


def _categories(doc: ResultDoc) -> list[str]:
    if doc.categories is None:
        return []
    ci = doc.intervals is not None and doc.intervals.categories is not None
    head = ["category", "IoU"] + (["CI"] if ci else []) + ["TP", "FP", "FN"]
    rows = [[md_escape(c.name), fmt_pct(c.iou)] + ([fmt_ci(c.iou_ci)] if ci else [])
            + [_count(c.tp), _count(c.fp), _count(c.fn)] for c in doc.categories]  # fmt: skip
    return ["## Per category", "", *_table(head, rows)]


def _state_parts(report: Report) -> list[str]:
    state = report.state
    if state is None:
        return []
    lines = ["## Top confused pairs", ""]
    if state.pairs:
        lines += _table(["ground truth", "predicted as", "pixels", "share of the class (%)"],
                        [[md_escape(p.gt), md_escape(p.pred), f"{p.pixels:,}", fmt_pct(p.share)]
                         for p in state.pairs], right_from=2)  # fmt: skip
    else:
        lines += ["No ground-truth pixel was predicted as another class or as void.", ""]
    lines += ["## Worst images", ""]
    if state.per_image_note:
        return [*lines, f"{md_escape(state.per_image_note)}.", ""]
    lines += [f"{md_escape(state.image_rule)}.", ""]  # the result's convention
    rows = [[md_escape(w.name), fmt_pct(w.miou), md_escape(w.weakest or "-"),
             fmt_pct(w.weakest_iou), f"{w.ignored:,}"] for w in state.worst]  # fmt: skip
    return lines + _table(["image", "mIoU", "weakest class", "its IoU", "ignored px"], rows)


def _slices(doc: ResultDoc) -> list[str]:
    sl = doc.slices
    if sl is None:
        return []
    lines = ["## Slices", ""]
    if sl.min_images is not None:
        flag = f"Slices with fewer than {sl.min_images} images are flagged (small)."
        lines += [flag, ""]
    if doc.intervals is not None:
        lines += ["Intervals in brackets.", ""]
    for col, values in sl.columns.items():
        keys = slice_metrics(values)
        head = [md_escape(col), "images", *(md_escape(summary_label(k, doc.beta)) for k in keys)]
        rows = [[md_escape(v.value) + (" (small)" if v.small else ""), f"{v.images:,}",
                 *(_pct_ci(v.summary.get(k), v.ci_of(k)) for k in keys)] for v in values]  # fmt: skip
        lines += [f"### By {md_escape(col)}", "", *_table(head, rows)]
        names = slice_classes(values)
        if names:
            lines += _table(["class", *(md_escape(v.value) for v in values)],
                            [[md_escape(n), *(_pct_ci(v.iou_of(n), v.iou_ci_of(n)) for v in values)]
                             for n in names])  # fmt: skip
    for items, what in ((sl.images_without_metadata, "Images without a metadata row"),
                        (sl.metadata_without_image, "Metadata rows without an image")):  # fmt: skip
        if items:
            more = f", and {len(items) - 50} more" if len(items) > 50 else ""
            shown = ", ".join(md_escape(n) for n in items[:50])
            lines += [f"{what} ({len(items)}): {shown}{more}", ""]
    return lines


def _quality(doc: ResultDoc) -> list[str]:
    """Boundary IoU, iIoU and absent chunks (:func:`~segiou.report.quality.quality_sections`)."""
    from segiou.report.quality import quality_sections

    tables, notes = quality_sections(doc.data)
    if not (tables or notes):
        return []
    lines = ["## Boundary IoU and instance-level IoU", ""]
    for t in tables:  # columns and numbers are segiou's own text; titles hold document fields
        lines += [f"**{md_escape(t.title)}**", ""]
        rows = [[md_escape(c) if i == t.name_column else c for i, c in enumerate(row)]
                for row in t.rows]  # fmt: skip
        lines += _table(list(t.columns), rows, right_from=t.name_column + 1)
        lines += [t.note, ""]  # segiou's words and numbers (checked)
        lines += [md_escape(t.rule), ""] if t.rule else []  # (from the document)
    lines += [f"> {md_escape(n)}\n" for n in notes]
    return lines


def render_markdown(report: Report) -> str:
    """Render a report as Markdown: what the HTML report says, minus the plots.

    Parameters
    ----------
    report : Report
        What to show (see :class:`~segiou.report.Report`).

    Returns
    -------
    str
        GitHub-flavoured Markdown: summary (with intervals when the result has them), per class,
        per category, top confused pairs and worst images (from the state), slices (when the
        result has them), Boundary IoU and iIoU (when the result has them), counting rules and
        preset.
    """
    doc = report.doc
    about = (
        f"Preset **{md_escape(doc.preset)}**; {doc.images:,} images; from "
        f"{md_escape(report.source)}; result schema version {doc.version} (segiou "
        f"{md_escape(doc.writer)})."
    )
    lines = [f"# segiou report: {md_escape(doc.labels)}", "", about, ""]
    lines += [f"> {md_escape(note)}\n" for note in report.missing_parts()]
    lines += (
        _summary(doc, report.no_intervals) + _classes(doc) + _categories(doc) + _state_parts(report)
    )
    lines += _slices(doc) + _quality(doc)
    lines += ["## Counting rules and preset", ""]
    lines += [f"- **{md_escape(name)}**: {md_escape(text)}" for name, text in doc.counting_rules()]
    diffs = doc.convention.get("differences", [])
    if diffs:
        lines += ["", "What the preset's tool does differently:", ""]
        lines += [f"- {md_escape(d)}" for d in diffs]
    return "\n".join(lines).rstrip() + "\n"


def render_csv(report: Report) -> str:
    """Render the per-class table as CSV (unrounded ratios, as in the JSON document).

    Parameters
    ----------
    report : Report
        What to show.

    Returns
    -------
    str
        Columns ``id, class, iou, iou_lo, iou_hi, dice, precision, recall, [fbeta,] tp, fp, fn,
        void, gt_pixels, pred_pixels, preset, level``; an undefined score (or no interval) is
        an empty cell. ``preset`` (the convention's name: which classes are scored, what the
        others are reported as) and ``level`` (the confidence level of ``iou_lo``/``iou_hi``,
        e.g. ``0.95``; empty without intervals or when the document does not state it) are
        repeated on every row, last, so that a CSV reader keeps them and the columns before
        them stay where they were. Names are written as they are (quoted by the CSV rules).
    """
    doc = report.doc
    fb = ["fbeta"] if doc.has_fbeta else []
    cols = ["id", "class", "iou", "iou_lo", "iou_hi", "dice", "precision", "recall", *fb,
            "tp", "fp", "fn", "void", "gt_pixels", "pred_pixels", "preset", "level"]  # fmt: skip

    def cell(x: float | None) -> str:
        return "" if x is None else repr(x)

    level = cell(doc.intervals.level if doc.intervals is not None else None)
    with io.StringIO(newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for c in doc.classes:
            lo, hi = c.iou_ci if c.iou_ci is not None else (None, None)
            scores = [c.iou, lo, hi, c.dice, c.precision, c.recall] + ([c.fbeta] if fb else [])
            counts = [c.tp, c.fp, c.fn, c.void, c.gt_pixels, c.pred_pixels]
            w.writerow([c.id, c.name, *(cell(x) for x in scores + counts), doc.preset, level])
        return f.getvalue()
