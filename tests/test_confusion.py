"""The accumulator: update, merge, keys, checkpoints, pickling, threads, and its invariants."""

from __future__ import annotations

import copy
import json
import os
import pickle
import stat
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)
from numpy.testing import assert_array_equal

import segiou
from segiou import ConfusionMatrix, ImageTable, LabelSpec, builtin_spec
from segiou.errors import (
    CheckpointError,
    DuplicateBatchError,
    IncompatibleMatrixError,
    LabelRangeError,
    SegiouError,
)
from segiou.testing.strategies import label_pairs

DATA = Path(__file__).parent / "data"


def _rng_pair(seed: int, shape=(2, 5, 7), k: int = 4, ignore: int = 255):
    rng = np.random.default_rng(seed)
    vals = np.array([*range(k), ignore])
    gt = vals[rng.integers(0, k + 1, size=shape)].astype(np.uint8)
    pred = vals[rng.integers(0, k + 1, size=shape)].astype(np.uint8)
    return gt, pred


def _state(cm: ConfusionMatrix) -> dict:
    d = cm.to_dict()
    d.pop("writer")
    return d


# --- update, merge, + ------------------------------------------------------------------------


def test_update_accumulates_and_returns_self():
    cm = ConfusionMatrix(4, ignore_index=255)
    ref = reference.Counts(np.zeros((4, 4), np.int64), np.zeros(4, np.int64))
    for i in range(3):
        gt, pred = _rng_pair(i)
        assert cm.update(gt, pred, key=f"b{i}") is cm
        ref = reference.add(ref, reference.confusion(gt, pred, 4, ignore=(255,)))
    reference.assert_same_counts(cm, ref)
    assert cm.keys == {"b0", "b1", "b2"}
    assert cm.n_images == 6
    assert cm.n_pixels == 3 * 70


def test_merge_and_plus_equal_one_accumulator():
    pairs = [_rng_pair(i) for i in range(4)]
    whole = ConfusionMatrix(4, ignore_index=255)
    parts = []
    for i, (gt, pred) in enumerate(pairs):
        whole.update(gt, pred, key=i)
        parts.append(ConfusionMatrix(4, ignore_index=255).update(gt, pred, key=i))
    merged = parts[0].merge(parts[1]).merge(parts[2] + parts[3])
    assert merged == whole
    assert _state(merged) == _state(whole)
    # merge returns a new object and leaves its inputs alone
    assert parts[0].keys == {"0"}
    assert merged is not parts[0]


def test_duplicate_key_refused_on_update():
    gt, pred = _rng_pair(0)
    cm = ConfusionMatrix(4, ignore_index=255).update(gt, pred, key="batch-7")
    before = _state(cm)
    with pytest.raises(DuplicateBatchError) as info:
        cm.update(gt, pred, key="batch-7")
    assert isinstance(info.value, ValueError)
    assert "'batch-7'" in str(info.value)
    assert _state(cm) == before
    # int and str keys are the same key
    cm.update(gt, pred, key=3)
    with pytest.raises(DuplicateBatchError):
        cm.update(gt, pred, key="3")


def test_duplicate_key_refused_on_merge():
    gt, pred = _rng_pair(0)
    a = ConfusionMatrix(4, ignore_index=255).update(gt, pred, key="x").update(gt, pred, key="y")
    b = ConfusionMatrix(4, ignore_index=255).update(gt, pred, key="y").update(gt, pred, key="z")
    with pytest.raises(DuplicateBatchError) as info:
        a.merge(b)
    assert "'y'" in str(info.value)
    with pytest.raises(DuplicateBatchError):
        b + a
    # a key counted in a merged state is refused by update afterwards
    c = a + ConfusionMatrix(4, ignore_index=255).update(gt, pred, key="z")
    with pytest.raises(DuplicateBatchError):
        c.update(gt, pred, key="z")


def test_images_without_pixels_cost_no_memory_per_image_without_per_image_rows():
    """Masks of shape (N, 0, 8) are N images of no pixels: update made a label per image for
    nothing (no per-image rows, no extras kept), 2**40 of them for a 256-byte server body."""
    g = np.zeros((10**6, 0, 8), np.uint8)
    ConfusionMatrix(3).update(g[:1], g[:1])  # anything compiled or cached once, first
    cm = ConfusionMatrix(3)
    tracemalloc.start()
    try:
        cm.update(g, g, key="k")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (cm.n_images, cm.n_pixels, cm.keys) == (10**6, 0, {"k"})
    assert peak < 1 << 20, peak


@pytest.mark.parametrize("how", ["labels", "scores"])
def test_per_image_rows_of_many_images_and_classes_are_made_group_by_group(how):
    """Per-image counting kept a dense (images, K+2, K+2) table of the whole batch before making
    its rows sparse: 1,000 one-pixel images of 4,096 classes asked for 125 GiB. Here 150 images
    of 1,024 classes (1.3 GB dense) count in a bounded footprint, with the right rows."""
    k, n = 1024, 150
    rng = np.random.default_rng(0)
    g = rng.integers(0, k, (n, 1, 1)).astype(np.uint16)
    p = rng.integers(0, k, (n, 1, 1)).astype(np.uint16)
    s = np.zeros((n, k, 1, 1), np.float32)  # one-hot scores: their argmax is p
    s[np.arange(n), p[:, 0, 0], 0, 0] = 1.0
    cm = ConfusionMatrix(k, per_image=True, threads=1)
    tracemalloc.start()
    try:
        if how == "scores":
            cm.update(g, s, scores_axis=1, key="b")
        else:
            cm.update(g, p, key="b")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400 << 20, peak  # (a dense table of the batch: 1.3 GB for labels)
    table = cm.images
    tp, fp, fn = table.tp, table.fp, table.fn
    for i in range(n):  # each image's one pixel, in its own row
        a, b = int(g[i, 0, 0]), int(p[i, 0, 0])
        assert tp[i, a] == (a == b)
        assert fn[i, a] == (a != b)
        assert fp[i, b] == (a != b)
    assert table.names == [f"b/{i}" for i in range(n)]


def test_batches_without_key_are_not_deduplicated():
    gt, pred = _rng_pair(0)
    cm = ConfusionMatrix(4, ignore_index=255).update(gt, pred).update(gt, pred)
    ref = reference.confusion(gt, pred, 4, ignore=(255,))
    assert_array_equal(cm.counts, 2 * ref.counts)
    assert not cm.keys


@pytest.mark.parametrize(
    ("a", "b", "names"),
    [
        (lambda: ConfusionMatrix(3), lambda: ConfusionMatrix(4), ["3 classes", "4 classes"]),
        (
            lambda: ConfusionMatrix(3, ignore_index=255),
            lambda: ConfusionMatrix(3, ignore_index=254),
            ["255", "254"],
        ),
        (
            lambda: ConfusionMatrix("cityscapes"),
            lambda: ConfusionMatrix("pascal_voc"),
            ["cityscapes", "pascal_voc"],
        ),
        (
            lambda: ConfusionMatrix("cityscapes", gt_ids="raw"),
            lambda: ConfusionMatrix("cityscapes", gt_ids="class"),
            ["gt_ids", "'raw'", "'class'"],
        ),
        (
            lambda: ConfusionMatrix("cityscapes", gt_ids="raw", pred_ids="raw"),
            lambda: ConfusionMatrix("cityscapes", gt_ids="raw", pred_ids="class"),
            ["pred_ids", "'raw'", "'class'"],
        ),
        (
            lambda: ConfusionMatrix(3, per_image=True),
            lambda: ConfusionMatrix(3, per_image=False),
            ["per_image", "True", "False"],
        ),
        (
            lambda: ConfusionMatrix(LabelSpec("s", ["a", "b"])),
            lambda: ConfusionMatrix(LabelSpec("s", ["a", "c"])),
            ["'b'", "'c'"],
        ),
        (
            lambda: ConfusionMatrix(3, on_unexpected="raise"),
            lambda: ConfusionMatrix(3, on_unexpected="count"),
            ["on_unexpected", "'raise'", "'count'"],
        ),
    ],
    ids=[
        "num_classes",
        "ignore",
        "spec",
        "gt_ids",
        "pred_ids",
        "per_image",
        "class_names",
        "on_unexpected",
    ],
)
def test_merge_refuses_incompatible_states(a, b, names):
    x, y = a(), b()
    for left, right in ((x, y), (y, x)):
        with pytest.raises(IncompatibleMatrixError) as info:
            left.merge(right)
        assert isinstance(info.value, ValueError)
        for n in names:
            assert n in str(info.value), (n, str(info.value))


def test_merge_refuses_other_types():
    with pytest.raises(TypeError):
        ConfusionMatrix(3).merge(np.zeros((3, 3), np.int64))


@pytest.mark.parametrize("per_image", [False, True])
@pytest.mark.parametrize("content", ["empty", "keyed", "keyless"])
def test_merge_with_itself_is_refused(per_image, content):
    gt, pred = _rng_pair(0)
    cm = ConfusionMatrix(4, ignore_index=255, per_image=per_image)
    if content != "empty":
        cm.update(gt, pred, key="a" if content == "keyed" else None)
    before = _state(cm)
    for merge in (lambda: cm + cm, lambda: cm.merge(cm)):
        with pytest.raises(DuplicateBatchError) as info:
            merge()
        assert isinstance(info.value, ValueError)
        assert "itself" in str(info.value)
        assert "counted twice" in str(info.value)
    assert _state(cm) == before


@pytest.mark.parametrize("per_image", [False, True])
def test_merge_states_sharing_a_key_is_refused(per_image):
    g0, p0 = _rng_pair(0)
    g1, p1 = _rng_pair(1)
    a = ConfusionMatrix(4, ignore_index=255, per_image=per_image)
    a.update(g0, p0, key="x").update(g1, p1, key="y")
    twin = copy.deepcopy(a)  # the same batches, another object
    other = ConfusionMatrix(4, ignore_index=255, per_image=per_image).update(g0, p0, key="y")
    for left, right, shared in ((a, twin, "'x', 'y'"), (a, other, "'y'"), (other, a, "'y'")):
        before = (_state(left), _state(right))
        with pytest.raises(DuplicateBatchError) as info:
            left + right
        assert shared in str(info.value)
        assert (_state(left), _state(right)) == before


def test_per_image_merge_commutes_and_equality_still_sees_rows():
    g0, p0 = _rng_pair(0, shape=(5, 7))
    g1, p1 = _rng_pair(1, shape=(5, 7))

    def state(pairs, key):
        cm = ConfusionMatrix(4, ignore_index=255, per_image=True)
        return cm.update(np.stack([pairs[0][0], pairs[1][0]]), np.stack([pairs[0][1], pairs[1][1]]),
                         key=key, names=["x", "y"])  # fmt: skip

    a = ConfusionMatrix(4, ignore_index=255, per_image=True).update(g0, p0, key="a")
    b = ConfusionMatrix(4, ignore_index=255, per_image=True).update(g1, p1, key="b")
    assert (a + b).images.names == ["a", "b"]
    assert (b + a).images.names == ["b", "a"]
    assert a + b == b + a
    assert ConfusionMatrix.from_dict((a + b).to_dict()) == b + a
    # the same images under swapped names: same totals, different per-image rows
    xy = state([(g0, p0), (g1, p1)], "k")
    yx = state([(g1, p1), (g0, p0)], "k")
    assert_array_equal(xy.counts, yx.counts)
    assert xy != yx


# --- serialisation -------------------------------------------------------------------------------


def _full_state(per_image: bool) -> ConfusionMatrix:
    cm = ConfusionMatrix(4, ignore_index=[255, -1], on_unexpected="count", per_image=per_image)
    gt, pred = _rng_pair(1)
    pred = pred.astype(np.int16)
    pred[0, 0, :3] = [-7, 9, -1]  # unexpected, unexpected, void
    gt = gt.astype(np.int16)
    gt[0, 0, :3] = [1, 1, 1]
    gt[1, 4, 6] = 42  # unexpected gt
    cm.update(gt, pred, key="a", names=["first", "second"] if per_image else None)
    cm.update(gt[:1], pred[:1], key="b")
    return cm


@pytest.mark.parametrize("per_image", [False, True])
def test_to_dict_from_dict_round_trip(per_image):
    cm = _full_state(per_image)
    d = cm.to_dict()
    assert d["format"] == "segiou.confusion"
    assert d["version"] == 2  # format 2 (per-image confusion entries); version 1 still loads
    assert d["writer"] == {"segiou": segiou.__version__}
    text = json.dumps(d, allow_nan=False)  # JSON-safe, exact integers
    back = ConfusionMatrix.from_dict(json.loads(text))
    assert back == cm
    assert_array_equal(back.counts, cm.counts)
    assert back.counts.dtype == np.int64
    assert back.unexpected_gt == cm.unexpected_gt == {42: 1}
    assert back.unexpected_pred == cm.unexpected_pred
    assert back.keys == {"a", "b"}
    if per_image:
        assert back.images.names == ["first", "second", "b"]
        assert_array_equal(back.images.tp, cm.images.tp)
    # a restored state keeps refusing its keys and keeps counting
    gt, pred = _rng_pair(5)
    with pytest.raises(DuplicateBatchError):
        back.update(gt, pred, key="a")
    back.update(gt, pred, key="c")
    assert back.n_pixels == cm.n_pixels + gt.size


@pytest.mark.parametrize("per_image", [False, True])
def test_save_load_round_trip_is_atomic(tmp_path, per_image):
    cm = _full_state(per_image)
    target = tmp_path / "state.json"
    assert cm.save(target) == target
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no temporary file left
    assert ConfusionMatrix.load(target) == cm
    # overwrite in place
    cm.update(*_rng_pair(9), key="z")
    cm.save(str(target))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]
    assert ConfusionMatrix.load(target).keys == {"a", "b", "z"}


def test_saved_file_gets_the_mode_of_an_ordinary_file(tmp_path):
    # an atomic write must not make the checkpoint private (tempfile.mkstemp creates 0600)
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    target = _full_state(False).save(tmp_path / "state.json")
    assert stat.S_IMODE(target.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


def test_failed_save_leaves_old_file_and_no_temp(tmp_path, monkeypatch):
    cm = _full_state(False)
    target = tmp_path / "state.json"
    cm.save(target)
    old = target.read_bytes()
    cm.update(*_rng_pair(9), key="z")

    def boom(*args, **kwargs):
        msg = "disk full"
        raise OSError(msg)

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        cm.save(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]
    assert target.read_bytes() == old


@pytest.mark.parametrize("per_image", [False, True])
def test_pickle_round_trip(per_image):
    cm = _full_state(per_image)
    back = pickle.loads(pickle.dumps(cm))
    assert back == cm
    assert back.threads == cm.threads
    with pytest.raises(DuplicateBatchError):
        back.update(*_rng_pair(0), key="a")
    assert copy.deepcopy(cm) == cm


def _tamper(d: dict, path: tuple, value) -> dict:
    d = copy.deepcopy(d)
    node = d
    for p in path[:-1]:
        node = node[p]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return d


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (("format",), "something.else", ["'something.else'", "segiou.confusion"]),
        (("format",), KeyError, ["None", "segiou.confusion"]),
        (("version",), 4, ["version 4", "versions [1, 2, 3]"]),
        (("version",), "1", ["'1'"]),
        (("counts", 0, 0), 10**6, ["pixels", "altered"]),
        (("counts", 0, 0), -1, ["counts", "non-negative"]),
        (("counts", 0, 0), 1.5, ["counts"]),
        (("counts",), [[1, 2], [3, 4]], ["counts", "(4, 4)"]),
        (("void",), [0, 0, 0], ["void"]),
        (("ignored",), -3, ["ignored"]),
        (("ignored",), True, ["ignored"]),
        (("pixels",), 1, ["pixels"]),
        (("keys",), KeyError, ["keys"]),
        (("labels", "classes"), [], ["no classes"]),
        (("gt_ids",), "pixels", ["id space"]),
        (("unexpected", "gt", "42"), "x", ["unexpected"]),
        (("version",), 4, ["segiou"]),
        (("version",), True, ["'version'", "True", "integer 1"]),
        (("version",), 1.0, ["'version'", "1.0"]),
        (("per_image",), "yes", ["'per_image'", "'yes'"]),
        (("image_rows",), {"names": ["x"]}, ["'image_rows'", "'per_image' is false"]),
    ],
)
def test_from_dict_refuses_bad_states(path, value, words):
    d = _full_state(False).to_dict()
    bad = _tamper(d, path, value)
    with pytest.raises(CheckpointError) as info:
        ConfusionMatrix.from_dict(bad, source="ckpt.json")
    msg = str(info.value)
    assert isinstance(info.value, SegiouError)
    assert msg.startswith("ckpt.json: ")
    for w in words:
        assert w in msg, (w, msg)


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (("images",), 999, ["'images' is 999", "3 row(s)"]),
        (("images",), 2, ["'images' is 2", "3 row(s)"]),
        (("per_image",), False, ["'image_rows'", "'per_image' is false"]),
        (("per_image",), 1, ["'per_image' is 1"]),
        (("image_rows",), None, ["malformed"]),
    ],
)
def test_from_dict_refuses_inconsistent_per_image_states(path, value, words):
    d = _full_state(True).to_dict()
    assert d["images"] == 3
    with pytest.raises(CheckpointError) as info:
        ConfusionMatrix.from_dict(_tamper(d, path, value), source="ckpt.json")
    msg = str(info.value)
    assert msg.startswith("ckpt.json: ")
    for w in words:
        assert w in msg, (w, msg)


@pytest.mark.parametrize("writer", ["segiou 9", None, 3])
def test_unknown_version_with_odd_writer_field(writer):
    d = _full_state(False).to_dict()
    d["version"] = 99
    d["writer"] = writer
    with pytest.raises(CheckpointError, match="version 99"):
        ConfusionMatrix.from_dict(d)


@pytest.mark.parametrize("obj", [None, [], "segiou.confusion", 3])
def test_from_dict_refuses_non_mappings(obj):
    with pytest.raises(CheckpointError):
        ConfusionMatrix.from_dict(obj)


def test_load_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(CheckpointError, match=r"nope\.json"):
        ConfusionMatrix.load(missing)
    broken = tmp_path / "broken.json"
    _full_state(False).save(broken)
    broken.write_text(broken.read_text()[:-20])  # truncated
    with pytest.raises(CheckpointError, match=r"broken\.json"):
        ConfusionMatrix.load(broken)
    tampered = tmp_path / "tampered.json"
    d = _full_state(False).to_dict()
    d["counts"][1][2] += 1
    tampered.write_text(json.dumps(d))
    with pytest.raises(CheckpointError, match=r"tampered\.json"):
        ConfusionMatrix.load(tampered)


# --- golden checkpoints (written once by ConfusionMatrix.save, never edited) ---------------------

# Cityscapes labelIds; 9 = parking (ignored / void), 0 = unlabeled, 250 is no labelId.
GOLDEN_GT = [
    np.array([[7, 7, 8, 26, 26, 0], [7, 8, 8, 26, 24, 9], [11, 11, 21, 23, 23, 23]], np.uint8),
    np.array([[7, 7, 7, 33, 32, 0], [21, 21, 22, 24, 25, 250], [17, 19, 20, 11, 12, 13]], np.uint8),
]
GOLDEN_PRED = [
    np.array([[7, 8, 8, 26, 27, 26], [7, 7, 8, 9, 24, 24], [11, 12, 21, 23, 23, 21]], np.uint8),
    np.array([[7, 7, 9, 33, 33, 26], [21, 22, 22, 25, 25, 7], [17, 17, 20, 11, 11, 250]], np.uint8),
]


def golden_state(per_image: bool) -> ConfusionMatrix:
    cm = ConfusionMatrix(
        "cityscapes", gt_ids="raw", pred_ids="raw", on_unexpected="count", per_image=per_image
    )
    for i, (gt, pred) in enumerate(zip(GOLDEN_GT, GOLDEN_PRED, strict=True)):
        cm.update(gt, pred, key=f"frankfurt_{i:06d}")
    return cm


def _golden_reference(gts, preds) -> reference.Counts:
    spec = builtin_spec("cityscapes")
    mapping = {r.id: r.cls for r in spec.raw}
    total = reference.Counts(np.zeros((19, 19), np.int64), np.zeros(19, np.int64))
    for gt, pred in zip(gts, preds, strict=True):
        total = reference.add(total, reference.confusion(gt, pred, 19, gt_map=mapping))
    return total


@pytest.mark.parametrize(
    ("name", "per_image"), [("confusion_v1.json", False), ("confusion_v1_per_image.json", True)]
)
def test_golden_checkpoint_v1(name, per_image):
    cm = ConfusionMatrix.load(DATA / name)
    raw = json.loads((DATA / name).read_text())
    assert raw["version"] == 1
    ref = _golden_reference(GOLDEN_GT, GOLDEN_PRED)
    reference.assert_same_counts(cm, ref)
    # a few numbers by hand: road (trainId 0) gt pixels predicted as road
    assert cm.counts[0, 0] == 4
    assert cm.n_ignored == 3  # two unlabeled, one parking
    assert cm.unexpected_gt == {250: 1}
    assert cm.unexpected_pred == {250: 1}
    assert int(cm.void.sum()) == 2  # two predictions of parking at valid pixels
    assert cm.n_pixels == 36
    assert cm.keys == {"frankfurt_000000", "frankfurt_000001"}
    assert cm.spec == builtin_spec("cityscapes")
    assert (cm.gt_ids, cm.pred_ids, cm.on_unexpected) == ("raw", "raw", "count")
    assert cm.per_image is per_image
    if per_image:
        rows = cm.images
        assert rows.names == ["frankfurt_000000", "frankfurt_000001"]
        for i in range(2):
            r = _golden_reference(GOLDEN_GT[i : i + 1], GOLDEN_PRED[i : i + 1])
            assert_array_equal(rows.tp[i], r.tp)
            assert_array_equal(rows.fp[i], r.fp)
            assert_array_equal(rows.fn[i], r.fn)
            assert rows.ignored[i] == r.n_ignored
            assert rows.unexpected[i] == r.n_unexpected
    # today's writer produces the same state
    assert cm == golden_state(per_image)


@pytest.mark.parametrize(
    ("name", "per_image"), [("confusion_v2.json", False), ("confusion_v2_per_image.json", True)]
)
def test_golden_checkpoint_v2(name, per_image):
    cm = ConfusionMatrix.load(DATA / name)
    raw = json.loads((DATA / name).read_text())
    assert raw["version"] == 2
    reference.assert_same_counts(cm, _golden_reference(GOLDEN_GT, GOLDEN_PRED))
    assert cm.keys == {"frankfurt_000000", "frankfurt_000001"}
    assert cm.per_image is per_image
    if per_image:
        rows = cm.images
        assert rows.names == ["frankfurt_000000", "frankfurt_000001"]
        for i in range(2):  # each image's whole confusion matrix, as counted alone
            r = _golden_reference(GOLDEN_GT[i : i + 1], GOLDEN_PRED[i : i + 1])
            counts, void = rows.confusion(i)
            assert_array_equal(counts, r.counts)
            assert_array_equal(void, r.void)
    assert cm == golden_state(per_image)
    assert cm.to_dict() | {"writer": raw["writer"]} == raw  # written again byte for byte


# --- threads ---------------------------------------------------------------------------------------


def test_concurrent_updates_with_distinct_keys():
    cm = ConfusionMatrix(4, ignore_index=255, threads=1)
    pairs = {f"k{i}": _rng_pair(i, shape=(3, 64, 64)) for i in range(16)}
    cm.update(*_rng_pair(99), key="warm-up")
    start = threading.Barrier(4)
    errors = []

    def work(keys):
        try:
            start.wait()
            for k in keys:
                cm.update(*pairs[k], key=k)
        except (SegiouError, ValueError) as e:  # pragma: no cover - reported below
            errors.append(e)

    keys = sorted(pairs)
    threads = [threading.Thread(target=work, args=(keys[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    total = reference.confusion(*_rng_pair(99), 4, ignore=(255,))
    for gt, pred in pairs.values():
        total = reference.add(total, reference.confusion(gt, pred, 4, ignore=(255,)))
    reference.assert_same_counts(cm, total)
    assert cm.keys == {*pairs, "warm-up"}


@pytest.mark.parametrize("threads", [1, 2])
def test_same_key_from_two_threads_is_counted_once(threads):
    gt, pred = _rng_pair(3, shape=(8, 256, 256))
    ref = reference.confusion(gt, pred, 4, ignore=(255,))
    for attempt in range(5):
        cm = ConfusionMatrix(4, ignore_index=255, threads=threads)
        start = threading.Barrier(2)
        outcome = []

        def work(cm=cm, start=start, outcome=outcome):
            start.wait()
            try:
                cm.update(gt, pred, key="same")
                outcome.append("ok")
            except DuplicateBatchError:
                outcome.append("refused")

        ts = [threading.Thread(target=work) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(outcome) == ["ok", "refused"], attempt
        reference.assert_same_counts(cm, ref)


def test_concurrent_keyless_per_image_updates_get_distinct_names(monkeypatch):
    import time

    from segiou import confusion

    def slow_table(*args):  # widen any window between naming rows and storing them
        time.sleep(0.001)
        return ImageTable(*args)

    cm = ConfusionMatrix(4, ignore_index=255, per_image=True, threads=1)
    pairs = [_rng_pair(i, shape=(2, 3, 4)) for i in range(8)]
    cm.update(*pairs[0])  # compile first
    monkeypatch.setattr(confusion, "ImageTable", slow_table)
    start = threading.Barrier(4)
    errors = []

    def work(i):
        try:
            start.wait()
            for j in range(10):
                cm.update(*pairs[(i + j) % len(pairs)])
        except (SegiouError, ValueError) as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    n = 2 * (1 + 4 * 10)
    names = cm.images.names
    assert len(names) == n == cm.n_images
    assert sorted(names) == sorted(f"#{i}" for i in range(n))
    total = reference.confusion(*pairs[0], 4, ignore=(255,))
    for i in range(4):
        for j in range(10):
            total = reference.add(total, reference.confusion(*pairs[(i + j) % 8], 4, ignore=(255,)))
    reference.assert_same_counts(cm, total)
    assert_array_equal(cm.images.tp.sum(axis=0), np.diagonal(cm.counts))


def test_failed_update_frees_its_key():
    cm = ConfusionMatrix(3)
    with pytest.raises(LabelRangeError):
        cm.update(np.array([5]), np.array([0]), key="k")
    cm.update(np.array([2]), np.array([0]), key="k")
    assert cm.counts[2, 0] == 1


# --- properties ------------------------------------------------------------------------------------


def _counted(pair, **kw) -> ConfusionMatrix:
    return ConfusionMatrix(pair.num_classes, ignore_index=list(pair.ignore), **kw)


@settings(deadline=None)
@given(pair=label_pairs(max_classes=40, unexpected=True, max_dims=3), cut=st.integers(min_value=0))
def test_split_anywhere_equals_whole(pair, cut):
    g, p = pair.gt.reshape(-1), pair.pred.reshape(-1)
    cut = cut % (g.size + 1)
    whole = _counted(pair, on_unexpected="count").update(pair.gt, pair.pred, key="all")
    a = _counted(pair, on_unexpected="count").update(g[:cut], p[:cut], key="a")
    b = _counted(pair, on_unexpected="count").update(g[cut:], p[cut:], key="b")
    merged = a + b
    for attr in ("counts", "void"):
        assert_array_equal(getattr(merged, attr), getattr(whole, attr))
    assert merged.n_ignored == whole.n_ignored
    assert merged.unexpected_gt == whole.unexpected_gt
    assert merged.unexpected_pred == whole.unexpected_pred
    reference.assert_same_counts(
        whole, reference.confusion(pair.gt, pair.pred, pair.num_classes, ignore=pair.ignore)
    )


@st.composite
def three_states(draw):
    k = draw(st.integers(1, 12))
    states = []
    for name in "abc":
        pair = draw(label_pairs(min_classes=k, max_classes=k, unexpected=True, max_dims=3))
        cm = ConfusionMatrix(k, ignore_index=[255, -1], on_unexpected="count")
        if draw(st.booleans()):
            cm.update(pair.gt, pair.pred, key=name)
        states.append(cm)
    return states


@settings(deadline=None)
@given(states=three_states())
def test_merge_associative_commutative_with_identity(states):
    a, b, c = states
    total = _assert_merge_laws(a, b, c, per_image=False)
    assert total.n_pixels == a.n_pixels + b.n_pixels + c.n_pixels


def _assert_merge_laws(a, b, c, *, per_image):  # type: ignore[no-untyped-def]
    """Associative, commutative (in any order of three), the empty state is the identity."""
    assert (a + b) + c == a + (b + c)
    assert a + b == b + a
    assert (a + b) + c == (c + a) + b == b + (c + a)
    empty = ConfusionMatrix.empty(a.num_classes, ignore_index=[255, -1], on_unexpected="count",
                                  per_image=per_image)  # fmt: skip
    assert a + empty == a == empty + a
    return a + b + c


@st.composite
def three_per_image_states(draw):
    """Three per-image states of disjoint keys; some batches keyless, some with image names."""
    k = draw(st.integers(1, 6))
    states = []
    for name in "abc":
        cm = ConfusionMatrix(k, ignore_index=[255, -1], on_unexpected="count", per_image=True)
        for i in range(draw(st.integers(0, 2))):
            pair = draw(label_pairs(min_classes=k, max_classes=k, unexpected=True, max_dims=3,
                                    max_side=4))  # fmt: skip
            how = draw(st.sampled_from(["key", "names", "none"]))
            key = None if how == "none" else f"{name}{i}"
            n = reference.n_images(pair.gt.shape)
            # names identify images: distinct within a state (a repeated one is refused)
            names = [f"img-{name}{i}-{j}" for j in range(n)] if how == "names" else None
            cm.update(pair.gt, pair.pred, key=key, names=names)
        states.append(cm)
    return states


@settings(deadline=None)
@given(states=three_per_image_states())
def test_per_image_merge_associative_commutative_with_identity(states):
    a, b, c = states
    total = _assert_merge_laws(a, b, c, per_image=True)
    assert total.n_images == len(total.images.names) == a.n_images + b.n_images + c.n_images
    assert total.keys == a.keys | b.keys | c.keys
    assert ConfusionMatrix.from_dict(json.loads(json.dumps(total.to_dict()))) == c + (b + a)


@settings(deadline=None)
@given(pair=label_pairs(max_classes=12, max_dims=3, min_side=1, unexpected=False), data=st.data())
def test_renumbering_classes_permutes_results(pair, data):
    k = pair.num_classes
    perm = np.array(data.draw(st.permutations(range(k))))

    def renumber(a):
        a64 = reference._values(a)
        out = a64.copy()
        inside = (a64 >= 0) & (a64 < k)
        out[inside] = perm[a64[inside]]
        return out

    cm = _counted(pair).update(pair.gt, pair.pred)
    cmp = _counted(pair).update(renumber(pair.gt), renumber(pair.pred))
    assert_array_equal(cmp.counts[np.ix_(perm, perm)], cm.counts)
    assert_array_equal(cmp.void[perm], cm.void)
    for f in (segiou.iou, segiou.dice, segiou.precision, segiou.recall):
        assert_array_equal(f(cmp.counts, void=cmp.void)[perm], f(cm.counts, void=cm.void))
    # the class-symmetric summaries do not change (up to summation order)
    for f in (segiou.mean_iou, segiou.fw_iou, segiou.pixel_accuracy, segiou.cohen_kappa):
        x, y = f(cm.counts, void=cm.void), f(cmp.counts, void=cmp.void)
        assert x == pytest.approx(y, nan_ok=True, rel=1e-12, abs=1e-15)


# --- streaming: a state machine against a dict of batches -----------------------------------------

K = 3
IGNORE = 255


class Streaming(RuleBasedStateMachine):
    """Accumulators fed, merged, checkpointed and restored, each with its model: key -> pair."""

    states = Bundle("states")
    checkpoints = Bundle("checkpoints")

    def __init__(self):
        super().__init__()
        self.live: list[tuple[ConfusionMatrix, dict]] = []
        self.next_key = 0

    @initialize(target=states)
    def start(self):
        cm = ConfusionMatrix(K, ignore_index=IGNORE)
        self.live.append((cm, {}))
        return len(self.live) - 1

    @rule(
        target=states,
        i=states,
        shape=st.tuples(st.integers(0, 3), st.integers(0, 4)),
        seed=st.integers(0, 2**16),
    )
    def update(self, i, shape, seed):
        cm, model = self.live[i]
        rng = np.random.default_rng(seed)
        vals = np.array([0, 1, 2, IGNORE], np.uint8)
        gt = vals[rng.integers(0, 4, size=shape)]
        pred = vals[rng.integers(0, 4, size=shape)]
        key = f"k{self.next_key}"
        self.next_key += 1
        cm.update(gt, pred, key=key)
        model[key] = (gt, pred)
        return i

    @rule(target=states, i=states, j=states)
    def merge(self, i, j):
        (a, ma), (b, mb) = self.live[i], self.live[j]
        if a is b or set(ma) & set(mb):  # a state merged with itself: refused, even if empty
            with pytest.raises(DuplicateBatchError):
                a.merge(b)
            return multiple()
        merged = a + b
        self.live.append((merged, {**ma, **mb}))
        return len(self.live) - 1

    @rule(target=checkpoints, i=states)
    def checkpoint(self, i):
        cm, model = self.live[i]
        return json.dumps(cm.to_dict()), dict(model)

    @rule(target=states, ckpt=consumes(checkpoints))
    def restore(self, ckpt):
        text, model = ckpt
        self.live.append((ConfusionMatrix.from_dict(json.loads(text)), model))
        return len(self.live) - 1

    @precondition(lambda self: any(m for _, m in self.live))
    @rule(data=st.data())
    def replay(self, data):
        # a state with batches (the precondition says there is one): replaying one is refused
        i = data.draw(st.sampled_from([j for j, (_, m) in enumerate(self.live) if m]))
        cm, model = self.live[i]
        key = data.draw(st.sampled_from(sorted(model)))
        before = _state(cm)
        with pytest.raises(DuplicateBatchError):
            cm.update(*model[key], key=key)
        assert _state(cm) == before

    @invariant()
    def counts_match_model(self):
        for cm, model in self.live:
            assert cm.keys == set(model)
            total = reference.Counts(np.zeros((K, K), np.int64), np.zeros(K, np.int64))
            for gt, pred in model.values():
                total = reference.add(total, reference.confusion(gt, pred, K, ignore=(IGNORE,)))
            reference.assert_same_counts(cm, total)
            assert cm.n_pixels == sum(g.size for g, _ in model.values())


Streaming.TestCase.settings = settings(
    Streaming.TestCase.settings, max_examples=25, stateful_step_count=15, deadline=None
)
TestStreaming = Streaming.TestCase


def test_unnamed_images_are_numbered_on_across_joins_loads_and_merges(tmp_path):
    # the number of an unnamed image is the rows counted before it; kept as a count (summing
    # every earlier batch's rows per update made one-pixel updates 7x slower by 40,000)
    gt = np.zeros((2, 1, 1), np.uint8)
    cm = ConfusionMatrix(3, per_image=True)
    cm.update(gt, gt)
    cm.update(gt[0], gt[0])
    assert list(cm.images.names) == ["#0", "#1", "#2"]  # (reading them joins the rows)
    cm.update(gt, gt)
    assert list(cm.images.names) == ["#0", "#1", "#2", "#3", "#4"]
    loaded = ConfusionMatrix.load(cm.save(tmp_path / "s.json"))
    loaded.update(gt[0], gt[0])
    assert loaded.images.names[-1] == "#5"
    other = ConfusionMatrix(3, per_image=True).update(gt, gt, names=["a", "b"])
    merged = loaded + other
    merged.update(gt[0], gt[0])
    assert list(merged.images.names) == [*(f"#{i}" for i in range(6)), "a", "b", "#8"]
    assert merged.n_images == 9
