"""Layer 6: the ``segiou`` command line. Parses, calls the public API, renders; no math."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from segiou._cli_ingest import _positive
from segiou.errors import SegiouError

__all__ = ["build_parser", "main"]

#: Exit code for bad input (a message on stderr says what to fix).
EXIT_BAD_INPUT = 2


def _cmd_demo(args: argparse.Namespace) -> int:
    from segiou.demo import run_demo

    return run_demo(args)


def _cmd_eval(args: argparse.Namespace) -> int:
    from segiou.evaluation import run_eval

    return run_eval(args)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        msg = f"{text!r} is not a positive finite number"
        raise argparse.ArgumentTypeError(msg)
    return value


def add_eval_options(p: argparse.ArgumentParser) -> None:
    """Add the options shared by ``segiou eval`` and the pipelines to a parser.

    Options shared by ``segiou eval`` and the pipelines: ``--labels``, ``--ignore``,
    ``--gt-ids``, ``--pred-ids``, ``--preset``, ``--scheduler``, ``--split-every``,
    ``--missing-pred``, ``--missing-gt-chunks``, ``--on-unexpected`` and ``--quiet``; the
    parsed values are what :func:`segiou.evaluation.evaluate_paths` and
    :func:`segiou.evaluation.run_eval` read. Values are checked when they are used, not
    here (except the fixed choices, which argparse checks).

    Parameters
    ----------
    p : argparse.ArgumentParser
        The parser (or subparser) to add the options to; changed in place.
    """
    p.add_argument("--labels", default="cityscapes",
                   help="cityscapes, pascal_voc, ade20k, a spec file (.json/.toml) or a number "
                   "of classes (default: %(default)s)")  # fmt: skip
    p.add_argument("--ignore", type=int, nargs="+", metavar="ID",
                   help="ignore value(s), replacing the spec's (e.g. 255)")  # fmt: skip
    p.add_argument("--gt-ids", choices=["class", "raw"], default=None,
                   help="masks hold class ids or the spec's raw ids (default: what segiou "
                   "ingest recorded in the store, else raw when the spec has a raw table, e.g. "
                   "Cityscapes labelIds, else class)")  # fmt: skip
    p.add_argument(
        "--pred-ids",
        choices=["class", "raw"],
        default=None,
        help="id space of predictions (default: what segiou ingest recorded, else --gt-ids)",
    )
    p.add_argument("--preset", default="segiou",
                   help="averaging convention: segiou, cityscapes, mmseg, hf_evaluate, "
                   "detectron2, torchmetrics, sklearn, sklearn_all_labels, keras")  # fmt: skip
    p.add_argument("--scheduler", default="threads",
                   help="threads (default), synchronous, processes, local-cluster, or the "
                   "address of a dask.distributed scheduler (tcp://host:8786)")  # fmt: skip
    p.add_argument("--split-every", type=int, default=8, help="tree-reduction fan-in")
    p.add_argument(
        "--missing-pred",
        choices=["error", "void"],
        default="error",
        help="a ground-truth image without prediction: error, or score it all-void",
    )
    p.add_argument(
        "--missing-gt-chunks",
        choices=["error", "fill"],
        default="error",
        help="a ground-truth chunk missing from a Zarr store: error (default), or read it as "
        "the fill value (for stores written by zarr without write_empty_chunks)",
    )
    p.add_argument(
        "--on-unexpected",
        choices=["raise", "count"],
        default="raise",
        help="label values outside the spec: raise (default) or count and report",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of the ``segiou`` command.

    Returns
    -------
    argparse.ArgumentParser
        A parser with ``--version`` and a required subcommand: ``demo``, ``eval``,
        ``ingest``, ``box`` and ``sets``. Each subcommand sets ``func``, which takes the
        parsed namespace and returns the exit code.
    """
    from segiou import __version__

    parser = argparse.ArgumentParser(
        prog="segiou",
        description="Score semantic-segmentation masks: per-class IoU, mIoU, Dice, accuracies.",
    )
    parser.add_argument("--version", action="version", version=f"segiou {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="make a synthetic Cityscapes-like dataset and score it")
    demo.add_argument(
        "dir", nargs="?", default="segiou-demo", help="output folder (default: %(default)s)"
    )
    demo.add_argument(
        "--images", type=int, default=24, help="number of images (default: %(default)s)"
    )
    demo.add_argument("--size", default="512x1024", help="HxW of each image (default: %(default)s)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    demo.set_defaults(func=_cmd_demo)

    ev = sub.add_parser("eval", help="score predictions against ground truth (Zarr or PNG)")
    ev.add_argument("--gt", required=True, help="ground truth: Zarr store[/path] or PNG folder")
    ev.add_argument("--pred", required=True, help="predictions: Zarr store[/path] or PNG folder")
    add_eval_options(ev)
    ev.add_argument(
        "--layout",
        choices=["plain", "cityscapes"],
        default="plain",
        help="PNG folders only: how files pair up (default: same relative names)",
    )
    ev.add_argument("--gt-pattern", help="PNG folders only: glob of ground-truth files")
    ev.add_argument("--pred-pattern", help="PNG folders only: glob of prediction files")
    ev.add_argument("--json", metavar="FILE", help="write the JSON report (segiou.result v1)")
    ev.add_argument("--per-image", metavar="CSV", help="write per-image IoU rows as CSV")
    ev.add_argument("--state", metavar="FILE", help="also save the count state (JSON checkpoint)")
    ev.add_argument("--beta", type=_positive_float, default=None, metavar="B",
                    help="also report F-beta per class and its mean (1 = F1, mmseg's mFscore)")  # fmt: skip
    ev.add_argument("--top", type=_positive, default=5,
                    help="confusions and worst images to list (default: %(default)s)")  # fmt: skip
    ev.set_defaults(func=_cmd_eval)

    from segiou import _cli_geometry, _cli_ingest

    _cli_ingest.register(sub)
    _cli_geometry.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``segiou`` command; return its exit code (0 ok, 2 bad input).

    A :class:`~segiou.errors.SegiouError` raised by the subcommand is printed to stderr as
    ``segiou <command>: error: <message>`` and gives exit code 2; other exceptions propagate.

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
    from segiou._cli_geometry import shield_negative_boxes

    parser = build_parser()
    args = parser.parse_args(shield_negative_boxes(sys.argv[1:] if argv is None else argv))
    try:
        return int(args.func(args))
    except SegiouError as err:
        print(f"segiou {args.command}: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
