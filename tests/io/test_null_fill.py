"""Zarr v2 arrays without a fill value (``fill_value: null``): a missing chunk is undefined by
the specification. A missing prediction chunk is refused under ``missing_pred_chunks="auto"``
(read as 0 it would be counted as class-0 predictions, reported nowhere) and read as 0 with
``"fill"``; a missing ground-truth chunk follows ``missing_gt_chunks`` as in any store (auto:
read as 0 and reported in ``absent_chunks``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from segiou.cli import main
from segiou.errors import MissingChunkError
from segiou.io.zarr import open_masks
from segiou.parallel import count_stores

DATA = np.full((2, 32, 32), 2, np.uint8)
LOST = "1.1.1"  # chunk (1, 1, 1): image 1, bottom right


def _store(path: Path, fill: int | None, lose: bool) -> str:
    a = zarr.create_array(str(path), shape=DATA.shape, chunks=(1, 16, 16), dtype="uint8",
                          fill_value=fill, zarr_format=2,
                          config={"write_empty_chunks": True})  # fmt: skip
    a[:] = DATA
    if lose:
        (path / LOST).unlink()
    return str(path)


def _count(gt: str, pred: str, **kw: str) -> object:
    return count_stores(gt, pred, labels=3, scheduler="synchronous", **kw)


def test_the_array_says_it_has_no_fill_value(tmp_path):
    spec = open_masks(_store(tmp_path / "p.zarr", None, lose=False)).arrays[0].read_spec
    assert spec.no_fill
    assert spec.fill == 0  # what "fill" reads
    assert not open_masks(_store(tmp_path / "q.zarr", 0, lose=False)).arrays[0].read_spec.no_fill


def test_a_missing_prediction_chunk_without_fill_value_is_refused_under_auto(tmp_path):
    gt = _store(tmp_path / "gt.zarr", None, lose=False)
    pred = _store(tmp_path / "pred.zarr", None, lose=True)
    with pytest.raises(MissingChunkError) as info:
        _count(gt, pred)
    msg = str(info.value)
    assert "pred.zarr" in msg
    assert "chunk (1, 1, 1) (images '000001')" in msg
    assert "no fill value (Zarr v2 fill_value null)" in msg
    assert "missing_pred_chunks='fill'" in msg
    cm = _count(gt, pred, missing_pred_chunks="fill")  # asked for: read as 0
    assert cm.counts[2].tolist() == [16 * 16, 0, DATA.size - 16 * 16]


def test_complete_arrays_without_fill_value_count_as_usual(tmp_path):
    gt = _store(tmp_path / "gt.zarr", None, lose=False)
    pred = _store(tmp_path / "pred.zarr", None, lose=False)
    assert _count(gt, pred).counts[2, 2] == DATA.size


def test_a_missing_prediction_chunk_with_a_fill_value_still_reads_as_it(tmp_path):
    gt = _store(tmp_path / "gt.zarr", 0, lose=False)
    pred = _store(tmp_path / "pred.zarr", 0, lose=True)
    assert _count(gt, pred).counts[2, 0] == 16 * 16  # the Zarr rule: the fill value


def test_a_missing_ground_truth_chunk_without_fill_value_is_read_as_0_and_reported(tmp_path):
    gt = _store(tmp_path / "gt.zarr", None, lose=True)
    pred = _store(tmp_path / "pred.zarr", None, lose=False)
    cm = _count(gt, pred)
    assert cm.counts[0, 2] == 16 * 16
    assert cm.extras.absent == {"000001": 1}
    with pytest.raises(MissingChunkError, match=r"no fill value.*missing_gt_chunks='fill'"):
        _count(gt, pred, missing_gt_chunks="error")


def test_eval_refuses_it_in_one_line(tmp_path, capsys):
    gt = _store(tmp_path / "gt.zarr", None, lose=False)
    pred = _store(tmp_path / "pred.zarr", None, lose=True)
    argv = ["eval", "--gt", gt, "--pred", pred, "--labels", "3", "--bootstrap", "0", "--quiet",
            "--scheduler", "synchronous"]  # fmt: skip
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("segiou eval: error: ")
    assert "--missing-pred-chunks fill" in line
    assert main([*argv, "--missing-pred-chunks", "fill"]) == 0
