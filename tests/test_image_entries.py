"""Per-image rows counted straight into sparse entries equal the dense per-image tables.

:func:`segiou._count.count_pairs` counts images that are small for their ``(K+2)**2`` table
(:func:`segiou._count.sparse_rows`) with :mod:`segiou._entry_kernels`, others through dense
per-image tables. Both must give the same :class:`~segiou._count.Tally` in every field (counts,
void, ignored, unexpected values, rows and their order, names), and what the plain oracle of
``tests/reference.py`` counts image by image. Each test counts with both paths forced, and the
entry kernels in both of their modes (a table of every cell, a hash table).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal
from support import peak_of

from segiou import ConfusionMatrix, _count, _entry_kernels
from segiou._count import IGNORE, Lookup, Tally, count_pairs
from segiou.images import ImageRows
from segiou.testing.strategies import DTYPES, label_pairs

#: Ways to count per-image rows: dense tables, entries (each kernel mode), and the default.
WAYS = ("dense", "direct", "hash", "auto")


@contextlib.contextmanager
def counted(way: str, budget: int | None = None) -> Iterator[None]:
    """Force one way of counting per-image rows (and maybe a tiny memory budget: many groups)."""
    saved = (_count._SPARSE_PIXELS_PER_CELL, _entry_kernels.DIRECT_MAX,
             _entry_kernels.DIRECT_SHARE, _count._TABLE_BUDGET_BYTES,
             _count._SPARSE_TOTAL_MIN_CELLS, _count._SPARSE_TOTAL_CELLS_PER_PIXEL)  # fmt: skip
    try:
        if way == "dense":  # dense tables, a dense total
            _count._SPARSE_PIXELS_PER_CELL = -1
            _count._SPARSE_TOTAL_MIN_CELLS = 1 << 62
        elif way in ("direct", "hash"):  # entries, and the total as its cells
            _count._SPARSE_PIXELS_PER_CELL = 1 << 62
            _count._SPARSE_TOTAL_MIN_CELLS = _count._SPARSE_TOTAL_CELLS_PER_PIXEL = 0
            big = way == "direct"
            _entry_kernels.DIRECT_MAX = 1 << 62 if big else 0
            _entry_kernels.DIRECT_SHARE = 1 << 40 if big else 0
        if budget is not None:
            _count._TABLE_BUDGET_BYTES = budget
        yield
    finally:
        (_count._SPARSE_PIXELS_PER_CELL, _entry_kernels.DIRECT_MAX, _entry_kernels.DIRECT_SHARE,
         _count._TABLE_BUDGET_BYTES, _count._SPARSE_TOTAL_MIN_CELLS,
         _count._SPARSE_TOTAL_CELLS_PER_PIXEL) = saved  # fmt: skip


def class_lookup(k: int, ignore: tuple[int, ...] = ()) -> Lookup:
    """Class ids ``0..K-1`` on both sides, ``ignore`` values ignored (ground truth) or void."""
    mapping = {c: c for c in range(k)} | dict.fromkeys(ignore, IGNORE)
    return Lookup(k, mapping, mapping)


def count(gt: np.ndarray, pred: np.ndarray, lk: Lookup, way: str, threads: int = 1,
          budget: int | None = None) -> Tally:  # fmt: skip
    with counted(way, budget):
        return count_pairs(gt, pred, lk, on_unexpected="count", per_image=True, threads=threads)


def assert_same_rows(a: ImageRows | None, b: ImageRows | None) -> None:
    assert a is not None
    assert b is not None
    assert (a.k, a.names, a.given, a.unexpected, a.legacy) == (b.k, b.names, b.given,
                                                              b.unexpected, b.legacy)  # fmt: skip
    for name in ("image", "gt", "pred", "count"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype == np.int64, name
        assert_array_equal(x, y, err_msg=name)


def assert_same_tally(a: Tally, b: Tally) -> None:
    """Every field of two tallies is the same (rows in the same order)."""
    assert_array_equal(a.counts, b.counts)
    assert_array_equal(a.void, b.void)
    assert a.counts.dtype == b.counts.dtype == np.int64
    assert a.counts.flags.c_contiguous
    assert b.counts.flags.c_contiguous
    assert (a.n_ignored, a.unexpected_gt, a.unexpected_pred) == (
        b.n_ignored, b.unexpected_gt, b.unexpected_pred)  # fmt: skip
    assert list(a.unexpected_gt) == list(b.unexpected_gt)  # same order of values
    assert list(a.unexpected_pred) == list(b.unexpected_pred)
    assert_same_rows(a.images, b.images)


def images_of(a: np.ndarray) -> list[np.ndarray]:
    """The images of a mask as count_pairs sees them (leading axes; rank <= 2 is one image)."""
    if a.ndim <= 2:
        return [a]
    return [a[i] for i in np.ndindex(*a.shape[:-2])]


def assert_matches_reference(t: Tally, gt: np.ndarray, pred: np.ndarray, k: int,
                             gt_map: dict, pred_map: dict) -> None:  # fmt: skip
    """Each image's rows hold what the oracle counts in that image; the totals the whole."""
    to_ref = {v: (None if c == IGNORE else c) for v, c in gt_map.items()}
    to_ref_p = {v: (None if c == IGNORE else c) for v, c in pred_map.items()}
    whole = reference.confusion(gt, pred, k, gt_map=to_ref, pred_map=to_ref_p)
    reference.assert_same_counts(t, whole)
    rows = t.images
    assert rows is not None
    gts, preds = images_of(gt), images_of(pred)
    assert rows.n == len(gts)
    for i, (g, p) in enumerate(zip(gts, preds, strict=True)):
        ref = reference.confusion(g, p, k, gt_map=to_ref, pred_map=to_ref_p)
        got = rows.select([i]).totals()
        assert_array_equal(got["counts"], ref.counts)
        assert_array_equal(got["void"], ref.void)
        assert got["ignored"] == ref.n_ignored
        assert got["unexpected_gt"] == ref.unexpected_gt
        assert got["unexpected_pred"] == ref.unexpected_pred
        # one cell per ground-truth row that is not a class, as the dense tables keep them
        sel = rows.image == i
        for code in (k, k + 1):
            assert set(rows.pred[sel][rows.gt[sel] == code].tolist()) <= {code}


def check_all_ways(gt: np.ndarray, pred: np.ndarray, lk: Lookup, threads: int = 1,
                   budget: int | None = None, ways: tuple[str, ...] = WAYS) -> Tally:  # fmt: skip
    """Count with every way; all equal the dense tables and the oracle. Returns the dense tally."""
    dense = count(gt, pred, lk, "dense", threads)
    gv = (gt != 0) if gt.dtype == np.bool_ else gt
    pv = (pred != 0) if pred.dtype == np.bool_ else pred
    # the oracle reads values as int64: uint64 values >= 2**63 are checked by the tests
    if not any(a.dtype == np.uint64 and a.size and int(a.max()) >= 1 << 63 for a in (gt, pred)):
        assert_matches_reference(dense, gv, pv, lk.num_classes, dict(lk.gt_map),
                                 dict(lk.pred_map))  # fmt: skip
    for way in ways:
        if way != "dense":
            assert_same_tally(count(gt, pred, lk, way, threads, budget), dense)
    return dense


# --- generated masks ---------------------------------------------------------------------------


@settings(deadline=None)
@given(
    pair=label_pairs(
        max_classes=300, min_dims=1, max_dims=4, max_side=6, unexpected=True, same_dtype=False
    ),
    threads=st.sampled_from([1, 2]),
    way=st.sampled_from(["direct", "hash", "auto"]),
    tiny_budget=st.booleans(),
)
def test_entries_equal_dense_tables_and_reference(pair, threads, way, tiny_budget):
    lk = class_lookup(pair.num_classes, pair.ignore)
    dense = count(pair.gt, pair.pred, lk, "dense", threads)
    got = count(pair.gt, pair.pred, lk, way, threads, 1 if tiny_budget else None)
    assert_same_tally(got, dense)
    gv = (pair.gt != 0) if pair.gt.dtype == np.bool_ else pair.gt
    pv = (pair.pred != 0) if pair.pred.dtype == np.bool_ else pair.pred
    assert_matches_reference(got, gv, pv, pair.num_classes, dict(lk.gt_map), dict(lk.pred_map))


@settings(deadline=None, max_examples=30)
@given(
    pair=label_pairs(max_classes=300, min_dims=3, max_dims=4, max_side=6, unexpected=True),
    way=st.sampled_from(["direct", "hash", "auto"]),
)
def test_accumulator_state_is_the_same(pair, way):
    # what a ConfusionMatrix keeps (names given, batches, its saved state) does not depend on
    # how the rows were counted
    def state(w: str) -> dict:
        cm = ConfusionMatrix(pair.num_classes, ignore_index=list(pair.ignore), per_image=True,
                             on_unexpected="count")  # fmt: skip
        n = reference.n_images(pair.gt.shape)
        with counted(w):
            cm.update(pair.gt, pair.pred, key="a", names=[f"im{i}" for i in range(n)])
            cm.update(pair.gt, pair.pred, key="b")
        return cm.to_dict()

    assert state(way) == state("dense")


# --- adversarial masks -------------------------------------------------------------------------

#: Every integer dtype (and bool) count_pairs reads, and a big-endian one.
ALL_DTYPES = (*DTYPES, "uint32", "uint64", ">u2")


def _values(dtype: str, k: int, ignore: tuple[int, ...], rng: np.random.Generator,
            shape: tuple[int, ...], odd: bool) -> np.ndarray:  # fmt: skip
    """A mask of ``dtype``: classes, ignore values that fit, and (``odd``) unexpected values."""
    dt = np.dtype(dtype)
    if dt == np.bool_:  # any non-zero byte is True, as numpy shows it
        return rng.choice(np.array([0, 1, 2, 255], np.uint8), size=shape).view(np.bool_)
    info = np.iinfo(dt)
    vals = [c for c in (0, 1, k // 2, k - 1) if c <= info.max]
    vals += [v for v in ignore if info.min <= v <= info.max]
    if odd:
        vals += [v for v in (k, k + 3, info.max, info.min, -1, 1 << 63, (1 << 63) + 5)
                 if info.min <= v <= info.max and not 0 <= v < k and v not in ignore]  # fmt: skip
    picked = rng.choice(np.array(sorted(set(vals)), dtype=object), size=shape)
    return np.array(picked.tolist(), dtype=dt).reshape(shape)


@pytest.mark.parametrize(("gdtype", "pdtype"), list(itertools.product(ALL_DTYPES, ALL_DTYPES)))
def test_every_dtype_pair(gdtype, pdtype):
    rng = np.random.default_rng(abs(hash((gdtype, pdtype))) % 2**32)
    for k, ignore in ((1, (255,)), (2, (-1,)), (255, (255,)), (256, (-1, 65535))):
        lk = class_lookup(k, ignore)
        for odd in (False, True):
            gt = _values(gdtype, k, ignore, rng, (3, 4, 5), odd)
            pred = _values(pdtype, k, ignore, rng, (3, 4, 5), odd)
            gt[1] = gt[1, 0, 0]  # one image of a single value (all ignored, maybe)
            check_all_ways(gt, pred, lk)


@pytest.mark.parametrize("k", [1, 2, 255, 256, 4096])
@pytest.mark.parametrize("threads", [1, 2])
def test_many_classes_adversarial(k, threads):
    rng = np.random.default_rng(k)
    ignore = (k + 1, -1)
    lk = class_lookup(k, ignore)
    n, h, w = 5, 3, 4
    gt = rng.integers(-2, k + 3, size=(n, h, w)).astype(np.int32)
    pred = rng.integers(-2, k + 3, size=(n, h, w)).astype(np.int32)
    gt[0] = k + 1  # an image of 0 valid pixels: all ignored
    gt[1] = -2  # all unexpected ground truth
    pred[2] = -1  # all void predictions
    pred[3] = k + 2  # all unexpected predictions
    gt[4, 0, 0], pred[4, 0, 0] = k - 1, k - 1  # the last class
    ways = WAYS if k < 4096 else ("dense", "auto")  # dense tables of 4,096 classes: ~0.3 s each
    check_all_ways(gt, pred, lk, threads, ways=ways)
    # views: strided, reversed, Fortran order, leading axes of images
    check_all_ways(gt[:, ::2, ::-1], pred[:, 1:, ::-1], lk, threads, ways=ways)
    if k == 4096:
        return
    check_all_ways(np.asfortranarray(gt), pred, lk, threads, ways=ways)
    check_all_ways(gt[:4].reshape(2, 2, h, w), pred[:4].reshape(2, 2, h, w), lk, threads,
                   ways=ways)  # fmt: skip


def test_raw_ids_with_negative_values_and_uint64_above_int64():
    # raw ids (negative ones too); uint64 values >= 2**63 never pass for a negative id
    mapping = {-5: 0, 7: 1, 300: 2, -1: IGNORE}
    lk = Lookup(3, mapping, mapping)
    gt = np.array([[[7, 300], [2**64 - 1, 2**63]], [[2**64 - 5, 7], [300, 300]]], dtype=np.uint64)
    pred = np.array([[[300, 7], [7, 7]], [[7, 2**64 - 1], [2**63 + 1, 4]]], dtype=np.uint64)
    tally = check_all_ways(gt, pred, lk, ways=("dense", "direct", "hash", "auto"))
    assert tally.unexpected_gt == {2**64 - 1: 1, 2**63: 1, 2**64 - 5: 1}
    assert tally.images is not None
    assert list(tally.images.unexpected) == [
        (0, "gt", 2**63, 1), (0, "gt", 2**64 - 1, 1), (1, "gt", 2**64 - 5, 1),
        (1, "pred", 4, 1), (1, "pred", 2**63 + 1, 1), (1, "pred", 2**64 - 1, 1)]  # fmt: skip
    i8 = np.array([[[-5, 7], [-1, 44]]], dtype=np.int16)
    check_all_ways(i8, i8[:, ::-1], lk)


def test_zero_size_images():
    lk = class_lookup(3, (255,))
    for shape in ((4, 0, 5), (2, 3, 0, 5), (0, 4, 4), (0,)):
        gt = np.zeros(shape, np.uint8)
        for way in WAYS:
            t = count(gt, gt, lk, way)
            assert t.images is not None
            assert t.images.n == reference.n_images(shape)
            assert t.images.names == tuple(f"#{i}" for i in range(t.images.n))
            assert t.images.count.size == 0


def test_scores_with_unexpected_channels_count_rows_like_labels():
    # class scores with a channel beyond the classes go through count_pairs' rows
    rng = np.random.default_rng(3)
    scores = rng.random((4, 7, 3, 5)).astype(np.float32)
    gt = rng.integers(0, 5, size=(4, 3, 5)).astype(np.uint8)
    labels = np.argmax(scores, axis=1)
    rows = {}
    for way in WAYS:
        for kind, pred, kw in (("scores", scores, {"scores_axis": 1}), ("labels", labels, {})):
            cm = ConfusionMatrix(5, per_image=True, on_unexpected="count")
            with counted(way):
                cm.update(gt, pred, key="a", **kw)
            rows[way, kind] = cm.to_dict()
    assert all(v == rows["dense", "labels"] for v in rows.values())


# --- the cost of an image ----------------------------------------------------------------------


def test_small_images_of_many_classes_cost_their_pixels():
    # 256 one-pixel images of 1,024 classes: dense per-image tables (8 MiB each, folded and
    # searched per image) peaked at hundreds of MiB and took ~30 ms an image; entries need the
    # one (K+2) x (K+2) table of the whole batch
    k = 1024
    gt = (np.arange(256) * 3 % k).astype(np.uint16).reshape(256, 1, 1)
    pred = gt[::-1].copy()
    lk = class_lookup(k)
    count(gt[:2], pred[:2], lk, "auto")  # compiled
    table = (k + 2) ** 2 * 8
    tally, peak = peak_of(count_pairs, gt, pred, lk, per_image=True)
    assert peak < 4 * table, (peak, table)
    assert tally.images is not None
    assert tally.images.count.tolist() == [1] * 256
    assert tally.images.names == tuple(f"#{i}" for i in range(256))


def test_zero_size_images_of_many_classes_cost_nothing():
    # 8 images of 0 x 3 pixels and 1,024 classes made 8 dense tables of zeros (8 MiB each, and
    # a copy) before their empty rows
    k = 1024
    gt = np.zeros((8, 0, 3), np.uint16)
    lk = class_lookup(k)
    count_pairs(gt, gt, lk, per_image=True)
    tally, peak = peak_of(count_pairs, gt, gt, lk, per_image=True)
    assert peak < 4 * (k + 2) ** 2 * 8, peak
    assert tally.images is not None
    assert_same_rows(tally.images, ImageRows.from_tables(np.zeros((8, k + 2, k + 2), np.int64)))


def test_dense_tables_stay_for_large_images_of_few_classes():
    # Cityscapes (19 classes, 1024 x 2048) and ADE20K (150 classes, 512 x 683) images: entries
    # for ADE20K (measured faster), the dense tables for Cityscapes
    assert not _count.sparse_rows(class_lookup(19), 1024 * 2048)
    assert _count.sparse_rows(class_lookup(150), 512 * 683)
    assert _count.sparse_rows(class_lookup(4096), 4096 * 4096)
    assert not _count.sparse_rows(class_lookup(1), 1024)


def test_hash_bits():
    assert _entry_kernels.hash_bits(1, 4098) == 4
    assert 1 << _entry_kernels.hash_bits(1000, 4098) >= 2000
    assert _entry_kernels.hash_bits(16, 21) == 0  # a small table: every cell at its own slot
    assert _entry_kernels.hash_bits(100_000, 1026) == 0  # not much larger than a hash table


def test_the_kernels_compile_for_few_dtypes_and_one_layout():
    # every dtype pair and view reaches the kernels as uint8, int64 or uint64 in C order: at most
    # 9 compilations (2-3 s each, cold), not one per pair of dtypes and layouts
    rng = np.random.default_rng(5)
    lk = class_lookup(300, (255,))
    for gd, pd in itertools.product(ALL_DTYPES, ("uint8", "int16", "uint32", ">u2", "bool")):
        gt = _values(gd, 300, (), rng, (3, 4, 6), False)
        pred = _values(pd, 300, (), rng, (3, 4, 6), False)
        ro_g, ro_p = gt.copy(), pred.copy()
        ro_g.flags.writeable = ro_p.flags.writeable = False  # (np.asarray of a PIL image)
        for g, p in ((gt, pred), (gt[:, ::-1], pred[:, :, ::2].repeat(2, axis=2)),
                     (ro_g, ro_p), (ro_g, pred)):  # fmt: skip
            count(g, p, lk, "auto", 1)  # (what it counts: the tests above)
    sigs = _entry_kernels.count_entries.signatures
    assert sigs
    for sig in sigs:
        g, p = sig[0], sig[1]
        assert str(g.dtype) in {"uint8", "int64", "uint64"}, sig
        assert str(p.dtype) in {"uint8", "int64", "uint64"}, sig
        assert g.layout == p.layout == "C", sig
        assert g.mutable, sig
        assert p.mutable, sig
    assert len(sigs) <= 9, sigs


def test_the_hash_multiplier_is_drawn_per_process_and_any_odd_one_counts_right(monkeypatch):
    # a fixed public multiplier let a crafted mask put every cell of an image into one run of
    # slots (36 s against 0.7 s for the dense tables): it is drawn per process, and the counts
    # do not depend on it, even for the worst one (1: consecutive cells in consecutive slots)
    import subprocess
    import sys

    code = "from segiou._entry_kernels import MIX; print(int(MIX))"
    drawn = {int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout) for _ in range(3)}  # fmt: skip
    assert len(drawn) == 3
    assert all(m % 2 == 1 for m in drawn)
    k = 4094
    lk = class_lookup(k)
    assert _entry_kernels.hash_bits(64 * 64, k + 2) > 0  # (the hash table, not every cell)
    rng = np.random.default_rng(3)
    gt = rng.integers(0, k, (3, 64, 64)).astype(np.uint16)
    pred = (gt + np.arange(64, dtype=np.uint16)) % k
    dense = count(gt, pred, lk, "dense")
    for mix in (1, 2**63 + 1, 0x9E3779B97F4A7C15):
        monkeypatch.setattr(_entry_kernels, "MIX", np.uint64(mix))
        for threads in (1, 2):
            assert_same_tally(count(gt, pred, lk, "hash", threads), dense)


# --- a batch small for its table: counted into its cells ---------------------------------------


def batch(gt: np.ndarray, pred: np.ndarray, lk: Lookup, way: str, threads: int = 1) -> Tally:
    with counted(way):
        return count_pairs(gt, pred, lk, on_unexpected="count", threads=threads)


@settings(deadline=None, max_examples=40)
@given(
    pair=label_pairs(
        max_classes=300, min_dims=1, max_dims=4, max_side=6, unexpected=True, same_dtype=False
    ),
    threads=st.sampled_from([1, 2]),
    way=st.sampled_from(["direct", "hash"]),
)
def test_a_batch_counted_into_its_cells_equals_the_dense_table_and_reference(pair, threads, way):
    # without per-image rows: the batch's cells, added to the accumulator as they are
    lk = class_lookup(pair.num_classes, pair.ignore)
    dense = batch(pair.gt, pair.pred, lk, "dense", threads)
    got = batch(pair.gt, pair.pred, lk, way, threads)
    assert dense.dense is not None or pair.gt.size == 0  # (no pixels: no table is made)
    assert got.cells is not None
    assert got.images is None
    assert_array_equal(got.counts, dense.counts)
    assert_array_equal(got.void, dense.void)
    assert got.counts.dtype == got.void.dtype == np.int64
    assert (got.n_ignored, got.unexpected_gt, got.unexpected_pred, got.n_pixels) == (
        dense.n_ignored, dense.unexpected_gt, dense.unexpected_pred, dense.n_pixels)  # fmt: skip
    into = np.ones((pair.num_classes, pair.num_classes), np.int64)
    got.add_counts_into(into)
    assert_array_equal(into, dense.counts + 1)
    gv = (pair.gt != 0) if pair.gt.dtype == np.bool_ else pair.gt
    pv = (pair.pred != 0) if pair.pred.dtype == np.bool_ else pair.pred
    to_ref = {v: (None if c == IGNORE else c) for v, c in lk.gt_map.items()}
    to_ref_p = {v: (None if c == IGNORE else c) for v, c in lk.pred_map.items()}
    reference.assert_same_counts(
        got, reference.confusion(gv, pv, pair.num_classes, gt_map=to_ref, pred_map=to_ref_p)
    )


@settings(deadline=None, max_examples=15)
@given(
    pair=label_pairs(
        max_classes=300, min_dims=2, max_dims=3, min_side=1, max_side=6, unexpected=True
    ),
    per_image=st.booleans(),
    boundary=st.booleans(),
)
def test_an_accumulator_keeps_the_same_state_from_cells(pair, per_image, boundary):
    # merged, saved, with Boundary IoU (which reads the dense counts): the same state
    def state(w: str) -> dict:
        def one(key: str) -> ConfusionMatrix:
            cm = ConfusionMatrix(pair.num_classes, ignore_index=list(pair.ignore),
                                 per_image=per_image, on_unexpected="count",
                                 boundary=True if boundary else None)  # fmt: skip
            with counted(w):
                return cm.update(pair.gt, pair.pred, key=key)

        return (one("a") + one("b")).to_dict()

    assert state("hash") == state("dense")


@pytest.mark.parametrize("boundary", [None, "1px"])  # (Boundary IoU reads per-class sums)
@pytest.mark.parametrize("per_image", [False, True])
def test_a_small_update_of_many_classes_costs_its_pixels(per_image, boundary):
    # 16 pixels of 4,096 classes: a dense (K+2)**2 table (134 MB) made, folded, copied and
    # added per update took 0.1-0.25 s; the batch's cells are added instead
    k = 4096
    rng = np.random.default_rng(11)
    gt = rng.integers(0, k, (4, 4)).astype(np.uint16)
    pred = rng.integers(0, k, (4, 4)).astype(np.uint16)
    gt[2], pred[2] = 7, 7  # a cell of several pixels
    pred[1, 2], gt[3, 3] = k + 3, 9999  # an unexpected prediction, unexpected ground truth
    pred[0, 1] = pred[2, 2] = 65535  # void predictions

    def made(way: str) -> tuple[ConfusionMatrix, int]:
        cm = ConfusionMatrix(k, ignore_index=65535, on_unexpected="count", per_image=per_image,
                             boundary=boundary)  # fmt: skip
        with counted(way):
            cm.update(gt[:2], pred[:2])  # (compiled, and the accumulator's own matrix made)
            return cm, peak_of(cm.update, gt, pred)[1]

    cm, peak = made("auto")
    assert peak < 1 << 20, peak
    assert cm == made("dense")[0]  # every field, Boundary IoU's sums too
    assert _count.sparse_total(class_lookup(k), 16)
    ref = reference.confusion(np.concatenate([gt[:2], gt]), np.concatenate([pred[:2], pred]), k,
                              ignore=(65535,))  # fmt: skip
    assert_array_equal(cm.counts, ref.counts)
    assert (cm.unexpected_pred, cm.unexpected_gt) == ({k + 3: 2}, {9999: 1})  # (1,2): twice
    assert (cm.unexpected_pred, cm.unexpected_gt) == (ref.unexpected_pred, ref.unexpected_gt)
    assert cm.n_images == 2
    assert cm.void.sum() == 3


def test_batches_of_few_classes_or_many_pixels_keep_the_dense_table():
    assert not _count.sparse_total(class_lookup(19), 16)  # a small table: dense is cheap
    assert not _count.sparse_total(class_lookup(250), 1)
    assert _count.sparse_total(class_lookup(254), 1)
    cells = 4098**2
    assert _count.sparse_total(class_lookup(4096), cells // _count._SPARSE_TOTAL_CELLS_PER_PIXEL)
    assert not _count.sparse_total(class_lookup(4096),
                                   cells // _count._SPARSE_TOTAL_CELLS_PER_PIXEL + 1)  # fmt: skip
