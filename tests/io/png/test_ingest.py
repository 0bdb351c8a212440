"""Audit fixes: colour masks in the evaluated id space, every chunk written, codecs, messages."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from PIL import Image

from segiou import ConfusionMatrix
from segiou.cli.ingest import register
from segiou.errors import UsageError
from segiou.io.png import ImageDecodeError, PngSet, find_pairs, ingest, parse_codec, png_set
from segiou.io.zarr import open_masks
from segiou.labels import builtin_spec
from segiou.parallel import evaluate_zarr

CS = builtin_spec("cityscapes")
ROAD, CAR = 7, 26  # Cityscapes labelIds (raw ids) of road (class 0) and car (class 13)
#: Raw ids whose colour is theirs alone or shared only with ids that map the same way
#: (18 polegroup shares pole's colour and decodes to 17 pole: left out).
COLOURABLE = [r.id for r in CS.raw if r.color is not None and r.id != 18]


def _save(path: Path, arr: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path)


def _colour(raw: np.ndarray) -> np.ndarray:
    """Cityscapes colour image of a labelId image."""
    lut = np.zeros((256, 3), np.uint8)
    for r in CS.raw:
        if r.color is not None and r.id >= 0:
            lut[r.id] = r.color
    return lut[raw]


def _folders(tmp_path: Path, shapes: list[tuple[int, int]], seed: int = 0) -> dict[str, Path]:
    """The same labelId masks as grey images (``grey/``) and as colour images (``colour/``)."""
    rng = np.random.default_rng(seed)
    for i, shape in enumerate(shapes):
        g = rng.choice(COLOURABLE, shape).astype(np.uint8)
        p = np.where(rng.random(shape) < 0.6, g, rng.choice(COLOURABLE, shape)).astype(np.uint8)
        for side, arr in (("gt", g), ("pred", p)):
            _save(tmp_path / "grey" / side / f"im{i}.png", arr)
            _save(tmp_path / "colour" / side / f"im{i}.png", _colour(arr))
    return {k: tmp_path / k for k in ("grey", "colour")}


def _eval(gt: object, pred: object, **kw: object) -> ConfusionMatrix:
    # as `segiou eval --labels cityscapes` does: raw ids, the spec's default for both sides
    return evaluate_zarr(gt, pred, labels="cityscapes", gt_ids="raw", scheduler="synchronous",
                         **kw)  # fmt: skip


def _same(a: ConfusionMatrix, b: ConfusionMatrix) -> None:
    assert_array_equal(a.counts, b.counts)
    assert_array_equal(a.void, b.void)
    assert a.n_ignored == b.n_ignored
    assert a.counts.sum() > 0


# -- 1. colour masks decode to the id space they are evaluated in ------------------------------
def test_half_road_half_car_colour_image_reads_as_raw_ids(tmp_path):
    rgb = np.zeros((8, 8, 3), np.uint8)
    rgb[:4], rgb[4:] = CS.raw[ROAD].color, CS.raw[CAR].color
    _save(tmp_path / "a.png", rgb)
    ps = PngSet(("a",), (str(tmp_path / "a.png"),))
    raw = ps.read(0, "cityscapes", ids="raw")
    assert_array_equal(np.unique(raw[:4]), [ROAD])
    assert_array_equal(np.unique(raw[4:]), [CAR])
    assert_array_equal(np.unique(ps.read(0, "cityscapes", ids="class")), [0, 13])
    assert_array_equal(ps.read(0, "cityscapes"), ps.read(0, "cityscapes", ids="class"))
    cm = ConfusionMatrix("cityscapes", gt_ids="raw")
    cm.update(raw, raw)
    assert cm.counts[0, 0] == cm.counts[13, 13] == 32
    assert cm.n_ignored == 0
    assert cm.void.sum() == 0


def test_colour_folders_evaluated_directly_equal_grey_labelids(tmp_path):
    # needs segiou.parallel._tasks.whole_image to pass the side's id space to PngSet.read
    d = _folders(tmp_path, [(12, 16), (12, 16)])
    want = _eval(*find_pairs(d["grey"] / "gt", d["grey"] / "pred"))
    got = _eval(*find_pairs(d["colour"] / "gt", d["colour"] / "pred"))
    _same(got, want)


@pytest.mark.parametrize("shapes", [[(12, 16), (12, 16)], [(12, 16), (9, 7)]])
def test_colour_folders_ingested_equal_grey_labelids(tmp_path, shapes):
    import zarr

    d = _folders(tmp_path, shapes)
    want = _eval(*find_pairs(d["grey"] / "gt", d["grey"] / "pred"))
    out = tmp_path / "c.zarr"
    summary = ingest(*find_pairs(d["colour"] / "gt", d["colour"] / "pred"), out,
                     spec="cityscapes", progress=False)  # fmt: skip
    assert summary["ids"] == "raw"
    assert summary["gt"]["colour_images"] == 2
    assert zarr.open_group(out, mode="r").attrs["segiou"]["ids"] == "raw"
    _same(_eval(open_masks(out, "gt"), open_masks(out, "pred")), want)


def test_folder_mixing_grey_labelids_and_colour_is_one_id_space(tmp_path):
    d = _folders(tmp_path, [(12, 16), (12, 16)])
    want = _eval(*find_pairs(d["grey"] / "gt", d["grey"] / "pred"))
    mixed = tmp_path / "mixed"
    for side in ("gt", "pred"):
        (mixed / side).mkdir(parents=True)
        (mixed / side / "im0.png").write_bytes((d["grey"] / side / "im0.png").read_bytes())
        (mixed / side / "im1.png").write_bytes((d["colour"] / side / "im1.png").read_bytes())
    out = tmp_path / "m.zarr"
    summary = ingest(*find_pairs(mixed / "gt", mixed / "pred"), out, spec="cityscapes",
                     progress=False)  # fmt: skip
    assert summary["gt"]["colour_images"] == 1
    _same(_eval(open_masks(out, "gt"), open_masks(out, "pred")), want)


def test_ingest_id_space_is_recorded(tmp_path):
    import zarr

    voc = builtin_spec("pascal_voc")
    _save(tmp_path / "voc" / "a.png", np.array(voc.colors, np.uint8)[np.eye(4, dtype=int)])
    _save(tmp_path / "cs" / "a.png", _colour(np.full((4, 4), CAR, np.uint8)))
    cases = [
        ("voc", "pascal_voc", None, "class", np.eye(4, dtype=int)),
        ("cs", "cityscapes", None, "raw", np.full((4, 4), CAR)),
        ("cs", "cityscapes", "class", "class", np.full((4, 4), 13)),
    ]
    for i, (folder, spec, ids, recorded, values) in enumerate(cases):
        out = tmp_path / f"o{i}.zarr"
        summary = ingest(png_set(tmp_path / folder), None, out, spec=spec, ids=ids,
                         progress=False)  # fmt: skip
        assert summary["ids"] == recorded
        attrs = zarr.open_group(out, mode="r").attrs["segiou"]
        assert attrs["ids"] == recorded
        assert attrs["labels"] == spec
        assert_array_equal(zarr.open_array(out, path="gt", mode="r")[0], values)
    _save(tmp_path / "grey" / "a.png", np.zeros((4, 4), np.uint8))
    ingest(png_set(tmp_path / "grey"), None, tmp_path / "g.zarr", progress=False)
    assert zarr.open_group(tmp_path / "g.zarr", mode="r").attrs["segiou"]["ids"] is None
    # grey masks with a spec: ingest does not know their id space (trainIds or labelIds?)
    ingest(png_set(tmp_path / "grey"), None, tmp_path / "gs.zarr", spec="cityscapes",
           progress=False)  # fmt: skip
    assert zarr.open_group(tmp_path / "gs.zarr", mode="r").attrs["segiou"]["ids"] is None
    with pytest.raises(UsageError, match="no raw ids"):
        ingest(png_set(tmp_path / "voc"), None, tmp_path / "x.zarr", spec="pascal_voc",
               ids="raw", progress=False)  # fmt: skip
    with pytest.raises(UsageError, match="ids='labels' is unknown"):
        ingest(png_set(tmp_path / "voc"), None, tmp_path / "x.zarr", ids="labels",  # type: ignore[arg-type]
               progress=False)  # fmt: skip


# -- 2. ingest writes every chunk, also chunks of 0s -------------------------------------------
@pytest.mark.parametrize("layout", ["group", "stack"])
def test_ingest_writes_chunks_of_zeros(tmp_path, layout):
    rng = np.random.default_rng(3)
    shapes = [(8, 8), (8, 12)] if layout == "group" else [(8, 8), (8, 8)]
    for i, shape in enumerate(shapes):
        g = rng.choice([ROAD, CAR, 11], shape).astype(np.uint8)
        g[:4, :4] = 0  # one whole 4x4 chunk of 0 (the fill value): raw id 0, ignored
        _save(tmp_path / "gt" / f"im{i}.png", g)
        _save(tmp_path / "pred" / f"im{i}.png", rng.choice([ROAD, CAR, 0], shape).astype(np.uint8))
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred")
    out = tmp_path / "z.zarr"
    assert ingest(gt, pred, out, chunks=(4, 4), progress=False)["layout"] == layout
    got = _eval(open_masks(out, "gt"), open_masks(out, "pred"))  # missing_gt_chunks="error"
    want = ConfusionMatrix("cityscapes", gt_ids="raw")
    for i in range(len(gt)):
        want.update(gt.read(i), pred.read(i), key=gt.names[i])
    _same(got, want)
    assert got.n_ignored >= 2 * 16


# -- 3. codecs ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("codec", "name", "config"),
    [
        ("zstd", "zstd", {"level": 0}),
        ("zstd:9", "zstd", {"level": 9}),
        ("blosc-lz4", "blosc", {"cname": "lz4", "clevel": 5}),
        ("LZ4", "blosc", {"cname": "lz4", "clevel": 5}),
        ("blosc-lz4:1", "blosc", {"cname": "lz4", "clevel": 1}),
        ("gzip", "gzip", {"level": 5}),
        ("gzip:9", "gzip", {"level": 9}),
        ("none", None, {}),
    ],
)
@pytest.mark.parametrize("layout", ["group", "stack"])
def test_codecs_round_trip_and_evaluate(tmp_path, codec, name, config, layout):
    import zarr

    d = _folders(tmp_path, [(12, 16), (12, 16) if layout == "stack" else (10, 6)], seed=5)
    gt, pred = find_pairs(d["grey"] / "gt", d["grey"] / "pred")
    out = tmp_path / "c.zarr"
    summary = ingest(gt, pred, out, codec=codec, chunks=(8, 8), progress=False)
    assert summary["layout"] == layout
    assert summary["codec"] == parse_codec(codec)[0]
    for side, ps in (("gt", gt), ("pred", pred)):
        ms = open_masks(out, side)
        for i in range(len(ps)):
            path = side if layout == "stack" else f"{side}/{ps.names[i]}"
            arr = zarr.open_array(out, path=path, mode="r")
            codecs = [c for c in arr.metadata.to_dict()["codecs"] if c["name"] != "bytes"]
            if name is None:
                assert codecs == []
            else:
                assert [c["name"] for c in codecs] == [name]
                assert config.items() <= codecs[0]["configuration"].items()
            stored = arr[i] if layout == "stack" else arr[...]
            assert_array_equal(stored, ps.read(i))
        assert ms.names == ps.names
    _same(_eval(open_masks(out, "gt"), open_masks(out, "pred")), _eval(gt, pred))


@pytest.mark.parametrize("bad", ["brotli", "zstd:0", "zstd:23", "gzip:x", "gzip:10", "none:1", ""])
def test_bad_codec_lists_the_choices(tmp_path, bad):
    with pytest.raises(UsageError, match=r"expected one of: zstd .*gzip.*none"):
        parse_codec(bad)
    _save(tmp_path / "gt" / "a.png", np.zeros((2, 2), np.uint8))
    with pytest.raises(UsageError, match="codec"):
        ingest(png_set(tmp_path / "gt"), None, tmp_path / "o.zarr", codec=bad, progress=False)
    assert not (tmp_path / "o.zarr").exists()


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="segiou")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_cli_codec_and_ids(tmp_path, capsys):
    import zarr

    _save(tmp_path / "gt" / "a.png", _colour(np.full((4, 4), CAR, np.uint8)))
    base = ["ingest", "--gt", str(tmp_path / "gt"), "--labels", "cityscapes", "--quiet"]
    assert _cli([*base, "--out", str(tmp_path / "a.zarr"), "--codec", "gzip:3"]) == 0
    text = capsys.readouterr().out
    assert "gzip:3" in text
    assert "now hold raw ids of cityscapes" in text
    assert "--gt-ids raw" in text
    assert zarr.open_array(tmp_path / "a.zarr", path="gt", mode="r")[0, 0, 0] == CAR
    assert _cli([*base, "--out", str(tmp_path / "b.zarr"), "--ids", "class"]) == 0
    assert "--gt-ids class" in capsys.readouterr().out
    assert zarr.open_array(tmp_path / "b.zarr", path="gt", mode="r")[0, 0, 0] == 13
    with pytest.raises(SystemExit) as info:
        _cli([*base, "--out", str(tmp_path / "c.zarr"), "--codec", "brotli"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "codec 'brotli' is unknown" in err
    assert "blosc-lz4" in err


# -- 4. the unknown-colour message fits the context ---------------------------------------------
def test_unknown_colour_message_names_options_that_exist(tmp_path):
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[0] = (1, 2, 3)
    _save(tmp_path / "gt" / "a.png", rgb)
    ps = png_set(tmp_path / "gt")
    with pytest.raises(ImageDecodeError) as info:
        ps.read(0, "cityscapes", ids="raw")
    msg = str(info.value)
    assert "colors='ignore'" in msg
    assert "(--colors ignore)" not in msg  # not an option of `segiou eval`
    assert "'segiou eval' on image folders has no such option" in msg
    assert "segiou ingest --colors ignore" in msg
    with pytest.raises(ImageDecodeError) as info:
        ingest(ps, None, tmp_path / "o.zarr", spec="cityscapes", progress=False)
    msg = str(info.value)
    assert "(segiou ingest --colors ignore)" in msg
    assert "segiou eval" not in msg


def test_unknown_colours_become_the_spec_ignore_value_in_raw_ids(tmp_path):
    from segiou import LabelSpec

    spec = LabelSpec.from_dict({
        "name": "roads", "ignore": [255],
        "classes": [{"name": "road", "color": [128, 64, 128]}, {"name": "car", "color": [0, 0, 142]}],
        "raw": [{"id": 7, "name": "road", "class": 0}, {"id": 26, "name": "car", "class": 1}],
    })  # fmt: skip
    rgb = np.array([[[128, 64, 128], [0, 0, 142]], [[1, 2, 3], [1, 2, 3]]], np.uint8)
    _save(tmp_path / "gt" / "a.png", rgb)
    src = png_set(tmp_path / "gt")
    assert_array_equal(src.read(0, spec, "ignore", ids="raw"), [[7, 26], [255, 255]])
    assert_array_equal(src.read(0, spec, "ignore", ids="class"), [[0, 1], [255, 255]])


def test_ingest_refuses_folders_that_share_no_name(tmp_path):
    from segiou.errors import MaskNotFoundError

    _save(tmp_path / "gt" / "a.png", np.zeros((2, 2), np.uint8))
    _save(tmp_path / "pred" / "b.png", np.zeros((2, 2), np.uint8))
    with pytest.raises(MaskNotFoundError, match="no prediction pairs with a ground-truth image"):
        ingest(png_set(tmp_path / "gt"), png_set(tmp_path / "pred"), tmp_path / "s.zarr",
               progress=False)  # fmt: skip
    assert not (tmp_path / "s.zarr").exists()


def test_folders_an_unfinished_ingest_left_are_reported_never_deleted(tmp_path, capsys):
    """A process killed between setting the old store aside and moving the new one in leaves
    the old store in ``.<name>.replaced-*/<name>`` and the new one in ``.<name>.partial-*``
    (see ``_put_in_place``): the next ingest into the same path says where (the CLI too);
    neither is deleted."""
    _save(tmp_path / "gt" / "a.png", np.full((4, 4), 1, np.uint8))
    out = tmp_path / "o.zarr"
    assert ingest(png_set(tmp_path / "gt"), None, out, progress=False)["left_over"] == []
    aside = tmp_path / ".o.zarr.replaced-k1ll3d"
    aside.mkdir()
    out.replace(aside / "o.zarr")  # the first rename done, the process killed
    partial = tmp_path / ".o.zarr.partial-k1ll3d"
    ingest(png_set(tmp_path / "gt"), None, tmp_path / "x.zarr", progress=False)
    (tmp_path / "x.zarr").replace(partial)  # the new store, complete, never moved in
    (tmp_path / ".other.zarr.partial-abc").mkdir()  # another output's: not this one's
    (tmp_path / ".o.zarr.partial-file").write_text("")  # not a folder
    summary = ingest(png_set(tmp_path / "gt"), None, out, progress=False)
    assert summary["left_over"] == [
        {"path": str(aside), "kind": "replaced"},
        {"path": str(partial), "kind": "partial"},
    ]
    assert (aside / "o.zarr").is_dir()  # never deleted
    assert partial.is_dir()
    args = argparse.ArgumentParser().add_subparsers()
    register(args)
    from segiou.cli.ingest import run

    ns = args.choices["ingest"].parse_args(["--gt", str(tmp_path / "gt"), "--out", str(out), "--overwrite",
                                            "--quiet"])  # fmt: skip
    assert run(ns) == 0
    text = capsys.readouterr().out
    assert f"note: {aside} (beside {out}) holds the store that was there before" in text
    assert f"note: {partial} (beside {out}) is a partial store" in text
