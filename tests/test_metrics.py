"""Reducers and presets against the reference, scikit-learn, and published worked examples."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import reference
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.testing import assert_allclose, assert_array_equal

import segiou
from segiou import ConfusionMatrix, builtin_spec, evaluate, metrics
from segiou.conventions import PRESETS, get_convention
from segiou.report import render_text

NAN = float("nan")


def close(a, b) -> None:
    """Per-class scores equal up to rounding, nan where the other is nan."""
    assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-12, atol=1e-15)


def same(a: float, b: float) -> None:
    assert a == pytest.approx(b, rel=1e-12, abs=1e-15, nan_ok=True), (a, b)


@st.composite
def count_matrices(draw, max_classes: int = 12, with_void: bool = True):
    """Sparse count matrices (absent and only-predicted classes are common) and void vectors."""
    k = draw(st.integers(1, max_classes))
    cell = st.one_of(st.just(0), st.just(0), st.integers(0, 5), st.integers(0, 10**6))
    cm = draw(hnp.arrays(np.int64, (k, k), elements=cell))
    void = draw(hnp.arrays(np.int64, (k,), elements=cell)) if with_void else np.zeros(k, np.int64)
    return cm, void


# --- every reducer against the reference ----------------------------------------------------------


@settings(deadline=None)
@given(cv=count_matrices(), beta=st.sampled_from([0.5, 1.0, 2.0, 3.0]))
def test_per_class_reducers_equal_reference(cv, beta):
    cm, void = cv
    tp, fp, fn = metrics.tp_fp_fn(cm, void=void)
    rtp, rfp, rfn = reference.tp_fp_fn(cm, void)
    assert (tp.tolist(), fp.tolist(), fn.tolist()) == (rtp, rfp, rfn)
    close(metrics.iou(cm, void=void), reference.iou(cm, void))
    close(metrics.dice(cm, void=void), reference.dice(cm, void))
    close(metrics.fbeta(cm, beta, void=void), reference.fbeta(cm, beta, void))
    close(metrics.precision(cm, void=void), reference.precision(cm, void))
    close(metrics.recall(cm, void=void), reference.recall(cm, void))
    # void=None is no void
    close(metrics.iou(cm), reference.iou(cm))


@settings(deadline=None)
@given(cv=count_matrices())
def test_summaries_equal_reference(cv):
    cm, void = cv
    ious = reference.iou(cm, void)
    same(metrics.mean_iou(cm, void=void), reference.mean_present(ious, cm, void))
    same(metrics.mean_iou(cm, void=void, over="present"), reference.mean_present(ious, cm, void))
    same(metrics.mean_iou(cm, void=void, over="gt"), reference.mean_gt(ious, cm, void))
    same(metrics.mean_iou(cm, void=void, over="all"), reference.mean_all(ious))
    dices = reference.dice(cm, void)
    same(metrics.mean(np.array(dices), cm, void=void), reference.mean_present(dices, cm, void))
    same(metrics.fw_iou(cm, void=void), reference.fw_iou(cm, void))
    same(metrics.micro_iou(cm, void=void), reference.micro_iou(cm, void))
    same(metrics.pixel_accuracy(cm, void=void), reference.pixel_accuracy(cm, void))
    same(metrics.mean_accuracy(cm, void=void), reference.mean_accuracy(cm, void))
    assert metrics.cohen_kappa(cm, void=void) == pytest.approx(
        reference.kappa(cm, void), rel=1e-9, abs=1e-12, nan_ok=True
    )


@settings(deadline=None)
@given(cv=count_matrices(), data=st.data())
def test_category_iou_equals_reference(cv, data):
    cm, void = cv
    k = cm.shape[0]
    g = data.draw(st.integers(1, k))
    cats = data.draw(st.lists(st.integers(0, g - 1), min_size=k, max_size=k))
    m = np.zeros((k, g), np.int64)
    m[np.arange(k), cats] = 1
    close(metrics.category_iou(cm, m, void=void), reference.category_iou(cm, cats, g, void))
    ccm, cvoid = metrics.category_counts(cm, m, void=void)
    assert ccm.sum() == cm.sum()
    assert cvoid.sum() == void.sum()


@settings(deadline=None)
@given(cv=count_matrices())
def test_scores_are_in_unit_interval_or_nan(cv):
    cm, void = cv
    tp, fp, fn = reference.tp_fp_fn(cm, void)
    for f in (metrics.iou, metrics.dice, metrics.precision, metrics.recall):
        s = f(cm, void=void)
        assert s.dtype == np.float64
        ok = np.isnan(s) | ((s >= 0) & (s <= 1))
        assert ok.all(), (f.__name__, s)
    s = metrics.iou(cm, void=void)
    for c in range(cm.shape[0]):
        assert math.isnan(s[c]) == (tp[c] + fp[c] + fn[c] == 0)  # nan exactly when absent
    for f in (metrics.mean_iou, metrics.fw_iou, metrics.micro_iou, metrics.pixel_accuracy):
        x = f(cm, void=void)
        assert math.isnan(x) or 0 <= x <= 1


@settings(deadline=None)
@given(
    cv=count_matrices(),
    preset=st.sampled_from(sorted(PRESETS)),
    beta=st.sampled_from([None, 2.0]),
)
def test_evaluate_equals_reference(cv, preset, beta):
    cm, void = cv
    conv = get_convention(preset)
    r = evaluate(cm, void=void, preset=preset, beta=beta)
    tp, fp, fn = reference.tp_fp_fn(cm, void)
    mean = {
        "present": lambda s: reference.mean_present(s, cm, void),
        "gt": lambda s: reference.mean_gt(s, cm, void),
        "all": reference.mean_all,
    }[conv.mean_over]
    scored = {
        "present": [t + f + n > 0 for t, f, n in zip(tp, fp, fn, strict=True)],
        "gt": [t + n > 0 for t, n in zip(tp, fn, strict=True)],
        "all": [True] * len(tp),
    }[conv.mean_over]
    scores = {
        "iou": reference.iou(cm, void),
        "dice": reference.dice(cm, void),
        "precision": reference.precision(cm, void),
        "recall": reference.recall(cm, void),
    }
    if beta is not None:
        scores["fbeta"] = reference.fbeta(cm, beta, void)
        if conv.fbeta_from_pr:  # mmseg: F from precision and recall, undefined (0/0) at TP = 0
            scores["fbeta"] = [
                NAN if t == 0 else x for t, x in zip(tp, scores["fbeta"], strict=True)
            ]
    for name, s in scores.items():
        expected = []
        for c, x in enumerate(s):
            if not scored[c]:
                expected.append(conv.fill)
            elif conv.mean_over == "all" and math.isnan(x):
                expected.append(0.0)
            else:
                expected.append(x)
        close(r.per_class[name], expected)
    assert r.per_class["tp"].tolist() == tp
    assert r.per_class["fp"].tolist() == fp
    assert r.per_class["fn"].tolist() == fn
    assert r.per_class["void"].tolist() == void.tolist()
    assert r.per_class["gt_pixels"].tolist() == [t + n for t, n in zip(tp, fn, strict=True)]
    same(r.miou, mean(scores["iou"]))
    same(r.summary["mdice"], mean(scores["dice"]))
    same(r.summary["mprecision"], mean(scores["precision"]))
    same(r.summary["fwiou"], reference.fw_iou(cm, void))
    same(r.summary["micro_iou"], reference.micro_iou(cm, void))
    same(r.summary["pixel_accuracy"], reference.pixel_accuracy(cm, void))
    same(r.summary["mean_accuracy"], reference.mean_accuracy(cm, void))
    if beta is not None:
        same(r.summary["mfbeta"], mean(scores["fbeta"]))
    assert r.convention.name == preset
    assert r.pixels["total"] == int(cm.sum() + void.sum())


def test_reducer_argument_errors():
    with pytest.raises(ValueError, match="square"):
        metrics.iou(np.zeros((2, 3), np.int64))
    with pytest.raises(TypeError, match="integer"):
        metrics.iou(np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"\(2,\)"):
        metrics.iou(np.zeros((2, 2), np.int64), void=np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="over="):
        metrics.mean_iou(np.eye(2, dtype=np.int64), over="everything")
    with pytest.raises(ValueError, match="membership"):
        metrics.category_iou(np.eye(2, dtype=np.int64), np.ones((3, 1), np.int64))
    with pytest.raises(KeyError, match="sklearn_all_labels"):
        get_convention("nope")


def test_empty_matrix_scores_nan():
    cm = np.zeros((3, 3), np.int64)
    assert np.isnan(metrics.iou(cm)).all()
    for f in (
        metrics.mean_iou,
        metrics.fw_iou,
        metrics.micro_iou,
        metrics.pixel_accuracy,
        metrics.mean_accuracy,
        metrics.cohen_kappa,
    ):
        assert math.isnan(f(cm)), f.__name__


# --- worked examples ----------------------------------------------------------------------------


def test_tp100_fp25_fn75_is_iou_half():
    # class 0: 100 correct, 75 of its pixels predicted as class 1, 25 class-1 pixels taken
    cm = np.array([[100, 75], [25, 0]])
    assert metrics.iou(cm)[0] == 0.5
    assert metrics.dice(cm)[0] == 200 / 300
    assert metrics.precision(cm)[0] == 0.8
    assert metrics.recall(cm)[0] == 100 / 175
    # the same false negatives as void predictions: a false negative, never a false positive
    cmv = np.array([[100, 0], [25, 0]])
    assert metrics.iou(cmv, void=np.array([75, 0]))[0] == 0.5
    assert metrics.iou(cmv, void=np.array([75, 0]))[1] == 0.0  # class 1: 25 FN, no FP


def test_keras_mean_iou_example():
    # keras.metrics.MeanIoU(num_classes=2): [0, 0, 1, 1] vs [0, 1, 0, 1] -> 1/3
    cm = ConfusionMatrix(2).update(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]))
    assert cm.counts.tolist() == [[1, 1], [1, 1]]
    same(evaluate(cm, preset="keras").miou, 1 / 3)
    same(segiou.mean_iou(cm.counts), 1 / 3)


def test_sklearn_jaccard_docstring_multiclass_example():
    # sklearn.metrics.jaccard_score docstring: y_true=[0, 1, 2, 3], y_pred=[0, 2, 1, 3]
    cm = ConfusionMatrix(4).update(np.array([0, 1, 2, 3]), np.array([0, 2, 1, 3]))
    assert metrics.iou(cm.counts).tolist() == [1.0, 0.0, 0.0, 1.0]  # average=None
    assert evaluate(cm, preset="sklearn").miou == 0.5  # average="macro"
    same(metrics.micro_iou(cm.counts), 1 / 3)  # average="micro"


# --- absent classes -------------------------------------------------------------------------------

# class 0 in both masks (IoU 2/3), class 1 only predicted (IoU 0), class 2 in neither (nan)
ABSENT = np.array([[2, 1, 0], [0, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize(
    ("preset", "miou", "per_class"),
    [
        ("segiou", 1 / 3, [2 / 3, 0.0, NAN]),
        ("cityscapes", 1 / 3, [2 / 3, 0.0, NAN]),
        ("mmseg", 1 / 3, [2 / 3, 0.0, NAN]),
        ("hf_evaluate", 1 / 3, [2 / 3, 0.0, NAN]),
        ("keras", 1 / 3, [2 / 3, 0.0, NAN]),
        ("sklearn", 1 / 3, [2 / 3, 0.0, NAN]),
        ("torchmetrics", 1 / 3, [2 / 3, 0.0, 0.0]),  # average=None reports 0 for absent
        ("detectron2", 2 / 3, [2 / 3, NAN, NAN]),  # classes without gt: nan, left out
        ("sklearn_all_labels", 2 / 9, [2 / 3, 0.0, 0.0]),
    ],
)
def test_absent_class_conventions(preset, miou, per_class):
    r = evaluate(ABSENT, preset=preset)
    same(r.miou, miou)
    close(r.per_class["iou"], per_class)
    assert any(isinstance(rule, str) and rule for rule in r.convention.rules())


def test_absent_class_is_nan_and_skipped_by_every_mean():
    s = metrics.iou(ABSENT)
    assert math.isnan(s[2])
    assert s[1] == 0.0
    same(metrics.mean_iou(ABSENT), 1 / 3)
    same(metrics.mean(metrics.dice(ABSENT), ABSENT), (0.8 + 0.0) / 2)


def _detectron2(gt: np.ndarray, pred: np.ndarray, k: int, ignore_label: int):
    """detectron2 SemSegEvaluator.process/evaluate, written out from its published source."""
    gt = gt.astype(np.int64).copy()
    gt[gt == ignore_label] = k
    conf = np.bincount((k + 1) * pred.reshape(-1) + gt.reshape(-1), minlength=(k + 1) ** 2).reshape(
        k + 1, k + 1
    )  # conf[pred, gt]
    acc = np.full(k, np.nan)
    iou = np.full(k, np.nan)
    tp = conf.diagonal()[:-1].astype(np.float64)
    pos_gt = np.sum(conf[:-1, :-1], axis=0).astype(np.float64)
    class_weights = pos_gt / np.sum(pos_gt)
    pos_pred = np.sum(conf[:-1, :-1], axis=1).astype(np.float64)
    acc_valid = pos_gt > 0
    acc[acc_valid] = tp[acc_valid] / pos_gt[acc_valid]
    union = pos_gt + pos_pred - tp
    iou_valid = np.logical_and(acc_valid, union > 0)
    iou[iou_valid] = tp[iou_valid] / union[iou_valid]
    macc = np.sum(acc[acc_valid]) / np.sum(acc_valid)
    miou = np.sum(iou[iou_valid]) / np.sum(iou_valid)
    fiou = np.sum(iou[iou_valid] * class_weights[iou_valid])
    pacc = np.sum(tp) / np.sum(pos_gt)
    return {"iou": iou, "miou": miou, "fwiou": fiou, "macc": macc, "pacc": pacc}


@settings(deadline=None)
@given(
    k=st.integers(1, 8),
    n=st.integers(1, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_detectron2_formulas(k, n, seed):
    rng = np.random.default_rng(seed)
    gt = rng.choice([*range(k), 255], size=n, p=None)
    pred = rng.integers(0, k, size=n)  # argmax output: always a class
    assume((gt != 255).any())
    d2 = _detectron2(gt, pred, k, 255)
    r = evaluate(ConfusionMatrix(k, ignore_index=255).update(gt, pred), preset="detectron2")
    close(r.per_class["iou"], d2["iou"])
    same(r.miou, d2["miou"])
    same(r.summary["fwiou"], d2["fwiou"])
    same(r.summary["mean_accuracy"], d2["macc"])
    same(r.summary["pixel_accuracy"], d2["pacc"])


def test_torchmetrics_conventions_written_out():
    # MulticlassJaccardIndex: per class tp / (tp + fp + fn), 0 where that is 0/0 (average=None);
    # macro: mean over classes with tp + fp + fn > 0.
    cm = np.array([[5, 1, 0, 0], [2, 3, 0, 0], [0, 4, 0, 0], [0, 0, 0, 0]])
    tp = np.diag(cm)
    denom = cm.sum(0) + cm.sum(1) - tp
    per_class = np.where(denom > 0, tp / np.maximum(denom, 1), 0.0)
    macro = per_class[denom > 0].mean()
    r = evaluate(cm, preset="torchmetrics")
    close(r.per_class["iou"], per_class)
    same(r.miou, macro)


def _mmseg(cm: np.ndarray, void: np.ndarray, beta: float) -> dict[str, np.ndarray]:
    """mmsegmentation IoUMetric.total_area_to_metrics and compute_metrics, written out.

    Void predictions (values outside 0..K-1 at valid ground truth) are in ``area_label`` but in
    no histogram of the prediction. Every ratio is a plain division: 0/0 is nan.
    """
    intersect = np.diag(cm).astype(float)
    area_label = (cm.sum(1) + void).astype(float)
    area_pred = cm.sum(0).astype(float)
    union = area_label + area_pred - intersect
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "IoU": intersect / union,
            "Acc": intersect / area_label,
            "Dice": 2 * intersect / (area_pred + area_label),
            "Precision": intersect / area_pred,
            "Recall": intersect / area_label,
        }
        p, r = out["Precision"], out["Recall"]
        out["Fscore"] = (1 + beta**2) * (p * r) / ((beta**2 * p) + r)
        out["aAcc"] = np.array(intersect.sum() / area_label.sum())
    return out


def _nanmean(x: np.ndarray) -> float:
    return float(np.nanmean(x)) if (~np.isnan(x)).any() else NAN


def _check_mmseg(cm: np.ndarray, void: np.ndarray, beta: float) -> None:
    mm = _mmseg(cm, void, beta)
    r = evaluate(cm, void=void, preset="mmseg", beta=beta)
    close(r.per_class["iou"], mm["IoU"])
    close(r.per_class["dice"], mm["Dice"])
    close(r.per_class["precision"], mm["Precision"])
    close(r.per_class["recall"], mm["Recall"])
    close(r.per_class["fbeta"], mm["Fscore"])
    same(r.miou, _nanmean(mm["IoU"]))
    same(r.summary["mean_accuracy"], _nanmean(mm["Acc"]))
    same(r.summary["mdice"], _nanmean(mm["Dice"]))
    same(r.summary["mprecision"], _nanmean(mm["Precision"]))
    same(r.summary["mfbeta"], _nanmean(mm["Fscore"]))
    same(r.summary["pixel_accuracy"], float(mm["aAcc"]))


def test_mmseg_formulas_written_out():
    # mmseg total_area_to_metrics: IoU = intersect / union, Acc = intersect / area_label,
    # aAcc = sum(intersect) / sum(area_label), means with np.nanmean.
    cm = np.array([[5, 1, 0, 0], [2, 3, 0, 0], [0, 4, 0, 0], [0, 0, 0, 0]])
    intersect = np.diag(cm).astype(float)
    area_label = cm.sum(1).astype(float)
    area_pred = cm.sum(0).astype(float)
    union = area_label + area_pred - intersect
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = intersect / union
        acc = intersect / area_label
        dice = 2 * intersect / (area_pred + area_label)
        # mFscore: F = (1 + b^2) P R / (b^2 P + R) from per-class precision and recall; a class
        # without true positives is 0/0 = nan and np.nanmean leaves it out
        precision = intersect / area_pred
        recall = intersect / area_label
        fscore = 2 * precision * recall / (precision + recall)
    r = evaluate(cm, preset="mmseg", beta=1)
    close(r.per_class["iou"], iou)
    same(r.miou, np.nanmean(iou))
    same(r.summary["mean_accuracy"], np.nanmean(acc))
    same(r.summary["mdice"], np.nanmean(dice))
    same(r.summary["pixel_accuracy"], intersect.sum() / area_label.sum())
    close(r.per_class["fbeta"], fscore)
    same(r.summary["mfbeta"], np.nanmean(fscore))
    same(r.summary["mprecision"], np.nanmean(precision))  # mPrecision
    same(r.summary["mean_accuracy"], np.nanmean(recall))  # mRecall
    for beta in (0.5, 1.0, 2.0):
        _check_mmseg(cm, np.zeros(4, np.int64), beta)


def test_mmseg_fscore_leaves_out_classes_without_true_positives():
    # class 1: 2 pixels, none predicted right; mmseg's F is 0/0 there, and its mFscore is
    # nanmean((10/13, nan, 1)) = 0.885, not mean((10/13, 0, 1)) = 0.590
    cm = np.array([[5, 1, 0], [2, 0, 0], [0, 0, 3]])
    r = evaluate(cm, preset="mmseg", beta=1)
    same(r.summary["mfbeta"], (10 / 13 + 1) / 2)
    assert round(r.summary["mfbeta"], 3) == 0.885
    assert math.isnan(r.per_class["fbeta"][1])
    assert r.per_class["dice"][1] == 0.0  # mDice keeps it: 2 * 0 / (1 + 2)
    assert any("precision and recall" in rule for rule in r.convention.rules())
    # the other presets score it 0 (scikit-learn's and torchmetrics' zero_division=0)
    for preset in ("segiou", "torchmetrics", "sklearn", "hf_evaluate", "cityscapes"):
        same(evaluate(cm, preset=preset, beta=1).summary["mfbeta"], (10 / 13 + 0 + 1) / 3)
    # the reducer itself
    close(metrics.fbeta(cm, 1.0, from_precision_recall=True), [10 / 13, NAN, 1.0])
    close(metrics.fbeta(cm, 1.0), [10 / 13, 0.0, 1.0])


def test_out_of_range_predictions_follow_the_rule_the_presets_and_results_state():
    """mmseg's histograms drop a prediction out of 0..K-1 and keep the ground truth there (a
    false negative); segiou refuses such a value, or leaves the pixel out, and says so in the
    result; mapping it to an ignore value first (void) reproduces mmseg, as the note says."""
    from segiou.errors import LabelRangeError

    k = 3
    gt = np.array([0, 0, 1, 2, 2, 255])
    pred = np.array([0, 7, 1, 2, 9, 7])

    def histc(x: np.ndarray) -> np.ndarray:  # torch.histc(bins=K, min=0, max=K-1) on ints
        return np.bincount(x[(x >= 0) & (x < k)], minlength=k)

    keep = gt != 255
    g, p = gt[keep], pred[keep]
    inter = histc(p[p == g])
    mmseg_iou = inter / (histc(p) + histc(g) - inter)  # [0.5, 1.0, 0.5]
    with pytest.raises(LabelRangeError):
        ConfusionMatrix(k, ignore_index=255).update(gt, pred)
    mapped = ConfusionMatrix(k, ignore_index=255).update(gt, np.where(pred < k, pred, 255))
    close(evaluate(mapped, preset="mmseg").per_class["iou"], mmseg_iou)
    counted = ConfusionMatrix(k, ignore_index=255, on_unexpected="count").update(gt, pred)
    close(evaluate(counted, preset="mmseg").per_class["iou"], [1.0, 1.0, 1.0])  # left out
    assert "is refused" in evaluate(mapped).counting["unexpected_rule"]
    assert "leaves its pixel out of every count" in evaluate(counted).counting["unexpected_rule"]
    notes = " ".join(get_convention("mmseg").differences)
    assert "np.where(pred < K, pred, 255)" in notes
    assert "count as false negatives in both" not in notes  # (segiou did not: it refused)
    assert "segiou counts it as void" not in " ".join(get_convention("torchmetrics").differences)


@settings(deadline=None)
@given(cv=count_matrices(max_classes=8), beta=st.sampled_from([0.5, 1.0, 2.0]))
def test_mmseg_preset_equals_written_out_mmseg(cv, beta):
    cm, void = cv
    _check_mmseg(cm, void, beta)


@pytest.mark.parametrize(
    ("membership", "words"),
    [
        # class 1 in no category: its pixels would vanish from every category
        ([[1, 0], [0, 0], [0, 1]], ["class(es) [1]", "no category", "exactly one"]),
        # class 0 in two categories: its pixels would be counted twice
        ([[1, 1], [1, 0], [0, 1]], ["class(es) [0]", "more than one", "exactly one"]),
        ([[2, 0], [1, 0], [0, 1]], ["0 or 1", "2", "(0, 0)"]),
        ([[1, 0], [1, 0], [0, -1]], ["0 or 1", "-1", "(2, 1)"]),
        ([[0.5, 0.5], [1, 0], [0, 1]], ["0 or 1", "0.5"]),
        ([[1, 0], [0, 1]], ["K x G", "K = 3", "(2, 2)"]),
        (np.ones((3, 1, 1), np.int64), ["K x G", "(3, 1, 1)"]),
        (np.zeros((3, 0), np.int64), ["K x G", "(3, 0)"]),
        # a sequence of category indices, one per class
        ([0, 0], ["3 classes", "2 category indices"]),
        ([0, -1, 1], ["class 1", "-1", "0 or more"]),
        ([0, 0.5, 1], ["integer", "0.5"]),
        ([True, False, True], ["integer"]),
    ],
)
def test_category_membership_is_validated(membership, words):
    cm = np.array([[5, 2, 1], [3, 4, 0], [0, 1, 6]])
    for f in (metrics.category_counts, metrics.category_iou):
        with pytest.raises(segiou.errors.UsageError) as info:
            f(cm, membership)
        assert isinstance(info.value, ValueError)
        for w in words:
            assert w in str(info.value), (w, str(info.value))


def test_category_membership_as_indices():
    cm = np.array([[5, 2, 1], [3, 4, 0], [0, 1, 6]])
    m = np.array([[1, 0], [1, 0], [0, 1]])
    expected = metrics.category_counts(cm, m)
    for indices in ([0, 0, 1], (0, 0, 1), np.array([0, 0, 1], np.uint8)):
        got = metrics.category_counts(cm, indices)
        assert_array_equal(got[0], expected[0])
        assert_array_equal(got[1], expected[1])
        close(metrics.category_iou(cm, indices), [0.875, 0.75])
    # a bool K x G matrix is a 0/1 matrix
    assert_array_equal(metrics.category_counts(cm, m.astype(bool))[0], expected[0])
    # categories without classes are allowed (nan IoU) with num_categories
    ccm, _ = metrics.category_counts(cm, [0, 0, 2], num_categories=4)
    assert ccm.shape == (4, 4)
    close(metrics.category_iou(cm, [0, 0, 2], num_categories=4), [0.875, NAN, 0.75, NAN])
    with pytest.raises(segiou.errors.UsageError, match="num_categories=2"):
        metrics.category_counts(cm, [0, 0, 2], num_categories=2)


# --- Cityscapes category IoU ----------------------------------------------------------------------


def test_cityscapes_category_iou_confusions_inside_category_are_correct():
    road, sidewalk, car, truck = 0, 1, 13, 14
    gt = np.array([road, road, road, sidewalk, car, car, 255, 255], np.uint8)
    pred = np.array([road, sidewalk, sidewalk, road, car, truck, car, road], np.uint8)
    cm = ConfusionMatrix("cityscapes").update(gt, pred)
    r = evaluate(cm, preset="cityscapes")
    cats = dict(zip(r.categories["names"], r.categories["iou"], strict=True))
    assert cats["flat"] == 1.0  # road <-> sidewalk confusions are flat true positives
    assert cats["vehicle"] == 1.0  # car -> truck is a vehicle true positive
    # predictions on ignored pixels are no false positive: car and road at gt 255
    assert r.categories["fp"].tolist() == [0] * 7
    for name in ("construction", "object", "nature", "sky", "human"):
        assert math.isnan(cats[name])
    assert r.summary["category_miou"] == 1.0
    iou = r.per_class["iou"]
    assert iou[road] == 0.25  # TP 1, FN 2, FP 1
    assert iou[sidewalk] == 0.0
    assert iou[car] == 0.5  # TP 1, FN 1; the car at the ignored pixel is not a FP
    assert iou[truck] == 0.0
    spec = builtin_spec("cityscapes")
    close(
        r.categories["iou"],
        reference.category_iou(cm.counts, spec.class_categories, 7, cm.void),
    )


def test_cityscapes_category_iou_with_void_predictions_in_labelids():
    # labelIds: 7 road, 8 sidewalk, 9 parking (flat but not evaluated), 24 person, 25 rider,
    # 26 car, 0 unlabeled.
    gt = np.array([7, 7, 24, 25, 26, 26, 0], np.uint8)
    pred = np.array([9, 8, 25, 26, 26, 26, 24], np.uint8)
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", pred_ids="raw").update(gt, pred)
    assert cm.void[0] == 1  # road predicted as parking: void, a false negative of road
    assert cm.n_ignored == 1
    r = evaluate(cm, preset="cityscapes")
    cats = dict(zip(r.categories["names"], r.categories["iou"], strict=True))
    # flat: TP 1 (road -> sidewalk), FN 1 (road -> parking: not evaluated, so not flat's TP)
    assert cats["flat"] == 0.5
    # human: TP 1 (person -> rider), FN 1 (rider -> car); person at unlabeled is no FP
    assert cats["human"] == 0.5
    # vehicle: TP 2 (car -> car), FP 1 (rider -> car)
    assert cats["vehicle"] == 2 / 3
    same(r.summary["category_miou"], (0.5 + 0.5 + 2 / 3) / 3)
    assert r.per_class["iou"][13] == 2 / 3  # car
    assert r.per_class["iou"][0] == 0.0  # road: TP 0, FN 2


# --- scikit-learn --------------------------------------------------------------------------------


def _sk(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)


@st.composite
def label_vectors(draw, void_and_ignore: bool):
    k = draw(st.integers(1, 8))
    n = draw(st.integers(1, 80))
    classes = st.integers(0, k - 1)
    gt_el = st.one_of(classes, st.just(255)) if void_and_ignore else classes
    gt = np.array(draw(st.lists(gt_el, min_size=n, max_size=n)))
    pred = np.array(draw(st.lists(gt_el, min_size=n, max_size=n)))
    return k, gt, pred


@settings(deadline=None)
@given(data=label_vectors(void_and_ignore=False))
def test_sklearn_without_ignore(data):
    skm = pytest.importorskip("sklearn.metrics")
    k, gt, pred = data
    cm = ConfusionMatrix(k).update(gt, pred)
    counts = cm.counts
    present = sorted(set(gt.tolist()) | set(pred.tolist()))
    labels = list(range(k))
    # jaccard_score, labels=None: only labels present in y_true or y_pred
    close(metrics.iou(counts)[present], _sk(skm.jaccard_score, gt, pred, average=None))
    same(evaluate(cm, preset="sklearn").miou, _sk(skm.jaccard_score, gt, pred, average="macro"))
    same(metrics.micro_iou(counts), _sk(skm.jaccard_score, gt, pred, average="micro"))
    same(metrics.fw_iou(counts), _sk(skm.jaccard_score, gt, pred, average="weighted"))
    # labels=range(K), zero_division=0: every class, absent ones scoring 0
    r_all = evaluate(cm, preset="sklearn_all_labels")
    sk_all = _sk(skm.jaccard_score, gt, pred, average=None, labels=labels, zero_division=0)
    close(r_all.per_class["iou"], sk_all)
    same(
        r_all.miou,
        _sk(skm.jaccard_score, gt, pred, average="macro", labels=labels, zero_division=0),
    )
    same(
        metrics.micro_iou(counts),
        _sk(skm.jaccard_score, gt, pred, average="micro", labels=labels, zero_division=0),
    )
    # F1, precision, recall: per class (0 where sklearn divides by zero), macro over present
    for ours, theirs in (
        (metrics.dice, skm.f1_score),
        (metrics.precision, skm.precision_score),
        (metrics.recall, skm.recall_score),
    ):
        close(
            np.nan_to_num(ours(counts), nan=0.0),
            _sk(theirs, gt, pred, average=None, labels=labels, zero_division=0),
        )
    same(
        evaluate(cm, preset="sklearn").summary["mdice"],
        _sk(skm.f1_score, gt, pred, average="macro", zero_division=0),
    )
    same(
        evaluate(cm, preset="sklearn_all_labels").summary["mprecision"],
        _sk(skm.precision_score, gt, pred, average="macro", labels=labels, zero_division=0),
    )
    same(metrics.pixel_accuracy(counts), skm.accuracy_score(gt, pred))
    same(metrics.mean_accuracy(counts), _sk(skm.balanced_accuracy_score, gt, pred))
    kappa = metrics.cohen_kappa(counts)
    if not math.isnan(kappa):
        assert kappa == pytest.approx(_sk(skm.cohen_kappa_score, gt, pred), rel=1e-9, abs=1e-12)


@settings(deadline=None)
@given(data=label_vectors(void_and_ignore=True))
def test_sklearn_with_ignore_and_void(data):
    # Ignored ground truth: drop those samples. Void predictions: a label outside range(K), so
    # they are false negatives of the true class and false positives of no evaluated class.
    skm = pytest.importorskip("sklearn.metrics")
    k, gt, pred = data
    cm = ConfusionMatrix(k, ignore_index=255).update(gt, pred)
    keep = gt != 255
    g, p = gt[keep], np.where(pred[keep] == 255, k, pred[keep])
    assert cm.n_ignored == int((~keep).sum())
    if g.size == 0:
        assert cm.counts.sum() + cm.void.sum() == 0
        return
    labels = list(range(k))
    close(
        np.nan_to_num(metrics.iou(cm.counts, void=cm.void), nan=0.0),
        _sk(skm.jaccard_score, g, p, average=None, labels=labels, zero_division=0),
    )
    same(
        evaluate(cm, preset="sklearn_all_labels").miou,
        _sk(skm.jaccard_score, g, p, average="macro", labels=labels, zero_division=0),
    )
    same(
        metrics.micro_iou(cm.counts, void=cm.void),
        _sk(skm.jaccard_score, g, p, average="micro", labels=labels, zero_division=0),
    )
    same(metrics.pixel_accuracy(cm.counts, void=cm.void), skm.accuracy_score(g, p))
    kappa = metrics.cohen_kappa(cm.counts, void=cm.void)
    if not math.isnan(kappa):
        assert kappa == pytest.approx(_sk(skm.cohen_kappa_score, g, p), rel=1e-9, abs=1e-12)


# --- results -------------------------------------------------------------------------------------


def _strict_json(text: str):
    def refuse(name):
        msg = f"non-standard JSON constant {name}"
        raise AssertionError(msg)

    return json.loads(text, parse_constant=refuse)


def test_result_to_json_is_strict_with_nulls():
    gt = np.array([[7, 8, 26], [0, 9, 26]], np.uint8)
    pred = np.array([[7, 7, 26], [26, 9, 33]], np.uint8)
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", pred_ids="raw").update(gt, pred, key="a")
    r = evaluate(cm, preset="cityscapes")
    doc = _strict_json(r.to_json())
    assert doc["format"] == "segiou.result"
    assert doc["version"] == 3
    assert doc["intervals"] is None
    assert doc["slices"] is None
    assert doc["boundary"] is None
    assert doc["instances"] is None
    assert doc["absent_chunks"] == {"total": 0, "images": {}}
    assert doc["writer"] == {"segiou": segiou.__version__}
    assert doc["labels"] == "cityscapes"
    assert doc["convention"]["name"] == "cityscapes"
    assert doc["convention"]["fill"] is None
    classes = {c["name"]: c for c in doc["classes"]}
    assert len(classes) == 19
    assert classes["sky"]["iou"] is None  # in neither mask
    assert classes["road"]["iou"] == 0.5  # TP 1, FP 1 (sidewalk -> road)
    assert classes["car"] == {
        "id": 13,
        "name": "car",
        "iou": 0.5,
        "dice": 2 / 3,
        "precision": 1.0,
        "recall": 0.5,
        "tp": 1,
        "fp": 0,
        "fn": 1,
        "void": 0,
        "gt_pixels": 2,
        "pred_pixels": 1,
    }
    assert [c["name"] for c in doc["categories"]][:2] == ["flat", "construction"]
    assert doc["pixels"] == {
        "total": 6,
        "counted": 4,
        "void": 0,
        "ignored": 2,
        "unexpected_gt": {},
        "unexpected_pred": {},
    }
    assert doc["images"] == 1
    assert doc["batches"] == 1
    assert set(doc["summary"]) >= {"miou", "fwiou", "micro_iou", "kappa", "category_miou"}
    assert doc["counting"]["gt_ids"] == "raw"
    # an all-nan result is still strict JSON
    empty = _strict_json(evaluate(np.zeros((2, 2), np.int64)).to_json(indent=None))
    assert empty["summary"]["miou"] is None
    assert all(c["iou"] is None for c in empty["classes"])


def test_result_table_mentions_rules():
    r = evaluate(ABSENT, preset="detectron2")
    text = render_text(r)
    assert "detectron2" in text
    assert "ground-truth" in text


def test_evaluate_bare_matrix_equals_accumulator():
    gt = np.array([0, 1, 2, 2, 255, 1])
    pred = np.array([0, 2, 2, 255, 1, 1])
    cm = ConfusionMatrix(3, ignore_index=255).update(gt, pred, key="x")
    a = evaluate(cm)
    b = evaluate(cm.counts, void=cm.void)
    for name in ("iou", "dice", "precision", "recall", "tp", "fp", "fn", "void"):
        assert_array_equal(a.per_class[name], b.per_class[name])
    assert a.summary == pytest.approx(b.summary, nan_ok=True)
    assert a.pixels["ignored"] == 1
    assert a.pixels["void"] == 1
    assert a.counting["ignore"] == [255]


def test_evaluate_refuses_a_spec_of_another_size():
    voc = builtin_spec("pascal_voc")
    with pytest.raises(segiou.errors.UsageError) as info:
        evaluate(np.eye(3, dtype=np.int64), spec=voc)
    assert isinstance(info.value, ValueError)
    for w in ("'pascal_voc'", "21 classes", "3 x 3", "spec"):
        assert w in str(info.value), (w, str(info.value))
    # a spec of the right size names the classes
    r = evaluate(np.eye(21, dtype=np.int64), spec=voc)
    assert r.class_names[15] == "person"
    _strict_json(r.to_json())
    assert "person" in render_text(r)
    # an accumulator carries its own spec: a different one given as well is refused
    cm = ConfusionMatrix("pascal_voc")
    assert evaluate(cm, spec=voc).labels == "pascal_voc"
    with pytest.raises(segiou.errors.UsageError, match="carries its own"):
        evaluate(cm, spec=segiou.LabelSpec.from_num_classes(21))


def test_sklearn_preset_documents_extra_labels():
    # jaccard_score with labels=None takes every value in y_true / y_pred as a label, so a
    # 255 left in the arrays is scored as an extra class; segiou leaves ignored pixels out.
    skm = pytest.importorskip("sklearn.metrics")
    gt = np.array([0, 0, 1, 255])
    pred = np.array([0, 1, 1, 0])
    r = evaluate(ConfusionMatrix(2, ignore_index=255).update(gt, pred), preset="sklearn")
    same(r.miou, 0.5)
    raw = _sk(skm.jaccard_score, gt, pred, average="macro")
    assert raw == pytest.approx((1 / 3 + 1 / 2 + 0) / 3)  # 255 is a third label
    keep = gt != 255
    same(r.miou, _sk(skm.jaccard_score, gt[keep], pred[keep], average="macro", labels=[0, 1]))
    diffs = " ".join(get_convention("sklearn").differences)
    assert "labels=None" in diffs
    assert "extra label" in diffs
    assert "255" in diffs
    assert "no ignore value" in " ".join(get_convention("sklearn_all_labels").differences)


def test_presets_document_zero_division_differences():
    # torchmetrics' and scikit-learn's macro precision score a class never predicted 0;
    # segiou's mprecision leaves it out (precision is 0/0 there)
    cm = np.array([[2, 0], [1, 0]])  # class 1 in the ground truth, never predicted
    r = evaluate(cm, preset="torchmetrics")
    same(r.summary["mprecision"], 2 / 3)
    for preset in ("torchmetrics", "sklearn"):
        assert any("zero_division" in d for d in get_convention(preset).differences)
    assert any("MulticlassRecall" in d for d in get_convention("torchmetrics").differences)


@pytest.mark.parametrize("beta", [1e100, 1e154, 1e200, 1e300])
def test_a_huge_beta_gives_the_limit_recall_not_nan_or_an_error(beta):
    """F-beta tends to recall as beta grows (0 for a class only predicted); past 1e154 beta^2
    overflowed: nan, or an OverflowError (a 500 from the service)."""
    cm = np.array([[5, 2, 1], [1, 3, 0], [0, 0, 0]])  # class 2 only predicted
    tp, fn = np.diag(cm), cm.sum(1) - np.diag(cm)
    want = np.array([tp[0] / (tp[0] + fn[0]), tp[1] / (tp[1] + fn[1]), 0.0])
    np.testing.assert_allclose(metrics.fbeta(cm, beta), want, rtol=1e-15)
    r = evaluate(cm, beta=beta)
    same(r.summary["mfbeta"], float(np.mean(want)))
    assert np.isnan(metrics.fbeta(cm, float("nan"))).all()  # nan stays nan, not recall


@pytest.mark.parametrize("beta", [1e-100, 1e-160, 1e-170, 1e-300, 5e-324])
def test_a_tiny_beta_gives_the_limit_precision_and_0_without_true_positives(beta):
    """F-beta tends to precision as beta shrinks; below ~1.5e-162 beta^2 underflowed to 0 and a
    class never predicted read 0/0 (nan, left out of mfbeta) instead of 0."""
    cm = np.array([[5, 0, 0], [3, 0, 0], [0, 0, 0]])  # class 1: ground truth, never predicted
    want = np.array([5 / 8, 0.0, np.nan])  # precision of class 0; 0; absent
    np.testing.assert_allclose(metrics.fbeta(cm, beta), want, rtol=1e-15)
    same(evaluate(cm, beta=beta).summary["mfbeta"], (5 / 8 + 0.0) / 2)
    assert np.isnan(metrics.fbeta(cm, beta, from_precision_recall=True)[1])  # mmseg: left out


def test_rules_say_what_a_class_only_predicted_scores():
    """The rules echoed in every result match the numbers (detectron2's said "IoU 0": nan)."""
    cm = np.array([[3, 1], [0, 0]])  # class 1 only predicted
    r = evaluate(cm, preset="detectron2")
    assert np.isnan(r.per_class["iou"][1])
    assert "a class only predicted (no ground truth) is left out of means and reported as nan (undefined)" in (
        r.convention.rules())  # fmt: skip
    r = evaluate(cm, preset="segiou")
    same(r.per_class["iou"][1], 0.0)
    assert "a class only predicted scores IoU 0 and is included in means" in r.convention.rules()


def test_ade20k_presets_say_predictions_are_class_ids():
    g = np.array([[1, 1, 2, 2], [3, 3, 0, 0]], np.uint8)  # annotations: raw ids, 0 = other
    p = np.array([[0, 0, 1, 1], [2, 2, 5, 5]], np.uint8)  # a perfect model's class ids
    cm = ConfusionMatrix("ade20k", gt_ids="raw", pred_ids="class").update(g, p)
    for preset in ("hf_evaluate", "mmseg"):
        same(evaluate(cm, preset=preset).miou, 1.0)
        assert any("pred_ids='class'" in d for d in get_convention(preset).differences)


# -- presets on pixels (ignore and void included), each tool's pipeline written out ------------
def _areas_from_pixels(gt, pred, k, ignore):  # type: ignore[no-untyped-def]
    """intersect_and_union of mmsegmentation and HF evaluate, written out in numpy."""
    keep = gt != ignore
    g, p = gt[keep].astype(np.int64), pred[keep].astype(np.int64)

    def hist(v):  # type: ignore[no-untyped-def]  # torch.histc: values outside [0, k-1] dropped
        return np.bincount(v[(v >= 0) & (v < k)], minlength=k).astype(float)

    return hist(p[p == g]), hist(p), hist(g)


def _mmseg_from_pixels(gt, pred, k, ignore):  # type: ignore[no-untyped-def]
    """mmsegmentation total_area_to_metrics (means with np.nanmean)."""
    inter, area_p, area_g = _areas_from_pixels(gt, pred, k, ignore)
    with np.errstate(invalid="ignore", divide="ignore"):
        prec, rec = inter / area_p, inter / area_g
        return {"miou": np.nanmean(inter / (area_p + area_g - inter)), "macc": np.nanmean(rec),
                "aacc": inter.sum() / area_g.sum(), "mdice": np.nanmean(2 * inter / (area_p + area_g)),
                "mfscore": np.nanmean(2 * prec * rec / (prec + rec))}  # fmt: skip


def _hf_from_pixels(gt, pred, k, ignore):  # type: ignore[no-untyped-def]
    """HF evaluate mean_iou (reduce_labels=False): nanmean over classes."""
    inter, area_p, area_g = _areas_from_pixels(gt, pred, k, ignore)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"miou": np.nanmean(inter / (area_p + area_g - inter)),
                "macc": np.nanmean(inter / area_g), "aacc": inter.sum() / area_g.sum()}  # fmt: skip


def _torchmetrics_from_pixels(gt, pred, k, ignore):  # type: ignore[no-untyped-def]
    """MulticlassJaccardIndex(ignore_index=ignore, average='macro'): classes with a union."""
    keep = (gt != ignore) & (pred < k)  # torchmetrics has no void rule (compared without void)
    g, p = gt[keep].astype(np.int64), pred[keep].astype(np.int64)
    cm = np.bincount(g * k + p, minlength=k * k).reshape(k, k).astype(float)
    tp = np.diag(cm)
    union = cm.sum(0) + cm.sum(1) - tp
    return float(np.mean(tp[union > 0] / union[union > 0]))


@settings(deadline=None, max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 8), void=st.booleans())
def test_presets_on_pixels_with_ignore_and_void(seed, k, void):
    rng = np.random.default_rng(seed)
    gt = rng.integers(0, k, size=(3, 20, 30)).astype(np.uint8)
    gt[rng.random(gt.shape) < 0.1] = 255
    pred = np.where(rng.random(gt.shape) < 0.6, gt, rng.integers(0, k, size=gt.shape))
    pred = pred.astype(np.uint8)
    if void:  # predictions outside the classes at valid pixels: false negatives only
        pred[(rng.random(gt.shape) < 0.05) & (gt != 255)] = 255
    cm = ConfusionMatrix(k, ignore_index=255).update(gt, pred)
    mm, r = _mmseg_from_pixels(gt, pred, k, 255), evaluate(cm, preset="mmseg", beta=1)
    same(r.miou, mm["miou"])
    same(r.summary["mean_accuracy"], mm["macc"])
    same(r.summary["pixel_accuracy"], mm["aacc"])
    same(r.summary["mdice"], mm["mdice"])
    same(r.summary["mfbeta"], mm["mfscore"])
    hf, r = _hf_from_pixels(gt, pred, k, 255), evaluate(cm, preset="hf_evaluate")
    same(r.miou, hf["miou"])
    same(r.summary["mean_accuracy"], hf["macc"])
    same(r.summary["pixel_accuracy"], hf["aacc"])
    if not void:  # torchmetrics raises on out-of-range predictions: compare without void
        same(evaluate(cm, preset="torchmetrics").miou, _torchmetrics_from_pixels(gt, pred, k, 255))


def test_negative_counts_are_refused():
    with pytest.raises(ValueError, match=r"negative count \(-1 at \(0, 1\)\)"):
        metrics.iou(np.array([[3, -1], [0, 2]]))
    with pytest.raises(ValueError, match=r"void holds a negative count"):
        metrics.iou(np.array([[3, 1], [0, 2]]), void=np.array([0, -2]))


def test_void_with_an_accumulator_is_refused_and_fbeta_is_reported():
    cm = ConfusionMatrix(2).update(np.array([0, 1, 1]), np.array([0, 1, 0]))
    with pytest.raises(segiou.errors.UsageError, match="void was given"):
        evaluate(cm, void=np.array([1, 0]))
    d = evaluate(cm, beta=2).to_dict()
    assert [c["fbeta"] for c in d["classes"]] == pytest.approx(
        list(evaluate(cm, beta=2).per_class["fbeta"])
    )
    assert "fbeta" not in evaluate(cm).to_dict()["classes"][0]


def test_evaluate_takes_a_spec_by_name():
    cm = np.eye(21, dtype=np.int64)
    r = evaluate(cm, spec="pascal_voc")
    assert r.class_names[0] == builtin_spec("pascal_voc").classes[0]
    with pytest.raises(segiou.errors.UsageError, match="21 classes"):
        evaluate(np.eye(3, dtype=np.int64), spec="pascal_voc")


def test_micro_iou_is_exact_when_the_sum_of_unions_passes_int64():
    # a legal state of 2**63 - 1 pixels: every wrong pixel is in two unions, so their sum is
    # about 1.5 * 2**63 here; summed in int64 it wrapped negative and micro_iou gave nan
    cm = np.array([[2**61, 2**61], [2**61, 2**61 - 1]], dtype=np.int64)
    tp = 2**61 + 2**61 - 1
    union = (2**61 + 2**61 + 2**61) + (2**61 - 1 + 2**61 + 2**61)
    assert metrics.micro_iou(cm) == tp / union
    assert evaluate(cm).summary["micro_iou"] == tp / union


@pytest.mark.parametrize("where", ["cm", "void"])
def test_uint64_counts_above_int64_are_refused_not_wrapped(where):
    cm = np.array([[5, 0], [0, 5]], dtype=np.uint64)
    void = np.zeros(2, dtype=np.uint64)
    big = np.uint64(2**63 + 10)
    if where == "cm":
        cm[0, 0] = big
    else:
        void[1] = big
    with pytest.raises(
        segiou.errors.CountMatrixError, match=r"above 2\*\*63 - 1 \(9223372036854775818 at"
    ):
        metrics.iou(cm, void=void)
    with pytest.raises(segiou.errors.CountMatrixError, match="above 2"):
        evaluate(cm, void=void)
    cm[...] = [[2**62, 0], [0, 2**62 - 1]]  # the largest total is read as it is
    void[...] = 0
    assert metrics.iou(cm, void=void).tolist() == [1.0, 1.0]
    cm[1, 1] += 1  # one pixel more: the column and row sums would wrap
    with pytest.raises(segiou.errors.CountMatrixError, match=r"9223372036854775808 pixels in all"):
        metrics.iou(cm, void=void)


def test_void_must_hold_integer_counts():
    with pytest.raises(
        segiou.errors.CountDtypeError, match="void must hold integer counts, got dtype float64"
    ):
        metrics.iou(np.array([[3, 1], [0, 2]]), void=np.array([0.5, 1.0]))
