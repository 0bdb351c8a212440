"""What one batch adds beyond its confusion counts (Boundary IoU, instances); accumulator checks.

:mod:`segiou.confusion` keeps the accumulator's logic; these are its arithmetic and checks.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from segiou._arrays import as_labels, to_numpy
from segiou._boundary import BandCounter, BoundaryWidth, boundary_counts
from segiou._count import MAX_WORD_TABLE, Lookup, Tally
from segiou._instances import InstanceCounter, InstanceTally
from segiou._resources import check_memory
from segiou._typing import CountMatrix, IntArray
from segiou._word_kernels import COPIES, fold_unfolded
from segiou.errors import CountOverflowError, IncompatibleMatrixError, ShapeMismatchError
from segiou.images import ImageRows
from segiou.labels import IdSpace, LabelSpec

__all__ = [
    "Counters",
    "Totals",
    "add_into",
    "check_fits",
    "check_mergeable",
    "count_extras",
    "held_interrupts",
    "n_images_of",
    "overflow_error",
    "row_multiset",
    "same_counting",
    "spec_lookup",
    "states_equal",
]


@functools.lru_cache(maxsize=64)
def check_fits(k: int, threads: int | None) -> None:
    """Refuse, before allocating, an accumulator whose tables would not fit in memory."""
    import numba

    workers = numba.get_num_threads() if threads is None else max(1, int(threads))
    # the counts, and per update one code table of (K+2)^2 cells per kernel thread plus the fold;
    # the word path's tables hold 8 counters a cell (and the short way's unfolded table one)
    cells = (k + 2) ** 2
    words = cells * COPIES * (workers + 1) if cells * COPIES <= MAX_WORD_TABLE else 0
    need = 8 * (k * k + cells * (workers + 2) + words)
    check_memory(need, f"an accumulator of {k:,} classes ({workers} kernel thread(s))",
                 "Check the number of classes, or pass threads=1")  # fmt: skip


def same_counting(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Return a label spec's dict (``LabelSpec.to_dict``) with its ignore values sorted.

    The ignore values act as a set when counting: two specs that differ only in their order
    count identically (their states merge and compare equal). The order is kept in the spec
    itself: reading colour-coded masks takes the first ignore value for unknown colours.
    """
    out = dict(spec)
    if isinstance(out.get("ignore"), list):
        out["ignore"] = sorted(out["ignore"])
    return out


def check_mergeable(
    mine: Mapping[str, Any], theirs: Mapping[str, Any], a: LabelSpec, b: LabelSpec
) -> None:
    """Refuse to merge two states whose settings (``_config`` of each) or label specs differ.

    Raises
    ------
    IncompatibleMatrixError
        A setting or the label spec differs; both values (or the spec differences) are named.
    """
    for name in ("gt_ids", "pred_ids", "per_image", "on_unexpected", "boundary", "instances"):
        if mine[name] != theirs[name]:
            msg = (
                f"cannot merge: {name} is {mine[name]!r} here but {theirs[name]!r} in the "
                "other state; count both with the same settings"
            )
            raise IncompatibleMatrixError(msg)
    if same_counting(mine["labels"]) != same_counting(theirs["labels"]):
        fields = ("name", "classes", "ignore", "colors", "categories", "class_categories", "raw",
                  "instance_sizes")  # fmt: skip
        diffs = [d for f in fields if (d := _spec_difference(f, getattr(a, f), getattr(b, f)))]
        msg = (
            f"cannot merge states with different label specs ({a.num_classes} classes "
            f"{a.name!r} vs {b.num_classes} classes {b.name!r}); differences: "
            + "; ".join(diffs or ["the specs' JSON forms"])
        )
        raise IncompatibleMatrixError(msg)


def _spec_difference(field: str, x: Any, y: Any) -> str:
    """Name how one field of two label specs differs (``""``: it does not).

    A sequence names its first differing entry (whole: a prefix of both could be equal);
    ignore values are compared as a set (their order does not change what is counted).
    """
    if field == "ignore":
        return "" if set(x) == set(y) else f"ignore: {x!r} vs {y!r}"
    if x == y:
        return ""
    if not isinstance(x, tuple) or not isinstance(y, tuple):
        return f"{field}: {x!r:.200} vs {y!r:.200}"
    i = next((i for i, (u, v) in enumerate(zip(x, y, strict=False)) if u != v), None)
    if i is None:  # one is the other and more
        i = min(len(x), len(y))
        extra = x[i] if len(x) > len(y) else y[i]
        return (
            f"{field}: {len(x)} vs {len(y)} entries (from {field}[{i}] = {extra!r:.200}, on "
            f"{'this' if len(x) > len(y) else 'the other'} side only)"
        )
    return f"{field}[{i}]: {x[i]!r:.200} vs {y[i]!r:.200}"


def n_images_of(shape: tuple[int, ...]) -> int:
    """Return how many images masks of ``shape`` hold (leading axes are images; H x W is one)."""
    if len(shape) <= 2:
        return 1
    return int(np.prod(shape[:-2]))


class Totals:
    """An accumulator's counts and pixel totals, and the small calls not yet folded into them.

    ``_totals`` is ``[ignored, pixels, images, unfolded]`` in one int64 array: kernels add to
    it together with the counts, so that an update is whole whenever a kernel has returned
    (Ctrl-C arrives between bytecodes). Small plain batches are counted into the word table
    ``_unfolded`` (:mod:`segiou._stream`); reading :attr:`counts`, :attr:`void` or
    :attr:`n_ignored` folds it first (``_totals[3]`` says whether it holds pixels).
    """

    _totals: IntArray
    _counts: CountMatrix
    _void: IntArray
    _unfolded: IntArray | None
    _lock: Any  # threading.RLock (a factory in the stubs)

    def _fold(self) -> None:
        if self._totals[3]:
            with self._lock:
                if self._totals[3]:
                    fold_unfolded(self._unfolded, self._counts, self._void, self._totals)

    @property
    def counts(self) -> CountMatrix:
        """``counts[t, p]``: pixels of true class ``t`` predicted as class ``p`` (int64)."""
        self._fold()
        return self._counts

    @counts.setter
    def counts(self, value: CountMatrix) -> None:
        self._fold()
        self._counts = value

    @property
    def void(self) -> IntArray:
        """``void[t]``: pixels of true class ``t`` predicted as an ignore (void) value."""
        self._fold()
        return self._void

    @void.setter
    def void(self, value: IntArray) -> None:
        self._fold()
        self._void = value

    @property
    def n_pixels(self) -> int:
        """Every pixel seen: counted + void + ignored + unexpected (exact, at most 2**63 - 1)."""
        return int(self._totals[1])

    @property
    def _pixels(self) -> int:
        return int(self._totals[1])

    @_pixels.setter
    def _pixels(self, value: int) -> None:
        self._totals[1] = value

    @property
    def n_ignored(self) -> int:
        """Pixels of ignored ground truth (any prediction)."""
        self._fold()
        return int(self._totals[0])

    @n_ignored.setter
    def n_ignored(self, value: int) -> None:
        self._fold()
        self._totals[0] = value

    @property
    def n_images(self) -> int:
        """Images counted (leading axes of each batch; ``H x W`` is one)."""
        return int(self._totals[2])

    @n_images.setter
    def n_images(self, value: int) -> None:
        self._totals[2] = value


@contextlib.contextmanager
def held_interrupts() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back while the body runs, and deliver it when the body has run.

    Python raises ``KeyboardInterrupt`` in the main thread between two bytecodes, whichever
    thread the signal reached (blocking the signal in one thread would not stop it): an
    accumulator updated field by field could be left half updated (counted without its key, or
    keyed without its counts). In the main thread, SIGINT's handler is swapped for one that
    only notes the signal, then restored, and a noted signal is raised again (the previous
    handler runs). Other threads get no ``KeyboardInterrupt``: nothing to hold there. Costs
    ~6 us (two handler swaps): for the general way of ``update``, not the short way, whose
    kernels add everything at once.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    except (ValueError, TypeError, OSError):  # a handler Python cannot restore, or no signals
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if noted:
            signal.raise_signal(signal.SIGINT)


def add_into(acc: dict[int, int], new: Mapping[int, int]) -> None:
    """Add the counts ``new`` (value -> count) into ``acc``."""
    for v, c in new.items():
        acc[v] = acc.get(v, 0) + c


def overflow_error(have: int, adding: int) -> CountOverflowError:
    """Return the error for a pixel total that would pass ``2**63 - 1``."""
    msg = (
        f"counting {adding:,} more pixels into a state of {have:,} would pass 2**63 - 1, the "
        "largest exact count; nothing was added. Split the evaluation into several states"
    )
    return CountOverflowError(msg)


def states_equal(
    a: dict[str, Any], b: dict[str, Any], rows_a: ImageRows | None, rows_b: ImageRows | None
) -> bool:
    """Whether two states (``to_dict`` output, changed here) are equal, rows as multisets."""
    # a version-1 state's rows hold TP/FP/FN only: compare both sides in that form then
    dense = a["version"] == 1 or b["version"] == 1
    for d, rows in ((a, rows_a), (b, rows_b)):
        d.pop("writer")
        d.pop("version")
        d["labels"] = same_counting(d["labels"])
        d["image_rows"] = None if rows is None else row_multiset(rows, dense)
    return a == b


def row_multiset(rows: ImageRows, dense: bool) -> list[tuple[Any, ...]]:
    """Return per-image rows in a canonical order (row order is only history).

    ``dense``: compare TP/FP/FN rows (what a version-1 state keeps) instead of the entries.
    """
    if dense:
        tables = rows.dense()
        return sorted((n, *(tuple(np.atleast_1d(t[i]).tolist()) for t in tables))
                      for i, n in enumerate(rows.names))  # fmt: skip
    return sorted((n, g, rows.signature(i))
                  for i, (n, g) in enumerate(zip(rows.names, rows.given, strict=True)))  # fmt: skip


class Counters:
    """One :class:`BandCounter` and :class:`InstanceCounter` per thread, for one accumulator."""

    def __init__(self, spec: LabelSpec, lookup: Lookup, gt_ids: IdSpace, pred_ids: IdSpace,
                 instances: bool) -> None:  # fmt: skip
        self._args = (spec, lookup, gt_ids, pred_ids)
        self._local = threading.local()
        if instances:  # refuse a spec without instance sizes now, not at the first batch
            self.instances()

    @property
    def lookup(self) -> Lookup:
        """The accumulator's lookup."""
        return self._args[1]

    def band(self) -> BandCounter:
        """Return this thread's band counter."""
        bc: BandCounter | None = getattr(self._local, "band", None)
        if bc is None:
            bc = self._local.band = BandCounter(self._args[1])
        return bc

    def instances(self) -> InstanceCounter:
        """Return this thread's instance counter."""
        ic: InstanceCounter | None = getattr(self._local, "inst", None)
        if ic is None:
            spec, _, gt_ids, pred_ids = self._args
            ic = self._local.inst = InstanceCounter(spec, gt_ids, pred_ids)
        return ic


def _images(a: np.ndarray) -> np.ndarray:
    """Return ``a`` as ``(images, H, W)``, as the counting kernels read it."""
    if a.ndim < 3:
        return a.reshape((1,) * (3 - a.ndim) + a.shape)
    return a.reshape(int(np.prod(a.shape[:-2])), a.shape[-2], a.shape[-1])


def image_counts(rows: ImageRows, n: int) -> tuple[IntArray, IntArray, IntArray]:
    """Return per image and class: ground-truth pixels, true positives, predictions at valid gt.

    From the images' confusion entries. Ground-truth pixels are those the counts hold (a
    class or void predicted): an unexpected prediction is left out, as the counts leave it.
    """
    k = rows.k
    gt = np.zeros((n, k), dtype=np.int64)
    tp = np.zeros((n, k), dtype=np.int64)
    pv = np.zeros((n, k), dtype=np.int64)
    cls = (rows.gt < k) & (rows.pred <= k)
    np.add.at(gt, (rows.image[cls], rows.gt[cls]), rows.count[cls])
    valid = cls & (rows.pred < k)
    np.add.at(pv, (rows.image[valid], rows.pred[valid]), rows.count[valid])
    same = valid & (rows.gt == rows.pred)
    np.add.at(tp, (rows.image[same], rows.pred[same]), rows.count[same])
    return gt, tp, pv


def _as_read(a: object, name: str, where: str) -> np.ndarray:
    """:func:`as_labels`, a bool mask read as numpy reads it: any non-zero byte is 1 (a copy).

    A bool mask may hold other bytes than 0 and 1 (``.view(bool)``): Boundary IoU compares
    values, and a byte 2 beside a byte 1 would be two classes.
    """
    arr = to_numpy(a, name, where)
    if arr.dtype == np.bool_:
        read: np.ndarray = (arr.view(np.uint8) != 0).view(np.uint8)
        return read
    return as_labels(arr, name, where)


def count_extras(
    gt: object,
    pred: object,
    instances: object | None,
    tally: Tally,
    *,
    boundary: BoundaryWidth | None,
    counters: Counters,
    per_image: bool,
    where: str,
) -> tuple[IntArray | None, InstanceTally | None]:
    """Boundary IoU counts and instances of one batch (every 2-D image of it).

    Returns ``(boundary, instances)``: ``(images, 3, K)`` counts (``(1, 3, K)`` summed unless
    ``per_image``) or ``None``, and the batch's instances (image indices within the batch) or
    ``None``.

    Raises
    ------
    ShapeMismatchError
        Instance ids of another shape than the ground truth.
    InstanceIdError, LabelDtypeError
        Instance values that are no instance of the spec, or not integers.
    """
    if boundary is None and instances is None:
        return None, None
    g2 = _as_read(gt, "gt", where)
    g = _images(g2)
    p = _images(_as_read(pred, "pred", where))
    n = g.shape[0]
    k = tally.void.shape[0]
    bnd = None
    if boundary is not None:
        band = counters.band()
        d = boundary.pixels_for(g.shape[1], g.shape[2])
        odd = bool(tally.unexpected_pred)  # (only then can a prediction be unexpected)
        sums = [band.count(g[i], p[i], 0, g.shape[1], d, unexpected=odd) for i in range(n)]
        if per_image and tally.images is not None:
            gp, tp, pv = image_counts(tally.images, n)
            rows = [boundary_counts(s, gp[i], tp[i], pv[i]) for i, s in enumerate(sums)]
            bnd = np.stack(rows) if rows else np.zeros((0, 3, k), dtype=np.int64)
        else:
            total = np.sum(sums, axis=0) if sums else np.zeros((8, k), dtype=np.int64)
            bnd = boundary_counts(total, *tally.class_sums())[None]
    inst = None
    if instances is not None:
        a = as_labels(instances, "instances", where)
        if a.shape != g2.shape:
            msg = (
                f"{where}: instances have shape {a.shape} but the ground truth "
                f"{g2.shape}; give the instance ids of the same images"
            )
            raise ShapeMismatchError(msg)
        a3 = _images(a)
        ic = counters.instances()  # (this thread's: kept across calls)
        parts = []
        ic.discard()  # what an interrupted call added (Ctrl-C between add and finish)
        try:
            for i in range(n):
                ic.add(a3[i], g[i], p[i], where=f"{where} image {i}" if n > 1 else where)
                parts.append(ic.finish(image=i))
        except BaseException:
            ic.discard()
            raise
        inst = InstanceTally.concat(parts, ic.n_categories)
    return bnd, inst


@functools.lru_cache(maxsize=64)
def spec_lookup(spec: LabelSpec, gt_ids: IdSpace, pred_ids: IdSpace) -> Lookup:
    """Return the :class:`Lookup` of a spec and id spaces, built once (it is immutable)."""
    return Lookup(spec.num_classes, spec.gt_map(gt_ids), spec.pred_map(pred_ids))
