"""Hypothesis strategies for label masks.

Use with ``@settings(deadline=None)``: the first example of each dtype/layout compiles Numba
kernels.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

#: Label dtypes segiou documents (uint8, uint16, int16, int32, int64, bool) plus int8, which the
#: 8-bit word path reads as signed bytes.
DTYPES = ("uint8", "uint16", "int16", "int32", "int64", "bool", "int8")
BYTE_DTYPES = ("uint8", "int8", "bool")

#: How a mask is laid out in memory. Views leave gaps filled with a sentinel, so a kernel that
#: reads outside the view changes the counts.
LAYOUTS = ("C", "F", "step", "reversed", "transposed", "offset")

#: Ignore values to draw from: inside and outside the range of every dtype, and negative. (Values
#: millions away from the class ids are refused by the lookup tables: see test_counting.)
IGNORE_CANDIDATES = (255, -1, -100, 256, 1000, 32767, 65535, 70000, -129, -40000)


class LabelPair(NamedTuple):
    """A ground-truth/prediction pair with the settings to count it."""

    gt: np.ndarray
    pred: np.ndarray
    num_classes: int
    ignore: tuple[int, ...]


def dtype_range(dtype: np.dtype | str) -> tuple[int, int]:
    """Smallest and largest value a label dtype holds."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return 0, 1
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def aligned_empty(n: int, dtype: np.dtype | str, offset: int = 0) -> np.ndarray:
    """Return a 1-D array of ``n`` items whose data starts ``offset`` bytes after an 8-byte boundary."""
    dt = np.dtype(dtype)
    buf = np.empty(n * dt.itemsize + 16, dtype=np.uint8)
    start = (-buf.ctypes.data) % 8 + offset
    out = buf[start : start + n * dt.itemsize].view(dt)
    assert n == 0 or out.ctypes.data % 8 == offset % 8
    return out


def relayout(a: np.ndarray, how: str, sentinel: int) -> np.ndarray:
    """Return the values of ``a`` in another memory layout (a view into a bigger buffer, mostly)."""
    dt = a.dtype
    fill = np.array(sentinel).astype(dt)
    if how == "C" or a.ndim == 0:
        return np.ascontiguousarray(a)
    if how == "F":
        return np.asfortranarray(a)
    if how == "step":  # every other element of a buffer twice the size, from index 1
        base = np.full(tuple(2 * s + 1 for s in a.shape), fill, dtype=dt)
        view = base[tuple(slice(1, 1 + 2 * s, 2) for s in a.shape)]
    elif how == "reversed":  # negative strides on every axis
        base = np.full(a.shape, fill, dtype=dt)
        view = base[(slice(None, None, -1),) * a.ndim]
    elif how == "transposed":  # the axes of the buffer in reverse order
        base = np.full(a.shape[::-1], fill, dtype=dt)
        view = base.transpose()
    elif how == "offset":  # C-contiguous, but not 8-byte aligned (1-byte dtypes only)
        if dt.itemsize != 1:
            return np.ascontiguousarray(a)
        view = aligned_empty(a.size, dt, offset=3).reshape(a.shape)
    else:  # pragma: no cover - a typo in a test
        raise ValueError(how)
    view[...] = a
    assert view.shape == a.shape
    return view


@st.composite
def ignore_values(draw: st.DrawFn, num_classes: int) -> tuple[int, ...]:
    """Zero, one or two ignore values outside ``0..K-1`` (maybe outside the dtype's range)."""
    allowed = [v for v in IGNORE_CANDIDATES if not 0 <= v < num_classes]
    allowed += [num_classes, num_classes + 7]
    return tuple(draw(st.lists(st.sampled_from(allowed), max_size=2, unique=True)))


def _mask(values: list[int], shape: tuple[int, ...], dtype: str) -> st.SearchStrategy[np.ndarray]:
    """Masks of ``shape`` with elements from ``values``; large uniform runs are likely."""
    return hnp.arrays(np.int64, shape, elements=st.sampled_from(values)).map(
        lambda a: a.astype(dtype)
    )


@st.composite
def label_pairs(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = DTYPES,
    min_classes: int = 1,
    max_classes: int = 300,
    min_dims: int = 1,
    max_dims: int = 4,
    max_side: int = 7,
    min_side: int = 0,
    unexpected: bool = False,
    layouts: tuple[str, ...] = LAYOUTS,
    same_dtype: bool = True,
) -> LabelPair:
    """Draw a pair of masks of the same shape.

    Ground truth holds classes and ignore values (and, with ``unexpected``, values that are
    neither: negative ids, ids >= K); predictions hold classes, ignore values (void) and, with
    ``unexpected``, other values. Shapes of rank ``min_dims..max_dims`` may be zero-size.
    """
    gdtype = draw(st.sampled_from(dtypes))
    pdtype = gdtype if same_dtype else draw(st.sampled_from(dtypes))
    k = draw(st.integers(min_classes, max_classes))
    ignore = draw(ignore_values(k))
    shape = draw(
        hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)
    )

    def values_for(dtype: str, extra: bool) -> list[int]:
        lo, hi = dtype_range(dtype)
        classes = list(range(min(k, hi + 1)))
        if len(classes) > 12:  # a few spread-out classes, always the first and the last
            picked = draw(st.lists(st.sampled_from(classes), min_size=1, max_size=10))
            classes = sorted({0, classes[-1], *picked})
        vals = classes + [v for v in ignore if lo <= v <= hi]
        if extra:
            odd = [v for v in (-1, -7, lo, k, k + 3, hi) if lo <= v <= hi and not 0 <= v < k]
            vals += [v for v in odd if v not in ignore]
        return sorted(set(vals))

    gvals = values_for(gdtype, unexpected)
    pvals = values_for(pdtype, unexpected)
    gt = draw(_mask(gvals, shape, gdtype))
    pred = draw(_mask(pvals, shape, pdtype))
    sentinel = 0
    gt = relayout(gt, draw(st.sampled_from(layouts)), sentinel)
    pred = relayout(pred, draw(st.sampled_from(layouts)), sentinel)
    return LabelPair(gt, pred, k, ignore)


@st.composite
def byte_pairs(
    draw: st.DrawFn,
    *,
    max_size: int = 200,
    unexpected: bool = True,
    same_dtype: bool = False,
) -> LabelPair:
    """Aligned, C-contiguous 8-bit pairs (uint8, int8 with negative ids, bool) of any size.

    These take the 8-bit word path once its pixel threshold is lowered; their sizes are often
    not a multiple of 8 (a tail of single bytes) and words are often constant (the fast step).
    """
    gdtype = draw(st.sampled_from(BYTE_DTYPES))
    pdtype = gdtype if same_dtype else draw(st.sampled_from(BYTE_DTYPES))
    k = draw(st.integers(1, 300))
    ignore = draw(ignore_values(k))
    n = draw(st.integers(1, max_size))

    def values_for(dtype: str) -> list[int]:
        lo, hi = dtype_range(dtype)
        vals = list(range(min(k, hi + 1)))
        if len(vals) > 12:
            vals = sorted({0, vals[-1], *draw(st.lists(st.sampled_from(vals), max_size=8))})
        vals += [v for v in ignore if lo <= v <= hi]
        if unexpected:
            vals += [v for v in (-1, -128, k, 200, hi) if lo <= v <= hi and not 0 <= v < k]
        return sorted(set(vals))

    out = []
    for dtype in (gdtype, pdtype):
        vals = values_for(dtype)
        a = draw(hnp.arrays(np.int64, (n,), elements=st.sampled_from(vals)))
        buf = aligned_empty(n, dtype)
        buf[...] = a.astype(dtype)
        out.append(buf)
    shape = draw(st.sampled_from([(n,), (1, n), (1, 1, n), (1, 1, 1, n)]))
    return LabelPair(out[0].reshape(shape), out[1].reshape(shape), k, ignore)


def large_byte_pair(
    seed: int,
    *,
    dtype: str = "uint8",
    n: int = (1 << 20) + 5,
    num_classes: int = 19,
    noise: float = 0.02,
) -> LabelPair:
    """Make a >= 1 Mpixel aligned C-contiguous 8-bit pair for the word path, mostly uniform runs.

    Ground truth: runs of one class (like real masks), some ignore pixels (255 for uint8, -1 for
    int8, none for bool). Prediction: the ground truth with ``noise`` of its pixels changed,
    some void, and (for uint8/int8) a few unexpected values.
    """
    rng = np.random.default_rng(seed)
    k = 2 if dtype == "bool" else num_classes
    ignore = {"uint8": (255,), "int8": (-1,), "bool": ()}[dtype]
    run_starts = np.sort(rng.choice(n, size=max(1, n // 4096), replace=False))
    run_starts[0] = 0
    lengths = np.diff(np.append(run_starts, n))
    gt = np.repeat(rng.integers(0, k, size=lengths.size), lengths)
    gt[rng.random(n) < 0.01] = ignore[0] if ignore else 0
    pred = gt.copy()
    flip = rng.random(n) < noise
    pred[flip] = rng.integers(0, k, size=int(flip.sum()))
    if ignore:
        pred[rng.random(n) < 0.002] = ignore[0]
        pred[rng.random(n) < 0.0005] = -5 if dtype == "int8" else 77
    g = aligned_empty(n, dtype)
    p = aligned_empty(n, dtype)
    g[...] = gt.astype(dtype)
    p[...] = pred.astype(dtype)
    return LabelPair(g, p, k, ignore)


@st.composite
def large_byte_pairs(draw: st.DrawFn) -> LabelPair:
    """:func:`large_byte_pair` with a drawn seed, dtype, size (tails of 0..15 bytes) and noise."""
    return large_byte_pair(
        draw(st.integers(0, 2**32 - 1)),
        dtype=draw(st.sampled_from(BYTE_DTYPES)),
        n=(1 << 20) + draw(st.integers(0, 15)),
        num_classes=draw(st.integers(2, 60)),
        noise=draw(st.sampled_from([0.0, 0.02, 0.5])),
    )
