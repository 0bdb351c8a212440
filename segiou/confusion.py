"""The accumulator, :class:`ConfusionMatrix`: counts that update, merge, save and load.

Counts accumulate; ratios are computed once, at the end, from the summed counts (see
:mod:`segiou.metrics` and :func:`segiou.evaluate`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

import numpy as np

from segiou import _state
from segiou._arrays import to_numpy
from segiou._batch import (
    Counters,
    Totals,
    add_into,
    check_fits,
    check_mergeable,
    count_extras,
    held_interrupts,
    n_images_of,
    overflow_error,
    spec_lookup,
    states_equal,
)
from segiou._boundary import BoundaryWidth
from segiou._count import OnUnexpected, Tally
from segiou._extras import Extras
from segiou._instances import InstanceTally
from segiou._scores import count_batch
from segiou._stream import StreamCounter
from segiou._typing import CountMatrix, IntArray
from segiou.errors import (
    CheckpointError,
    DuplicateBatchError,
    DuplicateImageError,
    NotAStateError,
    UsageError,
)
from segiou.images import ImageRows, ImageTable, check_names, shared_rows
from segiou.labels import IdSpace, LabelSpec, load_spec
from segiou.outputs import write_atomic

__all__ = ["FORMAT", "VERSION", "ConfusionMatrix", "ImageTable"]

#: Name and version of the state :meth:`ConfusionMatrix.to_dict` writes (see :mod:`segiou._state`).
FORMAT = _state.FORMAT
VERSION = _state.VERSION


class ConfusionMatrix(Totals):
    """Accumulates ``counts[gt, pred]`` over batches of label masks, exactly and once.

    Parameters
    ----------
    labels : int, str, Path or LabelSpec
        Number of classes, a built-in spec name (``"cityscapes"``, ``"pascal_voc"``,
        ``"ade20k"``), a spec file, or a :class:`~segiou.labels.LabelSpec`.
    ignore_index : int or sequence of int, optional
        Ground-truth values not to count (e.g. 255). Replaces the spec's ignore values. A
        prediction with such a value at a valid ground-truth pixel is *void*: a false negative
        of the true class, never a false positive.
    gt_ids, pred_ids : {"class", "raw"}
        Whether masks hold class ids (``0..K-1`` and ignore values) or the spec's raw ids (for
        example Cityscapes labelIds). ``pred_ids`` defaults to ``gt_ids``.
    on_unexpected : {"raise", "count"}
        A value that is neither a class nor ignored/void raises :class:`LabelRangeError`
        (listing each value, its pixel count and first position) and nothing of the batch is
        counted; with ``"count"`` such pixels are left out of the counts and reported in
        :attr:`unexpected_gt` / :attr:`unexpected_pred`.
    per_image : bool
        Also keep per-image counts (:attr:`images`): each image's sparse confusion entries,
        from which its TP/FP/FN rows derive; leading axes are images.
    threads : int, optional
        Threads of the counting kernel (default: all of Numba's threads for large batches).
    boundary : bool, float, str or BoundaryWidth, optional
        Also count Boundary IoU (Cheng et al. 2021): ``True`` (width 2% of each image's
        diagonal), a ratio such as ``0.01``, or pixels such as ``"5px"`` (see
        :class:`segiou.BoundaryWidth`). Off by default: it costs about as much again as
        counting.
    instances : bool, default False
        Also count instance ground truth for iIoU (cityscapesScripts' instance-level IoU): every
        :meth:`update` then takes ``instances=`` (instance ids ``label * 1000 + k``, as
        Cityscapes' ``*_gtFine_instanceIds.png``); the spec must give average instance sizes.

    Raises
    ------
    LabelSpecError
        Invalid labels or id space.
    UsageError
        An invalid ``boundary`` width, or ``instances`` with a spec without instance sizes.

    Notes
    -----
    Every pixel ends in exactly one place: ``counts``, ``void``, ``n_ignored`` or the
    unexpected counts (or an error). A batch ``key`` is counted at most once, across updates
    and merges; a state is never merged with itself. ``update`` is safe to call from several
    threads. ``==`` compares settings, counts, keys and per-image rows regardless of the order
    of the rows, so that ``a + b == b + a``. Every count is exact: an update or a merge that
    would take the pixel total past ``2**63 - 1`` is refused (:class:`CountOverflowError`),
    nothing wraps. An image name is counted once: see :meth:`update` and :meth:`merge`.

    Examples
    --------
    >>> cm = ConfusionMatrix(2)
    >>> cm.update(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), key="a").counts.tolist()
    [[1, 1], [1, 1]]
    """

    def __init__(
        self,
        labels: int | str | Path | LabelSpec,
        *,
        ignore_index: int | Sequence[int] | None = None,
        gt_ids: IdSpace = "class",
        pred_ids: IdSpace | None = None,
        on_unexpected: OnUnexpected = "raise",
        per_image: bool = False,
        threads: int | None = None,
        boundary: bool | float | str | BoundaryWidth | None = None,
        instances: bool = False,
    ) -> None:
        if isinstance(labels, int | np.integer) and not isinstance(labels, bool):
            spec = LabelSpec.from_num_classes(int(labels), ignore=ignore_index)
        else:
            spec = load_spec(labels)  # type: ignore[arg-type]
            if ignore_index is not None:
                spec = spec.with_ignore(ignore_index)
        if on_unexpected not in ("raise", "count"):
            msg = f"on_unexpected={on_unexpected!r} is unknown; expected 'raise' or 'count'"
            raise UsageError(msg)
        self.spec = spec
        self.gt_ids: IdSpace = gt_ids
        self.pred_ids: IdSpace = gt_ids if pred_ids is None else pred_ids
        self.on_unexpected: OnUnexpected = on_unexpected
        self.per_image = bool(per_image)
        if threads is not None and (isinstance(threads, bool)
                                    or not isinstance(threads, int | np.integer)):  # fmt: skip
            msg = (
                f"threads={threads!r} is not a whole number; give the kernel threads as an int, "
                "or None for all of Numba's threads"
            )
            raise UsageError(msg)
        self.threads = threads
        check_fits(spec.num_classes, threads)
        self._lookup = spec_lookup(spec, self.gt_ids, self.pred_ids)
        k = spec.num_classes
        self._counts: CountMatrix = np.zeros((k, k), dtype=np.int64)
        self._void: IntArray = np.zeros(k, dtype=np.int64)
        self._totals = np.zeros(4, dtype=np.int64)  # see Totals
        self._unfolded: IntArray | None = None  # small calls' word table (the short way)
        self.unexpected_gt: dict[int, int] = {}
        self.unexpected_pred: dict[int, int] = {}
        self.keys: set[str] = set()
        self._rows: list[ImageRows] = []
        self._n_rows = 0  # rows in self._rows (numbering unnamed images: not summed per update)
        self._named: set[str] = set()  # image names in the rows
        self._pending: dict[str, object] = {}  # keys being counted, by their call's claim
        self._lock = threading.RLock()  # reentrant: reading counts under it folds first
        #: Boundary IoU counts, instance records and absent chunks (:mod:`segiou._extras`).
        self.extras = Extras(k, len(spec.categories), BoundaryWidth.parse(boundary),
                             bool(instances), self.per_image)  # fmt: skip
        self._counters = Counters(spec, self._lookup, self.gt_ids, self.pred_ids, bool(instances))
        plain = not (self.per_image or boundary or instances) and self._lookup.words_fit
        self._stream = StreamCounter.of(self._lookup) if plain else None  # the short way

    @property
    def boundary(self) -> BoundaryWidth | None:
        """The Boundary IoU width (``None``: Boundary IoU is not counted)."""
        return self.extras.boundary

    @property
    def instances(self) -> bool:
        """Whether instance ground truth is counted (iIoU)."""
        return self.extras.instances

    @classmethod
    def empty(cls, labels: int | str | Path | LabelSpec, **options: Any) -> ConfusionMatrix:
        """Return an empty accumulator, the identity of :meth:`merge`.

        Parameters
        ----------
        labels : int, str, Path or LabelSpec
            Number of classes, a built-in spec name, a spec file, or a spec; as for the class.
        **options
            The keyword arguments of the class (``ignore_index``, ``gt_ids``, ``pred_ids``,
            ``on_unexpected``, ``per_image``, ``threads``).

        Returns
        -------
        ConfusionMatrix
            A new accumulator with no counts, same as ``ConfusionMatrix(labels, **options)``.

        Raises
        ------
        LabelSpecError
            Invalid labels or id space.
        """
        return cls(labels, **options)

    # -- properties ---------------------------------------------------------------------------
    @property
    def num_classes(self) -> int:
        """Number of evaluated classes ``K``."""
        return self.spec.num_classes

    @property
    def n_unexpected(self) -> int:
        """Pixels with an unexpected value (only non-zero with ``on_unexpected="count"``)."""
        return sum(self.unexpected_gt.values()) + sum(self.unexpected_pred.values())

    @property
    def images(self) -> ImageTable:
        """Per-image rows (requires ``per_image=True``)."""
        if not self.per_image:
            msg = "per-image rows were not kept; create the ConfusionMatrix with per_image=True"
            raise UsageError(msg)
        with self._lock:
            rows = ImageRows.concat(self._rows, self.num_classes)
            self._rows = [rows] if rows.n else []  # joined once, kept joined
        return rows.table()

    # -- counting -----------------------------------------------------------------------------
    def update(
        self,
        gt: object,
        pred: object,
        *,
        key: str | int | None = None,
        names: Sequence[str] | None = None,
        instances: object | None = None,
        scores_axis: int | None = None,
        scores_dtype: str | None = None,
    ) -> Self:
        """Count one batch: ground truth and prediction of the same shape (or class scores).

        Parameters
        ----------
        gt, pred : array_like of int or bool
            Label masks of any rank (``H x W``, ``N x H x W``, ...); any strides, any byte
            order (big-endian masks, e.g. ``>u2``, are copied into native byte order first).
            numpy arrays, PyTorch CPU tensors and other DLPack or ``__array__`` objects are
            read without a copy; a CUDA tensor is refused (pass ``.cpu()``), as is a masked
            array (fill its masked pixels with an ignored label first). With
            ``scores_axis``, ``pred`` holds class scores instead (see below).
        key : str or int, optional
            Batch id. A key counted before (here or in a merged state) is refused.
        names : sequence of str, optional
            Image names for per-image rows: one distinct string per image of the batch, none
            counted before in this accumulator; a name identifies its image (see
            :meth:`merge`). Default: the labels ``key`` (one image) or ``key/0``, ``key/1``,
            ...; without a key ``#<row>``. Refused without per-image rows (``per_image=False``).
        instances : array_like of int, optional
            Instance ids of the ground truth, same shape (``label * 1000 + k`` from 1000, as
            Cityscapes' ``*_gtFine_instanceIds.png``): required when the accumulator was made
            with ``instances=True``, refused otherwise.
        scores_axis : int, optional
            ``pred`` holds class scores (logits or probabilities) along this axis, e.g. ``1``
            for ``N x C x H x W``: counted as ``update(gt, np.argmax(pred, axis=scores_axis))``
            (ties to the lowest channel; channel ``c`` is the prediction value ``c``), with the
            argmax fused into the counting pass: no ``N x H x W`` array is made (at 254
            classes or more, a batch whose tables outweigh it is argmaxed by numpy). float32,
            float64, float16 and ml_dtypes' bfloat16; scores containing NaN are refused.
        scores_dtype : {"bfloat16", "float16"}, optional
            How to read scores given as ``uint16``/``int16`` bits, e.g. a PyTorch bfloat16
            tensor as ``t.view(torch.int16)``.

        Returns
        -------
        ConfusionMatrix
            ``self``, updated (all or nothing: on error nothing of the batch is counted).

        Raises
        ------
        DuplicateBatchError
            ``key`` was counted before.
        DuplicateImageError
            An image name given (or made from ``key``) was counted before.
        UsageError
            ``names`` is not a sequence of one distinct string per image.
        CountOverflowError
            The pixel total would pass ``2**63 - 1``; nothing is counted.
        ShapeMismatchError, LabelDtypeError, LabelRangeError
            Bad masks; the message names the batch, what was found and what to do.
        ScoresError
            Scores containing NaN (the first position is named).
        """
        if isinstance(key, str) and not key:
            msg = "key='' is empty; a batch key is a non-empty string (or None: no key)"
            raise UsageError(msg)
        if (self._stream is not None and names is None and instances is None
                and scores_axis is None and scores_dtype is None
                and self._stream.add(self, gt, pred, key)):  # fmt: skip
            return self  # the short way: a plain 8-bit batch, counted and added
        k = None if key is None else str(key)
        where = "update" if k is None else f"batch {k!r}"
        self.extras.check(instances is not None, where, batch=True)
        gt, pred = to_numpy(gt, "gt", where), to_numpy(pred, "pred", where)  # no copy
        if names is not None:  # names without per-image rows are refused, saying why
            check_names(names, n_images_of(gt.shape), where, per_image=self.per_image)
        claim = object()  # this call's claim on its key while it counts (see the finally)
        try:
            with self._lock:
                if k is not None and (k in self.keys or k in self._pending):
                    msg = (
                        f"batch key {k!r} was counted before; a batch is never counted twice. "
                        "Use a new key for new data, or skip batches already in the state"
                    )
                    raise DuplicateBatchError(msg)
                if k is not None:
                    self._pending[k] = claim
            tally, pred = count_batch(gt, pred, self._lookup, scores_axis, scores_dtype,
                                      where=where, on_unexpected=self.on_unexpected,
                                      per_image=self.per_image, threads=self.threads,
                                      labels=self.boundary is not None or self.instances)  # fmt: skip
            bnd, inst = count_extras(gt, pred, instances, tally, boundary=self.boundary,
                                     counters=self._counters, per_image=self.per_image,
                                     where=where)  # fmt: skip
            d = () if self.boundary is None else self.boundary.widths_for(gt.shape)
            self.add_tally(tally, key=k, names=names, n_images=n_images_of(gt.shape),
                           boundary=bnd, instances=inst, widths=d)  # fmt: skip
        finally:  # also after Ctrl-C: the key is free again unless add_tally counted it
            if k is not None and self._pending.get(k) is claim:
                with self._lock:
                    del self._pending[k]
        return self

    def add_tally(
        self,
        tally: Tally,
        *,
        key: str | None,
        names: Sequence[str] | None,
        n_images: int,
        names_given: bool = True,
        boundary: IntArray | None = None,
        instances: InstanceTally | None = None,
        absent: Sequence[int] | None = None,
        absent_pred: Sequence[int] | None = None,
        widths: Sequence[int] = (),
    ) -> None:
        """Add what one counting pass found, counted elsewhere (for example by the Dask engine).

        Parameters
        ----------
        tally : Tally
            Counts from :func:`segiou._count.count_pairs` or the engine, counted with this
            accumulator's lookup (with per-image counts when it keeps per-image rows).
        key : str, optional
            Batch key; a key counted before is refused.
        names : sequence of str, optional
            Names of the tally's images (per-image rows); default from ``key`` (``key`` or
            ``key/0``, ``key/1``, ...) or, without a key, ``#<row>``: labels that only show
            the images.
        n_images : int
            Number of images the tally covers.
        names_given : bool, default True
            Whether ``names`` identify the images (a name counted before is refused, and
            merges match images by it), or only label them (e.g. a store's index numbers).
        boundary : ndarray of int64, shape (images, 3, K) or (1, 3, K), optional
            Boundary IoU counts of the tally's pixels (required when the accumulator counts
            Boundary IoU): per image, or summed.
        instances : InstanceTally, optional
            The tally's instances (required when the accumulator counts instances).
        absent, absent_pred : sequence of int, optional
            Ground-truth (prediction) chunks absent from a store, read as the fill value, per image.
        widths : sequence of int
            The Boundary IoU widths in pixels the tally's images got.

        Raises
        ------
        DuplicateBatchError
            ``key`` was counted before.
        DuplicateImageError
            An image name was counted before.
        CountOverflowError
            The pixel total would pass ``2**63 - 1``.
        UsageError
            Per-image rows are kept but the tally has none, ``names`` is not one distinct
            string per image, or Boundary IoU counts or instances the accumulator keeps are
            missing (or given to one that does not keep them).
        """
        self.extras.check(instances is not None, key or "update", boundary=boundary is not None)
        im = tally.images if self.per_image else None
        labels: tuple[str, ...] | None = None
        given = names_given and names is not None
        if self.per_image:
            if im is None:
                msg = "per-image rows are missing from a tally counted without per_image=True"
                raise UsageError(msg)
            if names is None and key is not None:
                names = [key] if im.n == 1 else [f"{key}/{i}" for i in range(im.n)]
            if names is not None:
                labels = check_names(names, im.n, key or "update")
        with self._lock:
            if key is not None and key in self.keys:
                msg = f"batch key {key!r} was counted before; a batch is never counted twice"
                raise DuplicateBatchError(msg)
            if given and labels is not None and (again := sorted(self._named.intersection(labels))):
                msg = (
                    f"image name(s) {again[:3]} were counted before (batch {key!r}); an image is "
                    "counted once: give new names, or skip images already in the state"
                )
                raise DuplicateImageError(msg)
            total = self._pixels + tally.n_pixels
            if total > _state.INT64_MAX:
                raise overflow_error(self._pixels, tally.n_pixels)
            self.extras.check_add(n_images, boundary=boundary, instances=instances, absent=absent,
                                  absent_pred=absent_pred, where=key or "update", given=given,
                                  pixels=tally.n_pixels)  # fmt: skip
            with held_interrupts():  # all of it or nothing, also under Ctrl-C
                tally.add_counts_into(self.counts)
                self.void += tally.void
                self.n_ignored += tally.n_ignored
                add_into(self.unexpected_gt, tally.unexpected_gt)
                add_into(self.unexpected_pred, tally.unexpected_pred)
                self.n_images += n_images
                self._pixels = total
                if key is not None:
                    self.keys.add(key)
                if im is not None:
                    if labels is None:  # numbered under the lock: concurrent updates differ
                        labels = tuple(f"#{self._n_rows + i}" for i in range(im.n))
                    self._rows.append(replace(im, names=labels, given=(given,) * im.n))
                    self._n_rows += im.n
                    if given:
                        self._named.update(labels)
                # labels only for extras kept per image (2**40 empty images: 2**40 labels)
                shown: tuple[str, ...] = ()
                if any(x is not None for x in (boundary, instances, absent, absent_pred)):
                    shown = labels or tuple(names or ()) or tuple(f"#{i}" for i in range(n_images))
                self.extras.add(shown, given=given, boundary=boundary, instances=instances,
                                absent=absent, absent_pred=absent_pred, widths=widths)  # fmt: skip

    # -- merging ------------------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        return {"labels": self.spec.to_dict(), "gt_ids": self.gt_ids, "pred_ids": self.pred_ids,
                "per_image": self.per_image} | self.extras.settings()  # fmt: skip

    def _check_compatible(self, other: ConfusionMatrix) -> None:
        if not isinstance(other, ConfusionMatrix):
            msg = f"cannot merge a ConfusionMatrix with {type(other).__name__}"  # type: ignore[unreachable]
            raise NotAStateError(msg)
        check_mergeable(self._config() | {"on_unexpected": self.on_unexpected},
                        other._config() | {"on_unexpected": other.on_unexpected},
                        self.spec, other.spec)  # fmt: skip

    def merge(self, other: ConfusionMatrix) -> ConfusionMatrix:
        """Return a new accumulator holding both states.

        Associative and commutative (under ``==``, which compares per-image rows regardless of
        their order); an empty accumulator is the identity. Per-image rows of ``self`` come
        first in :attr:`images`, then those of ``other``.

        An image counted on both sides under the same name with identical counts is counted
        once (samplers such as PyTorch's ``DistributedSampler`` pad the last batch of a rank
        with images another rank also counts); the same name with different counts is refused.

        Parameters
        ----------
        other : ConfusionMatrix
            A state counted with the same label spec, id spaces, ``on_unexpected`` policy and
            ``per_image`` setting, from other batches.

        Returns
        -------
        ConfusionMatrix
            A new accumulator; both inputs are left as they are.

        Raises
        ------
        IncompatibleMatrixError
            Different label specs, id spaces, ignore values, ``on_unexpected`` policies or
            per-image settings (both values are named).
        DuplicateBatchError
            A batch key is counted on both sides, or ``other`` is ``self`` (its batches would be
            counted twice).
        DuplicateImageError
            An image name is counted on both sides with different counts (or in a version-1
            state, whose rows cannot tell).
        CountOverflowError
            The merged pixel total would pass ``2**63 - 1``.
        NotAStateError
            ``other`` is not a :class:`ConfusionMatrix` (also a ``TypeError``).
        """
        self._check_compatible(other)
        if other is self:
            msg = (
                "cannot merge a state with itself (cm + cm): every batch in it would be counted "
                "twice, and a batch is never counted twice. Merge states of disjoint batches"
            )
            raise DuplicateBatchError(msg)
        out = ConfusionMatrix(self.spec, gt_ids=self.gt_ids, pred_ids=self.pred_ids,
                              on_unexpected=self.on_unexpected, per_image=self.per_image,
                              threads=self.threads, boundary=self.boundary,
                              instances=self.instances)  # fmt: skip
        first, second = sorted((self, other), key=id)  # one lock order: no deadlock
        with first._lock, second._lock:
            if both := self.keys & other.keys:
                shown = sorted(both)[:3]
                msg = (
                    f"cannot merge: {len(both)} batch key(s) are counted on both sides, e.g. "
                    f"{shown}; a batch is never counted twice. Merge states of disjoint batches"
                )
                raise DuplicateBatchError(msg)
            drop, less = (shared_rows(ImageRows.concat(self._rows, self.num_classes),
                                      ImageRows.concat(other._rows, self.num_classes))
                          if self._named & other._named else (set(), None))  # fmt: skip
            total = self._pixels + other._pixels - (less["pixels"] if less else 0)
            if total > _state.INT64_MAX:
                raise overflow_error(self._pixels, other._pixels)
            for src in (self, other):
                out.counts += src.counts
                out.void += src.void
                out.n_ignored += src.n_ignored
                add_into(out.unexpected_gt, src.unexpected_gt)
                add_into(out.unexpected_pred, src.unexpected_pred)
                out.n_images += src.n_images
                out.keys |= src.keys
            out._rows = list(self._rows)
            theirs = ImageRows.concat(other._rows, self.num_classes) if drop else None
            if theirs is not None and less is not None:  # images both sides counted: once
                out.counts -= less["counts"]
                out.void -= less["void"]
                out.n_ignored -= less["ignored"]
                add_into(out.unexpected_gt, {v: -c for v, c in less["unexpected_gt"].items()})
                add_into(out.unexpected_pred, {v: -c for v, c in less["unexpected_pred"].items()})
                out.unexpected_gt = {v: c for v, c in out.unexpected_gt.items() if c}
                out.unexpected_pred = {v: c for v, c in out.unexpected_pred.items() if c}
                out.n_images -= len(drop)
                keep = [i for i in range(theirs.n) if i not in drop]
                out._rows.append(theirs.select(keep))
            else:
                out._rows.extend(other._rows)
            out._n_rows = sum(r.n for r in out._rows)
            dropped = {theirs.names[i] for i in drop} if theirs is not None else set()
            out.extras = self.extras.merged(other.extras, dropped)
            out._named = self._named | other._named
            out._pixels = total
        return out

    def __add__(self, other: ConfusionMatrix) -> ConfusionMatrix:
        return self.merge(other)

    def __eq__(self, other: object) -> bool:
        """Compare settings, counts, keys and per-image rows (as a multiset: order is ignored).

        The order of per-image rows records only the order in which batches were counted or
        merged, so ``a + b == b + a`` holds; :attr:`images` keeps that order.
        """
        if not isinstance(other, ConfusionMatrix):
            return NotImplemented
        rows = [ImageRows.concat(cm._rows, cm.num_classes) if cm.per_image else None
                for cm in (self, other)]  # fmt: skip
        return states_equal(self.to_dict(), other.to_dict(), *rows)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ConfusionMatrix({self.spec.name!r}, K={self.num_classes}, "
            f"pixels={self.n_pixels:,}, ignored={self.n_ignored:,}, void={int(self.void.sum()):,}, "
            f"unexpected={self.n_unexpected:,}, images={self.n_images}, keys={len(self.keys)})"
        )

    # -- serialisation ------------------------------------------------------------------------
    def _parts(self) -> _state.StateParts:
        rows = None
        if self.per_image:
            rows = ImageRows.concat(self._rows, self.num_classes)
        return _state.StateParts(
            spec=self.spec, gt_ids=self.gt_ids, pred_ids=self.pred_ids,
            on_unexpected=self.on_unexpected, per_image=self.per_image, counts=self.counts,
            void=self.void, ignored=self.n_ignored, unexpected_gt=self.unexpected_gt,
            unexpected_pred=self.unexpected_pred, keys=self.keys, n_images=self.n_images,
            rows=rows, extras=self.extras,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Self-describing, versioned, JSON-safe state with exact integer counts.

        Returns
        -------
        dict
            ``{"format": "segiou.confusion", "version": 2, "writer": {"segiou": ...}, ...}``
            (see the README for every field); :meth:`from_dict` reads it back. A state loaded
            from version 1 is written as version 1 (its per-image rows hold TP/FP/FN only).
        """
        with self._lock:
            return _state.dump(self._parts())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, source: str = "state") -> ConfusionMatrix:
        """Rebuild an accumulator from :meth:`to_dict` output (format version 1 or 2).

        Parameters
        ----------
        d : mapping
            A state as written by :meth:`to_dict` (for example parsed back from JSON).
        source : str, default "state"
            Where the state came from (e.g. a file name); every error message starts with it.

        Returns
        -------
        ConfusionMatrix
            A new accumulator with the state's settings, counts, batch keys and per-image rows
            (``threads`` is not part of a state and is left at its default).

        Raises
        ------
        CheckpointError
            Not a segiou state, an unknown version, an unknown or missing field, or a field
            that breaks an invariant of the state (see :mod:`segiou._state`: counts that are
            not exact integers in ``0 .. 2**63 - 1``, a pixel total beyond it or different from
            the one recorded, keys that are not distinct strings, unexpected counts in a
            ``raise``-mode state, per-image rows that do not add up to the totals).
        """
        p = _state.load(d, source)
        try:
            e = p.extras
            cm = cls(p.spec, gt_ids=p.gt_ids, pred_ids=p.pred_ids,
                     on_unexpected=p.on_unexpected, per_image=p.per_image,
                     boundary=None if e is None else e.boundary,
                     instances=e is not None and e.instances)  # fmt: skip
        except Exception as err:  # e.g. a spec whose ids do not fit the declared id space
            msg = f"{source}: the state's settings are invalid ({err})"
            raise CheckpointError(msg) from err
        cm.counts, cm.void, cm.n_ignored = p.counts, p.void, p.ignored
        cm.unexpected_gt, cm.unexpected_pred = p.unexpected_gt, p.unexpected_pred
        cm.keys, cm.n_images, cm._pixels = p.keys, p.n_images, p.pixels
        if p.extras is not None:
            cm.extras = p.extras
        if p.rows is not None:
            cm._rows, cm._n_rows = ([p.rows] if p.rows.n else []), p.rows.n
            cm._named = {n for n, g in zip(p.rows.names, p.rows.given, strict=True) if g}
        return cm

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the state as JSON, atomically (a temporary file, then ``os.replace``).

        Parameters
        ----------
        path : str or os.PathLike
            File to write (a regular file, replaced if it exists; a symlink is written through
            to its target); its folder must exist. The state is :meth:`to_dict`, its sha256
            in ``writer``: :meth:`load` reads it back, and refuses it once changed.

        Returns
        -------
        Path
            The file written (symlinks followed).

        Raises
        ------
        UsageError
            ``path`` is empty or names something that is not a regular file (a folder, a
            device): it is never replaced.
        OutputError
            The file cannot be written (also an ``OSError``); the temporary file is removed and
            an existing file at ``path`` is left as it was.
        """
        text = _state.sealed(self.to_dict())
        return write_atomic(path, text, what="state file")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ConfusionMatrix:
        """Read a state written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
            A JSON state file.

        Returns
        -------
        ConfusionMatrix
            A new accumulator (see :meth:`from_dict`).

        Raises
        ------
        CheckpointError
            Unreadable, not JSON, or not a valid segiou state (the message names the file).
        """
        return cls.from_dict(_state.read_json(Path(path)), source=str(path))

    def __getstate__(self) -> dict[str, Any]:
        return {"state": self.to_dict(), "threads": self.threads}

    def __setstate__(self, state: dict[str, Any]) -> None:
        other = ConfusionMatrix.from_dict(state["state"])
        self.__dict__.update(other.__dict__)
        self.threads = state["threads"]
