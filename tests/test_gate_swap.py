"""The gate's decision: a paired randomization (swap) test (segiou.stats.compare_states).

Its p-values are checked against a plain-numpy oracle that enumerates every swap of small
cases; the reviewers' scenarios are regression tests: a candidate worse on every image fails
however skewed the per-image differences are (the normal approximation of the bootstrap let one
catastrophic image turn a FAIL into a PASS), and two draws of the same noise on a few images do
not fail (it failed 20-29 % of such comparisons with 2-3 images).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from segiou import ConfusionMatrix
from segiou.cli import main
from segiou.errors import UsageError
from segiou.stats import compare_states
from segiou.stats._swap import attainable_p, auto_permutations


def _tables(gt: np.ndarray, pred: np.ndarray, k: int) -> np.ndarray:
    """Per-image K x K confusion matrices (no ignore, no void): the oracle's own counting."""
    return np.stack([np.bincount(k * g.ravel() + p.ravel(), minlength=k * k).reshape(k, k)
                     for g, p in zip(gt.astype(np.int64), pred.astype(np.int64), strict=True)])  # fmt: skip


def _iou(cm: np.ndarray, over: str) -> tuple[float, np.ndarray]:
    """mIoU and per-class IoU of a summed matrix (segiou: mean over classes present; detectron2:
    over classes with ground truth, a class without any scoring nan)."""
    tp = np.diag(cm).astype(float)
    fp, fn = cm.sum(axis=0) - tp, cm.sum(axis=1) - tp
    den = tp + fp + fn
    iou = np.full(tp.shape, np.nan)
    iou[den > 0] = tp[den > 0] / den[den > 0]
    if over == "gt":
        iou[(tp + fn) == 0] = np.nan
    vals = iou[~np.isnan(iou)]
    return (float(vals.mean()) if vals.size else float("nan")), iou


def _oracle(ta: np.ndarray, tb: np.ndarray, over: str) -> tuple[float, np.ndarray]:
    """Exact swap test: every one of the 2**n ways of exchanging the runs image by image."""
    n, k = ta.shape[0], ta.shape[1]
    obs_m, obs_c = (x - y for x, y in zip(_iou(tb.sum(0), over), _iou(ta.sum(0), over),
                                          strict=True))  # fmt: skip
    hit_m = tot_m = 0
    hit_c, tot_c = np.zeros(k), np.zeros(k)
    for swap in itertools.product((False, True), repeat=n):
        s = np.array(swap)
        a = np.where(s[:, None, None], tb, ta).sum(0)
        b = np.where(s[:, None, None], ta, tb).sum(0)
        (ma, ca), (mb, cb) = _iou(a, over), _iou(b, over)
        dm, dc = mb - ma, cb - ca
        if not math.isnan(dm):
            tot_m += 1
            hit_m += abs(dm) >= abs(obs_m) - 1e-12
        ok = ~np.isnan(dc)
        tot_c += ok
        hit_c += ok & (np.abs(np.nan_to_num(dc)) >= np.abs(obs_c) - 1e-12)
    with np.errstate(invalid="ignore"):
        p_c = np.where(np.isnan(obs_c), np.nan, hit_c / tot_c)
    return hit_m / tot_m, p_c


def _state(gt: np.ndarray, pred: np.ndarray, k: int) -> ConfusionMatrix:
    cm = ConfusionMatrix(k, per_image=True)
    return cm.update(gt, pred, names=[f"im{i}" for i in range(len(gt))])


def _case(seed: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gt = rng.integers(0, k - 1, (n, 6, 6))  # class k-1 only ever predicted
    a, b = gt.copy(), gt.copy()
    for p, rate in ((a, rng.uniform(0.05, 0.4)), (b, rng.uniform(0.05, 0.4))):
        wrong = rng.random(gt.shape) < rate
        p[wrong] = rng.integers(0, k, wrong.sum())
    b[0] = a[0] if n > 2 else b[0]  # an image where the runs agree: it changes nothing
    return gt, a, b


@pytest.mark.parametrize("preset", ["segiou", "detectron2"])
@pytest.mark.parametrize("seed", range(6))
def test_p_values_are_the_exact_swap_test_of_a_numpy_oracle(seed: int, preset: str) -> None:
    n, k = 2 + seed % 5, 4
    gt, a, b = _case(seed, n, k)
    doc = compare_states(_state(gt, a, k), _state(gt, b, k), preset=preset, resamples=50,
                         correction="none").to_dict()  # fmt: skip
    want_m, want_c = _oracle(_tables(gt, a, k), _tables(gt, b, k), "gt" if preset ==
                             "detectron2" else "present")  # fmt: skip
    test = doc["test"]
    assert test["exact"] is True
    assert test["method"] == "paired randomization (swap) test"
    differ = int(sum((x != y).any() for x, y in zip(a, b, strict=True)))
    assert test["differing_units"] == differ
    assert test["swaps"] == 2**differ
    assert doc["miou"]["p_value"] == pytest.approx(want_m, rel=1e-12)
    got_c = [c["p_value"] for c in doc["classes"]]
    np.testing.assert_allclose(np.array(got_c, dtype=float), want_c, rtol=1e-12)


def test_random_swaps_estimate_the_exact_p_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """12 images, 11 differing: 2,048 swaps in all (1,024 swap sets and their complements).
    With enumeration limited to the swaps asked for (by default a class differing in up to 20
    units, and a small mIoU, are enumerated whatever B), 1,000 random ones give
    (1 + hits) / (1 + B), within Monte Carlo error of the exact value and never below
    1 / (B + 1)."""
    from segiou.stats import _swap_sets

    k, b_ = 4, 1000
    gt, a, b = _case(3, 12, k)
    base, cand = _state(gt, a, k), _state(gt, b, k)
    exact = compare_states(base, cand, resamples=50, permutations=4096).to_dict()
    monkeypatch.setattr(_swap_sets, "CLASS_UNITS", 0)
    monkeypatch.setattr(_swap_sets, "MIOU_CELLS", 0)
    approx = compare_states(base, cand, resamples=50, permutations=b_).to_dict()
    assert exact["test"]["exact"]
    assert not approx["test"]["exact"]
    assert approx["test"]["swaps"] == approx["test"]["random_swaps"] == b_
    assert approx["miou"]["exact"] is False
    want_m, _ = _oracle(_tables(gt, a, k), _tables(gt, b, k), "present")
    assert exact["miou"]["p_value"] == pytest.approx(want_m, rel=1e-12)
    sd = math.sqrt(want_m * (1 - want_m) / b_)
    assert abs(approx["miou"]["p_value"] - want_m) < 4 * sd + 1 / (b_ + 1)
    drawn = 0
    for c_exact, c_mc in zip(exact["classes"], approx["classes"], strict=True):
        pe = c_exact["p_value"]
        if c_mc["exact"]:  # 2**(d_c - 1) <= 1,000: enumerated still
            assert c_mc["differing_units"] <= 10
            assert c_mc["p_value"] == pe
            continue
        drawn += 1
        assert c_mc["differing_units"] == 11
        assert c_mc["p_value"] >= 1 / (b_ + 1) == c_mc["smallest_p"]
        assert abs(c_mc["p_value"] - pe) < 4 * math.sqrt(pe * (1 - pe) / b_) + 2 / (b_ + 1)
    assert drawn >= 2


def _worse_everywhere(n: int, destroyed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reviewers' g8/g9: a candidate a little worse on every image, and much worse on
    ``destroyed`` of them."""
    rng = np.random.default_rng(0)
    gt = np.zeros((n, 48, 48), np.uint8)
    for i in range(n):
        gt[i, :, 8 + i % 30 :] = 1
        gt[i, 20 + i % 20 :, :] = 2
    base = gt.copy()
    e = rng.random(gt.shape) < 0.05
    base[e] = (gt[e] + 1) % 3
    cand = base.copy()
    for i in range(n):
        frac = 0.95 if i < destroyed else 0.015
        ok = (cand[i] == gt[i]) & (rng.random(gt[i].shape) < frac)
        cand[i][ok] = (gt[i][ok] + 1) % 3
    return gt, base, cand


@pytest.mark.parametrize("n", [10, 40])
def test_a_candidate_worse_on_every_image_fails_however_skewed(n: int) -> None:
    """With one image destroyed the bootstrap replicates were skewed, their standard deviation
    grew faster than the drop, and the gate passed (p = 0.16 at 10 images, 0.076 at 40) while
    its own interval lay wholly below 0."""
    for destroyed in (0, 1):
        gt, base, cand = _worse_everywhere(n, destroyed)
        doc = compare_states(_state(gt, base, 3), _state(gt, cand, 3), resamples=1000).to_dict()
        m = doc["miou"]
        assert m["interval"][1] < 0
        assert doc["failed"], (destroyed, m)
        assert m["change"] == "worse"
        assert m["p_value"] < 0.01
    # every swap but none (and all) shrinks the drop: the smallest p the exact test can give
    doc = compare_states(_state(gt, base, 3), _state(gt, cand, 3), resamples=100,
                         permutations=2**n if n < 20 else None).to_dict()  # fmt: skip
    if n < 20:
        assert doc["test"]["exact"]
        assert doc["miou"]["p_value"] == pytest.approx(2 / 2**n)


def _noise_runs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two draws of the same error process (block errors, image-dependent rates): no difference."""
    k, size, bl = 6, 32, 8
    pres_p = np.array([0.9, 0.8, 0.6, 0.5, 0.3, 0.1])
    q = rng.beta(2, 5, n)
    gts = []
    for _ in range(n):
        pres = np.flatnonzero(rng.random(k) < pres_p)
        pres = pres if pres.size else np.array([0])
        gts.append(np.kron(rng.choice(pres, size=(size // bl, size // bl)), np.ones((bl, bl), int)))
    gt = np.stack(gts).astype(np.uint8)

    def run() -> np.ndarray:
        pr = gt.copy()
        for i in range(n):
            wrong = np.kron(rng.random((size // bl, size // bl)) < q[i], np.ones((bl, bl), bool))
            lab = np.kron(rng.integers(0, k, (size // bl, size // bl)), np.ones((bl, bl), int))
            pr[i][wrong] = lab[wrong]
        return pr

    return gt, run(), run()


def test_noise_on_three_images_never_fails() -> None:
    """The reviewers' r12: 3 shared images, two draws of the same noise. The bootstrap gate
    failed with p ~ 1e-x; the exact swap test cannot go below 2 / 8 = 0.25."""
    rng = np.random.default_rng(77)
    docs = []
    for _ in range(40):
        gt, a, b = _noise_runs(rng, 3)
        docs.append(compare_states(_state(gt, a, 6), _state(gt, b, 6), resamples=200).to_dict())
    assert [d["reasons"] for d in docs if d["failed"]] == []
    for doc in docs:
        assert doc["test"]["exact"]
        assert doc["miou"]["p_value"] >= 0.25
        assert all(c["p_value"] is None or c["p_value"] >= 0.25 for c in doc["classes"])


def test_false_failures_under_no_difference_stay_near_alpha() -> None:
    """Bounded null simulation, 10 images (exact: 1,024 swaps): mIoU p < 0.05 in about 5 % of
    comparisons (the bootstrap's normal approximation: 12 % at 5 images, 29 % at 2), and some
    class significant after Holm in at most about 5 %."""
    rng = np.random.default_rng(2024)
    runs, sig_m, sig_c = 120, 0, 0
    for _ in range(runs):
        gt, a, b = _noise_runs(rng, 10)
        doc = compare_states(_state(gt, a, 6), _state(gt, b, 6), resamples=20).to_dict()
        sig_m += doc["miou"]["p_value"] < 0.05
        sig_c += any(c["change"] in ("worse", "better") for c in doc["classes"])
    # binomial(120, 0.05): mean 6, P(>= 15) < 0.001
    assert sig_m <= 14, sig_m
    assert sig_c <= 14, sig_c


def test_the_number_of_swaps_lets_holm_resolve_every_class() -> None:
    assert auto_permutations(1000, 19, 0.05) == 1000
    assert auto_permutations(1000, 150, 0.05) == 6040  # 1 / 6041 < 0.05 / 150
    assert auto_permutations(200, 3, 0.01) == 800
    assert attainable_p(1) == 1.0
    assert attainable_p(5) == 0.0625
    gt, base, cand = _worse_everywhere(40, 1)
    b, c = _state(gt, base, 3), _state(gt, cand, 3)
    doc = compare_states(b, c, resamples=100, alpha=0.01).to_dict()
    assert doc["test"]["permutations"] == auto_permutations(100, 3, 0.01) == 800
    assert doc["test"]["swaps"] == 800
    assert doc["test"]["exact"] is False
    assert doc["test"]["units"] == 40
    assert doc["test"]["differing_units"] == 40
    assert compare_states(b, c, resamples=100, permutations=321).to_dict()["test"]["swaps"] == 321
    # the same seed, the same swaps
    assert compare_states(b, c, resamples=50, seed=4).to_dict() == (
        compare_states(b, c, resamples=50, seed=4).to_dict())  # fmt: skip
    for bad in (0, -3, 2.5, True):
        with pytest.raises(UsageError, match="permutations"):
            compare_states(b, c, resamples=50, permutations=bad)  # type: ignore[arg-type]


def test_cli_permutations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gt, base, cand = _worse_everywhere(10, 1)
    a = _state(gt, base, 3).save(tmp_path / "a.json")
    b = _state(gt, cand, 3).save(tmp_path / "b.json")
    assert main(["compare", str(a), str(b), "--format", "json", "--bootstrap", "100",
                 "--permutations", "500"]) == 1  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    # 10 differing images: 512 swap sets, cheaper than 500 random swaps over 3 classes
    assert (doc["test"]["permutations"], doc["test"]["exact"]) == (500, True)
    assert (doc["test"]["swaps"], doc["test"]["random_swaps"]) == (1024, 0)
    assert main(["compare", str(a), str(b), "--bootstrap", "100", "--permutations", "1024"]) == 1
    text = capsys.readouterr().out
    assert ("p-values: paired randomization (swap) test over 10 images (the runs differ in 10), "
            "all 1,024 swaps (exact); alpha 0.05") in text  # fmt: skip
    assert "intervals: paired percentile bootstrap, 100 resamples, seed 0" in text


def _tiny_runs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reviewers' g4: a baseline with a few errors, a candidate predicting class 0 everywhere."""
    rng = np.random.default_rng(0)
    gt = np.zeros((n, 40, 40), np.uint8)
    for i in range(n):
        gt[i, :, 10 + 5 * i :] = 1
        gt[i, 20 + 3 * i :, :] = 2
    base = gt.copy()
    e = rng.random(gt.shape) < 0.05
    base[e] = (gt[e] + 1) % 3
    return gt, base, np.zeros_like(gt)


def test_too_few_differing_images_give_no_verdict_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 images: the smallest p-value the swap test can give is 2 / 8 = 0.25, so no drop can
    be significant; the gate says so instead of a bare PASS (exit code 0 still)."""
    from segiou.report.gate import render_comparison_markdown, render_comparison_text

    gt, base, cand = _tiny_runs(3)
    comp = compare_states(_state(gt, base, 3), _state(gt, cand, 3), resamples=100)
    doc = comp.to_dict()
    assert not comp.failed
    assert comp.verdict_possible is False
    reason = ("no verdict possible: the runs differ in 3 of 3 shared images, so the smallest "
              "p-value the swap test can give is 0.25, not below alpha 0.05")  # fmt: skip
    assert comp.no_verdict_reason is not None
    assert comp.no_verdict_reason.startswith(reason)
    assert doc["verdict_possible"] is False
    assert doc["test"]["smallest_p"] == 0.25
    assert doc["miou"]["delta"] < -0.5
    assert doc["miou"]["change"] == "no verdict"
    assert all(c["change"] == "no verdict" for c in doc["classes"])
    text = render_comparison_text(doc)
    assert text.startswith(f"segiou compare: NO VERDICT\nwarning: {reason}")
    assert "PASS" not in text
    assert "no significant change" not in text
    md = render_comparison_markdown(doc)
    assert md.startswith(f"### segiou gate: **NO VERDICT**\n\n> **Warning:** {reason}")
    assert "PASS" not in md
    a = _state(gt, base, 3).save(tmp_path / "a.json")
    b = _state(gt, cand, 3).save(tmp_path / "b.json")
    assert main(["compare", str(a), str(b), "--format", "json", "--bootstrap", "50"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["verdict_possible"] is False
    assert got["no_verdict_reason"].startswith(reason)
    assert main(["compare", str(a), str(b), "--bootstrap", "50"]) == 0
    assert capsys.readouterr().out.startswith("segiou compare: NO VERDICT\nwarning: ")
    # 6 differing images: 2 / 64 < 0.05, a verdict (here a failure)
    gt6, base6, cand6 = _tiny_runs(6)
    six = compare_states(_state(gt6, base6, 3), _state(gt6, cand6, 3), resamples=50)
    assert six.verdict_possible
    assert six.no_verdict_reason is None
    assert six.failed
    assert six.to_dict()["miou"]["change"] == "worse"
    # a run against itself: nothing differs, nothing to decide: a pass, not "no verdict"
    same = compare_states(_state(gt, base, 3), _state(gt, base, 3), resamples=50).to_dict()
    assert same["verdict_possible"] is True
    assert same["miou"]["change"] == "no significant change"
    assert render_comparison_text(same).startswith("segiou compare: PASS\ncandidate ")


def test_another_rule_still_fails_without_a_verdict_on_the_scores() -> None:
    """Two images, and the candidate predicts an unexpected value on every pixel of class 2:
    the lost class fails (exit 1) whatever the test could say; the warning is still shown."""
    from segiou.report.gate import render_comparison_text

    gt, base, _ = _tiny_runs(2)
    lost = base.copy()
    lost[gt == 2] = 77

    def counted(pred: np.ndarray) -> ConfusionMatrix:
        cm = ConfusionMatrix(3, ignore_index=255, on_unexpected="count", per_image=True)
        return cm.update(gt, pred, names=["a", "b"])

    comp = compare_states(counted(base), counted(lost), resamples=50)
    assert comp.failed
    assert not comp.verdict_possible
    text = render_comparison_text(comp.to_dict())
    assert text.startswith("segiou compare: FAIL\nwarning: no verdict possible: the runs differ ")
    assert "class '2': 1,480 of its ground-truth pixels in the shared images are predicted" in text


def test_gate_intervals_over_a_single_image_are_undefined() -> None:
    """The reviewers' r9/r14: one shared image gave the mIoU difference the "95% interval"
    [-59.44, -59.44], reading as certainty."""
    gt, base, cand = _tiny_runs(1)
    doc = compare_states(_state(gt, base, 3), _state(gt, cand, 3), resamples=100).to_dict()
    assert doc["miou"]["delta"] < 0
    assert doc["miou"]["interval"] is None
    assert all(c["interval"] is None and c["units"] == 1 for c in doc["classes"])
    assert doc["bootstrap"]["note"] == ("1 image with counted pixels: no interval (every "
                                        "resample draws it alone)")  # fmt: skip
    gt2, base2, cand2 = _tiny_runs(2)
    both = compare_states(_state(gt2, base2, 3), _state(gt2, cand2, 3), resamples=100).to_dict()
    assert both["miou"]["interval"] is not None
    assert both["bootstrap"]["note"] is None
