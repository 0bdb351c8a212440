"""A PNG whose zlib stream is complete but holds fewer rows than its header announces (a broken
encoder) is refused by name. Pillow decodes it without a word whatever
``ImageFile.LOAD_TRUNCATED_IMAGES`` says and leaves the missing rows 0, which would be counted as
class 0. segiou fills the image memory with a mark before decoding and counts the rows of a file
whose mark survives; the same file, every row there, decodes exactly."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from PIL import Image, ImageFile

from segiou.errors import ImageDecodeError
from segiou.io.png import _complete
from segiou.io.png._decode import decode_file

#: Adam7 passes: first column, first row, column step, row step (the PNG specification).
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]  # fmt: skip
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _rows(a: np.ndarray, depth: int) -> list[bytes]:
    """Filtered rows (filter byte 0) of samples ``a`` (H x W or H x W x channels)."""
    out = []
    for row in a.reshape(a.shape[0], -1).astype(np.uint64):
        if depth == 16:
            data = row.astype(">u2").tobytes()
        elif depth == 8:
            data = row.astype(np.uint8).tobytes()
        else:  # packed, first sample in the high bits
            per = 8 // depth
            pad = np.zeros(-(-row.size // per) * per, np.uint64)
            pad[: row.size] = row
            shifts = np.arange(per - 1, -1, -1, dtype=np.uint64) * np.uint64(depth)
            data = (pad.reshape(-1, per) << shifts).sum(axis=1).astype(np.uint8).tobytes()
        out.append(b"\0" + data)
    return out


def png_bytes(a: np.ndarray, depth: int = 8, color: int = 0, *, interlaced: bool = False,
              drop_rows: int = 0, extra: bytes = b"") -> bytes:  # fmt: skip
    """A PNG of samples ``a``, its complete zlib stream missing its last ``drop_rows`` rows.

    Interlaced (Adam7): the rows are those of the passes, in order; the last pass covers every
    other row of the image.
    """
    h, w = a.shape[:2]
    if interlaced:
        parts = [a[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7]
        rows = [r for part in parts if part.size for r in _rows(part, depth)]
    else:
        rows = _rows(a, depth)
    raw = b"".join(rows[: len(rows) - drop_rows]) + extra
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, int(interlaced))
    plte = _chunk(b"PLTE", bytes(range(3 * 16))) if color == 3 else b""
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + plte
            + _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b""))  # fmt: skip


@pytest.fixture(params=[False, True], ids=["flag-off", "flag-on"])
def flag(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", request.param)
    return bool(request.param)


def _samples(depth: int, color: int, shape: tuple[int, int], seed: int = 0) -> np.ndarray:
    hi = {1: 2, 2: 4, 4: 16, 8: 200, 16: 60000}[depth] if color != 3 else 16
    c = CHANNELS[color]
    return np.random.default_rng(seed).integers(0, hi, shape if c == 1 else (*shape, c))


# grey 1/2/8/16 bits, RGB, grey + alpha, RGBA, palette (each a mode with its own mark)
KINDS = [(8, 0), (1, 0), (2, 0), (16, 0), (8, 2), (8, 4), (8, 6), (8, 3)]


@pytest.mark.parametrize(("depth", "color"), KINDS)
@pytest.mark.parametrize("interlaced", [False, True], ids=["sequential", "adam7"])
@pytest.mark.parametrize("drop", [1, 3])
def test_a_complete_stream_of_too_few_rows_is_refused(tmp_path, flag, depth, color, interlaced,
                                                     drop):  # fmt: skip
    a = _samples(depth, color, (13, 11))
    path = tmp_path / "a.png"
    path.write_bytes(png_bytes(a, depth, color, interlaced=interlaced, drop_rows=drop))
    # Pillow itself decodes it without a word (the rows missing are left as they were)
    with Image.open(io.BytesIO(path.read_bytes())) as im:
        im.load()
    with pytest.raises(ImageDecodeError, match="rows are missing") as info:
        decode_file(str(path))
    assert str(path) in str(info.value)
    path.write_bytes(png_bytes(a, depth, color, interlaced=interlaced))  # every row there
    assert decode_file(str(path)).shape[:2] == (13, 11)


@pytest.mark.parametrize("interlaced", [False, True], ids=["sequential", "adam7"])
def test_a_mask_holding_the_mark_itself_decodes_exactly(tmp_path, flag, interlaced):
    """The mark is a value like any other: a last row (or pixels) of it is counted as such."""
    a = np.random.default_rng(1).integers(0, 255, (17, 9)).astype(np.uint8)
    a[-1] = 254  # the last row all of the 8-bit mark
    a[3, 4] = 254
    path = tmp_path / "a.png"
    path.write_bytes(png_bytes(a, interlaced=interlaced))
    assert_array_equal(decode_file(str(path)), a)
    binary = (a % 2).astype(bool)
    binary[-1] = True  # 1-bit: the mark is 1
    Image.fromarray(binary).save(tmp_path / "b.png")
    assert_array_equal(decode_file(str(tmp_path / "b.png")), binary)


def test_the_last_row_holding_the_mark_is_told_from_a_missing_one(tmp_path):
    a = np.full((6, 5), 254, np.uint8)
    path = tmp_path / "a.png"
    path.write_bytes(png_bytes(a, drop_rows=1))
    with pytest.raises(ImageDecodeError, match="hold 30 bytes where its header's image needs 36"):
        decode_file(str(path))


def test_rows_are_counted_when_pillow_does_not_decode_into_the_marked_memory(tmp_path,
                                                                            monkeypatch):  # fmt: skip
    """A Pillow that made its own image memory: the mark proves nothing, the rows are counted."""
    a = _samples(8, 0, (12, 7))
    path = tmp_path / "a.png"
    path.write_bytes(png_bytes(a, drop_rows=2))
    real = _complete.mark_png

    def unused(im):  # marks a memory Pillow then does not decode into
        mark = real(im)
        im.im = Image.new(im.mode, im.size, 0).im
        return mark

    monkeypatch.setattr("segiou.io.png._decode.mark_png", unused)
    with pytest.raises(ImageDecodeError, match="rows are missing"):
        decode_file(str(path))
    monkeypatch.setattr("segiou.io.png._decode.mark_png", lambda im: None)  # a mode without one
    with pytest.raises(ImageDecodeError, match="rows are missing"):
        decode_file(str(path))
    path.write_bytes(png_bytes(a))
    assert_array_equal(decode_file(str(path)), a)


def test_extra_bytes_past_the_last_row_are_left_alone(tmp_path, flag):
    """More data than the rows need changes no pixel (Pillow stops at the last row)."""
    a = _samples(8, 0, (5, 6))
    path = tmp_path / "a.png"
    path.write_bytes(png_bytes(a, extra=b"\0" + bytes(6)))
    assert_array_equal(decode_file(str(path)), a)


@pytest.mark.parametrize(("w", "h"), [(1, 1), (1, 9), (9, 1), (3, 5), (8, 8), (17, 2)])
def test_the_raw_size_of_every_adam7_shape(w, h):
    """Against rows written pass by pass (a pass with no column or no row has no rows)."""
    a = _samples(8, 0, (h, w))
    for interlaced in (False, True):
        data = png_bytes(a, interlaced=interlaced)
        ihdr = data[16:29]
        assert _complete._raw_size(ihdr) == len(zlib.decompress(data[41 : data.index(b"IEND") - 8]))
