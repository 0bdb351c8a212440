"""The Zarr + Dask engine: exactly the eager counts, whatever the chunking, scheduler or fault.

The oracle is ``ConfusionMatrix(labels, per_image=True).update(gt, pred)`` on the same
in-memory arrays, plus an independent ``np.add.at`` confusion for one case.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import tempfile
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal
from support import peak_of

import segiou
from segiou import ConfusionMatrix, _count
from segiou.errors import (
    DuplicateBatchError,
    LabelRangeError,
    MaskNotFoundError,
    MissingChunkError,
    ShapeMismatchError,
    StoreLayoutError,
    UsageError,
)
from segiou.io.zarr import ChunkError, create_stack, open_masks
from segiou.parallel import evaluate_zarr, plan_groups
from segiou.testing.synthetic import cityscapes_like

K = 19  # cityscapes_like: trainIds 0..18, 255 = ignore (gt) / void (pred)


# -- helpers ------------------------------------------------------------------------------------
def _stack(
    url: Path | str,
    data: np.ndarray,
    *,
    chunks: tuple[int, int] | None = None,
    names: Sequence[str] | None = None,
    zarr_format: int = 3,
    path: str | None = None,
) -> str:
    n, h, w = data.shape
    a = create_stack(url, n=n, height=h, width=w, dtype=data.dtype, names=names, chunks=chunks,
                     zarr_format=zarr_format, path=path)  # fmt: skip
    a[:] = data
    return str(url) if path is None else f"{url}/{path}"


def _zarr_stack(
    url: Path | str, data: np.ndarray, chunks: tuple[int, int, int], names: Sequence[str]
) -> str:
    """A stack written with zarr directly (any chunking along N)."""
    a = zarr.create_array(str(url), shape=data.shape, chunks=chunks, dtype=data.dtype,
                          fill_value=0, config={"write_empty_chunks": True})  # fmt: skip
    a[:] = data
    a.attrs["segiou"] = {"names": list(names)}
    return str(url)


def _group(
    url: Path | str, images: dict[str, np.ndarray], chunks: tuple[int, int], **config: Any
) -> str:
    """A ``group`` store written with zarr directly: one H x W array per image."""
    g = zarr.open_group(str(url), mode="w")
    for name, img in images.items():
        a = g.create_array(name, shape=img.shape, chunks=chunks, dtype=img.dtype,
                           config={"write_empty_chunks": True, **config})  # fmt: skip
        a[...] = img
    return str(url)


def _eager(
    gt: Sequence[np.ndarray] | np.ndarray,
    pred: Sequence[np.ndarray] | np.ndarray,
    names: Sequence[str],
    labels: Any = K,
    **options: Any,
) -> ConfusionMatrix:
    """The oracle: one eager update per image, in store order."""
    options.setdefault("ignore_index", 255 if labels == K else None)
    cm = ConfusionMatrix(labels, per_image=True, **options)
    for g, p, name in zip(gt, pred, names, strict=True):
        cm.update(g, p, names=[name])
    return cm


def _assert_same(cm: ConfusionMatrix, ref: ConfusionMatrix, *, names: bool = True) -> None:
    assert cm.counts.dtype == np.int64
    assert_array_equal(cm.counts, ref.counts)
    assert_array_equal(cm.void, ref.void)
    assert cm.n_ignored == ref.n_ignored
    assert cm.unexpected_gt == ref.unexpected_gt
    assert cm.unexpected_pred == ref.unexpected_pred
    assert cm.n_images == ref.n_images
    assert cm.n_pixels == ref.n_pixels
    a, b = cm.images, ref.images
    if names:
        assert a.names == b.names
    for f in ("tp", "fp", "fn", "ignored", "unexpected"):
        assert getattr(a, f).dtype == np.int64
        assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


def _names(n: int) -> list[str]:
    return [f"frankfurt_{i:06d}" for i in range(n)][::-1]  # store order is not sorted order


def _naive(gt: np.ndarray, pred: np.ndarray, k: int, ignore: int = 255) -> tuple[Any, ...]:
    """Independent oracle: counts, void, ignored with np.add.at."""
    g = gt.reshape(-1).astype(np.int64)
    p = pred.reshape(-1).astype(np.int64)
    valid = g != ignore
    counts = np.zeros((k, k), np.int64)
    both = valid & (p != ignore)
    np.add.at(counts, (g[both], p[both]), 1)
    void = np.zeros(k, np.int64)
    np.add.at(void, g[valid & (p == ignore)], 1)
    return counts, void, int(np.count_nonzero(~valid))


# -- dask == eager ------------------------------------------------------------------------------
STACKS = {
    "one-image": {"n": 1, "hw": (32, 48)},
    "many-images": {"n": 6, "hw": (32, 48), "gt": (16, 16), "pred": (16, 16)},
    "edge-chunks": {"n": 5, "hw": (30, 45), "gt": (7, 11), "pred": (7, 11)},
    "different-grids": {"n": 4, "hw": (30, 45), "gt": (8, 45), "pred": (30, 4)},
    "chunks-larger-than-image": {"n": 3, "hw": (10, 12), "gt": (16, 5), "pred": (3, 64)},
    "uint16": {"n": 4, "hw": (20, 30), "gt": (6, 7), "pred": (20, 4), "dtype": "uint16"},
    "zarr-v2": {"n": 4, "hw": (21, 30), "gt": (10, 13), "pred": (10, 13), "format": (2, 2)},
    "zarr-v2-vs-v3": {"n": 3, "hw": (21, 30), "gt": (5, 30), "pred": (21, 8), "format": (2, 3)},
    "default-names": {"n": 3, "hw": (16, 20), "gt": (8, 8), "names": False},
}


@pytest.mark.parametrize("case", STACKS.values(), ids=STACKS.keys())
def test_stack_matches_eager(tmp_path, case):
    n, (h, w) = case["n"], case["hw"]
    gt, pred = cityscapes_like(n, h, w, seed=n + h)
    labels: Any = K
    if case.get("dtype") == "uint16":  # more than 255 classes, 65535 = ignore / void
        rng = np.random.default_rng(1)
        gt = rng.integers(0, 300, gt.shape).astype(np.uint16)
        pred = np.where(rng.random(gt.shape) < 0.6, gt, rng.integers(0, 300, gt.shape))
        pred = pred.astype(np.uint16)
        gt[:, -2:] = 65535
        pred[:, :, :3] = 65535
        labels = 300
    names = _names(n) if case.get("names", True) else None
    fg, fp = case.get("format", (3, 3))
    g = _stack(tmp_path / "gt.zarr", gt, chunks=case.get("gt"), names=names, zarr_format=fg)
    p = _stack(tmp_path / "pred.zarr", pred, chunks=case.get("pred"), names=names, zarr_format=fp)
    ignore = 65535 if labels == 300 else 255
    cm = evaluate_zarr(g, p, labels=labels, ignore_index=ignore, scheduler="synchronous")
    expected_names = names or [f"{i:06d}" for i in range(n)]
    ref = _eager(gt, pred, expected_names, labels, ignore_index=ignore)
    _assert_same(cm, ref)
    assert cm.images.names == expected_names
    # one eager update of the whole N x H x W stack gives the same too
    whole = ConfusionMatrix(labels, ignore_index=ignore, per_image=True)
    whole.update(gt, pred, names=expected_names)
    _assert_same(cm, whole)


def test_matches_an_independent_add_at_confusion(tmp_path):
    gt, pred = cityscapes_like(4, 40, 56, seed=7)
    g = _stack(tmp_path / "gt.zarr", gt, chunks=(16, 24))
    p = _stack(tmp_path / "pred.zarr", pred, chunks=(9, 56))
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="threads")
    counts, void, ignored = _naive(gt, pred, K)
    assert_array_equal(cm.counts, counts)
    assert_array_equal(cm.void, void)
    assert cm.n_ignored == ignored > 0
    assert void.sum() > 0
    for i in range(4):
        c, v, _ = _naive(gt[i], pred[i], K)
        tp = np.diagonal(c)
        assert_array_equal(cm.images.tp[i], tp)
        assert_array_equal(cm.images.fp[i], c.sum(axis=0) - tp)
        assert_array_equal(cm.images.fn[i], c.sum(axis=1) - tp + v)


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_fsspec_url_store_equals_eager(tmp_path, scheduler):
    # a store behind a URL is read through zarr's store API (no local fast path)
    fsspec = pytest.importorskip("fsspec")
    n = 5
    gt, pred = cityscapes_like(n, 20, 24, seed=8)
    names = _names(n)
    url = f"memory://{tmp_path.name}-{scheduler}"
    g = _stack(f"{url}/gt.zarr", gt, chunks=(8, 10), names=names)
    p = _stack(f"{url}/pred.zarr", pred, chunks=(20, 7), names=names, zarr_format=2)
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=scheduler, pixels_per_task=1)
    _assert_same(cm, _eager(gt, pred, names))
    fsspec.filesystem("memory").rm(f"/{tmp_path.name}-{scheduler}/gt.zarr/c/2/1/1")
    with pytest.raises(ChunkError, match=r"chunk \(2, 1, 1\) \(images 'frankfurt_000002'\)"):
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=scheduler)


def test_chunks_along_n_and_predictions_in_another_order(tmp_path):
    n = 7
    gt, pred = cityscapes_like(n, 20, 24, seed=3)
    names = _names(n)
    perm = np.random.default_rng(0).permutation(n)
    g = _zarr_stack(tmp_path / "gt.zarr", gt, (3, 8, 10), names)
    p = _zarr_stack(tmp_path / "pred.zarr", pred[perm], (2, 20, 7), [names[i] for i in perm])
    for ppt in (1, 10**9):
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                           pixels_per_task=ppt)  # fmt: skip
        _assert_same(cm, _eager(gt, pred, names))


def test_group_layout_with_images_of_different_sizes(tmp_path):
    sizes = {"b_img": (23, 31), "a_img": (16, 16), "c_img": (1, 40), "d_img": (40, 1)}
    gts, preds = {}, {}
    for i, (name, (h, w)) in enumerate(sizes.items()):
        g, p = cityscapes_like(1, h, w, seed=i)
        gts[name], preds[name] = g[0], p[0]
    g = _group(tmp_path / "gt.zarr", gts, (8, 8))
    p = _group(tmp_path / "pred.zarr", preds, (5, 13))
    order = sorted(sizes)  # group layout: sorted array names
    ref = _eager([gts[n] for n in order], [preds[n] for n in order], order)
    for ppt in (1, 10**9):
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="threads",
                           pixels_per_task=ppt, split_every=2)  # fmt: skip
        _assert_same(cm, ref)
        assert cm.images.names == order


def test_group_ground_truth_against_stack_predictions(tmp_path):
    gt, pred = cityscapes_like(3, 12, 18, seed=5)
    names = ["x", "y", "z"]
    g = _group(tmp_path / "gt.zarr", dict(zip(names, gt, strict=True)), (5, 5))
    p = _stack(tmp_path / "pred.zarr", pred, chunks=(12, 7), names=names)
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    _assert_same(cm, _eager(gt, pred, names))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_store_path_through_a_folder(tmp_path, zarr_format):
    gt, pred = cityscapes_like(3, 16, 24, seed=2)
    root = tmp_path / "root.zarr"
    names = _names(3)
    g = _stack(root, gt, chunks=(8, 8), names=names, zarr_format=zarr_format, path="val/gt")
    p = _stack(root, pred, chunks=(16, 5), names=names, zarr_format=zarr_format, path="val/pred")
    assert g == f"{root}/val/gt"
    assert open_masks(g).path == "val/gt"
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    _assert_same(cm, _eager(gt, pred, names))
    assert cm.keys == {f"zarr:{root} (path 'val/gt')"}


def test_raw_label_ids_cityscapes(tmp_path):
    gt, pred = cityscapes_like(3, 24, 32, seed=4, label_ids=True)
    assert gt.max() > 18  # labelIds, not trainIds
    pred[1, 3:9, 4:12] = 9  # "parking": a labelId that is not evaluated -> void
    names = _names(3)
    g = _stack(tmp_path / "gt.zarr", gt, chunks=(10, 10), names=names)
    p = _stack(tmp_path / "pred.zarr", pred, chunks=(24, 9), names=names)
    cm = evaluate_zarr(g, p, labels="cityscapes", gt_ids="raw", scheduler="synchronous")
    ref = _eager(gt, pred, names, "cityscapes", gt_ids="raw")
    _assert_same(cm, ref)
    assert cm.gt_ids == cm.pred_ids == "raw"
    assert cm.void.sum() > 0
    assert cm.n_ignored > 0


# -- hypothesis: random chunkings, fan-in, task sizes and schedulers ----------------------------
@st.composite
def engine_cases(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 5))
    h = draw(st.integers(1, 20))
    w = draw(st.integers(1, 20))

    def chunks() -> tuple[int, int, int]:
        return (draw(st.integers(1, n + 1)), draw(st.integers(1, h + 3)),
                draw(st.integers(1, w + 3)))  # fmt: skip

    return {
        "shape": (n, h, w),
        "gt_chunks": chunks(),
        "pred_chunks": chunks(),
        "perm": draw(st.permutations(range(n))),
        "split_every": draw(st.sampled_from([2, 3, 8])),
        "pixels_per_task": draw(st.sampled_from([1, 50, 1 << 30])),
        "scheduler": draw(st.sampled_from(["synchronous", "threads"])),
        "seed": draw(st.integers(0, 2**16)),
    }


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=engine_cases(), cells=st.booleans())
def test_dask_equals_eager_for_random_chunkings(case, cells):
    # cells: each image (or band) counted into its cells, as for a large table (patched here)
    small = {"_SPARSE_TOTAL_MIN_CELLS": 0, "_SPARSE_TOTAL_CELLS_PER_PIXEL": 0} if cells else {}
    with mock.patch.multiple(_count, **small) if small else contextlib.nullcontext():
        _check_dask_equals_eager(case)


def _check_dask_equals_eager(case: dict[str, Any]) -> None:
    n, h, w = case["shape"]
    rng = np.random.default_rng(case["seed"])
    values = np.array([0, 1, 2, 3, 4, 255], np.uint8)
    gt = rng.choice(values, size=(n, h, w), p=[0.3, 0.2, 0.2, 0.1, 0.1, 0.1])
    pred = np.where(rng.random((n, h, w)) < 0.5, gt, rng.choice(values, size=(n, h, w)))
    names = [f"im{i}" for i in range(n)]
    perm = list(case["perm"])
    with tempfile.TemporaryDirectory() as tmp:
        g = _zarr_stack(Path(tmp, "gt.zarr"), gt, case["gt_chunks"], names)
        p = _zarr_stack(Path(tmp, "pred.zarr"), pred[perm], case["pred_chunks"],
                        [names[i] for i in perm])  # fmt: skip
        cm = evaluate_zarr(g, p, labels=5, ignore_index=255, scheduler=case["scheduler"],
                           split_every=case["split_every"],
                           pixels_per_task=case["pixels_per_task"])  # fmt: skip
        other = evaluate_zarr(g, p, labels=5, ignore_index=255, scheduler="synchronous",
                              split_every=8, pixels_per_task=1 << 30)  # fmt: skip
    _assert_same(cm, _eager(gt, pred, names, 5, ignore_index=255))
    assert cm == other  # bit-identical, whatever the graph


@pytest.mark.parametrize("pixels_per_task", [1 << 30, 100])  # (100: images split in bands)
def test_small_images_of_many_classes_are_counted_into_cells(tmp_path, pixels_per_task):
    # many classes (1,024; at 4,096 each image zeroed and folded a 134 MB table, 350 ms an
    # image): cells now. Unexpected values on both sides, void, Boundary IoU, against dense
    # eager counting
    k, rng = 1024, np.random.default_rng(21)
    gt = rng.integers(0, k, (5, 17, 23)).astype(np.uint16)
    pred = np.where(rng.random(gt.shape) < 0.6, gt, rng.integers(0, k, gt.shape)).astype(np.uint16)
    gt[1, 3, 4], pred[2, 5, 6], pred[4, 16, 22] = 5000, 65535, k  # unexpected, void, unexpected
    names = [f"im{i}" for i in range(5)]
    g = _stack(tmp_path / "gt.zarr", gt, chunks=(7, 11), names=names)
    p = _stack(tmp_path / "pred.zarr", pred, chunks=(17, 5), names=names)
    opts = {"labels": k, "ignore_index": 65535, "on_unexpected": "count", "boundary": "1px"}
    ids = {c: c for c in range(k)} | {65535: _count.IGNORE}
    assert _count.sparse_total(_count.Lookup(k, ids, ids), 17 * 23)
    cm = evaluate_zarr(g, p, scheduler="synchronous", pixels_per_task=pixels_per_task, **opts)
    dense = {"_SPARSE_TOTAL_MIN_CELLS": 1 << 62, "_SPARSE_PIXELS_PER_CELL": -1}
    with mock.patch.multiple(_count, **dense):
        ref = _eager(gt, pred, names, **opts)
        assert _count.ImageCounter(_count.Lookup(k, ids, ids)).finish().shape == (k + 2, k + 2)
    _assert_same(cm, ref)
    assert cm.unexpected_gt == {5000: 1}
    assert cm.unexpected_pred == {k: 1}
    assert cm.void.sum() == 1
    assert cm.to_dict()["boundary"] == ref.to_dict()["boundary"]
    g2 = np.where((gt == 5000) | (pred == k), 65535, gt)  # (pixels in no count)
    counts, void, _ = _naive(g2, pred, k, ignore=65535)
    assert_array_equal(cm.counts, counts)
    assert_array_equal(cm.void, void)
    # the accumulator's own K x K matrix (8 MiB), no table per task or image
    again, peak = peak_of(evaluate_zarr, g, p, scheduler="synchronous",
                          pixels_per_task=pixels_per_task, **opts)  # fmt: skip
    assert again == cm
    assert peak < 1.25 * k * k * 8, peak / 2**20
    with pytest.raises(LabelRangeError, match=r"5000"):
        evaluate_zarr(g, p, scheduler="synchronous", **(opts | {"on_unexpected": "raise"}))


# -- schedulers ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_stores(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stores")
    gt, pred = cityscapes_like(6, 24, 36, seed=11)
    names = _names(6)
    g = _stack(tmp / "gt.zarr", gt, chunks=(10, 12), names=names)
    p = _stack(tmp / "pred.zarr", pred, chunks=(24, 7), names=names)
    return g, p, _eager(gt, pred, names)


@pytest.mark.parametrize("scheduler", ["synchronous", "threads", "processes", None])
def test_schedulers(small_stores, scheduler):
    g, p, ref = small_stores
    ppt = 10**9 if scheduler == "processes" else 1  # processes are slow: few tasks there
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=scheduler, pixels_per_task=ppt)
    _assert_same(cm, ref)


def test_progress_bar(small_stores, capsys):
    g, p, ref = small_stores
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous", progress=True)
    _assert_same(cm, ref)
    out = capsys.readouterr()
    assert "100%" in out.err  # stderr: stdout carries results (redirected tables, JSON)
    assert "100%" not in out.out


# -- missing and corrupt chunks -----------------------------------------------------------------
@pytest.fixture
def chunked(tmp_path):
    """Three 16 x 24 images in 8 x 8 chunks, one pair of stores under ``root.zarr/val``."""
    gt, pred = cityscapes_like(3, 16, 24, seed=9)
    gt[:, :8, :8] = 3  # no chunk equals the fill value: every chunk file exists
    pred[:, :8, :8] = np.where(pred[:, :8, :8] == 0, 4, pred[:, :8, :8])
    names = ["img_a", "img_b", "img_c"]
    root = tmp_path / "root.zarr"
    g = _stack(root, gt, chunks=(8, 8), names=names, path="val/gt")
    p = _stack(root, pred, chunks=(8, 8), names=names, path="val/pred")
    return root, g, p, gt, pred, names


def test_missing_prediction_chunk_reads_as_fill_value(chunked):
    # a prediction store that records nothing about its chunks (written by zarr or another
    # tool): the Zarr rule, a chunk never written holds the fill value
    root, g, p, gt, pred, names = chunked
    zarr.open_array(p).attrs["segiou"] = {"names": names}  # no segiou.all_chunks_written
    assert not open_masks(p).complete
    chunk = root / "val" / "pred" / "c" / "1" / "0" / "0"
    assert chunk.is_file()
    chunk.unlink()
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    filled = pred.copy()
    filled[1, :8, :8] = 0  # the fill value of create_stack
    _assert_same(cm, _eager(gt, filled, names))
    assert cm != _eager(gt, pred, names)


def _check_lost_prediction(info: Any, store: str, array: str, chunk: str, image: str) -> None:
    msg = str(info.value)
    assert store in msg
    assert f"array {array!r}" in msg
    assert chunk in msg
    assert image in msg
    assert "is missing from the prediction store" in msg
    assert "re-write the predictions" in msg  # what to do
    assert "missing_gt_chunks" not in msg  # (an option about the ground truth only)
    # and the way past it, when a writer skipped the chunk as the ground truth's message says
    assert "write_empty_chunks=False" in msg
    assert "missing_pred_chunks='fill' (--missing-pred-chunks fill)" in msg


@pytest.mark.parametrize("boundary", [None, "3px"])
def test_missing_prediction_chunk_of_a_store_segiou_wrote_is_refused(chunked, tmp_path,
                                                                     boundary):  # fmt: skip
    # create_stack (and segiou ingest) record that every chunk was written, for predictions as
    # for the ground truth: a lost prediction chunk is refused, never counted as class 0
    # predictions (with Boundary IoU, the halo of chunk row 0 reaches it first)
    root, g, p, gt, pred, _ = chunked
    assert open_masks(p).complete
    (root / "val" / "pred" / "c" / "1" / "1" / "2").unlink()
    maps = tmp_path / "maps.zarr"
    for scheduler in ("synchronous", "threads"):
        for missing_gt in ("auto", "fill"):  # the ground truth's option changes nothing here
            with pytest.raises(MissingChunkError) as info:
                evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=scheduler,
                              boundary=boundary, error_maps=maps,
                              missing_gt_chunks=missing_gt)  # fmt: skip
            _check_lost_prediction(info, str(root), "val/pred", "(1, 1, 2)", "'img_b'")
    assert not maps.exists()  # no half-written error maps
    # the predictions re-written: counted as an independent oracle counts them
    zarr.open_array(p)[1] = pred[1]
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                       boundary=boundary)  # fmt: skip
    counts, void, ignored = _naive(gt, pred, K)
    assert_array_equal(cm.counts, counts)
    assert_array_equal(cm.void, void)
    assert cm.n_ignored == ignored


def test_missing_prediction_chunk_of_a_group_or_read_whole_is_refused(tmp_path):
    gt, pred = cityscapes_like(2, 10, 10, seed=1)
    pred[:] = np.maximum(pred, 1)  # no chunk equals the fill value
    names = ["u", "v"]
    g = _group(tmp_path / "gt.zarr", dict(zip(names, gt, strict=True)), (5, 5))
    p = _group(tmp_path / "pred.zarr", dict(zip(names, pred, strict=True)), (5, 5))
    (tmp_path / "pred.zarr" / "v" / "c" / "1" / "0").unlink()
    # written by zarr, recording nothing: the Zarr rule (the fill value, 0)
    filled = pred.copy()
    filled[1, 5:, :5] = 0
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    counts, void, ignored = _naive(gt, filled, K)
    assert_array_equal(cm.counts, counts)
    assert_array_equal(cm.void, void)
    assert cm.n_ignored == ignored
    # the same group recording that every chunk was written: the chunk was lost
    zarr.open_group(p).attrs["segiou"] = {"all_chunks_written": True}
    assert open_masks(p).complete
    with pytest.raises(MissingChunkError) as info:
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    _check_lost_prediction(info, "pred.zarr", "v", "(1, 0)", "'v'")
    # ground truth in image files: the prediction store is read whole per image (same rule)
    from PIL import Image

    from segiou.io.png import png_set

    (tmp_path / "png").mkdir()
    for name, img in zip(names, gt, strict=True):
        Image.fromarray(img).save(tmp_path / "png" / f"{name}.png")
    with pytest.raises(MissingChunkError) as info:
        evaluate_zarr(png_set(tmp_path / "png"), p, labels=K, ignore_index=255,
                      scheduler="synchronous", boundary="2px")  # fmt: skip
    _check_lost_prediction(info, "pred.zarr", "v", "(1, 0)", "'v'")


def _reopened_predictions(root: Path) -> tuple[str, str, np.ndarray, np.ndarray, list[str]]:
    """Predictions in a store create_stack made (it records every chunk), written by another job
    through ``zarr.open_array(..., mode="r+")``: zarr's default ``write_empty_chunks=False``
    (not stored with the array) skips every chunk equal to the fill value, 0."""
    gt, pred = cityscapes_like(3, 16, 24, seed=5)
    pred[1, :8, :8] = 0  # chunk (1, 0, 0): all class 0
    pred[2, 8:, 16:] = 0  # chunk (2, 1, 2)
    gt[2, 8:, 16:] = 0  # (the ground truth of class 0 there: counted as true positives)
    names = ["img_a", "img_b", "img_c"]
    g = _stack(root / "gt.zarr", gt, chunks=(8, 8), names=names)
    p = str(root / "pred.zarr" / "val")
    create_stack(root / "pred.zarr", n=3, height=16, width=24, names=names, chunks=(8, 8),
                 path="val")  # fmt: skip
    zarr.open_array(str(root / "pred.zarr"), path="val", mode="r+")[:] = pred
    assert open_masks(p).complete  # the marker says every chunk was written, yet:
    where = root / "pred.zarr" / "val" / "c"
    skipped = [c for c in ("1/0/0", "2/1/2") if not (where / c).exists()]
    assert skipped == ["1/0/0", "2/1/2"]
    return g, p, gt, pred, names


@pytest.mark.parametrize("boundary", [None, "3px"])
def test_predictions_written_through_a_reopened_array_are_refused_or_read_as_fill(
    tmp_path, boundary
):  # fmt: skip
    # the sixth review's store: refused by default (the marker says every chunk was written),
    # with a message naming write_empty_chunks=False and the way past it; counted correctly
    # with missing_pred_chunks="fill" (before, nothing let the evaluation past the refusal)
    g, p, gt, pred, names = _reopened_predictions(tmp_path)
    for how in ("auto", "error"):
        with pytest.raises(MissingChunkError) as info:
            evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                          boundary=boundary, missing_pred_chunks=how)  # fmt: skip
        # (the first task to reach one of the two chunks names it)
        chunk = "(1, 0, 0)" if "(1, 0, 0)" in str(info.value) else "(2, 1, 2)"
        image = {"(1, 0, 0)": "'img_b'", "(2, 1, 2)": "'img_c'"}[chunk]
        _check_lost_prediction(info, str(tmp_path / "pred.zarr"), "val", chunk, image)
    counts, void, ignored = _naive(gt, pred, K)
    for scheduler in ("synchronous", "threads"):
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=scheduler,
                           boundary=boundary, missing_pred_chunks="fill")  # fmt: skip
        assert_array_equal(cm.counts, counts)
        assert_array_equal(cm.void, void)
        assert cm.n_ignored == ignored
        _assert_same(cm, _eager(gt, pred, names))
        if boundary is not None:
            ref = _eager(gt, pred, names, boundary=boundary)
            assert_array_equal(cm.extras.boundary_total, ref.extras.boundary_total)
        # the two prediction chunks read as the fill value are reported, by image, and kept
        assert cm.extras.absent == {}  # (none of the ground truth's)
        assert cm.extras.absent_pred == {"img_b": 1, "img_c": 1}
        back = ConfusionMatrix.from_dict(json.loads(json.dumps(cm.to_dict())))
        assert back.extras.absent_pred == {"img_b": 1, "img_c": 1}
        assert segiou.evaluate(cm).absent_pred_chunks == {"img_b": 1, "img_c": 1}


def test_missing_prediction_chunks_error_refuses_in_any_store(chunked):
    # a prediction store that records nothing about its chunks reads a missing chunk as the
    # fill value by default (the Zarr rule); missing_pred_chunks="error" refuses it there too
    root, g, p, gt, pred, names = chunked
    zarr.open_array(p).attrs["segiou"] = {"names": names}  # no segiou.all_chunks_written
    assert not open_masks(p).complete
    (root / "val" / "pred" / "c" / "2" / "0" / "1").unlink()
    for scheduler in ("synchronous", "threads"):
        with pytest.raises(MissingChunkError) as info:
            evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=scheduler,
                          missing_pred_chunks="error")  # fmt: skip
        _check_lost_prediction(info, str(root), "val/pred", "(2, 0, 1)", "'img_c'")
    filled = pred.copy()
    filled[2, :8, 8:16] = 0
    for how in ("auto", "fill"):
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                           missing_pred_chunks=how)  # fmt: skip
        _assert_same(cm, _eager(gt, filled, names))


@pytest.mark.parametrize("option", ["missing_pred_chunks", "missing_gt_chunks"])
@pytest.mark.parametrize("value", ["Fill", "void", "", None])
def test_unknown_missing_chunk_policy_is_refused(chunked, option, value):
    _, g, p, *_ = chunked
    with pytest.raises(UsageError) as info:
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                      **{option: value})  # fmt: skip
    assert str(info.value) == f"{option}={value!r} is unknown; expected 'auto', 'error' or 'fill'"


def test_missing_ground_truth_chunk_raises_or_fills(chunked):
    root, g, p, gt, pred, names = chunked
    (root / "val" / "gt" / "c" / "1" / "0" / "2").unlink()
    for scheduler in ("synchronous", "threads"):
        with pytest.raises(ChunkError) as info:
            evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=scheduler)
        msg = str(info.value)
        assert str(root) in msg
        assert "val/gt" in msg
        assert "(1, 0, 2)" in msg
        assert "'img_b'" in msg
        assert "missing_gt_chunks='fill'" in msg  # what to do
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                       missing_gt_chunks="fill")  # fmt: skip
    filled = gt.copy()
    filled[1, :8, 16:] = 0
    _assert_same(cm, _eager(filled, pred, names))


def test_ground_truth_chunk_missing_inside_a_shard_raises_or_fills(tmp_path):
    # zarr's defaults leave a chunk equal to the fill value out of its shard and read it back
    # as the fill value: in a store written by zarr that is the Zarr rule (read as the fill
    # value and reported, by default); missing_gt_chunks="error" still finds and refuses it.
    gt, pred = cityscapes_like(2, 16, 24, seed=4)
    gt = np.where(gt == 0, 1, gt).astype(np.uint8)
    gt[1, 8:, 8:16] = 0  # chunk (1, 1, 1) of image 1 is all fill value: never written
    names = ["img_a", "img_b"]
    g = str(tmp_path / "gt.zarr")
    a = zarr.create_array(g, shape=gt.shape, chunks=(1, 8, 8), shards=(2, 16, 24), dtype="uint8",
                          attributes={"segiou": {"names": names}})  # fmt: skip
    a[:] = gt
    p = _stack(tmp_path / "pred.zarr", pred, chunks=(8, 8), names=names)
    with pytest.raises(ChunkError, match=r"chunk \(1, 1, 1\) \(images 'img_b'\) is missing"):
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                      missing_gt_chunks="error")  # fmt: skip
    for how in ("auto", "fill"):
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                           missing_gt_chunks=how)  # fmt: skip
        _assert_same(cm, _eager(gt, pred, names))
        assert cm.extras.absent == {"img_b": 1}  # the one chunk read as the fill value


@pytest.mark.parametrize("side", ["gt", "pred"])
def test_corrupt_chunk_raises_chunk_error(chunked, side):
    root, g, p, *_ = chunked
    (root / "val" / side / "c" / "2" / "1" / "0").write_bytes(b"not zstd at all" * 4)
    with pytest.raises(ChunkError) as info:
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="threads")
    msg = str(info.value)
    assert str(root) in msg
    assert f"array 'val/{side}'" in msg
    assert "(2, 1, 0)" in msg
    assert "'img_c'" in msg
    assert "corrupt" in msg


def test_missing_ground_truth_chunk_of_a_group_names_the_image(tmp_path):
    gt, pred = cityscapes_like(2, 10, 10, seed=1)
    gt[:] = np.maximum(gt, 1)  # no chunk equals the fill value
    g = _group(tmp_path / "gt.zarr", {"u": gt[0], "v": gt[1]}, (5, 5))
    p = _group(tmp_path / "pred.zarr", {"u": pred[0], "v": pred[1]}, (5, 5))
    (tmp_path / "gt.zarr" / "v" / "c" / "1" / "1").unlink()
    with pytest.raises(ChunkError, match=r"gt\.zarr array 'v': chunk \(1, 1\) \(images 'v'\)"):
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                      missing_gt_chunks="error")  # fmt: skip
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    assert cm.extras.absent == {"v": 1}  # written by zarr: the Zarr rule, reported


def test_ground_truth_written_with_zarr_defaults_is_accepted(tmp_path):
    gt, pred = cityscapes_like(2, 16, 16, seed=1)
    gt[0, :8, :8] = 0  # one chunk of class 0 == the fill value: zarr skips writing it
    g = _group(tmp_path / "gt.zarr", {"a": gt[0], "b": gt[1]}, (8, 8), write_empty_chunks=False)
    p = _group(tmp_path / "pred.zarr", {"a": pred[0], "b": pred[1]}, (8, 8))
    assert not (tmp_path / "gt.zarr" / "a" / "c" / "0" / "0").exists()
    # the Zarr rule: a chunk never written holds the fill value; the store records nothing
    # about its chunks (not written by segiou), so that is the default, and it is reported
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    _assert_same(cm, _eager(gt, pred, ["a", "b"]))
    assert cm.extras.absent == {"a": 1}
    result = segiou.evaluate(cm)
    assert result.absent_chunks == {"a": 1}
    assert result.to_dict()["absent_chunks"] == {"total": 1, "images": {"a": 1}}
    with pytest.raises(ChunkError, match=r"chunk \(0, 0\) \(images 'a'\) is missing"):
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                      missing_gt_chunks="error")  # fmt: skip


def test_missing_chunk_of_a_store_segiou_wrote_is_refused_by_default(chunked):
    # create_stack (and segiou ingest) record that every chunk was written: a missing chunk
    # was lost, never read as class 0, unless asked for explicitly
    root, g, p, *_ = chunked
    assert open_masks(g).complete
    (root / "val" / "gt" / "c" / "2" / "1" / "1").unlink()
    with pytest.raises(ChunkError, match=r"records that it holds every chunk") as info:
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    assert "'img_c'" in str(info.value)
    assert "(2, 1, 1)" in str(info.value)
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                       missing_gt_chunks="fill")  # fmt: skip
    assert cm.extras.absent == {"img_c": 1}


def test_ground_truth_chunks_of_class_zero_written_by_create_stack(tmp_path):
    gt, pred = cityscapes_like(2, 16, 16, seed=1)
    gt[1, 8:, :8] = 0  # a chunk equal to the fill value
    g = _stack(tmp_path / "gt.zarr", gt, chunks=(8, 8))
    p = _stack(tmp_path / "pred.zarr", pred, chunks=(8, 8))
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    _assert_same(cm, _eager(gt, pred, ["000000", "000001"]))


# -- validation before counting -----------------------------------------------------------------
@pytest.fixture
def pair(tmp_path):
    """Eight named ground-truth images in a store; their predictions still in memory."""
    gt, pred = cityscapes_like(8, 12, 16, seed=21)
    names = [f"img{i}" for i in range(8)]
    g = _stack(tmp_path / "gt.zarr", gt, chunks=(6, 6), names=names)
    return SimpleNamespace(tmp=tmp_path, g=g, gt=gt, pred=pred, names=names)


def test_missing_predictions_are_listed(pair):
    p = _stack(pair.tmp / "pred.zarr", pair.pred[[0, 3]], names=["img0", "img3"])
    with pytest.raises(MaskNotFoundError) as info:
        evaluate_zarr(pair.g, p, labels=K, ignore_index=255)
    msg = str(info.value)
    assert "6 of 8 ground-truth image(s) have no prediction" in msg
    assert "['img1', 'img2', 'img4', 'img5', 'img6']" in msg  # the first five
    assert "img7" not in msg
    assert "pred.zarr" in msg
    assert "missing_pred='void'" in msg


def test_misspelt_missing_pred_and_layout_are_refused(pair, tmp_path):
    """missing_pred="Error" scored missing predictions as all-void (only "error" refused them),
    and an unknown folder layout was read as "plain"."""
    p = _stack(pair.tmp / "pred.zarr", pair.pred[[0, 3]], names=["img0", "img3"])
    with pytest.raises(UsageError, match="missing_pred='Error' is unknown"):
        evaluate_zarr(pair.g, p, labels=K, ignore_index=255, missing_pred="Error")
    (tmp_path / "g").mkdir()
    (tmp_path / "p").mkdir()
    with pytest.raises(UsageError, match="layout='Cityscapes' is unknown"):
        evaluate_zarr(str(tmp_path / "g"), str(tmp_path / "p"), labels=K, layout="Cityscapes")


def test_missing_predictions_scored_as_void(pair):
    keep = [0, 3, 7]
    p = _stack(
        pair.tmp / "pred.zarr", pair.pred[keep], chunks=(12, 5), names=[pair.names[i] for i in keep]
    )
    cm = evaluate_zarr(pair.g, p, labels=K, ignore_index=255, missing_pred="void",
                       scheduler="synchronous")  # fmt: skip
    voided = np.full_like(pair.pred, 255)
    voided[keep] = pair.pred[keep]
    ref = _eager(pair.gt, voided, pair.names)
    _assert_same(cm, ref)
    # every valid ground-truth pixel of a missing image is a void false negative
    for i in set(range(8)) - set(keep):
        valid = int(np.count_nonzero(pair.gt[i] != 255))
        assert cm.images.fn[i].sum() == valid
        assert cm.images.tp[i].sum() == cm.images.fp[i].sum() == 0
    # with no prediction store at all, everything is void
    cm = evaluate_zarr(pair.g, None, labels=K, ignore_index=255, missing_pred="void")
    _assert_same(cm, _eager(pair.gt, np.full_like(pair.pred, 255), pair.names))
    assert cm.counts.sum() == 0
    with pytest.raises(MaskNotFoundError, match=r"no prediction store given"):
        evaluate_zarr(pair.g, None, labels=K, ignore_index=255)


def test_void_needs_a_void_value(pair):
    p = _stack(pair.tmp / "pred.zarr", pair.pred[:1], names=pair.names[:1])
    with pytest.raises(MaskNotFoundError, match=r"no void value"):
        evaluate_zarr(pair.g, p, labels=256, missing_pred="void")


def test_extra_prediction_is_named(pair):
    extra = np.concatenate([pair.pred, pair.pred[:1]])
    p = _stack(pair.tmp / "pred.zarr", extra, names=[*pair.names, "stray_image"])
    with pytest.raises(MaskNotFoundError, match=r"1 prediction\(s\).*no ground truth.*stray_image"):
        evaluate_zarr(pair.g, p, labels=K, ignore_index=255, missing_pred="void")


def test_different_image_sizes(pair):
    p = _stack(pair.tmp / "pred.zarr", np.zeros((8, 12, 15), np.uint8), names=pair.names)
    with pytest.raises(ShapeMismatchError, match=r"8 image\(s\).*'img0': gt \(12, 16\) vs pred"):
        evaluate_zarr(pair.g, p, labels=K, ignore_index=255)


def test_store_layout_errors(pair):
    zarr.create_array(str(pair.tmp / "float.zarr"), shape=(8, 12, 16), dtype="float32")
    with pytest.raises(StoreLayoutError, match=r"float\.zarr.*float32"):
        evaluate_zarr(pair.g, pair.tmp / "float.zarr", labels=K)
    zarr.create_array(str(pair.tmp / "flat.zarr"), shape=(12, 16), dtype="uint8")
    with pytest.raises(StoreLayoutError, match=r"flat\.zarr.*\(12, 16\).*1 x H x W"):
        evaluate_zarr(pair.tmp / "flat.zarr", pair.g, labels=K)
    with pytest.raises(MaskNotFoundError, match=r"nothing\.zarr"):
        evaluate_zarr(pair.g, pair.tmp / "nothing.zarr", labels=K)
    with pytest.raises(MaskNotFoundError, match=r"nothing\.zarr"):
        evaluate_zarr(str(pair.tmp / "nothing.zarr"), pair.g, labels=K)
    p = _stack(pair.tmp / "pred.zarr", pair.pred, names=pair.names)
    with pytest.raises(StoreLayoutError, match=r"dtype uint8 cannot hold.*0\.\.299"):
        evaluate_zarr(pair.g, p, labels=300)


def test_bool_store_holds_ids_0_and_1_only(tmp_path):
    # a bool store can hold class ids 0 and 1, nothing else: with more classes, those could
    # never be counted (as for an int8 store with 200 classes), on either side
    eye = np.eye(4, dtype=bool)[None].repeat(2, axis=0)
    stores = {}
    for side, data in (("gt", eye), ("pred", ~eye)):
        z = zarr.create_array(str(tmp_path / side), shape=data.shape, chunks=(1, 4, 4),
                              dtype="bool", fill_value=False)  # fmt: skip
        z[:] = data
        stores[side] = str(tmp_path / side)
    u8 = _stack(tmp_path / "u8.zarr", eye.astype(np.uint8))
    classes = segiou.labels.builtin_spec("pascal_voc").classes
    for g, p, side in ((stores["gt"], u8, "ground-truth"), (u8, stores["pred"], "prediction")):
        with pytest.raises(StoreLayoutError) as info:
            evaluate_zarr(g, p, labels="pascal_voc", scheduler="synchronous")
        msg = str(info.value)
        assert f"{side} dtype bool cannot hold" in msg
        assert f"{len(classes) - 2} class(es) could never be counted" in msg
        assert repr(classes[2]) in msg
    with pytest.raises(StoreLayoutError, match=r"dtype bool cannot hold.*: 1 class\(es\)"):
        evaluate_zarr(stores["gt"], stores["pred"], labels=3, scheduler="synchronous")
    # two classes fit: counted as numpy reads bool (False 0, True 1)
    cm = evaluate_zarr(stores["gt"], stores["pred"], labels=2, scheduler="synchronous")
    want = np.zeros((2, 2), np.int64)
    np.add.at(want, (eye.astype(int).ravel(), (~eye).astype(int).ravel()), 1)
    assert_array_equal(cm.counts, want)
    assert cm.counts.tolist() == [[0, 24], [8, 0]]


def test_unexpected_values_raise_with_store_image_value_count_and_position(pair):
    bad = pair.pred.copy()
    bad[5, 2, 3] = bad[5, 7, 9] = 77  # a prediction value that is neither class nor void
    p = _stack(pair.tmp / "pred.zarr", bad, chunks=(5, 5), names=pair.names)
    with pytest.raises(LabelRangeError) as info:
        evaluate_zarr(pair.g, p, labels=K, ignore_index=255, scheduler="threads")
    msg = str(info.value)
    assert "gt.zarr" in msg
    assert "'img5'" in msg
    assert "77 (2 px, first at (2, 3))" in msg
    assert "on_unexpected='count'" in msg

    bad_gt = pair.gt.copy()
    bad_gt[2, 11, 15] = 40
    g2 = _stack(pair.tmp / "gt2.zarr", bad_gt, chunks=(5, 7), names=pair.names)
    p2 = _stack(pair.tmp / "pred2.zarr", pair.pred, names=pair.names)
    with pytest.raises(LabelRangeError, match=r"gt2\.zarr image 'img2'.*40 \(1 px, first at \(11, 15\)\)"):  # fmt: skip
        evaluate_zarr(g2, p2, labels=K, ignore_index=255, scheduler="synchronous")


def test_unexpected_values_counted(pair):
    bad_gt, bad = pair.gt.copy(), pair.pred.copy()
    bad[5, 2, 3] = bad[5, 7, 9] = 77
    bad[1, -1, -1] = 78  # at an ignored ground-truth pixel: not checked, not counted
    bad_gt[2, 0, 0] = 40
    bad_gt[6, 3:5, 4] = 41
    g2 = _stack(pair.tmp / "gt2.zarr", bad_gt, chunks=(5, 7), names=pair.names)
    p = _stack(pair.tmp / "pred.zarr", bad, chunks=(5, 5), names=pair.names)
    cm = evaluate_zarr(g2, p, labels=K, ignore_index=255, on_unexpected="count",
                       scheduler="synchronous", pixels_per_task=1)  # fmt: skip
    ref = _eager(bad_gt, bad, pair.names, on_unexpected="count")
    _assert_same(cm, ref)
    assert cm.unexpected_gt == {40: 1, 41: 2}
    assert cm.unexpected_pred == {77: 2}
    assert cm.images.unexpected.tolist() == [0, 0, 1, 0, 0, 2, 2, 0]


def test_signed_store_with_negative_ids(tmp_path):
    gt, pred = cityscapes_like(2, 10, 12, seed=5)
    gt, pred = gt.astype(np.int16), pred.astype(np.int16)
    gt[0, 0, :3] = -1
    pred[1, 4, 4] = -7
    g = _stack(tmp_path / "gt.zarr", gt, chunks=(4, 5))
    p = _stack(tmp_path / "pred.zarr", pred, chunks=(10, 3))
    cm = evaluate_zarr(g, p, labels=K, ignore_index=[255, -1], on_unexpected="count",
                       scheduler="synchronous")  # fmt: skip
    ref = _eager(gt, pred, ["000000", "000001"], ignore_index=[255, -1], on_unexpected="count")
    _assert_same(cm, ref)


# -- batch keys ---------------------------------------------------------------------------------
def test_batch_key_refuses_counting_a_store_twice(tmp_path, monkeypatch):
    gt, pred = cityscapes_like(2, 8, 8, seed=0)
    g = _stack(tmp_path / "gt.zarr", gt)
    p = _stack(tmp_path / "pred.zarr", pred)
    a = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    assert a.keys == {f"zarr:{g}"}
    b = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    with pytest.raises(DuplicateBatchError, match=r"zarr:"):
        a.merge(b)
    # the same store spelled as a relative path is the same batch
    monkeypatch.chdir(tmp_path)
    c = evaluate_zarr("gt.zarr", "pred.zarr", labels=K, ignore_index=255)
    with pytest.raises(DuplicateBatchError):
        a.merge(c)
    # another store merges, and the sum is the eager count of both
    g2 = _stack(tmp_path / "gt2.zarr", pred)
    d = evaluate_zarr(g2, g, labels=K, ignore_index=255, scheduler="synchronous")
    both = a + d
    # unnamed stacks number their images: labels, not identities (two stores merge)
    ref = _eager([*gt, *pred], [*pred, *gt], ["a0", "a1", "b0", "b1"])
    _assert_same(both, ref, names=False)
    assert both.images.names == ["000000", "000001"] * 2


# -- planning -----------------------------------------------------------------------------------
def test_plan_groups_covers_every_image_once_aligned_to_chunks(tmp_path):
    data = np.zeros((10, 4, 4), np.uint8)
    g = _zarr_stack(tmp_path / "gt.zarr", data, (3, 4, 4), [str(i) for i in range(10)])
    ms = open_masks(g)
    for ppt in (1, 16, 40, 10**9):
        groups = plan_groups(ms, pixels_per_task=ppt)
        assert [i for grp in groups for i in grp] == list(range(10))
        for grp in groups[:-1]:
            assert len(grp) % 3 == 0  # whole chunk rows along N
    assert len(plan_groups(ms, pixels_per_task=1)) == 4
    assert len(plan_groups(ms, pixels_per_task=10**9)) == 4  # min_tasks
    assert len(plan_groups(ms, pixels_per_task=10**9, min_tasks=1)) == 1


def test_the_job_is_one_key_and_counting_tasks_stay_small(tmp_path, monkeypatch):
    # the job (every image name, the pairing) is shipped once, not once per task
    import pickle

    import segiou.parallel._engine as engine

    n = 300
    names = [f"a-rather-long-image-name-{i:06d}" for i in range(n)]
    data = np.zeros((n, 4, 4), np.uint8)
    g = _stack(tmp_path / "gt.zarr", data, names=names)
    p = _stack(tmp_path / "pred.zarr", data, names=names)
    seen: dict[str, Any] = {}
    real = engine.compute

    def spy(obj: Any, scheduler: Any, progress: bool) -> Any:
        seen["graph"] = dict(obj.__dask_graph__())
        return real(obj, scheduler, progress)

    monkeypatch.setattr(engine, "compute", spy)  # as the engine calls it
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, pixels_per_task=1, split_every=4,
                       scheduler="synchronous")  # fmt: skip
    assert cm.counts[0, 0] == n * 16
    graph = seen["graph"]
    name = {k: k[0] if isinstance(k, tuple) else k for k in graph}  # keys: (name, index)
    jobs = [k for k in graph if name[k].startswith("segiou-job")]
    counts = [k for k in graph if name[k].startswith("segiou-count")]
    assert len(jobs) == 1
    assert len(counts) == n  # one image per task here
    assert len(pickle.dumps(graph[jobs[0]])) > n * len(names[0])  # the names are in the job
    assert max(len(pickle.dumps(graph[k])) for k in counts) < 1000  # and in no task


def test_split_every_below_two_is_refused(tmp_path):
    data = np.zeros((2, 4, 4), np.uint8)
    g = _stack(tmp_path / "gt.zarr", data)
    p = _stack(tmp_path / "pred.zarr", data)
    with pytest.raises(UsageError, match=r"split_every must be at least 2.*got 1"):
        evaluate_zarr(g, p, labels=K, split_every=1, scheduler="synchronous")


# -- memory -------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["stack", "group"])
def test_memory_stays_far_below_the_dataset(tmp_path, layout):
    n, h, w = 32, 256, 512
    gt, pred = cityscapes_like(n, h, w, seed=3)
    names = [f"im{i:02d}" for i in range(n)]
    if layout == "stack":
        g = _stack(tmp_path / "gt.zarr", gt, chunks=(128, 128), names=names)
        p = _stack(tmp_path / "pred.zarr", pred, chunks=(128, 128), names=names)
    else:
        g = _group(tmp_path / "gt.zarr", dict(zip(names, gt, strict=True)), (128, 128))
        p = _group(tmp_path / "pred.zarr", dict(zip(names, pred, strict=True)), (128, 128))
    evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")  # warm up
    tracemalloc.start()
    try:
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cm.n_pixels == gt.size
    assert peak < 0.25 * gt.nbytes, f"peak {peak:,} B for a {gt.nbytes:,} B dataset"


def test_decode_buffer_pool_reuses_per_thread_within_its_budget():
    import threading

    from segiou.io.chunks import BufferPool

    pool = BufferPool(max_bytes=3000)
    a = pool.take((10, 100), np.dtype(np.uint8))
    pool.give(a)
    assert pool.take((10, 100), np.dtype(np.int8)) is not a  # dtype must match
    assert pool.take((10, 100), np.dtype(np.uint8)) is a
    bufs = [np.empty(1000, np.uint8) for _ in range(4)]
    pool2 = BufferPool(max_bytes=3000)
    for b in bufs:
        pool2.give(b)  # the oldest is evicted beyond 3000 bytes
    kept = {id(pool2.take((1000,), np.dtype(np.uint8))) for _ in range(3)}
    assert kept == {id(b) for b in bufs[1:]}
    big = np.empty(4000, np.uint8)
    pool2.give(big)  # larger than the budget: not kept
    assert pool2.take((4000,), np.dtype(np.uint8)) is not big
    pool2.give(bufs[0])
    seen: list[bool] = []
    t = threading.Thread(
        target=lambda: seen.append(pool2.take((1000,), np.dtype(np.uint8)) is bufs[0])
    )
    t.start()
    t.join()
    assert seen == [False]  # another thread has its own pool
    assert pool2.take((1000,), np.dtype(np.uint8)) is bufs[0]


def test_corrupt_chunk_names_every_image_it_covers(tmp_path):
    import zarr

    gt, pred = cityscapes_like(4, 8, 8, seed=2)
    names = ["img0", "img1", "img2", "img3"]
    for side, data in (("gt", gt), ("pred", pred)):
        a = zarr.create_array(store=str(tmp_path / f"{side}.zarr"), shape=data.shape,
                              chunks=(2, 8, 8), dtype=data.dtype, fill_value=0,
                              config={"write_empty_chunks": True})  # fmt: skip
        a.attrs["segiou"] = {"names": names}
        a[:] = data
    (tmp_path / "gt.zarr" / "c" / "1" / "0" / "0").write_bytes(b"garbage" * 9)
    with pytest.raises(ChunkError, match=r"chunk \(1, 0, 0\) \(images 'img2', 'img3'\)"):
        evaluate_zarr(str(tmp_path / "gt.zarr"), str(tmp_path / "pred.zarr"), labels=K,
                      ignore_index=255, scheduler="synchronous")  # fmt: skip


@pytest.mark.parametrize("layout", ["stack", "group"])
def test_a_task_holds_one_chunk_row_not_a_whole_image(tmp_path, monkeypatch, layout):
    from segiou.io import chunks

    gt, pred = cityscapes_like(2, 64, 64, seed=4)
    if layout == "stack":
        g = _stack(tmp_path / "gt.zarr", gt, chunks=(8, 8))
        p = _stack(tmp_path / "pred.zarr", pred, chunks=(8, 16))  # another grid
    else:
        g = _group(tmp_path / "gt.zarr", {"a": gt[0], "b": gt[1]}, (8, 8))
        p = _group(tmp_path / "pred.zarr", {"a": pred[0], "b": pred[1]}, (8, 16))
    peak = {"n": 0}
    real = chunks.ChunkCache.get

    def spy(self: Any, coords: tuple[int, ...]) -> np.ndarray:
        out = real(self, coords)
        peak["n"] = max(peak["n"], len(self.cache))
        return out

    monkeypatch.setattr(chunks.ChunkCache, "get", spy)
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    ref = ConfusionMatrix(K, ignore_index=255).update(gt, pred)
    np.testing.assert_array_equal(cm.counts, ref.counts)
    assert peak["n"] <= 8  # one row of 8 chunks (64 would be the whole image)


def test_missing_and_extra_predictions_are_both_reported(tmp_path):
    data = np.zeros((2, 4, 4), np.uint8)
    g = _stack(tmp_path / "gt.zarr", data, names=["a", "b"])
    p = _stack(tmp_path / "pred.zarr", data, names=["a", "c"])
    for missing_pred in ("error", "void"):
        with pytest.raises(MaskNotFoundError) as info:
            evaluate_zarr(g, p, labels=K, missing_pred=missing_pred, scheduler="synchronous")
        msg = str(info.value)
        assert "1 prediction(s)" in msg
        assert "['c']" in msg
        assert "1 of 2 ground-truth image(s)" in msg
        assert "['b']" in msg
        assert "names differ on both sides" in msg


# -- large images split into bands of chunk rows ------------------------------------------------
def test_plan_tasks_splits_a_large_image_into_bands_of_chunk_rows(tmp_path):
    from segiou.parallel import plan_tasks

    gt, _ = cityscapes_like(1, 70, 32, seed=1)
    ms = open_masks(_stack(tmp_path / "g.zarr", gt, chunks=(8, 8)))
    tasks = plan_tasks(ms, pixels_per_task=24 * 32)
    rows = [tuple(u) for t in tasks for u in t.tolist()]
    assert len(tasks) == len(rows) > 1  # one band per task
    assert rows[0][1] == 0
    assert rows[-1][2] == 70
    for (_, _, end), (_, start, _) in itertools.pairwise(rows):
        assert end == start  # contiguous, no overlap
    assert all(start % 8 == 0 for _, start, _ in rows)  # whole chunk rows
    whole = plan_tasks(ms, pixels_per_task=24 * 32, split_images=False)
    assert [t.tolist() for t in whole] == [[[0, 0, 70]]]


@pytest.mark.parametrize("layout", ["stack", "group"])
@pytest.mark.parametrize("ppt", [1, 200, 10**6])
def test_images_split_into_bands_count_exactly(tmp_path, layout, ppt):
    gt, pred = cityscapes_like(2, 40, 24, seed=6)
    gt[1, 30, 5] = 77  # an unexpected value in a late band of image 1
    names = ["first", "second"]
    if layout == "stack":
        g = _stack(tmp_path / "g.zarr", gt, chunks=(8, 8), names=names)
        p = _stack(tmp_path / "p.zarr", pred, chunks=(16, 24), names=names)  # another grid
    else:
        g = _group(tmp_path / "g.zarr", dict(zip(names, gt, strict=True)), (8, 8))
        p = _group(tmp_path / "p.zarr", dict(zip(names, pred, strict=True)), (16, 24))
    with pytest.raises(LabelRangeError, match=r"'second'.*77.*\(30, 5\)"):  # image position
        evaluate_zarr(g, p, labels=K, ignore_index=255, pixels_per_task=ppt,
                      scheduler="synchronous")  # fmt: skip
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, pixels_per_task=ppt,
                       on_unexpected="count", scheduler="threads")  # fmt: skip
    ref = ConfusionMatrix(K, ignore_index=255, per_image=True, on_unexpected="count")
    ref.update(gt, pred, names=names)
    _assert_same(cm, ref)


def test_an_error_in_one_band_describes_the_whole_image(tmp_path):
    gt, pred = cityscapes_like(2, 64, 64, seed=5)
    gt[0, 0, :3] = 77  # in the first band
    gt[0, 40, :5] = 77  # and in a later one
    gt[0, 50, 0] = 3
    pred[0, 50, 0] = 99  # an unexpected prediction in yet another band
    g = _stack(tmp_path / "g.zarr", gt, chunks=(16, 64), names=["a", "b"])
    p = _stack(tmp_path / "p.zarr", pred, chunks=(16, 64), names=["a", "b"])
    for scheduler in ("synchronous", "threads"):
        with pytest.raises(LabelRangeError) as info:
            evaluate_zarr(g, p, labels=K, ignore_index=255, pixels_per_task=1,
                          scheduler=scheduler)  # fmt: skip
        msg = str(info.value)
        assert "image 'a'" in msg
        assert "77 (8 px, first at (0, 0))" in msg
        assert "99 (1 px, first at (50, 0))" in msg


def test_a_large_image_grouped_with_small_ones_is_still_split(tmp_path):
    from segiou.parallel import plan_tasks

    rng = np.random.default_rng(0)
    images = {"a": rng.integers(0, K, (1, 4), dtype=np.uint8),
              "b": rng.integers(0, K, (400, 100), dtype=np.uint8),
              "c": rng.integers(0, K, (1, 4), dtype=np.uint8)}  # fmt: skip
    g = _group(tmp_path / "g.zarr", images, (10, 100))
    tasks = [t.tolist() for t in plan_tasks(open_masks(g))]
    bands = [u for t in tasks for u in t if u[0] == 1]
    assert len(bands) > 1  # image "b" (index 1) is split although "a" shares its group
    assert sum(end - start for _, start, end in bands) == 400
    p = _group(tmp_path / "p.zarr", images, (10, 100))  # the same images as predictions
    cm = evaluate_zarr(g, p, labels=K, scheduler="synchronous")
    assert cm.counts.trace() == 4 + 400 * 100 + 4
