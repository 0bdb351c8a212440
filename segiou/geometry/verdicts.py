"""Match / no-match verdicts for one IoU value at detection-benchmark thresholds.

A detection matches its ground truth when their IoU reaches the threshold, inclusively
(``iou >= threshold``), as in the PASCAL VOC devkit and pycocotools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, SupportsFloat

from segiou.errors import VerdictError

__all__ = [
    "COCO_STRICT_THRESHOLD",
    "COCO_THRESHOLDS",
    "VOC_THRESHOLD",
    "VerdictError",
    "Verdicts",
    "match",
    "verdicts",
]

#: PASCAL VOC: a detection is correct at IoU >= 0.5.
VOC_THRESHOLD: Final = 0.5
#: COCO's strict threshold (AP75).
COCO_STRICT_THRESHOLD: Final = 0.75
#: COCO's sweep 0.50:0.05:0.95, as the exact decimals (the doubles nearest to them).
COCO_THRESHOLDS: Final[tuple[float, ...]] = tuple(round(0.5 + 0.05 * k, 2) for k in range(10))


def _narrow_float(dtype: object) -> bool:
    """Whether ``dtype`` (numpy's, ml_dtypes', or a tensor library's) is a float under 64 bits."""
    if dtype is None:
        return False
    kind = getattr(dtype, "kind", None)  # numpy (ml_dtypes' bfloat16 is kind "V")
    if isinstance(kind, str):
        return (kind == "f" or "float" in str(getattr(dtype, "name", ""))) and int(
            getattr(dtype, "itemsize", 8)
        ) < 8
    # torch.dtype and the like: no kind, but whether it is a float and its size
    return (
        bool(getattr(dtype, "is_floating_point", False)) and int(getattr(dtype, "itemsize", 8)) < 8
    )


def _unit_number(value: SupportsFloat, name: str, what_to_do: str) -> float:
    dtype = getattr(value, "dtype", None)
    if name == "iou" and _narrow_float(dtype):
        msg = (
            f"iou={value!r} is a {dtype} value: rounded to {dtype}, an IoU below the threshold "
            "can read as equal to it (float32 holds 24 bits); score float64 boxes, e.g. "
            "box_iou(boxes1.astype(np.float64), boxes2), for a verdict"
        )
        raise VerdictError(msg)
    try:
        number = float(value)
    except (TypeError, ValueError) as err:
        msg = f"{name}={value!r} is not a number; {what_to_do}"
        raise VerdictError(msg) from err
    if not 0.0 <= number <= 1.0:  # also refuses nan
        msg = f"{name}={number!r} is outside [0, 1]; {what_to_do}"
        raise VerdictError(msg)
    return number


def match(iou: SupportsFloat, threshold: SupportsFloat = VOC_THRESHOLD) -> bool:
    """Whether a pair with this IoU matches at ``threshold`` (inclusive: ``iou >= threshold``).

    Parameters
    ----------
    iou : float
        The pair's IoU, in ``[0, 1]``.
    threshold : float, default 0.5
        The matching threshold, in ``[0, 1]``.

    Returns
    -------
    bool
        True when ``iou >= threshold``.

    Raises
    ------
    VerdictError
        ``iou`` or ``threshold`` is nan, not a number or outside ``[0, 1]``, or ``iou`` is a
        float32 / float16 value.

    Notes
    -----
    The comparison is inclusive and exact (no tolerance): an IoU of exactly 0.5 matches at 0.5.
    A float32 (or float16) IoU is refused: rounded to 24 bits, an IoU just below the threshold
    reads as equal to it (boxes [0, 0, 8193, 8193] and [0, 0, 8192, 4097] have IoU 0.4999999926,
    0.5 in float32), so the verdict would not be the one of the IoU. Score float64 boxes.
    A nan IoU (torchvision's value for two zero-area boxes) is refused rather than silently
    reported as "no match"; :func:`segiou.geometry.boxes.box_iou` returns its ``empty`` option there.

    Examples
    --------
    >>> from segiou.geometry.verdicts import match
    >>> match(0.5), match(0.4999), match(0.8, threshold=0.75)
    (True, False, True)
    """
    value = _unit_number(iou, "iou", "pass an IoU in [0, 1]")
    limit = _unit_number(threshold, "threshold", "pass a threshold in [0, 1], e.g. 0.5")
    return value >= limit


@dataclass(frozen=True)
class Verdicts:
    """Verdicts for one IoU value, as returned by :func:`verdicts`.

    Attributes
    ----------
    iou : float
        The IoU judged.
    threshold : float
        The caller's threshold.
    match : bool
        ``iou >= threshold``.
    voc50 : bool
        Match at the PASCAL VOC threshold 0.5.
    coco75 : bool
        Match at the COCO strict threshold 0.75.
    coco95 : bool
        Match at 0.95, the strictest threshold of the COCO sweep.
    sweep : tuple of (float, bool)
        ``(threshold, matched)`` for each threshold of COCO's 0.50:0.05:0.95 sweep.
    """

    iou: float
    threshold: float
    match: bool
    voc50: bool
    coco75: bool
    coco95: bool
    sweep: tuple[tuple[float, bool], ...]

    @property
    def n_matched(self) -> int:
        """Number of sweep thresholds at which the pair matches (0 to 10)."""
        return sum(matched for _, matched in self.sweep)

    @property
    def fraction_matched(self) -> float:
        """Fraction of the COCO sweep thresholds at which the pair matches."""
        return self.n_matched / len(self.sweep)


def verdicts(iou: SupportsFloat, *, threshold: SupportsFloat = VOC_THRESHOLD) -> Verdicts:
    """Match verdicts for one IoU at the caller's, VOC, COCO and COCO-sweep thresholds.

    Parameters
    ----------
    iou : float
        The pair's IoU, in ``[0, 1]``.
    threshold : float, default 0.5
        The caller's own threshold, in ``[0, 1]``.

    Returns
    -------
    Verdicts
        The verdict at ``threshold``, at 0.5 (VOC), 0.75 and 0.95 (COCO), and at each of the
        ten COCO thresholds 0.50, 0.55, ..., 0.95.

    Raises
    ------
    VerdictError
        ``iou`` or ``threshold`` is nan, not a number or outside ``[0, 1]``, or ``iou`` is a
        float32 / float16 value (see :func:`match`).

    Notes
    -----
    Every verdict is ``iou >= t``. The sweep thresholds are the exact decimals
    ``0.5 + 0.05 k`` (``k = 0..9``) rounded once to a double; pycocotools builds them with
    ``np.linspace(0.5, 0.95, 10)``, whose ninth value is ``0.8999999999999999`` rather than
    ``0.9``, so an IoU in ``[0.8999999999999999, 0.9)`` matches there and not here.
    ``fraction_matched`` is this single pair's share of the sweep, the quantity COCO's
    AP@[.50:.95] averages over thresholds.

    Examples
    --------
    >>> from segiou.geometry.verdicts import verdicts
    >>> v = verdicts(0.8)
    >>> v.match, v.voc50, v.coco75, v.coco95, v.n_matched
    (True, True, True, False, 7)
    >>> verdicts(0.3245, threshold=0.3).match
    True
    """
    value = _unit_number(iou, "iou", "pass an IoU in [0, 1]")
    limit = _unit_number(threshold, "threshold", "pass a threshold in [0, 1], e.g. 0.5")
    return Verdicts(
        iou=value,
        threshold=limit,
        match=value >= limit,
        voc50=value >= VOC_THRESHOLD,
        coco75=value >= COCO_STRICT_THRESHOLD,
        coco95=value >= COCO_THRESHOLDS[-1],
        sweep=tuple((t, value >= t) for t in COCO_THRESHOLDS),
    )
