"""Describe unexpected label values: each value, its pixel count and first position (slow path).

Counting finds *that* pixels hold values a label spec does not know; these helpers find *which*
values and *where*, for the messages and the per-value reports (only when there are any).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from segiou._typing import LabelArray

__all__ = ["IGNORE", "describe_unexpected", "expected_values", "format_unexpected"]

#: Map target meaning "ignored" (ground truth) or "void" (prediction).
IGNORE = -1


def describe_unexpected(
    values: LabelArray, select: np.ndarray | None, known: Mapping[int, int], shape: tuple[int, ...]
) -> dict[int, tuple[int, tuple[int, ...]]]:
    """Slow path: each unexpected value of ``values`` with its pixel count and first position.

    ``known`` holds the expected values; ``select`` (optional) limits the search to where it is
    true (for predictions: pixels with valid ground truth); positions index ``shape``.
    """
    bad = ~np.isin(values, np.fromiter(known, dtype=np.int64, count=len(known)))
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
