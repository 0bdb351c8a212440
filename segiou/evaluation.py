"""Layer 6: what ``segiou eval``, ``segiou demo`` and ``pipelines/`` share.

Opening sources, choosing a scheduler (and creating a cluster when asked: the library itself
never does), calling the engine, writing reports. No counting, no metric math.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from segiou.confusion import ConfusionMatrix
from segiou.errors import MaskNotFoundError, UsageError
from segiou.labels import LabelSpec, load_spec

__all__ = ["check_eval_args", "evaluate_paths", "run_eval", "scheduler_context", "spec_from_arg"]


def check_eval_args(args: argparse.Namespace) -> None:
    """Refuse what would fail only after the evaluation: an unknown preset, unwritable outputs.

    Raises
    ------
    UsageError
        Naming the option, the value and what to do.
    """
    from segiou.conventions import PRESETS

    if args.preset not in PRESETS:
        msg = f"--preset {args.preset!r} is not a preset; choose one of {sorted(PRESETS)}"
        raise UsageError(msg)
    for opt, value in (("--json", args.json), ("--per-image", args.per_image)):
        if not value:
            continue
        target = Path(value)
        if target.is_dir():
            msg = f"{opt} {value!r} is a folder; give a file path"
            raise UsageError(msg)
        if not target.parent.is_dir():
            msg = f"{opt} {value!r}: folder {str(target.parent)!r} does not exist; create it first"
            raise UsageError(msg)


def spec_from_arg(text: str) -> LabelSpec:
    """``--labels``: a built-in name, a spec file, or a number of classes."""
    if text.isdigit():
        return LabelSpec.from_num_classes(int(text))
    return load_spec(text)


@contextlib.contextmanager
def scheduler_context(name: str) -> Iterator[Any]:
    """Yield what ``evaluate_zarr(scheduler=...)`` takes for a ``--scheduler`` value.

    ``tcp://...`` connects a ``distributed.Client``; ``local-cluster`` starts a
    ``distributed.LocalCluster`` for this run; other names pass through to Dask.
    """
    if name.startswith(("tcp://", "tls://", "ucx://")) or name == "local-cluster":
        from distributed import Client, LocalCluster

        if name == "local-cluster":
            with (
                LocalCluster(processes=True, dashboard_address=None) as cluster,
                Client(cluster) as c,
            ):
                yield c
        else:
            try:
                client = Client(name, timeout="10s")
            except (OSError, TimeoutError) as err:
                msg = (
                    f"--scheduler {name!r}: cannot connect to a dask scheduler there "
                    f"({type(err).__name__}: {err}); check the address and that the scheduler "
                    "runs, or use --scheduler threads"
                )
                raise UsageError(msg) from err
            with client as c:
                yield c
        return
    if name not in ("threads", "synchronous", "sync", "processes", "single-threaded"):
        msg = (
            f"--scheduler {name!r} is not threads, synchronous, processes, local-cluster or a "
            "tcp://host:port address"
        )
        raise UsageError(msg)
    yield name


def _is_zarr(path: str) -> bool:
    if "://" in path and not path.startswith("file://"):
        return True
    p = Path(path.removeprefix("file://"))
    return any(
        (q / m).exists() for q in (p, *p.parents) for m in ("zarr.json", ".zgroup", ".zarray")
    )


def evaluate_paths(gt: str, pred: str, *, spec: LabelSpec, args: argparse.Namespace,
                   scheduler: Any, progress: bool) -> ConfusionMatrix:  # fmt: skip
    """Evaluate two stores (Zarr, or PNG folders) with the engine."""
    from segiou.parallel import evaluate_zarr

    gt_ids = args.gt_ids or ("raw" if spec.has_raw else "class")
    kw: dict[str, Any] = {"labels": spec, "ignore_index": args.ignore, "gt_ids": gt_ids,
                          "pred_ids": args.pred_ids, "on_unexpected": args.on_unexpected,
                          "missing_pred": args.missing_pred, "scheduler": scheduler,
                          "missing_gt_chunks": args.missing_gt_chunks,
                          "split_every": args.split_every, "progress": progress}  # fmt: skip
    if _is_zarr(gt) and _is_zarr(pred):
        return evaluate_zarr(gt, pred, **kw)
    for side, path in (("--gt", gt), ("--pred", pred)):
        if not Path(path).exists():
            msg = f"{side} {path!r} does not exist; give a Zarr store or a folder of PNG masks"
            raise MaskNotFoundError(msg)
    from segiou.io.png import find_pairs

    gsrc, psrc = find_pairs(gt, pred, layout=getattr(args, "layout", None) or "plain",
                            gt_pattern=getattr(args, "gt_pattern", None),
                            pred_pattern=getattr(args, "pred_pattern", None))  # fmt: skip
    return evaluate_zarr(gsrc, psrc, **kw)


def run_eval(args: argparse.Namespace) -> int:
    """Run the ``segiou eval`` command."""
    from segiou.report import render_analysis, write_per_image_csv

    check_eval_args(args)
    spec = spec_from_arg(args.labels)
    progress = not args.quiet and sys.stderr.isatty()
    with scheduler_context(args.scheduler) as scheduler:
        cm = evaluate_paths(args.gt, args.pred, spec=spec, args=args, scheduler=scheduler,
                            progress=progress)  # fmt: skip
    result = cm.result(args.preset)
    print(result.table())
    print(render_analysis(cm, top=args.top))
    if args.json:
        Path(args.json).write_text(result.to_json() + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    if args.per_image:
        write_per_image_csv(cm, args.per_image)
        print(f"wrote {args.per_image}")
    if args.state:
        cm.save(args.state)
        print(f"wrote {args.state}")
    return 0
