"""Streaming calls (issue 14): the short way of ``update``, wide dtypes narrowed while read,
class scores with a fused argmax. Every path against the plain oracle of ``reference``.
"""

from __future__ import annotations

import threading
import tracemalloc
from unittest import mock

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.testing import assert_array_equal
from support import peak_of

from segiou import ConfusionMatrix, LabelSpec, RawLabel, _stream
from segiou import _count as _count_mod
from segiou import _word_kernels as _words
from segiou._count import sparse_total
from segiou.errors import (
    CountOverflowError,
    DuplicateBatchError,
    LabelDtypeError,
    LabelRangeError,
    ScoresError,
    ShapeMismatchError,
    UsageError,
)
from segiou.testing.strategies import aligned_empty, byte_pairs

BLOCK = _words.NARROW_BLOCK


def _cm(k: int, ignore=(255,), **kw) -> ConfusionMatrix:
    return ConfusionMatrix(k, ignore_index=list(ignore), on_unexpected="count", **kw)


def _assert_ref(cm: ConfusionMatrix, gt, pred, k: int, ignore=(255,)) -> None:
    reference.assert_same_counts(cm, reference.confusion(gt, pred, k, ignore=ignore))
    total = int(cm.counts.sum() + cm.void.sum()) + cm.n_ignored + cm.n_unexpected
    assert total == cm.n_pixels == np.asarray(gt).size


def _at_offset(a: np.ndarray, offset: int) -> np.ndarray:
    out = aligned_empty(a.size, a.dtype, offset=offset * a.dtype.itemsize)
    out[...] = a.reshape(-1)
    return out.reshape(a.shape)


class _Spy:
    """Records whether :meth:`StreamCounter.add` counted a batch (patched in by ``on``)."""

    def __init__(self) -> None:
        self.taken: list[bool] = []
        orig = _stream.StreamCounter.add

        def add(counter, cm, gt, pred, key):  # type: ignore[no-untyped-def]
            done = orig(counter, cm, gt, pred, key)
            self.taken.append(done)
            return done

        self.on = mock.patch.object(_stream.StreamCounter, "add", add)


# --- the short way: plain 8-bit pairs, counted and added in one kernel call --------------------


def _word_patterns(seed: int, n_words: int, vals: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Words with no change, one change at each position (either side, both) and many changes."""
    rng = np.random.default_rng(seed)
    gs, ps = [], []
    g_last, p_last = vals[0], vals[-1]
    for q in range(n_words):
        kind = q % 11
        g = np.full(8, g_last)
        p = np.full(8, p_last)
        if kind < 7:  # one change of pair before pixel kind + 1
            side = rng.integers(3)
            if side != 1:
                g[kind + 1 :] = rng.choice(vals)
            if side != 0:
                p[kind + 1 :] = rng.choice(vals)
        elif kind == 7:  # changes everywhere
            g, p = rng.choice(vals, 8), rng.choice(vals, 8)
        elif kind == 8:  # a new constant pair
            g[:], p[:] = rng.choice(vals), rng.choice(vals)
        gs.append(g)
        ps.append(p)
        g_last, p_last = int(g[-1]), int(p[-1])
    return np.concatenate(gs), np.concatenate(ps)


@pytest.mark.parametrize("k", [5, 19, 256])  # 256: a word table of 258 * 258 cells
@pytest.mark.parametrize("tail", [0, 1, 7])
def test_short_way_word_patterns(k, tail):
    # no unexpected value (the short way leaves those to the general way: tested below)
    vals = list(range(256)) if k == 256 else [0, 1, 2, 4, k - 1, 255]
    g, p = _word_patterns(k + tail, 900, vals)
    if tail:  # the last word cut short: single bytes after the last whole word
        g, p = g[: g.size - 8 + tail], p[: p.size - 8 + tail]
    for go, po in [(0, 0), (3, 3), (1, 6), (7, 0)]:  # same and different word offsets
        gt, pred = _at_offset(g.astype(np.uint8), go), _at_offset(p.astype(np.uint8), po)
        spy = _Spy()
        cm = _cm(k, ignore=() if k == 256 else (255,))
        with spy.on:
            cm.update(gt, pred)
        assert spy.taken == [True]
        _assert_ref(cm, gt, pred, k, ignore=() if k == 256 else (255,))


@settings(deadline=None)
@given(pair=byte_pairs(max_size=300), offsets=st.tuples(st.integers(0, 7), st.integers(0, 7)))
def test_short_way_equals_reference(pair, offsets):
    # uint8 / int8 / bool pairs at any word offset, unexpected values included: the short way
    # counts what it can, hands anything unexpected to the general way, which reports it.
    gt, pred = _at_offset(pair.gt, offsets[0]), _at_offset(pair.pred, offsets[1])
    cm = _cm(pair.num_classes, pair.ignore)
    spy = _Spy()
    with spy.on:
        cm.update(gt, pred)
        cm.update(gt, pred, key=7)  # the per-thread tables were left zeroed
    one = reference.confusion(pair.gt, pair.pred, pair.num_classes, ignore=pair.ignore)
    reference.assert_same_counts(cm, reference.add(one, one))
    assert cm.n_pixels == 2 * gt.size
    assert cm.n_images == 2
    assert cm.keys == {"7"}
    # else the general way (as for few pixels of a large table: counted into cells)
    few = sparse_total(cm._lookup, gt.size) and pair.num_classes >= 300
    taken = gt.size > 0 and one.n_unexpected == 0 and not few
    assert spy.taken == [taken, taken]


def test_short_way_many_calls_equal_one_batch():
    rng = np.random.default_rng(3)
    g = rng.integers(0, 20, (40, 24, 40)).astype(np.uint8)
    g[g == 19] = 255
    p = np.where(rng.random(g.shape) < 0.8, g, rng.integers(0, 19, g.shape)).astype(np.uint8)
    one, many = _cm(19), _cm(19)
    one.update(g, p)
    for i in range(len(g)):
        many.update(g[i], p[i])
    assert one.n_images == many.n_images == 40
    assert one == many
    _assert_ref(many, g, p, 19)


def test_short_way_unexpected_raises_and_leaves_nothing():
    cm = ConfusionMatrix(19, ignore_index=255)
    g = np.zeros((16, 16), np.uint8)
    p = np.ones((16, 16), np.uint8)
    p[3, 5] = 40
    with pytest.raises(LabelRangeError, match=r"40 \(1 px, first at \(3, 5\)\)"):
        cm.update(g, p)
    assert cm.n_pixels == 0
    assert not cm.counts.any()
    cm.update(g, np.ones_like(p))  # the table of the refused call does not leak in
    assert cm.counts[0, 1] == 256
    assert cm.n_pixels == 256


def test_short_way_overflow_refused_whole():
    cm = _cm(3)
    cm._pixels = 2**63 - 10
    g = np.zeros((4, 4), np.uint8)
    with pytest.raises(CountOverflowError):
        cm.update(g, g)
    assert not cm.counts.any()
    cm._pixels = 0
    cm.update(g, g)
    assert cm.counts[0, 0] == 16


class _KernelSpy:
    """Records the statuses a one-call kernel returned (patched in by ``on``)."""

    def __init__(self, name: str = "add_small") -> None:
        self.statuses: list[int] = []
        real = getattr(_words, name)

        def kernel(*args):  # type: ignore[no-untyped-def]
            status = real(*args)
            self.statuses.append(int(status))
            return status

        self.on = mock.patch.object(_stream._words, name, kernel)


def _primed(k: int = 19, **kw) -> ConfusionMatrix:
    """An accumulator whose unfolded table exists (its first small call made it)."""
    cm = ConfusionMatrix(k, ignore_index=255, **kw)
    cm.update(np.full((1, 1), 255, np.uint8), np.zeros((1, 1), np.uint8))
    assert cm._unfolded is not None
    return cm


def _assert_primed_ref(cm: ConfusionMatrix, gt, pred, k: int = 19) -> None:
    ref = reference.confusion(np.asarray(gt).reshape(-1), np.asarray(pred).reshape(-1), k,
                              ignore=(255,))  # fmt: skip
    reference.assert_same_counts(cm, reference.add(ref, reference.confusion(
        np.full(1, 255, np.uint8), np.zeros(1, np.uint8), k, ignore=(255,))))  # fmt: skip
    assert cm.n_pixels == np.asarray(gt).size + 1


#: dtype pairs of the one-call kernels: two uint8 masks (add_small), a wider side (add_small_wide)
ONE_CALL = [("uint8", "uint8", "add_small"), ("uint8", "int64", "add_small_wide"),
            ("uint8", "int32", "add_small_wide"), ("int16", "uint8", "add_small_wide")]  # fmt: skip
#: one pair per kernel, for the matrices of ranks, shapes and layouts (checked by one function
#: both share, :func:`segiou._word_kernels._small_images`; every new rank or layout of a kernel
#: is a Numba compile of its own, ~1-3 s cold)
ONE_CALL_EACH = ONE_CALL[:2]


def _counted_once(g, p, kernel: str) -> tuple[ConfusionMatrix, list[int]]:
    """Count ``g``/``p`` into a primed accumulator; it and the statuses ``kernel`` returned.

    Checked against the oracle, whichever way counted them.
    """
    cm = _primed()
    spy = _KernelSpy(kernel)
    with spy.on:
        cm.update(g, p)
    _assert_primed_ref(cm, g, p)
    return cm, spy.statuses


def _tiles(shape, seed=0, k=19, dtypes=("uint8", "uint8")):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    g = rng.integers(0, k + 1, shape)
    g[g == k] = 255
    p = np.where(rng.random(shape) < 0.6, g, rng.integers(0, k, shape))
    return g.astype(dtypes[0]), p.astype(dtypes[1])


@pytest.mark.parametrize(("gd", "pd", "kernel"), ONE_CALL_EACH)
@pytest.mark.parametrize(("shape", "images"), [((64, 64), 1), ((1, 64), 1), ((7,), 1),
                                               ((5, 16, 24), 5), ((3, 1, 20, 20), 3),
                                               ((2, 3, 4, 5, 6), 24)])  # fmt: skip
def test_one_call_way_counts_any_rank_and_its_images(shape, images, gd, pd, kernel) -> None:
    # two small C-contiguous masks, no key, the table made: one kernel call checks the rest,
    # counts the images (all but the last two axes) and adds
    g, p = _tiles(shape, seed=len(shape), dtypes=(gd, pd))
    cm, statuses = _counted_once(g, p, kernel)
    assert statuses == [_words.ADDED]
    assert cm.n_images == 1 + images


@pytest.mark.parametrize(("gd", "pd", "kernel"), ONE_CALL)
@pytest.mark.parametrize("pixels", [_words.SMALL_MAX_PIXELS, _words.SMALL_MAX_PIXELS + 1])
def test_one_call_way_ends_where_threads_begin(pixels, gd, pd, kernel) -> None:
    g, p = _tiles((pixels,), seed=pixels, dtypes=(gd, pd))
    _, statuses = _counted_once(g, p, kernel)
    assert statuses == [_words.ADDED if pixels <= _words.SMALL_MAX_PIXELS else _words.OTHER]


@pytest.mark.parametrize(("gd", "pd", "kernel"), ONE_CALL_EACH)
@pytest.mark.parametrize(("gshape", "pshape"), [((64, 64), (4096,)), ((64, 64), (32, 128)),
                                                ((2, 32, 64), (64, 64)), ((4, 4), (4, 5))])  # fmt: skip
def test_one_call_way_leaves_other_shapes_to_the_general_way(gshape, pshape, gd, pd,
                                                             kernel) -> None:  # fmt: skip
    # the same number of pixels in another shape is refused, naming both shapes
    cm = _primed()
    spy = _KernelSpy(kernel)
    with spy.on, pytest.raises(ShapeMismatchError):
        cm.update(np.zeros(gshape, gd), np.zeros(pshape, pd))
    assert spy.statuses == [_words.OTHER]
    assert cm.n_pixels == 1
    assert cm.n_ignored == 1


@pytest.mark.parametrize(("gd", "pd", "kernel"), ONE_CALL_EACH)
@pytest.mark.parametrize("view", ["strided", "reversed", "fortran", "transposed", "empty"])
def test_one_call_way_leaves_views_to_the_general_way(view, gd, pd, kernel) -> None:
    g, p = _tiles((3, 40, 48), seed=5, dtypes=(gd, pd))
    if view == "strided":
        g, p = g[:, :, ::2], p[:, :, ::2]
    elif view == "reversed":
        g, p = g[::-1], p[:, ::-1]
    elif view == "fortran":
        g, p = np.asfortranarray(g), np.asfortranarray(p)
    elif view == "transposed":
        g, p = g.transpose(0, 2, 1), p.transpose(0, 2, 1)
    else:
        g, p = g[:0], p[:0]
    cm, statuses = _counted_once(g, p, kernel)
    assert statuses == [_words.OTHER]
    assert cm.n_images == 1 + (0 if view == "empty" else 3)


@pytest.mark.parametrize(("gd", "pd", "kernel"), ONE_CALL)
def test_one_call_way_refuses_unexpected_and_overflow_whole(gd, pd, kernel) -> None:
    g, p = _tiles((32, 32), seed=6, dtypes=(gd, pd))
    # beyond a byte where a side is wider: the value whose low byte is a class (256 + 3)
    bad_value = 99 if pd == "uint8" else 259
    bad = p.copy()
    bad[5, 7] = bad_value
    cm = _primed()
    spy = _KernelSpy(kernel)
    with spy.on:
        with pytest.raises(LabelRangeError, match=rf"{bad_value} \(1 px, first at \(5, 7\)\)"):
            cm.update(g, bad)
        cm._pixels = 2**63 - 100
        with pytest.raises(CountOverflowError):
            cm.update(g, p)
        cm._pixels = 1
        cm.update(g, p)
    assert spy.statuses == [_words.UNEXPECTED, _words.OVERFLOW, _words.ADDED]
    _assert_primed_ref(cm, g, p)
    assert cm.n_images == 2


def test_one_call_way_takes_only_uint8_without_a_key() -> None:
    # an equal uint8 dtype that is another object, int8, bool and keyed batches take the ways
    # they took before (the one-call way tests identity: numpy's uint8 dtype is one object)
    g, p = _tiles((16, 16), seed=7)
    other_u8 = np.dtype(np.uint8, metadata={"from": "elsewhere"})
    assert other_u8 == np.uint8
    assert other_u8 is not np.dtype(np.uint8)
    cm = _primed()
    spy = _KernelSpy()
    with spy.on:
        cm.update(g.view(other_u8), p)
        cm.update(g, p, key="k")
        cm.update((g == 1), (p == 1))
    assert spy.statuses == []
    assert cm.n_pixels == 1 + 3 * g.size
    assert cm.keys == {"k"}


def test_one_call_wide_way_takes_no_key_and_no_bool() -> None:
    # keyed wider batches and a bool side (read as bytes) take the ways they took before
    g, p = _tiles((16, 16), seed=8, dtypes=("uint8", "int64"))
    cm = ConfusionMatrix(19, ignore_index=255)
    spy = _KernelSpy("add_small_wide")
    with spy.on:
        cm.update(g, p, key="k")
        cm.update(g == 1, (p == 1).astype(np.int16))
    assert spy.statuses == []
    assert cm.n_pixels == 2 * g.size
    # without a key, the first wider call makes the unfolded table itself
    fresh = ConfusionMatrix(19, ignore_index=255)
    with spy.on:
        fresh.update(g, p)
    assert spy.statuses == [_words.ADDED]
    reference.assert_same_counts(fresh, reference.confusion(g, p, 19, ignore=(255,)))


def test_short_way_threads():
    g = np.random.default_rng(1).integers(0, 5, (64, 32, 32)).astype(np.uint8)
    cm = _cm(5)

    def work(i0: int) -> None:
        for i in range(i0, 64, 4):
            cm.update(g[i], g[i][::-1].copy())

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ref = reference.confusion(g, g[:, ::-1], 5, ignore=(255,))
    reference.assert_same_counts(cm, ref)


# --- wide dtypes narrowed while read ----------------------------------------------------------

WIDE = ["int64", "int32", "int16", "uint16", "uint32"]
#: Values just outside the 8-bit range, negative and huge, per dtype (clipped to what it holds).
ODD = [-1, -2, 256, 257, 1000, 2**31 - 1, -(2**31), 2**40, -(2**63), 2**63 - 1, 65535]


def _odd_for(dtype: str) -> list[int]:
    info = np.iinfo(dtype)
    return [v for v in ODD if info.min <= v <= info.max]


@settings(deadline=None)
@given(
    gdtype=st.sampled_from(["uint8", "int64", "int32", "bool"]),
    pdtype=st.sampled_from(WIDE),
    n=st.sampled_from([1, 7, 8, 9, 100, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 13]),
    seed=st.integers(0, 2**32 - 1),
    n_odd=st.integers(0, 3),
    threads=st.sampled_from([1, 2]),
)
def test_narrow_equals_reference(gdtype, pdtype, n, seed, n_odd, threads):
    rng = np.random.default_rng(seed)
    k = 2 if gdtype == "bool" else 19
    runs = np.repeat(rng.integers(0, k, n // 50 + 1), 50)[:n]
    g = np.where(rng.random(n) < 0.05, 255 if k == 19 else 1, runs)
    p = np.where(rng.random(n) < 0.1, rng.integers(0, k, n), runs)
    for _ in range(n_odd):  # unexpected values somewhere: their blocks go pixel by pixel
        p[rng.integers(n)] = rng.choice(_odd_for(pdtype))
        if gdtype != "bool":
            g[rng.integers(n)] = rng.choice(_odd_for(gdtype) or [77])
    gt = (g & 1).astype(bool) if gdtype == "bool" else g.astype(gdtype)
    pred = p.astype(pdtype)
    cm = _cm(k, threads=threads)
    cm.update(gt, pred)
    _assert_ref(cm, gt, pred, k)


@pytest.mark.parametrize("pdtype", ["int64", "int32"])
@pytest.mark.parametrize("threads", [1, 2])
def test_narrow_large(pdtype, threads):
    # over 2**20 pixels, split between threads; a few blocks hold wide values.
    rng = np.random.default_rng(7)
    n = (1 << 20) + 2 * BLOCK + 3
    g = np.repeat(rng.integers(0, 19, n // 300 + 1), 300)[:n].astype(np.uint8)
    p = np.where(rng.random(n) < 0.02, rng.integers(0, 19, n), g).astype(pdtype)
    g[rng.random(n) < 0.01] = 255
    # the last block (3 pixels, no whole word) holds class ids only: narrowed, byte tail
    p[[5, BLOCK, 3 * BLOCK - 1, n - BLOCK]] = [-1, 256, 2**31 - 1, 999]
    assert n % BLOCK == 3
    cm = _cm(19, threads=threads)
    cm.update(g.reshape(1, -1), p.reshape(1, -1))
    _assert_ref(cm, g, p, 19)


@pytest.mark.parametrize("offset", range(8))
@pytest.mark.parametrize(("narrow", "wide"), [("uint8", "int32"), ("int8", "int64"),
                                              ("bool", "uint16")])  # fmt: skip
@pytest.mark.parametrize("threads", [1, 2])
def test_narrow_with_an_8_bit_side_at_any_offset(offset, narrow, wide, threads):
    # the 8-bit side is read in place when its blocks start on a word boundary, else copied;
    # either side may be the 8-bit one; a few blocks hold values outside 0..255
    rng = np.random.default_rng(offset)
    n = 3 * BLOCK + 11
    a = np.repeat(rng.integers(0, 5, n // 7 + 1), 7)[:n]
    b = np.where(rng.random(n) < 0.2, rng.integers(0, 5, n), a)
    b[[17, BLOCK + 3]] = [300, 7]  # unexpected: their blocks go pixel by pixel
    if narrow == "bool":
        a = a & 1
    elif narrow == "int8":
        a[a == 4] = -1  # void / ignored
    small = _at_offset(a.astype(narrow), offset)
    big = b.astype(wide)
    k = 2 if narrow == "bool" else 5
    for gt, pred in ((small, big), (big.copy(), small)):
        cm = ConfusionMatrix(k, ignore_index=-1, on_unexpected="count", threads=threads)
        cm.update(gt, pred)
        ref = reference.confusion(gt, pred, k, ignore=(-1,))
        reference.assert_same_counts(cm, ref)
        assert cm.n_pixels == n


def test_narrow_reports_true_values():
    g = np.zeros((3, 40, 40), np.uint8)
    p = np.zeros((3, 40, 40), np.int64)
    p[0, 1, 2], p[1, 3, 4], p[2, 39, 39] = -1, 256, 2**40
    with pytest.raises(LabelRangeError) as err:
        ConfusionMatrix(19, ignore_index=255).update(g, p)
    msg = str(err.value)
    for text in ("-1 (1 px, first at (0, 1, 2))", "256 (1 px, first at (1, 3, 4))",
                 "1099511627776 (1 px, first at (2, 39, 39))"):  # fmt: skip
        assert text in msg


@pytest.mark.parametrize("how", ["rev", "step", "F"])
def test_wide_views_take_the_generic_kernel(how):
    rng = np.random.default_rng(2)
    g = rng.integers(0, 19, (2, 30, 50)).astype(np.uint8)
    p = rng.integers(-1, 260, (2, 30, 50)).astype(np.int64)
    view = {"rev": p[:, ::-1, ::-1], "step": np.repeat(p, 2, axis=2)[:, :, ::2],
            "F": np.asfortranarray(p)}[how]  # fmt: skip
    cm = _cm(19)
    cm.update(g, view)
    _assert_ref(cm, g, view, 19)


def test_narrow_makes_no_full_size_copy():
    g = np.zeros((1, 1024, 1024), np.uint8)
    p = np.ones((1, 1024, 1024), np.int64)
    cm = ConfusionMatrix(19, ignore_index=255)
    cm.update(g, p)
    _, peak = peak_of(cm.update, g, p)
    assert peak < g.size // 8  # a narrowed copy would be >= 1 MiB
    assert cm.counts[0, 1] == 2 * g.size


# --- class scores -----------------------------------------------------------------------------


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """bfloat16 bits of float32 values (truncated) and the float32 values they stand for."""
    return (np.ascontiguousarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


#: Few distinct values: ties everywhere, signed zeros, infinities.
TIE_VALUES = [-np.inf, -2.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf]


@settings(deadline=None)
@given(
    dtype=st.sampled_from(["float32", "float64", "float16", "bfloat16"]),
    shape=st.tuples(
        st.integers(1, 3), st.integers(1, 6), st.integers(1, 5), st.sampled_from([1, 7, 8, 9, 33])
    ),
    data=st.data(),
    per_image=st.booleans(),
    threads=st.sampled_from([1, 2]),
    cells=st.booleans(),
)
def test_scores_equal_argmax(dtype, shape, data, per_image, threads, cells):
    # cells: counted as a large table's batch is (the argmax, then the labels' cells/entries)
    with mock.patch.multiple(_count_mod, _SPARSE_TOTAL_MIN_CELLS=0 if cells else 1 << 62,
                             _SPARSE_TOTAL_CELLS_PER_PIXEL=0,
                             _SPARSE_PIXELS_PER_CELL=(1 << 62) if cells else -1):  # fmt: skip
        _check_scores_equal_argmax(dtype, shape, data, per_image, threads)


def _check_scores_equal_argmax(dtype, shape, data, per_image, threads):
    n, c, h, w = shape
    s = data.draw(hnp.arrays(np.float64, shape, elements=st.sampled_from(TIE_VALUES)))
    k = data.draw(st.integers(max(1, c - 1), c + 1))  # a channel beyond the classes at times
    g = data.draw(hnp.arrays(np.int64, (n, h, w), elements=st.sampled_from([0, k - 1, 255, 77])))
    gt = g.astype(np.uint8)
    if dtype == "bfloat16":
        bits = _bf16_bits(s.astype(np.float32))
        want = np.argmax(_bf16_values(bits), axis=1)
        kw = {"scores": bits.view(np.int16) if data.draw(st.booleans()) else bits,
              "scores_dtype": "bfloat16"}  # fmt: skip
    else:
        arr = s.astype(dtype)
        want = np.argmax(arr, axis=1)
        kw = {"scores": arr, "scores_dtype": None}
    fused = _cm(k, per_image=per_image, threads=threads)
    fused.update(gt, kw["scores"], scores_axis=1, scores_dtype=kw["scores_dtype"])
    plain = _cm(k, per_image=per_image, threads=threads).update(gt, want)
    assert fused == plain
    _assert_ref(fused, gt, want, k)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("where", [(0, 0, 0, 0), (1, 2, 3, 4), (1, 4, 5, 7)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("gt_dtype", ["uint8", "uint64"])  # (uint64: kernels skipped, argmax)
def test_scores_nan_refused_with_position(dtype, where, threads, gt_dtype):
    rng = np.random.default_rng(0)
    s = rng.standard_normal((2, 5, 6, 8)).astype(np.float32)
    s[where] = np.nan
    s[1, 4, 5, 7] = np.nan  # a later NaN too: the first one is named
    scores, sd = (_bf16_bits(s), "bfloat16") if dtype == "bfloat16" else (s.astype(dtype), None)
    cm = _cm(5, threads=threads)
    with pytest.raises(ScoresError, match=rf"first at index \({', '.join(map(str, where))}\)"):
        cm.update(np.zeros((2, 6, 8), gt_dtype), scores, scores_axis=1, scores_dtype=sd)
    assert cm.n_pixels == 0


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("per_image", [False, True])
def test_scores_of_many_classes_and_few_pixels_cost_their_pixels(dtype, per_image):
    # 1,024 classes, 2 x 4 x 4 pixels: a dense (K+2)^2 table per update and per image (at
    # 4,096 classes 0.26 s, 0.5 s per image); the argmax's cells now. Ties, channels past the
    # classes (unexpected predictions), NaN refused by position
    k, rng = 1024, np.random.default_rng(8)
    s = rng.integers(0, 3, (2, k + 2, 4, 4)).astype(np.float32)  # ties everywhere
    s[1, k + 1, 2, 3] = 9.0  # an unexpected prediction: channel K+1
    g = rng.integers(0, k, (2, 4, 4)).astype(np.uint16)
    scores, sd = (_bf16_bits(s), "bfloat16") if dtype == "bfloat16" else (s.astype(dtype), None)
    want = np.argmax(s, axis=1)
    assert want[1, 2, 3] == k + 1
    cm = ConfusionMatrix(k, on_unexpected="count", per_image=per_image)
    cm.update(g, scores, scores_axis=1, scores_dtype=sd)
    plain = ConfusionMatrix(k, on_unexpected="count", per_image=per_image).update(g, want)
    assert cm == plain
    assert cm.unexpected_pred == {k + 1: 1}
    band = {"on_unexpected": "count", "boundary": "1px", "per_image": per_image}
    assert ConfusionMatrix(k, **band).update(g, scores, scores_axis=1, scores_dtype=sd) == (
        ConfusionMatrix(k, **band).update(g, want)
    )  # (Boundary IoU counts from the argmax)
    ref = reference.confusion(g, want, k)
    assert_array_equal(cm.counts, ref.counts)
    _, peak = peak_of(cm.update, g, scores, scores_axis=1, scores_dtype=sd)
    # the table: 8 MB; numpy's argmax (of 16-bit scores: of int32 keys) copies the scores
    assert peak < max(1 << 20, 16 * scores.nbytes), peak
    bad = scores.copy()
    bad[1, 7, 3, 1] = np.uint16(0x7FC0) if dtype == "bfloat16" else np.nan
    with pytest.raises(ScoresError, match=r"first at index \(1, 7, 3, 1\)"):
        cm.update(g, bad, scores_axis=1, scores_dtype=sd)
    assert cm.n_pixels == 2 * g.size


def test_scores_of_many_small_images_get_entries_not_tables():
    # 300 classes, 100 images of 8 x 8: too many pixels for the batch's cells, few for each
    # image's table (90,604 cells): per-image entries, as for labels (dense tables: ~64 MB)
    k, rng = 300, np.random.default_rng(2)
    s = rng.random((100, k, 8, 8), dtype=np.float32)
    g = rng.integers(0, k, (100, 8, 8)).astype(np.uint16)
    assert not _count_mod.sparse_total(ConfusionMatrix(k)._lookup, g.size)
    cm = ConfusionMatrix(k, per_image=True)
    cm.update(g[:1], s[:1], scores_axis=1)
    _, peak = peak_of(cm.update, g, s, scores_axis=1)
    # numpy's argmax along a channel axis copies the scores (7.7 MB); the tables: 166 MB
    assert peak < 1.25 * s.nbytes, peak / 2**20
    want = ConfusionMatrix(k, per_image=True).update(g[:1], s[:1].argmax(1))
    assert cm == want.update(g, s.argmax(1))


@pytest.mark.parametrize(("k", "shape", "per_image"), [(1000, (1, 128, 128), True),
                                                       (1000, (1, 250, 250), False)])  # fmt: skip
def test_scores_of_many_classes_larger_than_their_tables_stay_fused(k, shape, per_image):
    # numpy's argmax copies the scores (65-250 MB here): only where the dense tables weigh more
    # (1,000 classes, 128 x 128 per image: 54 -> 143 ms, 32 -> 63 MiB through the argmax)
    n, h, w = shape
    rng = np.random.default_rng(4)
    s = rng.random((n, k, h, w), dtype=np.float32)
    g = rng.integers(0, k, shape).astype(np.uint16)
    cm = ConfusionMatrix(k, per_image=per_image, threads=1)
    cm.update(g[:, :8, :8], s[:, :, :8, :8], scores_axis=1)
    _, peak = peak_of(cm.update, g, s, scores_axis=1)
    assert peak < 0.75 * s.nbytes, (peak / 2**20, s.nbytes / 2**20)  # (the tables: 32 MB)
    want = ConfusionMatrix(k, per_image=per_image).update(g[:, :8, :8], s[:, :, :8, :8].argmax(1))
    assert cm == want.update(g, s.argmax(1))


def test_scores_large_parallel_equal_argmax():
    rng = np.random.default_rng(5)
    s = rng.standard_normal((3, 19, 130, 257)).astype(np.float32)
    s[:, 7] = s[:, 3]  # ties between two channels everywhere
    g = rng.integers(0, 20, (3, 130, 257)).astype(np.uint8)
    g[g == 19] = 255
    for threads in (1, 2, None):
        fused = _cm(19, threads=threads).update(g, s, scores_axis=1)
        _assert_ref(fused, g, np.argmax(s, axis=1), 19)


@pytest.mark.parametrize(
    ("gshape", "sshape", "axis"),
    [((4, 6), (3, 4, 6), 0), ((2, 4, 6), (2, 4, 6, 3), -1), ((2, 4, 6), (3, 2, 4, 6), 0),
     ((9,), (9, 3), 1), ((2, 2, 4, 6), (2, 2, 3, 4, 6), 2)],
)  # fmt: skip
def test_scores_axes(gshape, sshape, axis):
    rng = np.random.default_rng(1)
    s = rng.integers(0, 3, sshape).astype(np.float32)  # ties
    g = rng.integers(0, 3, gshape).astype(np.int32)
    fused = _cm(3).update(g, s, scores_axis=axis)
    _assert_ref(fused, g, np.argmax(s, axis=axis), 3)


def test_scores_with_boundary_instances_and_raw_ids():
    rng = np.random.default_rng(4)
    s = rng.standard_normal((2, 4, 20, 24)).astype(np.float32)
    g = rng.integers(0, 4, (2, 20, 24)).astype(np.uint8)
    a = ConfusionMatrix(4, boundary="2px", per_image=True).update(g, s, scores_axis=1, key="a")
    b = ConfusionMatrix(4, boundary="2px", per_image=True).update(g, s.argmax(1), key="a")
    assert a == b
    spec = LabelSpec("r", ["x", "y"], raw=[RawLabel(1, "one", 0), RawLabel(3, "three", 1)])
    a = ConfusionMatrix(spec, gt_ids="raw", on_unexpected="count")
    a.update(np.ones((20, 24), np.uint8), s[0], scores_axis=0)  # channel c is raw id c
    want = s[0].argmax(0)
    assert a.counts[0].tolist() == [int((want == 1).sum()), int((want == 3).sum())]
    assert a.unexpected_pred == {v: int((want == v).sum()) for v in (0, 2) if (want == v).any()}


def test_scores_refusals():
    g = np.zeros((2, 4, 5), np.uint8)
    s = np.zeros((2, 3, 4, 5), np.float32)
    cm = ConfusionMatrix(3)
    with pytest.raises(ShapeMismatchError, match="scores of shape"):
        cm.update(g, s, scores_axis=2)
    with pytest.raises(UsageError, match="out of range"):
        cm.update(g, s, scores_axis=4)
    with pytest.raises(LabelDtypeError, match="scores have dtype int64"):
        cm.update(g, s.astype(np.int64), scores_axis=1)
    with pytest.raises(UsageError, match="without scores_axis"):
        cm.update(g, s, scores_dtype="bfloat16")
    with pytest.raises(UsageError, match="unknown"):
        cm.update(g, s.view(np.uint16)[..., ::2], scores_axis=1, scores_dtype="bf16")
    with pytest.raises(UsageError, match="reads 16-bit score bits"):
        cm.update(g, s, scores_axis=1, scores_dtype="float16")
    assert cm.n_pixels == 0


def test_scores_make_no_label_array():
    rng = np.random.default_rng(0)
    s = rng.standard_normal((2, 19, 256, 256)).astype(np.float32)
    g = np.zeros((2, 256, 256), np.uint8)
    cm = ConfusionMatrix(19, ignore_index=255)
    cm.update(g, s, scores_axis=1)
    _, peak = peak_of(cm.update, g, s, scores_axis=1)
    assert peak < g.size  # an int64 argmax array would be 8 bytes a pixel


# -- an update interrupted (Ctrl-C arrives at the next bytecode after a kernel returns) ----------
def _interrupt_after(module: object, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = getattr(module, name)

    def interrupted(*args: object) -> object:
        real(*args)
        raise KeyboardInterrupt

    monkeypatch.setattr(module, name, interrupted)


@pytest.mark.parametrize("key", [None, "k"])
@pytest.mark.parametrize(("k", "kernel"), [(3, "add_unfolded"), (100, "add_u8")])
def test_an_update_interrupted_after_the_short_way_kernel_is_whole(monkeypatch, key, k, kernel):
    # the one kernel of a small batch counts and adds everything (counts, void, ignored, pixels,
    # images; into the accumulator's unfolded table up to 62 classes, folded per call beyond):
    # Ctrl-C after it leaves the batch counted, its key with it, nothing half done
    cm = ConfusionMatrix(k, ignore_index=255)
    g = np.zeros((8, 8), np.uint8)
    g[0] = 255
    p = np.ones((8, 8), np.uint8)
    p[1] = 255
    with monkeypatch.context() as m:
        _interrupt_after(_stream._words, kernel, m)
        with pytest.raises(KeyboardInterrupt):
            cm.update(g, p, key=key)
    assert (cm.counts[0, 1], cm.void[0], cm.n_ignored, cm.n_pixels, cm.n_images) == (
        48,
        8,
        8,
        64,
        1,
    )
    assert cm.keys == ({key} if key else set())
    ConfusionMatrix.from_dict(cm.to_dict())  # a consistent state: every invariant holds
    if key:
        with pytest.raises(DuplicateBatchError):  # counted once: the retry is refused
            cm.update(g, p, key=key)
    cm.update(np.ones((2, 2), np.uint8), np.ones((2, 2), np.uint8))
    assert cm.counts[1, 1] == 4
    assert cm.counts[0, 1] == 48


@pytest.mark.parametrize(("gd", "pd", "kernel"), ONE_CALL)
def test_an_update_interrupted_after_the_one_call_kernel_is_whole(monkeypatch, gd, pd,
                                                                  kernel) -> None:  # fmt: skip
    g, p = _tiles((2, 16, 16), seed=8, dtypes=(gd, pd))
    cm = _primed()
    with monkeypatch.context() as m:
        _interrupt_after(_stream._words, kernel, m)
        with pytest.raises(KeyboardInterrupt):
            cm.update(g, p)
    _assert_primed_ref(cm, g, p)
    assert cm.n_images == 3
    ConfusionMatrix.from_dict(cm.to_dict())  # a consistent state: every invariant holds
    cm.update(g, p)  # the lock was released
    assert cm.n_pixels == 2 * g.size + 1


@pytest.mark.parametrize("key", [None, "k"])
@pytest.mark.parametrize("kernel", ["add_u8_parallel", "add_u8"])
def test_a_large_update_interrupted_after_its_kernel_is_whole(monkeypatch, key, kernel) -> None:
    # a large 8-bit batch is counted on all threads (one thread: threads=1), folded and added
    # in one kernel call: Ctrl-C after it leaves it counted whole, its key with it (two
    # workers asked for: with NUMBA_NUM_THREADS=1 the default would take the one-thread way)
    n = 1 << 20
    cm = ConfusionMatrix(3, threads=1 if kernel == "add_u8" else 2)
    with monkeypatch.context() as m:
        _interrupt_after(_stream._words, kernel, m)
        with pytest.raises(KeyboardInterrupt):
            cm.update(np.zeros(n, np.uint8), np.zeros(n, np.uint8), key=key)
    assert (cm.n_pixels, int(cm.counts[0, 0])) == (n, n)
    assert cm.keys == ({key} if key else set())
    cm.update(np.ones(n, np.uint8), np.ones(n, np.uint8))
    assert (int(cm.counts[0, 0]), int(cm.counts[1, 1])) == (n, n)


@pytest.mark.parametrize("key", [None, "k"])
def test_a_wide_update_interrupted_between_counting_and_adding_is_not_counted(
    monkeypatch, key
) -> None:
    # wider masks are narrowed and counted into a folded table, then added: Ctrl-C in between
    # leaves nothing counted (its key neither) and nothing behind for the next call
    n = 1 << 20
    cm = ConfusionMatrix(3)
    with monkeypatch.context() as m:
        _interrupt_after(_stream._words, "count_wide_parallel", m)
        _interrupt_after(_stream._words, "count_wide_serial", m)
        with pytest.raises(KeyboardInterrupt):
            cm.update(np.zeros(n, np.uint8), np.zeros(n, np.int64), key=key)
    assert cm.n_pixels == 0
    assert not cm.keys
    cm.update(np.array([[1, 2]], np.int32), np.array([[1, 2]], np.int32))  # small, wide dtypes
    cm.update(np.ones(n, np.uint8), np.ones(n, np.int64), key=key)  # the key is free again
    assert cm.counts[0, 0] == 0  # the interrupted million pixels were not counted
    assert cm.counts[1, 1] == n + 1
    assert cm.counts[2, 2] == 1


def test_short_way_keys_are_counted_once() -> None:
    g = np.zeros((4, 4), np.uint8)
    cm = ConfusionMatrix(3)
    spy = _Spy()
    with spy.on:
        cm.update(g, g, key=1)
        with pytest.raises(DuplicateBatchError, match="batch key '1' was counted before"):
            cm.update(g, g, key="1")  # the same key as a string
        bad = g.copy()
        bad[2, 3] = 9
        with pytest.raises(LabelRangeError):
            cm.update(g, bad, key="bad")  # refused whole: the key stays free
        cm.update(g, g, key="bad")
    assert spy.taken == [True, False, False, True]
    assert cm.keys == {"1", "bad"}
    assert cm.counts[0, 0] == 32
    merged = cm + ConfusionMatrix(3).update(g, g, key="2")
    assert merged.keys == {"1", "bad", "2"}
    with pytest.raises(DuplicateBatchError):
        merged.merge(ConfusionMatrix(3).update(g, g, key="bad"))


@pytest.mark.parametrize("axis", [1.0, "1", True, None])
def test_a_scores_axis_that_is_not_an_integer_is_refused(axis: object) -> None:
    g = np.zeros((1, 4, 4), np.uint8)
    s = np.zeros((1, 3, 4, 4), np.float32)
    cm = ConfusionMatrix(3)
    if axis is None:  # without scores_axis, float "labels" are refused as labels
        with pytest.raises(LabelDtypeError):
            cm.update(g, s)
        return
    with pytest.raises(UsageError, match="scores_axis"):
        cm.update(g, s, scores_axis=axis)  # type: ignore[arg-type]
    assert cm.n_pixels == 0


def test_per_image_scores_tables_stay_within_the_budget() -> None:
    # 150 classes: one image's table holds 152 * 152 counters; 600 images of 8 x 8 would need
    # ~110 MB of tables at once per thread, the budget is 64 MiB
    rng = np.random.default_rng(0)
    g = rng.integers(0, 150, (600, 8, 8)).astype(np.uint8)
    s = rng.random((600, 150, 8, 8), dtype=np.float32)
    am = s.argmax(axis=1)
    tracemalloc.start()
    want = ConfusionMatrix(150, per_image=True).update(g, am, key="a")
    _, labels_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tracemalloc.start()
    got = ConfusionMatrix(150, per_image=True).update(g, s, key="a", scores_axis=1)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert got == want
    # the scores' kernels keep each image's dense (K+2)^2 table while counting (600 * 152 * 152
    # int64: 110 MB here), and their kernel tables stay within the 64 MiB budget (it was 1 GB);
    # labels of images this small are counted straight into sparse entries (no dense tables)
    dense_rows = 600 * 152 * 152 * 8
    assert peak < dense_rows + (32 << 20), (peak / 2**20, dense_rows / 2**20)
    assert labels_peak < 16 << 20, labels_peak / 2**20


def test_unfolded_small_calls_between_everything() -> None:
    # small calls are counted into the accumulator's unfolded table and folded when counts are
    # read: interleaved with a refused batch (subtracted exactly), large calls, keyed calls,
    # the general way, reads, merges, round trips and pickling, the counts stay exact
    import pickle

    rng = np.random.default_rng(9)
    g = rng.integers(0, 6, (12, 40, 40)).astype(np.uint8)
    g[g == 5] = 255
    p = np.where(rng.random(g.shape) < 0.7, g, rng.integers(0, 5, g.shape)).astype(np.uint8)
    big_g = np.repeat(g, 30, axis=0).reshape(-1)  # a large call: counted on all threads
    big_p = np.repeat(p, 30, axis=0).reshape(-1)
    cm = ConfusionMatrix(5, ignore_index=255)
    seen_g, seen_p = [], []

    def count(gt, pred, **kw):  # type: ignore[no-untyped-def]
        cm.update(gt, pred, **kw)
        seen_g.append(np.asarray(gt).reshape(-1))
        seen_p.append(np.asarray(pred).reshape(-1))

    count(g[0], p[0])
    count(g[1], p[1], key="one")
    bad = p[2].copy()
    bad[7, 9] = 77
    with pytest.raises(LabelRangeError, match="77"):
        cm.update(g[2], bad)  # counted into the unfolded table, then subtracted
    assert cm._totals[3]  # the first two batches are still unfolded
    count(g[2], p[2])
    count(big_g, big_p)
    count(g[3].astype(np.int32), p[3])  # the general way
    assert cm.counts.sum() > 0  # a read folds
    assert not cm._totals[3]
    for i in range(4, 8):
        count(g[i], p[i])
    other = ConfusionMatrix(5, ignore_index=255)
    other.update(g[8], p[8])  # unfolded on the other side of a merge
    seen_g.append(g[8].reshape(-1))
    seen_p.append(p[8].reshape(-1))
    merged = cm + other
    ref = reference.confusion(np.concatenate(seen_g), np.concatenate(seen_p), 5, ignore=(255,))
    for state in (merged, ConfusionMatrix.from_dict(merged.to_dict()),
                  pickle.loads(pickle.dumps(merged))):  # fmt: skip
        reference.assert_same_counts(state, ref)
        assert state.n_pixels == ref.n_pixels
        assert state.n_images == 10  # 9 images and one flat batch
    assert cm.keys == {"one"}
    cm.update(g[9], p[9])  # unfolded again: equality compares folded counts
    twin = ConfusionMatrix.from_dict(cm.to_dict())
    assert twin == cm
    assert not cm._totals[3]


def test_unfolded_table_with_threads() -> None:
    rng = np.random.default_rng(4)
    g = rng.integers(0, 7, (200, 24, 24)).astype(np.uint8)
    cm = ConfusionMatrix(7)
    reads = []

    def work(i0: int) -> None:
        for i in range(i0, 200, 4):
            cm.update(g[i], g[(i + 1) % 200])
            if i % 20 == 0:
                reads.append(int(cm.counts.sum()))  # folds while others count

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ref = reference.confusion(g, np.roll(g, -1, axis=0), 7)
    reference.assert_same_counts(cm, ref)
    assert cm.n_images == 200
    assert reads


# -- Ctrl-C at every line of the ways that hold a key -------------------------------------------
def _lines_of(fn: object) -> list[int]:
    import dis

    code = fn.__code__  # type: ignore[attr-defined]
    return sorted({ln for _, ln in dis.findlinestarts(code) if ln and ln > code.co_firstlineno})


def _interrupt_at(code: object, line: int):  # type: ignore[no-untyped-def]
    """A tracer raising KeyboardInterrupt when ``code`` is about to run ``line`` (once)."""
    fired = []

    def local(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "line" and frame.f_lineno == line and not fired:
            fired.append(line)
            raise KeyboardInterrupt
        return local

    def global_(frame, event, arg):  # type: ignore[no-untyped-def]
        return local if frame.f_code is code else None

    return global_, fired


def _whole(cm: ConfusionMatrix, key: str, n: int) -> bool:
    """Counted with its key, or not at all and its key free; the state's invariants hold."""
    ConfusionMatrix.from_dict(cm.to_dict())  # every invariant of a state
    counted = cm.n_pixels == n
    assert counted == (key in cm.keys), (cm.n_pixels, cm.keys)
    # a claim left by Ctrl-C inside update's finally is that of a counted key (harmless)
    assert all(k in cm.keys for k in cm._pending)
    return counted


@pytest.mark.parametrize(
    ("shape", "dtype", "fn"),
    [((8, 8), np.uint8, "short"), ((300, 300), np.uint8, "short"),  # small and large, keyed
     ((8, 8), np.int32, "short"),  # a wider prediction, narrowed
     ((8, 8), np.int64, "update"), ((8, 8), np.uint8, "update")],  # the general way; update
)  # fmt: skip
def test_ctrl_c_at_every_line_counts_a_keyed_batch_whole_or_not_at_all(shape, dtype, fn):
    import sys

    target = _stream.StreamCounter._add_other if fn == "short" else ConfusionMatrix.update
    g = np.zeros(shape, dtype if fn == "update" else np.uint8)
    p = np.zeros(shape, dtype)
    n = g.size
    interrupted = 0
    for line in _lines_of(target):
        cm = ConfusionMatrix(3)
        tracer, _ = _interrupt_at(target.__code__, line)
        sys.settrace(tracer)
        try:
            cm.update(g, p, key="k")
        except KeyboardInterrupt:
            interrupted += 1
        finally:
            sys.settrace(None)
        counted = _whole(cm, "k", n)
        if not counted:  # not counted: sending the batch again counts it, once
            cm.update(g, p, key="k")
            assert _whole(cm, "k", n)
        with pytest.raises(DuplicateBatchError):
            cm.update(g, p, key="k")
    assert interrupted > 3


def _lock_is_free(cm: ConfusionMatrix) -> bool:
    """Whether another thread can take ``cm``'s lock (within 5 s); it gives it back."""
    free: list[bool] = []

    def take() -> None:
        free.append(cm._lock.acquire(timeout=5))
        if free[-1]:
            cm._lock.release()

    other = threading.Thread(target=take)
    other.start()
    other.join()
    return free == [True]


@pytest.mark.parametrize("dtype", [np.uint8, np.int64])
def test_ctrl_c_at_every_line_of_the_short_way_leaves_the_lock_free(dtype) -> None:
    # an unkeyed small batch (the one-call kernels): Ctrl-C at any line leaves it counted whole
    # or not at all, and the accumulator's lock free for other threads (it once stayed held
    # when Ctrl-C came just after a bare acquire())
    import sys

    target = _stream.StreamCounter.add
    g, p = _tiles((8, 8), seed=9, dtypes=("uint8", np.dtype(dtype).name))
    interrupted = 0
    for line in _lines_of(target):
        cm = _primed()
        tracer, _ = _interrupt_at(target.__code__, line)
        sys.settrace(tracer)
        try:
            cm.update(g, p)
        except KeyboardInterrupt:
            interrupted += 1
        finally:
            sys.settrace(None)
        assert _lock_is_free(cm), f"Ctrl-C at line {line} left the lock held"
        ConfusionMatrix.from_dict(cm.to_dict())  # every invariant of a state
        assert cm.n_pixels in (1, 1 + g.size)
        if cm.n_pixels == 1 + g.size:
            _assert_primed_ref(cm, g, p)
    assert interrupted > 3


def test_a_real_ctrl_c_inside_the_general_ways_commit_is_delivered_after_it(monkeypatch):
    # SIGINT raised while add_tally adds a batch field by field: held until the batch, its key
    # and its totals are all in, then delivered (the accumulator is never half updated)
    import signal

    from segiou import _batch, confusion

    real = _batch.add_into
    sent = []

    def add_into(acc, new):  # type: ignore[no-untyped-def]
        if not sent:
            sent.append(1)
            signal.raise_signal(signal.SIGINT)  # Python raises it at the next bytecode
        real(acc, new)

    monkeypatch.setattr(confusion, "add_into", add_into)
    g = np.arange(64, dtype=np.int64).reshape(8, 8) % 3  # int64/int64: the general way
    cm = ConfusionMatrix(3)
    with pytest.raises(KeyboardInterrupt):
        cm.update(g, g, key="k")
    assert sent
    assert _whole(cm, "k", 64)  # counted, with its key
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


def test_scratch_tables_stay_one_size_per_thread() -> None:
    # accumulators of many specs on one thread (a service counting many runs): the short way's
    # scratch is replaced, not kept per table size (it grew by ~25 MiB per spec of 1000 classes)
    g = np.zeros((16, 16), np.uint8)
    for k in range(100, 140):  # more than 62 classes: small calls fold their own table
        ConfusionMatrix(k).update(g, g)
        ConfusionMatrix(k).update(np.zeros((300, 300), np.uint8), np.zeros((300, 300), np.uint8))
    size, tabs, out = _stream._scratch.small
    assert (size, tabs.shape, out.shape) == ((141 * 141) * 8, (1, 141 * 141 * 8), (141, 141))
    assert _stream._scratch.folded.shape == (141, 141)
    cache = _count_mod._scratch.word_tables
    assert list(cache) == [141 * 141 * 8]


def test_specs_of_thousands_of_classes_take_the_generic_kernel() -> None:
    # word tables hold 8 counters a cell: 2000 classes would make a 256 MiB table per thread;
    # the generic kernel's (one counter a cell here) are 32 MiB (with its fold, the counts and
    # their copies the general way peaks at ~112 MiB)
    k = 2000
    cm = ConfusionMatrix(k, on_unexpected="count")
    assert not cm._lookup.words_fit
    assert cm._stream is None
    rng = np.random.default_rng(0)
    g = rng.integers(0, k, (64, 64)).astype(np.uint16)
    p = rng.integers(0, k, (64, 64)).astype(np.uint16)
    tracemalloc.start()
    try:
        cm.update(g, p)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20, peak / 2**20
    reference.assert_same_counts(cm, reference.confusion(g, p, k))


@pytest.mark.parametrize(
    ("gdtype", "pdtype", "short"),
    [("uint8", "int64", True), ("uint8", "int32", True), ("int8", "int64", True),
     ("bool", "int16", True), ("uint16", "uint16", True), ("int64", "int32", True),
     ("int64", "int64", False), ("uint8", "uint64", False), ("uint8", ">i4", False)],
)  # fmt: skip
def test_short_way_takes_argmax_outputs(gdtype, pdtype, short):
    # predictions straight from argmax (int64, int32) take the short way, narrowed; uint64,
    # big-endian and int64/int64 masks the general way; the counts are the same
    rng = np.random.default_rng(3)
    k = 2 if gdtype == "bool" else 5
    g = rng.integers(0, k, (2, 40, 50))
    if gdtype != "bool":
        g[0, :3] = -1 if gdtype[0] == "i" else 255  # ignored
    p = rng.integers(0, k, (2, 40, 50))
    gt, pred = g.astype(gdtype), p.astype(pdtype)
    for key in (None, "a"):
        cm = ConfusionMatrix(k, ignore_index=[255, -1])
        spy = _Spy()
        with spy.on:
            cm.update(gt, pred, key=key)
        assert spy.taken == [short]
        reference.assert_same_counts(cm, reference.confusion(gt, pred, k, ignore=(255, -1)))
        assert cm.n_images == 2


@settings(deadline=None)
@given(
    pdtype=st.sampled_from(["int64", "int32", "int16", "uint16"]),
    gdtype=st.sampled_from(["uint8", "int8", "bool"]),
    n=st.sampled_from([1, 7, 8, 9, 100, BLOCK - 1, BLOCK + 9, (1 << 16) + 3]),
    offset=st.integers(0, 7),
    seed=st.integers(0, 2**32 - 1),
    keyed=st.booleans(),
)
def test_short_way_wide_equals_reference(pdtype, gdtype, n, offset, seed, keyed):
    rng = np.random.default_rng(seed)
    k = 2 if gdtype == "bool" else 6
    runs = np.repeat(rng.integers(0, k, n // 9 + 1), 9)[:n]
    g = np.where(rng.random(n) < 0.05, -1 if gdtype == "int8" else 1, runs)
    p = np.where(rng.random(n) < 0.2, rng.integers(-1 if pdtype[0] == "i" else 0, k, n), runs)
    gt = _at_offset((g & 1).astype(bool) if gdtype == "bool" else g.astype(gdtype), offset)
    pred = p.astype(pdtype)
    cm = ConfusionMatrix(k, ignore_index=[-1, 65535] if pdtype == "uint16" else [-1])
    spy = _Spy()
    with spy.on:
        cm.update(gt, pred, key="b" if keyed else None)
    assert spy.taken == [True]
    ign = (-1, 65535) if pdtype == "uint16" else (-1,)
    reference.assert_same_counts(cm, reference.confusion(gt, pred, k, ignore=ign))
    assert cm.n_pixels == n


@pytest.mark.parametrize("k", [254, 300, 510])
@pytest.mark.parametrize(("gd", "pd"), [("uint8", "uint8"), ("uint16", "uint16"),
                                        ("uint8", "int64"), ("int32", "int32")])  # fmt: skip
@pytest.mark.parametrize("key", [None, "a"])
def test_few_pixels_of_a_large_table_leave_the_short_way_for_their_cells(k, gd, pd, key):
    # 300-510 classes: the short way's word table holds (K+2)**2 cells x 8 copies, made and
    # folded per call (0.41 ms for 64 x 64 uint16 at 300 classes, 1.3 ms at 510); a batch of at
    # most (K+2)**2 / 16 pixels goes to the general way, which counts its cells (0.17 ms); at
    # 254 classes the fold costs less than the cells for a batch of few classes: kept
    edge = (k + 2) ** 2 // _count_mod._SPARSE_TOTAL_CELLS_PER_PIXEL
    rng = np.random.default_rng(k)
    fits = k + 1 <= min(np.iinfo(gd).max, np.iinfo(pd).max)
    ignore = (k + 1,) if fits else ()  # (uint8 holds no value past 300 or 510 classes)
    top = min(k, np.iinfo(gd).max + 1, np.iinfo(pd).max + 1)  # no unexpected value
    for n in (edge, edge + 1):
        g = rng.integers(0, top, n).astype(gd)
        g[: n // 3] = 1  # a run: words without a change
        p = np.where(rng.random(n) < 0.3, rng.integers(0, top, n), g).astype(pd)
        g[-5:] = ignore or g[-5:]
        cm, spy = _cm(k, ignore=ignore), _Spy()
        with spy.on:
            cm.update(g, p, key=key)
        # the short way takes what it took before, and below 300 classes all of it
        assert spy.taken == [n > edge or k < 300], n
        _assert_ref(cm, g, p, k, ignore=ignore)
