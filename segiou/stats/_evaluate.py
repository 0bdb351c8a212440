"""evaluate_with_intervals: a result with its bootstrap intervals and slices (schema version 2)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from segiou.confusion import ConfusionMatrix
from segiou.conventions import Convention
from segiou.errors import UsageError
from segiou.results import Result, evaluate
from segiou.stats._bootstrap import bootstrap, check_level, image_rows
from segiou.stats._slices import Metadata, groups_of, match_images, read_metadata, slice_results

__all__ = ["evaluate_with_intervals"]


def evaluate_with_intervals(
    cm: ConfusionMatrix,
    *,
    preset: str | Convention = "segiou",
    beta: float | None = None,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    groups: str | Sequence[str] | None = None,
    slices: Metadata | str | os.PathLike[str] | None = None,
    min_slice_images: int = 30,
) -> Result:
    """Evaluate ``cm`` as :func:`segiou.evaluate` does, plus intervals and slices.

    Parameters
    ----------
    cm : ConfusionMatrix
        An accumulator with per-image rows (``per_image=True``; ``count_stores`` keeps them).
    preset, beta
        As for :func:`segiou.evaluate`.
    resamples : int, default 1000
        Bootstrap resamples; ``0`` computes no intervals (slices are still computed).
    seed : int, default 0
        Seed of the resamples.
    level : float, default 0.95
        Coverage of the percentile intervals.
    groups : str or sequence of str, optional
        Resample groups of correlated images instead of images: a column of ``slices`` (the
        metadata; slices then resample groups too), or one group label per image (in the
        order of ``cm.images``; the whole-data intervals only).
    slices : Metadata, str or os.PathLike, optional
        Image metadata (see :func:`read_metadata`): every metric per value of every column.
    min_slice_images : int, default 30
        Slices with fewer images are flagged ``small``.

    Returns
    -------
    Result
        With ``intervals`` (``None`` when ``resamples=0``) and ``slices`` (``None`` without
        metadata) filled in.

    Raises
    ------
    UsageError
        No per-image entries (no per-image rows, or a version-1 state), a bad ``resamples``,
        ``seed`` or ``level``, ``groups`` naming a column without ``slices``, or a group column
        some images have no value in.
    """
    check_level(level)
    result = evaluate(cm, preset=preset, beta=beta)
    rows = image_rows(cm, "intervals")
    meta = read_metadata(slices) if isinstance(slices, str | os.PathLike) else slices
    names = list(rows.names)
    column: str | None = None
    labels: list[str] | None = None
    if isinstance(groups, str):
        if meta is None:
            msg = (
                f"bootstrap groups: column {groups!r} names a metadata column, but no metadata "
                "was given (slices=, --slices meta.csv)"
            )
            raise UsageError(msg)
        match_images(names, meta)  # repeated names cannot be grouped either
        column, labels = groups, groups_of(names, meta, groups)
    elif groups is not None:
        labels = list(groups)
    intervals = None
    if resamples:
        b = bootstrap(rows, spec=cm.spec, preset=preset, resamples=resamples, seed=seed,
                      groups=labels, group_name=column or "group")  # fmt: skip
        intervals = b.intervals(level, categories=bool(cm.spec.categories))
    sliced = None
    if meta is not None:
        sliced = slice_results(rows, cm.spec, meta, preset=preset, beta=beta,
                               min_images=min_slice_images, resamples=resamples, seed=seed,
                               level=level, group_column=column)  # fmt: skip
    return replace(result, intervals=intervals, slices=sliced)
