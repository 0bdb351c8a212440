"""The command line and the nightly pipeline, run as a user would (in-process)."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from segiou import ConfusionMatrix
from segiou.cli import main
from segiou.compare import compare_reports
from segiou.demo import write_demo_store
from segiou.errors import CheckpointError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_store(tmp_path_factory.mktemp("demo") / "d.zarr", images=3, height=64,
                            width=128, seed=5)  # fmt: skip


def _eager(store: Path) -> ConfusionMatrix:
    import zarr

    g = zarr.open_array(store / "gt", mode="r")[:]
    p = zarr.open_array(store / "pred", mode="r")[:]
    return ConfusionMatrix("cityscapes", gt_ids="raw").update(g, p)


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
    eager = _eager(demo_store)
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


def _report(miou: float, road: float, conv: str = "segiou") -> dict[str, object]:
    return {"format": "segiou.result", "version": 1, "labels": "x", "convention": {"name": conv},
            "summary": {"miou": miou}, "classes": [{"name": "road", "iou": road}]}  # fmt: skip


def test_compare_flags_drops_beyond_tolerance_only() -> None:
    ok = compare_reports(_report(0.700, 0.90), _report(0.703, 0.91))
    assert not ok.regressed
    bad = compare_reports(_report(0.690, 0.85), _report(0.700, 0.90))
    assert bad.regressed
    assert len(bad.regressions) == 2
    assert "miou dropped by 0.0100" in bad.regressions[0]
    with pytest.raises(CheckpointError, match="convention 'mmseg' now but 'segiou'"):
        compare_reports(_report(0.7, 0.9, "mmseg"), _report(0.7, 0.9))


def _load_pipeline():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "nightly_eval", ROOT / "pipelines" / "nightly_eval.py"
    )
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["nightly_eval"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_nightly_pipeline_baseline_then_regression(demo_store: Path, tmp_path: Path) -> None:
    import zarr

    job = _load_pipeline()
    data = tmp_path / "data.zarr"
    shutil.copytree(demo_store, data)
    cfg = tmp_path / "job.toml"
    cfg.write_text(
        '[eval]\ngt = "data.zarr/gt"\npred = "data.zarr/pred"\nlabels = "cityscapes"\n'
        'gt_ids = "raw"\npreset = "cityscapes"\nscheduler = "synchronous"\n'
        '[report]\ndir = "reports"\n[baseline]\npath = "reports/baseline.json"\n'
        "max_drop = { miou = 0.005 }\nmax_class_drop = 0.02\n"
    )
    assert job.main([str(cfg), "--date", "d1", "--quiet", "--update-baseline"]) == 0
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 0
    for f in ("report.json", "report.txt", "per_image.csv", "state.json", "comparison.json"):
        assert (tmp_path / "reports" / "d2" / f).is_file()
    pred = zarr.open_array(data / "pred", mode="r+")
    worse = pred[:]
    worse[:, :, : worse.shape[2] // 2] = 26  # half of every image predicted "car"
    pred[:] = worse
    assert job.main([str(cfg), "--date", "d3", "--quiet"]) == 1
    comp = json.loads((tmp_path / "reports" / "d3" / "comparison.json").read_text())
    assert comp["regressed"]
    assert comp["summary"]["miou"]["delta"] < -0.005


def test_nightly_pipeline_bad_config_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _load_pipeline()
    cfg = tmp_path / "job.toml"
    cfg.write_text('[eval]\ngt = "x"\n')
    assert job.main([str(cfg)]) == 2
    assert "'gt' and 'pred' is required" in capsys.readouterr().err


def test_eval_of_ground_truth_written_by_plain_zarr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # zarr skips chunks equal to the fill value by default: refused, with the way out named
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
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "chunk (1, 0, 0) (images '000001') is missing" in err
    assert "write_empty_chunks" in err
    assert "--missing-gt-chunks fill" in err
    assert main([*argv, "--missing-gt-chunks", "fill"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["pixels"]["ignored"] == 16
    road = next(c for c in report["classes"] if c["name"] == "road")
    assert (road["tp"], road["fp"], road["fn"]) == (112, 0, 0)


def test_eval_reads_png_folders_directly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image

    from segiou.synthetic import cityscapes_like

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


def _nightly_config(tmp_path: Path, demo_store: Path, extra: str = "") -> Path:
    data = tmp_path / "data.zarr"
    if not data.exists():
        shutil.copytree(demo_store, data)
    cfg = tmp_path / "job.toml"
    cfg.write_text(
        '[eval]\ngt = "data.zarr/gt"\npred = "data.zarr/pred"\ngt_ids = "raw"\n'
        'scheduler = "synchronous"\n' + extra + '[report]\ndir = "reports"\n'
    )
    return cfg


def test_nightly_spec_file_is_found_next_to_the_config(
    demo_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from segiou.labels import load_spec

    job = _load_pipeline()
    (tmp_path / "my_spec.json").write_text(json.dumps(load_spec("cityscapes").to_dict()))
    cfg = _nightly_config(tmp_path, demo_store, 'labels = "my_spec.json"\n')
    monkeypatch.chdir("/")  # relative to the config file, not to where the job runs
    assert job.main([str(cfg), "--date", "d1", "--quiet"]) == 0
    assert (tmp_path / "reports" / "d1" / "report.json").is_file()


def test_nightly_bad_preset_exits_2_before_evaluating(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _load_pipeline()
    cfg = _nightly_config(tmp_path, demo_store, 'preset = "bogus"\n')
    assert job.main([str(cfg), "--date", "d1", "--quiet"]) == 2
    assert "--preset 'bogus' is not a preset" in capsys.readouterr().err
    assert not (tmp_path / "reports" / "d1").exists()  # no empty dated folder


def test_nightly_failure_that_is_no_regression_exits_3(
    demo_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    job = _load_pipeline()
    cfg = _nightly_config(tmp_path, demo_store)

    def boom(*args: object, **kwargs: object) -> None:
        msg = "worker lost"
        raise RuntimeError(msg)

    monkeypatch.setattr(job, "evaluate_paths", boom)
    assert job.main([str(cfg), "--date", "d1", "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "RuntimeError: worker lost" in err
    assert "the run failed" in err


@pytest.mark.parametrize("bad", [[1, 2], "report", None])
def test_compare_refuses_what_is_not_a_report(bad: object) -> None:
    with pytest.raises(CheckpointError, match="not a segiou result report"):
        compare_reports(bad, _report(0.7, 0.9))  # type: ignore[arg-type]


def _trainid_store(path: Path, *, ids: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A store of Cityscapes trainId masks whose root records the id space ``ids``."""
    import zarr

    from segiou.synthetic import cityscapes_like

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
    from segiou.synthetic import cityscapes_like

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


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (
            '[baseline]\npath = "b.json"\nmax_drop = { mIoU = 0.005 }\n',
            "unknown metric(s) ['mIoU']",
        ),
        ('[baseline]\npath = "b.json"\nmax_class_drops = 0.02\n', "unknown [baseline] key(s)"),
        ('[baseline]\npath = "b.json"\nmax_drop = 0.01\n', "max_drop must be a table"),
        ('[baseline]\npath = "b.json"\nmax_class_drop = "x"\n', "max_class_drop = 'x'"),
        ('[baseline]\npath = "b.json"\nmax_drop = { miou = nan }\n', "miou = nan must be a finite"),
        ("[baseline]\npath = 5\n", "[baseline] path = 5 must be a path"),
    ],
)
def test_nightly_refuses_a_misspelt_or_mistyped_baseline_before_evaluating(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str,
    needle: str,
) -> None:  # fmt: skip
    job = _load_pipeline()
    cfg = _nightly_config(tmp_path, demo_store)
    cfg.write_text(cfg.read_text().replace("[report]", extra + "[report]"))
    assert job.main([str(cfg), "--date", "d1", "--quiet"]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "reports" / "d1").exists()


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
    eager = _eager(demo_store).result("mmseg", beta=1)
    assert report["summary"]["mfbeta"] == pytest.approx(eager.summary["mfbeta"])
    assert "fbeta" in report["classes"][0]


def test_nightly_missing_baseline_is_refused_before_evaluating(
    demo_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    job = _load_pipeline()
    cfg = _nightly_config(tmp_path, demo_store)
    cfg.write_text(cfg.read_text().replace("[report]", '[baseline]\npath = "b.json"\n[report]'))

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError

    monkeypatch.setattr(job, "evaluate_paths", never)
    assert job.main([str(cfg), "--date", "d1", "--quiet"]) == 2
    assert "run once with --update-baseline" in capsys.readouterr().err


def test_nightly_beta_must_be_a_positive_number(demo_store: Path, tmp_path: Path) -> None:
    job = _load_pipeline()
    cfg = _nightly_config(tmp_path, demo_store, 'beta = "one"\n')
    assert job.main([str(cfg), "--date", "d1", "--quiet"]) == 2
    cfg = _nightly_config(tmp_path, demo_store, "beta = 1\n")
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 0
    report = json.loads((tmp_path / "reports" / "d2" / "report.json").read_text())
    assert "mfbeta" in report["summary"]


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


def test_compare_refuses_a_guarded_metric_no_report_has() -> None:
    with pytest.raises(CheckpointError, match="max_drop guards 'category_miou'"):
        compare_reports(_report(0.7, 0.9), _report(0.7, 0.9), max_drop={"category_miou": 0.01})
    bad = _report(0.7, 0.9)
    bad["summary"] = {"miou": None}
    comp = compare_reports(bad, _report(0.7, 0.9))
    assert comp.regressed
    assert "miou is undefined now" in comp.regressions[0]
