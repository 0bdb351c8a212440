"""Open label image files with Pillow, without its decompression-bomb guard; check memory instead.

``PIL.Image.open`` warns about an image of more than ``Image.MAX_IMAGE_PIXELS`` (about 89 Mpx)
and refuses one of more than twice that (about 179 Mpx, a 13,500 x 13,500 orthophoto mask) as a
possible "decompression bomb": a guard for images from strangers, set process-wide. Label
masks are the user's own files, and large ones are ordinary (slides, orthophotos), so segiou
opens files through Pillow's format registry without that guard (and without changing
``MAX_IMAGE_PIXELS``, which other threads of the process rely on). What the guard protected
against, decoding more than the machine holds, is checked instead before decoding
(:func:`check_decode_memory`), naming the file, its size and the memory it needs.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from segiou._resources import check_memory

__all__ = ["check_decode_memory", "decode_bytes", "open_image"]

#: Bytes a pixel takes in Pillow's own image memory, by mode (others: 4).
_PIL_BYTES = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2}
#: Bytes a pixel takes in the array handed over, by mode (others: 4).
_ARRAY_BYTES = {"1": 1, "L": 1, "P": 1, "LA": 2, "PA": 2, "RGB": 3}
_ARRAY_BYTES.update(dict.fromkeys(("I;16", "I;16L", "I;16B", "I;16N"), 2))


@contextmanager
def open_image(path: str) -> Iterator[Any]:
    """Open ``path`` as ``PIL.Image.open`` does, minus the decompression-bomb guard.

    The format is identified as Pillow does (each registered plugin's test of the first 16
    bytes, the common plugins first); the file is closed on leaving the ``with`` block.

    Parameters
    ----------
    path : str
        An image file.

    Yields
    ------
    PIL.ImageFile.ImageFile
        The opened image (header read, pixels not decoded yet).

    Raises
    ------
    FileNotFoundError
        No such file.
    PIL.UnidentifiedImageError
        No plugin recognises the file (an ``OSError``, as from ``Image.open``).
    """
    from PIL import Image, UnidentifiedImageError

    with Path(path).open("rb") as fp:
        prefix = fp.read(16)
        im = None
        for load in (Image.preinit, Image.init):
            load()
            for fmt in list(Image.ID):
                factory, accept = Image.OPEN[fmt]
                try:  # (a 0-4 byte file: Pillow's DIB test unpacks 4 bytes; Image.open catches it)
                    found = True if accept is None else accept(prefix)
                except (struct.error, IndexError, TypeError, ValueError):
                    continue
                if not found or isinstance(found, str):  # a str: the plugin is not installed
                    continue
                fp.seek(0)
                try:
                    im = factory(fp, path)
                except (SyntaxError, IndexError, TypeError, struct.error, AttributeError):
                    # as Image.open: not this format after all (and a header that leaves a
                    # plugin half set up, as SPIDER's with an image number but no stack)
                    continue
                break
            if im is not None:
                break
        if im is None:
            msg = f"cannot identify image file {path!r}"
            raise UnidentifiedImageError(msg)
        try:
            yield im
        finally:
            im.close()


def decode_bytes(mode: str, size: tuple[int, int]) -> int:
    """Peak bytes of decoding an image of ``mode`` and ``size`` (width, height) to an array.

    Pillow's image memory, the chunks it copies the pixels out in, and the array they are
    joined into: about 3 bytes a pixel for 8-bit ids, 6 for 16-bit ids, 10 for RGB.
    """
    px = max(1, size[0]) * max(1, size[1])
    return px * (_PIL_BYTES.get(mode, 4) + 2 * _ARRAY_BYTES.get(mode, 4))


def check_decode_memory(path: str, mode: str, size: tuple[int, int]) -> None:
    """Refuse, before decoding, an image whose decoding needs more memory than is available.

    Parameters
    ----------
    path : str
        The file, for the message.
    mode : str
        Its Pillow mode.
    size : (int, int)
        Its width and height.

    Raises
    ------
    ResourceError
        Decoding would need more than the available memory (the message names the file, its
        size and the memory it needs).
    """
    w, h = size
    check_memory(
        decode_bytes(mode, size),
        f"{path}: decoding this {w} x {h} image ({w * h / 1e6:,.1f} Mpx, mode {mode})",
        "Free memory, evaluate with fewer workers at a time, or cut the mask into tiles",
    )
