"""Comparing a result report with a baseline (segiou.compare)."""

from __future__ import annotations

import copy
import json

import pytest
from support import shifted_unexpected_runs

from segiou.compare import compare_reports
from segiou.errors import CheckpointError


def _report(miou: float, road: float, conv: str = "segiou") -> dict[str, object]:
    return {"format": "segiou.result", "version": 1, "labels": "x", "convention": {"name": conv},
            "summary": {"miou": miou}, "classes": [{"name": "road", "iou": road}]}  # fmt: skip


def test_compare_flags_drops_beyond_tolerance_only() -> None:
    ok = compare_reports(_report(0.700, 0.90), _report(0.703, 0.91))
    assert not ok.regressed
    bad = compare_reports(_report(0.690, 0.85), _report(0.700, 0.90))
    assert bad.regressed
    assert len(bad.regressions) == 2
    assert "miou dropped by 0.0100" in bad.regressions[0]
    with pytest.raises(CheckpointError, match="convention 'mmseg' now but 'segiou'"):
        compare_reports(_report(0.7, 0.9, "mmseg"), _report(0.7, 0.9))


@pytest.mark.parametrize("bad", [[1, 2], "report", None])
def test_compare_refuses_what_is_not_a_report(bad: object) -> None:
    with pytest.raises(CheckpointError, match="not a segiou result report"):
        compare_reports(bad, _report(0.7, 0.9))  # type: ignore[arg-type]


def test_compare_refuses_a_guarded_metric_no_report_has() -> None:
    with pytest.raises(CheckpointError, match="max_drop guards 'category_miou'"):
        compare_reports(_report(0.7, 0.9), _report(0.7, 0.9), max_drop={"category_miou": 0.01})
    cur = _report(0.7, 0.9)
    cur["summary"]["mdice"] = 0.8  # only the baseline lacks it: its own summary is listed
    listed = r"the baseline report\(s\) do not have \(summary: \['miou'\]\)"
    with pytest.raises(CheckpointError, match=listed):
        compare_reports(cur, _report(0.7, 0.9), max_drop={"mdice": 0.01})
    bad = _report(0.7, 0.9)
    bad["summary"] = {"miou": None}
    comp = compare_reports(bad, _report(0.7, 0.9))
    assert comp.regressed
    assert "miou is undefined now" in comp.regressions[0]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_compare_reads_report_versions_1_to_3(version: int) -> None:
    cur, base = _report(0.7, 0.9), _report(0.7, 0.9)
    cur["version"] = version
    assert not compare_reports(cur, base).regressed


@pytest.mark.parametrize("version", [0, 4, True, "2", None])
def test_compare_refuses_unknown_report_versions(version: object) -> None:
    cur = _report(0.7, 0.9)
    cur["version"] = version
    with pytest.raises(CheckpointError, match="reads versions 1, 2, 3"):
        compare_reports(cur, _report(0.7, 0.9))


def test_compare_refuses_reports_of_other_counting_rules_or_classes() -> None:
    # the spec's name alone was compared: a changed ignore set, or a spec file whose classes
    # were reordered under the same name, compared silently (mIoU 0.848 -> 1.0 here)
    import numpy as np

    from segiou import ConfusionMatrix, LabelSpec, evaluate

    gt = np.array([[0, 0, 1, 1, 2, 2]], np.uint8)
    pred = np.array([[0, 1, 1, 1, 2, 0]], np.uint8)
    gt2 = gt.copy()
    gt2[0, [1, 5]] = 255  # the wrong pixels ignored now
    plain = evaluate(ConfusionMatrix(3).update(gt, pred)).to_dict()
    ignored = evaluate(ConfusionMatrix(3, ignore_index=255).update(gt2, pred)).to_dict()
    assert plain["labels"] == ignored["labels"]  # the same name
    with pytest.raises(
        CheckpointError, match=r"counting ignore is \[255\] now but \[\] in the baseline"
    ):
        compare_reports(ignored, plain)
    s1 = LabelSpec.from_dict({"name": "mine", "classes": ["road", "car", "sky"]})
    s2 = LabelSpec.from_dict({"name": "mine", "classes": ["car", "road", "sky"]})
    a = evaluate(ConfusionMatrix(s1).update(gt, pred)).to_dict()
    b = evaluate(ConfusionMatrix(s2).update(gt, pred)).to_dict()
    with pytest.raises(
        CheckpointError, match=r"classes differ \(first: \(0, 'car'\) now, \(0, 'road'\)"
    ):
        compare_reports(b, a)
    assert not compare_reports(a, a).regressions  # the same rules and classes: compared


def test_compare_refuses_other_betas_and_other_category_members() -> None:
    """mfbeta of beta 0.5 was compared with mfbeta of beta 3 (a drop of 0.076 on the same
    predictions); a spec edited under its name that moved a class to another category compared
    category_miou silently."""
    import numpy as np

    from segiou import ConfusionMatrix, LabelSpec, evaluate

    g = np.array([[0, 0, 1, 2], [1, 1, 2, 0]], np.uint8)
    p = np.array([[0, 1, 1, 2], [1, 0, 2, 0]], np.uint8)

    def doc(categories: tuple[str, ...], of: tuple[int, ...], beta: float | None = None) -> dict:
        spec = LabelSpec("roads", ("road", "car", "bus"), categories=categories,
                         class_categories=of)  # fmt: skip
        return evaluate(ConfusionMatrix(spec).update(g, p, key="a"), beta=beta).to_dict()

    a = doc(("flat", "vehicle"), (0, 1, 1))
    assert a["categories"][1]["classes"] == [1, 2]
    assert not compare_reports(a, doc(("flat", "vehicle"), (0, 1, 1))).regressed
    with pytest.raises(CheckpointError, match="their categories differ"):
        compare_reports(doc(("flat", "vehicle"), (0, 0, 1)), a)
    old = doc(("flat", "vehicle"), (0, 0, 1))
    for c in old["categories"]:
        del c["classes"]  # a report written before categories listed their classes
    assert compare_reports(old, a, max_drop={"miou": 1.0}) is not None
    with pytest.raises(CheckpointError, match=r"beta is 3 now but 0\.5 in the baseline"):
        compare_reports(doc(("flat", "vehicle"), (0, 1, 1), beta=3),
                        doc(("flat", "vehicle"), (0, 1, 1), beta=0.5))  # fmt: skip


def test_compare_refuses_reports_on_other_ground_truth() -> None:
    """A run on part of the test set (or another one) compared with fixed tolerances as if the
    model had changed: here the same perfect model "dropped" from mIoU 1.0 to 0.75."""
    import json

    import numpy as np

    from segiou import ConfusionMatrix, evaluate

    gt = np.array([[[0, 0, 1, 1]], [[2, 2, 2, 2]], [[0, 1, 2, 255]]], np.uint8)
    pred = gt.copy()
    pred[0, 0, 1] = 1

    def doc(g: np.ndarray, p: np.ndarray, **kw: object) -> dict:
        return evaluate(ConfusionMatrix(3, ignore_index=255, **kw).update(g, p)).to_dict()

    base = json.loads(json.dumps(doc(gt, pred)))  # read back from its file, as the nightly does
    assert not compare_reports(doc(gt, pred), base).regressed
    assert not compare_reports(doc(gt, gt), base).regressed  # another model, the same images
    with pytest.raises(CheckpointError, match=r"different ground truth \(images: 2 now, 3 in"):
        compare_reports(doc(gt[:2], pred[:2]), base)
    other = gt.copy()
    other[1, 0, 0] = 0  # the same images and pixels, one label changed
    with pytest.raises(CheckpointError, match=r"ground-truth pixels of class '0': 4 now, 3 in"):
        compare_reports(doc(other, pred), base)
    more_ignored = gt.copy()
    more_ignored[2, 0, 0] = 255
    with pytest.raises(CheckpointError, match=r"ignored ground-truth pixels: 2 now, 1 in"):
        compare_reports(doc(more_ignored, pred), base)
    comp = compare_reports(doc(gt[:2], pred[:2]), base, same_ground_truth=False)
    assert set(comp.summary) >= {"miou"}
    # unexpected ground-truth values compare equal (read back from JSON too), and
    # predictions of unexpected values leave a class's ground-truth pixels out of its count:
    # the class counts are compared with the pixels left out then (test below), the totals
    # exactly
    odd_gt = gt.copy()
    odd_gt[0, 0, 0] = 9
    base_odd = json.loads(json.dumps(doc(odd_gt, pred, on_unexpected="count")))
    assert not compare_reports(doc(odd_gt, gt, on_unexpected="count"), base_odd).regressed
    odd_pred = pred.copy()
    odd_pred[1, 0, 0] = 7
    assert compare_reports(doc(gt, odd_pred, on_unexpected="count"), base) is not None
    with pytest.raises(CheckpointError, match="images: 2 now"):
        compare_reports(doc(gt[:2], odd_pred[:2], on_unexpected="count"), base)


def _counted(gt: list[int], pred: list[int], **kw: object) -> dict:
    """A report as the nightly job reads it back (3 classes, 255 ignored, unexpected counted)."""
    import json

    import numpy as np

    from segiou import ConfusionMatrix, evaluate

    cm = ConfusionMatrix(3, ignore_index=255, on_unexpected="count", **kw)
    cm.update(np.array([gt], np.uint8), np.array([pred], np.uint8))
    return json.loads(json.dumps(evaluate(cm).to_dict()))


def test_a_class_scored_in_the_baseline_and_undefined_now_regresses() -> None:
    """A model that predicts an unexpected value (77) on every pixel of class 2: its pixels
    leave the counts, class 2 has no IoU, the mean skips it and mIoU "improves" (0.9167 ->
    1.0); the class was compared only when both IoUs were defined, so nothing regressed."""
    gt = [0, 0, 1, 1, 2, 2, 2, 2]
    base = _counted(gt, [0, 0, 1, 1, 2, 2, 2, 255])  # class 2: TP 3, FN 1 (void): IoU 3/4
    garbage = _counted(gt, [0, 0, 1, 1, 77, 77, 77, 77])
    assert base["classes"][2]["iou"] == 0.75
    assert garbage["classes"][2]["iou"] is None
    assert garbage["summary"]["miou"] > base["summary"]["miou"]  # (1.0 vs 2.75 / 3)
    comp = compare_reports(garbage, base)
    assert comp.regressed
    line = ("class '2' IoU is undefined now (baseline 0.7500): none of the 4 ground-truth "
            "pixels the baseline counted for it is counted now")  # fmt: skip
    assert any(r.startswith(line) for r in comp.regressions), comp.regressions
    # (named once: not again as a class with fewer ground-truth pixels counted now)
    assert not any(r.startswith("class '2' has ") for r in comp.regressions), comp.regressions
    assert "2" not in comp.classes  # (compared classes: scored in both)
    # a report without per-class counts (hand-made, or older): still a regression
    for c in base["classes"]:
        del c["gt_pixels"]
    old = compare_reports(garbage, base).regressions
    assert any(r.startswith("class '2' IoU is undefined now (baseline 0.7500): none of the "
                            "pixels") for r in old)  # fmt: skip
    # the per-class check switched off: no class regresses by its IoU; the pixels left out
    # still do (class 2's 4, whatever the tolerances)
    off = compare_reports(garbage, _counted(gt, [0, 0, 1, 1, 2, 2, 2, 255]), max_class_drop=None)
    assert not any("IoU" in r for r in off.regressions), off.regressions
    assert off.regressions[0].startswith("class '2' has 0 ground-truth pixels counted now, 4 in "
                                         "the baseline, on the same ground truth: 4 more ")  # fmt: skip


def test_a_class_undefined_in_the_baseline_or_scored_by_false_positives_alone_does_not() -> None:
    gt = [0, 0, 1, 1, 2, 2, 2, 2]
    base = _counted(gt, [0, 0, 1, 1, 2, 2, 2, 255])
    garbage = _counted(gt, [0, 0, 1, 1, 77, 77, 77, 77])
    # undefined in the baseline and scored now: the class is back, not lost
    back = compare_reports(base, garbage, max_drop={"miou": 1.0})
    assert not any("'2'" in r for r in back.regressions), back.regressions
    # no ground truth of class 2: the baseline's IoU 0 came from a false positive alone, and
    # the candidate that stops predicting it leaves class 2 undefined (an improvement)
    fp_base = _counted([0, 0, 1, 1], [0, 2, 1, 1])
    assert fp_base["classes"][2]["iou"] == 0.0
    assert fp_base["classes"][2]["gt_pixels"] == 0
    fixed = _counted([0, 0, 1, 1], [0, 0, 1, 1])
    assert fixed["classes"][2]["iou"] is None
    assert not compare_reports(fixed, fp_base).regressed


def test_a_class_missing_from_another_test_set_is_no_lost_class() -> None:
    """same_ground_truth=False: a perfect model whose new test set has no class 2 failed with
    "class '2' IoU is undefined now ... (a prediction with an unexpected value is left out of
    every count)", though the current report left no pixel out."""
    import numpy as np

    g1 = np.zeros((10, 30), np.uint8)
    g1[:, 10:20] = 1
    g1[:, 20:] = 2
    g2 = np.zeros((10, 30), np.uint8)
    g2[:, 15:] = 1  # another test set: no class 2
    base = _counted(g1.ravel().tolist(), g1.ravel().tolist())  # a perfect model
    cur = _counted(g2.ravel().tolist(), g2.ravel().tolist())  # the same on the other set
    assert base["classes"][2]["gt_pixels"] == int((g1 == 2).sum()) > 0
    assert cur["classes"][2]["iou"] is None
    assert cur["pixels"]["unexpected_pred"] == {}
    comp = compare_reports(cur, base, same_ground_truth=False)
    assert comp.regressions == []
    # a report that does not say its unexpected predictions (hand-made): no cause to name
    del cur["pixels"]["unexpected_pred"]
    assert compare_reports(cur, base, same_ground_truth=False).regressions == []
    # a pixel left out now, on class 0: which class's pixels those were cannot be told on
    # another test set, so class 2 is not called lost (one pixel cannot hold its 100); the
    # larger share of pixels left out is the regression
    odd = g2.copy()
    odd[0, 0] = 77
    now = _counted(g2.ravel().tolist(), odd.ravel().tolist())
    lines = compare_reports(now, base, same_ground_truth=False).regressions
    assert len(lines) == 1
    assert lines[0].startswith("1 predicted pixels have an unexpected value now, 0 in the baseline")
    # a baseline leaving a larger share out: a better model on another test set passes
    left = g1.copy()
    left[0, :5] = 77  # 5 of 300 pixels
    assert compare_reports(now, _counted(g1.ravel().tolist(), left.ravel().tolist()),
                           same_ground_truth=False).regressions == []  # fmt: skip


def test_more_predicted_pixels_with_unexpected_values_regress() -> None:
    """Wrong pixels predicted as an unexpected value leave the counts: class 2's IoU "rose"
    from 3/4 to 1 and mIoU with it, and nothing said that a pixel had gone."""
    import numpy as np

    gt = [0, 0, 1, 1, 2, 2, 2, 2]
    base = _counted(gt, [0, 0, 1, 1, 2, 2, 2, 255])  # class 2: TP 3, FN 1 (void)
    hidden = [0, 0, 1, 1, 2, 2, 2, 77]  # the miss is an unexpected value now
    now = _counted(gt, hidden)
    assert now["classes"][2]["iou"] == 1.0  # TP 3, FN 0: the miss is gone
    comp = compare_reports(now, base)
    n = int((np.array(hidden) == 77).sum())
    line = (f"{n} predicted pixels have an unexpected value now, 0 in the baseline (pixels per "
            f"value now: 77: {n}): they are left out of every score, which cannot show what the "
            "model predicted there")  # fmt: skip
    lost = ("class '2' has 3 ground-truth pixels counted now, 4 in the baseline, on the same "
            f"ground truth: {n} more of its pixels are predicted as an unexpected value now, "
            "left out of every score, which cannot show what the model predicted there")  # fmt: skip
    assert comp.regressions == [lost, line]
    assert comp.unexpected_pred == (0, n)
    assert comp.to_dict()["unexpected_pred"] == {"baseline": 0, "current": n}
    # as many, or fewer, than the baseline: not this regression
    assert compare_reports(now, now).regressions == []
    assert compare_reports(base, now, max_drop={"miou": 1.0}, max_class_drop=1.0).regressions == []
    # every value counted, the largest first (five, then "...")
    many = _counted(gt * 2, [90, 91, 91, 92, 93, 94, 95, 95, 95, 0, 0, 1, 1, 2, 2, 2])
    lines = compare_reports(many, _counted(gt * 2, gt * 2)).regressions
    assert lines[-1].startswith("9 predicted pixels have an unexpected value now, 0 in the "
                                "baseline (pixels per value now: 95: 3, 91: 2, 90: 1, 92: 1, "
                                "93: 1, ...): ")  # fmt: skip


def test_unexpected_predictions_of_other_test_sets_compare_as_shares() -> None:
    half = _counted([0, 1, 2, 2], [0, 1, 2, 77])  # 1 of 4 pixels
    quarter = _counted([0, 1, 2, 2] * 2, [0, 1, 2, 77, 0, 1, 2, 2])  # 1 of 8
    comp = compare_reports(half, quarter, same_ground_truth=False, max_class_drop=None)
    line = ("1 predicted pixels have an unexpected value now, 1 in the baseline (of 4 and 8 "
            "pixels) (pixels per value now: 77: 1): they are left out of every score, which "
            "cannot show what the model predicted there")  # fmt: skip
    assert comp.regressions == [line]
    assert not compare_reports(quarter, half, same_ground_truth=False).regressions


def test_reports_that_do_not_say_their_unexpected_predictions_still_compare() -> None:
    comp = compare_reports(_report(0.7, 0.9), _report(0.7, 0.9))  # no "pixels": hand-made
    assert comp.unexpected_pred is None
    assert comp.to_dict()["unexpected_pred"] is None
    now = _counted([0, 1, 2, 2], [0, 1, 2, 77])
    base = _counted([0, 1, 2, 2], [0, 1, 2, 2])
    del base["pixels"]["unexpected_pred"]
    assert compare_reports(now, base).unexpected_pred is None
    base["pixels"]["unexpected_pred"] = {"77": "1"}
    with pytest.raises(CheckpointError, match=r"baseline report is damaged: its pixels\."):
        compare_reports(now, base)


def test_class_ground_truth_is_compared_with_the_pixels_left_out() -> None:
    """The classes' ground-truth pixels were not compared at all once a report had unexpected
    predictions: a relabelled test set passed as the same one. The pixels left out are known
    per value, not per class: one ground truth must fit both reports' counts plus them."""
    gt = [0, 0, 1, 1, 2, 2, 2, 2]
    base = _counted(gt, gt)  # gt_pixels [2, 2, 4], nothing left out
    relabelled = [0, 0, 0, 1, 2, 2, 2, 2]  # a pixel of class 1 is class 0 now
    now = _counted(relabelled, [0, 0, 0, 1, 2, 2, 2, 77])  # [3, 1, 3], 1 left out (class 2's)
    assert [c["gt_pixels"] for c in now["classes"]] == [3, 1, 3]
    with pytest.raises(CheckpointError, match=(
        r"different ground truth \(ground-truth pixels of class '0': 3 now, 2 in the baseline, "
        r"which the pixels left out for an unexpected prediction \(1 now, 0 in the baseline\) "
        r"cannot account for\)")):  # fmt: skip
        compare_reports(now, base)
    assert compare_reports(now, base, same_ground_truth=False) is not None
    # the same ground truth, pixels left out of other classes in each: compared (not
    # refused), and the class that lost a pixel to an unexpected value regresses
    a = _counted(gt, [77, 0, 1, 1, 2, 2, 2, 2])  # [1, 2, 4] + 1 (truth: [2, 2, 4])
    b = _counted(gt, [0, 0, 1, 1, 2, 2, 2, 77])  # [2, 2, 3] + 1
    ab, ba = compare_reports(a, b).regressions, compare_reports(b, a).regressions
    assert len(ab) == len(ba) == 1, (ab, ba)
    assert ab[0].startswith("class '0' has 1 ground-truth pixels counted now, 2 in the baseline")
    assert ba[0].startswith("class '2' has 3 ground-truth pixels counted now, 4 in the baseline")
    # every class's difference within the pixels the other report left out, but not all of
    # them at once: 4 classes, 15 pixels, 3 left out in each; a truth with at least
    # max(now, baseline) = [5, 5, 3, 3] pixels of each class would need 16
    import numpy as np

    from segiou import ConfusionMatrix, evaluate

    def four(g: list[int], odd: list[int]) -> dict:
        p = np.array(g, np.uint8)
        p[odd] = 77
        cm = ConfusionMatrix(4, on_unexpected="count").update(np.array([g], np.uint8), p[None])
        return evaluate(cm).to_dict()

    was = four([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3], [0, 4, 8])  # [3, 3, 3, 3] + 3
    now = four([0] * 6 + [1] * 6 + [2, 2, 3], [0, 6, 12])  # [5, 5, 1, 1] + 3
    assert [x["gt_pixels"] for x in was["classes"]] == [3, 3, 3, 3]
    assert [x["gt_pixels"] for x in now["classes"]] == [5, 5, 1, 1]
    with pytest.raises(CheckpointError, match=r"class '0': 5 now, 3 in the baseline, .*\(3 now, "
                                              r"3 in the baseline\)"):  # fmt: skip
        compare_reports(now, was)
    # a report that does not say one class's count: compared class by class, and only when
    # neither left a pixel out
    del now["classes"][3]["gt_pixels"]
    assert compare_reports(now, was) is not None
    del base["classes"][0]["gt_pixels"]
    with pytest.raises(CheckpointError, match=r"class '2': 3 now, 4 in the baseline\)"):
        compare_reports(_counted([0, 0, 0, 1, 1, 2, 2, 2], [0, 0, 0, 1, 1, 2, 2, 2]), base)


def test_a_class_losing_its_pixels_to_unexpected_values_regresses_whatever_the_total() -> None:
    """Only the total of unexpected predictions was compared (3,120 now < 3,240), and only a
    class with no pixel left: class 2, 97.5 % of it predicted as 7, read IoU 1.0 and passed."""
    import json

    import numpy as np

    from segiou import ConfusionMatrix, evaluate

    gt, base, cand = shifted_unexpected_runs()

    def doc(pred: np.ndarray) -> dict:
        cm = ConfusionMatrix(3, on_unexpected="count").update(gt, pred)
        return json.loads(json.dumps(evaluate(cm).to_dict()))

    was, now = doc(base), doc(cand)
    odd_was, odd_now = int((base == 7).sum()), int((cand == 7).sum())
    assert odd_now < odd_was  # (3,120 < 3,240: the total rule says nothing)
    counted_was = int(((gt == 2) & (base != 7)).sum())
    counted_now = int(((gt == 2) & (cand != 7)).sum())
    assert (counted_was, counted_now) == (3200, 80)
    assert now["classes"][2]["iou"] == 1.0
    assert now["summary"]["miou"] > was["summary"]["miou"]
    comp = compare_reports(now, was)
    line = (
        f"class '2' has {counted_now:,} ground-truth pixels counted now, {counted_was:,} in the "
        f"baseline, on the same ground truth: {counted_was - counted_now:,} more of its pixels "
        "are predicted as an unexpected value now, left out of every score, which cannot show "
        "what the model predicted there"
    )
    assert comp.regressions == [line]
    assert comp.unexpected_pred == (odd_was, odd_now)
    # the baseline as the candidate: class 0 lost 3,240 pixels, more in total too
    back = compare_reports(was, now, max_drop={"miou": 1.0}, max_class_drop=1.0).regressions
    zero_was = int(((gt == 0) & (base != 7)).sum())
    assert len(back) == 2, back
    assert back[0].startswith(f"class '0' has {zero_was:,} ground-truth pixels counted now, "
                              f"{int((gt == 0).sum()):,} in the baseline")  # fmt: skip
    assert back[1].startswith(f"{odd_was:,} predicted pixels have an unexpected value now")
    # other ground truth: the class counts say nothing of what was left out; the share rule
    # alone (fewer here)
    assert compare_reports(now, was, same_ground_truth=False).regressions == []


def test_a_preset_name_cannot_carry_other_rules() -> None:
    # Convention("segiou", "all", ...) scored every class under the name "segiou": a report
    # "regressed" from a mere change of averaging rule, or hid a real drop (the review's c1)
    import numpy as np

    from segiou import ConfusionMatrix, evaluate
    from segiou.conventions import PRESETS, Convention, get_convention
    from segiou.errors import UsageError
    from segiou.stats import evaluate_with_intervals

    cm = ConfusionMatrix(4, per_image=True).update(
        np.array([[0, 0, 1, 1], [0, 0, 1, 1]], np.uint8),
        np.array([[0, 0, 1, 2], [0, 0, 1, 1]], np.uint8), key="b")  # fmt: skip
    seg = PRESETS["segiou"]
    for mine, field in ((Convention("segiou", "all", 0.0, "mine"), "mean_over"),
                        (Convention("segiou", "present", 0.0, "mine"), "fill"),
                        (Convention("mmseg", "present", float("nan"), "mine"), "fbeta_from_pr")):  # fmt: skip
        with pytest.raises(UsageError, match=rf"preset's name but not its rules \({field}, "):
            get_convention(mine)
        with pytest.raises(UsageError, match=rf"\({field}, "):
            evaluate(cm, preset=mine)
        with pytest.raises(UsageError, match=rf"\({field}, "):
            evaluate_with_intervals(cm, preset=mine, resamples=10)
    # the preset's rules under other words are the preset's rules; a name of its own is free
    same = Convention("segiou", "present", float("nan"), "my words", stated_rules=("x",))
    assert evaluate(cm, preset=same).miou == evaluate(cm, preset=seg).miou
    assert evaluate(cm, preset=Convention("mine", "all", 0.0, "every class")).miou < 0.6


def _doc(cm: object, conv: object) -> dict[str, object]:
    from segiou import evaluate

    return json.loads(evaluate(cm, preset=conv).to_json())  # type: ignore[arg-type]


def test_compare_compares_every_rule_of_the_convention() -> None:
    import numpy as np

    from segiou import ConfusionMatrix, evaluate

    cm = ConfusionMatrix(4).update(np.array([[0, 0, 1, 1], [0, 0, 1, 1]], np.uint8),
                                   np.array([[0, 0, 1, 2], [0, 0, 1, 1]], np.uint8))  # fmt: skip
    from segiou.conventions import Convention

    base = _doc(cm, "segiou")
    # a report written before the refusal: a custom convention under the preset's name
    old = copy.deepcopy(base)
    old["convention"] |= {"mean_over": "all", "fill": 0.0}  # type: ignore[operator]
    with pytest.raises(CheckpointError, match=r"convention 'segiou' has other rules now than "
                       r"in the baseline \(mean_over, which classes means run over: 'all' now, "
                       r"'present' in the baseline\)"):  # fmt: skip
        compare_reports(old, base)
    old["convention"]["mean_over"] = "present"  # type: ignore[index]
    with pytest.raises(CheckpointError, match=r"\(fill, .*: 0\.0 now, nan in the baseline\)"):
        compare_reports(old, base)
    # a custom name, its rules changed between the runs
    a = _doc(cm, Convention("team", "present", float("nan"), "ours"))
    b = _doc(cm, Convention("team", "all", 0.0, "ours, v2"))
    with pytest.raises(CheckpointError, match=r"convention 'team' has other rules .*mean_over"):
        compare_reports(b, a)
    assert not compare_reports(a, copy.deepcopy(a)).regressed
    # F-beta: from precision and recall (mmseg) or from counts, told by the stated rule
    fb = json.loads(evaluate(cm, preset="mmseg", beta=1.0).to_json())
    tp_rule = copy.deepcopy(fb)
    tp_rule["convention"]["rules"] = [
        r if not r.startswith("F-beta is ") else Convention("x", "present", 0.0, "").rules()[3]
        for r in fb["convention"]["rules"]
    ]
    with pytest.raises(CheckpointError, match=r"\(fbeta_from_pr, .*False now, True in"):
        compare_reports(tp_rule, fb)
    # older reports: rules not stated are the preset's (v1: a name only), or not compared
    # (words of a version that did not state the F-beta rule)
    v1 = _report(0.7, 0.9, "detectron2")
    assert not compare_reports(v1, copy.deepcopy(v1)).regressed
    words = copy.deepcopy(fb)
    words["convention"]["rules"] = [r for r in fb["convention"]["rules"]
                                    if not r.startswith("F-beta is ")]  # fmt: skip
    assert not compare_reports(words, fb).regressed
    assert not compare_reports(tp_rule, words).regressed
