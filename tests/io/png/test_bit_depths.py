"""Label PNGs of every bit depth and colour type decode to the values the file holds, or are
refused by name (Pillow scales 2- and 4-bit grey to 0..255 and keeps the high byte of 16-bit
colour and grey + alpha samples: either way a label would become another one)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import zarr
from numpy.testing import assert_array_equal
from PIL import Image

from segiou import ConfusionMatrix
from segiou.errors import ImageDecodeError
from segiou.io.png import find_pairs, ingest
from segiou.parallel import count_stores


def write_png(path: Path, samples: np.ndarray, color: int, depth: int) -> Path:
    """Write ``samples`` (H x W, or H x W x channels) as a PNG of this colour type and depth.

    Written by hand (signature, IHDR, one IDAT of unfiltered rows, IEND): Pillow cannot write
    grey of 2 or 4 bits, or 16-bit grey + alpha.
    """
    h, w = samples.shape[:2]
    flat = samples.reshape(h, -1).astype(np.uint64)
    rows = []
    for row in flat:
        if depth < 8:  # pack samples into bytes, first sample in the high bits
            per = 8 // depth
            padded = np.zeros(-(-row.size // per) * per, np.uint64)
            padded[: row.size] = row
            shifts = np.arange(per - 1, -1, -1, dtype=np.uint64) * np.uint64(depth)
            data = (padded.reshape(-1, per) << shifts).sum(axis=1).astype(np.uint8).tobytes()
        elif depth == 8:
            data = row.astype(np.uint8).tobytes()
        else:
            data = row.astype(">u2").tobytes()
        rows.append(b"\0" + data)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))  # fmt: skip
    return path


def _decoded(path: Path) -> np.ndarray:
    from segiou.io.png._decode import decode_file

    return decode_file(str(path))


@pytest.mark.parametrize("depth", [1, 2, 4, 8, 16])
def test_grey_of_every_depth_decodes_to_its_samples(tmp_path: Path, depth: int) -> None:
    rng = np.random.default_rng(depth)
    ids = rng.integers(0, 2**depth, (7, 13))  # odd width: padded rows at 1, 2 and 4 bits
    got = _decoded(write_png(tmp_path / "a.png", ids, 0, depth))
    assert_array_equal(got, ids)


def test_grey_alpha_of_8_bits_decodes_to_its_grey_samples(tmp_path: Path) -> None:
    ids = np.arange(40).reshape(5, 8)
    got = _decoded(write_png(tmp_path / "a.png", np.stack([ids, ids * 0 + 255], -1), 4, 8))
    assert_array_equal(got, ids)


@pytest.mark.parametrize(("color", "channels", "what"),
                         [(4, 2, "grey \\+ alpha"), (2, 3, "RGB"), (6, 4, "RGBA")])  # fmt: skip
def test_16_bit_colour_and_grey_alpha_are_refused(tmp_path: Path, color: int, channels: int,
                                                  what: str) -> None:  # fmt: skip
    px = np.zeros((4, 6, channels), np.uint64) + np.arange(channels, dtype=np.uint64) * 300
    path = write_png(tmp_path / "gt" / "a.png", px, color, 16)
    with pytest.raises(ImageDecodeError, match=f"a.png: a 16-bit {what} PNG; its values cannot"):
        _decoded(path)
    from segiou.io.png._decode import read_header

    with pytest.raises(ImageDecodeError, match="16-bit"):
        read_header(str(path))


def test_a_4_bit_ground_truth_counts_as_the_8_bit_prediction(tmp_path: Path) -> None:
    """End to end, from the folders and from an ingested store: a 4-bit grey ground truth
    against the same labels saved in 8 bits is all correct."""
    ids = np.random.default_rng(3).integers(0, 9, (2, 8, 8))
    (tmp_path / "pred").mkdir()
    for i in range(2):
        write_png(tmp_path / "gt" / f"{i}.png", ids[i], 0, 4)
        Image.fromarray(ids[i].astype(np.uint8)).save(tmp_path / "pred" / f"{i}.png")
    want = ConfusionMatrix(9).update(ids, ids, key="a").counts
    cm = count_stores(tmp_path / "gt", tmp_path / "pred", labels=9)
    assert_array_equal(cm.counts, want)
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred")
    ingest(gt, pred, tmp_path / "s.zarr", progress=False)
    assert_array_equal(zarr.open_array(tmp_path / "s.zarr", path="gt", mode="r")[...], ids)
    cm = count_stores(tmp_path / "s.zarr" / "gt", tmp_path / "s.zarr" / "pred", labels=9)
    assert_array_equal(cm.counts, want)


def _write_tiff(path: Path, samples: np.ndarray, bits: int, photometric: int = 1,
                sample_format: int | None = None) -> Path:  # fmt: skip
    """A little-endian TIFF, one strip, no compression, by hand (Pillow writes no 2/4-bit one).

    ``samples``: H x W (grey, or palette indices with ``photometric=3``: a grey ColorMap is
    added) or H x W x C; ``bits`` per sample; ``sample_format`` the SampleFormat tag (1
    unsigned, 2 signed; absent by default, which reads as unsigned).
    """
    h, w = samples.shape[:2]
    c = 1 if samples.ndim == 2 else samples.shape[2]
    flat = samples.reshape(h, w * c).astype(np.uint64)
    if bits < 8:  # pack each row, first sample in the high bits
        per = 8 // bits
        padded = np.zeros((h, -(-w * c // per) * per), np.uint64)
        padded[:, : w * c] = flat
        shifts = np.arange(per - 1, -1, -1, dtype=np.uint64) * np.uint64(bits)
        strip = (padded.reshape(h, -1, per) << shifts).sum(axis=2).astype(np.uint8).tobytes()
    else:
        kind = "i" if sample_format == 2 else "u"
        strip = samples.reshape(h, w * c).astype(f"<{kind}{bits // 8}").tobytes()
    tags = {256: (4, [w]), 257: (4, [h]), 258: (3, [bits] * c), 259: (3, [1]),
            262: (3, [photometric]), 273: (4, [0]), 277: (3, [c]), 278: (4, [h]),
            279: (4, [len(strip)])}  # fmt: skip
    if sample_format is not None:
        tags[339] = (3, [sample_format] * c)
    if photometric == 3:
        ramp = [v * 65535 // (2**bits - 1) for v in range(2**bits)]
        tags[320] = (3, ramp * 3)
    ifd_end = 8 + 2 + 12 * len(tags) + 4
    extra = b""  # values longer than 4 bytes, after the IFD; then the strip
    ifd = struct.pack("<H", len(tags))
    for tag in sorted(tags):
        kind, values = tags[tag]
        data = struct.pack(f"<{len(values)}{'H' if kind == 3 else 'I'}", *values)
        if len(data) > 4:
            data, extra = struct.pack("<I", ifd_end + len(extra)), extra + data
        ifd += struct.pack("<HHI", tag, kind, len(values)) + data.ljust(4, b"\0")
    at = ifd.index(struct.pack("<HHI", 273, 4, 1)) + 8  # the strip's offset, now known
    ifd = ifd[:at] + struct.pack("<I", ifd_end + len(extra)) + ifd[at + 4 :]
    path.write_bytes(b"II*\0" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0) + extra + strip)
    return path


@pytest.mark.parametrize("bits", [2, 4])
def test_a_grey_tiff_of_2_or_4_bits_is_refused_a_palette_one_read(
    tmp_path: Path, bits: int
) -> None:
    ids = np.arange(12).reshape(3, 4) % 2**bits
    with Image.open(_write_tiff(tmp_path / "a.tif", ids, bits)) as im:
        assert np.asarray(im).max() > ids.max()  # what Pillow makes of grey: scaled
    with pytest.raises(ImageDecodeError, match=f"a TIFF of grey of {bits} bits"):
        _decoded(tmp_path / "a.tif")
    assert_array_equal(_decoded(_write_tiff(tmp_path / "p.tif", ids, bits, photometric=3)), ids)


def test_a_16_bit_colour_tiff_is_refused_a_16_bit_grey_one_read(tmp_path: Path) -> None:
    px = np.array([[[1, 300, 65535], [7, 7, 7]]])
    with Image.open(_write_tiff(tmp_path / "c.tif", px, 16, photometric=2)) as im:
        assert np.asarray(im)[0, 0].tolist() == [0, 1, 255]  # what Pillow makes of it
    with pytest.raises(ImageDecodeError, match="a TIFF of 3 samples of 16/16/16 bits"):
        _decoded(tmp_path / "c.tif")
    ids = np.array([[0, 300], [65535, 7]])
    assert_array_equal(_decoded(_write_tiff(tmp_path / "g.tif", ids, 16)), ids)


@pytest.mark.parametrize(("bits", "fmt", "ids"), [
    (8, 2, [[-1, 0, 5], [-128, 127, 3]]),  # Pillow: uint8 (-1 read as 255, the ignore value)
    (32, 1, [[0, 2**31, 2**32 - 1], [7, 2**31 + 5, 1]]),  # Pillow: int32 (2**31 negative)
    (32, None, [[0, 2**31, 2**32 - 1], [7, 2**31 + 5, 1]]),  # no SampleFormat: unsigned
    (16, 2, [[-1, 0, 5], [-300, 32767, 3]]),  # read exactly by Pillow already
    (32, 2, [[-1, 0, 2**31 - 1], [-(2**31), 1, 3]]),
])  # fmt: skip
def test_a_tiff_of_signed_8_or_unsigned_32_bit_ids_reads_the_values_it_holds(
    tmp_path: Path, bits: int, fmt: int | None, ids: list[list[int]]
) -> None:
    from segiou.io.png._decode import read_header

    want = np.array(ids)
    path = _write_tiff(tmp_path / "a.tif", want, bits, sample_format=fmt)
    got = _decoded(path)
    assert_array_equal(got, want)
    assert got.dtype == read_header(str(path)).dtype
    assert got.dtype.kind == ("i" if fmt == 2 else "u")


def test_a_signed_8_bit_tiff_ground_truth_reports_its_negative_ids(tmp_path: Path) -> None:
    """-128 and -1 of a signed 8-bit TIFF are unexpected values, not classes 128 and 255."""
    from segiou.errors import LabelRangeError

    ids = np.array([[-128, 3, 3], [3, -1, 3]])
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
    _write_tiff(tmp_path / "gt" / "a.tif", ids, 8, sample_format=2)
    _write_tiff(tmp_path / "pred" / "a.tif", np.full((2, 3), 3), 8)
    kw = {"labels": 150, "ignore_index": 255, "gt_pattern": "*.tif", "pred_pattern": "*.tif"}
    with pytest.raises(LabelRangeError, match=r"-128 \(1 px") as err:
        count_stores(tmp_path / "gt", tmp_path / "pred", **kw)
    assert "-1 (1 px" in str(err.value)
    cm = count_stores(tmp_path / "gt", tmp_path / "pred", on_unexpected="count", **kw)
    assert cm.counts.sum() == 4
    assert cm.counts[3, 3] == 4
