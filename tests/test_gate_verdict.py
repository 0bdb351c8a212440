"""Whether the gate could decide: each row's smallest p-value, under Holm's correction.

The swap test cannot give a p-value below ``2 / 2**d`` (``d``: the units where the runs differ),
and Holm multiplies the smallest by the classes tested: with 19 classes no class could fail on
9 images, yet rows read "no significant change" and the headline PASS (the reviewer's
holm_exact2). The per-row bound, Holm's adjustment of the floors, is checked against brute
force over every p-value each class can take.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from segiou import ConfusionMatrix
from segiou.cli import main
from segiou.errors import UsageError
from segiou.report.gate import render_comparison_markdown, render_comparison_text
from segiou.stats import compare_states, holm
from segiou.stats._swap import attainable_p
from segiou.stats._verdict import smallest_adjusted


def _attainable(d: int) -> list[float]:
    """Every p-value an exact swap test can give a class that differs in ``d`` units (every
    swap defined): ``2h / 2**d`` (a swap set and its complement reach the same size), h >= 1."""
    if d <= 1:
        return [1.0]
    return [2 * h / 2**d for h in range(1, 2 ** (d - 1) + 1)]


@pytest.mark.parametrize("seed", range(12))
def test_the_per_row_bound_is_the_smallest_adjusted_p_over_every_attainable_p(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = int(rng.integers(1, 5))
    ds = [int(d) for d in rng.integers(0, 5, t)]
    untested = rng.random(t) < 0.2  # nan: left out of the correction
    floors = [math.nan if u else attainable_p(d) for d, u in zip(ds, untested, strict=True)]
    sets = [[math.nan] if u else _attainable(d) for d, u in zip(ds, untested, strict=True)]
    for correction in ("holm", "none"):
        bound = smallest_adjusted(floors, correction)
        best = [math.inf] * t
        for ps in itertools.product(*sets):
            adj = holm(ps) if correction == "holm" else list(ps)
            best = [min(b, a) if not math.isnan(a) else b for b, a in zip(best, adj, strict=True)]
        for c in range(t):
            if untested[c]:
                assert math.isnan(bound[c])
            else:
                assert bound[c] == pytest.approx(best[c], rel=1e-12), (ds, correction, c)


def test_holm_never_falls_when_a_raw_p_value_grows() -> None:
    """What the bound rests on (Holm is closed testing of Bonferroni tests), ties included."""
    rng = np.random.default_rng(5)
    grid = [1 / 64, 1 / 32, 1 / 16, 0.1, 0.25, 0.5, 1.0]
    for _ in range(2000):
        p = rng.choice(grid, size=int(rng.integers(1, 6)))
        q = p.copy()
        j = int(rng.integers(0, p.size))
        q[j] = rng.choice([g for g in grid if g >= p[j]])
        assert all(a <= b + 1e-15 for a, b in zip(holm(p), holm(q), strict=True))


def test_a_row_said_to_have_no_verdict_cannot_be_significant() -> None:
    """Against real swap tests (exact): no adjusted p-value below its row's bound."""
    for seed in range(6):
        rng = np.random.default_rng(seed)
        n, k = int(rng.integers(3, 9)), 4
        gt = rng.integers(0, k, (n, 5, 5))
        a, b = gt.copy(), gt.copy()
        a[rng.random(gt.shape) < 0.1] = 0
        b[rng.random(gt.shape) < rng.uniform(0.05, 0.4)] = int(rng.integers(0, k))
        names = [f"i{j}" for j in range(n)]
        doc = compare_states(ConfusionMatrix(k, per_image=True).update(gt, a, names=names),
                             ConfusionMatrix(k, per_image=True).update(gt, b, names=names),
                             resamples=20, permutations=1024).to_dict()  # fmt: skip
        assert doc["test"]["exact"]
        for c in doc["classes"]:
            if c["p_adjusted"] is None:
                assert c["smallest_p_adjusted"] is None
                continue
            assert c["p_adjusted"] >= c["smallest_p_adjusted"] - 1e-12
            assert c["p_value"] >= c["smallest_p"] - 1e-12
            if c["change"] == "no verdict":
                assert c["p_adjusted"] >= 0.05


def _one_pixel_lost(n: int, k: int = 19) -> tuple[ConfusionMatrix, ConfusionMatrix]:
    """The reviewer's holm_exact2: 40 pixels of each of 19 classes per image; class 3 loses one
    of its pixels (to class 4) on every image."""
    rng = np.random.default_rng(0)
    gt = np.stack([rng.permutation(np.repeat(np.arange(k), 40)).reshape(38, 20)
                   for _ in range(n)])  # fmt: skip
    cand = gt.copy()
    for i in range(n):
        cand[i].ravel()[np.flatnonzero(gt[i].ravel() == 3)[:1]] = 4
    names = [f"im{i:02d}" for i in range(n)]
    return (ConfusionMatrix(k, per_image=True).update(gt, gt, names=names),
            ConfusionMatrix(k, per_image=True).update(gt, cand, names=names))  # fmt: skip


@pytest.mark.parametrize("n", [6, 9])
def test_holm_over_19_classes_on_few_images_gives_no_class_verdict(n: int) -> None:
    base, cand = _one_pixel_lost(n)
    comp = compare_states(base, cand)
    doc = comp.to_dict()
    c3 = doc["classes"][3]
    assert doc["test"]["exact"]
    assert c3["p_value"] == 2.0 ** (1 - n)  # the smallest there is
    assert c3["p_adjusted"] >= 0.05
    assert c3["change"] == "no verdict"  # was "no significant change"
    assert render_comparison_text(doc).startswith("segiou compare: PASS on mIoU, NO VERDICT")
    assert c3["smallest_p_adjusted"] == pytest.approx(19 * 2.0 ** (1 - n))
    assert doc["classes"][0]["change"] == "no significant change"  # nothing changed there
    assert not comp.failed
    assert comp.verdict_possible  # mIoU is tested alone: p = 2 / 2**n < 0.05
    assert doc["miou"]["change"] == "worse"
    assert comp.class_verdicts_possible is False
    assert doc["class_verdicts_possible"] is False
    assert doc["test"]["smallest_class_p_adjusted"] == pytest.approx(19 * 2.0 ** (1 - n))
    reason = comp.no_class_verdict_reason
    assert reason is not None
    assert reason.startswith(
        f"no class verdict possible: the runs differ in at most {n} shared images for any "
        f"class, and Holm's correction over the 19 classes tested multiplies the smallest "
        f"p-value any class can get, {2.0 ** (1 - n):.3g}, by 19: {19 * 2.0 ** (1 - n):.3g}, "
        "not below alpha 0.05"
    )
    text = render_comparison_text(doc)
    assert text.startswith(
        f"segiou compare: PASS on mIoU, NO VERDICT on classes\nwarning: {reason}\n"
    )
    md = render_comparison_markdown(doc)
    assert md.startswith(
        f"### segiou gate: **PASS on mIoU, NO VERDICT on classes**\n\n> **Warning:** {reason}"
    )
    # without the correction the same class can be called (and fails: 2.5 points > 2)
    plain = compare_states(base, cand, correction="none").to_dict()
    assert plain["classes"][3]["change"] == "worse"
    assert plain["class_verdicts_possible"] is True
    assert plain["failed"]


def test_enough_images_for_holm_decide_the_class() -> None:
    base, cand = _one_pixel_lost(10)  # 2**9 swap sets <= 1,000: exact, p = 2 / 1024
    doc = compare_states(base, cand).to_dict()
    assert doc["classes"][3]["change"] == "worse"
    assert doc["class_verdicts_possible"] is True
    assert doc["no_class_verdict_reason"] is None
    assert render_comparison_text(doc).startswith("segiou compare: FAIL\ncandidate ")


def _two_classes_voided(alpha: float) -> dict:
    """Class 0 loses a pixel to void on all 12 images, class 2 on 6 of them: the bound of class
    2 is Holm's second step, 2 / 32 (class 0 can come first), not 3 / 32."""
    rng = np.random.default_rng(1)
    gt = rng.integers(0, 3, (12, 6, 6)).astype(np.uint8)
    cand = gt.copy()
    for i in range(12):
        cand[i].ravel()[np.flatnonzero(gt[i].ravel() == 0)[:1]] = 255
        if i < 6:
            cand[i].ravel()[np.flatnonzero(gt[i].ravel() == 2)[:1]] = 255
    names = [f"im{i:02d}" for i in range(12)]

    def run(pred: np.ndarray) -> ConfusionMatrix:  # 255 predicted at a class pixel: void
        return ConfusionMatrix(3, ignore_index=255, per_image=True).update(gt, pred, names=names)

    return compare_states(run(gt), run(cand), alpha=alpha, permutations=4096,
                          max_class_drop=None).to_dict()  # fmt: skip


def test_the_per_row_bound_counts_the_classes_that_can_come_first() -> None:
    at05, at07 = _two_classes_voided(0.05), _two_classes_voided(0.07)
    for doc in (at05, at07):
        c0, c2 = doc["classes"][0], doc["classes"][2]
        assert doc["test"]["exact"]
        assert (c0["differing_units"], c2["differing_units"]) == (12, 6)
        assert c2["smallest_p"] == 1 / 32
        assert c2["smallest_p_adjusted"] == 2 / 32
        assert c0["smallest_p_adjusted"] == 3 / 2**11
    assert at05["classes"][2]["change"] == "no verdict"  # 2 / 32 >= 0.05
    assert at05["classes"][0]["change"] == "worse"
    assert at05["class_verdicts_possible"] is True  # class 0 could be (and was) called
    assert at07["classes"][2]["change"] == "worse"  # 2 / 32 < 0.07 <= 3 / 32


def test_cli_says_no_class_verdict(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    base, cand = _one_pixel_lost(8)
    a, b = base.save(tmp_path / "a.json"), cand.save(tmp_path / "b.json")
    assert main(["compare", str(a), str(b), "--bootstrap", "50"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("segiou compare: PASS on mIoU, NO VERDICT on classes\nwarning: no class")


def _class_zero_everywhere(n: int = 40) -> tuple[ConfusionMatrix, ConfusionMatrix]:
    """The reviewer's perms_cli: a candidate predicting class 0 on every pixel of 40 images."""
    rng = np.random.default_rng(0)
    gt = rng.integers(0, 3, (n, 6, 6))
    names = [f"i{j:02d}" for j in range(n)]
    return (ConfusionMatrix(3, per_image=True).update(gt, gt, names=names),
            ConfusionMatrix(3, per_image=True).update(gt, np.zeros_like(gt), names=names))  # fmt: skip


def test_too_few_random_swaps_to_reach_alpha_are_refused(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """--permutations 10 gave PASS (p = 1/11 = 0.0909 at best) for a model predicting class 0
    everywhere, and test.smallest_p read 1.8e-12 (the exact floor of 40 images)."""
    base, cand = _class_zero_everywhere()
    a, b = base.save(tmp_path / "a.json"), cand.save(tmp_path / "b.json")
    assert main(["compare", str(a), str(b), "--permutations", "10", "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert "permutations=10 (--permutations) can never give a p-value below alpha 0.05" in err
    assert "(the smallest is 1/(N + 1) = 0.0909): give at least 20" in err
    assert main(["compare", str(a), str(b), "--permutations", "99", "--alpha", "0.01"]) == 2
    assert "give at least 100" in capsys.readouterr().err
    with pytest.raises(UsageError, match=r"permutations=19 .* give at least 20"):
        compare_states(base, cand, resamples=20, permutations=19)
    assert main(["compare", str(a), str(b), "--permutations", "20", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"]
    assert doc["miou"]["p_value"] == pytest.approx(1 / 21)
    assert doc["test"]["smallest_p"] == pytest.approx(1 / 21)  # was 2 / 2**40
    assert main(["compare", str(a), str(b), "--format", "json"]) == 1  # automatic: 1,000
    doc = json.loads(capsys.readouterr().out)
    assert (doc["test"]["exact"], doc["test"]["swaps"]) == (False, 1000)
    assert doc["test"]["smallest_p"] == pytest.approx(1 / 1001)


def test_random_swaps_too_few_for_holm_give_no_class_verdict() -> None:
    """100 random swaps: no p-value below 1/101, times 19 classes under Holm: 0.19."""
    base, cand = _one_pixel_lost(40)
    doc = compare_states(base, cand, resamples=20, permutations=100).to_dict()
    c3 = doc["classes"][3]
    assert not doc["test"]["exact"]
    assert c3["smallest_p"] == pytest.approx(1 / 101)  # (2 / 2**40 is far smaller)
    assert c3["smallest_p_adjusted"] == pytest.approx(19 / 101)
    assert c3["change"] == "no verdict"
    assert doc["miou"]["change"] == "worse"  # tested alone: 1/101 < 0.05
    assert doc["class_verdicts_possible"] is False
    assert doc["no_class_verdict_reason"].startswith(
        "no class verdict possible: 100 random swaps give no p-value below 1/101, and Holm's "
        "correction over the 19 classes tested"
    )
    assert doc["no_class_verdict_reason"].endswith(
        "(draw more swaps: leave permutations at its default)"
    )
    assert render_comparison_text(doc).startswith(
        "segiou compare: PASS on mIoU, NO VERDICT on classes\n"
    )
    auto = compare_states(base, cand, resamples=20).to_dict()  # 800 swaps: 19/801 < 0.05
    assert auto["test"]["permutations"] == 800
    assert auto["classes"][3]["change"] == "worse"
    assert auto["class_verdicts_possible"] is True


def test_the_floor_of_each_mode() -> None:
    from segiou.stats._swap import min_permutations

    assert attainable_p(5) == 1 / 16  # exact
    assert attainable_p(40, random_swaps=1000) == 1 / 1001
    assert attainable_p(5, random_swaps=20) == 1 / 16  # the exact floor is the larger
    for alpha in (0.5, 0.2, 0.1, 0.0625, 0.05, 0.03, 0.01, 0.001, 1e-4, 0.999):
        b = min_permutations(alpha)
        assert 1 / (b + 1) < alpha
        assert b == 1 or 1 / b >= alpha  # the fewest
