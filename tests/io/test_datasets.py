"""Datasets as their users lay them out: Cityscapes, Pascal VOC and ADE20K folders, as shipped.

``segiou eval`` is pointed at the folders the datasets ship, with no layout option: it
recognises the layout, says so, picks the built-in spec, and its counts equal the oracle's. The
Cityscapes paths also come from ``CITYSCAPES_DATASET`` / ``CITYSCAPES_RESULTS`` as in
cityscapesScripts, and a pairing that fails names the layout options that would work.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import reference
import zarr
from PIL import Image

from segiou.cli import main
from segiou.io.datasets import cityscapes_paths, detect_dataset, pairing_hints
from segiou.labels import builtin_spec
from segiou.testing.synthetic import cityscapes_like


def _counts(report: dict, k: int) -> np.ndarray:
    out = np.zeros((k,), dtype=np.int64)
    for c in report["classes"]:
        out[c["id"]] = c["tp"]
    return out


def _check(report: dict, ref: reference.Counts) -> None:
    k = ref.counts.shape[0]
    tp = np.diagonal(ref.counts)
    fp = ref.counts.sum(axis=0) - tp
    fn = ref.counts.sum(axis=1) - tp + ref.void
    got = {f: np.array([c[f] for c in report["classes"]]) for f in ("tp", "fp", "fn", "void")}
    np.testing.assert_array_equal(got["tp"], tp)
    np.testing.assert_array_equal(got["fp"], fp)
    np.testing.assert_array_equal(got["fn"], fn)
    np.testing.assert_array_equal(got["void"], ref.void)
    assert report["pixels"]["ignored"] == ref.n_ignored
    assert len(report["classes"]) == k


# -- Cityscapes ---------------------------------------------------------------------------------
def _cityscapes(root: Path, n: int = 3) -> tuple[np.ndarray, np.ndarray]:
    gt, pred = cityscapes_like(n, 24, 48, seed=4, label_ids=True)
    for i in range(n):
        city = ("berlin", "bonn")[i % 2]
        name = f"{city}_{i:06d}_{i + 3:06d}"
        d = root / "gtFine" / "val" / city
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(gt[i]).save(d / f"{name}_gtFine_labelIds.png")
        Image.fromarray(np.zeros((24, 48, 3), np.uint8)).save(d / f"{name}_gtFine_color.png")
        (root / "results" / "sub").mkdir(parents=True, exist_ok=True)
        Image.fromarray(pred[i]).save(root / "results" / "sub" / f"{name}_leftImg8bit.png")
    return gt, pred


def _ref_cityscapes(gt: np.ndarray, pred: np.ndarray) -> reference.Counts:
    mapping = {r.id: r.cls for r in builtin_spec("cityscapes").raw}
    total = reference.Counts(np.zeros((19, 19), np.int64), np.zeros(19, np.int64))
    for g, p in zip(gt, pred, strict=True):
        total = reference.add(total, reference.confusion(g, p, 19, gt_map=mapping))
    return total


def test_cityscapes_folders_need_no_layout_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gt, pred = _cityscapes(tmp_path)
    out = tmp_path / "r.json"
    argv = ["eval", "--gt", str(tmp_path / "gtFine" / "val"), "--pred", str(tmp_path / "results"),
            "--quiet", "--scheduler", "synchronous", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "dataset: Cityscapes layout" in text
    assert "_gtFine_labelIds.png" in text
    report = json.loads(out.read_text())
    assert report["labels"] == "cityscapes"
    assert report["images"] == 3
    _check(report, _ref_cityscapes(gt, pred))


def test_cityscapes_paths_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    gt, pred = _cityscapes(tmp_path)
    monkeypatch.setenv("CITYSCAPES_DATASET", str(tmp_path))
    monkeypatch.delenv("CITYSCAPES_RESULTS", raising=False)
    assert cityscapes_paths() == (str(tmp_path / "gtFine" / "val"), str(tmp_path / "results"))
    out = tmp_path / "r.json"
    assert main(["eval", "--quiet", "--scheduler", "synchronous", "--json", str(out)]) == 0
    _check(json.loads(out.read_text()), _ref_cityscapes(gt, pred))
    # CITYSCAPES_RESULTS wins over $CITYSCAPES_DATASET/results, as in cityscapesScripts
    other = tmp_path / "elsewhere"
    (other / "x").mkdir(parents=True)
    for p in (tmp_path / "results" / "sub").iterdir():
        arr = np.asarray(Image.open(p)).copy()
        arr[:] = 7  # all road
        Image.fromarray(arr).save(other / "x" / p.name)
    monkeypatch.setenv("CITYSCAPES_RESULTS", str(other))
    assert main(["eval", "--quiet", "--scheduler", "synchronous", "--json", str(out)]) == 0
    _check(json.loads(out.read_text()), _ref_cityscapes(gt, np.full_like(pred, 7)))
    capsys.readouterr()
    monkeypatch.delenv("CITYSCAPES_DATASET")
    monkeypatch.delenv("CITYSCAPES_RESULTS")
    assert main(["eval", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--gt, --pred" in err
    assert "CITYSCAPES_DATASET" in err


def test_pairing_failure_names_the_layouts_that_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _cityscapes(tmp_path)
    argv = ["eval", "--gt", str(tmp_path / "gtFine" / "val"), "--pred", str(tmp_path / "results"),
            "--quiet", "--scheduler", "synchronous", "--layout", "plain",
            "--gt-pattern", "*_labelIds.png", "--pred-pattern", "*.png",
            "--labels", "cityscapes"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--layout cityscapes (pairs 3 of 3 ground-truth images)" in err
    assert "--regex" not in err  # (an option of ingest, not of eval)
    # plain folders whose predictions sit in another folder structure: no layout of eval
    # pairs them, so no option is offered (eval has no --regex)
    gt_dir, pred_dir = tmp_path / "g", tmp_path / "p"
    for d in (gt_dir / "a", pred_dir / "z" / "y"):
        d.mkdir(parents=True)
    for i in range(2):
        Image.fromarray(np.zeros((4, 4), np.uint8)).save(gt_dir / "a" / f"im{i}.png")
        Image.fromarray(np.zeros((4, 4), np.uint8)).save(pred_dir / "z" / "y" / f"im{i}.png")
    assert main(["eval", "--gt", str(gt_dir), "--pred", str(pred_dir), "--labels", "3",
                 "--quiet", "--scheduler", "synchronous"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "2 prediction(s)" in err
    assert "layout options" not in err
    assert "--regex" not in err


def test_pairing_failure_offers_only_what_pairs_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # every image pairs, but there is an extra prediction: no layout fixes that, and none is
    # offered (an option eval does not accept even less)
    gt_dir, pred_dir = tmp_path / "gt", tmp_path / "pred"
    gt_dir.mkdir()
    pred_dir.mkdir()
    for f in ("gt/a", "gt/b", "pred/a", "pred/b", "pred/c"):
        Image.fromarray(np.ones((4, 4), np.uint8)).save(tmp_path / f"{f}.png")
    argv = ["eval", "--gt", str(gt_dir), "--pred", str(pred_dir), "--labels", "pascal_voc",
            "--quiet", "--bootstrap", "0", "--scheduler", "synchronous"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "1 prediction(s)" in err
    assert "['c']" in err
    assert "layout options" not in err
    assert "--regex" not in err
    (pred_dir / "c.png").unlink()  # the fix the error names
    assert main(argv) == 0
    # pairing_hints: a layout is offered only when it pairs more ground-truth images than the
    # layout used, or every file on both sides
    _cityscapes(tmp_path / "cs")  # 3 ground-truth images, 3 predictions
    gt, pred = tmp_path / "cs" / "gtFine" / "val", tmp_path / "cs" / "results"
    every = "--layout cityscapes (pairs 3 of 3 ground-truth images)"
    assert pairing_hints(gt, pred, "plain", 0) == [every]
    assert pairing_hints(gt, pred, "plain", 2) == [every]
    assert pairing_hints(gt, pred, "plain", 3) == [every]  # no more, but every file
    assert pairing_hints(gt, pred, "cityscapes", 0) == []  # (the layout used)
    Image.fromarray(np.zeros((24, 48), np.uint8)).save(pred / "sub" / "bonn_000009_000012.png")
    assert pairing_hints(gt, pred, "plain", 2) == [every]
    assert pairing_hints(gt, pred, "plain", 3) == []  # 3 of 4 predictions: an extra one


# -- Pascal VOC ---------------------------------------------------------------------------------
def _voc(root: Path, n: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """VOC2012/SegmentationClass: palette PNGs, objects outlined with 255."""
    rng = np.random.default_rng(1)
    palette = [c for col in builtin_spec("pascal_voc").colors or () for c in col]
    palette += [0] * (768 - len(palette))
    palette[255 * 3 : 256 * 3] = [224, 224, 192]  # the devkit's border colour
    gts, preds = [], []
    (root / "VOC2012" / "SegmentationClass").mkdir(parents=True)
    (root / "preds").mkdir()
    for i in range(n):
        gt = np.zeros((30, 40), np.uint8)
        for _ in range(3):
            c = int(rng.integers(1, 21))
            y, x = int(rng.integers(2, 20)), int(rng.integers(2, 30))
            gt[y : y + 8, x : x + 9] = 255  # the 255 border of an object...
            gt[y + 1 : y + 7, x + 1 : x + 8] = c  # ...around its inside
        pred = np.where(rng.random(gt.shape) < 0.1, rng.integers(0, 21, gt.shape), gt)
        pred = np.where(pred == 255, 0, pred).astype(np.uint8)
        name = f"2007_{i:06d}"
        img = Image.fromarray(gt, mode="P")
        img.putpalette(palette)
        img.save(root / "VOC2012" / "SegmentationClass" / f"{name}.png")
        p = Image.fromarray(pred, mode="P")
        p.putpalette(palette)
        p.save(root / "preds" / f"{name}.png")
        gts.append(gt)
        preds.append(pred)
    return np.stack(gts), np.stack(preds)


def test_pascal_voc_straight_from_segmentation_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gt, pred = _voc(tmp_path)
    gt_dir = tmp_path / "VOC2012" / "SegmentationClass"
    assert detect_dataset(gt_dir).labels == "pascal_voc"
    out = tmp_path / "r.json"
    assert main(["eval", "--gt", str(gt_dir), "--pred", str(tmp_path / "preds"), "--quiet",
                 "--scheduler", "synchronous", "--json", str(out)]) == 0  # fmt: skip
    assert "dataset: Pascal VOC layout" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["labels"] == "pascal_voc"
    ref = reference.Counts(np.zeros((21, 21), np.int64), np.zeros(21, np.int64))
    for g, p in zip(gt, pred, strict=True):
        ref = reference.add(ref, reference.confusion(g, p, 21, ignore=[255]))
    assert ref.n_ignored > 0  # the borders are ignored
    _check(report, ref)


# -- ADE20K -------------------------------------------------------------------------------------
def test_ade20k_straight_from_annotations_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(2)
    gt_dir = tmp_path / "ADEChallengeData2016" / "annotations" / "validation"
    gt_dir.mkdir(parents=True)
    (tmp_path / "preds").mkdir()
    gts, preds = [], []
    for i in range(3):
        cells = rng.integers(0, 151, (5, 6))  # 0 = "other", 1..150 the classes
        gt = np.repeat(np.repeat(cells, 6, 0), 6, 1).astype(np.uint8)
        pred = np.where(rng.random(gt.shape) < 0.2, rng.integers(1, 151, gt.shape), gt)
        pred = pred.astype(np.uint8)
        Image.fromarray(gt).save(gt_dir / f"ADE_val_{i + 1:08d}.png")
        Image.fromarray(pred).save(tmp_path / "preds" / f"ADE_val_{i + 1:08d}.png")
        gts.append(gt)
        preds.append(pred)
    assert detect_dataset(gt_dir).labels == "ade20k"
    out = tmp_path / "r.json"
    assert main(["eval", "--gt", str(gt_dir), "--pred", str(tmp_path / "preds"), "--quiet",
                 "--scheduler", "synchronous", "--json", str(out)]) == 0  # fmt: skip
    assert "dataset: ADE20K layout" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["labels"] == "ade20k"
    assert report["counting"]["gt_ids"] == "raw"  # as shipped: 0 = other (ignored), i -> i - 1
    mapping = {r.id: r.cls for r in builtin_spec("ade20k").raw}
    ref = reference.Counts(np.zeros((150, 150), np.int64), np.zeros(150, np.int64))
    for g, p in zip(gts, preds, strict=True):
        ref = reference.add(ref, reference.confusion(g, p, 150, gt_map=mapping))
    assert ref.n_ignored > 0
    _check(report, ref)


def test_unrecognised_folders_keep_the_old_defaults(tmp_path: Path) -> None:
    (tmp_path / "masks").mkdir()
    Image.fromarray(np.zeros((3, 3), np.uint8)).save(tmp_path / "masks" / "a.png")
    found = detect_dataset(tmp_path / "masks")
    assert (found.layout, found.labels, found.dataset) == ("plain", None, None)


# -- ingest picks the spec as eval does ---------------------------------------------------------
def test_ingest_of_a_voc_folder_decodes_rgb_predictions_with_its_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --labels: ingest recognises Pascal VOC and decodes RGB predictions through its
    colours, as eval does (it refused them: no spec)."""
    _, pred = _voc(tmp_path)
    colors = np.array(builtin_spec("pascal_voc").colors, np.uint8)
    for i, p in enumerate(pred):  # the predictions as colour images
        Image.fromarray(colors[p], "RGB").save(tmp_path / "preds" / f"2007_{i:06d}.png")
    gt_dir = tmp_path / "VOC2012" / "SegmentationClass"
    out = tmp_path / "s.zarr"
    assert main(["ingest", "--gt", str(gt_dir), "--pred", str(tmp_path / "preds"),
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert (
        "dataset: Pascal VOC layout (a folder named SegmentationClass); labels pascal_voc" in text
    )
    np.testing.assert_array_equal(np.asarray(zarr.open_array(str(out), path="pred")), pred)
    assert json.loads((out / "zarr.json").read_text())["attributes"]["segiou"]["labels"] == (
        "pascal_voc")  # fmt: skip


def test_ingest_of_a_cityscapes_folder_decodes_rgb_results_to_label_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gt, pred = _cityscapes(tmp_path)
    raw = builtin_spec("cityscapes").raw
    lut = np.zeros((256, 3), np.uint8)
    for r in raw:
        lut[r.id] = r.color
    smallest = {}  # a colour decodes to the smallest raw id of that colour (documented)
    for r in sorted(raw, key=lambda r: r.id):
        smallest.setdefault(r.color, r.id)
    expect = np.vectorize(lambda v: smallest[tuple(int(c) for c in lut[v])])(pred)
    for f in (tmp_path / "results" / "sub").iterdir():
        i = int(f.name.split("_")[1])
        Image.fromarray(lut[pred[i]], "RGB").save(f)
    out = tmp_path / "c.zarr"
    assert main(["ingest", "--gt", str(tmp_path / "gtFine" / "val"), "--pred",
                 str(tmp_path / "results"), "--out", str(out), "--quiet"]) == 0  # fmt: skip
    assert "dataset: Cityscapes layout" in capsys.readouterr().out
    root = zarr.open_group(str(out), mode="r")
    assert root.attrs["segiou"]["ids"] == "raw"
    names = root["pred"].attrs["segiou"]["names"]
    order = [int(n.split("_")[1]) for n in names]
    np.testing.assert_array_equal(np.asarray(root["pred"]), expect[order])
    np.testing.assert_array_equal(np.asarray(root["gt"]), gt[order])


def test_ingest_of_an_unrecognised_folder_still_needs_labels_for_colours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
    Image.fromarray(np.zeros((4, 5), np.uint8)).save(tmp_path / "gt" / "a.png")
    Image.fromarray(np.zeros((4, 5, 3), np.uint8), "RGB").save(tmp_path / "pred" / "a.png")
    assert main(["ingest", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "pred"),
                 "--out", str(tmp_path / "s.zarr"), "--quiet"]) == 2  # fmt: skip
    assert "no label spec was given" in capsys.readouterr().err
