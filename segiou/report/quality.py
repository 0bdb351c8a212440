"""Boundary IoU, instance-level IoU (iIoU) and absent chunks of both sides, for every report.

:func:`quality_sections` reads these fields of a result document once into plain tables of
strings (:class:`QualityTable`; names with control characters escaped); the text, Markdown and HTML reports each lay the same tables
out, so the three say the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from segiou.errors import ResultDocumentError
from segiou.report.document import fmt_pct, printable

__all__ = ["QualityTable", "quality_sections"]


@dataclass(frozen=True)
class QualityTable:
    """One table of a report's Boundary IoU or iIoU section.

    Attributes
    ----------
    title : str
        The table's heading.
    columns : tuple of str
        Column names; the name column is left-aligned, the others hold numbers.
    rows : list of tuple of str
        Cells, formatted (percentages without the sign; ``-``: undefined).
    note : str
        The line under the table (the mean).
    name_column : int
        Index of the name column.
    rule : str
        How the mean is averaged, in words (the document's ``averaging``, or segiou's rule for a
        document written before it was echoed): Boundary IoU and iIoU have their own rule, not
        the preset's. Empty for a table whose mean is stated with another table's.
    """

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]
    note: str
    name_column: int = 1
    rule: str = ""


def _pct(x: float | None) -> str:
    return fmt_pct(x)


def _weighted(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def quality_sections(
    doc: Mapping[str, Any], *, where: str = "result document"
) -> tuple[list[QualityTable], list[str]]:
    """Return a result's Boundary IoU and iIoU tables, and its lines on absent chunks.

    Parameters
    ----------
    doc : mapping
        A result document (:meth:`segiou.Result.to_dict`, or its JSON read back); documents
        without these fields (``segiou.result`` version 1) give no table and no line.
    where : str
        How to name the document in messages.

    Returns
    -------
    (list of QualityTable, list of str)

    Raises
    ------
    ResultDocumentError
        A field of these sections is missing or of the wrong type (the message names it).
    """
    try:
        return _sections(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        msg = (f"{where}: its 'boundary', 'instances', 'absent_chunks' or 'absent_pred_chunks' "
               "field is malformed "
               f"({type(err).__name__}: {err}); write it again with segiou")  # fmt: skip
        raise ResultDocumentError(msg) from err


def _int(value: object, field: str) -> int:
    """Check a count or class id of these sections (it is shown as it is)."""
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{field} is {type(value).__name__} {value!r:.40}, expected an integer"
        raise TypeError(msg)
    return value


def _number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        msg = f"{field} is {type(value).__name__} {value!r:.40}, expected a finite number"
        raise TypeError(msg)
    return value


def _rule(section: Mapping[str, Any], field: str, default: str, preset: object) -> str:
    """Return the averaging rule of a section, as the document states it (else segiou's)."""
    rule = section.get("averaging", default)
    if not isinstance(rule, str):
        msg = f"{field}.averaging is {type(rule).__name__} {rule!r:.40}, expected a string"
        raise TypeError(msg)
    return printable(f"averaging rule (its own; preset {preset!r} does not apply): {rule}")


def _sections(doc: Mapping[str, Any]) -> tuple[list[QualityTable], list[str]]:
    from segiou.results import BOUNDARY_AVERAGING, INSTANCE_AVERAGING

    conv = doc.get("convention")
    preset = conv.get("name", "?") if isinstance(conv, Mapping) else "?"
    tables: list[QualityTable] = []
    rows: list[tuple[str, ...]]
    b = doc.get("boundary")
    if b is not None:
        w = b["width"]
        asked = (f"{_number(w['ratio'], 'boundary.width.ratio'):g} of the image diagonal"
                 if "ratio" in w else f"{_number(w['pixels'], 'boundary.width.pixels'):g} px")  # fmt: skip
        used = ", ".join(str(_int(p, f"boundary.pixels_used[{i}]"))
                         for i, p in enumerate(b["pixels_used"])) or "-"  # fmt: skip
        rows = [(str(_int(c["id"], "boundary.classes[].id")), printable(c["name"]), _pct(c["iou"]), f"{c['intersection']:,}",
                 f"{c['gt']:,}", f"{c['pred']:,}") for c in b["classes"]]  # fmt: skip
        tables.append(QualityTable(
            f"Boundary IoU (width {asked}: {used} px)",
            ("id", "class", "bIoU", "G_d & P_d", "G_d", "P_d"), rows,
            f"boundary mIoU: {_pct(b['miou'])}",
            rule=_rule(b, "boundary", BOUNDARY_AVERAGING, preset),
        ))  # fmt: skip
    q = doc.get("instances")
    if q is not None:
        rows = [(str(_int(c["id"], "instances.classes[].id")), printable(c["name"]), _pct(c["iiou"]), f"{c['instances']:,}",
                 _weighted(c["tp_weighted"]), _weighted(c["fn_weighted"]), f"{c['fp']:,}")
                for c in q["classes"] if c["average_size"] is not None]  # fmt: skip
        tables.append(QualityTable(
            "instance-level IoU (iIoU, cityscapesScripts)",
            ("id", "class", "iIoU", "instances", "TP (weighted)", "FN (weighted)", "FP"), rows,
            f"mean iIoU: {_pct(q['miiou'])}",
            rule=_rule(q, "instances", INSTANCE_AVERAGING, preset),
        ))  # fmt: skip
        cats = [c for c in q.get("categories") or [] if c["tp_weighted"] is not None]
        if cats:
            rows = [(printable(c["name"]), _pct(c["iiou"]), _weighted(c["tp_weighted"]),
                     _weighted(c["fn_weighted"]), f"{c['fp']:,}") for c in cats]  # fmt: skip
            tables.append(QualityTable(
                "category iIoU", ("category", "iIoU", "TP (weighted)", "FN (weighted)", "FP"),
                rows, f"category mean iIoU: {_pct(q['category_miiou'])}", name_column=0,
            ))  # fmt: skip
    lines = []
    for side, field in (("ground truth", "absent_chunks"), ("predictions", "absent_pred_chunks")):
        if doc.get(field) is None:  # (documents written before have none)
            continue
        absent = doc[field]["images"]
        for name, c in absent.items():
            if _int(c, f"{field}.images[{name!r}]") < 0:
                msg = f"{field}.images[{name!r}] is {c}, expected a count"
                raise ValueError(msg)
        if absent:
            items = sorted(absent.items(), key=lambda kv: -kv[1])
            shown = ", ".join(f"{printable(n)!r} ({c})" for n, c in items[:10])
            more = f", and {len(items) - 10} more images" if len(items) > 10 else ""
            lines.append(
                f"{side}: {sum(absent.values()):,} chunk(s) absent from the store were read as "
                f"the fill value (never written, as the Zarr spec allows) in {len(absent):,} "
                f"image(s): {shown}{more}"
            )
    return tables, lines
