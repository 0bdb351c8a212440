"""A slow, obvious numpy oracle for segiou's counting and metrics.

Imports nothing from segiou. Every function is written for clarity, not speed: label values are
mapped with a Python dict, pairs are added with ``np.add.at``, and every metric loops over the
classes with an explicit ``if`` for 0/0.

Counting rules (the Cityscapes rule, as documented in the README):

* a ground-truth value that maps to ``None`` (an ignore value, or a raw id that is not evaluated)
  is ignored: the pixel is not counted, whatever was predicted;
* a ground-truth value that maps to nothing is unexpected (counted per value);
* at a valid ground-truth pixel of class ``c``, a prediction that maps to class ``q`` adds
  ``counts[c, q]``; one that maps to ``None`` is *void*: ``void[c] += 1`` (a false negative of
  ``c``, never a false positive); one that maps to nothing is unexpected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

NAN = float("nan")


@dataclass
class Counts:
    """Everything one counting pass finds."""

    counts: np.ndarray  # K x K int64, counts[gt, pred]
    void: np.ndarray  # K int64, per ground-truth class
    n_ignored: int = 0
    unexpected_gt: dict[int, int] = field(default_factory=dict)
    unexpected_pred: dict[int, int] = field(default_factory=dict)

    @property
    def n_unexpected(self) -> int:
        return sum(self.unexpected_gt.values()) + sum(self.unexpected_pred.values())

    @property
    def n_pixels(self) -> int:
        return int(self.counts.sum()) + int(self.void.sum()) + self.n_ignored + self.n_unexpected

    @property
    def tp(self) -> np.ndarray:
        return np.diagonal(self.counts).copy()

    @property
    def fp(self) -> np.ndarray:
        return self.counts.sum(axis=0) - self.tp

    @property
    def fn(self) -> np.ndarray:
        return self.counts.sum(axis=1) - self.tp + self.void


def class_map(num_classes: int, ignore: Sequence[int] = ()) -> dict[int, int | None]:
    """Class-id masks: ``0..K-1`` are classes, ``ignore`` values map to ``None``."""
    out: dict[int, int | None] = {c: c for c in range(num_classes)}
    for v in ignore:
        out[int(v)] = None
    return out


def _values(a: np.ndarray) -> np.ndarray:
    """Label values as Python-comparable int64 (bool -> 0/1)."""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return a.astype(np.int64)
    return a.astype(np.int64)


def _codes(values: np.ndarray, mapping: Mapping[int, int | None], k: int) -> np.ndarray:
    """Per pixel: class ``0..K-1``, ``K`` for ``None`` (ignored / void), ``K+1`` for unmapped."""
    uniq, inverse = np.unique(values, return_inverse=True)
    code_of_uniq = np.empty(uniq.size, dtype=np.int64)
    for i, v in enumerate(uniq.tolist()):
        if v not in mapping:
            code_of_uniq[i] = k + 1
        elif mapping[v] is None:
            code_of_uniq[i] = k
        else:
            code_of_uniq[i] = mapping[v]
    return code_of_uniq[inverse.reshape(-1)]


def confusion(
    gt: np.ndarray,
    pred: np.ndarray,
    num_classes: int,
    *,
    ignore: Sequence[int] = (),
    gt_map: Mapping[int, int | None] | None = None,
    pred_map: Mapping[int, int | None] | None = None,
) -> Counts:
    """Count a pair of masks.

    ``gt_map`` maps raw values to a class or ``None`` (not evaluated); default: class ids with
    ``ignore`` values. ``pred_map`` defaults to ``gt_map`` (the same table for both sides).
    """
    k = num_classes
    gt = np.asarray(gt)
    pred = np.asarray(pred)
    assert gt.shape == pred.shape, (gt.shape, pred.shape)
    if gt_map is None:
        gt_map = class_map(k, ignore)
    if pred_map is None:
        pred_map = gt_map
    counts = np.zeros((k, k), dtype=np.int64)
    void = np.zeros(k, dtype=np.int64)
    out = Counts(counts, void)
    g = _values(gt).reshape(-1)
    p = _values(pred).reshape(-1)
    if g.size == 0:
        return out
    gc = _codes(g, gt_map, k)
    pc = _codes(p, pred_map, k)

    out.n_ignored = int(np.count_nonzero(gc == k))
    bad_g = gc == k + 1
    for v in np.unique(g[bad_g]).tolist():
        out.unexpected_gt[v] = int(np.count_nonzero(g[bad_g] == v))

    valid = gc < k
    bad_p = valid & (pc == k + 1)
    for v in np.unique(p[bad_p]).tolist():
        out.unexpected_pred[v] = int(np.count_nonzero(p[bad_p] == v))

    is_void = valid & (pc == k)
    np.add.at(void, gc[is_void], 1)
    both = valid & (pc < k)
    np.add.at(counts, (gc[both], pc[both]), 1)
    return out


def n_images(shape: tuple[int, ...]) -> int:
    """Images of a mask: the product of the leading axes of ``N x ... x H x W``, else one."""
    return math.prod(shape[:-2]) if len(shape) > 2 else 1


def confusion_per_image(gt: np.ndarray, pred: np.ndarray, num_classes: int, **kw) -> list[Counts]:
    """One :func:`confusion` per image (leading axes are images; rank <= 2 is one image)."""
    gt = np.asarray(gt)
    pred = np.asarray(pred)
    if gt.ndim <= 2:
        return [confusion(gt, pred, num_classes, **kw)]
    return [confusion(gt[i], pred[i], num_classes, **kw) for i in np.ndindex(*gt.shape[:-2])]


def add(a: Counts, b: Counts) -> Counts:
    """The counts of two disjoint sets of pixels."""
    ug = dict(a.unexpected_gt)
    for v, c in b.unexpected_gt.items():
        ug[v] = ug.get(v, 0) + c
    up = dict(a.unexpected_pred)
    for v, c in b.unexpected_pred.items():
        up[v] = up.get(v, 0) + c
    return Counts(a.counts + b.counts, a.void + b.void, a.n_ignored + b.n_ignored, ug, up)


# --- metrics, per class ------------------------------------------------------------------------


def _div(num: float, den: float) -> float:
    return NAN if den == 0 else num / den


def tp_fp_fn(cm: np.ndarray, void: np.ndarray | None = None) -> tuple[list, list, list]:
    """Per-class TP, FP, FN as Python ints, void predictions counted as false negatives."""
    cm = np.asarray(cm)
    k = cm.shape[0]
    v = [0] * k if void is None else [int(x) for x in void]
    tp, fp, fn = [], [], []
    for c in range(k):
        t = int(cm[c, c])
        col = sum(int(cm[g, c]) for g in range(k))
        row = sum(int(cm[c, p]) for p in range(k))
        tp.append(t)
        fp.append(col - t)
        fn.append(row - t + v[c])
    return tp, fp, fn


def iou(cm, void=None) -> list[float]:
    tp, fp, fn = tp_fp_fn(cm, void)
    return [_div(t, t + f + n) for t, f, n in zip(tp, fp, fn, strict=True)]


def dice(cm, void=None) -> list[float]:
    tp, fp, fn = tp_fp_fn(cm, void)
    return [_div(2 * t, 2 * t + f + n) for t, f, n in zip(tp, fp, fn, strict=True)]


def fbeta(cm, beta: float, void=None) -> list[float]:
    tp, fp, fn = tp_fp_fn(cm, void)
    b2 = beta * beta
    out = []
    for t, f, n in zip(tp, fp, fn, strict=True):
        if t + f + n == 0:
            out.append(NAN)
        else:
            out.append(_div((1 + b2) * t, (1 + b2) * t + b2 * n + f))
    return out


def precision(cm, void=None) -> list[float]:
    tp, fp, _ = tp_fp_fn(cm, void)
    return [_div(t, t + f) for t, f in zip(tp, fp, strict=True)]


def recall(cm, void=None) -> list[float]:
    tp, _, fn = tp_fp_fn(cm, void)
    return [_div(t, t + n) for t, n in zip(tp, fn, strict=True)]


# --- means and summaries -----------------------------------------------------------------------


def mean_present(scores, cm, void=None) -> float:
    """Mean over classes in ground truth or prediction (TP+FP+FN > 0), skipping undefined."""
    tp, fp, fn = tp_fp_fn(cm, void)
    vals = []
    for c, s in enumerate(scores):
        if tp[c] + fp[c] + fn[c] > 0 and not math.isnan(s):
            vals.append(s)
    return sum(vals) / len(vals) if vals else NAN


def mean_gt(scores, cm, void=None) -> float:
    """Mean over classes with ground-truth pixels (detectron2), skipping undefined."""
    tp, _, fn = tp_fp_fn(cm, void)
    vals = []
    for c, s in enumerate(scores):
        if tp[c] + fn[c] > 0 and not math.isnan(s):
            vals.append(s)
    return sum(vals) / len(vals) if vals else NAN


def mean_all(scores) -> float:
    """Mean over every class, an undefined score counting as 0 (sklearn, labels=range(K))."""
    vals = [0.0 if math.isnan(s) else s for s in scores]
    return sum(vals) / len(vals) if vals else NAN


def pixel_accuracy(cm, void=None) -> float:
    tp, _, fn = tp_fp_fn(cm, void)
    return _div(sum(tp), sum(tp) + sum(fn))


def mean_accuracy(cm, void=None) -> float:
    return mean_gt(recall(cm, void), cm, void)


def fw_iou(cm, void=None) -> float:
    tp, _, fn = tp_fp_fn(cm, void)
    scores = iou(cm, void)
    total = sum(t + n for t, n in zip(tp, fn, strict=True))
    if total == 0:
        return NAN
    acc = 0.0
    for c, s in enumerate(scores):
        n_c = tp[c] + fn[c]
        if n_c > 0:
            acc += n_c / total * s
    return acc


def micro_iou(cm, void=None) -> float:
    tp, fp, fn = tp_fp_fn(cm, void)
    return _div(sum(tp), sum(tp) + sum(fp) + sum(fn))


def kappa(cm, void=None) -> float:
    """Cohen's kappa of the matrix extended by a void column (a label never in the gt)."""
    cm = np.asarray(cm)
    k = cm.shape[0]
    v = [0] * k if void is None else [int(x) for x in void]
    ext = [[int(cm[i, j]) for j in range(k)] + [v[i]] for i in range(k)]
    ext.append([0] * (k + 1))  # the void "class" has no ground truth
    n = sum(sum(row) for row in ext)
    if n == 0:
        return NAN
    po = sum(ext[i][i] for i in range(k + 1)) / n
    pe = 0.0
    for c in range(k + 1):
        row = sum(ext[c])
        col = sum(ext[i][c] for i in range(k + 1))
        pe += row * col
    pe /= n * n
    if pe == 1:
        return NAN
    return (po - pe) / (1 - pe)


def category_iou(cm, class_categories: Sequence[int], n_categories: int, void=None) -> list[float]:
    """Cityscapes' getIouScoreForCategory, written out.

    TP: ground truth in the category, predicted as any class of the category. FN: ground truth
    in the category, predicted as anything else (other classes or void). FP: ground truth of an
    evaluated class outside the category, predicted as a class of the category.
    """
    cm = np.asarray(cm)
    k = cm.shape[0]
    v = [0] * k if void is None else [int(x) for x in void]
    out = []
    for g in range(n_categories):
        members = [c for c in range(k) if class_categories[c] == g]
        others = [c for c in range(k) if class_categories[c] != g]
        tp = sum(int(cm[a, b]) for a in members for b in members)
        fn = sum(int(cm[a, b]) for a in members for b in others) + sum(v[a] for a in members)
        fp = sum(int(cm[a, b]) for a in others for b in members)
        out.append(_div(tp, tp + fp + fn))
    return out


def assert_same_counts(state, ref: Counts) -> None:
    """Assert that an accumulator (anything with segiou's count attributes) equals ``ref``."""
    np.testing.assert_array_equal(np.asarray(state.counts), ref.counts)
    np.testing.assert_array_equal(np.asarray(state.void), ref.void)
    assert np.asarray(state.counts).dtype == np.int64
    assert state.n_ignored == ref.n_ignored
    assert dict(state.unexpected_gt) == ref.unexpected_gt
    assert dict(state.unexpected_pred) == ref.unexpected_pred


def boundary_counts(
    gt: np.ndarray, pred: np.ndarray, num_classes: int, d: int, ignore: Sequence[int] = (255,)
) -> np.ndarray:
    """Boundary IoU counts of one image, the paper's way: ``(3, K)`` = intersection, G_d, P_d.

    Per class ``c``: ``G = (gt == c)``, padded by one background pixel on every side (the image
    border is background) and eroded ``d`` times by a 3 x 3 square (scipy's
    ``binary_erosion``); ``G_d = G - eroded``; ``P_d`` likewise. Pixels whose ground truth is an
    ignore value (or no class), and pixels whose prediction is neither a class nor an ignore
    value (unexpected: the confusion counts leave them out), count in neither the intersection
    nor the boundaries; the regions eroded are the whole masks' ``gt == c`` and ``pred == c``.
    """
    from scipy.ndimage import binary_erosion

    out = np.zeros((3, num_classes), dtype=np.int64)
    valid = (gt >= 0) & (gt < num_classes) & ~np.isin(gt, list(ignore))
    valid &= ((pred >= 0) & (pred < num_classes)) | np.isin(pred, list(ignore))
    square = np.ones((3, 3), dtype=bool)
    for c in range(num_classes):
        sides = []
        for mask in (gt == c, pred == c):
            if mask.any():
                eroded = binary_erosion(np.pad(mask, 1), square, iterations=d)[1:-1, 1:-1]
                sides.append(mask & ~eroded)
            else:
                sides.append(mask)
        g, p = sides
        out[:, c] = [(g & p & valid).sum(), (g & valid).sum(), (p & valid).sum()]
    return out
