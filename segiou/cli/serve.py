"""``segiou serve``: run the metrics service (install ``segiou[service]``)."""

from __future__ import annotations

import argparse
from typing import Any

from segiou.cli.options import positive_float, positive_int

__all__ = ["register", "run"]


def _port(text: str) -> int:
    if not (text.isdigit() and 0 <= int(text) <= 65535):
        msg = f"{text!r} is not a port number (0 to 65535; 0 picks a free port)"
        raise argparse.ArgumentTypeError(msg)
    return int(text)


def register(sub: Any) -> None:
    """Add the ``serve`` subcommand to an ``argparse`` subparsers object.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.
    """
    p = sub.add_parser("serve", help="run the metrics service: keyed batches in, live results out")
    p.add_argument("--data", default="segiou-data",
                   help="data folder, holding segiou.db (default: %(default)s)")  # fmt: skip
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: %(default)s); any other than loopback "
                   "needs a token")  # fmt: skip
    p.add_argument("--port", type=_port, default=8787, help="port (default: %(default)s)")
    p.add_argument("--token-file", metavar="FILE",
                   help="file holding the bearer token (else $SEGIOU_TOKEN; else no token, "
                   "loopback only)")  # fmt: skip
    p.add_argument("--max-body-mb", type=positive_float, default=256, metavar="N",
                   help="largest request body in MiB (default: %(default)s)")  # fmt: skip
    p.add_argument("--workers", type=positive_int, default=4,
                   help="threads that count raw masks and render results (default: %(default)s)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``segiou serve`` until it is stopped.

    Parameters
    ----------
    args : argparse.Namespace
        What the ``serve`` subparser returned.

    Returns
    -------
    int
        The exit code, 0 after a clean stop.

    Raises
    ------
    SegiouError
        A non-loopback ``--host`` without a token, an unreadable or short token, a port that
        cannot be bound, or a corrupt database (the command line prints the message, exit 2).
    """
    from segiou.service.server import read_token, serve

    serve(args.data, host=args.host, port=args.port, token=read_token(args.token_file),
          max_body_mb=args.max_body_mb, workers=args.workers)  # fmt: skip
    return 0
