"""Boundary IoU counts summed over named images are refused when per-image rows are kept.

A merge matches named images and counts one both states hold once; it could not take that
image's part out of a sum, and counted the summed Boundary IoU twice."""

from __future__ import annotations

import numpy as np
import pytest

from segiou import ConfusionMatrix
from segiou._scores import count_batch
from segiou.errors import UsageError


def _state(boundary_rows: str) -> tuple[ConfusionMatrix, np.ndarray]:
    cm = ConfusionMatrix(2, per_image=True, boundary="1px")
    g = np.zeros((2, 8, 8), np.uint8)
    g[:, :, 4:] = 1
    ref = ConfusionMatrix(2, per_image=True, boundary="1px").update(g, g, names=["a", "b"])
    rows = np.stack([ref.extras.boundary_images[n] for n in ("a", "b")])
    b = rows.sum(axis=0, keepdims=True) if boundary_rows == "summed" else rows
    t, _ = count_batch(g, g, cm._lookup, None, None, where="x", on_unexpected="raise",
                       per_image=True, threads=None, labels=False)  # fmt: skip
    cm.add_tally(t, key=None, names=["a", "b"], n_images=2, boundary=b, widths=[1])
    return cm, rows


def test_per_image_boundary_counts_merge_once() -> None:
    x, rows = _state("per image")
    y, _ = _state("per image")
    merged = x + y  # the same two named images: counted once
    assert (merged.extras.boundary_total == rows.sum(axis=0)).all()


def test_summed_boundary_counts_of_named_images_are_refused() -> None:
    with pytest.raises(UsageError, match="summed over 2 named images"):
        _state("summed")
