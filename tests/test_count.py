"""Counting: both kernel paths, every layout and dtype, exactly equal to the reference."""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest
import reference
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

from segiou import ConfusionMatrix, LabelSpec, RawLabel, _count, builtin_spec
from segiou.errors import (
    LabelDtypeError,
    LabelRangeError,
    LabelSpecError,
    SegiouError,
    ShapeMismatchError,
)
from segiou.testing.strategies import (
    DTYPES,
    LabelPair,
    aligned_empty,
    byte_pairs,
    dtype_range,
    label_pairs,
    large_byte_pair,
    large_byte_pairs,
    relayout,
)


def _count_with(pair: LabelPair, *, threads: int = 1, **kw: object) -> ConfusionMatrix:
    cm = ConfusionMatrix(pair.num_classes, ignore_index=list(pair.ignore), threads=threads, **kw)
    return cm.update(pair.gt, pair.pred, key="batch")


def _ref(pair: LabelPair) -> reference.Counts:
    return reference.confusion(pair.gt, pair.pred, pair.num_classes, ignore=pair.ignore)


def _word_path(gt: np.ndarray, pred: np.ndarray) -> bool:
    """Whether count_pairs would take the word kernels for this pair (without per-image rows)."""
    g = gt.view(np.uint8) if gt.dtype == np.bool_ else gt
    p = pred.view(np.uint8) if pred.dtype == np.bool_ else pred
    return _count.word_path(g, p, _LAYOUT_LK)


#: A lookup whose word tables fit: word_path then says what the masks' layout allows.
_LAYOUT_LK = _count.Lookup(2, {0: 0, 1: 1}, {0: 0, 1: 1})


def _assert_invariant(cm: ConfusionMatrix, n_pixels: int) -> None:
    total = int(cm.counts.sum() + cm.void.sum()) + cm.n_ignored + cm.n_unexpected
    assert total == n_pixels == cm.n_pixels


# --- generic LUT kernel ------------------------------------------------------------------------


@settings(deadline=None)
@given(pair=label_pairs(unexpected=True), threads=st.sampled_from([1, 2]))
@example(
    pair=LabelPair(np.zeros((0, 3), np.uint8), np.zeros((0, 3), np.uint8), 3, (255,)), threads=1
)
@example(pair=LabelPair(np.array(7, np.int32), np.array(-1, np.int32), 3, (-1,)), threads=2)
def test_counts_equal_reference(pair, threads):
    ref = _ref(pair)
    cm = _count_with(pair, threads=threads, on_unexpected="count")
    reference.assert_same_counts(cm, ref)
    _assert_invariant(cm, pair.gt.size)


@settings(deadline=None, max_examples=25)
@given(
    pair=label_pairs(
        dtypes=("uint16",),
        min_classes=900,
        max_classes=1000,
        min_dims=2,
        max_side=40,
        unexpected=True,
    ),
    threads=st.sampled_from([1, 2]),
)
def test_near_thousand_classes_uint16_generated(pair, threads):
    cm = _count_with(pair, threads=threads, on_unexpected="count")
    reference.assert_same_counts(cm, _ref(pair))
    _assert_invariant(cm, pair.gt.size)


@settings(deadline=None, max_examples=25)
@given(pair=label_pairs(max_classes=30, min_side=1), data=st.data())
def test_all_ignored_generated(pair, data):
    lo, hi = dtype_range(str(pair.gt.dtype))
    fits = sorted(v for v in pair.ignore if lo <= v <= hi)
    assume(fits)  # an ignore value the ground-truth dtype can hold
    value = data.draw(st.sampled_from(fits))
    gt = np.full_like(pair.gt, value)
    cm = ConfusionMatrix(pair.num_classes, ignore_index=list(pair.ignore)).update(gt, pair.pred)
    assert cm.counts.sum() == cm.void.sum() == cm.n_unexpected == 0
    assert cm.n_ignored == gt.size


@settings(deadline=None, max_examples=10)
@given(
    dtype=st.sampled_from(["int16", "int32", "uint16"]),
    n=st.integers(8, 24),
    strided=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_large_batches_on_the_general_kernel(dtype, n, strided, seed):
    # N x H x W batches big enough to split across kernel threads, off the 8-bit word path
    rng = np.random.default_rng(seed)
    k = 19
    base_g = rng.integers(-1, k + 1, size=(n, 96, 2 * 160)).astype(dtype)
    base_p = rng.integers(0, k, size=(n, 96, 2 * 160)).astype(dtype)
    gt, pred = (base_g[:, :, ::2], base_p[:, :, 1::2]) if strided else (base_g, base_p)
    cm = ConfusionMatrix(k, ignore_index=[k], per_image=True, threads=2, on_unexpected="count")
    cm.update(gt, pred)
    ref = reference.confusion(gt, pred, k, ignore=(k,))
    reference.assert_same_counts(cm, ref)
    per = reference.confusion_per_image(gt, pred, k, ignore=(k,))
    for i, r in enumerate(per):
        tp = np.diagonal(r.counts)
        assert_array_equal(cm.images.tp[i], tp)
        assert_array_equal(cm.images.fp[i], r.counts.sum(axis=0) - tp)


@settings(deadline=None)
@given(
    pair=label_pairs(dtypes=("uint8", "int16", "int32", "bool"), same_dtype=False, max_classes=40),
    threads=st.sampled_from([1, 2]),
)
def test_mixed_dtypes_equal_reference(pair, threads):
    cm = _count_with(pair, threads=threads)  # no unexpected values: "raise" must not raise
    reference.assert_same_counts(cm, _ref(pair))
    assert cm.n_unexpected == 0


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "int32", "int64", "int8"])
@pytest.mark.parametrize("threads", [1, 2])
def test_random_masks_every_dtype(dtype, threads):
    rng = np.random.default_rng(7)
    k = 5
    gt = rng.integers(0, k + 1, size=(3, 40, 33)).astype(dtype)
    gt[gt == k] = 127  # ignored
    pred = rng.integers(0, k + 1, size=gt.shape).astype(dtype)
    pred[pred == k] = 127  # void
    cm = ConfusionMatrix(k, ignore_index=127, threads=threads).update(gt, pred)
    ref = reference.confusion(gt, pred, k, ignore=(127,))
    reference.assert_same_counts(cm, ref)
    assert ref.void.sum() > 0
    assert ref.n_ignored > 0


def test_thousand_classes_uint16():
    rng = np.random.default_rng(1000)
    k = 1000
    gt = rng.integers(0, k, size=(64, 97)).astype(np.uint16)
    gt[:3] = 65535
    pred = np.where(rng.random(gt.shape) < 0.7, gt, rng.integers(0, k, size=gt.shape))
    pred = pred.astype(np.uint16)
    pred[10, :20] = 65535  # void
    for threads in (1, 2):
        cm = ConfusionMatrix(k, ignore_index=65535, threads=threads).update(gt, pred)
        ref = reference.confusion(gt, pred, k, ignore=(65535,))
        reference.assert_same_counts(cm, ref)
        assert ref.void.sum() == 20


def test_every_pixel_in_one_place_adversarial():
    # Every kind of pixel at once, in every combination of gt kind x pred kind.
    gt_vals = [0, 2, 255, -3, 9]  # class, class, ignored, unexpected, unexpected
    pred_vals = [0, 1, 2, 255, -3, 9]  # classes, void, unexpected x 2
    gt = np.repeat(np.array(gt_vals, np.int16), len(pred_vals))
    pred = np.tile(np.array(pred_vals, np.int16), len(gt_vals))
    cm = ConfusionMatrix(3, ignore_index=255, on_unexpected="count").update(gt, pred)
    assert cm.counts.tolist() == [[1, 1, 1], [0, 0, 0], [1, 1, 1]]
    assert cm.void.tolist() == [1, 0, 1]
    assert cm.n_ignored == 6  # whatever was predicted, unexpected predictions included
    assert cm.unexpected_gt == {-3: 6, 9: 6}
    assert cm.unexpected_pred == {-3: 2, 9: 2}  # only at valid ground truth
    _assert_invariant(cm, gt.size)


# --- 8-bit word path ---------------------------------------------------------------------------


@settings(deadline=None)
@given(pair=byte_pairs(), threads=st.sampled_from([1, 2]), offset=st.sampled_from([0, 3]))
def test_word_path_equals_reference_small(pair, threads, offset):
    # Small masks take the word path (a keyed batch: the general way), the prediction at the
    # same offset from a word boundary as the ground truth (read in place) or not (copied).
    pred = relayout(pair.pred, "offset", 0) if offset else pair.pred
    assert _word_path(pair.gt, pred)
    cm = _count_with(LabelPair(pair.gt, pred, pair.num_classes, pair.ignore), threads=threads,
                     on_unexpected="count")  # fmt: skip
    reference.assert_same_counts(cm, _ref(pair))
    _assert_invariant(cm, pair.gt.size)


@pytest.mark.parametrize(
    ("dtype", "n"),
    [
        ("uint8", 1 << 20),
        ("uint8", (1 << 20) + 5),
        ("int8", (1 << 20) + 7),
        ("bool", (1 << 20) + 3),
    ],
)
def test_word_path_equals_reference_large(dtype, n):
    pair = large_byte_pair(seed=n, dtype=dtype, n=n)
    assert _word_path(pair.gt, pair.pred)
    ref = _ref(pair)
    if dtype != "bool":
        assert ref.n_ignored > 0
        assert ref.void.sum() > 0
        assert ref.unexpected_pred
    for threads in (1, 2):
        cm = _count_with(pair, threads=threads, on_unexpected="count")
        reference.assert_same_counts(cm, ref)
        _assert_invariant(cm, n)
    # The same values through the generic kernel (strided views), and through the word path
    # with the prediction three bytes past a word boundary (copied block by block).
    g2 = relayout(pair.gt, "step", 0)
    p2 = relayout(pair.pred, "step", 0)
    assert not _word_path(g2, p2)
    cm = _count_with(LabelPair(g2, p2, pair.num_classes, pair.ignore), on_unexpected="count")
    reference.assert_same_counts(cm, ref)
    p3 = relayout(pair.pred, "offset", 0)
    assert _word_path(pair.gt, p3)
    cm = _count_with(LabelPair(pair.gt, p3, pair.num_classes, pair.ignore), threads=2,
                     on_unexpected="count")  # fmt: skip
    reference.assert_same_counts(cm, ref)


@settings(deadline=None, max_examples=4)
@given(pair=large_byte_pairs(), threads=st.sampled_from([1, 2]))
def test_word_path_equals_reference_large_random(pair, threads):
    assert _word_path(pair.gt, pair.pred)
    cm = _count_with(pair, threads=threads, on_unexpected="count")
    reference.assert_same_counts(cm, _ref(pair))
    _assert_invariant(cm, pair.gt.size)


def test_word_path_large_2d_and_default_threads():
    pair = large_byte_pair(seed=3, n=1024 * 1025)
    gt, pred = pair.gt.reshape(1024, 1025), pair.pred.reshape(1024, 1025)
    assert _word_path(gt, pred)
    cm = ConfusionMatrix(pair.num_classes, ignore_index=255, on_unexpected="count")
    cm.update(gt, pred)  # threads=None: all of Numba's threads for a large batch
    reference.assert_same_counts(cm, _ref(pair))


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_word_path_mixes_noisy_and_coherent_blocks(dtype):
    # The word path picks a way to count per block of words (runs, two runs a word, pixel by
    # pixel). Alternate blocks of iid noise over all 256 byte values (every byte code,
    # unexpected values included) with uniform runs, at offsets that do not line up with the
    # kernel's blocks or threads.
    rng = np.random.default_rng(11)
    n = (1 << 21) + 13
    gt = np.repeat(rng.integers(0, 19, size=n // 1000 + 1), 1000)[:n]
    pred = gt.copy()
    pred[rng.random(n) < 0.01] = 7
    edges = np.cumsum(rng.integers(3_000, 40_000, size=200))
    edges = edges[edges < n]
    for a, b in zip(edges[::2], edges[1::2], strict=False):
        gt[a:b] = (
            rng.integers(-128, 128, size=b - a)
            if dtype == "int8"
            else rng.integers(0, 256, size=b - a)
        )
        pred[a:b] = rng.integers(0, 256, size=b - a)
    g, p = aligned_empty(n, dtype), aligned_empty(n, dtype)
    g[...] = gt.astype(np.int64).astype(dtype)
    p[...] = pred.astype(np.int64).astype(dtype)
    ignore = (255,) if dtype == "uint8" else (-1,)
    pair = LabelPair(g, p, 19, ignore)
    assert _word_path(g, p)
    ref = _ref(pair)
    assert ref.unexpected_gt
    assert ref.unexpected_pred
    assert ref.n_ignored
    assert ref.void.sum()
    for threads in (1, 2):
        cm = _count_with(pair, threads=threads, on_unexpected="count")
        reference.assert_same_counts(cm, ref)
        _assert_invariant(cm, n)


def test_word_path_int8_negative_ids_raw_spec():
    # int8 masks whose raw ids are negative: the byte table must read bytes as signed.
    spec = LabelSpec(
        "signed",
        ["a", "b", "c"],
        raw=[
            RawLabel(-128, "a", 0),
            RawLabel(-1, "b", 1),
            RawLabel(5, "c", 2),
            RawLabel(-2, "x", None),
        ],
    )
    rng = np.random.default_rng(5)
    n = (1 << 20) + 1
    vals = np.array([-128, -1, 5, -2, 127], dtype=np.int8)  # 127 is unexpected
    gt, pred = aligned_empty(n, np.int8), aligned_empty(n, np.int8)
    gt[...] = vals[rng.choice(5, size=n, p=[0.4, 0.3, 0.2, 0.09, 0.01])]
    pred[...] = vals[rng.choice(5, size=n, p=[0.3, 0.3, 0.3, 0.09, 0.01])]
    assert _word_path(gt, pred)
    cm = ConfusionMatrix(spec, gt_ids="raw", on_unexpected="count", threads=2)
    cm.update(gt, pred)
    mapping = {-128: 0, -1: 1, 5: 2, -2: None}
    ref = reference.confusion(gt, pred, 3, gt_map=mapping)
    reference.assert_same_counts(cm, ref)
    assert ref.unexpected_gt == {127: cm.unexpected_gt[127]}


# --- per-image rows ----------------------------------------------------------------------------


@settings(deadline=None)
@given(
    pair=label_pairs(max_classes=30, min_dims=1, max_dims=4, max_side=5, unexpected=True),
    threads=st.sampled_from([1, 2]),
)
def test_per_image_rows_equal_reference(pair, threads):
    cm = _count_with(pair, threads=threads, on_unexpected="count", per_image=True)
    refs = reference.confusion_per_image(pair.gt, pair.pred, pair.num_classes, ignore=pair.ignore)
    rows = cm.images
    assert len(rows.names) == len(refs) == cm.n_images
    for i, ref in enumerate(refs):
        assert_array_equal(rows.tp[i], ref.tp)
        assert_array_equal(rows.fp[i], ref.fp)
        assert_array_equal(rows.fn[i], ref.fn)
        assert rows.ignored[i] == ref.n_ignored
        assert rows.unexpected[i] == ref.n_unexpected
    # The rows add up to the dataset counts.
    reference.assert_same_counts(cm, _ref(pair))
    if refs:
        assert_array_equal(rows.tp.sum(axis=0), np.diagonal(cm.counts))


def test_per_image_zero_size_trailing_axes():
    # 2 x 3 images of 0 x 5 pixels: six empty images, not a crash.
    gt = np.zeros((2, 3, 0, 5), np.uint8)
    cm = ConfusionMatrix(3, per_image=True).update(gt, gt.copy(), key="empty")
    assert cm.images.tp.shape == (6, 3)
    assert cm.n_images == 6


@pytest.mark.parametrize("shape", [(0, 5), (0,), (4, 0)])
def test_per_image_rows_match_image_count_for_empty_images(shape):
    gt = np.zeros(shape, np.uint8)
    cm = ConfusionMatrix(3, per_image=True).update(gt, gt.copy(), key="empty")
    assert len(cm.images.names) == cm.n_images


# --- raw ids -----------------------------------------------------------------------------------


@st.composite
def raw_specs(draw):
    k = draw(st.integers(1, 12))
    ids = draw(st.lists(st.integers(-300, 400), min_size=1, max_size=20, unique=True))
    targets = draw(
        st.lists(st.one_of(st.none(), st.integers(0, k - 1)), min_size=len(ids), max_size=len(ids))
    )
    mapping = dict(zip(ids, targets, strict=True))
    spec = LabelSpec(
        "random raw",
        [f"c{i}" for i in range(k)],
        raw=[RawLabel(i, f"r{i}", t) for i, t in mapping.items()],
    )
    return spec, mapping


@settings(deadline=None)
@given(
    spec_map=raw_specs(),
    data=st.data(),
    dtype=st.sampled_from(["int16", "int32", "int64"]),
    threads=st.sampled_from([1, 2]),
)
def test_raw_ids_equal_reference(spec_map, data, dtype, threads):
    spec, mapping = spec_map
    values = [*sorted(mapping), -301, 401]  # two unmapped ids
    shape = data.draw(st.tuples(st.integers(0, 6), st.integers(0, 9)))
    from hypothesis.extra.numpy import arrays

    gt = data.draw(arrays(dtype, shape, elements=st.sampled_from(values)))
    pred = data.draw(arrays(dtype, shape, elements=st.sampled_from(values)))
    cm = ConfusionMatrix(spec, gt_ids="raw", on_unexpected="count", threads=threads)
    cm.update(gt, pred)
    ref = reference.confusion(gt, pred, spec.num_classes, gt_map=mapping)
    reference.assert_same_counts(cm, ref)
    _assert_invariant(cm, gt.size)


def test_cityscapes_raw_gt_class_pred():
    # gt in labelIds, predictions in trainIds (255 = void).
    gt = np.array([[7, 8, 26, 9], [0, 24, 33, 7]], np.uint8)
    pred = np.array([[0, 0, 13, 13], [5, 255, 18, 1]], np.uint8)
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", pred_ids="class").update(gt, pred)
    spec = builtin_spec("cityscapes")
    ref = reference.confusion(
        gt,
        pred,
        19,
        gt_map={r.id: r.cls for r in spec.raw},
        pred_map=reference.class_map(19, (255,)),
    )
    reference.assert_same_counts(cm, ref)
    assert cm.n_ignored == 2  # parking (9) and unlabeled (0)
    assert cm.void[11] == 1  # person predicted as 255


# --- errors ------------------------------------------------------------------------------------


def _first_pos(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(np.flatnonzero(mask.ravel())[0], mask.shape))


@settings(deadline=None)
@given(pair=label_pairs(unexpected=True, max_classes=20, min_dims=1, max_dims=3))
def test_unexpected_values_raise_and_count_nothing(pair):
    ref = _ref(pair)
    cm = ConfusionMatrix(pair.num_classes, ignore_index=list(pair.ignore))
    cm.update(np.zeros(3, np.uint8), np.zeros(3, np.uint8), key="before")
    before = cm.to_dict()
    if not ref.n_unexpected:  # nothing to refuse: the batch is counted, exactly
        cm.update(pair.gt, pair.pred, key="b")
        np.testing.assert_array_equal(cm.counts - np.asarray(before["counts"]), ref.counts)
        assert cm.n_ignored == ref.n_ignored
        return
    with pytest.raises(LabelRangeError) as info:
        cm.update(pair.gt, pair.pred, key="b")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, SegiouError)
    msg = str(info.value)
    assert "batch 'b'" in msg
    assert "on_unexpected='count'" in msg
    g = reference._values(pair.gt)
    p = reference._values(pair.pred)
    valid_gt = np.isin(g, np.arange(pair.num_classes))
    for side, found, vals, where in (
        ("gt", ref.unexpected_gt, g, np.ones(g.shape, bool)),
        ("pred", ref.unexpected_pred, p, valid_gt),
    ):
        shown = sorted(found.items(), key=lambda kv: -kv[1])
        if len(shown) > 8:
            assert f"and {len(shown) - 8} more value(s)" in msg
            shown = [kv for kv in shown if kv[1] > shown[8][1]]
        for v, c in shown:
            pos = _first_pos((vals == v) & where)
            assert f"{v} ({c:,} px, first at {pos})" in msg, (side, v, c, pos, msg)
    # nothing of the batch was counted, and the key is still free
    assert cm.to_dict() == before
    cm.update(np.zeros(2, np.uint8), np.zeros(2, np.uint8), key="b")
    assert "b" in cm.keys


def test_unexpected_message_example():
    gt = np.array([[0, 5, 5], [-3, 1, 1]])
    pred = np.array([[0, 1, 1], [1, 7, 255]])
    with pytest.raises(LabelRangeError) as info:
        ConfusionMatrix(2, ignore_index=255).update(gt, pred, key="k")
    msg = str(info.value)
    assert "5 (2 px, first at (0, 1))" in msg
    assert "-3 (1 px, first at (1, 0))" in msg
    assert "7 (1 px, first at (1, 1))" in msg
    assert "Nothing was counted" in msg


def _odd_bool(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A bool mask whose True pixels hold any non-zero byte (as ``.view(bool)`` makes them)."""
    raw = rng.integers(1, 256, shape).astype(np.uint8)
    raw[rng.random(shape) < 0.5] = 0
    raw.flat[:4] = [0, 1, 2, 255]
    return raw.view(bool)


@pytest.mark.parametrize(
    "shape", [(1, 9), (600, 600), (3, 300, 301)], ids=["tiny", "word-path", "batch"]
)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "per_image"])
def test_bool_masks_count_any_nonzero_byte_as_true(shape, threads, layout):
    # numpy reads every non-zero byte of a bool array as True; so does segiou, even where the
    # byte is an ignore value (255) or another class id (5) of the spec.
    rng = np.random.default_rng(sum(shape) + threads)
    g, p = _odd_bool(rng, shape), _odd_bool(rng, shape)
    if layout == "strided":
        g, p = g[..., ::2], p[..., ::2]
    ref = reference.confusion(g.astype(np.int64), p.astype(np.int64), 19, ignore=(255,))
    cm = ConfusionMatrix(19, ignore_index=255, threads=threads, per_image=layout == "per_image")
    cm.update(g, p)
    assert_array_equal(cm.counts, ref.counts)
    assert cm.counts.sum() == g.size
    assert (cm.n_ignored, cm.n_unexpected) == (0, 0)
    mixed = ConfusionMatrix(19, ignore_index=255, threads=threads).update(g, p.astype(np.uint8))
    assert_array_equal(mixed.counts, ref.counts)


def test_bool_true_outside_the_spec_is_reported_as_1():
    # a spec with id 0 only: True pixels are unexpected, reported as numpy shows them (1)
    g = np.array([[0, 1, 255, 2]], np.uint8).view(bool)
    with pytest.raises(LabelRangeError, match=r"value\(s\) 1 \(3 px, first at \(0, 1\)\)"):
        ConfusionMatrix(LabelSpec.from_num_classes(1)).update(g, np.zeros((1, 4), bool))
    cm = ConfusionMatrix(LabelSpec.from_num_classes(1), on_unexpected="count")
    cm.update(g, np.zeros((1, 4), bool))
    assert cm.unexpected_gt == {1: 3}


@pytest.mark.parametrize("contiguous", [True, False], ids=["word-path", "generic"])
def test_image_counter_reads_bool_chunks_like_numpy(contiguous):
    rng = np.random.default_rng(5)
    gt, pred = _odd_bool(rng, (37, 45)), _odd_bool(rng, (37, 45))
    spec = LabelSpec.from_num_classes(19, ignore=(255,))
    counter = _count.ImageCounter(_count.Lookup(19, spec.gt_map(), spec.pred_map()))
    form = np.ascontiguousarray if contiguous else (lambda a: a)  # views: the generic kernel
    for y, x in _chunks(gt, 16):
        g, p = form(gt[y : y + 16, x : x + 16]), form(pred[y : y + 16, x : x + 16])
        counter.add(g, p if (y + x) % 32 else form(p.astype(np.uint8)))  # bool and uint8 preds
    counts, void, ignored, ug, up = _split(counter.finish(), 19)
    ref = reference.confusion(gt.astype(np.int64), pred.astype(np.int64), 19, ignore=(255,))
    assert_array_equal(counts, ref.counts)
    assert_array_equal(void, ref.void)
    assert (ignored, ug, up) == (0, 0, 0)


def test_on_unexpected_count_reports_values():
    gt = np.array([[0, 5, 5], [-3, 1, 1]])
    pred = np.array([[0, 1, 1], [1, 7, 255]])
    cm = ConfusionMatrix(2, ignore_index=255, on_unexpected="count").update(gt, pred)
    assert cm.unexpected_gt == {5: 2, -3: 1}
    assert cm.unexpected_pred == {7: 1}
    assert cm.counts.tolist() == [[1, 0], [0, 0]]
    assert cm.void.tolist() == [0, 1]
    _assert_invariant(cm, 6)


@pytest.mark.parametrize(
    ("gshape", "pshape"), [((3,), (4,)), ((2, 3), (3, 2)), ((2, 3), (6,)), ((), (1,))]
)
def test_shape_mismatch(gshape, pshape):
    cm = ConfusionMatrix(3)
    with pytest.raises(ShapeMismatchError) as info:
        cm.update(np.zeros(gshape, np.uint8), np.zeros(pshape, np.uint8), key="x")
    assert isinstance(info.value, ValueError)
    assert str(gshape) in str(info.value)
    assert str(pshape) in str(info.value)
    assert cm.n_pixels == 0
    assert not cm.keys


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "object", "U1"])
@pytest.mark.parametrize("side", ["gt", "pred"])
def test_non_integer_masks(dtype, side):
    good = np.zeros((2, 2), np.uint8)
    bad = np.zeros((2, 2)).astype(dtype)
    args = (bad, good) if side == "gt" else (good, bad)
    with pytest.raises(LabelDtypeError) as info:
        ConfusionMatrix(3).update(*args, key="x")
    assert isinstance(info.value, TypeError)
    assert side in str(info.value)
    assert str(bad.dtype) in str(info.value)


# --- memory ------------------------------------------------------------------------------------


def test_strided_2d_view_is_not_copied():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 4, size=(2000, 4000)).astype(np.int32)
    gt = base[::2, 1::2]  # 1000 x 2000 int32 view: a copy would take 8 MB
    pred = base.T[1::4, :]  # transposed and strided, 1000 x 2000
    assert not gt.flags.c_contiguous
    assert not pred.flags.c_contiguous
    cm = ConfusionMatrix(4, threads=1)
    cm.update(gt[:2, :2], pred[:2, :2])  # compile first
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        cm.update(gt, pred)
        _, peak = tracemalloc.get_traced_memory()
        # sanity: tracemalloc sees numpy allocations
        tracemalloc.reset_peak()
        np.ascontiguousarray(gt)
        _, copy_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert copy_peak >= gt.nbytes
    assert peak < gt.nbytes // 20, peak
    reference.assert_same_counts(
        cm,
        reference.add(
            reference.confusion(gt[:2, :2], pred[:2, :2], 4), reference.confusion(gt, pred, 4)
        ),
    )


# --- the chunk-by-chunk counter of the Dask engine ---------------------------------------------


def _split(full: np.ndarray, k: int):
    """A folded (K+2) x (K+2) code table: counts, void, ignored, unexpected gt, unexpected pred."""
    return (
        full[:k, :k],
        full[:k, k],
        int(full[k, :].sum()),
        int(full[k + 1, :].sum()),
        int(full[:k, k + 1].sum()),
    )


def _chunks(a: np.ndarray, step: int):
    for y in range(0, a.shape[0], step):
        for x in range(0, a.shape[1], step):
            yield y, x


@pytest.mark.parametrize("dtype", ["uint8", "int16", "bool"])
def test_image_counter_equals_reference(dtype):
    rng = np.random.default_rng(11)
    k = 2 if dtype == "bool" else 4
    ign = () if dtype == "bool" else (200,)
    vals = list(range(k)) + list(ign)
    gt = np.array(vals)[rng.integers(0, len(vals), size=(37, 45))].astype(dtype)
    pred = np.array(vals)[rng.integers(0, len(vals), size=(37, 45))].astype(dtype)
    spec = LabelSpec.from_num_classes(k, ignore=ign)
    lk = _count.Lookup(k, spec.gt_map(), spec.pred_map())
    counter = _count.ImageCounter(lk)
    for y, x in _chunks(gt, 16):
        g = np.ascontiguousarray(gt[y : y + 16, x : x + 16])
        p = np.ascontiguousarray(pred[y : y + 16, x : x + 16])
        counter.add(g, p)  # contiguous chunks: the word path for 8-bit data
        counter.add(g[:0], p[:0])
    full = counter.finish()
    counts, void, ignored, ug, up = _split(full, k)
    ref = reference.confusion(gt, pred, k, ignore=ign)
    assert_array_equal(counts, ref.counts)
    assert_array_equal(void, ref.void)
    assert (ignored, ug, up) == (ref.n_ignored, 0, 0)
    # finish() resets: the next image starts from zero
    counter.add(np.ascontiguousarray(gt[:8, :8]), np.ascontiguousarray(pred[:8, :8]))
    counts2, *_ = _split(counter.finish(), k)
    assert_array_equal(counts2, reference.confusion(gt[:8, :8], pred[:8, :8], k).counts)


def test_image_counters_sharing_a_thread_do_not_mix():
    # Two counters on one thread (for example, a task that failed half way through an image and
    # the next task on the same worker thread): the second image must not get the first's pixels.
    lk = _count.Lookup(3, {0: 0, 1: 1, 2: 2}, {0: 0, 1: 1, 2: 2})
    a, b = _count.ImageCounter(lk), _count.ImageCounter(lk)
    ones = np.ones((8, 8), np.uint8)
    twos = np.full((8, 8), 2, np.uint8)
    a.add(ones, ones)  # abandoned, never finished ...
    b.add(twos, twos)
    counts_b, *_ = _split(b.finish(), 3)
    assert counts_b.tolist() == [[0, 0, 0], [0, 0, 0], [0, 0, 64]]
    counts_a, *_ = _split(a.finish(), 3)  # ... or finished late
    assert counts_a.tolist() == [[0, 0, 0], [0, 64, 0], [0, 0, 0]]


def test_image_counters_on_different_threads():
    lk = _count.Lookup(2, {0: 0, 1: 1}, {0: 0, 1: 1})
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        c = _count.ImageCounter(lk)
        for _ in range(50):
            c.add(np.full((16, 16), i % 2, np.uint8), np.full((16, 16), i % 2, np.uint8))
        results[i] = _split(c.finish(), 2)[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, counts in results.items():
        assert counts[i % 2, i % 2] == 50 * 256
        assert counts.sum() == 50 * 256


# --- the documented dtypes ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_documented_dtypes_accepted(dtype):
    gt = np.array([[0, 1], [1, 0]]).astype(dtype)
    cm = ConfusionMatrix(2).update(gt, gt[::-1])
    assert cm.counts.tolist() == [[0, 2], [2, 0]]


# --- limits (documented here, so that a change is noticed) -------------------------------------


@pytest.mark.xfail(
    strict=True,
    raises=LabelSpecError,
    reason="design: lookup tables span min..max of the ids of a spec (at most 4M entries), so an "
    "ignore value millions away from the class ids is refused when the accumulator is built",
)
def test_far_away_ignore_value():
    cm = ConfusionMatrix(3, ignore_index=2**31 - 1)
    cm.update(np.array([0, 2**31 - 1], np.int32), np.array([0, 1], np.int32))
    assert cm.n_ignored == 1


def test_uint64_values_above_int64_range_are_unexpected():
    # kernels read int64: 2**64 - 1 must not pass for the ignore value -1 (nor 2**63 for a class)
    big = [2**64 - 1, 2**63, 2**64 - 2]
    gt = np.array([0, big[0], 1, big[1], 2, 0], np.uint64)
    pred = np.array([0, 1, big[2], 2, 2, big[0]], np.uint64)
    cm = ConfusionMatrix(3, ignore_index=-1, on_unexpected="count").update(gt, pred)
    assert cm.unexpected_gt == {2**64 - 1: 1, 2**63: 1}
    assert cm.unexpected_pred == {2**64 - 2: 1, 2**64 - 1: 1}
    assert cm.n_ignored == 0
    assert cm.counts.sum() == 2  # (0, 0) and (2, 2)
    assert cm.n_pixels == gt.size
    with pytest.raises(LabelRangeError, match=r"18446744073709551615 \(1 px, first at \(1,\)\)"):
        ConfusionMatrix(3, ignore_index=-1).update(gt, pred)
    counter = _count.ImageCounter(_count.Lookup(3, {0: 0, 1: 1, 2: 2, -1: _count.IGNORE},
                                                {0: 0, 1: 1, 2: 2, -1: _count.IGNORE}))  # fmt: skip
    counter.add(gt.reshape(1, -1), pred.reshape(1, -1))
    table = counter.finish()  # the engine's counter: 2 gt and 2 pred pixels unexpected
    assert (table[4, :].sum(), table[:3, 4].sum(), table[3, :].sum()) == (2, 2, 0)


class _Masks(np.ndarray):
    """An ndarray subclass: the short way of ``update`` leaves it to the general way."""


@pytest.mark.parametrize(
    ("kernel", "way"),
    [("count_u8_serial", "general"), ("count_u8_parallel", "general"),
     ("count_wide_serial", "general"), ("count_wide_serial", "short")],
)  # fmt: skip
def test_word_path_scratch_tables_after_an_interrupted_call(monkeypatch, kernel, way):
    # the word tables are kept per thread; Ctrl-C arrives at the next bytecode after a kernel
    # returned: the kernels fold and zero them before they return, so nothing reaches the
    # next count, and the interrupted batch (its key) is not counted (the short way counts a
    # large 8-bit batch in one kernel call: see test_stream)
    import numba

    from segiou import _word_kernels
    from segiou.testing.synthetic import cityscapes_like

    g, p = cityscapes_like(1, 512, 1024, seed=1)
    if kernel == "count_wide_serial":
        p = p.astype(np.int32)
    ref = reference.confusion(g, p, 19, ignore=(255,))
    if way == "general":
        g, p = g.view(_Masks), p.view(_Masks)
    # at least two workers for the parallel kernel (with NUMBA_NUM_THREADS=1 the default would
    # count on the calling thread and never call it)
    threads = max(2, numba.get_num_threads()) if kernel == "count_u8_parallel" else 1
    real = getattr(_word_kernels, kernel)

    def interrupted(*args: object) -> object:
        real(*args)
        raise KeyboardInterrupt

    cm = ConfusionMatrix(19, ignore_index=255, threads=threads)
    with monkeypatch.context() as m:
        m.setattr(_word_kernels, kernel, interrupted)
        with pytest.raises(KeyboardInterrupt):
            cm.update(g, p, key="a")
    assert cm.n_pixels == 0
    assert not cm.keys
    size = cm._lookup.word_table_size
    assert not _count.word_tables(threads, size).any()  # left zeroed for the next call
    cm.update(g, p, key="a")
    assert_array_equal(cm.counts, ref.counts)


# --- byte order --------------------------------------------------------------------------------

BIG_ENDIAN = (">i2", ">u2", ">i4", ">u4", ">i8", ">u8")


@pytest.mark.parametrize("dtype", BIG_ENDIAN)
@pytest.mark.parametrize("per_image", [False, True])
def test_big_endian_masks_count_like_little_endian(dtype, per_image):
    big = np.dtype(dtype)
    little = big.newbyteorder("<")
    assert not big.isnative
    assert little.isnative
    rng = np.random.default_rng(3)
    # classes, ignore values 255 / -1 (void in predictions) and unexpected values 7 / -3
    vals = np.array([0, 1, 2, 3, 4, 255, 7] + ([-1, -3] if big.kind == "i" else []))
    gt = vals[rng.integers(0, vals.size, size=(3, 9, 11))]
    pred = vals[rng.integers(0, vals.size, size=(3, 9, 11))]
    ignore = [255, -1] if big.kind == "i" else [255]

    def counted(g: np.ndarray, p: np.ndarray, threads: int) -> ConfusionMatrix:
        cm = ConfusionMatrix(5, ignore_index=ignore, on_unexpected="count", per_image=per_image,
                             threads=threads)  # fmt: skip
        return cm.update(g, p, key="b")

    want = counted(gt.astype(little), pred.astype(little), 1)
    assert want.n_unexpected > 0
    reference.assert_same_counts(want, reference.confusion(gt, pred, 5, ignore=tuple(ignore)))
    for threads in (1, 2):
        assert counted(gt.astype(big), pred.astype(big), threads) == want
        # a strided big-endian view, and one big-endian side only
        gs = np.zeros((3, 9, 22), big)
        gs[..., ::2] = gt
        assert counted(gs[..., ::2], pred.astype(big), threads) == want
        assert counted(gt.astype(little), pred.astype(big), threads) == want
    if per_image:
        assert_array_equal(counted(gt.astype(big), pred.astype(big), 1).images.tp, want.images.tp)
    # what was wrong is still reported with its true value and position
    with pytest.raises(LabelRangeError, match=r"\b7 \("):
        ConfusionMatrix(5, ignore_index=ignore).update(gt.astype(big), pred.astype(big))


def test_big_endian_uint64_above_int64_range_is_unexpected():
    gt = np.array([0, 2**64 - 1, 1], ">u8")
    pred = np.array([0, 1, 2**64 - 1], ">u8")
    cm = ConfusionMatrix(3, ignore_index=-1, on_unexpected="count").update(gt, pred)
    assert cm.unexpected_gt == {2**64 - 1: 1}
    assert cm.unexpected_pred == {2**64 - 1: 1}
    assert cm.n_ignored == 0
    assert cm.counts[0, 0] == 1


@pytest.mark.parametrize("dtype", BIG_ENDIAN)
def test_image_counter_reads_big_endian_chunks(dtype):
    big = np.dtype(dtype)
    rng = np.random.default_rng(4)
    gt = rng.integers(0, 3, size=(16, 20)).astype(big)
    pred = rng.integers(0, 3, size=(16, 20)).astype(big)
    lk = _count.Lookup(3, {0: 0, 1: 1, 2: 2}, {0: 0, 1: 1, 2: 2})
    counter = _count.ImageCounter(lk)
    for y, x in _chunks(gt, 8):
        counter.add(gt[y : y + 8, x : x + 8], pred[y : y + 8, x : x + 8])
    counts, *_ = _split(counter.finish(), 3)
    assert_array_equal(
        counts, reference.confusion(gt.astype(np.int64), pred.astype(np.int64), 3).counts
    )


def test_as_labels_copies_only_non_native_data():
    native = np.arange(6, dtype=np.uint16)
    assert _count.as_labels(native, "gt", "here") is native
    big = native.astype(">u2")
    out = _count.as_labels(big, "gt", "here")
    assert out.dtype.isnative
    assert out.dtype == np.uint16
    assert_array_equal(out, native)


# --- messages of refused label specs -----------------------------------------------------------


@pytest.mark.parametrize("ignore", [10**7, -(10**7), [255, 10**7]])
def test_distant_class_space_ignore_value_message(ignore):
    with pytest.raises(LabelSpecError) as info:
        ConfusionMatrix(19, ignore_index=ignore)
    msg = str(info.value)
    far = ignore if isinstance(ignore, int) else ignore[1]
    assert f"ignore value {far} is too far from the class ids 0..18" in msg
    assert "4,194,304" in msg  # the span limit
    assert "ignore_index" in msg  # what to do
    assert "raw" not in msg  # no raw ids are involved


def test_distant_raw_ids_message():
    spec = LabelSpec("far", ["a", "b"], raw=[RawLabel(0, "a", 0), RawLabel(10**7, "b", 1)])
    with pytest.raises(LabelSpecError, match=r"raw label ids of the spec span 0\.\.10000000"):
        ConfusionMatrix(spec, gt_ids="raw")
    ConfusionMatrix(spec)  # class ids are compact: fine


@pytest.mark.parametrize("env", [{"NUMBA_NUM_THREADS": "1"}, {}])
def test_a_first_call_on_one_thread_in_a_fresh_process(env: dict[str, str]) -> None:
    # the 8-bit path on one thread, before any parallel region ran: Numba has no threading layer
    # to name yet (it raised "Threading layer is not initialized" from the serial fold)
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, segiou\n"
        "g = (np.arange(1024 * 2048) % 19).astype(np.uint8).reshape(1, 1024, 2048)\n"
        "cm = segiou.ConfusionMatrix(19, threads=1).update(g, g)\n"
        "assert cm.counts.trace() == g.size, cm.counts.trace()\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ | env, timeout=300, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_a_kernel_that_loses_pixels_is_refused_loudly(monkeypatch) -> None:
    # the general way checks that the kernels accounted for every pixel, and that the unexpected
    # pixels they counted are the ones the masks hold: a disagreement is a bug, never silent
    from segiou import _word_kernels
    from segiou.errors import InternalError

    g = np.zeros((16, 16), np.uint8)
    cm = ConfusionMatrix(3, on_unexpected="count")
    with monkeypatch.context() as m:
        m.setattr(_word_kernels, "count_u8_serial", lambda *args: None)  # counts nothing
        with pytest.raises(InternalError, match="accounted for 0 of 256 pixels"):
            cm.update(g.view(_Masks), g.view(_Masks))  # the general way
    p = g.copy()
    p[3, 4] = 9
    with monkeypatch.context() as m:
        m.setattr(_count, "describe_unexpected", lambda *args: {})  # values not found again
        with pytest.raises(InternalError, match="found 0 unexpected ground-truth and 1 unexpected"):
            cm.update(g.view(_Masks), p.view(_Masks))
    assert cm.n_pixels == 0
    assert not cm.counts.any()


@pytest.mark.parametrize("mode", ["count", "raise"])
def test_uint64_values_equal_as_floats_stay_distinct(mode, tmp_path) -> None:
    # numpy compares uint64 masks with int64 ids in float64: 2**53 and 2**53 + 1 collided (one
    # taken for a known id, and the kernels' and the description's counts disagreed)
    big = [2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1]
    g = np.zeros((32, 32), np.uint64)
    for i, v in enumerate(big):
        g[i, i] = v
    p = np.zeros_like(g)
    p[5, 6] = 2**53 + 1  # at a class: unexpected prediction
    cm = ConfusionMatrix(150, ignore_index=65535, on_unexpected=mode)
    if mode == "raise":
        with pytest.raises(LabelRangeError, match=r"9007199254740993 \(1 px, first at \(1, 1\)\)"):
            cm.update(g, p)
        return
    cm.update(g, p)
    assert cm.unexpected_gt == dict.fromkeys(big, 1)
    assert cm.unexpected_pred == {2**53 + 1: 1}
    assert cm.n_pixels == g.size
    from segiou.io.zarr import create_stack
    from segiou.parallel import count_stores

    for name, data in (("g", g), ("p", p)):
        arr = create_stack(str(tmp_path / f"{name}.zarr"), n=1, height=32, width=32,
                           dtype=np.uint64)  # fmt: skip
        arr[:] = data[None]
    engine = count_stores(str(tmp_path / "g.zarr"), str(tmp_path / "p.zarr"), labels=150,
                          ignore_index=65535, on_unexpected="count", scheduler="synchronous")  # fmt: skip
    assert engine.unexpected_gt == cm.unexpected_gt
    assert engine.unexpected_pred == cm.unexpected_pred
