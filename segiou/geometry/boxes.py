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

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from segiou.errors import BoxError
from segiou.geometry._box_core import (
    BOX_FORMATS,
    BoxFormat,
    BoxScore,
    as_box_array,
    check_empty,
    check_enclosing,
    check_format,
    elementwise,
    from_xyxy,
    prepare,
    score,
    to_xyxy,
    validate,
)

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
        format ``fmt``. Integer, float32 and float64 coordinates are accepted (long double
        too, when every value is exactly a float64).
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
        option is invalid. Also boxes float64 cannot score exactly: coordinates so large that
        areas would overflow, a positive area below the smallest normal float64 (2.2e-308;
        subnormal areas keep too few bits), two zero-area boxes whose enclosing box's area or
        squared diagonal underflows (GIoU, DIoU, CIoU), integers beyond 2**53 - 1
        (2**52 - 1 in cxcywh, whose corners ``cx +- w/2`` are half-integers), which also
        bounds float coordinates wherever corners are computed (xywh, cxcywh, ``inclusive``),
        and a width or height too small for its position (``x + w`` rounds to ``x``). The
        message names the box (e.g. ``boxes1[3]``) and its values.
    ShapeMismatchError
        Element-wise with ``N != M`` and neither side a single box.

    Notes
    -----
    ``IoU = |A & B| / |A | B|`` with ``|A & B| = max(0, min(ax2, bx2) - max(ax1, bx1)) *
    max(0, min(ay2, by2) - max(ay1, by1))`` and ``|A | B| = |A| + |B| - |A & B|``.

    Exact edge cases, with no epsilon added anywhere: disjoint boxes and boxes that only touch
    (share an edge or a corner) score exactly 0; identical boxes of positive area score exactly
    1. Touching means touching as evaluated, in xyxy corners: xywh and cxcywh boxes are first
    converted, ``x + w`` rounded to float64, so ``[0.1, 0, 0.2, 1]`` and ``[0.3, 0, 0.2, 1]``
    (xywh), which overlap by 2.8e-17 in exact arithmetic on these doubles (0.1 + 0.2 is above
    0.3), score 1.4e-16, not 0. Two zero-area boxes have an empty union: identical ones score ``empty`` (default 0, as in
    pycocotools, whose ``bbIou`` skips pairs with a non-positive overlap; torchvision's
    ``box_iou`` returns nan, i.e. ``empty=nan``; ``empty=1`` reads "identical is a perfect
    match"), and non-identical ones score 0.

    With ``inclusive=True`` each box is widened to ``(x1, y1, x2 + 1, y2 + 1)`` first: a box
    with ``x1 == x2`` is one pixel wide, and boxes touch when ``b.x1 == a.x2 + 1``.
    ``box_iou(a, b)`` equals ``box_iou(b, a).T`` exactly.

    The result has shape ``(N, M)`` when ``pairwise`` (a single ``(4,)`` box drops its axis, two
    single boxes give a numpy scalar) and ``(K,)`` element-wise (``K = max(N, M)``; one box on
    either side is broadcast). It is float32 when both inputs are float32 and float64 otherwise;
    the arithmetic is always done in float64 and rounded once at the end. A float32 IoU can round
    up to a threshold it misses, so :func:`segiou.geometry.verdicts.match` refuses it: for
    verdicts, pass float64 boxes (``boxes.astype(np.float64)``).

    References
    ----------
    .. [1] M. Everingham et al., "The PASCAL Visual Object Classes (VOC) Challenge", IJCV 2010.

    Examples
    --------
    >>> from segiou.geometry.boxes import box_iou
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
    return score(
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
    >>> from segiou.geometry.boxes import box_dice
    >>> float(box_dice([50, 50, 150, 150], [80, 80, 180, 180]))  # 9,800 / 20,000
    0.49
    """
    return score(
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
    >>> from segiou.geometry.boxes import box_giou
    >>> round(float(box_giou([50, 50, 150, 150], [80, 80, 180, 180])), 6)  # C = 130 x 130
    0.217994
    >>> float(box_giou([0, 0, 1, 1], [2, 0, 3, 1]))  # IoU 0, C = 3, U = 2
    -0.3333333333333333
    """
    return score(
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
    >>> from segiou.geometry.boxes import box_diou
    >>> float(box_diou([0, 0, 2, 2], [1, 0, 3, 2]))  # IoU 1/3, rho^2 = 1, c^2 = 9 + 4
    0.2564102564102564
    """
    return score(
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
    >>> from segiou.geometry.boxes import box_ciou
    >>> round(float(box_ciou([0, 0, 2, 2], [1, 0, 3, 2])), 12)  # same aspect: CIoU = DIoU
    0.25641025641
    >>> round(float(box_ciou([0, 0, 4, 2], [0, 0, 2, 4])), 6)  # 1/3 - 2/32 - alpha v
    0.237082
    """
    return score(
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
    ``area = (x2 - x1) (y2 - y1)``, computed in float64 from the corners as evaluated. For
    xywh and cxcywh that is ``((x + w) - x) ((y + h) - y)`` after rounding the corners, which
    can differ from ``w h`` in the last bits (``[0.1, 0, 0.2, 1]`` has area
    0.20000000000000004): the metrics use the same area and the same corners, so identical
    boxes score 1 and IoU never exceeds 1.

    Examples
    --------
    >>> from segiou.geometry.boxes import box_area
    >>> box_area([[0, 0, 10, 5], [2, 2, 2, 9]])
    array([50.,  0.])
    >>> box_area([0, 0, 9, 4], inclusive=True)
    array(50.)
    """
    check_format(fmt, inclusive)
    b = prepare(boxes, "boxes", fmt, inclusive)
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
        Invalid boxes (checked in format ``fmt``) or an unknown format; integer coordinates
        reaching 2**52 when converting from or to cxcywh (a centre is a half-integer).

    Notes
    -----
    ``xywh -> xyxy``: ``(x, y, x + w, y + h)``; ``cxcywh -> xyxy``:
    ``(cx - w/2, cy - h/2, cx + w/2, cy + h/2)``; the reverse conversions invert these (up to
    rounding). Image coordinates: y grows downward, so ``(x1, y1)`` is the top-left corner.

    Examples
    --------
    >>> from segiou.geometry.boxes import convert_boxes
    >>> convert_boxes([10, 20, 30, 40], fmt="xywh", to="xyxy")
    array([10., 20., 40., 60.])
    >>> convert_boxes([[0, 0, 4, 2]], fmt="xyxy", to="cxcywh")
    array([[2., 1., 4., 2.]])
    """
    check_format(fmt, False)
    check_format(to, False)
    arr, single = as_box_array(boxes, "boxes", fmt, halves="cxcywh" in (fmt, to))
    validate(arr, "boxes", fmt, single)
    out = from_xyxy(to_xyxy(arr.astype(np.float64), fmt), to).astype(arr.dtype)
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
    >>> from segiou.geometry.boxes import box_overlap
    >>> o = box_overlap([50, 50, 150, 150], [80, 80, 180, 180])
    >>> o.intersection, o.union, o.intersection_box
    (4900.0, 15100.0, (80.0, 80.0, 150.0, 150.0))
    >>> round(o.iou, 4), o.dice
    (0.3245, 0.49)
    """
    check_format(fmt, inclusive)
    value = check_empty(empty)
    a = prepare(box1, "box1", fmt, inclusive)
    b = prepare(box2, "box2", fmt, inclusive)
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
        metric: float(elementwise(metric, a.rows, b.rows, value)[0])
        for metric in ("iou", "dice", "giou", "diou", "ciou")
    }
    check_enclosing(np.array([scores["giou"], scores["diou"]]), True, True, False, ("box1", "box2"))
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
