"""The comparison gate's test: a paired randomization (swap) test over images or groups.

Under "no difference between the runs", each unit's (image's, or group's) baseline counts and
candidate counts are exchangeable: which run produced which is a coin flip per unit. Swapping
them at random, unit by unit, and recomputing the difference of the metric from the summed
counts gives the difference's distribution under that null, exactly, for any number of units
and however skewed the per-unit differences are (no normal approximation, no standard error).
The p-value is the share of swaps whose difference is at least as large, in absolute value, as
the observed one.

A swap set ``s`` (``s_j = 1``: unit ``j`` swapped) changes the sums by ``S = s @ (cand - base)``:
the baseline's become ``A + S``, the candidate's ``B - S``, so a block of swaps is one matrix
product, as the bootstrap's resamples are. Units where the runs counted the same change
nothing when swapped and are left out; swapping every unit gives ``-delta``, so exact
enumeration needs half of the ``2**d`` swaps of the ``d`` units that differ. Each row is
enumerated when that is cheap (:mod:`segiou.stats._swap_sets`: a class over the units where its
own counts differ), and only the rows that are not draw random swaps, reported with the floor of
that mode.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from segiou._typing import FloatArray, IntArray
from segiou.conventions import Convention
from segiou.stats._bootstrap import metric_replicates
from segiou.stats._swap_sets import (
    columns,
    enumerate_classes,
    enumerate_miou,
    exact_classes,
    exact_float,
    exact_miou,
    swapped,
    tally,
)

__all__ = [
    "METHOD",
    "SwapTest",
    "attainable_p",
    "auto_permutations",
    "min_permutations",
    "swap_test",
]

#: The method's name, as the gate's document gives it.
METHOD = "paired randomization (swap) test"
#: Swapped differences within this much of the observed one count as reaching it: a relative
#: part (rounding of equal ratios computed from different sums), and an absolute part (metric
#: values are at most 1 in magnitude; ``1e-14`` is rounding, not a difference).
_RTOL, _ATOL = 1e-9, 1e-14
#: Float64 sums of integers are exact below this.
_EXACT = 2**53
#: Matrix entries of one block of swaps (bounds memory; fixed so a seed gives the same swaps).
_BLOCK_CELLS = 1 << 20


@dataclass(frozen=True)
class SwapTest:
    """Two-sided p-values of the swap test (``nan`` where the observed difference is undefined).

    Attributes
    ----------
    delta_miou : float
        Observed mIoU difference, candidate - baseline.
    delta_iou : ndarray, shape (K,)
        Observed per-class IoU differences.
    p_miou : float
        p-value of the mIoU difference.
    p_iou : ndarray, shape (K,)
        p-value of each class's IoU difference.
    exact : bool
        Whether every p-value is exact (mIoU's and every class's swaps enumerated).
    swaps : int
        How many swaps mIoU's p-value is over: ``2**differing`` when enumerated, else the
        random swaps drawn.
    differing : int
        Units where the runs' counts differ (the others change nothing when swapped).
    differing_per_class : ndarray of int64, shape (K,)
        Units where the runs' TP, FP or FN of each class differ.
    exact_miou : bool
        Whether mIoU's swaps were enumerated (over the ``differing`` units).
    exact_iou : ndarray of bool, shape (K,)
        Whether each class's swaps were enumerated (over its ``differing_per_class`` units;
        swapping the others changes nothing of its IoU).
    random_swaps : int
        The random swaps drawn for the rows not enumerated (0 when every row was).
    """

    delta_miou: float
    delta_iou: FloatArray
    p_miou: float
    p_iou: FloatArray
    exact: bool
    swaps: int
    differing: int
    differing_per_class: IntArray
    exact_miou: bool
    exact_iou: npt.NDArray[np.bool_]
    random_swaps: int

    def swaps_of_class(self, c: int) -> int:
        """How many swaps class ``c``'s p-value is over (``2**d_c`` enumerated, or drawn)."""
        return 1 << int(self.differing_per_class[c]) if self.exact_iou[c] else self.random_swaps


def attainable_p(differing: int, random_swaps: int | None = None) -> float:
    """Smallest p-value the swap test can give when the runs differ in ``differing`` units.

    Parameters
    ----------
    differing : int
        Units where the runs' counts differ (for a class: where its TP, FP or FN differ; the
        other units change nothing of it when swapped).
    random_swaps : int, optional
        The random swaps drawn, when the test drew them (Monte-Carlo mode); ``None``: every
        swap was enumerated (exact mode).

    Returns
    -------
    float
        Exact: ``2 / 2**differing`` (the observed swap set and its complement both reach the
        observed difference), ``1`` when at most one unit differs. Monte-Carlo: also at least
        ``1 / (random_swaps + 1)`` (``p = (1 + hits) / (1 + swaps)``), so the larger of the two:
        the random p-value estimates the exact one, and cannot go below ``1 / (B + 1)``.

    Examples
    --------
    >>> attainable_p(3), attainable_p(0)
    (0.25, 1.0)
    >>> attainable_p(40, random_swaps=10)  # 1 / 11
    0.09090909090909091
    """
    exact = 1.0 if differing <= 1 else 2.0 ** (1 - differing)
    return exact if random_swaps is None else max(exact, 1.0 / (random_swaps + 1))


def min_permutations(alpha: float) -> int:
    """Return the fewest random swaps whose smallest p-value, ``1 / (B + 1)``, is below ``alpha``.

    Fewer can never give a p-value below ``alpha``, in either mode: exact enumeration of
    ``2**(d-1) <= B`` swap sets gives at least ``2 / 2**d >= 1 / B``.

    Parameters
    ----------
    alpha : float
        Significance level, in (0, 1).

    Returns
    -------
    int

    Examples
    --------
    >>> min_permutations(0.05), min_permutations(0.01), min_permutations(0.03)
    (20, 100, 33)
    """
    b = max(1, math.floor(1 / alpha) - 1)
    while 1.0 / (b + 1) >= alpha:
        b += 1
    while b > 1 and 1.0 / b < alpha:
        b -= 1
    return b


def _random_swaps(d: int, count: int, seed: int) -> Iterator[FloatArray]:
    """Yield ``count`` random swap sets (each unit swapped with probability 1/2), in blocks."""
    rng = np.random.default_rng([int(seed), 0x5A4D])  # a stream apart from the resamples'
    rows = max(1, _BLOCK_CELLS // max(d, 1))
    for start in range(0, count, rows):
        n = min(rows, count - start)
        yield rng.integers(0, 2, size=(n, d)).astype(np.float64)


def swap_test(
    base: IntArray,
    cand: IntArray,
    k: int,
    conv: Convention,
    *,
    permutations: int,
    seed: int = 0,
) -> SwapTest:
    """Paired randomization test of the mIoU and per-class IoU differences.

    Parameters
    ----------
    base, cand : ndarray of int64, shape (m, 3K)
        Each unit's ``[tp | fp | fn]`` in the baseline and in the candidate (the first ``3K``
        columns of :class:`~segiou.stats.Features` rows, summed per unit).
    k : int
        Number of classes.
    conv : Convention
        How per-class scores are filled and averaged (as for the point estimates).
    permutations : int
        Random swaps to draw for a row whose swaps are not enumerated. A class's swaps are
        enumerated over the ``d_c`` units where its counts differ (swapping the others changes
        nothing of its IoU) when its ``2**(d_c-1)`` swap sets (each with its complement) are
        at most ``permutations``, or ``d_c <= 20`` (within a total budget:
        :func:`segiou.stats._swap_sets.exact_classes`); mIoU's over the ``d`` units where
        anything differs when ``2**(d-1) <= permutations`` or ``2**(d-1) * 3K <= 2**24``.
    seed : int, default 0
        Seed of the random swaps.

    Returns
    -------
    SwapTest

    Notes
    -----
    Exact: ``p = #{swaps: |delta*| >= |delta|} / #{swaps}``, over the swaps where ``delta*``
    is defined. Random: ``p = (1 + hits) / (1 + B)`` over the ``B`` defined draws, a valid
    p-value whatever ``B`` (never 0); a row is drawn only when its ``2**(d-1)`` swap sets
    exceed ``B``, so its exact floor ``2 / 2**d`` is at most ``1 / (B + 1)`` and the random
    p-value never goes below the floor it is reported with. ``|delta*|`` within ``1e-9
    |delta| + 1e-14`` of ``|delta|`` counts as reaching it (rounding). ``delta`` undefined:
    ``nan``; ``delta = 0``: 1.
    """
    diff = cand - base
    moved = np.flatnonzero(diff.any(axis=1))
    d = int(moved.size)
    changed = (diff.reshape(diff.shape[0], 3, k) != 0).any(axis=1)
    per_class = changed.sum(axis=0).astype(np.int64)
    sa, sb = base.sum(axis=0), cand.sum(axis=0)
    point_a = metric_replicates(sa[None, :].astype(np.float64), k, 0, conv)
    point_b = metric_replicates(sb[None, :].astype(np.float64), k, 0, conv)
    obs = np.concatenate([point_b["miou"] - point_a["miou"], (point_b["iou"] - point_a["iou"])[0]])
    thr = np.abs(obs) * (1 - _RTOL) - _ATOL
    hits = np.zeros(obs.size, dtype=np.int64)
    defined = np.zeros(obs.size, dtype=np.int64)
    tested = ~np.isnan(obs) & (obs != 0)  # (the others: p = nan or 1 whatever the swaps)
    exact_m = exact_miou(d, k, permutations)
    exact_c = exact_classes(per_class, tested[1:], permutations)
    exact = np.concatenate([[exact_m], exact_c])
    if tested[0] and exact_m:
        hits[0], defined[0] = enumerate_miou(diff[moved], sa, sb, k, conv, float(thr[0]))
    run = tested[1:] & exact_c & (per_class >= 2)
    for dc in np.unique(per_class[run]):
        cls = np.flatnonzero(run & (per_class == dc))
        hits[1 + cls], defined[1 + cls] = enumerate_classes(
            diff, changed, cls, sa, sb, k, conv, thr[1 + cls]
        )
    drawn = tested & ~exact
    if drawn.any():
        _random_hits(diff[moved], sa, sb, k, conv, thr, drawn, permutations, seed, hits, defined)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(exact, hits / np.maximum(defined, 1), (1 + hits) / (1 + defined))
    # a row that differs in at most one unit: its swap only flips the sign (p = 1)
    p[np.concatenate([[d], per_class]) <= 1] = 1.0
    p = np.where(np.isnan(obs), np.nan, np.where(obs == 0, 1.0, np.minimum(p, 1.0)))
    return SwapTest(
        delta_miou=float(obs[0]),
        delta_iou=obs[1:],
        p_miou=float(p[0]),
        p_iou=p[1:].astype(np.float64),
        exact=bool(exact.all()),
        swaps=(1 << d) if exact_m else int(permutations),
        differing=d,
        differing_per_class=per_class,
        exact_miou=bool(exact_m),
        exact_iou=exact_c,
        random_swaps=int(permutations) if (~exact).any() else 0,
    )


def _random_hits(
    dd: IntArray,
    sa: IntArray,
    sb: IntArray,
    k: int,
    conv: Convention,
    thr: FloatArray,
    drawn: npt.NDArray[np.bool_],
    permutations: int,
    seed: int,
    hits: IntArray,
    defined: IntArray,
) -> None:
    """Count the random swaps' hits of the rows ``drawn`` (mIoU first, then classes), in place.

    Only the columns the drawn rows need are summed: every class's for mIoU, else the drawn
    classes' own.
    """
    cls = np.flatnonzero(drawn[1:])
    use = np.arange(k) if drawn[0] else cls
    x = columns(dd, k, use, conv)
    a0 = columns(sa, k, use, conv)
    total = a0 + columns(sb, k, use, conv)
    as_float = exact_float(x, a0, total)
    f, ftotal = x.astype(np.float64), total.astype(np.float64)
    rows = np.flatnonzero(drawn)
    h, n = np.zeros(rows.size, dtype=np.int64), np.zeros(rows.size, dtype=np.int64)
    for s in _random_swaps(dd.shape[0], permutations, seed):
        # (integer products when float64 sums would not be exact)
        a = a0 + s @ f if as_float else (a0 + s.astype(np.int64) @ x).astype(np.float64)
        star_c, star_m = swapped(a, ftotal, use.size, conv, bool(drawn[0]))
        if star_m is not None:
            star_c = np.concatenate([star_m[:, None], star_c[:, cls]], axis=1)
        tally(star_c, thr[rows], h, n)
    hits[rows] += h
    defined[rows] += n


def auto_permutations(resamples: int, tested: int, alpha: float) -> int:
    """Return the number of random swaps the gate draws by default.

    Parameters
    ----------
    resamples : int
        The bootstrap resamples asked for (a floor).
    tested : int
        Classes with a defined difference (tested, then Holm-adjusted).
    alpha : float
        Significance level.

    Returns
    -------
    int
        ``max(resamples, ceil(2 * (tested + 1) / alpha))``: the smallest random p-value,
        ``1 / (B + 1)``, is then below ``alpha / (tested + 1)`` with room to spare, so Holm's
        first step can reject.

    Examples
    --------
    >>> auto_permutations(1000, 19, 0.05), auto_permutations(1000, 150, 0.05)
    (1000, 6040)
    """
    return max(int(resamples), math.ceil(2 * (tested + 1) / alpha))
