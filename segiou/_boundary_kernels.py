"""Layer 1: Numba kernels of Boundary IoU: which pixels lie within ``d`` of their region's edge.

For a class ``c`` the ground-truth boundary ``G_d`` is ``G`` minus ``G`` eroded ``d`` times by a
3 x 3 square, with the image border as background (Cheng et al. 2021). A pixel of ``G`` survives
the erosion (is *interior*) exactly when every pixel of the ``(2d+1) x (2d+1)`` square around it
lies inside the image and holds ``c``. The same holds for the prediction. The kernels decide that
square test for a band of rows with bit sets (one bit per pixel, 64 pixels a word), in time that
does not grow with ``d`` nor with the number of regions:

* along a row (:func:`windows`): the row window ``[x - d, x + d]`` is constant and inside the
  row when no run of equal values starts in ``x - d + 1 .. x + d`` (the row's end counts as a
  start): an OR over ``2d`` bits of the run starts, built by doubling: bit set ``H[y]``;
* down the columns (:func:`interiors`): ``Q[y] = H[y] & H[y + 1] & (row y equals row y + 1)``,
  and the square around ``(y, x)`` is constant exactly when ``Q`` is set at ``x`` in every row
  ``y - d .. y + d - 1``: a sliding AND over ``2d`` rows (van Herk / Gil-Werman: a prefix and a
  suffix AND per block of ``2d`` rows, three word operations per word whatever ``d``).

A band's first and last rows act as the image border. A caller that counts rows ``lo..hi`` of a
band read with ``d`` rows of halo above and below (clipped at the image) gets exactly the whole
image's answer for those rows: the window of a counted row never leaves such a band, unless it
leaves the image.

Masks are read as *values* (raw ids, class ids or codes): runs and the column test compare
values, so the caller passes masks in which each class is exactly one value, the same on both
sides (it maps them to codes first otherwise), and tables that cover the mask's dtype:
``lut[v - lo]`` is a value's class ``0..K-1``, or ``K`` and more for no class (ignored, void,
unexpected). Interior pixels of a value of no class are found too, and skipped when counted.

:func:`count_band` adds, per class, over rows ``lo..hi`` and pixels with valid ground truth: the
interior pixels of ``G`` (``G_IN``), of ``P`` (``P_IN``), and of ``G & P`` interior in ``G``, in
``P`` and in both. With the confusion counts of the same pixels, ``|G_d| = |G| - G_IN``,
``|P_d| = |P| - P_IN`` and ``|G_d & P_d| = |G & P| - GP_GIN - GP_PIN + GP_BOTH`` (``|G|`` all
ground-truth pixels of the class, ``|P|`` those predicted as it at valid ground truth, ``|G &
P|`` the true positives): the caller counts those anyway, faster than runs could. Loops over a
row's pixels compare values of one dtype with constants of that dtype, which lets LLVM vectorise
them (mixed signed and unsigned comparisons did not vectorise: measured 3-6x slower). Kernels
never raise and never write outside their outputs; callers allocate them.
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
def _popcount(x):
    # SWAR popcount (LLVM turns it into one instruction where the CPU has one)
    x = x - ((x >> _ONE) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> _U56)


@kernel
def _or_shifted(c, t, lo, hi, s):
    """``t[q] = c[q] | (c bits s higher)`` for words ``lo .. hi`` (``c`` padded with set words).

    Loops index slices from 0: an index that may be negative gets a wrap-around check on every
    access and does not vectorise (see the performance notes).
    """
    qs = s >> 6
    r = np.uint64(s & 63)
    n = hi - lo
    src = c[lo:hi]
    far = c[lo + qs : hi + qs]
    out = t[lo:hi]
    if r == 0:
        for q in range(n):
            out[q] = src[q] | far[q]
    else:
        rr = np.uint64(64) - r
        nxt = c[lo + qs + 1 : hi + qs + 1]
        for q in range(n):
            out[q] = src[q] | (far[q] >> r) | (nxt[q] << rr)


@kernel
def windows(a, d, h, b8, b64, c, t):
    """Bit sets ``H`` of a band: row windows ``[x - d, x + d]`` that are constant and inside.

    With ``C`` the run starts of a row (and every bit from the row's end), the window of ``x``
    is constant and inside the row exactly when ``C`` has no bit in ``x - d + 1 .. x + d``: an
    OR over ``2d`` bits, built by doubling (``log2(2d)`` passes over the row's words, whatever
    its runs). ``b8``/``b64`` are scratch bytes (``64 * words(width)``) and their uint64 view;
    ``c`` and ``t`` scratch words: ``words(width)`` between ``pad`` set words on each side, with
    ``pad = words(2d) + 1``.
    """
    rows = a.shape[0]
    nw = h.shape[1]
    span = 2 * d
    pad = (c.size - nw) // 2
    lo, hi = pad, pad + nw
    c[:lo] = _ALL
    c[hi:] = _ALL
    t[:lo] = _ALL
    t[hi:] = _ALL
    for y in range(rows):
        _changes(a[y], b8, b64, c[lo:hi])  # bit j set where a run starts (j = 0 too)
        u, v = c, t  # ping-pong: u holds the OR of bits x .. x + k - 1
        k = 1
        while 2 * k <= span:
            _or_shifted(u, v, lo, hi, k)
            u, v = v, u
            k *= 2
        if k < span:  # span is no power of 2: OR two overlapping k-windows
            _or_shifted(u, v, lo, hi, span - k)
            u, v = v, u
        # bit x of H: no start in x - d + 1 .. x + d, i.e. bit x - d + 1 of u is clear
        s = d - 1
        qs = s >> 6
        r = np.uint64(s & 63)
        hy = h[y]
        here = u[lo - qs : hi - qs]
        if r == 0:
            for q in range(nw):
                hy[q] = ~here[q]
        else:
            rr = np.uint64(64) - r
            below = u[lo - qs - 1 : hi - qs - 1]
            for q in range(nw):
                hy[q] = ~((here[q] << r) | (below[q] >> rr))


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
def _and_any(u, v, out):
    """``out = u & v``; return whether any word is non-zero."""
    acc = np.uint64(0)
    for j in range(out.size):
        x = u[j] & v[j]
        out[j] = x
        acc |= x
    return acc != 0


@kernel
def _equal_bytes(r, s, b8):
    """``b8[x] = r[x] == s[x]`` over the row (the bytes past it are left as they are)."""
    for x in range(r.size):
        b8[x] = r[x] == s[x]


@kernel
def _pack_word(b64, j):
    """Bits of bytes ``64j .. 64j + 63`` (each 0 or 1) of the buffer ``b64`` views."""
    w = np.uint64(0)
    for i in range(8):
        w |= ((b64[8 * j + i] * _PACK) >> _U56) << np.uint64(8 * i)
    return w


@kernel
def _any(u):
    for k in range(u.size):  # noqa: SIM110 -- as above
        if u[k]:
            return True
    return False


@kernel
def _and(u, v, out):
    for j in range(out.size):
        out[j] = u[j] & v[j]


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
        if not _and_any(h[y], h[y + 1], qy):
            continue
        _equal_bytes(a[y], a[y + 1], b8)  # the whole row (vectorised); packed where needed
        for j in range(nw):
            if qy[j]:
                qy[j] &= _pack_word(b64, j)
    n = rows - 1
    for s in range(0, n, span):  # per block of `span` rows: prefix and suffix ANDs
        e = min(s + span, n)
        pre[s] = q[s]
        for y in range(s + 1, e):
            _and(pre[y - 1], q[y], pre[y])
        suf[e - 1] = q[e - 1]
        for y in range(e - 2, s - 1, -1):
            _and(suf[y + 1], q[y], suf[y])
    for y in range(max(lo, d), min(hi, rows - d)):
        a0 = y - d  # AND of q[a0 .. a0 + span - 1]
        a1 = a0 + span - 1
        if a0 % span == 0:
            out[y] = pre[a1]
        else:
            _and(suf[a0], pre[a1], out[y])


@kernel
def _block(w):
    """Return the mask of the lowest block of consecutive set bits of ``w`` (non-zero)."""
    low = w & (~w + _ONE)  # the lowest set bit
    rest = w + low  # carries through the block: its bits become 0 (the next bit 1, if any)
    return w & ~rest


@kernel
def count_band(g, p, glut, glo, plut, plo, k, gin, pin, lo, hi, b8, b64, eq, out):
    """Add the interior sums of rows ``lo..hi`` to ``out`` (``(N_SUMS, K)`` int64).

    ``gin``/``pin`` come from :func:`interiors`. Interior pixels come in blocks of one run
    each (a run's interior never touches another run's), so a block's class is the class of
    its first pixel (``glut``/``plut`` give a value's class, ``>= k`` for no class: skipped).
    Each class must be the same value in ``g`` and ``p``: then a pixel of a block of class
    ``c`` holds ``c`` on the other side where ``g == p``. ``b8``, ``b64`` and ``eq`` as for
    :func:`interiors`.
    """
    nw = gin.shape[1]
    for y in range(lo, hi):
        gi = gin[y]
        pi = pin[y]
        if not (_any(gi) or _any(pi)):
            continue
        gr = g[y]
        pr = p[y]
        _equal_bits(gr, pr, b8, b64, eq)
        for q in range(nw):
            w = gi[q]
            while w:  # ground-truth interior blocks
                m = _block(w)
                w &= ~m
                x = (q << 6) + int(_ctz(m))
                c = glut[np.int64(gr[x]) - glo]
                if c < k:
                    out[G_IN, c] += _popcount(m)
                    out[GP_GIN, c] += _popcount(m & eq[q])
            w = pi[q]
            while w:  # prediction interior blocks: at valid ground truth
                m = _block(w)
                w &= ~m
                x = (q << 6) + int(_ctz(m))
                c = plut[np.int64(pr[x]) - plo]
                if c >= k:
                    continue
                both = m & eq[q]
                n = _popcount(m)
                differ = m & ~both  # where gt holds another value: is it a class?
                while differ:
                    j = (q << 6) + int(_ctz(differ))
                    differ &= differ - _ONE
                    n -= glut[np.int64(gr[j]) - glo] >= k
                out[P_IN, c] += n
                out[GP_PIN, c] += _popcount(both)
                out[GP_BOTH, c] += _popcount(both & gi[q])


@kernel
def _count_word(w, q, x0, x1):
    """Set bits of word ``q`` (bits ``64q ..``) among pixels ``x0 .. x1 - 1``."""
    base = q << 6
    if x0 > base:
        w &= _ALL << np.uint64(x0 - base)
    if x1 < base + 64:
        w &= _ALL >> np.uint64(base + 64 - x1)
    return _popcount(w)
