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
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGH = np.uint64(0x8080808080808080)
_BIT63 = np.uint64(1 << 63)
_U7 = np.uint64(7)
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


@kernel
def fold_raw_serial(tabs, gcode, pcode, outs):
    """Fold each raw table ``tabs[w]`` into ``outs[w]`` on the calling thread."""
    for w in range(tabs.shape[0]):
        fold_raw_clear(tabs[w], gcode, pcode, outs[w])


@parallel_kernel
def fold_raw_parallel(tabs, gcode, pcode, outs):
    """Fold each raw table ``tabs[w]`` into ``outs[w]`` on its own thread (see fold_raw_clear)."""
    for w in nb.prange(tabs.shape[0]):
        fold_raw_clear(tabs[w], gcode, pcode, outs[w])


# --- narrowing path: contiguous masks of wider dtypes (argmax output) -------------------------
# int64/int32 predictions straight out of ``argmax`` hold small class ids. Block by block, both
# masks are narrowed into two byte buffers while their range is checked (all in 0..255: one OR
# of the values, a vectorised pass); such blocks are counted as 8-bit words, with no narrowed
# copy of the masks. A block holding any other value (negative, 256, 2**40, a raw id of a wide
# spec) is counted pixel by pixel through the full lookup tables: valid ids are counted,
# unexpected ones land in the unexpected code and the caller reports them with their true value.


@kernel
def _word_counts(gw, pw, q, gcode, pcode, mask, t):
    """Add an 8-pixel word pair with at most one change of pair (its two runs)."""
    d = ((gw ^ (gw << _U8)) | (pw ^ (pw << _U8))) & _NOT_BYTE0
    d1 = (((d & _LOW7) + _LOW7) | d) & _HIGH  # the top bit of each byte that changes
    head = np.int64(((_ctz((d1 >> _U8) | _BIT63) - _U7) >> _U3) + np.uint64(1))
    t[gcode[gw & _BYTE] + pcode[pw & _BYTE] + (q & mask)] += head
    t[gcode[gw >> _U56] + pcode[pw >> _U56] + ((q + 4) & mask)] += 8 - head


#: Pixels narrowed at a time (two buffers of this many bytes per thread: no full-size copy).
NARROW_BLOCK = 16384


@kernel
def _narrow_into(src, dst):
    """Copy ``src`` into the bytes ``dst`` (low 8 bits); return the OR of all values (as int64).

    The OR's bits above the lowest 8 are zero exactly when every value is in 0..255 (a
    negative value sets the sign bit). A plain loop: vectorised.
    """
    acc = np.int64(0)
    for j in range(src.size):
        v = np.int64(src[j])
        dst[j] = np.uint8(v & 0xFF)
        acc |= v
    return acc


@kernel
def count_narrow_span(g, p, i0, i1, gcode, pcode, luts, mask, t, raw):
    """Count pixels ``[i0, i1)`` of flat contiguous ``g``/``p`` (any integer dtypes) into ``t``.

    Block by block: both sides narrowed into byte buffers while their range is checked; a block
    whose values all lie in 0..255 is counted as 8-bit words, into the raw table ``raw`` if it
    has any bins (large calls: :func:`count_words_span`) else into ``t``
    (:func:`count_words_small_span`); any other block pixel by pixel through ``luts``, the
    ``(glut, glo, gunexp, plut, plo, punexp)`` of the generic kernel (unexpected values land in
    the unexpected code).
    """
    glut, glo, gunexp, plut, plo, punexp = luts
    gsize = np.uint64(glut.size)
    psize = np.uint64(plut.size)
    gbuf = np.empty(NARROW_BLOCK, dtype=np.uint8)
    pbuf = np.empty(NARROW_BLOCK, dtype=np.uint8)
    g64 = gbuf.view(np.uint64)
    p64 = pbuf.view(np.uint64)
    for b0 in range(i0, i1, NARROW_BLOCK):
        m = min(NARROW_BLOCK, i1 - b0)
        gs = g[b0 : b0 + m]
        ps = p[b0 : b0 + m]
        if (_narrow_into(gs, gbuf) | _narrow_into(ps, pbuf)) >> 8 == 0:
            n8 = m // 8
            if raw.size:  # a large call: the raw table, folded once by the caller
                count_words_span(gbuf, pbuf, g64, p64, 0, n8, raw)
                count_bytes(gbuf[n8 * 8 : m], pbuf[n8 * 8 : m], raw)
            else:
                count_words_small_span(gbuf[:m], pbuf[:m], g64[:n8], p64[:n8], gcode, pcode,
                                       mask, t)  # fmt: skip
            continue
        for k in range(m):
            ug = np.uint64(np.int64(gs[k]) - glo)
            up = np.uint64(np.int64(ps[k]) - plo)
            a = glut[ug] if ug < gsize else gunexp
            t[a + (plut[up] if up < psize else punexp) + (k & mask)] += 1


@kernel
def count_narrow_serial(g, p, gcode, pcode, luts, mask, tabs, raws):
    """Count all of flat ``g``/``p`` on the calling thread into ``tabs[0]`` (and ``raws[0]``)."""
    count_narrow_span(g, p, 0, g.size, gcode, pcode, luts, mask, tabs[0], raws[0])


@parallel_kernel
def count_narrow_parallel(g, p, gcode, pcode, luts, mask, tabs, raws):
    """Split flat ``g``/``p`` into ``tabs.shape[0]`` spans, a small (and a raw) table each."""
    workers = tabs.shape[0]
    groups = g.size // 8
    for w in nb.prange(workers):
        i0 = groups * w // workers * 8
        i1 = g.size if w == workers - 1 else groups * (w + 1) // workers * 8
        count_narrow_span(g, p, i0, i1, gcode, pcode, luts, mask, tabs[w], raws[w])


@kernel
def count_words_small_span(g8, p8, g64, p64, gcode, pcode, mask, t):
    """Count two flat 8-bit masks, also read as words ``g64``/``p64``, into the small table ``t``.

    ``gcode``/``pcode`` give the table offset of each byte value. A word with at most one
    change of pair (constant words and region boundaries: nearly all of a real mask) adds its
    two runs, the first ``head`` pixels and the other ``8 - head`` (0 for a constant word),
    without a branch on which kind it is: mixed masks (tiles, 512 x 512 images) mispredicted
    that branch often (measured 0.57 -> 0.38 ns/px). The two increments go to copies ``q`` and
    ``q + 4`` of their cells, so that repeated words do not chain on one counter. Words with
    more changes are counted byte by byte, pixel ``k`` into copy ``k & mask``; pixels past the
    last whole word one by one.
    """
    for q in range(g64.size):
        gw = g64[q]
        pw = p64[q]
        d = ((gw ^ (gw << _U8)) | (pw ^ (pw << _U8))) & _NOT_BYTE0
        d1 = (((d & _LOW7) + _LOW7) | d) & _HIGH  # the top bit of each byte that changes
        if d1 & (d1 - np.uint64(1)):  # two changes or more: byte by byte
            base = q * 8
            for k in range(8):
                t[gcode[g8[base + k]] + pcode[p8[base + k]] + (k & mask)] += 1
            continue
        _word_counts(gw, pw, q, gcode, pcode, mask, t)
    for i in range(g64.size * 8, g8.size):
        t[gcode[g8[i]] + pcode[p8[i]]] += 1


@kernel
def count_small(g, p, gcode, pcode, mask, t):
    """Count two C-contiguous 8-bit masks of any shape into the small table ``t``.

    Reads both as uint64 words from the first 8-byte boundary (the pixels before it one by
    one); when the two masks sit at different offsets from a boundary, pixel by pixel.
    """
    g8 = g.reshape(g.size)
    p8 = p.reshape(p.size)
    ga = g8.ctypes.data
    head = min((8 - ga % 8) % 8, g8.size)
    if (ga - p8.ctypes.data) % 8:
        head = g8.size
    for i in range(head):
        t[gcode[g8[i]] + pcode[p8[i]]] += 1
    n = (g8.size - head) // 8
    gb = g8[head:]
    pb = p8[head:]
    count_words_small_span(gb, pb, gb[: n * 8].view(np.uint64), pb[: n * 8].view(np.uint64),
                           gcode, pcode, mask, t)  # fmt: skip


@kernel
def fold_small_clear(t, k, copies, counts, void):
    """Add a small table ``t`` (all copies) into ``counts``/``void``; zero ``t``.

    Returns ``(ignored, unexpected)``: the pixels of ignored ground truth and the unexpected
    ones (ground truth, or prediction at a class); with unexpected pixels nothing is added
    and ``t`` is left as it is, for the caller to report them.
    """
    width = k + 2
    row = width * copies
    unexpected = 0
    for i in range((k + 1) * row, width * row):  # unexpected ground truth
        unexpected += t[i]
    for a in range(k):  # unexpected prediction at a class
        base = a * row + (k + 1) * copies
        for c in range(copies):
            unexpected += t[base + c]
    if unexpected:
        return 0, unexpected
    ignored = 0
    for i in range(k * row, (k + 1) * row):
        ignored += t[i]
    for a in range(k):
        base = a * row
        if not _any_nonzero(t[base : base + row]):  # ground-truth classes absent: most
            continue
        for b in range(k + 1):
            o = base + b * copies
            if copies == 8:  # the usual table: a constant trip count, unrolled
                s = (
                    t[o]
                    + t[o + 1]
                    + t[o + 2]
                    + t[o + 3]
                    + t[o + 4]
                    + t[o + 5]
                    + t[o + 6]
                    + t[o + 7]
                )
            else:
                s = 0
                for c in range(copies):
                    s += t[o + c]
            if b < k:
                counts[a, b] += s
            else:
                void[a] += s
        t[base : base + row] = 0
    t[k * row : (k + 1) * row] = 0
    return ignored, 0


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
