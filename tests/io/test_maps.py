"""Error maps (segiou.io.maps, count_stores(error_maps=...), segiou eval --error-maps).

The promises: every pixel's map value is the cell it was counted in, so per image the correct
pixels of each class number its TP, each (class, class) confusion its count, and the void,
ignored and unexpected pixels theirs (checked against the oracle, for stacks, groups split into
bands, image folders, missing predictions and unexpected values); maps are chunked like the
ground truth; they are written by the counting tasks (no extra task, no chunk read again); a
failed run leaves nothing; an existing path that is not segiou's maps is never replaced.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import reference
import zarr

from segiou.cli import main
from segiou.errors import LabelRangeError, StoreExistsError, UsageError
from segiou.io import maps as maps_mod
from segiou.io.maps import CORRECT, FALSE, IGNORED, UNEXPECTED, VOID, open_maps
from segiou.io.zarr import MaskArray, create_stack
from segiou.labels import load_spec
from segiou.parallel import count_stores
from segiou.testing.synthetic import cityscapes_like


def _oracle_maps(gt: np.ndarray, pred: np.ndarray, k: int, gmap: dict, pmap: dict) -> np.ndarray:
    """Pair codes straight from the masks with the oracle's own value -> code rule."""
    gc = reference._codes(gt.reshape(-1), gmap, k).reshape(gt.shape)
    pc = reference._codes(pred.reshape(-1), pmap, k).reshape(gt.shape)
    pc = np.where(gc >= k, gc, pc)
    return gc * (k + 2) + pc


def _check_image(codes: np.ndarray, gt: np.ndarray, pred: np.ndarray, k: int, **kw) -> None:
    """Every kind of pixel in the map numbers what the oracle counts for this image."""
    ref = reference.confusion(gt, pred, k, **kw)
    kind = maps_mod.kinds(codes, k)
    g, p = maps_mod.decode(codes, k)
    for c in range(k):
        assert np.count_nonzero((kind == CORRECT) & (g == c)) == ref.tp[c]  # TP
        assert np.count_nonzero((kind == VOID) & (g == c)) == ref.void[c]
        for d in range(k):
            if d != c:  # false: class c predicted as d
                assert np.count_nonzero((kind == FALSE) & (g == c) & (p == d)) == ref.counts[c, d]
    assert np.count_nonzero(kind == IGNORED) == ref.n_ignored
    assert np.count_nonzero(kind == UNEXPECTED) == ref.n_unexpected
    assert np.count_nonzero(kind == 255) == 0  # every pixel written


def _maps_of(cm, path: Path) -> list[np.ndarray]:
    m = open_maps(path)
    assert m.names == tuple(cm.images.names)
    return [m.read(i) for i in range(len(m.names))]


def test_stack_maps_match_the_oracle_pixel_for_pixel(demo_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "maps.zarr"
    cm = count_stores(f"{demo_store}/gt", f"{demo_store}/pred", labels="cityscapes",
                      gt_ids="raw", scheduler="synchronous", error_maps=out)  # fmt: skip
    spec = load_spec("cityscapes")
    raw = {r: (None if c == -1 else c) for r, c in spec.gt_map("raw").items()}
    gt, pred = zarr.open_array(demo_store / "gt")[:], zarr.open_array(demo_store / "pred")[:]
    arr = zarr.open_array(out, path="maps", mode="r")
    assert arr.chunks == (1, *zarr.open_array(demo_store / "gt").chunks[1:])  # like the gt
    assert arr.dtype == np.uint16
    for i, codes in enumerate(_maps_of(cm, out)):
        np.testing.assert_array_equal(codes, _oracle_maps(gt[i], pred[i], 19, raw, raw))
        _check_image(codes, gt[i], pred[i], 19, gt_map=raw)
        # and the map's histogram is the state's per-image entries
        counts, void = cm.images.confusion(i)
        hist = np.bincount(codes.ravel(), minlength=21 * 21).reshape(21, 21)
        np.testing.assert_array_equal(hist[:19, :19], counts)
        np.testing.assert_array_equal(hist[:19, 19], void)
    assert not any(p.name.startswith(".maps.zarr") for p in tmp_path.iterdir())  # no temp left


def test_group_split_into_bands_with_unexpected_values(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    k = 4
    shapes = {"a/one": (70, 50), "b": (33, 90), "c": (64, 64)}
    gts, preds = {}, {}
    g, p = zarr.open_group(tmp_path / "gt.zarr", mode="w"), zarr.open_group(tmp_path / "pr.zarr",
                                                                          mode="w")  # fmt: skip
    for name, shape in shapes.items():
        gt = rng.integers(0, k, shape).astype(np.int16)
        pred = np.where(rng.random(shape) < 0.7, gt, rng.integers(0, k, shape)).astype(np.int16)
        gt[rng.random(shape) < 0.1] = 255
        pred[rng.random(shape) < 0.05] = 255
        gt[rng.random(shape) < 0.01] = 9  # unexpected
        pred[rng.random(shape) < 0.01] = -7  # unexpected
        gts[name], preds[name] = gt, pred
        for grp, img in ((g, gt), (p, pred)):
            a = grp.create_array(name, shape=shape, chunks=(16, 24), dtype=np.int16,
                                 config={"write_empty_chunks": True})  # fmt: skip
            a[...] = img
    out = tmp_path / "maps.zarr"
    cm = count_stores(
        tmp_path / "gt.zarr",
        tmp_path / "pr.zarr",
        labels=k,
        ignore_index=255,
        on_unexpected="count",
        scheduler="threads",
        pixels_per_task=900,
        error_maps=out,
    )  # fmt: skip  (bands of chunk rows: several tasks per image)
    m = open_maps(out)
    for i, name in enumerate(m.names):
        codes = m.read(name)
        assert zarr.open_array(out, path=f"maps/{i:06d}").chunks == (16, 24)
        cmap = reference.class_map(k, [255])
        np.testing.assert_array_equal(codes, _oracle_maps(gts[name], preds[name], k, cmap, cmap))
        _check_image(codes, gts[name], preds[name], k, ignore=[255])
    assert cm.unexpected_gt  # the case is exercised


def test_image_folders_and_missing_predictions(tmp_path: Path) -> None:
    from PIL import Image

    gt, pred = cityscapes_like(3, 24, 40, seed=8)
    for d in ("gt", "pred"):
        (tmp_path / d).mkdir()
    for i in range(3):
        Image.fromarray(gt[i]).save(tmp_path / "gt" / f"im{i}.png")
        if i != 1:  # im1 has no prediction: scored all-void
            Image.fromarray(pred[i]).save(tmp_path / "pred" / f"im{i}.png")
    out = tmp_path / "maps.zarr"
    cm = count_stores(tmp_path / "gt", tmp_path / "pred", labels="cityscapes", gt_ids="class",
                      missing_pred="void", scheduler="synchronous", error_maps=out)  # fmt: skip
    for i, codes in enumerate(_maps_of(cm, out)):
        p = pred[i] if i != 1 else np.full_like(gt[i], 255)
        _check_image(codes, gt[i], p, 19, ignore=[255])
    assert zarr.open_array(out, path="maps/000000").chunks == (24, 40)  # a whole image a chunk
    kinds = open_maps(out).kinds("im1")
    assert set(np.unique(kinds)) <= {VOID, IGNORED}


def test_maps_are_written_by_the_counting_tasks(demo_store: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Same graph size, and no chunk read twice: the maps come from the counting pass."""
    reads: list[tuple[str, tuple[int, ...]]] = []
    real = MaskArray.read_chunk

    def counted(self, coords, **kw):  # type: ignore[no-untyped-def]
        reads.append((self.path, tuple(coords)))
        return real(self, coords, **kw)

    monkeypatch.setattr(MaskArray, "read_chunk", counted)
    args = (f"{demo_store}/gt", f"{demo_store}/pred")
    opts = {"labels": "cityscapes", "gt_ids": "raw", "scheduler": "synchronous"}
    count_stores(*args, **opts)
    plain = sorted(reads)
    reads.clear()
    count_stores(*args, **opts, error_maps=tmp_path / "m.zarr")
    assert sorted(reads) == plain
    assert len(set(plain)) == len(plain)  # every chunk read once


def test_a_failed_run_leaves_no_maps(tmp_path: Path) -> None:
    gt = np.zeros((2, 8, 8), np.uint8)
    pred = gt.copy()
    pred[1, 2, 2] = 77  # unexpected: the run raises
    create_stack(tmp_path / "g.zarr", n=2, height=8, width=8)[:] = gt
    create_stack(tmp_path / "p.zarr", n=2, height=8, width=8)[:] = pred
    out = tmp_path / "maps.zarr"
    with pytest.raises(LabelRangeError):
        count_stores(tmp_path / "g.zarr", tmp_path / "p.zarr", labels=3, error_maps=out,
                     scheduler="synchronous")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.zarr", "p.zarr"]


def test_existing_paths_are_never_replaced(demo_store: Path, tmp_path: Path) -> None:
    other = tmp_path / "precious"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    args = (f"{demo_store}/gt", f"{demo_store}/pred")
    with pytest.raises(StoreExistsError, match="never replaced"):
        count_stores(*args, labels="cityscapes", gt_ids="raw", error_maps=other)
    assert (other / "keep.txt").read_text() == "x"
    out = tmp_path / "maps.zarr"  # maps segiou wrote are replaced by a new run
    for _ in range(2):
        count_stores(*args, labels="cityscapes", gt_ids="raw", error_maps=out,
                     scheduler="synchronous")  # fmt: skip
    assert open_maps(out).names
    with pytest.raises(UsageError, match="inside"):
        maps_mod.check_maps_output(demo_store / "maps", inputs=[demo_store])
    # from Python too (only the command line checked): maps inside an input store became
    # images of it for the next run
    for inside in (demo_store / "gt" / "maps", demo_store / "maps"):
        with pytest.raises(UsageError, match="inside \\(or around\\) the input"):
            count_stores(*args, labels="cityscapes", gt_ids="raw", error_maps=inside)
    assert sorted(p.name for p in demo_store.iterdir() if not p.name.startswith(".")) == [
        "gt", "pred", "zarr.json"]  # fmt: skip
    with pytest.raises(UsageError, match="not a URL"):
        maps_mod.check_maps_output("s3://b/maps.zarr")


def test_cli_error_maps_and_a_screenshot(demo_store: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """``segiou eval --error-maps``; then a picture of one map, as the README shows it.

    napari needs a display and OpenGL, impractical in a headless test: the picture is a
    matplotlib rendering of the same arrays (kinds in colour; the confused class of false
    pixels). Set SEGIOU_SCREENSHOT_DIR to keep it (the README's picture is made so).
    """
    out = tmp_path / "maps.zarr"
    code = main(["eval", "--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred",
                 "--labels", "cityscapes", "--scheduler", "synchronous", "--quiet",
                 "--bootstrap", "0", "--error-maps", str(out)])  # fmt: skip
    assert code == 0
    assert f"wrote {out}" in capsys.readouterr().err
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    m = open_maps(out)
    kinds = m.kinds(0)
    _, pred_code = maps_mod.decode(m.read(0), m.num_classes)
    colors = ["#2ca02c", "#d62728", "#7f7f7f", "#ff7f0e", "#9467bd"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.2), dpi=100)
    ax1.imshow(kinds, cmap=ListedColormap(colors), vmin=0, vmax=4, interpolation="nearest")
    ax1.set_title(f"{m.names[0]}: where each pixel went")
    ax1.legend(handles=[Patch(color=c, label=n) for c, n in zip(colors, maps_mod.KIND_NAMES,
                                                                strict=True)],
               loc="upper right", fontsize=7)  # fmt: skip
    wrong = np.where(kinds == FALSE, pred_code, -1).astype(float)
    wrong[wrong < 0] = np.nan
    ax2.imshow(kinds == CORRECT, cmap="Greys", vmin=0, vmax=3, interpolation="nearest")
    ax2.imshow(wrong, cmap="tab20", vmin=0, vmax=19, interpolation="nearest")
    ax2.set_title("false pixels, coloured by the class predicted")
    for ax in (ax1, ax2):
        ax.set_axis_off()
    shot = tmp_path / "error-map.png"
    fig.savefig(shot, bbox_inches="tight")
    plt.close(fig)
    assert shot.stat().st_size > 2000
    if keep := os.environ.get("SEGIOU_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(keep) / "error-map.png")
