"""Each image is scored under the result's convention wherever a report or a CSV shows it, and
both CSVs say which convention (and interval level) their numbers follow, on every row."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from segiou import PRESETS, ConfusionMatrix, Result, evaluate
from segiou.errors import ResultDocumentError
from segiou.metrics import mean as metrics_mean
from segiou.metrics import tp_fp_fn
from segiou.report import (
    Report,
    render_analysis,
    render_csv,
    render_html,
    render_markdown,
    render_per_image_csv,
    render_text,
)
from segiou.report.markdown import md_escape
from segiou.results import BOUNDARY_AVERAGING, INSTANCE_AVERAGING, image_scores


def _images(k: int = 4) -> ConfusionMatrix:
    """Three images of ``k`` classes: class 2 only predicted (in "a" and "c"), class 3 in none
    of "a" and "b", classes from 4 in none."""
    cm = ConfusionMatrix(k, ignore_index=255, per_image=True)
    gt = np.array([[[0, 0, 1, 1]], [[0, 1, 1, 1]], [[3, 3, 1, 0]]], np.uint8)
    pred = np.array([[[0, 2, 1, 1]], [[0, 0, 1, 1]], [[3, 2, 1, 255]]], np.uint8)
    cm.update(gt, pred, names=["a", "b", "c"])
    return cm


def _cell(x: str) -> float:
    return math.nan if x == "" else float(x)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_each_images_row_is_what_evaluate_says_of_that_image_alone(preset: str) -> None:
    # the CSV averaged the classes present in each image, whatever the preset: for image "a"
    # it said mIoU 0.5 and class 2 IoU 0.0 where detectron2 scores 0.75 and class 2 undefined
    cm = _images()
    rows = list(csv.DictReader(io.StringIO(render_per_image_csv(cm, preset=preset))))
    t = cm.images
    assert [r["image"] for r in rows] == ["a", "b", "c"]
    for i, row in enumerate(rows):
        counts, void = t.confusion(i)
        alone = evaluate(counts, void=void, preset=preset)
        assert row["preset"] == preset
        np.testing.assert_equal(_cell(row["miou"]), alone.miou)
        np.testing.assert_equal([_cell(row[f"iou:{c}"]) for c in range(4)],
                                alone.per_class["iou"])  # fmt: skip
    iou, miou = image_scores(cm, preset=preset)
    np.testing.assert_equal(miou, [_cell(r["miou"]) for r in rows])
    assert iou.shape == (3, 4)


def test_the_one_image_of_the_review_reads_as_its_json() -> None:
    cm = ConfusionMatrix(3, ignore_index=255, per_image=True)
    cm.update(np.array([[[0, 0, 1, 1]]], np.uint8), np.array([[[0, 2, 1, 1]]], np.uint8),
              names=["img"])  # fmt: skip
    result = evaluate(cm, preset="detectron2")
    (row,) = csv.DictReader(io.StringIO(render_per_image_csv(cm, preset=result.convention)))
    assert (float(row["miou"]), row["iou:2"], row["preset"]) == (0.75, "", "detectron2")
    assert result.miou == 0.75


def test_convention_mean_is_metrics_mean() -> None:
    # one rule for means: the result's (Convention.mean) is metrics.mean with over=mean_over
    rng = np.random.default_rng(3)
    for _ in range(50):
        cm = rng.integers(0, 3, size=(6, 6)) * (rng.random((6, 6)) < 0.4)
        void = rng.integers(0, 2, size=6)
        tp, fp, fn = tp_fp_fn(cm, void=void)
        scores = np.divide(tp, tp + fp, out=np.full(6, np.nan), where=(tp + fp) > 0)
        for conv in PRESETS.values():
            np.testing.assert_equal(conv.mean(scores, tp, fp, fn),
                                    metrics_mean(scores, cm, void=void, over=conv.mean_over))  # fmt: skip


def test_the_per_class_csv_says_its_preset_and_interval_level_on_every_row() -> None:
    from segiou.stats import evaluate_with_intervals

    cm = _images()
    plain = list(csv.DictReader(io.StringIO(render_csv(Report.from_state(cm,
                                                                         preset="detectron2")))))  # fmt: skip
    assert {(r["preset"], r["level"]) for r in plain} == {("detectron2", "")}
    assert list(plain[0])[-2:] == ["preset", "level"]  # last: the columns before stay put
    result = evaluate_with_intervals(cm, preset="torchmetrics", resamples=50)
    rows = list(csv.DictReader(io.StringIO(render_csv(Report.from_result(result)))))
    assert {(r["preset"], r["level"]) for r in rows} == {("torchmetrics", "0.95")}
    assert len(rows) == 4


@pytest.mark.parametrize("preset", ["detectron2", "sklearn_all_labels"])
def test_worst_images_and_histogram_follow_the_preset(preset: str) -> None:
    cm = _images()
    report = Report.from_result(evaluate(cm, preset=preset), cm=cm)
    state = report.state
    assert state is not None
    _, miou = image_scores(cm, preset=preset)
    np.testing.assert_equal(state.image_miou, miou)
    assert sorted(w.miou for w in state.worst) == sorted(miou.tolist())
    rule = PRESETS[preset].mean_over
    words = {"gt": "the classes with ground-truth pixels in it", "all": "every class"}[rule]
    said = f"An image's mIoU follows preset {preset!r}: it averages {words}"
    text, md = render_text(report), render_markdown(report)
    assert said in text
    assert md_escape(said) in md
    assert "averages the classes present in it" not in text + md
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    html = render_html(report, plots=False)
    assert f"An image&#39;s mIoU follows preset &#39;{preset}&#39;: it averages {words}" in html
    # a document read back (not the Result) gives the same per-image scores
    again = Report.from_result(evaluate(cm, preset=preset).to_dict(), cm=cm)
    assert again.state is not None
    np.testing.assert_equal(again.state.image_miou, miou)


def test_detectron2_worst_image_weakest_class_is_one_it_averages() -> None:
    cm = _images()
    state = Report.from_state(cm, preset="detectron2").state
    assert state is not None
    a = next(w for w in state.worst if w.name == "a")
    assert (a.miou, a.weakest, a.weakest_iou) == (0.75, "0", 0.5)  # not class 2 (only predicted)


def test_the_error_analysis_ranks_the_classes_the_preset_scores() -> None:
    cm = _images(5)
    d2 = render_analysis(cm, preset="detectron2")
    assert "3 weakest classes (preset 'detectron2')" in d2
    assert "predicted on 2 px" not in d2  # class 2, only predicted: detectron2 leaves it out
    assert "predicted on 2 px" in render_analysis(cm)  # segiou scores it 0
    # torchmetrics reports class 4 (in neither mask) as 0: still not a "weakest class"
    assert "4 weakest classes (preset 'torchmetrics')" in render_analysis(cm, preset="torchmetrics")


def _boundary_and_instances(tmp_path: Path) -> ConfusionMatrix:
    """Class 2 only predicted, class 3 in neither mask; car instances (iIoU)."""
    spec = {"name": "mini", "classes": ["bg", "car", "x", "y"], "ignore": [255],
            "instance_sizes": {"car": 10}}  # fmt: skip
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(spec))
    gt = np.zeros((1, 8, 8), np.uint8)
    gt[0, 2:6, 2:6] = 1
    pred = gt.copy()
    pred[0, 0:2, 6:8] = 2
    inst = np.where(gt == 1, 1001, 0).astype(np.int32)
    cm = ConfusionMatrix(str(path), boundary="1px", instances=True)
    return cm.update(gt, pred, key="a", instances=inst)


def test_boundary_and_iiou_echo_their_own_averaging_rule(tmp_path: Path) -> None:
    # boundary.miou averaged class 2 (only predicted) under detectron2, whose stated rule
    # leaves such a class out: the document stated a rule its boundary mIoU does not follow
    cm = _boundary_and_instances(tmp_path)
    result = evaluate(cm, preset="detectron2")
    doc = result.to_dict()
    assert np.isnan(result.per_class["iou"][2])  # mask IoU: detectron2 leaves class 2 out
    assert doc["boundary"]["classes"][2]["iou"] == 0.0  # Boundary IoU: its own rule scores it
    assert doc["boundary"]["averaging"] == BOUNDARY_AVERAGING
    assert doc["instances"]["averaging"] == INSTANCE_AVERAGING
    for words in (BOUNDARY_AVERAGING, INSTANCE_AVERAGING):
        assert "the preset's averaging (mean_over) and fill apply to mask IoU only" in words
    again = Result.from_dict(json.loads(result.to_json()))
    assert again.to_dict() == doc
    said = "averaging rule (its own; preset 'detectron2' does not apply): "
    text = render_text(result)
    md = render_markdown(Report.from_result(result))
    for words in (BOUNDARY_AVERAGING, INSTANCE_AVERAGING):
        assert said + words in text
        assert md_escape(said + words) in md
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    html = render_html(Report.from_result(result), plots=False)
    from markupsafe import escape

    assert str(escape(said + BOUNDARY_AVERAGING)) in html


def test_a_document_without_the_averaging_field_still_reads_and_states_the_rule(
    tmp_path: Path,
) -> None:
    doc = evaluate(_boundary_and_instances(tmp_path), preset="torchmetrics").to_dict()
    del doc["boundary"]["averaging"], doc["instances"]["averaging"]  # written before the echo
    assert Result.from_dict(doc).boundary["averaging"] == BOUNDARY_AVERAGING  # type: ignore[index]
    assert BOUNDARY_AVERAGING in render_text(doc)
    doc["boundary"]["averaging"] = 3
    with pytest.raises(ResultDocumentError, match=r"boundary\.averaging is int"):
        render_text(doc)
