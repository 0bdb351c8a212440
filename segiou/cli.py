"""Layer 6: the ``segiou`` command line. Parses, calls the public API, renders; no math."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from segiou.errors import SegiouError

__all__ = ["build_parser", "main"]

#: Exit code for bad input (a message on stderr says what to fix).
EXIT_BAD_INPUT = 2


def _cmd_demo(args: argparse.Namespace) -> int:
    from segiou.demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``segiou`` command."""
    from segiou import __version__

    parser = argparse.ArgumentParser(
        prog="segiou",
        description="Score semantic-segmentation masks: per-class IoU, mIoU, Dice, accuracies.",
    )
    parser.add_argument("--version", action="version", version=f"segiou {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="make a synthetic Cityscapes-like dataset and score it")
    demo.add_argument("dir", nargs="?", default="segiou-demo", help="output folder (default: %(default)s)")
    demo.add_argument("--images", type=int, default=24, help="number of images (default: %(default)s)")
    demo.add_argument("--size", default="512x1024", help="HxW of each image (default: %(default)s)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    demo.set_defaults(func=_cmd_demo)

    try:
        from segiou import _cli_geometry
    except ImportError:  # pragma: no cover - only while the module is being written
        pass
    else:
        _cli_geometry.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``segiou`` command; return its exit code (0 ok, 2 bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except SegiouError as err:
        print(f"segiou {args.command}: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
