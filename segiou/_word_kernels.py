"""Layer 1: Numba kernels counting 8-bit masks a word (8 pixels) at a time into code tables.

Both masks are read as ``uint64`` words. Every pixel lands in a flat *code table*
``t[gcode[g] + pcode[p] + copy]``: ``gcode``/``pcode`` (``uint64``, one entry per byte value)
give the row and column offsets of each byte's code (class ``0..K-1``, ``K`` ignored/void,
``K+1`` unexpected), as in :mod:`segiou._kernels`; ``copy`` (``0..COPIES-1``) spreads repeated
increments of one cell over interleaved counters, so that they do not wait on each other.

Words are counted block by block (``BLOCK_WORDS`` words), each block in the way that suits it,
chosen from its first ``SAMPLE_WORDS`` words (:func:`_mode`):

* ``RUNS`` (coherent masks, few words with a change of pair): a word that repeats the last
  pixel's pair only lengthens the current run (one compare); a change adds the finished run to
  its cell. One increment per run.
* ``PAIRS`` (a change in many words, rarely two): each word adds its first and its last run,
  without a branch on which kind of word it is (constant words add 0 to one of them); words
  with two changes or more byte by byte. Two increments per word.
* ``BYTES`` (noise, small regions): pixel by pixel, pixel ``k`` of a word into copy ``k``.

The choice changes only the speed (measured in ``benchmarks/bench_kernel.py`` and
``bench_stream.py``): on Cityscapes-like masks one thread counts ~0.25 ns/px in ``RUNS``
(1024 x 2048), ~0.35 in ``PAIRS`` (512 x 512), ~0.5 in ``BYTES`` (any data).

Masks of wider dtypes (``int64`` from ``argmax``) are narrowed into two aligned byte buffers
block by block while their range is checked, and counted the same way; a block holding a value
outside ``0..255`` is counted pixel by pixel through the lookup tables of the generic kernel.

Every kernel that counts into scratch tables also folds them into the caller's
``(K+2) x (K+2)`` table and zeroes them before it returns: an interrupted call (Ctrl-C is
delivered between Python bytecodes, never inside a kernel) leaves nothing behind. Indices are
unsigned (a signed index costs a wrap-around check on every access).
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import overload

from segiou._jit import kernel, parallel_kernel

#: Interleaved counters per cell of a word-path table (a constant: the copy of a pixel is then
#: part of the address, not a register; a run-time number of copies cost ~20%).
COPIES = 8
#: Words per block; each block is counted in one mode.
BLOCK_WORDS = 512
#: Words sampled (the first of a block) to choose its mode.
SAMPLE_WORDS = 32
RUNS, PAIRS, BYTES = 0, 1, 2
#: ``BYTES`` when at least this many sampled words hold two changes of pair or more.
BYTES_MIN_MULTI = 6
#: ``RUNS`` when at most this many sampled words differ from the pixel before them.
RUNS_MAX_CHANGED = 8
#: Pixels narrowed (or copied, for masks at different offsets from a word boundary) at a time
#: into two byte buffers per thread.
NARROW_BLOCK = 4096

_BYTE = np.uint64(0xFF)
_ONES = np.uint64(0x0101010101010101)
_NOT_BYTE0 = np.uint64(0xFFFFFFFFFFFFFF00)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U3 = np.uint64(3)
_U4 = np.uint64(4)
_U8 = np.uint64(8)
_U56 = np.uint64(56)
_MASK = np.uint64(COPIES - 1)
_INT64_MAX = np.iinfo(np.int64).max
#: Count trailing zero bits (an LLVM intrinsic, 64 for 0; typed Any for mypy).
_ctz: Any = trailing_zeros


@kernel
def _cell(gw, pw, sh, gcode, pcode):
    """Offset of the cell of the pixel at bit ``sh`` of words ``gw``/``pw``."""
    return gcode[(gw >> sh) & _BYTE] + pcode[(pw >> sh) & _BYTE]


@kernel
def _first_change(gw, pw):
    """Return ``(z, more)`` for the pixels of a word that differ from their left neighbour.

    ``z``: 8 * the first one (0: none); ``more``: whether another one follows (two changes of
    pair or more).
    """
    d = ((gw ^ (gw << _U8)) | (pw ^ (pw << _U8))) & _NOT_BYTE0
    z = _ctz(d) & _U56
    return z, ((d >> z) >> _U8) != _U0


@kernel
def _word_bytes(gw, pw, gcode, pcode, t):
    """Add the 8 pixels of a word one by one, pixel ``k`` into copy ``k`` (modulo ``COPIES``)."""
    for k in range(8):
        sh = np.uint64(8 * k)
        t[_cell(gw, pw, sh, gcode, pcode) + np.uint64(k % COPIES)] += 1


@kernel
def count_runs(gs, ps, gcode, pcode, t):
    """Count words ``gs``/``ps`` run by run (``RUNS``); one increment per run.

    Words are indexed from 0 over slices (a signed index from elsewhere costs a wrap-around
    check on every access: ~40% here).
    """
    gc = gs[0] & _BYTE  # the current run's pair (bytes)
    pc = ps[0] & _BYTE
    gcw = gc * _ONES  # ... and its words, made when the pair changes (two multiplies a word
    pcw = pc * _ONES  # cost 15-20% on constant words)
    run = _U0
    for qi in range(gs.size):
        gw = gs[qi]
        pw = ps[qi]
        if ((gw ^ gcw) | (pw ^ pcw)) == _U0:
            run += _U8
            continue
        q = np.uint64(qi)
        # byte k of d is non-zero where pixel k differs from pixel k - 1 (pixel -1: the run)
        d = (gw ^ ((gw << _U8) | gc)) | (pw ^ ((pw << _U8) | pc))
        z = _ctz(d) & _U56
        if ((d >> z) >> _U8) == _U0:  # one change: the run ends there, a new one starts
            head = z >> _U3
            t[gcode[gc] + pcode[pc] + (q & _MASK)] += np.int64(run + head)
            run = _U8 - head
        else:
            t[gcode[gc] + pcode[pc] + (q & _MASK)] += np.int64(run)
            _word_bytes(gw, pw, gcode, pcode, t)
            run = _U0
        gc = gw >> _U56
        pc = pw >> _U56
        gcw = gc * _ONES
        pcw = pc * _ONES
    t[gcode[gc] + pcode[pc]] += np.int64(run)


@kernel
def count_pairs(gs, ps, gcode, pcode, t):
    """Count words ``gs``/``ps`` by their first and last runs (``PAIRS``); two increments a word."""
    for qi in range(gs.size):
        gw = gs[qi]
        pw = ps[qi]
        z, more = _first_change(gw, pw)
        if more:
            _word_bytes(gw, pw, gcode, pcode, t)
            continue
        q = np.uint64(qi)
        head = np.int64(z >> _U3)  # 0 for a constant word: its 8 pixels go to the last run
        t[_cell(gw, pw, _U0, gcode, pcode) + (q & _MASK)] += head
        t[_cell(gw, pw, _U56, gcode, pcode) + ((q + _U4) & _MASK)] += 8 - head


@kernel
def count_bytes(gs, ps, gcode, pcode, t):
    """Count words ``gs``/``ps`` pixel by pixel (``BYTES``)."""
    for qi in range(gs.size):
        _word_bytes(gs[qi], ps[qi], gcode, pcode, t)


@kernel
def _mode(gs, ps):
    """Choose how to count words ``gs``/``ps`` from their first ``SAMPLE_WORDS`` words.

    Contiguous words, read next anyway: a sample spread over the block cost ~0.6 us a block
    (its cache misses stalled the choice).
    """
    s = min(SAMPLE_WORDS, gs.size)
    changed = 0
    multi = 0
    gl = gs[0] & _BYTE
    pl = ps[0] & _BYTE
    for q in range(s):
        gw = gs[q]
        pw = ps[q]
        changed += (gw != gl * _ONES) | (pw != pl * _ONES)
        multi += _first_change(gw, pw)[1]
        gl = gw >> _U56
        pl = pw >> _U56
    if multi * SAMPLE_WORDS >= BYTES_MIN_MULTI * s:
        return BYTES
    if changed * SAMPLE_WORDS <= RUNS_MAX_CHANGED * s:
        return RUNS
    return PAIRS


@kernel
def count_words(g64, p64, gcode, pcode, t):
    """Count all words of ``g64``/``p64`` into ``t``, block by block in the mode each suits.

    ``gcode[b]``/``pcode[b]`` are the row/column offsets of byte ``b``'s code in ``t``
    (``code * (K+2) * COPIES``, ``code * COPIES``).
    """
    n = g64.size
    for q0 in range(0, n, BLOCK_WORDS):
        gs = g64[q0 : q0 + BLOCK_WORDS]
        ps = p64[q0 : q0 + BLOCK_WORDS]
        mode = _mode(gs, ps)
        if mode == RUNS:
            count_runs(gs, ps, gcode, pcode, t)
        elif mode == PAIRS:
            count_pairs(gs, ps, gcode, pcode, t)
        else:
            count_bytes(gs, ps, gcode, pcode, t)


@kernel
def _pixels(g8, p8, gcode, pcode, t):
    """Count a few pixels of two byte arrays one by one (copy 0)."""
    for i in range(g8.size):
        t[gcode[g8[i]] + pcode[p8[i]]] += 1


@kernel
def _copy_into(src, dst):
    """Copy ``src`` into ``dst[:src.size]`` (bytes of 8-bit masks: always in range)."""
    for j in range(src.size):
        dst[j] = src[j]


def _narrow_into(src: np.ndarray, dst: np.ndarray) -> bool:
    """Copy ``src`` into the bytes ``dst`` (low 8 bits); whether every value is in ``0..255``.

    In kernels this is the loop of :func:`_narrow_loop` for ``src``'s dtype; called from Python
    (no Numba), numpy does the same.
    """
    dst[: src.size] = src.astype(np.uint8, casting="unsafe")
    return bool(src.size == 0 or (src.min() >= 0 and src.max() <= 255))


@overload(_narrow_into, jit_options={"nogil": True})
def _narrow_loop(src, dst):  # (no annotations: Numba compares the parameters)
    """Choose the narrowing loop for ``src``'s dtype (at compile time). Both are vectorised.

    Up to 32 bits, the values are read as unsigned: one maximum at most 255 says every value
    is in ``0..255`` (a negative value reads as a large one), in lanes of the source's width
    (twice as fast as widening each value to 64 bits: ``int32`` 0.09 against 0.18 ns a pixel
    from cache). For 64-bit values, an unsigned 64-bit maximum measured slower than an OR:
    the OR of the values has no bit above the lowest 8 exactly when every value is in
    ``0..255`` (a negative value sets the sign bit).
    """
    bits = src.dtype.bitwidth
    if bits <= 32:
        unsigned: Any = {8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]

        def narrow_max(src, dst):
            s = src.view(unsigned)
            hi = unsigned(0)
            for j in range(s.size):
                v = s[j]
                dst[j] = np.uint8(v)
                hi = max(hi, v)
            return hi <= 255

        return narrow_max

    def narrow_or(src, dst):
        acc = np.int64(0)
        for j in range(src.size):
            v = np.int64(src[j])
            dst[j] = np.uint8(v & 0xFF)
            acc |= v
        return (acc >> 8) == 0

    return narrow_or


@kernel
def count_u8_span(g8, p8, i0, i1, gcode, pcode, t):
    """Count pixels ``[i0, i1)`` of two flat 8-bit masks into ``t``.

    Masks sitting at the same offset from an 8-byte boundary are read in place as words (the
    pixels before the first boundary and after the last one by one); otherwise blocks are
    copied into two aligned buffers first.
    """
    g = g8[i0:i1]
    p = p8[i0:i1]
    if g.size == 0:  # (an empty worker span: two empty slices may differ in alignment)
        return
    ga = g.ctypes.data % 8
    if ga == p.ctypes.data % 8:
        head = min((8 - ga) % 8, g.size)
        _pixels(g[:head], p[:head], gcode, pcode, t)
        n = (g.size - head) // 8
        gw = g[head : head + 8 * n].view(np.uint64)
        pw = p[head : head + 8 * n].view(np.uint64)
        count_words(gw, pw, gcode, pcode, t)
        _pixels(g[head + 8 * n :], p[head + 8 * n :], gcode, pcode, t)
        return
    gbuf = np.empty(min(NARROW_BLOCK, g.size), dtype=np.uint8)
    pbuf = np.empty(gbuf.size, dtype=np.uint8)
    g64 = gbuf[: gbuf.size // 8 * 8].view(np.uint64)
    p64 = pbuf[: gbuf.size // 8 * 8].view(np.uint64)
    for b0 in range(0, g.size, gbuf.size):
        m = min(gbuf.size, g.size - b0)
        _copy_into(g[b0 : b0 + m], gbuf)
        _copy_into(p[b0 : b0 + m], pbuf)
        n = m // 8
        count_words(g64[:n], p64[:n], gcode, pcode, t)
        _pixels(gbuf[8 * n : m], pbuf[8 * n : m], gcode, pcode, t)


@kernel
def _bytes_of(src, in_place, buf):
    """Return a block as bytes, and whether every value is in ``0..255``.

    The block itself (an 8-bit block starting on a word boundary), or copied (8-bit) or narrowed
    (wider) into ``buf``.
    """
    if in_place:
        return src.view(np.uint8), True
    out = buf[: src.size]
    if src.itemsize == 1:
        _copy_into(src, out)
        return out, True
    return out, _narrow_into(src, out)


@kernel
def count_wide_span(g, p, i0, i1, gcode, pcode, luts, t):
    """Count pixels ``[i0, i1)`` of flat masks of wider dtypes (or mixed widths) into ``t``.

    Block by block, each wider side narrowed into a byte buffer while its range is checked
    (an 8-bit side is read in place when its block starts on a word boundary, else copied: a
    copy measured ~20% slower for ``uint8``/``int32``); a block whose values all lie in
    ``0..255`` is counted as words with the byte codes ``gcode``/``pcode`` (those of unsigned
    bytes for a wider side), any other block pixel by pixel through ``luts``, the ``(glut, glo,
    gunexp, plut, plo, punexp)`` of the generic kernel: unexpected values land in the
    unexpected code, never in a class. (Prefetching the next block while counting this one
    was slower in every form tried.)
    """
    glut, glo, gunexp, plut, plo, punexp = luts
    gsize = np.uint64(glut.size)
    psize = np.uint64(plut.size)
    gbuf = np.empty(NARROW_BLOCK, dtype=np.uint8)
    pbuf = np.empty(NARROW_BLOCK, dtype=np.uint8)
    # blocks start at multiples of NARROW_BLOCK (a multiple of 8) from i0
    g_in_place = g.itemsize == 1 and (g.ctypes.data + i0) % 8 == 0
    p_in_place = p.itemsize == 1 and (p.ctypes.data + i0) % 8 == 0
    for b0 in range(i0, i1, NARROW_BLOCK):
        m = min(NARROW_BLOCK, i1 - b0)
        gs = g[b0 : b0 + m]
        ps = p[b0 : b0 + m]
        gb, g_ok = _bytes_of(gs, g_in_place, gbuf)
        pb, p_ok = _bytes_of(ps, p_in_place, pbuf)
        if g_ok and p_ok:
            n = m // 8
            count_words(gb[: 8 * n].view(np.uint64), pb[: 8 * n].view(np.uint64), gcode, pcode, t)
            _pixels(gb[8 * n : m], pb[8 * n : m], gcode, pcode, t)
            continue
        for k in range(m):
            ug = np.uint64(np.int64(gs[k]) - glo)
            up = np.uint64(np.int64(ps[k]) - plo)
            a = glut[ug] if ug < gsize else gunexp
            b = plut[up] if up < psize else punexp
            t[np.uint64(a + b) + (np.uint64(k) & _MASK)] += 1


@kernel
def fold_tables(tabs, out):
    """Add every table of ``tabs`` (all copies) into ``out`` (``(K+2) x (K+2)``); zero ``tabs``.

    A row of a table is skipped when empty (most ground-truth codes are absent from a call).
    """
    width = out.shape[0]
    row = width * COPIES
    for w in range(tabs.shape[0]):
        t = tabs[w]
        for a in range(width):
            seg = t[a * row : (a + 1) * row]
            acc = np.int64(0)
            for i in range(row):
                acc |= seg[i]
            if acc == 0:
                continue
            for b in range(width):
                s = np.int64(0)
                for c in range(COPIES):
                    s += seg[b * COPIES + c]
                out[a, b] += s
            seg[:] = 0


#: What :func:`settle` did: added, or nothing because of unexpected values / the pixel total;
#: :func:`add_small` also says ``OTHER``: not a batch it counts (nothing done).
ADDED, UNEXPECTED, OVERFLOW, OTHER = 0, 1, 2, 3
#: Largest batch (pixels) :func:`add_small` counts; larger ones are counted on all threads.
SMALL_MAX_PIXELS = (1 << 16) - 1


@kernel
def _add_folded(out, counts, void, totals):
    """Add a folded table with no unexpected pixel into ``counts``, ``void``, ``totals[0]``."""
    k = counts.shape[0]
    ignored = np.int64(0)
    for b in range(k + 2):
        ignored += out[k, b]
    for a in range(k):
        for b in range(k):
            counts[a, b] += out[a, b]
        void[a] += out[a, k]
    totals[0] += ignored


@kernel
def settle(out, counts, void, totals, n_pixels, n_images):
    """Add a folded table ``out`` into an accumulator, all or nothing; zero ``out``.

    ``totals`` is the accumulator's ``[ignored, pixels, images, unfolded]``. Returns
    :data:`ADDED`; :data:`UNEXPECTED` (an unexpected ground truth, or an unexpected prediction
    at a class: the caller counts the batch again the general way, which reports them) or
    :data:`OVERFLOW` (the pixel total would pass ``2**63 - 1``) with nothing added.
    """
    k = counts.shape[0]
    bad = np.int64(0)
    for b in range(k + 2):
        bad += out[k + 1, b]
    for a in range(k):
        bad += out[a, k + 1]
    status = ADDED
    if bad:
        status = UNEXPECTED
    elif totals[1] > _INT64_MAX - n_pixels:
        status = OVERFLOW
    if status == ADDED:
        _add_folded(out, counts, void, totals)
        totals[1] += n_pixels
        totals[2] += n_images
    out[:] = 0
    return status


@kernel
def count_u8_serial(g8, p8, gcode, pcode, tabs, out):
    """Count two flat 8-bit masks on the calling thread; fold into ``out`` (``tabs`` zeroed)."""
    count_u8_span(g8, p8, 0, g8.size, gcode, pcode, tabs[0])
    fold_tables(tabs[:1], out)


@parallel_kernel
def count_u8_parallel(g8, p8, gcode, pcode, tabs, out):
    """Split two flat 8-bit masks into ``tabs.shape[0]`` spans of whole words; fold into ``out``."""
    workers = tabs.shape[0]
    words = g8.size // 8
    for w in nb.prange(workers):
        i0 = words * w // workers * 8
        i1 = g8.size if w == workers - 1 else words * (w + 1) // workers * 8
        count_u8_span(g8, p8, i0, i1, gcode, pcode, tabs[w])
    fold_tables(tabs, out)


@kernel
def count_wide_serial(g, p, gcode, pcode, luts, tabs, out):
    """Count flat masks of wider dtypes on the calling thread; fold into ``out``."""
    count_wide_span(g, p, 0, g.size, gcode, pcode, luts, tabs[0])
    fold_tables(tabs[:1], out)


@parallel_kernel
def count_wide_parallel(g, p, gcode, pcode, luts, tabs, out):
    """Split flat masks of wider dtypes into ``tabs.shape[0]`` spans; fold into ``out``."""
    workers = tabs.shape[0]
    groups = g.size // 8
    for w in nb.prange(workers):
        i0 = groups * w // workers * 8
        i1 = g.size if w == workers - 1 else groups * (w + 1) // workers * 8
        count_wide_span(g, p, i0, i1, gcode, pcode, luts, tabs[w])
    fold_tables(tabs, out)


@kernel
def _unexpected_in(t, k):
    """Pixels in the unexpected cells of a word table (ground truth, or prediction at a class)."""
    width = k + 2
    row = width * COPIES
    bad = np.int64(0)
    for i in range((k + 1) * row, width * row):
        bad += t[i]
    for a in range(k):
        base = a * row + (k + 1) * COPIES
        for c in range(COPIES):
            bad += t[base + c]
    return bad


@kernel
def _count_flat(g, p, codes, luts, t):
    """Count two flat masks into ``t``: 8-bit (``luts`` is None) or wider, narrowed.

    Two 8-bit masks of whole words, both starting on a word boundary (a numpy allocation of
    a tile does), go straight to :func:`count_words`: the general span's slices and its loops
    over the pixels before and after the words cost ~0.3-0.6 us of a 64 x 64 tile's ~2-5 us.
    """
    if luts is None:
        if g.size % 8 == 0 and g.ctypes.data % 8 == 0 and p.ctypes.data % 8 == 0:
            count_words(g.view(np.uint64), p.view(np.uint64), codes[0], codes[1], t)
        else:
            count_u8_span(g, p, 0, g.size, codes[0], codes[1], t)
    else:
        count_wide_span(g, p, 0, g.size, codes[0], codes[1], luts, t)


@kernel
def _add_flat(g, p, codes, luts, table, totals, n_images):
    """:func:`add_unfolded` of two flat masks, 8-bit (``luts`` is None) or wider."""
    k = np.int64(np.sqrt(table.size // COPIES) + 0.5) - 2  # (K+2)^2 cells
    n = g.size
    if totals[1] > _INT64_MAX - n:
        return OVERFLOW
    _count_flat(g, p, codes, luts, table)
    if _unexpected_in(table, k):
        undo = np.zeros(table.size, dtype=np.int64)
        _count_flat(g, p, codes, luts, undo)
        for i in range(table.size):
            table[i] -= undo[i]
        return UNEXPECTED
    totals[1] += n
    totals[2] += n_images
    totals[3] = 1
    return ADDED


@kernel
def add_unfolded(g8, p8, codes, table, totals, n_images):
    """Count two flat 8-bit masks into an accumulator's unfolded word table, all or nothing.

    ``codes`` is ``gcode`` and ``pcode`` in one array (one argument less: each costs ~50 ns of
    the call). ``table`` holds the pixels of earlier small calls, folded when the accumulator's
    counts are read (:func:`fold_unfolded`; a fold costs ~0.9 us, a third of counting a noisy
    64 x 64 tile).
    Its unexpected cells are always empty: a batch with unexpected values is counted again
    into a scratch table and subtracted (:data:`UNEXPECTED`, the caller reports them). The
    pixel and image totals are added here, the ignored pixels when folded; ``totals[3]``
    says that the table holds pixels. Returns :data:`ADDED`, :data:`UNEXPECTED` or
    :data:`OVERFLOW` (nothing counted).
    """
    return _add_flat(g8, p8, codes, None, table, totals, n_images)


@kernel
def _small_images(g, p):
    """Images of two masks the one-call kernels take (any rank: ``N x H x W`` holds ``N``).

    -1 unless both have one shape, are C-contiguous and hold 1 to :data:`SMALL_MAX_PIXELS`
    pixels.
    """
    n = g.size
    if g.ndim != p.ndim or g.shape != p.shape or n == 0 or n > SMALL_MAX_PIXELS:
        return -1
    if not (g.flags.c_contiguous and p.flags.c_contiguous):
        return -1
    if g.ndim <= 2:
        return 1
    return n // (g.shape[-1] * g.shape[-2])


@kernel
def add_small(g8, p8, codes, table, totals):
    """:func:`add_unfolded` for two 8-bit masks as given (any rank): the whole short way.

    One kernel call from Python, which checks only the arrays' type and dtype: this checks
    the rest (:func:`_small_images`; else :data:`OTHER`, nothing done), counts the images
    and views both masks flat. Every step moved in here saves ~0.1-0.5 us of Python a call (a
    64 x 64 tile is counted in ~1-2 us).
    """
    images = _small_images(g8, p8)
    if images < 0:
        return OTHER
    return _add_flat(g8.ravel(), p8.ravel(), codes, None, table, totals, images)


@kernel
def add_small_wide(g, p, codes, luts, table, totals):
    """:func:`add_small` for masks of wider dtypes (``argmax`` output), narrowed while read.

    ``luts`` as for :func:`count_wide_span`: a block holding a value beyond a byte is counted
    through them (an unexpected value lands in an unexpected cell; the batch is then
    :data:`UNEXPECTED`, nothing counted).
    """
    images = _small_images(g, p)
    if images < 0:
        return OTHER
    return _add_flat(g.ravel(), p.ravel(), codes, luts, table, totals, images)


@kernel
def fold_unfolded(table, counts, void, totals):
    """Add an unfolded word table into ``counts``, ``void`` and ``totals[0]``; zero it."""
    width = counts.shape[0] + 2
    out = np.zeros((width, width), dtype=np.int64)
    fold_tables(table.reshape(1, table.size), out)
    _add_folded(out, counts, void, totals)  # its unexpected cells are always empty
    totals[3] = 0


@kernel
def add_u8_parallel(g8, p8, codes, tabs, out, counts, void, totals, n_images):
    """Count two flat 8-bit masks on ``tabs.shape[0]`` threads and :func:`settle` them.

    One call for a large ``update``: counted, folded and added, or nothing added (no Ctrl-C
    can fall between counting and adding).
    """
    count_u8_parallel(g8, p8, codes[0], codes[1], tabs, out)
    return settle(out, counts, void, totals, g8.size, n_images)


@kernel
def add_u8(g8, p8, gcode, pcode, tabs, out, counts, void, totals, n_images):
    """Count two flat 8-bit masks on the calling thread and :func:`settle` them: the status.

    One call for the whole of a small ``update`` (each call into a kernel costs ~50 ns an
    argument): counted, folded and added, or nothing added.
    """
    count_u8_serial(g8, p8, gcode, pcode, tabs, out)
    return settle(out, counts, void, totals, g8.size, n_images)
