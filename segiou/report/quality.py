"""Text tables of Boundary IoU, instance-level IoU (iIoU) and absent ground-truth chunks."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["render_quality"]


def _pct(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:6.2f}"


def render_quality(doc: Mapping[str, Any], *, width: int = 100) -> str:
    """Render a result's Boundary IoU, iIoU and absent chunks (empty when it has none).

    Parameters
    ----------
    doc : mapping
        A result document (:meth:`segiou.Result.to_dict`, or its JSON read back); documents
        without these fields (``segiou.result`` version 1) render as empty.
    width : int
        Maximum line width.

    Returns
    -------
    str
        Tables in percent (``-``: undefined), and a line per kind of absent chunk report.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False,
                      markup=False, highlight=False)  # fmt: skip
    b = doc.get("boundary")
    if b is not None:
        w = b["width"]
        asked = f"{w['ratio']:g} of the image diagonal" if "ratio" in w else f"{w['pixels']} px"
        used = ", ".join(map(str, b["pixels_used"])) or "-"
        console.print(f"Boundary IoU (width {asked}: {used} px)")  # a line: never wrapped
        t = Table(box=box.SIMPLE_HEAD)
        for col in ("id", "class", "bIoU", "G_d & P_d", "G_d", "P_d"):
            t.add_column(col, justify="left" if col == "class" else "right")
        for c in b["classes"]:
            t.add_row(str(c["id"]), Text(c["name"]), _pct(c["iou"]), f"{c['intersection']:,}",
                      f"{c['gt']:,}", f"{c['pred']:,}")  # fmt: skip
        console.print(t)
        console.print(f"boundary mIoU: {_pct(b['miou']).strip()}")
    q = doc.get("instances")
    if q is not None:
        t = Table(title="instance-level IoU (iIoU, cityscapesScripts)", box=box.SIMPLE_HEAD,
                  title_justify="left")  # fmt: skip
        for col in ("id", "class", "iIoU", "instances", "TP (weighted)", "FN (weighted)", "FP"):
            t.add_column(col, justify="left" if col == "class" else "right")
        for c in q["classes"]:
            if c["average_size"] is None:  # not an instance class
                continue
            t.add_row(str(c["id"]), Text(c["name"]), _pct(c["iiou"]), f"{c['instances']:,}",
                      _weighted(c["tp_weighted"]), _weighted(c["fn_weighted"]),
                      f"{c['fp']:,}")  # fmt: skip
        console.print(t)
        rows = [c for c in q.get("categories") or [] if c["tp_weighted"] is not None]
        if rows:
            ct = Table(title="category iIoU", box=box.SIMPLE_HEAD, title_justify="left")
            for col in ("category", "iIoU", "TP (weighted)", "FN (weighted)", "FP"):
                ct.add_column(col, justify="left" if col == "category" else "right")
            for c in rows:
                ct.add_row(Text(c["name"]), _pct(c["iiou"]), _weighted(c["tp_weighted"]),
                           _weighted(c["fn_weighted"]), f"{c['fp']:,}")  # fmt: skip
            console.print(ct)
        console.print(f"mean iIoU: {_pct(q['miiou']).strip()}; category mean iIoU: "
                      f"{_pct(q['category_miiou']).strip()}")  # fmt: skip
    absent = (doc.get("absent_chunks") or {}).get("images") or {}
    if absent:
        items = sorted(absent.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{n!r} ({c})" for n, c in items[:10])
        more = f", and {len(items) - 10} more images" if len(items) > 10 else ""
        console.print(
            f"ground truth: {sum(absent.values()):,} chunk(s) absent from the store were read as "
            f"the fill value (never written, as the Zarr spec allows) in {len(absent):,} "
            f"image(s): {shown}{more}"
        )
    return buf.getvalue()


def _weighted(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"
