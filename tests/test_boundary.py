"""Boundary IoU equals the plain reference (scipy's erosion), in memory and out of core.

The reference (``reference.boundary_counts``) erodes each class with scipy, image by image.
Adversarial masks: structures thinner than ``2d``, classes touching the image border, classes
present on one side only, ignore regions inside a class, images smaller than the square. The
engine is checked for several chunkings (1 x 1 chunks included), tasks split into bands and
several schedulers: the counts are identical integers.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

import segiou
from segiou import BoundaryWidth, ConfusionMatrix
from segiou.cli import main
from segiou.errors import UsageError
from segiou.io.zarr import create_stack
from segiou.parallel import count_stores
from segiou.testing.synthetic import cityscapes_like

pytest.importorskip("scipy")


def _reference(gt: np.ndarray, pred: np.ndarray, k: int, d: int) -> np.ndarray:
    return sum(reference.boundary_counts(g, p, k, d) for g, p in zip(gt, pred, strict=True))


def adversarial(k: int = 4, h: int = 30, w: int = 41) -> tuple[np.ndarray, np.ndarray]:
    """Masks built to break an erosion: thin lines, border classes, one-sided classes, holes."""
    gt = np.zeros((h, w), np.uint8)
    gt[:, :3] = 1  # class 1 touches the left border, thinner than 2d
    gt[5:25, 10:30] = 2  # a block with an ignore hole inside
    gt[12:15, 18:21] = 255
    gt[0, :] = 3  # one-pixel line along the top border
    gt[:, 35] = 3  # one-pixel vertical line
    gt[20:, 36:] = 2  # touches the bottom-right corner
    pred = gt.copy()
    pred[5:25, 10:30] = 2
    pred[8:10, :] = 1  # a thin band only predicted, across everything
    pred[gt == 3] = 0  # class 3 absent from the prediction
    pred[26:, 5:9] = k - 1 if k > 3 else 0
    return gt, pred


@pytest.mark.parametrize("d", [1, 2, 3, 5, 8, 20])
def test_adversarial_masks_equal_the_reference(d: int) -> None:
    gt, pred = adversarial()
    cm = ConfusionMatrix(4, ignore_index=255, boundary=f"{d}px")
    cm.update(gt, pred, key="a")
    assert_array_equal(cm.extras.boundary_total, reference.boundary_counts(gt, pred, 4, d))
    r = segiou.evaluate(cm)
    assert r.boundary is not None
    assert r.boundary["pixels_used"] == [d]


@settings(deadline=None, max_examples=60)
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.tuples(st.integers(1, 40), st.integers(1, 70)),
    k=st.integers(1, 5),
    d=st.integers(1, 9),
    cell=st.integers(1, 9),
    dtype=st.sampled_from(["uint8", "uint16", "int32", "int64"]),
)
def test_random_masks_equal_the_reference(seed, shape, k, d, cell, dtype) -> None:
    rng = np.random.default_rng(seed)
    h, w = shape
    coarse = rng.integers(0, k + 1, (h // cell + 1, w // cell + 1))
    gt = np.repeat(np.repeat(coarse, cell, 0), cell, 1)[:h, :w]
    gt = np.where(gt == k, 255, gt)  # ignore regions
    pred = np.where(rng.random(gt.shape) < 0.15, rng.integers(0, k + 1, gt.shape), gt)
    pred = np.where(pred == k, 255, pred)  # void predictions
    gt, pred = gt.astype(dtype), pred.astype("uint8" if dtype == "int64" else dtype)
    cm = ConfusionMatrix(k, ignore_index=255, boundary=f"{d}px", per_image=True)
    cm.update(gt, pred, key="a", names=["a"])  # a named image keeps its own rows
    want = reference.boundary_counts(gt, pred, k, d)
    assert_array_equal(cm.extras.boundary_total, want)
    assert_array_equal(cm.extras.boundary_images["a"], want)


def test_raw_ids_with_several_ids_per_class_equal_the_reference() -> None:
    # Cityscapes labelIds: many raw ids are ignored; compare in class ids
    gt, pred = cityscapes_like(2, 48, 96, seed=3, label_ids=True)
    spec = segiou.labels.builtin_spec("cityscapes")
    lut = np.full(256, 255, np.uint8)
    for r in spec.raw:
        if r.cls is not None:
            lut[r.id] = r.cls
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", boundary="4px")
    cm.update(gt, pred, key="a")
    assert_array_equal(cm.extras.boundary_total, _reference(lut[gt], lut[pred], 19, 4))


def test_width_follows_the_image_diagonal() -> None:
    assert BoundaryWidth().pixels_for(1024, 2048) == 46  # round(0.02 * 2289.7)
    assert BoundaryWidth(ratio=0.01).pixels_for(1024, 2048) == 23
    assert BoundaryWidth(ratio=0.02).pixels_for(10, 10) == 1  # at least one pixel
    assert BoundaryWidth.parse("5px") == BoundaryWidth(ratio=None, pixels=5)
    assert BoundaryWidth.parse(True) == BoundaryWidth(ratio=0.02)
    assert BoundaryWidth.parse(None) is None
    for bad in (5, "abc", 0.0, 2.0, "0px", "-3px"):
        with pytest.raises(UsageError):
            BoundaryWidth.parse(bad)
    gt, pred = cityscapes_like(1, 64, 128, seed=1)
    cm = ConfusionMatrix(19, ignore_index=255, boundary=True)
    cm.update(gt, pred, key="a")
    d = round(0.02 * np.hypot(64, 128))
    assert_array_equal(cm.extras.boundary_total, _reference(gt, pred, 19, d))
    r = segiou.evaluate(cm).to_dict()["boundary"]
    assert r["width"] == {"ratio": 0.02}
    assert r["pixels_used"] == [d]


def test_off_by_default_and_results_are_data() -> None:
    gt, pred = adversarial()
    cm = ConfusionMatrix(4, ignore_index=255)
    cm.update(gt, pred, key="a")
    assert cm.boundary is None
    assert segiou.evaluate(cm).to_dict()["boundary"] is None
    on = ConfusionMatrix(4, ignore_index=255, boundary="2px")
    on.update(gt, pred, key="a")
    doc = json.loads(segiou.evaluate(on).to_json())["boundary"]
    ref = reference.boundary_counts(gt, pred, 4, 2)
    for c, row in enumerate(doc["classes"]):
        i, g, p = (int(v) for v in ref[:, c])
        assert (row["intersection"], row["gt"], row["pred"]) == (i, g, p)
        want = None if g + p - i == 0 else i / (g + p - i)
        assert row["iou"] == pytest.approx(want) if want is not None else row["iou"] is None


def test_states_with_boundary_merge_and_round_trip() -> None:
    gt, pred = cityscapes_like(4, 32, 48, seed=5)
    whole = ConfusionMatrix(19, ignore_index=255, boundary="3px", per_image=True)
    whole.update(gt, pred, key="all", names=list("abcd"))
    a = ConfusionMatrix(19, ignore_index=255, boundary="3px", per_image=True)
    a.update(gt[:2], pred[:2], key="x", names=list("ab"))
    b = ConfusionMatrix(19, ignore_index=255, boundary="3px", per_image=True)
    b.update(gt[1:], pred[1:], key="y", names=list("bcd"))  # image b counted on both sides
    merged = a + b
    assert_array_equal(merged.extras.boundary_total, whole.extras.boundary_total)
    assert ConfusionMatrix.from_dict(merged.to_dict()) == merged
    assert merged.to_dict()["version"] == 3
    other = ConfusionMatrix(19, ignore_index=255, boundary="4px", per_image=True)
    with pytest.raises(segiou.errors.IncompatibleMatrixError, match="boundary"):
        a + other


def test_images_with_one_label_keep_their_boundary_counts_through_merges_and_files() -> None:
    # per-image Boundary IoU rows are kept for named images only (the ones a merge matches);
    # labelled images ('#0' of two keyless states, a key 'a/0' beside batch 'a') add to the
    # totals. Kept per label, the second overwrote the first: the state saved, then failed to load
    gt, pred = cityscapes_like(4, 32, 48, seed=6)
    whole = ConfusionMatrix(19, ignore_index=255, boundary="1px", per_image=True).update(gt, pred)

    def cm() -> ConfusionMatrix:
        return ConfusionMatrix(19, ignore_index=255, boundary="1px", per_image=True)

    parts = [cm().update(gt[i : i + 1], pred[i : i + 1]) for i in range(3)]  # each has '#0'
    keyed = cm().update(gt[3:], pred[3:], key="a/0")  # the label of batch 'a''s first image
    merged = parts[0] + parts[1] + parts[2] + keyed
    assert_array_equal(merged.extras.boundary_total, whole.extras.boundary_total)
    assert merged.extras.boundary_images == {}
    loaded = ConfusionMatrix.from_dict(json.loads(json.dumps(merged.to_dict())))
    assert loaded == merged
    assert_array_equal(loaded.extras.boundary_total, whole.extras.boundary_total)
    assert (
        segiou.evaluate(loaded).to_dict()["boundary"]
        == segiou.evaluate(whole).to_dict()["boundary"]
    )
    pickle_round = ConfusionMatrix.from_dict(merged.to_dict()) + cm().update(
        gt[:2], pred[:2], key="a"
    )
    assert pickle_round.n_images == 6

    named = cm().update(gt[:2], pred[:2], names=["x", "y"])
    both = named + cm().update(gt[1:3], pred[1:3], names=["y", "z"])  # 'y' on both sides: once
    assert sorted(both.extras.boundary_images) == ["x", "y", "z"]
    assert_array_equal(both.extras.boundary_total,
                       cm().update(gt[:3], pred[:3]).extras.boundary_total)  # fmt: skip
    mixed = both + parts[0]
    d = mixed.to_dict()
    assert sorted(d["boundary"]["images"]) == ["x", "y", "z"]
    assert ConfusionMatrix.from_dict(d) == mixed


@pytest.mark.parametrize("seed", range(6))
def test_merge_trees_of_named_and_labelled_states_equal_the_whole(seed: int) -> None:
    # parts of one set, counted keyless ('#0' in every part), keyed or named, merged in a
    # random tree with a file round trip at every step: the whole, whatever the order
    import random

    gt, pred = cityscapes_like(10, 16, 24, seed=3)
    whole = ConfusionMatrix(19, ignore_index=255, boundary="1px", per_image=True).update(gt, pred)
    rng = random.Random(seed)
    parts, i = [], 0
    while i < len(gt):
        n = min(rng.randint(1, 3), len(gt) - i)
        cm = ConfusionMatrix(19, ignore_index=255, boundary="1px", per_image=True)
        sl, mode = slice(i, i + n), rng.choice(["keyless", "key", "names"])
        if mode == "keyless":
            cm.update(gt[sl], pred[sl])
        elif mode == "key":
            cm.update(gt[sl], pred[sl], key=f"b{i}")
        else:
            cm.update(gt[sl], pred[sl], names=[f"im{j}" for j in range(i, i + n)])
        parts.append(cm)
        i += n
    while len(parts) > 1:
        a = parts.pop(rng.randrange(len(parts)))
        b = parts.pop(rng.randrange(len(parts)))
        assert a + b == b + a
        parts.append(ConfusionMatrix.from_dict(json.loads(json.dumps((a + b).to_dict()))))
    merged = parts[0]
    assert_array_equal(merged.extras.boundary_total, whole.extras.boundary_total)
    assert_array_equal(merged.counts, whole.counts)
    assert merged.n_images == len(gt)
    assert all(n.startswith("im") for n in merged.extras.boundary_images)


def test_a_state_written_with_entries_for_labels_loads() -> None:
    # states written before kept per-image rows for labels too; a merge of keyless states then
    # held one '#0' entry for two images, which did not add up: such a file loads, the labelled
    # entries dropped, its totals intact
    gt, pred = cityscapes_like(2, 32, 48, seed=8)
    a = ConfusionMatrix(19, ignore_index=255, boundary="1px", per_image=True)
    a.update(gt[:1], pred[:1])
    b = ConfusionMatrix(19, ignore_index=255, boundary="1px", per_image=True)
    b.update(gt[1:], pred[1:])
    d = (a + b).to_dict()
    rows = segiou.ConfusionMatrix(19, ignore_index=255, boundary="1px", per_image=True)
    rows.update(gt[1:], pred[1:], names=["#0"])  # the rows the old form wrote for '#0'
    d["boundary"]["images"] = rows.to_dict()["boundary"]["images"]  # one of the two images
    loaded = ConfusionMatrix.from_dict(d)
    assert loaded == a + b
    d["boundary"]["images"]["#0"][1][0] += 10**6  # more than the totals: altered
    with pytest.raises(segiou.errors.CheckpointError, match=r"boundary\.images"):
        ConfusionMatrix.from_dict(d)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    root = tmp_path_factory.mktemp("b")
    gt, pred = cityscapes_like(3, 24, 40, seed=7)
    gt[:, 10:14, 5:35] = 255  # an ignore region inside classes
    return root, gt, pred


@pytest.mark.parametrize("chunks", [(24, 40), (8, 8), (5, 7), (1, 1), (24, 1), (1, 40)])
@pytest.mark.parametrize("pixels_per_task", [1 << 20, 24 * 40 // 2, 40])
def test_engine_equals_the_reference_for_any_chunking(stores, chunks, pixels_per_task) -> None:
    root, gt, pred = stores
    path = root / f"{chunks[0]}x{chunks[1]}.zarr"
    if not path.exists():
        for name, data in (("gt", gt), ("pred", pred)):
            a = create_stack(path, n=3, height=24, width=40, chunks=chunks, path=name,
                             names=["a", "b", "c"])  # fmt: skip
            a[:] = data
    cm = count_stores(path / "gt", path / "pred", labels=19, ignore_index=255, boundary="3px",
                      scheduler="threads", pixels_per_task=pixels_per_task)  # fmt: skip
    assert_array_equal(cm.extras.boundary_total, _reference(gt, pred, 19, 3))
    for i, n in enumerate("abc"):
        assert_array_equal(cm.extras.boundary_images[n],
                           reference.boundary_counts(gt[i], pred[i], 19, 3))  # fmt: skip


def test_engine_results_are_identical_across_schedulers(stores) -> None:
    root, gt, pred = stores
    path = root / "sched.zarr"
    for name, data in (("gt", gt), ("pred", pred)):
        create_stack(path, n=3, height=24, width=40, chunks=(6, 9), path=name)[:] = data
    got = [count_stores(path / "gt", path / "pred", labels=19, ignore_index=255, boundary=True,
                        scheduler=s, pixels_per_task=200).to_dict()
           for s in ("synchronous", "threads", "processes")]  # fmt: skip
    assert got[0] == got[1] == got[2]
    d = round(0.02 * np.hypot(24, 40))
    assert got[0]["boundary"]["counts"] == _reference(gt, pred, 19, d).tolist()


def test_cli_boundary_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gt, pred = cityscapes_like(2, 20, 30, seed=2)
    for name, data in (("gt", gt), ("pred", pred)):
        create_stack(tmp_path / f"{name}.zarr", n=2, height=20, width=30, chunks=(7, 7))[:] = data
    base = ["eval", "--gt", str(tmp_path / "gt.zarr"), "--pred", str(tmp_path / "pred.zarr"),
            "--labels", "19", "--ignore", "255", "--quiet", "--scheduler", "synchronous"]  # fmt: skip
    for opt, d in ((["--boundary"], max(1, round(0.02 * np.hypot(20, 30)))),
                   (["--boundary", "0.1"], round(0.1 * np.hypot(20, 30))),
                   (["--boundary", "2px"], 2)):  # fmt: skip
        out = tmp_path / "r.json"
        assert main([*base, *opt, "--json", str(out)]) == 0
        text = capsys.readouterr().out
        assert "Boundary IoU (width" in text
        assert f": {d} px)" in text
        doc = json.loads(out.read_text())["boundary"]
        assert doc["pixels_used"] == [d]
        ref = _reference(gt, pred, 19, d)
        assert [c["intersection"] for c in doc["classes"]] == ref[0].tolist()
    with pytest.raises(SystemExit) as info:  # an int is neither a ratio nor pixels
        main([*base, "--boundary", "3"])
    assert info.value.code == 2
    assert "boundary" in capsys.readouterr().err


def test_engine_on_image_folders_equals_the_reference(tmp_path: Path) -> None:
    from PIL import Image

    gt, pred = cityscapes_like(3, 20, 33, seed=11)
    for side, data in (("g", gt), ("p", pred)):
        (tmp_path / side).mkdir()
        for i, img in enumerate(data):
            Image.fromarray(img).save(tmp_path / side / f"im{i}.png")
    cm = count_stores(tmp_path / "g", tmp_path / "p", labels=19, ignore_index=255,
                      boundary="4px", scheduler="synchronous")  # fmt: skip
    assert_array_equal(cm.extras.boundary_total, _reference(gt, pred, 19, 4))
    assert detect_dataset_is_plain(tmp_path / "g")


@pytest.mark.parametrize(("h", "w"), [(5, 0), (0, 5)])
def test_an_image_of_no_pixels_in_a_store_counts_nothing(tmp_path: Path, h: int, w: int) -> None:
    """An image 0 pixels wide: Boundary IoU from a store read no chunk and failed (an assert)."""
    import zarr

    for side in ("g", "p"):
        zarr.create_array(tmp_path / side, shape=(2, h, w), chunks=(1, max(h, 1), max(w, 1)),
                          dtype="u1", fill_value=0)  # fmt: skip
    for d in ("2px", 0.5):
        cm = count_stores(tmp_path / "g", tmp_path / "p", labels=3, boundary=d,
                          scheduler="synchronous")  # fmt: skip
        eager = ConfusionMatrix(3, boundary=d).update(*(np.zeros((2, h, w), np.uint8),) * 2)
        assert cm.counts.sum() == 0
        assert_array_equal(cm.extras.boundary_total, eager.extras.boundary_total)


def detect_dataset_is_plain(folder: Path) -> bool:
    from segiou.io.datasets import detect_dataset

    return detect_dataset(folder).dataset is None


@settings(deadline=None, max_examples=40)
@given(
    seed=st.integers(0, 2**31 - 1),
    h=st.integers(1, 30),
    w=st.integers(1, 50),
    d=st.integers(1, 6),
    cuts=st.lists(st.integers(0, 30), max_size=4),
)
def test_bands_with_halos_add_up_to_the_whole(seed, h, w, d, cuts) -> None:
    # the kernel's contract: rows lo..hi of a band read with d rows of halo (clipped at the
    # image) count exactly what the whole image counts there, for any cut into bands
    from segiou._boundary import BandCounter
    from segiou._count import Lookup

    rng = np.random.default_rng(seed)
    gt = np.repeat(rng.integers(0, 4, (h, w // 3 + 1)), 3, axis=1)[:, :w].astype(np.uint8)
    gt[rng.random(gt.shape) < 0.05] = 255
    pred = np.where(rng.random(gt.shape) < 0.2, rng.integers(0, 4, gt.shape), gt).astype(np.uint8)
    lookup = Lookup(3, {0: 0, 1: 1, 2: 2, 255: -1, 3: -1}, {0: 0, 1: 1, 2: 2, 255: -1, 3: -1})
    band = BandCounter(lookup)
    whole = band.count(gt, pred, 0, h, d)
    edges = sorted({0, h, *(c for c in cuts if c < h)})
    parts = np.zeros_like(whole)
    for top, bottom in itertools.pairwise(edges):
        a, b = max(0, top - d), min(h, bottom + d)
        parts += band.count(gt[a:b], pred[a:b], top - a, bottom - a, d)
    assert_array_equal(parts, whole)


def test_a_tampered_boundary_state_is_refused() -> None:
    gt, pred = adversarial()
    cm = ConfusionMatrix(4, ignore_index=255, boundary="2px", per_image=True)
    cm.update(gt, pred, key="a")
    good = cm.to_dict()
    for path, value in ((("boundary", "counts"), [[1, 2, 3, 4]]),
                        (("boundary", "width"), {"pixels": 0}),
                        (("boundary", "images"), {"nobody": [[0] * 4] * 3}),
                        (("absent_chunks",), {"a": -1})):  # fmt: skip
        bad = json.loads(json.dumps(good))
        node = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(segiou.errors.CheckpointError):
            ConfusionMatrix.from_dict(bad, source="s.json")
    two = json.loads(json.dumps(good))
    two["version"] = 2  # the fields of version 3 are unknown to version 2
    with pytest.raises(segiou.errors.CheckpointError, match="unknown field"):
        ConfusionMatrix.from_dict(two)


@pytest.mark.parametrize(
    ("what", "mutate", "field"),
    [
        ("intersection > |G_d|", lambda d: d["boundary"]["counts"][0].__setitem__(
            1, d["boundary"]["counts"][1][1] + 1), "boundary.counts"),
        ("rows that do not add up", lambda d: d["boundary"]["images"]["a"][1].__setitem__(
            1, d["boundary"]["images"]["a"][1][1] + 7), "boundary.images"),
        ("images as a list", lambda d: d["boundary"].__setitem__("images", ["a"]),
         "boundary.images"),
    ],
)  # fmt: skip
def test_boundary_invariants_of_a_saved_state_are_checked(what, mutate, field) -> None:
    gt, pred = adversarial()
    cm = ConfusionMatrix(4, ignore_index=255, boundary="2px", per_image=True)
    cm.update(gt, pred, key="a", names=["a"])
    bad = json.loads(json.dumps(cm.to_dict()))
    mutate(bad)
    with pytest.raises(segiou.errors.CheckpointError, match=rf"s\.json: .*field '{field}"):
        ConfusionMatrix.from_dict(bad, source="s.json")


@pytest.mark.parametrize("per_image", [False, True])
def test_a_row_batch_is_one_row_image_and_an_empty_batch_counts_nothing(per_image) -> None:
    row = np.array([0, 0, 1, 1, 1, 2, 2], np.uint8)
    pred = np.array([0, 1, 1, 1, 2, 2, 2], np.uint8)
    one = ConfusionMatrix(3, boundary="1px", per_image=per_image).update(row, pred, key="a")
    two_d = ConfusionMatrix(3, boundary="1px", per_image=per_image)
    two_d.update(row[None], pred[None], key="a")
    assert_array_equal(one.extras.boundary_total, two_d.extras.boundary_total)
    assert segiou.evaluate(one).boundary["miou"] == segiou.evaluate(two_d).boundary["miou"]
    z = np.zeros((0, 4, 4), np.uint8)
    empty = ConfusionMatrix(3, boundary=True, per_image=per_image).update(z, z, key="e")
    assert (empty.n_images, empty.n_pixels, int(empty.extras.boundary_total.sum())) == (0, 0, 0)
    assert empty.extras.boundary_px == set()


@pytest.mark.parametrize("width", ["99999999999999999999px", "9223372036854775807px",
                                   "1048577px", {"pixels": 2**40}])  # fmt: skip
def test_a_width_beyond_any_image_is_refused_at_construction(width, capsys) -> None:
    with pytest.raises(UsageError, match="more than the 1,048,576"):
        ConfusionMatrix(3, boundary=width)
    if isinstance(width, str):
        with pytest.raises(SystemExit) as info:
            main(["eval", "--gt", "g.zarr", "--pred", "p.zarr", "--boundary", width])
        assert info.value.code == 2
        assert "more than the 1,048,576" in capsys.readouterr().err
    z = np.zeros((4, 4), np.uint8)
    z[:, 2:] = 1
    widest = ConfusionMatrix(3, boundary="1048576px").update(z, z, key="a")
    assert widest.extras.boundary_total[1].tolist() == [8, 8, 0]  # every pixel is boundary


def test_an_image_on_both_sides_with_other_boundary_counts_is_refused() -> None:
    # the same confusion counts, another layout: Boundary IoU would depend on the merge order
    g = np.full((8, 8), 1, np.uint8)
    g[2:6, 1:7] = 2
    p = g.copy()
    p[2:6, 1:3] = 1
    p[7, :] = 2
    g2 = np.full((8, 8), 1, np.uint8)
    g2[0:3, 0:8] = 2
    p2 = g2.copy()
    p2[0:3, 0:2] = 1
    p2[0, 2:4] = 1
    p2[7, :] = 2

    def state(gt: np.ndarray, pred: np.ndarray, key: str) -> ConfusionMatrix:
        cm = ConfusionMatrix(3, boundary="1px", per_image=True)
        return cm.update(gt, pred, key=key, names=["img"])

    x, y = state(g, p, "x"), state(g2, p2, "y")
    assert ConfusionMatrix(3).update(g, p).counts.tolist() == (
        ConfusionMatrix(3).update(g2, p2).counts.tolist()
    )
    for a, b in ((x, y), (y, x)):
        with pytest.raises(segiou.errors.DuplicateImageError, match=r"'img' \(Boundary IoU"):
            a + b
    assert (x + state(g, p, "z")).n_images == 1


# -- the kernels' word paths: 64 pixels compared at a time where a row's pixels are side by side
# (and lie inside the row), one at a time otherwise; any width, any width of boundary ----------
WIDTHS = range(1, 201)
#: 2d < 64 (doubling), 2d = 64 and 128 (powers of two), 2d > 64 and > 128 (doubling by words)
KERNEL_DS = (1, 2, 3, 5, 20, 31, 32, 33, 46, 64, 65, 100)


def _window_ref(a: np.ndarray, d: int) -> np.ndarray:
    """Pixels whose row window ``[x - d, x + d]`` lies inside the row and is constant."""
    from numpy.lib.stride_tricks import sliding_window_view

    rows, w = a.shape
    out = np.zeros((rows, w), dtype=bool)
    if w > 2 * d:
        win = sliding_window_view(a, 2 * d + 1, axis=1)
        out[:, d : w - d] = (win == win[..., :1]).all(axis=-1)
    return out


def _interior_ref(a: np.ndarray, d: int) -> np.ndarray:
    """Pixels whose ``(2d+1) x (2d+1)`` square lies inside the image and is constant."""
    from numpy.lib.stride_tricks import sliding_window_view

    rows, w = a.shape
    out = np.zeros((rows, w), dtype=bool)
    if rows > 2 * d and w > 2 * d:
        rowwise = sliding_window_view(_window_ref(a, d), 2 * d + 1, axis=0).all(axis=-1)
        col = sliding_window_view(a, 2 * d + 1, axis=0)
        out[d : rows - d] = rowwise & (col == col[..., :1]).all(axis=-1)
    return out


def _unpacked(words: np.ndarray, width: int) -> np.ndarray:
    """Bit sets (one row of uint64 words per image row) as booleans; no bit past the row."""
    bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little").astype(bool)
    assert not bits[:, width:].any()
    return bits[:, :width]


def _row(kind: str, w: int, rng: np.random.Generator) -> np.ndarray:
    """One row of values (int64, 0..299) built to break the word paths."""
    x = np.arange(w)
    if kind == "noise":  # every pixel another value than its neighbours
        return (x * 7) % 300
    if kind == "single":  # long runs broken by single pixels
        row = np.full(w, 5)
        row[rng.random(w) < 0.05] = 6
        return row
    if kind == "words":  # runs that start just before, at and just after word boundaries
        cuts = sorted({c for b in range(64, w + 64, 64) for c in (b - 1, b, b + 1) if 0 < c < w})
        return np.searchsorted(np.asarray(cuts, dtype=np.int64), x, side="right") % 3
    if kind == "runs":  # random runs, a few pixels to a few words long
        return np.repeat(rng.integers(0, 300, w), rng.geometric(1 / 40, w))[:w]
    return np.full(w, 7)  # constant


def _image(w: int, d: int, dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Blocks of equal rows (some taller than the square), each block a kind of row."""
    kinds = ["noise", "single", "words", "runs", "constant"]
    blocks = []
    for kind in rng.permutation(kinds):
        n = int(rng.integers(1, 4)) if rng.random() < 0.3 else 2 * min(d, 5) + 2
        blocks.append(np.repeat(_row(str(kind), w, rng)[None], n, axis=0))
    a = np.concatenate(blocks)
    if dtype == "bool":
        return a % 2 == 1
    if dtype in ("int8", "int16"):  # negative values too
        a = a - 150
    if dtype in ("uint16", "int16"):
        a = a * 97  # values beyond 8 bits (distinct: 97 * 300 < 2**15)
    return a.astype(dtype)


def _layout(a: np.ndarray, layout: str) -> np.ndarray:
    """The same image with another memory layout (rows side by side or not)."""
    if layout == "strided":  # every other pixel of a wider image: one pixel at a time
        wide = np.zeros((a.shape[0], 2 * a.shape[1]), dtype=a.dtype)
        wide[:, ::2] = a
        return wide[:, ::2]
    if layout == "reversed":  # a negative stride
        return np.ascontiguousarray(a[:, ::-1])[:, ::-1]
    if layout == "fortran":
        return np.asfortranarray(a)
    if layout == "offset":  # rows side by side, not C-contiguous, starting at an odd byte
        wide = np.zeros((a.shape[0], a.shape[1] + 3), dtype=a.dtype)
        wide[:, 3:] = a
        return wide[:, 3:]
    return a


def _kernel_bits(band: object, a: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    from segiou import _boundary_kernels as bk

    rows, w = a.shape
    s = band._buffers(rows, w, d)  # type: ignore[attr-defined]
    h = s["gh"]
    bk.windows(a, d, h, s["c"], s["t"])
    bk.interiors(a, h, d, 0, rows, s["q"], s["pre"], s["suf"], s["gin"])
    return _unpacked(h, w), _unpacked(s["gin"], w)


@pytest.mark.parametrize(
    ("dtype", "layout"),
    [("uint8", "C"), ("int8", "C"), ("uint16", "C"), ("int16", "C"), ("bool", "C"),
     ("uint8", "strided"), ("uint8", "reversed"), ("uint8", "fortran"), ("uint8", "offset"),
     ("uint16", "strided"), ("uint16", "offset")],
)  # fmt: skip
def test_windows_and_interiors_of_every_width_equal_the_definition(dtype, layout) -> None:
    from segiou._boundary import BandCounter
    from segiou._count import Lookup

    band = BandCounter(Lookup(1, {0: 0}, {0: 0}))
    rng = np.random.default_rng(7)
    for w in WIDTHS:
        for d in KERNEL_DS if w % 5 == 0 or w < 5 or w % 64 in (63, 0, 1) else KERNEL_DS[:3]:
            a = _layout(_image(w, d, dtype, rng), layout)
            h, interior = _kernel_bits(band, a, d)
            assert_array_equal(h, _window_ref(a, d), err_msg=f"windows, width {w}, d {d}")
            assert_array_equal(interior, _interior_ref(a, d), err_msg=f"width {w}, d {d}")


def _sums_ref(gc: np.ndarray, pc: np.ndarray, k: int, d: int) -> np.ndarray:
    """What ``BandCounter.count`` adds up, from the definition, on class maps.

    ``K``: ignored or void, ``K + 1``: unexpected (a ground-truth pixel under an unexpected
    prediction is left out of ``G_IN``, as the counts leave it out).
    """
    from segiou import _boundary_kernels as bk

    gi, pi = _interior_ref(gc, d), _interior_ref(pc, d)
    same = gc == pc
    out = np.zeros((bk.N_SUMS, k), dtype=np.int64)
    for c in range(k):
        g, p = gc == c, pc == c
        out[bk.G_IN, c] = (gi & g & (pc <= k)).sum()
        out[bk.GP_GIN, c] = (gi & g & same).sum()
        out[bk.P_IN, c] = (pi & p & (gc < k)).sum()
        out[bk.GP_PIN, c] = (pi & p & same).sum()
        out[bk.GP_BOTH, c] = (pi & gi & p & same).sum()
    return out


@pytest.mark.parametrize(
    ("dtype", "layout"),
    [("uint8", "C"), ("int8", "C"), ("uint16", "C"), ("int16", "C"), ("uint8", "strided"),
     ("uint8", "fortran"), ("uint16", "offset"), ("int16", "reversed")],
)  # fmt: skip
@pytest.mark.parametrize("same_values", [True, False])
def test_band_sums_of_every_width_equal_the_definition(dtype, layout, same_values) -> None:
    # one value a class, the same on both sides: the masks are read as they are; a class of
    # two values: mapped to codes first
    from segiou._boundary import BandCounter
    from segiou._count import Lookup

    rng = np.random.default_rng(11)
    values = [int(v) for v in np.unique(_image(200, 3, dtype, rng))]
    v0, v1, v2, ignored, spare = (values[i] for i in (0, len(values) // 2, -1, 1, 2))
    gmap = {v0: 0, v1: 1, v2: 2, ignored: -1}
    pmap = gmap if same_values else {**gmap, spare: 1}
    band = BandCounter(Lookup(3, gmap, pmap))

    def classes(a: np.ndarray, mapping: dict[int, int]) -> np.ndarray:
        out = np.full(a.shape, 4, dtype=np.int64)  # unexpected
        for v, c in mapping.items():
            out[a == v] = c if c >= 0 else 3  # ignored or void
        return out

    for w in WIDTHS:
        for d in (1, 2, 3) if w % 7 else (1, 2, 3, 33, 46):
            g = _image(w, d, dtype, rng)
            p = np.where(rng.random(g.shape) < 0.02, g[::-1], g).astype(dtype)
            if not same_values:
                p[rng.random(g.shape) < 0.3] = spare
            want = _sums_ref(classes(g, gmap), classes(p, pmap), 3, d)
            g, p = _layout(g, layout), _layout(p, layout)
            got = band.count(g, p, 0, g.shape[0], d)
            assert_array_equal(got, want, err_msg=f"width {w}, d {d}")


@pytest.mark.parametrize("dtype", ["bool", "uint16", "int16"])
def test_bool_and_16_bit_masks_equal_the_reference(dtype) -> None:
    rng = np.random.default_rng(3)
    for w in (1, 5, 63, 64, 65, 130, 200):
        gt = _image(w, 3, dtype, rng)
        pred = np.where(rng.random(gt.shape) < 0.03, ~gt if dtype == "bool" else gt // 2, gt)
        pred = pred.astype(dtype)
        k = 2 if dtype == "bool" else 4
        if dtype != "bool":  # pixels of classes 0..k-1 among values beyond 8 bits
            gt[:, : w // 3] = 1
            pred[:, : w // 4] = 1
        for d in (1, 3, 40):
            cm = ConfusionMatrix(k, boundary=f"{d}px", on_unexpected="count")
            cm.update(gt, pred)
            want = reference.boundary_counts(gt.astype(np.int64), pred.astype(np.int64), k, d)
            assert_array_equal(cm.extras.boundary_total, want, err_msg=f"width {w}, d {d}")


@pytest.mark.parametrize("per_image", [False, True])
def test_bool_masks_holding_other_bytes_are_read_as_numpy_reads_them(per_image) -> None:
    # a mask made with .view(bool) may hold 2 or 255: True as numpy reads it, so Boundary IoU
    # (which compares values) must not see two classes where there is one
    raw = np.zeros((2, 12, 20), np.uint8)
    raw[:, 2:10, 3:17] = 1
    raw[:, 4:8, 6:14] = 2
    raw[1, 5, 5:9] = 255
    gt = raw.view(bool)
    pred = (raw > 0).copy()  # the same truth values, bytes 0 and 1
    for d in (1, 2, 3):
        cm = ConfusionMatrix(2, boundary=f"{d}px", per_image=per_image)
        cm.update(gt, pred, key="a")
        want = sum(reference.boundary_counts(gt[i].astype(np.int64), pred[i].astype(np.int64),
                                             2, d) for i in range(2))  # fmt: skip
        assert_array_equal(cm.extras.boundary_total, want)


def test_an_unexpected_prediction_is_left_out_of_boundary_iou_as_of_the_counts() -> None:
    # the counts leave a pixel whose prediction is an unexpected value out: so does G_d. A 4 x 4
    # image of class 0, its top row predicted 9 (neither a class nor void), d = 1: G_d is the
    # 12-pixel ring less the 4 pixels of the top row; P (rows 1-3) has 2 interior pixels
    g = np.zeros((4, 4), np.uint8)
    p = g.copy()
    p[0, :] = 9
    cm = ConfusionMatrix(2, ignore_index=255, boundary="1px", on_unexpected="count")
    cm.update(g, p, key="a")
    assert cm.counts.tolist() == [[12, 0], [0, 0]]
    r = segiou.evaluate(cm)
    assert r.boundary is not None
    assert_array_equal(cm.extras.boundary_total, [[8, 0], [8, 0], [10, 0]])
    assert r.boundary["iou"][0] == pytest.approx(0.8)
    # every prediction unexpected: class 0 has no counted pixel, no IoU and no Boundary IoU
    cm = ConfusionMatrix(2, ignore_index=255, boundary="1px", on_unexpected="count")
    cm.update(g, np.full((4, 4), 9, np.uint8), key="a")
    r = segiou.evaluate(cm)
    assert r.boundary is not None
    assert not cm.extras.boundary_total.any()
    assert np.isnan(r.per_class["iou"][0])
    assert np.isnan(r.boundary["iou"]).all()
    assert np.isnan(r.boundary["miou"])


def _with_unexpected(n: int, h: int, w: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Cityscapes-like masks with unexpected values on both sides (patches and single pixels)."""
    gt, pred = cityscapes_like(n, h, w, seed=seed)
    rng = np.random.default_rng(seed)
    for i in range(n):  # over classes, ignored and unexpected ground truth alike
        for v in (200, 201):
            y, x = int(rng.integers(0, h - 6)), int(rng.integers(0, w - 9))
            pred[i, y : y + int(rng.integers(1, 7)), x : x + int(rng.integers(1, 10))] = v
    pred[rng.random(pred.shape) < 0.04] = 202
    gt[rng.random(gt.shape) < 0.02] = 77
    gt[:, h // 3 : h // 3 + 2, 5:-5] = 255
    return gt, pred


@pytest.mark.parametrize("per_image", [False, True])
def test_unexpected_values_are_left_out_of_boundary_iou_in_memory_and_out_of_core(
    tmp_path: Path, per_image: bool
) -> None:
    # the reference erodes the whole masks' regions and leaves out of G_d, P_d and their
    # intersection every pixel the counts leave out: ground truth of no class (ignored or
    # unexpected) and, at a class, an unexpected prediction
    gt, pred = _with_unexpected(3, 24, 40, seed=5)
    names = ["a", "b", "c"]
    want = [reference.boundary_counts(gt[i], pred[i], 19, 3) for i in range(3)]
    # (the data holds what the test is about: as void, those predictions would be in G_d)
    void = np.where(pred >= 200, 255, pred)
    assert sum(want)[1].sum() < sum(reference.boundary_counts(gt[i], void[i], 19, 3)[1].sum()
                                    for i in range(3))  # fmt: skip
    mem = ConfusionMatrix(19, ignore_index=255, boundary="3px", on_unexpected="count",
                          per_image=per_image)  # fmt: skip
    mem.update(gt, pred, key="m", names=names if per_image else None)
    assert mem.unexpected_pred  # the data holds what the test is about
    assert mem.unexpected_gt
    assert_array_equal(mem.extras.boundary_total, sum(want))
    if per_image:
        for i, n in enumerate(names):
            assert_array_equal(mem.extras.boundary_images[n], want[i])
    path = tmp_path / "s.zarr"
    for name, data in (("gt", gt), ("pred", pred)):
        create_stack(path, n=3, height=24, width=40, chunks=(5, 7), path=name, names=names)[:] = (
            data
        )
    for ppt in (1 << 20, 200):
        cm = count_stores(path / "gt", path / "pred", labels=19, ignore_index=255, boundary="3px",
                          on_unexpected="count", scheduler="threads", pixels_per_task=ppt)  # fmt: skip
        assert_array_equal(cm.extras.boundary_total, sum(want))
        for i, n in enumerate(names):
            assert_array_equal(cm.extras.boundary_images[n], want[i])
