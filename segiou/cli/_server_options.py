"""Options shared by the commands that talk to a server (``push``, ``runs``, ``result``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from segiou.client import Client

__all__ = ["add_server_options", "client_from"]


def add_server_options(p: argparse.ArgumentParser) -> None:
    """Add ``--server`` and ``--token-file`` to a subcommand's parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The subparser; changed in place.
    """
    p.add_argument("--server", required=True, metavar="URL",
                   help="the segiou serve server, e.g. http://127.0.0.1:8787")  # fmt: skip
    p.add_argument("--token-file", metavar="FILE",
                   help="file holding the bearer token (else $SEGIOU_TOKEN; else none)")  # fmt: skip


def client_from(args: argparse.Namespace, run: str | None = None) -> Client:
    """Make the client the options describe.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options with ``server`` and ``token_file``.
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

    return Client(args.server, read_token(args.token_file), run=run)
