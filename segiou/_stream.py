"""The fixed cost of one ``update`` call: small plain batches counted in two kernel calls.

Training and evaluation loops send one image (or a few) per call, often small: a 64 x 64 tile
is counted in about a microsecond, so what an ``update`` costs is its Python around the
kernel. :class:`StreamCounter` is the short way for the common case (two C-contiguous 8-bit
numpy masks of the same shape, under :data:`segiou._count._WORD_PATH_MIN_PIXELS` pixels, an
accumulator without per-image rows, Boundary IoU or instances): one kernel counts the pixels
straight into a per-thread small code table, a second one adds it into the accumulator (under
its lock). Anything else (other dtypes, strides, unexpected values, a pixel total about to
overflow) returns ``None`` and takes the general way, which validates and reports in full.
"""

from __future__ import annotations

import threading

import numpy as np

from segiou import _kernels
from segiou._count import Lookup
from segiou._typing import IntArray

__all__ = ["StreamCounter"]

#: Largest batch (pixels) taken the short way: the same limit as the small-table kernel's.
_MAX_PIXELS = 1 << 20


class StreamCounter:
    """Count small plain 8-bit batches with the least Python per call.

    Parameters
    ----------
    lookup : Lookup
        The accumulator's raw value -> class mapping.
    """

    def __init__(self, lookup: Lookup) -> None:
        self.k = lookup.num_classes
        self.copies = lookup.copies
        self.size = lookup.table_size
        u8, i8 = np.dtype(np.uint8), np.dtype(np.int8)
        #: byte-value offsets per (gt dtype, pred dtype); both dtypes as numpy shows them
        self.offsets = {(g, p): lookup.small_offsets(g, p) for g in (u8, i8) for p in (u8, i8)}
        self._local = threading.local()

    def count(self, gt: object, pred: object) -> IntArray | None:
        """Count a small plain pair into this thread's table; ``None`` if it does not qualify.

        Returns
        -------
        ndarray of int64 or None
            The per-thread small table (``(K+2)^2 x copies`` counters), to be passed to
            :meth:`add` or :meth:`clear`; ``None`` when ``gt``/``pred`` are not two
            C-contiguous 8-bit numpy arrays of one shape with at most ``_MAX_PIXELS`` pixels.
        """
        if type(gt) is not np.ndarray or type(pred) is not np.ndarray:
            return None
        offs = self.offsets.get((gt.dtype, pred.dtype))
        if (offs is None or gt.shape != pred.shape or not 0 < gt.size < _MAX_PIXELS
                or not (gt.flags.c_contiguous and pred.flags.c_contiguous)):  # fmt: skip
            return None
        local = self._local
        t: IntArray | None = getattr(local, "table", None)
        if t is None:
            t = local.table = np.zeros(self.size, dtype=np.int64)
        elif local.dirty:  # a call interrupted between count and add (Ctrl-C) left its pixels
            t[:] = 0
        local.dirty = True  # until add() or clear() has emptied it
        _kernels.count_small(gt, pred, offs[0], offs[1], self.copies - 1, t)
        return t

    def add(self, t: IntArray, counts: IntArray, void: IntArray, fits: bool) -> int | None:
        """Add table ``t`` into ``counts``/``void`` and zero it; return the ignored pixels.

        ``None`` (nothing added, ``t`` zeroed) when ``t`` holds unexpected pixels or the
        accumulator's pixel total would not ``fit``: the caller counts the batch again the
        general way, which reports them.
        """
        if fits:
            ignored, unexpected = _kernels.fold_small_clear(t, self.k, self.copies, counts, void)
            if not unexpected:
                self._local.dirty = False
                return int(ignored)
        self.clear(t)
        return None

    def clear(self, t: IntArray) -> None:
        """Zero a table :meth:`count` filled but that is not to be added."""
        t[:] = 0
        self._local.dirty = False
