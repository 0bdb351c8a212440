"""The HTML report: one self-contained file (inline CSS, plots as data-URI SVG images, no script).

Rendered with a jinja2 template (``templates/report.html.j2``) with autoescaping on: class and
image names come from files and are always text, never markup. The page's
Content-Security-Policy forbids loading anything but its own styles and ``data:`` images, so it
opens offline and cannot reach out. Needs the ``report`` extra (``pip install 'segiou[report]'``).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from segiou.report.document import fmt_ci, fmt_pct, slice_classes, slice_metrics, summary_label
from segiou.report.quality import quality_sections

if TYPE_CHECKING:
    from segiou.report.view import Report

__all__ = ["render_html"]


def _thousands(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _exact(x: float | None) -> str:
    return "" if x is None else repr(float(x))


def render_html(report: Report, *, plots: bool = True) -> str:
    """Render a report as one self-contained HTML page.

    Parameters
    ----------
    report : Report
        What to show (see :class:`~segiou.report.Report`).
    plots : bool, default True
        Draw the plots (confusion heatmap, IoU bars with interval whiskers, per-image mIoU
        histogram) with matplotlib, as inline SVG images; ``False`` leaves them out.

    Returns
    -------
    str
        The HTML document. It holds the summary (with intervals when the result has them),
        the per-class and per-category tables, the plots, the top confused pairs, the worst
        images, the slice tables (when the result has slices), Boundary IoU and iIoU (when the
        result has them) and the counting rules and preset. Parts that need the saved state are replaced by a note when the report was
        made from a result document.

    Raises
    ------
    UsageError
        jinja2 or matplotlib is not installed (``pip install 'segiou[report]'``).
    """
    from segiou.report.plots import plot_figures, require_plotting

    require_plotting()
    import jinja2

    from segiou._version import __version__

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("segiou.report", "templates"),
        autoescape=True,  # every value is escaped; the template has no |safe
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(pct=fmt_pct, ci=fmt_ci, thousands=_thousands, exact=_exact,
                       label=summary_label)  # fmt: skip
    images: dict[str, str] = {}
    if plots:
        for stem, svg in plot_figures(report, "svg").items():
            images[stem] = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
    doc = report.doc
    quality_tables, quality_notes = quality_sections(doc.data)
    context: dict[str, Any] = {
        "r": report,
        "doc": doc,
        "version": __version__,
        "plots": {stem: images.get(stem) for stem in ("confusion", "class_iou", "image_miou")},
        "ci": doc.intervals is not None,
        "cat_ci": doc.intervals is not None and doc.intervals.categories is not None,
        "ci_label": "CI" if doc.intervals is None else doc.intervals.level_label,
        "slice_metrics": slice_metrics,
        "slice_classes": slice_classes,
        "quality_tables": quality_tables,
        "quality_notes": quality_notes,
    }
    return env.get_template("report.html.j2").render(context)
