"""Layer 1: Numba kernels of Boundary IoU: which pixels lie within ``d`` of their region's edge.

For a class ``c`` the ground-truth boundary ``G_d`` is ``G`` minus ``G`` eroded ``d`` times by a
3 x 3 square, with the image border as background (Cheng et al. 2021). A pixel of ``G`` survives
the erosion (is *interior*) exactly when every pixel of the ``(2d+1) x (2d+1)`` square around it
lies inside the image and holds ``c``. The same holds for the prediction. The kernels decide that
square test for a band of rows with bit sets (one bit per pixel, 64 pixels a word), in time that
does not grow with ``d``:

* along a row, from its runs of equal values: the row window ``[x - d, x + d]`` is constant and
  inside the row when ``x`` lies at least ``d`` pixels from both ends of its run (a run also
  ends at the row's ends): bit ``x`` of ``H[y]``, set only in runs of a class;
* down the columns: ``Q[y] = H[y] & H[y + 1] & (row y equals row y + 1)``, and the square around
  ``(y, x)`` is constant exactly when ``Q`` is set at ``x`` in every row ``y - d .. y + d - 1``:
  a sliding AND over ``2d`` rows (van Herk / Gil-Werman: a prefix and a suffix AND per block of
  ``2d`` rows, so three word operations per word whatever ``d``).

A band's first and last rows act as the image border. A caller that counts rows ``lo..hi`` of a
band read with ``d`` rows of halo above and below (clipped at the image) gets exactly the whole
image's answer for those rows: the window of a counted row never leaves such a band, unless it
leaves the image.

Masks are read as *values* (raw ids, class ids or codes): runs and the column test compare
values, so the caller passes masks in which each class is exactly one value (it maps them to
codes first when a class has several raw ids), and tables that cover the mask's dtype:
``lut[v - lo]`` is a value's class ``0..K-1`` or ``K`` and more for no class (ignored, void,
unexpected).

:func:`count_band` adds, per class, over rows ``lo..hi`` and pixels with valid ground truth: the
interior pixels of ``G`` (``G_IN``), of ``P`` (``P_IN``), and of ``G & P`` interior in ``G``, in
``P`` and in both. Then ``|G_d| = |G| - G_IN``,
``|P_d| = |P| - P_IN`` and ``|G_d & P_d| = |G & P| - GP_GIN - GP_PIN + GP_BOTH``: ``|G|``
(``G_ALL``) is counted by runs too, ``|P|`` at valid ground truth (``P_ALL``) and ``|G & P|``
(``GP_ALL``) are the confusion counts of the same pixels (column sum and diagonal), which the
caller counts anyway, faster than runs could.
Kernels never raise and never write outside their outputs; callers allocate them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from segiou._jit import kernel

#: Rows of the per-class sums of :func:`row_runs` and :func:`count_band`.
G_ALL, G_IN, P_ALL, P_IN, GP_ALL, GP_GIN, GP_PIN, GP_BOTH = range(8)
N_SUMS = 8
#: Count trailing zero bits (an LLVM intrinsic; typed Any for mypy).
_ctz: Any = trailing_zeros
_ONE = np.uint64(1)
_ALL = ~np.uint64(0)
_U6 = np.uint64(6)
_U56 = np.uint64(56)
_U63 = np.uint64(63)
#: Multiplying 8 bytes of 0 or 1 by this gathers them into the top byte, byte i -> bit i.
_PACK = np.uint64(0x0102040810204080)


def words(width: int) -> int:
    """Words of a row's bit set: one bit per pixel, and one past the row (the end marker)."""
    return (width >> 6) + 1


@kernel
def map_codes(a, lut, lo, other, out):
    """``out[y, x]`` = ``lut[a[y, x] - lo]``, or ``other`` outside the table."""
    rows, width = a.shape
    n = np.uint64(lut.size)
    for y in range(rows):
        src = a[y]
        dst = out[y]
        for x in range(width):
            u = np.uint64(np.int64(src[x]) - lo)
            dst[x] = lut[u] if u < n else other


@kernel
def _pack(b8, b64, out):
    """Bits of the 0/1 bytes ``b8`` (``b64`` its uint64 view) into ``out`` (64 bytes a word)."""
    for q in range(out.size):
        w = np.uint64(0)
        for t in range(8):
            w |= ((b64[8 * q + t] * _PACK) >> _U56) << np.uint64(8 * t)
        out[q] = w


@kernel
def _changes(row, b8, b64, out):
    """Bit ``x`` of ``out``: ``row[x] != row[x - 1]``; bit 0 and bits from the row's end set."""
    w = row.size
    b8[0] = 1
    for x in range(1, w):
        b8[x] = row[x] != row[x - 1]
    for x in range(w, b8.size):
        b8[x] = 1
    _pack(b8, b64, out)


@kernel
def _set_bits(bits, s0, s1):
    """Set bits ``s0 .. s1 - 1`` of a bit set."""
    q0 = s0 >> 6
    q1 = (s1 - 1) >> 6
    lo = _ALL << np.uint64(s0 & 63)
    hi = _ALL >> np.uint64(63 - ((s1 - 1) & 63))
    if q0 == q1:
        bits[q0] |= lo & hi
        return
    bits[q0] |= lo
    for q in range(q0 + 1, q1):
        bits[q] = _ALL
    bits[q1] |= hi


@kernel
def _popcount(x):
    # SWAR popcount (LLVM turns it into one instruction where the CPU has one)
    x = x - ((x >> _ONE) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> _U56)


@kernel
def row_runs(a, lut, lo, k, d, first, last, h, inv, b8, b64, cbits, runs, offsets, sizes):
    """Bit sets ``H``, ``inv`` and the changes of a band, and its runs longer than ``2d``.

    ``h[y]`` gets the pixels of row ``y`` whose row window ``[x - d, x + d]`` is constant, lies
    inside the row and holds a class; ``inv[y]`` the pixels that hold no class; ``cbits[y]``
    where a run starts (and the bits from the row's end). Row ``y``'s long runs of a class
    ``(start, end, class)`` go to ``runs[offsets[y]:offsets[y + 1]]`` (``runs`` holds ``rows *
    (width // (2d + 1))``); ``sizes[c]`` gets the pixels of class ``c`` in rows ``first ..
    last``. Returns the number of long runs. ``b8``/``b64`` (bytes: ``64 * words(width)``, and
    their uint64 view) are scratch.
    """
    rows, width = a.shape
    m = 0
    offsets[0] = 0
    for y in range(rows):
        row = a[y]
        hy = h[y]
        iy = inv[y]
        cy = cbits[y]
        hy[:] = 0
        iy[:] = 0
        _changes(row, b8, b64, cy)
        counted = first <= y < last
        start = 0
        for q in range(cy.size):
            word = cy[q] & ~_ONE if q == 0 else cy[q]  # pixel 0 starts the first run
            while word:
                e = (q << 6) + np.int64(_ctz(word))
                word &= word - _ONE
                c = lut[np.int64(row[start]) - lo]
                if c >= k:
                    _set_bits(iy, start, e)
                elif counted:
                    sizes[c] += e - start
                if c < k and e - start > 2 * d:
                    runs[m, 0] = start
                    runs[m, 1] = e
                    runs[m, 2] = c
                    m += 1
                    _set_bits(hy, start + d, e - d)
                start = e
                if e >= width:
                    break
            if start >= width:
                break
        offsets[y + 1] = m
    return m


@kernel
def _equal_bits(r, s, b8, b64, out):
    """Bit ``x`` of ``out``: ``r[x] == s[x]`` (bits from the row's end clear)."""
    w = r.size
    for x in range(w):
        b8[x] = r[x] == s[x]
    for x in range(w, b8.size):
        b8[x] = 0
    _pack(b8, b64, out)


@kernel
def _any_and(u, v):
    for k in range(u.size):  # noqa: SIM110 -- a loop Numba compiles without a generator
        if u[k] & v[k]:
            return True
    return False


@kernel
def _any(u):
    for k in range(u.size):  # noqa: SIM110 -- as above
        if u[k]:
            return True
    return False


@kernel
def interiors(a, h, d, lo, hi, b8, b64, eq, q, pre, suf, out):
    """Bit sets of interior pixels for rows ``lo..hi`` of the band into ``out[lo:hi]``.

    ``h`` comes from :func:`row_runs`; ``eq`` (``words(width)``), ``q``, ``pre`` and ``suf``
    (``(rows, words)``) are scratch.
    """
    rows, _ = a.shape
    nw = h.shape[1]
    span = 2 * d  # rows of Q a window ANDs: y - d .. y + d - 1
    out[lo:hi] = 0
    if rows - 1 < span:  # no square fits in the band
        return
    for y in range(rows - 1):  # Q: constant windows in rows y and y+1 with equal values
        qy = q[y]
        if not _any_and(h[y], h[y + 1]):
            qy[:] = 0
            continue
        _equal_bits(a[y], a[y + 1], b8, b64, eq)
        for k in range(nw):
            qy[k] = h[y, k] & h[y + 1, k] & eq[k]
    n = rows - 1
    for s in range(0, n, span):  # per block of `span` rows: prefix and suffix ANDs
        e = min(s + span, n)
        pre[s] = q[s]
        for y in range(s + 1, e):
            for k in range(nw):
                pre[y, k] = pre[y - 1, k] & q[y, k]
        suf[e - 1] = q[e - 1]
        for y in range(e - 2, s - 1, -1):
            for k in range(nw):
                suf[y, k] = suf[y + 1, k] & q[y, k]
    for y in range(max(lo, d), min(hi, rows - d)):
        a0 = y - d  # AND of q[a0 .. a0 + span - 1]
        a1 = a0 + span - 1
        if a0 % span == 0:
            out[y] = pre[a1]
        else:
            for k in range(nw):
                out[y, k] = suf[a0, k] & pre[a1, k]


@kernel
def count_band(g, p, gin, pin, ginv, gruns, goff, pruns, poff, d, lo, hi, b8, b64, eq, out):
    """Add the interior sums of rows ``lo..hi`` to ``out`` (``(N_SUMS, K)`` int64).

    ``gin``/``pin`` come from :func:`interiors`; ``ginv``, ``gruns``/``goff`` (and ``p...``)
    from :func:`row_runs`. Each class must be the same value in ``g`` and ``p`` (then a pixel
    of a run of class ``c`` holds ``c`` on the other side where ``g == p``). ``b8``, ``b64`` and
    ``eq`` as for :func:`interiors`.
    """
    for y in range(lo, hi):
        gi = gin[y]
        pi = pin[y]
        if not (_any(gi) or _any(pi)):
            continue
        iv = ginv[y]
        _equal_bits(g[y], p[y], b8, b64, eq)
        for i in range(goff[y], goff[y + 1]):  # ground-truth runs: G's interior, and P there
            x0, x1, a = gruns[i, 0] + d, gruns[i, 1] - d, gruns[i, 2]
            for j in range(x0 >> 6, ((x1 - 1) >> 6) + 1):
                w = gi[j]
                if w:
                    out[G_IN, a] += _count_word(w, j, x0, x1)
                    out[GP_GIN, a] += _count_word(w & eq[j], j, x0, x1)
        for i in range(poff[y], poff[y + 1]):  # prediction runs: P's interior at valid gt
            x0, x1, b = pruns[i, 0] + d, pruns[i, 1] - d, pruns[i, 2]
            for j in range(x0 >> 6, ((x1 - 1) >> 6) + 1):
                w = pi[j]
                if w:
                    m = w & eq[j]
                    out[P_IN, b] += _count_word(w & ~iv[j], j, x0, x1)
                    out[GP_PIN, b] += _count_word(m, j, x0, x1)
                    out[GP_BOTH, b] += _count_word(m & gi[j], j, x0, x1)


@kernel
def _count_word(w, q, x0, x1):
    """Set bits of word ``q`` (bits ``64q ..``) among pixels ``x0 .. x1 - 1``."""
    base = q << 6
    if x0 > base:
        w &= _ALL << np.uint64(x0 - base)
    if x1 < base + 64:
        w &= _ALL >> np.uint64(base + 64 - x1)
    return _popcount(w)
