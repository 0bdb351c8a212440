"""The comparison gate (segiou.stats.compare_states, ``segiou compare``).

A candidate that truly regresses one class fails (exit 1, that class significantly worse); a
candidate whose errors are another draw of the same noise passes (exit 0, p-value well above
alpha); a run compared with itself shows no difference at all. Different label specs, image
sets, ground truth or a report without per-image counts are refused (exit 2).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from support import shifted_unexpected_runs

from segiou import ConfusionMatrix, evaluate
from segiou.cli import main
from segiou.errors import IncompatibleMatrixError, UsageError
from segiou.stats import compare_states, holm, two_sided_p
from segiou.testing.synthetic import cityscapes_like

N = 80
CAR, TRUCK = 13, 14


def _gt() -> np.ndarray:
    gt, _ = cityscapes_like(N, 64, 128, seed=21, error_rate=0.0, void_rate=0.0)
    return gt


def _noisy(gt: np.ndarray, seed: int) -> np.ndarray:
    """Predictions with errors in random boxes (the same distribution for every seed)."""
    rng = np.random.default_rng(seed)
    pred = gt.copy()
    for i in range(len(gt)):
        for _ in range(4):
            y, x = rng.integers(0, 48), rng.integers(0, 100)
            h, w = rng.integers(4, 16), rng.integers(8, 28)
            box = pred[i, y : y + h, x : x + w]
            box[box != 255] = (box[box != 255] + 1) % 19
    pred[gt == 255] = 0  # predictions at ignored pixels are never counted
    return pred


def _state(gt: np.ndarray, pred: np.ndarray, names: list[str] | None = None) -> ConfusionMatrix:
    cm = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
    return cm.update(gt, pred, names=names or [f"im{i:03d}" for i in range(len(gt))])


@pytest.fixture(scope="module")
def runs() -> dict[str, ConfusionMatrix]:
    gt = _gt()
    regressed = _noisy(gt, 2)
    car = (gt == CAR) & (np.arange(128) < 64)  # car pixels in the left half: now "truck"
    regressed[car] = TRUCK
    return {
        "baseline": _state(gt, _noisy(gt, 1)),
        "noise": _state(gt, _noisy(gt, 2)),
        "regressed": _state(gt, regressed),
    }


def test_a_true_regression_of_one_class_fails(runs) -> None:
    comp = compare_states(runs["baseline"], runs["regressed"])
    doc = comp.to_dict()
    assert comp.failed
    car = doc["classes"][CAR]
    assert car["name"] == "car"
    assert car["change"] == "worse"
    assert car["fails"]
    assert car["p_adjusted"] < 0.05
    assert car["interval"][1] < 0  # the whole interval of the difference is below 0
    assert any("'car'" in r for r in comp.reasons)
    assert doc["classes"][TRUCK]["change"] == "worse"  # its new false positives
    # nothing else is called significantly worse
    assert {c["name"] for c in doc["classes"] if c["change"] == "worse"} == {"car", "truck"}


def test_noise_alone_passes_with_a_large_p_value(runs) -> None:
    comp = compare_states(runs["baseline"], runs["noise"])
    doc = comp.to_dict()
    assert not comp.failed
    assert doc["miou"]["p_value"] > 0.3  # well above alpha: no evidence of a difference
    assert doc["miou"]["interval"][0] < 0 < doc["miou"]["interval"][1]
    assert not any(c["change"] in ("worse", "better") for c in doc["classes"])


def test_noise_candidates_rarely_fail() -> None:
    """Under "no difference" the p-value is uniform: one fixed seed is one draw. Over several
    noise candidates none fails (Holm keeps the chance of any false class below alpha)."""
    gt = _gt()
    base = _state(gt, _noisy(gt, 1))
    p_values = []
    for seed in range(10, 16):
        comp = compare_states(base, _state(gt, _noisy(gt, seed)), resamples=500)
        assert not comp.failed, comp.reasons
        p_values.append(comp.to_dict()["miou"]["p_value"])
    assert max(p_values) > 0.2  # not all small: no systematic difference


def test_a_run_against_itself_shows_nothing(runs) -> None:
    copy = ConfusionMatrix.from_dict(runs["baseline"].to_dict())
    doc = compare_states(runs["baseline"], copy, resamples=200).to_dict()
    assert doc["miou"]["delta"] == 0
    assert doc["miou"]["interval"] == [0.0, 0.0]
    assert doc["miou"]["p_value"] == 1.0
    assert not doc["failed"]


def test_point_estimates_are_the_two_runs_results(runs) -> None:
    doc = compare_states(runs["baseline"], runs["regressed"], preset="cityscapes").to_dict()
    a = evaluate(runs["baseline"], preset="cityscapes")
    b = evaluate(runs["regressed"], preset="cityscapes")
    assert doc["miou"]["baseline"] == pytest.approx(a.miou, rel=1e-12)
    assert doc["miou"]["candidate"] == pytest.approx(b.miou, rel=1e-12)
    assert doc["classes"][CAR]["delta"] == pytest.approx(
        b.per_class["iou"][CAR] - a.per_class["iou"][CAR], rel=1e-12
    )


@pytest.mark.parametrize("preset", ["segiou", "detectron2", "torchmetrics", "sklearn_all_labels"])
def test_class_scores_are_shown_as_the_preset_reports_them(preset: str) -> None:
    """The reviewers' g1: a class in neither mask showed null where evaluate (torchmetrics,
    sklearn_all_labels) reports 0; the verdict is unchanged (the difference stays undefined)."""
    rng = np.random.default_rng(3)
    gt = rng.integers(0, 3, (6, 16, 16)).astype(np.uint8)  # classes 3, 4 never in the ground truth
    gt[:, :2] = 255
    p1 = gt.copy()
    e = rng.random(gt.shape) < 0.2
    p1[e] = rng.integers(0, 4, e.sum())  # class 3 only predicted, by the baseline
    p1[:, 5, :3] = 255
    p2 = gt.copy()
    e = rng.random(gt.shape) < 0.3
    p2[e] = rng.integers(0, 3, e.sum())
    names = [f"i{i}" for i in range(6)]

    def state(p: np.ndarray) -> ConfusionMatrix:
        return ConfusionMatrix(5, ignore_index=255, per_image=True).update(gt, p, names=names)

    a, b = state(p1), state(p2)
    doc = compare_states(a, b, preset=preset, resamples=50).to_dict()
    for key, cm in (("baseline", a), ("candidate", b)):
        want = evaluate(cm, preset=preset).to_dict()
        assert doc["miou"][key] == pytest.approx(want["summary"]["miou"], rel=1e-12)
        got = np.array([np.nan if c[key] is None else c[key] for c in doc["classes"]])
        iou = np.array([np.nan if c["iou"] is None else c["iou"] for c in want["classes"]])
        np.testing.assert_allclose(got, iou, rtol=1e-12)  # (nan where both are null)
    absent = doc["classes"][4]  # in neither mask of either run
    assert (absent["delta"], absent["p_value"], absent["interval"]) == (None, None, None)
    assert absent["change"] == "undefined"
    assert not absent["fails"]
    assert not doc["classes"][3]["fails"]  # only predicted by the baseline: no lost class


def test_thresholds_decide_which_significant_drops_fail(runs) -> None:
    lenient = compare_states(runs["baseline"], runs["regressed"], max_miou_drop=0.5,
                             max_class_drop=0.9)  # fmt: skip
    assert not lenient.failed  # significant, but within what is allowed
    assert lenient.to_dict()["classes"][CAR]["change"] == "worse"
    off = compare_states(runs["baseline"], runs["regressed"], max_miou_drop=0.5,
                         max_class_drop=None)  # fmt: skip
    assert not off.failed


def test_the_order_images_were_counted_in_does_not_move_the_verdict(runs) -> None:
    """Paired resamples draw the shared images in name order, not in the baseline's order."""
    gt = _gt()
    names = [f"im{i:03d}" for i in range(N)]

    def later_half_first(pred: np.ndarray) -> ConfusionMatrix:
        cm = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
        for part in (slice(40, N), slice(0, 40)):
            cm.update(gt[part], pred[part], names=names[part], key=f"{part.start}")
        return cm

    base, cand = later_half_first(_noisy(gt, 1)), later_half_first(_noisy(gt, 2))
    want = compare_states(runs["baseline"], runs["noise"], resamples=300, seed=2).to_dict()
    assert compare_states(base, runs["noise"], resamples=300, seed=2).to_dict() == want
    assert compare_states(runs["baseline"], cand, resamples=300, seed=2).to_dict() == want


def test_different_runs_are_refused(runs) -> None:
    gt = _gt()
    fewer = _state(gt[:60], _noisy(gt, 1)[:60])
    with pytest.raises(UsageError, match=r"20 only in the baseline.*--shared-images"):
        compare_states(runs["baseline"], fewer)
    doc = compare_states(runs["baseline"], fewer, shared_images=True, resamples=100).to_dict()
    assert doc["images"]["shared"] == 60
    assert doc["images"]["baseline_only"] == 20
    other_gt = gt.copy()
    other_gt[3, :4] = 0
    with pytest.raises(UsageError, match=r"different ground truth.*'im003'"):
        compare_states(runs["baseline"], _state(other_gt, _noisy(gt, 1)))
    voc = ConfusionMatrix("pascal_voc", per_image=True).update(
        np.zeros((1, 4, 4), np.uint8), np.zeros((1, 4, 4), np.uint8), names=["im000"]
    )
    with pytest.raises(IncompatibleMatrixError, match="different label specs"):
        compare_states(runs["baseline"], voc)
    a, b = (
        ConfusionMatrix(3, ignore_index=order, per_image=True) for order in ([255, 254], [254, 255])
    )
    g2 = np.array([[[0, 1, 2, 255]]], np.uint8)
    for cm in (a, b):  # the same ignore values in another order count alike: compared
        cm.update(g2, g2, names=["im000"])
    assert compare_states(a, b, resamples=20).to_dict()["images"]["shared"] == 1
    flat = ConfusionMatrix("cityscapes", gt_ids="class").update(gt, gt)
    with pytest.raises(UsageError, match="per_image=False"):
        compare_states(runs["baseline"], flat)
    for bad in ({"alpha": 0.0}, {"max_miou_drop": -1.0}, {"correction": "bonferroni"}):
        with pytest.raises(UsageError):
            compare_states(runs["baseline"], runs["noise"], **bad)  # type: ignore[arg-type]


def test_images_without_names_or_keys_are_not_paired_by_their_row() -> None:
    # "#3" says where an image arrived, not which it is: two runs counting the same tiles in
    # another order (threads, shards) would pair other images, and tiles of equal ground-truth
    # counts pass the ground-truth check
    gt = np.zeros((6, 8, 8), np.uint8)
    pred = gt.copy()
    pred[0] = 1  # one bad tile, first in the baseline, last in the candidate
    base = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
    cand = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
    for i in range(6):
        base.update(gt[i], pred[i])
        cand.update(gt[i], pred[(i + 1) % 6])
    with pytest.raises(UsageError, match=r"baseline holds 6 image\(s\).*without a name.*'#0'"):
        compare_states(base, cand)
    named = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
    named.update(gt, pred, names=[f"#{i}" for i in range(6)])  # given names may look so
    with pytest.raises(UsageError, match="candidate holds 6 image"):
        compare_states(named, cand)
    keyed = [ConfusionMatrix("cityscapes", gt_ids="class", per_image=True) for _ in range(2)]
    for cm in keyed:
        for i in range(6):
            cm.update(gt[i], pred[i], key=f"tile{i}")  # a key names its batch's images
    doc = compare_states(*keyed, resamples=50).to_dict()
    assert doc["images"]["shared"] == 6
    assert compare_states(named, named, resamples=50).to_dict()["images"]["shared"] == 6


def test_p_values_and_holm() -> None:
    assert np.isnan(two_sided_p(np.array([np.nan, np.nan, 1.0]), 0.5))  # one replicate
    assert np.isnan(two_sided_p(np.ones(5), float("nan")))
    # no spread at all: one image carries the difference; no verdict, never p = 0
    assert np.isnan(two_sided_p(np.full(999, -1.0), -1.0))
    rng = np.random.default_rng(0)
    d = rng.normal(-0.02, 0.01, 4000)
    assert two_sided_p(d, -0.02) == pytest.approx(0.0455, abs=0.004)  # z = 2
    assert holm([0.5, float("nan"), 0.01]) == pytest.approx([0.5, float("nan"), 0.02],
                                                            nan_ok=True)  # fmt: skip


# -- the command line --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def files(runs, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gate")
    out = {}
    for name, cm in runs.items():
        out[name] = cm.save(d / f"{name}.json")
    report = d / "report.json"
    report.write_text(evaluate(runs["baseline"]).to_json())
    out["report"] = report
    return out


def test_cli_exit_codes(files, capsys: pytest.CaptureFixture[str]) -> None:
    base, noise, bad = (str(files[k]) for k in ("baseline", "noise", "regressed"))
    assert main(["compare", base, bad, "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"]
    assert doc["inputs"] == {"baseline": base, "candidate": bad}
    assert main(["compare", base, noise]) == 0
    out = capsys.readouterr().out
    assert out.startswith("segiou compare: PASS")
    assert main(["compare", base, str(files["report"])]) == 2
    assert "is a result report" in capsys.readouterr().err
    assert main(["compare", base, "/nonexistent.json"]) == 2
    assert main(["compare", base, noise, "--preset", "bogus"]) == 2
    assert main(["compare", base, noise, "--bootstrap-groups", "city"]) == 2
    assert "give it with --slices" in capsys.readouterr().err
    assert main(["compare", base, noise, "--slices", "/nonexistent.csv"]) == 2  # never read
    assert "--slices is read only for --bootstrap-groups" in capsys.readouterr().err


def test_cli_markdown_is_ready_for_a_pull_request(files, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    out = tmp_path / "gate.md"
    code = main(["compare", str(files["baseline"]), str(files["regressed"]), "--format", "md",
                 "--output", str(out), "--bootstrap", "300"])  # fmt: skip
    assert code == 1
    md = capsys.readouterr().out
    assert md == out.read_text()
    assert md.startswith("### segiou gate: **FAIL**")
    assert "| **mIoU** |" in md
    assert "| car |" in md
    assert "<details>" in md
    assert "**Failed because:**" in md
    assert "300 resamples" in md


def test_cli_groups_from_metadata(
    files, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = tmp_path / "m.csv"
    meta.write_text("image,seq\n" + "".join(f"im{i:03d},s{i // 4}\n" for i in range(N)))
    code = main(["compare", str(files["baseline"]), str(files["noise"]), "--format", "json",
                 "--slices", str(meta), "--bootstrap-groups", "seq"])  # fmt: skip
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bootstrap"]["unit"] == "group:seq"
    assert doc["bootstrap"]["units"] == N // 4


def test_a_class_seen_in_one_image_is_never_called_significant() -> None:
    rng = np.random.default_rng(0)
    base = ConfusionMatrix(3, ignore_index=255, per_image=True)
    cand = ConfusionMatrix(3, ignore_index=255, per_image=True)
    for i in range(40):
        g = rng.integers(0, 2, (16, 16)).astype(np.uint8)
        if i == 0:
            g[:4, :4] = 2  # class 2 is in image 0 only
        pb = g.copy()
        pb[rng.random(g.shape) < 0.1] = 0
        pc = pb.copy()
        if i == 0:
            pc[0, :4] = 0  # the candidate misses 4 more of its pixels there
        base.update(g, pb, key=f"b{i}", names=[f"img{i:02d}"])
        cand.update(g, pc, key=f"c{i}", names=[f"img{i:02d}"])
    c2 = compare_states(base, cand, resamples=300).to_dict()["classes"][2]
    assert c2["delta"] < 0
    assert c2["p_value"] == 1.0  # swapping the one image gives -delta: |delta| either way
    assert c2["fails"] is False
    assert c2["change"] == "no verdict"  # one image cannot make any p-value small


def test_equal_replicates_decide_by_how_many_images_hold_the_difference() -> None:
    """Every resample giving the same difference was read from an exact zero standard
    deviation: rounding (1e-16) made a class of one image "worse" with p = 0, and a candidate
    predicting nothing at all (every replicate exactly -1) passed with p null."""
    rng = np.random.default_rng(0)
    gt = rng.integers(0, 2, (40, 16, 16)).astype(np.uint8)
    gt[0, :6, :6] = 2  # class 2 in image 0 only
    pa = gt.copy()
    pa[rng.random(gt.shape) < 0.1] = 0
    pb = pa.copy()
    pb[0, :6, :6][pb[0, :6, :6] == 2] = 1  # the candidate misses most of class 2
    pb[0, 0, :3] = 2
    names = [f"img{i:02d}" for i in range(40)]

    def state(pred: np.ndarray, g: np.ndarray = gt, k: int = 3) -> ConfusionMatrix:
        return ConfusionMatrix(k, ignore_index=255, per_image=True).update(g, pred, names=names)

    doc = compare_states(state(pa), state(pb), resamples=1000).to_dict()
    c2 = doc["classes"][2]
    # every replicate the same: a zero-width interval read as certainty; held by one image,
    # the interval is undefined now (it was [d, d])
    assert c2["interval"] is None
    assert c2["units"] == 1
    assert doc["bootstrap"]["note"] == ("1 class held by a single image: no interval (every "
                                        "resample gives the same difference)")  # fmt: skip
    assert c2["p_value"] == 1.0  # the swap test: one image differs, both swaps give |delta|
    assert c2["change"] == "no verdict"
    assert c2["fails"] is False
    # every class in every image: a perfect baseline against a candidate predicting void
    # everywhere, or two classes swapped: the same difference whichever images are drawn
    full = np.tile(np.repeat(np.arange(3, dtype=np.uint8), 6)[None, None, :], (40, 4, 1))
    void = np.full_like(full, 255)
    for cand in (void, np.choose(full, [0, 2, 1]).astype(np.uint8)):
        doc = compare_states(state(full, full), state(cand, full), resamples=200).to_dict()
        assert doc["failed"] is True
        # the swap test: no random swap but none and all reaches the drop; the smallest
        # random-swap p-value is 1 / (B + 1), B = 200 (was 0.0 from the bootstrap's se = 0)
        assert doc["miou"]["p_value"] == pytest.approx(1 / 201)
        assert doc["miou"]["change"] == "worse"
        assert all(c["change"] == "worse" for c in doc["classes"] if c["delta"] != 0)
    d = np.full(1000, -2 / 3) + np.where(np.arange(1000) % 2, 1.1e-16, 0.0)
    assert np.isnan(two_sided_p(d, -2 / 3))  # who holds it unknown: no verdict
    assert np.isnan(two_sided_p(d, -2 / 3, units=1))
    assert two_sided_p(d, -2 / 3, units=2) == 0.0
    assert 0 < two_sided_p(d + np.where(np.arange(1000) % 3, 0.5, 0.0), -2 / 3, units=1) < 0.05
    # however small the difference, real spread is spread (an absolute 1e-12 called resamples
    # of both signs around -4e-15 equal: p = 0, "worse"), and the test is scale-free
    rng = np.random.default_rng(0)
    tiny = rng.normal(1e-14, 3e-14, 1000)
    assert two_sided_p(tiny, 1e-14, units=5) == pytest.approx(two_sided_p(tiny * 1e6, 1e-8, 5))
    assert 0.5 < two_sided_p(tiny, 1e-14, units=5) < 1
    assert np.isnan(two_sided_p(np.zeros(50), 0.25, units=5))  # replicates not of delta's sign


def test_text_and_markdown_mark_a_failing_miou(runs) -> None:
    from segiou.report.gate import render_comparison_markdown, render_comparison_text

    doc = compare_states(runs["baseline"], runs["regressed"], max_miou_drop=0.0).to_dict()
    assert doc["miou"]["fails"]
    miou_row = next(r for r in render_comparison_text(doc).splitlines() if r.startswith("mIoU"))
    assert miou_row.endswith("worse  FAILS")
    md_row = next(r for r in render_comparison_markdown(doc).splitlines() if "**mIoU**" in r)
    assert md_row.endswith("worse (fails) |")
    doc = compare_states(runs["baseline"], runs["noise"]).to_dict()  # passes: no mark
    assert not doc["miou"]["fails"]
    assert "FAILS" not in render_comparison_text(doc)
    assert "(fails)" not in render_comparison_markdown(doc)


def test_markdown_shows_user_given_names_as_text(runs) -> None:
    from segiou.report.gate import render_comparison_markdown

    doc = compare_states(runs["baseline"], runs["regressed"], max_miou_drop=0.0).to_dict()
    evil = "<img src=x onerror=alert(1)>|x $a$ *b*\nrow"
    doc["classes"][0]["name"] = evil
    doc["reasons"] = [evil]
    md = render_comparison_markdown(doc, baseline=evil)
    for bad in ("<img", "$a$", "*b*", "\nrow"):  # markup, GitHub's math, a new row
        assert bad not in md
    assert not re.search(r"(?<!\\)\|x", md)  # an unescaped pipe: a new cell


def _lost_class_runs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ground truth of 3 classes, a baseline with a few errors, and a candidate that predicts
    the unexpected value 77 on every pixel of class 2 (and is right everywhere else)."""
    rng = np.random.default_rng(5)
    gt = rng.integers(0, 3, (6, 8, 8)).astype(np.uint8)
    base = gt.copy()
    wrong = rng.random(gt.shape) < 0.15
    base[wrong] = (gt[wrong] + 1) % 3
    garbage = gt.copy()
    garbage[gt == 2] = 77
    return gt, base, garbage


def _counted(gt: np.ndarray, pred: np.ndarray) -> ConfusionMatrix:
    cm = ConfusionMatrix(3, ignore_index=255, on_unexpected="count", per_image=True)
    return cm.update(gt, pred, names=[f"im{i}" for i in range(len(gt))])


def test_a_class_whose_pixels_all_became_unexpected_values_fails() -> None:
    """Every pixel of class 2 predicted as 77: left out of the counts, class 2 had no IoU and
    the gate called it "undefined", never failing, while mIoU rose."""
    from segiou.report.gate import render_comparison_markdown, render_comparison_text

    gt, base, garbage = _lost_class_runs()
    tp = int(((gt == 2) & (base == 2)).sum())
    fp = int(((gt != 2) & (base == 2)).sum())
    fn = int(((gt == 2) & (base != 2)).sum())
    doc = compare_states(_counted(gt, base), _counted(gt, garbage), resamples=200).to_dict()
    c2 = doc["classes"][2]
    assert c2["baseline"] == pytest.approx(tp / (tp + fp + fn))
    assert c2["candidate"] is None
    assert doc["miou"]["delta"] > 0  # the mean skips class 2 and "improves"
    assert c2["fails"]
    assert doc["failed"]
    line = (f"class '2' IoU is undefined now (baseline {tp / (tp + fp + fn):.4f}): none of the "
            f"{tp + fn:,} ground-truth pixels the baseline counted for it is counted now")  # fmt: skip
    assert any(r.startswith(line) for r in doc["reasons"]), doc["reasons"]
    # (named once: not again as a class with more pixels predicted as unexpected values)
    assert not any(r.startswith("class '2': ") for r in doc["reasons"]), doc["reasons"]
    row = next(r for r in render_comparison_text(doc).splitlines() if r.startswith("2 "))
    assert row.endswith("undefined  FAILS")
    md = render_comparison_markdown(doc)
    assert md.count("| 2 | ") == 2  # the failing class in the top table, and in the details
    assert "| undefined (fails) |" in md
    # classes never fail with max_class_drop=None (still reported)
    off = compare_states(_counted(gt, base), _counted(gt, garbage), resamples=200,
                         max_class_drop=None).to_dict()  # fmt: skip
    assert not off["classes"][2]["fails"]
    assert off["reasons"][0].startswith(f"class '2': {int((gt == 2).sum()):,} of its ground-truth "
                                        "pixels in the shared images are predicted as an "
                                        "unexpected value in the candidate, 0 in the baseline")  # fmt: skip
    # nothing counted at all now: mIoU undefined fails too
    nothing = compare_states(_counted(gt, base), _counted(gt, np.full_like(gt, 77)),
                             resamples=200, max_class_drop=None).to_dict()  # fmt: skip
    assert nothing["miou"]["candidate"] is None
    assert nothing["miou"]["fails"]
    assert nothing["reasons"][0].startswith("mIoU is undefined now (baseline ")


def test_a_class_undefined_in_the_baseline_or_only_falsely_predicted_does_not_fail() -> None:
    gt, base, garbage = _lost_class_runs()
    # undefined in the baseline, scored now: the class is back (the other classes' drops, the
    # baseline's errors, fail by their own rule)
    back = compare_states(_counted(gt, garbage), _counted(gt, base), resamples=200).to_dict()
    assert back["classes"][2]["baseline"] is None
    assert not back["classes"][2]["fails"]
    assert not any("'2'" in r for r in back["reasons"]), back["reasons"]
    # no ground truth of class 2: the baseline's IoU 0 came from false positives alone
    gt01 = gt % 2
    fp_only = gt01.copy()
    fp_only[:, 0, 0] = 2
    doc = compare_states(_counted(gt01, fp_only), _counted(gt01, gt01), resamples=200).to_dict()
    assert doc["classes"][2]["baseline"] == 0.0
    assert doc["classes"][2]["candidate"] is None
    assert not doc["failed"], doc["reasons"]


def test_a_class_only_in_images_the_candidate_lacks_is_no_lost_class() -> None:
    """--shared-images: the baseline's only image of class 2 is not shared. The gate scores
    both runs on the shared images, where the baseline has no class 2 either: nothing lost
    (compare_reports, on whole reports of other test sets, called such a class lost)."""
    gt, _, _ = _lost_class_runs()
    gt01 = gt % 2  # no class 2
    only = np.full_like(gt01[:1], 2)  # an image of class 2, in the baseline only
    base = ConfusionMatrix(3, ignore_index=255, on_unexpected="count", per_image=True)
    base.update(np.concatenate([gt01, only]), np.concatenate([gt01, only]),
                names=[f"im{i}" for i in range(len(gt01))] + ["class2"])  # fmt: skip
    doc = compare_states(base, _counted(gt01, gt01), resamples=50, shared_images=True).to_dict()
    assert doc["images"]["baseline_only"] == 1
    assert doc["classes"][2]["baseline"] is None
    assert doc["classes"][2]["candidate"] is None
    assert not doc["failed"], doc["reasons"]


def test_more_predicted_pixels_with_unexpected_values_fail() -> None:
    """The baseline's wrong pixels predicted as 77 in the candidate: left out of the counts,
    every class "improved" significantly and the gate passed."""
    from segiou.report.gate import render_comparison_markdown, render_comparison_text

    gt, base, _ = _lost_class_runs()
    hidden = base.copy()
    hidden[base != gt] = 77
    hidden[0, 0, :3] = 78  # a second value
    n77, n78 = int((hidden == 77).sum()), int((hidden == 78).sum())
    doc = compare_states(_counted(gt, base), _counted(gt, hidden), resamples=200).to_dict()
    assert doc["miou"]["change"] == "better"
    assert not any(c["fails"] for c in doc["classes"])
    odd = (hidden == 77) | (hidden == 78)
    per_class = [int((odd & (gt == c)).sum()) for c in range(3)]  # each class's pixels left out
    assert sum(per_class) == n77 + n78
    assert all(per_class)
    assert doc["unexpected_pred"] == {
        "baseline": 0, "candidate": n77 + n78, "fails": True,
        "classes": [{"id": c, "name": str(c), "baseline": 0, "candidate": per_class[c],
                     "fails": True} for c in range(3)]}  # fmt: skip
    assert doc["failed"]
    reason = (f"{n77 + n78:,} predicted pixels of the shared images have an unexpected value "
              f"in the candidate, 0 in the baseline (pixels per value: 77: {n77:,}, 78: "
              f"{n78:,}): they are left out of every score, which cannot show what the "
              "candidate predicted there")  # fmt: skip
    by_class = [f"class '{c}': {per_class[c]:,} of its ground-truth pixels in the shared images "
                "are predicted as an unexpected value in the candidate, 0 in the baseline: they "
                "are left out of every score, which cannot show what the candidate predicted "
                "there" for c in range(3)]  # fmt: skip
    assert doc["reasons"] == [*by_class, reason]
    odd = ("predicted pixels with an unexpected value (left out of every score): 0 in the "
           f"baseline, {n77 + n78:,} in the candidate")  # fmt: skip
    assert f"\n{odd}  FAILS\n  on ground truth of class '0': 0 in the baseline, " in (
        render_comparison_text(doc))  # fmt: skip
    assert f"\n{odd} (fails)\n\n- on ground truth of class '0': 0 in the baseline, " in (
        render_comparison_markdown(doc))  # fmt: skip
    # fewer in the candidate: passes, and the counts are still shown
    back = compare_states(_counted(gt, hidden), _counted(gt, hidden), resamples=200).to_dict()
    assert back["unexpected_pred"]["fails"] is False
    assert not back["failed"]
    assert f"{n77 + n78:,} in the baseline, {n77 + n78:,} in the candidate\n" in (
        render_comparison_text(back))  # fmt: skip
    # none on either side: no line (nor in a document written before the field)
    plain = compare_states(_counted(gt, base), _counted(gt, base), resamples=50).to_dict()
    assert plain["unexpected_pred"] == {"baseline": 0, "candidate": 0, "fails": False,
                                        "classes": []}  # fmt: skip
    del plain["unexpected_pred"]
    assert "unexpected" not in render_comparison_text(plain) + render_comparison_markdown(plain)


def test_unexpected_values_count_on_the_shared_images_only() -> None:
    gt, base, _ = _lost_class_runs()
    extra = np.concatenate([base, np.full_like(base[:1], 77)])  # an image only it has
    cand = _counted(np.concatenate([gt, gt[:1]]), extra)
    doc = compare_states(_counted(gt, base), cand, resamples=50, shared_images=True).to_dict()
    assert doc["images"]["candidate_only"] == 1
    assert doc["unexpected_pred"] == {"baseline": 0, "candidate": 0, "fails": False,
                                      "classes": []}  # fmt: skip


def test_cli_fails_on_a_class_lost_to_unexpected_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gt, base, garbage = _lost_class_runs()
    a = _counted(gt, base).save(tmp_path / "a.json")
    b = _counted(gt, garbage).save(tmp_path / "b.json")
    assert main(["compare", str(a), str(b), "--bootstrap", "200"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("segiou compare: FAIL")
    assert "  - class '2' IoU is undefined now" in out
    n = int((gt == 2).sum())
    assert f"  - {n:,} predicted pixels of the shared images have an unexpected value" in out


def test_a_class_losing_its_pixels_to_unexpected_values_fails_whatever_the_total() -> None:
    """Only the total of unexpected predictions was compared (3,120 in the candidate < 3,240),
    and only a class with no pixel left: class 2, 97.5 % of it predicted as 7, read IoU 1.0
    and the gate passed."""
    from segiou.report.gate import render_comparison_markdown, render_comparison_text

    gt, base, cand = shifted_unexpected_runs()
    left = [[int(((gt == c) & (p == 7)).sum()) for c in range(3)] for p in (base, cand)]
    assert left == [[3240, 0, 0], [0, 0, 3120]]
    assert int((cand == 7).sum()) < int((base == 7).sum())  # (the total rule says nothing)
    doc = compare_states(_counted(gt, base), _counted(gt, cand), resamples=200).to_dict()
    assert doc["classes"][2]["candidate"] == 1.0
    assert doc["miou"]["delta"] > 0
    assert not any(c["fails"] for c in doc["classes"])
    assert doc["failed"]
    assert doc["unexpected_pred"] == {
        "baseline": int((base == 7).sum()), "candidate": int((cand == 7).sum()), "fails": True,
        "classes": [{"id": 0, "name": "0", "baseline": left[0][0], "candidate": 0, "fails": False},
                    {"id": 2, "name": "2", "baseline": 0, "candidate": left[1][2], "fails": True}],
    }  # fmt: skip
    reason = (
        f"class '2': {left[1][2]:,} of its ground-truth pixels in the shared images are predicted "
        "as an unexpected value in the candidate, 0 in the baseline: they are left out of every "
        "score, which cannot show what the candidate predicted there"
    )
    assert doc["reasons"] == [reason]
    by_class = f"on ground truth of class '2': 0 in the baseline, {left[1][2]:,} in the candidate"
    text = render_comparison_text(doc)
    assert f"3,240 in the baseline, 3,120 in the candidate\n  {by_class}  FAILS\n" in text
    assert f"\n- {by_class} (fails)\n" in render_comparison_markdown(doc)
    # a document written before the per-class counts renders as before
    del doc["unexpected_pred"]["classes"]
    assert "on ground truth" not in render_comparison_text(doc) + render_comparison_markdown(doc)
    # counted on the shared images only: a candidate image the baseline lacks, with every
    # pixel of class 2 predicted as 7, changes nothing
    more = _counted(np.concatenate([gt, gt[:1]]), np.concatenate([cand, np.full_like(gt[:1], 7)]))
    shared = compare_states(_counted(gt, base), more, resamples=50, shared_images=True)
    assert shared.to_dict()["unexpected_pred"]["classes"][1]["candidate"] == left[1][2]
    # the baseline as the candidate: class 0 loses its pixels, and more in total too
    back = compare_states(_counted(gt, cand), _counted(gt, base), resamples=50,
                          max_miou_drop=1.0, max_class_drop=None).to_dict()  # fmt: skip
    assert len(back["reasons"]) == 2, back["reasons"]
    assert back["reasons"][0].startswith(f"class '0': {left[0][0]:,} of its ground-truth pixels")
    assert back["reasons"][1].startswith("3,240 predicted pixels of the shared images have")
