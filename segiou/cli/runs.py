"""``segiou runs``: list the runs of a server."""

from __future__ import annotations

import argparse
from typing import Any

from segiou.cli._server_options import add_server_options, client_from
from segiou.report.document import printable

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``runs`` subcommand to an ``argparse`` subparsers object.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.
    """
    p = sub.add_parser("runs", help="list the runs of a segiou serve server")
    add_server_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List the runs: name, status, labels, batches, images, pixels.

    Parameters
    ----------
    args : argparse.Namespace
        What the ``runs`` subparser returned.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    SegiouError
        The server refused (e.g. a wrong token) or cannot be reached.
    """
    with client_from(args) as client:
        runs = client.runs()
    head = ("run", "status", "labels", "batches", "images", "pixels")
    # names come from whoever created the run: a newline or an ANSI escape is shown, not sent
    rows = [head] + [
        (printable(r["name"]), printable(r["status"]),
         f"{printable(r['labels']['name'])} ({r['labels']['num_classes']})",
         f"{r['batches']:,}", f"{r['images']:,}", f"{r['pixels']:,}")
        for r in runs
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        cells = [
            c.ljust(w) if i < 3 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())
    if not runs:
        print("(no runs)")
    return 0
