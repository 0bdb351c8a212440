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
    with pytest.raises(
        ImageDecodeError,
        match="stop after 30 bytes where its header's image needs 36: rows are missing",
    ):
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
        raw = zlib.decompress(data[41 : data.index(b"IEND") - 8])
        assert _complete._Rows("a.png", ihdr).need == len(raw)


def _with_chunks(data: bytes, before_idat: bytes = b"", ihdr: bytes | None = None) -> bytes:
    """``data`` (a PNG of one IDAT) with chunks inserted before its IDAT, or another IHDR body."""
    i = data.index(b"IDAT") - 4
    if ihdr is not None:
        data = data[:8] + _chunk(b"IHDR", ihdr) + data[33:]
        i = data.index(b"IDAT") - 4
    return data[:i] + before_idat + data[i:]


IHDR_8x8 = struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 0)


@pytest.mark.parametrize(
    ("ihdr", "match"),
    [
        (struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 2), "interlace method 2"),  # Pillow: Adam7
        (struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 255), "interlace method 255"),
        (struct.pack(">IIBBBBB", 8, 8, 8, 0, 1, 0, 0), "compression method 1"),
        (struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 1, 0), "filter method 1"),  # Pillow: unknown
        (IHDR_8x8 + b"\0", "has 14 bytes, not 13"),  # Pillow reads the first 13
    ],
)
def test_a_header_decoders_disagree_on_is_refused(tmp_path, flag, ihdr, match):
    """Found by review: an interlace byte of 2 (Pillow: Adam7) or a 14-byte IHDR turned the
    row count off, and pixels never written were read as the mark."""
    a = np.full((8, 8), 3, np.uint8)
    path = tmp_path / "a.png"
    rows = [a[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7[:6]]  # passes 1-6: pass 7 missing
    short = b"".join(r for part in rows for r in _rows(part, 8))
    path.write_bytes(_with_chunks(png_bytes(a), ihdr=ihdr))
    with pytest.raises(ImageDecodeError, match=match):
        decode_file(str(path))
    data = png_bytes(a)
    i = data.index(b"IDAT") - 4
    data = data[:i] + _chunk(b"IDAT", zlib.compress(short)) + _chunk(b"IEND", b"")
    path.write_bytes(_with_chunks(data, ihdr=ihdr))
    with pytest.raises(ImageDecodeError, match=match):
        decode_file(str(path))


def _apng(a: np.ndarray, box: tuple[int, int, int, int]) -> bytes:
    """A one-frame animated PNG of ``a``'s rows in ``box`` (x, y, width, height): its IDAT is
    the first frame, which Pillow decodes into that region alone."""
    x, y, w, h = box
    actl = _chunk(b"acTL", struct.pack(">II", 1, 0))
    fctl = _chunk(b"fcTL", struct.pack(">IIIIIHHBB", 0, w, h, x, y, 1, 1, 0, 0))
    frame = png_bytes(a[y : y + h, x : x + w])
    idat = frame[frame.index(b"IDAT") - 4 : frame.index(b"IEND") - 4]
    ihdr = struct.pack(">IIBBBBB", a.shape[1], a.shape[0], 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + actl + fctl + idat
            + _chunk(b"IEND", b""))  # fmt: skip


@pytest.mark.parametrize("box", [(0, 4, 8, 4), (4, 0, 4, 8), (0, 0, 8, 4), (2, 2, 3, 3)])
def test_an_apng_whose_frame_leaves_part_of_the_image_is_refused(tmp_path, flag, box):
    """Found by review: Pillow decodes the first frame's region only and leaves the rest."""
    a = np.full((8, 8), 3, np.uint8)
    path = tmp_path / "a.png"
    path.write_bytes(_apng(a, box))
    with pytest.raises(ImageDecodeError, match=r"APNG\) whose frame covers"):
        decode_file(str(path))
    path.write_bytes(_apng(a, (0, 0, 8, 8)))  # a frame of the whole image: a plain image
    assert_array_equal(decode_file(str(path)), a)


def test_a_row_of_an_unknown_filter_type_is_refused_whatever_the_flag(tmp_path, flag):
    """Found by review: while LOAD_TRUNCATED_IMAGES is set Pillow stops at such a row silently
    (the rows after it 0); the inflating segiou does then checks every row's filter type."""
    raw = bytearray(b"".join(_rows(np.full((8, 8), 3), 8)))
    raw[9 * 5] = 7  # row 5: filter type 7
    data = png_bytes(np.zeros((8, 8), np.uint8))
    i, j = data.index(b"IDAT") - 4, data.index(b"IEND") - 4
    path = tmp_path / "a.png"
    path.write_bytes(data[:i] + _chunk(b"IDAT", zlib.compress(bytes(raw))) + data[j:])
    with pytest.raises(ImageDecodeError, match=r"a\.png: .*the unknown filter type 7"):
        decode_file(str(path))


def test_the_flag_set_while_pillow_decodes_still_refuses_rows_left_out(tmp_path, monkeypatch):
    """Found by review: another thread setting LOAD_TRUNCATED_IMAGES during decoding let
    Pillow stop early silently, the mark left in the rows after (3,466 of 5,672 decodes)."""
    raw = bytearray(b"".join(_rows(np.full((8, 8), 3), 8)))
    raw[9 * 5] = 7
    data = png_bytes(np.zeros((8, 8), np.uint8))
    i, j = data.index(b"IDAT") - 4, data.index(b"IEND") - 4
    path = tmp_path / "a.png"
    path.write_bytes(data[:i] + _chunk(b"IDAT", zlib.compress(bytes(raw))) + data[j:])
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", False)
    real = ImageFile.ImageFile.load

    def set_meanwhile(self):
        ImageFile.LOAD_TRUNCATED_IMAGES = True  # another thread, while this one decodes
        return real(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", set_meanwhile)
    with pytest.raises(ImageDecodeError, match="filter type 7"):
        decode_file(str(path))


def test_pixel_data_in_two_runs_are_refused(tmp_path, flag):
    """Found by review: IDAT, tEXt, IDAT: Pillow reads the first run (with the flag set, the
    rows of the second are left 0) while the rows segiou counted were all there."""
    a = np.full((8, 8), 3, np.uint8)
    stream = zlib.compress(b"".join(_rows(a, 8)))
    data = png_bytes(a)
    i, j = data.index(b"IDAT") - 4, data.index(b"IEND") - 4
    text = _chunk(b"tEXt", b"k\0v")
    half = len(stream) // 2
    path = tmp_path / "a.png"
    path.write_bytes(data[:i] + _chunk(b"IDAT", stream[:half]) + text
                     + _chunk(b"IDAT", stream[half:]) + data[j:])  # fmt: skip
    with pytest.raises(ImageDecodeError, match="IDAT chunks\\) are not consecutive"):
        decode_file(str(path))
    path.write_bytes(data[:i] + text + _chunk(b"IDAT", stream[:half])
                     + _chunk(b"IDAT", stream[half:]) + data[j:])  # fmt: skip
    assert_array_equal(decode_file(str(path)), a)  # one run, after other chunks: fine


def test_a_memory_error_inside_pillow_names_the_file(tmp_path, monkeypatch):
    """Found by review: a PNG of rows wider than Pillow's decoder takes (2**28 px of 8 bits)
    raised a bare MemoryError; the memory itself was checked before decoding."""
    from segiou.errors import ResourceError

    path = tmp_path / "a.png"
    path.write_bytes(png_bytes(np.zeros((2, 3), np.uint8)))

    def too_wide(self):
        raise MemoryError

    monkeypatch.setattr(ImageFile.ImageFile, "load", too_wide)
    with pytest.raises(ResourceError, match=r"a\.png: Pillow could not decode this mask"):
        decode_file(str(path))


def test_the_row_walker_finds_every_row_start_however_the_data_are_cut():
    """``_Rows`` against the rows written pass by pass, fed in random pieces (zlib hands
    inflated data over in 64 KiB pieces, cutting rows anywhere): a filter type past 4 at any
    row's start is found, bytes inside rows are never taken for one."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        depth, color = KINDS[rng.integers(len(KINDS))]
        h, w = (int(x) for x in rng.integers(1, 20, 2))
        interlaced = bool(rng.integers(2))
        a = _samples(depth, color, (h, w), seed=int(rng.integers(1 << 30)))
        data = png_bytes(a, depth, color, interlaced=interlaced)
        ihdr = data[16:29]
        if color == 3:
            data = data.replace(_chunk(b"PLTE", bytes(range(3 * 16))), b"")
        raw = bytearray(zlib.decompress(data[41 : data.index(b"IEND") - 8]))
        if interlaced:
            parts = [a[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7]
            rows = [r for part in parts if part.size for r in _rows(part, depth)]
        else:
            rows = _rows(a, depth)
        starts = np.cumsum([0] + [len(r) for r in rows[:-1]])
        raw[int(rng.choice(starts))] = 5 + int(rng.integers(251))  # one bad filter type
        if rng.integers(4) == 0:  # or none: bytes inside rows of any value
            raw = bytearray(b"".join(rows))
        bad = any(raw[s] > 4 for s in starts)
        walker = _complete._Rows("a.png", ihdr)
        cuts = sorted(int(c) for c in rng.integers(0, len(raw) + 1, int(rng.integers(0, 6))))
        pieces = [raw[i:j] for i, j in zip([0, *cuts], [*cuts, len(raw)], strict=True)]

        def feed_all(walker=walker, pieces=pieces):
            for piece in pieces:
                walker.feed(bytes(piece))

        if bad:
            with pytest.raises(ImageDecodeError, match="unknown filter type"):
                feed_all()
        else:
            feed_all()
            assert walker.seen == walker.need == len(raw)
            assert not walker.missing()


@pytest.mark.parametrize("kind", [b"DDAT", b"fdAT"])
def test_chunks_pillow_reads_as_pixel_data_are_refused_whatever_the_rows(tmp_path, flag, kind):
    """Found by review: Pillow reads DDAT and fdAT chunks inside the IDAT run as pixel data;
    segiou, counting IDAT alone, refused such a file only with the flag set or a last row of
    the mark. Refused either way now."""
    for last in (3, 254):
        a = np.full((8, 8), 3, np.uint8)
        a[-1] = last
        stream = zlib.compress(b"".join(_rows(a, 8)))
        data = png_bytes(a)
        i, j = data.index(b"IDAT") - 4, data.index(b"IEND") - 4
        path = tmp_path / "a.png"
        body = stream[10:] if kind == b"DDAT" else struct.pack(">I", 1) + stream[10:]
        path.write_bytes(data[:i] + _chunk(b"IDAT", stream[:10]) + _chunk(kind, body) + data[j:])
        with pytest.raises(ImageDecodeError, match=f"a {kind.decode()} chunk"):
            decode_file(str(path))


def test_a_stream_without_its_end_but_every_row_is_read_whatever_the_rows(tmp_path, flag):
    """Found by review: a zlib stream flushed but never ended (no final block, no checksum)
    holds every row, which Pillow decodes; segiou refused it only with the flag set or a last
    row of the mark. Read either way now; a row short is still refused."""
    for last in (3, 254):
        a = np.random.default_rng(last).integers(0, 200, (9, 7)).astype(np.uint8)
        a[-1] = last
        z = zlib.compressobj()
        raw = b"".join(_rows(a, 8))
        data = png_bytes(a)
        i, j = data.index(b"IDAT") - 4, data.index(b"IEND") - 4
        path = tmp_path / "a.png"
        stream = z.compress(raw) + z.flush(zlib.Z_SYNC_FLUSH)
        path.write_bytes(data[:i] + _chunk(b"IDAT", stream) + data[j:])
        assert_array_equal(decode_file(str(path)), a)
        z = zlib.compressobj()
        stream = z.compress(raw[:-8]) + z.flush(zlib.Z_SYNC_FLUSH)  # the last row cut short
        path.write_bytes(data[:i] + _chunk(b"IDAT", stream) + data[j:])
        with pytest.raises(ImageDecodeError, match="cannot decode"):
            decode_file(str(path))


def test_a_memory_error_on_a_file_of_missing_rows_says_the_rows_are_missing(tmp_path, flag,
                                                                            monkeypatch):  # fmt: skip
    """Found by review: a header of 2**30 columns and little data was 'rows wider than
    Pillow takes' with the flag off and 'rows are missing' with it on: the same now."""
    path = tmp_path / "a.png"
    path.write_bytes(png_bytes(np.zeros((6, 3), np.uint8), drop_rows=4))

    def too_wide(self):
        raise MemoryError

    monkeypatch.setattr(ImageFile.ImageFile, "load", too_wide)
    with pytest.raises(ImageDecodeError, match="rows are missing"):
        decode_file(str(path))


def test_a_binary_mask_whose_last_row_is_all_foreground_is_not_inflated(tmp_path, monkeypatch):
    """A 1-bit mask's last row is marked 0, 1, 0, 1, ...: a bottom row all 1 (a road) is common
    and decodes without counting rows; a row of that very pattern is counted, and exact."""
    calls = []
    real = _complete.check_png
    monkeypatch.setattr(_complete, "check_png", lambda p, *, inflate: calls.append(inflate)
                        or real(p, inflate=inflate))  # fmt: skip
    a = np.random.default_rng(3).integers(0, 2, (9, 21)).astype(bool)
    for last, inflated in ((np.ones(21, bool), False), (np.arange(21) % 2 == 1, True)):
        a[-1] = last
        Image.fromarray(a).save(tmp_path / "b.png")
        calls.clear()
        assert_array_equal(decode_file(str(tmp_path / "b.png")), a)
        assert calls == ([True] if inflated else [])
    path = tmp_path / "c.png"
    path.write_bytes(png_bytes(a.astype(np.uint8), 1, drop_rows=1))  # a row missing: refused
    with pytest.raises(ImageDecodeError, match="rows are missing"):
        decode_file(str(path))
