"""Typed wrappers around the counting kernels: validation, lookup tables, folding, errors.

This is the only module that calls :mod:`segiou._kernels`. It turns two label arrays into a
:class:`Tally`: the ``K x K`` count matrix plus every pixel that was not counted (ignored,
void prediction, unexpected value), so that nothing is ever silently dropped.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Literal

import numpy as np

from segiou import _entry_kernels, _kernels
from segiou import _word_kernels as _words
from segiou._arrays import as_labels, native, to_numpy
from segiou._jit import run_parallel
from segiou._lookup import MAX_WORD_TABLE, Lookup
from segiou._tally import Cells, Tally, table_sums
from segiou._typing import IntArray, LabelArray
from segiou._unexpected import (
    IGNORE,
    describe_unexpected,
    expected_values,
    format_unexpected,
    isin,
)
from segiou.errors import (
    InternalError,
    LabelRangeError,
    ShapeMismatchError,
)
from segiou.images import ImageRows

__all__ = [
    "IGNORE",
    "MAX_WORD_TABLE",
    "ImageCounter",
    "Lookup",
    "OnUnexpected",
    "Tally",
    "check_described",
    "count_pairs",
    "describe_unexpected",
    "few_for_table",
    "format_unexpected",
    "kernel_values",
]


OnUnexpected = Literal["raise", "count"]

#: Memory allowed for the per-thread tables of one kernel call.
_TABLE_BUDGET_BYTES = 64 << 20
#: Below this many pixels one thread is faster than waking the pool (measured: a 512 x 512
#: image, 2**18 pixels, counts 1.4-1.5x faster on two threads; 64 x 64 tiles on one).
_PARALLEL_MIN_PIXELS = 1 << 16
#: Per-image rows are counted straight into entries for images of at most this many pixels
#: per cell of a dense per-image table (:func:`sparse_rows`). Measured (1 and 2 threads, 19 to
#: 1,024 classes, real-like masks and noise): entries were faster up to 2-4 pixels per cell,
#: the dense tables from 4-18 on.
_SPARSE_PIXELS_PER_CELL = 2
#: A batch is counted into its cells (:func:`sparse_total`) when its ``(K+2)**2`` table has at
#: least this many cells (254 classes) and at least this many cells per pixel of the batch.
#: Measured (one update, 30% of pixels miscounted at random): at 16 cells per pixel cells took
#: 1.5 / 4.3 / 175 ms against the dense table's 7.1 / 15 / 213 ms (600 / 1,024 / 4,096
#: classes); at 4 cells per pixel 4,096 classes took longer (354 against 230 ms).
_SPARSE_TOTAL_MIN_CELLS = 1 << 16
_SPARSE_TOTAL_CELLS_PER_PIXEL = 16

_U8 = np.dtype(np.uint8)
_NO_CELLS = (np.zeros(0, np.int64), np.zeros(0, np.int64))
#: The dtypes the per-image entries kernels are compiled for (:func:`_entry_input`).
_ENTRY_DTYPES = (np.dtype(np.uint8), np.dtype(np.int64), np.dtype(np.uint64))
#: Per-thread scratch tables of the word path (left zeroed by every kernel that fills them).
_scratch = threading.local()


def kernel_values(a: LabelArray, mapping: Mapping[int, int]) -> LabelArray:
    """Return ``a`` as the kernels may read it: values >= 2**63 of a uint64 mask never alias an id.

    Kernels read values as int64, so a uint64 value >= 2**63 wraps to a negative number and
    could pass for a negative id of the spec (for example ignore value -1). Only then (uint64
    data, a spec with negative ids, such values present) the kernels get an int64 copy in which
    those values are an id no spec has: they are reported as unexpected, with their true value,
    by the caller's slow path, which reads ``a`` itself.
    """
    if a.dtype != np.uint64 or a.size == 0 or not mapping or min(mapping) >= 0:
        return a
    big = a >= np.uint64(1 << 63)
    if not big.any():
        return a
    safe = a.astype(np.int64)
    safe[big] = max(mapping) + 1  # outside the lookup table: unexpected
    return safe


def _as_3d(a: LabelArray) -> LabelArray:
    if a.ndim == 3:
        return a
    if a.ndim < 3:
        return a.reshape((1,) * (3 - a.ndim) + a.shape) if a.ndim else a.reshape(1, 1, 1)
    # an explicit image count: -1 is ambiguous for zero-size arrays (e.g. 2 x 3 x 0 x 5)
    n = math.prod(a.shape[:-2])
    return a.reshape(n, a.shape[-2], a.shape[-1])  # copies only if the strides demand it


def word_tables(workers: int, size: int) -> IntArray:
    """Return this thread's zeroed word-path tables: ``workers`` flat tables of ``size`` counters.

    Kept across calls and across accumulators: every kernel that counts into them folds and
    zeroes them before it returns (an interrupted call is never inside a kernel).
    """
    cache: dict[int, IntArray] | None = getattr(_scratch, "word_tables", None)
    if cache is None:
        cache = _scratch.word_tables = {}
    tabs = cache.get(size)
    if tabs is None or tabs.shape[0] < workers:
        cache.clear()  # one table size at a time: an accumulator's (the last one) is reused
        tabs = cache[size] = np.zeros((workers, size), dtype=np.int64)
    return tabs[:workers]


def _default_workers(pixels: int) -> int:
    """All of Numba's threads for inputs large enough to gain from them, else 1."""
    if pixels < _PARALLEL_MIN_PIXELS:
        return 1
    import numba

    return int(numba.get_num_threads())


def word_path(g: LabelArray, p: LabelArray, lk: Lookup) -> bool:
    """Whether two masks of this layout and dtype go through the word kernels.

    Both C-contiguous, not both 8 bytes wide (``int64``/``int64`` is memory-bound either way:
    narrowing both sides measured no faster than the generic kernel), and a spec whose word
    table fits (:attr:`Lookup.words_fit`).
    """
    return (
        g.flags.c_contiguous
        and p.flags.c_contiguous
        and g.dtype.itemsize + p.dtype.itemsize < 16
        and lk.words_fit
    )


def _word_args(
    g: LabelArray, p: LabelArray, lk: Lookup
) -> tuple[LabelArray, LabelArray, tuple[IntArray, IntArray]]:
    """Flat masks for the word kernels and their byte codes.

    Two 8-bit sides are viewed as ``uint8`` (the codes are indexed by the unsigned byte). Beside
    a wider side an ``int8`` side keeps its dtype: blocks with values outside ``0..255`` are
    counted through the lookup tables, which need the true (signed) values.
    """
    gf, pf = g.reshape(-1), p.reshape(-1)
    gd = g.dtype if g.dtype.itemsize == 1 else _U8  # a wider side is narrowed: unsigned bytes
    pd = p.dtype if p.dtype.itemsize == 1 else _U8
    if g.dtype.itemsize == 1 and p.dtype.itemsize == 1:
        gf, pf = gf.view(np.uint8), pf.view(np.uint8)
    return gf, pf, lk.word_codes(gd, pd)


def count_words_into(g: LabelArray, p: LabelArray, lk: Lookup, workers: int, out: IntArray) -> None:
    """Count contiguous masks (see :func:`word_path`) with the word kernels, into ``out``.

    ``out`` is a ``(K+2) x (K+2)`` code table (added to). 8-bit masks are read in place; wider
    ones narrowed block by block (values outside ``0..255`` through the lookup tables).
    """
    gf, pf, (gcode, pcode) = _word_args(g, p, lk)
    tabs = word_tables(workers, lk.word_table_size)
    if g.dtype.itemsize == 1 and p.dtype.itemsize == 1:
        u8 = _words.count_u8_serial if workers == 1 else _words.count_u8_parallel
        run_parallel(u8, gf, pf, gcode, pcode, tabs, out)
        return
    wide = _words.count_wide_serial if workers == 1 else _words.count_wide_parallel
    run_parallel(wide, gf, pf, gcode, pcode, lk.word_luts(), tabs, out)


def _tables(
    g: LabelArray, p: LabelArray, lk: Lookup, workers: int | None, per_image: bool
) -> tuple[IntArray | Cells, ImageRows | None]:
    """Run a kernel; return the folded ``(K+2, K+2)`` table and, ``per_image``, the images' rows.

    ``workers`` threads (default: :func:`_default_workers`), each with its own table. Per image,
    images small for their table (:func:`sparse_rows`) are counted straight into entries
    (:func:`_entries`); otherwise the tables of a budget's worth of images at a time are made
    rows (sparse) before the next group is counted: a dense ``(images, K+2, K+2)`` table of a
    batch of 1,000 one-pixel images and 4,096 classes asked for 125 GiB. A batch small for
    its table (:func:`sparse_total`) returns the table's :class:`Cells`, not the table.
    """
    width = lk.num_classes + 2
    if workers is None:
        workers = _default_workers(g.size)
    cells = sparse_total(lk, g.size)
    if cells and not per_image:  # one image of every pixel: its entries are the batch's cells
        g1, p1 = g.reshape(1, 1, -1), p.reshape(1, 1, -1)
        return _entries(g1, p1, lk, workers, cells)[0], None
    if not per_image and word_path(g, p, lk):
        total = np.zeros((width, width), dtype=np.int64)
        count_words_into(g, p, lk, workers, total)
        return total, None
    g3, p3 = _as_3d(g), _as_3d(p)
    if per_image and sparse_rows(lk, g3.shape[1] * g3.shape[2]):
        return _entries(g3, p3, lk, workers, cells)
    total = np.zeros((width, width), dtype=np.int64)
    n_img = g3.shape[0]
    group = (
        n_img
        if not per_image
        else max(1, min(n_img, _TABLE_BUDGET_BYTES // (8 * workers * lk.table_size)))
    )
    parts: list[ImageRows] = []
    for s in range(0, n_img, group):
        gs, ps = g3[s : s + group], p3[s : s + group]
        n_out = gs.shape[0] if per_image else 1
        tabs = np.zeros((workers, n_out, lk.table_size), dtype=np.int64)
        args = (gs, ps, lk.glut, lk.glo, lk.gunexp, lk.plut, lk.plo, lk.punexp,
                lk.copies - 1, tabs, per_image)  # fmt: skip
        if workers == 1:
            _kernels.count_serial(*args)
        else:
            run_parallel(_kernels.count_parallel, *args)
        folded = tabs.reshape(workers, n_out, width, width, lk.copies).sum(axis=(0, 4))
        total += folded.sum(axis=0)
        if per_image:
            parts.append(ImageRows.from_tables(folded, [f"#{s + i}" for i in range(n_out)]))
    return total, ImageRows.concat(parts, lk.num_classes) if per_image else None


def sparse_rows(lk: Lookup, pixels: int) -> bool:
    """Whether images of ``pixels`` pixels are counted straight into entries (:func:`_entries`).

    A dense per-image table costs its ``(K+2)**2 * copies`` cells per image (zeroed, folded,
    searched for non-zero cells) whatever the image holds; entries cost the image's pixels
    (a 16-pixel image of 4,096 classes: 0.38 s in a dense table).
    """
    return pixels <= _SPARSE_PIXELS_PER_CELL * lk.table_size


def sparse_total(lk: Lookup, pixels: int) -> bool:
    """Whether a batch of ``pixels`` pixels is counted into its cells (:class:`Cells`).

    Only where the ``(K+2)**2`` table is large (:data:`_SPARSE_TOTAL_MIN_CELLS`) and the batch
    holds few pixels for it: the dense table is then made, folded, copied and added per
    update whatever the batch holds.
    """
    cells = (lk.num_classes + 2) ** 2
    return cells >= _SPARSE_TOTAL_MIN_CELLS and pixels * _SPARSE_TOTAL_CELLS_PER_PIXEL <= cells


def few_for_table(lk: Lookup, shape: tuple[int, int, int], per_image: bool) -> bool:
    """Whether a batch is counted into cells, or (large tables) ``per_image`` into entries."""
    n, h, w = shape
    big = (lk.num_classes + 2) ** 2 >= _SPARSE_TOTAL_MIN_CELLS
    return sparse_total(lk, n * h * w) or (big and per_image and sparse_rows(lk, h * w))


def _entry_input(a: LabelArray) -> LabelArray:
    """Return ``a`` as one of the few arrays the entries kernels are compiled for.

    ``uint8``, ``int64`` or ``uint64``, C-contiguous and writeable: other integer dtypes are
    widened to ``int64`` (every value kept), strided views and read-only arrays
    (``np.asarray`` of a PIL image, ``np.load(mmap_mode="r")``: Numba compiles those apart)
    copied. The kernels compile per pair of dtypes, layouts and write flags (2-3 s each,
    cold); the images counted into entries are small for their table, so the copy costs
    little next to counting them.
    """
    if a.dtype not in _ENTRY_DTYPES:
        return a.astype(np.int64, order="C")
    return a if a.flags.c_contiguous and a.flags.writeable else a.copy(order="C")


def _entries(
    g3: LabelArray, p3: LabelArray, lk: Lookup, workers: int, cells: bool
) -> tuple[IntArray | Cells, ImageRows]:
    """Count each image of ``g3``/``p3`` straight into its sparse entries.

    Returns the folded ``(K+2, K+2)`` table of all images (ground-truth rows ``K`` and ``K+1``
    folded into their diagonal cell, as in the rows: the sums :meth:`Tally.from_table` and
    :func:`count_pairs` read are the same), or with ``cells`` its :class:`Cells`, and the
    images' rows, equal to those of the dense tables. A budget's worth of images at a time
    (at most ``H * W`` entries per image).
    """
    k = lk.num_classes
    width = k + 2
    n, h, w = g3.shape
    cap = max(1, min(h * w, width * width))
    bits = _entry_kernels.hash_bits(cap, width)
    luts = lk.code_luts()
    mix = _entry_kernels.MIX
    total = np.zeros(0 if cells else width * width, dtype=np.int64)
    found: list[tuple[IntArray, IntArray]] = []
    group = max(1, min(n, _TABLE_BUDGET_BYTES // (16 * cap)))
    parts: list[ImageRows] = []
    for s in range(0, n, group):
        gs, ps = _entry_input(g3[s : s + group]), _entry_input(p3[s : s + group])
        m = gs.shape[0]
        codes = np.empty(m * cap, dtype=np.int64)
        counts = np.empty(m * cap, dtype=np.int64)
        n_cells = np.zeros(m, dtype=np.int64)
        threads = min(workers, m)
        if threads == 1:
            end = _entry_kernels.count_entries(gs, ps, 0, m, *luts, width, bits, mix, codes,
                                               counts, n_cells, 0)  # fmt: skip
            codes, counts = codes[:end], counts[:end].copy()  # not the whole buffer
        else:
            ends = np.zeros(threads, dtype=np.int64)
            run_parallel(_entry_kernels.count_entries_parallel, gs, ps, *luts, width, bits, mix,
                         cap, codes, counts, n_cells, ends)  # fmt: skip
            spans = [(m * t // threads * cap, int(e)) for t, e in enumerate(ends)]
            codes = np.concatenate([codes[a:b] for a, b in spans])
            counts = np.concatenate([counts[a:b] for a, b in spans])
        if cells:
            found.append((codes, counts))
        else:
            np.add.at(total, codes, counts)
        image = np.repeat(np.arange(m, dtype=np.int64), n_cells)
        names = tuple(f"#{s + i}" for i in range(m))
        parts.append(ImageRows(k, names, (False,) * m, image, codes // width, codes % width,
                               counts))  # fmt: skip
    rows = ImageRows.concat(parts, k)
    if not cells:
        return total.reshape(width, width), rows
    if n == 1:  # one image's entries are distinct cells
        return Cells(width, *found[0]), rows
    return Cells.join(found, width), rows


def count_pairs(
    gt: object,
    pred: object,
    lookup: Lookup,
    *,
    where: str = "update",
    on_unexpected: OnUnexpected = "raise",
    per_image: bool = False,
    threads: int | None = None,
) -> Tally:
    """Count one (gt, pred) pair of label arrays of any rank into a fresh :class:`Tally`.

    Parameters
    ----------
    gt, pred : array_like of int or bool
        Label arrays of the same shape; any rank and strides (no copy for ranks <= 3 in native
        byte order; big-endian data such as ``>u2`` is copied into native byte order).
    lookup : Lookup
        Raw value -> class mapping of both sides.
    where : str
        Where the data came from, for error messages (batch key, store path, chunk).
    on_unexpected : {"raise", "count"}
        What to do with values that are neither a class nor ignored/void.
    per_image : bool
        Also return per-image TP/FP/FN; the leading axes are images (``N x H x W``).
    threads : int, optional
        Kernel threads; default all of Numba's threads, 1 for small inputs.

    Returns
    -------
    Tally
        Counts, void predictions, ignored and unexpected pixels (and per-image counts).

    Raises
    ------
    ShapeMismatchError
        ``gt`` and ``pred`` differ in shape.
    LabelDtypeError
        A non-integer dtype.
    LabelRangeError
        Unexpected values and ``on_unexpected="raise"``: each value with its pixel count and
        first position is listed.
    """
    gt, pred = to_numpy(gt, "gt", where), to_numpy(pred, "pred", where)
    g = as_labels(gt, "gt", where)
    p = as_labels(pred, "pred", where)
    if g.shape != p.shape:
        msg = (
            f"{where}: gt has shape {g.shape} but pred has shape {p.shape}; both masks of a "
            "pair must have the same shape (resize the prediction to the ground truth)"
        )
        raise ShapeMismatchError(msg)
    k = lookup.num_classes
    if g.size == 0:
        images, z = None, np.zeros(0, np.int64)
        if per_image:  # n images without entries (not n dense tables of zeros)
            n = _as_3d(g).shape[0]
            images = ImageRows(k, tuple(f"#{i}" for i in range(n)), (False,) * n, z, z, z, z)
        return Tally(np.zeros(k, np.int64), 0, {}, {}, images, cells=(z, z, z))
    given = lookup
    g_bool, p_bool = gt.dtype == np.bool_, pred.dtype == np.bool_
    lookup = lookup.for_bool(g_bool, p_bool)
    gk, pk = kernel_values(g, lookup.gt_map), kernel_values(p, lookup.pred_map)
    total, rows = _tables(gk, pk, lookup, None if threads is None else max(1, int(threads)),
                          per_image)  # fmt: skip
    n_unexp_gt, n_unexp_pred, _, n_all = table_sums(total, k)
    unexpected_gt: dict[int, int] = {}
    unexpected_pred: dict[int, int] = {}
    if n_unexp_gt or n_unexp_pred:
        # values as numpy shows them: a bool mask's non-zero bytes are True (1)
        gv, pv = (g != 0) if g_bool else g, (p != 0) if p_bool else p
        bad_g = describe_unexpected(gv, None, given.gt_map, g.shape) if n_unexp_gt else {}
        bad_p: dict[int, tuple[int, tuple[int, ...]]] = {}
        if n_unexp_pred:
            classes = [r for r, c in given.gt_map.items() if c != IGNORE]
            bad_p = describe_unexpected(pv, isin(gv, classes), given.pred_map, g.shape)
        check_described(n_unexp_gt, sum(c for c, _ in bad_g.values()), n_unexp_pred,
                        sum(c for c, _ in bad_p.values()), where)  # fmt: skip
        if on_unexpected == "raise":
            parts = []
            if bad_g:
                parts.append(
                    f"{n_unexp_gt:,} ground-truth pixel(s) with unexpected value(s) "
                    f"{format_unexpected(bad_g)}; expected {expected_values(given.gt_map, k, 'ignore')}"
                )
            if bad_p:
                parts.append(
                    f"{n_unexp_pred:,} predicted pixel(s) at valid ground truth with unexpected "
                    f"value(s) {format_unexpected(bad_p)}; expected "
                    f"{expected_values(given.pred_map, k, 'void')}"
                )
            msg = (
                f"{where}: " + "; ".join(parts) + ". Nothing was counted. Fix the label spec "
                "(ids, ignore values) or pass on_unexpected='count' to count and report them"
            )
            raise LabelRangeError(msg)
        unexpected_gt = {v: c for v, (c, _) in bad_g.items()}
        unexpected_pred = {v: c for v, (c, _) in bad_p.items()}
    if n_all != g.size:  # every pixel lands in one cell of the table
        msg = (f"{where}: internal error, the counting kernels accounted for {n_all:,} "
               f"of {g.size:,} pixels; this is a bug in segiou, please report it")  # fmt: skip
        raise InternalError(msg)
    images = None
    if per_image:
        odd = []
        if unexpected_gt or unexpected_pred:  # the slow path: which image holds which value
            g3, p3 = _as_3d((g != 0) if g_bool else g), _as_3d((p != 0) if p_bool else p)
            classes = [r for r, c in given.gt_map.items() if c != IGNORE]
            for i in range(g3.shape[0]):
                if unexpected_gt:
                    found = describe_unexpected(g3[i], None, given.gt_map, g3[i].shape)
                    odd += [(i, "gt", v, c) for v, (c, _) in sorted(found.items())]
                if unexpected_pred:
                    sel = isin(g3[i], classes)
                    found = describe_unexpected(p3[i], sel, given.pred_map, g3[i].shape)
                    odd += [(i, "pred", v, c) for v, (c, _) in sorted(found.items())]
        assert rows is not None
        images = replace(rows, unexpected=tuple(odd))
    return Tally.from_table(total, k, unexpected_gt, unexpected_pred, images)


def check_described(n_gt: int, found_gt: int, n_pred: int, found_pred: int, where: str) -> None:
    """Refuse a disagreement between the kernels' unexpected pixels and the values behind them.

    The kernels only count how many pixels are unexpected (``n_gt``, ``n_pred``); their values
    are read again from the masks (``found_gt``, ``found_pred`` pixels). Both must agree, or
    pixels would be dropped without a word.

    Raises
    ------
    InternalError
        They disagree: a bug in segiou.
    """
    if (found_gt, found_pred) != (n_gt, n_pred):
        msg = (
            f"{where}: internal error, the counting kernels found {n_gt:,} unexpected "
            f"ground-truth and {n_pred:,} unexpected predicted pixels, the masks hold "
            f"{found_gt:,} and {found_pred:,}; this is a bug in segiou, please report it"
        )
        raise InternalError(msg)


class ImageCounter:
    """Single-threaded counting of one image at a time, chunk by chunk (for the Dask engine).

    Chunks of an image are added with :meth:`add`; :meth:`finish` folds them into the image's
    ``(K+2) x (K+2)`` code table and resets the counter. Contiguous chunks go through the word
    kernels into the counter's own word table (folded once per image), other chunks through
    the generic kernel. The caller runs one counter per thread (Dask tasks are single-threaded;
    cores are Dask's).
    """

    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup
        self._cells: list[tuple[IntArray, IntArray]] | None = None

    @functools.cached_property
    def _tables(self) -> tuple[IntArray, IntArray, IntArray]:
        """The dense tables (generic, word, folded), made on first use: none for cells only."""
        lk, width = self.lookup, self.lookup.num_classes + 2
        return (np.zeros((1, 1, lk.table_size), dtype=np.int64),
                np.zeros((1, lk.word_table_size), dtype=np.int64),
                np.zeros((width, width), dtype=np.int64))  # fmt: skip

    def begin(self, pixels: int) -> None:
        """Start an image (or band) of ``pixels`` pixels.

        Few for the table (:func:`sparse_total`), its chunks are counted into cells: at 4,096
        classes no 134 MB table is zeroed and folded per image.
        """
        self._cells = [] if sparse_total(self.lookup, pixels) else None

    def add(self, g: LabelArray, p: LabelArray) -> None:
        """Count one pair of equally shaped chunks (no validation beyond dtype and shape).

        Non-native (big-endian) chunks are converted to native byte order first (a copy).
        """
        g8 = native(g) if g.dtype != np.bool_ else g.view(np.uint8)
        p8 = native(p) if p.dtype != np.bool_ else p.view(np.uint8)
        lk = self.lookup.for_bool(g.dtype == np.bool_, p.dtype == np.bool_)
        g8, p8 = kernel_values(g8, lk.gt_map), kernel_values(p8, lk.pred_map)
        if self._cells is not None:
            one = _entries(g8.reshape(1, 1, -1), p8.reshape(1, 1, -1), lk, 1, True)[0]
            assert isinstance(one, Cells)
            self._cells.append((one.codes, one.counts))
            return
        small, words, _ = self._tables
        if word_path(g8, p8, lk):
            gf, pf, (gcode, pcode) = _word_args(g8, p8, lk)
            if g8.dtype.itemsize == 1 and p8.dtype.itemsize == 1:
                _words.count_u8_span(gf, pf, 0, gf.size, gcode, pcode, words[0])
            else:
                _words.count_wide_span(gf, pf, 0, gf.size, gcode, pcode, lk.word_luts(),
                                       words[0])  # fmt: skip
            return
        _kernels.count_serial(_as_3d(g8), _as_3d(p8), lk.glut, lk.glo, lk.gunexp, lk.plut,
                              lk.plo, lk.punexp, lk.copies - 1, small, False)  # fmt: skip

    def finish(self) -> IntArray | Cells:
        """Return the image's folded ``(K+2) x (K+2)`` table and reset for the next image.

        Begun with few pixels (:meth:`begin`), its :class:`Cells` instead (ground-truth rows
        ``K`` and ``K+1`` folded into their diagonal cells, as in the rows).
        """
        width = self.lookup.num_classes + 2
        if self._cells is not None:
            found, self._cells = self._cells, None
            return Cells.join(found, width) if found else Cells(width, *_NO_CELLS)
        small, words, folded = self._tables
        _words.fold_tables(words, folded)
        out: IntArray = folded + small.reshape(width, width, self.lookup.copies).sum(axis=2)
        folded[:] = 0
        small[:] = 0
        return out
