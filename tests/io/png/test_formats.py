"""What a mask file holds decides how it is read, not its name or Pillow's process-wide
settings: the lossy-format warning follows the file's data (JPEG bytes in a file named ``.png``
are JPEG), and a large mask is read whatever ``PIL.Image.MAX_IMAGE_PIXELS`` says (its
decompression-bomb guard), unless decoding it would not fit in memory."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, features

from segiou.cli import main
from segiou.errors import LossyMaskWarning, ResourceError
from segiou.io.png import PngSet, png_set

MASK = np.zeros((64, 64), np.uint8)
MASK[:, 32:] = 2
MASK[20:40, 10:50] = 1


def _lossy_warnings(folder: Path, pattern: str = "*.png") -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        png_set(folder, pattern, side="pred")
    return [str(w.message) for w in seen if issubclass(w.category, LossyMaskWarning)]


def test_jpeg_data_in_a_png_named_file_is_warned_about(tmp_path):
    Image.fromarray(MASK).save(tmp_path / "a.png", format="JPEG", quality=75)
    Image.fromarray(MASK).save(tmp_path / "b.png")
    (msg,) = _lossy_warnings(tmp_path)
    assert "1 of 2 mask(s)" in msg
    assert "'a.png' (JPEG data in a file named .png)" in msg


def test_lossy_webp_data_in_a_png_named_file_is_warned_about(tmp_path):
    if not features.check("webp"):
        pytest.skip("Pillow without WebP support")
    Image.fromarray(MASK).save(tmp_path / "a.png", format="WEBP", quality=60)
    (msg,) = _lossy_warnings(tmp_path)
    assert "WebP" in msg


def test_png_data_in_a_jpg_named_file_is_not_warned_about(tmp_path):
    Image.fromarray(MASK).save(tmp_path / "a.jpg", format="PNG")
    assert _lossy_warnings(tmp_path, "*.jpg") == []


def test_honestly_named_jpegs_are_still_warned_about(tmp_path):
    Image.fromarray(MASK).save(tmp_path / "a.jpg", quality=75)
    (msg,) = _lossy_warnings(tmp_path, "*.jpg")
    assert "(JPEG)" in msg
    assert "data in a file named" not in msg


def test_eval_warns_about_jpeg_named_png(tmp_path, capsys):
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
    Image.fromarray(MASK).save(tmp_path / "gt" / "a.png")
    Image.fromarray(MASK).save(tmp_path / "pred" / "a.png", format="JPEG", quality=75)
    code = main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "pred"),
                 "--labels", "3", "--bootstrap", "0", "--quiet", "--on-unexpected", "count",
                 "--scheduler", "synchronous"])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "segiou eval: warning: pred folder" in err
    assert "lossy format (JPEG)" in err


# -- large masks: Pillow's decompression-bomb guard ---------------------------------------------
def _pair(tmp_path: Path, shape: tuple[int, int] = (100, 120)) -> tuple[Path, Path]:
    mask = np.random.default_rng(0).integers(0, 3, shape).astype(np.uint8)
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
        Image.fromarray(mask).save(tmp_path / side / "a.png")
    return tmp_path / "gt", tmp_path / "pred"


def test_masks_beyond_pillows_bomb_limit_are_read(tmp_path, monkeypatch, capsys):
    """Scaled down: a limit of 2,000 px makes a 100 x 120 mask what a 13,500 x 13,500 mask
    (182 Mpx) is for the default limit (179 Mpx): refused by Image.open."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 2000)
    gt, pred = _pair(tmp_path)
    with pytest.raises(Image.DecompressionBombError):
        Image.open(gt / "a.png")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a DecompressionBombWarning
        arr = PngSet(("a",), (str(gt / "a.png"),)).read(0)
    assert arr.shape == (100, 120)
    for argv in (["eval", "--gt", str(gt), "--pred", str(pred), "--labels", "3",
                  "--bootstrap", "0", "--scheduler", "synchronous"],
                 ["ingest", "--gt", str(gt), "--pred", str(pred), "--out",
                  str(tmp_path / "s.zarr")]):  # fmt: skip
        assert main([*argv, "--quiet"]) == 0
        assert "Decompression" not in capsys.readouterr().err
    assert Image.MAX_IMAGE_PIXELS == 2000  # read, never changed


def test_masks_between_the_warning_and_the_error_limit_give_no_warning(tmp_path, monkeypatch,
                                                                        capsys):  # fmt: skip
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 8000)  # 12,000 px: Pillow would warn
    gt, pred = _pair(tmp_path)
    assert main(["eval", "--gt", str(gt), "--pred", str(pred), "--labels", "3", "--quiet",
                 "--bootstrap", "0", "--scheduler", "synchronous"]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "Decompression" not in err, err


def test_a_mask_whose_decoding_does_not_fit_in_memory_is_refused_by_name(tmp_path, monkeypatch,
                                                                         capsys):  # fmt: skip
    import segiou._resources as res

    monkeypatch.setattr(res, "_SURELY_FITS", 0)
    monkeypatch.setattr(res, "available_memory", lambda: 10_000)
    gt, pred = _pair(tmp_path)
    with pytest.raises(ResourceError, match=r"a\.png: decoding this 120 x 100 image") as info:
        PngSet(("a",), (str(gt / "a.png"),)).read(0)
    assert "(0.0 Mpx, mode L) needs about 35.2 KiB" in str(
        info.value
    )  # 3 bytes a pixel: Pillow's image, chunks, array
    code = main(["eval", "--gt", str(gt), "--pred", str(pred), "--labels", "3", "--quiet",
                 "--bootstrap", "0", "--scheduler", "synchronous"])  # fmt: skip
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("segiou eval: error: ")
    assert "a.png: decoding this" in line
