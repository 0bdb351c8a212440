"""Image-level percentile bootstrap of every metric, vectorised: weights times per-image counts.

Every metric segiou reports is a function of a few per-class sums: TP, FP and FN per class (void
predictions in FN), and for category IoU the same per category. Each of those sums is linear in
the images' confusion entries, so each image is reduced once to a row of *features*
``[tp | fp | fn | category tp | category fp | category fn]`` (exact integers), and a resample that
takes image ``i`` ``w_i`` times has the sums ``w @ F``: exactly what counting those images (with
repeats) gives. ``B`` resamples are one matrix product ``W @ F`` (``W`` is ``B x n``), computed in
float64, whose integer sums are exact below 2**53 (checked; int64 otherwise).

With groups (video frames, tiles of one scene), the features are first summed per group and the
groups are resampled instead of the images.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from segiou._typing import FloatArray, IntArray
from segiou.confusion import ConfusionMatrix
from segiou.conventions import Convention, get_convention
from segiou.errors import UsageError
from segiou.images import ImageRows
from segiou.labels import LabelSpec

__all__ = [
    "BLOCK",
    "Bootstrap",
    "Features",
    "bootstrap",
    "features",
    "group_index",
    "image_rows",
    "metric_replicates",
    "percentile_interval",
    "resample_weights",
]

#: Resamples drawn and reduced at a time (bounds memory to BLOCK x n weights; fixed, so that a
#: seed gives the same resamples on every machine).
BLOCK = 256
#: Sums of float64 integers are exact below this.
_EXACT = 2**53
#: Summary metrics that get an interval (the contract of the result document, version 2).
SUMMARY_KEYS = ("miou", "fwiou", "pixel_accuracy", "mean_accuracy", "kappa", "category_miou")


def image_rows(source: ConfusionMatrix | ImageRows, what: str = "bootstrap") -> ImageRows:
    """Return the per-image confusion entries of ``source``, or refuse saying why there are none.

    Parameters
    ----------
    source : ConfusionMatrix or ImageRows
        An accumulator counted with ``per_image=True`` (``count_stores`` always keeps them), or
        its rows.
    what : str
        What needs them, for messages.

    Returns
    -------
    ImageRows

    Raises
    ------
    UsageError
        No per-image rows (``per_image=False``), rows of a version-1 state (TP/FP/FN only: no
        per-image matrix, so category IoU, kappa and the exact resamples cannot be formed), or
        no image.
    """
    if isinstance(source, ConfusionMatrix):
        if not source.per_image:
            msg = (
                f"{what}: the state keeps no per-image counts (it was counted with "
                "per_image=False); an image-level bootstrap resamples images, so count with "
                "ConfusionMatrix(..., per_image=True) or count_stores / segiou eval, which keep them"
            )
            raise UsageError(msg)
        rows = source.images.rows
        assert rows is not None  # an accumulator's table always carries its rows
    else:
        rows = source
    if rows.legacy is not None:
        msg = (
            f"{what}: the state is a version-1 state, whose per-image rows hold TP/FP/FN only, "
            "not each image's confusion entries; category IoU, kappa and exact resamples need "
            "the entries: count again with this segiou (format 2 states keep them)"
        )
        raise UsageError(msg)
    if rows.n == 0:
        msg = f"{what}: the state holds no image; there is nothing to resample"
        raise UsageError(msg)
    return rows


@dataclass(frozen=True)
class Features:
    """Per-image sums every metric is a function of: one row per image, exact integers.

    Attributes
    ----------
    k : int
        Number of classes.
    g : int
        Number of categories (0 when the spec has none).
    values : ndarray of int64, shape (n, 3K + 3G)
        ``[tp | fp | fn | ctp | cfp | cfn]`` of each image (void predictions in ``fn``).
    gt : ndarray of int64, shape (n, K + 2)
        Ground-truth pixels of each image per code (classes, then ignored, then unexpected):
        what two runs over the same ground truth must agree on.
    """

    k: int
    g: int
    values: IntArray
    gt: IntArray


def features(rows: ImageRows, spec: LabelSpec) -> Features:
    """Reduce each image's entries to its :class:`Features` row.

    Parameters
    ----------
    rows : ImageRows
        Per-image entries (not legacy).
    spec : LabelSpec
        The spec they were counted with (its categories give the category sums).

    Returns
    -------
    Features
    """
    k, n = rows.k, rows.n
    cats = spec.categories
    g = len(cats)
    out = np.zeros((n, 3 * k + 3 * g), dtype=np.int64)
    i, gt, pr, c = rows.image, rows.gt, rows.pred, rows.count
    valid = gt < k
    hit = valid & (gt == pr)
    np.add.at(out, (i[hit], gt[hit]), c[hit])  # tp
    wrong = valid & (pr < k) & (gt != pr)
    np.add.at(out, (i[wrong], k + pr[wrong]), c[wrong])  # fp of the predicted class
    miss = valid & (pr <= k) & (gt != pr)  # a wrong class or void: fn of the true class
    np.add.at(out, (i[miss], 2 * k + gt[miss]), c[miss])
    if g:
        member = np.asarray(spec.class_categories, dtype=np.int64)  # each class's category
        base = 3 * k
        both = valid & (pr < k)
        cg, cp = member[gt[both]], member[pr[both]]
        ib, cb = i[both], c[both]
        same = cg == cp
        np.add.at(out, (ib[same], base + cg[same]), cb[same])
        np.add.at(out, (ib[~same], base + g + cp[~same]), cb[~same])
        np.add.at(out, (ib[~same], base + 2 * g + cg[~same]), cb[~same])
        void = valid & (pr == k)
        np.add.at(out, (i[void], base + 2 * g + member[gt[void]]), c[void])
    gt_px = np.zeros((n, k + 2), dtype=np.int64)
    np.add.at(gt_px, (i, gt), c)
    return Features(k, g, out, gt_px)


def group_index(groups: Sequence[str] | None, n: int, where: str) -> tuple[IntArray, int]:
    """Map each image to a group number (``None``: each image is its own group).

    Parameters
    ----------
    groups : sequence of str, optional
        One group label per image.
    n : int
        Number of images.
    where : str
        For messages.

    Returns
    -------
    index : ndarray of int64, shape (n,)
    count : int
        Number of groups.

    Raises
    ------
    UsageError
        Not one label per image.
    """
    if groups is None:
        return np.arange(n, dtype=np.int64), n
    if len(groups) != n:
        msg = f"{where}: {len(groups)} group label(s) for {n} image(s); give one per image"
        raise UsageError(msg)
    _, index = np.unique(np.asarray(list(groups), dtype=object).astype(str), return_inverse=True)
    return index.astype(np.int64).reshape(-1), int(index.max()) + 1 if n else 0


def _weight_blocks(m: int, resamples: int, seed: int) -> Iterator[FloatArray]:
    """Yield resample weights in blocks of :data:`BLOCK` rows: ``w[b, j]`` = draws of unit ``j``.

    Each resample draws ``m`` units with replacement (uniform indices, then counted per unit).
    """
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, BLOCK):
        rows = min(BLOCK, resamples - start)
        idx = rng.integers(0, m, size=(rows, m))
        idx += (np.arange(rows, dtype=np.int64) * m)[:, None]
        yield np.bincount(idx.ravel(), minlength=rows * m).reshape(rows, m).astype(np.float64)


def resample_weights(m: int, resamples: int, seed: int = 0) -> IntArray:
    """Return the weights of ``resamples`` bootstrap resamples of ``m`` units.

    Parameters
    ----------
    m : int
        Number of units (images, or groups).
    resamples : int
        Number of resamples ``B``.
    seed : int, default 0
        Seed of the random generator: the same seed gives the same resamples (the ones
        :func:`bootstrap` uses, unit ``j`` being the ``j``-th image in name order, then in the
        order of their counts where names repeat, or the ``j``-th group label in sorted order).

    Returns
    -------
    ndarray of int64, shape (B, m)
        ``w[b, j]``: how many times resample ``b`` drew unit ``j``; each row sums to ``m``.

    Examples
    --------
    >>> w = resample_weights(5, 3, seed=1)
    >>> w.shape, w.sum(axis=1).tolist()
    ((3, 5), [5, 5, 5])
    """
    blocks = list(_weight_blocks(m, resamples, seed))
    if not blocks:
        return np.zeros((0, m), dtype=np.int64)
    return np.concatenate(blocks).astype(np.int64)


def _scored(tp: FloatArray, fp: FloatArray, fn: FloatArray, over: str) -> np.ndarray:
    if over == "present":
        return (tp + fp + fn) > 0
    if over == "gt":
        return (tp + fn) > 0
    return np.ones(tp.shape, dtype=bool)


def _ratio(num: FloatArray, den: FloatArray) -> FloatArray:
    out: FloatArray = np.divide(num, den, out=np.full(np.shape(num), np.nan), where=den > 0)
    return out


def _mean(scores: FloatArray, sel: np.ndarray, over: str) -> FloatArray:
    """Row-wise mean of ``scores`` over ``sel`` (``nan`` left out; ``all``: ``nan`` is 0)."""
    s = np.nan_to_num(scores, nan=0.0) if over == "all" else scores
    use = sel & ~np.isnan(s)
    total = np.where(use, s, 0.0).sum(axis=-1)
    return _ratio(total, use.sum(axis=-1).astype(np.float64))


def _filled(raw: FloatArray, sel: np.ndarray, conv: Convention) -> FloatArray:
    """Per-class scores of each image set, for their intervals and the paired gate.

    A class present in a set has its IoU, or the preset's fill when the preset does not score
    it (a class only predicted, under ``detectron2``); a class absent from a set is ``nan``
    whatever the preset reports for it (``torchmetrics`` and ``sklearn_all_labels`` report 0):
    a class's interval is taken over the resamples where it is present, and a class absent
    everywhere has none.
    """
    out = raw.copy()
    out[~sel & ~np.isnan(raw)] = conv.fill
    return out


def metric_replicates(sums: FloatArray, k: int, g: int, conv: Convention) -> dict[str, FloatArray]:
    """Every metric of each row of summed features, as :func:`segiou.evaluate` computes it.

    Parameters
    ----------
    sums : ndarray, shape (B, 3K + 3G)
        Summed :class:`Features` of ``B`` image sets.
    k, g : int
        Numbers of classes and categories.
    conv : Convention
        How per-class scores are filled and averaged.

    Returns
    -------
    dict of str to ndarray
        ``miou``, ``fwiou``, ``pixel_accuracy``, ``mean_accuracy``, ``kappa`` (and
        ``category_miou`` with categories), shape ``(B,)``; ``iou`` ``(B, K)`` and, with
        categories, ``category_iou`` ``(B, G)``: per-class values as the result reports them.
    """
    tp, fp, fn = sums[:, :k], sums[:, k : 2 * k], sums[:, 2 * k : 3 * k]
    over = conv.mean_over
    raw = _ratio(tp, tp + fp + fn)
    sel = _scored(tp, fp, fn, over)
    n_c = tp + fn
    total = n_c.sum(axis=1)
    fw = _ratio((n_c * np.nan_to_num(raw, nan=0.0)).sum(axis=1), total)
    gt_sel = n_c > 0
    recall = _ratio(tp, n_c)
    out = {
        "miou": _mean(raw, sel, over),
        "fwiou": fw,
        "pixel_accuracy": _ratio(tp.sum(axis=1), total),
        "mean_accuracy": _mean(recall, gt_sel, "gt"),
        "kappa": _kappa(tp, fp, n_c, total),
        "iou": _filled(raw, sel, conv),
    }
    if g:
        base = 3 * k
        ctp, cfp = sums[:, base : base + g], sums[:, base + g : base + 2 * g]
        cfn = sums[:, base + 2 * g :]
        craw = _ratio(ctp, ctp + cfp + cfn)
        csel = _scored(ctp, cfp, cfn, over)
        out["category_miou"] = _mean(craw, csel, over)
        out["category_iou"] = _filled(craw, csel, conv)
    return out


def _kappa(tp: FloatArray, fp: FloatArray, n_c: FloatArray, total: FloatArray) -> FloatArray:
    """Cohen's kappa on the matrix extended by a void column (as :func:`metrics.cohen_kappa`)."""
    n = np.where(total > 0, total, 1.0)
    po = tp.sum(axis=1) / n
    pe = (n_c * (tp + fp)).sum(axis=1) / (n * n)
    ok = (total > 0) & (pe < 1.0)
    out: FloatArray = np.divide(po - pe, 1.0 - pe, out=np.full(po.shape, np.nan), where=ok)
    return out


def percentile_interval(values: FloatArray, level: float) -> list[list[float] | None]:
    """Percentile intervals of each column of bootstrap replicates.

    Parameters
    ----------
    values : ndarray, shape (B,) or (B, K)
        Replicates; ``nan`` where undefined in a resample.
    level : float
        Coverage, e.g. 0.95: the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles.

    Returns
    -------
    list of [lo, hi] or None
        One per column, over the resamples where the value is defined; ``None`` when it is
        undefined in every resample.
    """
    v = values.reshape(values.shape[0], -1)
    q = ((1 - level) / 2, (1 + level) / 2)
    out: list[list[float] | None] = []
    for col in v.T:
        finite = col[~np.isnan(col)]
        if finite.size == 0:
            out.append(None)
            continue
        lo, hi = np.quantile(finite, q)
        out.append([float(lo), float(hi)])
    return out


@dataclass(frozen=True)
class Bootstrap:
    """Bootstrap replicates of every metric, and their percentile intervals.

    Attributes
    ----------
    replicates : dict of str to ndarray
        What :func:`metric_replicates` gives for each resample (``B`` rows).
    resamples, seed : int
        As asked.
    unit : str
        ``"image"`` or ``"group:<column>"``.
    units : int
        Number of images (or groups) resampled.
    held : dict of str to ndarray
        How many units hold what each interval measures: ``"iou"`` (K,) and
        ``"category_iou"`` (G,), the units with a TP, FP or FN of the class (category);
        ``"summary"`` (1,), the units with any counted pixel. An interval over fewer than two
        is undefined: every resample would give the same value (a zero-width interval reading
        as certainty). Empty: not known (every interval kept).
    """

    replicates: dict[str, FloatArray]
    resamples: int
    seed: int
    unit: str
    units: int
    held: dict[str, IntArray] = field(default_factory=dict)

    def intervals(self, level: float = 0.95, *, categories: bool | None = None) -> dict[str, Any]:
        """Return the intervals in the result document's form (schema version 2).

        Parameters
        ----------
        level : float, default 0.95
            Coverage of the percentile intervals, in (0, 1).
        categories : bool, optional
            Whether the spec has categories (default: whether category replicates exist).

        Returns
        -------
        dict
            ``method``, ``unit``, ``units`` (images or groups resampled), ``resamples``,
            ``level``, ``seed``, ``summary`` (metric -> ``[lo, hi]`` or ``None``), ``classes``
            (``{"iou": [...], "units": [...]}``: each class's interval and the units holding
            it), ``categories`` (the same, or ``None``) and ``note``: why intervals are
            ``None`` although defined (held by a single unit), or ``None``.

        Raises
        ------
        UsageError
            ``level`` is not in (0, 1).
        """
        check_level(level)
        r = self.replicates
        has_cats = "category_iou" in r if categories is None else categories
        held = self.held
        one = int(held["summary"][0]) < 2 if "summary" in held else False
        summary = {key: None if one else percentile_interval(r[key], level)[0]
                   for key in SUMMARY_KEYS if key in r}  # fmt: skip
        classes = self._part("iou", level)
        cats = self._part("category_iou", level) if has_cats else None
        word = "image" if self.unit == "image" else "group"
        notes = []
        if one:
            notes.append(
                f"{int(held['summary'][0])} {word} with counted pixels: no interval (every "
                f"resample draws that {word} alone, a zero width that is no certainty)"
            )
        for names, part in ((("class", "classes"), classes), (("category", "categories"), cats)):
            lone = sum(u == 1 for u in (part or {}).get("units", ()))
            if lone and not one:
                notes.append(
                    f"{lone} {names[lone > 1]} held by a single {word}: no interval (every "
                    "resample gives the same value)"
                )
        return {
            "method": "percentile bootstrap",
            "unit": self.unit,
            "units": self.units,
            "resamples": self.resamples,
            "level": level,
            "seed": self.seed,
            "summary": summary,
            "classes": classes,
            "categories": cats,
            "note": "; ".join(notes) or None,
        }

    def _part(self, key: str, level: float) -> dict[str, Any]:
        """Intervals of per-class (``iou``) or per-category values, and the units holding each."""
        ivs = percentile_interval(self.replicates[key], level)
        if key not in self.held:
            return {"iou": ivs}
        units = [int(u) for u in self.held[key]]
        return {"iou": [None if u < 2 else iv for iv, u in zip(ivs, units, strict=True)],
                "units": units}  # fmt: skip


def check_level(level: float) -> None:
    """Refuse a coverage outside (0, 1)."""
    if isinstance(level, bool) or not (isinstance(level, int | float) and 0 < level < 1):
        msg = f"level={level!r}: the coverage of an interval must be a number in (0, 1), e.g. 0.95"
        raise UsageError(msg)


def check_resamples(resamples: int, seed: int) -> None:
    """Refuse a resample count below 1 or a seed that is not a non-negative integer."""
    for name, value, low in (("resamples", resamples, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            msg = f"{name}={value!r} must be an integer >= {low}"
            raise UsageError(msg)


def sum_resamples(values: IntArray, resamples: int, seed: int) -> Iterator[FloatArray]:
    """Yield ``W @ values`` block by block: each resample's exact sums (see the module).

    Parameters
    ----------
    values : ndarray of int64, shape (m, d)
        One row per resampled unit.
    resamples, seed : int
        As for :func:`resample_weights` (the same weights, in blocks of :data:`BLOCK`).

    Yields
    ------
    ndarray of float64, shape (rows, d)
        Exact integer sums (float64 only when every partial sum stays below 2**53).
    """
    m = values.shape[0]
    peak = int(values.max()) if values.size else 0
    exact_float = peak * m < _EXACT  # a row of weights sums to m: no partial sum exceeds this
    f = values.astype(np.float64)
    for w in _weight_blocks(m, resamples, seed):
        if exact_float:
            yield w @ f
        else:  # integer matmul (slower, exact while the pixel totals fit in int64)
            yield (w.astype(np.int64) @ values).astype(np.float64)


def bootstrap(
    source: ConfusionMatrix | ImageRows,
    *,
    preset: str | Convention = "segiou",
    spec: LabelSpec | None = None,
    resamples: int = 1000,
    seed: int = 0,
    groups: Sequence[str] | None = None,
    group_name: str = "group",
) -> Bootstrap:
    """Resample images (or groups of images) with replacement; every metric of each resample.

    Parameters
    ----------
    source : ConfusionMatrix or ImageRows
        An accumulator with per-image rows (``per_image=True``; :func:`count_stores` keeps
        them), or rows (then ``spec`` is required).
    preset : str or Convention, default "segiou"
        The averaging convention, as for :func:`segiou.evaluate`.
    spec : LabelSpec, optional
        The label spec, for bare rows (an accumulator carries its own).
    resamples : int, default 1000
        Number of resamples ``B``.
    seed : int, default 0
        Seed: the same seed, data and ``B`` give the same resamples.
    groups : sequence of str, optional
        One group label per image: groups are resampled whole (video frames, tiles of one
        scene: correlated images). Default: each image is its own unit.
    group_name : str, default "group"
        Name of the grouping (the metadata column), shown as ``unit = "group:<name>"``.

    Returns
    -------
    Bootstrap

    Raises
    ------
    UsageError
        No per-image entries (see :func:`image_rows`), ``resamples`` below 1, a negative seed,
        ``groups`` not one label per image, or bare rows without ``spec``.

    Notes
    -----
    Each resample draws ``n`` images (or ``m`` groups) uniformly with replacement; its metrics
    are computed from the sums of the drawn images' entries, exactly as counting those images
    would give (repeats counted again). Images are drawn in the order of their names, then of
    their counts (images of one name, as merged keyless states repeat ``#0``, ``#1``, ...;
    groups: in the order of their labels), so neither the order the batches were counted in
    nor the order states were merged in changes the intervals. Percentile intervals assume
    the images (groups) are independent draws from the population of interest.

    References
    ----------
    .. [1] B. Efron and R. Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13.

    Examples
    --------
    >>> import numpy as np
    >>> from segiou import ConfusionMatrix
    >>> cm = ConfusionMatrix(2, per_image=True)
    >>> cm = cm.update(np.array([[[0, 1], [1, 1]], [[0, 0], [1, 0]]]), np.ones((2, 2, 2), int))
    >>> b = bootstrap(cm, resamples=200, seed=0)
    >>> b.replicates["miou"].shape, b.unit
    ((200,), 'image')
    """
    check_resamples(resamples, seed)
    rows = image_rows(source)
    if isinstance(source, ConfusionMatrix):
        spec = source.spec
    elif spec is None:
        msg = "bootstrap: bare image rows need spec= (the label spec they were counted with)"
        raise UsageError(msg)
    conv = get_convention(preset)
    feats = features(rows, spec)
    index, m = group_index(groups, rows.n, "bootstrap")
    values = feats.values
    if groups is None:  # images in name order: the order batches arrived in must not matter
        values = values[_name_order(rows.names, values)]
    else:
        summed = np.zeros((m, values.shape[1]), dtype=np.int64)
        np.add.at(summed, index, values)
        values = summed
    parts = [
        metric_replicates(s, feats.k, feats.g, conv) for s in sum_resamples(values, resamples, seed)
    ]
    replicates = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    unit = "image" if groups is None else f"group:{group_name}"
    return Bootstrap(
        replicates, resamples, int(seed), unit, m, held_units(values, feats.k, feats.g)
    )


def held_units(values: IntArray, k: int, g: int) -> dict[str, IntArray]:
    """How many units (rows of ``values``) hold each class, each category, anything.

    Parameters
    ----------
    values : ndarray of int64, shape (m, 3K + 3G)
        Each unit's :class:`Features` sums.
    k, g : int
        Numbers of classes and categories.

    Returns
    -------
    dict of str to ndarray
        ``"iou"``: units with a TP, FP or FN of each class; ``"category_iou"`` (with
        categories): the same per category; ``"summary"``: units with any counted pixel.
    """
    out = {"iou": (values[:, : 3 * k].reshape(-1, 3, k) != 0).any(axis=1).sum(axis=0),
           "summary": np.array([int(values[:, : 3 * k].any(axis=1).sum())])}  # fmt: skip
    if g:
        cat = values[:, 3 * k :].reshape(-1, 3, g) != 0
        out["category_iou"] = cat.any(axis=1).sum(axis=0)
    return {key: v.astype(np.int64) for key, v in out.items()}


def _name_order(names: Sequence[str], values: IntArray) -> IntArray:
    """Order images by name, then by their counts; rows left tied are identical.

    A stable sort by name alone left repeated names (``#0``, ``#1``, ... of merged keyless
    states) in merge order: ``a + b`` and ``b + a`` gave different intervals.
    """
    _, rank = np.unique(np.asarray(list(names), dtype=object).astype(str), return_inverse=True)
    keys = np.vstack([values.T[::-1], rank.reshape(1, -1)])  # the last key sorts first
    order: IntArray = np.lexsort(keys).astype(np.int64)
    return order


def finite_or_none(x: float) -> float | None:
    """``None`` for ``nan`` (the document's undefined), else the float."""
    return None if math.isnan(x) else float(x)
