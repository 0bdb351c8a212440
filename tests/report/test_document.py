"""The report's view of a result document and of a state, against the numpy oracle."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st
from report_data import make_state, v2_document

from segiou import ConfusionMatrix, evaluate
from segiou.errors import CheckpointError, ResultDocumentError, SegiouError, UsageError
from segiou.report import Report, ResultDoc, StateView

DATA = Path(__file__).resolve().parents[1] / "data"


def _reference_view(gt: np.ndarray, pred: np.ndarray, k: int, names: list[str], top: int):  # type: ignore[no-untyped-def]
    """Pairs, per-image mIoU and worst images, the slow way."""
    whole = reference.confusion(gt, pred, k, ignore=[255])
    full = np.concatenate([whole.counts, whole.void[:, None]], axis=1)
    cells = []
    for g in range(k):
        for p in range(k + 1):
            if p != g and full[g, p] > 0:
                pred_name = names[p] if p < k else "(void)"
                cells.append(
                    (-int(full[g, p]), g, p, names[g], pred_name, full[g, p] / full[g].sum())
                )
    pairs = [(gn, pn, -neg, share) for neg, _, _, gn, pn, share in sorted(cells)[:top]]
    per_image = reference.confusion_per_image(gt, pred, k, ignore=[255])
    miou, weakest = [], []
    for c in per_image:
        scores = reference.iou(c.counts, c.void)
        miou.append(reference.mean_present(scores, c.counts, c.void))
        present = [(s, j) for j, s in enumerate(scores) if not math.isnan(s)]
        weakest.append(min(present) if present else (math.nan, -1))
    return pairs, miou, weakest


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_state_view_matches_the_oracle(seed: int) -> None:
    names = [f"img{i}" for i in range(7)]
    cm, gt, pred = make_state(5, n=7, seed=seed, names=names)
    top = 6
    view = StateView.from_state(cm, top=top)
    pairs, miou, weakest = _reference_view(gt, pred, 5, list(cm.spec.classes), top)
    assert [(p.gt, p.pred, p.pixels) for p in view.pairs] == [p[:3] for p in pairs]
    np.testing.assert_allclose([p.share for p in view.pairs], [p[3] for p in pairs])
    np.testing.assert_allclose(view.image_miou, miou)
    order = sorted(range(7), key=lambda i: (miou[i], i))[:top]
    assert [w.name for w in view.worst] == [names[i] for i in order]
    assert [w.miou for w in view.worst] == pytest.approx([miou[i] for i in order])
    assert [w.weakest for w in view.worst] == [cm.spec.classes[weakest[i][1]] for i in order]
    assert [w.weakest_iou for w in view.worst] == pytest.approx([weakest[i][0] for i in order])
    assert [w.ignored for w in view.worst] == [4] * top  # the 2 x 2 ignored corner
    # rows: the share of each class's ground-truth pixels, void included
    whole = reference.confusion(gt, pred, 5, ignore=[255])
    full = np.concatenate([whole.counts, whole.void[:, None]], axis=1)
    np.testing.assert_allclose(view.row_share, full / full.sum(axis=1, keepdims=True))


@settings(max_examples=25)
@given(k=st.integers(1, 6), n=st.integers(1, 5), seed=st.integers(0, 2**16), top=st.integers(1, 40))
def test_state_view_properties(k: int, n: int, seed: int, top: int) -> None:
    cm, _, _ = make_state(k, n=n, shape=(5, 7), seed=seed)
    view = StateView.from_state(cm, top=top)
    assert len(view.pairs) <= top
    assert all(p.gt != p.pred and p.pixels > 0 for p in view.pairs)
    assert [p.pixels for p in view.pairs] == sorted((p.pixels for p in view.pairs), reverse=True)
    rows = view.row_share[~np.isnan(view.row_share).all(axis=1)]
    np.testing.assert_allclose(rows.sum(axis=1), 1.0)
    assert view.counts.sum() == cm.counts.sum() + cm.void.sum()
    ok = view.image_miou[~np.isnan(view.image_miou)]
    assert ((ok >= 0) & (ok <= 1)).all()
    assert len(view.worst) == min(top, ok.size)


def test_a_state_report_carries_the_evaluated_document() -> None:
    cm, _, _ = make_state(4, seed=3)
    report = Report.from_state(cm, preset="detectron2", beta=2.0)
    assert report.doc.data == evaluate(cm, preset="detectron2", beta=2.0).to_dict()
    assert report.doc.preset == "detectron2"
    assert report.doc.has_fbeta
    assert report.doc.intervals is None
    assert report.doc.slices is None
    assert report.state is not None
    assert report.missing_parts() == []


def test_version_2_document_is_read_field_by_field(hostile_v2: dict[str, Any]) -> None:
    doc = ResultDoc.read(hostile_v2)
    ivs = doc.intervals
    assert ivs is not None
    assert ivs.level_label == "95% CI"
    assert "1,000 resamples" in ivs.describe()
    assert "seed 0" in ivs.describe()
    for row, raw in zip(doc.classes, hostile_v2["intervals"]["classes"]["iou"], strict=True):
        assert row.iou_ci == (None if raw is None else tuple(raw))
    assert doc.categories is not None
    assert [c.iou_ci for c in doc.categories] == [
        tuple(v) for v in hostile_v2["intervals"]["categories"]["iou"]
    ]
    assert {k: iv for k, _, _, iv in doc.summary_rows()} == {
        k: None if v is None else tuple(v) for k, v in hostile_v2["intervals"]["summary"].items()
    }
    sl = doc.slices
    assert sl is not None
    assert sl.min_images == 30
    ((col, values),) = sl.columns.items()
    assert col == "city <x>"
    assert [(v.value, v.images, v.small) for v in values] == [("aachen", 412, False),
                                                              ("<tiny>", 3, True)]  # fmt: skip
    assert values[0].intervals is not None
    assert values[0].intervals.summary["miou"] == (0.58, 0.64)
    assert values[1].iou_of(doc.classes[0].name) is None
    assert sl.images_without_metadata == ["<no meta>", "x"]
    assert sl.metadata_without_image == ["ghost|row"]


def test_version_1_and_2_documents_and_unknown_fields(hostile_state: ConfusionMatrix) -> None:
    v1 = evaluate(hostile_state).to_dict() | {"version": 1}  # as segiou 0.1 wrote it
    del v1["intervals"], v1["slices"]
    assert ResultDoc.read(v1).version == 1
    v2 = v2_document(v1, slices=False) | {"future_field": {"anything": 1}}
    doc = ResultDoc.read(v2)
    assert doc.version == 2
    assert doc.slices is None
    assert doc.miou == v1["summary"]["miou"]


def _broken(doc: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    out = json.loads(json.dumps(doc))
    *parents, last = path.split(".")
    node: Any = out
    for p in parents:
        node = node[int(p)] if p.isdigit() else node[p]
    node[int(last) if last.isdigit() else last] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        ("format", "segiou.confusion", "field 'format'"),
        ("version", 4, "field 'version' is 4, expected one of [1, 2, 3]"),
        ("version", True, "field 'version'"),
        ("summary.miou", "0.5", "field 'summary.miou' is \"0.5\", expected a finite number"),
        ("classes.1.tp", -1, "field 'classes[1].tp' is -1, expected an integer >= 0"),
        ("classes.0.name", 7, "field 'classes[0].name' is 7, expected a string"),
        ("classes", {}, "field 'classes' is {}, expected a list"),
        ("pixels", None, "field 'pixels' is null, expected an object"),
        ("intervals.classes.iou", [[0.1, 0.2]], "field 'intervals.classes.iou'"),
        ("intervals.summary.miou", [0.3, 0.1], "expected [lo, hi] with lo <= hi"),
        ("intervals.level", 95, "field 'intervals.level' is 95, expected a number between 0 and 1"),
        (
            "slices.columns.city <x>.aachen.small",
            "no",
            "field 'slices.columns.city <x>.aachen.small'",
        ),
        ("slices.unmatched.metadata_without_image", "ghost", "expected a list"),
    ],
)
def test_malformed_documents_are_refused_naming_the_field(
    hostile_v2: dict[str, Any], path: str, value: object, needle: str
) -> None:
    with pytest.raises(ResultDocumentError) as info:
        ResultDoc.read(_broken(hostile_v2, path, value), where="r.json")
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith("r.json: ")
    assert needle in str(info.value)
    assert "segiou eval --json" in str(info.value)  # what to pass instead


def test_a_state_from_another_evaluation_is_refused() -> None:
    a, _, _ = make_state(4, seed=1)
    b, _, _ = make_state(4, seed=2)
    with pytest.raises(UsageError, match="other classes or counts than the result"):
        Report.from_result(evaluate(a), cm=b)
    with pytest.raises(UsageError, match="top=0"):
        Report.from_result(evaluate(a), cm=a, top=0)


@pytest.mark.parametrize("name", ["confusion_v1.json", "confusion_v1_per_image.json",
                                  "confusion_v2.json", "confusion_v2_per_image.json"])  # fmt: skip
def test_golden_states_of_every_version_make_reports(name: str) -> None:
    report = Report.load(DATA / name, preset="cityscapes")
    cm = ConfusionMatrix.load(DATA / name)
    assert report.doc.data == evaluate(cm, preset="cityscapes").to_dict()
    assert report.state is not None
    if cm.per_image:
        assert report.state.image_miou.size == cm.n_images
        # a version-1 state's rows cannot be resampled: it says so, not "run with --bootstrap"
        why = "its per-image rows are of an old format (version 1: no per-image confusion entries)"
        old = [f"no intervals: they resample the state's images, and {why}"]
        assert report.missing_parts() == (old if "v1" in name else [])
    else:
        assert "per_image=True" in report.missing_parts()[0]


def test_load_tells_states_from_documents(tmp_path: Path) -> None:
    cm, _, _ = make_state(3)
    cm.save(tmp_path / "s.json")
    (tmp_path / "r.json").write_text(evaluate(cm).to_json())
    from_state = Report.load(tmp_path / "s.json")
    from_doc = Report.load(tmp_path / "r.json")
    assert from_state.doc.data == from_doc.doc.data
    assert from_doc.state is None
    assert "need the saved state" in from_doc.missing_parts()[0]
    assert "preset 'segiou'" in from_state.source
    with pytest.raises(UsageError, match="--preset applies to a saved state"):
        Report.load(tmp_path / "r.json", preset="mmseg")
    with pytest.raises(UsageError, match="--beta applies to a saved state"):
        Report.load(tmp_path / "r.json", beta=1.0)
    with pytest.raises(UsageError, match="--bootstrap applies to a saved state"):
        Report.load(tmp_path / "r.json", bootstrap=500)
    with pytest.raises(UsageError, match="--bootstrap-seed applies to a saved state"):
        Report.load(tmp_path / "r.json", seed=3)


@pytest.mark.parametrize(
    ("per_image", "images", "why"),
    [(False, 2, "it has no per-image rows"), (True, 0, "it counted no image")],
)
def test_a_state_that_cannot_give_intervals_says_why(tmp_path: Path, per_image: bool, images: int,
                                                     why: str) -> None:  # fmt: skip
    from segiou.report import render_markdown, render_text

    cm = ConfusionMatrix(3, per_image=per_image)
    for i in range(images):
        cm.update(
            np.zeros((4, 4), np.uint8),
            np.zeros((4, 4), np.uint8),
            names=[f"i{i}"] if per_image else None,
        )
    cm.save(tmp_path / "s.json")
    report = Report.load(tmp_path / "s.json", bootstrap=200)
    assert report.doc.intervals is None
    for out in (render_text(report), render_markdown(report)):
        assert "run with --bootstrap" not in out
        assert f"no intervals: they resample the state's images, and {why}" in out
    # --bootstrap 0 too: "run with --bootstrap" would not help such a state
    quiet = render_text(Report.load(tmp_path / "s.json", bootstrap=0))
    assert "run with --bootstrap" not in quiet
    assert f"no intervals: they resample the state's images, and {why}" in quiet


@pytest.mark.parametrize(
    ("content", "error", "needle"),
    [
        (None, ResultDocumentError, "does not exist"),
        ("{not json", ResultDocumentError, "is not readable JSON"),
        ("[1, 2]", ResultDocumentError, "has no format field"),
        ('{"format": "other"}', ResultDocumentError, "has format 'other'"),
        ('{"format": "segiou.confusion", "version": 9}', CheckpointError, "version"),
    ],
)
def test_load_refuses_what_is_no_input(tmp_path: Path, content: str | None,
                                       error: type[SegiouError], needle: str) -> None:  # fmt: skip
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(error, match=needle):
        Report.load(path)


def test_a_legacy_state_says_why_it_has_no_intervals() -> None:
    from segiou.report import render_text

    report = Report.load(DATA / "confusion_v1_per_image.json", bootstrap=200)
    assert report.doc.intervals is None
    assert "per-image rows are of an old format" in render_text(report)
