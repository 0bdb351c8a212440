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


def _big(path, monkeypatch, compression: str = "tiff_lzw"):
    """A valid TIFF past Pillow's limit (lowered to 1000 px in this process for the test)."""
    Image.fromarray((np.arange(64 * 64) % 5).astype(np.uint8).reshape(64, 64)).save(
        path, "TIFF", compression=compression
    )
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    return str(path)


def _no_codecs_tifffile(monkeypatch, calls: list[str]):
    """tifffile without imagecodecs, as segiou uses it: headers read, LZW pixels refused.

    (The venv has no tifffile; this stand-in raises what tifffile 2026.3 raises.)
    """
    import types

    import segiou.io.png._decode as dec

    class _Page:
        shape, dtype = (64, 64), np.dtype(np.uint8)

    class _File:
        pages = (_Page(),)

        def __init__(self, p):
            calls.append(p)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def imread(p):
        calls.append(p)
        msg = "<COMPRESSION.LZW: 5> requires the 'imagecodecs' package"
        raise ValueError(msg)

    monkeypatch.setattr(dec, "_tifffile", lambda: types.SimpleNamespace(TiffFile=_File,
                                                                       imread=imread))  # fmt: skip


def test_the_advice_names_imagecodecs_which_lzw_needs(tmp_path, monkeypatch):
    import segiou.io.png._decode as dec

    path = _big(tmp_path / "big.tif", monkeypatch)
    monkeypatch.setattr(dec, "_tifffile", lambda: None)  # no tifffile installed
    with pytest.raises(ImageDecodeError, match=r"big\.tif: Pillow's TIFF reader refuses") as info:
        decode_file(path)
    assert "tifffile and imagecodecs" in str(info.value)
    assert "segiou[tiff]" in str(info.value)


def test_tifffile_without_imagecodecs_says_to_install_it_not_to_replace_the_file(
    tmp_path, monkeypatch
):
    calls: list[str] = []
    path = _big(tmp_path / "big.tif", monkeypatch)
    _no_codecs_tifffile(monkeypatch, calls)
    with pytest.raises(ImageDecodeError, match=r"big\.tif: tifffile cannot decode") as info:
        decode_file(path)
    assert "Install imagecodecs" in str(info.value)
    assert "Replace or remove" not in str(info.value)
    assert calls


def test_the_tiff_extra_installs_what_lzw_and_deflate_need():
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).parents[3] / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("run from a source checkout (pyproject.toml)")
    extra = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["tiff"]
    assert {req.split(">")[0].split("=")[0] for req in extra} >= {"tifffile", "imagecodecs"}


@pytest.mark.parametrize("name", ["big.png", "big"])
def test_tiff_data_under_another_name_reaches_tifffile(tmp_path, monkeypatch, name):
    # TIFF is told by its first bytes (II*\0, MM\0*): under a .png name it was never handed to
    # tifffile, and the message kept saying to install it
    calls: list[str] = []
    path = _big(tmp_path / name, monkeypatch)
    _no_codecs_tifffile(monkeypatch, calls)
    with pytest.raises(ImageDecodeError, match="tifffile cannot decode"):
        decode_file(path)
    assert calls == [path]  # (its header is Pillow's; its pixels were handed to tifffile)


def test_a_file_that_is_not_tiff_data_is_not_handed_to_tifffile(tmp_path, monkeypatch):
    calls: list[str] = []
    path = tmp_path / "x.tif"
    path.write_bytes(b"not a TIFF, named .tif")
    _no_codecs_tifffile(monkeypatch, calls)
    with pytest.raises(ImageDecodeError, match="cannot decode the file as a label image"):
        decode_file(str(path))
    assert calls == []
