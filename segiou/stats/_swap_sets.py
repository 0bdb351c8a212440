"""Exact enumeration for the swap test, row by row: each class over the units where it differs.

A class's IoU is a function of its own summed TP, FP and FN, and a swap moves them only through
the units where that class's counts differ between the runs: swapping any other unit changes
nothing of it. Over the ``2**d`` swaps of all ``d`` differing units, each swap of the class's
``d_c`` units recurs ``2**(d - d_c)`` times, so the share of swaps reaching the observed
difference, the exact p-value, is the share over the ``2**d_c`` swaps of its own units, and
half of them suffice (a swap set and its complement give the same ``|delta*|``). That is cheap
for a class held by few units however many units differ in all, where random swaps estimated
it near alpha by the seed's luck. mIoU depends on every class, so on every differing unit: it is
enumerated when its ``2**(d-1)`` swap sets times the ``3K`` columns are few.

Sums over the swap sets are built by doubling (the sums over the subsets of the first ``j``
units, then those plus unit ``j + 1``), in integers, in blocks of bounded size: each set costs
its columns, not its units times its columns as a product with a 0/1 matrix would.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from segiou._typing import FloatArray, IntArray
from segiou.conventions import Convention

__all__ = [
    "CLASS_SETS",
    "CLASS_UNITS",
    "MIOU_CELLS",
    "columns",
    "enumerate_classes",
    "enumerate_miou",
    "exact_classes",
    "exact_float",
    "exact_miou",
    "half_sums",
    "swapped",
    "tally",
]

#: A class differing in at most this many units is enumerated exactly (``2**19`` swap sets of
#: 3 columns each)...
CLASS_UNITS = 20
#: ... while the classes enumerated beyond ``permutations`` swap sets each, taken from the
#: fewest units up, total at most this many swap sets (bounds the cost with many classes).
CLASS_SETS = 1 << 24
#: mIoU is enumerated exactly when its swap sets times its ``3K`` columns are at most this.
MIOU_CELLS = 1 << 24
#: Matrix entries of one block of swap sets.
_BLOCK_CELLS = 1 << 20
#: Float64 sums of integers are exact below this.
_EXACT = 2**53


def exact_miou(d: int, k: int, permutations: int) -> bool:
    """Whether mIoU's ``2**(d-1)`` swap sets are enumerated (else ``permutations`` drawn).

    Parameters
    ----------
    d : int
        Units where the runs' counts differ.
    k : int
        Number of classes (each swap set costs ``3K`` columns).
    permutations : int
        The random swaps asked for: enumeration is chosen whenever it needs no more sets.

    Returns
    -------
    bool
    """
    if d <= 1:
        return True
    sets = 1 << (d - 1)
    return sets <= permutations or sets * 3 * k <= MIOU_CELLS


def exact_classes(differing: IntArray, tested: npt.NDArray[np.bool_], permutations: int) -> (
    npt.NDArray[np.bool_]
):  # fmt: skip
    """Which classes are enumerated exactly over their own differing units.

    Parameters
    ----------
    differing : ndarray of int64, shape (K,)
        Units where each class's TP, FP or FN differ.
    tested : ndarray of bool, shape (K,)
        Classes with a defined, nonzero observed difference (the others' p-value is ``nan`` or
        1 whatever the swaps: exact, and nothing to enumerate).
    permutations : int
        The random swaps asked for.

    Returns
    -------
    ndarray of bool, shape (K,)
        ``True`` where every swap is enumerated: at most one unit differs, or the class's
        ``2**(d_c-1)`` swap sets are at most ``permutations``, or ``d_c <=`` :data:`CLASS_UNITS`
        while the total of such sets stays within :data:`CLASS_SETS` (fewest units first).
    """
    out = ~tested | (differing <= 1)
    budget = CLASS_SETS
    for c in np.argsort(differing, kind="stable"):
        if out[c]:
            continue
        sets = 1 << (int(differing[c]) - 1)
        if sets <= permutations:
            out[c] = True
        elif differing[c] <= CLASS_UNITS and sets <= budget:
            out[c] = True
            budget -= sets
    return out


def _all_sums(x: IntArray) -> IntArray:
    """Return the sums of ``x``'s rows over each of its ``2**rows`` subsets: ``(2**rows, w)``."""
    out = np.zeros((1 << x.shape[0], x.shape[1]), dtype=x.dtype)
    for j, row in enumerate(x):
        n = 1 << j
        np.add(out[:n], row, out=out[n : 2 * n])
    return out


def half_sums(x: IntArray, start: IntArray) -> Iterator[IntArray]:
    """Yield, in blocks, ``start`` plus the sums of ``x``'s rows over the subsets without row 0.

    Parameters
    ----------
    x : ndarray of int64 or float64, shape (d, w)
        Each unit's difference of counts, ``d >= 1``.
    start : ndarray, shape (w,)
        Added to every sum (the baseline's counts: the sums are then the baseline side's
        counts after each swap set).

    Yields
    ------
    ndarray, shape (rows, w)
        Blocks of at most about :data:`_BLOCK_CELLS` entries (one row at least), each of the
        ``2**(d-1)`` subsets once over all blocks.
    """
    rest = x[1:]
    m, w = rest.shape
    low_n = 0
    while low_n < m and (2 << low_n) * w <= _BLOCK_CELLS:
        low_n += 1
    low = _all_sums(rest[:low_n]) + start
    high = rest[low_n:]
    hm = high.shape[0]
    shifts = np.arange(hm, dtype=np.int64)
    step = max(1, _BLOCK_CELLS // max(w * max(hm, 1), 1))
    for first in range(0, 1 << hm, step):
        idx = np.arange(first, min(1 << hm, first + step), dtype=np.int64)
        bits = ((idx[:, None] >> shifts) & 1).astype(x.dtype)
        for row in bits @ high:
            yield low + row


def columns(x: IntArray, k: int, classes: IntArray, conv: Convention) -> IntArray:
    """Return ``[tp | tp + fp + fn | tp + fn]`` of ``classes`` from ``[tp | fp | fn]`` rows.

    The last block (ground-truth pixels) only when the convention averages over the classes
    with ground truth (its fill then applies to a class with none); what the scores need.
    """
    return _parts([x[..., classes + o * k] for o in range(3)], conv)


def _parts(counts: list[IntArray], conv: Convention) -> IntArray:
    tp, fp, fn = counts
    parts = [tp, tp + fp + fn] + ([tp + fn] if conv.mean_over == "gt" else [])
    return np.concatenate(parts, axis=-1)


def _filled(raw: FloatArray, gtc: FloatArray, conv: Convention) -> FloatArray:
    """Give a class without ground truth the convention's fill (``gt``: it is not scored)."""
    out = raw.copy()
    out[(gtc <= 0) & ~np.isnan(raw)] = conv.fill
    return out


def _mean(raw: FloatArray, gtc: FloatArray | None, conv: Convention) -> FloatArray:
    """Row-wise mIoU from raw IoU, as ``metric_replicates`` averages (``all``: nan is 0)."""
    if conv.mean_over == "all":
        out: FloatArray = np.nan_to_num(raw, nan=0.0).sum(axis=-1) / raw.shape[-1]
        return out
    use = ~np.isnan(raw) if gtc is None else ~np.isnan(raw) & (gtc > 0)
    total = np.where(use, raw, 0.0).sum(axis=-1)
    count = use.sum(axis=-1).astype(np.float64)
    mean: FloatArray = np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)
    return mean


def swapped(
    a: FloatArray, total: FloatArray, g: int, conv: Convention, miou: bool
) -> tuple[FloatArray, FloatArray | None]:
    """Score a block of swap sets: each class's IoU difference, and mIoU's when asked.

    The values :func:`segiou.stats.metric_replicates` gives (``iou``: a class in neither mask
    is ``nan``; under ``gt`` a class without ground truth gets the fill; ``miou``), from fewer
    columns: ``tp``, ``tp + fp + fn`` and, under ``gt``, ``tp + fn`` per class.

    Parameters
    ----------
    a : ndarray, shape (rows, 2g) or (rows, 3g)
        The baseline side's :func:`columns` after each swap set (the candidate side's are
        ``total - a``: a swap moves counts from one run to the other).
    total : ndarray, shape (2g,) or (3g,)
        Both runs' columns summed.
    g : int
        Classes in the columns.
    conv : Convention
        How classes are scored and averaged.
    miou : bool
        Also the mean's difference (the columns then hold every class).

    Returns
    -------
    iou : ndarray, shape (rows, g)
        Candidate minus baseline IoU per class (``nan``: undefined in either).
    miou : ndarray, shape (rows,) or None
    """
    tpa, dena = a[:, :g], a[:, g : 2 * g]
    with np.errstate(invalid="ignore", divide="ignore"):  # (0 / 0 = nan: tp <= den)
        ra = tpa / dena
        rb = (total[:g] - tpa) / (total[g : 2 * g] - dena)
    if conv.mean_over != "gt":  # every class with a defined IoU is scored
        return rb - ra, (_mean(rb, None, conv) - _mean(ra, None, conv)) if miou else None
    ga = a[:, 2 * g :]
    gb = total[2 * g :] - ga
    star = _filled(rb, gb, conv) - _filled(ra, ga, conv)
    return star, (_mean(rb, gb, conv) - _mean(ra, ga, conv)) if miou else None


def exact_float(x: IntArray, *totals: IntArray) -> bool:
    """Whether float64 sums of any rows of ``x`` added to ``totals`` are exact integers."""
    reach = int(np.abs(x).sum(axis=0).max(initial=0))
    return reach + max(int(np.abs(t).max(initial=0)) for t in totals) < _EXACT


def tally(star: FloatArray, thr: FloatArray, hits: IntArray, defined: IntArray) -> None:
    """Count the defined swapped differences and those reaching the threshold (in place)."""
    defined += star.shape[0] - np.isnan(star).sum(axis=0)
    hits += (np.abs(star) >= thr).sum(axis=0)  # (nan: False)


def enumerate_classes(
    diff: IntArray,
    changed: npt.NDArray[np.bool_],
    classes: IntArray,
    sa: IntArray,
    sb: IntArray,
    k: int,
    conv: Convention,
    thr: FloatArray,
) -> tuple[IntArray, IntArray]:
    """Exact hits and defined counts of classes that differ in the same number of units.

    Parameters
    ----------
    diff : ndarray of int64, shape (m, 3K)
        Each unit's candidate minus baseline ``[tp | fp | fn]``.
    changed : ndarray of bool, shape (m, K)
        Where each class's counts differ.
    classes : ndarray of int64, shape (g,)
        The classes, each differing in the same number ``d_c >= 2`` of units.
    sa, sb : ndarray of int64, shape (3K,)
        The baseline's and the candidate's summed counts.
    k : int
        Number of classes.
    conv : Convention
        How per-class scores are filled.
    thr : ndarray, shape (g,)
        The threshold each swapped ``|delta*|`` must reach (the observed one, less rounding).

    Returns
    -------
    hits, defined : ndarray of int64, shape (g,)
        Over the ``2**(d_c-1)`` swap sets of each class's own units that leave its first one in
        place (the others are their complements).
    """
    g = classes.size
    units = np.stack([np.flatnonzero(changed[:, c]) for c in classes], axis=1)  # (d_c, g)
    # row i of class j's columns: its i-th differing unit
    x = _parts([diff[units, classes + o * k] for o in range(3)], conv)
    a0 = columns(sa, k, classes, conv)
    total = a0 + columns(sb, k, classes, conv)
    hits, defined = np.zeros(g, dtype=np.int64), np.zeros(g, dtype=np.int64)
    ftotal = total.astype(np.float64)
    if exact_float(x, a0, total):
        x, a0 = x.astype(np.float64), a0.astype(np.float64)
    for a in half_sums(x, a0):
        star, _ = swapped(a.astype(np.float64, copy=False), ftotal, g, conv, False)
        tally(star, thr, hits, defined)
    return hits, defined


def enumerate_miou(
    dd: IntArray, sa: IntArray, sb: IntArray, k: int, conv: Convention, thr: float
) -> tuple[int, int]:
    """Exact hits and defined count of the mIoU difference over the differing units ``dd``.

    Parameters
    ----------
    dd : ndarray of int64, shape (d, 3K)
        The differing units' candidate minus baseline ``[tp | fp | fn]``.
    sa, sb : ndarray of int64, shape (3K,)
        The summed counts.
    k : int
        Number of classes.
    conv : Convention
        How the mean is taken.
    thr : float
        The threshold each swapped ``|delta*|`` must reach.

    Returns
    -------
    hits, defined : int
        Over the ``2**(d-1)`` swap sets that leave the first unit in place.
    """
    every = np.arange(k)
    x = columns(dd, k, every, conv)
    a0 = columns(sa, k, every, conv)
    total = a0 + columns(sb, k, every, conv)
    hits, defined = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    limit = np.array([thr])
    ftotal = total.astype(np.float64)
    if exact_float(x, a0, total):
        x, a0 = x.astype(np.float64), a0.astype(np.float64)
    for a in half_sums(x, a0):
        _, star = swapped(a.astype(np.float64, copy=False), ftotal, k, conv, True)
        assert star is not None  # (asked for)
        tally(star[:, None], limit, hits, defined)
    return int(hits[0]), int(defined[0])
