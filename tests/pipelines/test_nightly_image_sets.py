"""The nightly job tells a changed test set by the images its baseline state names.

Whole-report totals (images, pixels, ground-truth pixels per class) miss an image replaced by
another with as many pixels of each class, renamed images, and (under on_unexpected =
"count", whose left-out pixels give the class totals slack) more.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import load_pipeline

ROOT = Path(__file__).resolve().parents[2]
SHARED = "[gate]\nshared_images = true\nresamples = 100\n"
NOT_SHARED = "[gate]\nresamples = 100\n"


def _load_pipeline():  # type: ignore[no-untyped-def]
    return load_pipeline("nightly_eval_sets")


def _config(tmp_path: Path, gate: str, *, report: bool = True, extra: str = "") -> Path:
    cfg = tmp_path / "job.toml"
    cfg.write_text(
        '[eval]\ngt = "gt.zarr"\npred = "pred.zarr"\nlabels = 3\nignore = [255]\n'
        'scheduler = "synchronous"\nbootstrap = 0\n' + extra + '[report]\ndir = "reports"\n'
        + '[baseline]\n' + ('path = "reports/baseline.json"\n' if report else "")
        + 'state = "reports/baseline_state.json"\n' + gate
    )  # fmt: skip
    return cfg


def _data(n: int = 10, *, worse: range = range(0), prefix: str = "im",
          unexpected: bool = False) -> tuple[np.ndarray, np.ndarray, list[str]]:  # fmt: skip
    """Stripes of classes 0/1/2 (15/15/10 columns), 5% wrong; ``worse`` images lose class 1."""
    gt = np.zeros((n, 40, 40), np.uint8)
    gt[:, :, 15:30] = 1
    gt[:, :, 30:] = 2
    pred = gt.copy()
    wrong = np.random.default_rng(1).random((20, 40, 40))[:n] < 0.05
    pred[wrong] = (gt[wrong] + 1) % 3
    for i in worse:
        pred[i][gt[i] == 1] = 2
    if unexpected:
        pred[:, :5, :] = 77  # 200 pixels per image predicted as an unexpected value
    return gt, pred, [f"{prefix}{i}" for i in range(n)]


def _write(tmp_path: Path, gt: np.ndarray, pred: np.ndarray, names: list[str]) -> None:
    from segiou.io.zarr import create_stack

    n, h, w = gt.shape
    for name, a in (("gt", gt), ("pred", pred)):
        create_stack(tmp_path / f"{name}.zarr", n=n, height=h, width=w, names=names,
                     overwrite=True)[:] = a  # fmt: skip


def _read(tmp_path: Path, date: str, name: str) -> dict | None:  # type: ignore[type-arg]
    p = tmp_path / "reports" / date / name
    return json.loads(p.read_text()) if p.exists() else None


def _replaced(*, unexpected: bool = False) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """im9 replaced by new9, which the unchanged model gets mostly wrong."""
    gt, pred, names = _data(unexpected=unexpected)
    if unexpected:  # another class histogram: 5/20/15 columns instead of 15/15/10
        gt[9] = 2
        gt[9, :, :5] = 0
        gt[9, :, 5:25] = 1
        pred[9] = 0
        pred[9, :5] = 77
    else:  # the same pixels per class (15/15/10 columns), in another layout
        gt[9] = 2
        gt[9, :, :15] = 1
        gt[9, :, 15:30] = 0
        pred[9] = 0
    names[9] = "new9"
    return gt, pred, names


@pytest.mark.parametrize("unexpected", [False, True])
def test_an_image_replaced_without_changing_the_totals_is_a_changed_test_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unexpected: bool
) -> None:
    # the whole reports were compared (scope "all"), a drop of 0.0971 on the new image alone
    # exited 1 although the model is unchanged on the 9 shared images; with on_unexpected =
    # "count" the job said "350 more of its pixels are predicted as an unexpected value now"
    # while both runs predicted 200 such pixels per image (the ground truth had changed)
    job = _load_pipeline()
    extra = 'on_unexpected = "count"\n' if unexpected else ""
    cfg = _config(tmp_path, SHARED, extra=extra)
    _write(tmp_path, *_data(unexpected=unexpected))
    assert job.main([str(cfg), "--date", "d1", "--quiet", "--update-baseline"]) == 0
    _write(tmp_path, *_replaced(unexpected=unexpected))
    capsys.readouterr()
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 0
    captured = capsys.readouterr()
    change = "image names: 1 only in the baseline ('im9'), 1 only now ('new9'), 9 shared"
    assert f"nightly: the test set changed since the baseline report ({change}): the fixed " \
           "tolerances compare the 9 images both runs share" in captured.out  # fmt: skip
    assert "(+0.0000) on the 9 shared images" in captured.out
    assert "REGRESSION" not in captured.err
    assert "unexpected value" not in captured.err
    comparison = _read(tmp_path, "d2", "comparison.json")
    assert comparison is not None
    assert not comparison["regressed"]
    assert comparison["scope"]["images"] == "shared"
    assert comparison["scope"]["test_set_change"] == change
    assert comparison["scope"]["baseline_only_names"] == ["im9"]
    assert comparison["scope"]["current_only_names"] == ["new9"]
    gate = _read(tmp_path, "d2", "gate.json")
    assert gate is not None
    assert gate["images"]["shared"] == 9
    # a regression on the shared images is still caught
    gt, pred, names = _replaced(unexpected=unexpected)
    pred[:5][gt[:5] == 1] = 2
    _write(tmp_path, gt, pred, names)
    assert job.main([str(cfg), "--date", "d3", "--quiet"]) == 1
    assert "\n  on the 9 shared images: miou dropped by " in capsys.readouterr().err


def test_a_replaced_image_without_shared_images_is_refused_with_the_jobs_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _load_pipeline()
    cfg = _config(tmp_path, NOT_SHARED)
    _write(tmp_path, *_data())
    assert job.main([str(cfg), "--date", "d1", "--quiet", "--update-baseline"]) == 0
    _write(tmp_path, *_replaced())
    capsys.readouterr()
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert ("was scored against different ground truth (image names: 1 only in the baseline "
            "('im9'), 1 only now ('new9'), 9 shared)") in err  # fmt: skip
    assert "[gate] shared_images = true" in err
    assert "--shared-images" not in err
    assert "shared_images=True" not in err
    for name in ("comparison.json", "gate.json", "gate.md"):
        assert not (tmp_path / "reports" / "d2" / name).exists()


@pytest.mark.parametrize("report", [True, False])
def test_a_partial_rename_without_shared_images_names_the_jobs_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], report: bool
) -> None:
    # through the job, the gate's refusal said "pass --shared-images (shared_images=True)":
    # options of the CLI and of Python, not of the job
    job = _load_pipeline()
    cfg = _config(tmp_path, NOT_SHARED, report=report)
    _write(tmp_path, *_data())
    assert job.main([str(cfg), "--date", "d1", "--quiet", "--update-baseline"]) == 0
    gt, pred, names = _data()
    names[:3] = ["a0", "a1", "a2"]
    _write(tmp_path, gt, pred, names)
    capsys.readouterr()
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "image names: 3 only in the baseline ('im0', 'im1', 'im2'), 3 only now" in err
    assert "[gate] shared_images = true" in err
    assert "--shared-images" not in err
    assert "shared_images=True" not in err
    assert not (tmp_path / "reports" / "d2" / "comparison.json").exists()
    assert not (tmp_path / "reports" / "d2" / "gate.json").exists()


@pytest.mark.parametrize(("gate", "report"), [(SHARED, True), (NOT_SHARED, True), (SHARED, False)])
def test_renamed_images_are_refused_before_any_comparison_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gate: str, report: bool
) -> None:
    # every image renamed (same pixels), class 1 lost on 5 images: comparison.json said
    # "regressed" (the whole reports, scope "all"), then the gate found no shared name and the
    # job exited 2 without printing the regression. Renamed images cannot be told from a new
    # test set with the same totals: the job refuses (exit 2) and writes no comparison
    job = _load_pipeline()
    cfg = _config(tmp_path, gate, report=report)
    _write(tmp_path, *_data())
    assert job.main([str(cfg), "--date", "d1", "--quiet", "--update-baseline"]) == 0
    _write(tmp_path, *_data(worse=range(5), prefix="frame_"))
    capsys.readouterr()
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 2
    captured = capsys.readouterr()
    assert ("nightly: error: the runs share no image (image names: 10 only in the baseline "
            "('im0', 'im1', 'im2', ...), 10 only now ('frame_0', 'frame_1', 'frame_2', ...), "
            "0 shared)") in captured.err  # fmt: skip
    assert "If the images were only renamed, restore their names" in captured.err
    assert "--update-baseline" in captured.err
    assert "REGRESSION" not in captured.err
    assert "mIoU" not in captured.out
    for name in ("comparison.json", "gate.json", "gate.md"):
        assert not (tmp_path / "reports" / "d2" / name).exists()
    assert (tmp_path / "reports" / "d2" / "report.json").is_file()  # the run's own report


@pytest.mark.parametrize("gate", [SHARED, NOT_SHARED])
def test_ground_truth_moved_between_images_of_the_same_names_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gate: str
) -> None:
    # one column of class 2 became class 1 in im0, one of class 1 became class 2 in im1: the
    # totals match, so the whole reports were compared and comparison.json written, then the
    # gate refused the pairs (exit 2) beside it
    job = _load_pipeline()
    cfg = _config(tmp_path, gate)
    _write(tmp_path, *_data())
    assert job.main([str(cfg), "--date", "d1", "--quiet", "--update-baseline"]) == 0
    gt, pred, names = _data()
    gt[0, :, 30] = 1
    gt[1, :, 29] = 2
    _write(tmp_path, gt, pred, names)
    capsys.readouterr()
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 2
    err = capsys.readouterr().err
    if gate == SHARED:  # the shared images' comparison refuses them
        assert "2 shared image(s) have different ground truth in the two runs, e.g. 'im0'" in err
    else:
        assert ("scored against different ground truth (ground truth of 2 image(s) of the same "
                "name, e.g. 'im0': 640 pixels of '1' now, 600 in the baseline)") in err  # fmt: skip
        assert "comparing the shared images does not help" in err
    assert not (tmp_path / "reports" / "d2" / "comparison.json").exists()
    assert not (tmp_path / "reports" / "d2" / "gate.json").exists()


def test_the_same_images_are_still_compared_whole(tmp_path: Path) -> None:
    job = _load_pipeline()
    cfg = _config(tmp_path, SHARED)
    _write(tmp_path, *_data())
    assert job.main([str(cfg), "--date", "d1", "--quiet", "--update-baseline"]) == 0
    _write(tmp_path, *_data(worse=range(5)))
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 1
    comparison = _read(tmp_path, "d2", "comparison.json")
    assert comparison is not None
    assert comparison["scope"] == {"images": "all"}
    assert comparison["regressed"]


def test_a_gate_refused_after_a_fixed_tolerance_regression_leaves_no_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the fixed tolerances wrote comparison.json ("regressed": true) before the gate refused
    # its input (exit 2): a file claimed a regression the job never reported. Both files are
    # now written once both comparisons are made
    from segiou import ConfusionMatrix

    job = _load_pipeline()
    cfg = _config(tmp_path, SHARED)
    gt, pred, names = _data()
    _write(tmp_path, gt, pred, names)
    assert job.main([str(cfg), "--date", "d1", "--quiet", "--update-baseline"]) == 0
    flat = ConfusionMatrix(3, ignore_index=[255]).update(gt, pred)  # no per-image counts
    flat.save(tmp_path / "reports" / "baseline_state.json")
    _write(tmp_path, *_data(worse=range(5)))
    capsys.readouterr()
    assert job.main([str(cfg), "--date", "d2", "--quiet"]) == 2
    assert "keeps no per-image counts" in capsys.readouterr().err
    for name in ("comparison.json", "gate.json", "gate.md"):
        assert not (tmp_path / "reports" / "d2" / name).exists()
