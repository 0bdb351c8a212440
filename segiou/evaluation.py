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

__all__ = [
    "check_eval_args",
    "evaluate_paths",
    "recorded_ids",
    "run_eval",
    "scheduler_context",
    "spec_from_arg",
]


def check_eval_args(args: argparse.Namespace) -> None:
    """Refuse what would fail only after the evaluation: an unknown preset, unwritable outputs.

    Called before any mask is read, so that a typo does not cost a whole evaluation. Only the
    file paths are checked (not a folder, parent folder exists), not write permissions.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options with at least ``preset`` (a key of
        :data:`segiou.conventions.PRESETS`), ``json`` and ``per_image`` (output file paths,
        or ``None``/empty to skip them) and optionally ``state`` (checked the same way).

    Raises
    ------
    UsageError
        Naming the option, the value and what to do: ``preset`` is not a preset, or the
        ``--json`` / ``--per-image`` path is an existing folder or lies in a folder that does
        not exist.
    """
    from segiou.conventions import PRESETS

    if args.preset not in PRESETS:
        msg = f"--preset {args.preset!r} is not a preset; choose one of {sorted(PRESETS)}"
        raise UsageError(msg)
    outputs = (("--json", args.json), ("--per-image", args.per_image),
               ("--state", getattr(args, "state", None)))  # fmt: skip
    for opt, value in outputs:
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
    """Make the label spec of a ``--labels`` value.

    ``--labels``: a built-in name, a spec file, or a number of classes.

    Parameters
    ----------
    text : str
        A built-in spec name (``"cityscapes"``, ``"pascal_voc"``, ``"ade20k"``), the path of
        a ``.json``/``.toml`` spec file, or a number of classes ``K`` (only digits), which
        gives classes ``"0".."K-1"`` without ignore values.

    Returns
    -------
    LabelSpec
        The spec (see :func:`segiou.labels.load_spec`,
        :meth:`segiou.labels.LabelSpec.from_num_classes`).

    Raises
    ------
    LabelSpecError
        Unknown name, unreadable or invalid spec file, or ``0`` classes.
    """
    if text.isascii() and text.isdigit() and not Path(text).exists():
        return LabelSpec.from_num_classes(int(text))
    return load_spec(text)


@contextlib.contextmanager
def scheduler_context(name: str) -> Iterator[Any]:
    """Yield what ``evaluate_zarr(scheduler=...)`` takes for a ``--scheduler`` value.

    ``tcp://...`` connects a ``distributed.Client``; ``local-cluster`` starts a
    ``distributed.LocalCluster`` for this run; other names pass through to Dask.

    Clients and clusters created here are closed when the ``with`` block ends. The
    ``distributed`` package is imported only for addresses and ``local-cluster``.

    Parameters
    ----------
    name : str
        ``"threads"``, ``"synchronous"`` (or ``"sync"``, ``"single-threaded"``),
        ``"processes"``, ``"local-cluster"``, or the address of a running
        ``dask.distributed`` scheduler (``tcp://``, ``tls://`` or ``ucx://``; the
        connection times out after 10 s).

    Yields
    ------
    str or distributed.Client
        ``name`` itself for the local Dask schedulers, else a connected
        ``distributed.Client``.

    Raises
    ------
    UsageError
        ``name`` is none of the above, no scheduler can be reached at the address, or a local
        cluster cannot be started.
    """
    if name.startswith(("tcp://", "tls://", "ucx://")) or name == "local-cluster":
        try:
            from distributed import Client, LocalCluster
        except ImportError as err:
            msg = (
                f"--scheduler {name!r} needs dask.distributed, which is not installed; "
                "pip install distributed, or use --scheduler threads"
            )
            raise UsageError(msg) from err

        if name == "local-cluster":
            try:
                cluster = LocalCluster(processes=True, dashboard_address=None)
            except Exception as err:  # any failure to start: say what to do
                msg = (
                    f"--scheduler local-cluster: cannot start a local dask cluster "
                    f"({type(err).__name__}: {err}); use --scheduler threads, which needs no "
                    "worker processes"
                )
                raise UsageError(msg) from err
            with cluster, Client(cluster) as c:
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
            f"--scheduler {name!r} is not threads, synchronous (sync, single-threaded), "
            "processes, local-cluster or a tcp://, tls:// or ucx:// scheduler address"
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


def recorded_ids(url: str) -> str | None:
    """Return the id space ``segiou ingest`` recorded for the store holding ``url``.

    Parameters
    ----------
    url : str
        A Zarr store, or a path through one (``data.zarr/gt``).

    Returns
    -------
    str or None
        ``"raw"`` or ``"class"`` (the root attribute ``segiou.ids``), or None when the store
        records none (not written by ``segiou ingest``, or unreadable: the engine reports that).
    """
    from segiou.io.zarr import _split_url

    try:
        import zarr

        root, _ = _split_url(url, None)
        meta = dict(zarr.open_group(root, mode="r").attrs).get("segiou", {})
    except Exception:  # noqa: BLE001 -- not a group, missing, remote: nothing recorded
        return None
    ids = meta.get("ids") if isinstance(meta, dict) else None
    return ids if ids in ("raw", "class") else None


def evaluate_paths(gt: str, pred: str, *, spec: LabelSpec, args: argparse.Namespace,
                   scheduler: Any, progress: bool) -> ConfusionMatrix:  # fmt: skip
    """Evaluate two stores (Zarr, or PNG folders) with the engine.

    When both paths are Zarr (a URL with a scheme other than ``file://``, or a path that is,
    or lies inside, a folder with ``zarr.json``, ``.zgroup`` or ``.zarray``) they are opened
    as mask stores; otherwise both are read as folders of label images paired by
    :func:`segiou.io.png.find_pairs`. Then :func:`segiou.parallel.evaluate_zarr` counts them.

    Parameters
    ----------
    gt : str
        Ground truth: a Zarr store (``store[/path]`` or URL) or a folder of label images.
    pred : str
        Predictions, in the same form as ``gt``.
    spec : LabelSpec
        Label spec of the masks (see :func:`spec_from_arg`).
    args : argparse.Namespace
        Options of :func:`segiou.cli.add_eval_options`: ``gt_ids`` (``None``: the id space
        recorded in a Zarr store by ``segiou ingest``, see :func:`recorded_ids`, else
        ``"raw"`` when ``spec`` has raw ids, else ``"class"``), ``pred_ids`` (``None``: the
        id space recorded in a Zarr prediction store, else as ``gt_ids``), ``ignore``,
        ``on_unexpected``, ``missing_pred``, ``missing_gt_chunks``, ``split_every``; for
        image folders, optionally ``layout`` (default ``"plain"``), ``gt_pattern`` and
        ``pred_pattern``.
    scheduler : str or distributed.Client
        What :func:`scheduler_context` yields.
    progress : bool
        Show a progress bar.

    Returns
    -------
    ConfusionMatrix
        The counts, with per-image rows named by image.

    Raises
    ------
    MaskNotFoundError
        A path that is not Zarr does not exist, a folder without matching files, or missing
        or extra predictions (see :func:`segiou.parallel.evaluate_zarr`).
    LabelSpecError
        Invalid ignore values or id spaces for ``spec``.
    ShapeMismatchError
        Image sizes differ between ground truth and predictions.
    StoreLayoutError
        Not a valid mask store, or a dtype that cannot hold the classes.
    LabelRangeError
        Label values that are neither a class nor ignored (with ``on_unexpected="raise"``).
    UsageError
        ``split_every`` below 2.
    segiou.io.png.NamingError
        Image files that get no name, or duplicate names (image folders).
    segiou.io.png.ImageDecodeError
        An image file that cannot be decoded to a label mask (image folders).
    segiou.io.zarr.ChunkError
        A missing ground-truth chunk or a corrupt chunk (Zarr stores).
    """
    from segiou.parallel import evaluate_zarr

    zarr_gt, zarr_pred = _is_zarr(gt), _is_zarr(pred)

    def recorded(url: str, is_zarr: bool) -> str | None:
        ids = recorded_ids(url) if is_zarr else None
        return None if ids == "raw" and not spec.has_raw else ids  # another spec's raw ids

    gt_ids = args.gt_ids or recorded(gt, zarr_gt) or ("raw" if spec.has_raw else "class")
    # an explicit --gt-ids also sets the predictions' default (as before stores recorded ids)
    pred_ids = args.pred_ids or (None if args.gt_ids else recorded(pred, zarr_pred))
    kw: dict[str, Any] = {"labels": spec, "ignore_index": args.ignore, "gt_ids": gt_ids,
                          "pred_ids": pred_ids, "on_unexpected": args.on_unexpected,
                          "missing_pred": args.missing_pred, "scheduler": scheduler,
                          "missing_gt_chunks": args.missing_gt_chunks,
                          "split_every": args.split_every, "progress": progress}  # fmt: skip
    if zarr_gt and zarr_pred:
        return evaluate_zarr(gt, pred, **kw)
    if zarr_gt or zarr_pred:
        zside, fside = ("--gt", "--pred") if zarr_gt else ("--pred", "--gt")
        fpath = pred if zarr_gt else gt
        what = "does not exist" if not Path(fpath).exists() else "is not a Zarr store"
        msg = (
            f"{zside} is a Zarr store but {fside} {fpath!r} {what}; give both as Zarr stores, "
            "or both as folders of label images (segiou ingest packs folders into a store)"
        )
        raise UsageError(msg)
    for side, path in (("--gt", gt), ("--pred", pred)):
        if not Path(path).exists():
            msg = f"{side} {path!r} does not exist; give a Zarr store or a folder of PNG masks"
            raise MaskNotFoundError(msg)
    from segiou.io.png import find_pairs

    gsrc, psrc = find_pairs(gt, pred, layout=getattr(args, "layout", None) or "plain",
                            gt_pattern=getattr(args, "gt_pattern", None),
                            pred_pattern=getattr(args, "pred_pattern", None))  # fmt: skip
    return evaluate_zarr(gsrc, psrc, **kw)


def _warn_assumed_raw_ids(cm: ConfusionMatrix, args: argparse.Namespace) -> None:
    """Warn when raw ids were assumed (not asked for, not recorded) and most pixels vanished.

    Class-id masks (Cityscapes trainIds 0..18, 255) read as raw ids (labelIds) are mostly
    valid values that map elsewhere or are ignored: no error, but wrong numbers. A majority of
    ignored ground-truth pixels is the tell.
    """
    if args.gt_ids is not None or cm.gt_ids != "raw" or recorded_ids(args.gt) is not None:
        return
    if cm.n_pixels and cm.n_ignored > cm.n_pixels // 2:
        share = 100 * cm.n_ignored / cm.n_pixels
        print(
            f"segiou eval: warning: {share:.0f}% of ground-truth pixels were ignored; the masks "
            f"were read as raw ids of {cm.spec.name!r} (the default for this spec, e.g. "
            "Cityscapes labelIds). If they hold class ids (e.g. trainIds), pass --gt-ids class",
            file=sys.stderr,
        )


def run_eval(args: argparse.Namespace) -> int:
    """Run the ``segiou eval`` command.

    Checks the options (:func:`check_eval_args`), evaluates ``--gt`` against ``--pred``
    (:func:`evaluate_paths`) with the chosen scheduler (:func:`scheduler_context`), prints
    the result table and the error analysis, and writes the requested outputs.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``segiou eval`` options: ``gt``, ``pred``, ``labels``, ``scheduler``,
        ``preset``, ``quiet`` (no progress bar; there is none either when stderr is not a
        terminal), ``top`` (confusions and worst images to list), ``json`` (JSON report
        file), ``per_image`` (per-image CSV file), ``state`` (JSON checkpoint of the counts),
        each output skipped when ``None``, and those read by :func:`evaluate_paths`.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    UsageError
        An unknown preset or scheduler, an output path that cannot be written (see
        :func:`check_eval_args`), or an unreachable scheduler.
    LabelSpecError
        An invalid ``--labels`` value or ignore values.
    MaskNotFoundError, ShapeMismatchError, StoreLayoutError, LabelRangeError
        As for :func:`evaluate_paths`, which also lists the errors of image folders and
        Zarr chunks.
    """
    from segiou.report import render_analysis, write_per_image_csv

    check_eval_args(args)
    spec = spec_from_arg(args.labels)
    progress = not args.quiet and sys.stderr.isatty()
    with scheduler_context(args.scheduler) as scheduler:
        cm = evaluate_paths(args.gt, args.pred, spec=spec, args=args, scheduler=scheduler,
                            progress=progress)  # fmt: skip
    _warn_assumed_raw_ids(cm, args)
    result = cm.result(args.preset, beta=getattr(args, "beta", None))
    # the files first: a reader that closes stdout early (| head) must not lose them
    if args.json:
        Path(args.json).write_text(result.to_json() + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    if args.per_image:
        write_per_image_csv(cm, args.per_image)
        print(f"wrote {args.per_image}", file=sys.stderr)
    if args.state:
        cm.save(args.state)
        print(f"wrote {args.state}", file=sys.stderr)
    try:
        print(result.table())
        print(render_analysis(cm, top=args.top))
        sys.stdout.flush()
    except BrokenPipeError:  # stdout closed early (segiou eval ... | head): not an error
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that Python's exit flush does not fail
    return 0
