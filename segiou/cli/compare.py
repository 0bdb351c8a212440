"""``segiou compare``: the paired gate between two saved states. No statistics here.

Loads both states, calls :func:`segiou.stats.compare_states`, renders the verdict
(:mod:`segiou.report.gate`). Exit code 1 when a drop is both significant and beyond its
threshold, a score the baseline had is undefined now, or the candidate predicted more pixels
with an unexpected value (in total, or on any class's ground truth); 0 otherwise, 2 on bad
input. When too few images (or groups) differ for any p-value to go below alpha, the verdict
reads ``NO VERDICT`` with a warning instead of ``PASS`` (exit code 0 unless another rule fails);
when mIoU could be decided but no class could (Holm multiplies the classes' smallest p-value
by the number of classes tested), ``PASS on mIoU, NO VERDICT on classes``; when some classes
could be decided but a class whose IoU changed could not, ``PASS, NO VERDICT on class 'x'``,
and a warning names every such class (JSON ``undecided_classes``), whatever the verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from segiou._jsontext import loads
from segiou.cli.options import nonnegative_float, nonnegative_int, positive_int, probability
from segiou.errors import CheckpointError, UsageError

__all__ = ["EXIT_REGRESSION", "load_state", "register", "run"]

#: Exit code of a significant drop beyond its threshold.
EXIT_REGRESSION = 1


def register(sub: Any) -> None:
    """Add the ``compare`` subcommand to an ``argparse`` subparsers object.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.
    """
    p = sub.add_parser(
        "compare",
        help="paired gate: did the candidate get significantly worse than the baseline?",
        description="Compare two runs on the images they share with a paired randomization "
        "(swap) test, and show paired bootstrap intervals of the differences. Exit "
        "code 1 when mIoU or a class IoU dropped significantly and beyond its threshold, or "
        "has a score in the baseline and none now, or when the candidate predicted more pixels "
        "with an unexpected value (left out of every score), in total or on any class's ground "
        "truth; 0 otherwise, 2 on bad input. With too few images (or groups) differing for any "
        "drop to be significant the verdict reads NO VERDICT, with a warning (exit code 0 "
        "unless another rule fails); when no class could be significant after the correction "
        "over the classes but mIoU could, PASS on mIoU, NO VERDICT on classes; when a class "
        "whose IoU changed could not be significant while others could, PASS, NO VERDICT on "
        "class 'x', and a warning names every such class.",
    )
    p.add_argument("baseline", help="saved state of the baseline run (segiou eval --state)")
    p.add_argument("candidate", help="saved state of the candidate run")
    p.add_argument("--alpha", type=probability, default=0.05,
                   help="significance level; intervals cover 1 - alpha (default: %(default)s)")  # fmt: skip
    p.add_argument("--max-miou-drop", type=nonnegative_float, default=0.005, metavar="X",
                   help="a significant mIoU drop fails beyond this, as a fraction "
                   "(default: %(default)s = 0.5 points)")  # fmt: skip
    p.add_argument("--max-class-drop", type=nonnegative_float, default=0.02, metavar="Y",
                   help="a significant class IoU drop fails beyond this (default: %(default)s)")  # fmt: skip
    p.add_argument("--shared-images", action="store_true",
                   help="compare on the images both runs scored (default: refuse different "
                   "image sets)")  # fmt: skip
    p.add_argument("--format", choices=["text", "md", "json"], default="text",
                   help="output format; md is ready for a pull-request comment")  # fmt: skip
    p.add_argument("--preset", default="segiou", help="averaging convention for both runs")
    p.add_argument("--bootstrap", type=positive_int, default=1000, metavar="B",
                   help="paired bootstrap resamples of the intervals (default: %(default)s)")  # fmt: skip
    p.add_argument("--permutations", type=positive_int, default=None, metavar="N",
                   help="random swaps of the randomization test that decides (default: at "
                   "least --bootstrap, and enough that their p-values' floor, 1/(N+1), does not "
                   "keep Holm's correction over the classes from --alpha; every swap is "
                   "enumerated when half of them, 2**(d-1) for d differing images, are at most "
                   "N; a count that can never reach --alpha, 19 or fewer at 0.05, is "
                   "refused)")  # fmt: skip
    p.add_argument("--bootstrap-seed", type=nonnegative_int, default=0, metavar="S",
                   help="seed of the resamples and swaps (default: %(default)s)")  # fmt: skip
    p.add_argument("--correction", choices=["holm", "none"], default="holm",
                   help="multiple-testing adjustment of the per-class p-values")  # fmt: skip
    p.add_argument(
        "--slices", metavar="META", help="image metadata (CSV/JSON) for --bootstrap-groups"
    )
    p.add_argument("--bootstrap-groups", metavar="COLUMN",
                   help="resample groups of correlated images (a --slices column)")  # fmt: skip
    p.add_argument("--output", "-o", metavar="FILE", help="also write the output to FILE")
    p.set_defaults(func=run)


def load_state(path: str, who: str) -> Any:
    """Load a saved state for the gate; a result report is refused saying what to pass instead.

    Parameters
    ----------
    path : str
        A state file (``segiou eval --state``, ``ConfusionMatrix.save``).
    who : str
        ``"baseline"`` or ``"candidate"``, for messages.

    Returns
    -------
    ConfusionMatrix

    Raises
    ------
    CheckpointError
        Unreadable, not JSON, a result report, or not a valid state.
    """
    from segiou.confusion import ConfusionMatrix

    try:
        data = loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        msg = f"{who} {path!r} does not exist"
        raise CheckpointError(msg) from err
    except (OSError, ValueError) as err:
        msg = f"{who} {path!r} is not readable JSON: {err}"
        raise CheckpointError(msg) from err
    if isinstance(data, dict) and data.get("format") == "segiou.result":
        msg = (
            f"{who} {path!r} is a result report (segiou.result), which holds no per-image "
            "counts; the paired test needs them: pass the state written by segiou eval --state"
        )
        raise CheckpointError(msg)
    return ConfusionMatrix.from_dict(data, source=f"{who} {path!r}")


def run(args: argparse.Namespace) -> int:
    """Run ``segiou compare``: load, compare, print (and write) the verdict.

    Parameters
    ----------
    args : argparse.Namespace
        What the ``compare`` subparser returned.

    Returns
    -------
    int
        1 when the gate fails, else 0.

    Raises
    ------
    SegiouError
        Bad input (the command line prints the message and exits 2).
    """
    from segiou.conventions import PRESETS
    from segiou.outputs import check_outputs, write_atomic
    from segiou.report.gate import render_comparison_markdown, render_comparison_text
    from segiou.stats import compare_states, read_metadata

    if args.preset not in PRESETS:
        msg = f"--preset {args.preset!r} is not a preset; choose one of {sorted(PRESETS)}"
        raise UsageError(msg)
    if args.bootstrap_groups and not args.slices:
        msg = "--bootstrap-groups names a column of the image metadata: give it with --slices"
        raise UsageError(msg)
    if args.slices and not args.bootstrap_groups:  # (the file was never read: a typo passed)
        msg = (
            "--slices is read only for --bootstrap-groups (the gate compares whole runs): name "
            "the column of correlated images, or leave --slices out"
        )
        raise UsageError(msg)
    out = check_outputs({"--output": args.output},
                        inputs=[args.baseline, args.candidate])["--output"]  # fmt: skip
    base, cand = load_state(args.baseline, "baseline"), load_state(args.candidate, "candidate")
    groups = None
    if args.bootstrap_groups:
        meta = read_metadata(args.slices)
        if args.bootstrap_groups not in meta.columns:
            msg = (
                f"--bootstrap-groups {args.bootstrap_groups!r} is not a column of "
                f"{meta.source} (columns: {list(meta.columns)})"
            )
            raise UsageError(msg)
        groups = {n: v[args.bootstrap_groups] for n, v in meta.values.items()}
    comp = compare_states(
        base, cand, preset=args.preset, resamples=args.bootstrap, seed=args.bootstrap_seed,
        alpha=args.alpha, max_miou_drop=args.max_miou_drop, max_class_drop=args.max_class_drop,
        shared_images=args.shared_images, correction=args.correction, groups=groups,
        group_name=args.bootstrap_groups or "group", permutations=args.permutations,
    )  # fmt: skip
    doc = comp.to_dict()
    names = {"baseline": args.baseline, "candidate": args.candidate}
    if args.format == "json":
        text = json.dumps(doc | {"inputs": names}, indent=2, allow_nan=False) + "\n"
    elif args.format == "md":
        text = render_comparison_markdown(doc, **names)
    else:
        text = render_comparison_text(doc, **names)
    if out is not None:
        write_atomic(out, text, what="--output")
        print(f"wrote {args.output}", file=sys.stderr)
    sys.stdout.write(text)
    return EXIT_REGRESSION if comp.failed else 0
