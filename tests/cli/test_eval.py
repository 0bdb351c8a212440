"""``segiou eval`` and ``segiou demo``, run as a user would (in-process)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from support import eager_demo_counts, reopened_prediction_stores

from segiou import ConfusionMatrix, evaluate
from segiou.cli import main


def test_demo_command_writes_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "d"), "--images", "2", "--size", "64x128", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "per class (cityscapes" in out
    assert "error analysis" in out
    report = json.loads((tmp_path / "d" / "report.json").read_text())
    assert report["format"] == "segiou.result"
    assert report["images"] == 2
    with (tmp_path / "d" / "per_image.csv").open() as f:
        rows = list(csv.reader(f))
    assert rows[0][:2] == ["image", "miou"]
    assert len(rows) == 3


def test_eval_matches_eager_and_writes_outputs(demo_store: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    js, pi, st = tmp_path / "r.json", tmp_path / "p.csv", tmp_path / "s.json"
    code = main(["eval", "--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred",
                 "--labels", "cityscapes", "--preset", "mmseg", "--scheduler", "synchronous",
                 "--json", str(js), "--per-image", str(pi), "--state", str(st), "--quiet"])  # fmt: skip
    assert code == 0
    report = json.loads(js.read_text())
    eager = eager_demo_counts(demo_store)
    assert report["convention"]["name"] == "mmseg"
    assert [c["tp"] for c in report["classes"]] == np.diagonal(eager.counts).tolist()
    assert report["pixels"]["void"] == int(eager.void.sum()) > 0
    state = ConfusionMatrix.load(st)
    np.testing.assert_array_equal(state.counts, eager.counts)
    assert "worst images" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--pred", "/nonexistent/pred"], "does not exist"),
        (["--labels", "pascal_voc"], "unexpected value"),
        (["--scheduler", "fastest"], "--scheduler 'fastest'"),
        (["--labels", "nope.json"], "neither a built-in spec"),
        (["--preset", "bogus"], "--preset 'bogus' is not a preset; choose one of"),
        (["--json", "/nonexistent/dir/r.json"], "folder '/nonexistent/dir' does not exist"),
        (["--per-image", "/"], "--per-image '/' is a folder"),
        (["--state", "/nonexistent/dir/s.json"], "--state '/nonexistent/dir/s.json': folder"),
        (["--pred", "/tmp"], "--gt is a Zarr store but --pred '/tmp' is not a Zarr store"),
        (["--labels", "²"], "neither a built-in spec"),
        (["--task-seconds", "0"], "--task-seconds 0.0: give a positive number"),
        (["--ns-per-px", "nan"], "--ns-per-px nan: give a positive number"),
    ],
)
def test_eval_bad_input_exits_2_with_a_message(demo_store: Path, argv: list[str], needle: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    base = {"--gt": f"{demo_store}/gt", "--pred": f"{demo_store}/pred", "--labels": "cityscapes"}
    for i in range(0, len(argv), 2):
        base[argv[i]] = argv[i + 1]
    flat = [x for kv in base.items() for x in kv]
    assert (
        main(["eval", *flat, "--quiet", "--scheduler", base.get("--scheduler", "synchronous")]) == 2
    )
    assert needle in capsys.readouterr().err


def test_eval_of_ground_truth_written_by_plain_zarr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # zarr skips chunks equal to the fill value by default: the Zarr rule reads them as the
    # fill value (the default), and the output says how many were; --missing-gt-chunks error
    # refuses them, naming the way out
    import zarr

    gt = np.full((2, 8, 8), 7, np.uint8)  # Cityscapes labelId 7 = road
    gt[1, :4, :4] = 0  # labelId 0 ("unlabeled", ignored): this chunk equals the fill value
    pred = np.full((2, 8, 8), 7, np.uint8)
    for name, data in (("gt", gt), ("pred", pred)):
        zarr.create_array(str(tmp_path / f"{name}.zarr"), shape=data.shape, chunks=(1, 4, 4),
                          dtype=np.uint8, fill_value=0)[:] = data  # fmt: skip
    argv = ["eval", "--gt", str(tmp_path / "gt.zarr"), "--pred", str(tmp_path / "pred.zarr"),
            "--labels", "cityscapes", "--gt-ids", "raw", "--quiet", "--scheduler", "synchronous",
            "--json", str(tmp_path / "r.json")]  # fmt: skip
    assert main([*argv, "--missing-gt-chunks", "error"]) == 2
    err = capsys.readouterr().err
    assert "chunk (1, 0, 0) (images '000001') is missing" in err
    assert "write_empty_chunks" in err
    assert "--missing-gt-chunks fill" in err
    for how in ([], ["--missing-gt-chunks", "fill"], ["--missing-gt-chunks", "auto"]):
        assert main([*argv, *how]) == 0
        out = capsys.readouterr().out
        assert "1 chunk(s) absent from the store were read as the fill value" in out
        assert "'000001' (1)" in out
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["absent_chunks"] == {"total": 1, "images": {"000001": 1}}
    assert report["pixels"]["ignored"] == 16
    road = next(c for c in report["classes"] if c["name"] == "road")
    assert (road["tp"], road["fp"], road["fn"]) == (112, 0, 0)


def test_eval_of_predictions_written_through_a_reopened_array(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # refused by default, naming write_empty_chunks=False and --missing-pred-chunks fill;
    # counted as numpy counts it with --missing-pred-chunks fill (nothing let it past before)
    gt, pred = reopened_prediction_stores(tmp_path)
    argv = ["eval", "--gt", str(tmp_path / "gt.zarr"), "--pred", str(tmp_path / "pred.zarr"),
            "--labels", "3", "--quiet", "--scheduler", "synchronous", "--bootstrap", "0",
            "--json", str(tmp_path / "r.json")]  # fmt: skip
    for how in ([], ["--missing-pred-chunks", "auto"], ["--missing-pred-chunks", "error"]):
        assert main([*argv, *how]) == 2
        err = capsys.readouterr().err
        assert "is missing from the prediction store" in err
        assert "write_empty_chunks=False" in err
        assert "--missing-pred-chunks fill" in err
        assert not (tmp_path / "r.json").exists()
    assert main([*argv, "--missing-pred-chunks", "fill"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    cm = np.zeros((3, 3), np.int64)  # the oracle: numpy on the arrays that were written
    np.add.at(cm, (gt.reshape(-1), pred.reshape(-1)), 1)
    assert [c["tp"] for c in report["classes"]] == np.diagonal(cm).tolist()
    assert [c["fp"] for c in report["classes"]] == (cm.sum(0) - np.diagonal(cm)).tolist()
    assert [c["fn"] for c in report["classes"]] == (cm.sum(1) - np.diagonal(cm)).tolist()
    assert report["absent_chunks"] == {"total": 0, "images": {}}  # (ground-truth chunks only)


def test_eval_missing_pred_chunks_error_refuses_in_a_store_zarr_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import zarr

    gt = np.full((2, 8, 8), 1, np.uint8)
    pred = gt.copy()
    pred[1, :4, :4] = 0  # a chunk equal to the fill value: zarr does not write it
    for name, data in (("gt", gt), ("pred", pred)):
        zarr.create_array(str(tmp_path / f"{name}.zarr"), shape=data.shape, chunks=(1, 4, 4),
                          dtype=np.uint8, fill_value=0)[:] = data  # fmt: skip
    argv = ["eval", "--gt", str(tmp_path / "gt.zarr"), "--pred", str(tmp_path / "pred.zarr"),
            "--labels", "3", "--quiet", "--scheduler", "synchronous", "--bootstrap", "0",
            "--json", str(tmp_path / "r.json")]  # fmt: skip
    assert main([*argv, "--missing-pred-chunks", "error"]) == 2
    err = capsys.readouterr().err
    assert "chunk (1, 0, 0) (images '000001') is missing from the prediction store" in err
    for how in ([], ["--missing-pred-chunks", "fill"]):  # the Zarr rule: predictions of 0
        assert main([*argv, *how]) == 0
        report = json.loads((tmp_path / "r.json").read_text())
        assert (report["classes"][1]["tp"], report["classes"][1]["fn"]) == (112, 16)
    with pytest.raises(SystemExit) as info:  # argparse: an unknown value, exit 2
        main([*argv, "--missing-pred-chunks", "sometimes"])
    assert info.value.code == 2
    assert "--missing-pred-chunks: invalid choice: 'sometimes'" in capsys.readouterr().err


def test_eval_reads_png_folders_directly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image

    from segiou.testing.synthetic import cityscapes_like

    gt, pred = cityscapes_like(3, 32, 48, seed=8, label_ids=True)
    for side, data in (("gt", gt), ("pred", pred)):
        (tmp_path / side).mkdir()
        for i, img in enumerate(data):
            Image.fromarray(img).save(tmp_path / side / f"img{i}.png")
    js = tmp_path / "r.json"
    argv = ["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "pred"),
            "--labels", "cityscapes", "--scheduler", "threads", "--json", str(js),
            "--quiet"]  # fmt: skip
    assert main(argv) == 0
    eager = ConfusionMatrix("cityscapes", gt_ids="raw").update(gt, pred)
    report = json.loads(js.read_text())
    assert report["images"] == 3
    assert [c["tp"] for c in report["classes"]] == np.diagonal(eager.counts).tolist()
    assert [c["fp"] for c in report["classes"]] == (
        eager.counts.sum(axis=0) - np.diagonal(eager.counts)
    ).tolist()
    assert report["pixels"]["void"] == int(eager.void.sum())
    assert report["pixels"]["ignored"] == eager.n_ignored


def _trainid_store(path: Path, *, ids: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A store of Cityscapes trainId masks whose root records the id space ``ids``."""
    import zarr

    from segiou.testing.synthetic import cityscapes_like

    gt, pred = cityscapes_like(2, 16, 32, seed=seed)  # trainIds: class ids of the spec
    root = zarr.open_group(str(path), mode="w")
    for name, data in (("gt", gt), ("pred", pred)):
        root.create_array(name, shape=data.shape, dtype=data.dtype, chunks=(1, 16, 32),
                          fill_value=0, config={"write_empty_chunks": True})[:] = data  # fmt: skip
    root.attrs["segiou"] = {"ingest": {}, "labels": "cityscapes", "ids": ids}
    return gt, pred


def test_eval_uses_the_id_space_recorded_by_ingest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gt, pred = _trainid_store(tmp_path / "s.zarr", ids="class", seed=3)
    js = tmp_path / "r.json"
    argv = ["eval", "--gt", str(tmp_path / "s.zarr" / "gt"), "--pred",
            str(tmp_path / "s.zarr" / "pred"), "--labels", "cityscapes", "--scheduler",
            "synchronous", "--json", str(js), "--quiet"]  # fmt: skip
    assert main(argv) == 0  # without the record, trainIds would be read as raw labelIds
    eager = ConfusionMatrix("cityscapes", ignore_index=255).update(gt, pred)
    report = json.loads(js.read_text())
    assert [c["tp"] for c in report["classes"]] == np.diagonal(eager.counts).tolist()
    assert report["pixels"]["ignored"] == eager.n_ignored
    js.unlink()
    assert main([*argv, "--gt-ids", "raw"]) == 0  # an explicit option still wins:
    raw = json.loads(js.read_text())  # trainIds read as labelIds give other numbers
    assert [c["tp"] for c in raw["classes"]] != np.diagonal(eager.counts).tolist()


def test_demo_refuses_no_images(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "d"), "--images", "0", "--quiet"]) == 2
    assert "at least one image" in capsys.readouterr().err


def test_explicit_gt_ids_sets_the_predictions_default_over_a_recorded_one(
    tmp_path: Path,
) -> None:
    gt, pred = _trainid_store(tmp_path / "s.zarr", ids="raw", seed=4)
    js = tmp_path / "r.json"
    base = ["eval", "--gt", str(tmp_path / "s.zarr" / "gt"), "--pred",
            str(tmp_path / "s.zarr" / "pred"), "--scheduler", "synchronous", "--json", str(js),
            "--quiet"]  # fmt: skip
    assert main([*base, "--labels", "cityscapes", "--gt-ids", "class"]) == 0
    report = json.loads(js.read_text())
    assert report["counting"]["pred_ids"] == "class"  # not the store's "raw"
    eager = ConfusionMatrix("cityscapes", ignore_index=255).update(gt, pred)
    assert [c["tp"] for c in report["classes"]] == np.diagonal(eager.counts).tolist()
    # a recorded "raw" means nothing to a spec without raw ids: its class ids are used
    assert main([*base, "--labels", "19", "--ignore", "255"]) == 0
    assert json.loads(js.read_text())["counting"]["gt_ids"] == "class"


def test_eval_warns_when_assumed_raw_ids_ignore_most_pixels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from segiou.io.zarr import create_stack
    from segiou.testing.synthetic import cityscapes_like

    gt, pred = cityscapes_like(2, 32, 64, seed=2)  # trainIds, stored without an id record
    for name, data in (("gt", gt), ("pred", pred)):
        create_stack(tmp_path / f"{name}.zarr", n=2, height=32, width=64)[:] = data
    argv = ["eval", "--gt", str(tmp_path / "gt.zarr"), "--pred", str(tmp_path / "pred.zarr"),
            "--labels", "cityscapes", "--scheduler", "synchronous", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "of ground-truth pixels were ignored" in err
    assert "pass --gt-ids class" in err
    assert main([*argv, "--gt-ids", "class"]) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize("top", ["0", "-1", "x"])
def test_eval_top_must_be_positive(demo_store: Path, top: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["eval", "--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred", "--top", top])
    assert info.value.code == 2


def test_eval_beta_reports_f_beta(demo_store: Path, tmp_path: Path) -> None:
    js = tmp_path / "r.json"
    assert main(["eval", "--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred",
                 "--preset", "mmseg", "--beta", "1", "--scheduler", "synchronous",
                 "--json", str(js), "--quiet"]) == 0  # fmt: skip
    report = json.loads(js.read_text())
    eager = evaluate(eager_demo_counts(demo_store), preset="mmseg", beta=1)
    assert report["summary"]["mfbeta"] == pytest.approx(eager.summary["mfbeta"])
    assert "fbeta" in report["classes"][0]


@pytest.mark.parametrize("beta", ["0", "-1", "nan", "inf", "x"])
def test_eval_beta_must_be_positive_and_finite(demo_store: Path, beta: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["eval", "--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred", "--beta", beta])
    assert info.value.code == 2


def test_eval_writes_its_files_even_when_stdout_closes_early(
    demo_store: Path, tmp_path: Path
) -> None:
    import subprocess

    js = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "segiou.cli", "eval", "--gt", f"{demo_store}/gt", "--pred",
           f"{demo_store}/pred", "--quiet", "--scheduler", "synchronous", "--json", str(js)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # like `| head -0`: the first write to stdout fails with EPIPE
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert b"Traceback" not in err
    assert json.loads(js.read_text())["format"] == "segiou.result"


def test_eval_passes_the_task_sizes_to_the_engine(demo_store: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import segiou.parallel

    seen: dict[str, object] = {}
    real = segiou.parallel.count_stores

    def spy(*args: object, **kwargs: object) -> object:
        seen.update(kwargs)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(segiou.parallel, "count_stores", spy)
    code = main(["eval", "--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred",
                 "--labels", "cityscapes", "--scheduler", "synchronous", "--task-seconds", "0.5",
                 "--ns-per-px", "2.5", "--quiet"])  # fmt: skip
    assert code == 0
    assert (seen["task_seconds"], seen["ns_per_px"]) == (0.5, 2.5)


def test_eval_csvs_follow_and_state_the_preset(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    # one image, class 2 only predicted: the JSON said mIoU 0.75 with class 2 unscored under
    # detectron2, the per-image CSV 0.5 with class 2 at 0.0, and neither CSV named the preset
    from segiou.io.zarr import create_stack

    g = create_stack(tmp_path / "gt.zarr", n=1, height=1, width=4, names=["img"])
    g[0] = np.array([[0, 0, 1, 1]], np.uint8)
    p = create_stack(tmp_path / "pred.zarr", n=1, height=1, width=4, names=["img"])
    p[0] = np.array([[0, 2, 1, 1]], np.uint8)
    js, classes, images = tmp_path / "r.json", tmp_path / "classes.csv", tmp_path / "img.csv"
    assert main(["eval", "--gt", str(tmp_path / "gt.zarr"), "--pred", str(tmp_path / "pred.zarr"),
                 "--labels", "3", "--ignore", "255", "--preset", "detectron2", "--bootstrap", "20",
                 "--scheduler", "synchronous", "--json", str(js), "--report", str(classes),
                 "--per-image", str(images), "--quiet"]) == 0  # fmt: skip
    doc = json.loads(js.read_text())
    with images.open(newline="") as f:
        (row,) = csv.DictReader(f)
    assert float(row["miou"]) == doc["summary"]["miou"] == 0.75
    assert row["iou:2"] == ""
    assert doc["classes"][2]["iou"] is None
    assert row["preset"] == "detectron2"
    with classes.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert {(r["preset"], r["level"]) for r in rows} == {("detectron2", "0.95")}
    assert "error analysis: 2 weakest classes (preset 'detectron2')" in capsys.readouterr().out
