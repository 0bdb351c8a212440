"""Prediction chunks absent from a Zarr store, read as the fill value, are reported per image.

zarr's default ``write_empty_chunks=False`` leaves out every chunk equal to the fill value, so
a store written by zarr may lack chunks of all-0 predictions (the Zarr rule: read as the fill
value) or chunks its writer never wrote (a crashed inference job: read as class 0 as well).
Either way the result says how many, per ground-truth image, as it does for the ground truth.
The oracle here counts the chunk files missing from the store, apart from segiou's reading.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import zarr
from numpy.testing import assert_array_equal

import segiou
from segiou import ConfusionMatrix
from segiou.errors import CheckpointError, DuplicateImageError
from segiou.parallel import evaluate_zarr
from segiou.report import render_text
from segiou.testing.synthetic import cityscapes_like

K = 19


def _stack(path: Path, data: np.ndarray, chunks: tuple[int, ...], names: list[str]) -> str:
    """A stack written by zarr with its defaults: chunks all equal to 0 are not written."""
    a = zarr.create_array(str(path), shape=data.shape, chunks=chunks, dtype=data.dtype,
                          attributes={"segiou": {"names": names}})  # fmt: skip
    a[:] = data
    return str(path)


def _group(path: Path, images: dict[str, np.ndarray], chunks: tuple[int, int]) -> str:
    g = zarr.open_group(str(path), mode="w")
    for name, img in images.items():
        g.create_array(name, shape=img.shape, chunks=chunks, dtype=img.dtype)[...] = img
    return str(path)


def _missing_files(folder: Path, n_chunks: tuple[int, ...]) -> int:
    """Chunk files (zarr v3 default keys ``c/i/j/...``) missing from an array's folder."""
    return sum(not folder.joinpath("c", *map(str, key)).exists()
               for key in itertools.product(*map(range, n_chunks)))  # fmt: skip


def _blank_chunks(pred: np.ndarray, chunks: tuple[int, int], rng: np.random.Generator) -> None:
    """Set about a third of the chunks of each image to 0 (never written), and no other."""
    n, h, w = pred.shape
    pred[pred == 0] = 1
    for i in range(n):
        for y in range(0, h, chunks[0]):
            for x in range(0, w, chunks[1]):
                if rng.random() < 0.35:
                    pred[i, y : y + chunks[0], x : x + chunks[1]] = 0


@pytest.mark.parametrize(
    ("gt_chunks", "pred_chunks", "per_task", "boundary"),
    [((8, 8), (8, 8), None, None), ((8, 8), (5, 7), None, None), ((4, 16), (6, 5), 1, None),
     ((3, 24), (8, 4), 1, "2px"), ((16, 24), (3, 3), 40, "1px")],
)  # fmt: skip
@pytest.mark.parametrize("stack_images", [1, 3])
def test_absent_prediction_chunks_of_a_stack_are_counted_once_per_image(
    tmp_path, gt_chunks, pred_chunks, per_task, boundary, stack_images
):
    # predictions chunked apart from the ground truth, in another image order, images split
    # into bands (pixels_per_task), halos of Boundary IoU reading chunks of the rows around
    rng = np.random.default_rng(sum(pred_chunks) + stack_images)
    gt, pred = cityscapes_like(4, 16, 24, seed=7)
    _blank_chunks(pred, pred_chunks, rng)
    names = ["a", "b", "c", "d"]
    order = [2, 0, 3, 1]  # pred image j holds gt image order[j]
    g = _stack(tmp_path / "gt.zarr", np.maximum(gt, 1), (1, *gt_chunks), names)
    p = _stack(tmp_path / "pred.zarr", pred[order], (stack_images, *pred_chunks),
               [names[i] for i in order])  # fmt: skip
    n_y, n_x = -(-16 // pred_chunks[0]), -(-24 // pred_chunks[1])
    want = {}
    for j, i in enumerate(order):
        lead = j // stack_images  # every image of a stack chunk has it absent
        missing = sum(not (tmp_path / "pred.zarr" / "c" / str(lead) / str(y) / str(x)).exists()
                      for y in range(n_y) for x in range(n_x))  # fmt: skip
        if missing:
            want[names[i]] = missing
    assert want  # (the test reads some)
    for scheduler in ("synchronous", "threads"):
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=scheduler,
                           pixels_per_task=per_task, boundary=boundary)  # fmt: skip
        assert cm.extras.absent_pred == want
        assert cm.extras.absent == {}
        ref = ConfusionMatrix(K, ignore_index=255, per_image=True)
        for i, name in enumerate(names):
            ref.update(np.maximum(gt[i], 1), pred[i], names=[name])
        assert_array_equal(cm.counts, ref.counts)  # read as 0, counted as class 0
    doc = segiou.evaluate(cm).to_dict()
    assert doc["absent_pred_chunks"] == {"total": sum(want.values()), "images": want}
    assert doc["absent_chunks"] == {"total": 0, "images": {}}
    assert segiou.Result.from_dict(json.loads(json.dumps(doc))).absent_pred_chunks == want
    text = render_text(json.loads(json.dumps(doc)))
    assert f"predictions: {sum(want.values())} chunk(s) absent from the store" in text


def test_absent_prediction_chunks_of_a_group_and_of_the_ground_truth_apart(tmp_path):
    gt, pred = cityscapes_like(2, 10, 12, seed=3)
    gt, pred = np.maximum(gt, 1), np.maximum(pred, 1)
    gt[0, :5, :6] = 0  # one ground-truth chunk of image u
    pred[1, 5:, :] = 0  # two prediction chunks of image v
    pred[0, :5, 6:] = 0  # one of image u
    g = _group(tmp_path / "gt.zarr", {"u": gt[0], "v": gt[1]}, (5, 6))
    p = _group(tmp_path / "pred.zarr", {"u": pred[0], "v": pred[1]}, (5, 6))
    assert _missing_files(tmp_path / "pred.zarr" / "v", (2, 2)) == 2
    assert _missing_files(tmp_path / "pred.zarr" / "u", (2, 2)) == 1
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous")
    assert cm.extras.absent == {"u": 1}
    assert cm.extras.absent_pred == {"u": 1, "v": 2}
    back = ConfusionMatrix.from_dict(json.loads(json.dumps(cm.to_dict())))
    assert back == cm
    assert back.extras.absent_pred == {"u": 1, "v": 2}
    # a prediction store written by segiou (every chunk recorded) is refused, as before
    with pytest.raises(segiou.errors.MissingChunkError):
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler="synchronous",
                      missing_pred_chunks="error")  # fmt: skip


def _state(name: str, absent_pred: int, *, key: str, gt_absent: int = 0) -> ConfusionMatrix:
    cm = ConfusionMatrix(K, ignore_index=255, per_image=True)
    g = np.zeros((1, 4, 4), np.uint8)
    tally = segiou._count.count_pairs(g, g, cm._lookup, per_image=True)
    cm.add_tally(tally, key=key, names=[name], n_images=1, absent=[gt_absent],
                 absent_pred=[absent_pred])  # fmt: skip
    return cm


def test_merges_count_a_shared_image_once_keeping_its_larger_count():
    a, b = _state("x", 2, key="A"), _state("y", 3, key="B")
    assert (a + b).extras.absent_pred == (b + a).extras.absent_pred == {"x": 2, "y": 3}
    assert (a + _state("x", 2, key="C")).extras.absent_pred == {"x": 2}  # the same image: once
    # the same values read from another store (written apart), or a state written before
    # prediction chunks were counted (none): the larger count, in either order
    for other in (_state("x", 4, key="D"), _state("x", 0, key="E")):
        want = {"x": max(2, other.extras.absent_pred.get("x", 0))}
        assert (a + other).extras.absent_pred == (other + a).extras.absent_pred == want
        assert ((a + other) + b).extras.absent_pred == (a + (other + b)).extras.absent_pred
    with pytest.raises(DuplicateImageError, match="absent chunks"):  # the ground truth's: refused
        _state("x", 2, key="F", gt_absent=1) + _state("x", 2, key="G", gt_absent=2)


@pytest.mark.parametrize("bad", [[-1], [2.5], ["3"], [True], [2**63], [np.int64(-5)]])
def test_absent_chunk_counts_that_are_not_counts_are_refused(bad):
    cm = ConfusionMatrix(K, ignore_index=255, per_image=True)
    g = np.zeros((1, 4, 4), np.uint8)
    tally = segiou._count.count_pairs(g, g, cm._lookup, per_image=True)
    for field in ("absent", "absent_pred"):
        with pytest.raises(segiou.errors.UsageError, match="chunk counts"):
            cm.add_tally(tally, key="k", names=["x"], n_images=1, **{field: bad})
    assert cm.n_images == 0  # nothing of it was counted


def test_merged_absent_chunks_past_int64_are_refused():
    # states bound them by their pixels (which merges bound by 2**63 - 1): a guard behind those
    from segiou._absent import ChunkCounts

    half = ChunkCounts(labels={"#0": 3 << 61})
    with pytest.raises(segiou.errors.CountOverflowError, match="absent chunks"):
        half.merged(ChunkCounts(labels={"#0": 3 << 61}), set())
    assert half.merged(ChunkCounts(labels={"#0": 1}), set()).labels == {"#0": (3 << 61) + 1}


@pytest.mark.parametrize("zarr_side", ["pred", "gt"])
def test_absent_chunks_of_a_zarr_side_beside_image_files_are_reported(tmp_path, zarr_side):
    # one side image files (decoded whole), the other a Zarr store: its missing chunk was read
    # as the fill value (16 pixels of class 0) and reported nowhere (found by review)
    from PIL import Image

    from segiou.io.png import find_pairs
    from segiou.io.zarr import open_masks

    g = np.ones((8, 8), np.uint8)
    p = g.copy()
    p[:4, :4] = 0
    for side, a in (("gt", g), ("pred", p)):
        (tmp_path / side).mkdir()
        Image.fromarray(a).save(tmp_path / side / "a.png")
    a = p if zarr_side == "pred" else np.where(g == 1, 0, 1).astype(np.uint8)  # gt: 0 is absent
    a[4:, 4:] = 1  # (one chunk written, at least)
    _stack(tmp_path / "z.zarr", a[None], (1, 4, 4), ["a"])
    gpng, ppng = find_pairs(tmp_path / "gt", tmp_path / "pred", layout="plain")
    z = open_masks(str(tmp_path / "z.zarr"))
    gt, pred = (gpng, z) if zarr_side == "pred" else (z, ppng)
    cm = evaluate_zarr(gt, pred, labels=2, scheduler="synchronous", on_unexpected="count")
    want = {"a": 3 if zarr_side == "gt" else 1}
    assert (cm.extras.absent_pred if zarr_side == "pred" else cm.extras.absent) == want
    assert (cm.extras.absent if zarr_side == "pred" else cm.extras.absent_pred) == {}


def test_absent_chunks_past_the_pixels_and_malformed_result_fields_are_refused():
    from segiou.errors import ResultDocumentError
    from segiou.report.quality import quality_sections

    d = _state("x", 2, key="A").to_dict()  # 16 pixels
    with pytest.raises(CheckpointError, match=r"absent_pred_chunks.*more than the state's 16"):
        ConfusionMatrix.from_dict(d | {"absent_pred_chunks": {"x": 17}})
    assert ConfusionMatrix.from_dict(d | {"absent_pred_chunks": {"x": 16}}).extras.absent_pred
    doc = segiou.evaluate(ConfusionMatrix.from_dict(d)).to_dict()
    for bad in ({"images": []}, {"total": 2}, {"total": -2, "images": {"x": -2}}, [1]):
        with pytest.raises(ResultDocumentError, match="absent_pred_chunks"):
            segiou.Result.from_dict(doc | {"absent_pred_chunks": bad})
        with pytest.raises(ResultDocumentError, match="absent_pred_chunks"):
            quality_sections(doc | {"absent_pred_chunks": bad})


def test_states_keep_them_and_refuse_them_altered():
    a = _state("x", 2, key="A", gt_absent=1)
    d = a.to_dict()
    assert d["version"] == 3
    assert d["absent_pred_chunks"] == {"x": 2}
    assert ConfusionMatrix.from_dict(d).extras.absent_pred == {"x": 2}
    old = dict(d)
    del old["absent_pred_chunks"]  # a state written before they were counted
    assert ConfusionMatrix.from_dict(old).extras.absent_pred == {}
    for bad, what in (({"x": -1}, "non-negative integer"), ({"x": True}, "non-negative integer"),
                      ({"z": 1}, "no per-image row"), ([1], "expected an object")):  # fmt: skip
        with pytest.raises(CheckpointError, match=rf"absent_pred_chunks.*{what}"):
            ConfusionMatrix.from_dict(d | {"absent_pred_chunks": bad})
    with pytest.raises(CheckpointError, match="more than 'absent_pred_chunks' shows"):
        ConfusionMatrix.from_dict(d | {"absent_pred_chunks_labels": {"x": 3}})
    only = _state("x", 2, key="A").to_dict()  # nothing else beyond the counts: still version 3
    assert only["version"] == 3
    assert ConfusionMatrix.from_dict(only).extras.absent_pred == {"x": 2}
    with pytest.raises(CheckpointError, match="version 3 but holds no"):
        ConfusionMatrix.from_dict(only | {"absent_pred_chunks": {}})  # one was cut


def test_absent_chunks_alone_keep_no_boundary_rows_per_image(tmp_path):
    # absent chunks are counted in every run of a store zarr wrote (its chunk tasks' quality
    # parts): without Boundary IoU they kept (3, K) zeros per unit and per image, 98 KB an
    # image at 4,096 classes (2,000 images of 8 x 8: 556 MB at the peak, against 186 MB)
    from support import peak_of

    k, n = 4096, 300
    rng = np.random.default_rng(5)
    gt = rng.integers(0, k, (n, 4, 4)).astype(np.uint16)
    pred = gt.copy()
    pred[::7] = 0  # every seventh prediction chunk is never written
    names = [f"i{j}" for j in range(n)]
    g = _stack(tmp_path / "gt.zarr", gt, (1, 4, 4), names)
    p = _stack(tmp_path / "pred.zarr", pred, (1, 4, 4), names)
    evaluate_zarr(g, p, labels=k, scheduler="synchronous")  # (first call: compiles, caches)
    cm, peak = peak_of(evaluate_zarr, g, p, labels=k, scheduler="synchronous")
    assert cm.extras.absent_pred == {names[j]: 1 for j in range(0, n, 7)}
    matrix = k * k * 8  # the accumulator's own counts (128 MiB)
    assert peak < matrix + (24 << 20), (peak - matrix) / 2**20


@pytest.mark.parametrize("bad", [[5], 3, {0: 1}, np.array(1), (c for c in [1])])
def test_absent_chunks_past_the_batch_or_not_one_per_image_are_refused_when_added(bad):
    # more absent chunks than pixels saved a state that did not load ("altered"); a bare count
    # or a generator was a TypeError, a dict's keys were taken (found by review)
    cm = ConfusionMatrix(3, per_image=True)
    g = np.zeros((1, 2, 2), np.uint8)
    tally = segiou._count.count_pairs(g, g, cm._lookup, per_image=True)
    with pytest.raises(segiou.errors.UsageError, match="absent prediction chunk"):
        cm.add_tally(tally, key="k", names=["x"], n_images=1, absent_pred=bad)
    cm.add_tally(tally, key="k", names=["x"], n_images=1, absent_pred=np.array([4]))
    assert ConfusionMatrix.from_dict(cm.to_dict()).extras.absent_pred == {"x": 4}
