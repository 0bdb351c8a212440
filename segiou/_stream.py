"""The short way of ``update``: plain batches counted and added with the least Python.

Training and evaluation loops send one image (or a few) per call, often small: a 64 x 64 tile
is counted in about 2 us, so what an ``update`` costs is its Python around the kernel.
:class:`StreamCounter` takes the common case (two C-contiguous numpy masks of one shape, 8-bit
or wider integers such as ``argmax`` output, an accumulator without per-image rows, Boundary
IoU or instances, an optional batch key) with the least Python. A small plain 8-bit batch is
counted and added in one kernel call (:func:`segiou._word_kernels.add_unfolded`: into a table
the accumulator folds when its counts are read, for up to 62 classes); two small ``uint8``
masks without a key go there with no Python step but the type and dtype tests and the lock
(:func:`segiou._word_kernels.add_small` checks shapes and layout itself; ``add_small_wide``
does the same for a wider side, such as ``argmax`` output); large batches are
counted on all threads, wider dtypes narrowed, then added (two calls). All or nothing, under
the accumulator's lock. Anything else (other dtypes or layouts, unexpected values, a pixel total
about to overflow, a key counted before) is left to the general way, which validates and
reports in full.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numba as _nb
import numpy as np

from segiou import _word_kernels as _words
from segiou._count import Lookup, sparse_total, word_tables
from segiou._jit import run_parallel
from segiou._typing import CountMatrix, IntArray

__all__ = ["Accumulator", "StreamCounter"]


class Accumulator(Protocol):
    """What the short way reads and adds to (:class:`segiou.ConfusionMatrix`)."""

    keys: set[str]
    threads: int | None
    _counts: CountMatrix
    _void: IntArray
    _totals: IntArray  # ignored pixels, pixels, images, unfolded (segiou._batch.Totals)
    _unfolded: IntArray | None
    _pending: dict[str, object]
    _lock: AbstractContextManager[Any]

    @property
    def num_classes(self) -> int: ...


#: From this many pixels a batch is counted on all of Numba's threads (a 512 x 512 image:
#: 1.4-1.5x faster on two threads than on one).
_PARALLEL_MIN_PIXELS = _words.SMALL_MAX_PIXELS + 1
#: Largest word table (counters) an accumulator keeps unfolded between small calls (256 KiB,
#: up to 62 classes); with more classes each small call folds its own table (a fold reads
#: the whole table: worth it only for tables that are cheap to keep).
_MAX_UNFOLDED = 1 << 15
_U8 = np.dtype(np.uint8)
#: Names read on every call, bound once (a global and an attribute lookup each: ~0.1 us a call
#: of the ~2.7 us of a constant 64 x 64 tile)
_NDARRAY = np.ndarray
_OTHER, _ADDED = _words.OTHER, _words.ADDED


def _takes(dt: np.dtype) -> bool:
    """Whether the short way reads masks of this dtype (see :meth:`StreamCounter._codes`)."""
    return (dt.kind in "iub" and dt.isnative and dt.itemsize <= 8
            and not (dt.kind == "u" and dt.itemsize == 8))  # fmt: skip


#: Tables at least this wide (300 classes) leave batches of few pixels for them to the general
#: way, which counts their cells (:func:`~segiou._count.sparse_total`): a 64 x 64 ``uint16``
#: batch at 510 classes 1.50 -> 0.22 ms. Below, the word table's fold costs less than the cells'
#: ~0.1 ms for a batch of few classes (measured at 254 / 270 / 280 / 300 classes: words 81 /
#: 92 / 94 / 106 us against cells 109 / 124 / 107 / 108; of 128 classes the cells won).
_CELLS_FROM_WIDTH = 302

#: Per-thread scratch tables of the short way (the kernels leave them zeroed).
_scratch = threading.local()
#: Word-path byte codes of two dtypes (gt, pred: one array, one kernel argument), whether each
#: side is viewed as uint8 first, and (a side wider than 8 bits: narrowed) the lookup tables
#: of blocks that hold values beyond a byte.
_Codes = tuple[IntArray, bool, bool, tuple[IntArray, int, int, IntArray, int, int] | None]


class StreamCounter:
    """Count and add plain batches (8-bit masks, or wider integers narrowed) with little Python.

    Parameters
    ----------
    lookup : Lookup
        The accumulator's raw value -> class mapping.
    """

    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup
        self.size = lookup.word_table_size
        self.width = lookup.num_classes + 2
        #: whether small batches go to the accumulator's unfolded table (few classes)
        self.unfolded = self.size <= _MAX_UNFOLDED
        #: word-path byte codes per (gt dtype, pred dtype), as numpy shows the dtypes; filled
        #: on first use (None: dtypes for the general way)
        self.codes: dict[tuple[np.dtype, np.dtype], _Codes | None] = {}
        #: the byte codes of two uint8 masks when small batches go to the unfolded table:
        #: such batches take one kernel call (:func:`segiou._word_kernels.add_small`)
        codes = self._codes(_U8, _U8) if self.unfolded else None
        self.small = None if codes is None else codes[0]

    @classmethod
    def of(cls, lookup: Lookup) -> StreamCounter:
        """Return the short way of a lookup, made once (accumulators of one spec share it)."""
        made: StreamCounter | None = lookup.__dict__.get("_stream")
        if made is None:
            made = lookup.__dict__.setdefault("_stream", cls(lookup))
        return made

    def _codes(self, g: np.dtype, p: np.dtype) -> _Codes | None:
        """Byte codes of two dtypes, kept for the next call; None: the general way.

        8-bit dtypes (uint8, int8, bool) and, narrowed, wider integers in native byte order,
        but not ``uint64`` (values of 2**63 and more need the general way's care) nor two
        8-byte sides (no faster narrowed).
        """
        codes = None
        if _takes(g) and _takes(p) and g.itemsize + p.itemsize < 16:
            lk = self.lookup.for_bool(g.kind == "b", p.kind == "b")
            both8 = g.itemsize == p.itemsize == 1
            gcode, pcode = lk.word_codes(g if g.itemsize == 1 and g.kind != "b" else _U8,
                                         p if p.itemsize == 1 and p.kind != "b" else _U8)  # fmt: skip
            # 8-bit sides are read as uint8 (the codes' index); beside a wider side an int8
            # keeps its dtype (blocks beyond a byte go through the lookup tables, by value)
            codes = (np.stack([gcode, pcode]), g.kind == "b" or (both8 and g is not _U8),
                     p.kind == "b" or (both8 and p is not _U8),
                     None if both8 else lk.word_luts())  # fmt: skip
        self.codes[(g, p)] = codes
        return codes

    def add(self, cm: Accumulator, gt: object, pred: object, key: object) -> bool:
        """Count ``gt``/``pred`` into ``cm`` if they qualify; whether they were counted.

        ``False`` (nothing counted, nothing changed) when the batch is not two C-contiguous
        numpy arrays of one non-empty shape and dtypes it takes (:meth:`_codes`), when ``key``
        was counted before, or when
        the batch holds unexpected values or would overflow the pixel total: the general way
        then counts it, or refuses it with the full message. Every step here costs tens of
        nanoseconds against ~2 us for counting a 64 x 64 tile: keep it lean.
        """
        if type(gt) is not _NDARRAY or type(pred) is not _NDARRAY:
            return False
        # the commonest case first, in one kernel call: two small uint8 masks, no key, few
        # classes, the table made (``is``: numpy's uint8 dtype is one object; an equal copy of
        # it merely takes the way below)
        table = cm._unfolded
        if (key is None and gt.dtype is _U8 and pred.dtype is _U8 and table is not None
                and self.small is not None):  # fmt: skip
            # ``with``, not acquire() then try (~0.25 us less here): Ctrl-C arriving just after
            # acquire() returned left the lock held, and every other thread then blocked
            with cm._lock:
                status = _words.add_small(gt, pred, self.small, table, cm._totals)
            if status != _OTHER:
                return status == _ADDED  # type: ignore[no-any-return]
        dtypes = (gt.dtype, pred.dtype)
        codes = self.codes.get(dtypes)
        if codes is None and (dtypes in self.codes or (codes := self._codes(*dtypes)) is None):
            return False  # dtypes for the general way
        if key is None and codes[3] is not None and self.unfolded and not (codes[1] or codes[2]):
            # a small wider batch (``argmax`` output, one image a call): one kernel call too
            with cm._lock:
                status = _words.add_small_wide(gt, pred, codes[0], codes[3], self._table(cm),
                                               cm._totals)  # fmt: skip
            if status != _words.OTHER:
                return status == _words.ADDED  # type: ignore[no-any-return]
        n = gt.size
        if (n == 0 or gt.shape != pred.shape or not gt.flags.c_contiguous
                or not pred.flags.c_contiguous):  # fmt: skip
            return False
        g, p = gt.ravel(), pred.ravel()  # views (C-contiguous)
        if codes[1]:  # int8, bool: the byte codes are indexed by unsigned bytes
            g = g.view(_U8)
        if codes[2]:
            p = p.view(_U8)
        if self.width >= _CELLS_FROM_WIDTH and sparse_total(self.lookup, n):
            return False  # few pixels for a large table: the general way counts their cells
        images = 1 if gt.ndim <= 2 else n // (gt.shape[-1] * gt.shape[-2])
        if (key is None and n < _PARALLEL_MIN_PIXELS and self.unfolded
                and codes[3] is None):  # the common case  # fmt: skip
            with cm._lock:
                status = _words.add_unfolded(g, p, codes[0], self._table(cm), cm._totals, images)
            return status == _words.ADDED  # type: ignore[no-any-return]
        return self._add_other(cm, g, p, codes, images, key)

    def _table(self, cm: Accumulator) -> IntArray:
        """Return ``cm``'s unfolded word table, made on first use (the caller holds its lock)."""
        table = cm._unfolded
        if table is None:
            table = cm._unfolded = np.zeros(self.size, dtype=np.int64)
        return table

    def _add_small(self, cm: Accumulator, g: IntArray, p: IntArray, codes: _Codes,
                   images: int) -> int:  # fmt: skip
        """Count and add a small batch in one kernel call (the caller holds ``cm._lock``)."""
        if self.unfolded:
            return _words.add_unfolded(g, p, codes[0], self._table(cm), cm._totals, images)  # type: ignore[no-any-return]
        tabs, out = self._scratch()
        return _words.add_u8(g, p, codes[0][0], codes[0][1], tabs, out, cm._counts,  # type: ignore[no-any-return]
                             cm._void, cm._totals, images)  # fmt: skip

    def _scratch(self) -> tuple[IntArray, IntArray]:
        """Return the calling thread's one word table and folded table (kept zeroed).

        One table size per thread (an accumulator of another spec replaces them): kept for
        every size, a service counting runs of many specs grew without bound.
        """
        sc: tuple[int, IntArray, IntArray] | None = getattr(_scratch, "small", None)
        if sc is None or sc[0] != self.size:
            sc = _scratch.small = (self.size, np.zeros((1, self.size), dtype=np.int64),
                                   np.zeros((self.width, self.width), dtype=np.int64))  # fmt: skip
        return sc[1], sc[2]

    def _folded(self) -> IntArray:
        """Return the calling thread's zeroed folded table (one width per thread)."""
        out: IntArray | None = getattr(_scratch, "folded", None)
        if out is None or out.shape[0] != self.width:
            out = _scratch.folded = np.zeros((self.width, self.width), dtype=np.int64)
        return out

    def _add_other(self, cm: Accumulator, g: IntArray, p: IntArray, codes: _Codes,
                   images: int, key: object) -> bool:  # fmt: skip
        """Count and add what :meth:`add` does not in one call (the caller checked it).

        Keyed batches, large ones (on all threads, one call), wider dtypes (narrowed, then
        added by :func:`settle`), and small batches of many classes.
        """
        n = g.size
        luts = codes[3]
        big = n >= _PARALLEL_MIN_PIXELS
        workers = 1
        if big:
            workers = _nb.get_num_threads() if cm.threads is None else max(1, cm.threads)
        k = None if key is None else str(key)
        with cm._lock:
            if k is not None and (k in cm.keys or k in cm._pending):
                return False  # the general way refuses it, saying why
            totals = cm._totals
            before = int(totals[1]) if k is not None else 0
            settled = True
            try:
                if k is not None:
                    cm.keys.add(k)  # before counting: see the finally below
                if luts is None and not big:
                    status = self._add_small(cm, g, p, codes, images)
                elif luts is None:  # one call: counted, folded and added
                    tabs, out = word_tables(workers, self.size), self._folded()
                    if workers > 1:
                        status = run_parallel(_words.add_u8_parallel, g, p, codes[0], tabs, out,
                                              cm._counts, cm._void, totals, images)  # fmt: skip
                    else:
                        status = _words.add_u8(g, p, codes[0][0], codes[0][1], tabs, out,
                                               cm._counts, cm._void, totals, images)  # fmt: skip
                else:  # narrowed, then added
                    tabs, out = word_tables(workers, self.size), self._folded()
                    settled = False
                    wide = _words.count_wide_parallel if workers > 1 else _words.count_wide_serial
                    run_parallel(wide, g, p, codes[0][0], codes[0][1], luts, tabs, out)
                    status = _words.settle(out, cm._counts, cm._void, totals, n, images)
                    settled = True  # settle leaves out zeroed
            finally:
                # counted or not, the key says so (also when Ctrl-C is raised just after a
                # kernel returned: the pixel total tells whether the batch was added)
                if k is not None and int(totals[1]) == before:
                    cm.keys.discard(k)
                if not settled:  # interrupted between counting and adding: not counted
                    out[:] = 0
        return bool(status == _words.ADDED)
