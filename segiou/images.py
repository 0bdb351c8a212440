"""Per-image counts that keep each image's whole confusion matrix, sparse, from one pass.

Every counted image keeps its *entries*: ``(image, gt code, pred code, count)`` for each
non-zero cell of its code table, where codes ``0..K-1`` are classes, ``K`` is "ignored" (ground
truth) or "void" (prediction) and ``K+1`` is "unexpected". The ground-truth rows ``K`` and
``K+1`` are folded into one cell each (``(K, K)`` ignored pixels, ``(K+1, K+1)`` pixels with an
unexpected ground-truth value), as the totals keep them. Values that were unexpected are kept
per image too (``(image, side, value, count)``).

So a subset of images, or a bootstrap resample, gives every metric exactly: the sum of its
entries is the confusion matrix those images would have been counted into (category IoU, fwIoU,
kappa and the confusion breakdown included). For 19 classes a typical image has a few dozen
entries. TP/FP/FN rows (:class:`ImageTable`) are derived from the entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from segiou._typing import CountMatrix, IntArray
from segiou.errors import DuplicateImageError, UsageError

__all__ = [
    "ImageRows",
    "ImageTable",
    "Side",
    "UnexpectedValue",
    "check_names",
    "exact_total",
    "shared_rows",
]

Side = Literal["gt", "pred"]
#: One image's unexpected value: (image row, side, value, pixel count).
UnexpectedValue = tuple[int, Side, int, int]


def _i64(values: Any) -> IntArray:
    return np.ascontiguousarray(values, dtype=np.int64)


def exact_total(a: IntArray) -> int:
    """Return the exact sum of non-negative int64 counts (a Python int: never wraps).

    An int64 sum is taken when a float64 sum shows it far below ``2**63`` (its rounding error
    is many orders smaller than the margin), else one of Python integers. Once the total of some
    counts is known to be at most ``2**63 - 1``, every int64 sum of a part of them is exact.
    """
    if not a.size:
        return 0
    if float(a.sum(dtype=np.float64)) < 2.0**62:
        return int(a.sum())
    return int(a.sum(dtype=object))


@dataclass(frozen=True, eq=False)
class ImageRows:
    """Per-image counts of some images: sparse confusion entries and unexpected values.

    The storage form inside an accumulator (one per batch, concatenated on demand); see the
    module docstring for the codes. Legacy states (format version 1) kept TP/FP/FN rows only:
    they load with ``legacy`` set (``(tp, fp, fn, ignored, unexpected)``) and no entries.

    Attributes
    ----------
    k : int
        Number of classes.
    names : tuple of str
        One per image, as shown (a given name, or a label such as ``#3`` or ``key/0``).
    given : tuple of bool
        Whether each name was given (by the caller, the store or the file): a given name
        identifies its image (counted once, matched across merges); a label only shows it.
    image, gt, pred, count : ndarray of int64
        The entries.
    unexpected : tuple of (int, str, int, int)
        ``(image, "gt" or "pred", value, count)`` for every unexpected value of every image.
    legacy : tuple of ndarray, optional
        ``(tp, fp, fn, ignored, unexpected)`` rows of a version-1 state (no entries).
    """

    k: int
    names: tuple[str, ...]
    given: tuple[bool, ...]
    image: IntArray
    gt: IntArray
    pred: IntArray
    count: IntArray
    unexpected: tuple[UnexpectedValue, ...] = ()
    legacy: tuple[IntArray, IntArray, IntArray, IntArray, IntArray] | None = field(
        default=None, repr=False
    )

    @property
    def n(self) -> int:
        """Number of images."""
        return len(self.names)

    @classmethod
    def empty(cls, k: int) -> ImageRows:
        """Rows of no image."""
        z = np.zeros(0, dtype=np.int64)
        return cls(k, (), (), z, z, z, z)

    @classmethod
    def from_tables(
        cls,
        tables: IntArray,
        names: Sequence[str] | None = None,
        unexpected: Sequence[UnexpectedValue] = (),
        *,
        given: bool = False,
    ) -> ImageRows:
        """Make rows from per-image folded code tables ``(n, K+2, K+2)``.

        Parameters
        ----------
        tables : ndarray of int64, shape (n, K+2, K+2)
            Each image's table, ``tables[i, g, p]`` pixels with ground-truth code ``g`` and
            prediction code ``p``.
        names : sequence of str, optional
            One per image (default ``#0``, ``#1``, ...).
        unexpected : sequence of (int, str, int, int)
            The images' unexpected values.
        given : bool, default False
            Whether the names identify the images (see the class).

        Returns
        -------
        ImageRows
        """
        t = np.asarray(tables, dtype=np.int64)
        k = t.shape[1] - 2
        folded = t.copy()
        for code in (k, k + 1):  # a ground-truth row that is not a class: one cell, as totals
            folded[:, code, code] = t[:, code, :].sum(axis=1)
            folded[:, code, :code] = 0
            folded[:, code, code + 1 :] = 0
        i, g, p = np.nonzero(folded)
        shown = tuple(f"#{j}" for j in range(t.shape[0])) if names is None else tuple(names)
        return cls(k, shown, (given,) * len(shown), _i64(i), _i64(g), _i64(p),
                   _i64(folded[i, g, p]), tuple(unexpected))  # fmt: skip

    @classmethod
    def concat(cls, parts: Sequence[ImageRows], k: int) -> ImageRows:
        """Join rows of disjoint images, in order (image indices renumbered).

        Parameters
        ----------
        parts : sequence of ImageRows
            Rows to join.
        k : int
            Number of classes (for an empty result).

        Returns
        -------
        ImageRows
            Legacy when any part is legacy (entries are then dropped to TP/FP/FN rows).
        """
        parts = [p for p in parts if p.n]
        if not parts:
            return cls.empty(k)
        if len(parts) == 1:
            return parts[0]
        names = tuple(n for p in parts for n in p.names)
        given = tuple(g for p in parts for g in p.given)
        if any(p.legacy is not None for p in parts):
            dense = [p.dense() for p in parts]
            legacy = tuple(np.concatenate([d[j] for d in dense]) for j in range(5))
            z = np.zeros(0, dtype=np.int64)
            return cls(k, names, given, z, z, z, z, legacy=legacy)  # type: ignore[arg-type]
        offsets = np.cumsum([0] + [p.n for p in parts[:-1]])
        image = np.concatenate([p.image + o for p, o in zip(parts, offsets, strict=True)])
        unexpected = tuple(
            (i + int(o), s, v, c) for p, o in zip(parts, offsets, strict=True)
            for i, s, v, c in p.unexpected
        )  # fmt: skip
        return cls(k, names, given, image, np.concatenate([p.gt for p in parts]),
                   np.concatenate([p.pred for p in parts]),
                   np.concatenate([p.count for p in parts]), unexpected)  # fmt: skip

    def _times(self, rows: Sequence[int] | IntArray) -> IntArray:
        """How many times each image is listed in ``rows`` (checked, numpy's indexing)."""
        idx = np.asarray(rows)
        if idx.size and idx.dtype.kind not in "iu":
            msg = f"image rows must be integers, got dtype {idx.dtype}"
            raise IndexError(msg)
        idx = idx.astype(np.int64).reshape(-1)
        bad = (idx < -self.n) | (idx >= self.n)
        if bad.any():
            msg = f"image row {int(idx[bad][0])} is out of range for {self.n} image(s)"
            raise IndexError(msg)
        return np.bincount(np.where(idx < 0, idx + self.n, idx), minlength=self.n)

    def select(self, rows: Sequence[int] | IntArray) -> ImageRows:
        """Return the rows ``rows`` (distinct, in that order) as a new table.

        Parameters
        ----------
        rows : sequence of int
            Row indices.

        Returns
        -------
        ImageRows
        """
        if (self._times(rows) > 1).any():
            msg = "select() takes each image once; totals() counts an image listed twice twice"
            raise IndexError(msg)
        idx = np.asarray(rows, dtype=np.int64).reshape(-1) % max(self.n, 1)
        new = np.full(self.n, -1, dtype=np.int64)
        new[idx] = np.arange(idx.size)
        names = tuple(self.names[i] for i in idx.tolist())
        given = tuple(self.given[i] for i in idx.tolist())
        if self.legacy is not None:
            z = np.zeros(0, dtype=np.int64)
            legacy = tuple(a[idx] for a in self.legacy)
            return ImageRows(self.k, names, given, z, z, z, z, legacy=legacy)  # type: ignore[arg-type]
        keep = new[self.image] >= 0
        order = np.argsort(new[self.image[keep]], kind="stable")
        unexpected = tuple(sorted((int(new[i]), s, v, c) for i, s, v, c in self.unexpected
                                  if new[i] >= 0))  # fmt: skip
        image = new[self.image][keep][order]
        gt, pred, count = (a[keep][order] for a in (self.gt, self.pred, self.count))
        return ImageRows(self.k, names, given, image, gt, pred, count, unexpected)

    def table(self) -> ImageTable:
        """Return the TP/FP/FN table of these rows (:class:`ImageTable`)."""
        return ImageTable.from_rows(self)

    def dense(self) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
        """Return ``(tp, fp, fn, ignored, unexpected)`` per image (shapes (n, K) and (n,))."""
        if self.legacy is not None:
            return self.legacy
        k, n = self.k, self.n
        tp, fp, fn = (np.zeros((n, k), dtype=np.int64) for _ in range(3))
        ignored, unexpected = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        g, p, c, i = self.gt, self.pred, self.count, self.image
        hit = (g == p) & (g < k)
        np.add.at(tp, (i[hit], g[hit]), c[hit])
        wrong = (g < k) & (p < k) & (g != p)
        np.add.at(fp, (i[wrong], p[wrong]), c[wrong])
        miss = (g < k) & (p <= k) & (g != p)  # a wrong class, or void: a false negative
        np.add.at(fn, (i[miss], g[miss]), c[miss])
        np.add.at(ignored, i[g == k], c[g == k])
        odd = (g == k + 1) | (p == k + 1)
        np.add.at(unexpected, i[odd], c[odd])
        return tp, fp, fn, ignored, unexpected

    def totals(self, rows: Sequence[int] | IntArray | None = None) -> dict[str, Any]:
        """Sum the entries of some images (all by default) into accumulator totals.

        Parameters
        ----------
        rows : sequence of int, optional
            The images (default all), indexed as numpy does (``-1`` is the last); an image
            listed twice counts twice (a bootstrap resample).

        Returns
        -------
        dict
            ``counts`` (K x K), ``void`` (K), ``ignored``, ``unexpected_gt`` and
            ``unexpected_pred`` (value -> pixels): what those images contributed.

        Raises
        ------
        ValueError
            The rows are legacy (a version-1 state keeps no per-image matrix).
        IndexError
            A row outside ``-n .. n-1``, or not an integer.
        """
        if self.legacy is not None:
            msg = "per-image rows of a version-1 state hold TP/FP/FN only, no confusion matrix"
            raise ValueError(msg)
        k = self.k
        times = np.ones(self.n, dtype=np.int64) if rows is None else self._times(rows)
        weight = times[self.image]
        sel = weight > 0
        g, p, c = self.gt[sel], self.pred[sel], self.count[sel] * weight[sel]
        table = np.zeros((k + 2, k + 2), dtype=np.int64)
        np.add.at(table, (g, p), c)
        ug: dict[int, int] = {}
        up: dict[int, int] = {}
        for i, side, value, count in self.unexpected:
            if times[i]:
                d = ug if side == "gt" else up
                d[value] = d.get(value, 0) + count * int(times[i])
        return {
            "counts": table[:k, :k],
            "void": table[:k, k].copy(),
            "ignored": int(table[k, k]),
            "unexpected_gt": ug,
            "unexpected_pred": up,
        }

    def signature(self, row: int) -> tuple[Any, ...]:
        """Everything counted for image ``row``: its entries and unexpected values, canonical."""
        if self.legacy is not None:
            return tuple(tuple(np.atleast_1d(a[row]).tolist()) for a in self.legacy)
        sel = self.image == row
        cells = sorted(zip(self.gt[sel].tolist(), self.pred[sel].tolist(),
                           self.count[sel].tolist(), strict=True))  # fmt: skip
        odd = sorted((s, v, c) for i, s, v, c in self.unexpected if i == row)
        return tuple(cells), tuple(odd)


@dataclass(frozen=True)
class ImageTable:
    """Per-image counts, one row per image, in the order images were counted.

    Attributes
    ----------
    names : list of str
        Image names (given, or labels such as ``#3`` for an image counted without a name).
    tp, fp, fn : ndarray of int64, shape (n_images, K)
        Per-image, per-class true positives, false positives and false negatives (void
        predictions included in ``fn``).
    ignored, unexpected : ndarray of int64, shape (n_images,)
        Ignored pixels and pixels with an unexpected value per image.
    rows : ImageRows
        The sparse per-image confusion entries these rows are derived from
        (:meth:`confusion` and :meth:`totals` read them).
    """

    names: list[str]
    tp: IntArray
    fp: IntArray
    fn: IntArray
    ignored: IntArray
    unexpected: IntArray
    rows: ImageRows | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_rows(cls, rows: ImageRows) -> ImageTable:
        """Derive the table of ``rows``."""
        return cls(list(rows.names), *rows.dense(), rows=rows)

    def iou(self) -> np.ndarray:
        """Per-image, per-class IoU (``nan`` where a class is absent from an image)."""
        den = (self.tp + self.fp + self.fn).astype(np.float64)
        out: np.ndarray = np.divide(self.tp, den, out=np.full(den.shape, np.nan), where=den > 0)
        return out

    def confusion(self, i: int) -> tuple[CountMatrix, IntArray]:
        """Return image ``i``'s ``K x K`` count matrix and its void counts.

        Parameters
        ----------
        i : int
            Row of the image.

        Returns
        -------
        counts : ndarray of int64, shape (K, K)
        void : ndarray of int64, shape (K,)

        Raises
        ------
        ValueError
            The table came from a version-1 state (TP/FP/FN rows only).
        """
        if self.rows is None:
            msg = "these rows carry no per-image matrix"
            raise ValueError(msg)
        t = self.rows.totals([i])
        return t["counts"], t["void"]


def check_names(names: object, n: int, where: str, *, per_image: bool = True) -> tuple[str, ...]:
    """Check image names: a sequence (not a string) of ``n`` distinct strings; return them.

    Parameters
    ----------
    names : object
        What was given as names.
    n : int
        Number of images.
    where : str
        The batch, for messages.
    per_image : bool, default True
        Whether the accumulator keeps per-image rows: names identify images only in those rows,
        so names given to one that keeps none are refused (they would not stop an image from
        being counted twice).

    Returns
    -------
    tuple of str

    Raises
    ------
    UsageError
        Not a sequence of ``n`` distinct non-empty strings (a string is read as one name, never
        as its characters; ``None`` or numbers are refused, never made into names), or names for
        an accumulator without per-image rows.
    """
    if not per_image:
        msg = (
            f"{where}: names= was given, but the accumulator keeps no per-image rows, so names "
            "could not stop an image from being counted twice; build it with per_image=True "
            "(or leave names out)"
        )
        raise UsageError(msg)
    if isinstance(names, str | bytes) or not isinstance(names, Sequence):
        msg = (
            f"{where}: names={str(names)[:40]!r} is not a sequence of image names; give one "
            f"string per image, e.g. names=[{str(names)[:20]!r}] for a batch of one image"
        )
        raise UsageError(msg)
    if not all(isinstance(x, str) for x in names):
        bad = next(x for x in names if not isinstance(x, str))
        msg = f"{where}: image name {bad!r} is a {type(bad).__name__}; names must be strings"
        raise UsageError(msg)
    if len(names) != n:
        msg = f"{where}: {len(names)} image name(s) given for a batch of {n} image(s)"
        raise UsageError(msg)
    if "" in names:  # (a state marks what belongs to no named image with "")
        msg = f"{where}: image {list(names).index('')} has an empty name; name every image"
        raise UsageError(msg)
    if len(set(names)) != n:
        dup = sorted({x for x in names if names.count(x) > 1})[:3]
        msg = f"{where}: image name(s) {dup} repeat within the batch; one name per image"
        raise UsageError(msg)
    return tuple(names)


def shared_rows(ra: ImageRows, rb: ImageRows) -> tuple[set[int], dict[str, Any] | None]:
    """Find the rows of ``rb`` that ``ra`` counted too: same given name, same counts.

    Parameters
    ----------
    ra, rb : ImageRows
        The rows of two states being merged.

    Returns
    -------
    drop : set of int
        Rows of ``rb`` to leave out (their images are in ``ra``).
    less : dict or None
        Their :meth:`ImageRows.totals`, plus ``pixels``: what the merge must not count twice.

    Raises
    ------
    DuplicateImageError
        A given name on both sides with different counts, or in a version-1 state (its
        TP/FP/FN rows cannot tell identical images apart).
    """
    shared = {n for n, g in zip(ra.names, ra.given, strict=True) if g} & {
        n for n, g in zip(rb.names, rb.given, strict=True) if g
    }
    if not shared:
        return set(), None
    where_a = {n: i for i, (n, g) in enumerate(zip(ra.names, ra.given, strict=True))
               if g and n in shared}  # fmt: skip
    drop: set[int] = set()
    differ = []
    for j, (name, given) in enumerate(zip(rb.names, rb.given, strict=True)):
        if given and name in where_a:
            if ra.legacy is not None or rb.legacy is not None:
                differ.append(name)
            elif ra.signature(where_a[name]) == rb.signature(j):
                drop.add(j)
            else:
                differ.append(name)
    if differ:
        msg = (
            f"cannot merge: image(s) {sorted(differ)[:3]} are counted on both sides with "
            "different counts (or in a version-1 state, which cannot tell); an image is counted "
            "once. Check the image names, or merge states of disjoint images"
        )
        raise DuplicateImageError(msg)
    less = rb.totals(sorted(drop))
    less["pixels"] = (
        int(less["counts"].sum()) + int(less["void"].sum()) + less["ignored"]
        + sum(less["unexpected_gt"].values()) + sum(less["unexpected_pred"].values())
    )  # fmt: skip
    return drop, less
