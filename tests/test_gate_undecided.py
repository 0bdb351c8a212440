"""Classes that changed but could not be called are named, not hidden behind a bare PASS.

The reviewer's rare_class_pass: 19 classes, 40 images with noise (so the other classes can be
decided); one class, in 4 images, went from IoU 1.0 to 0.0. Its smallest p-value cannot go
below alpha, its row said "no verdict" in the collapsed table, and the headline read PASS (exit
0, no warning): "PASS on mIoU, NO VERDICT on classes" appeared only when no class at all could
be decided. "Changed" is any nonzero difference of the class's IoU (either way, scored in both
runs); the exit code rule is unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from segiou import ConfusionMatrix
from segiou.cli import main
from segiou.report.gate import render_comparison_markdown, render_comparison_text
from segiou.stats import compare_states

K, N = 19, 40


def _runs(common_drop: bool = False) -> tuple[ConfusionMatrix, ConfusionMatrix]:
    """Classes 0-14 everywhere with independent 1 % noise in both runs; class 18 in 4 images
    (lost: predicted as 0), class 17 in 3 (half wrong in the baseline, right now: +50 points),
    class 16 in 1 (its counts change, its IoU does not: 8/16 then 12/24). ``common_drop``:
    class 1 predicted as 2 wherever the candidate sees it in half the images (a decided
    failure)."""
    rng = np.random.default_rng(0)
    gt = rng.integers(0, 15, (N, 32, 32)).astype(np.uint8)
    gt[:4, :16, :16] = 18
    gt[4:7, :8, :8] = 17
    gt[7, :4, :4] = 16

    def noisy(seed: int) -> np.ndarray:
        r = np.random.default_rng(seed)
        p = gt.copy()
        m = (r.random(gt.shape) < 0.01) & (gt < 15)
        p[m] = r.integers(0, 15, m.sum())
        return p

    base, cand = noisy(1), noisy(2)
    cand[:4][gt[:4] == 18] = 0
    base[4:7, :4, :8] = 0
    base[7, :4, :4] = 16
    base[7, 2:4, :4] = 0
    cand[7, :4, :4] = 16
    cand[7, 3:4, :4] = 0
    cand[7, 10:12, 10:14] = 16
    if common_drop:
        cand[::2][gt[::2] == 1] = 2
    names = [f"im{i:02d}" for i in range(N)]
    return (ConfusionMatrix(K, per_image=True).update(gt, base, names=names),
            ConfusionMatrix(K, per_image=True).update(gt, cand, names=names))  # fmt: skip


NOTE = (
    "no verdict on 2 classes whose IoU changed: '18' -100.00 points (differs in 4 images; "
    "smallest p-value 0.375); '17' +50.00 points (differs in 3 images; smallest p-value 0.5). "
    "No p-value they can get after Holm's correction is below alpha 0.05: the gate cannot "
    "tell these changes from chance, whatever their size (compare more images)"
)


def test_classes_that_changed_without_a_possible_verdict_are_listed() -> None:
    comp = compare_states(*_runs(), resamples=50)
    doc = comp.to_dict()
    assert not comp.failed
    assert comp.verdict_possible  # (the old bare PASS)
    assert comp.class_verdicts_possible
    assert doc["undecided_classes"] == [
        {"id": 18, "name": "18", "delta": -1.0, "differing_units": 4,
         "smallest_p_adjusted": 0.375},
        {"id": 17, "name": "17", "delta": 0.5, "differing_units": 3,
         "smallest_p_adjusted": 0.5},
    ]  # fmt: skip
    assert comp.undecided_classes == doc["undecided_classes"]
    c16 = doc["classes"][16]  # counts changed in 1 image, IoU did not: nothing to decide
    assert (c16["differing_units"], c16["delta"]) == (1, 0.0)
    assert c16["change"] == "no significant change"
    # the noisy classes differ in (nearly) every image and could be decided
    assert all(c["change"] == "no significant change" for c in doc["classes"][:15])
    text = render_comparison_text(doc)
    assert text.startswith(f"segiou compare: PASS, NO VERDICT on 2 classes: '18', '17'\n"
                           f"warning: {NOTE}\n")  # fmt: skip
    md = render_comparison_markdown(doc)
    summary = md.split("<details>")[0]
    assert summary.startswith(
        f"### segiou gate: **PASS, NO VERDICT on 2 classes: '18', '17'**\n\n> **Warning:** {NOTE}\n"
    )
    assert "| 18 | 100.00 | 0.00 | -100.00 |" in summary
    assert "| 17 | 50.00 | 100.00 | +50.00 |" in summary
    assert "| 16 |" not in summary


def test_the_cli_names_them_and_still_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _runs()
    a, b = base.save(tmp_path / "a.json"), cand.save(tmp_path / "b.json")
    assert main(["compare", str(a), str(b), "--bootstrap", "50"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("segiou compare: PASS, NO VERDICT on 2 classes: '18', '17'\nwarning: ")
    assert main(["compare", str(a), str(b), "--bootstrap", "50", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in doc["undecided_classes"]] == ["18", "17"]
    assert main(["compare", str(a), str(b), "--bootstrap", "50", "--format", "md"]) == 0
    assert "> **Warning:** no verdict on 2 classes" in capsys.readouterr().out.split("<details>")[0]


def test_a_failure_still_names_the_undecided_classes() -> None:
    doc = compare_states(*_runs(common_drop=True), resamples=50).to_dict()
    assert doc["failed"]
    assert doc["classes"][1]["change"] == "worse"
    assert [c["id"] for c in doc["undecided_classes"]] == [18, 17]
    text = render_comparison_text(doc)
    assert text.startswith(f"segiou compare: FAIL\nwarning: {NOTE}\n")
    assert render_comparison_markdown(doc).startswith(
        f"### segiou gate: **FAIL**\n\n> **Warning:** {NOTE}\n"
    )


def test_the_headline_names_three_then_counts() -> None:
    doc = compare_states(*_runs(), resamples=50).to_dict()
    one = doc | {"undecided_classes": doc["undecided_classes"][:1]}
    assert render_comparison_text(one).startswith(
        "segiou compare: PASS, NO VERDICT on class '18'\n"
    )
    assert "warning: no verdict on 1 class whose IoU changed: '18' -100.00 points" in (
        render_comparison_text(one))  # fmt: skip
    many = [dict(doc["undecided_classes"][0], name=f"c*{i}") for i in range(12)]
    text = render_comparison_text(doc | {"undecided_classes": many})
    assert text.startswith("segiou compare: PASS, NO VERDICT on 12 classes: 'c*0', 'c*1', "
                           "'c*2' and 9 more\n")  # fmt: skip
    assert (
        "; 'c*9' -100.00 points (differs in 4 images; smallest p-value 0.375); and 2 more." in text
    )
    md = render_comparison_markdown(doc | {"undecided_classes": many})
    assert md.startswith("### segiou gate: **PASS, NO VERDICT on 12 classes: 'c\\*0', 'c\\*1'")


def test_nothing_changed_or_everything_decided_is_a_plain_pass() -> None:
    base, _ = _runs()
    same = compare_states(base, base, resamples=20).to_dict()
    assert same["undecided_classes"] == []
    assert render_comparison_text(same).startswith("segiou compare: PASS\ncandidate ")
    # a document written before the field: as before
    old = {key: v for key, v in same.items() if key != "undecided_classes"}
    assert render_comparison_text(old).startswith("segiou compare: PASS\ncandidate ")
