"""What one counting task does: read its images chunk by chunk, count, return int64 partials.

A task gets the shared :class:`Job` and its units ``(image, first row, end row)``; it returns a
:class:`Partial`: each unit's sparse per-image entries (every pixel: the engine sums the
dataset's totals from them), and every unexpected value it met, with its count and first position. :func:`combine` joins partials (the
tree of sums of the graph). Tasks never raise for unexpected values: the engine raises once,
after the run, naming every image, so the message does not depend on how tasks were split.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from segiou._batch import spec_lookup
from segiou._boundary import BoundaryWidth
from segiou._count import (
    IGNORE,
    ImageCounter,
    Lookup,
    OnUnexpected,
    check_described,
    describe_unexpected,
)
from segiou._tally import Cells, table_sums
from segiou._typing import IntArray
from segiou._unexpected import isin
from segiou.errors import (
    ShapeMismatchError,
)
from segiou.images import ImageRows
from segiou.io.chunks import ChunkCache, CountedMissing, image_array, read_region
from segiou.io.maps import MapWriter
from segiou.io.sources import Source
from segiou.io.zarr import MaskSet
from segiou.labels import IdSpace, LabelSpec
from segiou.parallel._quality import QualityPart, UnitQuality, join

__all__ = ["Job", "Odd", "Partial", "combine", "count_group", "describe", "walk_image"]

#: One unexpected value in one image: (image, side, value, pixels, first (row, column)).
Odd = tuple[int, str, int, int, tuple[int, int]]


class Partial(NamedTuple):
    """What tasks return and :func:`combine` joins: plain arrays and small lists."""

    entries: IntArray  # (E, 4): image, gt code, pred code, count (per unit; bands summed later)
    # (every pixel is in its image's entries: the totals are summed from them at the end)
    odd: list[Odd]  # every unexpected value of every unit
    quality: QualityPart | None = None  # Boundary IoU, instances, absent chunks (_quality)


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
    missing_gt_chunks: CountedMissing
    void_value: int | None
    #: A chunk missing from the predictions: ``"error"`` (refused), ``"count"`` (read as the
    #: fill value, counted per image) or ``"fill"`` (read as the fill value):
    #: ``count_stores``' ``missing_pred_chunks`` resolved for the store.
    missing_pred_chunks: CountedMissing = "fill"
    #: Error maps: when set, every chunk pair counted is also written there (same pass).
    maps: MapWriter | None = None
    # issue 13 (see _quality): Boundary IoU width; instance ids aligned with the ground truth
    boundary: BoundaryWidth | None = None
    instances: Source | None = None

    @property
    def quality(self) -> bool:
        """Whether tasks count more than the confusion (Boundary IoU, instances, absent chunks)."""
        return self.boundary is not None or self.instances is not None or (
            "count" in (self.missing_gt_chunks, self.missing_pred_chunks)
        )  # fmt: skip

    @functools.cached_property
    def lookup(self) -> Lookup:
        return spec_lookup(self.spec, self.gt_ids, self.pred_ids)


def walk_image(job: Job, i: int, rows: tuple[int, int], gcache: ChunkCache,
                pcache: ChunkCache | None, counter: ImageCounter | None,
                quality: UnitQuality | None = None) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """Count rows ``rows[0]:rows[1]`` of image ``i`` chunk by chunk into ``counter``.

    With ``counter=None``, return that band of the image pair instead (the slow path that
    describes unexpected values). ``quality`` also counts each chunk row (Boundary IoU with a
    halo of rows around it, instances, absent chunks; see :mod:`~segiou.parallel._quality`).
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
                if job.maps is not None:  # the error map of what was just counted
                    job.maps.write(i, y0, y1, x0, x1, g, p)
            else:
                assert whole_g is not None
                whole_g[y0 - top : y1 - top, x0:x1] = g
                if whole_p is None:
                    whole_p = np.empty((bottom - top, w), dtype=p.dtype)
                whole_p[y0 - top : y1 - top, x0:x1] = p
        margin = 0
        if quality is not None and counter is not None:
            quality.row(i, y0, y1, gcache, pcache)
            margin = quality.margin(i)  # the next row's halo reaches this far up
        # the walk never goes back up: decoded chunks above this row are done (so a task
        # holds about one chunk row of each array, not a whole image)
        gcache.drop_above(y1 - margin)
        if pcache is not None:
            pcache.drop_above(y1 - margin)
    if counter is None:
        assert whole_g is not None
        assert whole_p is not None
        return whole_g, whole_p
    return None


def describe(job: Job, i: int, g: np.ndarray, p: np.ndarray, top: int = 0) -> list[Odd]:
    """Each unexpected value of image ``i``'s band from row ``top``: count, first position."""
    lk = job.lookup
    found: list[Odd] = []
    bad_g = describe_unexpected(g, None, lk.gt_map, g.shape)
    classes = [r for r, c in lk.gt_map.items() if c != IGNORE]
    bad_p = describe_unexpected(p, isin(g, classes), lk.pred_map, g.shape)
    for side, bad in (("gt", bad_g), ("pred", bad_p)):
        found += [(i, side, v, c, (pos[0] + top, pos[1])) for v, (c, pos) in sorted(bad.items())]
    return found


def _described(job: Job, i: int, full: IntArray | Cells, g: np.ndarray, p: np.ndarray,
               top: int = 0) -> list[Odd]:  # fmt: skip
    """:func:`describe`, checked against the unexpected pixels of the image's table ``full``."""
    found = describe(job, i, g, p, top)
    n_gt, n_pred, _, _ = table_sums(full, job.spec.num_classes)
    check_described(n_gt, sum(o[3] for o in found if o[1] == "gt"),
                    n_pred, sum(o[3] for o in found if o[1] == "pred"),
                    f"image {job.gt.names[i]!r}")  # fmt: skip
    return found


def _odd(full: IntArray | Cells, k: int) -> bool:
    """Whether an image's table (or cells) holds unexpected pixels."""
    n_gt, n_pred, _, _ = table_sums(full, k)
    return bool(n_gt or n_pred)


def _entries(full: IntArray | Cells, i: int) -> IntArray:
    """Image ``i``'s sparse entries from its folded ``(K+2, K+2)`` table or its cells."""
    if isinstance(full, Cells):  # (counted into cells: rows K and K+1 folded already)
        gt, pred = np.divmod(full.codes, full.width)
        return np.stack([np.full_like(gt, i), gt, pred, full.counts], axis=1)
    rows = ImageRows.from_tables(full[None])
    return np.stack([np.full_like(rows.gt, i), rows.gt, rows.pred, rows.count], axis=1)


def count_group(job: Job, units: IntArray) -> Partial:
    """Count ``units`` (one Dask task) into a :class:`Partial` of plain int64 arrays.

    A unit is ``(image, first row, end row)``: a whole image, or a band of whole chunk rows of a
    large one (:func:`~segiou.parallel.plan_tasks`). Each unit gives its own entries; the caller
    sums the entries of an image split over several units.
    """
    bands = [(int(i), int(a), int(b)) for i, a, b in np.asarray(units).reshape(-1, 3)]
    k = job.spec.num_classes
    counter = ImageCounter(job.lookup)
    entries: list[IntArray] = []
    odd: list[Odd] = []
    gcaches: dict[str, ChunkCache] = {}
    pcaches: dict[str, ChunkCache] = {}
    chunked = isinstance(job.gt, MaskSet) and (job.pred is None or isinstance(job.pred, MaskSet))
    uq = UnitQuality(job) if job.quality else None
    for i, top, bottom in bands:
        if uq is not None:
            uq.start(i)
        if not chunked:  # image files: decode whole images (never split)
            absent: dict[str, int] = {}
            g, p = whole_image(job, i, absent)
            counter.begin(g.size)
            counter.add(g, p)
            if job.maps is not None:
                job.maps.write(i, 0, g.shape[0], 0, g.shape[1], g, p)
            full = counter.finish()
            if uq is not None:
                uq.whole(i, g, p, absent)
                uq.finish(full)
            if _odd(full, k):
                odd += _described(job, i, full, g, p)
            entries.append(_entries(full, i))
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
                pc = pcaches[parr.path] = ChunkCache(parr, job.missing_pred_chunks, job.pred,
                                                     job.pred_index[i], "pred")  # fmt: skip
            if pn is not None:
                pc.drop(keep=pn // parr.chunks[0])
        if gn is not None:
            gc.drop(keep=gn // garr.chunks[0])
        counter.begin((bottom - top) * job.gt.image_shape(i)[1])
        walk_image(job, i, (top, bottom), gc, pc, counter, uq)
        full = counter.finish()
        if uq is not None:
            uq.finish(full)
        if _odd(full, k):  # the slow path: which values, where
            both = walk_image(job, i, (top, bottom), gc, pc, None)
            assert both is not None
            odd += _described(job, i, full, *both, top)
        # one array per image of a group, never read again: forget its chunks and buffers
        # (kept, they would pile up to every image of the task)
        if job.gt.layout == "group":
            gcaches.pop(garr.path).drop()
        if pc is not None and isinstance(job.pred, MaskSet) and job.pred.layout == "group":
            pcaches.pop(pc.arr.path).drop()
        if uq is not None and job.gt.layout == "group":
            uq.drop()
        entries.append(_entries(full, i))
    joined = np.concatenate(entries) if entries else np.zeros((0, 4), dtype=np.int64)
    return Partial(joined, odd, None if uq is None else uq.part())


def whole_image(job: Job, i: int, absent: dict[str, int] | None = None,
                ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Ground truth and prediction of image ``i`` as whole 2-D arrays (any source kind).

    ``absent`` gets, per side (``"gt"``, ``"pred"``), the chunks of a Zarr side that were
    absent and read as the fill value (each covers the image: read for it alone).
    """

    def read(src: Source, j: int, side: Literal["gt", "pred"]) -> np.ndarray:
        # by side, not by identity: gt and pred may be the same source object
        if isinstance(src, MaskSet):
            arr, n = image_array(src, j)
            missing = job.missing_gt_chunks if side == "gt" else job.missing_pred_chunks
            cache = ChunkCache(arr, missing, src, j, side)
            h, w = src.image_shape(j)
            out = np.ascontiguousarray(read_region(cache, n, 0, h, 0, w))
            if absent is not None:
                absent[side] = len(cache.absent)
            return out
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


def combine(parts: Iterable[Partial]) -> Partial:
    """Join partials: entries and unexpected values concatenated."""
    parts = list(parts)
    quality = [p.quality for p in parts if p.quality is not None]
    return Partial(np.concatenate([p.entries for p in parts]),
                   [o for p in parts for o in p.odd],
                   join(quality) if quality else None)  # fmt: skip
