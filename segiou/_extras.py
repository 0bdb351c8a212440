"""What an accumulator keeps beside its confusion counts: Boundary IoU, instances, absent chunks.

* **Boundary IoU** (``boundary`` set): per class ``|G_d & P_d|``, ``|G_d|`` and ``|P_d|``
  summed over images (rows of ``boundary_total``), and per image when per-image rows are kept.
* **Instances** (``instances``): one record per ground-truth instance of each image (its id,
  class, pixels, pixels predicted as its class and in its instance category), and per category
  the false positives of predicted ids of no class that belong to it (see
  :mod:`segiou._instances`); exact integers, weighted only when scores are computed.
* **Absent chunks**: per image, how many ground-truth chunks, and how many prediction chunks,
  were absent from a Zarr store and read as the fill value (the Zarr rule for chunks never
  written); each side a :class:`ChunkCounts`.

Per-image entries (Boundary IoU rows, category false positives, the image of an instance
record) are kept for *named* images only, keyed by name, so that a merge that counts an image
once (see :meth:`segiou.confusion.ConfusionMatrix.merge`) drops the same image here. An image
with a label only (``#0``, ``key/0``, a store's ``000000``) is never matched across merges: it
adds to the totals, and its instance records carry the image ``""``. Labels repeat (two
keyless states both have ``#0``), so entries keyed by them overwrote one another. Absent chunks
are kept per named image (keyed by name, dropped with the image by a merge that counts it once)
and per label (summed, never dropped), apart: a label can be the same string as another image's
name. :attr:`Extras.absent` (:attr:`Extras.absent_pred`) shows both by the shown string.
Integers only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from segiou._absent import ChunkCounts
from segiou._boundary import BoundaryWidth
from segiou._instances import InstanceTally
from segiou._typing import IntArray
from segiou.errors import CheckpointError, CountOverflowError, DuplicateImageError, UsageError

__all__ = ["Extras", "InstanceRecords"]

_RECORD_FIELDS = ("id", "class", "pixels", "tp", "category_tp")
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class InstanceRecords:
    """Ground-truth instances: one entry per (image, instance), exact integer counts."""

    image: tuple[str, ...]
    id: IntArray
    cls: IntArray
    pixels: IntArray
    tp: IntArray
    cat_tp: IntArray

    @classmethod
    def empty(cls) -> InstanceRecords:
        """No records."""
        z = np.zeros(0, dtype=np.int64)
        return cls((), z, z, z, z, z)

    @property
    def n(self) -> int:
        """Number of records."""
        return len(self.image)

    @classmethod
    def concat(cls, parts: Iterable[InstanceRecords]) -> InstanceRecords:
        """Join records of disjoint images."""
        parts = [p for p in parts if p.n]
        if not parts:
            return cls.empty()
        return cls(
            tuple(n for p in parts for n in p.image),
            *(np.concatenate([getattr(p, f) for p in parts])
              for f in ("id", "cls", "pixels", "tp", "cat_tp")),
        )  # fmt: skip

    def without(self, images: set[str]) -> InstanceRecords:
        """Return the records of every image but ``images``."""
        keep = np.array([n not in images for n in self.image], dtype=bool)
        if keep.all():
            return self
        return InstanceRecords(
            tuple(n for n, k in zip(self.image, keep, strict=True) if k),
            self.id[keep], self.cls[keep], self.pixels[keep], self.tp[keep], self.cat_tp[keep],
        )  # fmt: skip


@dataclass
class Extras:
    """Boundary IoU counts, instance records and absent chunks of one accumulator.

    ``k`` classes, ``n_categories`` categories; ``boundary`` is the width (``None``: Boundary
    IoU off), ``instances`` whether instance ground truth is counted, ``per_image`` whether
    per-image entries are kept (the accumulator's setting).
    """

    k: int
    n_categories: int
    boundary: BoundaryWidth | None = None
    instances: bool = False
    per_image: bool = False
    boundary_total: IntArray = field(init=False)
    boundary_images: dict[str, IntArray] = field(default_factory=dict)
    boundary_px: set[int] = field(default_factory=set)
    records: list[InstanceRecords] = field(default_factory=list)
    category_fp: IntArray = field(init=False)
    category_fp_images: dict[str, IntArray] = field(default_factory=dict)
    gt_chunks: ChunkCounts = field(default_factory=ChunkCounts)
    pred_chunks: ChunkCounts = field(default_factory=ChunkCounts)

    @property
    def absent(self) -> dict[str, int]:
        """Absent ground-truth chunks per image as shown (:attr:`ChunkCounts.shown`)."""
        return self.gt_chunks.shown

    @property
    def absent_pred(self) -> dict[str, int]:
        """Absent prediction chunks per image as shown (:attr:`ChunkCounts.shown`)."""
        return self.pred_chunks.shown

    @property
    def absent_named(self) -> dict[str, int]:
        """Absent ground-truth chunks of named images."""
        return self.gt_chunks.named

    @property
    def absent_labels(self) -> dict[str, int]:
        """Absent ground-truth chunks of labelled images."""
        return self.gt_chunks.labels

    def __post_init__(self) -> None:
        self.boundary_total = np.zeros((3, self.k), dtype=np.int64)
        self.category_fp = np.zeros(self.n_categories, dtype=np.int64)

    def settings(self) -> dict[str, Any]:
        """Return what two states must share to be merged."""
        return {"boundary": None if self.boundary is None else self.boundary.to_dict(),
                "instances": self.instances}  # fmt: skip

    def check(
        self, instances: bool, where: str, *, boundary: bool | None = None, batch: bool = False
    ) -> None:
        """Refuse instances (or Boundary IoU counts) given to or missing from this store.

        Raises
        ------
        UsageError
            ``instances`` (or ``boundary``) differs from the settings.
        """
        if instances != self.instances:
            what = "instance ids" if batch else "instances"
            msg = (
                f"{where}: this accumulator counts instances (instances=True): give the "
                f"batch's {what} (instances=)"
                if self.instances
                else f"{where}: {what} were given, but this accumulator was made without "
                "instances=True (iIoU); make it with instances=True"
            )
            raise UsageError(msg)
        if boundary is not None and boundary != (self.boundary is not None):
            msg = (
                f"{where}: the tally's Boundary IoU counts do not match the accumulator "
                f"(boundary={self.boundary}); count the batch with the same settings"
            )
            raise UsageError(msg)

    def copy_empty(self) -> Extras:
        """Return an empty store with the same settings."""
        return Extras(self.k, self.n_categories, self.boundary, self.instances, self.per_image)

    # -- adding -----------------------------------------------------------------------------
    def check_add(
        self,
        n_images: int,
        *,
        boundary: IntArray | None = None,
        instances: InstanceTally | None = None,
        absent: Sequence[int] | None = None,
        absent_pred: Sequence[int] | None = None,
        where: str = "update",
        given: bool = False,
        pixels: int | None = None,
    ) -> None:
        """Refuse what :meth:`add` could not take, before anything of the batch is counted.

        ``given``: the images are named (their per-image entries are kept, when ``per_image``);
        ``pixels``: the batch's pixels (each absent chunk covered one at least).

        Raises
        ------
        UsageError
            Boundary IoU counts, instances or absent chunks of the wrong shape for ``n_images``
            images, ``K`` classes and ``G`` categories; Boundary IoU counts or category false
            positives summed over several named images of an accumulator with per-image rows
            (a merge matches such images by name and counts a shared one once: summed counts
            could not follow, and were counted twice).
        """
        bad = []
        if given and self.per_image and n_images > 1:
            fp_rows = None if instances is None else np.shape(instances.fp)
            if (
                boundary is not None
                and np.ndim(boundary) == 3
                and np.shape(boundary)[0] != n_images
            ):
                bad.append(f"Boundary IoU counts summed over {n_images} named images (shape "
                           f"{np.shape(boundary)}; per-image rows need one row per image)")  # fmt: skip
            if fp_rows is not None and len(fp_rows) == 2 and fp_rows[0] != n_images:
                bad.append(f"category false positives summed over {n_images} named images (shape "
                           f"{fp_rows}; per-image rows need one row per image)")  # fmt: skip
        if boundary is not None and (np.size(boundary) % (3 * self.k)
                                     or np.ndim(boundary) not in (2, 3)):  # fmt: skip
            bad.append(
                f"Boundary IoU counts of shape {np.shape(boundary)} (expected (images, 3, K))"
            )
        if instances is not None:
            fp = np.asarray(instances.fp)
            rows = fp.shape[0] if fp.ndim == 2 else 1
            if (
                fp.ndim not in (1, 2)
                or fp.size != rows * self.n_categories
                or (fp.ndim == 2 and fp.shape[1] != self.n_categories)
            ):
                bad.append(f"category false positives of shape {fp.shape} (expected (images, "
                           f"{self.n_categories}), one column per category of the spec)")  # fmt: skip
            n = {np.size(getattr(instances, f)) for f in ("image", "id", "cls", "pixels", "tp",
                                                          "cat_tp")}  # fmt: skip
            if len(n) != 1 or (np.size(instances.cls) and np.max(instances.cls) >= self.k):
                bad.append("instance records of different lengths or classes out of range")
        for side, a in (("ground-truth", absent), ("prediction", absent_pred)):
            if a is None:
                continue
            if not isinstance(a, Sequence | np.ndarray) or np.ndim(a) != 1:
                bad.append(f"absent {side} chunk counts {a!r:.40} (expected one per image)")
            elif len(a) != n_images:
                bad.append(f"{len(a)} absent {side} chunk counts for {n_images} image(s)")
            elif not all(
                isinstance(c, int | np.integer) and not isinstance(c, bool) and 0 <= c <= _INT64_MAX
                for c in a
            ):
                bad.append(f"absent {side} chunk counts {list(a)[:5]} (expected counts)")
            elif pixels is not None and sum(int(c) for c in a) > pixels:
                bad.append(f"{sum(int(c) for c in a):,} absent {side} chunks in {pixels:,} pixels")
        if bad:
            msg = (
                f"{where}: the batch carries {'; '.join(bad)}; nothing of it was counted. Count "
                "the batch with this accumulator's label spec and settings"
            )
            raise UsageError(msg)

    def add(
        self,
        labels: Sequence[str],
        *,
        given: bool = False,
        boundary: IntArray | None = None,
        instances: InstanceTally | None = None,
        absent: Sequence[int] | None = None,
        absent_pred: Sequence[int] | None = None,
        widths: Iterable[int] = (),
    ) -> None:
        """Add what was counted for the images ``labels`` (one name or label per image).

        ``given``: ``labels`` are names (per-image entries are kept for them), not labels.
        ``boundary`` is ``(images, 3, K)`` (or ``(1, 3, K)`` summed when per-image entries are
        not kept); ``instances`` indexes ``labels`` with its ``image`` (``-1``: untracked);
        ``absent`` (``absent_pred``) holds absent ground-truth (prediction) chunks per image;
        ``widths`` the boundary widths in pixels the images got.
        """
        self.boundary_px.update(int(w) for w in widths)
        if boundary is not None:
            b = np.asarray(boundary, dtype=np.int64).reshape(-1, 3, self.k)
            self.boundary_total += b.sum(axis=0)
            if given and self.per_image and b.shape[0] == len(labels):
                for name, rows in zip(labels, b, strict=True):
                    self.boundary_images[name] = rows.copy()
        if instances is not None:
            img = tuple(labels[i] if i >= 0 and given else "" for i in instances.image.tolist())
            self.records.append(InstanceRecords(img, instances.id, instances.cls,
                                                instances.pixels, instances.tp,
                                                instances.cat_tp))  # fmt: skip
            fp = np.asarray(instances.fp, dtype=np.int64)
            if self.n_categories:  # without categories a row is empty (reshape(-1, 0) fails)
                fp = fp.reshape(-1, self.n_categories)
            else:
                fp = np.zeros((fp.shape[0] if fp.ndim == 2 else 1, 0), dtype=np.int64)
            self.category_fp += fp.sum(axis=0)
            if given and self.per_image and fp.shape[0] == len(labels):
                for name, row in zip(labels, fp, strict=True):
                    self.category_fp_images[name] = row.copy()
        for chunks, a in ((self.gt_chunks, absent), (self.pred_chunks, absent_pred)):
            if a is not None:
                chunks.add(labels, a, given and self.per_image)

    def keep_named(self, names: set[str], labels: set[str]) -> None:
        """Drop the per-image entries of the images ``labels`` (labelled, not named).

        A state written before only named images kept entries has them for labelled images
        too, which could collide; their instance records get the image ``""``. Entries of
        other images are left for the caller's checks (a name that is neither: altered).
        Absent chunks read from a state are taken as a named image's where ``names`` has the
        string, else as a label's (what ``absent_chunks_labels`` says is a label's already is).
        """
        for d in (self.boundary_images, self.category_fp_images):
            for n in [n for n in d if n in labels and n not in names]:
                del d[n]
        self.gt_chunks.keep_named(names)
        self.pred_chunks.keep_named(names)
        r = self.instance_records()
        if any(n in labels and n not in names for n in r.image):
            img = tuple("" if n in labels and n not in names else n for n in r.image)
            self.records = [InstanceRecords(img, r.id, r.cls, r.pixels, r.tp, r.cat_tp)]

    def check_exact(self, source: str) -> None:
        """Refuse per-image entries that do not add up to the totals exactly.

        For a state whose images are all named: each has its entries.

        Raises
        ------
        CheckpointError
            Entries and totals differ, named.
        """
        if self.boundary is not None:
            _check_sum(self.boundary_images, self.boundary_total, "boundary.images",
                       "boundary.counts", source, exact=True)  # fmt: skip
        if self.instances:
            _check_sum(self.category_fp_images, self.category_fp, "instances.images",
                       "instances.category_fp", source, exact=True)  # fmt: skip

    def instance_records(self) -> InstanceRecords:
        """Every instance record (joined once, kept joined)."""
        joined = InstanceRecords.concat(self.records)
        self.records = [joined] if joined.n else []
        return joined

    # -- merging ----------------------------------------------------------------------------
    def merged(self, other: Extras, drop: set[str]) -> Extras:
        """Both stores; ``other``'s entries of the images ``drop`` left out (counted here).

        The images in ``drop`` must have per-image entries on the other side (per-image
        accumulators); their totals are taken off.
        """
        self._check_shared(other, drop)
        out = self.copy_empty()
        # exact sums (Python integers), refused past 2**63 - 1: int64 would wrap silently
        boundary = self.boundary_total.astype(object) + other.boundary_total
        category_fp = self.category_fp.astype(object) + other.category_fp
        for name in drop:
            if name in other.boundary_images:
                boundary -= other.boundary_images[name]
            if name in other.category_fp_images:
                category_fp -= other.category_fp_images[name]
        for what, a in (("Boundary IoU counts", boundary), ("category false positives",
                                                            category_fp)):  # fmt: skip
            if a.size and max(a.ravel().tolist()) > _INT64_MAX:
                msg = (
                    f"merging would make {what} of {max(a.ravel().tolist()):,}, more than "
                    "2**63 - 1, the largest exact count; nothing was merged (a state holds no "
                    "more of them than pixels: one side was altered)"
                )
                raise CountOverflowError(msg)
        out.boundary_total = boundary.astype(np.int64)
        out.category_fp = category_fp.astype(np.int64)
        out.boundary_px = self.boundary_px | other.boundary_px
        out.boundary_images = dict(self.boundary_images)
        out.boundary_images.update(
            {n: r for n, r in other.boundary_images.items() if n not in drop}
        )
        out.category_fp_images = dict(self.category_fp_images)
        out.category_fp_images.update(
            {n: r for n, r in other.category_fp_images.items() if n not in drop}
        )
        theirs = other.instance_records()
        out.records = [self.instance_records(), theirs.without(drop) if drop else theirs]
        out.gt_chunks = self.gt_chunks.merged(other.gt_chunks, drop)
        # a prediction chunk's absence belongs to the store it was read from, not to the
        # values (which equal on both sides): a shared image keeps the larger count
        out.pred_chunks = self.pred_chunks.merged(other.pred_chunks, drop, larger=True)
        return out

    def _check_shared(self, other: Extras, names: set[str]) -> None:
        """Refuse images on both sides whose Boundary IoU counts, instances or absent chunks differ.

        Raises
        ------
        DuplicateImageError
            Such an image (its confusion counts are equal, the rest is not: counting it once
            would keep one side's by the merge order).
        """
        if not names:
            return

        def rows(d: dict[str, IntArray], n: str) -> list[int] | None:
            return None if n not in d else d[n].ravel().tolist()

        def records(r: InstanceRecords) -> dict[str, list[tuple[int, ...]]]:
            out: dict[str, list[tuple[int, ...]]] = {}
            for i in (i for i, n in enumerate(r.image) if n in names):
                row = (int(r.id[i]), int(r.cls[i]), int(r.pixels[i]), int(r.tp[i]),
                       int(r.cat_tp[i]))  # fmt: skip
                out.setdefault(r.image[i], []).append(row)
            return {n: sorted(v) for n, v in out.items()}

        mine, theirs = records(self.instance_records()), records(other.instance_records())
        differ = []
        for n in sorted(names):
            what = [w for w, a, b in (
                ("Boundary IoU counts", rows(self.boundary_images, n),
                 rows(other.boundary_images, n)),
                ("instance records", mine.get(n, []), theirs.get(n, [])),
                ("category false positives", rows(self.category_fp_images, n),
                 rows(other.category_fp_images, n)),
                ("absent chunks", self.gt_chunks.named.get(n, 0), other.gt_chunks.named.get(n, 0)),
            ) if a != b]  # fmt: skip
            if what:
                differ.append(f"{n!r} ({', '.join(what)})")
        if differ:
            msg = (
                f"cannot merge: image(s) {', '.join(differ[:3])} are counted on both sides with "
                "the same confusion counts but different Boundary IoU counts, instances or absent "
                "chunks; an image is counted once, and which side's to keep cannot be told. Check "
                "the image names and instance ids, or merge states of disjoint images"
            )
            raise DuplicateImageError(msg)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Extras):
            return NotImplemented
        mine = (self.gt_chunks.labels, self.pred_chunks.labels)
        theirs = (other.gt_chunks.labels, other.pred_chunks.labels)
        return (self.to_dict(), mine) == (other.to_dict(), theirs)

    __hash__ = None  # type: ignore[assignment]

    @property
    def empty(self) -> bool:
        """Whether nothing beyond the confusion counts is kept (no setting, no absent chunk)."""
        return (self.boundary is None and not self.instances and not self.gt_chunks
                and not self.pred_chunks)  # fmt: skip

    # -- serialisation ----------------------------------------------------------------------
    def to_dict(self, names: Iterable[str] = ()) -> dict[str, Any]:
        """Return the state fields ``boundary``, ``instances`` and ``absent_chunks`` (JSON-safe).

        ``absent_chunks`` shows the absent chunks per name or label (:attr:`absent`). Where a
        label's string is also a name (``names``: the state's given names, or one with absent
        chunks), ``absent_chunks_labels`` says what of it is the label's (a reader takes the
        rest as the named image's); that field is left out when no string is both. Absent
        prediction chunks likewise, in ``absent_pred_chunks`` (``_labels``), left out when
        there are none (states written before they were counted have neither).
        """
        names = set(names)
        out: dict[str, Any] = {"boundary": None, "instances": None}
        for what, chunks in (("absent_chunks", self.gt_chunks),
                             ("absent_pred_chunks", self.pred_chunks)):  # fmt: skip
            shown, shared = chunks.to_fields(names)
            if what == "absent_chunks" or shown:
                out[what] = shown
            if shared:
                out[f"{what}_labels"] = shared
        if self.boundary is not None:
            out["boundary"] = {
                "width": self.boundary.to_dict(),
                "pixels_used": sorted(self.boundary_px),
                "counts": self.boundary_total.tolist(),
                "images": {n: r.tolist() for n, r in sorted(self.boundary_images.items())}
                if self.per_image else None,
            }  # fmt: skip
        if self.instances:
            r = self.instance_records()
            # every field in the key: records of unnamed images (labels such as #0 repeat across
            # merged batches) tie on (image, id), and their order must not be the merge order
            order = sorted(range(r.n), key=lambda i: (r.image[i], int(r.id[i]), int(r.cls[i]),
                                                      int(r.pixels[i]), int(r.tp[i]),
                                                      int(r.cat_tp[i])))  # fmt: skip
            out["instances"] = {
                "records": {"image": [r.image[i] for i in order]}
                | {f: a[order].tolist() for f, a in zip(_RECORD_FIELDS, (r.id, r.cls, r.pixels,
                                                                       r.tp, r.cat_tp),
                                                       strict=True)},
                "category_fp": self.category_fp.tolist(),
                "images": {n: v.tolist() for n, v in sorted(self.category_fp_images.items())}
                if self.per_image else None,
            }  # fmt: skip
        return out

    @classmethod
    def from_dict(
        cls, d: Mapping[str, Any], *, k: int, n_categories: int, per_image: bool, source: str
    ) -> Extras:
        """Read :meth:`to_dict` back (absent fields: nothing kept), checking every count.

        Raises
        ------
        CheckpointError
            A malformed field, named.
        """
        b, inst = d.get("boundary"), d.get("instances")
        try:
            width = None if b is None else BoundaryWidth.from_dict(b["width"])
        except (KeyError, TypeError, ValueError) as err:
            msg = (
                f"{_at(source)}field 'boundary' is malformed ({err}); expected the width and counts"
            )
            raise CheckpointError(msg) from err
        out = cls(k, n_categories, width, inst is not None, per_image)
        if b is not None:
            out.boundary_total = _counts(b.get("counts"), (3, k), source, "boundary.counts")
            used = b.get("pixels_used")
            px = _counts(used, (len(used) if isinstance(used, list) else -1,), source,
                         "boundary.pixels_used")  # fmt: skip
            out.boundary_px = set(px.tolist())
            for name, rows in _images(b, per_image, source, "boundary.images").items():
                out.boundary_images[str(name)] = _counts(rows, (3, k), source,
                                                         f"boundary.images[{name!r}]")  # fmt: skip
            _check_boundary(out, source)
        if inst is not None:
            rec = inst.get("records") if isinstance(inst, Mapping) else None
            if not isinstance(rec, Mapping) or set(rec) != {"image", *_RECORD_FIELDS}:
                msg = f"{_at(source)}field 'instances.records' is malformed; expected {_RECORD_FIELDS}"
                raise CheckpointError(msg)
            names = rec["image"]
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                msg = f"{_at(source)}field 'instances.records.image' must be a list of image names"
                raise CheckpointError(msg)
            arrays = [_counts(rec[f], (len(names),), source, f"instances.records.{f}")
                      for f in _RECORD_FIELDS]  # fmt: skip
            if (
                (arrays[1] >= k).any()
                or (arrays[2] < 1).any()
                or (arrays[3] > arrays[2]).any()
                or (arrays[4] > arrays[2]).any()
            ):
                msg = (
                    f"{_at(source)}field 'instances.records' holds a class out of range, an instance "
                    "of no pixel or more predicted pixels than an instance has; the file was "
                    "altered"
                )
                raise CheckpointError(msg)
            out.records = [InstanceRecords(tuple(names), *arrays)] if names else []
            out.category_fp = _counts(inst.get("category_fp"), (n_categories,), source,
                                      "instances.category_fp")  # fmt: skip
            for name, row in _images(inst, per_image, source, "instances.images").items():
                out.category_fp_images[str(name)] = _counts(row, (n_categories,), source,
                                                            "instances.images")  # fmt: skip
            _check_sum(out.category_fp_images, out.category_fp, "instances.images",
                       "instances.category_fp", source)  # fmt: skip
        for what in ("absent_chunks", "absent_pred_chunks"):
            chunks = ChunkCounts.from_fields(d.get(what) or {}, d.get(f"{what}_labels") or {},
                                             what, source)  # fmt: skip
            if what == "absent_chunks":
                out.gt_chunks = chunks
            else:
                out.pred_chunks = chunks
        return out


def _at(source: str) -> str:
    """Return the start of a message: ``"<source>: "``, or nothing (the caller adds it)."""
    return f"{source}: " if source else ""


def _images(d: Mapping[str, Any], per_image: bool, source: str, name: str) -> Mapping[str, Any]:
    """Return the per-image entries ``d["images"]``: an object of image name -> rows, or null."""
    x = d.get("images")
    if x is None:
        return {}
    if not isinstance(x, Mapping):
        msg = (
            f"{_at(source)}field {name!r} is {str(x)[:40]!r}; expected an object of image name -> "
            "counts, or null; the file was altered"
        )
        raise CheckpointError(msg)
    if x and not per_image:
        msg = (
            f"{_at(source)}field {name!r} holds per-image entries but 'per_image' is false (such a "
            "state has null there); the file was altered"
        )
        raise CheckpointError(msg)
    return x


def _check_boundary(e: Extras, source: str) -> None:
    """Intersections within both boundaries; per-image rows that add up to the totals."""
    for name, rows in [("boundary.counts", e.boundary_total),
                       *((f"boundary.images[{n!r}]", r) for n, r in e.boundary_images.items())]:  # fmt: skip
        if (rows[0] > np.minimum(rows[1], rows[2])).any():
            msg = (
                f"{_at(source)}field {name!r} has a Boundary IoU intersection larger than a "
                "boundary (|G_d & P_d| > |G_d| or |P_d|); the file was altered"
            )
            raise CheckpointError(msg)
    _check_sum(e.boundary_images, e.boundary_total, "boundary.images", "boundary.counts", source)


def _check_sum(images: Mapping[str, IntArray], total: IntArray, name: str, total_name: str,
               source: str, *, exact: bool = False) -> None:  # fmt: skip
    """Per-image rows add up to at most the state's total.

    Exactly when every image is named (``exact``); labelled images add to the total only.
    """
    if not images and not exact:
        return
    s: np.ndarray = np.zeros_like(total)
    if images:  # exactly: rows each below 2**63 can add up past it (an int64 sum would wrap)
        rows = np.stack(list(images.values()))
        wide = float(rows.sum(axis=0, dtype=np.float64).max(initial=0)) >= 2.0**62
        s = rows.sum(axis=0, dtype=object if wide else np.int64)
    if (exact and not np.array_equal(s, total)) or (s > total).any():
        msg = (
            f"{_at(source)}field {name!r} does not add up to {total_name!r}; the file was altered "
            "or is corrupt"
        )
        raise CheckpointError(msg)


def _counts(x: object, shape: tuple[int, ...], source: str, name: str) -> IntArray:
    """Exact non-negative integer counts of ``shape`` (checked before converting)."""

    def flat(v: object) -> list[object]:
        return [w for u in v for w in flat(u)] if isinstance(v, list) else [v]

    values = flat(x) if isinstance(x, list) else [x]
    ok = all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63 for v in values)
    a = np.asarray(x, dtype=np.int64) if ok else None
    if a is None or a.shape != shape:
        msg = (
            f"{_at(source)}field {name!r} must hold non-negative integer counts of shape {shape}, "
            f"got {str(x)[:60]!r}"
        )
        raise CheckpointError(msg)
    return a
