"""What one counting task does: read its images chunk by chunk, count, return int64 partials.

A task gets the shared :class:`Job` and its units ``(image, first row, end row)``; it returns a
:data:`Partial` of plain arrays, which :func:`combine` sums (the tree of sums of the graph).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from segiou._count import (
    IGNORE,
    ImageCounter,
    Lookup,
    OnUnexpected,
    describe_unexpected,
    format_unexpected,
)
from segiou._typing import IntArray
from segiou.errors import (
    LabelRangeError,
    ShapeMismatchError,
)
from segiou.io.chunks import ChunkCache, image_array, read_region
from segiou.io.sources import Source
from segiou.io.zarr import MaskSet, Missing
from segiou.labels import IdSpace, LabelSpec

__all__ = ["Job", "Partial", "combine", "count_group", "describe", "walk_image"]

# A partial: (code table, image indices, per-image rows, unexpected gt, unexpected pred).
Partial = tuple[IntArray, IntArray, IntArray, dict[int, int], dict[int, int]]


@dataclass(frozen=True)
class Job:
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


def walk_image(job: Job, i: int, rows: tuple[int, int], gcache: ChunkCache,
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


def describe(job: Job, i: int, g: np.ndarray, p: np.ndarray, n_gt: int, n_pred: int,
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


def count_group(job: Job, units: IntArray) -> Partial:
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
            g, p = whole_image(job, i)
            counter.add(g, p)
            full = counter.finish()
            n_gt, n_pred = int(full[k + 1, :].sum()), int(full[:k, k + 1].sum())
            if n_gt or n_pred:
                merge_counts(unexp_g, unexp_p, describe(job, i, g, p, n_gt, n_pred))
            store_row(rows[r], full, k)
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
        walk_image(job, i, (top, bottom), gc, pc, counter)
        full = counter.finish()
        n_gt, n_pred = int(full[k + 1, :].sum()), int(full[:k, k + 1].sum())
        if n_gt or n_pred:
            if job.on_unexpected == "raise" and (top, bottom) != (0, job.gt.image_shape(i)[0]):
                top, bottom = 0, job.gt.image_shape(i)[0]  # the error describes the whole image
                n_gt = n_pred = 1  # (both sides: the other band may hold the other side's)
            both = walk_image(job, i, (top, bottom), gc, pc, None)
            assert both is not None
            merge_counts(unexp_g, unexp_p, describe(job, i, *both, n_gt, n_pred, top))
        # one array per image of a group, never read again: forget its chunks and buffers
        # (kept, they would pile up to every image of the task)
        if job.gt.layout == "group":
            gcaches.pop(garr.path).drop()
        if pc is not None and isinstance(job.pred, MaskSet) and job.pred.layout == "group":
            pcaches.pop(pc.arr.path).drop()
        store_row(rows[r], full, k)
        table += full
    return table, np.asarray(indices, dtype=np.int64), rows, unexp_g, unexp_p


def whole_image(job: Job, i: int) -> tuple[np.ndarray, np.ndarray]:
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


def merge_counts(unexp_g: dict[int, int], unexp_p: dict[int, int],
                  found: tuple[dict[int, int], dict[int, int]]) -> None:  # fmt: skip
    for src, dst in zip(found, (unexp_g, unexp_p), strict=True):
        for v, c in src.items():
            dst[v] = dst.get(v, 0) + c


def store_row(row: np.ndarray, full: IntArray, k: int) -> None:
    """Per-image row: TP, FP, FN (void included) per class, ignored, unexpected."""
    cm = full[:k, :k]
    tp = np.diagonal(cm)
    row[:k] = tp
    row[k : 2 * k] = cm.sum(axis=0) - tp
    row[2 * k : 3 * k] = cm.sum(axis=1) - tp + full[:k, k]
    row[3 * k] = full[k, :].sum()
    row[3 * k + 1] = full[k + 1, :].sum() + full[:k, k + 1].sum()


def combine(parts: Iterable[Partial]) -> Partial:
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
