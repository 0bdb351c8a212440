"""Per-image counts keep each image's whole confusion (segiou.images), in memory and in states.

The promises checked here: the entries of any subset of images sum to what counting only those
images gives (every metric of a subset or a resample is exact); an image named on two ranks with
identical counts is counted once when their states merge, and refused when the counts differ;
labels (``#3``, ``key/0``, a stack's ``000000``) never act as image identities; a saved state's
rows are checked against its totals.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

from segiou import ConfusionMatrix, evaluate
from segiou.errors import CheckpointError, DuplicateImageError, UsageError


def _batch(seed: int, n: int = 3, k: int = 4, hw: tuple[int, int] = (5, 6)):
    rng = np.random.default_rng(seed)
    gt = rng.integers(0, k, size=(n, *hw)).astype(np.int16)
    pred = rng.integers(0, k, size=(n, *hw)).astype(np.int16)
    gt[rng.random(gt.shape) < 0.1] = 255  # ignored
    pred[rng.random(pred.shape) < 0.05] = 255  # void
    gt[rng.random(gt.shape) < 0.02] = 40  # unexpected ground truth
    pred[rng.random(pred.shape) < 0.02] = -3  # unexpected prediction
    return gt, pred


def _cm(**kw) -> ConfusionMatrix:
    return ConfusionMatrix(4, ignore_index=255, on_unexpected="count", per_image=True, **kw)


@settings(deadline=None, max_examples=40)
@given(seeds=st.lists(st.integers(0, 10**6), min_size=1, max_size=3), data=st.data())
def test_any_subset_of_images_sums_to_its_own_count(seeds, data):
    cm = _cm()
    images = []
    for b, seed in enumerate(seeds):
        gt, pred = _batch(seed)
        cm.update(gt, pred, key=f"b{b}", names=[f"b{b}-{i}" for i in range(len(gt))])
        images += list(zip(gt, pred, strict=True))
    rows = cm.images.rows
    assert rows is not None
    subset = sorted(data.draw(st.sets(st.integers(0, len(images) - 1))))
    got = rows.totals(subset)
    alone = _cm()
    for i in subset:
        alone.update(*images[i], names=[f"x{i}"])
    assert_array_equal(got["counts"], alone.counts)
    assert_array_equal(got["void"], alone.void)
    assert got["ignored"] == alone.n_ignored
    assert got["unexpected_gt"] == alone.unexpected_gt
    assert got["unexpected_pred"] == alone.unexpected_pred
    # and one image's own matrix
    if subset:
        i = subset[0]
        ref = reference.confusion(*images[i], 4, ignore=(255,))
        counts, void = cm.images.confusion(i)
        assert_array_equal(counts, ref.counts)
        assert_array_equal(void, ref.void)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), data=st.data())
def test_a_resample_counts_an_image_as_often_as_it_is_drawn(seed, data):
    """A bootstrap resample (indices with repeats, negative ones as numpy reads them) sums to
    counting each drawn image that many times; an image drawn twice was counted once."""
    gt, pred = _batch(seed, n=4)
    cm = _cm().update(gt, pred, key="b", names=list("abcd"))
    rows = cm.images.rows
    assert rows is not None
    draw = data.draw(st.lists(st.integers(-4, 3), max_size=8))
    got = rows.totals(draw)
    alone = _cm()
    for j, i in enumerate(draw):
        alone.update(gt[i], pred[i], names=[f"x{j}"])
    assert_array_equal(got["counts"], alone.counts)
    assert_array_equal(got["void"], alone.void)
    assert got["ignored"] == alone.n_ignored
    assert got["unexpected_gt"] == alone.unexpected_gt
    assert got["unexpected_pred"] == alone.unexpected_pred


def test_rows_out_of_range_are_refused_not_read_as_empty():
    cm = _cm().update(*_batch(1, n=2), key="b", names=["a", "b"])
    last = cm.images.confusion(1)
    for got, want in zip(cm.images.confusion(-1), last, strict=True):
        assert_array_equal(got, want)
    for bad in (2, -3, 5):
        with pytest.raises(IndexError, match=f"image row {bad} is out of range for 2 image"):
            cm.images.confusion(bad)
    with pytest.raises(IndexError, match="must be integers"):
        cm.images.rows.totals([0.5])
    with pytest.raises(IndexError, match="takes each image once"):
        cm.images.rows.select([0, 0])
    assert cm.images.rows.select([-1]).names == ("b",)


def test_all_rows_sum_to_the_totals_and_evaluate_agrees():
    cm = _cm()
    for b in range(3):
        cm.update(*_batch(b), key=f"b{b}")
    rows = cm.images.rows
    assert rows is not None
    t = rows.totals()
    assert_array_equal(t["counts"], cm.counts)
    assert_array_equal(t["void"], cm.void)
    assert t["ignored"] == cm.n_ignored
    assert (t["unexpected_gt"], t["unexpected_pred"]) == (cm.unexpected_gt, cm.unexpected_pred)
    assert evaluate(cm).miou == pytest.approx(evaluate(t["counts"], void=t["void"]).miou)


def _rank(images, names) -> ConfusionMatrix:
    cm = _cm()
    for j, ((g, p), name) in enumerate(zip(images, names, strict=True)):
        cm.update(g, p, key=f"{name}@{j}-{id(cm)}", names=[name])
    return cm


def test_a_padded_image_on_two_ranks_is_counted_once():
    gt, pred = _batch(7, n=5)
    images = list(zip(gt, pred, strict=True))
    names = [f"img{i}" for i in range(5)]
    # a sampler pads rank 1 with image 0 again (it has 2 images, rank 0 has 3)
    r0 = _rank(images[:3], names[:3])
    r1 = _rank([*images[3:], images[0]], [*names[3:], names[0]])
    once = _rank(images, names)
    for merged in (r0 + r1, r1 + r0):
        assert_array_equal(merged.counts, once.counts)
        assert_array_equal(merged.void, once.void)
        assert merged.n_ignored == once.n_ignored
        assert merged.unexpected_gt == once.unexpected_gt
        assert merged.unexpected_pred == once.unexpected_pred
        assert merged.n_pixels == once.n_pixels
        assert merged.n_images == 5 == len(merged.images.names)
        assert sorted(merged.images.names) == names
    assert ConfusionMatrix.from_dict(json.loads(json.dumps((r0 + r1).to_dict()))) == r1 + r0


def test_the_same_image_name_with_other_counts_is_refused():
    (g0, p0), (g1, p1) = list(zip(*_batch(8, n=2), strict=True))
    a = _rank([(g0, p0)], ["img"])
    b = _rank([(g1, p1)], ["img"])
    with pytest.raises(DuplicateImageError, match=r"'img'.*different counts"):
        a.merge(b)
    with pytest.raises(DuplicateImageError):  # and in one accumulator, whatever the counts
        a.update(g0, p0, key="again", names=["img"])


def test_labels_are_not_identities():
    gt, pred = _batch(9, n=2)
    a, b = _cm(), _cm()
    a.update(gt, pred)  # keyless: #0, #1
    b.update(pred.clip(0, 3), gt.clip(0, 3))  # other images, labelled #0, #1 too
    merged = a + b
    assert merged.n_images == 4
    assert merged.images.names == ["#0", "#1", "#0", "#1"]
    c, d = _cm(), _cm()
    c.update(gt, pred, key="k")  # labels k/0, k/1
    d.update(gt, pred, key="k2")
    assert (c + d).n_images == 4  # the same arrays under other keys: the caller's choice


def test_an_empty_name_is_refused():
    """ "" marks what belongs to no named image in a state (instance records): an image named
    "" made a state that would not load, and refused valid merges."""
    with pytest.raises(UsageError, match="image 1 has an empty name"):
        _cm().update(*_batch(0, n=2), names=["a", ""])
    import tempfile

    from segiou.errors import StoreLayoutError
    from segiou.io.zarr import create_stack, open_masks

    with tempfile.TemporaryDirectory() as d:
        create_stack(f"{d}/s.zarr", n=2, height=2, width=2, names=["", "b"])
        with pytest.raises(StoreLayoutError, match="image 0 has an empty name"):
            open_masks(f"{d}/s.zarr")


def test_names_must_be_one_distinct_string_per_image():
    gt, pred = _batch(10, n=2)
    for bad in ("ab", ["a"], ["a", "a"], ["a", None], [1, 2]):
        with pytest.raises(UsageError):
            _cm().update(gt, pred, names=bad)


def test_version_1_rows_cannot_vouch_for_a_shared_image():
    from pathlib import Path

    v1 = ConfusionMatrix.load(Path(__file__).parent / "data" / "confusion_v1_per_image.json")
    other = ConfusionMatrix(v1.spec, gt_ids="raw", on_unexpected="count", per_image=True)
    g = np.full((3, 6), 7, np.uint8)
    other.update(g, g, key="elsewhere", names=[v1.images.names[0]])
    with pytest.raises(DuplicateImageError, match="version-1"):
        v1.merge(other)


def test_version_1_state_merged_with_absent_chunks_loads_what_it_saved(tmp_path):
    from pathlib import Path

    from segiou._count import count_pairs

    v1 = ConfusionMatrix.load(Path(__file__).parent / "data" / "confusion_v1_per_image.json")
    other = ConfusionMatrix(v1.spec, gt_ids="raw", on_unexpected="count", per_image=True)
    g = np.full((1, 3, 6), 7, np.uint8)
    tally = count_pairs(g, g, other._lookup, where="t", on_unexpected="count", per_image=True)
    other.add_tally(tally, key="store", names=["munich_000000"], n_images=1, absent=[1])
    merged = v1 + other
    merged.save(tmp_path / "m.json")
    back = ConfusionMatrix.load(tmp_path / "m.json")
    assert back == merged
    assert back.extras.absent == {"munich_000000": 1}
    assert back.to_dict()["image_rows"] == merged.to_dict()["image_rows"]


def test_version_1_merged_rows_keep_which_names_were_given(tmp_path):
    """A label 'a' (of key 'a') beside an image named 'a': saved as version 1 (merged with a
    version-1 state), the file would not load, and labels came back as given names."""
    from pathlib import Path

    v1 = ConfusionMatrix.load(Path(__file__).parent / "data" / "confusion_v1_per_image.json")
    new = ConfusionMatrix(v1.spec, gt_ids="raw", on_unexpected="count", per_image=True)
    g = np.full((3, 6), 7, np.uint8)
    new.update(g, g, key="a")  # labelled 'a'
    new.update(g, g, names=["a"])  # named 'a'
    new.update(g, g, key="b")  # labelled 'b'
    merged = v1 + new
    merged.save(tmp_path / "m.json")
    back = ConfusionMatrix.load(tmp_path / "m.json")
    assert back == merged
    assert back.images.rows.given == merged.images.rows.given
    other = ConfusionMatrix(v1.spec, gt_ids="raw", on_unexpected="count", per_image=True)
    other.update(g, g, names=["b"])  # an image named 'b': not the row labelled 'b'
    assert (back + other).n_images == merged.n_images + 1
    # "given" is written only where a version-1 reader would infer otherwise: a version-1
    # state saved again is one every version-1 reader still loads
    assert "given" in merged.to_dict()["image_rows"]
    assert "given" not in v1.to_dict()["image_rows"]


def _v2_state() -> dict:
    cm = _cm()
    cm.update(*_batch(11, n=2), key="k", names=["a", "b"])
    return cm.to_dict()


@pytest.mark.parametrize(
    ("what", "mutate"),
    [
        ("code", lambda d: d["image_rows"]["entries"]["gt"].__setitem__(0, 99)),
        ("image", lambda d: d["image_rows"]["entries"]["image"].__setitem__(0, 5)),
        ("count", lambda d: d["image_rows"]["entries"]["count"].__setitem__(0, 0)),
        ("given", lambda d: d["image_rows"].__setitem__("given", [True])),
        ("names", lambda d: d["image_rows"].__setitem__("names", ["a", "a"])),
        ("odd", lambda d: d["image_rows"]["unexpected"].clear()),
        ("length", lambda d: d["image_rows"]["entries"]["pred"].pop()),
        ("unknown", lambda d: d.__setitem__("extra", 1)),
    ],
)
def test_version_2_rows_are_checked(what, mutate):
    d = copy.deepcopy(_v2_state())
    assert d["image_rows"]["unexpected"], "the state must hold unexpected values to tamper with"
    mutate(d)
    with pytest.raises(CheckpointError, match=r"^ckpt: "):
        ConfusionMatrix.from_dict(d, source="ckpt")


def test_names_without_per_image_rows_are_refused_not_ignored() -> None:
    # ignored, they would let the same image be counted twice under two keys
    g = np.zeros((1, 4, 4), np.uint8)
    cm = ConfusionMatrix(2)
    with pytest.raises(UsageError, match="per_image=True"):
        cm.update(g, g, key="k1", names=["frankfurt_000001"])
    assert cm.n_pixels == 0
    assert not cm.keys
    cm.update(g, g, key="k1")  # nothing was counted: the key is still free


def test_a_name_that_is_no_unicode_text_is_counted_and_saved(tmp_path) -> None:
    # a lone surrogate (os.fsdecode of a file name that is not UTF-8, e.g. caf\xe9.png): the
    # state saves it as an escape and loads it back; only the service, whose digest needs
    # UTF-8, refuses it (a 400)
    g = np.zeros((2, 4, 4), np.uint8)
    cm = _cm()
    cm.update(g, g, key="k", names=["a", "img\ud800"])
    assert list(cm.images.names) == ["a", "img\ud800"]
    cm.save(tmp_path / "s.json")
    assert type(cm).load(tmp_path / "s.json") == cm
    # the per-image CSV (and any text output) keeps it: a file name's own bytes (os.fsdecode's
    # surrogates), another lone surrogate as its escape; writing it raised UnicodeEncodeError
    from segiou.report import write_per_image_csv

    cm.update(g, g, key="k2", names=["caf\udce9", "b"])  # os.fsdecode(b"caf\xe9")
    write_per_image_csv(cm, tmp_path / "rows.csv")
    body = (tmp_path / "rows.csv").read_bytes()
    assert b"\ncaf\xe9," in body
    assert b"\nimg\\ud800," in body
