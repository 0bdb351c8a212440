"""Describe unexpected label values: each value, its pixel count and first position (slow path).

Counting finds *that* pixels hold values a label spec does not know; these helpers find *which*
values and *where*, for the messages and the per-value reports (only when there are any).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from segiou._typing import LabelArray

__all__ = [
    "IGNORE",
    "describe_unexpected",
    "expected_values",
    "format_unexpected",
    "isin",
    "span_message",
]

#: Map target meaning "ignored" (ground truth) or "void" (prediction).
IGNORE = -1


def isin(values: np.ndarray, ids: npt.ArrayLike) -> np.ndarray:
    """``np.isin(values, ids)``, exact for label masks of any integer dtype, ``uint64`` included.

    numpy compares a ``uint64`` mask with ``int64`` ids in ``float64``: distinct values above
    2**53 collide (2**53 + 1 is taken for 2**53; a known id can match an unexpected value),
    and before numpy 2.0 its table method even raised an ``IndexError``. Values of 2**63 and
    more are no id (ids are ``int64``); the others are compared as ``int64``, exactly.
    """
    if values.dtype != np.uint64:
        return np.isin(values, ids)
    big = values >= np.uint64(1 << 63)
    out = np.zeros(values.shape, dtype=bool)
    small = ~big
    out[small] = np.isin(values[small].astype(np.int64), np.asarray(ids, dtype=np.int64))
    return out


def describe_unexpected(
    values: LabelArray, select: np.ndarray | None, known: Mapping[int, int], shape: tuple[int, ...]
) -> dict[int, tuple[int, tuple[int, ...]]]:
    """Slow path: each unexpected value of ``values`` with its pixel count and first position.

    ``known`` holds the expected values; ``select`` (optional) limits the search to where it is
    true (for predictions: pixels with valid ground truth); positions index ``shape``.
    """
    bad = ~isin(values, np.fromiter(known, dtype=np.int64, count=len(known)))
    if select is not None:
        bad &= select
    flat = np.flatnonzero(bad.ravel())
    vals, first, counts = np.unique(values.ravel()[flat], return_index=True, return_counts=True)
    return {
        int(v): (int(c), tuple(int(i) for i in np.unravel_index(flat[f], shape)))
        for v, f, c in zip(vals, first, counts, strict=True)
    }


def format_unexpected(found: dict[int, tuple[int, tuple[int, ...]]], limit: int = 8) -> str:
    """Describe what :func:`describe_unexpected` found: the ``limit`` most frequent values."""
    items = sorted(found.items(), key=lambda kv: -kv[1][0])
    parts = [f"{v} ({c:,} px, first at {pos})" for v, (c, pos) in items[:limit]]
    if len(items) > limit:
        parts.append(f"... and {len(items) - limit} more value(s)")
    return ", ".join(parts)


def expected_values(mapping: Mapping[int, int], k: int, kind: str) -> str:
    cls = sorted(r for r, c in mapping.items() if c != IGNORE)
    ign = sorted(r for r, c in mapping.items() if c == IGNORE)
    span = f"{cls[0]}..{cls[-1]}" if cls and cls[-1] - cls[0] + 1 == len(cls) else str(cls)
    text = f"{len(cls)} id(s) {span} for the {k} classes"
    return text + (f" or {kind} {ign}" if ign else "")


def span_message(mapping: Mapping[int, int], lo: int, hi: int, side: str, max_lut: int) -> str:
    """Why ids spanning ``lo..hi`` are refused, and what to do, for class-space and raw ids."""
    classes = sorted(r for r, c in mapping.items() if c != IGNORE)
    ignored = sorted(r for r, c in mapping.items() if c == IGNORE)
    limit = f"a lookup table spans the smallest to the largest id, at most {max_lut:,} values"
    if classes and all(mapping[r] == r for r in classes):
        # class space: the class ids are compact, so an ignore value is what lies far away
        clo, chi = classes[0], classes[-1]
        far = [v for v in ignored if max(chi, v) - min(clo, v) + 1 > max_lut] or ignored
        shown = ", ".join(map(str, far))
        what = f"ignore value {shown} is" if len(far) == 1 else f"ignore values {shown} are"
        return (
            f"{side} {what} too far from the class ids {clo}..{chi}: "
            f"together they span {lo}..{hi} ({hi - lo + 1:,} values), but {limit}. Use an "
            "ignore value near the class ids instead (for example 255 or -1): map it in the "
            f"masks first (np.where(mask == {far[0]}, 255, mask)) and pass that value as "
            "ignore_index (or list it in the spec's ignore values)"
        )
    return (
        f"{side} raw label ids of the spec span {lo}..{hi} ({hi - lo + 1:,} values), but "
        f"{limit}; renumber the raw ids of the label spec (and the masks) into a compact range"
    )
