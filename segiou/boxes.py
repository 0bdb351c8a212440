"""Overlap of axis-aligned bounding boxes: IoU, Dice, GIoU, DIoU and CIoU.

Every metric comes in two shapes: *pairwise* (``pairwise=True``, the default), an ``N x M`` matrix
scoring every box of ``boxes1`` against every box of ``boxes2``, and *element-wise*
(``pairwise=False``), scoring ``boxes1[k]`` against ``boxes2[k]``.

Boxes are given in one of three formats, in image coordinates (origin at the top-left corner,
x to the right, y downward):

========== =============================================== ==========================
format     meaning                                         constraint
========== =============================================== ==========================
``xyxy``   ``(x1, y1, x2, y2)``: top-left, bottom-right    ``x1 <= x2``, ``y1 <= y2``
``xywh``   ``(x, y, w, h)``: top-left corner and size      ``w >= 0``, ``h >= 0``
``cxcywh`` ``(cx, cy, w, h)``: centre and size             ``w >= 0``, ``h >= 0``
========== =============================================== ==========================

The pairwise metrics run in Numba kernels (one pass, no ``N x M x 2`` temporaries); the
element-wise ones in plain numpy. Both evaluate the same formulas in the same order, so
``box_iou(a, b)[i, j] == box_iou(a[i], b[j], pairwise=False)`` holds bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple, TypeAlias, get_args

import numba as nb
import numpy as np
from numpy.typing import ArrayLike, NDArray

from segiou.errors import SegiouError, ShapeMismatchError

__all__ = [
    "BOX_FORMATS",
    "BoxError",
    "BoxFormat",
    "BoxOverlap",
    "box_area",
    "box_ciou",
    "box_dice",
    "box_diou",
    "box_giou",
    "box_iou",
    "box_overlap",
    "convert_boxes",
]

BoxFormat: TypeAlias = Literal["xyxy", "xywh", "cxcywh"]
BOX_FORMATS: Final[tuple[str, ...]] = get_args(BoxFormat)

#: A metric's result: an array for box arrays, a numpy scalar for two single boxes.
BoxScore: TypeAlias = np.floating[Any] | NDArray[np.floating[Any]]

_FOUR_OVER_PI_SQ: Final = 4.0 / math.pi**2

kernel = nb.njit(cache=True, nogil=True)  # one place fixes the options of every kernel


class BoxError(SegiouError, ValueError):
    """Boxes are malformed (shape, dtype, non-finite or inverted coordinates) or an option is."""


# --------------------------------------------------------------------------------------------
# Layer 1: kernels. Inputs are float64 rows (x1, y1, x2, y2, area[, angle]) of validated,
# exclusive xyxy boxes; the caller allocates ``out`` (float32 or float64). Every division is
# guarded by a comparison with a literal 0.0, which also lets LLVM drop Numba's zero-division
# check and vectorise the inner loop. Nothing here raises.
# --------------------------------------------------------------------------------------------


@kernel
def _iou_parts(
    ax1: float,
    ay1: float,
    ax2: float,
    ay2: float,
    aa: float,
    bx1: float,
    by1: float,
    bx2: float,
    by2: float,
    ba: float,
    empty: float,
) -> tuple[float, float, float]:
    """Return (iou, intersection, union) of two exclusive xyxy boxes."""
    iw = max(min(ax2, bx2) - max(ax1, bx1), 0.0)
    ih = max(min(ay2, by2) - max(ay1, by1), 0.0)
    inter = iw * ih
    union = (aa + ba) - inter
    if union > 0.0:
        iou = inter / union
    elif ax1 == bx1 and ay1 == by1 and ax2 == bx2 and ay2 == by2:
        iou = empty
    else:
        iou = 0.0
    return iou, inter, union


@kernel
def _pairwise_iou(
    a: NDArray[np.float64], b: NDArray[np.float64], empty: float, out: NDArray[np.floating[Any]]
) -> None:
    """Fill out[i, j] with the IoU of a[:, i] and b[:, j]."""
    bx1, by1, bx2, by2, ba = b[0], b[1], b[2], b[3], b[4]
    for i in range(a.shape[1]):
        ax1, ay1, ax2, ay2, aa = a[0, i], a[1, i], a[2, i], a[3, i], a[4, i]
        for j in range(bx1.size):
            iou, _, _ = _iou_parts(
                ax1, ay1, ax2, ay2, aa, bx1[j], by1[j], bx2[j], by2[j], ba[j], empty
            )
            out[i, j] = iou


@kernel
def _pairwise_dice(
    a: NDArray[np.float64], b: NDArray[np.float64], empty: float, out: NDArray[np.floating[Any]]
) -> None:
    """Fill out[i, j] with the Dice coefficient of a[:, i] and b[:, j]."""
    bx1, by1, bx2, by2, ba = b[0], b[1], b[2], b[3], b[4]
    for i in range(a.shape[1]):
        ax1, ay1, ax2, ay2, aa = a[0, i], a[1, i], a[2, i], a[3, i], a[4, i]
        for j in range(bx1.size):
            iou, inter, _ = _iou_parts(
                ax1, ay1, ax2, ay2, aa, bx1[j], by1[j], bx2[j], by2[j], ba[j], empty
            )
            total = aa + ba[j]
            out[i, j] = (2.0 * inter) / total if total > 0.0 else iou


@kernel
def _giou_from(
    iou: float,
    union: float,
    ax1: float,
    ay1: float,
    ax2: float,
    ay2: float,
    bx1: float,
    by1: float,
    bx2: float,
    by2: float,
) -> float:
    """Return GIoU = IoU - (C - U) / C, C the enclosing box's area (IoU when C = 0)."""
    c = (max(ax2, bx2) - min(ax1, bx1)) * (max(ay2, by2) - min(ay1, by1))
    gap = max(c - union, 0.0)  # clamp rounding only: mathematically U <= C
    return iou - gap / c if c > 0.0 else iou


@kernel
def _pairwise_giou(
    a: NDArray[np.float64], b: NDArray[np.float64], empty: float, out: NDArray[np.floating[Any]]
) -> None:
    """Fill out[i, j] with the GIoU of a[:, i] and b[:, j]."""
    bx1, by1, bx2, by2, ba = b[0], b[1], b[2], b[3], b[4]
    for i in range(a.shape[1]):
        ax1, ay1, ax2, ay2, aa = a[0, i], a[1, i], a[2, i], a[3, i], a[4, i]
        for j in range(bx1.size):
            iou, _, union = _iou_parts(
                ax1, ay1, ax2, ay2, aa, bx1[j], by1[j], bx2[j], by2[j], ba[j], empty
            )
            out[i, j] = _giou_from(iou, union, ax1, ay1, ax2, ay2, bx1[j], by1[j], bx2[j], by2[j])


@kernel
def _distance_penalty(
    ax1: float, ay1: float, ax2: float, ay2: float, bx1: float, by1: float, bx2: float, by2: float
) -> float:
    """Return rho^2 / c^2: squared centre distance over the enclosing box's squared diagonal."""
    cw = max(ax2, bx2) - min(ax1, bx1)
    ch = max(ay2, by2) - min(ay1, by1)
    c2 = cw * cw + ch * ch
    dx = (ax1 + ax2) - (bx1 + bx2)
    dy = (ay1 + ay2) - (by1 + by2)
    rho2 = 0.25 * (dx * dx + dy * dy)
    d = rho2 / c2 if c2 > 0.0 else 0.0
    return min(d, 1.0)  # clamp rounding only: mathematically rho <= c


@kernel
def _pairwise_diou(
    a: NDArray[np.float64], b: NDArray[np.float64], empty: float, out: NDArray[np.floating[Any]]
) -> None:
    """Fill out[i, j] with the DIoU of a[:, i] and b[:, j]."""
    bx1, by1, bx2, by2, ba = b[0], b[1], b[2], b[3], b[4]
    for i in range(a.shape[1]):
        ax1, ay1, ax2, ay2, aa = a[0, i], a[1, i], a[2, i], a[3, i], a[4, i]
        for j in range(bx1.size):
            iou, _, _ = _iou_parts(
                ax1, ay1, ax2, ay2, aa, bx1[j], by1[j], bx2[j], by2[j], ba[j], empty
            )
            d = _distance_penalty(ax1, ay1, ax2, ay2, bx1[j], by1[j], bx2[j], by2[j])
            out[i, j] = iou - d


@kernel
def _aspect_penalty(iou: float, a_angle: float, b_angle: float) -> float:
    """Return alpha * v, v = 4 / pi^2 (angle_a - angle_b)^2, alpha = v / ((1 - IoU) + v)."""
    t = a_angle - b_angle
    v = _FOUR_OVER_PI_SQ * (t * t)
    den = (1.0 - iou) + v
    alpha = v / den if den > 0.0 else 0.0
    return alpha * v


@kernel
def _pairwise_ciou(
    a: NDArray[np.float64], b: NDArray[np.float64], empty: float, out: NDArray[np.floating[Any]]
) -> None:
    """Fill out[i, j] with the CIoU of a[:, i] and b[:, j]; row 5 holds atan2(w, h)."""
    bx1, by1, bx2, by2, ba, bt = b[0], b[1], b[2], b[3], b[4], b[5]
    for i in range(a.shape[1]):
        ax1, ay1, ax2, ay2, aa, at = a[0, i], a[1, i], a[2, i], a[3, i], a[4, i], a[5, i]
        for j in range(bx1.size):
            iou, _, _ = _iou_parts(
                ax1, ay1, ax2, ay2, aa, bx1[j], by1[j], bx2[j], by2[j], ba[j], empty
            )
            d = _distance_penalty(ax1, ay1, ax2, ay2, bx1[j], by1[j], bx2[j], by2[j])
            out[i, j] = (iou - d) - _aspect_penalty(iou, at, bt[j])


_PAIRWISE = {
    "iou": _pairwise_iou,
    "dice": _pairwise_dice,
    "giou": _pairwise_giou,
    "diou": _pairwise_diou,
    "ciou": _pairwise_ciou,
}

# --------------------------------------------------------------------------------------------
# Validation and conversion
# --------------------------------------------------------------------------------------------


class _Boxes(NamedTuple):
    """Validated boxes: float64 rows x1, y1, x2, y2, area, angle (exclusive xyxy)."""

    rows: NDArray[np.float64]  # shape (6, K)
    single: bool  # given as one (4,) box
    dtype: np.dtype[Any]  # float32 or float64: the result dtype this input asks for


def _num(value: Any) -> str:
    """Format a coordinate exactly: ``50`` for 50.0, ``0.1`` for 0.1, ``nan``, ``inf``."""
    v = float(value)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def _fmt_box(values: NDArray[Any]) -> str:
    return "[" + ", ".join(_num(v) for v in values) + "]"


def _check_format(fmt: str, inclusive: bool) -> None:
    if fmt not in BOX_FORMATS:
        msg = f"fmt={fmt!r} is not a box format; expected one of {', '.join(BOX_FORMATS)}"
        raise BoxError(msg)
    if inclusive and fmt != "xyxy":
        msg = (
            f"inclusive=True applies to xyxy pixel-index corners only, got fmt={fmt!r}; "
            "a width in xywh/cxcywh is already an extent: drop inclusive=True"
        )
        raise BoxError(msg)


def _check_empty(empty: float) -> float:
    try:
        value = float(empty)
    except (TypeError, ValueError) as err:
        msg = f"empty={empty!r} is not a number; pass 0.0 (default), 1.0 or nan"
        raise BoxError(msg) from err
    if not (math.isnan(value) or 0.0 <= value <= 1.0):
        msg = f"empty={empty!r} is outside [0, 1]; pass 0.0 (default), 1.0 or nan"
        raise BoxError(msg)
    return value


def _as_box_array(boxes: ArrayLike, name: str, fmt: str) -> tuple[NDArray[Any], bool]:
    """Return boxes as a float32/float64 (K, 4) array and whether a single (4,) box was given."""
    try:
        arr = np.asarray(boxes)
    except (ValueError, TypeError) as err:
        msg = f"{name} is not an array of numbers ({err}); pass an (N, 4) or (4,) array"
        raise BoxError(msg) from err
    if arr.dtype.kind not in "iuf":
        msg = (
            f"{name} has dtype {arr.dtype}; expected integer or floating-point coordinates: "
            "convert the boxes with np.asarray(..., dtype=float)"
        )
        raise BoxError(msg)
    if arr.shape == (4,):
        single, arr = True, arr.reshape(1, 4)
    elif arr.ndim == 2 and arr.shape[1] == 4:
        single = False
    else:
        msg = (
            f"{name} has shape {arr.shape}; expected (N, 4) boxes or one (4,) box in {fmt} "
            "format: reshape with .reshape(-1, 4)"
        )
        raise BoxError(msg)
    dtype = np.float32 if arr.dtype == np.float32 else np.float64
    return arr.astype(dtype, copy=False), single


def _validate(arr: NDArray[Any], name: str, fmt: str, single: bool) -> None:
    """Raise BoxError naming the first invalid box as ``name[i]`` (``name`` alone if single)."""

    def where(i: int) -> str:
        return name if single else f"{name}[{i}]"

    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        i = int(np.argmin(finite))
        msg = (
            f"{where(i)} = {_fmt_box(arr[i])} has a non-finite coordinate (nan or inf); "
            "every coordinate must be a finite number: fix or drop this box"
        )
        raise BoxError(msg)
    if fmt == "xyxy":
        bad_x, bad_y = arr[:, 2] < arr[:, 0], arr[:, 3] < arr[:, 1]
        names = "(x1, y1, x2, y2)"
    else:
        bad_x, bad_y = arr[:, 2] < 0, arr[:, 3] < 0
        names = "(x, y, w, h)" if fmt == "xywh" else "(cx, cy, w, h)"
    bad = bad_x | bad_y
    if bad.any():
        i = int(np.argmax(bad))
        b = arr[i]
        if fmt == "xyxy":
            what = (
                f"x2 < x1 ({_num(b[2])} < {_num(b[0])})"
                if bad_x[i]
                else f"y2 < y1 ({_num(b[3])} < {_num(b[1])})"
            )
            todo = (
                "expected x1 <= x2 and y1 <= y2: swap the corners, or pass fmt='xywh' if the "
                "last two numbers are a width and a height"
            )
        else:
            what = (
                f"a negative width ({_num(b[2])})"
                if bad_x[i]
                else f"a negative height ({_num(b[3])})"
            )
            todo = "expected w >= 0 and h >= 0: fix the box, or pass fmt='xyxy' for corners"
        msg = f"{where(i)} = {names} = {_fmt_box(b)} has {what} in {fmt} format; {todo}"
        raise BoxError(msg)
    # Products of coordinates (areas, squared diagonals) are formed in float64 and must not
    # overflow: |coord| <= L keeps areas, their sums and squared diagonals below 16 L^2.
    if arr.size:
        limit = float(np.abs(arr).max())
        if fmt != "xyxy":  # a converted corner can reach |x| + w
            limit *= 2.0
        if 16.0 * limit * limit > np.finfo(np.float64).max:
            msg = (
                f"{name} has coordinates up to {limit:g}, too large for float64 arithmetic "
                "(areas would overflow); rescale the boxes"
            )
            raise BoxError(msg)


def _to_xyxy(arr: NDArray[Any], fmt: str) -> NDArray[Any]:
    """Convert validated (K, 4) boxes in ``fmt`` to xyxy, in the same dtype."""
    if fmt == "xyxy":
        return arr
    out = np.empty_like(arr)
    if fmt == "xywh":
        out[:, :2] = arr[:, :2]
        out[:, 2:] = arr[:, :2] + arr[:, 2:]
    else:
        half = arr[:, 2:] / 2
        out[:, :2] = arr[:, :2] - half
        out[:, 2:] = arr[:, :2] + half
    return out


def _from_xyxy(arr: NDArray[Any], fmt: str) -> NDArray[Any]:
    """Convert (K, 4) xyxy boxes to ``fmt``, in the same dtype."""
    if fmt == "xyxy":
        return arr
    out = np.empty_like(arr)
    wh = arr[:, 2:] - arr[:, :2]
    out[:, 2:] = wh
    out[:, :2] = arr[:, :2] if fmt == "xywh" else arr[:, :2] + wh / 2
    return out


def _prepare(boxes: ArrayLike, name: str, fmt: str, inclusive: bool) -> _Boxes:
    arr, single = _as_box_array(boxes, name, fmt)
    _validate(arr, name, fmt, single)
    xyxy = _to_xyxy(arr.astype(np.float64), fmt)  # all arithmetic in float64
    rows = np.empty((6, xyxy.shape[0]), dtype=np.float64)
    rows[:4] = xyxy.T
    if inclusive:  # PASCAL VOC devkit: pixel indices, a box covers x2 - x1 + 1 columns
        rows[2] += 1.0
        rows[3] += 1.0
    w, h = rows[2] - rows[0], rows[3] - rows[1]
    rows[4] = w * h
    rows[5] = np.arctan2(w, h)
    return _Boxes(rows, single, arr.dtype)


def _prepare_pair(
    boxes1: ArrayLike, boxes2: ArrayLike, fmt: str, inclusive: bool, empty: float
) -> tuple[_Boxes, _Boxes, np.dtype[Any], float]:
    _check_format(fmt, inclusive)
    value = _check_empty(empty)
    a = _prepare(boxes1, "boxes1", fmt, inclusive)
    b = _prepare(boxes2, "boxes2", fmt, inclusive)
    return a, b, np.result_type(a.dtype, b.dtype), value


# --------------------------------------------------------------------------------------------
# Element-wise numpy path: the kernels' formulas in the kernels' order of operations.
# --------------------------------------------------------------------------------------------


def _elementwise(metric: str, a: NDArray[np.float64], b: NDArray[np.float64], empty: float) -> Any:
    ax1, ay1, ax2, ay2, aa, at = a
    bx1, by1, bx2, by2, ba, bt = b
    iw = np.minimum(ax2, bx2) - np.maximum(ax1, bx1)
    ih = np.minimum(ay2, by2) - np.maximum(ay1, by1)
    inter = np.maximum(iw, 0.0) * np.maximum(ih, 0.0)
    total = aa + ba
    union = total - inter
    iou = np.divide(inter, union, out=np.zeros_like(union), where=union > 0.0)
    same = (ax1 == bx1) & (ay1 == by1) & (ax2 == bx2) & (ay2 == by2)
    iou[(union <= 0.0) & same] = empty
    if metric == "iou":
        return iou
    if metric == "dice":
        return np.divide(2.0 * inter, total, out=iou.copy(), where=total > 0.0)
    if metric == "giou":
        c = (np.maximum(ax2, bx2) - np.minimum(ax1, bx1)) * (
            np.maximum(ay2, by2) - np.minimum(ay1, by1)
        )
        gap = np.maximum(c - union, 0.0)
        ratio = np.divide(gap, c, out=np.zeros_like(c), where=c > 0.0)
        return np.where(c > 0.0, iou - ratio, iou)
    cw = np.maximum(ax2, bx2) - np.minimum(ax1, bx1)
    ch = np.maximum(ay2, by2) - np.minimum(ay1, by1)
    c2 = cw * cw + ch * ch
    dx = (ax1 + ax2) - (bx1 + bx2)
    dy = (ay1 + ay2) - (by1 + by2)
    rho2 = 0.25 * (dx * dx + dy * dy)
    d = np.minimum(np.divide(rho2, c2, out=np.zeros_like(c2), where=c2 > 0.0), 1.0)
    if metric == "diou":
        return iou - d
    t = at - bt
    v = _FOUR_OVER_PI_SQ * (t * t)
    den = (1.0 - iou) + v
    alpha = np.divide(v, den, out=np.zeros_like(den), where=den > 0.0)
    return (iou - d) - alpha * v


def _score(
    metric: str,
    boxes1: ArrayLike,
    boxes2: ArrayLike,
    *,
    pairwise: bool,
    fmt: str,
    inclusive: bool,
    empty: float,
) -> BoxScore:
    a, b, dtype, value = _prepare_pair(boxes1, boxes2, fmt, inclusive, empty)
    n, m = a.rows.shape[1], b.rows.shape[1]
    if pairwise:
        out = np.empty((n, m), dtype=dtype)
        _PAIRWISE[metric](a.rows, b.rows, value, out)
        shape = (() if a.single else (n,)) + (() if b.single else (m,))
        result = out.reshape(shape)
    else:
        try:
            (k,) = np.broadcast_shapes((n,), (m,))
        except ValueError as err:
            msg = (
                f"element-wise {metric}: boxes1 holds {n} boxes and boxes2 holds {m}; expected "
                "the same number (or one box on either side): pass pairwise=True for the "
                f"{n} x {m} matrix"
            )
            raise ShapeMismatchError(msg) from err
        ra = np.broadcast_to(a.rows, (6, k))
        rb = np.broadcast_to(b.rows, (6, k))
        with np.errstate(invalid="ignore"):  # nan `empty` propagates on purpose
            result = _elementwise(metric, ra, rb, value).astype(dtype, copy=False)
        if a.single and b.single:
            result = result.reshape(())
    return result[()] if result.ndim == 0 else result


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def box_iou(
    boxes1: ArrayLike,
    boxes2: ArrayLike,
    *,
    pairwise: bool = True,
    fmt: BoxFormat = "xyxy",
    inclusive: bool = False,
    empty: float = 0.0,
) -> BoxScore:
    """Intersection over union (Jaccard index) of bounding boxes.

    Parameters
    ----------
    boxes1, boxes2 : array_like
        Boxes of shape ``(N, 4)`` and ``(M, 4)``, or a single box of shape ``(4,)``, in the
        format ``fmt``. Integer, float32 and float64 coordinates are accepted.
    pairwise : bool, default True
        True: score every box of ``boxes1`` against every box of ``boxes2`` (``N x M``).
        False: score ``boxes1[k]`` against ``boxes2[k]`` (element-wise).
    fmt : {"xyxy", "xywh", "cxcywh"}, default "xyxy"
        Box format of both inputs (see the module docstring).
    inclusive : bool, default False
        Legacy PASCAL VOC devkit convention: xyxy corners are inclusive pixel indices, so a box
        spans ``x2 - x1 + 1`` columns and ``y2 - y1 + 1`` rows. Only valid with ``"xyxy"``.
    empty : float, default 0.0
        Score of two *identical* zero-area boxes, whose union is empty (0/0). Must be in
        ``[0, 1]`` or nan.

    Returns
    -------
    numpy.ndarray or numpy.floating
        IoU values in ``[0, 1]``, shaped as described in the Notes.

    Raises
    ------
    BoxError
        A box has a non-finite coordinate, ``x2 < x1`` or ``y2 < y1`` (negative ``w``/``h``),
        an input has a shape other than ``(N, 4)`` or ``(4,)`` or a non-numeric dtype, or an
        option is invalid. The message names the box (e.g. ``boxes1[3]``) and its values.
    ShapeMismatchError
        Element-wise with ``N != M`` and neither side a single box.

    Notes
    -----
    ``IoU = |A & B| / |A | B|`` with ``|A & B| = max(0, min(ax2, bx2) - max(ax1, bx1)) *
    max(0, min(ay2, by2) - max(ay1, by1))`` and ``|A | B| = |A| + |B| - |A & B|``.

    Exact edge cases, with no epsilon added anywhere: disjoint boxes and boxes that only touch
    (share an edge or a corner) score exactly 0; identical boxes of positive area score exactly
    1. Two zero-area boxes have an empty union: identical ones score ``empty`` (default 0, as in
    pycocotools, whose ``bbIou`` skips pairs with a non-positive overlap; torchvision's
    ``box_iou`` returns nan, i.e. ``empty=nan``; ``empty=1`` reads "identical is a perfect
    match"), and non-identical ones score 0.

    With ``inclusive=True`` each box is widened to ``(x1, y1, x2 + 1, y2 + 1)`` first: a box
    with ``x1 == x2`` is one pixel wide, and boxes touch when ``b.x1 == a.x2 + 1``.
    ``box_iou(a, b)`` equals ``box_iou(b, a).T`` exactly.

    The result has shape ``(N, M)`` when ``pairwise`` (a single ``(4,)`` box drops its axis, two
    single boxes give a numpy scalar) and ``(K,)`` element-wise (``K = max(N, M)``; one box on
    either side is broadcast). It is float32 when both inputs are float32 and float64 otherwise;
    the arithmetic is always done in float64 and rounded once at the end.

    References
    ----------
    .. [1] M. Everingham et al., "The PASCAL Visual Object Classes (VOC) Challenge", IJCV 2010.

    Examples
    --------
    >>> from segiou.boxes import box_iou
    >>> float(box_iou([50, 50, 150, 150], [80, 80, 180, 180]))  # 4,900 / 15,100
    0.32450331125827814
    >>> box_iou([[0, 0, 2, 2], [0, 0, 1, 1]], [[0, 0, 2, 2], [2, 0, 3, 1]])
    array([[1.  , 0.  ],
           [0.25, 0.  ]])
    >>> box_iou([[0, 0, 2, 2], [0, 0, 1, 1]], [[0, 0, 2, 2], [2, 0, 3, 1]], pairwise=False)
    array([1., 0.])
    >>> float(box_iou([0, 0, 0, 0], [0, 0, 0, 0], empty=1.0))
    1.0
    """
    return _score(
        "iou", boxes1, boxes2, pairwise=pairwise, fmt=fmt, inclusive=inclusive, empty=empty
    )


def box_dice(
    boxes1: ArrayLike,
    boxes2: ArrayLike,
    *,
    pairwise: bool = True,
    fmt: BoxFormat = "xyxy",
    inclusive: bool = False,
    empty: float = 0.0,
) -> BoxScore:
    """Dice coefficient (F1 overlap) of bounding boxes.

    Parameters
    ----------
    boxes1, boxes2 : array_like
        Boxes of shape ``(N, 4)`` and ``(M, 4)``, or a single ``(4,)`` box, in format ``fmt``.
    pairwise : bool, default True
        ``N x M`` matrix (True) or element-wise (False).
    fmt : {"xyxy", "xywh", "cxcywh"}, default "xyxy"
        Box format of both inputs.
    inclusive : bool, default False
        PASCAL VOC inclusive pixel corners (``xyxy`` only); see :func:`box_iou`.
    empty : float, default 0.0
        Score of two identical zero-area boxes (``[0, 1]`` or nan); see :func:`box_iou`.

    Returns
    -------
    numpy.ndarray or numpy.floating
        Dice values in ``[0, 1]``.

    Raises
    ------
    BoxError
        Invalid boxes or options; see :func:`box_iou`.
    ShapeMismatchError
        Element-wise with different numbers of boxes.

    Notes
    -----
    ``Dice = 2 |A & B| / (|A| + |B|) = 2 IoU / (1 + IoU)``. When ``|A| + |B| = 0`` the result
    is ``empty`` for identical boxes and 0 otherwise, as for IoU.

    The result has shape ``(N, M)`` when ``pairwise`` (a single ``(4,)`` box drops its axis, two
    single boxes give a numpy scalar) and ``(K,)`` element-wise (``K = max(N, M)``; one box on
    either side is broadcast). It is float32 when both inputs are float32 and float64 otherwise;
    the arithmetic is always done in float64 and rounded once at the end.

    Examples
    --------
    >>> from segiou.boxes import box_dice
    >>> float(box_dice([50, 50, 150, 150], [80, 80, 180, 180]))  # 9,800 / 20,000
    0.49
    """
    return _score(
        "dice", boxes1, boxes2, pairwise=pairwise, fmt=fmt, inclusive=inclusive, empty=empty
    )


def box_giou(
    boxes1: ArrayLike,
    boxes2: ArrayLike,
    *,
    pairwise: bool = True,
    fmt: BoxFormat = "xyxy",
    inclusive: bool = False,
    empty: float = 0.0,
) -> BoxScore:
    """Generalized IoU (Rezatofighi et al. 2019) of bounding boxes.

    Parameters
    ----------
    boxes1, boxes2 : array_like
        Boxes of shape ``(N, 4)`` and ``(M, 4)``, or a single ``(4,)`` box, in format ``fmt``.
    pairwise : bool, default True
        ``N x M`` matrix (True) or element-wise (False).
    fmt : {"xyxy", "xywh", "cxcywh"}, default "xyxy"
        Box format of both inputs.
    inclusive : bool, default False
        PASCAL VOC inclusive pixel corners (``xyxy`` only); see :func:`box_iou`.
    empty : float, default 0.0
        IoU of two identical zero-area boxes (``[0, 1]`` or nan); see :func:`box_iou`.

    Returns
    -------
    numpy.ndarray or numpy.floating
        GIoU values, ``-1 <= GIoU <= IoU <= 1``.

    Raises
    ------
    BoxError
        Invalid boxes or options; see :func:`box_iou`.
    ShapeMismatchError
        Element-wise with different numbers of boxes.

    Notes
    -----
    ``GIoU = IoU - (|C| - |A | B|) / |C|``, ``C`` the smallest axis-aligned box enclosing both.
    Disjoint boxes score below 0, approaching -1 as they move apart. Degenerate case: ``|C| = 0``
    (both boxes are the same point or lie on one line) gives ``GIoU = IoU``, which is ``empty``
    for identical boxes and 0 otherwise; two distinct zero-area boxes with ``|C| > 0`` score -1.

    The result has shape ``(N, M)`` when ``pairwise`` (a single ``(4,)`` box drops its axis, two
    single boxes give a numpy scalar) and ``(K,)`` element-wise (``K = max(N, M)``; one box on
    either side is broadcast). It is float32 when both inputs are float32 and float64 otherwise;
    the arithmetic is always done in float64 and rounded once at the end.

    References
    ----------
    .. [1] H. Rezatofighi et al., "Generalized Intersection over Union: A Metric and a Loss for
       Bounding Box Regression", CVPR 2019.

    Examples
    --------
    >>> from segiou.boxes import box_giou
    >>> round(float(box_giou([50, 50, 150, 150], [80, 80, 180, 180])), 6)  # C = 130 x 130
    0.217994
    >>> float(box_giou([0, 0, 1, 1], [2, 0, 3, 1]))  # IoU 0, C = 3, U = 2
    -0.3333333333333333
    """
    return _score(
        "giou", boxes1, boxes2, pairwise=pairwise, fmt=fmt, inclusive=inclusive, empty=empty
    )


def box_diou(
    boxes1: ArrayLike,
    boxes2: ArrayLike,
    *,
    pairwise: bool = True,
    fmt: BoxFormat = "xyxy",
    inclusive: bool = False,
    empty: float = 0.0,
) -> BoxScore:
    """Distance IoU (Zheng et al. 2020) of bounding boxes.

    Parameters
    ----------
    boxes1, boxes2 : array_like
        Boxes of shape ``(N, 4)`` and ``(M, 4)``, or a single ``(4,)`` box, in format ``fmt``.
    pairwise : bool, default True
        ``N x M`` matrix (True) or element-wise (False).
    fmt : {"xyxy", "xywh", "cxcywh"}, default "xyxy"
        Box format of both inputs.
    inclusive : bool, default False
        PASCAL VOC inclusive pixel corners (``xyxy`` only); see :func:`box_iou`.
    empty : float, default 0.0
        IoU of two identical zero-area boxes (``[0, 1]`` or nan); see :func:`box_iou`.

    Returns
    -------
    numpy.ndarray or numpy.floating
        DIoU values, ``-1 <= DIoU <= IoU <= 1``.

    Raises
    ------
    BoxError
        Invalid boxes or options; see :func:`box_iou`.
    ShapeMismatchError
        Element-wise with different numbers of boxes.

    Notes
    -----
    ``DIoU = IoU - rho^2 / c^2``, ``rho`` the distance between the boxes' centres and ``c`` the
    diagonal of the smallest enclosing box. Degenerate case: ``c = 0`` (both boxes are the same
    point) gives a penalty of 0, so ``DIoU = IoU``.

    The result has shape ``(N, M)`` when ``pairwise`` (a single ``(4,)`` box drops its axis, two
    single boxes give a numpy scalar) and ``(K,)`` element-wise (``K = max(N, M)``; one box on
    either side is broadcast). It is float32 when both inputs are float32 and float64 otherwise;
    the arithmetic is always done in float64 and rounded once at the end.

    References
    ----------
    .. [1] Z. Zheng et al., "Distance-IoU Loss: Faster and Better Learning for Bounding Box
       Regression", AAAI 2020.

    Examples
    --------
    >>> from segiou.boxes import box_diou
    >>> float(box_diou([0, 0, 2, 2], [1, 0, 3, 2]))  # IoU 1/3, rho^2 = 1, c^2 = 9 + 4
    0.2564102564102564
    """
    return _score(
        "diou", boxes1, boxes2, pairwise=pairwise, fmt=fmt, inclusive=inclusive, empty=empty
    )


def box_ciou(
    boxes1: ArrayLike,
    boxes2: ArrayLike,
    *,
    pairwise: bool = True,
    fmt: BoxFormat = "xyxy",
    inclusive: bool = False,
    empty: float = 0.0,
) -> BoxScore:
    """Complete IoU (Zheng et al. 2020) of bounding boxes.

    Parameters
    ----------
    boxes1, boxes2 : array_like
        Boxes of shape ``(N, 4)`` and ``(M, 4)``, or a single ``(4,)`` box, in format ``fmt``.
    pairwise : bool, default True
        ``N x M`` matrix (True) or element-wise (False).
    fmt : {"xyxy", "xywh", "cxcywh"}, default "xyxy"
        Box format of both inputs.
    inclusive : bool, default False
        PASCAL VOC inclusive pixel corners (``xyxy`` only); see :func:`box_iou`.
    empty : float, default 0.0
        IoU of two identical zero-area boxes (``[0, 1]`` or nan); see :func:`box_iou`.

    Returns
    -------
    numpy.ndarray or numpy.floating
        CIoU values, ``-1.5 <= CIoU <= DIoU <= IoU <= 1`` (``alpha v <= 1/2`` when IoU = 0).

    Raises
    ------
    BoxError
        Invalid boxes or options; see :func:`box_iou`.
    ShapeMismatchError
        Element-wise with different numbers of boxes.

    Notes
    -----
    ``CIoU = IoU - rho^2 / c^2 - alpha v`` with the aspect-ratio term
    ``v = 4 / pi^2 (arctan(w1 / h1) - arctan(w2 / h2))^2`` and ``alpha = v / ((1 - IoU) + v)``,
    as in the paper (not the later variant that sets ``alpha = 0`` when ``IoU < 0.5``). The
    metric is symmetric: ``v`` squares the difference. Degenerate cases: the angle is
    ``atan2(w, h)``, so a zero-height box has angle ``pi / 2`` (the limit of ``arctan(w / h)``)
    and a zero-size box angle 0; ``alpha = 0`` when ``(1 - IoU) + v = 0`` (identical boxes);
    ``c = 0`` gives no distance penalty, as in :func:`box_diou`.

    The result has shape ``(N, M)`` when ``pairwise`` (a single ``(4,)`` box drops its axis, two
    single boxes give a numpy scalar) and ``(K,)`` element-wise (``K = max(N, M)``; one box on
    either side is broadcast). It is float32 when both inputs are float32 and float64 otherwise;
    the arithmetic is always done in float64 and rounded once at the end.

    References
    ----------
    .. [1] Z. Zheng et al., "Distance-IoU Loss: Faster and Better Learning for Bounding Box
       Regression", AAAI 2020.

    Examples
    --------
    >>> from segiou.boxes import box_ciou
    >>> round(float(box_ciou([0, 0, 2, 2], [1, 0, 3, 2])), 12)  # same aspect: CIoU = DIoU
    0.25641025641
    >>> round(float(box_ciou([0, 0, 4, 2], [0, 0, 2, 4])), 6)  # 1/3 - 2/32 - alpha v
    0.237082
    """
    return _score(
        "ciou", boxes1, boxes2, pairwise=pairwise, fmt=fmt, inclusive=inclusive, empty=empty
    )


def box_area(
    boxes: ArrayLike, *, fmt: BoxFormat = "xyxy", inclusive: bool = False
) -> NDArray[np.floating[Any]]:
    """Area of each box.

    Parameters
    ----------
    boxes : array_like
        Boxes of shape ``(N, 4)``, or a single ``(4,)`` box, in format ``fmt``.
    fmt : {"xyxy", "xywh", "cxcywh"}, default "xyxy"
        Box format.
    inclusive : bool, default False
        PASCAL VOC inclusive pixel corners (``xyxy`` only): area ``(x2 - x1 + 1)(y2 - y1 + 1)``.

    Returns
    -------
    numpy.ndarray
        Areas, shape ``(N,)`` (``()`` for a single box); float32 for float32 input, else float64.

    Raises
    ------
    BoxError
        Invalid boxes or options; see :func:`box_iou`.

    Notes
    -----
    ``area = (x2 - x1) (y2 - y1) = w h``, computed in float64.

    Examples
    --------
    >>> from segiou.boxes import box_area
    >>> box_area([[0, 0, 10, 5], [2, 2, 2, 9]])
    array([50.,  0.])
    >>> box_area([0, 0, 9, 4], inclusive=True)
    array(50.)
    """
    _check_format(fmt, inclusive)
    b = _prepare(boxes, "boxes", fmt, inclusive)
    area: NDArray[np.floating[Any]] = b.rows[4].astype(b.dtype)
    return area.reshape(()) if b.single else area


def convert_boxes(boxes: ArrayLike, *, fmt: BoxFormat, to: BoxFormat) -> NDArray[np.floating[Any]]:
    """Convert boxes between the xyxy, xywh and cxcywh formats.

    Parameters
    ----------
    boxes : array_like
        Boxes of shape ``(N, 4)`` or ``(4,)`` in format ``fmt``.
    fmt : {"xyxy", "xywh", "cxcywh"}
        Format of ``boxes``.
    to : {"xyxy", "xywh", "cxcywh"}
        Format to convert to.

    Returns
    -------
    numpy.ndarray
        The boxes in format ``to``, same shape; float32 for float32 input, else float64.

    Raises
    ------
    BoxError
        Invalid boxes (checked in format ``fmt``) or an unknown format.

    Notes
    -----
    ``xywh -> xyxy``: ``(x, y, x + w, y + h)``; ``cxcywh -> xyxy``:
    ``(cx - w/2, cy - h/2, cx + w/2, cy + h/2)``; the reverse conversions invert these (up to
    rounding). Image coordinates: y grows downward, so ``(x1, y1)`` is the top-left corner.

    Examples
    --------
    >>> from segiou.boxes import convert_boxes
    >>> convert_boxes([10, 20, 30, 40], fmt="xywh", to="xyxy")
    array([10., 20., 40., 60.])
    >>> convert_boxes([[0, 0, 4, 2]], fmt="xyxy", to="cxcywh")
    array([[2., 1., 4., 2.]])
    """
    _check_format(fmt, False)
    _check_format(to, False)
    arr, single = _as_box_array(boxes, "boxes", fmt)
    _validate(arr, "boxes", fmt, single)
    out = _from_xyxy(_to_xyxy(arr.astype(np.float64), fmt), to).astype(arr.dtype)
    return out.reshape(4) if single else out


@dataclass(frozen=True)
class BoxOverlap:
    """Everything about the overlap of two boxes, as reported by :func:`box_overlap`.

    Boxes are exclusive xyxy tuples ``(x1, y1, x2, y2)`` as evaluated, i.e. after the format
    conversion and, with ``inclusive=True``, after widening by one pixel.

    Attributes
    ----------
    box1, box2 : tuple of 4 floats
        The two boxes.
    area1, area2 : float
        Their areas.
    intersection, union : float
        Areas of the intersection and of the union.
    enclosing_area : float
        Area of the smallest box enclosing both.
    intersection_box : tuple of 4 floats or None
        The overlap, None when its area is 0 (disjoint or touching boxes).
    enclosing_box : tuple of 4 floats
        The smallest box enclosing both.
    iou, dice, giou, diou, ciou : float
        The metrics, as :func:`box_iou` and friends compute them.
    """

    box1: tuple[float, float, float, float]
    box2: tuple[float, float, float, float]
    area1: float
    area2: float
    intersection: float
    union: float
    enclosing_area: float
    intersection_box: tuple[float, float, float, float] | None
    enclosing_box: tuple[float, float, float, float]
    iou: float
    dice: float
    giou: float
    diou: float
    ciou: float


def box_overlap(
    box1: ArrayLike,
    box2: ArrayLike,
    *,
    fmt: BoxFormat = "xyxy",
    inclusive: bool = False,
    empty: float = 0.0,
) -> BoxOverlap:
    """Areas, overlap boxes and every metric for one pair of boxes.

    Parameters
    ----------
    box1, box2 : array_like
        One box each, shape ``(4,)``, in format ``fmt``.
    fmt : {"xyxy", "xywh", "cxcywh"}, default "xyxy"
        Box format of both boxes.
    inclusive : bool, default False
        PASCAL VOC inclusive pixel corners (``xyxy`` only); see :func:`box_iou`.
    empty : float, default 0.0
        IoU of two identical zero-area boxes; see :func:`box_iou`.

    Returns
    -------
    BoxOverlap
        Areas, intersection and union, the intersection box (None when the intersection area
        is 0), the enclosing box, and IoU, Dice, GIoU, DIoU and CIoU as Python floats.

    Raises
    ------
    BoxError
        Invalid boxes or options (see :func:`box_iou`), or an input that is not one box.

    Notes
    -----
    The metrics are those of :func:`box_iou`, :func:`box_dice`, :func:`box_giou`,
    :func:`box_diou` and :func:`box_ciou` (same values, bit for bit); the areas are computed in
    float64 as they are.

    Examples
    --------
    >>> from segiou.boxes import box_overlap
    >>> o = box_overlap([50, 50, 150, 150], [80, 80, 180, 180])
    >>> o.intersection, o.union, o.intersection_box
    (4900.0, 15100.0, (80.0, 80.0, 150.0, 150.0))
    >>> round(o.iou, 4), o.dice
    (0.3245, 0.49)
    """
    _check_format(fmt, inclusive)
    value = _check_empty(empty)
    a = _prepare(box1, "box1", fmt, inclusive)
    b = _prepare(box2, "box2", fmt, inclusive)
    for name, given in (("box1", a), ("box2", b)):
        if not given.single:
            msg = f"{name} holds {given.rows.shape[1]} boxes; expected one (4,) box"
            raise BoxError(msg)
    ax1, ay1, ax2, ay2, aa, _ = (float(v) for v in a.rows[:, 0])
    bx1, by1, bx2, by2, ba, _ = (float(v) for v in b.rows[:, 0])
    iw = min(ax2, bx2) - max(ax1, bx1)
    ih = min(ay2, by2) - max(ay1, by1)
    inter = max(iw, 0.0) * max(ih, 0.0)
    enclosing = (min(ax1, bx1), min(ay1, by1), max(ax2, bx2), max(ay2, by2))
    cw, ch = enclosing[2] - enclosing[0], enclosing[3] - enclosing[1]
    scores = {
        metric: float(_elementwise(metric, a.rows, b.rows, value)[0])
        for metric in ("iou", "dice", "giou", "diou", "ciou")
    }
    return BoxOverlap(
        box1=(ax1, ay1, ax2, ay2),
        box2=(bx1, by1, bx2, by2),
        area1=aa,
        area2=ba,
        intersection=inter,
        union=(aa + ba) - inter,
        enclosing_area=cw * ch,
        intersection_box=(max(ax1, bx1), max(ay1, by1), min(ax2, bx2), min(ay2, by2))
        if inter > 0.0
        else None,
        enclosing_box=enclosing,
        **scores,
    )
