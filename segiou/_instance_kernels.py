"""Layer 1: the Numba kernel of instance-level IoU (iIoU): per instance, pixels and true positives.

Per ground-truth instance: its pixels, and how many of them the prediction gave its class and its
instance category. Instance ids follow Cityscapes' ``*_gtFine_instanceIds.png`` (cityscapesScripts'
``json2instanceImg``): a value of 1000 or more is the instance ``value % 1000`` of the label
``value // 1000``; a value below 1000 is a plain label id, no instance. ``ilut[label -
ilo]`` is the label's class (``>= 0``), ``-1`` for a label that is not evaluated (its instances
are skipped, as cityscapesScripts skips labels ignored in evaluation), ``-2`` for a label the
spec does not know and ``-3`` for a class without an average instance size (both reported by
the caller; a plain value is reported only when its label is unknown). ``tab[value - base]``
gets ``(pixels, predicted as its class, predicted in its instance category)``, over the pixels
the confusion counts hold or ignore: a pixel they leave out as unexpected (an unexpected
ground-truth value, or an unexpected prediction at valid ground truth) is no pixel of its
instance. The kernel also counts, per instance category, pixels with valid ground truth outside
that category whose prediction is a value of no class that belongs to the category
(cityscapesScripts' category iIoU counts such a prediction, e.g. Cityscapes "caravan", as a false
positive of "vehicle"). It never raises and never writes outside its outputs.
"""

from __future__ import annotations

import numpy as np

from segiou._jit import kernel

#: Instance values from this on are instances (``label * 1000 + k``, ``k >= 0``).
FIRST = 1000


@kernel
def count_instances(inst, g, p, ilut, ilo, base, gcode, glo, pcode, plo, pcat, ccat, icat, k, tab,
                    fp):  # fmt: skip
    """Add one image region's instance pixels to ``tab`` and category false positives to ``fp``.

    ``tab[value - base]`` is an instance value's row: the table spans the labels of classes
    with an average instance size only (``base`` is the first value of the lowest of them), so
    a value of another label never reaches it (a row outside ``tab`` is never written).
    ``gcode``/``pcode`` give the code of a ground-truth / predicted value (class, ``k`` ignored
    or void, ``k + 1`` unexpected outside the tables); ``pcat`` the instance category of a
    predicted value (``-1``: none); ``ccat``/``icat`` each class's category / instance category.
    A pixel the confusion counts leave out as unexpected (an unexpected ground-truth value, or
    an unexpected prediction at valid ground truth) is left out of its instance: not in its
    pixels, true positives or misses.
    Returns the flat index of the first pixel whose label is unknown (``ilut`` ``-2``: a plain
    value or an instance) or, for an instance, has no instance size (``-3``), else ``-1``.
    """
    rows, width = inst.shape
    ni = np.uint64(ilut.size)
    ng = np.uint64(gcode.size)
    npn = np.uint64(pcode.size)
    nt = np.uint64(tab.shape[0])
    bad = -1
    for y in range(rows):
        for x in range(width):
            v = np.int64(inst[y, x])
            u = np.uint64(np.int64(p[y, x]) - plo)
            pc = np.int64(pcode[u]) if u < npn else k + 1
            pk = np.int64(pcat[u]) if u < npn else -1
            ug = np.uint64(np.int64(g[y, x]) - glo)
            gc = np.int64(gcode[ug]) if ug < ng else k + 1
            if v >= FIRST:
                ul = np.uint64(v // FIRST - ilo)
                c = np.int64(ilut[ul]) if ul < ni else -2
                if c >= 0:
                    # a pixel the counts leave out (unexpected ground truth, or an unexpected
                    # prediction at valid ground truth) is no pixel of its instance either
                    j = np.uint64(v - base)
                    if j < nt and gc != k + 1 and not (gc < k and pc == k + 1):
                        tab[j, 0] += 1
                        tab[j, 1] += pc == c
                        ic = icat[c]
                        tab[j, 2] += ic >= 0 and pk == ic
                elif c < -1 and bad < 0:
                    bad = y * width + x
            elif bad < 0:  # a plain label id: it must be one of the spec
                ul = np.uint64(v - ilo)
                if ul >= ni or ilut[ul] == -2:
                    bad = y * width + x
            if pc == k and pk >= 0 and gc < k and ccat[gc] != pk:
                fp[pk] += 1
    return bad
