"""Typed wrappers of the Boundary IoU kernels: the width, value tables, scratch, band counting.

:class:`BoundaryWidth` says how wide the boundary is (a ratio of the image diagonal, or pixels).
:class:`BandCounter` counts one band of rows of one image (with its halo) into sums that
:func:`boundary_counts`, with the confusion counts of the same pixels, turns into per-class
``|G_d & P_d|``, ``|G_d|`` and ``|P_d|`` (see :mod:`segiou._boundary_kernels`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from segiou import _boundary_kernels as bk
from segiou._count import IGNORE, Lookup
from segiou._typing import IntArray
from segiou.errors import UsageError

__all__ = ["DEFAULT_RATIO", "MAX_PIXELS", "BandCounter", "BoundaryWidth", "boundary_counts"]

#: The paper's width: 2% of the image diagonal (Cheng et al. 2021).
DEFAULT_RATIO = 0.02
#: The widest boundary in pixels: wider than any image side it could matter for (a boundary as
#: wide as half the image's shorter side already covers the whole image).
MAX_PIXELS = 1 << 20


@dataclass(frozen=True)
class BoundaryWidth:
    """How wide the boundary band of Boundary IoU is.

    Parameters
    ----------
    ratio : float, optional
        A share of the image diagonal: ``d = max(1, round(ratio * sqrt(H**2 + W**2)))`` pixels
        per image (Python's ``round``, as the paper's code), in ``(0, 1]``.
    pixels : int, optional
        A fixed width in pixels, 1 to :data:`MAX_PIXELS` (1,048,576). Exactly one of the two is
        given.

    Raises
    ------
    UsageError
        Neither or both given, or a value out of range.

    Examples
    --------
    >>> BoundaryWidth(ratio=0.02).pixels_for(1024, 2048)
    46
    >>> BoundaryWidth.parse("5px").pixels_for(1024, 2048)
    5
    """

    ratio: float | None = DEFAULT_RATIO
    pixels: int | None = None

    def __post_init__(self) -> None:
        if (self.ratio is None) == (self.pixels is None):
            msg = "boundary width: give a ratio of the diagonal or a number of pixels, not both"
            raise UsageError(msg)
        if self.ratio is not None:
            r = self.ratio
            if isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r <= 1:
                msg = (
                    f"boundary width ratio {r!r} must be a number in (0, 1] (a share of the "
                    "image diagonal; the paper's 0.02), or give pixels as '5px'"
                )
                raise UsageError(msg)
            object.__setattr__(self, "ratio", float(r))
        else:
            n = self.pixels
            if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
                msg = f"boundary width {n!r} pixels must be a whole number of at least 1"
                raise UsageError(msg)
            if n > MAX_PIXELS:
                msg = (
                    f"boundary width {n:,} pixels is more than the {MAX_PIXELS:,} segiou "
                    "allows (a boundary as wide as half an image's shorter side already covers "
                    "the whole image); give a width such as '5px' or a ratio such as 0.02"
                )
                raise UsageError(msg)
            object.__setattr__(self, "pixels", int(n))

    @classmethod
    def parse(cls, value: object) -> BoundaryWidth | None:
        """Read a ``boundary=`` option.

        ``None``/``False`` (off), ``True`` (ratio 0.02), a ratio (``0.01``, ``"0.01"``), pixels
        (``"5px"``), a mapping from :meth:`to_dict`, or a width.

        Parameters
        ----------
        value : object
            The option as given.

        Returns
        -------
        BoundaryWidth or None
            ``None`` when Boundary IoU is off.

        Raises
        ------
        UsageError
            Anything else (an int is refused: say ``"5px"`` for pixels or ``0.05`` for a ratio).
        """
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, BoundaryWidth):
            return value
        if isinstance(value, Mapping):
            return cls.from_dict(value)
        if isinstance(value, float):
            return cls(ratio=value)
        if isinstance(value, str):
            text = value.strip().lower()
            try:
                number: int | float = int(text[:-2].strip()) if text.endswith("px") else float(text)
            except ValueError:
                pass
            else:  # a number: refused with the reason it is out of range
                if isinstance(number, int):
                    return cls(ratio=None, pixels=number)
                return cls(ratio=number)
        msg = (
            f"boundary={value!r} is not a boundary width; give True (2% of the image "
            "diagonal), a ratio such as 0.01, or pixels such as '5px'"
        )
        raise UsageError(msg)

    def pixels_for(self, height: int, width: int) -> int:
        """Return ``d`` in pixels for an image of ``height x width``.

        Parameters
        ----------
        height, width : int
            The image size.

        Returns
        -------
        int
            At least 1.
        """
        if self.pixels is not None:
            return self.pixels
        assert self.ratio is not None
        return max(1, round(self.ratio * math.sqrt(height * height + width * width)))

    def widths_for(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Return the widths in pixels the images of a batch of masks of ``shape`` get.

        The last two axes are an image (a 1-D mask is one row, a scalar one pixel, as counting
        reads them); a batch of no image gets none.
        """
        if not shape or 0 in shape[:-2]:
            return () if shape else (self.pixels_for(1, 1),)
        h, w = (1, 1, *shape)[-2:]
        return (self.pixels_for(h, w),)

    def to_dict(self) -> dict[str, Any]:
        """``{"ratio": r}`` or ``{"pixels": n}`` (JSON-safe)."""
        return {"ratio": self.ratio} if self.ratio is not None else {"pixels": self.pixels}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BoundaryWidth:
        """Read :meth:`to_dict` back.

        Parameters
        ----------
        d : mapping
            ``{"ratio": r}`` or ``{"pixels": n}``.

        Returns
        -------
        BoundaryWidth

        Raises
        ------
        UsageError
            Another form.
        """
        if set(d) == {"ratio"}:
            return cls(ratio=d["ratio"])
        if set(d) == {"pixels"}:
            return cls(ratio=None, pixels=d["pixels"])
        msg = f"boundary width {dict(d)!r}: expected {{'ratio': r}} or {{'pixels': n}}"
        raise UsageError(msg)

    def __str__(self) -> str:
        if self.pixels is not None:
            return f"{self.pixels} px"
        return f"{self.ratio:g} of the image diagonal"


def boundary_counts(
    sums: IntArray, gt_pixels: IntArray, tp: IntArray, pred_valid: IntArray
) -> IntArray:
    """Per-class ``|G_d & P_d|``, ``|G_d|``, ``|P_d|`` from the kernels' sums and the counts.

    Parameters
    ----------
    sums : ndarray of int64, shape (8, K)
        What :meth:`BandCounter.count` added up over some pixels.
    gt_pixels, tp, pred_valid : ndarray of int64, shape (K,)
        Of the same pixels: those whose ground truth is class ``c`` and that the counts hold
        (its row of the confusion matrix and its void predictions: an unexpected prediction is
        left out, as the counts leave it out), those where ground truth and prediction are both
        ``c`` (the confusion matrix's diagonal), and those predicted ``c`` at valid ground
        truth (its column sums).

    Returns
    -------
    ndarray of int64, shape (3, K)
        Rows: intersection, ground-truth boundary, predicted boundary (at valid ground truth).
    """
    out = np.empty((3, sums.shape[1]), dtype=np.int64)
    out[0] = tp - sums[bk.GP_GIN] - sums[bk.GP_PIN] + sums[bk.GP_BOTH]
    out[1] = gt_pixels - sums[bk.G_IN]
    out[2] = pred_valid - sums[bk.P_IN]
    return out


def _class_values(mapping: Mapping[int, int], k: int) -> dict[int, int] | None:
    """Class -> its one value, or None when some class has several values (or none)."""
    out: dict[int, int] = {}
    for v, c in mapping.items():
        if c == IGNORE:
            continue
        if c in out:
            return None
        out[c] = v
    return out if len(out) == k else None


class BandCounter:
    """Interior sums of Boundary IoU for bands of rows, one lookup (an accumulator's).

    Masks whose classes are each one value, the same on both sides, in one 8- or 16-bit dtype,
    are read as they are; others are first mapped to codes (one pass over the band).
    """

    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup
        k = lookup.num_classes
        if k + 2 > 1 << 16:
            msg = f"Boundary IoU counts up to 65534 classes; this spec has {k}"
            raise UsageError(msg)
        gv = _class_values(lookup.gt_map, k)
        pv = _class_values(lookup.pred_map, k)
        self._same_values = gv is not None and gv == pv
        self._tables: dict[tuple[str, str], tuple[IntArray, int]] = {}
        self._code_dtype = np.dtype(np.uint8 if k + 2 <= 256 else np.uint16)
        self._scratch: dict[tuple[int, int, int], dict[str, np.ndarray]] = {}

    def _table(self, side: str, dtype: np.dtype) -> tuple[IntArray, int]:
        """``(lut, lo)``: code of every value of a 1- or 2-byte dtype.

        Class ``0..K-1``, ``K`` ignored or void, ``K+1`` unexpected.
        """
        key = (side, dtype.str)
        if key not in self._tables:
            info = np.iinfo(dtype)
            k = self.lookup.num_classes
            lut = np.full(int(info.max) - int(info.min) + 1, k + 1, dtype=np.int64)
            mapping = self.lookup.gt_map if side == "gt" else self.lookup.pred_map
            for v, c in mapping.items():
                if info.min <= v <= info.max:
                    lut[v - int(info.min)] = k if c == IGNORE else c
            self._tables[key] = (lut, int(info.min))
        return self._tables[key]

    def _codes(self, a: np.ndarray, side: str) -> np.ndarray:
        """Return the band as codes (class, K ignored or void, K+1 unexpected), 8 or 16 bits."""
        k = self.lookup.num_classes
        mapping = self.lookup.gt_map if side == "gt" else self.lookup.pred_map
        key = ("codes-" + side, a.dtype.str)
        if key not in self._tables:
            lo = min(mapping) if mapping else 0
            hi = max(mapping) if mapping else 0
            lut = np.full(hi - lo + 1, k + 1, dtype=np.int64)
            for v, c in mapping.items():
                lut[v - lo] = k if c == IGNORE else c
            self._tables[key] = (lut, lo)
        lut, lo = self._tables[key]
        if a.dtype == np.bool_:
            a = a.view(np.uint8) != 0  # numpy's reading of a bool: any non-zero byte is True
            a = a.view(np.uint8)
        elif a.dtype == np.uint64 and mapping and min(mapping) < 0:
            big = a >= np.uint64(1 << 63)  # would read as negative ids: make them unexpected
            if big.any():
                a = np.where(big, np.uint64(max(mapping) + 1), a)
        out = np.empty(a.shape, dtype=self._code_dtype)
        bk.map_codes(a, lut, lo, k + 1, out)
        return out

    def _buffers(self, rows: int, width: int, d: int) -> dict[str, np.ndarray]:
        key = (rows, width, d)
        s = self._scratch.get(key)
        if s is None:
            self._scratch.clear()  # one band shape at a time: the last one is reused
            nw = bk.words(width)
            s = {"eq": np.empty(nw, dtype=np.uint64)}
            pad = bk.words(2 * d) + 1  # set words around a row's words, for shifted reads
            for name in ("c", "t"):
                s[name] = np.empty(nw + 2 * pad, dtype=np.uint64)
            for name in ("gh", "ph", "q", "pre", "suf", "gin", "pin"):
                s[name] = np.empty((rows, nw), dtype=np.uint64)
            self._scratch[key] = s
        return s

    def count(self, g: np.ndarray, p: np.ndarray, lo: int, hi: int, d: int, *,
              unexpected: bool = True) -> IntArray:  # fmt: skip
        """Interior sums of rows ``lo..hi`` of a band (its halo rows around them).

        Parameters
        ----------
        g, p : ndarray, shape (rows, width)
            Ground truth and prediction of the band: the counted rows with up to ``d`` rows of
            the image above (``lo`` of them) and below; native byte order.
        lo, hi : int
            The counted rows, ``0 <= lo <= hi <= rows``.
        d : int
            Boundary width in pixels (at least 1).
        unexpected : bool, default True
            Whether the band may hold unexpected predictions at valid ground truth: ground-truth
            interior pixels under them are then left out of ``G_IN`` (the counts leave them
            out, so ``|G|`` does). ``False`` (no such pixel: every prediction was checked, or
            one would be refused) skips that test.

        Returns
        -------
        ndarray of int64, shape (8, K)
            Sums for :func:`boundary_counts` (with the confusion counts of the counted rows).
        """
        k = self.lookup.num_classes
        out = np.zeros((bk.N_SUMS, k), dtype=np.int64)
        rows, width = g.shape
        if rows == 0 or width == 0 or hi <= lo:
            return out
        fast = (
            self._same_values
            and g.dtype == p.dtype
            and g.dtype.kind in "iu"
            and g.dtype.itemsize <= 2
        )
        if fast:
            (glut, glo), (plut, plo) = self._table("gt", g.dtype), self._table("pred", p.dtype)
        else:
            g, p = self._codes(g, "gt"), self._codes(p, "pred")
            glut, glo = self._identity(), 0
            plut, plo = glut, 0
        s = self._buffers(rows, width, d)
        for a, h, name in ((g, s["gh"], "gin"), (p, s["ph"], "pin")):
            bk.windows(a, d, h, s["c"], s["t"])
            bk.interiors(a, h, d, lo, hi, s["q"], s["pre"], s["suf"], s[name])
        bk.count_band(g, p, glut, glo, plut, plo, k, s["gin"], s["pin"], lo, hi, s["eq"],
                      unexpected, out)  # fmt: skip
        return out

    def _identity(self) -> IntArray:
        """Code of every value of the code dtype (class, ``K`` ignored/void, ``K+1`` unexpected)."""
        key = ("identity", self._code_dtype.str)
        if key not in self._tables:
            k = self.lookup.num_classes
            n = 256 if self._code_dtype.itemsize == 1 else 65536
            self._tables[key] = (np.minimum(np.arange(n, dtype=np.int64), k + 1), 0)
        return self._tables[key][0]
