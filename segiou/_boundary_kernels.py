"""Layer 1: Numba kernels of Boundary IoU: which pixels lie within ``d`` of their region's edge.

For a class ``c`` the ground-truth boundary ``G_d`` is ``G`` minus ``G`` eroded ``d`` times by a
3 x 3 square, with the image border as background (Cheng et al. 2021). A pixel of ``G`` survives
the erosion (is *interior*) exactly when every pixel of the ``(2d+1) x (2d+1)`` square around it
lies inside the image and holds ``c``. The same holds for the prediction. The kernels decide that
square test for a band of rows with bit sets (one bit per pixel, 64 pixels a word), in time that
does not grow with ``d`` nor with the number of regions:

* along a row (:func:`windows`): the row window ``[x - d, x + d]`` is constant and inside the
  row when no run of equal values starts in ``x - d + 1 .. x + d`` (the row's end counts as a
  start): an OR over ``2d`` bits of the run starts, built by doubling (up to 64 bits in one
  pass over the row's words): bit set ``H[y]``;
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
``lut[v - lo]`` is a value's class ``0..K-1``, ``K`` for no class (ignored, void) or ``K+1``
(unexpected). Interior pixels of a value of no class are found too, and skipped when counted.

:func:`count_band` adds, per class, over rows ``lo..hi`` and pixels with valid ground truth: the
interior pixels of ``G`` (``G_IN``, not those whose prediction is unexpected: the counts leave
them out), of ``P`` (``P_IN``), and of ``G & P`` interior in ``G``, in ``P`` and in both. With
the confusion counts of the same pixels, ``|G_d| = |G| - G_IN``, ``|P_d| = |P| - P_IN`` and
``|G_d & P_d| = |G & P| - GP_GIN - GP_PIN + GP_BOTH`` (``|G|`` the ground-truth pixels of the
class that the counts hold: its row and its void predictions; ``|P|`` those predicted as it at
valid ground truth, ``|G & P|`` the true positives): the caller counts those anyway, faster
than runs could. ``G`` and ``P`` themselves (what is eroded) are the whole masks' regions: a
pixel left out changes which pixels are counted, never the shape of a region.

Pixels are compared 64 at a time into a word (:func:`_neq64`: a vector compare and its mask)
where a row's pixels lie side by side, and one at a time in the words past the last whole one
and in rows that are not (strided views). Kernels never raise and never write outside their
outputs; callers allocate them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba.core import types
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros
from numba.extending import intrinsic

from segiou._jit import kernel

#: Rows of the per-class sums of :func:`row_runs` and :func:`count_band`.
G_ALL, G_IN, P_ALL, P_IN, GP_ALL, GP_GIN, GP_PIN, GP_BOTH = range(8)
N_SUMS = 8
#: Count trailing zero bits (an LLVM intrinsic; typed Any for mypy).
_ctz: Any = trailing_zeros
#: Count leading zero bits (64 for 0).
_clz: Any = leading_zeros
_ONE = np.uint64(1)
_ALL = ~np.uint64(0)
_U6 = np.uint64(6)
_U56 = np.uint64(56)
_U63 = np.uint64(63)


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


def _neq64_typing(typingctx: Any, a: Any, i: Any, b: Any, j: Any) -> Any:
    """``_neq64(a, i, b, j)``: bit ``t`` set where ``a[i + t] != b[j + t]``, ``t = 0..63``.

    ``a`` and ``b`` are 1-D arrays of one dtype whose elements are adjacent in memory (unit
    stride), and both ranges lie inside them: callers check, nothing here does. LLVM makes it
    a load and a compare per 64 bytes and one move of the compare's mask (on AVX-512
    ``vpcmpneqb`` and ``kmovq``); a loop of ``w |= (a[i] != b[i]) << i`` vectorised less well
    (2.3x slower), the compare into bytes and their packing by multiplications before it ~4x.
    """
    if not (
        isinstance(a, types.Array)
        and isinstance(b, types.Array)
        and a.ndim == b.ndim == 1
        and a.dtype == b.dtype
        and isinstance(a.dtype, types.Integer | types.Boolean)
    ):
        return None
    sig = types.uint64(a, types.intp, b, types.intp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        elt = context.get_data_type(signature.args[0].dtype)
        vec = ir.VectorType(elt, 64)

        def load(arrty: Any, arr: Any, k: Any) -> Any:
            data = context.make_array(arrty)(context, builder, arr).data
            # no source_etype=/typ= (llvmlite >= 0.44 only): the array's data pointer carries
            # its element type in llvmlite's IR layer, old and new
            ptr = builder.gep(data, [k])
            return builder.load(builder.bitcast(ptr, vec.as_pointer()), align=1)

        x = load(signature.args[0], args[0], args[1])
        y = load(signature.args[2], args[2], args[3])
        return builder.bitcast(builder.icmp_unsigned("!=", x, y), ir.IntType(64))

    return sig, codegen


#: One vector compare of 64 pixels (an intrinsic; typed Any for mypy).
_neq64: Any = intrinsic(_neq64_typing)


@kernel
def _changes(row, out, full):
    """Bit ``x`` of ``out``: ``row[x] != row[x - 1]``; bit 0 and bits from the row's end set.

    Words ``0 .. full - 1`` (:func:`_full_words`) 64 pixels at a time, the rest pixel by pixel.
    """
    w = row.size
    done = 0
    if full and w > 64:  # word 0 compares pixels 1..64, word q >= 1 pixels 64q-1..64q+63
        done = full
        out[0] = (_neq64(row, 1, row, 0) << _ONE) | _ONE
        for q in range(1, done):
            out[q] = _neq64(row, 64 * q, row, 64 * q - 1)
    for q in range(done, out.size):
        base = q << 6
        v = _ALL
        for i in range(max(0, min(64, w - base))):
            x = base + i
            if x > 0 and row[x] == row[x - 1]:
                v &= ~(_ONE << np.uint64(i))
        out[q] = v


@kernel
def _full_words(a):
    """Words of a row of the 2-D ``a`` compared 64 pixels at a time (:func:`_neq64`).

    Those that lie inside the row, when the row's pixels are side by side; none otherwise.
    """
    return a.shape[1] >> 6 if a.strides[1] == a.itemsize else 0


@kernel
def _equal_word(r, s, j):
    """Word ``j`` of the bit set of ``r[x] == s[x]`` (bits from the row's end clear).

    Pixel by pixel: for the words :func:`_full_words` leaves.
    """
    base = j << 6
    v = np.uint64(0)
    for i in range(max(0, min(64, r.size - base))):
        if r[base + i] == s[base + i]:
            v |= _ONE << np.uint64(i)
    return v


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
def _or64(c, t, lo, hi):
    """``t[q]`` = the OR of 64 bits of ``c`` from each bit of words ``lo .. hi``.

    Van Herk with words as blocks: bits ``x .. x + 63`` (``x = 64q + i``) are bits ``i..63`` of
    word ``q`` and ``0..i-1`` of word ``q + 1``: a suffix OR of the one (every bit up to its
    highest set bit) and a prefix OR of the next (every bit from its lowest set bit), one shift
    apart. It replaces the first six doubling passes.
    """
    n = hi - lo
    src = c[lo:hi]
    nxt = c[lo + 1 : hi + 1]
    out = t[lo:hi]
    for q in range(n):
        w = src[q]
        z = _clz(w) & _U63  # w == 0: any shift, masked below
        suffix = (_ALL >> z) if w else np.uint64(0)
        v = nxt[q]
        out[q] = suffix | ((v | (~v + _ONE)) << _ONE)


@kernel
def _or_small(c, t, lo, hi, k):
    """``t[q]`` = the OR of ``k`` bits of ``c`` from each bit of words ``lo .. hi``, ``k <= 32``.

    Doubling in registers on a word and the next (``k`` a power of two; a step past ``k``
    shifts by 0 and changes nothing): the bits of the next word that reach the word were built
    from it alone, exactly, as long as ``k <= 32``. One pass over the words, whatever ``k``;
    one pass per step ran 1.1-2x slower (d = 1..31).
    """
    n = hi - lo
    src = c[lo:hi]
    nxt = c[lo + 1 : hi + 1]
    out = t[lo:hi]
    s0 = np.uint64(1 if k > 1 else 0)
    s1 = np.uint64(2 if k > 2 else 0)
    s2 = np.uint64(4 if k > 4 else 0)
    s3 = np.uint64(8 if k > 8 else 0)
    s4 = np.uint64(16 if k > 16 else 0)
    r0, r1, r2, r3, r4 = _U63 - s0, _U63 - s1, _U63 - s2, _U63 - s3, _U63 - s4
    for q in range(n):  # (x << 1) << (63 - s): no shift by 64 when s == 0
        v = src[q]
        w = nxt[q]
        v |= (v >> s0) | ((w << _ONE) << r0)
        w |= w >> s0
        v |= (v >> s1) | ((w << _ONE) << r1)
        w |= w >> s1
        v |= (v >> s2) | ((w << _ONE) << r2)
        w |= w >> s2
        v |= (v >> s3) | ((w << _ONE) << r3)
        w |= w >> s3
        out[q] = v | (v >> s4) | ((w << _ONE) << r4)


@kernel
def windows(a, d, h, c, t):
    """Bit sets ``H`` of a band: row windows ``[x - d, x + d]`` that are constant and inside.

    With ``C`` the run starts of a row (and every bit from the row's end), the window of ``x``
    is constant and inside the row exactly when ``C`` has no bit in ``x - d + 1 .. x + d``: an
    OR over ``2d`` bits. ``U_k``, the OR over ``k`` bits from each bit, is built for the
    largest power of two ``k <= 2d`` (in one pass, :func:`_or_small` or :func:`_or64`, up to
    ``k = 64``, then by doubling over words), and two ``k``-windows that overlap cover the
    ``2d`` bits: two passes over the row's words for ``2d < 128``, one more per doubling,
    whatever its runs. ``c`` and ``t`` are scratch words: ``words(width)`` between ``pad`` set
    words on each side, with ``pad = words(2d) + 1``.
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
    full = _full_words(a)
    # bit x of H: no start in x - d + 1 .. x + d, i.e. bits x + o1 and x + o2 of U_k clear
    for y in range(rows):
        _changes(a[y], c[lo:hi], full)  # bit j set where a run starts (j = 0 too)
        if span >= 64:
            _or64(c, t, lo, hi)
            k = 64
        else:
            k = 2
            while 2 * k <= span:
                k *= 2
            _or_small(c, t, lo, hi, k)
        u, v = t, c  # ping-pong: u holds U_k
        while 2 * k <= span:
            _or_shifted(u, v, lo, hi, k)
            u, v = v, u
            k *= 2
        _not_or2(u, lo, nw, 1 - d, d + 1 - k, h[y])


@kernel
def _not_or2(u, lo, nw, o1, o2, out):
    """``out`` = NOT (bits ``x + o1`` OR bits ``x + o2`` of ``u``), ``o1 <= o2 <= 0``.

    ``u``'s row words start at ``lo`` (set words below it).
    """
    a1 = o1 >> 6  # floor
    a2 = o2 >> 6
    b1 = np.uint64(o1 & 63)
    b2 = np.uint64(o2 & 63)
    c1 = _U63 - b1
    c2 = _U63 - b2
    lo1 = u[lo + a1 : lo + a1 + nw]  # word q + a1 and q + a1 + 1 hold bits 64q + o1 ..
    hi1 = u[lo + a1 + 1 : lo + a1 + 1 + nw]
    lo2 = u[lo + a2 : lo + a2 + nw]
    hi2 = u[lo + a2 + 1 : lo + a2 + 1 + nw]
    for q in range(nw):  # (x << 1) << (63 - b): no shift by 64 when b == 0
        w1 = (lo1[q] >> b1) | ((hi1[q] << _ONE) << c1)
        w2 = (lo2[q] >> b2) | ((hi2[q] << _ONE) << c2)
        out[q] = ~(w1 | w2)


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
def _any(u):
    for k in range(u.size):  # noqa: SIM110 -- as above
        if u[k]:
            return True
    return False


@kernel
def interiors(a, h, d, lo, hi, q, pre, suf, out):
    """Bit sets of interior pixels for rows ``lo..hi`` of the band into ``out[lo:hi]``.

    ``h`` comes from :func:`windows`; ``q``, ``pre`` and ``suf`` (``(rows, words)``) are
    scratch.
    """
    rows, _ = a.shape
    nw = h.shape[1]
    span = 2 * d  # rows of Q a window ANDs: y - d .. y + d - 1
    out[lo:hi] = 0
    if rows - 1 < span:  # no square fits in the band
        return
    full = _full_words(a)
    for y in range(rows - 1):  # Q: constant windows in rows y and y+1 with equal values
        qy = q[y]
        if not _and_any(h[y], h[y + 1], qy):
            continue
        r = a[y]
        s = a[y + 1]
        for j in range(full):  # (a call in this loop made it 2x slower, even if never made)
            if qy[j]:
                b = j << 6
                qy[j] &= ~_neq64(r, b, s, b)
        for j in range(full, nw):
            if qy[j]:
                qy[j] &= _equal_word(r, s, j)
    n = rows - 1
    # loops over words written out: through a call per row (to _and) this ran 2x slower
    for s in range(0, n, span):  # per block of `span` rows: prefix and suffix ANDs
        e = min(s + span, n)
        pre[s] = q[s]
        for y in range(s + 1, e):
            u, v, o = pre[y - 1], q[y], pre[y]
            for j in range(nw):
                o[j] = u[j] & v[j]
        suf[e - 1] = q[e - 1]
        for y in range(e - 2, s - 1, -1):
            u, v, o = suf[y + 1], q[y], suf[y]
            for j in range(nw):
                o[j] = u[j] & v[j]
    for y in range(max(lo, d), min(hi, rows - d)):
        a0 = y - d  # AND of q[a0 .. a0 + span - 1]
        a1 = a0 + span - 1
        if a0 % span == 0:
            out[y] = pre[a1]
        else:
            u, v, o = suf[a0], pre[a1], out[y]
            for j in range(nw):
                o[j] = u[j] & v[j]


@kernel
def _block(w):
    """Return the mask of the lowest block of consecutive set bits of ``w`` (non-zero)."""
    low = w & (~w + _ONE)  # the lowest set bit
    rest = w + low  # carries through the block: its bits become 0 (the next bit 1, if any)
    return w & ~rest


@kernel
def count_band(g, p, glut, glo, plut, plo, k, gin, pin, lo, hi, eq, unexp, out):
    """Add the interior sums of rows ``lo..hi`` to ``out`` (``(N_SUMS, K)`` int64).

    ``gin``/``pin`` come from :func:`interiors`. Interior pixels come in blocks of one run
    each (a run's interior never touches another run's), so a block's class is the class of
    its first pixel (``glut``/``plut`` give a value's code: its class, ``k`` ignored or void,
    ``k + 1`` unexpected; ``>= k`` is no class: skipped). Each class must be the same value in
    ``g`` and ``p``: then a pixel of a block of class ``c`` holds ``c`` on the other side where
    ``g == p``. With ``unexp``, a ground-truth interior pixel whose prediction is unexpected
    is not counted in ``G_IN`` (the counts leave such a pixel out). ``eq`` is scratch
    (``words(width)``).
    """
    nw = gin.shape[1]
    full = min(_full_words(g), _full_words(p))
    for y in range(lo, hi):
        gi = gin[y]
        pi = pin[y]
        if not (_any(gi) or _any(pi)):
            continue
        gr = g[y]
        pr = p[y]
        for j in range(full):
            b = j << 6
            eq[j] = ~_neq64(gr, b, pr, b)
        for j in range(full, nw):
            eq[j] = _equal_word(gr, pr, j)
        for q in range(nw):
            w = gi[q]
            while w:  # ground-truth interior blocks
                m = _block(w)
                w &= ~m
                x = (q << 6) + int(_ctz(m))
                c = glut[np.int64(gr[x]) - glo]
                if c < k:
                    n = _popcount(m)
                    if unexp:  # left out of the counts: an unexpected prediction
                        differ = m & ~eq[q]
                        while differ:
                            j = (q << 6) + int(_ctz(differ))
                            differ &= differ - _ONE
                            n -= plut[np.int64(pr[j]) - plo] > k
                    out[G_IN, c] += n
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
