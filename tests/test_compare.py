"""Comparing a result report with a baseline (segiou.compare)."""

from __future__ import annotations

import pytest

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
    # the class counts are not compared then, the totals still are
    odd_gt = gt.copy()
    odd_gt[0, 0, 0] = 9
    base_odd = json.loads(json.dumps(doc(odd_gt, pred, on_unexpected="count")))
    assert not compare_reports(doc(odd_gt, gt, on_unexpected="count"), base_odd).regressed
    odd_pred = pred.copy()
    odd_pred[1, 0, 0] = 7
    assert compare_reports(doc(gt, odd_pred, on_unexpected="count"), base) is not None
    with pytest.raises(CheckpointError, match="images: 2 now"):
        compare_reports(doc(gt[:2], odd_pred[:2], on_unexpected="count"), base)
