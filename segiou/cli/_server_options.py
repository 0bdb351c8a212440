"""Options shared by the commands that talk to a server (``push``, ``runs``, ``result``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from segiou.client import Client

__all__ = ["add_server_options", "client_from"]


def add_server_options(p: argparse.ArgumentParser) -> None:
    """Add ``--server``, ``--token-file`` and ``--retries`` to a subcommand's parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The subparser; changed in place.
    """
    p.add_argument("--server", required=True, metavar="URL",
                   help="the segiou serve server, e.g. http://127.0.0.1:8787")  # fmt: skip
    p.add_argument("--token-file", metavar="FILE",
                   help="file holding the bearer token (else $SEGIOU_TOKEN; else none)")  # fmt: skip
    p.add_argument("--retries", type=int, default=8, metavar="N",
                   help="retries after a connection error or 5xx reply (default: %(default)s)")  # fmt: skip


def client_from(args: argparse.Namespace, run: str | None = None) -> Client:
    """Make the client the options describe.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options with ``server``, ``token_file`` and ``retries``.
    run : str, optional
        The run the client acts on.

    Returns
    -------
    Client

    Raises
    ------
    UsageError
        A bad URL, run name or token.
    """
    from segiou.client import Client
    from segiou.service.server import read_token

    return Client(args.server, read_token(args.token_file), run=run, retries=max(0, args.retries))
