"""Render results for people: text tables today (HTML and plots join here). No counting, no math."""

from __future__ import annotations

from segiou.report.text import (
    render_analysis,
    render_per_image_csv,
    render_text,
    write_per_image_csv,
)

__all__ = ["render_analysis", "render_per_image_csv", "render_text", "write_per_image_csv"]
