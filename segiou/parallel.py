"""Layer 5: evaluate Zarr mask stores with Dask. Counting only; no metric math.

The graph is built from public Dask APIs (``dask.delayed``): the job description is one key,
one counting task per group of whole images depends on it, and a tree of sums with fan-in
``split_every`` reduces the partials. Each task reads its own chunks (bytes from the store,
decoded into buffers each thread reuses), counts them single-threaded with the Numba kernels
(Dask owns the cores; the kernels release the GIL), folds one small table per image, and returns
plain ``int64`` arrays: the dataset table and one row of TP/FP/FN per image. Partials are summed
in a tree. Nothing image-sized leaves a task. Integer sums make results bit-identical across
schedulers, chunkings and ``split_every``.

No ``Client`` is created here: pass one (or a scheduler name); the CLI and ``pipelines/``
create clusters.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from segiou._count import (
    IGNORE,
    ImageCounter,
    ImageCounts,
    Lookup,
    OnUnexpected,
    Tally,
    describe_unexpected,
    format_unexpected,
)
from segiou._typing import IntArray
from segiou.confusion import ConfusionMatrix
from segiou.errors import (
    LabelRangeError,
    MaskNotFoundError,
    ShapeMismatchError,
    StoreLayoutError,
    UsageError,
)
from segiou.io.chunks import ChunkCache, image_array, read_region
from segiou.io.sources import FolderLayout, Source, open_pair
from segiou.io.zarr import MaskSet, Missing, open_masks
from segiou.labels import IdSpace, LabelSpec, load_spec

__all__ = ["count_stores", "evaluate_zarr", "plan_groups", "plan_tasks"]

MissingPred = Literal["error", "void"]
#: Aim for tasks of about this many pixels (fewer, larger tasks amortise Dask's overhead).
_TASK_PIXELS = 8 << 20

# A partial: (code table, image indices, per-image rows, unexpected gt, unexpected pred).
Partial = tuple[IntArray, IntArray, IntArray, dict[int, int], dict[int, int]]


@dataclass(frozen=True)
class _Job:
    """Everything a task needs; small and picklable."""

    gt: Source
    pred: Source | None
    pred_index: tuple[int, ...]  # pred image index of each gt image, -1 = missing
    spec: LabelSpec
    gt_ids: IdSpace
    pred_ids: IdSpace
    on_unexpected: OnUnexpected
    missing_gt_chunks: Missing
    void_value: int | None

    @functools.cached_property
    def lookup(self) -> Lookup:
        return Lookup(self.spec.num_classes, self.spec.gt_map(self.gt_ids),
                      self.spec.pred_map(self.pred_ids))  # fmt: skip


def _walk_image(job: _Job, i: int, rows: tuple[int, int], gcache: ChunkCache,
                pcache: ChunkCache | None,
                counter: ImageCounter | None) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """Count rows ``rows[0]:rows[1]`` of image ``i`` chunk by chunk into ``counter``.

    With ``counter=None``, return that band of the image pair instead (the slow path that
    describes unexpected values).
    """
    garr, gn = image_array(job.gt, i)
    _, w = job.gt.image_shape(i)
    top, bottom = rows
    pi = job.pred_index[i]
    ax = 0 if gn is None else 1
    whole_g = np.empty((bottom - top, w), dtype=np.dtype(garr.dtype)) if counter is None else None
    whole_p: np.ndarray | None = None
    for _, y0, y1 in garr.chunk_ranges(ax, top, bottom):
        for _, x0, x1 in garr.chunk_ranges(ax + 1, 0, w):
            g = read_region(gcache, gn, y0, y1, x0, x1)
            if pi < 0 or pcache is None:
                p = np.full(g.shape, job.void_value, dtype=np.int64)
            else:
                _, pn = image_array(job.pred, pi)  # type: ignore[arg-type]
                p = read_region(pcache, pn, y0, y1, x0, x1)
            if counter is not None:
                counter.add(g, p)
            else:
                assert whole_g is not None
                whole_g[y0 - top : y1 - top, x0:x1] = g
                if whole_p is None:
                    whole_p = np.empty((bottom - top, w), dtype=p.dtype)
                whole_p[y0 - top : y1 - top, x0:x1] = p
        # the walk never goes back up: decoded chunks above this row are done (so a task
        # holds about one chunk row of each array, not a whole image)
        gcache.drop_above(y1)
        if pcache is not None:
            pcache.drop_above(y1)
    if counter is None:
        assert whole_g is not None
        assert whole_p is not None
        return whole_g, whole_p
    return None


def _describe(job: _Job, i: int, g: np.ndarray, p: np.ndarray, n_gt: int, n_pred: int,
              top: int = 0) -> tuple[dict[int, int], dict[int, int]]:  # fmt: skip
    """Find each unexpected value of image ``i`` (rows from ``top``); raise or return counts."""
    lk = job.lookup
    bad_g = describe_unexpected(g, None, lk.gt_map, g.shape) if n_gt else {}
    bad_p = {}
    if n_pred:
        classes = [r for r, c in lk.gt_map.items() if c != IGNORE]
        bad_p = describe_unexpected(p, np.isin(g, classes), lk.pred_map, g.shape)
    if top:  # a band of the image: positions in the image
        bad_g = {v: (c, (y + top, x)) for v, (c, (y, x)) in bad_g.items()}
        bad_p = {v: (c, (y + top, x)) for v, (c, (y, x)) in bad_p.items()}
    if job.on_unexpected == "raise":
        parts = []
        if bad_g:
            parts.append(f"ground truth has unexpected value(s) {format_unexpected(bad_g)}")
        if bad_p:
            parts.append(f"prediction has unexpected value(s) {format_unexpected(bad_p)}")
        msg = (
            f"{job.gt.where()} image {job.gt.names[i]!r} (index {i}): "
            + "; ".join(parts)
            + " (positions are (row, column) in the image). Fix the label spec or the masks, "
            "or pass on_unexpected='count' (--on-unexpected count) to count and report them"
        )
        raise LabelRangeError(msg)
    return {v: c for v, (c, _) in bad_g.items()}, {v: c for v, (c, _) in bad_p.items()}


def _count_group(job: _Job, units: IntArray) -> Partial:
    """Count ``units`` (one Dask task): a partial of plain int64 arrays.

    A unit is ``(image, first row, end row)``: a whole image, or a band of whole chunk rows of a
    large one (:func:`plan_tasks`). The partial has one per-image row per unit; the caller sums
    the rows of an image split over several units.
    """
    bands = [(int(i), int(a), int(b)) for i, a, b in np.asarray(units).reshape(-1, 3)]
    indices = [i for i, _, _ in bands]
    k = job.spec.num_classes
    width = k + 2
    counter = ImageCounter(job.lookup)
    table = np.zeros((width, width), dtype=np.int64)
    rows = np.zeros((len(indices), 3 * k + 2), dtype=np.int64)
    unexp_g: dict[int, int] = {}
    unexp_p: dict[int, int] = {}
    gcaches: dict[str, ChunkCache] = {}
    pcaches: dict[str, ChunkCache] = {}
    chunked = isinstance(job.gt, MaskSet) and (job.pred is None or isinstance(job.pred, MaskSet))
    for r, (i, top, bottom) in enumerate(bands):
        if not chunked:  # image files: decode whole images (never split)
            g, p = _whole_image(job, i)
            counter.add(g, p)
            full = counter.finish()
            n_gt, n_pred = int(full[k + 1, :].sum()), int(full[:k, k + 1].sum())
            if n_gt or n_pred:
                _merge_counts(unexp_g, unexp_p, _describe(job, i, g, p, n_gt, n_pred))
            _store_row(rows[r], full, k)
            table += full
            continue
        garr, gn = image_array(job.gt, i)
        gc = gcaches.get(garr.path)
        if gc is None:
            gc = gcaches[garr.path] = ChunkCache(garr, job.missing_gt_chunks, job.gt, i)
        pc = None
        if job.pred is not None and job.pred_index[i] >= 0:
            parr, pn = image_array(job.pred, job.pred_index[i])
            pc = pcaches.get(parr.path)
            if pc is None:
                pc = pcaches[parr.path] = ChunkCache(parr, "fill", job.pred, job.pred_index[i])
            if pn is not None:
                pc.drop(keep=pn // parr.chunks[0])
        if gn is not None:
            gc.drop(keep=gn // garr.chunks[0])
        _walk_image(job, i, (top, bottom), gc, pc, counter)
        full = counter.finish()
        n_gt, n_pred = int(full[k + 1, :].sum()), int(full[:k, k + 1].sum())
        if n_gt or n_pred:
            if job.on_unexpected == "raise" and (top, bottom) != (0, job.gt.image_shape(i)[0]):
                top, bottom = 0, job.gt.image_shape(i)[0]  # the error describes the whole image
                n_gt = n_pred = 1  # (both sides: the other band may hold the other side's)
            both = _walk_image(job, i, (top, bottom), gc, pc, None)
            assert both is not None
            _merge_counts(unexp_g, unexp_p, _describe(job, i, *both, n_gt, n_pred, top))
        # one array per image of a group, never read again: forget its chunks and buffers
        # (kept, they would pile up to every image of the task)
        if job.gt.layout == "group":
            gcaches.pop(garr.path).drop()
        if pc is not None and isinstance(job.pred, MaskSet) and job.pred.layout == "group":
            pcaches.pop(pc.arr.path).drop()
        _store_row(rows[r], full, k)
        table += full
    return table, np.asarray(indices, dtype=np.int64), rows, unexp_g, unexp_p


def _whole_image(job: _Job, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Ground truth and prediction of image ``i`` as whole 2-D arrays (any source kind)."""

    def read(src: Source, j: int, side: Literal["gt", "pred"]) -> np.ndarray:
        # by side, not by identity: gt and pred may be the same source object
        if isinstance(src, MaskSet):
            arr, n = image_array(src, j)
            missing: Missing = job.missing_gt_chunks if side == "gt" else "fill"
            cache = ChunkCache(arr, missing, src, j)
            h, w = src.image_shape(j)
            return np.ascontiguousarray(read_region(cache, n, 0, h, 0, w))
        ids = job.gt_ids if side == "gt" else job.pred_ids  # colour masks decode into it
        return np.ascontiguousarray(src.read(j, job.spec, ids=ids))

    g = read(job.gt, i, "gt")
    pi = job.pred_index[i]
    if pi < 0 or job.pred is None:
        return g, np.full(g.shape, job.void_value, dtype=np.int64)
    p = read(job.pred, pi, "pred")
    if p.shape != g.shape:
        msg = (
            f"image {job.gt.names[i]!r}: ground truth decodes to shape {g.shape} but the "
            f"prediction to {p.shape}; predictions must be at ground-truth resolution"
        )
        raise ShapeMismatchError(msg)
    return g, p


def _merge_counts(unexp_g: dict[int, int], unexp_p: dict[int, int],
                  found: tuple[dict[int, int], dict[int, int]]) -> None:  # fmt: skip
    for src, dst in zip(found, (unexp_g, unexp_p), strict=True):
        for v, c in src.items():
            dst[v] = dst.get(v, 0) + c


def _store_row(row: np.ndarray, full: IntArray, k: int) -> None:
    """Per-image row: TP, FP, FN (void included) per class, ignored, unexpected."""
    cm = full[:k, :k]
    tp = np.diagonal(cm)
    row[:k] = tp
    row[k : 2 * k] = cm.sum(axis=0) - tp
    row[2 * k : 3 * k] = cm.sum(axis=1) - tp + full[:k, k]
    row[3 * k] = full[k, :].sum()
    row[3 * k + 1] = full[k + 1, :].sum() + full[:k, k + 1].sum()


def _combine(parts: Iterable[Partial]) -> Partial:
    parts = list(parts)
    table = parts[0][0].copy()
    for p in parts[1:]:
        table += p[0]
    unexp_g: dict[int, int] = {}
    unexp_p: dict[int, int] = {}
    for p in parts:
        for src, dst in ((p[3], unexp_g), (p[4], unexp_p)):
            for v, c in src.items():
                dst[v] = dst.get(v, 0) + c
    return (table, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]),
            unexp_g, unexp_p)  # fmt: skip


def _graph(job: _Job, groups: Sequence[IntArray], split_every: int) -> Any:
    """One counting task per group of images, then a tree of sums with fan-in ``split_every``.

    The job (image names, pairing, label spec) is one key of the graph that every counting task
    depends on: it is tokenized and shipped once, not once per task (which grew as images x
    tasks). Keys are named (``segiou-count-...``, ``segiou-sum-...``) for progress and tests.
    The graph is written directly in dask's documented graph format (a dict of keys to
    ``(function, *arguments)`` tuples) and wrapped in a :class:`dask.delayed.Delayed`:
    composing ``delayed`` calls merged the children's graphs at every node and cost about a
    millisecond per task (measured; a 128-image run spent ~10% of its time building its graph).
    """
    import uuid

    from dask.delayed import Delayed

    if split_every < 2:
        msg = (
            f"split_every must be at least 2 (the fan-in of the tree of sums), got "
            f"{split_every}; the default is 8"
        )
        raise UsageError(msg)
    run = uuid.uuid4().hex
    job_key = f"segiou-job-{run}"
    dsk: dict[str, Any] = {job_key: job}
    level = []
    for i, g in enumerate(groups):
        key = f"segiou-count-{run}-{i}"
        # units as an array: a literal that dask neither scans for keys nor unpacks
        dsk[key] = (_count_group, job_key, np.asarray(g, dtype=np.int64))
        level.append(key)
    depth = 0
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level), split_every):
            key = f"segiou-sum-{run}-{depth}-{j}"
            dsk[key] = (_combine, level[j : j + split_every])
            nxt.append(key)
        level = nxt
        depth += 1
    return Delayed(level[0], dsk)


# -- planning ---------------------------------------------------------------------------------
def plan_groups(
    ms: MaskSet, *, pixels_per_task: int = _TASK_PIXELS, min_tasks: int = 4
) -> list[list[int]]:
    """Split the images into tasks of whole images, aligned to the stack's chunks along N.

    Parameters
    ----------
    ms : MaskSet
        Ground-truth masks.
    pixels_per_task : int, default 8 << 20
        Target pixels per task.
    min_tasks : int, default 4
        Make at least this many tasks when there are enough chunk rows (parallelism).

    Returns
    -------
    list of list of int
        Image indices of each task.
    """
    n = len(ms.names)
    if n == 0:
        return []
    step = ms.arrays[0].chunks[0] if isinstance(ms, MaskSet) and ms.layout == "stack" else 1
    units = [list(range(s, min(s + step, n))) for s in range(0, n, step)]
    total = ms.n_pixels()
    target = max(1, min(pixels_per_task, total // max(1, min_tasks)))
    groups: list[list[int]] = []
    cur: list[int] = []
    px = 0
    for u in units:
        cur.extend(u)
        px += sum(int(np.prod(ms.image_shape(i))) for i in u)
        if px >= target:
            groups.append(cur)
            cur, px = [], 0
    if cur:
        groups.append(cur)
    return groups


def plan_tasks(
    ms: Source,
    *,
    pixels_per_task: int = _TASK_PIXELS,
    min_tasks: int = 4,
    split_images: bool = True,
) -> list[IntArray]:
    """Plan the counting tasks: images grouped, large ones split into bands of chunk rows.

    Whole images are grouped as :func:`plan_groups` does; an image larger than a task's share is
    split into bands of whole chunk rows, so a dataset of a few large images (one satellite
    scene, a 3-image test) still runs on every worker. Only chunked stores with one image per
    chunk along N (or a group of 2-D arrays) are split, and only with ``split_images``.

    Parameters
    ----------
    ms : MaskSet or image-file source
        Ground-truth masks.
    pixels_per_task : int, default 8 << 20
        Target pixels per task.
    min_tasks : int, default 4
        Make at least this many tasks when the data allows it (parallelism).
    split_images : bool, default True
        Allow bands (the engine allows them when both sides are chunked stores).

    Returns
    -------
    list of ndarray of int64, shape (units, 3)
        Per task, its units ``(image, first row, end row)``.
    """
    groups = plan_groups(ms, pixels_per_task=pixels_per_task, min_tasks=min_tasks)
    if not groups:
        return []
    target = max(1, min(pixels_per_task, ms.n_pixels() // max(1, min_tasks)))
    splittable = (
        split_images
        and isinstance(ms, MaskSet)
        and (ms.layout == "group" or ms.arrays[0].chunks[0] == 1)
    )
    tasks: list[IntArray] = []
    for grp in groups:
        units = []
        for i in grp:
            h, w = ms.image_shape(i)
            if not (splittable and h * w > target):
                units.append((i, 0, h))
                continue
            arr, n = image_array(ms, i)  # a large image: its own tasks, one band each
            step = arr.chunks[0 if n is None else 1]  # rows of a chunk row
            band = max(step, target // max(1, w) // step * step)
            tasks += [np.array([[i, y, min(h, y + band)]], dtype=np.int64)
                      for y in range(0, h, band)]  # fmt: skip
        if units:
            tasks.append(np.array(units, dtype=np.int64).reshape(-1, 3))
    return tasks


def _pair(gt: Source, pred: Source, missing_pred: MissingPred) -> tuple[int, ...]:
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
    index = tuple(where.get(n, -1) for n in gt.names)
    bad = [
        (gt.names[i], gt.image_shape(i), pred.image_shape(j))
        for i, j in enumerate(index)
        if j >= 0 and gt.image_shape(i) != pred.image_shape(j)
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
    info = np.iinfo(ms.dtype) if ms.dtype.kind in "iu" else np.iinfo(np.uint8)
    needed = spec.gt_map(ids)
    classes = [r for r, c in needed.items() if c != IGNORE]
    if classes and (max(classes) > info.max or min(classes) < info.min):
        msg = (
            f"{ms.where()}: {side} dtype {ms.dtype} cannot hold the {spec.name!r} class ids "
            f"{min(classes)}..{max(classes)} ({ids} ids); check the label spec and the id space "
            "(--gt-ids/--pred-ids raw or class)"
        )
        raise StoreLayoutError(msg)


def _compute(obj: Any, scheduler: Any, progress: bool) -> Any:
    client = scheduler if hasattr(scheduler, "submit") else None
    if scheduler is None:
        try:
            from distributed import default_client

            client = default_client()
        except (ImportError, ValueError):
            scheduler = "threads"
    if client is not None:
        future = client.compute(obj)
        if progress:  # on stderr: stdout carries the results (tables, JSON, redirected files)
            from contextlib import redirect_stdout

            from distributed import progress as dist_progress

            with redirect_stdout(sys.stderr):  # distributed's text bar writes to stdout
                dist_progress(future)
        return future.result()
    if progress:
        from dask.diagnostics.progress import ProgressBar

        with ProgressBar(out=sys.stderr):
            return obj.compute(scheduler=scheduler)
    return obj.compute(scheduler=scheduler)


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
    missing_gt_chunks: Missing = "error",
    layout: FolderLayout = "plain",
    gt_pattern: str | None = None,
    pred_pattern: str | None = None,
    scheduler: Any = None,
    split_every: int = 8,
    pixels_per_task: int = _TASK_PIXELS,
    progress: bool = False,
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
    missing_gt_chunks : {"error", "fill"}, default "error"
        A chunk missing from the ground-truth store raises (default) or reads as the fill
        value. Missing prediction chunks always read as the fill value.
    scheduler : str or distributed.Client, optional
        ``"threads"`` (default when no Client is active), ``"synchronous"``, ``"processes"``,
        or a ``distributed.Client``. The current default Client is used when there is one.
    split_every : int, default 8
        Fan-in of the tree reduction of partial counts.
    pixels_per_task : int, default 8 << 20
        Target pixels per Dask task (whole images per task, unless a large image is split into
        bands of chunk rows; see :func:`plan_tasks`).
    layout, gt_pattern, pred_pattern
        Folders of label images only: how files are named and found (see
        :func:`segiou.io.png.find_pairs`).
    progress : bool, default False
        Show a progress bar (Dask's local diagnostics, or distributed's progress).

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
    StoreLayoutError
        Not a valid mask store, or a dtype that cannot hold the classes.
    LabelRangeError
        Unexpected values (store, image, values, counts and first position listed).
    segiou.io.zarr.ChunkError
        A missing ground-truth chunk or a corrupt chunk (store, array, chunk, images named).
    UsageError
        ``split_every`` below 2, or one path is a Zarr store and the other a folder.
    segiou.errors.NamingError, segiou.errors.ImageDecodeError
        Image files without a name or with duplicate names; a file that is no label image.
    """
    if isinstance(gt, str | Path) and isinstance(pred, str | Path):
        gms, pms = open_pair(gt, pred, layout=layout, gt_pattern=gt_pattern,
                             pred_pattern=pred_pattern)  # fmt: skip
    else:
        gms = open_masks(gt) if isinstance(gt, str | Path) else gt
        pms = open_masks(pred) if isinstance(pred, str | Path) else pred
    if gt_ids == "auto":
        spec_ = load_spec(labels) if not isinstance(labels, int) else None
        has_raw = spec_ is not None and spec_.has_raw

        def recorded(src: Source) -> IdSpace | None:
            ids = getattr(src, "ids", None)
            return None if ids == "raw" and not has_raw else ids  # another spec's raw ids

        gt_ids = recorded(gms) or ("raw" if has_raw else "class")
        if pred_ids is None and pms is not None:
            pred_ids = recorded(pms)
    out = ConfusionMatrix(labels, ignore_index=ignore_index, gt_ids=gt_ids, pred_ids=pred_ids,
                          on_unexpected=on_unexpected, per_image=True)  # fmt: skip
    spec = out.spec
    _check_fits(gms, spec, out.gt_ids, "ground-truth")
    if pms is None:
        if missing_pred != "void":
            msg = "no prediction store given; pass one, or missing_pred='void' to score all-void"
            raise MaskNotFoundError(msg)
        index = tuple(-1 for _ in gms.names)
    else:
        _check_fits(pms, spec, out.pred_ids, "prediction")
        index = _pair(gms, pms, missing_pred)
    voids = [r for r, c in spec.pred_map(out.pred_ids).items() if c == IGNORE]
    void_value = voids[0] if voids else None
    if void_value is None and any(i < 0 for i in index):
        msg = (
            f"label spec {spec.name!r} has no void value to score missing predictions with; "
            "add an ignore value (e.g. 255)"
        )
        raise MaskNotFoundError(msg)
    job = _Job(gms, pms, index, spec, out.gt_ids, out.pred_ids, on_unexpected,
               missing_gt_chunks, void_value)  # fmt: skip
    chunked = isinstance(gms, MaskSet) and (pms is None or isinstance(pms, MaskSet))
    groups = plan_tasks(gms, pixels_per_task=pixels_per_task, split_images=chunked)
    if not groups:
        return out
    reduced = _graph(job, groups, split_every)
    table, idx, rows, unexp_g, unexp_p = _compute(reduced, scheduler, progress)
    order, inverse = np.unique(idx, return_inverse=True)  # an image split in bands: sum them
    summed = np.zeros((len(order), rows.shape[1]), dtype=np.int64)
    np.add.at(summed, inverse, rows)
    rows = summed
    k = spec.num_classes
    images = ImageCounts(tp=rows[:, :k], fp=rows[:, k : 2 * k], fn=rows[:, 2 * k : 3 * k],
                         ignored=rows[:, 3 * k], unexpected=rows[:, 3 * k + 1])  # fmt: skip
    tally = Tally.from_table(table, k, unexp_g, unexp_p, images)
    out.add_tally(tally, key=_batch_key(gms), names=[gms.names[i] for i in order],
                n_images=len(gms.names))  # fmt: skip
    return out


def _batch_key(src: Source) -> str:
    """``zarr:<store>``; a local store by its absolute path, so that one store has one key."""
    if isinstance(src, MaskSet) and "://" not in src.url:
        src = replace(src, url=str(Path(src.url).resolve()))
    return f"zarr:{src.where()}"


#: The name of :func:`count_stores` in segiou 0.1 (it also counts folders of label images).
evaluate_zarr = count_stores
