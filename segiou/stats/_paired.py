"""The comparison gate: a paired test of two runs over the images they share.

The decision is a paired randomization (swap) test (:mod:`segiou.stats._swap`): under "no
difference" each image's (or group's) baseline and candidate counts are exchangeable, so
swapping them unit by unit gives the difference's null distribution, valid at any number of
units. The interval shown is a paired percentile bootstrap: both runs are resampled with the
*same* weights (an image drawn twice counts twice in both), so what varies between images (easy
and hard scenes) cancels in the difference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from segiou._typing import FloatArray, IntArray
from segiou.confusion import ConfusionMatrix
from segiou.conventions import Convention, get_convention
from segiou.errors import UsageError
from segiou.images import ImageRows
from segiou.stats._bootstrap import (
    check_resamples,
    features,
    finite_or_none,
    group_index,
    image_rows,
    metric_replicates,
    percentile_interval,
    sum_resamples,
)
from segiou.stats._pairing import align_images, check_pair, check_same_gt
from segiou.stats._swap import (
    METHOD,
    SwapTest,
    attainable_p,
    auto_permutations,
    min_permutations,
    swap_test,
)
from segiou.stats._verdict import Correction, change, holm, row_floors, verdict

__all__ = ["COMPARISON_FORMAT", "COMPARISON_VERSION", "Correction", "PairedComparison",
           "compare_states", "holm", "two_sided_p"]  # fmt: skip

COMPARISON_FORMAT = "segiou.comparison"
COMPARISON_VERSION = 1


def two_sided_p(diffs: FloatArray, delta: float, units: int | None = None) -> float:
    """Two-sided p-value of "no difference", from the bootstrap standard error of a difference.

    Not used by :func:`compare_states` any more: the normal approximation is wrong when one
    image makes the replicates skewed (a model worse on every image passed, ``se`` growing
    faster than ``delta``) and with few images or groups (far more than ``alpha`` false
    failures). The gate uses a paired randomization (swap) test instead; this function is
    kept for code that calls it.

    Parameters
    ----------
    diffs : ndarray, shape (B,)
        Bootstrap replicates of the difference (``nan`` where undefined: left out).
    delta : float
        The difference on the whole data (the point estimate).
    units : int, optional
        How many resampled units (images, or groups) hold what the difference is made of
        (for a class: the units where either run counted it). Decides the p-value when every
        replicate is the same; ``None``: not known.

    Returns
    -------
    float
        ``erfc(|z| / sqrt(2))`` with ``z = delta / se`` and ``se`` the standard deviation of
        the replicates (normal approximation): a p-value not limited by the number of
        resamples, which a per-class multiple-testing correction needs (a tail count could not
        go below ``2 / (B + 1)``). ``1`` when ``delta = 0``; ``nan`` when ``delta`` is
        undefined or fewer than two replicates are. When every replicate is the same (to
        rounding: a spread below ``1e-12`` of their size, however small the difference; an
        exact zero standard deviation is a matter of rounding), ``delta != 0``: ``nan`` when
        one unit (or an unknown number) holds the difference, since the resamples cannot tell
        it from chance (no verdict rather than ``p = 0``); ``0`` when two or more do and every
        replicate has the sign of ``delta``, since whichever are drawn the difference is the
        same (``se`` tends to 0).

    Examples
    --------
    >>> round(two_sided_p(np.array([-1.0, 1.0, -1.0, 1.0]), 2.3094), 3)  # z = 2
    0.046
    >>> two_sided_p(np.zeros(9), 0.0)
    1.0
    """
    d = diffs[~np.isnan(diffs)]
    if math.isnan(delta) or d.size < 2:
        return float("nan")
    if delta == 0:
        return 1.0
    scale = max(abs(delta), float(np.abs(d).max()))
    if float(np.ptp(d)) <= 1e-12 * scale:  # every replicate the same, to rounding
        same_sign = bool(np.all(np.sign(d) == np.sign(delta)))
        return 0.0 if same_sign and units is not None and units >= 2 else float("nan")
    se = float(d.std(ddof=1))
    return math.erfc(abs(delta) / se / math.sqrt(2))


@dataclass(frozen=True)
class PairedComparison:
    """The gate's verdict and everything it is based on (a JSON-safe document).

    Attributes
    ----------
    document : dict
        ``format = "segiou.comparison"``, ``version``, ``labels``, ``preset``, ``images``
        (shared count, and the images only one run has), ``bootstrap`` (the intervals: method,
        unit, resamples, seed, alpha, correction), ``test`` (the p-values: method, unit, units,
        differing_units, permutations, exact (every row's swaps enumerated), swaps (mIoU's),
        random_swaps (drawn for the rows not enumerated, 0 if none), seed, alpha, correction,
        smallest_p (mIoU's), smallest_class_p_adjusted), ``miou`` and ``classes`` (baseline,
        candidate, delta, interval, p-value, change, threshold, fails, ``exact`` and
        ``swaps``: whether the row's swaps were enumerated, over how many swaps; a class's
        baseline and candidate as :func:`segiou.evaluate` reports them, the preset's fill for
        a class in neither
        mask, its delta from the scored values (``None`` there); per class ``units`` holding it,
        in either run, ``differing_units``, ``smallest_p`` and ``smallest_p_adjusted``: the
        smallest raw and adjusted p-values it could get, whatever the other classes' p-values;
        an interval over a single unit is ``None``, ``bootstrap.note`` says so),
        ``unexpected_pred`` (predicted pixels with an unexpected value in the shared images:
        baseline, candidate, fails, and ``classes``: per class with any, its ground-truth pixels
        predicted so in each run), ``failed``, ``reasons``, ``verdict_possible`` and
        ``no_verdict_reason``: ``False`` and why when too few units differ for any p-value to
        go below alpha (``test.smallest_p``), ``class_verdicts_possible`` and
        ``no_class_verdict_reason``: ``False`` and why when no class's adjusted p-value can go
        below alpha (Holm multiplies the smallest by the classes tested; mIoU, tested alone,
        may still be decided). A row that cannot go below alpha says ``change = "no verdict"``
        instead of ``"no significant change"`` (when its IoU changed); ``undecided_classes``
        lists those rows (``id``, ``name``, ``delta``, ``differing_units``,
        ``smallest_p_adjusted``; largest drop first), whatever the other classes.
    """

    document: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """Whether the gate failed (exit code 1): see ``reasons``."""
        return bool(self.document["failed"])

    @property
    def verdict_possible(self) -> bool:
        """Whether the test could call a drop significant at all (see ``no_verdict_reason``)."""
        return bool(self.document.get("verdict_possible", True))

    @property
    def no_verdict_reason(self) -> str | None:
        """Why no drop could be significant (too few units differ), or ``None``."""
        return self.document.get("no_verdict_reason")

    @property
    def class_verdicts_possible(self) -> bool:
        """Whether any class's drop could be significant (see ``no_class_verdict_reason``)."""
        return bool(self.document.get("class_verdicts_possible", True))

    @property
    def no_class_verdict_reason(self) -> str | None:
        """Why no class's drop could be significant after the correction, or ``None``."""
        return self.document.get("no_class_verdict_reason")

    @property
    def undecided_classes(self) -> list[dict[str, Any]]:
        """Classes whose IoU changed but could not be significant (``change = "no verdict"``).

        Each ``id``, ``name``, ``delta``, ``differing_units``, ``smallest_p_adjusted``, largest
        drop first; empty when every class that changed could be decided.
        """
        return list(self.document.get("undecided_classes", []))

    @property
    def reasons(self) -> list[str]:
        """One line per failure (a significant drop beyond its threshold, a lost score)."""
        return list(self.document["reasons"])

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-safe document (see the README, "Comparison gate")."""
        return self.document


def compare_states(
    baseline: ConfusionMatrix,
    candidate: ConfusionMatrix,
    *,
    preset: str | Convention = "segiou",
    resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    max_miou_drop: float = 0.005,
    max_class_drop: float | None = 0.02,
    shared_images: bool = False,
    correction: Correction = "holm",
    groups: Mapping[str, str] | None = None,
    group_name: str = "group",
    permutations: int | None = None,
) -> PairedComparison:
    """Paired comparison of two runs; fail on a significant drop beyond a threshold.

    Parameters
    ----------
    baseline, candidate : ConfusionMatrix
        States with per-image entries (``segiou eval --state``; format 2), counted with the
        same label spec against the same ground truth.
    preset : str or Convention, default "segiou"
        Averaging convention for both.
    resamples : int, default 1000
        Paired bootstrap resamples (the intervals shown).
    seed : int, default 0
        Seed of the resamples and of the random swaps.
    alpha : float, default 0.05
        Significance level; intervals have coverage ``1 - alpha``.
    max_miou_drop : float, default 0.005
        mIoU may drop this much (absolute) before a significant drop fails.
    max_class_drop : float or None, default 0.02
        The same per class IoU; ``None``: classes never fail (still reported). A class scored
        in the baseline that has no IoU now (none of its pixels counted: its predictions were
        unexpected values) fails whatever the threshold, unless the baseline counted no
        ground-truth pixel of it; so does an mIoU undefined now. More predicted pixels with an
        unexpected value in the shared images than the baseline's fails too, whatever the
        scores (they are left out of every count), and so does any class with more of its
        ground-truth pixels predicted as an unexpected value than in the baseline (however few
        the total: the baseline's may have been on another class).
    shared_images : bool, default False
        Compare on the images both runs scored, instead of refusing different image sets.
    correction : {"holm", "none"}, default "holm"
        Multiple-testing adjustment of the per-class p-values (Holm keeps the chance of any
        false "significant" class below ``alpha``).
    groups : mapping of str to str, optional
        Image name -> group: resample groups of correlated images instead of images.
    group_name : str, default "group"
        Name of the grouping, shown in the unit.
    permutations : int, optional
        Random swaps of the randomization test. ``None`` (default): ``max(resamples,
        ceil(2 * (T + 1) / alpha))`` with ``T`` the classes with a defined difference, so that
        the random swaps' floor, ``1 / (B + 1)``, does not keep Holm from reaching alpha. When
        ``2**(d-1)`` is at most this (``d``: the units where the runs differ; a swap set and
        its complement give the same difference but for its sign), every swap is enumerated
        and the p-values are exact; their floor, ``2 / 2**d``, is set by the units
        (``class_verdicts_possible`` says when Holm cannot reach alpha then). Fewer swaps than
        can ever give a p-value below alpha (``1 / (B + 1) >= alpha``: 19 or fewer at 0.05)
        are refused.

    Returns
    -------
    PairedComparison

    Raises
    ------
    UsageError
        States without per-image entries, different image sets (without ``shared_images``),
        no shared image, repeated image names, different ground truth for a shared image, an
        image without a group, or bad options (``permutations`` too few to reach ``alpha``).
    IncompatibleMatrixError
        Different label specs.

    Notes
    -----
    The p-value of the difference ``candidate - baseline`` of mIoU and of each class IoU comes
    from a paired randomization (swap) test (:func:`segiou.stats._swap.swap_test`): under "no
    difference" each unit's (image's or group's) two runs are exchangeable; the difference is
    recomputed from the summed counts with each unit's runs swapped at random (or every swap,
    when there are few), and ``p`` is the share of swaps with a difference at least as large in
    absolute value. It is valid at any number of units and whatever the shape of the per-unit
    differences. The interval shown is a paired percentile bootstrap: each resample draws the
    shared units with replacement and scores both runs on the same draw. A drop fails the gate
    when it is significant (p, adjusted over the classes, below ``alpha``) *and* larger than
    its threshold; a score that is defined in the baseline and undefined now fails whatever
    its threshold (see ``max_class_drop``).
    """
    check_resamples(resamples, seed)
    if permutations is not None and (
        isinstance(permutations, bool)
        or not isinstance(permutations, int | np.integer)
        or permutations < 1
    ):
        msg = f"permutations={permutations!r} must be an integer >= 1 (or None: automatic)"
        raise UsageError(msg)
    if not 0 < alpha < 1:
        msg = f"alpha={alpha!r} must be in (0, 1), e.g. 0.05"
        raise UsageError(msg)
    if permutations is not None and permutations < (least := min_permutations(alpha)):
        msg = (
            f"permutations={permutations} (--permutations) can never give a p-value below "
            f"alpha {alpha} (the smallest is 1/(N + 1) = {1 / (permutations + 1):.3g}): give "
            f"at least {least}, or leave it out (automatic: enough for Holm over the classes)"
        )
        raise UsageError(msg)
    for name, value in (("max_miou_drop", max_miou_drop), ("max_class_drop", max_class_drop)):
        if value is not None and not (0 <= value < float("inf")):
            msg = f"{name}={value!r} must be a finite number >= 0"
            raise UsageError(msg)
    if correction not in ("holm", "none"):
        msg = f"correction={correction!r} is unknown; expected 'holm' or 'none'"
        raise UsageError(msg)
    check_pair(baseline, candidate)
    conv = get_convention(preset)
    ra, rb = image_rows(baseline, "baseline"), image_rows(candidate, "candidate")
    bi, ci, info = align_images(ra, rb, shared_images)
    spec = baseline.spec
    fa, fb = features(ra, spec), features(rb, spec)
    names = [ra.names[int(i)] for i in bi]
    check_same_gt(names, fa.gt[bi], fb.gt[ci], spec.classes)
    va, vb = fa.values[bi], fb.values[ci]
    labels = None
    if groups is not None:
        lacking = [n for n in names if not groups.get(n)]
        if lacking:
            msg = (
                f"bootstrap groups: {len(lacking)} shared image(s) have no {group_name!r} "
                f"value, e.g. {lacking[:5]}"
            )
            raise UsageError(msg)
        labels = [groups[n] for n in names]
    index, m = group_index(labels, len(names), "compare")
    width = va.shape[1]
    both = np.zeros((m, 2 * width), dtype=np.int64)
    np.add.at(both, index, np.concatenate([va, vb], axis=1))  # the same weights for both runs
    k, g = fa.k, fa.g
    point_a = metric_replicates(va.sum(axis=0, keepdims=True).astype(np.float64), k, g, conv)
    point_b = metric_replicates(vb.sum(axis=0, keepdims=True).astype(np.float64), k, g, conv)
    d_miou, d_iou = [], []
    for s in sum_resamples(both, resamples, seed):
        a = metric_replicates(s[:, :width], k, g, conv)
        b = metric_replicates(s[:, width:], k, g, conv)
        d_miou.append(b["miou"] - a["miou"])
        d_iou.append(b["iou"] - a["iou"])
    dm, di = np.concatenate(d_miou), np.concatenate(d_iou)
    level = 1 - alpha
    unit = "image" if groups is None else f"group:{group_name}"
    # the units holding each class (TP, FP or FN in either run): an interval over one is
    # undefined (every resample draws that unit alone: a zero width that is no certainty)
    held = ((both[:, : 3 * k].reshape(m, 3, k) != 0).any(axis=1)
            | (both[:, width : width + 3 * k].reshape(m, 3, k) != 0).any(axis=1))  # fmt: skip
    held_c, held_any = held.sum(axis=0), int(held.any(axis=1).sum())
    di[:, held_c < 2] = np.nan
    if held_any < 2:
        dm[:] = np.nan
    sums_a = va.sum(axis=0)
    base_gt = sums_a[:k] + sums_a[2 * k : 3 * k]  # ground-truth pixels the baseline counted
    tested = int(np.isfinite(point_b["iou"][0] - point_a["iou"][0]).sum())
    asked = auto_permutations(resamples, tested, alpha) if permutations is None else permutations
    test = swap_test(both[:, : 3 * k], both[:, width : width + 3 * k], k, conv,
                     permutations=int(asked), seed=int(seed))  # fmt: skip
    doc = _document(spec.name, conv.name, info, point_a, point_b, dm, di, level, alpha,
                    max_miou_drop, max_class_drop, correction, spec.classes, test,
                    base_gt)  # fmt: skip
    doc["bootstrap"] = {"method": "paired percentile bootstrap", "unit": unit, "units": m,
                        "resamples": resamples, "seed": int(seed), "level": level,
                        "alpha": alpha, "correction": correction}  # fmt: skip
    doc["test"] = {"method": METHOD, "unit": unit, "units": m, "differing_units": test.differing,
                   "permutations": int(asked), "exact": test.exact, "swaps": test.swaps,
                   "random_swaps": test.random_swaps, "seed": int(seed), "alpha": alpha,
                   "correction": correction,
                   "smallest_p": attainable_p(test.differing,
                                              None if test.exact_miou else test.swaps)}  # fmt: skip
    verdict(doc, test, alpha, unit)
    shown = [_reported(x.sum(axis=0), k, conv) for x in (va, vb)]
    for row in doc["classes"]:
        row["units"] = int(held_c[row["id"]])
        # the scores as the preset reports them (evaluate's per-class IoU: torchmetrics and
        # sklearn_all_labels give 0 for a class in neither mask); verdicts use the scored ones
        row["baseline"], row["candidate"] = (finite_or_none(float(v[row["id"]])) for v in shown)
    doc["bootstrap"]["note"] = _interval_note(held_c, held_any, unit)
    by_class = _check_left_out(doc, _left_out(ra, bi), _left_out(rb, ci), spec.classes)
    _check_unexpected(doc, _unexpected_pred(ra, bi), _unexpected_pred(rb, ci), by_class)
    return PairedComparison(doc)


def _unexpected_pred(rows: ImageRows, index: IntArray) -> dict[int, int]:
    """Pixels predicted as each unexpected value in the images ``index`` (value -> pixels)."""
    keep = set(index.tolist())
    out: dict[int, int] = {}
    for i, side, value, count in rows.unexpected:
        if side == "pred" and i in keep:
            out[value] = out.get(value, 0) + count
    return out


def _left_out(rows: ImageRows, index: IntArray) -> IntArray:
    """Ground-truth pixels of each class predicted as an unexpected value in images ``index``.

    Exact: the entries ``(image, gt = c, pred = K+1)`` of each image's table.
    """
    k = rows.k
    keep = np.zeros(rows.n, dtype=bool)
    keep[index] = True
    sel = keep[rows.image] & (rows.gt < k) & (rows.pred == k + 1)
    out = np.zeros(k, dtype=np.int64)
    np.add.at(out, rows.gt[sel], rows.count[sel])
    return out


def _check_left_out(
    doc: dict[str, Any], base: IntArray, cand: IntArray, class_names: Sequence[str]
) -> list[dict[str, Any]]:
    """Fail the gate when a class has more of its pixels predicted as unexpected values.

    The total can fall while one class loses nearly every pixel (the baseline's were on
    another class): the few left keep its IoU (a perfect one, if they are right) and the mean
    rises. Returns the classes with any such pixel (for ``unexpected_pred``); a class already
    named as undefined now gets no second reason.
    """
    lost = {c["id"] for c in doc["classes"] if c["fails"] and c["candidate"] is None}
    rows = []
    for c, name in enumerate(class_names):
        a, b = int(base[c]), int(cand[c])
        if not (a or b):
            continue
        rows.append({"id": c, "name": name, "baseline": a, "candidate": b, "fails": b > a})
        if b > a and c not in lost:
            doc["reasons"].append(
                f"class {name!r}: {b:,} of its ground-truth pixels in the shared images are "
                f"predicted as an unexpected value in the candidate, {a:,} in the baseline: "
                "they are left out of every score, which cannot show what the candidate "
                "predicted there"
            )
    return rows


def _check_unexpected(
    doc: dict[str, Any],
    base: dict[int, int],
    cand: dict[int, int],
    by_class: list[dict[str, Any]],
) -> None:
    """Fail the gate when the candidate predicted more unexpected values on the shared images.

    Such pixels are left out of every count (``on_unexpected="count"``): no score can show
    what the candidate predicted there (a class whose every pixel became one has no IoU, and
    the mean that skips it rises), so more of them is a regression whatever the scores say.
    ``by_class`` (:func:`_check_left_out`) is recorded with the totals; a class of it that
    fails makes ``fails`` true too (its reason is given already).
    """
    n_base, n_cand = sum(base.values()), sum(cand.values())
    more = n_cand > n_base
    fails = more or any(r["fails"] for r in by_class)
    doc["unexpected_pred"] = {"baseline": n_base, "candidate": n_cand, "fails": fails,
                              "classes": by_class}  # fmt: skip
    if fails:
        doc["failed"] = True
    if more:
        top = sorted(cand.items(), key=lambda vc: (-vc[1], vc[0]))
        shown = ", ".join(f"{v}: {c:,}" for v, c in top[:5]) + (", ..." if len(top) > 5 else "")
        doc["reasons"].append(
            f"{n_cand:,} predicted pixels of the shared images have an unexpected value in the "
            f"candidate, {n_base:,} in the baseline (pixels per value: {shown}): they are left "
            "out of every score, which cannot show what the candidate predicted there"
        )
        doc["failed"] = True


def _document(
    labels: str,
    preset: str,
    info: dict[str, Any],
    pa: dict[str, FloatArray],
    pb: dict[str, FloatArray],
    dm: FloatArray,
    di: FloatArray,
    level: float,
    alpha: float,
    max_miou_drop: float,
    max_class_drop: float | None,
    correction: Correction,
    class_names: Sequence[str],
    test: SwapTest,
    base_gt: IntArray,
) -> dict[str, Any]:
    reasons: list[str] = []
    base_m, cand_m = float(pa["miou"][0]), float(pb["miou"][0])
    delta = cand_m - base_m
    p = test.p_miou
    raw_p = [float(x) for x in test.p_iou]
    adj = holm(raw_p) if correction == "holm" else raw_p
    floor_m, floors, bounds = row_floors(test, raw_p, correction)
    sig = bool(p < alpha)
    fails = sig and delta < -max_miou_drop
    if fails:
        reasons.append(
            f"mIoU dropped by {-delta:.4f} ({base_m:.4f} -> {cand_m:.4f}), significant "
            f"(p = {p:.4g} < {alpha}), beyond the allowed {max_miou_drop:.4f}"
        )
    elif not math.isnan(base_m) and math.isnan(cand_m):  # no class scored now
        fails = True
        reasons.append(f"mIoU is undefined now (baseline {base_m:.4f}): no class is scored")
    miou = {"baseline": finite_or_none(base_m), "candidate": finite_or_none(cand_m),
            "delta": finite_or_none(delta), "interval": percentile_interval(dm, level)[0],
            "p_value": finite_or_none(p), "change": change(sig, delta, floor_m < alpha),
            "max_drop": max_miou_drop, "fails": fails, "exact": test.exact_miou,
            "swaps": test.swaps}  # fmt: skip
    intervals = percentile_interval(di, level)
    classes = []
    for c, name in enumerate(class_names):
        b, a = float(pa["iou"][0, c]), float(pb["iou"][0, c])
        d = a - b
        sig_c = bool(adj[c] < alpha)  # nan compares False
        fails_c = max_class_drop is not None and sig_c and d < -max_class_drop
        # scored in the baseline, no IoU now: none of its ground truth counted (predicted as
        # unexpected values, left out of the counts: the mean skips it and rises): fails, as an
        # undefined metric does in compare_reports; not when the baseline counted no ground
        # truth of it (its IoU 0 came from false positives alone, gone now)
        lost = (max_class_drop is not None and not math.isnan(b) and math.isnan(a)
                and base_gt[c] > 0)  # fmt: skip
        if fails_c:
            reasons.append(
                f"class {name!r} IoU dropped by {-d:.4f} ({b:.4f} -> {a:.4f}), significant "
                f"(p = {adj[c]:.4g} < {alpha}{', Holm-adjusted' if correction == 'holm' else ''}"
                f"), beyond the allowed {max_class_drop:.4f}"
            )
        elif lost:
            fails_c = True
            reasons.append(
                f"class {name!r} IoU is undefined now (baseline {b:.4f}): none of the "
                f"{int(base_gt[c]):,} ground-truth pixels the baseline counted for it is counted "
                "now (a prediction with an unexpected value is left out of every count)"
            )
        classes.append({
            "id": c, "name": name, "baseline": finite_or_none(b), "candidate": finite_or_none(a),
            "delta": finite_or_none(d), "interval": intervals[c],
            "p_value": finite_or_none(raw_p[c]), "p_adjusted": finite_or_none(adj[c]),
            "change": change(sig_c, d, bounds[c] < alpha),  # (nan: False)
            "smallest_p": finite_or_none(floors[c]),
            "smallest_p_adjusted": finite_or_none(bounds[c]),
            "differing_units": int(test.differing_per_class[c]), "max_drop": max_class_drop,
            "fails": bool(fails_c), "exact": bool(test.exact_iou[c]),
            "swaps": test.swaps_of_class(c),
        })  # fmt: skip
    return {
        "format": COMPARISON_FORMAT,
        "version": COMPARISON_VERSION,
        "labels": labels,
        "preset": preset,
        "images": info,
        "miou": miou,
        "classes": classes,
        "failed": bool(reasons),
        "reasons": reasons,
    }


def _reported(sums: IntArray, k: int, conv: Convention) -> FloatArray:
    """Per-class IoU of summed features as :func:`segiou.evaluate` reports it (its fill)."""
    tp, fp, fn = (sums[j * k : (j + 1) * k].astype(np.float64) for j in range(3))
    den = tp + fp + fn
    iou = np.divide(tp, den, out=np.full(k, np.nan), where=den > 0)
    scored = {"present": den > 0, "gt": (tp + fn) > 0, "all": np.ones(k, bool)}[conv.mean_over]
    if conv.mean_over == "all":
        iou[np.isnan(iou)] = 0.0
    iou[~scored] = conv.fill
    out: FloatArray = iou
    return out


def _interval_note(held_c: IntArray, held_any: int, unit: str) -> str | None:
    """Say why intervals are undefined although the differences are not (a single unit)."""
    word = "image" if unit == "image" else "group"
    if held_any < 2:
        return f"{held_any} {word} with counted pixels: no interval (every resample draws it alone)"
    lone = int((held_c == 1).sum())
    if not lone:
        return None
    return (
        f"{lone} {'class' if lone == 1 else 'classes'} held by a single {word}: no interval "
        "(every resample gives the same difference)"
    )
