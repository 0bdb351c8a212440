"""The ``segiou`` command line: parse, call the public API, render. No counting, no math.

One module per subcommand (:mod:`~segiou.cli.eval`, :mod:`~segiou.cli.demo`,
:mod:`~segiou.cli.ingest`, :mod:`~segiou.cli.geometry` for ``box`` and ``sets``,
:mod:`~segiou.cli.serve`, and the service's clients :mod:`~segiou.cli.push`,
:mod:`~segiou.cli.runs`, :mod:`~segiou.cli.result`); each has
``register(subparsers)``, which sets the subcommand's ``func``. :func:`main` maps every
:class:`~segiou.errors.SegiouError` to exit code 2 and its one-line message, with no traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from segiou.errors import SegiouError

__all__ = ["EXIT_BAD_INPUT", "EXIT_OK", "build_parser", "main"]

#: Exit codes: success, and bad input (a message on stderr says what to fix).
EXIT_OK = 0
EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of the ``segiou`` command.

    Returns
    -------
    argparse.ArgumentParser
        A parser with ``--version`` and a required subcommand: ``demo``, ``eval``,
        ``ingest``, ``box``, ``sets``, ``serve``, ``push``, ``runs`` and ``result``. Each
        subcommand sets ``func``, which takes the parsed namespace and returns the exit code.
    """
    from segiou._version import __version__
    from segiou.cli import demo, geometry, ingest, push, serve
    from segiou.cli import eval as eval_
    from segiou.cli import result as result_
    from segiou.cli import runs as runs_

    parser = argparse.ArgumentParser(
        prog="segiou",
        description="Score semantic-segmentation masks: per-class IoU, mIoU, Dice, accuracies.",
    )
    parser.add_argument("--version", action="version", version=f"segiou {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (demo, eval_, ingest, geometry, serve, push, runs_, result_):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``segiou`` command; return its exit code (0 ok, 2 bad input).

    A :class:`~segiou.errors.SegiouError` raised by the subcommand is printed to stderr as
    ``segiou <command>: error: <message>`` and gives exit code 2.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit code: 0 ok, 2 (``EXIT_BAD_INPUT``) bad input.

    Raises
    ------
    SystemExit
        From argparse: with code 2 for arguments it cannot parse (it prints the usage), or 0
        for ``--help`` and ``--version``.
    """
    from segiou.cli.geometry import shield_negative_boxes

    parser = build_parser()
    args = parser.parse_args(shield_negative_boxes(sys.argv[1:] if argv is None else argv))
    try:
        code = int(args.func(args))
        sys.stdout.flush()
    except SegiouError as err:
        print(f"segiou {args.command}: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # stdout closed early (segiou eval ... | head): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that Python's exit flush does not fail
        return EXIT_OK
    return code
