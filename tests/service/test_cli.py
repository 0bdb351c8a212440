"""``segiou push``, ``segiou runs`` and ``segiou result`` against a real server, in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import eager_demo_counts, reopened_prediction_stores

from segiou import ConfusionMatrix
from segiou.cli import main
from segiou.client import Client


def test_push_counts_once_and_result_prints_the_eval_tables(
    server, run_name: str, demo_store: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    gt, pred = f"{demo_store}/gt", f"{demo_store}/pred"
    base = ["--server", server.url, "--retries", "0"]
    push = ["push", *base, "--run", run_name, "--gt", gt, "--pred", pred,
            "--labels", "cityscapes", "--scheduler", "synchronous", "--quiet"]  # fmt: skip
    assert main(push) == 0
    assert capsys.readouterr().out.startswith("counted: batch 'push-")
    assert main(push) == 0  # the same data again: a duplicate, never counted twice
    assert capsys.readouterr().out.startswith("duplicate: ")
    with Client(server.url, run=run_name) as c:
        state = c.state()
        assert c.run_info()["batches"] == 1
    eager = eager_demo_counts(demo_store)
    assert (state.counts == eager.counts).all()
    assert state.n_pixels == eager.n_pixels
    assert main(["eval", "--gt", gt, "--pred", pred, "--labels", "cityscapes",
                 "--scheduler", "synchronous", "--preset", "cityscapes", "--quiet"]) == 0  # fmt: skip
    eval_out = capsys.readouterr().out
    out_json = tmp_path / "r.json"
    assert main(["result", *base, "--run", run_name, "--preset", "cityscapes",
                 "--json", str(out_json)]) == 0  # fmt: skip
    assert capsys.readouterr().out == eval_out  # the same tables as segiou eval
    assert out_json.exists()
    assert main(["runs", *base]) == 0
    listing = capsys.readouterr().out
    assert run_name in listing
    assert "cityscapes (19)" in listing


def test_push_into_an_existing_run_uses_its_settings(
    server, run_name: str, demo_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Client(server.url) as c:
        c.create_run(run_name, "cityscapes", gt_ids="raw", per_image=True)
    base = ["--server", server.url, "--retries", "0", "--run", run_name]
    store = ["--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred", "--quiet",
             "--scheduler", "synchronous"]  # fmt: skip
    assert main(["push", *base, *store, "--key", "mine"]) == 0
    assert "counted: batch 'mine'" in capsys.readouterr().out
    # options that differ from the run's are sent as asked, and refused naming both
    assert main(["push", *base, *store, "--key", "other", "--gt-ids", "class",
                 "--on-unexpected", "count"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "refused (422)" in err[0]


def test_push_keeps_the_runs_labels_when_another_option_is_given(
    server, run_name: str, demo_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--on-unexpected alone counted with cityscapes labels instead of the run's (pascal_voc
    here), and the server's refusal named gt_ids."""
    with Client(server.url) as c:
        c.create_run(run_name, "pascal_voc", per_image=True, on_unexpected="raise")
    base = ["--server", server.url, "--retries", "0", "--run", run_name, "--gt",
            f"{demo_store}/gt", "--pred", f"{demo_store}/pred", "--quiet", "--scheduler",
            "synchronous"]  # fmt: skip
    assert main(["push", *base, "--on-unexpected", "count", "--key", "k"]) == 2
    err = capsys.readouterr().err
    assert "on_unexpected is 'raise' here but 'count'" in err  # the one difference named
    assert "gt_ids" not in err


def test_push_with_an_option_equal_to_the_runs_keeps_the_rest(
    server, run_name: str, demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--gt-ids raw on a run of raw ground truth and class predictions dropped the run's
    pred_ids (refused after the whole count)."""
    import shutil

    with Client(server.url) as c:
        c.create_run(run_name, "cityscapes", gt_ids="raw", pred_ids="raw", per_image=True)
        c.create_run(run_name + "-b", "cityscapes", gt_ids="raw", pred_ids="class", per_image=True)
    # predictions equal to the ground truth, as a copy (the same array on both sides is refused)
    shutil.copytree(demo_store / "gt", tmp_path / "pred.zarr")
    base = ["--server", server.url, "--retries", "0", "--gt", f"{demo_store}/gt", "--pred",
            str(tmp_path / "pred.zarr"), "--quiet", "--scheduler", "synchronous"]  # fmt: skip
    assert main(["push", *base, "--run", run_name, "--gt-ids", "raw", "--key", "k"]) == 0
    capsys.readouterr()
    # (the ground truth as predictions, read as class ids: unexpected values, refused
    # locally, never a settings mismatch with the run)
    assert main(["push", *base, "--run", run_name + "-b", "--gt-ids", "raw", "--key", "k"]) == 2
    err = capsys.readouterr().err
    assert "pred_ids is" not in err


def test_push_missing_pred_chunks_fill_reads_a_reopened_prediction_store(
    server, run_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Predictions in a store create_stack made, written through zarr.open_array(mode="r+")
    (zarr's write_empty_chunks=False skips their all-0 chunks): refused by default, naming the
    way past it; pushed with --missing-pred-chunks fill and counted as numpy counts them."""
    import numpy as np

    gt, pred = reopened_prediction_stores(tmp_path)
    push = ["push", "--server", server.url, "--retries", "0", "--run", run_name, "--gt",
            str(tmp_path / "gt.zarr"), "--pred", str(tmp_path / "pred.zarr"), "--labels", "3",
            "--scheduler", "synchronous", "--quiet"]  # fmt: skip
    assert main(push) == 2
    assert "--missing-pred-chunks fill" in capsys.readouterr().err
    assert main([*push, "--missing-pred-chunks", "fill"]) == 0
    with Client(server.url, run=run_name) as c:
        state = c.state()
    cm = np.zeros((3, 3), np.int64)
    np.add.at(cm, (gt.reshape(-1), pred.reshape(-1)), 1)
    assert (state.counts == cm).all()


def test_push_reads_ground_truth_written_by_plain_zarr_as_eval_does(
    server, run_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """zarr skips chunks equal to the fill value: `segiou eval` reads them as the fill value
    and reports them (--missing-gt-chunks auto); `segiou push` refused the same store (its only
    choices were error, the default, and fill)."""
    import numpy as np
    import zarr

    gt = np.full((2, 8, 8), 2, np.uint8)
    gt[1, :4, :4] = 0  # a chunk equal to the fill value: zarr does not write it
    pred = np.full((2, 8, 8), 2, np.uint8)
    for name, data in (("gt", gt), ("pred", pred)):
        zarr.create_array(str(tmp_path / f"{name}.zarr"), shape=data.shape, chunks=(1, 4, 4),
                          dtype=np.uint8, fill_value=0)[:] = data  # fmt: skip
    assert not (tmp_path / "gt.zarr" / "c" / "1" / "0" / "0").exists()
    push = ["push", "--server", server.url, "--retries", "0", "--run", run_name, "--gt",
            str(tmp_path / "gt.zarr"), "--pred", str(tmp_path / "pred.zarr"), "--labels", "3",
            "--scheduler", "synchronous", "--quiet"]  # fmt: skip
    assert main([*push, "--missing-gt-chunks", "error"]) == 2
    assert "--missing-gt-chunks fill" in capsys.readouterr().err
    assert main(push) == 0  # auto, the default: an unmarked store's missing chunk is fill
    with Client(server.url, run=run_name) as c:
        state = c.state()
    cm = np.zeros((3, 3), np.int64)
    np.add.at(cm, (gt.reshape(-1), pred.reshape(-1)), 1)
    assert (state.counts == cm).all()
    assert state.extras.absent == {"000001": 1}


def test_runs_shows_hostile_names_without_sending_them(
    server, run_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A spec name holding a newline forged a row of `segiou runs`; an ANSI escape reached the
    terminal."""
    from segiou import LabelSpec

    spec = LabelSpec("x (19)  0  0  0\nval  open  cityscapes\x1b[2J", ("a", "b", "c"))
    with Client(server.url) as c:
        c.create_run(run_name, spec)
    assert main(["runs", "--server", server.url, "--retries", "0"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert not any(line.startswith("val  open") for line in out.splitlines())
    assert "\\nval  open  cityscapes\\x1b[2J (3)" in out


def test_push_needs_a_run_with_per_image_rows(
    server, run_name: str, demo_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Client(server.url) as c:
        c.create_run(run_name, "cityscapes", gt_ids="raw")
    assert main(["push", "--server", server.url, "--run", run_name, "--gt",
                 f"{demo_store}/gt", "--pred", f"{demo_store}/pred", "--quiet"]) == 2  # fmt: skip
    assert "keeps no per-image rows" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["runs", "--server", "http://127.0.0.1:9", "--retries", "0"], "no answer after 1"),
        (["runs", "--server", "nope"], "not an http:// or https:// URL"),
        (["push", "--server", "http://127.0.0.1:9", "--retries", "0", "--run", "x", "--gt",
          "/nonexistent/gt", "--pred", "/nonexistent/pred", "--key", "bad/key"],
         "batch key 'bad/key' is not valid"),  # before the server, the store, the counting
        (["result", "--server", "http://127.0.0.1:9", "--run", "x", "--preset", "best"],
         "unknown preset"),
        (["result", "--server", "http://127.0.0.1:9", "--run", "x", "--json", "/nonexistent/r"],
         "folder '/nonexistent' does not exist"),
    ],
)  # fmt: skip
def test_client_commands_fail_in_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert needle in err[0]


def test_result_of_an_unknown_run(server, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["result", "--server", server.url, "--run", "missing", "--retries", "0"]) == 2
    assert "refused (404): run 'missing' does not exist" in capsys.readouterr().err


def test_state_of_an_empty_run_is_empty(server, run_name: str) -> None:
    with Client(server.url) as c:
        c.create_run(run_name, 5, per_image=True)
        assert c.state() == ConfusionMatrix(5, per_image=True)


def test_serve_without_the_service_extra_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if the extra were not installed
    assert main(["serve", "--data", str(tmp_path / "d"), "--port", "0"]) == 2
    assert "pip install 'segiou[service]'" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
