"""Whether a label image file is complete, whatever Pillow's ``LOAD_TRUNCATED_IMAGES`` says.

Pillow refuses a truncated file unless ``PIL.ImageFile.LOAD_TRUNCATED_IMAGES`` is set, a
process-wide flag training code often sets; then it decodes what is there and leaves the rest of
the image 0, which segiou would count as class 0. segiou never changes that flag (other threads
of the process rely on it); it checks the file itself instead:

* PNG: every chunk is whole, passes its CRC, and the file reaches ``IEND`` (one read of the
  file, about 0.02 ms for a 1024 x 2048 mask); while the flag is set, the zlib stream of the
  pixel data is also inflated once to check that it is complete and undamaged (about 3 ms for
  that mask, a quarter of Pillow's decoding), as Pillow does itself when the flag is off.
* TIFF: the strips (or tiles) of the image lie inside the file; compressed TIFFs are decoded by
  libtiff, which refuses damaged data whatever the flag says.
* JPEG: Pillow marks an image it had to end early (the flag only matters there).
* WebP: its decoder refuses a truncated file whatever the flag says.

Other formats cannot be checked: while the flag is set, they are refused.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from segiou.errors import ImageDecodeError

__all__ = ["check_loaded", "check_png", "check_tiff", "tolerates_truncation"]

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
    """Refuse a PNG file that is cut short or damaged.

    Parameters
    ----------
    path : str
        A PNG file (another file is left alone).
    inflate : bool
        Also inflate the pixel data (the ``IDAT`` chunks) to check that their zlib stream is
        complete: what Pillow checks only while ``LOAD_TRUNCATED_IMAGES`` is off.

    Raises
    ------
    ImageDecodeError
        The file ends before its ``IEND`` chunk, a chunk fails its CRC, it has more than one
        ``IHDR`` chunk, or (with ``inflate``) the pixel data's zlib stream is damaged or ends
        early.
    """
    z = zlib.decompressobj() if inflate else None
    headers = 0
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
            crc = zlib.crc32(ctype)
            left = length
            while left:
                block = f.read(min(left, _BLOCK))
                if not block:
                    raise _incomplete(path, f"the PNG file ends inside its chunk {name!r}")
                crc = zlib.crc32(block, crc)
                left -= len(block)
                if z is not None and ctype == b"IDAT":
                    _inflate(path, z, block)
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
    if z is not None and not z.eof:
        raise _incomplete(path, "the compressed pixel data (IDAT) end before their zlib stream")


def _inflate(path: str, z: Any, data: bytes) -> None:
    """Feed ``data`` to the decompressor, dropping the output (only completeness matters)."""
    try:
        while not z.eof:
            out = z.decompress(data, _OUT)
            data = z.unconsumed_tail
            if not data and len(out) < _OUT:  # input used up and no output left pending
                break
    except zlib.error as err:
        raise _incomplete(path, f"the compressed pixel data (IDAT) are damaged ({err})") from err


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
