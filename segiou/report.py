"""Layer 6: render results for people (text tables). No counting, no metric math."""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from segiou.results import Result

__all__ = ["render_text"]


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
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    pc = result.per_class
    t = Table(title=f"per class ({result.labels}, convention {result.convention.name!r})",
              box=box.SIMPLE_HEAD, title_justify="left")  # fmt: skip
    for col in ("id", "class", "IoU", "Dice", "prec", "recall", "TP", "FP", "FN", "void"):
        t.add_column(col, justify="left" if col == "class" else "right")
    for i, name in enumerate(result.class_names):
        t.add_row(
            str(i), name, _pct(pc["iou"][i]), _pct(pc["dice"][i]), _pct(pc["precision"][i]),
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
            ct.add_row(name, _pct(c["iou"][i]), f"{c['tp'][i]:,}", f"{c['fp'][i]:,}",
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
    console.print("rules: " + "; ".join(result.convention.rules()))
    return buf.getvalue()
