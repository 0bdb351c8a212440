"""Truncated or damaged label images are refused by name, whatever Pillow's process-wide
``ImageFile.LOAD_TRUNCATED_IMAGES`` says (training code often sets it; Pillow then leaves the
missing rows 0, which would be counted as class 0). segiou reads the flag, never changes it."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from PIL import Image, ImageFile

from segiou.errors import ImageDecodeError
from segiou.io.png import PngSet
from segiou.parallel import count_stores

MASK = np.random.default_rng(0).integers(1, 5, (120, 90)).astype(np.uint8)


@pytest.fixture(params=[False, True], ids=["flag-off", "flag-on"])
def flag(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", request.param)
    return bool(request.param)


def _read(path: Path) -> np.ndarray:
    return PngSet((path.stem,), (str(path),), str(path.parent)).read(0)


def _chunk(ctype: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(ctype + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", crc)


def _png(mask: np.ndarray, stream: bytes | None = None, idat_size: int = 0) -> bytes:
    """A grey 8-bit PNG of ``mask`` (``stream``: its zlib stream instead), IDATs of a size."""
    h, w = mask.shape
    raw = b"".join(b"\x00" + row.tobytes() for row in mask)
    data = zlib.compress(raw) if stream is None else stream
    size = idat_size or len(data)
    idats = b"".join(_chunk(b"IDAT", data[i : i + size]) for i in range(0, len(data), size))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + idats + _chunk(b"IEND", b"")


def _refused(path: Path, match: str = "cannot decode") -> str:
    with pytest.raises(ImageDecodeError, match=match) as info:
        _read(path)
    assert str(path) in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_a_truncated_png_is_refused_whatever_the_flag(tmp_path, flag, keep):
    path = tmp_path / "a.png"
    Image.fromarray(MASK).save(path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    _refused(path)
    assert ImageFile.LOAD_TRUNCATED_IMAGES is flag  # read, never changed


def test_a_png_cut_right_before_iend_is_refused(tmp_path, flag):
    path = tmp_path / "a.png"
    path.write_bytes(_png(MASK)[:-12])  # the pixels are all there, IEND is not
    _refused(path, "IEND")


def test_a_png_with_a_damaged_idat_is_refused(tmp_path, flag):
    path = tmp_path / "a.png"
    data = bytearray(_png(MASK))
    data[len(data) // 2] ^= 0x10  # one bit flipped in the pixel data
    path.write_bytes(bytes(data))
    _refused(path)


def test_a_png_whose_zlib_stream_ends_early_is_refused(tmp_path, flag):
    """Chunks whole, CRCs right, IEND there: the zlib stream itself stops short."""
    raw = b"".join(b"\x00" + row.tobytes() for row in MASK)
    stream = zlib.compress(raw)
    path = tmp_path / "a.png"
    path.write_bytes(_png(MASK, stream[: len(stream) // 2]))
    _refused(path)


@pytest.mark.parametrize("idat_size", [0, 7, 1000])
def test_complete_pngs_decode_whatever_the_flag(tmp_path, flag, idat_size):
    path = tmp_path / "a.png"
    path.write_bytes(_png(MASK, idat_size=idat_size))
    assert_array_equal(_read(path), MASK)
    Image.fromarray(MASK).save(tmp_path / "b.png")
    assert_array_equal(_read(tmp_path / "b.png"), MASK)


def test_a_truncated_uncompressed_tiff_is_refused(tmp_path, flag):
    path = tmp_path / "a.tif"
    Image.fromarray(MASK).save(path)
    assert_array_equal(_read(path), MASK)
    data = path.read_bytes()
    strip_end = data.find(MASK.tobytes()[-32:]) + 32
    path.write_bytes(data[: strip_end // 2])
    _refused(path)


def test_a_truncated_jpeg_is_refused(tmp_path, flag):
    path = tmp_path / "a.jpg"
    Image.fromarray(MASK * 60).save(path, quality=95)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    _refused(path)


def test_formats_that_cannot_be_checked_are_refused_while_the_flag_is_set(tmp_path, flag):
    path = tmp_path / "a.bmp"
    Image.fromarray(MASK).save(path)
    if not flag:
        assert_array_equal(_read(path), MASK)
    else:
        msg = _refused(path, "LOAD_TRUNCATED_IMAGES")
        assert "BMP" in msg


def test_count_stores_refuses_a_truncated_mask_with_the_flag_set(tmp_path, monkeypatch):
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
        Image.fromarray(MASK).save(tmp_path / side / "a.png")
    cut = tmp_path / "gt" / "a.png"
    cut.write_bytes(cut.read_bytes()[:-40])
    with pytest.raises(ImageDecodeError, match=r"a\.png"):
        count_stores(str(tmp_path / "gt"), str(tmp_path / "pred"), labels=5,
                     scheduler="synchronous")  # fmt: skip


def test_a_truncated_webp_is_refused_by_its_decoder(tmp_path, flag):
    from PIL import features

    if not features.check("webp"):
        pytest.skip("Pillow without WebP support")
    from segiou.io.png._decode import decode_file

    path = tmp_path / "a.webp"
    Image.fromarray(MASK).save(path, lossless=True)  # decodes to RGB: read the first channel
    assert_array_equal(decode_file(str(path))[..., 0], MASK)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ImageDecodeError, match="cannot decode"):
        decode_file(str(path))
