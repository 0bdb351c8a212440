"""Both runs scored on the images they share (segiou.stats.shared_image_reports)."""

from __future__ import annotations

import numpy as np
import pytest

from segiou import ConfusionMatrix, evaluate
from segiou.compare import compare_reports
from segiou.errors import UsageError
from segiou.stats import shared_image_reports


def _runs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    gt = rng.integers(0, 4, (7, 12, 10)).astype(np.uint8)
    gt[:, 0, :3] = 255  # ignored
    gt[2, 1, :2] = 9  # an unexpected ground-truth value
    a, b = gt.copy(), gt.copy()
    a[rng.random(gt.shape) < 0.1] = 1
    b[rng.random(gt.shape) < 0.2] = 2
    b[1, 3, :4] = 77  # an unexpected prediction
    return gt, a, b


def _count(gt: np.ndarray, pred: np.ndarray, rows: range) -> ConfusionMatrix:
    cm = ConfusionMatrix(4, ignore_index=255, on_unexpected="count", per_image=True)
    return cm.update(gt[rows.start : rows.stop], pred[rows.start : rows.stop],
                     names=[f"im{i}" for i in rows])  # fmt: skip


def test_shared_reports_are_the_runs_counted_on_the_shared_images() -> None:
    gt, a, b = _runs()
    base, cur = _count(gt, a, range(5)), _count(gt, b, range(1, 7))  # shared: im1..im4
    got = shared_image_reports(base, cur, preset="cityscapes", beta=1.0)
    assert got.images == {"shared": 4, "baseline_only": 1, "current_only": 2,
                          "baseline_only_names": ["im0"],
                          "current_only_names": ["im5", "im6"]}  # fmt: skip
    for report, pred in ((got.baseline, a), (got.current, b)):
        want = evaluate(_count(gt, pred, range(1, 5)), preset="cityscapes", beta=1.0).to_dict()
        assert report["images"] == 4
        for key in ("summary", "classes", "pixels", "convention", "counting", "labels"):
            assert report[key] == want[key], key
    comp = compare_reports(got.current, got.baseline)  # one ground truth: no refusal
    assert comp.unexpected_pred == (0, 4)


def test_shared_reports_refuse_another_ground_truth_of_a_shared_image() -> None:
    gt, a, b = _runs()
    edited = gt.copy()
    edited[2, 5, 5] = (edited[2, 5, 5] + 1) % 4
    base = _count(gt, a, range(5))
    with pytest.raises(UsageError, match=r"1 shared image\(s\) have different ground truth"):
        shared_image_reports(base, _count(edited, b, range(6)))
    with pytest.raises(UsageError, match="share no image name"):
        shared_image_reports(base, _count(gt, b, range(5, 7)))
    flat = ConfusionMatrix(4, ignore_index=255, on_unexpected="count").update(gt, b, key="x")
    with pytest.raises(UsageError, match="per-image counts"):
        shared_image_reports(base, flat)


def test_image_set_change_by_name_and_ground_truth_per_image() -> None:
    from segiou.stats import image_set_change

    gt, a, b = _runs()
    base = _count(gt, a, range(5))
    assert image_set_change(base, _count(gt, b, range(5))) is None  # same images, other model
    change = image_set_change(base, _count(gt, b, range(1, 7)))
    assert change is not None
    assert (change.shared, change.baseline_only, change.current_only) == (4, 1, 2)
    assert (
        change.detail
        == "image names: 1 only in the baseline ('im0'), 2 only now ('im5', 'im6'), 4 shared"
    )
    assert not change.edited
    swapped = gt.copy()
    swapped[[0, 1]] = gt[[1, 0]]  # the same totals, other images under the names im0, im1
    change = image_set_change(base, _count(swapped, b, range(5)))
    assert change is not None
    assert change.edited
    assert change.detail.startswith("ground truth of 2 image(s) of the same name, e.g. 'im0': ")
    keyless = ConfusionMatrix(4, ignore_index=255, on_unexpected="count", per_image=True)
    for i in range(5):  # labelled by their row (#0, #1, ...): not paired by name
        keyless.update(gt[i : i + 1], b[i : i + 1])
    assert image_set_change(base, keyless) is None
