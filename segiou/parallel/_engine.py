"""count_stores: open, validate and pair two sources, plan, build the graph, run it, absorb."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from segiou._boundary import BoundaryWidth
from segiou._count import (
    IGNORE,
    OnUnexpected,
    Tally,
    format_unexpected,
)
from segiou._tally import summed_table
from segiou.confusion import ConfusionMatrix
from segiou.errors import (
    LabelRangeError,
    MaskNotFoundError,
    ShapeMismatchError,
    StoreLayoutError,
    UsageError,
)
from segiou.images import ImageRows
from segiou.io.chunks import lacks_fill
from segiou.io.maps import create_maps
from segiou.io.sources import FolderLayout, Source, check_apart, open_instances, open_pair
from segiou.io.zarr import MaskSet, canonical_url, open_masks
from segiou.labels import IdSpace, LabelSpec, load_spec
from segiou.parallel._cluster import Tracked, abandon, compute_on_cluster, measure, scatter_job
from segiou.parallel._graph import build_graph, client_of, compute
from segiou.parallel._plan import (
    TASK_PIXELS,
    TASK_SECONDS,
    cluster_task_seconds,
    plan_ranges,
    task_pixels,
)
from segiou.parallel._quality import per_image
from segiou.parallel._tasks import Job, Odd, Partial, combine

__all__ = ["MissingPred", "count_stores", "evaluate_zarr"]

#: Images an error about unexpected values lists (then: "and N more").
_MAX_LISTED = 20

MissingPred = Literal["error", "void"]
log = logging.getLogger("segiou.parallel")
#: A ground-truth chunk missing from a store: ``"auto"`` refuses it in stores that record that
#: every chunk was written (segiou's) and reads it as the fill value elsewhere (the Zarr rule);
#: ``"error"`` always refuses, ``"fill"`` always reads it as the fill value. Chunks read as the
#: fill value are counted per image (``cm.extras.absent``).
MissingGtChunks = Literal["auto", "error", "fill"]
#: A chunk missing from the prediction store, likewise: ``"auto"`` refuses it in stores that
#: record that every chunk was written and reads it as the fill value elsewhere; ``"error"``
#: always refuses, ``"fill"`` always reads it as the fill value. Prediction chunks read as the
#: fill value are counted per image too (``cm.extras.absent_pred``).
MissingPredChunks = Literal["auto", "error", "fill"]


def _pair(gt: Source, pred: Source, missing_pred: MissingPred) -> tuple[int, ...]:
    if gt.names == pred.names:  # the common case, compared at C speed: same images, same order
        where: dict[str, int] = {}
        missing: list[str] = []
        extra: list[str] = []
    else:
        where = {n: i for i, n in enumerate(pred.names)}
        gt_names = set(gt.names)
        missing = [n for n in gt.names if n not in where]
        extra = [n for n in pred.names if n not in gt_names]
    problems = []
    if extra:
        problems.append(
            f"{len(extra)} prediction(s) in {pred.where()} have no ground truth in "
            f"{gt.where()}, e.g. {extra[:5]}; remove them or evaluate against the right split"
        )
    if missing and (missing_pred == "error" or extra):
        fix = (
            "add them, or score missing predictions as all-void (false negatives) with "
            "missing_pred='void' (--missing-pred void)"
            if missing_pred == "error"
            else "they would be scored as all-void (missing_pred='void')"
        )
        problems.append(
            f"{len(missing)} of {len(gt.names)} ground-truth image(s) have no prediction in "
            f"{pred.where()}, e.g. {missing[:5]}; {fix}"
        )
    if problems:
        if extra and missing:  # both at once usually means mismatched names, not lost files
            problems.append(
                "names differ on both sides: check that both stores name images the same way"
            )
        raise MaskNotFoundError("; ".join(problems))
    n = len(gt.names)
    index = tuple(range(n)) if not where else tuple(where.get(x, -1) for x in gt.names)
    if isinstance(gt, MaskSet) and isinstance(pred, MaskSet):  # one vectorised comparison
        j = np.asarray(index, dtype=np.int64)
        paired = np.flatnonzero(j >= 0)
        differ = paired[(gt.image_shapes()[paired] != pred.image_shapes()[j[paired]]).any(axis=1)]
        cases: Iterable[tuple[int, int]] = ((int(i), index[i]) for i in differ)
    else:
        cases = ((i, k) for i, k in enumerate(index) if k >= 0)
    bad = [
        (gt.names[i], gt.image_shape(i), pred.image_shape(k))
        for i, k in cases
        if gt.image_shape(i) != pred.image_shape(k)
    ]
    if bad:
        shown = ", ".join(f"{n!r}: gt {a} vs pred {b}" for n, a, b in bad[:3])
        msg = (
            f"{len(bad)} image(s) differ in size between ground truth and prediction: {shown}; "
            "predictions must be at ground-truth resolution"
        )
        raise ShapeMismatchError(msg)
    return index


def _check_fits(ms: Source, spec: LabelSpec, ids: IdSpace, side: str) -> None:
    if not isinstance(ms, MaskSet):
        return  # image files: the dtype is known only once decoded
    # the ids a dtype can hold (stores are integer or bool: a bool store holds 0 and 1 only)
    lo, hi = (0, 1) if ms.dtype.kind == "b" else (np.iinfo(ms.dtype).min, np.iinfo(ms.dtype).max)
    needed = spec.gt_map(ids)
    classes = [r for r, c in needed.items() if c != IGNORE]
    # a store's dtype holds for every image: a class none of whose ids it can hold could never
    # be counted (a wrong spec, id space or dtype). An id the dtype cannot hold is fine when
    # its class has another id that fits (a negative raw id in a uint8 store), as in memory.
    fits = {c for r, c in needed.items() if c != IGNORE and lo <= r <= hi}
    lost = sorted({c for c in needed.values() if c != IGNORE} - fits)
    if lost:
        names = [spec.classes[c] for c in lost[:5]]
        msg = (
            f"{ms.where()}: {side} dtype {ms.dtype} cannot hold the {spec.name!r} class ids "
            f"{min(classes)}..{max(classes)} ({ids} ids): {len(lost)} class(es) could never be "
            f"counted, e.g. {names}; check the label spec and the id space (--gt-ids/--pred-ids "
            "raw or class)"
        )
        raise StoreLayoutError(msg)


def count_stores(
    gt: Source | str | Path,
    pred: Source | str | Path | None,
    *,
    labels: int | str | Path | LabelSpec,
    ignore_index: int | Sequence[int] | None = None,
    gt_ids: IdSpace | Literal["auto"] = "class",
    pred_ids: IdSpace | None = None,
    on_unexpected: OnUnexpected = "raise",
    missing_pred: MissingPred = "error",
    missing_gt_chunks: MissingGtChunks = "auto",
    missing_pred_chunks: MissingPredChunks = "auto",
    layout: FolderLayout = "auto",
    gt_pattern: str | None = None,
    pred_pattern: str | None = None,
    scheduler: Any = None,
    split_every: int = 8,
    pixels_per_task: int | None = None,
    task_seconds: float | None = None,
    ns_per_px: float | None = None,
    progress: bool = False,
    error_maps: str | Path | None = None,
    boundary: bool | float | str | BoundaryWidth | None = None,
    instances: bool | str | Path | Source | None = None,
) -> ConfusionMatrix:
    """Count a whole test set (Zarr stores or folders of label images) in parallel with Dask.

    Parameters
    ----------
    gt, pred : MaskSet, PngSet, str or Path
        Ground-truth and prediction sources: Zarr stores or folders of label images (paths are
        opened with :func:`segiou.io.sources.open_pair`), or opened sources
        (:class:`segiou.io.zarr.MaskSet`, :class:`segiou.io.png.PngSet`: image files decoded
        whole, one image at a time). ``pred`` may be ``None`` with ``missing_pred="void"``
        (every prediction missing).
    labels, ignore_index, pred_ids, on_unexpected
        As for :class:`~segiou.confusion.ConfusionMatrix`.
    gt_ids : {"class", "raw", "auto"}, default "class"
        As for the accumulator; ``"auto"``: the id space ``segiou ingest`` recorded in the
        ground-truth store, else ``"raw"`` when the spec has raw ids, else ``"class"``. With
        ``"auto"``, ``pred_ids=None`` means the id space recorded in the prediction store,
        else the ground truth's.
    missing_pred : {"error", "void"}, default "error"
        A ground-truth image without prediction raises (default) or is scored as all-void:
        every valid pixel a false negative, as a leaderboard would.
    missing_gt_chunks : {"auto", "error", "fill"}, default "auto"
        A chunk missing from the ground-truth store: ``"auto"`` follows the Zarr rule (a chunk
        never written holds the fill value) except in stores that record that every chunk was
        written (``segiou ingest``, :func:`~segiou.io.zarr.create_stack`), where it was lost
        and is refused; ``"error"`` always refuses, ``"fill"`` always reads the fill value.
        Chunks read as the fill value are reported per image (``cm.extras.absent``); in an
        array without a fill value (Zarr v2 ``fill_value: null``) they read as 0.
    missing_pred_chunks : {"auto", "error", "fill"}, default "auto"
        A chunk missing from the prediction store, in every read of the predictions (counts,
        Boundary IoU, iIoU, error maps): ``"auto"`` reads it as the fill value (the Zarr rule)
        except in a store that records that every chunk was written, where it was lost and is
        refused, and in an array without a fill value (Zarr v2 ``fill_value: null``), where it
        is undefined and refused; ``"error"`` always refuses, ``"fill"`` always reads the fill
        value (0 when there is none): a store
        that ``create_stack`` made but another job wrote through ``zarr.open_array`` (zarr's
        default ``write_empty_chunks=False``, not stored with the array) lacks every chunk
        equal to the fill value although it records every chunk. Prediction chunks read as the
        fill value are reported per image (``cm.extras.absent_pred``, by ground-truth image),
        as the ground truth's are.
    scheduler : str or distributed.Client, optional
        ``"threads"`` (default when no Client is active), ``"synchronous"``, ``"processes"``,
        or a ``distributed.Client``. The current default Client is used when there is one.
    split_every : int, default 8
        Fan-in of the tree reduction of partial counts.
    pixels_per_task : int, optional
        Target pixels per Dask task (whole images per task, unless a large image is split into
        bands of chunk rows; see :func:`plan_ranges`). Default: ``8 << 20`` on Dask's local
        schedulers; on a ``distributed`` cluster, ``task_seconds / ns_per_px``.
    task_seconds : float, optional
        ``distributed`` only: aim at tasks of this many seconds of counting on one thread, so
        that the scheduler's cost per task (about 1 ms of its CPU, measured by
        ``benchmarks/bench_scale.py``) stays small. Default: 0.2 s, raised to 2 ms per worker
        thread of the cluster (2 s for 1,000 threads), which keeps the scheduler at most half
        busy. There are at least as many tasks as the workers have threads when the data
        allows it.
    ns_per_px : float, optional
        ``distributed`` only: nanoseconds one worker thread takes per pixel (read, decode,
        count), to size tasks with. Default: measured on the cluster, on this data, by a first
        task that counts the first images for about 0.2 s (or ``task_seconds`` if shorter)
        after warming up on one; its counts are kept, and the plan covers the rest.
    layout, gt_pattern, pred_pattern
        Folders of label images only: how files are named and found (see
        :func:`segiou.io.png.find_pairs`); ``layout="auto"`` (default) recognises the
        Cityscapes layout (:func:`segiou.io.datasets.detect_dataset`). When images do not pair,
        the error names the layouts that would pair more of them (or all), if any.
    progress : bool, default False
        Show a progress bar (Dask's local diagnostics, or distributed's progress).
    error_maps : str or Path, optional
        Also write, for every pixel, where it went (correct, false with both classes,
        ignored, void, unexpected) to this Zarr store, from the same tasks in the same pass
        (see :mod:`segiou.io.maps`). A local path that does not exist (or error maps segiou
        wrote, replaced); it appears only when the count succeeded.
    boundary : bool, float, str or BoundaryWidth, optional
        Also count Boundary IoU (as for :class:`~segiou.confusion.ConfusionMatrix`): each task
        reads a halo of ``d`` rows around its chunk rows; results are identical for any
        chunking and any number of workers.
    instances : bool, str, Path, MaskSet or PngSet, optional
        Instance ground truth for iIoU. ``None`` (default): used when found beside the ground
        truth (the array ``instances`` of a store written by ``segiou ingest``, or Cityscapes
        ``*_gtFine_instanceIds.png`` beside ``*_gtFine_labelIds.png``) and the spec gives
        instance sizes; ``True``: required; ``False``: not used; or where they are.

    Returns
    -------
    ConfusionMatrix
        With per-image rows (``per_image=True``) named by image; its batch key is the
        ground-truth store, so the same store cannot be counted twice into one state.

    Raises
    ------
    LabelSpecError
        Invalid ``labels``, ``ignore_index`` or id spaces (as for the accumulator).
    MaskNotFoundError
        Missing or extra predictions (names and counts listed), a store that does not exist,
        no ``pred`` without ``missing_pred="void"``, or missing predictions to score as void
        with a spec that has no void value (no ignore value, nor in raw ids a raw id that maps
        to no class).
    ShapeMismatchError
        Image sizes differ between the stores.
    InstanceIdError
        An instance id the spec does not know, or of a class without an instance size.
    StoreLayoutError
        Not a valid mask store, or a dtype that cannot hold the classes.
    LabelRangeError
        Unexpected values (store, image, values, counts and first position listed).
    segiou.io.zarr.ChunkError
        A missing chunk refused by ``missing_gt_chunks`` or ``missing_pred_chunks``, or a
        corrupt chunk (store, array, chunk, images named).
    UsageError
        An unknown ``missing_pred``, ``missing_gt_chunks`` or ``missing_pred_chunks``;
        ``split_every`` below 2, ``pixels_per_task`` below 1, ``task_seconds`` or ``ns_per_px``
        not positive, or one path is a Zarr store and the other a folder; ground truth and
        predictions that share masks: the same store array, group or folder, or one holding
        the other (:func:`segiou.io.sources.check_apart`).
    segiou.errors.NamingError, segiou.errors.ImageDecodeError
        Image files without a name or with duplicate names; a file that is no label image.
    segiou.errors.ClusterError
        On a cluster: the job could not be sent to any worker (none left, or every attempt
        failed), or the rate-measuring first task was lost on every attempt.
    """
    _check_sizing(split_every, pixels_per_task, task_seconds, ns_per_px)
    if missing_pred not in ("error", "void"):  # ("Error" scored missing predictions as void)
        msg = f"missing_pred={missing_pred!r} is unknown; expected 'error' or 'void'"
        raise UsageError(msg)
    for name, asked in (("missing_gt_chunks", missing_gt_chunks),
                        ("missing_pred_chunks", missing_pred_chunks)):  # fmt: skip
        if asked not in ("auto", "error", "fill"):  # refused before any store is opened
            msg = f"{name}={asked!r} is unknown; expected 'auto', 'error' or 'fill'"
            raise UsageError(msg)
    if isinstance(gt, str | Path) and isinstance(pred, str | Path):
        gms, pms = open_pair(gt, pred, layout=layout, gt_pattern=gt_pattern,
                             pred_pattern=pred_pattern)  # fmt: skip
    else:
        gms = open_masks(gt) if isinstance(gt, str | Path) else gt
        pms = open_masks(pred) if isinstance(pred, str | Path) else pred
        if pms is not None:
            check_apart(gms, pms)  # (open_pair checks what it opens)
    if not gms.names:  # all-nan results and exit 0 would look like an evaluation
        msg = (
            f"{gms.where()} holds no images; nothing to evaluate. Check the path (a store, or "
            "the folder of the masks) and the file pattern"
        )
        raise MaskNotFoundError(msg)
    if gt_ids == "auto":
        spec_ = load_spec(labels) if not isinstance(labels, int) else None
        has_raw = spec_ is not None and spec_.has_raw

        def recorded(src: Source) -> IdSpace | None:
            ids = getattr(src, "ids", None)
            return None if ids == "raw" and not has_raw else ids  # another spec's raw ids

        gt_ids = recorded(gms) or ("raw" if has_raw else "class")
        if pred_ids is None and pms is not None:
            pred_ids = recorded(pms)
    inst = _instances(gms, instances, labels)
    out = ConfusionMatrix(labels, ignore_index=ignore_index, gt_ids=gt_ids, pred_ids=pred_ids,
                          on_unexpected=on_unexpected, per_image=True, boundary=boundary,
                          instances=inst is not None)  # fmt: skip
    spec = out.spec
    _check_fits(gms, spec, out.gt_ids, "ground-truth")
    if pms is None:
        if missing_pred != "void":
            msg = "no prediction store given; pass one, or missing_pred='void' to score all-void"
            raise MaskNotFoundError(msg)
        index = tuple(-1 for _ in gms.names)
    else:
        _check_fits(pms, spec, out.pred_ids, "prediction")
        try:
            index = _pair(gms, pms, missing_pred)
        except MaskNotFoundError as err:  # image folders: say which layout would pair them
            roots = getattr(gms, "root", ""), getattr(pms, "root", "")
            if not all(roots) or not isinstance(gt, str | Path):
                raise
            from segiou.io.datasets import detect_dataset, pairing_hints

            tried = detect_dataset(gt).layout if layout == "auto" else layout
            paired = len(set(gms.names) & set(pms.names))  # a hint must pair more
            hints = pairing_hints(roots[0], roots[1], tried, paired)
            if not hints:
                raise
            msg = f"{err}; layout options that pair more of these images: " + "; ".join(hints)
            raise MaskNotFoundError(msg) from err
    # a missing prediction reads as a void id of no category: one of a category (Cityscapes'
    # trailer is in 'vehicle') would count as a prediction of that category in category iIoU
    raw_cat = {r.id: r.category for r in spec.raw} if out.pred_ids == "raw" else {}
    voids = [r for r, c in spec.pred_map(out.pred_ids).items()
             if c == IGNORE and raw_cat.get(r) is None]  # fmt: skip
    void_value = voids[0] if voids else None
    if void_value is None and any(i < 0 for i in index):
        msg = (
            f"label spec {spec.name!r} has no void value outside every category to score "
            "missing predictions with; add an ignore value (e.g. 255)"
        )
        raise MaskNotFoundError(msg)
    job = Job(gms, pms, index, spec, out.gt_ids, out.pred_ids, on_unexpected,
              _missing_policy(gms, missing_gt_chunks), void_value,
              missing_pred_chunks=_pred_policy(pms, missing_pred_chunks),
              boundary=out.boundary, instances=inst)  # fmt: skip
    maps = None
    if error_maps is not None:  # written by the counting tasks, as they count (segiou.io.maps)
        stores = [getattr(m, a, None) for m in (gms, pms) for a in ("url", "root")]
        read = [x for x in (gt, pred, *stores) if isinstance(x, str | Path) and x]
        maps = create_maps(error_maps, gms, spec, out.gt_ids, out.pred_ids,
                           sources={"gt": gms.where(), "pred": pms.where() if pms else ""},
                           inputs=[x for x in read if "://" not in str(x)])  # fmt: skip
        job = replace(job, maps=maps)
    chunked = isinstance(gms, MaskSet) and (pms is None or isinstance(pms, MaskSet))
    try:
        part = _run(job, chunked, scheduler, split_every, pixels_per_task, task_seconds,
                    ns_per_px, progress)  # fmt: skip
        odd = _unexpected_values(part.odd) if part is not None else {}
        if odd and on_unexpected == "raise":
            raise _unexpected_error(job, odd)
    except BaseException:
        if maps is not None:  # no half-written maps are left behind
            maps.abort()
        raise
    if maps is not None:
        maps.commit()
    if part is None:
        return out
    k = spec.num_classes
    unexp: dict[str, dict[int, int]] = {"gt": {}, "pred": {}}
    for (_, side, value), (count, _) in odd.items():
        unexp[side][value] = unexp[side].get(value, 0) + count
    e = part.entries  # an image split in bands has entries from each band: sum them
    w = k + 2
    cells, inverse = np.unique((e[:, 0] * w + e[:, 1]) * w + e[:, 2], return_inverse=True)
    summed = np.zeros(cells.size, dtype=np.int64)
    np.add.at(summed, inverse, e[:, 3])
    image, rest = np.divmod(cells, w * w)
    found: tuple[Any, ...] = tuple((i, s, v, c) for (i, s, v), (c, _) in sorted(odd.items()))
    n = len(gms.names)
    rows = ImageRows(k, tuple(gms.names), (False,) * n, image, rest // w, rest % w, summed, found)
    totals = summed_table(rest, summed, w)  # every pixel is in its image's entries
    tally = Tally.from_table(totals, k, unexp["gt"], unexp["pred"], rows)
    q = {} if part.quality is None else per_image(part.quality, n, k)
    # names identify images when the source gave them (not a stack's index numbers)
    out.add_tally(tally, key=_batch_key(gms), names=list(gms.names), n_images=n,
                  names_given=getattr(gms, "named", True),
                  boundary=q.get("boundary") if out.boundary is not None else None,
                  instances=q.get("instances") if out.instances else None,
                  absent=q.get("absent"), absent_pred=q.get("absent_pred"),
                  widths=q.get("widths", ()))  # fmt: skip
    return out


def _missing_policy(gms: Source, asked: MissingGtChunks) -> Any:
    """Return what the ground truth's chunk caches do with a missing chunk (MissingGtChunks)."""
    if asked not in ("auto", "error", "fill"):
        msg = f"missing_gt_chunks={asked!r} is unknown; expected 'auto', 'error' or 'fill'"
        raise UsageError(msg)
    if asked == "error" or (asked == "auto" and getattr(gms, "complete", False)):
        return "error"
    return "count"  # read as the fill value, and counted per image


def _pred_policy(pms: Source | None, asked: MissingPredChunks) -> Any:
    """Return what the predictions' chunk caches do with a missing chunk (counted if read).

    ``auto`` refuses it where reading it as the fill value would be wrong or a guess: the store
    records that every chunk was written, or an array has no fill value (Zarr v2
    ``fill_value: null``, see :func:`segiou.io.chunks.lacks_fill`).
    """
    if asked == "error" or (asked == "auto" and (getattr(pms, "complete", False)
                                                 or lacks_fill(pms))):  # fmt: skip
        return "error"
    return "count"  # read as the fill value, and counted per image


def _instances(gms: Source, given: object, labels: object) -> Source | None:
    """Return the instance ids to count (count_stores' ``instances``), aligned with ``gms``."""
    if given is False:
        return None
    spec = load_spec(labels) if not isinstance(labels, int) else None  # type: ignore[arg-type]
    sized = spec is not None and bool(spec.instance_sizes)
    src = open_instances(gms, None if given is True else given)
    if given is None:
        return src if sized else None
    if src is None:
        msg = (
            f"instances=True, but no instance ids were found beside {gms.where()} (an array "
            "'instances' beside the ground truth, or *_gtFine_instanceIds.png beside "
            "*_gtFine_labelIds.png); give their location as instances="
        )
        raise MaskNotFoundError(msg)
    return src


def _unexpected_values(odd: list[Odd]) -> dict[tuple[int, str, int], tuple[int, tuple[int, int]]]:
    """(image, side, value) -> (pixels, first position), the bands of an image joined."""
    out: dict[tuple[int, str, int], tuple[int, tuple[int, int]]] = {}
    for i, side, value, count, pos in odd:
        c0, p0 = out.get((i, side, value), (0, pos))
        out[i, side, value] = (c0 + count, min(p0, pos))
    return out


def _unexpected_error(
    job: Job, odd: dict[tuple[int, str, int], tuple[int, tuple[int, int]]]
) -> LabelRangeError:
    """One error for every image with unexpected values, in image order (as in memory)."""
    per: dict[tuple[int, str], dict[int, tuple[int, tuple[int, int]]]] = {}
    for (i, side, value), seen in sorted(odd.items()):
        per.setdefault((i, side), {})[value] = seen
    lines = []
    for (i, side), found in per.items():
        if side == "gt":
            where = f"{job.gt.where()} image {job.gt.names[i]!r} (index {i}): ground truth"
        else:
            pi = job.pred_index[i]
            assert job.pred is not None
            where = (
                f"{job.pred.where()} image {job.pred.names[pi]!r} (index {pi}, the prediction "
                f"of {job.gt.where()} image {job.gt.names[i]!r}): prediction"
            )
        lines.append(f"{where} has unexpected value(s) {format_unexpected(dict(found))}")
    shown = _MAX_LISTED
    more = f"; and {len(lines) - shown} more" if len(lines) > shown else ""
    images = len({i for i, _ in per})
    msg = (
        f"{images} image(s) hold label values that are neither a class nor ignored: "
        + "; ".join(lines[:shown]) + more
        + " (positions are (row, column) in the image). Nothing was counted. Fix the label spec "
        "or the masks, or pass on_unexpected='count' (--on-unexpected count) to count and "
        "report them"
    )  # fmt: skip
    return LabelRangeError(msg)


def _check_sizing(split_every: int, pixels_per_task: int | None, task_seconds: float | None,
                  ns_per_px: float | None) -> None:  # fmt: skip
    if split_every < 2:
        msg = (
            f"split_every must be at least 2 (the fan-in of the tree of sums), got "
            f"{split_every}; the default is 8"
        )
        raise UsageError(msg)
    if pixels_per_task is not None and pixels_per_task < 1:
        msg = f"pixels_per_task must be at least 1, got {pixels_per_task}; or leave it unset"
        raise UsageError(msg)
    if task_seconds is not None and not task_seconds > 0:
        msg = f"task_seconds must be a positive number of seconds, got {task_seconds}"
        raise UsageError(msg)
    if ns_per_px is not None and not ns_per_px > 0:
        msg = (
            f"ns_per_px must be a positive number of nanoseconds per pixel, got {ns_per_px}; "
            "or leave it unset to measure it on the cluster"
        )
        raise UsageError(msg)


def _run(job: Job, chunked: bool, scheduler: Any, split_every: int,
         pixels_per_task: int | None, task_seconds: float | None, ns_per_px: float | None,
         progress: bool) -> Partial | None:  # fmt: skip
    """Size the tasks for the scheduler, plan, run; the summed partial (None: no images)."""
    client = client_of(scheduler)
    if not job.gt.names:
        return None
    if client is None:  # Dask's local schedulers: as many pixels per task as always
        ranges = plan_ranges(job.gt, pixels_per_task=pixels_per_task or TASK_PIXELS,
                             split_images=chunked)  # fmt: skip
        if not len(ranges):
            return None
        return compute(build_graph(job, ranges, split_every), scheduler, progress)  # type: ignore[no-any-return]
    tracked = Tracked()
    try:
        return _run_on_cluster(client, job, chunked, split_every, pixels_per_task, task_seconds,
                               ns_per_px, progress, tracked)  # fmt: skip
    except BaseException:  # cancel what runs on the cluster; no task writes maps after this
        abandon(client, tracked, job.maps)
        raise


def _run_on_cluster(client: Any, job: Job, chunked: bool, split_every: int,
                    pixels_per_task: int | None, task_seconds: float | None,
                    ns_per_px: float | None, progress: bool,
                    tracked: Tracked) -> Partial | None:  # fmt: skip
    # a cluster: the job goes to the workers once (replicated among them, so a worker that
    # dies does not take it along), and tasks last about task_seconds
    ref = scatter_job(client, job)
    threads = max(1, sum(client.nthreads().values()))
    seconds = cluster_task_seconds(threads, task_seconds)
    first, head, ppt = (0, 0), None, pixels_per_task
    if ppt is None:
        if ns_per_px is None:  # measure it: a first task counts the first images, timed
            budget = min(seconds, TASK_SECONDS)  # enough to measure; the others wait
            head, i, y, ns_per_px, ref = measure(client, job, ref, budget, chunked, tracked)
            first = (i, y)
        if first[0] < len(job.gt.names):  # (else the probe counted everything)
            ppt = task_pixels(seconds, ns_per_px)  # clamped to 1..2**53
    ranges = (
        plan_ranges(job.gt, pixels_per_task=ppt, min_tasks=threads, split_images=chunked,
                    first=first)
        if ppt is not None
        else np.empty((0, 4), dtype=np.int64)
    )  # fmt: skip
    log.info("%s ns/px per thread, tasks of %s s, %s px: %d tasks on %d threads",
             ns_per_px, seconds, ppt, len(ranges), threads)  # fmt: skip
    parts = [] if head is None else [head]
    if len(ranges):
        parts.append(compute_on_cluster(client, job, ref, ranges, split_every, progress, tracked))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else combine(parts)


def _batch_key(src: Source) -> str:
    """Return the key of a whole source: it names the data, however its path was spelt.

    ``zarr:<store> (path '<inner>')`` for a store, ``folder:<folder>`` for image folders, local
    paths absolute with symlinks resolved (``png/g1``, ``./png/g1/`` and a link to it are one
    key), remote URLs in one spelling (:func:`~segiou.io.zarr.canonical_url`);
    ``files:<digest>`` for a set of image files given without a folder (the digest of
    their resolved paths and names). So the same data cannot be counted twice into one state.
    """
    if isinstance(src, MaskSet):
        if "://" not in src.url or src.url.startswith("file://"):
            src = replace(src, url=os.path.realpath(src.url.removeprefix("file://")))
        else:
            src = replace(src, url=canonical_url(src.url))
        return f"zarr:{src.where()}"
    root = getattr(src, "root", "")
    if root:
        return f"folder:{os.path.realpath(root)}"
    listing = "\n".join(f"{os.path.realpath(p)}\t{n}" for p, n in
                         sorted(zip(src.paths, src.names, strict=True)))  # fmt: skip
    return f"files:{hashlib.sha256(listing.encode()).hexdigest()[:32]}"


#: The name of :func:`count_stores` in segiou 0.1 (it also counts folders of label images).
evaluate_zarr = count_stores
