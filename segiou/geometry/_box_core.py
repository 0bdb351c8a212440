"""The machinery behind :mod:`segiou.geometry.boxes`: validation, format conversion, scoring.

Boxes are checked and converted once (:func:`prepare_pair`) into float64 rows of exclusive xyxy
corners, area and angle; :func:`score` runs the pairwise Numba kernels or the element-wise numpy
path, which evaluates the same formulas in the same order.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Final, Literal, NamedTuple, TypeAlias, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from segiou.errors import BoxError, ShapeMismatchError
from segiou.geometry._box_kernels import PAIRWISE, TINY

__all__ = [
    "BOX_FORMATS",
    "BoxFormat",
    "BoxScore",
    "as_box_array",
    "check_empty",
    "check_enclosing",
    "check_format",
    "elementwise",
    "from_xyxy",
    "prepare",
    "score",
    "to_xyxy",
    "validate",
]

BoxFormat: TypeAlias = Literal["xyxy", "xywh", "cxcywh"]
BOX_FORMATS: Final[tuple[str, ...]] = get_args(BoxFormat)

#: A metric's result: an array for box arrays, a numpy scalar for two single boxes.
BoxScore: TypeAlias = np.floating[Any] | NDArray[np.floating[Any]]

_FOUR_OVER_PI_SQ: Final = 4.0 / math.pi**2

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


def check_format(fmt: str, inclusive: bool) -> None:
    if fmt not in BOX_FORMATS:
        msg = f"fmt={fmt!r} is not a box format; expected one of {', '.join(BOX_FORMATS)}"
        raise BoxError(msg)
    if inclusive and fmt != "xyxy":
        msg = (
            f"inclusive=True applies to xyxy pixel-index corners only, got fmt={fmt!r}; "
            "a width in xywh/cxcywh is already an extent: drop inclusive=True"
        )
        raise BoxError(msg)


def check_empty(empty: float) -> float:
    try:
        value = float(empty)
    except (TypeError, ValueError) as err:
        msg = f"empty={empty!r} is not a number; pass 0.0 (default), 1.0 or nan"
        raise BoxError(msg) from err
    if not (math.isnan(value) or 0.0 <= value <= 1.0):
        msg = f"empty={empty!r} is outside [0, 1]; pass 0.0 (default), 1.0 or nan"
        raise BoxError(msg)
    return value


def _reach(arr: NDArray[Any], fmt: str) -> int | Fraction:
    """Return the exact largest |corner| the boxes can reach.

    That is max |coordinate| (xyxy), else the largest |x| (|cx|) plus the largest w (h): every
    corner, ``x + w`` and ``cx +- w / 2``, is within it.
    """
    if arr.dtype.kind in "iu":
        wide = arr.astype(np.int64) if arr.dtype.kind == "i" else arr
        mag = np.where(wide < 0, (-(wide + 1)).astype(np.uint64) + np.uint64(1),
                       wide.astype(np.uint64))  # exact (abs of int64's minimum overflows)  # fmt: skip
        if fmt == "xyxy":
            return int(mag.max())
        return int(mag[:, :2].max()) + int(mag[:, 2:].max())
    fabs = np.abs(arr.astype(np.float64))  # Fractions: the sum is exact
    if fmt == "xyxy":
        return Fraction(float(fabs.max()))
    return Fraction(float(fabs[:, :2].max())) + Fraction(float(fabs[:, 2:].max()))


def _check_reach(arr: NDArray[Any], name: str, fmt: str, halves: bool, inclusive: bool) -> None:
    """Refuse boxes whose corners float64 would round where the input promises exactness.

    Integers: every corner must be an exact integer (below 2**53), or an exact half-integer
    (below 2**52) when halved (cxcywh in or out). Floats: the same bound whenever corners are
    computed (xywh, cxcywh, inclusive or a conversion to cxcywh), since a double from 2**53 on is
    an integer whose neighbours are 2 apart: ``2.0**53 + 1`` is ``2.0**53``, a zero-width box.
    """
    floats = arr.dtype.kind == "f"
    if not arr.size or (floats and not (fmt != "xyxy" or halves or inclusive)):
        return
    if floats and not np.isfinite(arr).all():
        return  # validate() names the non-finite coordinate
    reach = _reach(arr, fmt)
    bound = 52 if halves or fmt == "cxcywh" else 53
    if (2 * reach + 1 if bound == 52 else reach + 1) <= 2**53:
        return
    shown = reach if isinstance(reach, int) or reach.denominator != 1 else int(reach)
    msg = (
        f"{name} has {'' if floats else 'integer '}coordinates reaching {shown} ({fmt}), beyond "
        f"2**{bound} - 1: float64 arithmetic would round them (a box one unit wide could have "
        "area 0"
        + ("; centres cx +- w / 2 are half-integers" if bound == 52 else "")
        + "); shift or rescale the boxes"
    )
    raise BoxError(msg)


def as_box_array(
    boxes: ArrayLike, name: str, fmt: str, halves: bool = False, inclusive: bool = False
) -> tuple[NDArray[Any], bool]:
    """Return boxes as a float32/float64 (K, 4) array and whether a single (4,) box was given.

    ``halves``: the boxes will be halved (cxcywh in or out), so integers must stay below 2**52;
    ``inclusive``: ``x2 + 1`` will be formed.
    """
    if isinstance(boxes, np.ma.MaskedArray):
        msg = (
            f"{name} is a numpy masked array; its masked boxes would be scored as the values "
            f"under the mask: drop them first, e.g. {name}[~{name}.mask.any(axis=-1)].data"
        )
        raise BoxError(msg)
    try:
        arr = np.asarray(boxes)
    except (ValueError, TypeError) as err:
        msg = f"{name} is not an array of numbers ({err}); pass an (N, 4) or (4,) array"
        raise BoxError(msg) from err
    if arr.dtype == object:
        msg = (
            f"{name} has dtype object: Python integers beyond the int64 range, or objects "
            "that are not numbers; float64 would round such integers (converting them with "
            "dtype=float rounds them silently): shift or rescale the boxes"
        )
        raise BoxError(msg)
    if arr.dtype.kind not in "iuf":
        msg = (
            f"{name} has dtype {arr.dtype}; expected integer or floating-point coordinates: "
            "pass the boxes as numbers"
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
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:  # long double: float64 or refused
        with np.errstate(over="ignore"):
            near = arr.astype(np.float64)
        lost = (near != arr) & np.isfinite(arr)  # compared in long double: exact
        if lost.any():
            i, j = (int(k) for k in np.argwhere(lost)[0])
            msg = (
                f"{name if single else f'{name}[{i}]'} has the {arr.dtype} coordinate "
                f"{arr[i, j]!s}, which float64 (segiou's arithmetic) cannot hold exactly; convert "
                "the boxes with .astype(np.float64) if rounding them is acceptable"
            )
            raise BoxError(msg)
        arr = near
    _check_reach(arr, name, fmt, halves, inclusive)
    dtype = np.float32 if arr.dtype == np.float32 else np.float64
    return arr.astype(dtype, copy=False), single


def validate(arr: NDArray[Any], name: str, fmt: str, single: bool) -> None:
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


def to_xyxy(arr: NDArray[Any], fmt: str) -> NDArray[Any]:
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


def from_xyxy(arr: NDArray[Any], fmt: str) -> NDArray[Any]:
    """Convert (K, 4) xyxy boxes to ``fmt``, in the same dtype."""
    if fmt == "xyxy":
        return arr
    out = np.empty_like(arr)
    wh = arr[:, 2:] - arr[:, :2]
    out[:, 2:] = wh
    out[:, :2] = arr[:, :2] if fmt == "xywh" else arr[:, :2] + wh / 2
    return out


def prepare(boxes: ArrayLike, name: str, fmt: str, inclusive: bool) -> _Boxes:
    arr, single = as_box_array(boxes, name, fmt, inclusive=inclusive)
    validate(arr, name, fmt, single)
    xyxy = to_xyxy(arr.astype(np.float64), fmt)  # all arithmetic in float64
    rows = np.empty((6, xyxy.shape[0]), dtype=np.float64)
    rows[:4] = xyxy.T
    if inclusive:  # PASCAL VOC devkit: pixel indices, a box covers x2 - x1 + 1 columns
        rows[2] += 1.0
        rows[3] += 1.0
    w, h = rows[2] - rows[0], rows[3] - rows[1]
    if fmt != "xyxy":  # a size too small for the box's position: x + w rounds to x
        lost = ((arr[:, 2] > 0) & (w == 0.0)) | ((arr[:, 3] > 0) & (h == 0.0))
        if lost.any():
            i = int(np.argmax(lost))
            msg = (
                f"{name if single else f'{name}[{i}]'} = {_fmt_box(arr[i])} ({fmt}) has a "
                "size too small for its position: float64 rounds x + w to x (a zero-width "
                "box); shift or rescale the boxes"
            )
            raise BoxError(msg)
    rows[4] = w * h
    # Every metric is scale-free; float64 is not: an area that underflows to 0 reads as an
    # empty box, a subnormal one keeps a few bits (IoU 0.333 for 0.429).
    tiny = (w > 0.0) & (h > 0.0) & (rows[4] < TINY)
    if tiny.any():
        i = int(np.argmax(tiny))
        msg = (
            f"{name if single else f'{name}[{i}]'} = {_fmt_box(arr[i])} has an area of "
            f"{rows[4, i]:g}, too small for float64 arithmetic (it underflows below "
            f"{TINY:g}); rescale the boxes"
        )
        raise BoxError(msg)
    rows[5] = np.arctan2(w, h)
    return _Boxes(rows, single, arr.dtype)


def _prepare_pair(
    boxes1: ArrayLike, boxes2: ArrayLike, fmt: str, inclusive: bool, empty: float
) -> tuple[_Boxes, _Boxes, np.dtype[Any], float]:
    check_format(fmt, inclusive)
    value = check_empty(empty)
    a = prepare(boxes1, "boxes1", fmt, inclusive)
    b = prepare(boxes2, "boxes2", fmt, inclusive)
    return a, b, np.result_type(a.dtype, b.dtype), value


# --------------------------------------------------------------------------------------------
# Element-wise numpy path: the kernels' formulas in the kernels' order of operations.
# --------------------------------------------------------------------------------------------


def elementwise(metric: str, a: NDArray[np.float64], b: NDArray[np.float64], empty: float) -> Any:
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
    cw = np.maximum(ax2, bx2) - np.minimum(ax1, bx1)
    ch = np.maximum(ay2, by2) - np.minimum(ay1, by1)
    if metric == "giou":  # -inf flags an enclosing area that underflows, as in giou_from
        c = cw * ch
        gap = np.maximum(c - union, 0.0)
        ratio = np.divide(gap, c, out=np.zeros_like(c), where=c > 0.0)
        lost = (cw > 0.0) & (ch > 0.0) & (c < TINY)
        return np.where(lost, -np.inf, np.where(c > 0.0, iou - ratio, iou))
    c2 = cw * cw + ch * ch
    dx = 0.5 * ((ax1 + ax2) - (bx1 + bx2))  # halved before squaring: up to 8 L^2, within
    dy = 0.5 * ((ay1 + ay2) - (by1 + by2))  # the 16 L^2 that validate() keeps from overflow
    rho2 = dx * dx + dy * dy
    d = np.minimum(np.divide(rho2, c2, out=np.zeros_like(c2), where=c2 > 0.0), 1.0)
    d[((cw > 0.0) | (ch > 0.0)) & (c2 < TINY)] = np.inf  # as in distance_penalty
    if metric == "diou":
        return iou - d
    t = at - bt
    v = _FOUR_OVER_PI_SQ * (t * t)
    den = (1.0 - iou) + v
    alpha = np.divide(v, den, out=np.zeros_like(den), where=den > 0.0)
    return (iou - d) - alpha * v


def score(
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
        PAIRWISE[metric](a.rows, b.rows, value, out)
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
            result = elementwise(metric, ra, rb, value).astype(dtype, copy=False)
        if a.single and b.single:
            result = result.reshape(())
    # only two zero-area boxes can have an enclosing box that underflows (C >= |A|, |B|)
    if metric in ("giou", "diou", "ciou") and not (a.rows[4].all() or b.rows[4].all()):
        check_enclosing(result, a.single, b.single, pairwise)
    return result[()] if result.ndim == 0 else result


def check_enclosing(
    result: NDArray[Any],
    single1: bool,
    single2: bool,
    pairwise: bool,
    names: tuple[str, str] = ("boxes1", "boxes2"),
) -> None:
    """Refuse a pair whose enclosing box underflows (the kernels flag it with -inf)."""
    if not result.size or np.fmin.reduce(result, axis=None) != -np.inf:  # fmin skips nan
        return
    flagged = np.isneginf(result)
    at = np.unravel_index(int(np.argmax(flagged)), result.shape) if result.ndim else ()
    if pairwise:
        i, j = (None if single1 else int(at[0])), (None if single2 else int(at[-1]))
    else:
        i = j = int(at[0]) if at else None
    one = names[0] if i is None or single1 else f"{names[0]}[{i}]"
    two = names[1] if j is None or single2 else f"{names[1]}[{j}]"
    msg = (
        f"{one} and {two} are zero-area boxes so close together that the area or squared "
        "diagonal of their enclosing box underflows in float64 (GIoU, DIoU and CIoU would read "
        "them as the same point); rescale the boxes"
    )
    raise BoxError(msg)
