"""Layer 1 of the box domain: Numba kernels for pairwise box overlap (IoU, Dice, GIoU, DIoU, CIoU).

Inputs are float64 rows (x1, y1, x2, y2, area[, angle]) of validated, exclusive xyxy boxes; the
caller (:mod:`segiou.geometry.boxes`) allocates ``out`` (float32 or float64). Every division is
guarded by a comparison with a literal 0.0, which also lets LLVM drop Numba's zero-division
check and vectorise the inner loop. Nothing here raises.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from segiou._jit import kernel

__all__ = ["PAIRWISE", "TINY", "aspect_penalty", "distance_penalty", "giou_from", "iou_parts"]

_FOUR_OVER_PI_SQ: Final = 4.0 / math.pi**2
#: The smallest normal float64: an enclosing area or squared diagonal below it has underflowed.
TINY: Final = float(np.finfo(np.float64).tiny)


@kernel
def iou_parts(
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
            iou, _, _ = iou_parts(
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
            iou, inter, _ = iou_parts(
                ax1, ay1, ax2, ay2, aa, bx1[j], by1[j], bx2[j], by2[j], ba[j], empty
            )
            total = aa + ba[j]
            out[i, j] = (2.0 * inter) / total if total > 0.0 else iou


@kernel
def giou_from(
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
    """Return GIoU = IoU - (C - U) / C, C the enclosing box's area (IoU when C = 0).

    -inf flags a positive C that underflows (two zero-area boxes very close together).
    """
    cw = max(ax2, bx2) - min(ax1, bx1)
    ch = max(ay2, by2) - min(ay1, by1)
    c = cw * ch
    if cw > 0.0 and ch > 0.0 and c < TINY:
        return -math.inf
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
            iou, _, union = iou_parts(
                ax1, ay1, ax2, ay2, aa, bx1[j], by1[j], bx2[j], by2[j], ba[j], empty
            )
            out[i, j] = giou_from(iou, union, ax1, ay1, ax2, ay2, bx1[j], by1[j], bx2[j], by2[j])


@kernel
def distance_penalty(
    ax1: float, ay1: float, ax2: float, ay2: float, bx1: float, by1: float, bx2: float, by2: float
) -> float:
    """Return rho^2 / c^2: squared centre distance over the enclosing box's squared diagonal.

    inf flags a positive c^2 that underflows (two zero-area boxes very close together).
    """
    cw = max(ax2, bx2) - min(ax1, bx1)
    ch = max(ay2, by2) - min(ay1, by1)
    c2 = cw * cw + ch * ch
    if (cw > 0.0 or ch > 0.0) and c2 < TINY:
        return math.inf
    dx = 0.5 * ((ax1 + ax2) - (bx1 + bx2))  # halved before squaring: up to 8 L^2, within
    dy = 0.5 * ((ay1 + ay2) - (by1 + by2))  # the 16 L^2 that validate() keeps from overflow
    rho2 = dx * dx + dy * dy
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
            iou, _, _ = iou_parts(
                ax1, ay1, ax2, ay2, aa, bx1[j], by1[j], bx2[j], by2[j], ba[j], empty
            )
            d = distance_penalty(ax1, ay1, ax2, ay2, bx1[j], by1[j], bx2[j], by2[j])
            out[i, j] = iou - d


@kernel
def aspect_penalty(iou: float, a_angle: float, b_angle: float) -> float:
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
            iou, _, _ = iou_parts(
                ax1, ay1, ax2, ay2, aa, bx1[j], by1[j], bx2[j], by2[j], ba[j], empty
            )
            d = distance_penalty(ax1, ay1, ax2, ay2, bx1[j], by1[j], bx2[j], by2[j])
            out[i, j] = (iou - d) - aspect_penalty(iou, at, bt[j])


PAIRWISE = {
    "iou": _pairwise_iou,
    "dice": _pairwise_dice,
    "giou": _pairwise_giou,
    "diou": _pairwise_diou,
    "ciou": _pairwise_ciou,
}
