"""Layer 1: the generic Numba kernels that count (gt, pred) code pairs, and class scores.

Contiguous masks of 8-bit and narrowable dtypes go through the word kernels of
:mod:`segiou._word_kernels`; these kernels count everything else (strided views, wide raw ids,
``int64``/``int64``, per-image tables). Every kernel works on 3-D label arrays ``(N, H, W)`` of any integer dtype and any strides, and
on lookup tables built by :mod:`segiou._count`:

* ``glut[v - glo]`` is the *row offset* of ground-truth raw value ``v`` in a flat count table
  (``code * width_p * copies``); values outside ``glut`` take ``gunexp``.
* ``plut[v - plo]`` is the *column offset* of prediction raw value ``v`` (``code * copies``);
  values outside ``plut`` take ``punexp``.

Codes ``0..K-1`` are evaluated classes; ``K`` is "ignored" (ground truth) or "void"
(prediction); ``K+1`` is "unexpected". Every pixel therefore lands in exactly one cell of the
``(K+2) x (K+2)`` table, and the caller sorts the cells into counts, ignored, void and unexpected
afterwards: the kernels never branch on label semantics, never raise and never write outside
their output.

Each table cell has ``copies`` interleaved counters (pixel ``k`` of a row goes to copy
``k & (copies - 1)``): runs of equal pairs, which real masks are made of, would otherwise chain
every increment on the previous store to the same address. The caller folds the copies.

Two ways of counting, chosen per row segment from a small sample of how often a pixel repeats
its left neighbour's pair: real masks are counted run by run, noise pixel by pixel. Both give
the same counts; the choice only changes the speed (``benchmarks/bench_kernel.py``).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from segiou._jit import kernel, parallel_kernel, row_kernel

# The two row counters of :func:`count_span` stay separate functions (``row_kernel``): inlined
# into one loop, the pixel-by-pixel counter ran 10-20% slower on noise.


#: Pixels at the start of a row segment sampled to choose how to count it.
ROW_SAMPLE = 64


@row_kernel
def _count_row(grow, prow, glut, glo, gunexp, plut, plo, punexp, mask, t, gsize, psize):
    """Count one row segment pixel by pixel (for rows with few repeated pairs)."""
    for k in range(grow.size):
        ug = np.uint64(np.int64(grow[k]) - glo)
        up = np.uint64(np.int64(prow[k]) - plo)
        a = glut[ug] if ug < gsize else gunexp
        c = plut[up] if up < psize else punexp
        t[a + c + (k & mask)] += 1


@row_kernel
def _count_row_runs(grow, prow, glut, glo, gunexp, plut, plo, punexp, mask, t, gsize, psize):
    """Count one row segment run by run (for rows of real masks).

    A pixel repeating its left neighbour's raw pair only lengthens the run; the run's cell is
    looked up once and added to when the run ends.
    """
    lg = grow[0]
    lp = prow[0]
    ug = np.uint64(np.int64(lg) - glo)
    up = np.uint64(np.int64(lp) - plo)
    cell = (glut[ug] if ug < gsize else gunexp) + (plut[up] if up < psize else punexp)
    run = 0
    for k in range(grow.size):
        gv = grow[k]
        pv = prow[k]
        if gv == lg and pv == lp:
            run += 1
            continue
        t[cell + (k & mask)] += run
        lg = gv
        lp = pv
        ug = np.uint64(np.int64(gv) - glo)
        up = np.uint64(np.int64(pv) - plo)
        cell = (glut[ug] if ug < gsize else gunexp) + (plut[up] if up < psize else punexp)
        run = 1
    t[cell] += run


@kernel
def count_span(g, p, e0, e1, glut, glo, gunexp, plut, plo, punexp, mask, tab, per_image):
    """Count the flat element range ``[e0, e1)`` of ``g``/``p`` into ``tab``.

    ``tab`` is ``(n_out, width)``: one table per image when ``per_image``, else one. Each row
    segment is counted run by run when at least a quarter of its first ``ROW_SAMPLE`` pixels
    repeat their left neighbour's pair (real masks: measured 1.2-2x faster), else pixel by pixel
    (noise, where the run test would cost ~20%).
    """
    _n_img, height, width = g.shape
    gsize = np.uint64(glut.size)
    psize = np.uint64(plut.size)
    e = e0
    while e < e1:
        r = e // width
        j0 = e - r * width
        m = min(width - j0, e1 - e)
        n = r // height
        h = r - n * height
        grow = g[n, h, j0 : j0 + m]
        prow = p[n, h, j0 : j0 + m]
        t = tab[n] if per_image else tab[0]
        sm = min(m, ROW_SAMPLE)
        rep = 0
        for k in range(1, sm):
            rep += (grow[k] == grow[k - 1]) & (prow[k] == prow[k - 1])
        if 4 * rep < sm:
            _count_row(grow, prow, glut, glo, gunexp, plut, plo, punexp, mask, t, gsize, psize)
        else:
            _count_row_runs(grow, prow, glut, glo, gunexp, plut, plo, punexp, mask, t, gsize, psize)
        e += m


@kernel
def count_serial(g, p, glut, glo, gunexp, plut, plo, punexp, mask, tabs, per_image):
    """Count all of ``g``/``p`` on the calling thread into ``tabs[0]``."""
    count_span(g, p, 0, g.size, glut, glo, gunexp, plut, plo, punexp, mask, tabs[0], per_image)


@parallel_kernel
def count_parallel(g, p, glut, glo, gunexp, plut, plo, punexp, mask, tabs, per_image):
    """Split ``g``/``p`` into ``tabs.shape[0]`` contiguous spans, one private table each."""
    workers = tabs.shape[0]
    total = g.size
    for w in nb.prange(workers):
        e0 = total * w // workers
        e1 = total * (w + 1) // workers
        count_span(g, p, e0, e1, glut, glo, gunexp, plut, plo, punexp, mask, tabs[w], per_image)


# --- class scores: argmax fused into counting ------------------------------------------------
# ``s`` is ``(N, C, H, W)`` (any strides; unit stride along W is what vectorises), ``g`` the
# ``(N, H, W)`` ground truth. Row by row: the running maximum of the C channels of the row's W
# pixels (ties keep the lowest channel, as ``numpy.argmax``; channel 0 starts it), then each
# pixel's (gt code, channel code) cell is incremented. No ``N x H x W`` label array is made: a
# row's best values and channels live in two W-long buffers. A NaN score stops the count (of
# that span): the kernels return the flat row index ``n * H + h`` of a row holding one (-1:
# none); the caller names the first NaN of the scores itself.
# float16 and bfloat16 come as their uint16 bits, compared through an order-preserving integer
# key (``0x8000 + magnitude`` for positives, ``0x8000 - magnitude`` for negatives, so that
# -0 == +0); a magnitude above ``nan_bits`` (the exponent all ones, a mantissa) is NaN.


@kernel
def _argmax_row_float(s, n, h, best, idx):
    """Channel of the maximum of each pixel of row ``(n, h)``; whether the row holds a NaN."""
    bad = False
    row = s[n, 0, h]
    for w in range(best.size):
        v = row[w]
        best[w] = v
        idx[w] = 0
        bad |= np.isnan(v)
    for c in range(1, s.shape[1]):
        row = s[n, c, h]
        for w in range(best.size):
            v = row[w]
            b = best[w]
            up = v > b
            best[w] = v if up else b
            idx[w] = c if up else idx[w]
            bad |= np.isnan(v)
    return bad


@kernel
def _argmax_row_half(s, n, h, nan_bits, best, idx):
    """As :func:`_argmax_row_float`, for float16/bfloat16 bits (uint16) through their key."""
    bad = False
    row = s[n, 0, h]
    for w in range(best.size):
        m = np.int32(row[w] & 0x7FFF)
        best[w] = np.int32(0x8000) - m if row[w] & 0x8000 else np.int32(0x8000) + m
        idx[w] = 0
        bad |= m > nan_bits
    for c in range(1, s.shape[1]):
        row = s[n, c, h]
        for w in range(best.size):
            m = np.int32(row[w] & 0x7FFF)
            v = np.int32(0x8000) - m if row[w] & 0x8000 else np.int32(0x8000) + m
            b = best[w]
            up = v > b
            best[w] = v if up else b
            idx[w] = c if up else idx[w]
            bad |= m > nan_bits
    return bad


@kernel
def _count_argmax_row(grow, idx, glut, glo, gunexp, ccode, mask, t):
    """Count one row: ground truth ``grow`` against the channels ``idx`` (codes ``ccode``)."""
    gsize = np.uint64(glut.size)
    for w in range(grow.size):
        ug = np.uint64(np.int64(grow[w]) - glo)
        a = glut[ug] if ug < gsize else gunexp
        t[a + ccode[idx[w]] + (w & mask)] += 1


@kernel
def _scores_rows_float(g, s, r0, r1, glut, glo, gunexp, ccode, mask, tab, per_image):
    """Count rows ``[r0, r1)`` (flat ``n * H + h``) of float scores ``s`` against ``g``.

    Returns the first row holding a NaN (nothing of it counted), or -1.
    """
    height = g.shape[1]
    idx = np.zeros(g.shape[2], dtype=np.int32)
    best = np.zeros(g.shape[2], dtype=s.dtype)
    for r in range(r0, r1):
        n = r // height
        h = r - n * height
        if _argmax_row_float(s, n, h, best, idx):
            return r
        _count_argmax_row(g[n, h], idx, glut, glo, gunexp, ccode, mask,
                          tab[n] if per_image else tab[0])  # fmt: skip
    return -1


@kernel
def _scores_rows_half(g, s, r0, r1, nan_bits, glut, glo, gunexp, ccode, mask, tab, per_image):
    """As :func:`_scores_rows_float`, for float16/bfloat16 bits (magnitude > ``nan_bits``: NaN)."""
    height = g.shape[1]
    idx = np.zeros(g.shape[2], dtype=np.int32)
    best = np.zeros(g.shape[2], dtype=np.int32)
    for r in range(r0, r1):
        n = r // height
        h = r - n * height
        if _argmax_row_half(s, n, h, nan_bits, best, idx):
            return r
        _count_argmax_row(g[n, h], idx, glut, glo, gunexp, ccode, mask,
                          tab[n] if per_image else tab[0])  # fmt: skip
    return -1


@kernel
def count_scores_float(g, s, glut, glo, gunexp, ccode, mask, tabs, per_image):
    """Count all rows of float scores on the calling thread into ``tabs[0]``: a NaN row or -1."""
    rows = g.shape[0] * g.shape[1]
    return _scores_rows_float(g, s, 0, rows, glut, glo, gunexp, ccode, mask, tabs[0], per_image)


@parallel_kernel
def count_scores_float_parallel(g, s, glut, glo, gunexp, ccode, mask, tabs, per_image):
    """Split the rows of float scores into ``tabs.shape[0]`` spans, one private table each."""
    workers = tabs.shape[0]
    rows = g.shape[0] * g.shape[1]
    bad = np.full(workers, -1, dtype=np.int64)
    for w in nb.prange(workers):
        bad[w] = _scores_rows_float(g, s, rows * w // workers, rows * (w + 1) // workers, glut,
                                    glo, gunexp, ccode, mask, tabs[w], per_image)  # fmt: skip
    return bad.max()  # a NaN row of any span (the caller finds the first NaN itself)


@kernel
def count_scores_half(g, s, nan_bits, glut, glo, gunexp, ccode, mask, tabs, per_image):
    """Count all rows of float16/bfloat16 bits on the calling thread: a NaN row or -1."""
    rows = g.shape[0] * g.shape[1]
    return _scores_rows_half(g, s, 0, rows, nan_bits, glut, glo, gunexp, ccode, mask, tabs[0],
                             per_image)  # fmt: skip


@parallel_kernel
def count_scores_half_parallel(g, s, nan_bits, glut, glo, gunexp, ccode, mask, tabs, per_image):
    """Split the rows of float16/bfloat16 bits into ``tabs.shape[0]`` spans, one table each."""
    workers = tabs.shape[0]
    rows = g.shape[0] * g.shape[1]
    bad = np.full(workers, -1, dtype=np.int64)
    for w in nb.prange(workers):
        bad[w] = _scores_rows_half(g, s, rows * w // workers, rows * (w + 1) // workers, nan_bits,
                                   glut, glo, gunexp, ccode, mask, tabs[w], per_image)  # fmt: skip
    return bad.max()  # a NaN row of any span (the caller finds the first NaN itself)
