"""The nightly pipeline, run as a scheduler would (in-process, through its main())."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from support import load_pipeline, reopened_prediction_stores

ROOT = Path(__file__).resolve().parents[2]


def _load_pipeline():  # type: ignore[no-untyped-def]
    return load_pipeline("nightly_eval")


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
    for f in ("report.json", "report.html", "report.txt", "per_image.csv", "state.json",
              "comparison.json"):  # fmt: skip
        assert (tmp_path / "reports" / "d2" / f).is_file()
    doc = json.loads((tmp_path / "reports" / "d2" / "report.json").read_text())
    html = (tmp_path / "reports" / "d2" / "report.html").read_text(encoding="utf-8")
    assert f'id="miou" data-metric="miou" data-value="{doc["summary"]["miou"]!r}"' in html
    assert 'id="worst-table"' in html  # made with the state: per-image parts included
    assert "top confused pairs" in (tmp_path / "reports" / "d2" / "report.txt").read_text()
    pred = zarr.open_array(data / "pred", mode="r+")
    worse = pred[:]
    worse[:, :, : worse.shape[2] // 2] = 26  # half of every image predicted "car"
    pred[:] = worse
    assert job.main([str(cfg), "--date", "d3", "--quiet"]) == 1
    comp = json.loads((tmp_path / "reports" / "d3" / "comparison.json").read_text())
    assert comp["regressed"]
    assert comp["summary"]["miou"]["delta"] < -0.005


def test_nightly_on_other_ground_truth_exits_2_not_compared(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the test set changed under the job (a relabelled image): its scores moved without the
    # model changing, so the fixed tolerances are not applied; a new baseline is made on purpose
    import zarr

    job = _load_pipeline()
    cfg = _nightly_config(tmp_path, demo_store, 'labels = "cityscapes"\n')
    cfg.write_text(cfg.read_text() + '[baseline]\npath = "reports/baseline.json"\n')
    assert job.main([str(cfg), "--date", "d1", "--quiet", "--update-baseline"]) == 0
    gt = zarr.open_array(tmp_path / "data.zarr" / "gt", mode="r+")
    g = gt[:]
    g[0, :8, :8] = 7  # "road" (raw id 7) where the demo has other labels
    gt[:] = g
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 2
    assert "scored against different ground truth (ground-truth pixels of class" in (
        capsys.readouterr().err
    )
    (tmp_path / "reports" / "baseline.json").unlink()
    assert job.main([str(cfg), "--date", "d3", "--quiet", "--update-baseline"]) == 0
    assert job.main([str(cfg), "--date", "d4", "--quiet"]) == 0


def test_nightly_rerun_leaves_no_stale_comparison_and_a_full_disk_exits_3(
    demo_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A same-date rerun that made no comparison (the baseline being made anew) left the
    earlier run's comparison.json ("regressed": true) beside its own report; "no space left"
    while writing exited 2 (bad input), not 3 (the run failed)."""
    import errno

    import segiou.outputs

    job = _load_pipeline()
    cfg = _nightly_config(tmp_path, demo_store, 'labels = "cityscapes"\n')
    cfg.write_text(cfg.read_text() + '[baseline]\npath = "reports/baseline.json"\n')
    assert job.main([str(cfg), "--date", "d0", "--quiet", "--update-baseline"]) == 0
    assert job.main([str(cfg), "--date", "d1", "--quiet"]) == 0
    day = tmp_path / "reports" / "d1"
    assert (day / "comparison.json").is_file()
    (tmp_path / "reports" / "baseline.json").unlink()
    assert job.main([str(cfg), "--date", "d1", "--quiet", "--update-baseline"]) == 0
    assert not (day / "comparison.json").exists()
    capsys.readouterr()

    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segiou.outputs.os, "write", full)
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 3
    assert "No space left on device" in capsys.readouterr().err


def test_nightly_pipeline_bad_config_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _load_pipeline()
    cfg = tmp_path / "job.toml"
    cfg.write_text('[eval]\ngt = "x"\n')
    assert job.main([str(cfg)]) == 2
    assert "'gt' and 'pred' is required" in capsys.readouterr().err


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


def test_nightly_missing_pred_chunks_reads_a_reopened_prediction_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Predictions in a store create_stack made, written by another job through
    zarr.open_array(mode="r+") (write_empty_chunks=False: its all-0 chunks skipped), were
    refused with no way past it; [eval] missing_pred_chunks = "fill" counts them."""
    import numpy as np

    job = _load_pipeline()
    gt, pred = reopened_prediction_stores(tmp_path)
    cfg = tmp_path / "job.toml"

    def config(extra: str) -> Path:
        cfg.write_text('[eval]\ngt = "gt.zarr"\npred = "pred.zarr"\nlabels = 3\nbootstrap = 0\n'
                       'scheduler = "synchronous"\n' + extra + '[report]\ndir = "reports"\n')  # fmt: skip
        return cfg

    for extra in ("", 'missing_pred_chunks = "auto"\n', 'missing_pred_chunks = "error"\n'):
        assert job.main([str(config(extra)), "--date", "d1", "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "write_empty_chunks=False" in err
        assert "missing_pred_chunks='fill'" in err
    for key in ("missing_pred_chunks", "missing_gt_chunks"):
        assert job.main([str(config(f'{key} = "sometimes"\n')), "--date", "d1",
                         "--quiet"]) == 2  # fmt: skip
        assert (f"{key}='sometimes' is unknown; expected 'auto', 'error' or 'fill'"
                in capsys.readouterr().err)  # fmt: skip
    assert not (tmp_path / "reports" / "d1").exists()
    assert job.main([str(config('missing_pred_chunks = "fill"\n')), "--date", "d1",
                     "--quiet"]) == 0  # fmt: skip
    doc = json.loads((tmp_path / "reports" / "d1" / "report.json").read_text())
    cm = np.zeros((3, 3), np.int64)  # the oracle: numpy on the arrays that were written
    np.add.at(cm, (gt.reshape(-1), pred.reshape(-1)), 1)
    assert [c["tp"] for c in doc["classes"]] == np.diagonal(cm).tolist()
    assert [c["fp"] for c in doc["classes"]] == (cm.sum(0) - np.diagonal(cm)).tolist()
    assert [c["fn"] for c in doc["classes"]] == (cm.sum(1) - np.diagonal(cm)).tolist()


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

    monkeypatch.setattr(job, "count_stores", boom)
    assert job.main([str(cfg), "--date", "d1", "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "RuntimeError: worker lost" in err
    assert "the run failed" in err


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
        # each of these let a regressed run exit 0 (or failed only after the evaluation)
        ('[basline]\npath = "b.json"\n', "unknown table(s) ['basline']"),
        (
            '[baseline]\nstate = "s.json"\nmax_drop = { miou = 0.001 }\n',
            "guard the baseline report",
        ),
        ('[baseline]\npath = "b.json"\n[gate]\n', "[gate] needs the baseline's state"),
        (
            '[baseline]\npath = "b.json"\nstate = "s.json"\n[gate]\nshared_images = "false"\n',
            "shared_images = 'false' must be true or false",
        ),
        (
            '[baseline]\npath = "b.json"\nstate = "s.json"\n[gate]\nalpha = 0\n',
            "alpha = 0 must be a number in (0, 1)",
        ),
        (
            '[baseline]\npath = "b.json"\nstate = "s.json"\n[gate]\ncorrection = "bonf"\n',
            "correction = 'bonf' must be",
        ),
        (  # (a TypeError: exit 3)
            '[baseline]\npath = "b.json"\nstate = "s.json"\n[gate]\nalpha = "0.05"\n',
            "alpha = '0.05' must be a number",
        ),
        (
            '[baseline]\npath = "b.json"\nstate = "s.json"\n[gate]\nmax_class_drop = [0.1]\n',
            "max_class_drop = [0.1] must be",
        ),
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


@pytest.mark.parametrize(("extra", "needle"), [
    ("labels = true\n", "labels = True must be a spec name"),
    ("bootstrap = -1\n", "bootstrap = -1 must be a whole number >= 0"),
    ('bootstrap = "many"\n', "bootstrap = 'many' must be"),
    ("split_every = 1\n", "split_every = 1 must be a whole number >= 2"),
    ('preset = ["segiou"]\n', "preset = ['segiou'] must be a string"),
    ("missing_pred = 3\n", "missing_pred = 3 must be a string"),
    ("missing_pred_chunks = true\n", "missing_pred_chunks = True must be a string"),
    ("layout = 3\n", "layout = 3 must be a string"),
    ('[baseline]\npath = "b.json"\nmax_drop = { mfbeta = 0.01 }\n',
     "max_drop guards mfbeta, which needs [eval] beta"),
    ('labels = 5\n[baseline]\npath = "b.json"\nmax_drop = { category_miou = 0.01 }\n',
     "guards category_miou, but the label spec 5 has no categories"),
    ('[baseline]\npath = "b.json"\nstate = "s.json"\n[gate]\nresamples = 0\n',
     "resamples = 0 must be a whole number >= 1"),
])  # fmt: skip
def test_nightly_refuses_mistyped_eval_values_before_evaluating(
    demo_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], extra: str, needle: str,
) -> None:  # fmt: skip
    """labels = true crashed with a traceback (exit 3); others were refused after the count."""
    job = _load_pipeline()

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError

    monkeypatch.setattr(job, "count_stores", never)
    cfg = _nightly_config(tmp_path, demo_store, extra)
    assert job.main([str(cfg), "--date", "d1", "--quiet"]) == 2
    assert needle in capsys.readouterr().err


def test_nightly_baseline_that_is_this_runs_own_output_or_damaged_is_refused(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A baseline in the dated folder a same-date rerun writes was compared with the run itself
    and replaced by it (a regression passed); a damaged or hand-edited one is a bad input."""
    job = _load_pipeline()
    cfg = _nightly_config(tmp_path, demo_store, "bootstrap = 0\n")
    assert job.main([str(cfg), "--date", "d9", "--quiet"]) == 0
    good = (tmp_path / "reports" / "d9" / "report.json").read_text()
    text = cfg.read_text()
    cfg.write_text(text + '[baseline]\npath = "reports/d9/report.json"\n')
    assert job.main([str(cfg), "--date", "d9", "--quiet"]) == 2
    assert "is one of this run's own outputs" in capsys.readouterr().err
    assert (tmp_path / "reports" / "d9" / "report.json").read_text() == good
    base = tmp_path / "b.json"
    cfg.write_text(text + '[baseline]\npath = "b.json"\n')
    for damaged in (good[: len(good) // 2], good.replace('"miou": ', '"miou": NaN, "x": ', 1),
                    good.replace('"miou": ', '"miou": "high", "x": ', 1)):  # fmt: skip
        base.write_text(damaged)
        assert job.main([str(cfg), "--date", "d10", "--quiet"]) == 2
        assert "is not a segiou result report" in capsys.readouterr().err
    # a version-1 report (no beta, counting, intervals: written before they existed) compares
    old = json.loads(good)
    old["version"] = 1
    for key in ("beta", "counting", "intervals", "slices", "boundary", "instances",
                "absent_chunks", "batches", "images"):  # fmt: skip
        old.pop(key, None)
    base.write_text(json.dumps(old))
    assert job.main([str(cfg), "--date", "d11", "--quiet"]) == 0


def test_nightly_missing_baseline_is_refused_before_evaluating(
    demo_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    job = _load_pipeline()
    cfg = _nightly_config(tmp_path, demo_store)
    cfg.write_text(cfg.read_text().replace("[report]", '[baseline]\npath = "b.json"\n[report]'))

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError

    monkeypatch.setattr(job, "count_stores", never)
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


def test_nightly_without_the_report_extra_exits_2_before_evaluating(
    demo_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip

    job = _load_pipeline()
    cfg = _nightly_config(tmp_path, demo_store)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))  # fmt: skip

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError

    monkeypatch.setattr(job, "count_stores", never)
    assert job.main([str(cfg), "--date", "d1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "the nightly report.html needs matplotlib" in err
    assert "pip install 'segiou[report]'" in err
    assert not (tmp_path / "reports" / "d1").exists()
