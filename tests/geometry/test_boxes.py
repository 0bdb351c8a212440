"""Tests of segiou.boxes (box IoU, Dice, GIoU, DIoU, CIoU) and segiou.verdicts."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from segiou.errors import SegiouError, ShapeMismatchError
from segiou.geometry.boxes import (
    BOX_FORMATS,
    BoxError,
    box_area,
    box_ciou,
    box_dice,
    box_diou,
    box_giou,
    box_iou,
    box_overlap,
    convert_boxes,
)
from segiou.geometry.verdicts import (
    COCO_THRESHOLDS,
    VerdictError,
    match,
    verdicts,
)

METRICS = {
    "iou": box_iou,
    "dice": box_dice,
    "giou": box_giou,
    "diou": box_diou,
    "ciou": box_ciou,
}


# --------------------------------------------------------------------------------------------
# A slow, obvious reference: one pair at a time, plain Python, exclusive xyxy boxes.
# With Fraction coordinates every metric but CIoU is exact.
# --------------------------------------------------------------------------------------------


def ref_parts(a, b):
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    iw = max(0, min(ax2, bx2) - max(ax1, bx1))
    ih = max(0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    area_a = (ax2 - ax1) * (ay2 - ay1)
    area_b = (bx2 - bx1) * (by2 - by1)
    union = area_a + area_b - inter
    cw = max(ax2, bx2) - min(ax1, bx1)
    ch = max(ay2, by2) - min(ay1, by1)
    return inter, union, area_a, area_b, cw, ch


def ref_metric(metric, a, b, empty=0.0):
    inter, union, area_a, area_b, cw, ch = ref_parts(a, b)
    identical = tuple(a) == tuple(b)
    iou = inter / union if union > 0 else (empty if identical else 0)
    if metric == "iou":
        return iou
    if metric == "dice":
        return 2 * inter / (area_a + area_b) if area_a + area_b > 0 else iou
    if metric == "giou":
        c = cw * ch
        return iou - (c - union) / c if c > 0 else iou
    c2 = cw**2 + ch**2
    dx = (a[0] + a[2]) / 2 - (b[0] + b[2]) / 2
    dy = (a[1] + a[3]) / 2 - (b[1] + b[3]) / 2
    rho2 = dx**2 + dy**2
    diou = iou - (rho2 / c2 if c2 > 0 else 0)
    if metric == "diou":
        return diou

    def angle(box):
        w, h = box[2] - box[0], box[3] - box[1]
        if h == 0:
            return math.pi / 2 if w > 0 else 0.0
        return math.atan(w / h)

    v = 4 / math.pi**2 * (angle(a) - angle(b)) ** 2
    den = (1 - iou) + v
    alpha = v / den if den > 0 else 0.0
    return float(diou) - alpha * v


def ref_matrix(metric, boxes1, boxes2, empty=0.0):
    return np.array(
        [[float(ref_metric(metric, a, b, empty)) for b in boxes2] for a in boxes1]
    ).reshape(len(boxes1), len(boxes2))


def numpy_broadcast_iou(a, b):
    """The usual vectorised formula (torchvision's box_iou in numpy)."""
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def random_boxes(rng, n, *, degenerate=0.0, dtype=np.float64):
    xy = rng.uniform(-50, 100, (n, 2))
    wh = rng.uniform(0, 60, (n, 2))
    wh[rng.random((n, 2)) < degenerate] = 0.0
    return np.concatenate([xy, xy + wh], axis=1).astype(dtype)


# --------------------------------------------------------------------------------------------
# Worked examples with exact numbers
# --------------------------------------------------------------------------------------------

A = [50, 50, 150, 150]
B = [80, 80, 180, 180]


def test_worked_example_exact():
    o = box_overlap(A, B)
    assert (o.area1, o.area2) == (10_000.0, 10_000.0)
    assert o.intersection == 4_900.0
    assert o.union == 15_100.0
    assert o.enclosing_area == 130.0 * 130.0
    assert o.intersection_box == (80.0, 80.0, 150.0, 150.0)
    assert o.enclosing_box == (50.0, 50.0, 180.0, 180.0)
    assert o.iou == 4_900 / 15_100  # correctly rounded: one division of exact integers
    assert repr(o.iou) == "0.32450331125827814"
    assert o.dice == 0.49
    assert o.giou == 4_900 / 15_100 - 1_800 / 16_900
    assert float(box_iou(A, B)) == o.iou
    assert float(box_dice(A, B)) == 0.49
    assert float(box_giou(A, B)) == o.giou


def test_worked_example_diou_ciou():
    # equal squares: centres (100, 100) and (130, 130), rho^2 = 1800, c^2 = 2 * 130^2
    expected = 4_900 / 15_100 - 1_800 / (2 * 130**2)
    assert float(box_diou(A, B)) == pytest.approx(expected, rel=1e-15)
    assert float(box_ciou(A, B)) == float(box_diou(A, B))  # same aspect ratio: v = 0
    # 4x2 vs 2x4 sharing a corner: IoU 1/3, rho^2/c^2 = 2/32, v = 4/pi^2 (atan 2 - atan 1/2)^2
    v = 4 / math.pi**2 * (math.atan(2) - math.atan(0.5)) ** 2
    alpha = v / ((1 - 1 / 3) + v)
    assert float(box_ciou([0, 0, 4, 2], [0, 0, 2, 4])) == pytest.approx(
        1 / 3 - 2 / 32 - alpha * v, rel=1e-14
    )


@pytest.mark.parametrize("metric", list(METRICS))
def test_disjoint_and_touching_boxes_give_zero_overlap(metric):
    f = METRICS[metric]
    a = [0, 0, 10, 10]
    for b in ([20, 20, 30, 30], [10, 0, 20, 10], [0, 10, 10, 20], [10, 10, 20, 20]):
        assert float(box_iou(a, b)) == 0.0  # disjoint, edge, edge, corner
        assert float(box_dice(a, b)) == 0.0
        if metric in {"diou", "ciou"}:
            assert float(f(a, b)) < 0.0  # the centres are apart
        if metric == "giou":
            assert float(f(a, b)) <= 0.0  # 0 when the boxes share a full edge (C = U)
    # touching: GIoU = -(C - U) / C exactly, e.g. two unit squares side by side: -(2 - 2) / 2 = 0
    assert float(box_giou([0, 0, 1, 1], [1, 0, 2, 1])) == 0.0
    assert float(box_giou([0, 0, 1, 1], [2, 0, 3, 1])) == -1 / 3


@pytest.mark.parametrize("metric", list(METRICS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_identical_boxes_give_exactly_one(metric, dtype):
    boxes = random_boxes(np.random.default_rng(1), 200).astype(dtype)
    boxes = boxes[box_area(boxes) > 0]
    out = METRICS[metric](boxes, boxes, pairwise=False)
    assert_array_equal(out, 1.0)
    assert np.all(np.diag(METRICS[metric](boxes, boxes)) == 1.0)


@pytest.mark.parametrize("metric", list(METRICS))
def test_identical_zero_area_boxes_score_empty(metric):
    f = METRICS[metric]
    for box in ([5, 5, 5, 5], [0, 0, 0, 7], [0, 3, 9, 3]):
        assert float(f(box, box)) == 0.0  # default, as pycocotools
        assert float(f(box, box, empty=1.0)) == 1.0
        assert math.isnan(float(f(box, box, empty=math.nan)))  # torchvision's 0/0
    # non-identical zero-area boxes always have IoU 0, whatever `empty` says
    assert float(box_iou([0, 0, 0, 5], [0, 1, 0, 6], empty=1.0)) == 0.0
    assert float(box_iou([0, 0, 0, 0], [0, 0, 2, 2], empty=1.0)) == 0.0


def test_degenerate_enclosing_box_cases():
    # two distinct points: U = 0, C > 0 -> GIoU = -1
    assert float(box_giou([0, 0, 0, 0], [3, 4, 3, 4])) == -1.0
    # collinear segments on one line: C = 0 -> GIoU = IoU = 0; DIoU penalty rho^2 / c^2
    assert float(box_giou([0, 0, 0, 2], [0, 5, 0, 9])) == 0.0
    assert float(box_diou([0, 0, 0, 2], [0, 5, 0, 9])) == -((1 - 7) ** 2) / 81
    # zero height: aspect angle pi/2 (limit of atan(w/h)); against a square: v = 4/pi^2 (pi/4)^2
    v = 4 / math.pi**2 * (math.pi / 4) ** 2
    d = float(box_diou([0, 0, 4, 0], [0, 0, 4, 4]))
    assert float(box_ciou([0, 0, 4, 0], [0, 0, 4, 4])) == pytest.approx(d - v / (1 + v) * v)


def test_inclusive_voc_convention():
    # VOC: [0, 0, 9, 9] covers 10 x 10 pixels
    assert float(box_area([0, 0, 9, 9], inclusive=True)) == 100.0
    assert float(box_iou([0, 0, 9, 9], [5, 5, 14, 14], inclusive=True)) == 25 / 175
    # sharing pixel column 9 overlaps; starting at column 10 touches
    assert float(box_iou([0, 0, 9, 9], [9, 0, 18, 9], inclusive=True)) == 10 / 190
    assert float(box_iou([0, 0, 9, 9], [10, 0, 19, 9], inclusive=True)) == 0.0
    # a one-pixel box is not degenerate
    assert float(box_iou([3, 3, 3, 3], [3, 3, 3, 3], inclusive=True)) == 1.0
    rng = np.random.default_rng(2)
    a, b = random_boxes(rng, 30), random_boxes(rng, 40)
    plus = np.array([0, 0, 1, 1])
    for f in METRICS.values():
        assert_array_equal(f(a, b, inclusive=True), f(a + plus, b + plus))


def test_inclusive_needs_xyxy():
    with pytest.raises(BoxError, match=r"inclusive=True applies to xyxy.*fmt='xywh'"):
        box_iou([0, 0, 1, 1], [0, 0, 1, 1], fmt="xywh", inclusive=True)


# --------------------------------------------------------------------------------------------
# Formats, shapes, dtypes
# --------------------------------------------------------------------------------------------


def test_formats_agree():
    rng = np.random.default_rng(3)
    a, b = random_boxes(rng, 25), random_boxes(rng, 30)
    for fmt in BOX_FORMATS:
        ca, cb = convert_boxes(a, fmt="xyxy", to=fmt), convert_boxes(b, fmt="xyxy", to=fmt)
        assert_allclose(convert_boxes(ca, fmt=fmt, to="xyxy"), a, rtol=0, atol=1e-12)
        for f in METRICS.values():
            assert_allclose(f(ca, cb, fmt=fmt), f(a, b), rtol=1e-12, atol=1e-12)
    assert float(box_iou([0, 0, 20, 10], [0, 0, 10, 10], fmt="xywh")) == 0.5
    assert float(box_iou([10, 5, 20, 10], [5, 5, 10, 10], fmt="cxcywh")) == 0.5
    assert float(box_iou([10, 10, 20, 20], [20, 10, 20, 20], fmt="cxcywh")) == 1 / 3


def test_convert_boxes_examples():
    assert_array_equal(convert_boxes([10, 20, 30, 40], fmt="xywh", to="xyxy"), [10, 20, 40, 60])
    assert_array_equal(convert_boxes([2, 1, 4, 2], fmt="cxcywh", to="xywh"), [0, 0, 4, 2])
    assert convert_boxes(np.zeros((3, 4), np.float32), fmt="xyxy", to="xywh").dtype == np.float32


def test_result_shapes():
    rng = np.random.default_rng(4)
    a, b = random_boxes(rng, 3), random_boxes(rng, 5)
    assert box_iou(a, b).shape == (3, 5)
    assert box_iou(a, b[0]).shape == (3,)
    assert box_iou(a[0], b).shape == (5,)
    single = box_iou(a[0], b[0])
    assert isinstance(single, np.float64)
    assert box_iou(a, a, pairwise=False).shape == (3,)
    assert box_iou(a, b[:1], pairwise=False).shape == (3,)  # one box broadcasts
    assert box_iou(a[0], b, pairwise=False).shape == (5,)
    assert isinstance(box_iou(a[0], b[0], pairwise=False), np.float64)
    assert box_iou(np.zeros((0, 4)), b).shape == (0, 5)
    assert box_iou(np.zeros((0, 4)), np.zeros((0, 4)), pairwise=False).shape == (0,)
    assert box_area(a).shape == (3,)


def test_dtypes():
    rng = np.random.default_rng(5)
    a32, b32 = random_boxes(rng, 40, dtype=np.float32), random_boxes(rng, 50, dtype=np.float32)
    for f in METRICS.values():
        out32 = f(a32, b32)
        assert out32.dtype == np.float32
        # float32 in: float64 arithmetic, rounded once at the end
        out64 = f(a32.astype(np.float64), b32.astype(np.float64))
        assert out64.dtype == np.float64
        assert_array_equal(out32, out64.astype(np.float32))
        assert f(a32, b32.astype(np.float64)).dtype == np.float64
        assert f(a32.astype(np.int64), b32.astype(np.int16)).dtype == np.float64
        assert f(a32, b32[: len(a32)], pairwise=False).dtype == np.float32
    assert box_iou(a32[0], b32[0]).dtype == np.float32


@pytest.mark.parametrize("metric", list(METRICS))
def test_pairwise_equals_elementwise_bit_for_bit(metric):
    f = METRICS[metric]
    rng = np.random.default_rng(6)
    a, b = random_boxes(rng, 37, degenerate=0.2), random_boxes(rng, 23, degenerate=0.2)
    b[:5] = a[:5]  # identical pairs, some of zero area
    for empty in (0.0, 1.0):
        pw = f(a, b, empty=empty)
        ew = f(np.repeat(a, len(b), axis=0), np.tile(b, (len(a), 1)), pairwise=False, empty=empty)
        assert_array_equal(pw, ew.reshape(len(a), len(b)))
        assert_array_equal(pw, f(b, a, empty=empty).T)  # symmetric, exactly


@pytest.mark.parametrize("metric", list(METRICS))
def test_against_reference_on_random_boxes(metric):
    rng = np.random.default_rng(7)
    a, b = random_boxes(rng, 30, degenerate=0.15), random_boxes(rng, 20, degenerate=0.15)
    b[:4] = a[:4]
    for empty in (0.0, 1.0):
        expected = ref_matrix(metric, a.tolist(), b.tolist(), empty)
        assert_allclose(METRICS[metric](a, b, empty=empty), expected, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("metric", ["iou", "dice", "giou", "diou"])
def test_exact_rational_reference_on_integer_boxes(metric):
    rng = np.random.default_rng(8)
    a = random_boxes(rng, 15).round()
    b = random_boxes(rng, 12).round()
    fa = [[Fraction(int(v)) for v in box] for box in a]
    fb = [[Fraction(int(v)) for v in box] for box in b]
    out = METRICS[metric](a, b)
    for i, j in np.ndindex(out.shape):
        assert out[i, j] == pytest.approx(float(ref_metric(metric, fa[i], fb[j])), rel=4e-16)


def test_iou_equals_numpy_broadcast_exactly():
    rng = np.random.default_rng(9)
    a, b = random_boxes(rng, 300), random_boxes(rng, 200)
    assert_array_equal(box_iou(a, b), numpy_broadcast_iou(a, b))


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

coord = st.integers(min_value=-1000, max_value=1000)
size = st.integers(min_value=0, max_value=500)


@st.composite
def int_box(draw):
    x, y, w, h = draw(coord), draw(coord), draw(size), draw(size)
    return [x, y, x + w, y + h]


@st.composite
def float_box(draw):
    f = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_infinity=False)
    s = st.floats(min_value=0, max_value=1e4, allow_nan=False, allow_infinity=False)
    x, y, w, h = draw(f), draw(f), draw(s), draw(s)
    return [x, y, x + w, y + h]


box_lists = st.lists(int_box(), min_size=1, max_size=6)


@settings(deadline=None, max_examples=150)
@given(a=box_lists, b=box_lists)
def test_bounds_and_orderings(a, b):
    iou, dice = box_iou(a, b), box_dice(a, b)
    giou, diou, ciou = box_giou(a, b), box_diou(a, b), box_ciou(a, b)
    assert np.all((iou >= 0) & (iou <= 1))
    assert np.all((giou >= -1) & (giou <= iou))
    assert np.all((diou >= -1) & (diou <= iou))
    assert np.all((ciou >= -1.5) & (ciou <= diou))
    assert np.all((dice >= iou) & (dice <= 1))
    assert_allclose(dice, 2 * iou / (1 + iou), rtol=1e-14, atol=0)


@settings(deadline=None, max_examples=150)
@given(a=box_lists, b=box_lists)
def test_symmetry(a, b):
    for f in METRICS.values():
        assert_array_equal(f(a, b), f(b, a).T)


@settings(deadline=None, max_examples=100)
@given(a=box_lists, b=box_lists, dx=coord, dy=coord, k=st.integers(1, 50))
def test_translation_and_scaling_invariance(a, b, dx, dy, k):
    shift = np.array([dx, dy, dx, dy])
    a2, b2 = np.array(a) * k + shift, np.array(b) * k + shift
    for name, f in METRICS.items():
        # integer coordinates: every intermediate is an exact integer, so IoU, Dice, GIoU and
        # DIoU are identical; CIoU goes through atan2, equal to rounding
        if name == "ciou":
            assert_allclose(f(a2, b2), f(a, b), rtol=1e-13, atol=1e-15)
        else:
            assert_array_equal(f(a2, b2), f(a, b))


@settings(deadline=None, max_examples=100)
@given(
    a=st.lists(float_box(), min_size=1, max_size=5), b=st.lists(float_box(), min_size=1, max_size=5)
)
def test_float_boxes_match_reference(a, b):
    for name, f in METRICS.items():
        if underflows(name, a, b):  # refused: float64 cannot score these (the exact test)
            with pytest.raises(BoxError, match="underflows"):
                f(a, b)
            continue
        assert_allclose(f(a, b), ref_matrix(name, a, b), rtol=1e-9, atol=1e-9)


def underflows(metric, boxes1, boxes2):
    """Whether, in exact arithmetic, a positive area, or for GIoU the enclosing area and for
    DIoU / CIoU the enclosing box's squared diagonal, is below the smallest normal float64."""
    tiny = Fraction(float(np.finfo(np.float64).tiny))
    fa = [[Fraction(v) for v in box] for box in boxes1]
    fb = [[Fraction(v) for v in box] for box in boxes2]
    if any(0 < (x2 - x1) * (y2 - y1) < tiny for x1, y1, x2, y2 in fa + fb):
        return True
    for p in fa if metric in {"giou", "diou", "ciou"} else []:
        for q in fb:
            cw = max(p[2], q[2]) - min(p[0], q[0])
            ch = max(p[3], q[3]) - min(p[1], q[1])
            if metric == "giou" and cw > 0 and ch > 0 and cw * ch < tiny:
                return True
            if metric != "giou" and 0 < cw * cw + ch * ch < tiny:
                return True
    return False


@settings(deadline=None, max_examples=100)
@given(a=int_box(), b=int_box())
def test_identical_iff_iou_one(a, b):
    assume(box_area(a) > 0)
    assert (float(box_iou(a, b)) == 1.0) == (a == b)


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def test_inverted_box_names_argument_index_and_values():
    boxes = [[0, 0, 1, 1], [0, 0, 2, 2], [0, 0, 3, 3], [5, 1, 4, 9]]
    with pytest.raises(BoxError, match=r"boxes1\[3\] = .*\[5, 1, 4, 9\] has x2 < x1 \(4 < 5\)"):
        box_iou(boxes, [0, 0, 1, 1])
    with pytest.raises(BoxError, match=r"boxes2\[1\] = .*\[0, 7, 3, 6\] has y2 < y1 \(6 < 7\)"):
        box_giou([0, 0, 1, 1], [[0, 0, 1, 1], [0, 7, 3, 6]])
    with pytest.raises(BoxError, match=r"swap the corners"):
        box_iou([2, 0, 1, 1], [0, 0, 1, 1])
    with pytest.raises(BoxError, match=r"boxes2\[0\] = \(x, y, w, h\) = \[0, 0, -1, 2\] has a "):
        box_iou([0, 0, 1, 1], [[0, 0, -1, 2]], fmt="xywh")
    with pytest.raises(BoxError, match=r"negative height \(-0.5\).*cxcywh"):
        box_iou([0, 0, 1, 1], [0, 0, 1, -0.5], fmt="cxcywh")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_coordinates(bad):
    with pytest.raises(BoxError, match=r"boxes1\[1\] = \[0, 0, .*non-finite coordinate"):
        box_iou([[0, 0, 1, 1], [0, 0, bad, 1]], [0, 0, 1, 1])
    with pytest.raises(BoxError, match=r"boxes2 = .*non-finite"):
        box_dice([0, 0, 1, 1], [0, bad, 1, 1])


@pytest.mark.parametrize("shape", [(3,), (5,), (2, 5), (2, 4, 1), (4, 4, 4), ()])
def test_bad_shapes(shape):
    with pytest.raises(BoxError, match=rf"boxes1 has shape {re_shape(shape)}; expected \(N, 4\)"):
        box_iou(np.zeros(shape), [0, 0, 1, 1])


def re_shape(shape):
    return str(shape).replace("(", r"\(").replace(")", r"\)")


def test_bad_inputs_and_options():
    with pytest.raises(BoxError, match="dtype <U1"):
        box_iou(["a", "b", "c", "d"], [0, 0, 1, 1])
    with pytest.raises(BoxError, match="dtype bool"):
        box_iou(np.ones(4, bool), [0, 0, 1, 1])
    with pytest.raises(BoxError, match="not an array of numbers"):
        box_iou([[0, 0, 1, 1], [0, 0]], [0, 0, 1, 1])
    with pytest.raises(BoxError, match="fmt='yxyx' is not a box format"):
        box_iou([0, 0, 1, 1], [0, 0, 1, 1], fmt="yxyx")
    with pytest.raises(BoxError, match=r"empty=2 is outside \[0, 1\]"):
        box_iou([0, 0, 1, 1], [0, 0, 1, 1], empty=2)
    with pytest.raises(BoxError, match="too large for float64 arithmetic"):
        box_iou([0, 0, 1e160, 1], [0, 0, 1, 1])
    with pytest.raises(BoxError, match="box2 holds 2 boxes; expected one"):
        box_overlap([0, 0, 1, 1], [[0, 0, 1, 1], [0, 0, 1, 1]])


@pytest.mark.parametrize("pairwise", [True, False])
def test_diou_and_ciou_at_the_largest_accepted_coordinates(pairwise):
    """Centre distances are halved before squaring: at coordinates near the limit validate()
    accepts, the squared distance overflowed and DIoU read -1 where it is -5/8 at any scale."""
    big = math.sqrt(np.finfo(np.float64).max / 18)
    a, b = np.array([[-big, -big, -big, big]]), np.array([[big, big, big, big]])
    for fn in (box_diou, box_ciou):
        want = fn(a / big, b / big, pairwise=pairwise)
        with np.errstate(all="raise"):
            got = fn(a, b, pairwise=pairwise)
        assert_allclose(got, want, rtol=1e-12)
        assert_allclose(want, -0.625)


def test_areas_that_underflow_or_integers_beyond_2_53_are_refused():
    """Every metric is scale-free, float64 is not: a positive area that underflows read as an
    empty box (identical boxes scored 0), an integer past 2**53 as another one."""
    with pytest.raises(BoxError, match=r"boxes1\[1\] = \[0, 0, 1e-200, 1e-200\] has an area of 0"):
        box_iou([[0, 0, 1, 1], [0, 0, 1e-200, 1e-200]], [0, 0, 1, 1])
    with pytest.raises(BoxError, match="too small for float64"):
        box_area([0, 0, 1e-160, 1e-170])
    with pytest.raises(BoxError, match=r"has an area of 9.99989e-321, too small"):
        box_area([0, 0, 1e-160, 1e-160])  # subnormal: a few bits left (see the test below)
    assert box_iou([0, 0, 1e-150, 1e-150], [0, 0, 1e-150, 1e-150]) == 1.0
    assert box_iou([0, 0, 0, 1e-200], [0, 0, 0, 1e-200]) == 0.0  # zero width: empty, as always
    with pytest.raises(BoxError, match="integer coordinates reaching 9007199254740993 "):
        box_iou(np.array([2**53, 0, 2**53 + 1, 1], np.int64), [0, 0, 1, 1])
    # corners made from the coordinates count too, and int64's minimum
    for box, fmt in (([2**53, 0, 1, 1], "xywh"), ([-(2**63), 0, 2, 2], "cxcywh"),
                     ([2**53, 0, 2**53, 0], "xyxy")):  # fmt: skip
        bound = "52" if fmt == "cxcywh" else "53"  # cx +- w / 2: half-integers
        with pytest.raises(BoxError, match=f"beyond 2\\*\\*{bound} - 1"):
            box_iou(
                np.array(box, np.int64), np.array(box, np.int64), fmt=fmt, inclusive=fmt == "xyxy"
            )
    box = np.array([2**53 - 3, 0, 2**53 - 2, 1], np.int64)
    assert box_iou(box, box, inclusive=True) == 1.0
    assert box_iou(box, box + np.array([1, 0, 1, 0])) == 0.0  # touching


@pytest.mark.parametrize("empty", ["x", None, [0.5]])
def test_non_numeric_empty_option(empty):
    with pytest.raises(
        BoxError, match=r"empty=.* is not a number; pass 0.0 \(default\), 1.0 or nan"
    ):
        box_iou([0, 0, 1, 1], [0, 0, 1, 1], empty=empty)


def test_elementwise_length_mismatch():
    with pytest.raises(ShapeMismatchError, match=r"boxes1 holds 3 boxes and boxes2 holds 2"):
        box_iou(np.zeros((3, 4)), np.zeros((2, 4)), pairwise=False)


def test_errors_are_segiou_and_builtin_errors():
    with pytest.raises(SegiouError):
        box_iou([1, 0, 0, 1], [0, 0, 1, 1])
    with pytest.raises(ValueError, match="x2 < x1"):
        box_iou([1, 0, 0, 1], [0, 0, 1, 1])


# --------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------


def test_match_is_inclusive_and_exact():
    assert match(0.5)
    assert not match(np.nextafter(0.5, 0))
    assert match(0.75, threshold=0.75)
    assert match(0.0, threshold=0.0)
    assert not match(float(box_iou(A, B)))
    assert match(1.0, 1.0)


def test_coco_thresholds_are_exact_decimals():
    assert COCO_THRESHOLDS == (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
    assert verdicts(0.9).n_matched == 9  # pycocotools' linspace would also match 0.8999...
    assert verdicts(np.nextafter(0.9, 0)).n_matched == 8


def test_verdicts_worked_examples():
    v = verdicts(float(box_iou(A, B)))
    assert (v.match, v.voc50, v.coco75, v.coco95, v.n_matched) == (False, False, False, False, 0)
    v = verdicts(0.8, threshold=0.8)
    assert (v.match, v.voc50, v.coco75, v.coco95, v.n_matched) == (True, True, True, False, 7)
    assert v.fraction_matched == 0.7
    v = verdicts(1.0)
    assert v.coco95
    assert v.n_matched == 10
    assert all(ok for _, ok in v.sweep)
    assert [t for t, _ in v.sweep] == list(COCO_THRESHOLDS)


@settings(deadline=None)
@given(iou=st.floats(0, 1), threshold=st.floats(0, 1))
def test_verdicts_property(iou, threshold):
    v = verdicts(iou, threshold=threshold)
    assert v.match == (iou >= threshold) == match(iou, threshold)
    assert v.n_matched == sum(iou >= t for t in COCO_THRESHOLDS)
    matched = [ok for _, ok in v.sweep]
    assert matched == sorted(matched, reverse=True)  # a prefix of the sweep


@pytest.mark.parametrize(
    ("iou", "threshold", "pattern"),
    [
        (math.nan, 0.5, r"iou=nan is outside \[0, 1\]"),
        (1.5, 0.5, r"iou=1.5 is outside"),
        (-0.1, 0.5, r"iou=-0.1 is outside"),
        (0.5, 2, r"threshold=2.0 is outside \[0, 1\]; pass a threshold"),
        ("high", 0.5, r"iou='high' is not a number"),
    ],
)
def test_verdict_errors(iou, threshold, pattern):
    with pytest.raises(VerdictError, match=pattern):
        verdicts(iou, threshold=threshold)
    with pytest.raises(ValueError, match=pattern):
        match(iou, threshold)


# --------------------------------------------------------------------------------------------
# Exactness guards at the edges of float64
# --------------------------------------------------------------------------------------------


def frac_xyxy(box, fmt):
    """Exact xyxy corners of one box (Fractions)."""
    a, b, c, d = (Fraction(v) for v in box)
    if fmt == "xywh":
        return [a, b, a + c, b + d]
    if fmt == "cxcywh":
        return [a - c / 2, b - d / 2, a + c / 2, b + d / 2]
    return [a, b, c, d]


def test_cxcywh_integers_exact_below_2_52_refused_from_2_52():
    """cx +- w / 2 is a half-integer for an odd w: float64 holds those only below 2**52. Boxes
    reaching 2**52 passed the 2**53 guard and scored an area of 7 for 3 x 2 (IoU 0.714 for 0.5)."""
    top = 2**52 - 1  # reach |cx| + w
    a, b = [top - 3, 0, 3, 2], [top - 4, 0, 3, 2]
    assert float(box_area(a, fmt="cxcywh")) == 6.0
    want = ref_metric("iou", frac_xyxy(a, "cxcywh"), frac_xyxy(b, "cxcywh"))
    assert want == Fraction(1, 2)
    assert float(box_iou(a, b, fmt="cxcywh")) == want
    for box in (a, b):
        exact = frac_xyxy(box, "cxcywh")
        assert [Fraction(v) for v in convert_boxes(box, fmt="cxcywh", to="xyxy")] == exact
    with pytest.raises(BoxError, match=r"reaching 4503599627370496 \(cxcywh\), beyond 2\*\*52 - 1"):
        box_iou([2**52 - 3, 0, 3, 2], b, fmt="cxcywh")
    with pytest.raises(BoxError, match=r"beyond 2\*\*52 - 1"):
        box_area([2**52, 0, 3, 2], fmt="cxcywh")


def test_convert_boxes_to_cxcywh_guards_half_integer_centres():
    """The centre of an xyxy box is a half-integer: [2**52, 0, 2**52 + 1, 1] became cx = 2**52."""
    box = [2**52 - 2, 0, 2**52 - 1, 1]
    out = convert_boxes(box, fmt="xyxy", to="cxcywh")
    assert [Fraction(v) for v in out] == [Fraction(2**53 - 3, 2), Fraction(1, 2), 1, 1]
    assert convert_boxes(out, fmt="cxcywh", to="xyxy").tolist() == box
    for fmt, to, bad in (("xyxy", "cxcywh", [2**52, 0, 2**52 + 1, 1]),
                         ("xywh", "cxcywh", [2**52, 0, 1, 1]),
                         ("cxcywh", "xywh", [2**52, 0, 1, 1])):  # fmt: skip
        with pytest.raises(BoxError, match=r"beyond 2\*\*52 - 1"):
            convert_boxes(bad, fmt=fmt, to=to)
    assert_array_equal(
        convert_boxes([2**52, 0, 1, 1], fmt="xywh", to="xyxy"), [2**52, 0, 2**52 + 1, 1]
    )


@pytest.mark.parametrize("fmt", ["xywh", "cxcywh"])
def test_float_boxes_whose_corners_round_are_refused_like_integers(fmt):
    """Float input skipped the 2**53 guard: xywh [2.0**53, 0, 1, 1] became the zero-width
    [2**53, 0, 2**53, 1] (identical boxes scored 0)."""
    bound = 2**52 if fmt == "cxcywh" else 2**53
    ok = np.array([bound - 4.0, 0, 3, 2])  # reach bound - 1: corners exact
    exact = frac_xyxy(ok.tolist(), fmt)
    assert float(box_area(ok, fmt=fmt)) == (exact[2] - exact[0]) * (exact[3] - exact[1]) == 6
    assert float(box_iou(ok, ok, fmt=fmt)) == 1.0
    for bad in (np.array([bound - 3.0, 0, 3, 2]), np.float32([2.0**60, 0, 1, 1])):
        with pytest.raises(
            BoxError, match=rf"boxes1 has coordinates reaching .*2\*\*{bound.bit_length() - 1} - 1"
        ):
            box_iou(bad, bad, fmt=fmt)
    # a size below the rounding of its position: x + w == x
    with pytest.raises(
        BoxError, match=r"boxes2 = \[1000000, 0, 1e-11, 1\] \(xywh\) has a size too"
    ):
        box_iou([0, 0, 1, 1], [1e6, 0, 1e-11, 1], fmt="xywh")


def test_float_inclusive_corners_are_guarded_and_plain_xyxy_floats_are_not():
    with pytest.raises(BoxError, match=r"reaching 9007199254740992 \(xyxy\), beyond 2\*\*53 - 1"):
        box_iou([0, 0, 2.0**53, 0], [0, 0, 2.0**53, 0], inclusive=True)
    assert float(box_iou([0, 0, 2.0**53 - 2, 0], [0, 0, 2.0**53 - 2, 0], inclusive=True)) == 1.0
    # xyxy floats are used as given: nothing is added to them
    assert float(box_iou([0, 0, 2.0**70, 2.0**70], [0, 0, 2.0**70, 2.0**69])) == 0.5


def test_python_integers_beyond_int64_do_not_advise_a_rounding_conversion():
    with pytest.raises(BoxError, match="dtype object") as info:
        box_iou([-1, 0, 2**64 + 1, 1], [0, 0, 1, 1])
    assert "dtype=float)" not in str(info.value)
    assert "rounds them silently" in str(info.value)


def test_subnormal_areas_are_refused_normal_ones_are_exact():
    """A subnormal area keeps a few bits: [0, 0, 1.4e-161, 1e-162] against [0, 0, 0.6e-161,
    1e-162] scored IoU 0.333 where it is 3/7 (0.4286) at any scale."""
    tiny = np.finfo(np.float64).tiny
    a, b = [0, 0, 2.0**-500, 2.0**-522], [0, 0, 2.0**-500 * 3 / 4, 2.0**-521]  # areas >= tiny
    assert float(box_area(a)) == tiny
    want = ref_metric("iou", [Fraction(v) for v in a], [Fraction(v) for v in b])
    assert want == Fraction(3, 7)  # the IoU of these boxes at any scale
    assert float(box_iou(a, b)) == float(want)  # correctly rounded
    with pytest.raises(BoxError, match=r"boxes1 = \[0, 0, 1.4e-161, 1e-162\] has an area of 1.48"):
        box_iou([0, 0, 1.4e-161, 1e-162], [0, 0, 0.6e-161, 1e-162])
    with pytest.raises(BoxError, match=r"boxes2\[1\] = .* too small for float64"):
        box_iou(a, [a, [0, 0, 2.0**-500, 2.0**-523]])  # area tiny / 2


@pytest.mark.parametrize("pairwise", [True, False])
def test_zero_area_boxes_whose_enclosing_box_underflows_are_refused(pairwise):
    """Two distinct points 1e-170 apart: c^2 underflowed to 0 and DIoU read 0 (the same point)
    where it is -1 at any other scale; GIoU of two segments likewise read 0 for -1."""
    for f, a, b in ((box_diou, [0, 0, 0, 0], [1e-170, 0, 1e-170, 0]),
                    (box_ciou, [0, 0, 0, 0], [1e-170, 0, 1e-170, 0]),
                    (box_giou, [0, 0, 0, 1e-170], [1e-170, 0, 1e-170, 1e-170])):  # fmt: skip
        assert float(f(np.array(a) * 1e160, np.array(b) * 1e160, pairwise=pairwise)) == -1.0
        with pytest.raises(BoxError, match="boxes1 and boxes2 are zero-area boxes so close"):
            f(a, b, pairwise=pairwise)
        with pytest.raises(BoxError, match=r"boxes1\[1\] and boxes2\[1\] are zero-area"):
            f([[0, 0, 1, 1], a], [[5, 5, 6, 6], b], pairwise=pairwise)
        assert float(box_iou(a, b, pairwise=pairwise)) == 0.0  # IoU needs no enclosing box
    with pytest.raises(BoxError, match="box1 and box2 are zero-area boxes so close"):
        box_overlap([0, 0, 0, 0], [1e-170, 0, 1e-170, 0])
    assert float(box_diou([0, 0, 0, 0], [1e-150, 0, 1e-150, 0])) == -1.0  # c^2 = 1e-300: normal


def test_float32_iou_is_refused_by_verdicts_float64_gives_the_exact_verdict():
    """float32 boxes gave a float32 IoU: 0.49999999255 rounded to 0.5 and match() said yes."""
    a, b = np.float32([0, 0, 8193, 8193]), np.float32([0, 0, 8192, 4097])
    exact = ref_metric("iou", [Fraction(int(v)) for v in a], [Fraction(int(v)) for v in b])
    assert exact < Fraction(1, 2)
    assert box_iou(a, b) == np.float32(0.5)  # documented: float32 in, float32 out
    for judge in (match, lambda iou: verdicts(iou).match):
        with pytest.raises(VerdictError, match="is a float32 value"):
            judge(box_iou(a, b))
        with pytest.raises(VerdictError, match="is a float16 value"):
            judge(np.float16(0.5))
        assert judge(box_iou(a.astype(np.float64), b)) is (exact >= Fraction(1, 2)) is False
    assert match(0.5, threshold=np.float32(0.5))  # a float32 threshold is used as given


def test_verdicts_read_tensor_like_ious_by_their_dtype():
    """A 0-d tensor's dtype has no numpy kind: verdicts raised AttributeError (float() took it
    before); a float32 tensor IoU is refused as a float32 array's is."""

    class Dtype:
        def __init__(self, floating: bool, itemsize: int, name: str) -> None:
            self.is_floating_point, self.itemsize, self.name = floating, itemsize, name

        def __str__(self) -> str:
            return self.name

    class Scalar:
        def __init__(self, value: float, dtype: Dtype) -> None:
            self.value, self.dtype = value, dtype

        def __float__(self) -> float:
            return self.value

    assert match(Scalar(0.7, Dtype(True, 8, "torch.float64")))
    assert verdicts(Scalar(0.7, Dtype(True, 8, "torch.float64"))).voc50
    assert not match(Scalar(0.0, Dtype(False, 8, "torch.int64")))
    for name, size in (("torch.float32", 4), ("torch.bfloat16", 2)):
        with pytest.raises(VerdictError, match=f"is a {name} value"):
            match(Scalar(0.5, Dtype(True, size, name)))
    bf16 = Dtype(True, 2, "bfloat16")  # as numpy shows ml_dtypes' bfloat16: kind "V"
    bf16.kind = "V"  # type: ignore[attr-defined]
    with pytest.raises(VerdictError, match="is a bfloat16 value"):
        match(Scalar(0.5, bf16))


def test_masked_box_arrays_are_refused():
    """np.asarray dropped the mask: a masked box was scored (IoU [1, 1] for one valid box)."""
    m = np.ma.array([[0, 0, 10, 10], [0, 0, 10, 10]], mask=[[0] * 4, [1] * 4])
    for call in (lambda: box_iou(m, [0, 0, 10, 10]), lambda: box_giou([0, 0, 1, 1], m),
                 lambda: box_area(m), lambda: convert_boxes(m, fmt="xyxy", to="xywh")):  # fmt: skip
        with pytest.raises(BoxError, match="is a numpy masked array"):
            call()
    assert_array_equal(box_iou(m[~m.mask.any(axis=-1)].data, [0, 0, 10, 10]), [1.0])


def test_long_double_boxes_are_used_only_when_exactly_float64():
    """long double was cast to float64 unchecked: a finite 1e400 was called non-finite, and
    [0, 0, 1 + 2**-60, 1] scored IoU 1 against [0, 0, 1, 1]."""
    ld = np.longdouble
    if np.finfo(ld).nmant <= np.finfo(np.float64).nmant:
        pytest.skip("long double is float64 on this platform")
    exact = np.array([[0, 0, 2, 1], [0, 0, 1, 1]], dtype=ld)
    assert_array_equal(box_iou(exact, np.float64([0, 0, 1, 1])), [0.5, 1.0])
    with np.errstate(over="ignore"):
        big = np.array([0, 0, ld("1e400"), 1], dtype=ld)
    with pytest.raises(
        BoxError, match=r"boxes1 has the float\d+ coordinate 1e\+400, which float64"
    ) as info:
        box_iou(big, [0, 0, 1, 1])
    assert "non-finite" not in str(info.value)
    close = np.array([[0, 0, 1, 1], [0, 0, ld(1) + ld(2) ** -60, 1]], dtype=ld)
    with pytest.raises(BoxError, match=r"boxes2\[1\] has the float\d+ coordinate 1.000"):
        box_iou([0, 0, 1, 1], close)
    with pytest.raises(BoxError, match="non-finite"):  # nan and inf are still named as such
        box_iou(np.array([0, 0, np.inf, 1], dtype=ld), [0, 0, 1, 1])


def test_xywh_areas_and_touching_are_those_of_the_converted_corners():
    """The docs promised area = w h and 'touching scores exactly 0' for every format; for xywh
    both hold for the corners as evaluated (x + w rounded), which the docs now say."""
    a, b = [0.1, 0, 0.2, 1], [0.3, 0, 0.2, 1]
    assert float(box_area(a, fmt="xywh")) == ((0.1 + 0.2) - 0.1) * 1.0 == 0.20000000000000004
    # in exact arithmetic on these doubles the boxes overlap: their IoU is positive, not 0
    exact = ref_metric("iou", frac_xyxy(a, "xywh"), frac_xyxy(b, "xywh"))
    assert 0 < exact < Fraction(1, 10**15)
    assert 0 < float(box_iou(a, b, fmt="xywh")) < 1e-15
    # boxes touching as converted (b.x == a.x + a.w in float64) score exactly 0
    assert float(box_iou(a, [0.1 + 0.2, 0, 0.2, 1], fmt="xywh")) == 0.0
    assert box_overlap(a, [0.1 + 0.2, 0, 0.2, 1], fmt="xywh").intersection_box is None
    # the area and the corners agree, so identical boxes score 1 (w h would give IoU > 1 here)
    assert float(box_iou(a, a, fmt="xywh")) == 1.0
