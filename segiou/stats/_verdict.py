"""Whether the gate's swap test could decide: the smallest p-value each row can reach.

The swap test's p-values have a floor (:func:`segiou.stats._swap.attainable_p`): ``2 / 2**d``
with ``d`` the units where the runs differ (for a class, where its counts differ) when every
swap is enumerated, and also at least ``1 / (B + 1)`` with ``B`` random swaps. A class's
p-value is then adjusted for the number of classes tested (Holm), so a class whose raw p-value
can reach alpha may still never be significant. A row that is not significant says ``no
verdict`` when even its smallest adjusted p-value, whatever the other classes' p-values, is not
below alpha, and ``no significant change`` only when the test could have called it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from segiou.stats._swap import SwapTest, attainable_p

__all__ = [
    "Correction",
    "change",
    "holm",
    "row_floors",
    "smallest_adjusted",
    "undecided",
    "verdict",
]

#: The multiple-testing adjustment of the per-class p-values.
Correction = Literal["holm", "none"]


def holm(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of p-values (``nan`` left out and kept ``nan``).

    Parameters
    ----------
    p : sequence of float
        Raw p-values.

    Returns
    -------
    list of float
        Adjusted p-values: reject where below alpha, family-wise error at most alpha.

    References
    ----------
    .. [1] S. Holm, "A simple sequentially rejective multiple test procedure", 1979.

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    vals = np.asarray(p, dtype=np.float64)
    out = np.full(vals.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(vals))
    m = ok.size
    running = 0.0
    for rank, j in enumerate(ok[np.argsort(vals[ok], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * float(vals[j])))
        out[j] = running
    return [float(x) for x in out]


def smallest_adjusted(floors: Sequence[float], correction: Correction) -> list[float]:
    """Return the smallest adjusted p-value each class can get, whatever the other classes get.

    Parameters
    ----------
    floors : sequence of float
        Each tested class's smallest attainable raw p-value (``nan``: not tested, left out of
        the correction as its p-value is).
    correction : {"holm", "none"}
        The adjustment in use.

    Returns
    -------
    list of float
        Under Holm, Holm's adjustment of the floors themselves: Holm is the closed testing
        procedure of Bonferroni tests (class ``c``'s adjusted p-value is the largest
        ``|I| * min(p_i, i in I)`` over the sets ``I`` of tested classes holding ``c``), so it
        never decreases when any raw p-value grows, and over p-values each at least its class's
        floor its smallest value is the floors'. The smallest of them is ``T`` times the
        smallest floor (``T`` classes tested). Without correction, the floors.

    Examples
    --------
    >>> smallest_adjusted([2**-8] * 19, "holm")[0]  # 19 classes, 9 images: 19 / 256
    0.07421875
    >>> smallest_adjusted([0.001, 0.25, float("nan")], "holm")
    [0.002, 0.25, nan]
    """
    return holm(floors) if correction == "holm" else [float(x) for x in floors]


def row_floors(
    test: SwapTest, raw_p: Sequence[float], correction: Correction
) -> tuple[float, list[float], list[float]]:
    """Return the smallest p-values of each row's mode: mIoU's, each class's raw and adjusted.

    Parameters
    ----------
    test : SwapTest
        The swap test (its mode: exact, or ``swaps`` random swaps; its differing units).
    raw_p : sequence of float
        The classes' raw p-values (``nan``: untested, left out of the correction).
    correction : {"holm", "none"}
        The adjustment in use.

    Returns
    -------
    miou : float
        mIoU's smallest p-value (tested alone: no adjustment).
    raw, adjusted : list of float
        Per class (``nan`` where untested): :func:`attainable_p` of its differing units in the
        mode of its own p-value (enumerated, or the random swaps drawn), and
        :func:`smallest_adjusted` of those.
    """
    swaps = int(test.random_swaps)
    miou = attainable_p(test.differing, None if test.exact_miou else swaps)
    raw = [
        float("nan") if math.isnan(p) else attainable_p(int(d), None if exact else swaps)
        for p, d, exact in zip(raw_p, test.differing_per_class, test.exact_iou, strict=True)
    ]
    return miou, raw, smallest_adjusted(raw, correction)


def change(significant: bool, delta: float, testable: bool = True) -> str:
    """Name a row's change (``testable``: the test could give it a p-value below alpha)."""
    if np.isnan(delta):
        return "undefined"
    if not significant:
        return "no significant change" if testable or delta == 0 else "no verdict"
    return "worse" if delta < 0 else "better"


def verdict(doc: dict[str, Any], test: SwapTest, alpha: float, unit: str) -> None:
    """Say whether the test could reach ``alpha`` at all, for mIoU and for the classes.

    With ``d`` units where the runs differ the swap test cannot give a p-value below its floor
    (``test.smallest_p``): at ``d <= 5`` and ``alpha = 0.05`` no drop can be significant, and a
    bare PASS would read as checked (``verdict_possible``). mIoU is tested alone; the classes'
    p-values are adjusted over the ``T`` classes tested, so no class can be significant when
    even the smallest adjusted floor, ``T`` times the smallest floor under Holm, is not below
    alpha (``class_verdicts_possible``), although mIoU may be. The classes that changed but
    could not be called are listed (``undecided_classes``: :func:`undecided`), whether or not
    other classes could. Reads the rows' ``p_value``, ``p_adjusted``, ``smallest_p_adjusted``,
    ``differing_units``, ``delta`` and ``change``.
    """
    what = "images" if unit == "image" else "groups"
    smallest = doc["test"]["smallest_p"]
    p = doc["miou"]["p_value"]
    possible = test.differing == 0 or smallest < alpha or (p is not None and p < alpha)
    doc["verdict_possible"] = possible
    doc["no_verdict_reason"] = None
    if not possible:
        doc["no_verdict_reason"] = (
            f"no verdict possible: the runs differ in {test.differing} of {doc['test']['units']} "
            f"shared {what}, so the smallest p-value the swap test can give is {smallest:.3g}, "
            f"not below alpha {alpha}: no drop can be significant (compare more {what})"
        )
    rows = [c for c in doc["classes"] if c["smallest_p_adjusted"] is not None]
    moved = [c for c in rows if c["differing_units"]]  # (none: nothing to decide)
    doc["test"]["smallest_class_p_adjusted"] = min(
        (c["smallest_p_adjusted"] for c in moved), default=None
    )
    classes = not moved or any(
        c["smallest_p_adjusted"] < alpha or c["change"] in ("worse", "better") for c in moved
    )
    doc["class_verdicts_possible"] = classes
    doc["no_class_verdict_reason"] = None
    if not classes:
        doc["no_class_verdict_reason"] = _class_reason(doc, test, rows, alpha, what)
    doc["undecided_classes"] = undecided(doc["classes"])


def undecided(classes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the classes whose IoU changed but that no p-value they can get could call.

    Parameters
    ----------
    classes : sequence of dict
        The document's class rows (``change``, ``delta``, ``differing_units``,
        ``smallest_p_adjusted``).

    Returns
    -------
    list of dict
        ``id``, ``name``, ``delta``, ``differing_units`` and ``smallest_p_adjusted`` of each
        row with ``change = "no verdict"``: a nonzero difference of its IoU (any size, either
        way; scored in both runs) whose smallest adjusted p-value is not below alpha. Largest
        drop first. A bare PASS would read as if they had been checked.
    """
    rows = [c for c in classes if c["change"] == "no verdict"]
    rows.sort(key=lambda c: (c["delta"], c["id"]))
    keys = ("id", "name", "delta", "differing_units", "smallest_p_adjusted")
    return [{key: c[key] for key in keys} for c in rows]


def _class_reason(
    doc: dict[str, Any], test: SwapTest, rows: list[dict[str, Any]], alpha: float, what: str
) -> str:
    """Say why no class can be significant: the floors, times the classes tested under Holm."""
    moved = [c for c in rows if c["differing_units"]]
    low = min(c["smallest_p_adjusted"] for c in moved)
    raw = min(c["smallest_p"] for c in moved)
    holm_on = doc["test"]["correction"] == "holm"
    by = (f"Holm's correction over the {len(rows)} classes tested multiplies the smallest "
          f"p-value any class can get, {raw:.3g}, by {len(rows)}: {low:.3g}"
          if holm_on else f"the smallest p-value any class can get is {low:.3g}")  # fmt: skip
    drawn = [c for c in moved if not c.get("exact", test.exact)]
    swaps = test.random_swaps
    enumerated = [c["differing_units"] for c in moved if c.get("exact", test.exact)]
    if drawn and min(c["smallest_p"] for c in drawn) <= raw:  # the random swaps' floor
        why = f"{swaps:,} random swaps give no p-value below 1/{swaps + 1:,}"
        more = "draw more swaps: leave permutations at its default"
    else:
        why = f"the runs differ in at most {max(enumerated)} shared {what} for any class"
        if drawn:
            why += (f" whose swaps were enumerated ({swaps:,} random swaps give the other "
                    f"{len(drawn)} no p-value below 1/{swaps + 1:,})")  # fmt: skip
        more = f"compare more {what}"
    return (
        f"no class verdict possible: {why}, and {by}, not below alpha {alpha}: no class drop "
        f"can be significant; mIoU is tested alone ({more})"
    )
