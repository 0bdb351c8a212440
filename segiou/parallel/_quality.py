"""What a counting task adds beyond the confusion counts: Boundary IoU, instances, absent chunks.

Kept apart from :mod:`~segiou.parallel._tasks` (which calls it through two hooks: one call per
chunk row of the walk, one per unit): a :class:`UnitQuality` per task sees each unit (an image,
or a band of chunk rows of one) and returns a :class:`QualityPart` of plain ``int64`` arrays,
one row per unit, which :func:`join` concatenates in the tree of sums and the engine adds up per
image (:func:`per_image`).

* **Boundary IoU**: per chunk row of a unit, the rows ``y0 - d .. y1 + d`` of both masks (the
  chunk row with a halo of ``d`` rows, clipped at the image) are counted by
  :class:`~segiou._boundary.BandCounter`; the walk keeps the decoded chunks of the ``d`` rows
  above the next chunk row (and decodes those below it once, early). Nothing image-sized is
  held beyond such a band. Integer sums: identical for any chunking.
* **Instances**: the instance array (or files) beside the ground truth is read region by
  region; each instance's pixels and true positives are summed over every region it spans and
  over the units of its image (in the engine, by ``(image, instance id)``).
* **Absent chunks**: ground-truth and prediction chunks that were missing from their store and
  read as the fill value, counted once per image they cover (a prediction chunk by the unit
  whose ground-truth chunk row holds the chunk's first row: the two may be chunked apart).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from segiou._boundary import BandCounter, boundary_counts
from segiou._instances import InstanceCounter, InstanceTally
from segiou._tally import Cells, class_sums
from segiou._typing import IntArray
from segiou.io.chunks import ChunkCache, image_array, read_region

__all__ = ["QualityPart", "UnitQuality", "join", "per_image"]


class QualityPart(NamedTuple):
    """Per unit: its image, Boundary IoU counts, instances, absent chunks; widths used."""

    image: IntArray  # (U,) image of each unit
    boundary: IntArray  # (U, 3, K); (U, 3, 0) without Boundary IoU
    widths: IntArray  # boundary widths in pixels used
    instances: InstanceTally  # records with their image; fp (U, G)
    absent: IntArray  # (U,) absent ground-truth chunks
    absent_pred: IntArray  # (U,) absent prediction chunks


def join(parts: list[QualityPart]) -> QualityPart:
    """Concatenate parts (the tree of sums)."""
    first = parts[0]
    g = first.instances.fp.shape[1]
    return QualityPart(
        np.concatenate([p.image for p in parts]),
        np.concatenate([p.boundary for p in parts]),
        np.unique(np.concatenate([p.widths for p in parts])),
        InstanceTally.concat([p.instances for p in parts], g),
        np.concatenate([p.absent for p in parts]),
        np.concatenate([p.absent_pred for p in parts]),
    )


def per_image(q: QualityPart, n: int, k: int) -> dict[str, Any]:
    """Sum units of the same image: ``boundary`` ``(n, 3, K)``, instances, absent chunks.

    ``boundary`` is ``(n, 3, 0)`` without Boundary IoU (``(n, 3, K)`` zeros took 98 KB an
    image at 4,096 classes).
    """
    b = np.zeros((n, 3, q.boundary.shape[2]), dtype=np.int64)
    np.add.at(b, q.image, q.boundary)
    absent, absent_pred = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    np.add.at(absent, q.image, q.absent)
    np.add.at(absent_pred, q.image, q.absent_pred)
    t = q.instances
    fp = np.zeros((n, t.fp.shape[1]), dtype=np.int64)
    np.add.at(fp, q.image, t.fp)
    # an instance split over bands: sum its counts by (image, id)
    key = np.stack([t.image, t.id], axis=1)
    keys, inverse = np.unique(key, axis=0, return_inverse=True) if t.id.size else (key, t.id)
    inverse = np.asarray(inverse).reshape(-1)

    def summed(a: IntArray) -> IntArray:
        out = np.zeros(len(keys), dtype=np.int64)
        np.add.at(out, inverse, a)
        return out

    cls = np.zeros(len(keys), dtype=np.int64)
    cls[inverse] = t.cls
    inst = InstanceTally(keys[:, 0].copy(), keys[:, 1].copy(), cls, summed(t.pixels),
                         summed(t.tp), summed(t.cat_tp), fp)  # fmt: skip
    return {"boundary": b, "instances": inst, "absent": absent, "absent_pred": absent_pred,
            "widths": q.widths.tolist()}  # fmt: skip


class UnitQuality:
    """Boundary IoU, instances and absent chunks of the units one task counts.

    ``job`` is the task's :class:`~segiou.parallel._tasks.Job` (its ``boundary``,
    ``instances``, ``gt``, ``pred``, ``pred_index``, ``lookup``, ``spec`` and id spaces).
    """

    def __init__(self, job: Any) -> None:
        self.job = job
        k = job.spec.num_classes
        self.k = k
        self.band = BandCounter(job.lookup) if job.boundary is not None else None
        # unexpected predictions are left out of |G| (and of the counts); under "raise" any
        # of them fails the evaluation, so there is nothing to leave out
        self.odd = job.on_unexpected == "count"
        self.inst = (InstanceCounter(job.spec, job.gt_ids, job.pred_ids)
                     if job.instances is not None else None)  # fmt: skip
        self.n_cat = len(job.spec.categories)
        self.icaches: dict[str, ChunkCache] = {}
        self._units: list[tuple[int, IntArray, int, int]] = []
        #: Boundary IoU columns a unit keeps (none without Boundary IoU)
        self._bk = k if self.band is not None else 0
        self._tallies: list[InstanceTally] = []
        self._widths: set[int] = set()
        self._cur: dict[str, Any] = {}

    def margin(self, i: int) -> int:
        """Rows above a chunk row that the next chunk row's halo needs (image ``i``)."""
        if self.band is None:
            return 0
        return self.job.boundary.pixels_for(*self.job.gt.image_shape(i))  # type: ignore[no-any-return]

    def start(self, i: int) -> None:
        """Begin a unit of image ``i``."""
        sums = np.zeros((8, self._bk), dtype=np.int64)
        self._cur = {"image": i, "sums": sums, "absent": 0, "absent_pred": 0}

    # -- chunked stores ---------------------------------------------------------------------
    def row(self, i: int, y0: int, y1: int, gcache: ChunkCache, pcache: ChunkCache | None) -> None:
        """Count chunk row ``y0 .. y1`` of image ``i`` (its chunks are in the caches)."""
        job = self.job
        garr, gn = image_array(job.gt, i)
        h, w = job.gt.image_shape(i)
        if gcache.absent:  # absent chunks of this chunk row
            ax = 0 if gn is None else 1
            lead = () if gn is None else (gn // garr.chunks[0],)
            cy = y0 // garr.chunks[ax]
            self._cur["absent"] += sum(
                (*lead, cy, cx) in gcache.absent for cx, _, _ in garr.chunk_ranges(ax + 1, 0, w)
            )
        if pcache is not None and pcache.absent:
            self._cur["absent_pred"] += self._absent_pred(i, y0, y1, w, pcache)
        pred = self._pred_region(i, pcache)
        if self.band is not None:
            d = self.margin(i)
            a, b = max(0, y0 - d), min(h, y1 + d)
            g = read_region(gcache, gn, a, b, 0, w)
            p = pred(a, b, g)
            self._cur["sums"] += self.band.count(_native(g), _native(p), y0 - a, y1 - a, d,
                                                 unexpected=self.odd)  # fmt: skip
            self._widths.add(d)
        if self.inst is not None:
            iarr, n = image_array(job.instances, i)
            ic = self.icaches.get(iarr.path)
            if ic is None:
                # the ground truth's policy: tools that skip its all-fill chunks skip these too
                policy = job.missing_gt_chunks
                ic = self.icaches[iarr.path] = ChunkCache(iarr, policy, job.instances, i)
            g = read_region(gcache, gn, y0, y1, 0, w)
            self.inst.add(_native(read_region(ic, n, y0, y1, 0, w)), _native(g),
                          _native(pred(y0, y1, g)), where=job.gt.names[i],
                          origin=(y0, 0))  # fmt: skip
            ic.drop_above(y1)

    def _absent_pred(self, i: int, y0: int, y1: int, w: int, pcache: ChunkCache) -> int:
        """Absent prediction chunks (read already) whose first row is in ``y0 .. y1``.

        Each prediction chunk row starts in one ground-truth chunk row of the image, so each
        chunk is counted once per image, however the two stores are chunked.
        """
        parr, pn = image_array(self.job.pred, self.job.pred_index[i])
        ax = 0 if pn is None else 1
        lead = () if pn is None else (pn // parr.chunks[0],)
        ch = parr.chunks[ax]
        return sum(
            (*lead, cy, cx) in pcache.absent
            for cy in range(-(-y0 // ch), (y1 - 1) // ch + 1)
            for cx, _, _ in parr.chunk_ranges(ax + 1, 0, w)
        )

    def _pred_region(self, i: int, pcache: ChunkCache | None) -> Any:
        job = self.job
        pi = job.pred_index[i]

        def region(a: int, b: int, g: np.ndarray) -> np.ndarray:
            if pi < 0 or pcache is None:
                return np.full(g.shape, job.void_value, dtype=np.int64)
            _, pn = image_array(job.pred, pi)
            return read_region(pcache, pn, a, b, 0, g.shape[1])

        return region

    def drop(self) -> None:
        """Forget the instance chunks of a group's image (never read again)."""
        for c in self.icaches.values():
            c.drop()
        self.icaches.clear()

    # -- image files ------------------------------------------------------------------------
    def whole(self, i: int, g: np.ndarray, p: np.ndarray, absent: dict[str, int]) -> None:
        """Count a whole image (image files: decoded whole; ``absent`` chunks of a Zarr side)."""
        h = g.shape[0]
        if self.job.missing_gt_chunks == "count":
            self._cur["absent"] += absent.get("gt", 0)
        if self.job.missing_pred_chunks == "count":
            self._cur["absent_pred"] += absent.get("pred", 0)
        if self.band is not None:
            d = self.margin(i)
            self._cur["sums"] += self.band.count(_native(g), _native(p), 0, h, d,
                                                 unexpected=self.odd)  # fmt: skip
            self._widths.add(d)
        if self.inst is not None:
            src = self.job.instances
            inst = np.ascontiguousarray(src.read(i, ids="class"))
            self.inst.add(inst, g, p, where=src.image_where(i))

    # -- end of a unit ----------------------------------------------------------------------
    def finish(self, table: IntArray | Cells) -> None:
        """End the unit: ``table`` is its ``(K+2, K+2)`` code table or cells (same pixels)."""
        # ground-truth pixels the counts hold: a class or void predicted (not unexpected)
        b = np.zeros((3, 0), dtype=np.int64)
        if self.band is not None:
            b = boundary_counts(self._cur["sums"], *class_sums(table, self.k))
        self._units.append((self._cur["image"], b, self._cur["absent"],
                            self._cur["absent_pred"]))  # fmt: skip
        if self.inst is not None:
            self._tallies.append(self.inst.finish(image=self._cur["image"]))

    def part(self) -> QualityPart:
        """Return everything counted, one row per unit."""
        n = len(self._units)
        image = np.array([u[0] for u in self._units], dtype=np.int64)
        bnd = (np.stack([u[1] for u in self._units]) if n
               else np.zeros((0, 3, self._bk), dtype=np.int64))  # fmt: skip
        absent = np.array([u[2] for u in self._units], dtype=np.int64)
        absent_pred = np.array([u[3] for u in self._units], dtype=np.int64)
        if self.inst is not None:
            inst = InstanceTally.concat(self._tallies, self.n_cat)
        else:
            inst = InstanceTally.empty(n, self.n_cat)
        widths = np.array(sorted(self._widths), dtype=np.int64)
        return QualityPart(image, bnd, widths, inst, absent, absent_pred)


def _native(a: np.ndarray) -> np.ndarray:
    """Return ``a`` in native byte order (chunks of a big-endian store are read as stored)."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))
