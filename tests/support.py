"""Helpers shared by test modules (import as ``from support import ...``)."""

from __future__ import annotations

from pathlib import Path

from segiou import ConfusionMatrix


def eager_demo_counts(store: Path) -> ConfusionMatrix:
    import zarr

    g = zarr.open_array(store / "gt", mode="r")[:]
    p = zarr.open_array(store / "pred", mode="r")[:]
    return ConfusionMatrix("cityscapes", gt_ids="raw").update(g, p)
