"""Instance ground truth for instance-level IoU (iIoU), as cityscapesScripts computes it.

:class:`InstanceCounter` counts an image's instances chunk by chunk (the kernel is
:mod:`segiou._instance_kernels`) into an :class:`InstanceTally`: per instance its id, class,
pixels, pixels predicted as its class and as its instance category; and per category the false
positives cityscapesScripts adds to category iIoU for predictions of ids of no class that belong
to the category. Counts are exact integers, summed over every chunk an instance spans; the
weights ``avgClassSize / size`` are applied only when scores are computed
(:mod:`segiou.instance_iou`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from segiou import _instance_kernels as ik
from segiou._count import IGNORE, kernel_values
from segiou._typing import IntArray
from segiou.errors import InstanceIdError, LabelDtypeError, ShapeMismatchError, UsageError
from segiou.labels import IdSpace, LabelSpec

__all__ = ["InstanceCounter", "InstanceTally", "instance_categories"]

#: Largest per-image table of instance values (rows ``value - base``) a counter allocates.
_MAX_SPAN = 1 << 22


@dataclass(frozen=True)
class InstanceTally:
    """Instances of some images, and category false positives of unevaluated predicted ids.

    ``image`` indexes the tally's images (``-1``: not tracked); ``fp`` is ``(images, G)``
    (one row per image, ``G`` categories) or ``(1, G)`` when images are not tracked.
    """

    image: IntArray
    id: IntArray
    cls: IntArray
    pixels: IntArray
    tp: IntArray
    cat_tp: IntArray
    fp: IntArray

    @classmethod
    def empty(cls, n_images: int, n_categories: int) -> InstanceTally:
        """No instances, ``n_images`` rows of zero false positives."""
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, z, z, z, np.zeros((n_images, n_categories), dtype=np.int64))

    @classmethod
    def concat(cls, parts: list[InstanceTally], n_categories: int) -> InstanceTally:
        """Join tallies of disjoint images (their image indices already global)."""
        if not parts:
            return cls.empty(0, n_categories)
        cat = np.concatenate
        return cls(*(cat([getattr(p, f) for p in parts]) for f in
                     ("image", "id", "cls", "pixels", "tp", "cat_tp", "fp")))  # fmt: skip


def instance_categories(spec: LabelSpec) -> list[int]:
    """Categories with iIoU: those whose every class has an average instance size.

    Parameters
    ----------
    spec : LabelSpec
        A spec with categories and instance sizes (else the list is empty).

    Returns
    -------
    list of int
        Category indices (Cityscapes: ``human``, ``vehicle``).
    """
    sized = {c for c, _ in spec.instance_sizes}
    members: dict[int, list[int]] = {}
    for c, g in enumerate(spec.class_categories):
        members.setdefault(g, []).append(c)
    return sorted(g for g, cs in members.items() if all(c in sized for c in cs))


def _table(mapping: dict[int, int], fill: int) -> tuple[IntArray, int]:
    """``(lut, lo)`` with ``lut[v - lo] = mapping[v]``, ``fill`` between."""
    if not mapping:
        return np.full(1, fill, dtype=np.int64), 0
    lo, hi = min(mapping), max(mapping)
    lut = np.full(hi - lo + 1, fill, dtype=np.int64)
    for v, c in mapping.items():
        lut[v - lo] = c
    return lut, lo


class InstanceCounter:
    """Count instances image by image, chunk by chunk (one counter per thread).

    Parameters
    ----------
    spec : LabelSpec
        Classes, categories, instance sizes and raw ids.
    gt_ids, pred_ids : {"class", "raw"}
        Id spaces of the masks. Instance values encode the spec's raw id (``labelId * 1000 +
        k``) when the spec has raw ids, else the class id, whatever ``gt_ids`` is.

    Raises
    ------
    UsageError
        The spec gives no average instance size (iIoU needs one per class with instances).
    """

    def __init__(self, spec: LabelSpec, gt_ids: IdSpace, pred_ids: IdSpace) -> None:
        if not spec.instance_sizes:
            msg = (
                f"label spec {spec.name!r} gives no average instance sizes, which iIoU weighs "
                "instances by; add 'instance_sizes' ({class name: pixels}) to the spec"
            )
            raise UsageError(msg)
        k = spec.num_classes
        self.k = k
        self.spec = spec
        self.label_ids: IdSpace = "raw" if spec.has_raw else "class"
        sized = {c for c, _ in spec.instance_sizes}
        labels = {v: (c if c == IGNORE or c in sized else -3) for v, c in
                  spec.gt_map(self.label_ids).items()}  # fmt: skip
        self.ilut, self.ilo = _table(labels, -2)
        if self.label_ids == "class" and 0 in sized:
            msg = (
                f"label spec {spec.name!r}: class 0 ({spec.classes[0]!r}) has an average instance "
                "size, but its instance values would be 0 * 1000 + k = k, below 1000, which are "
                "plain label ids without instances (the Cityscapes instanceIds rule); give the "
                "spec raw ids (labelIds from 1) or move the class to an index of 1 or more"
            )
            raise UsageError(msg)
        # the table's rows: the instance values of the labels that can carry instances, those
        # of classes with an average size (from 1: a value below 1000 is a plain label id).
        # Ignore values and unevaluated or unsized labels never get a row, however large
        carrying = [v for v, c in labels.items() if c >= 0 and v >= 1]
        lo, hi = (min(carrying), max(carrying)) if carrying else (1, 0)
        span = (hi - lo + 1) * ik.FIRST
        if span > _MAX_SPAN:
            msg = (
                f"label spec {spec.name!r}: instance values of its labels with instances span "
                f"{lo * ik.FIRST:,}..{hi * ik.FIRST + ik.FIRST - 1:,} ({span:,} values), more "
                f"than the {_MAX_SPAN:,} an instance table holds; renumber the label ids"
            )
            raise UsageError(msg)
        self.span = span
        self.base = lo * ik.FIRST
        self._maps = (spec.gt_map(gt_ids), spec.pred_map(pred_ids))
        code = {v: (k if c == IGNORE else c) for v, c in self._maps[0].items()}
        self.gcode, self.glo = _table(code, k + 1)
        code = {v: (k if c == IGNORE else c) for v, c in self._maps[1].items()}
        self.pcode, self.plo = _table(code, k + 1)
        inst_cats = set(instance_categories(spec))
        n_cat = len(spec.categories)
        self.n_categories = n_cat
        self.ccat = np.array(spec.class_categories or [-1] * k, dtype=np.int64)
        self.icat = np.array([g if g in inst_cats else -1 for g in self.ccat], dtype=np.int64)
        raw_cat = {r.id: r.category for r in spec.raw} if pred_ids == "raw" else {}
        pcat = {}
        for v, c in spec.pred_map(pred_ids).items():
            if c != IGNORE:
                pcat[v] = int(self.icat[c])
            else:
                g = raw_cat.get(v)
                pcat[v] = g if g is not None and g in inst_cats else -1
        self.pcat, _ = _table(pcat, -1)  # the keys of pcode: aligned with it (lo = plo)
        self._tab: np.ndarray | None = None
        self._fp = np.zeros(max(n_cat, 1), dtype=np.int64)

    def add(self, inst: np.ndarray, g: np.ndarray, p: np.ndarray, *, where: str,
            origin: tuple[int, int] = (0, 0)) -> None:  # fmt: skip
        """Count one region of an image: its instance values, ground truth and prediction.

        Parameters
        ----------
        inst, g, p : ndarray, 2-D, same shape
            Instance values, ground truth and prediction of the region (integer dtypes).
        where : str
            The image, for messages.
        origin : (int, int)
            The region's first pixel in the image, for messages.

        Raises
        ------
        ShapeMismatchError
            The instance map and the masks differ in shape.
        LabelDtypeError
            Instance values that are not integers.
        InstanceIdError
            An instance value whose label the spec does not know, or whose class has no average
            instance size; the message names the image, the position and the value.
        """
        if inst.shape != g.shape:
            msg = (
                f"{where}: instance ids have shape {inst.shape} but the ground truth {g.shape}; "
                "give the instanceIds image of the same ground truth"
            )
            raise ShapeMismatchError(msg)
        if inst.dtype.kind not in "iu":
            msg = (
                f"{where}: instance ids have dtype {inst.dtype}; expected integers (uint16, int32)"
            )
            raise LabelDtypeError(msg)
        if inst.dtype.itemsize == 1:
            msg = (
                f"{where}: instance ids have dtype {inst.dtype}, which cannot hold an instance "
                "(label * 1000 + k, 1000 or more): the map looks truncated (a 16-bit "
                "*_gtFine_instanceIds.png read as 8 bits?); give the instance ids as read, "
                "uint16 or wider"
            )
            raise LabelDtypeError(msg)
        if self._tab is None:
            self._tab = np.zeros((self.span, 3), dtype=np.int64)
        # uint64 values of 2**63 and more are unexpected (as counted), never a negative id
        g, p = kernel_values(g, self._maps[0]), kernel_values(p, self._maps[1])
        bad = ik.count_instances(inst, g, p, self.ilut, self.ilo, self.base, self.gcode, self.glo,
                                 self.pcode, self.plo, self.pcat, self.ccat, self.icat, self.k,
                                 self._tab, self._fp)  # fmt: skip
        if bad >= 0:
            y, x = divmod(int(bad), inst.shape[1])
            v = int(inst[y, x])
            label = v // ik.FIRST
            c = self.spec.gt_map(self.label_ids).get(label)
            if v < ik.FIRST:
                what = (
                    f"a value below 1000 is a plain label id (no instance), but {v} is no "
                    f"{self.label_ids} id of the spec {self.spec.name!r}: the map looks truncated "
                    "or is no instance map"
                )
            elif c is None:
                what = f"its label {label} is no {self.label_ids} id of the spec {self.spec.name!r}"
            else:
                what = (
                    f"its label {label} is class {self.spec.classes[c]!r}, which has no average "
                    "instance size in the spec (add it to 'instance_sizes')"
                )
            msg = (
                f"{where}: instance value {v} at pixel ({origin[0] + y}, {origin[1] + x}): "
                f"{what}; instance values are label * 1000 + k (Cityscapes instanceIds)"
            )
            self.discard()
            raise InstanceIdError(msg)

    def discard(self) -> None:
        """Forget what was added since the last :meth:`finish`."""
        if self._tab is not None:
            self._tab[:] = 0
        self._fp[:] = 0

    def finish(self, image: int = -1) -> InstanceTally:
        """Return the instances added since the last call (one image), and reset.

        Parameters
        ----------
        image : int, default -1
            The image index the records carry.

        Returns
        -------
        InstanceTally
            One row of ``fp``.
        """
        fp = self._fp[: self.n_categories].copy().reshape(1, -1)
        self._fp[:] = 0
        if self._tab is None:
            z = np.zeros(0, dtype=np.int64)
            return InstanceTally(z, z, z, z, z, z, fp)
        rows = np.flatnonzero(self._tab[:, 0])
        part = self._tab[rows].copy()
        self._tab[rows] = 0
        ids = rows.astype(np.int64) + self.base
        labels = ids // ik.FIRST
        cls = self.ilut[labels - self.ilo]
        return InstanceTally(np.full(ids.size, image, dtype=np.int64), ids, cls, part[:, 0],
                             part[:, 1], part[:, 2], fp)  # fmt: skip
