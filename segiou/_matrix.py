"""Count matrices as the metric reducers read them: checked, then ratios of their sums.

A reducer's input is a user's array as often as an accumulator's: every rule that keeps a
wrong count from becoming a number lives here (negative counts, uint64 counts that would wrap
in int64, totals past ``2**63 - 1``, counts that are not integers).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from segiou._typing import CountMatrix, FloatArray, IntArray
from segiou.errors import CountDtypeError, CountMatrixError

__all__ = ["check_counts", "ratio"]

_INT64_MAX = int(np.iinfo(np.int64).max)


def check_counts(cm: CountMatrix, void: IntArray | None) -> tuple[CountMatrix, IntArray]:
    """Return a count matrix and void counts as int64, refusing what no accumulator holds.

    Raises
    ------
    CountMatrixError
        Not square, ``void`` of the wrong shape, a negative count, a count or total above
        ``2**63 - 1`` (it would wrap).
    CountDtypeError
        Counts that are not integers.
    """
    cm = np.asarray(cm)
    if cm.ndim != 2 or cm.shape[0] != cm.shape[1]:
        msg = f"count matrix must be square (K x K), got shape {cm.shape}"
        raise CountMatrixError(msg)
    k = cm.shape[0]
    v = np.zeros(k, dtype=np.int64) if void is None else np.asarray(void)
    if v.shape != (k,):
        msg = f"void must have one count per class, shape ({k},), got {v.shape}"
        raise CountMatrixError(msg)
    for what, a in (("count matrix", cm), ("void", v)):
        if a.dtype.kind not in "iu":
            msg = f"{what} must hold integer counts, got dtype {a.dtype}"
            raise CountDtypeError(msg)
        if not a.size:
            continue
        if a.min() < 0:  # e.g. a difference of two states taken the wrong way round
            where = tuple(int(i) for i in np.unravel_index(int(np.argmin(a)), a.shape))
            msg = f"{what} holds a negative count ({int(a.min())} at {where}); counts are >= 0"
            raise CountMatrixError(msg)
        if a.dtype.kind == "u" and a.max() > _INT64_MAX:  # uint64: it would wrap to negative
            where = tuple(int(i) for i in np.unravel_index(int(np.argmax(a)), a.shape))
            msg = (
                f"{what} holds a count above 2**63 - 1 ({int(a.max())} at {where}); counts "
                "are int64 (a wrapped or corrupt count?)"
            )
            raise CountMatrixError(msg)
    if float(cm.sum(dtype=np.float64)) + float(v.sum(dtype=np.float64)) >= 2.0**62:  # cheap
        total = int(cm.sum(dtype=object)) + int(v.sum(dtype=object))  # exact, rarely needed
        if total > _INT64_MAX:  # per-class sums would wrap; no accumulator holds this many
            msg = (
                f"count matrix and void hold {total} pixels in all, more than 2**63 - 1; "
                "counts are int64 (a wrapped or corrupt count?)"
            )
            raise CountMatrixError(msg)
    return cm.astype(np.int64, copy=False), v.astype(np.int64, copy=False)


def ratio(num: npt.ArrayLike, den: npt.ArrayLike) -> FloatArray:
    """``num / den`` elementwise in float64, ``nan`` where ``den`` is 0."""
    n = np.asarray(num, dtype=np.float64)
    d = np.asarray(den, dtype=np.float64)
    out: FloatArray = np.divide(n, d, out=np.full(n.shape, np.nan), where=d > 0)
    return out
