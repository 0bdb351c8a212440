"""Layer 3: Boundary IoU and instance-level IoU (iIoU), pure functions of summed counts.

* :func:`boundary_iou`: per class ``|G_d & P_d| / |G_d | P_d|`` from the intersections and the
  two boundaries summed over images (Cheng et al., "Boundary IoU: Improving Object-Centric
  Image Segmentation Evaluation", CVPR 2021); ``nan`` where the union is empty.
* :func:`instance_iou`: cityscapesScripts' iIoU (``evalPixelLevelSemanticLabeling``,
  ``evalInstLevelScore``): per ground-truth instance of a class with an average size ``A``,
  ``w = A / size``; weighted TP ``= tp * w``, weighted FN ``= (size - tp) * w``; FP unweighted
  from the class's column of the confusion matrix. Categories likewise, with predictions in
  the category counting as true positives.

Both ratios are computed once, from counts summed over the whole dataset; weighted sums are
exactly rounded (``math.fsum``), so they do not depend on the order images were counted in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from segiou._typing import CountMatrix, FloatArray, IntArray
from segiou.errors import CountMatrixError

__all__ = ["boundary_iou", "instance_iou", "nanmean"]


def nanmean(scores: FloatArray) -> float:
    """Mean of the defined (non-``nan``) scores; ``nan`` when none is.

    Parameters
    ----------
    scores : ndarray of float

    Returns
    -------
    float

    Examples
    --------
    >>> nanmean(np.array([0.5, np.nan, 1.0]))
    0.75
    """
    ok = ~np.isnan(scores)
    return float(scores[ok].mean()) if ok.any() else float("nan")


def boundary_iou(counts: IntArray) -> FloatArray:
    """Per-class Boundary IoU from ``(intersection, |G_d|, |P_d|)`` summed over images.

    Parameters
    ----------
    counts : ndarray of int, shape (3, K)
        Rows: ``|G_d & P_d|``, ``|G_d|``, ``|P_d|`` per class (pixels with ignored ground truth
        in none of them).

    Returns
    -------
    ndarray of float, shape (K,)
        ``I / (G + P - I)``; ``nan`` for a class with no boundary pixel on either side.

    Raises
    ------
    CountMatrixError
        Not ``(3, K)`` non-negative counts, or an intersection larger than a boundary.

    Examples
    --------
    >>> boundary_iou(np.array([[2, 0], [3, 0], [4, 0]])).tolist()
    [0.4, nan]
    """
    c = np.asarray(counts)
    if c.ndim != 2 or c.shape[0] != 3 or (c < 0).any() or (c[0] > c[1:].min(axis=0)).any():
        msg = (
            f"boundary counts must be (3, K) non-negative integers (intersection <= each "
            f"boundary), got shape {c.shape}"
        )
        raise CountMatrixError(msg)
    inter = c[0].astype(np.float64)
    union = (c[1] + c[2] - c[0]).astype(np.float64)
    out = np.full(c.shape[1], np.nan)
    np.divide(inter, union, out=out, where=union > 0)
    return out


def _weighted(tp: IntArray, size: IntArray, average: float) -> tuple[float, float]:
    w = [average / float(s) for s in size.tolist()]
    tpw = math.fsum(float(t) * wi for t, wi in zip(tp.tolist(), w, strict=True))
    fnw = math.fsum(float(s - t) * wi for t, s, wi in zip(tp.tolist(), size.tolist(), w,
                                                          strict=True))  # fmt: skip
    return tpw, fnw


def instance_iou(
    cm: CountMatrix,
    *,
    sizes: Sequence[tuple[int, float]],
    cls: IntArray,
    pixels: IntArray,
    tp: IntArray,
    cat_tp: IntArray,
    class_categories: Sequence[int] = (),
    instance_categories: Sequence[int] = (),
    category_fp: IntArray | None = None,
) -> dict[str, object]:
    """Instance-level IoU per class and per category, as cityscapesScripts computes it.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Confusion counts ``[gt, pred]`` (valid ground truth).
    sizes : sequence of (int, float)
        Average instance size of each class with instances.
    cls, pixels, tp, cat_tp : ndarray of int
        One entry per ground-truth instance: its class, size, pixels predicted as its class,
        and pixels predicted in its instance category.
    class_categories : sequence of int
        Category of each class (empty: no categories).
    instance_categories : sequence of int
        The categories with iIoU (every class in them has an instance size).
    category_fp : ndarray of int, shape (G,), optional
        False positives of predicted ids of no class that belong to a category (added to the
        category's, as cityscapesScripts does).

    Returns
    -------
    dict
        ``iiou``, ``tp_weighted``, ``fn_weighted``, ``fp`` and ``instances`` per class (``nan``
        for classes without instance size); ``miiou`` (their mean over defined scores); and for
        categories ``category_iiou``, ``category_tp_weighted``, ``category_fn_weighted``,
        ``category_fp`` (``nan`` outside ``instance_categories``) and ``category_miiou``.

    Notes
    -----
    ``iIoU_c = TPw / (TPw + FPc + FNw)`` with ``TPw = sum_i tp_i A_c / n_i`` and ``FNw =
    sum_i (n_i - tp_i) A_c / n_i`` over the instances ``i`` of class ``c`` (``n_i`` pixels) and
    ``FPc`` the class's false positives; ``nan`` when the denominator is 0.

    Examples
    --------
    >>> cm = np.array([[8, 2], [0, 10]])
    >>> r = instance_iou(cm, sizes=[(0, 4.0)], cls=np.array([0]), pixels=np.array([10]),
    ...                  tp=np.array([8]), cat_tp=np.array([8]))
    >>> round(float(r["iiou"][0]), 6), bool(np.isnan(r["iiou"][1]))
    (0.8, True)
    """
    c = np.asarray(cm)
    k = c.shape[0]
    if c.ndim != 2 or c.shape[1] != k:
        msg = f"instance_iou: the count matrix must be square, got {c.shape}"
        raise CountMatrixError(msg)
    fp = c.sum(axis=0) - np.diagonal(c)
    out: dict[str, object] = {}
    tpw = np.full(k, np.nan)
    fnw = np.full(k, np.nan)
    n_inst = np.zeros(k, dtype=np.int64)
    for cl, avg in sizes:
        sel = cls == cl
        n_inst[cl] = int(sel.sum())
        tpw[cl], fnw[cl] = _weighted(tp[sel], pixels[sel], avg)
    scores = _ratio(tpw, tpw + fnw + fp)
    out |= {"iiou": scores, "tp_weighted": tpw, "fn_weighted": fnw, "fp": fp,
            "instances": n_inst, "miiou": nanmean(scores)}  # fmt: skip
    g = max(class_categories, default=-1) + 1
    ctpw = np.full(g, np.nan)
    cfnw = np.full(g, np.nan)
    cfp = np.zeros(g, dtype=np.int64)
    avg_of = dict(sizes)
    cats = np.asarray(class_categories, dtype=np.int64)
    for cat in instance_categories:
        members = np.flatnonzero(cats == cat)
        others = np.flatnonzero(cats != cat)
        cfp[cat] = int(c[np.ix_(others, members)].sum())
        if category_fp is not None:
            cfp[cat] += int(category_fp[cat])
        parts = [_weighted(cat_tp[cls == m], pixels[cls == m], avg_of[int(m)]) for m in members]
        ctpw[cat] = math.fsum(p[0] for p in parts)
        cfnw[cat] = math.fsum(p[1] for p in parts)
    cscores = _ratio(ctpw, ctpw + cfnw + cfp)
    out |= {"category_iiou": cscores, "category_tp_weighted": ctpw,
            "category_fn_weighted": cfnw, "category_fp": cfp,
            "category_miiou": nanmean(cscores)}  # fmt: skip
    return out


def _ratio(num: FloatArray, den: FloatArray) -> FloatArray:
    out = np.full(num.shape, np.nan)
    ok = ~np.isnan(num) & (den > 0)
    np.divide(num, den, out=out, where=ok)
    return out
