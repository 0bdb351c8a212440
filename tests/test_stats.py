"""Bootstrap intervals (segiou.stats): each resample exact, intervals that behave.

The promises checked here: every resample's metrics are those of the resampled images' counts
summed (checked against the oracle, counting each drawn image again); identical images give
zero-width intervals; a seed gives the same intervals; 95% intervals cover a known population
value about 95% of the time; groups of identical frames resample like the scenes they show; a
state without per-image entries is refused saying why.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from segiou import ConfusionMatrix, LabelSpec, evaluate
from segiou.errors import UsageError
from segiou.images import ImageRows
from segiou.stats import bootstrap, evaluate_with_intervals, resample_weights
from segiou.testing.synthetic import cityscapes_like


def _images(seed: int, n: int, k: int = 5, hw: tuple[int, int] = (6, 7)):
    """Random masks with ignored, void and (count mode) unexpected pixels."""
    rng = np.random.default_rng(seed)
    gt = rng.integers(0, k, size=(n, *hw)).astype(np.int16)
    pred = np.where(rng.random(gt.shape) < 0.6, gt, rng.integers(0, k, size=gt.shape))
    pred = pred.astype(np.int16)
    gt[rng.random(gt.shape) < 0.1] = 255  # ignored
    pred[rng.random(pred.shape) < 0.05] = 255  # void
    gt[rng.random(gt.shape) < 0.02] = 40  # unexpected ground truth
    pred[rng.random(pred.shape) < 0.02] = -3  # unexpected prediction
    return gt, pred


def _spec(k: int, categories: bool) -> LabelSpec:
    if not categories:
        return LabelSpec.from_num_classes(k, ignore=255)
    return LabelSpec("cats", tuple(f"c{i}" for i in range(k)), ignore=(255,),
                     categories=("a", "b"), class_categories=tuple(i % 2 for i in range(k)))  # fmt: skip


def _state(gt: np.ndarray, pred: np.ndarray, spec: LabelSpec) -> ConfusionMatrix:
    cm = ConfusionMatrix(spec, on_unexpected="count", per_image=True)
    # names in the reverse of the images' order: resamples draw images in name order
    return cm.update(gt, pred, names=[f"im{len(gt) - i}" for i in range(len(gt))])


def _weighted_oracle(gt, pred, k, weights):
    """The counts of a resample: each image counted (by the oracle) as often as it was drawn."""
    total = reference.Counts(np.zeros((k, k), np.int64), np.zeros(k, np.int64))
    for i, w in enumerate(weights):
        one = reference.confusion(gt[i], pred[i], k, ignore=[255])
        for _ in range(int(w)):
            total = reference.add(total, one)
    return total


@settings(deadline=None, max_examples=25)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 6), boot_seed=st.integers(0, 2**32),
       categories=st.booleans(),
       preset=st.sampled_from(["segiou", "detectron2", "torchmetrics", "sklearn_all_labels"]))  # fmt: skip
def test_every_resample_is_the_sum_of_its_images(seed, n, boot_seed, categories, preset):
    k = 5
    gt, pred = _images(seed, n, k)
    spec = _spec(k, categories)
    cm = _state(gt, pred, spec)
    b = bootstrap(cm, preset=preset, resamples=6, seed=boot_seed)
    weights = resample_weights(n, 6, seed=boot_seed)
    for r in range(6):
        ref = _weighted_oracle(gt, pred, k, weights[r][::-1])  # unit j: the j-th name
        want = evaluate(ref.counts, void=ref.void, spec=spec, preset=preset)
        got = {key: v[r] for key, v in b.replicates.items()}
        pc = want.per_class
        present = (pc["tp"] + pc["fp"] + pc["fn"]) > 0  # absent from the resample: no value
        np.testing.assert_allclose(got["iou"], np.where(present, pc["iou"], np.nan), rtol=1e-12)
        for key in ("miou", "fwiou", "pixel_accuracy", "mean_accuracy", "kappa"):
            np.testing.assert_allclose(got[key], want.summary[key], rtol=1e-12, atol=1e-15)
        if categories:
            cc = want.categories
            cpresent = (cc["tp"] + cc["fp"] + cc["fn"]) > 0
            np.testing.assert_allclose(got["category_iou"],
                                       np.where(cpresent, cc["iou"], np.nan), rtol=1e-12)  # fmt: skip
            np.testing.assert_allclose(got["category_miou"], want.summary["category_miou"],
                                       rtol=1e-12)  # fmt: skip
        if preset == "segiou":  # and against the oracle's own formulas, not only evaluate()
            np.testing.assert_allclose(got["iou"], reference.iou(ref.counts, ref.void), rtol=1e-12)
            assert got["miou"] == pytest.approx(
                reference.mean_present(reference.iou(ref.counts, ref.void), ref.counts, ref.void),
                rel=1e-12,
                nan_ok=True,
            )
            assert got["kappa"] == pytest.approx(reference.kappa(ref.counts, ref.void),
                                                 rel=1e-12, nan_ok=True)  # fmt: skip
            assert got["fwiou"] == pytest.approx(reference.fw_iou(ref.counts, ref.void),
                                                 rel=1e-12, nan_ok=True)  # fmt: skip
            if categories:
                np.testing.assert_allclose(
                    got["category_iou"],
                    reference.category_iou(ref.counts, spec.class_categories, 2, ref.void),
                    rtol=1e-12,
                )


def test_weights_draw_every_unit_count_times():
    w = resample_weights(50, 600, seed=3)
    assert w.shape == (600, 50)
    assert (w.sum(axis=1) == 50).all()
    # each unit is drawn Binomial(50, 1/50) times: mean 1
    assert w.mean() == pytest.approx(1.0)
    assert 0.95 < w.var() < 1.05  # Binomial variance 50 * (1/50) * (49/50) = 0.98
    np.testing.assert_array_equal(w[:300], resample_weights(50, 300, seed=3))  # blocks stream


def test_identical_images_give_zero_width_intervals():
    g, p = cityscapes_like(1, 64, 128, seed=2)
    gt, pred = np.repeat(g, 12, axis=0), np.repeat(p, 12, axis=0)
    cm = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
    cm.update(gt, pred, names=[f"f{i}" for i in range(12)])
    r = evaluate_with_intervals(cm, preset="cityscapes", resamples=200)
    for key, (lo, hi) in r.intervals["summary"].items():
        assert lo == pytest.approx(hi, rel=1e-12), key
        assert lo == pytest.approx(r.summary[key], rel=1e-12), key
    for c, iv in enumerate(r.intervals["classes"]["iou"]):
        if math.isnan(r.per_class["iou"][c]):
            assert iv is None
        else:
            assert iv[0] == pytest.approx(iv[1], rel=1e-12)


def test_seed_reproduces_and_changes_intervals():
    gt, pred = cityscapes_like(30, 32, 64, seed=4)
    cm = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True).update(gt, pred, key="a")
    a = evaluate_with_intervals(cm, resamples=300, seed=7).intervals
    b = evaluate_with_intervals(cm, resamples=300, seed=7).intervals
    c = evaluate_with_intervals(cm, resamples=300, seed=8).intervals
    assert a == b
    assert a["summary"] != c["summary"]
    assert a["seed"] == 7
    assert a["resamples"] == 300


def test_intervals_do_not_depend_on_the_order_batches_arrived_in():
    """Two producers, either first (a service run): the same images give the same intervals
    (images are drawn in name order; they were drawn in arrival order)."""
    gt, pred = cityscapes_like(12, 32, 64, seed=5)
    names = [f"img{i}" for i in range(12)]  # (img10 sorts before img2: not arrival order)

    def run(order: list[slice]) -> dict:
        cm = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
        for s in order:
            cm.update(gt[s], pred[s], key=f"{s.start}", names=names[s])
        return evaluate_with_intervals(cm, resamples=200, seed=3).intervals

    halves = [slice(0, 5), slice(5, 12)]
    assert run(halves) == run(halves[::-1])


def _dirichlet_rows(rng: np.random.Generator, n: int, alpha: np.ndarray) -> ImageRows:
    """n images: each a multinomial of N_i pixels over the K x K cells, cell probabilities ~ Dir."""
    k = math.isqrt(alpha.size)
    tables = np.zeros((n, k + 2, k + 2), dtype=np.int64)
    sizes = rng.integers(500, 1500, size=n)
    probs = rng.dirichlet(alpha, size=n)
    for i in range(n):
        tables[i, :k, :k] = rng.multinomial(sizes[i], probs[i]).reshape(k, k)
    return ImageRows.from_tables(tables)


def test_intervals_cover_the_population_value():
    """95% intervals of mIoU and class IoU cover the population value in ~95% of datasets.

    Each image is a multinomial draw over the cells with its own Dirichlet cell probabilities
    (images differ a lot); the population IoU is the ratio of expected counts, which is what
    dataset IoU estimates. 300 datasets of 150 images each: the binomial standard deviation of
    the coverage is 1.3 points.
    """
    k = 3
    alpha = np.array([[6.0, 1.0, 0.5], [1.5, 3.0, 0.8], [0.4, 0.6, 2.5]]).ravel()
    p = (alpha / alpha.sum()).reshape(k, k)
    tp = np.diag(p)
    true_iou = tp / (p.sum(axis=0) + p.sum(axis=1) - tp)
    true_miou = true_iou.mean()
    spec = LabelSpec.from_num_classes(k)
    rng = np.random.default_rng(11)
    hits_m, hits_c, trials = 0, np.zeros(k), 300
    for t in range(trials):
        rows = _dirichlet_rows(rng, 150, alpha)
        b = bootstrap(rows, spec=spec, resamples=400, seed=t)
        iv = b.intervals(0.95)
        lo, hi = iv["summary"]["miou"]
        hits_m += lo <= true_miou <= hi
        for c in range(k):
            lo, hi = iv["classes"]["iou"][c]
            hits_c[c] += lo <= true_iou[c] <= hi
    assert 0.90 <= hits_m / trials <= 0.99
    assert ((hits_c / trials >= 0.90) & (hits_c / trials <= 0.99)).all(), hits_c / trials


def test_groups_of_identical_frames_resample_like_their_scenes():
    """Video: 8 scenes x 5 identical frames. Resampling frames pretends there are 40 independent
    images (too narrow); resampling scenes gives exactly the intervals of the 8 scenes."""
    g, p = cityscapes_like(8, 32, 64, seed=9)
    scenes = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
    scenes.update(g, p, names=[f"s{i}" for i in range(8)])
    frames = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
    frames.update(np.repeat(g, 5, axis=0), np.repeat(p, 5, axis=0),
                  names=[f"s{i}-f{j}" for i in range(8) for j in range(5)])  # fmt: skip
    groups = [f"s{i}" for i in range(8) for _ in range(5)]
    by_scene = evaluate_with_intervals(scenes, resamples=500, seed=1).intervals
    grouped = evaluate_with_intervals(frames, resamples=500, seed=1, groups=groups).intervals
    by_frame = evaluate_with_intervals(frames, resamples=500, seed=1).intervals
    assert grouped["unit"] == "group:group"
    for key in by_scene["summary"]:
        np.testing.assert_allclose(grouped["summary"][key], by_scene["summary"][key], rtol=1e-12)
        w_frame = np.diff(by_frame["summary"][key])[0]
        w_group = np.diff(grouped["summary"][key])[0]
        assert w_frame < 0.7 * w_group, key  # frames as images: falsely sure


def test_result_document_has_the_contract_fields(tmp_path: Path):
    gt, pred = cityscapes_like(6, 32, 64, seed=5)
    cm = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True).update(gt, pred, key="a")
    r = evaluate_with_intervals(cm, preset="cityscapes", resamples=100, seed=3, level=0.9)
    doc = json.loads(r.to_json(), parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))
    assert doc["version"] == 3
    iv = doc["intervals"]
    assert set(iv) == {"method", "unit", "units", "resamples", "level", "seed", "summary",
                       "classes", "categories", "note"}  # fmt: skip
    assert iv["units"] == 6
    assert (iv["method"], iv["unit"], iv["resamples"], iv["level"], iv["seed"]) == (
        "percentile bootstrap", "image", 100, 0.9, 3)  # fmt: skip
    assert set(iv["summary"]) == {"miou", "fwiou", "pixel_accuracy", "mean_accuracy", "kappa",
                                  "category_miou"}  # fmt: skip
    assert len(iv["classes"]["iou"]) == 19
    assert len(iv["categories"]["iou"]) == 7
    for c, item, units in zip(doc["classes"], iv["classes"]["iou"], iv["classes"]["units"],
                              strict=True):  # fmt: skip
        # (a class held by a single image has no interval either)
        assert (item is None) == (c["iou"] is None or units < 2)
    assert doc["slices"] is None
    # no categories: categories is null, and category_miou has no interval
    plain = _state(*_images(1, 4), _spec(5, categories=False))
    d2 = evaluate_with_intervals(plain, resamples=10).to_dict()["intervals"]
    assert d2["categories"] is None
    assert "category_miou" not in d2["summary"]


def test_resamples_zero_gives_no_intervals():
    gt, pred = cityscapes_like(3, 16, 32, seed=5)
    cm = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True).update(gt, pred, key="a")
    assert evaluate_with_intervals(cm, resamples=0).intervals is None


def test_refuses_states_without_per_image_entries():
    gt, pred = cityscapes_like(2, 16, 32, seed=5)
    flat = ConfusionMatrix("cityscapes", gt_ids="class").update(gt, pred, key="a")
    with pytest.raises(UsageError, match="per_image=False"):
        evaluate_with_intervals(flat)
    v1 = ConfusionMatrix.load(Path(__file__).parent / "data" / "confusion_v1_per_image.json")
    with pytest.raises(UsageError, match="version-1 state"):
        evaluate_with_intervals(v1)
    empty = ConfusionMatrix(3, per_image=True)
    with pytest.raises(UsageError, match="holds no image"):
        bootstrap(empty)
    cm = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True).update(gt, pred, key="a")
    for bad in ({"resamples": -1}, {"seed": -2}, {"level": 1.0}, {"groups": "city"}):
        with pytest.raises(UsageError):
            evaluate_with_intervals(cm, **bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="group label"):
        bootstrap(cm, groups=["a"])


@pytest.mark.parametrize("preset", ["segiou", "detectron2", "torchmetrics", "sklearn_all_labels"])
def test_a_class_interval_is_over_the_resamples_where_it_is_present(preset: str) -> None:
    # class 2 is in 2 images of 12 and scores 0.75 wherever it is; class 3 is nowhere
    k = 4
    gt = np.zeros((12, 4, 4), np.uint8)
    pred = gt.copy()
    gt[:2, 0, :4] = 2
    pred[:2, 0, :3] = 2
    cm = ConfusionMatrix(k, per_image=True).update(gt, pred, key="a")
    r = evaluate_with_intervals(cm, preset=preset, resamples=200, seed=1)
    iv = r.intervals["classes"]["iou"]
    assert iv[2] == [0.75, 0.75]  # (not down to the preset's 0 where the class is absent)
    assert iv[3] is None  # undefined everywhere (the preset may report it as 0): no interval
    assert r.intervals["classes"]["units"] == [12, 0, 2, 0]
    # in 1 image (this test's old case, which expected [0.75, 0.75]): every resample that
    # has the class has that image alone, a zero width that is no certainty: no interval
    gt[1, 0] = pred[1, 0] = 0
    cm = ConfusionMatrix(k, per_image=True).update(gt, pred, key="a")
    r = evaluate_with_intervals(cm, preset=preset, resamples=200, seed=1)
    assert r.per_class["iou"][2] == 0.75
    assert r.intervals["classes"]["iou"][2] is None
    assert r.intervals["classes"]["units"][2] == 1
    assert r.intervals["note"] == (
        "1 class held by a single image: no interval (every resample gives the same value)")  # fmt: skip


def test_one_image_has_no_intervals_and_says_why() -> None:
    """The reviewers' r14: one image gave mIoU "95% CI" [0.7316, 0.7316], a class seen in one
    image of 30 [0.6667, 0.6667]: zero widths reading as certainty."""
    rng = np.random.default_rng(0)
    gt = rng.integers(0, 3, (30, 8, 8))
    pr = np.where(rng.random(gt.shape) < 0.8, gt, rng.integers(0, 3, gt.shape))
    gt[7, :3, :3] = 3  # class 3 only in image 7: TP 6, FN 3
    pr[7, :3, :2] = 3
    cm = ConfusionMatrix(4, per_image=True).update(gt, pr, names=[f"im{i:02d}" for i in range(30)])
    r = evaluate_with_intervals(cm, resamples=300, seed=0)
    assert r.per_class["iou"][3] == pytest.approx(2 / 3)
    assert r.intervals["classes"]["iou"][3] is None
    assert r.intervals["classes"]["units"][3] == 1
    assert r.intervals["summary"]["miou"] is not None
    one = ConfusionMatrix(4, per_image=True).update(gt[:1], pr[:1], names=["only"])
    r1 = evaluate_with_intervals(one, resamples=300, seed=0)
    assert r1.intervals["units"] == 1
    assert all(v is None for v in r1.intervals["summary"].values())
    assert all(v is None for v in r1.intervals["classes"]["iou"])
    assert r1.intervals["note"].startswith("1 image with counted pixels: no interval")
    # groups: one group of frames is one unit, however many frames
    frames = ConfusionMatrix(4, per_image=True).update(gt[:5], pr[:5], names=list("abcde"))
    g = evaluate_with_intervals(frames, resamples=100, groups=["s"] * 5)
    assert g.intervals["units"] == 1
    assert g.intervals["summary"]["miou"] is None
    assert g.intervals["note"].startswith("1 group with counted pixels")


def test_intervals_do_not_depend_on_the_order_keyless_states_were_merged_in() -> None:
    """The reviewers' r5: images counted without names or keys are labelled by their row
    (#0, #1, ...); merged, the labels repeat, and a stable sort by name left them in merge
    order: a + b and b + a gave different intervals."""
    gt, pred = cityscapes_like(12, 16, 32, seed=4)

    def keyless(lo: int, hi: int) -> ConfusionMatrix:
        cm = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
        for i in range(lo, hi):
            cm.update(gt[i : i + 1], pred[i : i + 1])  # no key, no names
        return cm

    a, b = keyless(0, 6), keyless(6, 12)
    assert list((a + b).images.names).count("#0") == 2
    ab = evaluate_with_intervals(a + b, resamples=300, seed=0)
    ba = evaluate_with_intervals(b + a, resamples=300, seed=0)
    assert ab.miou == ba.miou
    assert ab.intervals == ba.intervals
