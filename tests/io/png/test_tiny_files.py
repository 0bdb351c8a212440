"""A mask file of 0 to 4 bytes is refused by name like any other damaged file.

Opening files through Pillow's format registry (without its decompression-bomb guard) called
each format's test outside Image.open's protection: Pillow's DIB test unpacks 4 bytes, and an
empty prediction file crashed eval and ingest with a bare struct.error (exit 1, no file).
Likewise a damaged header that Pillow answers with TypeError (a TIFF directory's entry count)
or AttributeError (a SPIDER header): a traceback, exit 1."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from PIL import Image

from segiou.cli import main
from segiou.errors import ImageDecodeError
from segiou.io.png._decode import decode_file, read_header


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4])
def test_a_tiny_file_is_refused_naming_it(tmp_path, size):
    bad = tmp_path / "x.png"
    bad.write_bytes(b"\x89PNG"[:size])
    for read in (read_header, decode_file):
        with pytest.raises(Exception, match=r"x\.png") as info:
            read(str(bad))
        assert not isinstance(info.value, struct.error)


def test_eval_with_an_empty_prediction_file_exits_2_with_one_line(tmp_path, capsys):
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
        Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / side / "a.png")
    (tmp_path / "pred" / "a.png").write_bytes(b"")
    code = main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "pred"),
                 "--labels", "3", "--quiet", "--bootstrap", "0", "--scheduler", "synchronous"])  # fmt: skip
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "a.png" in line


# -- damaged headers that Pillow answers with other exceptions than OSError/ValueError ----------
MASK = (np.arange(24 * 20) % 7).astype(np.uint8).reshape(20, 24)


def _damaged_tiff() -> bytes:
    """A TIFF whose first directory claims 10 entries, not 9 (one byte changed).

    Pillow reads its header, then raises TypeError('Missing dimensions') from ``n_frames``.
    """
    b = io.BytesIO()
    Image.fromarray(MASK).save(b, "TIFF")
    t = bytearray(b.getvalue())
    assert t[:8] == b"II*\0\x08\0\0\0"  # (the first directory at byte 8)
    assert t[8] == 9
    t[8] = 10
    return bytes(t)


def _damaged_spider() -> bytes:
    """A SPIDER file whose header gives an image number but no stack (one float changed).

    Pillow's SPIDER reader then raises AttributeError (no ``stkoffset``) while opening it.
    """
    b = io.BytesIO()
    Image.fromarray(MASK).save(b, "SPIDER")
    t = bytearray(b.getvalue())
    assert struct.unpack("<f", t[104:108]) == (0.0,)  # (header word 27: the image number)
    t[104:108] = struct.pack("<f", 1.0)
    return bytes(t)


#: What Pillow warns while reading the damaged TIFF's directory (the suite turns warnings into
#: errors); segiou's message follows it.
PILLOW_EXIF = "ignore:Corrupt EXIF data:UserWarning"


@pytest.fixture
def pillow_alone(monkeypatch):
    """Without tifffile (segiou[tiff]), which reads the damaged TIFF's pixels (next test)."""
    monkeypatch.setattr("segiou.io.png._decode._tifffile", lambda: None)


@pytest.mark.filterwarnings(PILLOW_EXIF)
def test_tifffile_reads_the_damaged_tiff_exactly_or_it_is_refused(tmp_path):
    pytest.importorskip("tifffile", reason="tifffile is not installed (segiou[tiff])")
    bad = tmp_path / "m.tif"
    bad.write_bytes(_damaged_tiff())
    refused = ""
    try:
        got = decode_file(str(bad))
    except ImageDecodeError as err:
        refused = str(err)
    if refused:
        assert "m.tif: cannot decode the file" in refused
    else:
        np.testing.assert_array_equal(got, MASK)


@pytest.mark.filterwarnings(PILLOW_EXIF)
@pytest.mark.parametrize("make", [_damaged_tiff, _damaged_spider])
def test_a_damaged_header_is_refused_naming_the_file(tmp_path, make, pillow_alone):
    bad = tmp_path / "m.tif"
    bad.write_bytes(make())
    for read in (read_header, decode_file):
        with pytest.raises(ImageDecodeError, match=r"m\.tif: cannot decode the file"):
            read(str(bad))


@pytest.mark.filterwarnings(PILLOW_EXIF)
def test_eval_with_a_damaged_tiff_exits_2_naming_it(tmp_path, capsys, pillow_alone):
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
        Image.fromarray(MASK).save(tmp_path / side / "a.tif")
    (tmp_path / "gt" / "a.tif").write_bytes(_damaged_tiff())
    code = main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "pred"),
                 "--gt-pattern", "*.tif", "--pred-pattern", "*.tif", "--labels", "7", "--quiet",
                 "--bootstrap", "0", "--scheduler", "synchronous"])  # fmt: skip
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("segiou eval: error: ")
    assert "a.tif: cannot decode the file as a label image" in line
