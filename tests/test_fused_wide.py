"""An 8-bit mask beside a wider one (argmax outputs): exact counts whatever the values.

The wide word path (:func:`segiou._word_kernels.count_wide_span`) counts coherent masks a run
at a time; a wider value whose low byte equals the current run's byte (``256 + b``,
``-256 + b``, ``2**32 + b``) must never pass for that byte, wherever it sits (edges of words,
blocks, threads' spans, the array), whichever side is the 8-bit one, aligned or not. Every case
is checked against the numpy oracle (a kernel counting in place without narrowing must keep
these passing: each of three hand-made bugs in such a kernel failed one of them).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from segiou import ConfusionMatrix
from segiou import _word_kernels as _words
from segiou._count import Lookup
from segiou.testing.strategies import aligned_empty

BLOCK = _words.NARROW_BLOCK
K = 6
IGNORE = (255, -1)
#: Wider values whose low byte is ``b`` (or any byte), per dtype; ``b`` is added where marked.
ADVERSARIAL = {
    "int16": [(256, True), (-256, True), (-(2**15), False), (2**15 - 1, False), (-1, False)],
    "uint16": [(256, True), (512, True), (65535, False), (65280, True)],
    "int32": [(256, True), (-256, True), (2**16, True), (2**31 - 1, False), (-(2**31), False),
              (-(2**31) + 256, True), (-1, False)],
    "int64": [(256, True), (-256, True), (2**32, True), (2**31 - 1, False), (-(2**31), False),
              (-(2**63), False), (2**63 - 1, False), (2**56, True), (-(2**32), True)],
}  # fmt: skip
WIDE = list(ADVERSARIAL)


def _runs(rng: np.random.Generator, n: int, values: list[int], run: int) -> np.ndarray:
    """Runs of ``run`` pixels of random ``values``."""
    return np.repeat(rng.choice(values, n // run + 1), run)[:n].astype(np.int64)


def _pair(rng: np.random.Generator, n: int, gtype: str, run: int = 97):
    """Coherent ground truth (with ignored runs) and a prediction mostly equal to it.

    Under ignored ground truth the prediction holds a class, void (255) or an unexpected byte.
    """
    ign = -1 if gtype == "int8" else 255
    g = _runs(rng, n, [*range(K), ign], run)
    p = g.copy()
    p[g == ign] = rng.choice([0, K - 1, 255, 200, 128])  # bytes >= 128: void, unexpected
    wrong = rng.random(n) < 0.002
    p[wrong] = rng.integers(0, K, int(wrong.sum()))
    return g, p


def _at_offset(a: np.ndarray, offset: int) -> np.ndarray:
    """A copy of ``a`` whose data starts ``offset`` bytes after a word boundary."""
    out = aligned_empty(a.size, a.dtype, offset=offset)
    out[...] = a.reshape(-1)
    return out


def _check(gt: np.ndarray, pred: np.ndarray, threads: int) -> None:
    for g, p in ((gt, pred), (pred, gt)):  # either side may be the 8-bit one
        cm = ConfusionMatrix(K, ignore_index=list(IGNORE), on_unexpected="count", threads=threads)
        cm.update(g, p)
        reference.assert_same_counts(cm, reference.confusion(g, p, K, ignore=IGNORE))
        total = int(cm.counts.sum() + cm.void.sum()) + cm.n_ignored + cm.n_unexpected
        assert total == cm.n_pixels == g.size


def _edges(n: int) -> list[int]:
    """Pixels at the edges of words, blocks, the two threads' spans and the array."""
    half = n // 8 // 2 * 8
    out = [0, 7, 8, 15, BLOCK - 8, BLOCK - 1, BLOCK, BLOCK + 7, half - 1, half, half + 7]
    return sorted({i for i in [*out, n - 9, n - 8, n - 1] if 0 <= i < n})


@pytest.mark.parametrize("wide", WIDE)
@pytest.mark.parametrize("narrow", ["uint8", "int8"])
@pytest.mark.parametrize("threads", [1, 2])
def test_values_whose_low_byte_is_the_runs_byte(wide, narrow, threads):
    rng = np.random.default_rng(WIDE.index(wide) * 2 + (narrow == "int8"))
    n = 3 * BLOCK + 13  # not a multiple of 8; the two threads split at a word boundary
    g, p = _pair(rng, n, narrow)
    odd = np.array(p)
    for i, (v, plus_byte) in zip(_edges(n) * 2, ADVERSARIAL[wide] * 8, strict=False):
        b = int(p[i - 1]) & 0xFF if i else int(p[i]) & 0xFF  # the run's byte (its value)
        odd[i] = v + b if plus_byte else v
    info = np.iinfo(wide)
    assert (odd >= info.min).all()
    assert (odd <= info.max).all()
    _check(_at_offset(g.astype(narrow), 0), odd.astype(wide), threads)


@pytest.mark.parametrize("wide", WIDE)
@pytest.mark.parametrize("threads", [1, 2])
def test_one_odd_value_at_each_edge(wide, threads):
    # one adversarial value at a time, at each edge, inside a long constant run
    n = 2 * BLOCK + 8 * 3 + 5
    g = np.full(n, 3, np.int64)
    p = np.full(n, 3, np.int64)
    p[: n // 3] = 4
    for i in _edges(n):
        for v, plus_byte in ADVERSARIAL[wide]:
            odd = p.copy()
            odd[i] = v + int(p[i]) if plus_byte else v
            _check(_at_offset(g.astype(np.uint8), 0), odd.astype(wide), threads)


@pytest.mark.parametrize("wide", ["int32", "int64", "uint16"])
@pytest.mark.parametrize(("offset", "wide_offset"), [(1, 0), (3, 0), (0, 2), (0, 4), (5, 4)])
@pytest.mark.parametrize("threads", [1, 2])
def test_misaligned_sides_are_narrowed(wide, offset, wide_offset, threads):
    # an 8-bit side off a word boundary is copied; a wider side off one is narrowed
    rng = np.random.default_rng(offset * 7 + wide_offset)
    n = 2 * BLOCK + 21
    g, p = _pair(rng, n, "uint8")
    p[[0, 9, BLOCK, n - 1]] = [256 + p[0], 300, -1 if wide[0] == "i" else 999, 256]
    _check(_at_offset(g.astype(np.uint8), offset), _at_offset(p.astype(wide), wide_offset), threads)
    _check(g.astype(np.uint8)[1:], p.astype(wide)[1:], threads)  # views x[1:]


def _codes(a: np.ndarray) -> np.ndarray:
    """Code of each pixel in a word table: class, ``K`` ignored, ``K+1`` unexpected."""
    v = a.astype(np.int64)
    out = np.where((v >= 0) & (v < K), v, K + 1)
    return np.where(np.isin(v, IGNORE), K, out)


def _table(gt: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """The ``(K+2) x (K+2)`` code table of a plain numpy count (rows ground truth)."""
    width = K + 2
    return np.bincount(width * _codes(gt) + _codes(pred), minlength=width * width).reshape(
        width, width
    )


def _lookup() -> Lookup:
    m = {i: i for i in range(K)} | dict.fromkeys(IGNORE, -1)
    return Lookup(K, m, m)


@settings(deadline=None)
@given(
    wide=st.sampled_from(WIDE),
    narrow=st.sampled_from(["uint8", "int8"]),
    gt_wide=st.booleans(),
    n=st.integers(1, 3 * BLOCK + 100),
    cut=st.tuples(st.integers(0, 2**20), st.integers(0, 2**20)),
    run=st.sampled_from([1, 3, 9, 50, 400, 5000]),
    n_odd=st.integers(0, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_wide_span_equals_reference(wide, narrow, gt_wide, n, cut, run, n_odd, seed):
    # any span [i0, i1) of the wide kernel, spans not starting on a word boundary included
    rng = np.random.default_rng(seed)
    g, p = _pair(rng, n, narrow, run)
    for i in rng.integers(0, n, n_odd):
        v, plus_byte = ADVERSARIAL[wide][rng.integers(len(ADVERSARIAL[wide]))]
        p[i] = v + (int(p[i - 1]) & 0xFF if i else 0) if plus_byte else v
    b = _at_offset(g.astype(narrow), 0)
    x = _at_offset(p.astype(wide), 0)
    i0, i1 = sorted(c % (n + 1) for c in cut)
    gt, pred = (x, b) if gt_wide else (b, x)
    lk = _lookup()
    u8 = np.dtype(np.uint8)
    gcode, pcode = lk.word_codes(gt.dtype if gt.itemsize == 1 else u8,
                                 pred.dtype if pred.itemsize == 1 else u8)  # fmt: skip
    t = np.zeros(lk.word_table_size, np.int64)
    _words.count_wide_span(gt, pred, i0, i1, gcode, pcode, lk.word_luts(), t)
    out = np.zeros((K + 2, K + 2), np.int64)
    _words.fold_tables(t.reshape(1, -1), out)
    np.testing.assert_array_equal(out, _table(gt[i0:i1], pred[i0:i1]))


@settings(deadline=None)
@given(
    wide=st.sampled_from(WIDE),
    narrow=st.sampled_from(["uint8", "int8"]),
    n=st.sampled_from([1, 8, 9, BLOCK - 1, BLOCK + 8, 2 * BLOCK + 13, (1 << 16) + 3]),
    offset=st.integers(0, 1),
    n_odd=st.integers(0, 3),
    seed=st.integers(0, 2**32 - 1),
    threads=st.sampled_from([1, 2]),
)
def test_argmax_beside_8_bit_equals_reference(wide, narrow, n, offset, n_odd, seed, threads):
    rng = np.random.default_rng(seed)
    g, p = _pair(rng, n, narrow, int(rng.integers(1, 2000)))
    for i in rng.integers(0, n, n_odd):
        v, plus_byte = ADVERSARIAL[wide][rng.integers(len(ADVERSARIAL[wide]))]
        p[i] = v + (int(p[i - 1]) & 0xFF if i else 0) if plus_byte else v
    _check(_at_offset(g.astype(narrow), offset), p.astype(wide), threads)


@numba.njit
def _narrow(src, dst):
    return _words._narrow_into(src, dst)


@pytest.mark.parametrize("dtype", ["int16", "uint16", "int32", "uint32", "int64", "uint64"])
def test_narrowing_says_exactly_whether_every_value_is_a_byte(dtype):
    # the narrowing loop of each width (an unsigned maximum up to 32 bits, an OR at 64) and its
    # numpy twin: the low byte of every value, and "all in 0..255" exactly, for one odd value
    # at any lane of a vector, the unrolled groups and the scalar tail
    info = np.iinfo(dtype)
    odd = [0, 1, 255, 256, 257, 511, 2**8 + 7, 2**15, 2**16 - 1, 2**16 + 3, 2**31, 2**32,
           2**32 + 7, 2**63, 2**64 - 1, -1, -7, -255, -256, -(2**31), -(2**32) + 7,
           int(info.min), int(info.max)]  # fmt: skip
    for n in (BLOCK, BLOCK - 3, 37, 1):
        for v in (v for v in odd if info.min <= v <= info.max):
            for i in sorted({0, 1, 7, 15, 16, 31, 63, n // 2, n - 2, n - 1} & set(range(n))):
                x = np.full(n, 9, dtype)
                x[i] = v
                want = np.full(n, 9, np.uint8)
                want[i] = v & 0xFF
                for fn in (_narrow, _words._narrow_into):
                    dst = np.zeros(BLOCK, np.uint8)
                    assert fn(x, dst) == (0 <= v <= 255), (fn, n, v, i)
                    np.testing.assert_array_equal(dst[:n], want)
