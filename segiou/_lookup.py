"""How raw label values become classes: :class:`Lookup`, the tables the kernels read.

A label spec maps raw values (ground truth and prediction) to classes, ignored/void or
nothing (unexpected). :class:`Lookup` compiles that once per accumulator into the lookup
tables of every counting kernel: the generic kernels' tables (with interleaved copies while
the table is small), the word path's byte codes and tables, and the per-image entries' codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from segiou import _word_kernels as _words
from segiou._typing import IntArray
from segiou._unexpected import IGNORE, span_message
from segiou.errors import LabelSpecError

__all__ = ["MAX_WORD_TABLE", "Lookup"]

#: Largest lookup table (entries) built for a raw-id range.
_MAX_LUT = 1 << 22
#: Interleaved copies per table cell while the whole table stays small.
_COPIES = 8
_MAX_INTERLEAVED_CELLS = 32768
#: Largest word-path table (counters): 16 MiB.
MAX_WORD_TABLE = 1 << 21


def _lut(
    mapping: Mapping[int, int], num_classes: int, scale: int, side: str
) -> tuple[IntArray, int, int]:
    """Build ``(lut, lo, unexpected_offset)`` with ``lut[v - lo] = code(v) * scale``."""
    unexpected = (num_classes + 1) * scale
    if not mapping:
        return np.zeros(0, dtype=np.int64), 0, unexpected
    lo, hi = min(mapping), max(mapping)
    if hi - lo + 1 > _MAX_LUT:
        raise LabelSpecError(span_message(mapping, lo, hi, side, _MAX_LUT))
    lut = np.full(hi - lo + 1, unexpected, dtype=np.int64)
    for raw, cls in mapping.items():
        code = num_classes if cls == IGNORE else cls
        lut[raw - lo] = code * scale
    return lut, lo, unexpected


@dataclass(frozen=True, eq=False)
class Lookup:
    """How raw label values become classes: compiled once per accumulator.

    Parameters
    ----------
    num_classes : int
        Number of evaluated classes ``K``.
    gt_map : Mapping[int, int]
        Raw ground-truth value -> class ``0..K-1`` or :data:`IGNORE`. Other values are
        unexpected.
    pred_map : Mapping[int, int]
        Raw predicted value -> class ``0..K-1`` or :data:`IGNORE` (void). Other values are
        unexpected.
    """

    num_classes: int
    gt_map: Mapping[int, int]
    pred_map: Mapping[int, int]
    copies: int = field(init=False)
    glut: IntArray = field(init=False, repr=False)
    glo: int = field(init=False)
    gunexp: int = field(init=False)
    plut: IntArray = field(init=False, repr=False)
    plo: int = field(init=False)
    punexp: int = field(init=False)

    def __post_init__(self) -> None:
        k = self.num_classes
        width = k + 2
        copies = _COPIES if width * width <= _MAX_INTERLEAVED_CELLS else 1
        glut, glo, gunexp = _lut(self.gt_map, k, width * copies, "ground-truth")
        plut, plo, punexp = _lut(self.pred_map, k, copies, "prediction")
        for name, value in [
            ("copies", copies),
            ("glut", glut),
            ("glo", glo),
            ("gunexp", gunexp),
            ("plut", plut),
            ("plo", plo),
            ("punexp", punexp),
        ]:
            object.__setattr__(self, name, value)

    def for_bool(self, gt: bool, pred: bool) -> Lookup:
        """Return this lookup for bool masks on the given sides: non-zero bytes read as id 1.

        Kernels read a bool mask as its bytes. numpy reads any non-zero byte as True (a mask
        made with ``.view(bool)`` may hold 2 or 255), so a bool side maps each byte ``b`` to
        the class of id ``1 if b else 0``: segiou counts what numpy shows. Cached.
        """
        if not (gt or pred):
            return self
        cache = self.__dict__.setdefault("_bool_cache", {})
        key = (gt, pred)
        if key not in cache:
            cache[key] = Lookup(
                self.num_classes,
                _bool_bytes(self.gt_map) if gt else self.gt_map,
                _bool_bytes(self.pred_map) if pred else self.pred_map,
            )
        out: Lookup = cache[key]
        return out

    def word_codes(self, gdtype: np.dtype, pdtype: np.dtype) -> tuple[IntArray, IntArray]:
        """Offsets in a word-path table of each byte value of 8-bit masks of these dtypes.

        ``(gcode, pcode)``, ``uint64``: ``code(b) * (K+2) * COPIES`` and ``code(b) * COPIES``
        for byte ``b`` read as the dtype's value (signed for int8; a wider dtype narrowed to
        bytes reads them unsigned). Cached.
        """
        cache = self.__dict__.setdefault("_word_cache", {})
        key = (
            gdtype.kind == "i" and gdtype.itemsize == 1,
            pdtype.kind == "i" and pdtype.itemsize == 1,
        )
        if key not in cache:
            k, c = self.num_classes, _words.COPIES
            g = _byte_codes(self.gt_map, k, key[0]) * ((k + 2) * c)
            p = _byte_codes(self.pred_map, k, key[1]) * c
            cache[key] = (g.astype(np.uint64), p.astype(np.uint64))
        codes: tuple[IntArray, IntArray] = cache[key]
        return codes

    def word_luts(self) -> tuple[IntArray, int, int, IntArray, int, int]:
        """Return the generic kernel's lookup tables scaled for a word-path table (``COPIES``)."""
        if self.copies == _words.COPIES:
            return self.glut, self.glo, self.gunexp, self.plut, self.plo, self.punexp
        cache = self.__dict__.setdefault("_word_luts", [])
        if not cache:
            k, c = self.num_classes, _words.COPIES
            cache.append((*_lut(self.gt_map, k, (k + 2) * c, "ground-truth"),
                          *_lut(self.pred_map, k, c, "prediction")))  # fmt: skip
        luts: tuple[IntArray, int, int, IntArray, int, int] = cache[0]
        return luts

    def code_luts(self) -> tuple[IntArray, int, int, IntArray, int, int]:
        """Return the lookup tables scaled for one copy per cell: ``g * (K+2)`` and ``p``."""
        if self.copies == 1:
            return self.glut, self.glo, self.gunexp, self.plut, self.plo, self.punexp
        cache = self.__dict__.setdefault("_code_luts", [])
        if not cache:
            k = self.num_classes
            cache.append((*_lut(self.gt_map, k, k + 2, "ground-truth"),
                          *_lut(self.pred_map, k, 1, "prediction")))  # fmt: skip
        luts: tuple[IntArray, int, int, IntArray, int, int] = cache[0]
        return luts

    @property
    def table_size(self) -> int:
        """Number of int64 counters in one flat table of the generic kernel."""
        return (self.num_classes + 2) ** 2 * self.copies

    @property
    def word_table_size(self) -> int:
        """Number of int64 counters in one flat table of the word path."""
        return (self.num_classes + 2) ** 2 * _words.COPIES

    @property
    def words_fit(self) -> bool:
        """Whether the word path's tables stay small (16 MiB each; up to ~510 classes).

        8-bit masks hold at most 256 values; a spec of thousands of classes read from wider
        masks would make word tables of hundreds of MiB (folded on every call): the generic
        kernel's tables are 8 times smaller.
        """
        return self.word_table_size <= MAX_WORD_TABLE


def _bool_bytes(mapping: Mapping[int, int]) -> dict[int, int]:
    """Extend ``mapping`` to the 256 bytes of a bool mask: byte ``b`` reads as id ``1 if b else 0``."""
    return {b: mapping[min(b, 1)] for b in range(256) if min(b, 1) in mapping}


def _byte_codes(mapping: Mapping[int, int], num_classes: int, signed: bool) -> IntArray:
    """Code (class, K = ignore/void, K+1 = unexpected) of each of the 256 byte values."""
    values = np.arange(256, dtype=np.int64)
    if signed:
        values = np.where(values < 128, values, values - 256)
    codes = np.full(256, num_classes + 1, dtype=np.int64)
    for i, v in enumerate(values.tolist()):
        cls = mapping.get(v)
        if cls is not None:
            codes[i] = num_classes if cls == IGNORE else cls
    return codes
