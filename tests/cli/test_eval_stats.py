"""``segiou eval`` with intervals, slices and error maps, run as a user would (in-process)."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest

from segiou.cli import main


def _eval(demo_store: Path, *extra: str) -> int:
    return main(["eval", "--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred",
                 "--labels", "cityscapes", "--scheduler", "synchronous", "--quiet", *extra])  # fmt: skip


def test_intervals_and_slices_in_the_tables_and_the_json(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = tmp_path / "meta.csv"
    meta.write_text("image,city\ndemo_00000,aachen\ndemo_00001,bonn\nnot_there,bonn\n")
    js = tmp_path / "r.json"
    code = _eval(demo_store, "--bootstrap", "50", "--bootstrap-seed", "3", "--slices", str(meta),
                 "--min-slice-images", "2", "--json", str(js))  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    # (the wording of segiou.report's renderer, shared by the text, Markdown and HTML reports)
    assert "95% CI: percentile bootstrap, resampling images, 50 resamples, seed 3" in out
    assert "slices by city (small: fewer than 2 images)" in out
    assert "images without a metadata row (1): demo_00002" in out
    assert "metadata rows without an image (1): not_there" in out
    doc = json.loads(js.read_text())
    assert doc["version"] == 3
    assert doc["intervals"]["resamples"] == 50
    assert doc["slices"]["columns"]["city"]["aachen"]["images"] == 1
    assert doc["slices"]["unmatched"]["images_without_metadata"] == ["demo_00002"]


def test_bootstrap_zero_turns_intervals_off(demo_store: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    js = tmp_path / "r.json"
    assert _eval(demo_store, "--bootstrap", "0", "--json", str(js)) == 0
    assert "CI" not in capsys.readouterr().out
    assert json.loads(js.read_text())["intervals"] is None


def test_an_output_inside_the_error_maps_is_refused(demo_store: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """The maps of the last run are replaced whole by this one: a report kept inside them would
    be deleted with them."""
    from segiou.parallel import count_stores

    maps = tmp_path / "maps.zarr"
    count_stores(demo_store / "gt", demo_store / "pred", labels="cityscapes", gt_ids="raw",
                 error_maps=maps, scheduler="synchronous")  # fmt: skip
    assert _eval(demo_store, "--error-maps", str(maps), "--json", str(maps / "r.json")) == 2
    assert "or the error maps (replaced whole" in capsys.readouterr().err
    assert not (maps / "r.json").exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--bootstrap-groups", "city"], "give the metadata with --slices"),
        (["--bootstrap", "-1"], "is not an integer >= 0"),
        (["--slices", "/nonexistent/meta.csv"], "cannot be read"),
        (["--slices", "META", "--bootstrap-groups", "town"], "'town' is not a column"),
        (
            ["--slices", "META", "--bootstrap-groups", "city", "--bootstrap", "0"],
            "--bootstrap 0 turns them off",
        ),
        (["--error-maps", "EXISTING"], "never replaced"),
        (["--error-maps", "/nonexistent/dir/m.zarr"], "does not exist"),
    ],
)
def test_bad_options_exit_2_before_counting(demo_store: Path, tmp_path: Path, argv: list[str],
                                            needle: str, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    meta = tmp_path / "meta.csv"
    meta.write_text("image,city\ndemo_00000,aachen\n")
    (tmp_path / "existing").mkdir()
    argv = [str(meta) if a == "META" else str(tmp_path / "existing") if a == "EXISTING" else a
            for a in argv]  # fmt: skip
    with pytest.raises(SystemExit) if "-1" in argv else nullcontext():  # argparse exits 2
        assert _eval(demo_store, *argv) == 2
    assert needle in capsys.readouterr().err
