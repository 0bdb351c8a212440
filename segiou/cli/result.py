"""``segiou result``: the live result of a run on a server, as ``segiou eval`` prints it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from segiou.cli._server_options import add_server_options, client_from
from segiou.cli.options import nonnegative_int, positive_float, positive_int

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``result`` subcommand to an ``argparse`` subparsers object.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.
    """
    p = sub.add_parser("result", help="print the live result of a run (the tables of eval)")
    add_server_options(p)
    p.add_argument("--run", required=True, help="the run")
    p.add_argument("--preset", default="segiou", help="averaging convention (as for eval)")
    p.add_argument("--beta", type=positive_float, default=None, metavar="B",
                   help="also report F-beta per class and its mean")  # fmt: skip
    p.add_argument("--bootstrap", type=nonnegative_int, default=1000, metavar="B",
                   help="percentile-bootstrap resamples of images for the intervals, as for eval "
                   "(runs with per-image rows; 0 turns them off; default: %(default)s)")  # fmt: skip
    p.add_argument("--bootstrap-seed", type=nonnegative_int, default=0, metavar="S",
                   help="seed of the resamples (default: %(default)s)")  # fmt: skip
    p.add_argument(
        "--json", metavar="FILE", help="write the JSON report (segiou.result, version 3)"
    )
    p.add_argument("--per-image", metavar="CSV", help="write per-image IoU rows as CSV")
    p.add_argument("--state", metavar="FILE", help="also save the run's state (JSON checkpoint)")
    p.add_argument("--top", type=positive_int, default=5,
                   help="confusions and worst images to list (default: %(default)s)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Fetch the run's state, evaluate it, print the tables and write the outputs.

    Parameters
    ----------
    args : argparse.Namespace
        What the ``result`` subparser returned.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    SegiouError
        An unknown preset or run, an output that cannot be written, a refusal, or a server
        that cannot be reached.
    """
    from segiou.conventions import get_convention
    from segiou.outputs import check_outputs, write_atomic
    from segiou.report import render_analysis, render_text, write_per_image_csv
    from segiou.results import evaluate

    get_convention(args.preset)  # an unknown preset is refused before any request
    # every output writable and distinct, before any request
    checked = check_outputs({f"--{o.replace('_', '-')}": getattr(args, o)
                             for o in ("json", "per_image", "state")})  # fmt: skip
    outs = {o: checked[f"--{o.replace('_', '-')}"] for o in ("json", "per_image", "state")}
    with client_from(args, args.run) as client:
        cm = client.state()
    if args.bootstrap and cm.per_image and cm.n_images:  # the intervals eval shows too
        from segiou.stats import evaluate_with_intervals

        result = evaluate_with_intervals(cm, preset=args.preset, beta=args.beta,
                                         resamples=args.bootstrap, seed=args.bootstrap_seed)  # fmt: skip
    else:
        result = evaluate(cm, preset=args.preset, beta=args.beta)
    if outs["json"]:
        write_atomic(outs["json"], result.to_json() + "\n", what="--json")
        print(f"wrote {outs['json']}", file=sys.stderr)
    if outs["per_image"]:
        write_per_image_csv(cm, outs["per_image"], preset=result.convention)
        print(f"wrote {outs['per_image']}", file=sys.stderr)
    if outs["state"]:
        cm.save(outs["state"])
        print(f"wrote {outs['state']}", file=sys.stderr)
    print(render_text(result))
    print(render_analysis(cm, top=args.top, preset=result.convention))
    return 0
