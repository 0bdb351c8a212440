"""Render results for people: text, Markdown, CSV and one self-contained HTML file with plots.

A :class:`Report` is a result document (version 1 or 2: intervals and slices when it has them)
and, when there is one, the state it was evaluated from (confusion heatmap, confused pairs,
per-image histogram, worst images). No counting, no statistics: renderers show what the
document and the state hold. The HTML report and the plots need the ``report`` extra
(``pip install 'segiou[report]'``: jinja2, matplotlib), loaded only when used.
"""

from __future__ import annotations

from segiou.report.document import ResultDoc
from segiou.report.files import REPORT_FORMATS, render, report_format, write_report
from segiou.report.html import render_html
from segiou.report.markdown import render_csv, render_markdown
from segiou.report.plots import PLOTS, export_plots, plot_figures, require_plotting
from segiou.report.text import (
    render_analysis,
    render_per_image_csv,
    render_text,
    write_per_image_csv,
)
from segiou.report.view import Report, StateView

__all__ = [
    "PLOTS",
    "REPORT_FORMATS",
    "Report",
    "ResultDoc",
    "StateView",
    "export_plots",
    "plot_figures",
    "render",
    "render_analysis",
    "render_csv",
    "render_html",
    "render_markdown",
    "render_per_image_csv",
    "render_text",
    "report_format",
    "require_plotting",
    "write_per_image_csv",
    "write_report",
]
