"""Layer 2: the accumulator, :class:`ConfusionMatrix`.

Counts accumulate; ratios are computed once, at the end, from the summed counts (see
:mod:`segiou.metrics` and :func:`segiou.evaluate`).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np

from segiou._count import Lookup, OnUnexpected, Tally, count_pairs
from segiou._typing import CountMatrix, IntArray
from segiou._version import __version__
from segiou.errors import (
    CheckpointError,
    DuplicateBatchError,
    IncompatibleMatrixError,
    NotAStateError,
    UsageError,
)
from segiou.labels import IdSpace, LabelSpec, load_spec

__all__ = ["FORMAT", "VERSION", "ConfusionMatrix", "ImageTable"]

#: Name and version of the serialised state written by :meth:`ConfusionMatrix.to_dict`.
FORMAT = "segiou.confusion"
VERSION = 1


@dataclass(frozen=True)
class ImageTable:
    """Per-image counts, one row per image, in the order images were counted.

    Attributes
    ----------
    names : list of str
        Image names (``"<key>/<i>"`` when none were given).
    tp, fp, fn : ndarray of int64, shape (n_images, K)
        Per-image, per-class true positives, false positives and false negatives.
    ignored, unexpected : ndarray of int64, shape (n_images,)
        Ignored pixels and pixels with an unexpected value per image.
    """

    names: list[str]
    tp: IntArray
    fp: IntArray
    fn: IntArray
    ignored: IntArray
    unexpected: IntArray

    def iou(self) -> np.ndarray:
        """Per-image, per-class IoU (``nan`` where a class is absent from an image)."""
        den = (self.tp + self.fp + self.fn).astype(np.float64)
        out: np.ndarray = np.divide(self.tp, den, out=np.full(den.shape, np.nan), where=den > 0)
        return out


class ConfusionMatrix:
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
        Also keep per-image TP/FP/FN rows (:attr:`images`); leading axes are images.
    threads : int, optional
        Threads of the counting kernel (default: all of Numba's threads for large batches).

    Raises
    ------
    LabelSpecError
        Invalid labels or id space.

    Notes
    -----
    Every pixel ends in exactly one place: ``counts``, ``void``, ``n_ignored`` or the
    unexpected counts (or an error). A batch ``key`` is counted at most once, across updates
    and merges; a state is never merged with itself. ``update`` is safe to call from several
    threads. ``==`` compares settings, counts, keys and per-image rows regardless of the order
    of the rows, so that ``a + b == b + a``.

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
        self.threads = threads
        self._lookup = Lookup(
            spec.num_classes, spec.gt_map(self.gt_ids), spec.pred_map(self.pred_ids)
        )
        k = spec.num_classes
        self.counts: CountMatrix = np.zeros((k, k), dtype=np.int64)
        self.void: IntArray = np.zeros(k, dtype=np.int64)
        self.n_ignored = 0
        self.unexpected_gt: dict[int, int] = {}
        self.unexpected_pred: dict[int, int] = {}
        self.keys: set[str] = set()
        self.n_images = 0
        self._rows: list[ImageTable] = []
        self._pending: set[str] = set()
        self._lock = threading.Lock()

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
    def n_pixels(self) -> int:
        """Every pixel seen: counted + void + ignored + unexpected."""
        return int(self.counts.sum() + self.void.sum()) + self.n_ignored + self.n_unexpected

    @property
    def images(self) -> ImageTable:
        """Per-image rows (requires ``per_image=True``)."""
        if not self.per_image:
            msg = "per-image rows were not kept; create the ConfusionMatrix with per_image=True"
            raise UsageError(msg)
        return _stack(self._rows, self.num_classes)

    # -- counting -----------------------------------------------------------------------------
    def update(
        self,
        gt: object,
        pred: object,
        *,
        key: str | int | None = None,
        names: Sequence[str] | None = None,
    ) -> Self:
        """Count one batch: ground truth and prediction of the same shape.

        Parameters
        ----------
        gt, pred : array_like of int or bool
            Label masks of any rank (``H x W``, ``N x H x W``, ...); any strides, any byte
            order (big-endian masks, e.g. ``>u2``, are copied into native byte order first).
        key : str or int, optional
            Batch id. A key counted before (here or in a merged state) is refused.
        names : sequence of str, optional
            Image names for per-image rows (one per image of the batch).

        Returns
        -------
        ConfusionMatrix
            ``self``, updated (all or nothing: on error nothing of the batch is counted).

        Raises
        ------
        DuplicateBatchError
            ``key`` was counted before.
        ShapeMismatchError, LabelDtypeError, LabelRangeError
            Bad masks; the message names the batch, what was found and what to do.
        """
        k = None if key is None else str(key)
        with self._lock:
            if k is not None and (k in self.keys or k in self._pending):
                msg = (
                    f"batch key {k!r} was counted before; a batch is never counted twice. "
                    "Use a new key for new data, or skip batches already in the state"
                )
                raise DuplicateBatchError(msg)
            if k is not None:
                self._pending.add(k)
        try:
            where = "update" if k is None else f"batch {k!r}"
            tally = count_pairs(gt, pred, self._lookup, where=where,
                                on_unexpected=self.on_unexpected, per_image=self.per_image,
                                threads=self.threads)  # fmt: skip
            self.add_tally(tally, key=k, names=names, n_images=_n_images(np.shape(gt)))  # type: ignore[call-overload]
        finally:
            if k is not None:
                with self._lock:
                    self._pending.discard(k)
        return self

    def add_tally(
        self, tally: Tally, *, key: str | None, names: Sequence[str] | None, n_images: int
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
            Names of the tally's images (per-image rows); default from ``key``.
        n_images : int
            Number of images the tally covers.

        Raises
        ------
        DuplicateBatchError
            ``key`` was counted before.
        UsageError
            Per-image rows are kept but the tally has none, or ``names`` does not hold one name
            per image.
        """
        im = tally.images if self.per_image else None
        labels: list[str] | None = None
        if self.per_image:
            if im is None:
                msg = "per-image rows are missing from a tally counted without per_image=True"
                raise UsageError(msg)
            n = im.tp.shape[0]
            if names is None and key is not None:
                names = [key] if n == 1 else [f"{key}/{i}" for i in range(n)]
            if names is not None:
                labels = list(map(str, names))
                if len(labels) != n:
                    msg = f"{len(labels)} image name(s) given for a batch of {n} image(s)"
                    raise UsageError(msg)
        with self._lock:
            if key is not None and key in self.keys:
                msg = f"batch key {key!r} was counted before; a batch is never counted twice"
                raise DuplicateBatchError(msg)
            rows = None
            if im is not None:
                if labels is None:  # numbered under the lock: concurrent updates get distinct names
                    start = sum(len(r.names) for r in self._rows)
                    labels = [f"#{start + i}" for i in range(im.tp.shape[0])]
                rows = ImageTable(labels, im.tp, im.fp, im.fn, im.ignored, im.unexpected)
            self.counts += tally.counts
            self.void += tally.void
            self.n_ignored += tally.n_ignored
            _add_into(self.unexpected_gt, tally.unexpected_gt)
            _add_into(self.unexpected_pred, tally.unexpected_pred)
            self.n_images += n_images
            if key is not None:
                self.keys.add(key)
            if rows is not None:
                self._rows.append(rows)

    # -- merging ------------------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        return {
            "labels": self.spec.to_dict(),
            "gt_ids": self.gt_ids,
            "pred_ids": self.pred_ids,
            "per_image": self.per_image,
        }

    def _check_compatible(self, other: ConfusionMatrix) -> None:
        if not isinstance(other, ConfusionMatrix):
            msg = f"cannot merge a ConfusionMatrix with {type(other).__name__}"  # type: ignore[unreachable]
            raise NotAStateError(msg)
        mine, theirs = self._config(), other._config()
        mine["on_unexpected"], theirs["on_unexpected"] = self.on_unexpected, other.on_unexpected
        for name in ("gt_ids", "pred_ids", "per_image", "on_unexpected"):
            if mine[name] != theirs[name]:
                msg = (
                    f"cannot merge: {name} is {mine[name]!r} here but {theirs[name]!r} in the "
                    "other state; count both with the same settings"
                )
                raise IncompatibleMatrixError(msg)
        if mine["labels"] != theirs["labels"]:
            a, b = self.spec, other.spec
            diffs = [
                f"{f}: {getattr(a, f)!r:.80} vs {getattr(b, f)!r:.80}"
                for f in ("name", "classes", "ignore", "categories", "raw")
                if getattr(a, f) != getattr(b, f)
            ]
            msg = (
                f"cannot merge states with different label specs ({a.num_classes} classes "
                f"{a.name!r} vs {b.num_classes} classes {b.name!r}); differences: "
                + "; ".join(diffs or ["colours or category membership"])
            )
            raise IncompatibleMatrixError(msg)

    def merge(self, other: ConfusionMatrix) -> ConfusionMatrix:
        """Return a new accumulator holding both states.

        Associative and commutative (under ``==``, which compares per-image rows regardless of
        their order); an empty accumulator is the identity. Per-image rows of ``self`` come
        first in :attr:`images`, then those of ``other``.

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
                              threads=self.threads)  # fmt: skip
        first, second = sorted((self, other), key=id)  # one lock order: no deadlock
        with first._lock, second._lock:
            if both := self.keys & other.keys:
                shown = sorted(both)[:3]
                msg = (
                    f"cannot merge: {len(both)} batch key(s) are counted on both sides, e.g. "
                    f"{shown}; a batch is never counted twice. Merge states of disjoint batches"
                )
                raise DuplicateBatchError(msg)
            for src in (self, other):
                out.counts += src.counts
                out.void += src.void
                out.n_ignored += src.n_ignored
                _add_into(out.unexpected_gt, src.unexpected_gt)
                _add_into(out.unexpected_pred, src.unexpected_pred)
                out.n_images += src.n_images
                out.keys |= src.keys
                out._rows.extend(src._rows)
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
        a, b = self.to_dict(), other.to_dict()
        for d in (a, b):
            d.pop("writer")
            d["image_rows"] = _row_multiset(d["image_rows"])
        return a == b

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ConfusionMatrix({self.spec.name!r}, K={self.num_classes}, "
            f"pixels={self.n_pixels:,}, ignored={self.n_ignored:,}, void={int(self.void.sum()):,}, "
            f"unexpected={self.n_unexpected:,}, images={self.n_images}, keys={len(self.keys)})"
        )

    # -- serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Self-describing, versioned, JSON-safe state with exact integer counts.

        Returns
        -------
        dict
            ``{"format": "segiou.confusion", "version": 1, "writer": {"segiou": ...}, ...}``;
            :meth:`from_dict` reads it back.
        """
        with self._lock:
            out: dict[str, Any] = {"format": FORMAT, "version": VERSION,
                                   "writer": {"segiou": __version__}}  # fmt: skip
            out |= self._config()
            out |= {
                "on_unexpected": self.on_unexpected,
                "counts": self.counts.tolist(),
                "void": self.void.tolist(),
                "ignored": self.n_ignored,
                "unexpected": {
                    "gt": {str(v): c for v, c in sorted(self.unexpected_gt.items())},
                    "pred": {str(v): c for v, c in sorted(self.unexpected_pred.items())},
                },
                "keys": sorted(self.keys),
                "images": self.n_images,
                "pixels": self.n_pixels,
                "image_rows": None,
            }
            if self.per_image:
                t = _stack(self._rows, self.num_classes)
                out["image_rows"] = {
                    "names": t.names,
                    "tp": t.tp.tolist(),
                    "fp": t.fp.tolist(),
                    "fn": t.fn.tolist(),
                    "ignored": t.ignored.tolist(),
                    "unexpected": t.unexpected.tolist(),
                }
            return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, source: str = "state") -> ConfusionMatrix:
        """Rebuild an accumulator from :meth:`to_dict` output.

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
            Not a segiou state, an unknown version, missing or malformed fields (an invalid
            label spec included), or counts that do not add up to the recorded number of
            pixels.
        """
        if not isinstance(d, Mapping) or d.get("format") != FORMAT:
            found = d.get("format") if isinstance(d, Mapping) else type(d).__name__
            msg = f"{source}: not a segiou confusion state (format {found!r}, expected {FORMAT!r})"
            raise CheckpointError(msg)
        version = d.get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            msg = (
                f"{source}: field 'version' is {version!r}, expected the integer {VERSION} (the "
                "file was altered or not written by segiou)"
            )
            raise CheckpointError(msg)
        if version != VERSION:
            w = d.get("writer")
            writer = w.get("segiou", "?") if isinstance(w, Mapping) else "?"
            msg = (
                f"{source}: state version {version!r} (written by segiou {writer}) is not "
                f"readable by segiou {__version__}, which reads version {VERSION}; upgrade segiou"
            )
            raise CheckpointError(msg)
        try:
            if not isinstance(d["per_image"], bool):
                msg = f"field 'per_image' is {d['per_image']!r}, expected true or false"
                raise CheckpointError(msg)
            cm = cls(LabelSpec.from_dict(d["labels"], source=source), gt_ids=d["gt_ids"],
                     pred_ids=d["pred_ids"], on_unexpected=d["on_unexpected"],
                     per_image=d["per_image"])  # fmt: skip
            k = cm.num_classes
            cm.counts = _int_array(d["counts"], (k, k), "counts")
            cm.void = _int_array(d["void"], (k,), "void")
            cm.n_ignored = _nonneg(d["ignored"], "ignored")
            cm.unexpected_gt = {
                int(v): _nonneg(c, "unexpected") for v, c in d["unexpected"]["gt"].items()
            }
            cm.unexpected_pred = {
                int(v): _nonneg(c, "unexpected") for v, c in d["unexpected"]["pred"].items()
            }
            cm.keys = {str(x) for x in d["keys"]}
            cm.n_images = _nonneg(d["images"], "images")
            r: Any = d.get("image_rows")
            if not cm.per_image and r is not None:
                msg = (
                    "field 'image_rows' holds per-image rows but 'per_image' is false (a state "
                    "without per-image rows has 'image_rows': null); the file was altered"
                )
                raise CheckpointError(msg)
            if cm.per_image:
                n = len(r["names"])
                if n != cm.n_images:
                    msg = (
                        f"field 'images' is {cm.n_images} but 'image_rows' holds {n} row(s), one "
                        "per counted image; the file was altered or truncated"
                    )
                    raise CheckpointError(msg)
                cm._rows = [ImageTable(
                    list(map(str, r["names"])), _int_array(r["tp"], (n, k), "tp"),
                    _int_array(r["fp"], (n, k), "fp"), _int_array(r["fn"], (n, k), "fn"),
                    _int_array(r["ignored"], (n,), "ignored"),
                    _int_array(r["unexpected"], (n,), "unexpected"))]  # fmt: skip
        except CheckpointError as err:
            msg_0 = f"{source}: {err}"
            raise CheckpointError(msg_0) from err
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            msg = f"{source}: malformed segiou state ({type(err).__name__}: {err})"
            raise CheckpointError(msg) from err
        if cm.n_pixels != d.get("pixels"):
            msg = (
                f"{source}: counts add up to {cm.n_pixels:,} pixels but the state records "
                f"{d.get('pixels')!r}; the file was altered or truncated"
            )
            raise CheckpointError(msg)
        return cm

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the state as JSON, atomically (a temporary file, then ``os.replace``).

        Parameters
        ----------
        path : str or os.PathLike
            File to write (replaced if it exists); its directory must exist. The state is
            :meth:`to_dict`; :meth:`load` reads it back.

        Returns
        -------
        Path
            The path written.

        Raises
        ------
        OSError
            The file cannot be written; the temporary file is removed and an existing file at
            ``path`` is left as it was.
        """
        target = Path(path)
        text = json.dumps(self.to_dict(), separators=(",", ":"))
        # not mkstemp, whose files are private (0600): this one gets the mode the umask gives
        tmp = target.parent / f".{target.name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            Path(tmp).replace(target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

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
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError as err:
            msg = f"checkpoint {str(p)!r} does not exist"
            raise CheckpointError(msg) from err
        except (OSError, ValueError) as err:
            msg = f"checkpoint {str(p)!r} is not readable JSON: {err}"
            raise CheckpointError(msg) from err
        return cls.from_dict(data, source=str(p))

    def __getstate__(self) -> dict[str, Any]:
        return {"state": self.to_dict(), "threads": self.threads}

    def __setstate__(self, state: dict[str, Any]) -> None:
        other = ConfusionMatrix.from_dict(state["state"])
        self.__dict__.update(other.__dict__)
        self.threads = state["threads"]


def _n_images(shape: tuple[int, ...]) -> int:
    # leading axes are images, as for the per-image rows; an empty H x W mask is one image
    if len(shape) <= 2:
        return 1
    return int(np.prod(shape[:-2]))


def _add_into(acc: dict[int, int], new: Mapping[int, int]) -> None:
    for v, c in new.items():
        acc[v] = acc.get(v, 0) + c


def _row_multiset(rows: Mapping[str, Any] | None) -> list[tuple[Any, ...]] | None:
    """Return the per-image rows of a :meth:`ConfusionMatrix.to_dict` state in a canonical order."""
    if rows is None:
        return None
    fields = ("names", "tp", "fp", "fn", "ignored", "unexpected")
    return sorted(zip(*(rows[f] for f in fields), strict=True))


def _stack(rows: Iterable[ImageTable], k: int) -> ImageTable:
    rows = list(rows)
    if not rows:
        z = np.zeros((0, k), dtype=np.int64)
        return ImageTable([], z, z.copy(), z.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64))
    return ImageTable(
        [n for r in rows for n in r.names],
        *(
            np.concatenate([getattr(r, f) for r in rows])
            for f in ("tp", "fp", "fn", "ignored", "unexpected")
        ),
    )


def _nonneg(x: object, name: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < 0:
        msg = f"{name} must be a non-negative integer, got {x!r}"
        raise CheckpointError(msg)
    return x


def _int_array(x: object, shape: tuple[int, ...], name: str) -> IntArray:
    a = np.asarray(x)
    if a.size == 0:
        a = a.reshape(shape) if int(np.prod(shape)) == 0 else a
    if a.shape != shape or (a.size and a.dtype.kind not in "iu") or (a.size and a.min() < 0):
        msg = f"{name} must be non-negative integers of shape {shape}, got {a.shape} {a.dtype}"
        raise CheckpointError(msg)
    return a.astype(np.int64)
