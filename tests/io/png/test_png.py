"""Label images in folders: decoding, colours, pairing by name, ingest into Zarr, the CLI."""

from __future__ import annotations

import argparse
import pickle
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from PIL import Image

from segiou import ConfusionMatrix
from segiou.cli.ingest import register
from segiou.errors import MaskNotFoundError, SegiouError, StoreLayoutError, UsageError
from segiou.io.png import (
    ImageDecodeError,
    NamingError,
    PngSet,
    StoreExistsError,
    find_pairs,
    ingest,
    png_set,
)
from segiou.io.zarr import open_masks
from segiou.labels import LabelSpec, RawLabel, builtin_spec
from segiou.parallel import evaluate_zarr

CITIES = ("aachen", "bonn")


def _save(path: Path, arr: np.ndarray, mode: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".npy":
        np.save(path, arr)
    else:
        img = Image.fromarray(arr)
        if mode == "P":
            img = Image.fromarray(arr, mode="L").convert("P")  # identity palette ...
            img.putpalette(list(np.arange(768, dtype=np.uint8)[::-1]))  # ... then scrambled
        img.save(path)
    return path


def _one(path: Path) -> PngSet:
    return PngSet((path.stem,), (str(path),), str(path.parent))


def _cityscapes(tmp_path: Path, n: int = 3, shape=(24, 40), seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    gt_dir, res = tmp_path / "gtFine", tmp_path / "results"
    for city in CITIES:
        for f in range(n):
            name = f"{city}_000000_{19 + f:06d}"
            g = rng.integers(0, 34, shape, dtype=np.uint8)
            p = np.where(rng.random(shape) < 0.7, g, rng.integers(0, 34, shape)).astype(np.uint8)
            _save(gt_dir / "val" / city / f"{name}_gtFine_labelIds.png", g)
            _save(res / f"{name}_pred.png", p)
    return gt_dir, res


def _stack(ps: PngSet) -> np.ndarray:
    return np.stack([ps.read(i) for i in range(len(ps))])


# -- decoding ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "dtype", "hi", "mode"),
    [
        ("l.png", np.uint8, 255, None),
        ("p.png", np.uint8, 255, "P"),
        ("i16.png", np.uint16, 60000, None),
        ("i16.tif", np.uint16, 60000, None),
        ("i32.tif", np.int32, 100000, None),
        ("u8.tif", np.uint8, 255, None),
        ("a.npy", np.uint16, 60000, None),
        ("b.npy", np.int64, 2**40, None),
    ],
)
def test_read_integer_images(tmp_path, name, dtype, hi, mode):
    arr = np.random.default_rng(1).integers(0, hi, (7, 11)).astype(dtype)
    ps = _one(_save(tmp_path / name, arr, mode))
    out = ps.read(0)
    assert out.shape == (7, 11) == ps.image_shape(0)
    assert out.dtype == dtype
    assert_array_equal(out, arr)  # P: the palette index, never the palette colour


def test_read_bool_bigendian_and_channel_npy(tmp_path):
    b = np.random.default_rng(2).random((5, 6)) < 0.5
    assert_array_equal(_one(_save(tmp_path / "b.npy", b)).read(0), b.astype(np.uint8))
    be = np.arange(30, dtype=">u2").reshape(5, 6)
    out = _one(_save(tmp_path / "be.npy", be)).read(0)
    assert out.dtype.isnative
    assert_array_equal(out, be)
    ch = np.arange(30, dtype=np.uint8).reshape(5, 6, 1)
    assert_array_equal(_one(_save(tmp_path / "c.npy", ch)).read(0), ch[..., 0])


def test_read_mode_1_and_la(tmp_path):
    Image.fromarray(np.eye(4, dtype=bool)).save(tmp_path / "one.png")
    assert_array_equal(_one(tmp_path / "one.png").read(0), np.eye(4, dtype=np.uint8))
    la = np.dstack([np.arange(12, dtype=np.uint8).reshape(3, 4), np.full((3, 4), 200, np.uint8)])
    Image.fromarray(la, mode="LA").save(tmp_path / "la.png")
    assert_array_equal(_one(tmp_path / "la.png").read(0), la[..., 0])


def test_image_shape_reads_only_the_header(tmp_path):
    path = _save(
        tmp_path / "big.png", np.random.default_rng(0).integers(0, 255, (64, 80), np.uint8)
    )
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # the pixels are cut off, the header is intact
    ps = _one(path)
    assert ps.image_shape(0) == (64, 80)
    with pytest.raises(ImageDecodeError, match=r"big\.png: cannot decode"):
        ps.read(0)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: p.write_bytes(b"not an image"), "cannot decode"),
        (lambda p: np.save(p.with_suffix(".npy"), np.zeros((2, 3, 5), np.uint8)), "shape"),
        (lambda p: np.save(p.with_suffix(".npy"), np.zeros((2, 3))), "not an integer"),
        (lambda p: Image.new("CMYK", (3, 2)).save(p.with_suffix(".tif")), "mode 'CMYK'"),
        (lambda p: Image.new("F", (3, 2)).save(p.with_suffix(".tif")), "mode 'F'"),
    ],
)
def test_undecodable_files_name_the_file(tmp_path, make, match):
    make(tmp_path / "bad.png")
    path = next(tmp_path.iterdir())
    with pytest.raises(ImageDecodeError, match=match) as info:
        _one(path).read(0)
    assert str(path) in str(info.value)
    assert isinstance(info.value, SegiouError)
    assert isinstance(info.value, ValueError)


def test_multipage_tiff_is_not_a_mask(tmp_path):
    pages = [Image.fromarray(np.full((4, 4), i, np.uint8)) for i in range(3)]
    pages[0].save(tmp_path / "m.tif", save_all=True, append_images=pages[1:])
    with pytest.raises(ImageDecodeError, match="3 frames"):
        _one(tmp_path / "m.tif").image_shape(0)


def test_missing_file(tmp_path):
    ps = _one(tmp_path / "gone.png")
    with pytest.raises(MaskNotFoundError, match=r"gone\.png"):
        ps.read(0)


def test_tifffile_fallback(tmp_path, monkeypatch):
    path = tmp_path / "x.tif"
    # a TIFF by its first bytes (its first directory has no entries) that Pillow cannot read
    path.write_bytes(b"II*\0\x08\0\0\0" + bytes(6))
    want = np.arange(12, dtype=np.uint16).reshape(3, 4)

    class _Page:
        shape, dtype = want.shape, want.dtype

    class _File:
        pages = (_Page(),)

        def __init__(self, p):
            assert p == str(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    stub = types.SimpleNamespace(TiffFile=_File, imread=lambda p: want)
    monkeypatch.setitem(sys.modules, "tifffile", stub)
    ps = _one(path)
    assert ps.image_shape(0) == (3, 4)
    assert_array_equal(ps.read(0), want)


def _stub_tifffile(monkeypatch, shape, dtype, decoded):
    class _Page:
        pass

    _Page.shape, _Page.dtype = shape, dtype

    class _File:
        pages = (_Page(),)

        def __init__(self, p):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    stub = types.SimpleNamespace(TiffFile=_File, imread=lambda p: decoded)
    monkeypatch.setitem(sys.modules, "tifffile", stub)


@pytest.mark.parametrize(
    "decoded",
    [np.zeros((3, 4, 2), np.uint16), np.zeros((4, 3), np.uint16), np.zeros((3, 4), np.float32)],
)
def test_tifffile_fallback_must_match_the_header(tmp_path, monkeypatch, decoded):
    # what the fallback decodes is refused by name unless it has the header's shape and int ids
    path = tmp_path / "x.tif"
    path.write_bytes(b"II*\0\x08\0\0\0" + bytes(6))  # a TIFF Pillow cannot read
    _stub_tifffile(monkeypatch, (3, 4), np.dtype(np.uint16), decoded)
    ps = _one(path)
    assert ps.image_shape(0) == (3, 4)
    with pytest.raises(ImageDecodeError, match=r"x\.tif: cannot decode the file as a label image"):
        ps.read(0)


def test_damaged_tiff_whose_header_pillow_reads_is_refused(tmp_path, monkeypatch):
    # grey + alpha, one byte damaged: Pillow reads a 20 x 24 header, then fails to decode;
    # tifffile decoded 20 x 24 x 2 and reshaping that to the header's shape was a traceback
    arr = (np.arange(24 * 20) % 7).astype(np.uint8).reshape(20, 24)
    path = tmp_path / "b.png"
    Image.fromarray(np.stack([arr, arr], -1), "LA").save(path, "TIFF")
    data = bytearray(path.read_bytes())
    data[102] = 0
    path.write_bytes(bytes(data))
    _stub_tifffile(monkeypatch, (20, 24, 2), np.dtype(np.uint8), np.stack([arr, arr], -1))
    ps = _one(path)
    assert ps.image_shape(0) == (20, 24)
    with pytest.raises(ImageDecodeError, match=r"b\.png: cannot decode the file as a label image"):
        ps.read(0)


@pytest.mark.parametrize("shape", [(20, ()), (20, b"\x18"), (20, True), (20, -1)])
def test_tiff_header_size_that_is_not_a_size_is_refused(tmp_path, monkeypatch, shape):
    path = tmp_path / "x.tif"
    path.write_bytes(b"II*\0\x08\0\0\0" + bytes(6))
    _stub_tifffile(monkeypatch, shape, np.dtype(np.uint8), np.zeros((20, 24), np.uint8))
    with pytest.raises(ImageDecodeError, match=r"x\.tif: cannot decode .* not a size"):
        _one(path).image_shape(0)


def test_pngset_is_picklable_and_checked(tmp_path):
    ps = PngSet(("a", "b"), ("x.png", "y.png"), str(tmp_path))
    assert pickle.loads(pickle.dumps(ps)) == ps
    assert all(Path(p).is_absolute() for p in ps.paths)
    assert ps.layout == "files"
    with pytest.raises(NamingError, match="2 names for 1 files"):
        PngSet(("a", "b"), ("x.png",))
    with pytest.raises(NamingError, match=r"'a': .*x\.png, .*y\.png"):
        PngSet(("a", "a"), ("x.png", "y.png"))


# -- colours ----------------------------------------------------------------------------------
def test_rgb_class_colours_pascal_voc(tmp_path):
    spec = builtin_spec("pascal_voc")
    ids = np.random.default_rng(3).integers(0, 21, (9, 13))
    rgb = np.array(spec.colors, dtype=np.uint8)[ids]
    ps = _one(_save(tmp_path / "voc.png", rgb))
    out = ps.read(0, spec)
    assert out.dtype == np.uint8
    assert_array_equal(out, ids)
    rgba = np.dstack([rgb, np.full(ids.shape, 255, np.uint8)])
    assert_array_equal(_one(_save(tmp_path / "voca.png", rgba)).read(0, "pascal_voc"), ids)


def test_rgb_raw_colours_cityscapes_map_to_class_ids(tmp_path):
    spec = builtin_spec("cityscapes")
    raw = np.random.default_rng(4).integers(0, 34, (10, 12))
    raw[raw == 18] = 7  # polegroup shares pole's colour and decodes to pole (tested below)
    colours = {r.id: r.color for r in spec.raw}
    rgb = np.array([colours[i] for i in range(34)], dtype=np.uint8)[raw]
    want = np.vectorize(lambda v: 255 if spec.gt_map("raw")[v] < 0 else spec.gt_map("raw")[v])(raw)
    out = _one(_save(tmp_path / "c.png", rgb)).read(0, spec)
    assert_array_equal(out, want)  # (0, 0, 0) is raw ids 0..4, all ignored: 255


def test_rgb_raw_colours_cityscapes_decode_to_raw_ids(tmp_path):
    spec = builtin_spec("cityscapes")
    raw = np.random.default_rng(4).integers(0, 34, (10, 12))
    raw[raw == 18] = 7  # polegroup shares pole's colour and decodes to pole (tested below)
    colours = {r.id: r.color for r in spec.raw}
    rgb = np.array([colours[i] for i in range(34)], dtype=np.uint8)[raw]
    out = _one(_save(tmp_path / "c.png", rgb)).read(0, spec, ids="raw")
    assert out.dtype == np.uint8
    # (0, 0, 0) is raw ids 0..4, all ignored: the smallest, 0 ('unlabeled')
    assert_array_equal(out, np.where(raw <= 4, 0, raw))
    gt_map = spec.gt_map("raw")
    assert_array_equal(np.vectorize(gt_map.get)(out), np.vectorize(gt_map.get)(raw))
    pole = rgb.copy()
    pole[0, 0] = colours[17]  # shared by pole (17, class 5) and polegroup (18, ignored)
    got = _one(_save(tmp_path / "pole.png", pole)).read(0, spec, ids="raw")
    assert got[0, 0] == 17  # the evaluated class wins over ignored ids
    assert_array_equal(got[1:], out[1:])


def test_raw_ids_from_class_colours_and_negative_raw_ids(tmp_path):
    spec = LabelSpec(
        "c", ("a", "b", "c"), ignore=(255,), colors=((10, 0, 0), (0, 10, 0), (0, 0, 10)),
        raw=(RawLabel(-1, "plate", None), RawLabel(5, "a1", 0), RawLabel(3, "a0", 0),
             RawLabel(9, "b", 1)),
    )  # fmt: skip
    rgb = np.array([[(10, 0, 0), (0, 10, 0)]], dtype=np.uint8)
    ps = _one(_save(tmp_path / "c.png", rgb))
    assert_array_equal(ps.read(0, spec, ids="raw"), [[3, 9]])  # the class's smallest raw id
    assert_array_equal(ps.read(0, spec), [[0, 1]])
    odd = _one(_save(tmp_path / "odd.png", np.array([[(10, 0, 0), (1, 1, 1)]], np.uint8)))
    out = odd.read(0, spec, colors="ignore", ids="raw")
    assert out.dtype == np.int8  # the ignored raw id -1 needs a signed type
    assert_array_equal(out, [[3, -1]])
    no_raw = _one(_save(tmp_path / "n.png", np.array([[(0, 0, 10)]], np.uint8)))
    with pytest.raises(ImageDecodeError, match=r"class 2 'c'.*ids='class'"):
        no_raw.read(0, spec, ids="raw")
    with pytest.raises(ImageDecodeError, match=r"no raw id of .*ids='class'"):
        no_raw.read(0, spec, colors="ignore", ids="raw")  # a known colour is never ignored


def test_raw_ids_need_a_spec_with_raw_ids(tmp_path):
    spec = builtin_spec("pascal_voc")
    ps = _one(_save(tmp_path / "voc.png", np.array(spec.colors, np.uint8)[np.eye(3, dtype=int)]))
    with pytest.raises(ImageDecodeError, match=r"voc\.png.*'pascal_voc' has no raw ids"):
        ps.read(0, spec, ids="raw")
    with pytest.raises(UsageError, match="ids='trainIds' is unknown"):
        ps.read(0, spec, ids="trainIds")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="colors='skip' is unknown"):
        ps.read(0, spec, colors="skip")  # type: ignore[arg-type]
    grey = _one(_save(tmp_path / "g.png", np.full((2, 2), 7, np.uint8)))
    assert_array_equal(grey.read(0, spec, ids="raw"), np.full((2, 2), 7))  # ids: colours only


def test_unknown_colours_are_listed_most_frequent_first(tmp_path):
    rgb = np.zeros((10, 10, 3), np.uint8)  # background (0, 0, 0)
    rgb[:3] = (1, 2, 3)  # 30 px
    rgb[5, :5] = (9, 9, 9)  # 5 px
    path = _save(tmp_path / "odd.png", rgb)
    with pytest.raises(ImageDecodeError) as info:
        _one(path).read(0, "pascal_voc")
    msg = str(info.value)
    assert str(path) in msg
    assert "2 colour(s)" in msg
    assert msg.index("(1, 2, 3): 30 px") < msg.index("(9, 9, 9): 5 px")
    assert "colors='ignore'" in msg
    out = _one(path).read(0, "pascal_voc", colors="ignore")
    assert_array_equal(np.unique(out), [0, 255])
    assert (out[:3] == 255).all()
    assert (out[5, :5] == 255).all()


def test_grey_as_rgb_gets_a_hint(tmp_path):
    grey = np.repeat(np.arange(30, dtype=np.uint8).reshape(5, 6)[..., None], 3, axis=2)
    with pytest.raises(ImageDecodeError, match="r == g == b"):
        _one(_save(tmp_path / "g.png", grey)).read(0, "pascal_voc")


def test_ambiguous_colour_raises_naming_ids(tmp_path):
    spec = LabelSpec(
        "clash", ("a", "b"), ignore=(255,),
        raw=(RawLabel(1, "a1", 0, (10, 0, 0)), RawLabel(2, "b1", 1, (10, 0, 0)),
             RawLabel(3, "void", None, (0, 0, 0))),
    )  # fmt: skip
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[0] = (10, 0, 0)  # raw 1 -> class 0 and raw 2 -> class 1: two evaluated classes
    path = _save(tmp_path / "amb.png", rgb)
    with pytest.raises(ImageDecodeError) as info:
        _one(path).read(0, spec)
    msg = str(info.value)
    assert "(10, 0, 0) (4 px)" in msg
    assert "raw id 1 'a1'" in msg
    assert "raw id 2 'b1'" in msg
    assert str(path) in msg
    out = _one(path).read(0, spec, colors="ignore")
    assert (out == 255).all()


def test_cityscapes_pole_colour_decodes_to_pole(tmp_path):
    # (153, 153, 153) is pole (17 -> class 5) and polegroup (18 -> ignored): a colour mask
    # cannot tell them apart; the evaluated class wins
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[0] = (153, 153, 153)
    out = _one(_save(tmp_path / "pole.png", rgb)).read(0, "cityscapes")
    assert (out[0] == 5).all()
    assert (out[1:] == 255).all()


def test_shared_colour_of_one_class_is_not_ambiguous(tmp_path):
    spec = LabelSpec(
        "two", ("a", "b"), ignore=(255,),
        raw=(RawLabel(1, "a1", 0, (10, 0, 0)), RawLabel(2, "a2", 0, (10, 0, 0)),
             RawLabel(3, "b", 1, (0, 10, 0)), RawLabel(4, "void", None, (0, 0, 0))),
    )  # fmt: skip
    rgb = np.array([[(10, 0, 0), (0, 10, 0), (0, 0, 0)]], dtype=np.uint8)
    assert_array_equal(_one(_save(tmp_path / "s.png", rgb)).read(0, spec), [[0, 1, 255]])


def test_colour_image_needs_a_spec_with_colours(tmp_path):
    path = _save(tmp_path / "c.png", np.zeros((2, 2, 3), np.uint8))
    with pytest.raises(ImageDecodeError, match="no label spec was given"):
        _one(path).read(0)
    with pytest.raises(ImageDecodeError, match="'ade20k' has no colours"):
        _one(path).read(0, "ade20k")


def test_ignored_colour_without_ignore_value(tmp_path):
    spec = LabelSpec(
        "x", ("a",), raw=(RawLabel(0, "a", 0, (1, 1, 1)), RawLabel(1, "v", None, (0, 0, 0)))
    )
    path = _save(tmp_path / "c.png", np.zeros((2, 2, 3), np.uint8))
    with pytest.raises(ImageDecodeError, match="no ignore value"):
        _one(path).read(0, spec)


# -- finding and naming files -----------------------------------------------------------------
def test_find_pairs_cityscapes_layout(tmp_path):
    gt_dir, res = _cityscapes(tmp_path, n=2)
    (res / "sub").mkdir()
    (res / "aachen_000000_000019_pred.png").rename(res / "sub" / "aachen_000000_000019_x.png")
    gt, pred = find_pairs(gt_dir, res, layout="cityscapes")
    want = tuple(f"{c}_000000_{19 + f:06d}" for c in CITIES for f in range(2))
    assert gt.names == pred.names == want
    assert gt.paths[0].endswith("val/aachen/aachen_000000_000019_gtFine_labelIds.png")
    assert pred.paths[0].endswith("sub/aachen_000000_000019_x.png")
    # other gtFine files (colour, instance ids) are not picked up by the default pattern
    _save(
        gt_dir / "val" / "aachen" / "aachen_000000_000019_gtFine_color.png",
        np.zeros((2, 2), np.uint8),
    )
    assert find_pairs(gt_dir, res, layout="cityscapes")[0].names == want


def test_find_pairs_cityscapes_duplicate_prediction(tmp_path):
    gt_dir, res = _cityscapes(tmp_path, n=1)
    _save(res / "again" / "bonn_000000_000019_other.png", np.zeros((2, 2), np.uint8))
    with pytest.raises(NamingError) as info:
        find_pairs(gt_dir, res, layout="cityscapes")
    msg = str(info.value)
    assert "'bonn_000000_000019'" in msg
    assert "bonn_000000_000019_pred.png" in msg
    assert "again/bonn_000000_000019_other.png" in msg


def test_plain_names_are_relative_paths(tmp_path):
    for rel in ("a/x.png", "a/y.png", "b/x.png"):
        _save(tmp_path / "gt" / rel, np.zeros((2, 2), np.uint8))
        _save(tmp_path / "pred" / rel, np.zeros((2, 2), np.uint8))
    _save(tmp_path / "pred" / "c.png", np.zeros((2, 2), np.uint8))  # extra: not decided here
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred")
    assert gt.names == ("a/x", "a/y", "b/x")
    assert pred.names == ("a/x", "a/y", "b/x", "c")


def test_regex_names_both_sides(tmp_path):
    _save(tmp_path / "gt" / "img_001_label.tif", np.zeros((2, 2), np.uint8))
    _save(tmp_path / "pred" / "run3" / "img_001_out.png", np.zeros((2, 2), np.uint8))
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred", gt_pattern="*.tif",
                          pred_pattern="*.png", regex=r"(?P<name>img_\d+)_")  # fmt: skip
    assert gt.names == pred.names == ("img_001",)
    one = png_set(tmp_path / "pred", regex=r"(?P<name>[^/]+)_out\.png$")
    assert one.names == ("img_001",)
    keyed = png_set(tmp_path / "pred", key=lambda rel: rel.replace("/", "-"))
    assert keyed.names == ("run3-img_001_out.png",)


def test_naming_errors(tmp_path):
    _save(tmp_path / "gt" / "a.png", np.zeros((2, 2), np.uint8))
    _save(tmp_path / "gt" / "b.png", np.zeros((2, 2), np.uint8))
    with pytest.raises(NamingError, match="no group named 'name'"):
        png_set(tmp_path / "gt", regex=r"(\w+)")
    with pytest.raises(NamingError, match="invalid"):
        png_set(tmp_path / "gt", regex=r"(?P<name>")
    with pytest.raises(NamingError, match=r"1 of 2 file\(s\).*\['b\.png'\]"):
        png_set(tmp_path / "gt", regex=r"(?P<name>a)")
    with pytest.raises(NamingError, match="occur more than once"):
        png_set(tmp_path / "gt", regex=r"(?P<name>png)")
    with pytest.raises(NamingError, match="get no image name"):
        png_set(tmp_path / "gt", layout="cityscapes")
    assert issubclass(NamingError, StoreLayoutError)


def test_missing_folder_and_no_match(tmp_path):
    with pytest.raises(MaskNotFoundError, match="does not exist"):
        png_set(tmp_path / "nope")
    _save(tmp_path / "gt" / "a.tif", np.zeros((2, 2), np.uint8))
    with pytest.raises(MaskNotFoundError, match=r"no file matches '\*\.png'.*1 \.tif"):
        find_pairs(tmp_path / "gt", tmp_path / "gt")
    with pytest.raises(FileNotFoundError):
        png_set(tmp_path / "gt" / "a.tif")


# -- ingest -----------------------------------------------------------------------------------
def test_ingest_stack_round_trip(tmp_path):
    gt_dir, res = _cityscapes(tmp_path)
    gt, pred = find_pairs(gt_dir, res, layout="cityscapes")
    out = tmp_path / "s.zarr"
    summary = ingest(gt, pred, out, workers=3, progress=False)
    assert summary["layout"] == "stack"
    assert summary["shape"] == [24, 40]
    assert summary["gt"]["images"] == summary["pred"]["images"] == 6
    assert summary["gt"]["dtype"] == "uint8"
    assert summary["unmatched"] == {"gt": 0, "pred": 0}
    assert summary["bytes"] > 0
    for side, ps in (("gt", gt), ("pred", pred)):
        ms = open_masks(out, side)
        assert ms.layout == "stack"
        assert ms.names == ps.names
        assert ms.dtype == np.uint8
        import zarr

        assert_array_equal(zarr.open_array(out, path=side, mode="r")[...], _stack(ps))
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_ingest_chunks_and_wide_dtypes(tmp_path):
    import zarr

    small = np.arange(20 * 30, dtype=np.uint16).reshape(20, 30) % 200  # 16-bit file, small ids
    wide = small + 1000
    _save(tmp_path / "a" / "x.png", small)
    _save(tmp_path / "b" / "x.png", wide)
    summary = ingest(png_set(tmp_path / "a"), png_set(tmp_path / "b"), tmp_path / "o.zarr",
                     chunks=(8, 16), progress=False)  # fmt: skip
    assert summary["gt"]["dtype"] == "uint8"
    assert summary["pred"]["dtype"] == "uint16"
    g = zarr.open_array(tmp_path / "o.zarr", path="gt", mode="r")
    assert g.chunks == (1, 8, 16)
    assert_array_equal(g[0], small)
    assert_array_equal(zarr.open_array(tmp_path / "o.zarr", path="pred", mode="r")[0], wide)


def test_ingest_negative_npy_gets_a_signed_dtype(tmp_path):
    _save(tmp_path / "g" / "x.npy", np.array([[-1, 0], [3, 4]], dtype=np.int64))
    summary = ingest(png_set(tmp_path / "g", "*.npy"), None, tmp_path / "o.zarr", progress=False)
    assert summary["gt"]["dtype"] == "int8"
    assert summary["pred"] is None
    assert open_masks(tmp_path / "o.zarr", "gt").dtype == np.int8


def test_ingest_group_layout(tmp_path):
    import zarr

    rng = np.random.default_rng(5)
    sizes = {"a/x": (10, 12), "a/y": (7, 9), "b/x": (10, 12)}
    for name, shape in sizes.items():
        _save(tmp_path / "gt" / f"{name}.png", rng.integers(0, 21, shape, dtype=np.uint8))
        _save(tmp_path / "pred" / f"{name}.png", rng.integers(0, 21, shape, dtype=np.uint8))
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred")
    out = tmp_path / "g.zarr"
    summary = ingest(gt, pred, out, chunks=(4, 100), progress=False)
    assert summary["layout"] == "group"
    assert summary["shape"] is None
    assert summary["n_shapes"] == 2
    for side, ps in (("gt", gt), ("pred", pred)):
        ms = open_masks(out, side)
        assert ms.layout == "group"
        assert ms.names == ("a/x", "a/y", "b/x")  # image names, not the sanitised array names
        assert ms.names == ps.names
        assert [ms.image_shape(i) for i in range(3)] == list(sizes.values())
        grp = zarr.open_group(out, path=side, mode="r")
        assert grp.attrs["segiou"]["original_names"]["a__x"] == "a/x"
        assert grp["a__y"].chunks == (4, 9)
        for i in range(3):
            assert_array_equal(grp[ms.names[i].replace("/", "__")][...], ps.read(i))


def test_ingest_group_layout_refuses_reserved_array_names(tmp_path):
    _save(tmp_path / "gt" / "zarr.json.png", np.zeros((4, 4), np.uint8))
    _save(tmp_path / "gt" / "b.png", np.zeros((4, 5), np.uint8))
    with pytest.raises(NamingError, match=r"\['zarr.json'\] cannot be Zarr array names"):
        ingest(png_set(tmp_path / "gt"), None, tmp_path / "o.zarr", progress=False)
    assert not (tmp_path / "o.zarr").exists()


def test_ingest_colour_images(tmp_path):
    spec = builtin_spec("pascal_voc")
    ids = np.random.default_rng(6).integers(0, 21, (2, 8, 8))
    for i in range(2):
        _save(tmp_path / "gt" / f"{i}.png", ids[i].astype(np.uint8), "P")
        _save(tmp_path / "pred" / f"{i}.png", np.array(spec.colors, np.uint8)[ids[i]])
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred")
    summary = ingest(gt, pred, tmp_path / "o.zarr", spec="pascal_voc", progress=False)
    assert summary["pred"]["colour_images"] == 2
    assert summary["gt"]["colour_images"] == 0
    import zarr

    assert_array_equal(zarr.open_array(tmp_path / "o.zarr", path="pred", mode="r")[...], ids)


def test_failed_ingest_leaves_nothing(tmp_path):
    _save(tmp_path / "gt" / "a.png", np.zeros((4, 4), np.uint8))
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[0, 0] = (7, 7, 8)
    _save(tmp_path / "pred" / "a.png", rgb)
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred")
    with pytest.raises(ImageDecodeError, match=r"pred/a\.png.*\(7, 7, 8\): 1 px"):
        ingest(gt, pred, tmp_path / "o.zarr", spec="pascal_voc", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gt", "pred"]
    with pytest.raises(ImageDecodeError, match="no label spec was given"):
        ingest(gt, pred, tmp_path / "o.zarr", progress=False)


def test_ingest_overwrite_rules(tmp_path):
    _save(tmp_path / "gt" / "a.png", np.ones((4, 4), np.uint8))
    gt = png_set(tmp_path / "gt")
    out = tmp_path / "o.zarr"
    ingest(gt, None, out, progress=False)
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        ingest(gt, None, out, progress=False)
    _save(tmp_path / "gt" / "a.png", np.full((4, 4), 2, np.uint8))
    ingest(png_set(tmp_path / "gt"), None, out, progress=False, overwrite=True)
    assert int(np.asarray(__import__("zarr").open_array(out, path="gt", mode="r")[0, 0, 0])) == 2
    real = Path.replace

    def fail_into_out(self: Path, target: Path) -> Path:
        if Path(target) == out and ".partial-" in self.name:
            msg = "disk says no"
            raise OSError(msg)
        return real(self, target)

    _save(tmp_path / "gt" / "a.png", np.full((4, 4), 3, np.uint8))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "replace", fail_into_out)
        with pytest.raises(OSError, match="disk says no"):
            ingest(png_set(tmp_path / "gt"), None, out, progress=False, overwrite=True)
    assert int(np.asarray(__import__("zarr").open_array(out, path="gt", mode="r")[0, 0, 0])) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gt", "o.zarr"]  # nothing left over
    precious = tmp_path / "precious"
    _save(precious / "keep.txt.npy", np.zeros(1))
    with pytest.raises(StoreExistsError, match="not a Zarr store"):
        ingest(gt, None, precious, progress=False, overwrite=True)
    assert (precious / "keep.txt.npy").exists()
    with pytest.raises(MaskNotFoundError, match="holds no images"):
        ingest(PngSet((), ()), None, tmp_path / "e.zarr", progress=False)


def test_ingest_to_a_url(tmp_path):
    pytest.importorskip("fsspec")
    _save(tmp_path / "gt" / "a.png", np.arange(12, dtype=np.uint8).reshape(3, 4))
    gt = png_set(tmp_path / "gt")
    url = f"memory://{tmp_path.name}/o.zarr"
    summary = ingest(gt, gt, url, progress=False)
    assert summary["bytes"] is None
    assert open_masks(url, "pred").names == ("a",)
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        ingest(gt, None, url, progress=False)
    assert ingest(gt, None, url, progress=False, overwrite=True)["pred"] is None


# -- end to end: ingested store evaluated with Dask == eager counting of the same arrays --------
@pytest.mark.parametrize("shapes", ["equal", "mixed"])
def test_evaluate_ingested_store_equals_eager(tmp_path, shapes):
    gt_dir, res = _cityscapes(tmp_path, n=2)
    if shapes == "mixed":
        rng = np.random.default_rng(9)
        name = "bonn_000000_000020"
        _save(
            gt_dir / "val" / "bonn" / f"{name}_gtFine_labelIds.png",
            rng.integers(0, 34, (16, 20), np.uint8),
        )
        _save(res / f"{name}_pred.png", rng.integers(0, 34, (16, 20), np.uint8))
    gt, pred = find_pairs(gt_dir, res, layout="cityscapes")
    out = tmp_path / "cs.zarr"
    assert ingest(gt, pred, out, progress=False)["layout"] == (
        "stack" if shapes == "equal" else "group"
    )
    got = evaluate_zarr(open_masks(out, "gt"), open_masks(out, "pred"), labels="cityscapes",
                        gt_ids="raw", scheduler="synchronous")  # fmt: skip
    want = ConfusionMatrix("cityscapes", gt_ids="raw")
    for i in range(len(gt)):
        want.update(gt.read(i), pred.read(i), key=gt.names[i])
    assert_array_equal(got.counts, want.counts)
    assert_array_equal(got.void, want.void)
    assert got.n_ignored == want.n_ignored
    assert got.counts.sum() > 0


# -- CLI --------------------------------------------------------------------------------------
def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="segiou")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_ingest_cityscapes(tmp_path, capsys):
    gt_dir, res = _cityscapes(tmp_path, n=1)
    out = tmp_path / "cli.zarr"
    argv = ["ingest", "--gt", str(gt_dir), "--pred", str(res), "--out", str(out),
            "--layout", "cityscapes", "--chunks", "8x20", "--workers", "2", "--quiet"]  # fmt: skip
    assert _cli(argv) == 0
    text = capsys.readouterr().out
    assert "ingested 2 gt (uint8), 2 pred (uint8)" in text
    assert "stack layout, 24x40" in text
    ms = open_masks(out, "gt")
    assert ms.names == ("aachen_000000_000019", "bonn_000000_000019")
    assert ms.arrays[0].chunks == (1, 8, 20)
    with pytest.raises(StoreExistsError):
        _cli(argv)
    assert _cli([*argv, "--overwrite"]) == 0


def test_cli_colours_gt_only_and_bad_arguments(tmp_path, capsys):
    spec = builtin_spec("pascal_voc")
    _save(tmp_path / "gt" / "a.png", np.array(spec.colors, np.uint8)[np.eye(3, dtype=int)])
    out = str(tmp_path / "o.zarr")
    assert _cli(["ingest", "--gt", str(tmp_path / "gt"), "--out", out, "--labels", "pascal_voc",
                 "--quiet"]) == 0  # fmt: skip
    assert "--gt-ids class" in capsys.readouterr().out
    for bad in (["--chunks", "8by8"], ["--chunks", "0x8"], ["--workers", "0"], ["--layout", "x"]):
        with pytest.raises(SystemExit):
            _cli(["ingest", "--gt", "g", "--out", "o", *bad])
    capsys.readouterr()
