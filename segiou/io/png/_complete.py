"""Whether a label image file is complete, whatever Pillow's ``LOAD_TRUNCATED_IMAGES`` says.

Pillow refuses a truncated file unless ``PIL.ImageFile.LOAD_TRUNCATED_IMAGES`` is set, a
process-wide flag training code often sets; then it decodes what is there and leaves the rest of
the image 0, which segiou would count as class 0. segiou never changes that flag (other threads
of the process rely on it); it checks the file itself instead:

* PNG: every chunk is whole, passes its CRC, and the file reaches ``IEND`` (one read of the
  file, about 0.02 ms for a 1024 x 2048 mask); while the flag is set, the zlib stream of the
  pixel data is also inflated once to check that it is complete, undamaged and holds every row
  the header announces (about 3 ms for that mask, a quarter of Pillow's decoding).
  A complete zlib stream holding fewer whole rows than the header announces (a broken
  encoder) is decoded by Pillow without a word whatever the flag says, the missing rows left 0:
  the image memory is filled with a mark before decoding (:func:`mark_png`), and only a file
  whose last written row still holds the mark afterwards (or any pixel, when interlaced) is
  inflated to count its rows (:func:`check_marked`).
* TIFF: the strips (or tiles) of the image lie inside the file; compressed TIFFs are decoded by
  libtiff, which refuses damaged data whatever the flag says.
* JPEG: Pillow marks an image it had to end early (the flag only matters there).
* WebP: its decoder refuses a truncated file whatever the flag says.

Other formats cannot be checked: while the flag is set, they are refused.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from segiou.errors import ImageDecodeError

__all__ = [
    "PngMark",
    "check_frame",
    "check_loaded",
    "check_marked",
    "check_png",
    "check_tiff",
    "mark_png",
    "tolerates_truncation",
]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_BLOCK = 1 << 20  # bytes read at a time: memory stays small for any file
_OUT = 1 << 16  # bytes inflated at a time (dropped: only completeness matters)
#: Formats whose completeness is checked here or by their decoder whatever the flag says.
_CHECKED = frozenset({"PNG", "TIFF", "JPEG", "MPO", "WEBP"})


def tolerates_truncation() -> bool:
    """Whether Pillow currently decodes truncated files (``ImageFile.LOAD_TRUNCATED_IMAGES``)."""
    from PIL import ImageFile

    return bool(ImageFile.LOAD_TRUNCATED_IMAGES)


def _incomplete(path: str, what: str) -> ImageDecodeError:
    msg = (
        f"{path}: cannot decode the file as a label image: {what}. The file is incomplete or "
        "damaged (cut short while it was written, copied or downloaded?); its missing pixels "
        "would be counted as 0. Replace the file"
    )
    return ImageDecodeError(msg)


def check_png(path: str, *, inflate: bool) -> None:
    """Refuse a PNG file that is cut short, damaged or malformed in a way decoders disagree on.

    Parameters
    ----------
    path : str
        A PNG file (another file is left alone).
    inflate : bool
        Also inflate the pixel data (the ``IDAT`` chunks) to check that their zlib stream is
        complete and holds every row the header announces, each starting with a valid filter
        type (Pillow checks the stream and the filters only while ``LOAD_TRUNCATED_IMAGES`` is
        off, and never the rows of a complete stream).

    Raises
    ------
    ImageDecodeError
        The file ends before its ``IEND`` chunk, a chunk fails its CRC, it has more than one
        ``IHDR`` chunk or one that is not a valid header (13 bytes; compression, filter and
        interlace methods the specification defines), its ``IDAT`` chunks are not consecutive
        (Pillow reads the first run), or (with ``inflate``) the pixel data's zlib stream is
        damaged, ends early, holds fewer bytes than the header's rows need or a row of an
        unknown filter type.
    """
    z = zlib.decompressobj() if inflate else None
    headers = 0
    rows: _Rows | None = None
    idat = "before"  # where the IDAT run is: before it, in it, after it
    with Path(path).open("rb") as f:
        if f.read(8) != _PNG_SIGNATURE:
            return
        while True:
            head = f.read(8)
            if len(head) < 8:
                raise _incomplete(path, "the PNG file ends before its IEND chunk")
            length, ctype = int.from_bytes(head[:4], "big"), head[4:]
            name = ctype.decode("latin-1")
            if length >= 1 << 31:
                raise _incomplete(path, f"chunk {name!r} has an invalid length {length}")
            if ctype in (b"DDAT", b"fdAT"):  # Pillow reads them as pixel data too
                raise _malformed(path, f"a {name} chunk (not a chunk of a still PNG, read as "
                                 "pixel data by Pillow)")  # fmt: skip
            if ctype == b"IDAT":
                if idat == "after":
                    raise _malformed(path, "its pixel data (IDAT chunks) are not consecutive "
                                     "(decoders read the first run only)")  # fmt: skip
                idat = "in"
            elif idat == "in":
                idat = "after"
            crc = zlib.crc32(ctype)
            left = length
            while left:
                block = f.read(min(left, _BLOCK))
                if not block:
                    raise _incomplete(path, f"the PNG file ends inside its chunk {name!r}")
                crc = zlib.crc32(block, crc)
                left -= len(block)
                if z is not None and ctype == b"IDAT":
                    _inflate(path, z, block, rows)
                if ctype == b"IHDR" and headers == 0:
                    rows = _Rows(path, block)  # (a chunk this small is read in one block)
            stored = f.read(4)
            if len(stored) < 4:
                raise _incomplete(path, f"the PNG file ends inside its chunk {name!r}")
            if int.from_bytes(stored, "big") != crc:
                raise _incomplete(path, f"chunk {name!r} fails its CRC check")
            if ctype == b"IHDR":
                headers += 1
                if headers > 1:  # Pillow takes the last: the depth segiou checked is the first
                    msg = (
                        f"{path}: a PNG with more than one header (IHDR) chunk, which the PNG "
                        "specification forbids (Pillow reads the last one); its ids cannot be "
                        "read for sure. Save the mask again"
                    )
                    raise ImageDecodeError(msg)
            if ctype == b"IEND":
                break
    if z is None:
        return
    if rows is not None and rows.missing():
        raise _incomplete(
            path,
            f"its pixel data stop after {rows.seen} bytes where its header's image needs "
            f"{rows.need}: rows are missing",
        )
    if rows is None and not z.eof:  # (every row there, the stream unended: Pillow reads it)
        raise _incomplete(path, "the compressed pixel data (IDAT) end before their zlib stream")


def _malformed(path: str, what: str) -> ImageDecodeError:
    msg = (
        f"{path}: cannot decode the file as a label image: {what}, which the PNG specification "
        "forbids; decoders read such files differently, so its ids cannot be read for sure. "
        "Save the mask again"
    )
    return ImageDecodeError(msg)


#: Adam7 passes: first column, first row, column step, row step.
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))  # fmt: skip
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # samples a pixel, by PNG colour type
_FILTERS = 4  # filter types 0..4 (None, Sub, Up, Average, Paeth)


class _Rows:
    """The rows an ``IHDR`` announces, checked as the inflated pixel data arrive.

    The data are runs of rows (one run, or one per non-empty Adam7 pass), each row a filter
    type byte (0..4) and its packed samples.
    """

    def __init__(self, path: str, ihdr: bytes) -> None:
        if len(ihdr) != 13:
            raise _malformed(path, f"its header chunk (IHDR) has {len(ihdr)} bytes, not 13")
        w, h = int.from_bytes(ihdr[:4], "big"), int.from_bytes(ihdr[4:8], "big")
        depth, color, method, filtering, interlace = ihdr[8:13]
        if method != 0 or filtering != 0 or interlace > 1:
            raise _malformed(path, f"its header chunk (IHDR) gives compression method {method}, "
                             f"filter method {filtering} and interlace method {interlace} "
                             "(0, 0 and 0 or 1 are defined)")  # fmt: skip
        self.path = path
        bits = depth * _CHANNELS.get(color, 0)
        passes = _ADAM7 if interlace else ((0, 0, 1, 1),)
        self.runs: list[tuple[int, int]] = []  # (bytes a row, rows)
        for x0, y0, dx, dy in passes:
            pw, ph = -(-(w - x0) // dx), -(-(h - y0) // dy)
            if pw > 0 and ph > 0 and bits:  # an empty pass has no rows at all
                self.runs.append((1 + (pw * bits + 7) // 8, ph))
        self.need = sum(size * n for size, n in self.runs)
        self.seen = 0
        self._run = 0  # the run being read, the rows left in it, the bytes read of its row
        self._rows_left = self.runs[0][1] if self.runs else 0
        self._into = 0

    def missing(self) -> bool:
        """Whether fewer bytes than the rows need arrived."""
        return self.seen < self.need

    def feed(self, data: bytes) -> None:
        """Take the next inflated bytes; refuse a row of an unknown filter type."""
        self.seen += len(data)
        view = np.frombuffer(data, np.uint8)
        i = 0
        while i < view.size and self._run < len(self.runs):
            size = self.runs[self._run][0]
            if self._into:  # finish the row begun in the bytes before
                step = min(size - self._into, view.size - i)
                i += step
                self._into = (self._into + step) % size
                if self._into == 0:
                    self._end_rows(1)
                continue
            n = min(self._rows_left, -(-(view.size - i) // size))  # rows starting here
            filters = view[i : i + n * size : size]
            if filters.size and int(filters.max()) > _FILTERS:
                k = int(np.argmax(filters > _FILTERS))
                raise _incomplete(self.path, f"a row of its pixel data has the unknown filter "
                                  f"type {int(filters[k])}")  # fmt: skip
            took = min(n * size, view.size - i)
            i += took
            self._into = took % size if took < n * size else 0
            self._end_rows(took // size)

    def _end_rows(self, n: int) -> None:
        self._rows_left -= n
        while self._rows_left == 0 and self._run < len(self.runs):
            self._run += 1
            self._rows_left = self.runs[self._run][1] if self._run < len(self.runs) else 0


def _inflate(path: str, z: Any, data: bytes, rows: _Rows | None) -> None:
    """Feed ``data`` to the decompressor, its output to ``rows`` (then dropped)."""
    try:
        while not z.eof:
            out = z.decompress(data, _OUT)
            if rows is not None:
                rows.feed(out)
            data = z.unconsumed_tail
            if not data and len(out) < _OUT:  # input used up and no output left pending
                break
    except zlib.error as err:
        raise _incomplete(path, f"the compressed pixel data (IDAT) are damaged ({err})") from err


#: The mark a PNG's image memory is filled with before decoding, by Pillow's mode: a value
#: rare in label masks (16-bit grey read as ``I`` by older Pillow: one no sample can hold).
_MARKS: dict[str, Any] = {"1": 1, "L": 254, "P": 254, "LA": (254, 254), "I;16": 65534, "I": -1,
                          "RGB": (254, 254, 254), "RGBA": (254, 254, 254, 254)}  # fmt: skip


@dataclass(frozen=True)
class PngMark:
    """The mark a PNG was filled with before decoding (see :func:`mark_png`)."""

    value: Any  # a value, or (a 1-bit PNG's last row) one value a pixel
    memory: Any  # Pillow's image memory, filled with the mark
    interlaced: bool


def mark_png(im: Any) -> PngMark | None:
    """Fill the memory Pillow is about to decode the PNG ``im`` into with a mark.

    Parameters
    ----------
    im : PIL.Image.Image
        A PNG opened by Pillow, not loaded yet.

    Returns
    -------
    PngMark or None
        The mark, for :func:`check_marked` after ``im.load()``; None for a mode without one
        (then check the rows with ``check_png(path, inflate=True)``).
    """
    value = _MARKS.get(im.mode)
    if value is None:
        return None
    from PIL import Image

    interlaced = bool(im.info.get("interlace"))
    if interlaced:  # any pixel may be left out: all are marked
        memory = Image.new(im.mode, im.size, value).im
    else:  # rows are written in order: the last row tells (filling every pixel costs Pillow
        # ~3 ms a 1024 x 2048 mask of 16 bits). The others are left as they are: every one is
        # written when the last one is, and a file whose last one is not is refused.
        blank = Image.new(im.mode, im.size, None)
        w = im.size[0]
        if im.mode == "1":  # 0, 1, 0, 1, ...: a last row all 1 is common (a road at the bottom)
            row = Image.frombytes("1", (w, 1), b"\x55" * ((w + 7) // 8))
            value = np.arange(w) % 2 == 1
        else:  # (pasting the value itself writes 0xFEFE for 65534 into I;16)
            row = Image.new(im.mode, (w, 1), value)
        blank.paste(row, (0, im.size[1] - 1))
        memory = blank.im
    im.im = memory  # Pillow decodes into the image memory it finds (of the right mode and size)
    return PngMark(value, memory, interlaced)


def check_frame(path: str, im: Any) -> None:
    """Refuse an animated PNG whose first frame leaves part of the image (Pillow sets it to 0).

    Parameters
    ----------
    path : str
        The file.
    im : PIL.Image.Image
        The PNG opened by Pillow, not loaded yet.

    Raises
    ------
    ImageDecodeError
        The frame control chunk (``fcTL``) of the image decoded gives a region other than the
        whole image.
    """
    box = im.info.get("bbox")
    if box is not None and tuple(box) != (0, 0, *im.size):
        msg = (
            f"{path}: an animated PNG (APNG) whose frame covers {tuple(box)} of its "
            f"{im.size[0]} x {im.size[1]} image; the rest would be read as 0. Save the mask "
            "as a plain PNG"
        )
        raise ImageDecodeError(msg)


def check_marked(path: str, im: Any, arr: np.ndarray, mark: PngMark | None) -> None:
    """After Pillow decoded the PNG ``im`` into ``arr``: refuse it if rows were left out.

    Rows are decoded in order (interlaced: pass by pass, the last pass over every other row),
    so a file whose data end early leaves its last row unwritten (interlaced: at least a
    pixel). Only when the mark is still there (the row really holds it, or the data ended
    early) is the file inflated to count its rows; also when Pillow did not decode into the
    marked memory, or ``mark`` is None.

    Parameters
    ----------
    path : str
        The file.
    im : PIL.Image.Image
        The decoded image.
    arr : numpy.ndarray
        Its pixels (H x W, or H x W x channels), as Pillow returned them.
    mark : PngMark or None
        What :func:`mark_png` returned before decoding.

    Raises
    ------
    ImageDecodeError
        The pixel data hold fewer rows than the header announces.
    """
    if mark is not None and im.im is mark.memory and arr.size:
        same = np.equal(arr if mark.interlaced else arr[-1:], mark.value)
        if same.ndim == 3:
            same = same.all(axis=-1)
        if not (same.any() if mark.interlaced else same.all()):
            return  # every row was written
    check_png(path, inflate=True)


def check_tiff(path: str, im: Any) -> None:
    """Refuse a TIFF whose image data (strips or tiles) run past the end of the file.

    Parameters
    ----------
    path : str
        The file.
    im : PIL.Image.Image
        The file opened by Pillow (its first page's tags are read).

    Raises
    ------
    ImageDecodeError
        The strips or tiles end beyond the file's last byte.
    """
    tags = im.tag_v2
    offsets, counts = tags.get(273) or tags.get(324), tags.get(279) or tags.get(325)
    if not offsets or not counts:
        return
    offsets = offsets if isinstance(offsets, tuple) else (offsets,)
    counts = counts if isinstance(counts, tuple) else (counts,)
    end = max(int(o) + int(c) for o, c in zip(offsets, counts, strict=False))
    size = Path(path).stat().st_size
    if end > size:
        raise _incomplete(
            path, f"the TIFF file has {size} bytes, but its image data run to byte {end}"
        )


def check_loaded(path: str, im: Any, tolerant: bool) -> None:
    """After Pillow decoded ``im``: refuse it when Pillow had to end it early.

    Parameters
    ----------
    path : str
        The file.
    im : PIL.Image.Image
        The decoded image.
    tolerant : bool
        Whether ``LOAD_TRUNCATED_IMAGES`` was set at any time around the decoding.

    Raises
    ------
    ImageDecodeError
        A JPEG that Pillow completed with an end marker of its own (the file ended early), or,
        while ``tolerant``, a format whose completeness cannot be checked.
    """
    if not tolerant:
        return  # Pillow refused a truncated file itself
    if getattr(im, "_ended", False):  # JpegImageFile: data ran out, an EOI marker was made up
        raise _incomplete(path, "the JPEG file ends before its image data do")
    if im.format not in _CHECKED:
        msg = (
            f"{path}: cannot tell whether this {im.format} file is complete: PIL's "
            "ImageFile.LOAD_TRUNCATED_IMAGES is set in this process, so the decoder would fill "
            "what is missing with 0. Save masks as PNG or TIFF, or run segiou where the flag "
            "is not set (e.g. the segiou command)"
        )
        raise ImageDecodeError(msg)
