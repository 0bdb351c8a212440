"""Class scores counted as predictions: the argmax fused into the counting pass.

``update(gt, scores, scores_axis=1)`` counts exactly what ``update(gt, np.argmax(scores,
axis=1))`` counts, without the ``N x H x W`` int64 array ``argmax`` makes: the kernels
(:func:`segiou._kernels.count_scores_float` and its float16/bfloat16 twin) take the maximum
over the channels of one image row at a time and count the row straight away.

Conventions:

* channel ``c`` is the prediction value ``c``, read through the accumulator's prediction
  mapping (class ids: channel ``c`` is class ``c``; raw ids: the raw id ``c``);
* ties go to the lowest channel, as ``numpy.argmax``;
* scores holding NaN are refused (:class:`~segiou.errors.ScoresError`, naming the first NaN
  position): ``numpy.argmax`` would pick the NaN's channel, which counts a broken output as a
  prediction;
* float32 and float64 are read as they are; float16 and ml_dtypes' ``bfloat16`` as their 16
  bits; ``uint16``/``int16`` bits only with ``scores_dtype="bfloat16"`` or ``"float16"`` (the
  way to pass a PyTorch bfloat16 tensor: ``t.view(torch.int16)``, which DLPack carries).

Values the mapping does not know (a channel beyond the classes, an unexpected ground truth)
are reported as for label masks: those rare batches are counted again from the argmax
labels by :func:`segiou._count.count_pairs`, which names each value and its first position.
"""

from __future__ import annotations

import math

import numpy as np

from segiou import _kernels
from segiou._arrays import as_labels, to_numpy
from segiou._count import Lookup, OnUnexpected, Tally, count_pairs, few_for_table
from segiou._jit import run_parallel
from segiou._typing import IntArray
from segiou.errors import LabelDtypeError, ScoresError, ShapeMismatchError, UsageError
from segiou.images import ImageRows

__all__ = ["HALF_NAN_BITS", "count_batch", "count_scores", "read_scores"]

#: Memory for the per-thread per-image tables of one kernel call (as for label masks).
_BUDGET = 64 << 20

#: Magnitudes (sign bit cleared) above which 16-bit floats are NaN: exponent all ones and a
#: non-zero mantissa.
HALF_NAN_BITS = {"float16": 0x7C00, "bfloat16": 0x7F80}
#: Below this many score values one thread is faster than waking the pool.
_PARALLEL_MIN_VALUES = 1 << 18


def read_scores(scores: object, dtype: str | None, where: str) -> tuple[np.ndarray, int]:
    """Return ``(array, nan_bits)``: the scores as the kernels read them.

    ``nan_bits`` is -1 for float32/float64 scores, else the NaN threshold of the 16-bit
    format whose bits (uint16) the array holds.

    Raises
    ------
    UsageError
        An unknown ``scores_dtype``, or one given for scores that are not 16-bit integers.
    LabelDtypeError
        Scores of a dtype that is not a float (nor 16-bit bits with ``scores_dtype``).
    """
    s = to_numpy(scores, "scores", where)
    if dtype is not None and dtype not in HALF_NAN_BITS:
        msg = (
            f"{where}: scores_dtype={dtype!r} is unknown; expected 'bfloat16' or 'float16' "
            "(how to read uint16/int16 score bits), or None for float scores"
        )
        raise UsageError(msg)
    if not s.dtype.isnative and s.dtype.kind in "fiu":
        s = s.astype(s.dtype.newbyteorder("="))
    if dtype is not None:
        if s.dtype not in (np.uint16, np.int16):
            msg = (
                f"{where}: scores_dtype={dtype!r} reads 16-bit score bits, but the scores have "
                f"dtype {s.dtype}; give uint16/int16 bits (e.g. a bfloat16 tensor as "
                "t.view(torch.int16)) or leave scores_dtype out for float scores"
            )
            raise UsageError(msg)
        return s.view(np.uint16), HALF_NAN_BITS[dtype]
    if s.dtype.name in HALF_NAN_BITS:  # float16, or ml_dtypes' bfloat16
        return s.view(np.uint16), HALF_NAN_BITS[s.dtype.name]
    if s.dtype in (np.float32, np.float64):
        return s, -1
    msg = (
        f"{where}: scores have dtype {s.dtype}, expected float32, float64, float16 or bfloat16; "
        "give 16-bit bfloat16 bits as uint16/int16 with scores_dtype='bfloat16', or pass "
        "labels (not scores) without scores_axis"
    )
    raise LabelDtypeError(msg)


def _nchw(s: np.ndarray, axis: int, shape: tuple[int, ...], where: str) -> np.ndarray:
    """View scores as ``(N, C, H, W)`` for ground truth of ``shape`` (the channel axis out)."""
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        msg = (
            f"{where}: scores_axis={axis!r} is not an axis; give the channel axis of the scores "
            "as an integer, e.g. scores_axis=1 for N x C x H x W"
        )
        raise UsageError(msg)
    axis = int(axis)
    if not -s.ndim <= axis < s.ndim:
        msg = (
            f"{where}: scores_axis={axis} is out of range for scores of shape {s.shape}; give "
            "the channel axis, e.g. 1 for N x C x H x W"
        )
        raise UsageError(msg)
    axis %= s.ndim
    rest = s.shape[:axis] + s.shape[axis + 1 :]
    if rest != shape or s.shape[axis] == 0:
        msg = (
            f"{where}: scores of shape {s.shape} with scores_axis={axis} hold predictions of "
            f"shape {rest}, but gt has shape {shape}; the scores must be the ground truth's "
            "shape with one channel axis (at least one channel) added"
        )
        raise ShapeMismatchError(msg)
    c = s.shape[axis]
    if len(shape) < 2:
        return np.moveaxis(s, axis, 0).reshape(1, c, 1, -1)
    m = np.moveaxis(s, axis, len(shape) - 2)
    return m.reshape(math.prod(shape[:-2]), c, shape[-2], shape[-1])


def _refuse_nan(s: np.ndarray, nan_bits: int, where: str) -> None:
    """Refuse the user's scores ``s`` when they hold a NaN, naming the first (in C order)."""
    bad = np.isnan(s) if nan_bits < 0 else (s & 0x7FFF) > nan_bits
    if not bad.any():
        return
    pos = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(bad)[0]), s.shape))
    msg = (
        f"{where}: the scores hold NaN, first at index {pos} of the scores (shape {s.shape}); a "
        "NaN score has no argmax worth counting. Nothing was counted: fix the model output "
        "(np.isnan(scores).any() finds them)"
    )
    raise ScoresError(msg)


def count_scores(
    gt: object,
    scores: object,
    lookup: Lookup,
    *,
    axis: int,
    dtype: str | None,
    where: str,
    on_unexpected: OnUnexpected,
    per_image: bool,
    threads: int | None,
    labels: bool = False,
) -> tuple[Tally, np.ndarray | None]:
    """Count ground truth against the argmax of class scores, in one pass.

    Parameters
    ----------
    gt : array_like of int or bool
        Ground truth of any rank.
    scores : array_like of float
        ``gt``'s shape with a channel axis ``axis`` added (see :func:`read_scores`).
    lookup : Lookup
        Raw value -> class mapping; channel ``c`` is the prediction value ``c``.
    axis, dtype
        ``scores_axis`` and ``scores_dtype`` of :meth:`ConfusionMatrix.update`.
    where, on_unexpected, per_image, threads
        As for :func:`segiou._count.count_pairs`.
    labels : bool
        Also return the argmax labels (Boundary IoU and instances need them; made then).

    Returns
    -------
    tuple of Tally and ndarray or None
        The tally, and the argmax labels when ``labels`` (else ``None``).

    Raises
    ------
    ScoresError
        A NaN score (its position in ``scores`` is named); nothing is counted.
    ShapeMismatchError, LabelDtypeError, LabelRangeError, UsageError
        Scores that do not fit ``gt``; unexpected values (as for label masks).
    """
    ga = to_numpy(gt, "gt", where)
    g = as_labels(ga, "gt", where)
    s, nan_bits = read_scores(scores, dtype, where)
    s4 = _nchw(s, axis, g.shape, where)
    n, c, h, w = s4.shape
    k = lookup.num_classes
    lk = lookup.for_bool(ga.dtype == np.bool_, False)
    ccode = np.full(c, lk.punexp, dtype=np.int64)  # channel c read as prediction value c
    lo, hi = max(lk.plo, 0), min(c, lk.plo + lk.plut.size)
    if lo < hi:
        ccode[lo:hi] = lk.plut[lo - lk.plo : hi - lk.plo]
    # numpy's argmax copies the scores: worth it where the fused pass's dense tables (one per
    # image, per_image) outweigh the scores, and the labels get cells or entries instead
    tables = (k + 2) ** 2 * (n if per_image else 1)
    if s4.size and tables >= s4.size and few_for_table(lk, (n, h, w), per_image):
        _refuse_nan(s, nan_bits, where)
        am = _argmax(s, axis, nan_bits)
        tally = count_pairs(gt, am, lookup, where=where, on_unexpected=on_unexpected,
                            per_image=per_image, threads=threads)  # fmt: skip
        return tally, am if labels else None
    width = k + 2
    # the folded table, and per image the rows of each group of images (made sparse group by
    # group, as for labels: no dense table of every image)
    total = np.zeros((width, width), dtype=np.int64)
    parts: list[ImageRows] = []
    if s4.size and g.dtype != np.uint64:
        g3 = g.reshape(n, h, w)
        workers = threads or (1 if s4.size < _PARALLEL_MIN_VALUES else _num_threads())
        workers = max(1, min(int(workers), n * h))
        # per-image tables for at most a budget's worth of images at a time, as for labels
        group = n if not per_image else max(1, min(n, _BUDGET // (8 * workers * lk.table_size)))
        for i in range(0, n, group):
            gi, si = g3[i : i + group], s4[i : i + group]
            tabs = np.zeros((workers, gi.shape[0] if per_image else 1, lk.table_size), np.int64)
            args = (lk.glut, lk.glo, lk.gunexp, ccode, lk.copies - 1, tabs, per_image)
            if nan_bits < 0:
                fn = (_kernels.count_scores_float_parallel if workers > 1
                      else _kernels.count_scores_float)  # fmt: skip
                bad = int(run_parallel(fn, gi, si, *args))
            else:
                hn = (_kernels.count_scores_half_parallel if workers > 1
                      else _kernels.count_scores_half)  # fmt: skip
                bad = int(run_parallel(hn, gi, si, nan_bits, *args))
            if bad >= 0:
                _refuse_nan(s, nan_bits, where)
            folded = tabs.reshape(workers, -1, width, width, lk.copies).sum(axis=(0, 4))
            total += folded.sum(axis=0)
            if per_image:
                names = [f"#{i + j}" for j in range(folded.shape[0])]
                parts.append(ImageRows.from_tables(folded, names))
        odd = bool(total[k + 1, :].sum() or total[:k, k + 1].sum())
    else:  # kernels read int64: the label path handles 2**63 and up (NaN checked here)
        odd = g.dtype == np.uint64
        _refuse_nan(s, nan_bits, where)
    if per_image and not parts and not odd:  # no pixel counted by the kernels: n empty images
        parts.append(ImageRows.from_tables(np.zeros((n, width, width), np.int64)))
    if not (odd or labels):
        return _tally(total, parts, k, per_image), None
    am = _argmax(s, axis, nan_bits)
    if odd:  # unexpected values: counted again from the labels, which reports them in full
        tally = count_pairs(gt, am, lookup, where=where, on_unexpected=on_unexpected,
                            per_image=per_image, threads=threads)  # fmt: skip
        return tally, am if labels else None
    return _tally(total, parts, k, per_image), am


def _num_threads() -> int:
    import numba

    return int(numba.get_num_threads())


def _argmax(s: np.ndarray, axis: int, nan_bits: int) -> np.ndarray:
    """Return the argmax labels of scores as the kernels read them (16-bit bits by their key)."""
    if nan_bits < 0:
        return np.asarray(np.argmax(s, axis=axis), dtype=np.int64)
    m = (s & 0x7FFF).astype(np.int32)
    key = np.where(s & 0x8000, 0x8000 - m, 0x8000 + m)
    return np.asarray(np.argmax(key, axis=axis), dtype=np.int64)


def _tally(total: IntArray, parts: list[ImageRows], k: int, per_image: bool) -> Tally:
    images = ImageRows.concat(parts, k) if per_image else None
    return Tally.from_table(total, k, {}, {}, images)


def count_batch(
    gt: object,
    pred: object,
    lookup: Lookup,
    scores_axis: int | None,
    scores_dtype: str | None,
    *,
    where: str,
    on_unexpected: OnUnexpected,
    per_image: bool,
    threads: int | None,
    labels: bool,
) -> tuple[Tally, object]:
    """Count one batch of label masks, or of class scores when ``scores_axis`` is given.

    Returns the tally and the predicted labels to count Boundary IoU and instances from:
    ``pred`` itself for masks, the argmax for scores when ``labels`` (else ``None``).

    Raises
    ------
    UsageError
        ``scores_dtype`` without ``scores_axis``.
    """
    if scores_axis is None:
        if scores_dtype is not None:
            msg = (
                f"{where}: scores_dtype={scores_dtype!r} was given without scores_axis; give "
                "the channel axis of the scores too (e.g. scores_axis=1 for N x C x H x W)"
            )
            raise UsageError(msg)
        return count_pairs(gt, pred, lookup, where=where, on_unexpected=on_unexpected,
                           per_image=per_image, threads=threads), pred  # fmt: skip
    return count_scores(gt, pred, lookup, axis=scores_axis, dtype=scores_dtype, where=where,
                        on_unexpected=on_unexpected, per_image=per_image, threads=threads,
                        labels=labels)  # fmt: skip
