"""The ``segiou`` command line: parse, call the public API, render. No counting, no math.

One module per subcommand (:mod:`~segiou.cli.eval`, :mod:`~segiou.cli.compare`,
:mod:`~segiou.cli.demo`, :mod:`~segiou.cli.ingest`, :mod:`~segiou.cli.report`,
:mod:`~segiou.cli.geometry` for ``box`` and ``sets``, :mod:`~segiou.cli.serve`, and the
service's clients :mod:`~segiou.cli.push`, :mod:`~segiou.cli.runs`, :mod:`~segiou.cli.result`);
each has ``register(subparsers)``, which sets the subcommand's ``func``. :func:`main` maps every
:class:`~segiou.errors.SegiouError` to exit code 2 and its one-line message, with no traceback.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from segiou.errors import SegiouError, SegiouWarning

__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "EXIT_OK", "build_parser", "main"]

#: Exit codes: success; bad input (a message on stderr says what to fix); interrupted (Ctrl-C).
EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of the ``segiou`` command.

    Returns
    -------
    argparse.ArgumentParser
        A parser with ``--version`` and a required subcommand: ``demo``, ``eval``,
        ``compare``, ``ingest``, ``report``, ``box``, ``sets``, ``serve``, ``push``, ``runs`` and
        ``result``. Each subcommand sets ``func``, which takes the parsed namespace and returns the
        exit code.
    """
    from segiou._version import __version__
    from segiou.cli import compare, demo, geometry, ingest, push, report, serve
    from segiou.cli import eval as eval_
    from segiou.cli import result as result_
    from segiou.cli import runs as runs_

    parser = argparse.ArgumentParser(
        prog="segiou",
        description="Score semantic-segmentation masks: per-class IoU, mIoU, Dice, accuracies.",
    )
    parser.add_argument("--version", action="version", version=f"segiou {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (demo, eval_, compare, ingest, report, geometry, serve, push, runs_, result_):
        module.register(sub)
    return parser


def _quiet_stdout() -> None:
    """Send what is left for standard output to /dev/null (it was closed, or its reader left)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # so that Python's exit flush does not fail
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``segiou`` command; return its exit code (0 ok, 2 bad input, 130 interrupted).

    A :class:`~segiou.errors.SegiouError` raised by the subcommand is printed to stderr as
    ``segiou <command>: error: <message>`` and gives exit code 2; so does an operating-system
    error (a file that cannot be read or written, a full disk) and running out of memory, with
    what the system said. Ctrl-C prints ``segiou <command>: interrupted`` and gives 130; outputs
    are written atomically, so none is left half-written. A reader that closes standard output
    early (``segiou eval ... | head``) ends the command quietly, as does a closed standard output
    (``>&-``): the files asked for are written first.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit code: 0 ok, 2 (``EXIT_BAD_INPUT``) bad input, 130 (``EXIT_INTERRUPTED``)
        interrupted.

    Raises
    ------
    SystemExit
        From argparse: with code 2 for arguments it cannot parse (it prints the usage), or 0
        for ``--help`` and ``--version``.
    """
    from segiou.cli.geometry import shield_negative_boxes

    parser = build_parser()
    args = parser.parse_args(shield_negative_boxes(sys.argv[1:] if argv is None else argv))

    def fail(message: str) -> int:
        print(f"segiou {args.command}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT

    if sys.stdout is None:  # started with standard output closed (>&-): refuse before work
        _quiet_stdout()
        sys.stdout = Path(os.devnull).open("w", encoding="utf-8")  # noqa: SIM115 - lives on
        return fail(
            "standard output is closed; segiou prints its results there: redirect it instead "
            "(> results.txt, or > /dev/null to keep only the files asked for)"
        )
    with warnings.catch_warnings():  # library warnings (lossy masks, ...) as one line each
        warnings.simplefilter("always", SegiouWarning)
        warnings.showwarning = _show_warning(args.command)
        return _run(args, fail)


def _show_warning(command: str) -> Any:
    def show(message: Any, category: Any, *_: Any, **__: Any) -> None:
        if issubclass(category, SegiouWarning):
            print(f"segiou {command}: warning: {message}", file=sys.stderr)
        else:  # another package's warning: as Python prints it
            print(f"segiou {command}: {category.__name__}: {message}", file=sys.stderr)

    return show


def _run(args: argparse.Namespace, fail: Callable[[str], int]) -> int:
    """Run the parsed subcommand; map what it raises to exit codes (see :func:`main`)."""
    try:
        code = int(args.func(args))
        sys.stdout.flush()
    except SegiouError as err:
        return fail(str(err))
    except KeyboardInterrupt:
        print(f"segiou {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout closed early (segiou eval ... | head): not an error
        _quiet_stdout()
        return EXIT_OK
    except OSError as err:  # the system refused a file, a device, a full disk
        where = f" ({err.filename!r})" if err.filename else ""
        if err.errno is not None and _is_stdout_error(err):
            _quiet_stdout()
            return fail(f"cannot write to standard output ({err.strerror or err})")
        return fail(f"{err.strerror or err}{where}")
    except MemoryError:
        return fail("out of memory; evaluate fewer or smaller images at a time")
    return code


def _is_stdout_error(err: OSError) -> bool:
    """Whether ``err`` came from writing standard output (no file name: the stream's own)."""
    return err.filename is None and err.errno in (errno.ENOSPC, errno.EIO, errno.EBADF)
