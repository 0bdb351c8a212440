"""``segiou push``: count a store or folder here (the Dask engine), put its state into a run."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from segiou.cli._server_options import add_server_options, client_from
from segiou.errors import RefusedError, UsageError

if TYPE_CHECKING:
    from segiou.client import Client

__all__ = ["default_key", "register", "run"]


def register(sub: Any) -> None:
    """Add the ``push`` subcommand to an ``argparse`` subparsers object.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.
    """
    p = sub.add_parser("push", help="count a store or folder locally and put its state into a run")
    add_server_options(p)
    p.add_argument("--run", required=True, help="the run (created with the counting options "
                   "below if it does not exist)")  # fmt: skip
    p.add_argument("--gt", required=True, help="ground truth: Zarr store[/path] or PNG folder")
    p.add_argument("--pred", required=True, help="predictions: Zarr store[/path] or PNG folder")
    p.add_argument("--key", help="batch key (default: derived from --gt and --pred, so a second "
                   "push of the same data is a duplicate, never counted twice)")  # fmt: skip
    p.add_argument("--labels", help="label spec (default: the run's; for a new run: cityscapes)")
    p.add_argument("--ignore", type=int, nargs="+", metavar="ID",
                   help="ignore value(s), replacing the spec's")  # fmt: skip
    p.add_argument("--gt-ids", choices=["class", "raw"], default=None,
                   help="default: the run's; for a new run, as segiou eval decides")  # fmt: skip
    p.add_argument("--pred-ids", choices=["class", "raw"], default=None)
    p.add_argument("--on-unexpected", choices=["raise", "count"], default=None,
                   help="default: the run's; for a new run: raise")  # fmt: skip
    p.add_argument("--scheduler", default="threads", help="as for segiou eval")
    p.add_argument("--split-every", type=int, default=8, help="tree-reduction fan-in")
    p.add_argument("--missing-pred", choices=["error", "void"], default="error")
    p.add_argument("--missing-gt-chunks", choices=["auto", "error", "fill"], default="auto",
                   help="as for segiou eval")  # fmt: skip
    p.add_argument("--missing-pred-chunks", choices=["auto", "error", "fill"], default="auto",
                   help="as for segiou eval")  # fmt: skip
    p.add_argument("--layout", choices=["plain", "cityscapes"], default="plain",
                   help="PNG folders only: how files pair up")  # fmt: skip
    p.add_argument("--gt-pattern", help="PNG folders only: glob of ground-truth files")
    p.add_argument("--pred-pattern", help="PNG folders only: glob of prediction files")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def default_key(gt: str, pred: str) -> str:
    """Return the batch key ``push`` uses when none is given: ``push-`` and a hash of the paths.

    Parameters
    ----------
    gt, pred : str
        The ``--gt`` and ``--pred`` values (local paths are made absolute first).

    Returns
    -------
    str

    Examples
    --------
    >>> default_key("/data/gt.zarr", "/data/pred.zarr") == default_key("/data/gt.zarr/", "/data/pred.zarr")
    True
    """

    def norm(s: str) -> str:
        return s.rstrip("/") if "://" in s else str(Path(s).resolve())

    digest = hashlib.sha256(f"{norm(gt)}\n{norm(pred)}".encode()).hexdigest()
    return f"push-{digest[:16]}"


def run(args: argparse.Namespace) -> int:
    """Count ``--gt`` against ``--pred`` with the run's settings, and put the state.

    Parameters
    ----------
    args : argparse.Namespace
        What the ``push`` subparser returned.

    Returns
    -------
    int
        The exit code, 0 (the state was counted, or was counted before under the same key).

    Raises
    ------
    SegiouError
        Bad options or input, a refusal (other settings, the key or an image counted
        before), or a server that cannot be reached.
    """
    from segiou.service.wire import check_key

    if args.key is not None:  # before counting: a bad key was refused after the whole store
        check_key(args.key)
    with client_from(args, args.run) as client:
        return _push(args, client)


def _push(args: argparse.Namespace, client: Client) -> int:
    from segiou.cli.options import labels_arg
    from segiou.cli.scheduler import scheduler_context
    from segiou.confusion import ConfusionMatrix
    from segiou.parallel import count_stores

    key = args.key or default_key(args.gt, args.pred)
    try:
        info: dict[str, Any] | None = client.run_info()
    except RefusedError as err:
        if err.status != 404:
            raise
        info = None
    if info is not None:  # the run's settings; an option given replaces its own (the server
        t = ConfusionMatrix.from_dict(info["template"], source=f"run {args.run!r}")  # then
        if not t.per_image:  # refuses a state counted otherwise, naming both)
            msg = (
                f"run {args.run!r} keeps no per-image rows, but segiou push counts a whole test "
                "set with its per-image rows; push into a run created with per_image true"
            )
            raise UsageError(msg)
        options: dict[str, Any] = {
            "labels": t.spec if args.labels is None else labels_arg(args.labels),
            "ignore_index": args.ignore,
            "gt_ids": args.gt_ids or t.gt_ids,
            "pred_ids": args.pred_ids or t.pred_ids,
            "on_unexpected": args.on_unexpected or t.on_unexpected,
        }
    else:
        options = {"labels": labels_arg(args.labels or "cityscapes"), "ignore_index": args.ignore,
                   "gt_ids": args.gt_ids or "auto", "pred_ids": args.pred_ids,
                   "on_unexpected": args.on_unexpected or "raise"}  # fmt: skip
    progress = not args.quiet and sys.stderr.isatty()
    with scheduler_context(args.scheduler) as scheduler:
        cm = count_stores(
            args.gt, args.pred, missing_pred=args.missing_pred,
            missing_gt_chunks=args.missing_gt_chunks,
            missing_pred_chunks=args.missing_pred_chunks, layout=args.layout,
            gt_pattern=args.gt_pattern, pred_pattern=args.pred_pattern, scheduler=scheduler,
            split_every=args.split_every, progress=progress, **options,
        )  # fmt: skip
    if info is None:
        client.create_run(args.run, cm.spec, gt_ids=cm.gt_ids, pred_ids=cm.pred_ids,
                          per_image=cm.per_image, on_unexpected=cm.on_unexpected)  # fmt: skip
    answer = client.put_counts(cm, key)
    print(
        f"{answer['outcome']}: batch {key!r} into run {args.run!r}: {answer['images']:,} images, "
        f"{answer['pixels']:,} pixels; the run now has {answer['batches']:,} batches"
    )
    return 0
