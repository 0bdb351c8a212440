"""How the reports show numbers: never a perfect (or null) score that is not one, intervals
that read unambiguously, and exact values where a file holds data."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from segiou import ConfusionMatrix, LabelSpec, evaluate
from segiou.report import (
    Report,
    render_analysis,
    render_markdown,
    render_per_image_csv,
    render_text,
)
from segiou.report.document import fmt_ci, fmt_pct


@pytest.mark.parametrize(
    ("x", "digits", "shown"),
    [
        (1.0, 2, "100.00"), (0.0, 2, "0.00"), (-1.0, 2, "-100.00"), (0.5, 2, "50.00"),
        (0.99996, 2, ">99.99"), (0.99994, 2, "99.99"), (4e-7, 2, "<0.01"), (5e-5, 2, "0.01"),
        (-4e-7, 2, ">-0.01"), (-0.99996, 2, "<-99.99"),
        (0.9996, 1, ">99.9"), (0.0004, 1, "<0.1"), (0.996, 0, ">99"), (0.004, 0, "<1"),
    ],
)  # fmt: skip
def test_a_score_that_is_not_exact_never_shows_as_exact(x: float, digits: int, shown: str) -> None:
    assert fmt_pct(x, digits) == shown


def test_intervals_read_unambiguously_when_negative() -> None:
    assert fmt_ci((-0.298, -0.2055)) == "[-29.80, -20.55]"
    assert fmt_ci((-0.1089, 0.0095)) == "[-10.89, 0.95]"
    assert fmt_ci((0.101, 0.145)) == "[10.10, 14.50]"


def _near_perfect() -> ConfusionMatrix:
    """Two classes with IoU 0.99996 (4 false negatives), one image."""
    cm = ConfusionMatrix(LabelSpec.from_num_classes(2, ignore=[255]), per_image=True)
    gt = np.zeros((1, 400, 500), np.uint8)
    gt[0, 200:] = 1
    pred = gt.copy()
    pred[0, 0, :4] = 1
    cm.update(gt, pred, names=["only"])
    return cm


def test_near_perfect_scores_are_not_shown_as_perfect() -> None:
    cm = _near_perfect()
    result = evaluate(cm)
    assert 0.99 < result.miou < 1
    report = Report.from_state(cm)
    text = render_text(report)
    md = render_markdown(report)
    analysis = render_analysis(cm)
    # class 0: IoU, Dice and recall below 1 (4 false negatives), precision exactly 1
    assert "| 0 | 0 | >99.99 | >99.99 | 100.00 | >99.99 | 99,996 | 0 | 4 | 0 |" in md
    assert "| mIoU | >99.99 |" in md
    row0 = next(line.split() for line in text.splitlines() if line.split()[:2] == ["0", "0"])
    assert row0[2:6] == [">99.99", ">99.99", "100.00", ">99.99"]
    assert next(line for line in text.splitlines() if "mIoU" in line).split()[-1] == ">99.99"
    assert ">99.9" in analysis
    assert "100.0" not in analysis


def test_near_perfect_html_shows_a_bound_and_keeps_the_exact_value() -> None:
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    from segiou.report import render_html

    cm = _near_perfect()
    html = render_html(Report.from_state(cm), plots=False)
    assert f'data-value="{evaluate(cm).miou!r}">&gt;99.99</span>' in html


def test_heatmap_cells_never_round_to_a_perfect_share() -> None:
    pytest.importorskip("matplotlib")
    from segiou.report.plots import _confusion

    fig = _confusion(Report.from_state(_near_perfect()))
    assert fig is not None
    cells = [t.get_text() for t in fig.axes[0].texts]
    assert cells == [">99", "100"]  # class 0 keeps 99.998% of its pixels, class 1 all


def test_the_text_report_says_it_shows_percent() -> None:
    text = render_text(evaluate(_near_perfect()))
    first = text.splitlines()[0]
    assert "percent" in first
    assert first.endswith("(see the rules at the end).")  # one line, not wrapped at 100


def test_out_of_range_scores_show_as_they_are() -> None:
    # a hand-edited document's 1.5 showed as ">99.99": "almost perfect"
    assert (fmt_pct(1.5), fmt_pct(-1.5), fmt_pct(1.0), fmt_pct(-1.0)) == (
        "150.00", "-150.00", "100.00", "-100.00")  # fmt: skip
    assert (fmt_pct(0.99999), fmt_pct(-0.99999)) == (">99.99", "<-99.99")


def test_the_per_image_csv_writes_values_that_read_back_exactly() -> None:
    cm = ConfusionMatrix(LabelSpec.from_num_classes(2, ignore=[255]), per_image=True)
    gt = np.zeros((1, 1000, 2500), np.uint8)
    gt[0, 500:] = 1
    pred = gt.copy()
    pred[0, 0, 0] = 1  # IoU of class 0: 1 - 1/1,250,000
    cm.update(gt, pred, names=["one"])
    (row,) = csv.DictReader(io.StringIO(render_per_image_csv(cm)))
    iou = cm.images.iou()[0]
    assert float(row["iou:0"]) == iou[0] < 1
    assert float(row["iou:1"]) == iou[1]
    assert float(row["miou"]) == float(iou.mean())
    assert "e" not in row["iou:0"] + row["iou:1"] + row["miou"]  # no exponent


def test_the_per_image_csv_writes_small_values_without_an_exponent() -> None:
    # repr wrote 1.25e-05, which sorts after 0.25 as text (sort -n, a spreadsheet's text column)
    cm = ConfusionMatrix(2, per_image=True)
    gt = np.ones((1, 200, 200), np.uint8)
    gt[0, 0, 0] = 0
    pred = np.zeros_like(gt)  # class 0: 1 TP, 39,999 FP: IoU 1 / 40,000
    cm.update(gt, pred, names=["a"])
    (row,) = csv.DictReader(io.StringIO(render_per_image_csv(cm)))
    assert row["iou:0"] == "0.000025"
    assert float(row["iou:0"]) == cm.images.iou()[0][0]


def test_the_text_report_states_the_rules_the_markdown_report_states() -> None:
    from report_data import make_state

    cm = make_state(3)[0]
    report = Report.from_state(cm, preset="mmseg")
    text = render_text(report)
    conv = report.doc.convention
    assert conv["description"] in text
    for rule in [*conv["rules"], *conv["differences"]]:
        assert rule in text
    for name, rule in report.doc.counting_rules():  # id spaces, void rule, unexpected policy
        assert f"{name}: {rule}" in text
    assert {"id spaces", "void", "unexpected values"} <= {n for n, _ in report.doc.counting_rules()}


def test_the_analysis_lists_classes_that_are_only_predicted() -> None:
    cm = ConfusionMatrix(LabelSpec("t", ["road", "car", "bus"], ignore=[255]))
    gt = np.zeros((1, 10, 10), np.uint8)
    gt[0, 5:] = 1
    pred = gt.copy()
    pred[0, 0, :4] = 2  # bus predicted on 4 pixels, never in the ground truth
    cm.update(gt, pred)
    assert evaluate(cm).per_class["iou"][2] == 0
    out = render_analysis(cm, top=3)
    assert "3 weakest classes" in out
    bus = next(line for line in out.splitlines() if line.split()[:1] == ["bus"])
    assert bus.split()[1] == "0.00"
    assert "predicted on 4 px but absent from the ground truth" in bus


def test_a_class_named_void_is_told_from_void_predictions() -> None:
    pytest.importorskip("matplotlib")
    from segiou.report.plots import _confusion

    cm = ConfusionMatrix(LabelSpec("t", ["road", "void"], ignore=[255]))
    gt = np.zeros((1, 6, 5), np.uint8)
    pred = gt.copy()
    pred[0, 0, :5] = 1  # road predicted as the class 'void'
    pred[0, 1, :3] = 255  # road predicted as no class (void)
    cm.update(gt, pred)
    report = Report.from_state(cm)
    assert report.state is not None
    assert [(p.gt, p.pred, p.pixels) for p in report.state.pairs] == [
        ("road", "void", 5), ("road", "(void)", 3)]  # fmt: skip
    md = render_markdown(report)
    assert "| road | void | 5 |" in md
    assert "| road | \\(void\\) | 3 |" in md
    assert "void 16.7%, (void) 10.0%" in render_analysis(cm)
    fig = _confusion(report)
    assert fig is not None
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["road", "void", "(void)"]
