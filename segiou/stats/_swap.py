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
enumeration needs half of the ``2**d`` swaps of the ``d`` units that differ.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from segiou._typing import FloatArray, IntArray
from segiou.conventions import Convention
from segiou.stats._bootstrap import metric_replicates

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
        Whether every swap was enumerated (else ``swaps`` random ones were drawn).
    swaps : int
        How many swaps the p-values are over: ``2**differing`` when exact, else the random
        swaps drawn.
    differing : int
        Units where the runs' counts differ (the others change nothing when swapped).
    differing_per_class : ndarray of int64, shape (K,)
        Units where the runs' TP, FP or FN of each class differ.
    """

    delta_miou: float
    delta_iou: FloatArray
    p_miou: float
    p_iou: FloatArray
    exact: bool
    swaps: int
    differing: int
    differing_per_class: IntArray


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


def _exact_swaps(d: int) -> Iterator[FloatArray]:
    """Yield the ``2**(d-1)`` swap sets that leave the first unit in place, in blocks."""
    total = 1 << (d - 1)
    rows = max(1, _BLOCK_CELLS // max(d, 1))
    shifts = np.arange(d - 1, dtype=np.int64)
    for start in range(0, total, rows):
        idx = np.arange(start, min(total, start + rows), dtype=np.int64)
        s = np.zeros((idx.size, d), dtype=np.float64)
        s[:, 1:] = (idx[:, None] >> shifts) & 1
        yield s


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
        Random swaps to draw; when ``2**(d-1) <= permutations`` (``d``: the units that differ;
        a swap set and its complement give the same ``|delta*|``, so half of the ``2**d`` are
        enumerated), every swap is enumerated instead and the p-values are exact.
    seed : int, default 0
        Seed of the random swaps.

    Returns
    -------
    SwapTest

    Notes
    -----
    Exact: ``p = #{swaps: |delta*| >= |delta|} / #{swaps}``, over the swaps where ``delta*``
    is defined. Random: ``p = (1 + hits) / (1 + B)`` over the ``B`` defined draws, a valid
    p-value whatever ``B`` (never 0). ``|delta*|`` within ``1e-9 |delta| + 1e-14`` of
    ``|delta|`` counts as reaching it (rounding). ``delta`` undefined: ``nan``; ``delta = 0``: 1.
    """
    diff = cand - base
    moved = np.flatnonzero(diff.any(axis=1))
    d = int(moved.size)
    changed = diff.reshape(diff.shape[0], 3, k) != 0
    per_class = changed.any(axis=1).sum(axis=0).astype(np.int64)
    sa, sb = base.sum(axis=0), cand.sum(axis=0)
    point_a = metric_replicates(sa[None, :].astype(np.float64), k, 0, conv)
    point_b = metric_replicates(sb[None, :].astype(np.float64), k, 0, conv)
    obs = np.concatenate([point_b["miou"] - point_a["miou"], (point_b["iou"] - point_a["iou"])[0]])
    thr = np.abs(obs) * (1 - _RTOL) - _ATOL
    hits = np.zeros(obs.size, dtype=np.int64)
    defined = np.zeros(obs.size, dtype=np.int64)
    exact = d < 64 and (d == 0 or (1 << (d - 1)) <= permutations)  # 2**(d-1) sets enumerated
    if d:
        dd = diff[moved]
        exact_float = (
            int(np.abs(dd).max()) * d < _EXACT and 2 * int(max(sa.max(), sb.max())) < _EXACT
        )
        f = dd.astype(np.float64)
        fa, fb = sa.astype(np.float64), sb.astype(np.float64)
        blocks = _exact_swaps(d) if exact else _random_swaps(d, permutations, seed)
        for s in blocks:
            if exact_float:
                shift = s @ f
                a, b = fa + shift, fb - shift
            else:  # integer products (exact while the pixel totals fit in int64)
                ishift = s.astype(np.int64) @ dd
                a, b = (sa + ishift).astype(np.float64), (sb - ishift).astype(np.float64)
            ra, rb = metric_replicates(a, k, 0, conv), metric_replicates(b, k, 0, conv)
            star = np.concatenate([(rb["miou"] - ra["miou"])[:, None], rb["iou"] - ra["iou"]], 1)
            ok = ~np.isnan(star)
            defined += ok.sum(axis=0)
            hits += (ok & (np.abs(np.where(ok, star, 0.0)) >= thr)).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if not d:  # the runs counted the same everywhere: no difference at all
            p = np.ones(obs.size)
        elif exact:
            p = hits / defined
        else:
            p = (1 + hits) / (1 + defined)
    p = np.where(np.isnan(obs), np.nan, np.where(obs == 0, 1.0, np.minimum(p, 1.0)))
    swaps = (1 << d) if exact else int(permutations)
    return SwapTest(
        delta_miou=float(obs[0]),
        delta_iou=obs[1:],
        p_miou=float(p[0]),
        p_iou=p[1:].astype(np.float64),
        exact=bool(exact),
        swaps=swaps,
        differing=d,
        differing_per_class=per_class,
    )


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
