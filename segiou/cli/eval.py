"""``segiou eval``: count ground truth against predictions, print the tables, write the outputs.

Parses options (:class:`~segiou.cli.options.EvalOptions`), calls the public API
(:func:`segiou.parallel.count_stores`, :func:`segiou.evaluate`), renders
(:mod:`segiou.report`). No counting, no metric math.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from segiou.cli.options import (
    EvalOptions,
    add_eval_options,
    nonnegative_int,
    positive_float,
    positive_int,
)
from segiou.errors import UsageError

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``eval`` subcommand to an ``argparse`` subparsers object.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.
    """
    ev = sub.add_parser("eval", help="score predictions against ground truth (Zarr or PNG)")
    ev.add_argument("--gt", help="ground truth: Zarr store[/path] or PNG folder (default: "
                    "$CITYSCAPES_DATASET/gtFine/val)")  # fmt: skip
    ev.add_argument("--pred", help="predictions: Zarr store[/path] or PNG folder (default: "
                    "$CITYSCAPES_RESULTS, else $CITYSCAPES_DATASET/results)")  # fmt: skip
    add_eval_options(ev)
    ev.add_argument("--layout", choices=["auto", "plain", "cityscapes"], default="auto",
                    help="PNG folders only: how files pair up (default: cityscapes when "
                    "*_gtFine_labelIds.png files are found, else the same relative names)")  # fmt: skip
    ev.add_argument("--instances", metavar="PATH",
                    help="instance ground truth for iIoU (default: found beside the ground "
                    "truth: a store's 'instances' array, or *_gtFine_instanceIds.png)")  # fmt: skip
    ev.add_argument("--no-instances", action="store_true", help="do not count iIoU")
    ev.add_argument("--gt-pattern", help="PNG folders only: glob of ground-truth files")
    ev.add_argument("--pred-pattern", help="PNG folders only: glob of prediction files")
    ev.add_argument(
        "--json", metavar="FILE", help="write the JSON report (segiou.result, version 3)"
    )
    ev.add_argument("--per-image", metavar="CSV", help="write per-image IoU rows as CSV")
    ev.add_argument("--state", metavar="FILE", help="also save the count state (JSON checkpoint)")
    ev.add_argument("--report", metavar="FILE",
                    help="also write a report: .html (one self-contained file with plots; needs "
                    "segiou[report]), .md, .csv (per-class table), .json or .txt")  # fmt: skip
    ev.add_argument("--beta", type=positive_float, default=None, metavar="B",
                    help="also report F-beta per class and its mean (1 = F1, mmseg's mFscore)")  # fmt: skip
    ev.add_argument("--top", type=positive_int, default=5,
                    help="confusions and worst images to list, printed and in --report "
                    "(default: %(default)s)")  # fmt: skip
    ev.add_argument("--bootstrap", type=nonnegative_int, default=1000, metavar="B",
                    help="percentile-bootstrap resamples of images for the intervals of every "
                    "metric; 0 turns them off (default: %(default)s)")  # fmt: skip
    ev.add_argument("--bootstrap-seed", type=nonnegative_int, default=0, metavar="S",
                    help="seed of the resamples (default: %(default)s)")  # fmt: skip
    ev.add_argument("--bootstrap-groups", metavar="COLUMN",
                    help="resample groups of correlated images (video frames, tiles of one "
                    "scene): a column of the --slices metadata")  # fmt: skip
    ev.add_argument("--slices", metavar="META",
                    help="image metadata (CSV with an 'image' column, or JSON): every metric "
                    "per value of every column")  # fmt: skip
    ev.add_argument("--min-slice-images", type=positive_int, default=30, metavar="N",
                    help="flag slices with fewer images (default: %(default)s)")  # fmt: skip
    ev.add_argument("--error-maps", metavar="STORE",
                    help="also write per-pixel error maps to this Zarr store (same pass)")  # fmt: skip
    ev.set_defaults(func=run)


def _warn_assumed_raw_ids(cm: Any, opts: EvalOptions) -> None:
    """Warn when raw ids were assumed (not asked for, not recorded) and most pixels vanished.

    Class-id masks (Cityscapes trainIds 0..18, 255) read as raw ids (labelIds) are mostly
    valid values that map elsewhere or are ignored: no error, but wrong numbers. A majority of
    ignored ground-truth pixels is the tell.
    """
    from segiou.io.sources import recorded_ids

    if opts.gt_ids is not None or cm.gt_ids != "raw" or recorded_ids(opts.gt) is not None:
        return
    if cm.n_pixels and cm.n_ignored > cm.n_pixels // 2:
        share = 100 * cm.n_ignored / cm.n_pixels
        print(
            f"segiou eval: warning: {share:.0f}% of ground-truth pixels were ignored; the masks "
            f"were read as raw ids of {cm.spec.name!r} (the default for this spec, e.g. "
            "Cityscapes labelIds). If they hold class ids (e.g. trainIds), pass --gt-ids class",
            file=sys.stderr,
        )


def run(args: argparse.Namespace) -> int:
    """Run ``segiou eval``: check the options, count, print the tables, write the outputs.

    Parameters
    ----------
    args : argparse.Namespace
        What the ``eval`` subparser returned.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    SegiouError
        Bad options or input (the command line prints the message and exits 2).
    """
    from segiou.cli.scheduler import scheduler_context
    from segiou.outputs import write_atomic
    from segiou.parallel import count_stores
    from segiou.report import (
        Report,
        render_analysis,
        render_text,
        write_per_image_csv,
        write_report,
    )
    from segiou.results import evaluate
    from segiou.stats import evaluate_with_intervals, read_metadata

    opts = EvalOptions.from_namespace(args)
    meta = read_metadata(opts.slices) if opts.slices else None  # refused before counting
    if meta is not None and opts.bootstrap_groups and opts.bootstrap_groups not in meta.columns:
        msg = (
            f"--bootstrap-groups {opts.bootstrap_groups!r} is not a column of {meta.source} "
            f"(columns: {list(meta.columns)})"
        )
        raise UsageError(msg)
    progress = not opts.quiet and sys.stderr.isatty()
    with scheduler_context(opts.scheduler) as scheduler:
        cm = count_stores(
            opts.gt, opts.pred, labels=opts.labels, ignore_index=opts.ignore,
            gt_ids=opts.gt_ids or "auto", pred_ids=opts.pred_ids,
            on_unexpected=opts.on_unexpected, missing_pred=opts.missing_pred,
            missing_gt_chunks=opts.missing_gt_chunks,
            missing_pred_chunks=opts.missing_pred_chunks, layout=opts.layout,
            gt_pattern=opts.gt_pattern, pred_pattern=opts.pred_pattern, scheduler=scheduler,
            split_every=opts.split_every, task_seconds=opts.task_seconds,
            ns_per_px=opts.ns_per_px, progress=progress, error_maps=opts.error_maps,
            boundary=opts.boundary, instances=opts.instances,
        )  # fmt: skip
    if opts.error_maps:
        print(f"wrote {opts.error_maps}", file=sys.stderr)
    _warn_assumed_raw_ids(cm, opts)
    if opts.bootstrap or meta is not None:
        result = evaluate_with_intervals(
            cm, preset=opts.preset, beta=opts.beta, resamples=opts.bootstrap,
            seed=opts.bootstrap_seed, groups=opts.bootstrap_groups, slices=meta,
            min_slice_images=opts.min_slice_images,
        )  # fmt: skip
    else:
        result = evaluate(cm, preset=opts.preset, beta=opts.beta)
    # the files first: a reader that closes stdout early (| head) must not lose them
    if opts.json:
        write_atomic(opts.json, result.to_json() + "\n", what="--json")
        print(f"wrote {opts.json}", file=sys.stderr)
    if opts.per_image:
        write_per_image_csv(cm, opts.per_image, preset=result.convention)
        print(f"wrote {opts.per_image}", file=sys.stderr)
    if opts.state:
        cm.save(opts.state)
        print(f"wrote {opts.state}", file=sys.stderr)
    if opts.dataset.dataset is not None:  # say what was recognised, and what it changed
        print(f"dataset: {opts.dataset.dataset} layout ({opts.dataset.why}); labels "
              f"{cm.spec.name}")  # fmt: skip
    if opts.report:
        source = f"segiou eval --gt {opts.gt} --pred {opts.pred}"
        report = Report.from_result(result, cm=cm, top=opts.top, source=source)
        write_report(report, opts.report, opts.report_format, what="--report")
        print(f"wrote {opts.report}", file=sys.stderr)
    print(render_text(result))  # with its intervals and slices
    print(render_analysis(cm, top=opts.top, preset=result.convention))
    return 0
