"""Layer 1: Numba kernels that count (gt, pred) code pairs.

Every kernel works on 3-D label arrays ``(N, H, W)`` of any integer dtype and any strides, and
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
"""

from __future__ import annotations

import numba as nb
import numpy as np

#: Options shared by every kernel: cached on disk, and releasing the GIL so that threads (for
#: example Dask's threaded scheduler) run kernels side by side.
kernel = nb.njit(cache=True, nogil=True)
parallel_kernel = nb.njit(cache=True, nogil=True, parallel=True)


@kernel
def count_span(g, p, e0, e1, glut, glo, gunexp, plut, plo, punexp, mask, tab, per_image):
    """Count the flat element range ``[e0, e1)`` of ``g``/``p`` into ``tab``.

    ``tab`` is ``(n_out, width)``: one table per image when ``per_image``, else one.
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
        for k in range(m):
            ug = np.uint64(np.int64(grow[k]) - glo)
            up = np.uint64(np.int64(prow[k]) - plo)
            a = glut[ug] if ug < gsize else gunexp
            c = plut[up] if up < psize else punexp
            t[a + c + (k & mask)] += 1
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


# --- 8-bit fast path -------------------------------------------------------------------------
# Both masks are contiguous 8-bit arrays, also read as uint64 words (8 pixels each). A raw pair
# (g, p) goes to bin ``(g << 8 | p)`` of a 65536-bin table with ``RAW_COPIES`` interleaved
# counters; the caller folds raw bins into class codes once per call (:func:`fold_raw_clear`).
# A word constant in both masks (the common case in real masks, which are mostly uniform
# regions) is added in one step; other words are counted byte by byte. Measured on
# Cityscapes-like masks (benchmarks/bench_kernel.py): 1-word blocks beat 2- and 4-word blocks
# and word-wise byte extraction; on iid noise the test costs ~5-10%.

RAW_COPIES = 8
RAW_BINS = 65536
_BYTE = np.uint64(0xFF)
_ONES = np.uint64(0x0101010101010101)


@kernel
def count_words_span(g8, p8, g64, p64, w0, w1, t):
    """Count words ``[w0, w1)`` (pixels ``8*w0 .. 8*w1``) of two 8-bit masks into raw ``t``."""
    gs = g64[w0:w1]
    ps = p64[w0:w1]
    gb = g8[w0 * 8 : w1 * 8]
    pb = p8[w0 * 8 : w1 * 8]
    for q in range(gs.size):
        gw = gs[q]
        pw = ps[q]
        g0 = gw & _BYTE
        p0 = pw & _BYTE
        if gw == g0 * _ONES and pw == p0 * _ONES:
            t[np.int64((g0 << np.uint64(8)) | p0) * RAW_COPIES] += 8
        else:
            base = q * 8
            for k in range(8):
                code = (np.int64(gb[base + k]) << 8) | np.int64(pb[base + k])
                t[code * RAW_COPIES + k] += 1


@kernel
def count_words_serial(g8, p8, g64, p64, tabs):
    """Count all words on the calling thread into ``tabs[0]``."""
    count_words_span(g8, p8, g64, p64, 0, g64.size, tabs[0])


@parallel_kernel
def count_words_parallel(g8, p8, g64, p64, tabs):
    """Split the words into ``tabs.shape[0]`` spans, one private raw table each."""
    workers = tabs.shape[0]
    total = g64.size
    for w in nb.prange(workers):
        w0 = total * w // workers
        w1 = total * (w + 1) // workers
        count_words_span(g8, p8, g64, p64, w0, w1, tabs[w])


@kernel
def count_bytes(g, p, t):
    """Count a (short) tail of 8-bit pixels into raw table ``t``, copy 0."""
    for k in range(g.size):
        t[((np.int64(g[k]) << 8) | np.int64(p[k])) * RAW_COPIES] += 1


@kernel
def fold_raw_clear(tab, gcode, pcode, out):
    """Add every raw bin ``(g, p)`` of ``tab`` into ``out[gcode[g], pcode[p]]``; zero ``tab``."""
    for gv in range(256):
        a = gcode[gv]
        for pv in range(256):
            base = ((gv << 8) | pv) * RAW_COPIES
            s = 0
            for c in range(RAW_COPIES):
                s += tab[base + c]
            if s:
                out[a, pcode[pv]] += s
                for c in range(RAW_COPIES):
                    tab[base + c] = 0
