"""What a mask file holds decides how it is read, not its name: the lossy-format warning
follows the file's data (JPEG bytes in a file named ``.png`` are JPEG)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, features

from segiou.cli import main
from segiou.errors import LossyMaskWarning
from segiou.io.png import png_set

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
