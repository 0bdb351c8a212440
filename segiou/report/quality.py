"""Text tables of Boundary IoU, instance-level IoU (iIoU) and absent ground-truth chunks."""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from segiou.results import Result

__all__ = ["render_quality"]


def _pct(x: float) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:6.2f}"


def render_quality(result: Result, *, width: int = 100) -> str:
    """Render a result's Boundary IoU, iIoU and absent chunks (empty when it has none).

    Parameters
    ----------
    result : Result
        What :func:`segiou.evaluate` returned.
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
    names = result.class_names
    b = result.boundary
    if b is not None:
        w = b["width"]
        asked = f"{w['ratio']:g} of the image diagonal" if "ratio" in w else f"{w['pixels']} px"
        used = ", ".join(map(str, b["pixels_used"])) or "-"
        console.print(f"Boundary IoU (width {asked}: {used} px)")  # a line: never wrapped
        t = Table(box=box.SIMPLE_HEAD)
        for col in ("id", "class", "bIoU", "G_d & P_d", "G_d", "P_d"):
            t.add_column(col, justify="left" if col == "class" else "right")
        for i, n in enumerate(names):
            t.add_row(str(i), Text(n), _pct(b["iou"][i]), f"{int(b['intersection'][i]):,}",
                      f"{int(b['gt'][i]):,}", f"{int(b['pred'][i]):,}")  # fmt: skip
        console.print(t)
        console.print(f"boundary mIoU: {_pct(b['miou']).strip()}")
    q: dict[str, Any] | None = result.instances
    if q is not None:
        t = Table(title="instance-level IoU (iIoU, cityscapesScripts)", box=box.SIMPLE_HEAD,
                  title_justify="left")  # fmt: skip
        for col in ("id", "class", "iIoU", "instances", "TP (weighted)", "FN (weighted)", "FP"):
            t.add_column(col, justify="left" if col == "class" else "right")
        for i, n in enumerate(names):
            if i not in q["average_size"]:
                continue
            t.add_row(str(i), Text(n), _pct(q["iiou"][i]), f"{int(q['instances'][i]):,}",
                      f"{q['tp_weighted'][i]:,.1f}", f"{q['fn_weighted'][i]:,.1f}",
                      f"{int(q['fp'][i]):,}")  # fmt: skip
        console.print(t)
        cats = q.get("category_names") or []
        rows = [(j, n) for j, n in enumerate(cats) if not math.isnan(q["category_tp_weighted"][j])]
        if rows:
            ct = Table(title="category iIoU", box=box.SIMPLE_HEAD, title_justify="left")
            for col in ("category", "iIoU", "TP (weighted)", "FN (weighted)", "FP"):
                ct.add_column(col, justify="left" if col == "category" else "right")
            for j, n in rows:
                ct.add_row(Text(n), _pct(q["category_iiou"][j]),
                           f"{q['category_tp_weighted'][j]:,.1f}",
                           f"{q['category_fn_weighted'][j]:,.1f}",
                           f"{int(q['category_fp'][j]):,}")  # fmt: skip
            console.print(ct)
        console.print(f"mean iIoU: {_pct(q['miiou']).strip()}; category mean iIoU: "
                      f"{_pct(q['category_miiou']).strip()}")  # fmt: skip
    absent = result.absent_chunks
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
