"""``segiou report``: render a saved state or a result document as HTML, Markdown, CSV, JSON or text.

Parses options, calls the public API (:meth:`segiou.report.Report.load`,
:func:`segiou.report.write_report`, :func:`segiou.report.export_plots`). No counting, no math.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from segiou.cli.options import nonnegative_int, positive_float, positive_int

__all__ = ["register", "run"]

_BOOTSTRAP = 1000  # a state's resamples when --bootstrap is not given


def register(sub: Any) -> None:
    """Add the ``report`` subcommand to an ``argparse`` subparsers object.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.
    """
    from segiou.report import REPORT_FORMATS

    rp = sub.add_parser(
        "report",
        help="render a saved state or a result JSON as HTML, Markdown, CSV, JSON or text",
        description="Render a saved state (segiou eval --state) or a result document "
        "(segiou eval --json) as one self-contained HTML file with plots, Markdown, the "
        "per-class CSV, the result JSON or text tables. From a result document, the parts "
        "that need the state (confusion heatmap, confused pairs, per-image histogram, worst "
        "images) are left out, with a note.",
    )
    rp.add_argument("input", metavar="INPUT", help="a saved state or a result JSON file")
    rp.add_argument("-o", "--output", required=True, metavar="OUT",
                    help="the report file; its suffix picks the format unless --format is given")  # fmt: skip
    rp.add_argument("--format", choices=sorted(REPORT_FORMATS), default=None,
                    help="html, md, csv (per-class table), json (result document) or txt "
                    "(default: from OUT's suffix)")  # fmt: skip
    rp.add_argument("--preset", default=None,
                    help="for a state: the averaging convention (default: segiou)")  # fmt: skip
    rp.add_argument("--beta", type=positive_float, default=None, metavar="B",
                    help="for a state: also report F-beta per class and its mean")  # fmt: skip
    rp.add_argument("--bootstrap", type=nonnegative_int, default=None, metavar="B",
                    help="for a state: percentile-bootstrap resamples of images for the "
                    f"intervals, as for eval (0 turns them off; default: {_BOOTSTRAP})")  # fmt: skip
    rp.add_argument("--bootstrap-seed", type=nonnegative_int, default=None, metavar="S",
                    help="for a state: seed of the resamples (default: 0)")  # fmt: skip
    rp.add_argument("--top", type=positive_int, default=10,
                    help="confused pairs and worst images to list (default: %(default)s)")  # fmt: skip
    rp.add_argument("--plots", metavar="DIR", default=None,
                    help="also write each plot as a PNG file into DIR (created if needed)")  # fmt: skip
    rp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``segiou report``: check the outputs, read the input, write the report (and plots).

    Parameters
    ----------
    args : argparse.Namespace
        What the ``report`` subparser returned.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    SegiouError
        Bad options or input (the command line prints the message and exits 2).
    """
    from segiou.conventions import PRESETS
    from segiou.errors import UsageError
    from segiou.outputs import check_outputs
    from segiou.report import PLOTS, Report, export_plots, report_format, write_report
    from segiou.report.plots import require_plotting

    outputs: dict[str, str | Path | None] = {"-o": args.output}
    if args.plots is not None:
        folder = Path(args.plots)
        if folder.exists() and not folder.is_dir():
            msg = f"--plots {args.plots!r} is a file; give a folder (it is created if needed)"
            raise UsageError(msg)
        outputs |= {f"--plots {stem}.png": folder / f"{stem}.png" for stem in PLOTS}
    # every output writable, distinct and not the input, before the input is read (the
    # report's folder must exist; the plots' folder is created)
    check_outputs({"-o": args.output}, inputs=[args.input])
    check_outputs(outputs, inputs=[args.input], create_parents=True)
    fmt = report_format(args.output, args.format, what="-o")
    if args.preset is not None and args.preset not in PRESETS:
        msg = f"--preset {args.preset!r} is not a preset; choose one of {sorted(PRESETS)}"
        raise UsageError(msg)
    if fmt == "html" or args.plots is not None:
        require_plotting("--plots" if fmt != "html" else "an HTML report")
    report = Report.load(args.input, preset=args.preset, beta=args.beta, top=args.top,
                         bootstrap=args.bootstrap, seed=args.bootstrap_seed,
                         default_bootstrap=_BOOTSTRAP)  # fmt: skip
    written = [write_report(report, args.output, fmt, what="-o")]
    if args.plots is not None:
        written += export_plots(report, args.plots)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0
