"""Helpers shared by test modules (import as ``from support import ...``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from segiou import ConfusionMatrix


def peak_of(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """``fn(*args, **kwargs)`` and the peak of the memory it allocated (tracemalloc), bytes."""
    import tracemalloc

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = fn(*args, **kwargs)
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def eager_demo_counts(store: Path) -> ConfusionMatrix:
    import zarr

    g = zarr.open_array(store / "gt", mode="r")[:]
    p = zarr.open_array(store / "pred", mode="r")[:]
    return ConfusionMatrix("cityscapes", gt_ids="raw").update(g, p)


def reopened_prediction_stores(tmp_path: Path) -> tuple[Any, Any]:
    """Ground truth and predictions made with create_stack; the predictions then written by
    another job through zarr.open_array(..., mode="r+") (zarr's write_empty_chunks=False):
    their all-0 chunks are skipped, though the store records that every chunk was written.
    Returns the arrays written, ``(gt, pred)``."""
    import numpy as np
    import zarr

    from segiou.io.zarr import create_stack

    rng = np.random.default_rng(0)
    gt = rng.integers(0, 3, (2, 64, 64)).astype(np.uint8)
    gt[:, :32, :32] = 0
    pred = gt.copy()
    pred[0, 40:, 40:] = rng.integers(0, 3, (24, 24))  # some errors, in chunks that are written
    create_stack(tmp_path / "gt.zarr", n=2, height=64, width=64, chunks=(32, 32))[:] = gt
    create_stack(tmp_path / "pred.zarr", n=2, height=64, width=64, chunks=(32, 32))
    zarr.open_array(str(tmp_path / "pred.zarr"), mode="r+")[:] = pred
    for i in (0, 1):  # skipped: all 0
        assert not (tmp_path / "pred.zarr" / "c" / str(i) / "0" / "0").exists()
    return gt, pred


def shifted_unexpected_runs() -> tuple[Any, Any, Any]:
    """A review's scenario, ``(gt, baseline, candidate)`` masks: the baseline predicts the
    unexpected value 7 on 405 px/image of class 0; the candidate fixes that but predicts 7 on
    390 of the 400 px/image of class 2 (10 px/image kept, all right). Fewer unexpected pixels
    in total, class 2 IoU 1.0."""
    import numpy as np

    rng = np.random.default_rng(0)
    n, h, w = 8, 40, 40
    gt = np.zeros((n, h, w), np.uint8)
    gt[:, :, 15:30] = 1
    gt[:, :, 30:] = 2
    err = (rng.random(gt.shape) < 0.05) & (gt < 2)  # the same honest 0 <-> 1 errors in both
    base = gt.copy()
    base[err] = 1 - gt[err]
    cand = base.copy()
    base[:, :27, :15] = 7
    cand[:, :27, :15] = 0
    cand[:, :, 30:] = 7
    cand[:, :1, 30:40] = 2
    return gt, base, cand


def load_pipeline(name: str) -> Any:
    """Import ``pipelines/nightly_eval.py`` (not a package) as the module ``name``."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / "pipelines" / "nightly_eval.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
