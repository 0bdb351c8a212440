"""A TIFF mask past Pillow's size limit: Pillow's TIFF reader applies its decompression-bomb
guard itself while loading, so without tifffile such a valid file was refused with "Replace
or remove the file". The message says what to do (install tifffile, or save it as PNG)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from segiou.errors import ImageDecodeError
from segiou.io.png._decode import decode_file


def test_a_tiff_past_pillows_limit_says_how_to_read_it(tmp_path, monkeypatch):
    import segiou.io.png._decode as dec

    path = tmp_path / "big.tif"
    Image.fromarray(np.zeros((64, 64), np.uint8)).save(path, compression="tiff_deflate")
    monkeypatch.setattr(
        Image, "MAX_IMAGE_PIXELS", 1000
    )  # the test's own process, stands for 179 Mpx
    monkeypatch.setattr(dec, "_tifffile", lambda: None)  # no tifffile installed
    with pytest.raises(ImageDecodeError, match=r"big\.tif: Pillow's TIFF reader refuses") as info:
        decode_file(str(path))
    assert "segiou[tiff]" in str(info.value)
    assert "Replace or remove" not in str(info.value)
