"""Decode one label image file (PNG, TIFF, NPY) to a 2-D integer mask, or colours."""

from __future__ import annotations

import importlib
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from segiou._resources import check_memory
from segiou.errors import (
    ImageDecodeError,
    MaskNotFoundError,
    ResourceError,
)
from segiou.io.png._complete import (
    check_frame,
    check_loaded,
    check_marked,
    check_png,
    check_tiff,
    mark_png,
    tolerates_truncation,
)
from segiou.io.png._open import check_decode_memory, open_image

__all__ = ["SHOWN", "Header", "decode_file", "read_header", "smallest_dtype"]

#: Colours / names listed in a message.
SHOWN = 20
_MODES_8 = frozenset({"1", "L", "P", "LA", "PA"})
_MODES_16 = frozenset({"I;16", "I;16L", "I;16B", "I;16N"})
_MODES_COLOR = frozenset({"RGB", "RGBA", "RGBX"})


# -- decoding ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Header:
    """What a file's header says: size, and the widest dtype its values can need."""

    shape: tuple[int, int]
    dtype: np.dtype[Any] | None  # None: colour-coded (ids through the spec's colours)


def _png_reason(path: str) -> None:
    """For a file Pillow could not decode: if it is a PNG, refuse it with segiou's own reason.

    Its chunks, header and rows are checked (:func:`check_png`, inflating): a header Pillow
    cannot identify, a row of an unknown filter type, missing rows get their own message
    rather than Pillow's. Nothing raised: Pillow's error is the reason.
    """
    try:
        check_png(path, inflate=True)
    except OSError:
        return


def _decode_failed(path: str, err: BaseException) -> ImageDecodeError:
    if isinstance(err, _PillowMisreads):  # a valid TIFF whose ids Pillow would change
        msg = (
            f"{path}: {err}; the file may well be valid, and tifffile reads its ids as stored. "
            "Install tifffile (pip install 'segiou[tiff]', which installs imagecodecs too), or "
            "save the mask as PNG"
        )
        return ImageDecodeError(msg)
    if type(err).__name__ == "DecompressionBombError":  # Pillow's TIFF reader checks it itself
        msg = (
            f"{path}: Pillow's TIFF reader refuses an image this large ({err}); the file may "
            "well be valid. Install tifffile and imagecodecs, which segiou then reads large "
            "TIFF masks with (pip install 'segiou[tiff]' installs both; imagecodecs decodes "
            "LZW and deflate), or save the mask as PNG"
        )
        return ImageDecodeError(msg)
    if isinstance(err, ValueError) and _NEEDS_CODECS in str(err):
        msg = (
            f"{path}: tifffile cannot decode this TIFF's compression without the imagecodecs "
            f"package ({err}); the file may well be valid. Install imagecodecs (pip install "
            "imagecodecs, or pip install 'segiou[tiff]', which installs both), or save the "
            "mask as PNG"
        )
        return ImageDecodeError(msg)
    msg = (
        f"{path}: cannot decode the file as a label image ({type(err).__name__}: {err}); "
        f"expected a label image ({_READ}). Replace or remove the file, or narrow "
        "the file pattern"
    )
    return ImageDecodeError(msg)


#: What tifffile says of a compression it needs imagecodecs for (LZW, deflate, ...):
#: ``ValueError("<COMPRESSION.LZW: 5> requires the 'imagecodecs' package")``.
_NEEDS_CODECS = "requires the 'imagecodecs' package"


def _not_2d(path: str, found: str) -> ImageDecodeError:
    msg = (
        f"{path}: {found}; expected one H x W label image (or H x W x 3/4 colours). Save "
        "one mask per file"
    )
    return ImageDecodeError(msg)


def _tifffile() -> Any:
    try:
        return importlib.import_module("tifffile")  # optional: segiou[tiff]
    except ImportError:
        return None


#: The first bytes of a TIFF file (little-, big-endian) and of a BigTIFF file.
_TIFF_MAGIC = (b"II*\0", b"MM\0*", b"II+\0", b"MM\0+")


def _is_tiff(path: str) -> bool:
    """Whether the file holds TIFF data, by its first bytes (not its name, which can lie)."""
    try:
        with Path(path).open("rb") as f:
            return f.read(4) in _TIFF_MAGIC
    except OSError:
        return False


def _int_shape(path: str, shape: Any, ndim: int | None = None) -> tuple[int, ...]:
    """Return ``shape`` as a tuple of ints (``ndim`` of them if given), or refuse the file.

    A damaged TIFF directory can give a size of ``()`` or bytes (tifffile, Pillow), which
    reached messages as it was.
    """
    items = tuple(shape) if isinstance(shape, tuple | list) else None
    if (
        items is None
        or len(items) != (ndim or len(items))
        or not all(
            isinstance(n, int | np.integer) and not isinstance(n, bool) and n >= 0 for n in items
        )
    ):
        err = ValueError(f"the header gives the size {shape!r}, which is not a size")
        raise _decode_failed(path, err)
    return tuple(int(n) for n in items)


def _array_kind(path: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Header:
    """Header of an array file (``.npy``, tifffile): 2-D ints, or H x W x 3/4 colours."""
    shape = _int_shape(path, shape)
    if len(shape) == 3 and shape[2] == 1:
        shape = shape[:2]
    if len(shape) == 3 and shape[2] in (3, 4) and dtype == np.uint8:
        return Header((shape[0], shape[1]), None)
    if len(shape) != 2:
        raise _not_2d(path, f"array of shape {shape}")
    if dtype.kind not in "biu":
        msg = (
            f"{path}: dtype {dtype} is not an integer label type; masks must hold class or raw "
            "ids (convert the array with astype)"
        )
        raise ImageDecodeError(msg)
    return Header((shape[0], shape[1]), np.dtype(np.uint8) if dtype.kind == "b" else dtype)


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _pil_errors() -> tuple[type[BaseException], ...]:
    """Return what Pillow raises for a file it cannot read.

    Also the size guard some of its plugins apply themselves (``DecompressionBombError``, not
    an ``OSError``), and the ``TypeError`` its TIFF reader raises for a damaged directory
    (``Missing dimensions``, from ``n_frames`` or ``seek``).
    """
    from PIL.Image import DecompressionBombError

    return (OSError, ValueError, SyntaxError, TypeError, DecompressionBombError)


#: PNG colour types Pillow reads lossily at 16 bits (it keeps each sample's high byte).
_PNG_LOSSY_16 = {2: "RGB", 4: "grey + alpha", 6: "RGBA"}


def _png_depth(path: str, im: Any) -> tuple[int, int]:
    """Bit depth and colour type of a PNG file, from its IHDR chunk; ``(8, -1)`` for others.

    A TIFF of 2 or 4 bits a sample (which Pillow scales to 0..255 as well) is refused here.
    """
    if im.format == "TIFF":
        bits = im.tag_v2.get(258, (8,))
        bits = bits if isinstance(bits, tuple) else (bits,)
        grey = im.tag_v2.get(262, 1) in (0, 1)  # (a palette's indices are read as they are)
        scaled = grey and any(b not in (1, 8, 16, 32) for b in bits)
        if scaled or (16 in bits and len(bits) > 1):
            what = "grey of " if scaled else f"{len(bits)} samples of "
            msg = (
                f"{path}: a TIFF of {what}{'/'.join(map(str, bits))} bits; its values cannot be "
                "read exactly (the decoder scales them, or keeps each sample's high byte). Save "
                "ids as grey of 8, 16 or 32 bits, colours as 8-bit RGB"
            )
            raise ImageDecodeError(msg)
    if im.format != "PNG":
        return 8, -1
    with Path(path).open("rb") as f:
        head = f.read(26)
    if len(head) < 26 or head[:8] != _PNG_SIGNATURE or head[12:16] != b"IHDR":
        # Pillow reads such a file (and the last of several IHDRs): its depth would go unseen
        msg = (
            f"{path}: a PNG whose first chunk is not its header (IHDR), which the PNG "
            "specification requires; its bit depth cannot be told for sure. Save the mask again"
        )
        raise ImageDecodeError(msg)
    return head[24], head[25]


def _check_png_depth(path: str, depth: int, color: int) -> None:
    """Refuse PNGs whose label values Pillow cannot hand over exactly."""
    if depth == 16 and color in _PNG_LOSSY_16:
        msg = (
            f"{path}: a 16-bit {_PNG_LOSSY_16[color]} PNG; its values cannot be read exactly "
            "(the decoder keeps each sample's high byte only). Save ids as 8- or 16-bit grey "
            "without alpha, colours as 8-bit RGB"
        )
        raise ImageDecodeError(msg)


def _pil_kind(
    path: str, mode: str, size: tuple[int, int], frames: int, png: tuple[int, int] = (8, -1)
) -> Header:
    width, height = _int_shape(path, size, 2)
    shape = (height, width)
    if frames > 1:
        raise _not_2d(path, f"{frames} frames/pages")
    _check_png_depth(path, *png)
    if mode in _MODES_8:
        return Header(shape, np.dtype(np.uint8))
    if mode in _MODES_16:
        return Header(shape, np.dtype(np.uint16))
    if mode == "I":
        return Header(shape, np.dtype(np.int32))
    if mode in _MODES_COLOR:
        return Header(shape, None)
    supported = sorted(_MODES_8 | _MODES_16 | _MODES_COLOR | {"I"})
    msg = (
        f"{path}: image mode {mode!r} is not a label image mode; expected one of {supported} "
        "(grey or palette ids, 16/32-bit ids, or RGB colours)"
    )
    raise ImageDecodeError(msg)


def _tiff_samples(im: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """BitsPerSample and SampleFormat of a TIFF, as Pillow reads them (one per sample).

    Pillow keeps the first ``SamplesPerPixel`` bit depths and one sample format where every
    sample's is the same: ``(8, 8)`` bits or ``(2, 2)`` formats of a one-sample image are
    read as ``(8,)`` and ``(2,)``.
    """

    def tag(number: int, default: int) -> tuple[int, ...]:
        v = im.tag_v2.get(number, (default,))
        return tuple(v) if isinstance(v, tuple | list) else (v,)

    spp = tag(277, 1)[0]
    bits, fmt = tag(258, 1)[: max(1, spp)], tag(339, 1)
    if len(set(fmt)) == 1:
        fmt = fmt[:1]
    return bits, fmt


def _tiff_sign(im: Any, head: Header) -> Header:
    """Give a TIFF whose ids Pillow reads with the wrong sign its own dtype in ``head``.

    Pillow reads signed 8-bit grey (SampleFormat 2) as ``uint8`` (-1 became 255, the usual
    ignore value) and unsigned 32-bit grey as ``int32`` (2**31 became negative); both keep
    the file's bytes, so a view of the decoded pixels as ``int8`` / ``uint32`` is exact.
    """
    if im.format != "TIFF" or head.dtype is None:
        return head
    bits, fmt = _tiff_samples(im)
    if im.mode == "L" and bits == (8,) and fmt == (2,):
        return Header(head.shape, np.dtype(np.int8))
    if im.mode == "I" and bits == (32,) and fmt == (1,):
        return Header(head.shape, np.dtype(np.uint32))
    return head


#: Pillow formats whose label values are read as stored (JPEG and WebP are lossy: warned about
#: by the folder listing); others (PBM inverted, FITS without its offset, SGI of 16 bits cut to
#: 8, ...) are refused by name.
_FORMATS = frozenset({"PNG", "TIFF", "JPEG", "MPO", "WEBP", "BMP", "DIB", "GIF", "PPM", "TGA",
                      "PCX"})  # fmt: skip


#: Why a TIFF of WhiteIsZero grey of 1 or 8 bits is refused, whichever decoder reads it.
_WHITE_IS_ZERO = (
    "a TIFF of WhiteIsZero grey (Photometric 0, or no Photometric tag), whose ids writers store "
    "either as they are or inverted (Pillow inverts them on writing and on reading, libtiff's "
    "fax-style writers do not): which one this file holds cannot be told"
)
#: What :func:`_check_format` reads, for messages.
_READ = "PNG, TIFF, BMP, GIF, TGA, PCX, Netpbm and .npy; JPEG and WebP with a warning"


def _first_bytes(path: str, n: int) -> bytes:
    """Read the first ``n`` bytes of a file, zero-padded to ``n`` (a shorter file)."""
    with Path(path).open("rb") as f:
        return f.read(n).ljust(n, b"\0")


def _bmp_bits(head: bytes) -> int:
    """Bits per pixel of a BMP file from its first bytes (either header kind)."""
    info = 14 if head[:2] == b"BM" else 0  # (a DIB has no file header)
    at = info + (14 if int.from_bytes(head[info : info + 4], "little") >= 40 else 10)
    return int.from_bytes(head[at : at + 2], "little")


def _check_format(path: str, im: Any) -> None:
    """Refuse a file in a format, or a variant of one, whose values Pillow changes.

    Raises
    ------
    ImageDecodeError
        Naming the file, the reason, and what to do.
    """
    fmt, why = im.format, None
    tile = im.tile[0] if im.tile else None
    args = tile[3] if tile is not None else None
    if fmt not in _FORMATS:
        msg = (f"{path}: a file in {fmt} format, which segiou does not read label masks from (it "
               f"reads {_READ}). Save the mask as PNG")  # fmt: skip
        raise ImageDecodeError(msg)
    head = _first_bytes(path, 32)
    if fmt == "TIFF" and im.tag_v2.get(262, 0) == 0 and im.mode in ("1", "L"):
        why = _WHITE_IS_ZERO  # (no Photometric tag: Pillow reads WhiteIsZero)
    elif fmt in ("BMP", "DIB") and im.mode == "1" and (bpp := _bmp_bits(head)) != 1:
        why = f"a BMP of {bpp} bits a pixel with at most 2 palette colours, read by Pillow as 1 bit"
    elif fmt == "TGA" and im.mode == "LA" and head[16] == 16 and head[17] & 0x0F == 0:
        why = "a TGA of 16-bit grey, whose low byte Pillow reads as the grey and the high as alpha"
    elif fmt == "PPM" and im.mode == "1":
        why = "a PBM (bilevel Netpbm) file, whose bits Pillow inverts (1 is read as 0)"
    elif (fmt == "PPM" and isinstance(args, tuple) and len(args) > 1
          and args[1] != (65535 if im.mode == "I" else 255)):  # fmt: skip
        why = f"a Netpbm file of maximum value {args[1]}, to which Pillow scales its values"
    elif fmt in ("BMP", "DIB") and im.info.get("compression") in (1, 2):
        why = "an RLE-compressed BMP, whose skipped pixels Pillow sets to 0"
    elif fmt == "GIF" and tile is not None and tuple(tile[1]) != (0, 0, *im.size):
        why = "a GIF whose image does not cover its whole screen (Pillow sets the rest to 0)"
    if why is not None:
        msg = f"{path}: {why}; its ids would not be read as stored. Save the mask as PNG"
        raise ImageDecodeError(msg)


class _PillowMisreads(ValueError):
    """A TIFF whose ids Pillow would hand over changed: read by tifffile, or refused."""


def _check_pillow_reads(im: Any) -> None:
    """Refuse to let Pillow decode a TIFF whose stored ids it would change (tifffile reads it).

    Pillow turns or flips pixels by the Orientation tag (2 to 8; 5 to 8 also swap the header's
    size) and byte-swaps the signed 16- and 32-bit samples of a compressed big-endian TIFF twice.
    (WhiteIsZero grey of 1 and 8 bits is refused by :func:`_check_format`: ambiguous.)

    Raises
    ------
    _PillowMisreads
        Saying which.
    """
    if im.format != "TIFF":
        return
    bits, fmt = _tiff_samples(im)
    why = None
    if im.tag_v2.get(274, 1) not in (1, None):
        why = f"its Orientation tag is {im.tag_v2.get(274)!r}, by which Pillow turns the pixels"
    elif (getattr(im.tag_v2, "_endian", "<") == ">" and fmt[0] == 2 and bits[0] in (16, 32)
          and im.tag_v2.get(259, 1) != 1):  # fmt: skip
        why = "its signed big-endian samples are compressed, which Pillow reads byte-swapped"
    if why is not None:
        raise _PillowMisreads(why)


def read_header(path: str) -> Header:
    """Size and dtype from the header only (no pixel decoding)."""
    if path.lower().endswith(".npy"):
        arr = _load_npy(path)
        return _array_kind(path, arr.shape, arr.dtype)
    try:
        with open_image(path) as im:
            _check_format(path, im)
            png = _png_depth(path, im)
            head = _pil_kind(path, im.mode, im.size, getattr(im, "n_frames", 1), png)
            _check_pillow_reads(im)
            return _tiff_sign(im, head)
    except ImageDecodeError:
        raise
    except FileNotFoundError as err:
        msg = f"{path}: file not found; was it moved or deleted after the folder was listed?"
        raise MaskNotFoundError(msg) from err
    except _pil_errors() as err:
        tf = _tifffile() if _is_tiff(path) else None
        if tf is None:
            raise _decode_failed(path, err) from err
        try:
            with tf.TiffFile(path) as f:
                if len(f.pages) > 1:
                    raise _not_2d(path, f"{len(f.pages)} TIFF pages") from None
                page = f.pages[0]
                photometric = getattr(page, "photometric", 1)
                if photometric == 0 and int(getattr(page, "bitspersample", 16)) <= 8:
                    msg = (f"{path}: {_WHITE_IS_ZERO}; its ids would not be read as stored. Save "
                           "the mask as PNG")  # fmt: skip
                    raise ImageDecodeError(msg)
                return _array_kind(path, tuple(page.shape), np.dtype(page.dtype))
        except ImageDecodeError:
            raise
        except Exception as err2:
            raise _decode_failed(path, err2) from err2


def _load_npy(path: str) -> np.ndarray:
    try:
        arr: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError as err:
        msg = f"{path}: file not found; was it moved or deleted after the folder was listed?"
        raise MaskNotFoundError(msg) from err
    except (OSError, ValueError, EOFError, OverflowError, SyntaxError, tokenize.TokenError) as err:
        raise _decode_failed(path, err) from err  # (an empty or damaged header, a huge shape)
    return arr


def decode_file(path: str) -> np.ndarray:
    """Pixels of one file: a 2-D integer array, or H x W x 3/4 ``uint8`` colours."""
    if path.lower().endswith(".npy"):
        arr = _load_npy(path)
        head = _array_kind(path, arr.shape, arr.dtype)
        arr = arr.reshape(*head.shape, -1) if head.dtype is None else arr.reshape(head.shape)
        if arr.dtype.kind == "b":
            return arr.view(np.uint8)
        return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))
    tolerant = tolerates_truncation()  # Pillow's process-wide flag: read, never changed
    try:
        with open_image(path) as im:
            _check_format(path, im)
            png = _png_depth(path, im)
            plain = _pil_kind(path, im.mode, im.size, getattr(im, "n_frames", 1), png)
            _check_pillow_reads(im)
            head = _tiff_sign(im, plain)
            check_decode_memory(path, im.mode, im.size)
            mark = None
            if im.format == "PNG":
                check_frame(path, im)
                check_png(path, inflate=tolerant)  # inflated: its rows are counted too
                mark = mark_png(im)
            elif im.format == "TIFF":
                check_tiff(path, im)
            im.load()
            if not tolerant and tolerates_truncation():  # set by another thread meanwhile
                tolerant = True
                if im.format == "PNG":
                    check_png(path, inflate=True)
            check_loaded(path, im, tolerant)
            arr = np.asarray(im)
            if im.format == "PNG":  # pixels Pillow left unwritten (a stream of too few rows)
                check_marked(path, im, arr, mark)
            if head is not plain and head.dtype is not None:  # a TIFF Pillow reads with the
                # wrong sign: the same bytes
                arr = arr.astype(arr.dtype.newbyteorder("="), copy=False).view(head.dtype)
        if png[1] == 0 and png[0] in (2, 4):  # grey of 2/4 bits: Pillow scales to 0..255
            arr = arr // np.uint8(255 // (2 ** png[0] - 1))
    except (ImageDecodeError, ResourceError):
        raise
    except FileNotFoundError as err:
        msg = f"{path}: file not found; was it moved or deleted after the folder was listed?"
        raise MaskNotFoundError(msg) from err
    except MemoryError as err:  # the memory was checked first: a limit of Pillow's decoder
        _png_reason(path)
        msg = (
            f"{path}: Pillow could not decode this mask (MemoryError: rows this wide pass its "
            "decoder's limits, or memory ran out meanwhile). Cut the mask into tiles, or save "
            "it as .npy"
        )
        raise ResourceError(msg) from err
    except _pil_errors() as err:
        tf = _tifffile() if _is_tiff(path) else None
        if tf is None:
            _png_reason(path)
            raise _decode_failed(path, err) from err
        head = read_header(path)
        px = int(np.prod(head.shape)) * (4 if head.dtype is None else head.dtype.itemsize)
        where = f"{path}: decoding this {head.shape[1]} x {head.shape[0]} TIFF"
        check_memory(2 * px, where, "Free memory, or cut the mask into tiles")
        try:
            arr = np.asarray(tf.imread(path))
        except Exception as err2:
            raise _decode_failed(path, err2) from err2
        arr = _as_header_says(path, arr, head)
    if arr.ndim == 3 and head.dtype is not None:  # LA / PA: the id is the first channel
        arr = arr[..., 0]
    if arr.dtype.kind == "b":
        arr = arr.astype(np.uint8)
    elif not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def _as_header_says(path: str, arr: np.ndarray, head: Header) -> np.ndarray:
    """Return the fallback decoder's pixels, or refuse the file if they disagree with its header.

    They must have the shape and kind (ids or colours) the header gives: of a damaged TIFF,
    Pillow can read a 20 x 24 grey header where tifffile decodes 20 x 24 x 2 (reshaping it
    was a traceback).
    """
    try:
        got: Header | None = _array_kind(path, arr.shape, arr.dtype)
    except ImageDecodeError:
        got = None
    if got is None or got.shape != head.shape or (got.dtype is None) != (head.dtype is None):
        err = ValueError(
            f"the TIFF decoder gave an array of shape {arr.shape} and dtype {arr.dtype}, where "
            f"the header gives {head.shape[0]} x {head.shape[1]} "
            f"{'colours' if head.dtype is None else 'ids'}"
        )
        raise _decode_failed(path, err)
    return arr if head.dtype is None else arr.reshape(head.shape)  # drops an H x W x 1's last axis


def smallest_dtype(lo: int, hi: int) -> np.dtype[Any]:
    kinds = (np.uint8, np.uint16, np.uint32, np.uint64) if lo >= 0 else (
        np.int8, np.int16, np.int32, np.int64)  # fmt: skip
    for t in kinds:
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return np.dtype(t)
    return np.dtype(np.int64)
