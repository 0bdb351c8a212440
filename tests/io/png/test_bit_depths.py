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
from PIL import __version__ as _pillow_version

from segiou import ConfusionMatrix
from segiou.errors import ImageDecodeError
from segiou.io.png import find_pairs, ingest
from segiou.parallel import count_stores

_PILLOW = tuple(int(x) for x in _pillow_version.split(".")[:2])


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


def _write_tiff(path: Path, samples: np.ndarray, bits: int, photometric: int | None = 1,
                sample_format: int | tuple[int, ...] | None = None, *, endian: str = "<",
                deflate: bool = False, tags: dict[int, tuple[int, list[int]]] | None = None,
                ) -> Path:  # fmt: skip
    """A TIFF, one strip, by hand (Pillow writes no 2/4-bit one, nor these tags).

    ``samples``: H x W (grey, or palette indices with ``photometric=3``: a grey ColorMap is
    added) or H x W x C; ``bits`` per sample; ``sample_format`` the SampleFormat tag (1
    unsigned, 2 signed, or one entry each as given; absent by default, which reads as
    unsigned); ``endian`` ``"<"`` or ``">"`` (big-endian: ``MM``); ``deflate``: the strip
    compressed (Compression 8); ``tags``: more tags, or others in place of these.
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
        signed = 2 in np.atleast_1d(sample_format if sample_format is not None else 1)
        kind = "i" if signed else "u"
        strip = samples.reshape(h, w * c).astype(f"{endian}{kind}{bits // 8}").tobytes()
    if deflate:
        strip = zlib.compress(strip)
    found = {256: (4, [w]), 257: (4, [h]), 258: (3, [bits] * c), 259: (3, [8 if deflate else 1]),
             262: (3, [photometric]), 273: (4, [0]), 277: (3, [c]), 278: (4, [h]),
             279: (4, [len(strip)])}  # fmt: skip
    if sample_format is not None:
        fmts = list(sample_format) if isinstance(sample_format, tuple) else [sample_format] * c
        found[339] = (3, fmts)
    if photometric == 3:
        ramp = [v * 65535 // (2**bits - 1) for v in range(2**bits)]
        found[320] = (3, ramp * 3)
    found.update(tags or {})
    if photometric is None:  # no Photometric tag (Pillow reads grey as WhiteIsZero)
        del found[262]
    e = endian
    ifd_end = 8 + 2 + 12 * len(found) + 4
    extra = b""  # values longer than 4 bytes, after the IFD; then the strip
    ifd = struct.pack(f"{e}H", len(found))
    for tag in sorted(found):
        kind, values = found[tag]
        data = struct.pack(f"{e}{len(values)}{'H' if kind == 3 else 'I'}", *values)
        if len(data) > 4:
            data, extra = struct.pack(f"{e}I", ifd_end + len(extra)), extra + data
        ifd += struct.pack(f"{e}HHI", tag, kind, len(values)) + data.ljust(4, b"\0")
    at = ifd.index(struct.pack(f"{e}HHI", 273, 4, 1)) + 8  # the strip's offset, now known
    ifd = ifd[:at] + struct.pack(f"{e}I", ifd_end + len(extra)) + ifd[at + 4 :]
    magic = b"II*\0" if e == "<" else b"MM\0*"
    path.write_bytes(
        magic + struct.pack(f"{e}I", 8) + ifd + struct.pack(f"{e}I", 0) + extra + strip
    )
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


@pytest.mark.parametrize(("bits", "fmt", "tags", "ids"), [
    (8, (2, 2), None, [[-1, 0, 5], [-128, 127, 3]]),  # a SampleFormat entry too many
    (8, 2, {258: (3, [8, 8])}, [[-1, 0, 5], [-128, 127, 3]]),  # a BitsPerSample entry too many
    (32, (1, 1), None, [[0, 2**31, 2**32 - 1], [7, 2**31 + 5, 1]]),
])  # fmt: skip
def test_a_signed_tiff_with_more_tag_entries_than_samples_reads_its_values(
    tmp_path: Path, bits: int, fmt: tuple[int, ...] | int, tags: dict | None, ids: list[list[int]]
) -> None:
    # Pillow keeps one entry per sample (and one format where all are the same): so does segiou
    want = np.array(ids)
    path = _write_tiff(tmp_path / "a.tif", want, bits, sample_format=fmt, tags=tags)
    assert_array_equal(_decoded(path), want)


#: TIFFs whose stored ids Pillow would hand over changed: (what the message says, how written)
_MISREAD = {
    "Orientation": {"bits": 8, "tags": {274: (3, [3])}},  # Pillow: turned 180 degrees
    "Orientation 6": {"bits": 8, "tags": {274: (3, [6])}},  # Pillow: 90 degrees, size swapped
    "byte-swapped": {"bits": 16, "sample_format": 2, "endian": ">", "deflate": True},
    "byte-swapped 32": {"bits": 32, "sample_format": 2, "endian": ">", "deflate": True},
}


def _misread_ids(kw: dict) -> np.ndarray:
    ids = np.array([[0, 1, 1], [1, 0, 0]])
    if kw["bits"] >= 16:
        ids = np.array([[-1, 0, 5], [-300, 32767, 3]]) * (1000 if kw["bits"] == 32 else 1)
    elif kw["bits"] == 8:
        ids = np.array([[0, 1, 5], [255, 7, 3]])
    return ids


@pytest.mark.parametrize("case", list(_MISREAD))
def test_a_tiff_pillow_would_change_is_read_by_tifffile_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    from segiou.io.png._decode import read_header

    kw = _MISREAD[case]
    ids = _misread_ids(kw)
    path = _write_tiff(tmp_path / "a.tif", ids, **kw)
    with Image.open(path) as im:  # what Pillow hands over: not the stored ids
        pil = np.asarray(im)
        right = pil.shape == ids.shape and np.array_equal(pil.astype(np.int64), ids)
        # (Pillow before 11.1 read signed big-endian compressed samples right; segiou still
        # hands them to tifffile: which Pillow reads them right is not known at run time)
        assert not right or (case == "byte-swapped" and _PILLOW < (11, 1))
    pytest.importorskip("tifffile", reason="tifffile (segiou[tiff]) reads these TIFFs")
    got = _decoded(path)
    assert_array_equal(got, ids)  # as stored, as tifffile reads them
    assert read_header(str(path)).shape == ids.shape
    monkeypatch.setattr("segiou.io.png._decode._tifffile", lambda: None)
    for read in (_decoded, lambda p: read_header(str(p))):
        with pytest.raises(ImageDecodeError, match=rf"a\.tif: .*{case.split()[0]}.*segiou\[tiff\]"):
            read(path)


@pytest.mark.parametrize("kw", [
    {"bits": 16, "endian": ">", "deflate": True},  # unsigned big-endian compressed
    {"bits": 16, "sample_format": 2, "deflate": True},  # signed little-endian compressed
    {"bits": 16, "sample_format": 2, "endian": ">"},  # signed big-endian, not compressed
    {"bits": 16, "photometric": 0},  # WhiteIsZero of 16 bits: Pillow reads it as stored
    {"bits": 8, "tags": {274: (3, [1])}},  # the default orientation
])  # fmt: skip
def test_tiffs_pillow_reads_as_stored_are_read_by_pillow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kw: dict
) -> None:
    monkeypatch.setattr("segiou.io.png._decode._tifffile", lambda: None)  # Pillow alone
    ids = (
        np.array([[-1, 0, 5], [-300, 32767, 3]])
        if kw.get("sample_format") == 2
        else np.array([[0, 1, 5], [255, 7, 3]])
    )
    assert_array_equal(_decoded(_write_tiff(tmp_path / "a.tif", ids, **kw)), ids)


def test_ingest_of_8_bit_images_beside_negative_ids_keeps_both(tmp_path: Path) -> None:
    # the store dtype came from the images whose header can hold more than uint8 only: 255 of
    # an 8-bit PNG beside -1 of a signed TIFF gave int8, and ingest refused the PNG
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
    Image.fromarray(np.array([[0, 255]], np.uint8)).save(tmp_path / "gt" / "a.png")
    _write_tiff(tmp_path / "gt" / "b.tif", np.array([[0, -1]]), 8, sample_format=2)
    for name in ("a", "b"):
        Image.fromarray(np.array([[0, 1]], np.uint8)).save(tmp_path / "pred" / f"{name}.png")
    gt, pred = find_pairs(tmp_path / "gt", tmp_path / "pred", gt_pattern="*.*",
                          pred_pattern="*.png")  # fmt: skip
    ingest(gt, pred, tmp_path / "s.zarr", progress=False)
    a = zarr.open_array(tmp_path / "s.zarr", path="gt", mode="r")
    assert a.dtype == np.int16
    assert_array_equal(a[...], [[[0, 255]], [[0, -1]]])


@pytest.mark.parametrize("bits", [1, 8])
def test_a_whitesiszero_tiff_of_1_or_8_bits_is_refused_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bits: int
) -> None:
    # stored as they are by fax-style writers (tifffile reads them so), inverted by Pillow's
    # writer (and its reader): which one a file holds cannot be told (found by review: a mask
    # Pillow wrote and read back exactly scored mIoU 0 through tifffile)
    from segiou.io.png._decode import read_header

    ids = np.array([[0, 1, 1], [1, 0, 0]]) if bits == 1 else np.array([[0, 1, 5], [255, 7, 3]])
    stored = _write_tiff(tmp_path / "a.tif", ids, bits, photometric=0)
    pillow = tmp_path / "b.tif"
    Image.fromarray(ids.astype(bool) if bits == 1 else ids.astype(np.uint8)).save(
        pillow, tiffinfo={262: 0}
    )
    # no Photometric tag (Pillow reads WhiteIsZero), and one Pillow cannot open (SampleFormat
    # 4: tifffile reads it): refused too (found by review)
    missing = _write_tiff(tmp_path / "d.tif", ids, bits, photometric=None)
    odd = _write_tiff(tmp_path / "e.tif", ids, bits, photometric=0, sample_format=4)
    for path in (missing, *((odd,) if bits == 8 else ())):
        for read in (_decoded, lambda p: read_header(str(p))):
            with pytest.raises(ImageDecodeError, match=r"\.tif: a TIFF of WhiteIsZero"):
                read(path)
    for tifffile in (True, False):
        if not tifffile:
            monkeypatch.setattr("segiou.io.png._decode._tifffile", lambda: None)
        for path in (stored, pillow):
            for read in (_decoded, lambda p: read_header(str(p))):
                with pytest.raises(ImageDecodeError, match=r"\.tif: a TIFF of WhiteIsZero"):
                    read(path)
    ids16 = np.array([[0, 300], [65535, 7]])  # 16 bits: read as stored by both
    assert_array_equal(_decoded(_write_tiff(tmp_path / "c.tif", ids16, 16, photometric=0)), ids16)
