"""Ground truth and predictions that share masks are refused: the same folder or store (every
prediction scored against itself, 100%), or one inside the other where the recursive listing
picks the other's masks up (predictions counted as extra ground-truth images). Folders are
compared by identity (links followed, bind mounts seen through), and a file link to a file of
the other side is that file; layouts that share a folder but no file still work."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from PIL import Image

from segiou.cli import main
from segiou.errors import UsageError
from segiou.io.png import find_pairs
from segiou.io.sources import open_pair
from segiou.parallel import count_stores

rng = np.random.default_rng(0)
MASKS = [rng.integers(0, 3, (10, 12)).astype(np.uint8) for _ in range(3)]


def _folder(path: Path, suffix: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for i, m in enumerate(MASKS):
        Image.fromarray(m).save(path / f"{i}{suffix}.png")
    return path


def _eval(gt: Path | str, pred: Path | str, *extra: str) -> int:
    return main(["eval", "--gt", str(gt), "--pred", str(pred), "--labels", "3", "--quiet",
                 "--bootstrap", "0", "--scheduler", "synchronous", *extra])  # fmt: skip


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("segiou "), line
    return line


def test_the_same_folder_on_both_sides_is_refused(tmp_path, capsys):
    val = _folder(tmp_path / "val")
    with pytest.raises(UsageError, match="same folder"):
        find_pairs(val, val)
    with pytest.raises(UsageError, match="same folder"):
        count_stores(str(val), str(val), labels=3, scheduler="synchronous")
    assert _eval(val, val) == 2
    assert "scored against itself" in _one_error_line(capsys)
    assert main(["ingest", "--gt", str(val), "--pred", str(val), "--out",
                 str(tmp_path / "s.zarr"), "--quiet"]) == 2  # fmt: skip
    assert "same folder" in _one_error_line(capsys)


def test_a_link_to_the_ground_truth_folder_is_the_same_folder(tmp_path, capsys):
    val = _folder(tmp_path / "val")
    (tmp_path / "preds").symlink_to(val)
    assert _eval(val, tmp_path / "preds") == 2
    assert "same folder" in _one_error_line(capsys)


@pytest.mark.parametrize("missing", [[], ["--missing-pred", "void"]])
def test_predictions_inside_the_ground_truth_folder_are_refused(tmp_path, capsys, missing):
    val = _folder(tmp_path / "val")
    _folder(val / "preds")
    assert _eval(tmp_path / "val", tmp_path / "val" / "preds", *missing) == 2
    line = _one_error_line(capsys)
    assert "3 file(s) are listed both as ground truth" in line
    assert "preds/0.png" in line


def test_ground_truth_inside_the_prediction_folder_is_refused(tmp_path):
    preds = _folder(tmp_path / "preds")
    _folder(preds / "gt")
    with pytest.raises(UsageError, match="listed both"):
        open_pair(preds / "gt", preds)


def test_a_link_into_the_ground_truth_folder_is_refused(tmp_path):
    val = _folder(tmp_path / "val")
    preds = _folder(tmp_path / "preds")
    (val / "linked").symlink_to(preds)  # the listing follows links to folders
    with pytest.raises(UsageError, match="listed both"):
        find_pairs(val, preds, pred_pattern="*.png")


def test_one_folder_with_patterns_that_tell_the_sides_apart_works(tmp_path):
    both = _folder(tmp_path / "both", "_gt")
    _folder(both, "_pred")
    regex = r"(?P<name>\d+)_(gt|pred)\.png$"
    gt, pred = find_pairs(both, both, gt_pattern="*_gt.png", pred_pattern="*_pred.png",
                          regex=regex)  # fmt: skip
    assert gt.names == pred.names == ("0", "1", "2")


def test_results_inside_a_cityscapes_ground_truth_folder_work(tmp_path):
    """The ground-truth pattern (*_gtFine_labelIds.png) does not list the results."""
    city = tmp_path / "gtFine" / "val" / "bonn"
    city.mkdir(parents=True)
    res = tmp_path / "gtFine" / "val" / "results"
    res.mkdir()
    for i, m in enumerate(MASKS):
        Image.fromarray(m).save(city / f"bonn_000000_{i:06d}_gtFine_labelIds.png")
        Image.fromarray(m).save(res / f"bonn_000000_{i:06d}_pred.png")
    gt, pred = open_pair(tmp_path / "gtFine" / "val", res)
    assert len(gt.names) == len(pred.names) == 3


def _store(path: Path, inner: str = "") -> str:
    root = zarr.open_group(str(path), mode="a")
    group = root.require_group(inner) if inner else root
    for i, m in enumerate(MASKS):
        # (shape and dtype, then the data: the oldest zarr supported takes no data=)
        group.create_array(f"img{i}", shape=m.shape, dtype=m.dtype, chunks=m.shape)[:] = m
    return str(path) + (f"/{inner}" if inner else "")


def test_the_same_store_on_both_sides_is_refused(tmp_path, capsys):
    g = _store(tmp_path / "g.zarr")
    with pytest.raises(UsageError, match="same store array or group"):
        count_stores(g, g, labels=3, scheduler="synchronous")
    (tmp_path / "again.zarr").symlink_to(tmp_path / "g.zarr")
    assert _eval(g, tmp_path / "again.zarr") == 2
    assert "scored against itself" in _one_error_line(capsys)


def test_a_group_holding_the_prediction_group_is_refused(tmp_path):
    g = _store(tmp_path / "g.zarr")
    p = _store(tmp_path / "g.zarr", "preds")  # its arrays are images of g.zarr too
    with pytest.raises(UsageError, match="3 array\\(s\\) are read both"):
        open_pair(g, p)


def test_two_groups_of_one_store_work(tmp_path):
    g = _store(tmp_path / "s.zarr", "gt")
    p = _store(tmp_path / "s.zarr", "pred")
    cm = count_stores(g, p, labels=3, scheduler="synchronous")
    assert cm.counts.trace() == sum(m.size for m in MASKS)


def _copy_as_links(src: Path, dst: Path) -> None:
    """``cp -rs src dst``: folders of its own, every file a link to ``src``'s."""
    for folder, _, files in os.walk(src):
        here = dst / Path(folder).relative_to(src)
        here.mkdir(parents=True, exist_ok=True)
        for f in files:
            (here / f).symlink_to(Path(folder) / f)


def test_a_store_copied_as_links_to_the_ground_truth_store_is_refused(tmp_path, capsys):
    # cp -rs gt.zarr pred.zarr: every file of pred.zarr (metadata, chunks) links into gt.zarr,
    # but its folders are its own, so comparing folders let it through: mIoU 100%
    g = _store(tmp_path / "g.zarr")
    _copy_as_links(tmp_path / "g.zarr", tmp_path / "p.zarr")
    with pytest.raises(
        UsageError, match="3 prediction array\\(s\\) have metadata files that are links"
    ):
        open_pair(g, tmp_path / "p.zarr")
    assert _eval(g, tmp_path / "p.zarr") == 2
    line = _one_error_line(capsys)
    assert "scored against itself" in line
    with pytest.raises(UsageError, match="3 ground-truth array\\(s\\) have metadata files"):
        open_pair(tmp_path / "p.zarr", g)  # the reverse
    # two stores of their own (the same masks, no links) still work
    p = _store(tmp_path / "q.zarr")
    assert _eval(g, p) == 0


def test_a_v2_store_copied_as_links_is_refused(tmp_path):
    # Zarr v2 keeps an array's metadata in .zarray
    root = zarr.open_group(str(tmp_path / "g.zarr"), mode="w", zarr_format=2)
    for i, m in enumerate(MASKS):
        root.create_array(f"img{i}", shape=m.shape, dtype=m.dtype, chunks=m.shape)[:] = m
    assert (tmp_path / "g.zarr" / "img0" / ".zarray").is_file()
    _copy_as_links(tmp_path / "g.zarr", tmp_path / "p.zarr")
    with pytest.raises(UsageError, match="3 prediction array\\(s\\) have metadata files"):
        open_pair(tmp_path / "g.zarr", tmp_path / "p.zarr")


def test_count_stores_checks_opened_sources_too(tmp_path):
    from segiou.io.png import png_set
    from segiou.io.zarr import open_masks

    val = _folder(tmp_path / "val")
    with pytest.raises(UsageError, match="same folder"):
        count_stores(png_set(val), png_set(val), labels=3, scheduler="synchronous")
    g = _store(tmp_path / "g.zarr")
    with pytest.raises(UsageError, match="same store array or group"):
        count_stores(open_masks(g), g, labels=3, scheduler="synchronous")


def test_masks_linked_into_a_content_addressed_cache_are_not_shared(tmp_path):
    # the Hugging Face hub cache, git-annex and DVC link identical files to one blob: a perfect
    # prediction links to its ground truth's target, yet the sides share no file (they were
    # refused as "listed both", scoring refused for a valid dataset)
    blobs = tmp_path / "blobs"
    _folder(blobs)
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
        for i in range(3):
            target = blobs / f"{i if side == 'gt' or i == 0 else (i + 1) % 3}.png"
            (tmp_path / side / f"img{i}.png").symlink_to(target)
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred")
    assert gt.names == pred.names == ("img0", "img1", "img2")
    assert _eval(tmp_path / "gt", tmp_path / "pred") == 0


def test_prediction_files_linking_to_the_ground_truth_files_are_refused(tmp_path, capsys):
    # pred/img0.png -> ../gt/img0.png: the prediction *is* the ground-truth file (mIoU 100%,
    # accepted silently once file links were no longer followed for content-addressed caches)
    gt = _folder(tmp_path / "gt")
    (tmp_path / "pred").mkdir()
    for i in range(3):
        (tmp_path / "pred" / f"{i}.png").symlink_to(Path("..") / "gt" / f"{i}.png")
    with pytest.raises(UsageError, match="3 prediction file\\(s\\) are links to the ground-truth"):
        find_pairs(gt, tmp_path / "pred")
    assert _eval(gt, tmp_path / "pred") == 2
    line = _one_error_line(capsys)
    assert "scored against itself" in line
    assert f"{tmp_path / 'pred' / '0.png'} -> {gt / '0.png'}" in line


def test_one_prediction_linking_to_a_ground_truth_file_through_a_chain_is_refused(tmp_path):
    # a link to a link to the ground-truth file (absolute target), and the reverse direction
    gt = _folder(tmp_path / "gt")
    pred = _folder(tmp_path / "pred", "")
    hop = tmp_path / "hop.png"
    hop.symlink_to(gt / "1.png")
    (pred / "1.png").unlink()
    (pred / "1.png").symlink_to(hop)
    with pytest.raises(UsageError, match="1 prediction file\\(s\\) are links"):
        find_pairs(gt, pred)
    (pred / "1.png").unlink()
    Image.fromarray(MASKS[1]).save(pred / "1.png")
    (gt / "2.png").unlink()
    (gt / "2.png").symlink_to(pred / "2.png")  # a ground-truth file that is a prediction
    with pytest.raises(UsageError, match="1 ground-truth file\\(s\\) are links to the prediction"):
        find_pairs(gt, pred)


def test_both_sides_linking_to_one_cache_blob_of_the_other_sides_file_are_fine(tmp_path):
    # ground truth linked into a cache; a perfect prediction links to the same blob (it does
    # not link to the ground-truth file): accepted, as any two links to a blob neither lists
    blobs = _folder(tmp_path / "blobs")
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
        for i in range(3):
            (tmp_path / side / f"img{i}.png").symlink_to(Path("..") / "blobs" / f"{i}.png")
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred")
    assert len(gt) == len(pred) == 3
    assert _eval(tmp_path / "gt", tmp_path / "pred") == 0
    assert blobs.is_dir()


def _bind_mount_or_skip(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a private mount namespace where ``pred`` is a bind mount of ``gt``."""
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("a bind mount needs root and unshare/mount (util-linux)")
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    pred.mkdir()
    bind = shlex.join(["mount", "--bind", str(gt), str(pred)])
    inner = f"{bind} || exit 77; " + shlex.join([sys.executable, "-c", script])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", inner],
                       check=False, capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    if r.returncode == 77 or (r.returncode != 0 and "unshare:" in r.stderr):
        pytest.skip(f"cannot bind-mount in a private mount namespace here: {r.stderr.strip()}")
    return r


@pytest.mark.parametrize(
    ("kind", "call", "same"),
    [("folder", "segiou.io.png import find_pairs", "folder"),
     ("store", "segiou.io.sources import open_pair", "store array or group")],
)  # fmt: skip
def test_a_bind_mount_of_the_ground_truth_is_the_same_input(tmp_path, kind, call, same):
    # a container volume mounted twice (/data and /mnt/data): resolving paths cannot see that
    # the two folders (or stores) are one; their device and inode can
    if kind == "folder":
        _folder(tmp_path / "gt")
    else:
        _store(tmp_path / "gt")
    module, _, func = call.split(" ")
    script = (
        "import sys\n"
        "from segiou.errors import UsageError\n"
        f"from {module} import {func}\n"
        f"try: {func}({str(tmp_path / 'gt')!r}, {str(tmp_path / 'pred')!r})\n"
        "except UsageError as e: print('refused:', e); sys.exit(0)\n"
        "print('accepted'); sys.exit(1)\n"
    )
    r = _bind_mount_or_skip(tmp_path, script)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"the ground truth and the predictions are the same {same}" in r.stdout


def test_a_link_inside_a_store_to_the_ground_truth_group_is_the_same_group(tmp_path, capsys):
    # s.zarr/pred -> gt: only the store root was resolved, not the path inside it
    g = _store(tmp_path / "s.zarr", "gt")
    (tmp_path / "s.zarr" / "pred").symlink_to("gt")
    with pytest.raises(UsageError, match="same store array or group"):
        open_pair(g, tmp_path / "s.zarr" / "pred")
    assert _eval(g, tmp_path / "s.zarr" / "pred") == 2
    assert "scored against itself" in _one_error_line(capsys)


def test_a_link_inside_a_group_to_the_prediction_group_is_refused(tmp_path):
    g = _store(tmp_path / "s.zarr", "gt")
    p = _store(tmp_path / "s.zarr", "pred")
    (tmp_path / "s.zarr" / "gt" / "more").symlink_to(Path("..") / "pred")
    with pytest.raises(UsageError, match="3 array\\(s\\) are read both"):
        open_pair(g, p)
