"""Layer 1: Numba kernels counting each image straight into its sparse entries.

Per-image rows (:class:`segiou.images.ImageRows`) keep the non-zero cells of each image's
``(K+2) x (K+2)`` code table. Counting an image into a dense table and folding it costs
``(K+2)**2`` cells per image whatever the image holds (16.8 million cells for 4,096 classes: a
16-pixel image took 0.38 s). These kernels count an image into a small open-addressing hash
table of its cells instead (sized to the image: at most one cell per pixel), then write the
cells it touched in ascending code order, as ``numpy.nonzero`` lists a dense table's cells.

Cell codes are ``g * (K+2) + p`` for ground-truth code ``g`` and prediction code ``p``
(``0..K-1`` classes, ``K`` ignored/void, ``K+1`` unexpected), looked up through tables scaled
for one copy per cell (``glut[v - glo] = g * (K+2)``, ``plut[v - plo] = p``; values outside a
table take ``gunexp``/``punexp``), as in :mod:`segiou._kernels`. A ground-truth code ``K`` or
``K+1`` is folded into the one cell ``(g, g)`` whatever the prediction, as
:meth:`ImageRows.from_tables` folds those rows. As there, a row is counted run by run (a
repeated raw pair is looked up once) when a quarter of its first ``ROW_SAMPLE`` pixels repeat
their left neighbour's pair, else pixel by pixel. The kernels never raise and never write
outside their outputs.
"""

# Numba kernels, typed by their wrapper in segiou._count, as the kernel modules pyproject.toml
# lists for mypy (numba signatures are not PEP 484):
# mypy: allow-untyped-defs, allow-untyped-decorators

from __future__ import annotations

import secrets

import numba as nb
import numpy as np

from segiou._jit import kernel, parallel_kernel
from segiou._kernels import ROW_SAMPLE

__all__ = ["MIX", "count_entries", "count_entries_parallel", "hash_bits"]

#: The hash table's multiplier: odd, drawn once per process, passed to the kernels (a constant
#: would be compiled into the cached kernels). A fixed public one let a crafted mask put every
#: cell of an image into one run of slots: 36 s for a 512 x 512 image of 4,094 classes against
#: 0.7 s for the dense tables (each insertion probing across the whole run).
MIX = np.uint64(secrets.randbits(64) | 1)


#: A table of every cell (slot = cell code, no hashing) up to this many cells (1 MiB) ...
DIRECT_MAX = 1 << 17
#: ... or up to this many times the slots of a hash table (16 bytes a slot, 8 a cell).
DIRECT_SHARE = 16


def hash_bits(cells: int, width: int) -> int:
    """Bits of a hash table for at most ``cells`` distinct cells (load factor at most 1/2).

    0 when a table of every one of the ``width**2`` cells, each at its own slot, is used
    instead: small (:data:`DIRECT_MAX`) or not much larger than the hash table
    (:data:`DIRECT_SHARE`). An image touching many cells then has them listed by a scan of
    the table, not sorted: a hash table is for images much smaller than the table.
    """
    bits = max(4, int(2 * max(cells, 1) - 1).bit_length())
    return 0 if width * width <= max(DIRECT_MAX, DIRECT_SHARE << bits) else bits


@kernel
def _cell(gv, pv, glut, glo, gunexp, plut, plo, punexp, gsize, psize, fold, width):
    """Folded cell code of the raw pair ``(gv, pv)``."""
    ug = np.uint64(np.int64(gv) - glo)
    a = glut[ug] if ug < gsize else gunexp
    if a >= fold:  # ignored or unexpected ground truth: one cell, whatever the prediction
        return a + a // width
    up = np.uint64(np.int64(pv) - plo)
    return a + (plut[up] if up < psize else punexp)


@kernel
def _emit(tab, used, m, direct, cells, counts, pos):
    """Write the ``m`` cells of one image (``used``) in ascending order from ``pos``; clear them.

    Returns the new end. Apart from the counting loop (which depends on the masks' dtypes): this
    is compiled once, not per pair of dtypes.
    """
    if direct and 16 * m > tab.size:  # many cells: a scan of the table lists them in order
        for s in range(tab.size):
            if tab[s]:
                cells[pos] = s
                counts[pos] = tab[s]
                tab[s] = 0
                pos += 1
    elif direct:
        slots = np.sort(used[:m])
        for j in range(m):
            s = slots[j]
            cells[pos] = s
            counts[pos] = tab[s]
            tab[s] = 0
            pos += 1
    else:
        slots = used[:m]
        order = np.argsort(tab[2 * slots])
        for j in range(m):
            s = slots[order[j]]
            cells[pos] = tab[2 * s]
            counts[pos] = tab[2 * s + 1]
            tab[2 * s] = -1
            pos += 1
    return pos


@kernel
def count_entries(g, p, i0, i1, glut, glo, gunexp, plut, plo, punexp, width, bits, mix, cells,
                  counts, n_cells, start):  # fmt: skip
    """Count images ``[i0, i1)`` of ``g``/``p`` (``N x H x W``, any strides) into entries.

    Writes each image's cells (ascending codes) and pixel counts to ``cells``/``counts`` from
    ``start`` on, and the number of cells of image ``i`` to ``n_cells[i]``; returns the end
    offset. The caller sizes the outputs (at most ``H * W`` cells per image) and ``bits``
    (:func:`hash_bits`; 0: a table of every cell, ``tab[cell]`` its count). Else ``tab`` is a
    hash table of slot pairs ``(cell, count)`` (cell -1: a free slot), probed linearly from
    the cell's hash (``cell * mix`` shifted: :data:`MIX`). (The insertion stays written out in the loop: as a function taking the
    tables it ran 40 times slower.)
    """
    _n, height, wid = g.shape
    direct = bits == 0
    size = width * width if direct else 1 << bits
    mask = size - 1
    shift = np.uint64(64 - max(bits, 1))
    if direct:
        tab = np.zeros(size, dtype=np.int64)
    else:
        tab = np.empty(2 * size, dtype=np.int64)
        tab[0::2] = -1
    used = np.zeros(min(height * wid, size), dtype=np.int64)  # slots in use, in first-use order
    gsize = np.uint64(glut.size)
    psize = np.uint64(plut.size)
    fold = np.int64(width - 2) * width
    pos = start
    for i in range(i0, i1):
        m = 0
        for h in range(height):
            grow = g[i, h]
            prow = p[i, h]
            sm = min(wid, ROW_SAMPLE)
            rep = 0
            for x in range(1, sm):
                rep += (grow[x] == grow[x - 1]) & (prow[x] == prow[x - 1])
            runs = 4 * rep >= sm  # many repeated pairs (real masks): run by run
            x = 0
            while x < wid:
                gv = grow[x]
                pv = prow[x]
                run = 1
                if runs:
                    while x + run < wid and grow[x + run] == gv and prow[x + run] == pv:
                        run += 1
                x += run
                cell = _cell(gv, pv, glut, glo, gunexp, plut, plo, punexp, gsize, psize, fold,
                             width)  # fmt: skip
                if direct:
                    if tab[cell] == 0:
                        used[m] = cell
                        m += 1
                    tab[cell] += run
                    continue
                s = np.int64((np.uint64(cell) * mix) >> shift)
                while True:
                    key = tab[2 * s]
                    if key == cell:
                        tab[2 * s + 1] += run
                        break
                    if key < 0:
                        tab[2 * s] = cell
                        tab[2 * s + 1] = run
                        used[m] = s
                        m += 1
                        break
                    s = (s + 1) & mask
        pos = _emit(tab, used, m, direct, cells, counts, pos)
        n_cells[i] = m
    return pos


@parallel_kernel
def count_entries_parallel(g, p, glut, glo, gunexp, plut, plo, punexp, width, bits, mix, cap,
                           cells, counts, n_cells, ends):  # fmt: skip
    """Split the images into ``ends.size`` contiguous ranges, one thread each.

    The range from image ``i0`` writes its entries from ``i0 * cap`` on (``cap``: the most cells
    an image can have); ``ends[w]`` gets where range ``w``'s entries end.
    """
    workers = ends.size
    n = g.shape[0]
    for w in nb.prange(workers):
        i0 = n * w // workers
        i1 = n * (w + 1) // workers
        ends[w] = count_entries(g, p, i0, i1, glut, glo, gunexp, plut, plo, punexp, width, bits,
                                mix, cells, counts, n_cells, i0 * cap)  # fmt: skip
