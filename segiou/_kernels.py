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

Two ways of counting, chosen per row segment (generic kernel) or per block (8-bit word path)
from a small sample of how often a pixel repeats its left neighbour's pair: real masks are
counted run by run or word by word, noise pixel by pixel into a compact table. Both give the
same counts; the choice only changes the speed (``benchmarks/bench_kernel.py``).
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

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


# --- 8-bit fast path -------------------------------------------------------------------------
# Both masks are contiguous 8-bit arrays, also read as uint64 words (8 pixels each). A raw pair
# (g, p) goes to bin ``(g << 8 | p)`` of a 65536-bin table; the caller folds raw bins into class
# codes once per call (:func:`fold_raw_clear`). The pixels are counted in blocks of
# ``BLOCK_WORDS`` words, each block in the way that suits it, chosen from a sample of its first
# ``SAMPLE_PIXELS`` pixels (how often a pixel repeats its left neighbour's pair):
#
# * coherent blocks (real masks: mostly uniform regions) go to the ``RAW_COPIES``-counter region:
#   a word constant in both masks is added in one step, a word with one change of pair in two,
#   other words byte by byte, pixel ``k`` of a word into copy ``k``, so that runs of equal pairs
#   do not chain every increment on the previous store to the same address;
# * noisy blocks (few repeats, e.g. iid labels) go pixel by pixel to the single-counter region:
#   a compact table (the bins of one ground-truth value share cache lines). The copies' layout puts
#   every ground-truth value's bins 16 KiB apart, in the same few L1 sets, which is what made
#   noisy data slow in it.
#
# Measured on Cityscapes-like masks and iid labels (benchmarks/bench_kernel.py): the choice per
# block keeps the coherent speed and makes iid ~1.5x faster than the copies alone.

RAW_COPIES = 8
RAW_BINS = 65536
#: One raw table: ``RAW_BINS * RAW_COPIES`` interleaved counters, then ``RAW_BINS`` single ones.
RAW_SIZE = RAW_BINS * (RAW_COPIES + 1)
BLOCK_WORDS = 2048
SAMPLE_PIXELS = 256
_BYTE = np.uint64(0xFF)
_ONES = np.uint64(0x0101010101010101)
_NOT_BYTE0 = np.uint64(0xFFFFFFFFFFFFFF00)
_U3 = np.uint64(3)
_U8 = np.uint64(8)
_U56 = np.uint64(56)
#: Count trailing zero bits (an LLVM intrinsic; typed Any for mypy, which cannot see through it).
_ctz: Any = trailing_zeros


@kernel
def _count_words_copies(gs, ps, gb, pb, t):
    """Count words ``gs``/``ps`` (bytes ``gb``/``pb``) into the interleaved-copies region.

    A word constant in both masks adds 8 to its pair (copy 0). A word with one change of pair
    (a region boundary: most other words of real masks) adds its two runs to their pairs
    (copies 1 and 2). Other words are counted byte by byte, pixel ``k`` into copy ``k``.
    """
    for q in range(gs.size):
        gw = gs[q]
        pw = ps[q]
        g0 = gw & _BYTE
        p0 = pw & _BYTE
        if gw == g0 * _ONES and pw == p0 * _ONES:
            t[np.int64((g0 << _U8) | p0) * RAW_COPIES] += 8
            continue
        # byte k (k >= 1) of d is non-zero where pixel k's pair differs from pixel k-1's
        d = ((gw ^ (gw << _U8)) | (pw ^ (pw << _U8))) & _NOT_BYTE0
        z = _ctz(d) & _U56  # 8 * (first change)
        if (d >> z) >> _U8 == 0:  # no other change
            head = np.int64(z >> _U3)  # pixels before the change
            last = np.int64(((gw >> _U56) << _U8) | (pw >> _U56))
            t[np.int64((g0 << _U8) | p0) * RAW_COPIES + 1] += head
            t[last * RAW_COPIES + 2] += 8 - head
        else:
            base = q * 8
            for k in range(8):
                code = (np.int64(gb[base + k]) << 8) | np.int64(pb[base + k])
                t[code * RAW_COPIES + k] += 1


@kernel
def _count_bytes_single(gb, pb, t1):
    """Count bytes ``gb``/``pb`` into the single-counter region ``t1``, one pixel at a time.

    The pair code is formed in the loop: a separate vectorised pass into a buffer of 16-bit
    codes (one load per pixel in the scatter) was ~9% slower, as it could not overlap reading
    the masks with the increments.
    """
    for i in range(gb.size):
        t1[(np.int64(gb[i]) << 8) | np.int64(pb[i])] += 1


@kernel
def _repeats(gb, pb):
    """Count the pixels ``i >= 1`` of ``gb``/``pb`` whose pair equals pixel ``i - 1``'s."""
    r = np.int64(0)
    for i in range(1, gb.size):
        r += np.int64(((gb[i] ^ gb[i - 1]) | (pb[i] ^ pb[i - 1])) == 0)
    return r


@kernel
def count_words_span(g8, p8, g64, p64, w0, w1, t):
    """Count words ``[w0, w1)`` (pixels ``8*w0 .. 8*w1``) of two 8-bit masks into raw ``t``."""
    gs = g64[w0:w1]
    ps = p64[w0:w1]
    gb = g8[w0 * 8 : w1 * 8]
    pb = p8[w0 * 8 : w1 * 8]
    t1 = t[RAW_BINS * RAW_COPIES :]
    n = gs.size
    q0 = 0
    while q0 < n:
        q1 = min(q0 + BLOCK_WORDS, n)
        b0 = q0 * 8
        b1 = q1 * 8
        s1 = min(b0 + SAMPLE_PIXELS, b1)
        if 4 * _repeats(gb[b0:s1], pb[b0:s1]) < s1 - b0:  # under 1 in 4 repeats: noisy
            _count_bytes_single(gb[b0:b1], pb[b0:b1], t1)
        else:
            _count_words_copies(gs[q0:q1], ps[q0:q1], gb[b0:b1], pb[b0:b1], t)
        q0 = q1


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
def _any_nonzero(a):
    """Whether any element of ``a`` is non-zero (a branch-free, vectorisable scan)."""
    acc = 0
    for i in range(a.size):
        acc |= a[i]
    return acc != 0


@kernel
def fold_raw_clear(tab, gcode, pcode, out):
    """Add every raw bin ``(g, p)`` of ``tab`` into ``out[gcode[g], pcode[p]]``; zero ``tab``.

    A ground-truth value's row (its 256 bins in both regions) is scanned first and skipped when
    empty: masks use few of the 256 values, so most of the table is only read, once.
    """
    single = RAW_BINS * RAW_COPIES
    row = 256 * RAW_COPIES
    for gv in range(256):
        copies = tab[gv * row : (gv + 1) * row]
        ones = tab[single + gv * 256 : single + (gv + 1) * 256]
        if not (_any_nonzero(copies) or _any_nonzero(ones)):
            continue
        a = gcode[gv]
        for pv in range(256):
            base = pv * RAW_COPIES
            s = ones[pv]
            for c in range(RAW_COPIES):
                s += copies[base + c]
            if s:
                out[a, pcode[pv]] += s
                ones[pv] = 0
                for c in range(RAW_COPIES):
                    copies[base + c] = 0
