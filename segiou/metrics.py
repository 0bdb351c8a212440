"""Layer 3: metric reducers, pure functions of a ``K x K`` count matrix ``cm[gt, pred]``.

Every reducer also takes ``void``: per ground-truth class, the pixels whose prediction was no
evaluated class (Cityscapes' rule: a false negative of the true class, never a false positive
of any class). ``void=None`` means none.

Conventions shared by every reducer (the ``over`` argument of the means selects among them):

* A class with ``TP + FP + FN = 0`` (in neither ground truth nor prediction) scores ``nan``,
  never 0 or -1, and means skip it (``over="present"``, the default).
* A class predicted but absent from the ground truth scores 0 and is included in means
  (cityscapesScripts, mmsegmentation, HF evaluate, torchmetrics' macro average, scikit-learn).
  ``over="gt"`` leaves it out (detectron2); ``over="all"`` averages over every class with absent
  classes scored 0 (scikit-learn with ``labels=range(K)``).

Ratios are computed here, once, from summed counts: never average per-image or per-batch scores.

Every reducer checks its input: a matrix that is not square, ``void`` of the wrong shape or a
negative count raises :class:`~segiou.errors.CountMatrixError` (a ``ValueError``), counts that
are not integers :class:`~segiou.errors.CountDtypeError` (also a ``TypeError``).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt

from segiou._matrix import check_counts as _check
from segiou._matrix import ratio as _ratio
from segiou._typing import CountMatrix, FloatArray, IntArray
from segiou.errors import UsageError

__all__ = [
    "MeanOver",
    "category_counts",
    "category_iou",
    "cohen_kappa",
    "dice",
    "fbeta",
    "fw_iou",
    "iou",
    "mean",
    "mean_accuracy",
    "mean_iou",
    "micro_iou",
    "pixel_accuracy",
    "precision",
    "recall",
    "tp_fp_fn",
]

#: Which classes a mean runs over: see the module docstring.
MeanOver = Literal["present", "gt", "all"]


def tp_fp_fn(
    cm: CountMatrix, *, void: IntArray | None = None
) -> tuple[IntArray, IntArray, IntArray]:
    """Per-class true positives, false positives and false negatives.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class.

    Returns
    -------
    tp, fp, fn : ndarray of int64, shape (K,)

    Notes
    -----
    ``TP_c = cm[c, c]``, ``FP_c = sum_g cm[g, c] - TP_c``,
    ``FN_c = sum_p cm[c, p] - TP_c + void_c``.

    Examples
    --------
    >>> tp, fp, fn = tp_fp_fn(np.array([[3, 1], [2, 4]]), void=np.array([1, 0]))
    >>> tp.tolist(), fp.tolist(), fn.tolist()
    ([3, 4], [2, 1], [2, 2])
    """
    cm, v = _check(cm, void)
    tp = np.diagonal(cm).copy()
    return tp, cm.sum(axis=0) - tp, cm.sum(axis=1) - tp + v


def iou(cm: CountMatrix, *, void: IntArray | None = None) -> FloatArray:
    """Per-class intersection over union (Jaccard index).

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class (false negatives).

    Returns
    -------
    ndarray of float64, shape (K,)
        ``nan`` where the class is in neither ground truth nor prediction.

    Notes
    -----
    ``IoU_c = TP_c / (TP_c + FP_c + FN_c)``. A class only predicted scores 0.

    References
    ----------
    .. [1] M. Everingham et al., "The PASCAL Visual Object Classes (VOC) Challenge", IJCV 2010.

    Examples
    --------
    >>> iou(np.array([[100, 25], [75, 0]])).tolist()
    [0.5, 0.0]
    """
    tp, fp, fn = tp_fp_fn(cm, void=void)
    return _ratio(tp, tp + fp + fn)


def mean(scores: FloatArray, cm: CountMatrix, *, void: IntArray | None = None,
         over: MeanOver = "present") -> float:  # fmt: skip
    """Average per-class ``scores`` over the classes selected by ``over``.

    Parameters
    ----------
    scores : ndarray of float, shape (K,)
        Per-class scores (``nan`` for undefined).
    cm : ndarray of int, shape (K, K)
        The counts the scores came from, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class, as the scores were computed with.
    over : {"present", "gt", "all"}, default "present"
        ``present``: classes with ``TP+FP+FN > 0``; ``gt``: classes with ground-truth pixels;
        ``all``: every class, undefined scores counted as 0.

    Returns
    -------
    float
        ``nan`` when no class is selected (``nan`` scores of selected classes are left out).

    Raises
    ------
    UsageError
        ``over`` is not one of the three choices.

    Examples
    --------
    >>> cm = np.array([[2, 1, 0], [0, 0, 0], [0, 0, 0]])  # class 1 only predicted, 2 absent
    >>> s = iou(cm)
    >>> [round(mean(s, cm, over=o), 4) for o in ("present", "gt", "all")]
    [0.3333, 0.6667, 0.2222]
    """
    tp, fp, fn = tp_fp_fn(cm, void=void)
    s = np.asarray(scores, dtype=np.float64)
    if over == "present":
        sel = (tp + fp + fn) > 0
    elif over == "gt":
        sel = (tp + fn) > 0
    elif over == "all":
        s = np.nan_to_num(s, nan=0.0)
        sel = np.ones(s.shape, dtype=bool)
    else:
        msg = f"over={over!r} is unknown; expected 'present', 'gt' or 'all'"  # type: ignore[unreachable]
        raise UsageError(msg)
    vals = s[sel]
    vals = vals[~np.isnan(vals)]
    return float(vals.mean()) if vals.size else float("nan")


def mean_iou(cm: CountMatrix, *, void: IntArray | None = None, over: MeanOver = "present") -> float:
    """Mean IoU over classes (mIoU).

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class.
    over : {"present", "gt", "all"}, default "present"
        Which classes the mean runs over (see :func:`mean`).

    Returns
    -------
    float

    Notes
    -----
    ``mIoU = mean_c IoU_c`` over the selected classes; never an average of per-image mIoUs.

    Examples
    --------
    >>> mean_iou(np.array([[1, 1], [1, 1]]))  # Keras' MeanIoU example
    0.3333333333333333
    """
    return mean(iou(cm, void=void), cm, void=void, over=over)


def fw_iou(cm: CountMatrix, *, void: IntArray | None = None) -> float:
    """Frequency-weighted IoU: per-class IoU weighted by the class's ground-truth pixel share.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class (false negatives); ``None`` means none.

    Returns
    -------
    float
        ``nan`` when there is no ground-truth pixel.

    Notes
    -----
    ``fwIoU = sum_c (n_c / N) IoU_c`` with ``n_c = TP_c + FN_c`` ground-truth pixels of class
    ``c`` and ``N = sum_c n_c``. Classes without ground truth have weight 0. ``nan`` when there
    is no ground-truth pixel.

    Examples
    --------
    >>> fw_iou(np.array([[3, 1], [0, 0]]))
    0.75
    """
    tp, fp, fn = tp_fp_fn(cm, void=void)
    n = tp + fn
    if n.sum() == 0:
        return float("nan")
    scores = np.nan_to_num(_ratio(tp, tp + fp + fn), nan=0.0)
    return float((n * scores).sum() / n.sum())


def micro_iou(cm: CountMatrix, *, void: IntArray | None = None) -> float:
    """Micro-averaged IoU: summed TP over summed TP + FP + FN of all classes.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class (false negatives); ``None`` means none.

    Returns
    -------
    float
        ``nan`` when every class has ``TP + FP + FN = 0``.

    Notes
    -----
    ``microIoU = sum_c TP_c / sum_c (TP_c + FP_c + FN_c)``.

    Examples
    --------
    >>> micro_iou(np.array([[1, 1], [1, 1]]))
    0.3333333333333333
    """
    tp, fp, fn = tp_fp_fn(cm, void=void)
    # exact Python integers: a wrong pixel is in two unions (FP of one class, FN of another),
    # so the sum of unions reaches twice the pixel total, past int64 from 2**62 pixels
    union = sum(int(u) for u in tp + fp + fn)
    return int(tp.sum()) / union if union else math.nan


def fbeta(
    cm: CountMatrix,
    beta: float = 1.0,
    *,
    void: IntArray | None = None,
    from_precision_recall: bool = False,
) -> FloatArray:
    """Per-class F-beta score.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    beta : float
        Weight of recall: ``beta = 1`` is Dice / F1.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class (false negatives).
    from_precision_recall : bool
        Compute ``(1 + b^2) P R / (b^2 P + R)`` from per-class precision ``P`` and recall ``R``,
        as mmsegmentation's mFscore does: the same value where ``TP > 0``, but ``nan``
        (undefined, 0/0) for every class without true positives, so that means leave it out.

    Returns
    -------
    ndarray of float64, shape (K,)

    Notes
    -----
    ``F_beta,c = (1 + b^2) TP / ((1 + b^2) TP + b^2 FN + FP)``; ``nan`` when the class is in
    neither ground truth nor prediction, 0 for a class with ``TP = 0`` otherwise (scikit-learn
    and torchmetrics with ``zero_division=0``), unless ``from_precision_recall``.

    Examples
    --------
    >>> fbeta(np.array([[2, 1], [1, 0]]), beta=2.0).round(4).tolist()
    [0.6667, 0.0]
    >>> fbeta(np.array([[2, 1], [1, 0]]), beta=2.0, from_precision_recall=True).round(4).tolist()
    [0.6667, nan]
    """
    tp, fp, fn = tp_fp_fn(cm, void=void)
    if not float(beta) > 1e100:  # b^2 times any count stays finite (nan stays nan)
        b2 = float(beta) ** 2
        out = _ratio((1 + b2) * tp, (1 + b2) * tp + b2 * fn + fp)
    else:  # F's limit (FP / b^2 < 1e-181 beside TP + FN >= 1): recall; 0 for a class only
        out = _ratio(tp, tp + fn)  # predicted (b^2 overflowed: nan, or an OverflowError)
        out[(tp + fn == 0) & (fp > 0)] = 0.0
    # 0 without true positives, as the formula gives, also where b^2 underflowed to 0
    # (beta < ~1.5e-162: a class never predicted read 0/0)
    if not np.isnan(beta):  # (nan stays nan)
        out[(tp == 0) & (tp + fp + fn > 0)] = 0.0
    if from_precision_recall:
        out[tp == 0] = np.nan
    return out


def dice(cm: CountMatrix, *, void: IntArray | None = None) -> FloatArray:
    """Per-class Dice coefficient (F1): ``2 TP / (2 TP + FP + FN)``, ``nan`` when absent.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class (false negatives); ``None`` means none.

    Returns
    -------
    ndarray of float64, shape (K,)
        ``nan`` where the class is in neither ground truth nor prediction; 0 for a class with
        ``TP = 0`` otherwise.

    Notes
    -----
    ``Dice_c = 2 TP_c / (2 TP_c + FP_c + FN_c)``: :func:`fbeta` with ``beta = 1``.

    Examples
    --------
    >>> dice(np.array([[100, 25], [75, 0]])).round(4).tolist()
    [0.6667, 0.0]
    """
    return fbeta(cm, 1.0, void=void)


def precision(cm: CountMatrix, *, void: IntArray | None = None) -> FloatArray:
    """Per-class precision ``TP / (TP + FP)``; ``nan`` when the class is never predicted.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class; they are false negatives, so they do not
        change precision (accepted for a uniform signature and checked).

    Returns
    -------
    ndarray of float64, shape (K,)
        ``nan`` where ``TP + FP = 0``.

    Notes
    -----
    ``precision_c = TP_c / (TP_c + FP_c)``.

    Examples
    --------
    >>> precision(np.array([[3, 1], [1, 1]])).tolist()
    [0.75, 0.5]
    """
    tp, fp, _ = tp_fp_fn(cm, void=void)
    return _ratio(tp, tp + fp)


def recall(cm: CountMatrix, *, void: IntArray | None = None) -> FloatArray:
    """Per-class recall (class accuracy) ``TP / (TP + FN)``; ``nan`` without ground truth.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class (false negatives); ``None`` means none.

    Returns
    -------
    ndarray of float64, shape (K,)
        ``nan`` where ``TP + FN = 0`` (the class has no ground-truth pixel).

    Notes
    -----
    ``recall_c = TP_c / (TP_c + FN_c)``, void predictions counted in ``FN_c``.

    Examples
    --------
    >>> recall(np.array([[3, 1], [1, 1]])).tolist()
    [0.75, 0.5]
    """
    tp, _, fn = tp_fp_fn(cm, void=void)
    return _ratio(tp, tp + fn)


def pixel_accuracy(cm: CountMatrix, *, void: IntArray | None = None) -> float:
    """Share of valid ground-truth pixels predicted correctly: ``sum TP / sum (TP + FN)``.

    Void predictions count as wrong; ignored pixels are not counted at all.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class (false negatives); ``None`` means none.

    Returns
    -------
    float
        ``nan`` when there is no ground-truth pixel.

    Notes
    -----
    ``pixelAcc = sum_c TP_c / sum_c (TP_c + FN_c)``.

    Examples
    --------
    >>> pixel_accuracy(np.array([[3, 1], [1, 1]]))
    0.6666666666666666
    """
    tp, _, fn = tp_fp_fn(cm, void=void)
    return float(_ratio(tp.sum(), (tp + fn).sum()))


def mean_accuracy(cm: CountMatrix, *, void: IntArray | None = None) -> float:
    """Mean of per-class recall over classes with ground-truth pixels.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class (false negatives); ``None`` means none.

    Returns
    -------
    float
        ``nan`` when no class has ground-truth pixels.

    Notes
    -----
    ``meanAcc = mean_c TP_c / (TP_c + FN_c)`` over the classes with ``TP_c + FN_c > 0``
    (:func:`mean` of :func:`recall` with ``over="gt"``).

    Examples
    --------
    >>> mean_accuracy(np.array([[3, 1], [1, 1]]))
    0.625
    """
    return mean(recall(cm, void=void), cm, void=void, over="gt")


def cohen_kappa(cm: CountMatrix, *, void: IntArray | None = None) -> float:
    """Cohen's kappa of the agreement between ground truth and prediction.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class; they form the extra void column (see Notes).

    Returns
    -------
    float
        ``nan`` when ``p_e = 1`` or ``N = 0``.

    Notes
    -----
    ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o = sum TP / N`` and
    ``p_e = sum_c gt_c pred_c / N^2``, computed on the matrix extended by a void column (a
    "class" never in the ground truth). ``nan`` when ``p_e = 1`` or ``N = 0``.

    References
    ----------
    .. [1] J. Cohen, "A coefficient of agreement for nominal scales", 1960.

    Examples
    --------
    >>> round(cohen_kappa(np.array([[3, 1], [1, 1]])), 4)
    0.25
    """
    cm, v = _check(cm, void)
    n = float(cm.sum() + v.sum())
    if n == 0:
        return float("nan")
    gt = (cm.sum(axis=1) + v).astype(np.float64)
    pr = cm.sum(axis=0).astype(np.float64)
    po = float(np.trace(cm)) / n
    pe = float((gt * pr).sum()) / (n * n)
    return float("nan") if pe >= 1.0 else (po - pe) / (1.0 - pe)


def _membership(membership: npt.ArrayLike, k: int, num_categories: int | None) -> IntArray:
    """Validate a class -> category membership; return it as a ``K x G`` 0/1 int64 matrix."""
    if num_categories is not None and (
        isinstance(num_categories, bool) or not isinstance(num_categories, int | np.integer)
        or num_categories < 1
    ):  # fmt: skip
        msg = f"num_categories must be a positive integer, got {num_categories!r}"
        raise UsageError(msg)
    m = np.asarray(membership)
    if m.ndim == 1:
        if m.shape[0] != k:
            msg = (
                f"membership has {m.shape[0]} category indices for {k} classes; give one "
                "category index per class (or a K x G 0/1 matrix)"
            )
            raise UsageError(msg)
        if m.dtype.kind not in "iu":
            msg = (
                f"membership as category indices must hold integers, got {m.tolist()!r} "
                f"(dtype {m.dtype}); give the integer category index of each class"
            )
            raise UsageError(msg)
        if (neg := np.flatnonzero(m < 0)).size:
            c = int(neg[0])
            msg = (
                f"membership gives class {c} the category index {int(m[c])}; category indices "
                "are 0 or more"
            )
            raise UsageError(msg)
        g = int(m.max()) + 1 if k else 0
        if num_categories is not None:
            if g > num_categories:
                c = int(np.argmax(m))
                msg = (
                    f"membership gives class {c} the category index {int(m[c])}, but "
                    f"num_categories={num_categories}; use indices 0..{num_categories - 1} or "
                    "raise num_categories"
                )
                raise UsageError(msg)
            g = num_categories
        onehot = np.zeros((k, g), dtype=np.int64)
        onehot[np.arange(k), m.astype(np.int64)] = 1
        return onehot
    if m.ndim != 2 or m.shape[0] != k or m.shape[1] == 0:
        msg = (
            f"membership must be K x G with K = {k} (one row per class, one column per "
            f"category, G >= 1) or a sequence of {k} category indices, got shape {m.shape}"
        )
        raise UsageError(msg)
    if m.dtype.kind not in "biuf":
        msg = f"membership must hold 0/1 numbers, got dtype {m.dtype}"
        raise UsageError(msg)
    if (bad := np.argwhere((m != 0) & (m != 1))).size:
        at = tuple(int(i) for i in bad[0])
        msg = (
            f"membership entries must be 0 or 1 (class in category or not), got {m[at].item()!r} at "
            f"(class, category) = {at}; weights are not supported"
        )
        raise UsageError(msg)
    m = m.astype(np.int64)
    rows = m.sum(axis=1)
    if (none := np.flatnonzero(rows == 0)).size:
        msg = (
            f"membership puts class(es) {none.tolist()} in no category, so their pixels would be "
            "lost from every category; put every class in exactly one category (one 1 per row)"
        )
        raise UsageError(msg)
    if (many := np.flatnonzero(rows > 1)).size:
        msg = (
            f"membership puts class(es) {many.tolist()} in more than one category (rows sum to "
            f"{rows[many].tolist()}), so their pixels would be counted twice; put every class "
            "in exactly one category (one 1 per row)"
        )
        raise UsageError(msg)
    if num_categories is not None and num_categories != m.shape[1]:
        msg = f"membership has {m.shape[1]} category columns but num_categories={num_categories}"
        raise UsageError(msg)
    return m


def category_counts(
    cm: CountMatrix,
    membership: npt.ArrayLike,
    *,
    void: IntArray | None = None,
    num_categories: int | None = None,
) -> tuple[CountMatrix, IntArray]:
    """Merge classes into categories: ``(M^T cm M, M^T void)`` for a ``K x G`` 0/1 ``M``.

    Confusions between classes of the same category become true positives of the category.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    membership : array_like of int, shape (K, G) or (K,)
        A 0/1 (or bool) matrix, ``M[c, g] = 1`` when class ``c`` is in category ``g``; or the
        category index ``0..G-1`` of each class.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class.
    num_categories : int, optional
        Number of categories ``G`` (default: the matrix's columns, or the largest index + 1);
        categories without classes score ``nan``.

    Returns
    -------
    ccm : ndarray of int64, shape (G, G)
    cvoid : ndarray of int64, shape (G,)

    Raises
    ------
    UsageError
        A membership that does not put every class in exactly one category (a class in none
        would lose its pixels, a class in two would be counted twice), entries other than 0/1,
        a wrong shape, or negative or non-integer category indices.

    Examples
    --------
    >>> m = np.array([[1, 0], [1, 0], [0, 1]])
    >>> cm = np.array([[5, 2, 1], [3, 4, 0], [0, 1, 6]])
    >>> category_counts(cm, m)[0].tolist()
    [[14, 1], [1, 6]]
    >>> category_counts(cm, [0, 0, 1])[0].tolist()
    [[14, 1], [1, 6]]
    """
    cm, v = _check(cm, void)
    m = _membership(membership, cm.shape[0], num_categories)
    return m.T @ cm @ m, m.T @ v


def category_iou(
    cm: CountMatrix,
    membership: npt.ArrayLike,
    *,
    void: IntArray | None = None,
    num_categories: int | None = None,
) -> FloatArray:
    """Per-category IoU, Cityscapes style (see :func:`category_counts`).

    Classes are merged into categories first, so that confusions between classes of the same
    category are true positives of the category; then IoU is computed per category.

    Parameters
    ----------
    cm : ndarray of int, shape (K, K)
        Counts, rows ground truth, columns prediction.
    membership : array_like of int, shape (K, G) or (K,)
        A 0/1 (or bool) matrix, ``M[c, g] = 1`` when class ``c`` is in category ``g``; or the
        category index ``0..G-1`` of each class.
    void : ndarray of int, shape (K,), optional
        Void predictions per ground-truth class (false negatives); ``None`` means none.
    num_categories : int, optional
        Number of categories ``G`` (default: the matrix's columns, or the largest index + 1);
        categories without classes score ``nan``.

    Returns
    -------
    ndarray of float64, shape (G,)
        ``nan`` where the category is in neither ground truth nor prediction.

    Raises
    ------
    UsageError
        An invalid ``membership`` or ``num_categories`` (see :func:`category_counts`).

    Notes
    -----
    ``IoU_g = TP_g / (TP_g + FP_g + FN_g)`` on the merged counts ``(M^T cm M, M^T void)``.

    Examples
    --------
    >>> m = np.array([[1, 0], [1, 0], [0, 1]])
    >>> cm = np.array([[5, 2, 1], [3, 4, 0], [0, 1, 6]])
    >>> category_iou(cm, m).round(4).tolist()
    [0.875, 0.75]
    """
    ccm, cv = category_counts(cm, membership, void=void, num_categories=num_categories)
    return iou(ccm, void=cv)
