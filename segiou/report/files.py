"""Writing a report to a file in the format its name asks for (html, md, csv, json, txt)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from segiou.errors import ResultDocumentError, UsageError
from segiou.outputs import write_atomic

if TYPE_CHECKING:
    from segiou.report.view import Report

__all__ = ["REPORT_FORMATS", "render", "report_format", "write_report"]

#: Report formats, by the file suffixes that select them.
REPORT_FORMATS = {
    "html": (".html", ".htm"),
    "md": (".md", ".markdown"),
    "csv": (".csv",),
    "json": (".json",),
    "txt": (".txt",),
}


def report_format(path: str | os.PathLike[str], fmt: str | None = None, *,
                  what: str = "report") -> str:  # fmt: skip
    """Return the report format asked for: ``fmt``, else the one ``path``'s suffix names.

    Parameters
    ----------
    path : str or os.PathLike
        The output file.
    fmt : str, optional
        ``"html"``, ``"md"``, ``"csv"``, ``"json"`` or ``"txt"``; default: from the suffix.
    what : str
        How to name the output in messages (e.g. ``"--report"``).

    Returns
    -------
    str
        One of :data:`REPORT_FORMATS`.

    Raises
    ------
    UsageError
        An unknown ``fmt``, or no ``fmt`` and a suffix that names no format.

    Examples
    --------
    >>> report_format("out/report.html"), report_format("r.txt", "md")
    ('html', 'md')
    """
    if fmt is not None:
        if fmt not in REPORT_FORMATS:
            msg = f"{what}: format {fmt!r} is not one of {sorted(REPORT_FORMATS)}"
            raise UsageError(msg)
        return fmt
    suffix = Path(os.fspath(path)).suffix.lower()
    for name, suffixes in REPORT_FORMATS.items():
        if suffix in suffixes:
            return name
    known = ", ".join(s for ss in REPORT_FORMATS.values() for s in ss)
    msg = (
        f"{what} {os.fspath(path)!r}: the suffix {suffix or '(none)'!r} names no report format; "
        f"end the name with one of {known}, or give the format (--format)"
    )
    raise UsageError(msg)


def render(report: Report, fmt: str) -> str:
    """Render ``report`` in format ``fmt`` (see :data:`REPORT_FORMATS`).

    Parameters
    ----------
    report : Report
        What to show.
    fmt : str
        ``"html"``, ``"md"``, ``"csv"`` (the per-class table), ``"json"`` (the result document)
        or ``"txt"`` (text tables).

    Returns
    -------
    str

    Raises
    ------
    UsageError
        An unknown format, or the ``report`` extra missing for ``"html"``.
    ResultDocumentError
        ``"json"`` of a document holding an infinite number (``NaN`` is written as ``null``).
    """
    from segiou.report.html import render_html
    from segiou.report.markdown import render_csv, render_markdown
    from segiou.report.text import render_text

    fmt = report_format("", fmt)
    if fmt == "html":
        return render_html(report)
    if fmt == "md":
        return render_markdown(report)
    if fmt == "csv":
        return render_csv(report)
    if fmt == "json":
        return json.dumps(_strict(report.doc.data, report.source), indent=2,
                          allow_nan=False) + "\n"  # fmt: skip
    return render_text(report)


def _strict(value: Any, where: str) -> Any:
    """Return a document with ``NaN`` as ``null`` (undefined, as segiou writes it).

    A document written by Python's ``json.dump`` may hold ``NaN``, which the reports read as
    undefined; strict JSON has no ``NaN``. An infinite number means nothing in a result.
    The walk keeps its own stack: a field nested hundreds of levels deep (which ``json``
    parses) overflowed Python's stack when this recursed, two frames a level.
    """
    root: list[Any] = [None]
    # (value, its field's name, the container to put the copy in, the key or index there)
    todo: list[tuple[Any, str, Any, Any]] = [(value, "", root, 0)]
    while todo:
        item, field, into, key = todo.pop()
        if isinstance(item, float):
            if math.isinf(item):
                msg = (f"{where}: field {field or '(document)'!r} is {item}, which no score or "
                       "count can be; write the document again with segiou")  # fmt: skip
                raise ResultDocumentError(msg)
            into[key] = None if math.isnan(item) else item
        elif isinstance(item, Mapping):
            copy: dict[Any, Any] = dict.fromkeys(item)  # the keys in their order, filled below
            into[key] = copy
            todo.extend((v, f"{field}.{k}" if field else str(k), copy, k)
                        for k, v in reversed(list(item.items())))  # fmt: skip
        elif isinstance(item, list | tuple):
            seq: list[Any] = [None] * len(item)
            into[key] = seq
            todo.extend((v, f"{field}[{i}]", seq, i) for i, v in reversed(list(enumerate(item))))
        else:
            into[key] = item
    return root[0]


def write_report(report: Report, path: str | os.PathLike[str], fmt: str | None = None, *,
                 what: str = "report") -> Path:  # fmt: skip
    """Write a report atomically, in the format ``fmt`` or the one ``path``'s suffix names.

    Parameters
    ----------
    report : Report
        What to show.
    path : str or os.PathLike
        The file (replaced atomically; see :func:`segiou.outputs.write_atomic`).
    fmt : str, optional
        ``"html"``, ``"md"``, ``"csv"``, ``"json"`` or ``"txt"`` (default: from the suffix).
    what : str
        How to name the output in messages.

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    UsageError
        No format can be told, the path cannot be written, or the ``report`` extra is missing
        for HTML.
    OutputError
        The file cannot be written; an existing file is left as it was.
    """
    text = render(report, report_format(path, fmt, what=what))
    return write_atomic(path, text, what=what)
