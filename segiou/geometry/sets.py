"""Jaccard and Dice of label sets, and of multi-label indicator matrices.

Two families:

* :func:`set_jaccard`, :func:`set_dice`, :func:`set_overlap` compare two collections of hashable
  labels (tags, tokens, class names), as sets or, with ``dedupe=False``, as multisets.
* :func:`multilabel_jaccard`, :func:`multilabel_dice` compare two ``samples x classes`` 0/1
  indicator matrices per class, and average per class (macro, weighted), over all decisions
  (micro) or per sample (samples), like scikit-learn's ``jaccard_score`` and ``f1_score``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from segiou.errors import (
    IndicatorMatrixError,
    LabelSetError,
    SetOptionError,
    ShapeMismatchError,
)

__all__ = [
    "AVERAGES",
    "Average",
    "IndicatorMatrixError",
    "LabelSetError",
    "SetOptionError",
    "SetOverlap",
    "multilabel_dice",
    "multilabel_jaccard",
    "set_dice",
    "set_jaccard",
    "set_overlap",
]

Average: TypeAlias = Literal["macro", "micro", "weighted", "samples"]
AVERAGES: Final[tuple[str, ...]] = ("macro", "micro", "weighted", "samples")


# --------------------------------------------------------------------------------------------
# Label sets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SetOverlap:
    """Overlap of two label collections, as returned by :func:`set_overlap`.

    Attributes
    ----------
    intersection, union : tuple
        The labels in first-seen order (``gt`` first, then ``pred``); with ``dedupe=False`` a
        label appears as many times as it counts (the minimum and the maximum of its two counts
        respectively).
    size_gt, size_pred : int
        Sizes of the two collections (distinct labels, or all labels when ``dedupe=False``).
    jaccard, dice : float
        The two scores.
    """

    intersection: tuple[Hashable, ...]
    union: tuple[Hashable, ...]
    size_gt: int
    size_pred: int
    jaccard: float
    dice: float

    @property
    def n_intersection(self) -> int:
        """Size of the intersection (with multiplicity when ``dedupe=False``)."""
        return len(self.intersection)

    @property
    def n_union(self) -> int:
        """Size of the union (with multiplicity when ``dedupe=False``)."""
        return len(self.union)


def _labels(values: Iterable[Hashable], name: str, lower: bool) -> list[Hashable]:
    if isinstance(values, str | bytes):
        msg = (
            f"{name} is a single string {values!r}, which would be read character by "
            f"character; pass a list of labels, e.g. {name}.split(',')"
        )
        raise LabelSetError(msg)
    if isinstance(values, np.ma.MaskedArray):
        msg = (
            f"{name} is a numpy masked array; pass the labels it keeps, e.g. "
            f"{name}.compressed().tolist()"
        )
        raise LabelSetError(msg)
    try:
        items = list(values)
    except TypeError as err:
        msg = f"{name} is a {type(values).__name__}, not an iterable of labels; pass a list"
        raise LabelSetError(msg) from err
    out: list[Hashable] = []
    for i, item in enumerate(items):
        try:
            hash(item)
        except TypeError as err:
            msg = (
                f"{name}[{i}] = {item!r} is an unhashable {type(item).__name__}; labels must be "
                "hashable (str, int, tuple, ...): convert it, e.g. with tuple()"
            )
            raise LabelSetError(msg) from err
        out.append(item.casefold() if lower and isinstance(item, str) else item)
    return out


def _check_empty(empty: float, choices: str = "1.0 (default), 0.0 or nan") -> float:
    try:
        value = float(empty)
    except (TypeError, ValueError) as err:
        msg = f"empty={empty!r} is not a number; pass {choices}"
        raise SetOptionError(msg) from err
    if not (math.isnan(value) or 0.0 <= value <= 1.0):
        msg = f"empty={empty!r} is outside [0, 1]; pass {choices}"
        raise SetOptionError(msg)
    return value


def set_overlap(
    gt: Iterable[Hashable],
    pred: Iterable[Hashable],
    *,
    lower: bool = False,
    dedupe: bool = True,
    empty: float = 1.0,
) -> SetOverlap:
    """Intersection, union, Jaccard and Dice of two label collections.

    Parameters
    ----------
    gt, pred : iterable of hashable
        The two label collections (a list, set, tuple, ...; not a bare string).
    lower : bool, default False
        Compare string labels case-insensitively (``str.casefold``: "ß" equals "SS"; other
        labels are left alone).
    dedupe : bool, default True
        True: compare as sets (duplicates ignored). False: compare as multisets, where a label
        repeated ``k`` times counts ``k`` times.
    empty : float, default 1.0
        Jaccard and Dice when both collections are empty (0/0); in ``[0, 1]`` or nan.

    Returns
    -------
    SetOverlap
        The intersection and union (in first-seen order), both sizes, Jaccard and Dice.

    Raises
    ------
    LabelSetError
        A collection is a bare ``str``/``bytes``, is not iterable, or holds an unhashable
        label (its position is named).
    SetOptionError
        ``empty`` is not a number or is outside ``[0, 1]``.

    Notes
    -----
    ``Jaccard = |A & B| / |A | B|`` and ``Dice = 2 |A & B| / (|A| + |B|) = 2 J / (1 + J)``.
    For multisets (``dedupe=False``) ``|A & B| = sum_x min(a_x, b_x)`` and
    ``|A | B| = sum_x max(a_x, b_x)`` (the Ruzicka / weighted Jaccard), ``|A| = sum_x a_x``.
    Two empty collections score ``empty``, 1 by default: identical (empty) sets are a perfect
    match, the usual convention in the literature. One empty and one non-empty score 0.
    Labels compare by Python equality and hash, so ``1``, ``1.0`` and ``True`` are one label.

    Examples
    --------
    >>> from segiou.geometry.sets import set_overlap
    >>> o = set_overlap(["cat", "dog", "bird"], ["dog", "bird", "fish"])
    >>> o.intersection, o.union
    (('dog', 'bird'), ('cat', 'dog', 'bird', 'fish'))
    >>> o.jaccard, round(o.dice, 4)
    (0.5, 0.6667)
    >>> set_overlap(["a", "a", "b"], ["a"], dedupe=False).jaccard  # min 1 / max 3
    0.3333333333333333
    """
    value = _check_empty(empty)
    a, b = _labels(gt, "gt", lower), _labels(pred, "pred", lower)
    ca, cb = Counter(a), Counter(b)
    if dedupe:
        ca, cb = Counter(dict.fromkeys(ca, 1)), Counter(dict.fromkeys(cb, 1))
    order = list(dict.fromkeys(a + b))
    inter = tuple(x for x in order for _ in range(min(ca[x], cb[x])))
    union = tuple(x for x in order for _ in range(max(ca[x], cb[x])))
    n_a, n_b = ca.total(), cb.total()
    if union:
        jaccard = len(inter) / len(union)
        dice = 2 * len(inter) / (n_a + n_b)
    else:
        jaccard = dice = value
    return SetOverlap(inter, union, n_a, n_b, jaccard, dice)


def set_jaccard(
    gt: Iterable[Hashable],
    pred: Iterable[Hashable],
    *,
    lower: bool = False,
    dedupe: bool = True,
    empty: float = 1.0,
) -> float:
    """Jaccard index ``|A & B| / |A | B|`` of two label collections.

    Parameters
    ----------
    gt, pred : iterable of hashable
        The two label collections (not a bare string).
    lower : bool, default False
        Compare string labels case-insensitively (``str.casefold``).
    dedupe : bool, default True
        Compare as sets (True) or multisets (False); see :func:`set_overlap`.
    empty : float, default 1.0
        Score when both collections are empty; in ``[0, 1]`` or nan.

    Returns
    -------
    float
        The Jaccard index, in ``[0, 1]``.

    Raises
    ------
    LabelSetError
        A collection is a bare string, not iterable, or holds an unhashable label.
    SetOptionError
        ``empty`` is not a number or is outside ``[0, 1]``.

    Notes
    -----
    ``J = |A & B| / |A | B|``; two empty collections score ``empty`` (1 by convention). See
    :func:`set_overlap` for the multiset definition.

    Examples
    --------
    >>> from segiou.geometry.sets import set_jaccard
    >>> set_jaccard(["cat", "dog", "bird"], ["dog", "bird", "fish"])
    0.5
    >>> set_jaccard(["Cat", "dog"], ["cat", "DOG"], lower=True)
    1.0
    >>> set_jaccard([], []), set_jaccard([], [], empty=0.0)
    (1.0, 0.0)
    """
    return set_overlap(gt, pred, lower=lower, dedupe=dedupe, empty=empty).jaccard


def set_dice(
    gt: Iterable[Hashable],
    pred: Iterable[Hashable],
    *,
    lower: bool = False,
    dedupe: bool = True,
    empty: float = 1.0,
) -> float:
    """Dice coefficient (Sorensen index) ``2 |A & B| / (|A| + |B|)`` of two label collections.

    Parameters
    ----------
    gt, pred : iterable of hashable
        The two label collections (not a bare string).
    lower : bool, default False
        Compare string labels case-insensitively (``str.casefold``).
    dedupe : bool, default True
        Compare as sets (True) or multisets (False); see :func:`set_overlap`.
    empty : float, default 1.0
        Score when both collections are empty; in ``[0, 1]`` or nan.

    Returns
    -------
    float
        The Dice coefficient, in ``[0, 1]``.

    Raises
    ------
    LabelSetError
        A collection is a bare string, not iterable, or holds an unhashable label.
    SetOptionError
        ``empty`` is not a number or is outside ``[0, 1]``.

    Notes
    -----
    ``Dice = 2 |A & B| / (|A| + |B|) = 2 J / (1 + J)``; two empty collections score ``empty``.

    Examples
    --------
    >>> from segiou.geometry.sets import set_dice
    >>> round(set_dice(["cat", "dog", "bird"], ["dog", "bird", "fish"]), 6)
    0.666667
    """
    return set_overlap(gt, pred, lower=lower, dedupe=dedupe, empty=empty).dice


# --------------------------------------------------------------------------------------------
# Multi-label indicator matrices
# --------------------------------------------------------------------------------------------


def _indicator(values: ArrayLike, name: str) -> NDArray[np.bool_]:
    if isinstance(values, np.ma.MaskedArray):
        msg = (
            f"{name} is a numpy masked array; its masked entries would be counted as the "
            f"values under the mask: fill them first, e.g. {name}.filled(0)"
        )
        raise IndicatorMatrixError(msg)
    if type(values).__module__.startswith("scipy.sparse"):
        msg = (
            f"{name} is a scipy sparse {type(values).__name__}; segiou reads dense indicator "
            f"matrices: pass {name}.toarray()"
        )
        raise IndicatorMatrixError(msg)
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError) as err:  # e.g. ragged rows
        msg = (
            f"{name} is not a (samples, classes) array of numbers ({err}); every row must have "
            "one entry per class"
        )
        raise IndicatorMatrixError(msg) from err
    if arr.ndim != 2:
        msg = (
            f"{name} has shape {arr.shape}; expected a 2-D (samples, classes) indicator matrix: "
            "reshape a single label column with .reshape(-1, 1)"
        )
        raise IndicatorMatrixError(msg)
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind not in "iuf":
        msg = f"{name} has dtype {arr.dtype}; expected 0/1 integers, floats or booleans"
        raise IndicatorMatrixError(msg)
    bad = (arr != 0) & (arr != 1)  # nan is neither
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        msg = (
            f"{name}[{pos[0]}, {pos[1]}] = {arr[pos].item()!r} is not 0 or 1; an indicator "
            "matrix marks each (sample, class) with 0 or 1: threshold scores first, e.g. "
            "(scores >= 0.5)"
        )
        raise IndicatorMatrixError(msg)
    out: NDArray[np.bool_] = arr == 1
    return out


def _ratio(num: NDArray[Any], den: NDArray[Any], empty: float) -> NDArray[np.float64]:
    out = np.full(np.shape(den), empty, dtype=np.float64)
    np.divide(num, den, out=out, where=np.asarray(den) > 0)
    return out


def _mean(scores: NDArray[np.float64], weights: NDArray[np.float64] | None = None) -> float:
    """Mean of the non-nan scores (weighted when ``weights`` has a positive total); else nan."""
    keep = ~np.isnan(scores)
    if weights is not None and weights[keep].sum() > 0:
        return float(np.average(scores[keep], weights=weights[keep]))
    return float(scores[keep].mean()) if keep.any() else math.nan


def _multilabel(
    gt: ArrayLike,
    pred: ArrayLike,
    average: str | None,
    empty: float,
    dice: bool,
) -> NDArray[np.float64] | float:
    if average is not None and average not in AVERAGES:
        msg = f"average={average!r} is unknown; expected None or one of {', '.join(AVERAGES)}"
        raise SetOptionError(msg)
    value = _check_empty(empty, "nan (default), 0.0 or 1.0")
    g, p = _indicator(gt, "gt"), _indicator(pred, "pred")
    if g.shape != p.shape:
        msg = (
            f"gt has shape {g.shape} and pred has shape {p.shape}; expected the same "
            "(samples, classes) shape"
        )
        raise ShapeMismatchError(msg)
    axis = 1 if average == "samples" else 0
    tp = np.count_nonzero(g & p, axis=axis)
    fp = np.count_nonzero(~g & p, axis=axis)
    fn = np.count_nonzero(g & ~p, axis=axis)
    if average == "micro":
        tp, fp, fn = tp.sum(keepdims=True), fp.sum(keepdims=True), fn.sum(keepdims=True)
    num = 2 * tp if dice else tp
    scores = _ratio(num, num + fp + fn, value)
    if average is None:
        return scores
    if average == "micro":
        return float(scores[0])
    if average == "weighted":
        return _mean(scores, (tp + fn).astype(np.float64))
    return _mean(scores)


def multilabel_jaccard(
    gt: ArrayLike,
    pred: ArrayLike,
    *,
    average: Average | None = None,
    empty: float = math.nan,
) -> NDArray[np.float64] | float:
    """Jaccard index of multi-label indicator matrices, per class or averaged.

    Parameters
    ----------
    gt, pred : array_like
        ``(samples, classes)`` indicator matrices of 0/1 (bool, integer or float), same shape.
    average : {None, "macro", "micro", "weighted", "samples"}, default None
        None returns one score per class; the others reduce to one float (see Notes).
    empty : float, default nan
        Score of a class (or sample) absent from both ``gt`` and ``pred``; nan skips it.

    Returns
    -------
    numpy.ndarray or float
        Per-class float64 scores of shape ``(classes,)`` for ``average=None``, else a float.

    Raises
    ------
    IndicatorMatrixError
        An input is not 2-D (ragged rows, a scipy sparse matrix: pass ``.toarray()``), or holds
        a value other than 0 and 1 (its position is named).
    ShapeMismatchError
        ``gt`` and ``pred`` have different shapes.
    SetOptionError
        Unknown ``average``, or ``empty`` not a number or outside ``[0, 1]``.

    Notes
    -----
    ``J_c = TP_c / (TP_c + FP_c + FN_c)``.
    Per class ``c`` (a column), with ``TP``, ``FP``, ``FN`` counted over samples:

    * ``average=None``: the per-class scores;
    * ``"macro"``: their unweighted mean;
    * ``"weighted"``: their mean weighted by support ``TP + FN`` (ground-truth positives); when
      no class has support it falls back to the unweighted mean, as scikit-learn does;
    * ``"micro"``: one score from ``TP``, ``FP``, ``FN`` summed over all classes;
    * ``"samples"``: the score of each sample's (row's) label set, averaged over samples.

    A class (or, for ``"samples"``, a sample) with ``TP + FP + FN = 0`` scores ``empty``: nan by
    default, and nan scores are left out of every mean (segiou's convention: an absent class is
    skipped, never counted as 0 or 1); the mean of nothing is nan. ``empty=0.0`` or ``1.0``
    reproduces scikit-learn's ``zero_division=0`` or ``1`` for every ``average``. Note that the
    per-pair :func:`set_jaccard` scores empty-vs-empty as 1 by default; pass ``empty=1.0`` here
    to count empty samples the same way.

    Examples
    --------
    >>> import numpy as np
    >>> from segiou.geometry.sets import multilabel_jaccard
    >>> gt = np.array([[1, 0, 1, 0], [0, 1, 1, 0]])
    >>> pred = np.array([[1, 1, 1, 0], [0, 0, 1, 0]])
    >>> multilabel_jaccard(gt, pred)  # class 3 is in neither: nan
    array([ 1.,  0.,  1., nan])
    >>> multilabel_jaccard(gt, pred, average="macro")  # nan skipped: (1 + 0 + 1) / 3
    0.6666666666666666
    >>> multilabel_jaccard(gt, pred, average="macro", empty=1.0)  # sklearn zero_division=1
    0.75
    >>> multilabel_jaccard(gt, pred, average="micro")  # 3 / (3 + 1 + 1)
    0.6
    >>> round(multilabel_jaccard(gt, pred, average="samples"), 4)  # (2/3 + 1/2) / 2
    0.5833
    """
    return _multilabel(gt, pred, average, empty, dice=False)


def multilabel_dice(
    gt: ArrayLike,
    pred: ArrayLike,
    *,
    average: Average | None = None,
    empty: float = math.nan,
) -> NDArray[np.float64] | float:
    """Dice coefficient (F1) of multi-label indicator matrices, per class or averaged.

    Parameters
    ----------
    gt, pred : array_like
        ``(samples, classes)`` indicator matrices of 0/1 (bool, integer or float), same shape.
    average : {None, "macro", "micro", "weighted", "samples"}, default None
        None returns one score per class; the others reduce to one float (see Notes).
    empty : float, default nan
        Score of a class (or sample) absent from both ``gt`` and ``pred``; nan skips it.

    Returns
    -------
    numpy.ndarray or float
        Per-class float64 scores of shape ``(classes,)`` for ``average=None``, else a float.

    Raises
    ------
    IndicatorMatrixError
        An input is not 2-D (ragged rows, a scipy sparse matrix: pass ``.toarray()``), or holds
        a value other than 0 and 1 (its position is named).
    ShapeMismatchError
        ``gt`` and ``pred`` have different shapes.
    SetOptionError
        Unknown ``average``, or ``empty`` not a number or outside ``[0, 1]``.

    Notes
    -----
    ``Dice_c = 2 TP_c / (2 TP_c + FP_c + FN_c)``, which is the F1 score: the averages match
    scikit-learn's ``f1_score`` with the same ``average``.
    Per class ``c`` (a column), with ``TP``, ``FP``, ``FN`` counted over samples:

    * ``average=None``: the per-class scores;
    * ``"macro"``: their unweighted mean;
    * ``"weighted"``: their mean weighted by support ``TP + FN`` (ground-truth positives); when
      no class has support it falls back to the unweighted mean, as scikit-learn does;
    * ``"micro"``: one score from ``TP``, ``FP``, ``FN`` summed over all classes;
    * ``"samples"``: the score of each sample's (row's) label set, averaged over samples.

    A class (or, for ``"samples"``, a sample) with ``TP + FP + FN = 0`` scores ``empty``: nan by
    default, and nan scores are left out of every mean (segiou's convention: an absent class is
    skipped, never counted as 0 or 1); the mean of nothing is nan. ``empty=0.0`` or ``1.0``
    reproduces scikit-learn's ``zero_division=0`` or ``1`` for every ``average``. Note that the
    per-pair :func:`set_jaccard` scores empty-vs-empty as 1 by default; pass ``empty=1.0`` here
    to count empty samples the same way.

    Examples
    --------
    >>> import numpy as np
    >>> from segiou.geometry.sets import multilabel_dice
    >>> gt = np.array([[1, 0, 1], [0, 1, 1]])
    >>> pred = np.array([[1, 1, 1], [0, 0, 1]])
    >>> multilabel_dice(gt, pred, average="micro")  # 6 / (6 + 1 + 1)
    0.75
    """
    return _multilabel(gt, pred, average, empty, dice=True)
