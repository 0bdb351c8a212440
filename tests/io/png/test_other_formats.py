"""Mask files in formats other than PNG and TIFF: read as stored, or refused by name.

Pillow changes the values of some formats and variants as it decodes them (a PBM's bits
inverted, a Netpbm file of another maximum value scaled, an SGI file of 16 bits cut to 8, an
RLE BMP's skipped pixels and a GIF's uncovered screen set to 0); a mask there would be counted
as other classes without a word. So would a PNG whose first chunk is not its header (its depth
unseen) or one with two headers (Pillow reads the last), and a damaged ``.npy`` header ended in a
traceback that did not name the file.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from PIL import Image

from segiou.errors import ImageDecodeError
from segiou.io.png._decode import decode_file, read_header
from segiou.parallel import count_stores

IDS = np.array([[0, 1, 2, 7], [3, 4, 5, 6], [1, 1, 0, 2]], np.uint8)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png(chunks: list[bytes]) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + b"".join(chunks) + _chunk(b"IEND", b"")


def _ihdr(w: int, h: int, depth: int, color: int) -> bytes:
    return _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 0))


def _bmp_rle8(ids: np.ndarray) -> bytes:
    """An 8-bit BMP compressed with RLE8 (grey palette), a run per pixel; bottom row first."""
    h, w = ids.shape
    data = b""
    for row in ids[::-1]:
        data += b"".join(bytes([1, int(v)]) for v in row) + b"\x00\x00"
    data += b"\x00\x01"
    palette = b"".join(bytes([v, v, v, 0]) for v in range(256))
    offset = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 8, 1, len(data), 2835, 2835, 256, 0)
    return b"BM" + struct.pack("<IHHI", offset + len(data), 0, 0, offset) + info + palette + data


def _bmp_2_colours(ids: np.ndarray) -> bytes:
    """An 8-bit BMP whose palette has two entries (black, white): Pillow reads it as 1 bit."""
    h, w = ids.shape
    rows = b"".join(np.pad(r, (0, -w % 4)).astype(np.uint8).tobytes() for r in ids[::-1])
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 8, 0, len(rows), 0, 0, 2, 0)
    palette = bytes([0, 0, 0, 0, 255, 255, 255, 0])
    offset = 14 + 40 + len(palette)
    return b"BM" + struct.pack("<IHHI", offset + len(rows), 0, 0, offset) + info + palette + rows


def _tga_grey16(ids: np.ndarray) -> bytes:
    """A TGA of 16-bit grey (no alpha bits), top row first: Pillow reads it as grey + alpha."""
    h, w = ids.shape
    head = struct.pack("<BBBHHBHHHHBB", 0, 0, 3, 0, 0, 0, 0, 0, w, h, 16, 0x20)
    return head + ids.astype("<u2").tobytes()


def _gif_on_larger_screen(path: Path) -> None:
    """A GIF whose one image covers a corner of its logical screen only."""
    Image.fromarray(IDS).save(path)
    data = bytearray(path.read_bytes())
    assert data[:6] in (b"GIF87a", b"GIF89a")
    data[6:10] = struct.pack("<HH", IDS.shape[1] + 3, IDS.shape[0] + 2)  # the screen's size
    path.write_bytes(bytes(data))


def _refused(path: Path, what: str) -> None:
    for read in (decode_file, read_header):
        with pytest.raises(ImageDecodeError, match=rf"{path.name}: .*{what}"):
            read(str(path))


@pytest.mark.parametrize(
    ("name", "write", "what"),
    [
        ("a.pbm", lambda p: p.write_bytes(b"P4\n4 3\n" + np.packbits(IDS % 2, axis=1).tobytes()),
         "PBM .*inverts"),
        ("a.pgm", lambda p: p.write_bytes(b"P5\n4 3\n19\n" + IDS.tobytes()),
         "maximum value 19.*scales"),
        ("a.ppm", lambda p: p.write_bytes(b"P6\n4 3\n65535\n" + bytes(72)),
         "maximum value 65535"),
        ("a.sgi", lambda p: Image.fromarray(IDS).save(p), "SGI format"),
        ("a.bmp", lambda p: p.write_bytes(_bmp_rle8(IDS)), "RLE-compressed BMP"),
        ("a.gif", _gif_on_larger_screen, "does not cover its whole screen"),
        ("b.bmp", lambda p: p.write_bytes(_bmp_2_colours(IDS % 2)), "BMP of 8 bits .* at most 2 palette colours"),
        ("a.tga", lambda p: p.write_bytes(_tga_grey16(IDS.astype("<u2") * 300)), "16-bit grey"),
        ("a.png", lambda p: p.write_bytes(_png([
            _chunk(b"tEXt", b"k\0v"), _ihdr(4, 1, 4, 0),
            _chunk(b"IDAT", zlib.compress(b"\0\x01\x23"))])), "first chunk is not its header"),
    ],
)  # fmt: skip
def test_files_whose_values_pillow_would_change_are_refused(tmp_path, name, write, what):
    path = tmp_path / name
    write(path)
    _refused(path, what)


def test_a_png_with_two_headers_is_refused(tmp_path):
    # Pillow reads the last header (4 bits: scaled to 0..255); segiou checked the first (8)
    path = tmp_path / "a.png"
    path.write_bytes(_png([_ihdr(4, 1, 8, 0), _ihdr(4, 1, 4, 0),
                           _chunk(b"IDAT", zlib.compress(b"\0\x01\x23"))]))  # fmt: skip
    with pytest.raises(ImageDecodeError, match=r"a\.png: .*more than one header"):
        decode_file(str(path))


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("a.pgm", lambda p: p.write_bytes(b"P5\n4 3\n255\n" + IDS.tobytes())),
        ("b.pgm", lambda p: p.write_bytes(b"P2\n4 3\n255\n" + " ".join(map(str, IDS.ravel())).encode())),
        ("c.pgm", lambda p: p.write_bytes(b"P5\n4 3\n65535\n" + IDS.astype(">u2").tobytes())),
        ("a.bmp", lambda p: Image.fromarray(IDS).save(p)),
        ("a.gif", lambda p: Image.fromarray(IDS).save(p)),
        ("a.tga", lambda p: Image.fromarray(IDS).save(p)),
        ("b.tga", lambda p: Image.fromarray(IDS).save(p, compression="tga_rle")),
        ("a.pcx", lambda p: Image.fromarray(IDS).save(p)),
    ],
)  # fmt: skip
def test_files_pillow_reads_as_stored_are_read(tmp_path, name, write):
    path = tmp_path / name
    write(path)
    assert_array_equal(decode_file(str(path)), IDS)
    assert read_header(str(path)).shape == IDS.shape


def test_a_pbm_ground_truth_is_refused_end_to_end(tmp_path):
    # a bilevel mask saved as PBM: class 1 was counted as 0 and 0 as 1 (Pillow: 1 is black)
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
    (tmp_path / "gt" / "a.pbm").write_bytes(b"P4\n4 3\n" + np.packbits(IDS % 2, axis=1).tobytes())
    Image.fromarray(IDS % 2).save(tmp_path / "pred" / "a.png")
    with pytest.raises(ImageDecodeError, match=r"a\.pbm: a PBM"):
        count_stores(tmp_path / "gt", tmp_path / "pred", labels=2, gt_pattern="*.pbm",
                     pred_pattern="*.png", scheduler="synchronous")  # fmt: skip


@pytest.mark.parametrize(
    "data",
    [b"", b"\x93NUMPY\x01\x00\x10\x00{'descr': '<u1',",
     b"\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': "
     b"(18446744073709551616, 1), }" + b" " * 42 + b"\n"],
)  # fmt: skip
def test_a_damaged_npy_is_refused_naming_it(tmp_path, data):
    path = tmp_path / "a.npy"
    path.write_bytes(data)
    for read in (decode_file, read_header):
        with pytest.raises(ImageDecodeError, match=r"a\.npy: cannot decode the file"):
            read(str(path))


def test_ingest_of_ids_no_integer_type_holds_says_so(tmp_path):
    from segiou.io.png import find_pairs, ingest

    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
    np.save(tmp_path / "gt" / "a.npy", np.array([[0, 2**64 - 1]], np.uint64))
    np.save(tmp_path / "gt" / "b.npy", np.array([[0, -1]], np.int8))
    for name in ("a", "b"):
        np.save(tmp_path / "pred" / f"{name}.npy", np.zeros((1, 2), np.uint8))
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred", gt_pattern="*.npy",
                          pred_pattern="*.npy")  # fmt: skip
    with pytest.raises(ImageDecodeError, match=r"gt images .* from -1 to 18446744073709551615: no"):
        ingest(gt, pred, tmp_path / "s.zarr", progress=False)
