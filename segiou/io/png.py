"""Layer 4: folders of label images (PNG, TIFF, NPY): pair by name, decode, pack into Zarr.

A :class:`PngSet` is a small, picklable list of named image files. Each file decodes to one
2-D integer array (:meth:`PngSet.read`):

=====================  ========================================================================
file                   values
=====================  ========================================================================
``L`` / ``1``          ``uint8`` grey values are the labels
``P`` (palette)        ``uint8`` palette *index* is the label (PASCAL VOC ``SegmentationClass``)
``I;16``               ``uint16``; ``I`` (32-bit TIFF): ``int32``
``RGB`` / ``RGBA``     colour-coded: converted to ids (``ids="class"`` or ``"raw"``) by colours
``.npy``               a 2-D integer or bool array, memory-mapped (``np.load(mmap_mode="r")``)
=====================  ========================================================================

TIFF files are read with Pillow, or with ``tifffile`` (when installed) if Pillow cannot.

Colour-coded masks use the spec's raw-id colours when its raw table has colours (Cityscapes),
else its class colours (PASCAL VOC), and decode to the id space the mask is evaluated in
(``read(..., ids=...)``, default ``"class"``):

* ``ids="class"``: each colour becomes the class its ids map to, or the spec's first ignore
  value when they are all ignored.
* ``ids="raw"`` (specs with raw ids): each colour becomes a raw id that owns it. When several
  raw ids share a colour and map the same way, the smallest of them is chosen (Cityscapes
  ``(0, 0, 0)``, raw ids 0-4, all ignored, becomes 0 ``unlabeled``); a class colour becomes
  the smallest raw id of its class; "the ignore value" is the smallest ignored raw id (else the
  spec's first ignore value, which is ignored in raw-id space too).

A colour shared by one evaluated class and ignored ids is that class (Cityscapes ``pole`` and
``polegroup``, both ``(153, 153, 153)``, decode to ``pole``: a colour mask cannot tell them
apart, and cityscapesScripts draws both alike). A colour shared by ids of different evaluated
classes is ambiguous and raises when an image holds it, as does an unknown colour
(``colors="ignore"`` maps both to the ignore value instead). Evaluate a mask in the id space it
was decoded to: ``segiou eval`` assumes raw ids when the spec has them (``gt_ids="raw"``).

Image names (what pairs a prediction with its ground truth) come from the file's path relative
to the folder, with ``/`` separators: by default the path without its suffix
(``val/a/img_1.png`` -> ``val/a/img_1``); with ``layout="cityscapes"`` the
``<city>_<seq>_<frame>`` prefix of the file name (``frankfurt_000000_000294_gtFine_labelIds.png``
and a result ``frankfurt_000000_000294_pred.png`` are both ``frankfurt_000000_000294``, in any
sub-folder, as in cityscapesScripts); or the group ``(?P<name>...)`` of a regular expression
searched in the relative path.

:func:`ingest` packs one or two sets into a Zarr store (``gt`` and ``pred``, see
:mod:`segiou.io.zarr`): the ``stack`` layout when every image has one size, else the ``group``
layout, where each array is named by its image name with ``/`` replaced by ``__`` (the
original names are kept in the group attribute ``segiou.original_names``). Ingest decodes
colour images to the id space ``segiou eval`` assumes for the spec (raw ids when it has them),
records it in the root attribute ``segiou.ids`` when it is known (colour images were decoded,
or ``ids`` was given), writes every chunk (also chunks of 0s), and
compresses chunks with zstd unless told otherwise (``codec``, see :func:`parse_codec`).
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from segiou.errors import MaskNotFoundError, SegiouError, StoreLayoutError, UsageError
from segiou.labels import IdSpace, LabelSpec, load_spec

__all__ = [
    "CODEC_CHOICES",
    "ImageDecodeError",
    "NamingError",
    "PngSet",
    "StoreExistsError",
    "find_pairs",
    "ingest",
    "parse_codec",
    "png_set",
]

Colors = Literal["error", "ignore"]
FolderLayout = Literal["plain", "cityscapes"]
KeyFunc = Callable[[str], str]

#: Name of an image in the Cityscapes convention: ``<city>_<seq>_<frame>`` at the start.
CITYSCAPES_NAME = r"^(?P<name>.+?_\d{6}_\d{6})(?=[_.]|$)"
_CITYSCAPES_GT_PATTERN = "*_gtFine_labelIds.png"
_GROUP_SEP = "__"
_MODES_8 = frozenset({"1", "L", "P", "LA", "PA"})
_MODES_16 = frozenset({"I;16", "I;16L", "I;16B", "I;16N"})
_MODES_COLOR = frozenset({"RGB", "RGBA", "RGBX"})
_SHOWN = 20  # colours / names listed in a message


class ImageDecodeError(SegiouError, ValueError):
    """A label image cannot be decoded to a 2-D integer mask (format, mode, colour)."""


class NamingError(StoreLayoutError):
    """Image names cannot be derived from file names (no match, empty or duplicate names)."""


class StoreExistsError(SegiouError, FileExistsError):
    """The output store exists and may not be replaced."""


# -- decoding ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Header:
    """What a file's header says: size, and the widest dtype its values can need."""

    shape: tuple[int, int]
    dtype: np.dtype[Any] | None  # None: colour-coded (ids through the spec's colours)


def _decode_failed(path: str, err: BaseException) -> ImageDecodeError:
    msg = (
        f"{path}: cannot decode the file as a label image ({type(err).__name__}: {err}); "
        "expected a PNG/TIFF image or a .npy array. Replace or remove the file, or narrow "
        "the file pattern"
    )
    return ImageDecodeError(msg)


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


def _is_tiff(path: str) -> bool:
    return path.lower().endswith((".tif", ".tiff"))


def _array_kind(path: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> _Header:
    """Header of an array file (``.npy``, tifffile): 2-D ints, or H x W x 3/4 colours."""
    if len(shape) == 3 and shape[2] == 1:
        shape = shape[:2]
    if len(shape) == 3 and shape[2] in (3, 4) and dtype == np.uint8:
        return _Header((shape[0], shape[1]), None)
    if len(shape) != 2:
        raise _not_2d(path, f"array of shape {shape}")
    if dtype.kind not in "biu":
        msg = (
            f"{path}: dtype {dtype} is not an integer label type; masks must hold class or raw "
            "ids (convert the array with astype)"
        )
        raise ImageDecodeError(msg)
    return _Header((shape[0], shape[1]), np.dtype(np.uint8) if dtype.kind == "b" else dtype)


def _pil_kind(path: str, mode: str, size: tuple[int, int], frames: int) -> _Header:
    shape = (size[1], size[0])
    if frames > 1:
        raise _not_2d(path, f"{frames} frames/pages")
    if mode in _MODES_8:
        return _Header(shape, np.dtype(np.uint8))
    if mode in _MODES_16:
        return _Header(shape, np.dtype(np.uint16))
    if mode == "I":
        return _Header(shape, np.dtype(np.int32))
    if mode in _MODES_COLOR:
        return _Header(shape, None)
    supported = sorted(_MODES_8 | _MODES_16 | _MODES_COLOR | {"I"})
    msg = (
        f"{path}: image mode {mode!r} is not a label image mode; expected one of {supported} "
        "(grey or palette ids, 16/32-bit ids, or RGB colours)"
    )
    raise ImageDecodeError(msg)


def _read_header(path: str) -> _Header:
    """Size and dtype from the header only (no pixel decoding)."""
    if path.lower().endswith(".npy"):
        arr = _load_npy(path)
        return _array_kind(path, arr.shape, arr.dtype)
    from PIL import Image

    try:
        with Image.open(path) as im:
            return _pil_kind(path, im.mode, im.size, getattr(im, "n_frames", 1))
    except ImageDecodeError:
        raise
    except FileNotFoundError as err:
        msg = f"{path}: file not found; was it moved or deleted after the folder was listed?"
        raise MaskNotFoundError(msg) from err
    except (OSError, ValueError, SyntaxError) as err:
        tf = _tifffile() if _is_tiff(path) else None
        if tf is None:
            raise _decode_failed(path, err) from err
        try:
            with tf.TiffFile(path) as f:
                if len(f.pages) > 1:
                    raise _not_2d(path, f"{len(f.pages)} TIFF pages") from None
                page = f.pages[0]
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
    except (OSError, ValueError) as err:
        raise _decode_failed(path, err) from err
    return arr


def _decode(path: str) -> np.ndarray:
    """Pixels of one file: a 2-D integer array, or H x W x 3/4 ``uint8`` colours."""
    if path.lower().endswith(".npy"):
        arr = _load_npy(path)
        head = _array_kind(path, arr.shape, arr.dtype)
        arr = arr.reshape(*head.shape, -1) if head.dtype is None else arr.reshape(head.shape)
        if arr.dtype.kind == "b":
            return arr.view(np.uint8)
        return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))
    from PIL import Image

    try:
        with Image.open(path) as im:
            head = _pil_kind(path, im.mode, im.size, getattr(im, "n_frames", 1))
            arr = np.asarray(im)
    except ImageDecodeError:
        raise
    except FileNotFoundError as err:
        msg = f"{path}: file not found; was it moved or deleted after the folder was listed?"
        raise MaskNotFoundError(msg) from err
    except (OSError, ValueError, SyntaxError) as err:
        tf = _tifffile() if _is_tiff(path) else None
        if tf is None:
            raise _decode_failed(path, err) from err
        head = _read_header(path)
        try:
            arr = np.asarray(tf.imread(path))
        except Exception as err2:
            raise _decode_failed(path, err2) from err2
        arr = arr.reshape(*head.shape, -1) if head.dtype is None else arr.reshape(head.shape)
    if arr.ndim == 3 and head.dtype is not None:  # LA / PA: the id is the first channel
        arr = arr[..., 0]
    if arr.dtype.kind == "b":
        arr = arr.astype(np.uint8)
    elif not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


# -- colours ----------------------------------------------------------------------------------
# what a colour decodes to: a value (code _OK), or why it cannot be decoded
_OK, _UNKNOWN, _AMBIGUOUS, _NO_IGNORE, _NO_RAW = 0, 1, 2, 3, 4
#: Who decodes: ``PngSet.read`` (Python, or ``segiou eval`` on folders) or ``ingest``.
_Via = Literal["read", "ingest"]


@dataclass(frozen=True)
class _ColorTable:
    """Packed ``0xRRGGBB`` colours (sorted), the value of each in one id space, and codes."""

    spec: str
    source: str  # "raw-id colours" or "class colours"
    ids: IdSpace  # the id space of ``values`` and ``ignore``
    keys: np.ndarray  # uint32, sorted
    values: np.ndarray  # int64: class or raw id, or ignore value (where codes == _OK)
    codes: np.ndarray  # int8: _OK, _AMBIGUOUS, _NO_IGNORE or _NO_RAW
    owners: tuple[str, ...]  # who has each colour, for messages
    ignore: int | None  # what colors="ignore" stores (class: first ignore value; raw: see below)
    low: int  # smallest value a converted image can hold (raw ids may be negative)
    top: int  # largest value a converted image can hold
    dtype: np.dtype[Any]


def _pack(c: Sequence[int]) -> int:
    return (int(c[0]) << 16) | (int(c[1]) << 8) | int(c[2])


def _unpack(v: int) -> tuple[int, int, int]:
    return (v >> 16) & 255, (v >> 8) & 255, v & 255


def _check_ids(ids: object) -> None:
    if ids not in ("class", "raw"):
        msg = f"ids={ids!r} is unknown; expected 'raw' (the spec's raw ids) or 'class'"
        raise UsageError(msg)


def _check_colors(colors: object) -> None:
    if colors not in ("error", "ignore"):
        msg = f"colors={colors!r} is unknown; expected 'error' or 'ignore'"
        raise UsageError(msg)


@functools.lru_cache(maxsize=32)
def _color_table(spec: LabelSpec, ids: IdSpace = "class") -> _ColorTable | None:
    """Build the colour -> value table of a spec in id space ``ids`` (None: no colours).

    ``ids="raw"`` needs a spec with raw ids (the caller checks). A colour decodes to the
    smallest raw id among those owning it (they map the same way, else it is ambiguous); a
    class colour to the smallest raw id of that class; ``ignore`` is the smallest ignored
    raw id.
    """
    # (packed colour, class or None, raw id or None, owner)
    entries: list[tuple[int, int | None, int | None, str]] = []
    if any(r.color is not None for r in spec.raw):
        source = "raw-id colours"
        for r in spec.raw:
            if r.color is not None:
                target = "ignored" if r.cls is None else f"class {r.cls}"
                owner = f"raw id {r.id} {r.name!r} -> {target}"
                entries.append((_pack(r.color), r.cls, r.id, owner))
    elif spec.colors is not None:
        source = "class colours"
        entries = [(_pack(c), i, None, f"class {i} {spec.classes[i]!r}") for i, c in
                   enumerate(spec.colors)]  # fmt: skip
    else:
        return None
    first_raw: dict[int, int] = {}  # class -> its smallest raw id
    if ids == "raw":
        ignored = [r.id for r in spec.raw if r.cls is None]
        # else the spec's ignore values, which are ignored in raw-id space too
        ignore = min(ignored) if ignored else (spec.ignore[0] if spec.ignore else None)
        for r in sorted(spec.raw, key=lambda r: r.id):
            if r.cls is not None:
                first_raw.setdefault(r.cls, r.id)
    else:
        ignore = spec.ignore[0] if spec.ignore else None
    by_color: dict[int, list[tuple[int | None, int | None, str]]] = {}
    for packed, cls, raw_id, owner in entries:
        by_color.setdefault(packed, []).append((cls, raw_id, owner))
    keys = sorted(by_color)
    values: list[int] = []
    codes: list[int] = []
    owners: list[str] = []
    for k in keys:
        group = by_color[k]
        owners.append(", ".join(o for _, _, o in group))
        targets = {cls for cls, _, _ in group}
        if len(targets) == 2 and None in targets:
            # one evaluated class and ignored ids share the colour (Cityscapes: "pole" and
            # "polegroup" are both (153, 153, 153)): the colour is that class
            targets.discard(None)
            group = [e for e in group if e[0] is not None]
        goal = next(iter(targets))
        raws = [r for _, r, _ in group if r is not None]
        if len(targets) > 1:
            value, code = 0, _AMBIGUOUS
        elif ids == "raw" and raws:
            value, code = min(raws), _OK
        elif ids == "raw":  # a class colour: the class's smallest raw id
            found = None if goal is None else first_raw.get(goal)
            value, code = (0, _NO_RAW) if found is None else (found, _OK)
        elif goal is None:
            value, code = (0, _NO_IGNORE) if ignore is None else (ignore, _OK)
        else:
            value, code = goal, _OK
        values.append(value)
        codes.append(code)
    held = [v for v, c in zip(values, codes, strict=True) if c == _OK]
    held += [0] if ignore is None else [ignore]
    low, top = min(0, *held), max(0, *held)
    return _ColorTable(spec.name, source, ids, np.array(keys, dtype=np.uint32),
                       np.array(values, dtype=np.int64), np.array(codes, dtype=np.int8),
                       tuple(owners), ignore, low, top, _smallest_dtype(low, top))  # fmt: skip


def _fmt_color(v: int) -> str:
    r, g, b = _unpack(v)
    return f"({r}, {g}, {b})"


def _ranked(packed: np.ndarray) -> list[tuple[int, int]]:
    """(colour, pixel count) of each distinct value, most frequent first."""
    u, c = np.unique(packed, return_counts=True)
    order = np.lexsort((u, -c))
    return [(int(u[i]), int(c[i])) for i in order]


def _ignore_hint(via: _Via) -> str:
    """How to map unknown or ambiguous colours to the ignore value, in the caller's terms."""
    if via == "ingest":
        return "colors='ignore' (segiou ingest --colors ignore)"
    return (
        "colors='ignore' (PngSet.read in Python; 'segiou eval' on image folders has no such "
        "option: pack the folders with 'segiou ingest --colors ignore' and evaluate the store)"
    )


def _class_ids_hint(via: _Via) -> str:
    """How to decode colours to class ids instead, in the caller's terms."""
    if via == "ingest":
        return "ids='class' (segiou ingest --ids class)"
    return "ids='class' (segiou eval --gt-ids class / --pred-ids class)"


def _colors_to_classes(
    rgb: np.ndarray,
    spec: LabelSpec | None,
    colors: Colors,
    path: str,
    ids: IdSpace = "class",
    via: _Via = "read",
) -> np.ndarray:
    """Vectorised colour -> id conversion (id space ``ids``) of an H x W x 3/4 ``uint8`` image."""
    table = None if spec is None else _color_table(spec, ids)
    if table is None:
        what = (
            "no label spec was given"
            if spec is None
            else f"label spec {spec.name!r} has no colours"
        )
        msg = (
            f"{path}: colour image (RGB), but {what}; pass a spec with class or raw-id colours "
            "(labels=/--labels, e.g. cityscapes or pascal_voc), or save masks as grey/palette ids"
        )
        raise ImageDecodeError(msg)
    if ids == "raw" and spec is not None and not spec.has_raw:
        msg = (
            f"{path}: colour image to be decoded to raw ids, but label spec {spec.name!r} has "
            f"no raw ids; decode it to class ids with {_class_ids_hint(via)}"
        )
        raise ImageDecodeError(msg)
    packed = rgb[..., 0].astype(np.uint32) << 16
    packed |= rgb[..., 1].astype(np.uint32) << 8
    packed |= rgb[..., 2]
    idx = np.searchsorted(table.keys, packed)
    np.minimum(idx, len(table.keys) - 1, out=idx)
    vals = table.values[idx]
    codes = table.codes[idx]
    codes[table.keys[idx] != packed] = _UNKNOWN
    bad = codes != _OK
    if not bad.any():
        return vals.astype(table.dtype)
    if colors == "ignore":
        soft = bad & ((codes == _UNKNOWN) | (codes == _AMBIGUOUS))
        if soft.any() and table.ignore is None:
            what = (
                "has neither an ignored raw id (one whose class is null) nor an ignore value; "
                "add one (e.g. 0 'unlabeled', or ignore 255)"
                if table.ids == "raw"
                else "has no ignore value; add one (e.g. 255)"
            )
            msg = (
                f"{path}: colors='ignore' maps unknown or ambiguous colours to the ignore value, "
                f"but label spec {table.spec!r} {what}"
            )
            raise ImageDecodeError(msg)
        if table.ignore is not None:
            vals[soft] = table.ignore
            bad &= ~soft
        if not bad.any():
            return vals.astype(table.dtype)
    raise _color_error(table, rgb, packed[bad], codes[bad], path, via)


def _color_error(
    table: _ColorTable, rgb: np.ndarray, packed: np.ndarray, codes: np.ndarray, path: str,
    via: _Via,
) -> ImageDecodeError:  # fmt: skip
    """Build the error for the pixels (colours ``packed``) that cannot be decoded (``codes``)."""
    where_ = f"label spec {table.spec!r} ({table.source})"
    if (codes == _UNKNOWN).any():
        ranked = _ranked(packed[codes == _UNKNOWN])
        shown = ", ".join(f"{_fmt_color(v)}: {n:,} px" for v, n in ranked[:_SHOWN])
        more = ""
        if len(ranked) > _SHOWN:
            rest = sum(n for _, n in ranked[_SHOWN:])
            more = f", and {len(ranked) - _SHOWN} more colour(s) in {rest:,} px"
        hint = ""
        if (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all():
            hint = " (every pixel has r == g == b: the ids may be stored as grey; save as 'L')"
        msg = (
            f"{path}: {len(ranked)} colour(s) are not in {where_}: {shown}{more}; expected "
            f"one of its {len(table.keys)} colours{hint}. Use the dataset's label spec "
            f"(--labels), or map unknown colours to the ignore value with {_ignore_hint(via)}"
        )
        return ImageDecodeError(msg)
    owners = dict(zip(table.keys.tolist(), table.owners, strict=True))
    if (codes == _AMBIGUOUS).any():
        ranked = _ranked(packed[codes == _AMBIGUOUS])
        shown = "; ".join(f"{_fmt_color(v)} ({n:,} px) is {owners[v]}" for v, n in ranked)
        msg = (
            f"{path}: colour(s) shared by ids of different classes in {where_}: {shown}; such "
            "pixels cannot be decoded to one class. Save the masks as ids (grey/palette), use a "
            f"spec whose colours are unique, or ignore these pixels with {_ignore_hint(via)}"
        )
        return ImageDecodeError(msg)
    if (codes == _NO_RAW).any():
        ranked = _ranked(packed[codes == _NO_RAW])
        shown = "; ".join(f"{_fmt_color(v)} ({n:,} px) is {owners[v]}" for v, n in ranked)
        msg = (
            f"{path}: colour(s) of classes that no raw id of {where_} maps to: {shown}; they "
            f"cannot be stored as raw ids. Add the raw ids to the spec, or decode colours to "
            f"class ids with {_class_ids_hint(via)}"
        )
        return ImageDecodeError(msg)
    ranked = _ranked(packed)
    shown = ", ".join(f"{_fmt_color(v)}: {n:,} px" for v, n in ranked)
    msg = (
        f"{path}: colour(s) {shown} map to ignored ids in {where_}, which has no ignore value "
        "to store them as; add an ignore value to the spec (e.g. 255)"
    )
    return ImageDecodeError(msg)


# -- the set ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PngSet:
    """Named label images in files (PNG, TIFF or ``.npy``), one image per file.

    Small and picklable (names and paths only): workers decode their own files.

    Attributes
    ----------
    names : tuple of str
        Image names, unique, in order (what pairs a prediction with its ground truth).
    paths : tuple of str
        Absolute path of each image's file.
    root : str
        The folder the files were found in (for messages); may be empty.
    layout : str
        Always ``"files"`` (a :class:`~segiou.io.zarr.MaskSet` is ``"stack"`` or ``"group"``).

    Raises
    ------
    NamingError
        ``names`` and ``paths`` differ in length, or a name is repeated.
    """

    names: tuple[str, ...]
    paths: tuple[str, ...]
    root: str = ""
    layout: ClassVar[str] = "files"

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(map(str, self.names)))
        object.__setattr__(self, "paths", tuple(str(Path(p).absolute()) for p in self.paths))
        if len(self.names) != len(self.paths):
            msg = (
                f"{self.where()}: {len(self.names)} names for {len(self.paths)} files; give one "
                "name per file"
            )
            raise NamingError(msg)
        _check_unique(self.where(), dict(zip(self.paths, self.names, strict=True)))

    def __len__(self) -> int:
        return len(self.names)

    def where(self) -> str:
        """Describe the set (its folder), for messages.

        Returns
        -------
        str
            ``"folder <root>"``, or ``"<n> image file(s)"`` when ``root`` is empty.
        """
        return f"folder {self.root}" if self.root else f"{len(self.names)} image file(s)"

    def image_where(self, i: int) -> str:
        """File and name of image ``i``, for messages.

        Parameters
        ----------
        i : int
            Image index.

        Returns
        -------
        str
            ``"<path> (image '<name>')"``.

        Raises
        ------
        IndexError
            ``i`` is out of range.
        """
        return f"{self.paths[i]} (image {self.names[i]!r})"

    def image_shape(self, i: int) -> tuple[int, int]:
        """``(H, W)`` of image ``i``, from the file header only (no pixel decoding).

        Parameters
        ----------
        i : int
            Image index.

        Returns
        -------
        tuple of int

        Raises
        ------
        MaskNotFoundError
            The file is gone.
        ImageDecodeError
            Not a readable image or array, or not one 2-D mask.
        """
        return _read_header(self.paths[i]).shape

    def n_pixels(self) -> int:
        """Total number of pixels (reads every header).

        Returns
        -------
        int
            The sum of ``H * W`` over all images (0 for an empty set).

        Raises
        ------
        MaskNotFoundError
            A file is gone.
        ImageDecodeError
            A file is not a readable image or array, or not one 2-D mask.
        """
        return sum(h * w for h, w in map(self.image_shape, range(len(self.names))))

    def read(
        self,
        i: int,
        spec: LabelSpec | str | Path | None = None,
        colors: Colors = "error",
        *,
        ids: IdSpace = "class",
    ) -> np.ndarray:
        """Decode image ``i`` to a 2-D integer mask.

        Parameters
        ----------
        i : int
            Image index.
        spec : LabelSpec, str or Path, optional
            Label spec, only used for colour (RGB/RGBA) images: each colour becomes an id of
            the spec in id space ``ids`` (see the module docstring).
        colors : {"error", "ignore"}
            An unknown or ambiguous colour raises (default) or becomes the ignore value.
        ids : {"class", "raw"}
            Id space colour images are decoded to: class ids (default), or the spec's raw ids
            (e.g. Cityscapes ``labelIds``; the spec needs a raw table). Pass the id space the
            mask is evaluated in (``gt_ids`` / ``pred_ids``). Grey, palette and array images
            are returned as stored, whatever ``ids`` says.

        Returns
        -------
        numpy.ndarray
            ``H x W``: ``uint8`` for grey and palette images (the palette index is the label),
            ``uint16`` / ``int32`` for 16/32-bit images, the file's dtype for ``.npy`` (a
            read-only memory map), ids in the smallest integer type for colour images.

        Raises
        ------
        MaskNotFoundError
            The file is gone.
        ImageDecodeError
            Undecodable file, unsupported mode, not 2-D, float values, colour image without a
            spec with colours (or without raw ids, for ``ids="raw"``), unknown colours (each
            listed with its pixel count, most frequent first) or ambiguous colours (with the
            ids sharing them).
        UsageError
            ``colors`` or ``ids`` is not one of the values above.
        LabelSpecError
            ``spec`` is an unknown name or an unreadable or invalid spec file (only loaded
            for colour images).
        """
        return _read_file(self.paths[i], spec, colors, ids, "read")


def _read_file(
    path: str, spec: LabelSpec | str | Path | None, colors: Colors, ids: IdSpace, via: _Via
) -> np.ndarray:
    """Decode one file (see :meth:`PngSet.read`); ``via`` words the colour errors."""
    _check_colors(colors)
    _check_ids(ids)
    arr = _decode(path)
    if arr.ndim == 3:
        sp = None if spec is None else load_spec(spec)
        return _colors_to_classes(arr, sp, colors, path, ids, via)
    return arr


# -- finding files ----------------------------------------------------------------------------
def _check_unique(where: str, names: dict[str, str]) -> None:
    """``names``: path -> name. Raise listing every repeated name with its files."""
    files: dict[str, list[str]] = {}
    for path, name in names.items():
        files.setdefault(name, []).append(path)
    dups = {n: ps for n, ps in files.items() if len(ps) > 1}
    if dups:
        shown = "; ".join(f"{n!r}: {', '.join(ps)}" for n, ps in sorted(dups.items())[:_SHOWN])
        more = f" (and {len(dups) - _SHOWN} more)" if len(dups) > _SHOWN else ""
        msg = (
            f"{where}: {len(dups)} image name(s) occur more than once: {shown}{more}; every "
            "image needs a unique name. Narrow the file pattern, or name images with a regex"
        )
        raise NamingError(msg)


def _namer(
    layout: FolderLayout, regex: str | re.Pattern[str] | None, key: KeyFunc | None
) -> tuple[KeyFunc, str]:
    """Return a function relative path -> name or "" (no match), and its description."""
    if key is not None:
        return key, "the key function"
    if regex is None and layout == "cityscapes":
        regex = CITYSCAPES_NAME
        pat = re.compile(regex)
        return (lambda rel: _group(pat, rel.rsplit("/", 1)[-1])), (
            f"the Cityscapes name <city>_<seq>_<frame> ({regex}) of the file name"
        )
    if regex is not None:
        try:
            pat = regex if isinstance(regex, re.Pattern) else re.compile(regex)
        except re.error as err:
            msg = f"regex {regex!r} is invalid: {err}; give a regex with a group (?P<name>...)"
            raise NamingError(msg) from err
        if "name" not in pat.groupindex:
            msg = (
                f"regex {pat.pattern!r} has no group named 'name'; mark the image name with "
                r"(?P<name>...), e.g. '(?P<name>[^/]+)_gtFine_labelIds\.png$'"
            )
            raise NamingError(msg)
        return (lambda rel: _group(pat, rel)), f"regex {pat.pattern!r} on the relative path"
    if layout != "plain":
        msg = f"layout={layout!r} is unknown; expected 'plain' or 'cityscapes'"
        raise NamingError(msg)
    return (lambda rel: rel.rsplit(".", 1)[0] if "." in rel.rsplit("/", 1)[-1] else rel), (
        "the relative path without suffix"
    )


def _group(pat: re.Pattern[str], text: str) -> str:
    m = pat.search(text)
    return "" if m is None or m.group("name") is None else m.group("name")


def _list_files(folder: Path, pattern: str, side: str) -> list[Path]:
    if not folder.exists():
        msg = f"{side} folder {folder} does not exist; check the path"
        raise MaskNotFoundError(msg)
    if not folder.is_dir():
        msg = f"{side} folder {folder} is a file, not a folder; give the folder of the images"
        raise MaskNotFoundError(msg)
    files = sorted(p for p in folder.rglob(pattern) if p.is_file())
    if not files:
        others = Counter(p.suffix.lower() or "(none)" for p in folder.rglob("*") if p.is_file())
        found = ", ".join(f"{n} {s}" for s, n in others.most_common(5)) or "no files at all"
        msg = (
            f"{side} folder {folder}: no file matches {pattern!r} (searched recursively); it "
            f"holds {found}. Pass the matching file pattern (--{side}-pattern)"
        )
        raise MaskNotFoundError(msg)
    return files


def png_set(
    folder: str | Path,
    pattern: str = "*.png",
    *,
    layout: FolderLayout = "plain",
    regex: str | re.Pattern[str] | None = None,
    key: KeyFunc | None = None,
    side: str = "gt",
) -> PngSet:
    """List the label images of one folder (recursively) and name them.

    Parameters
    ----------
    folder : str or Path
        Folder searched recursively.
    pattern : str
        Glob matched by file names (or relative paths), e.g. ``"*.png"``, ``"*.tif"``,
        ``"*_gtFine_labelIds.png"``.
    layout : {"plain", "cityscapes"}
        Naming rule: the relative path without suffix, or the Cityscapes
        ``<city>_<seq>_<frame>`` prefix of the file name.
    regex : str or re.Pattern, optional
        Instead: a regex with a group ``(?P<name>...)``, searched in the relative path
        (``/`` separators).
    key : callable, optional
        Instead: a function from the relative path to the name.
    side : str
        ``"gt"`` or ``"pred"``, for messages.

    Returns
    -------
    PngSet
        Sorted by name.

    Raises
    ------
    MaskNotFoundError
        The folder does not exist or no file matches.
    NamingError
        A file whose path gives no name (listed), or a name given to several files (listed).
    """
    root = Path(folder)
    files = _list_files(root, pattern, side)
    namer, how = _namer(layout, regex, key)
    named: dict[str, str] = {}
    unnamed = []
    for p in files:
        rel = p.relative_to(root).as_posix()
        name = namer(rel)
        if name:
            named[str(p.absolute())] = name
        else:
            unnamed.append(rel)
    if unnamed:
        msg = (
            f"{side} folder {root}: {len(unnamed)} of {len(files)} file(s) matching {pattern!r} "
            f"get no image name from {how}, e.g. {unnamed[:3]}; narrow the file pattern or fix "
            "the naming rule (--regex with a group (?P<name>...))"
        )
        raise NamingError(msg)
    _check_unique(f"{side} folder {root}", named)
    order = sorted(named.items(), key=lambda kv: kv[1])
    return PngSet(tuple(n for _, n in order), tuple(p for p, _ in order), str(root))


def find_pairs(
    gt_dir: str | Path,
    pred_dir: str | Path,
    *,
    gt_pattern: str | None = None,
    pred_pattern: str | None = None,
    layout: FolderLayout = "plain",
    regex: str | re.Pattern[str] | None = None,
    pred_regex: str | re.Pattern[str] | None = None,
    key: KeyFunc | None = None,
) -> tuple[PngSet, PngSet]:
    """List ground-truth and prediction images and name them so that pairs share a name.

    Which ground-truth images lack a prediction (or the reverse) is not decided here: the
    evaluation reports that.

    Parameters
    ----------
    gt_dir, pred_dir : str or Path
        Folders searched recursively.
    gt_pattern : str, optional
        Glob of ground-truth files: ``"*.png"``, or ``"*_gtFine_labelIds.png"`` with
        ``layout="cityscapes"``.
    pred_pattern : str, optional
        Glob of prediction files: ``gt_pattern``, or ``"*.png"`` with ``layout="cityscapes"``.
    layout : {"plain", "cityscapes"}
        ``plain``: an image's name is its path relative to the folder without suffix.
        ``cityscapes``: ``gtFine/<split>/<city>/<name>_gtFine_labelIds.png`` pairs with a
        result ``<name>*.png`` anywhere under ``pred_dir`` (``name`` is
        ``<city>_<seq>_<frame>``), as in cityscapesScripts.
    regex : str or re.Pattern, optional
        A regex with a group ``(?P<name>...)`` searched in each relative path (both sides,
        unless ``pred_regex`` is given); overrides ``layout``'s naming.
    pred_regex : str or re.Pattern, optional
        The regex of the prediction side.
    key : callable, optional
        A function from a relative path to the image name, for both sides; overrides all.

    Returns
    -------
    (PngSet, PngSet)
        Ground truth and predictions, each sorted by name.

    Raises
    ------
    MaskNotFoundError
        A folder does not exist, or no file matches its pattern.
    NamingError
        A file that gets no name, or duplicate names on one side (listed with their files).

    Examples
    --------
    >>> gt, pred = find_pairs("gtFine/val", "results", layout="cityscapes")  # doctest: +SKIP
    >>> gt.names[0]  # doctest: +SKIP
    'frankfurt_000000_000294'
    """
    city = layout == "cityscapes"
    gp = gt_pattern or (_CITYSCAPES_GT_PATTERN if city else "*.png")
    pp = pred_pattern or ("*.png" if city else gp)
    gt = png_set(gt_dir, gp, layout=layout, regex=regex, key=key, side="gt")
    pr = pred_regex if pred_regex is not None else regex
    pred = png_set(pred_dir, pp, layout=layout, regex=pr, key=key, side="pred")
    return gt, pred


# -- ingest -----------------------------------------------------------------------------------
def _smallest_dtype(lo: int, hi: int) -> np.dtype[Any]:
    kinds = (np.uint8, np.uint16, np.uint32, np.uint64) if lo >= 0 else (
        np.int8, np.int16, np.int32, np.int64)  # fmt: skip
    for t in kinds:
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return np.dtype(t)
    return np.dtype(np.int64)


def _is_url(out: str | Path) -> bool:
    text = str(out)
    return "://" in text and not text.startswith("file://")


def _is_zarr_dir(p: Path) -> bool:
    return any((p / f).is_file() for f in ("zarr.json", ".zgroup", ".zarray"))


def _check_out(out: Path, overwrite: bool) -> None:
    if not out.exists():
        return
    if not overwrite:
        msg = (
            f"{out} exists; pass overwrite=True (--overwrite) to replace it, or choose another "
            "output path"
        )
        raise StoreExistsError(msg)
    if out.is_file() or (not _is_zarr_dir(out) and any(out.iterdir())):
        msg = (
            f"{out} exists and is not a Zarr store; refusing to delete it even with "
            "overwrite=True. Remove it yourself or choose another output path"
        )
        raise StoreExistsError(msg)


def _dir_bytes(path: Path) -> int:
    return sum((Path(d) / f).stat().st_size for d, _, files in os.walk(path) for f in files)


@dataclass
class _Side:
    name: str  # "gt" or "pred"
    src: PngSet
    headers: list[_Header]
    dtype: np.dtype[Any] = field(default_factory=lambda: np.dtype(np.uint8))
    n_color: int = 0
    array: Any = None  # stack: the zarr array; group: the zarr group
    array_names: tuple[str, ...] = ()
    chunks: tuple[int, int] | None = None


#: How ingest decodes colour images: spec, colours policy, id space.
_Decoding = tuple[LabelSpec | None, Colors, IdSpace]


def _bounded(pool: ThreadPoolExecutor, fn: Callable[..., Any], items: Sequence[Any],
             window: int) -> Iterator[Any]:  # fmt: skip
    """Results of ``fn(*item)`` as they complete, with at most ``window`` tasks in flight."""
    it = iter(items)
    pending: set[Future[Any]] = set()
    try:
        while True:
            while len(pending) < window:
                item = next(it, None)
                if item is None:
                    break
                pending.add(pool.submit(fn, *item))
            if not pending:
                return
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                yield f.result()
    finally:
        for f in pending:
            f.cancel()


def _range_of(src: PngSet, i: int, dec: _Decoding) -> tuple[int, int]:
    arr = _read_file(src.paths[i], *dec, "ingest")
    return (int(arr.min()), int(arr.max())) if arr.size else (0, 0)


def _wide(h: _Header) -> bool:
    """Whether an image's values may need more than ``uint8`` (then they are measured)."""
    return h.dtype is not None and (h.dtype.itemsize > 1 or h.dtype.kind == "i")


def _cast(arr: np.ndarray, dtype: np.dtype[Any], where: str) -> np.ndarray:
    if arr.dtype == dtype:
        return arr
    if arr.size and not np.can_cast(arr.dtype, dtype):
        lo, hi, info = int(arr.min()), int(arr.max()), np.iinfo(dtype)
        if lo < info.min or hi > info.max:
            msg = (
                f"{where}: values {lo}..{hi} do not fit the store dtype {dtype} chosen from the "
                "other images; was the file changed during ingest? Run ingest again"
            )
            raise ImageDecodeError(msg)
    return arr.astype(dtype)


#: ``--codec`` values: name, and the range of ``NAME:LEVEL`` (None: no level).
_CODEC_LEVELS: dict[str, tuple[int, int] | None] = {
    "zstd": (1, 22),
    "blosc-lz4": (0, 9),
    "gzip": (0, 9),
    "none": None,
}
_CODEC_ALIASES = {"lz4": "blosc-lz4"}
#: The codec choices, for help texts and messages.
CODEC_CHOICES = (
    "zstd (default: zstd at zarr's default level), zstd:LEVEL (1-22), blosc-lz4 (alias lz4; "
    "LZ4 inside Blosc, level 5), blosc-lz4:LEVEL (0-9), gzip (level 5), gzip:LEVEL (0-9), "
    "none (uncompressed)"
)


def parse_codec(codec: str) -> tuple[str, tuple[Any, ...]]:
    """Parse a chunk codec name into its canonical name and the Zarr v3 compressors.

    Parameters
    ----------
    codec : str
        ``"zstd"`` (zarr's default compressor and level), ``"zstd:LEVEL"`` (1-22),
        ``"blosc-lz4"`` or ``"lz4"`` (LZ4 inside Blosc, level 5), ``"blosc-lz4:LEVEL"``
        (0-9), ``"gzip"`` (level 5), ``"gzip:LEVEL"`` (0-9) or ``"none"``
        (uncompressed). Case-insensitive.

    Returns
    -------
    (str, tuple)
        The canonical name (``"lz4"`` becomes ``"blosc-lz4"``) and the ``compressors``
        argument of ``zarr.create_array`` (empty for ``"none"``).

    Raises
    ------
    UsageError
        An unknown name, or a level that is not an integer in the codec's range.

    Examples
    --------
    >>> parse_codec("gzip:9")[0]
    'gzip:9'
    >>> parse_codec("none")
    ('none', ())
    """
    text = str(codec).strip().lower()
    name, sep, level_text = text.partition(":")
    name = _CODEC_ALIASES.get(name, name)
    if name not in _CODEC_LEVELS:
        msg = f"codec {codec!r} is unknown; expected one of: {CODEC_CHOICES}"
        raise UsageError(msg)
    bounds = _CODEC_LEVELS[name]
    level: int | None = None
    if sep:
        if bounds is None:
            msg = f"codec {codec!r}: {name!r} takes no level; expected one of: {CODEC_CHOICES}"
            raise UsageError(msg)
        try:
            level = int(level_text)
        except ValueError:
            level = None
        if level is None or not bounds[0] <= level <= bounds[1]:
            msg = (
                f"codec {codec!r}: the level must be an integer from {bounds[0]} to "
                f"{bounds[1]}; expected one of: {CODEC_CHOICES}"
            )
            raise UsageError(msg)
    canonical = name if level is None else f"{name}:{level}"
    from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec

    if name == "none":
        return canonical, ()
    if name == "zstd":
        return canonical, (ZstdCodec(level=0 if level is None else level),)
    if name == "gzip":
        return canonical, (GzipCodec(level=5 if level is None else level),)
    return canonical, (BloscCodec(cname="lz4", clevel=5 if level is None else level),)


def ingest(
    gt_src: PngSet,
    pred_src: PngSet | None,
    out: str | Path,
    *,
    spec: LabelSpec | str | Path | None = None,
    colors: Colors = "error",
    ids: IdSpace | None = None,
    chunks: tuple[int, int] | None = None,
    codec: str = "zstd",
    workers: int | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Pack label images into a Zarr store with arrays (or groups) ``gt`` and ``pred``.

    Every chunk is written, also chunks that hold only 0 (the fill value), so the store
    passes the default ``missing_gt_chunks="error"`` check of the evaluation.

    Parameters
    ----------
    gt_src : PngSet
        Ground-truth images (see :func:`find_pairs`, :func:`png_set`).
    pred_src : PngSet, optional
        Prediction images; ``None`` writes ``gt`` only.
    out : str or Path
        Store to create. A local store is written to a temporary sibling folder and moved into
        place at the end, so a failed ingest leaves nothing at ``out``.
    spec : LabelSpec, str or Path, optional
        Label spec whose colours decode colour (RGB) images.
    colors : {"error", "ignore"}
        Unknown or ambiguous colours raise (default) or become the ignore value.
    ids : {"raw", "class"}, optional
        Id space colour images are decoded to. Default: the one ``segiou eval`` assumes for
        the spec, ``"raw"`` when it has raw ids (Cityscapes: ``labelIds``), else ``"class"``;
        so colour images and grey images of that id space can share a folder. Grey, palette
        and array images are stored as they are. The store's root attribute ``segiou.ids``
        records the id space when it is known: ``ids`` was given, or colour images were
        decoded; else it is ``None``.
    chunks : (int, int), optional
        Spatial chunk shape; default one chunk per image.
    codec : str
        Chunk compression (see :func:`parse_codec`): ``"zstd"`` (default), ``"zstd:LEVEL"``,
        ``"blosc-lz4"`` (``"lz4"``), ``"gzip[:LEVEL]"`` or ``"none"``.
    workers : int, optional
        Threads decoding images (default: Python's thread-pool default).
    progress : bool
        Show a progress bar (only when stderr is a terminal).
    overwrite : bool
        Replace an existing store at ``out`` (never a folder that is not a Zarr store).

    Returns
    -------
    dict
        ``out``; ``layout`` (``"stack"`` when all images share one size, else ``"group"``);
        ``shape`` (``[H, W]``, stack only) and ``n_shapes``; ``labels`` (the spec's name or
        ``None``); ``ids`` (as recorded in the store, see below); ``codec`` (canonical
        name); per side (``gt``, ``pred``, or ``None``): ``images``, ``dtype`` (smallest
        unsigned type holding the values, signed only for negative values),
        ``colour_images`` (decoded to ``ids``), ``source``; ``unmatched`` (images without a
        partner, per side; the evaluation decides about them); ``bytes`` written (``None``
        for remote stores); ``seconds``.

    Raises
    ------
    MaskNotFoundError
        An empty set, or a file that disappeared.
    ImageDecodeError
        An undecodable or non-2-D file, float values, unknown or ambiguous colours (the file
        is named), or colour images without a spec.
    StoreExistsError
        ``out`` exists (without ``overwrite``), or is not a Zarr store.
    NamingError
        Two image names that become the same array name in the group layout, or a name
        that cannot be a Zarr array name (e.g. a leading ``/``).
    UsageError
        An unknown ``colors``, ``ids`` or ``codec``; ``ids="raw"`` without a spec with raw
        ids; bad ``chunks`` or ``workers``.
    LabelSpecError
        ``spec`` is an unknown name or an unreadable or invalid spec file.

    Notes
    -----
    The root group's attribute ``segiou`` records ``ingest`` (the source folder of each
    side), ``labels`` (the spec's name, or ``None``) and ``ids``: the id space colour images
    were decoded to (``"raw"`` or ``"class"``), which is also the id space the other images
    are assumed to hold; ``None`` when neither ``spec`` nor ``ids`` was given (unknown).
    """
    import zarr

    t0 = time.perf_counter()
    _check_colors(colors)
    if ids is not None:
        _check_ids(ids)
    if workers is not None and workers < 1:
        msg = f"workers={workers} must be at least 1"
        raise UsageError(msg)
    if chunks is not None and (len(chunks) != 2 or min(chunks) < 1):
        msg = f"chunks={chunks!r} must be two positive integers (height, width)"
        raise UsageError(msg)
    codec_name, compressors = parse_codec(codec)
    sp = None if spec is None else load_spec(spec)
    if ids == "raw" and (sp is None or not sp.has_raw):
        what = "no label spec was given" if sp is None else f"{sp.name!r} has no raw ids"
        msg = (
            f"ids='raw' decodes colour images to the spec's raw ids, but {what}; pass a spec "
            "with a raw table (--labels cityscapes), or ids='class' (--ids class)"
        )
        raise UsageError(msg)
    space: IdSpace = ids or ("raw" if sp is not None and sp.has_raw else "class")
    recorded: IdSpace | None = None  # set below: what ingest knows about the stored values
    dec: _Decoding = (sp, colors, space)
    srcs = [("gt", gt_src)] + ([("pred", pred_src)] if pred_src is not None else [])
    for side, src in srcs:
        if not len(src):
            msg = f"{side}: {src.where()} holds no images; nothing to ingest"
            raise MaskNotFoundError(msg)
    if pred_src is not None and not set(gt_src.names) & set(pred_src.names):
        msg = (
            f"no prediction pairs with a ground-truth image: names such as "
            f"{list(gt_src.names[:3])} ({gt_src.where()}) vs {list(pred_src.names[:3])} "
            f"({pred_src.where()}); pair them with --layout, --regex or --pred-regex"
        )
        raise MaskNotFoundError(msg)
    remote = _is_url(out)
    final = Path(str(out).removeprefix("file://"))
    if not remote:
        _check_out(final, overwrite)

    n_workers = workers or min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's default
    pool = ThreadPoolExecutor(n_workers, thread_name_prefix="segiou-ingest")
    window = 2 * n_workers
    tmp: Path | None = None
    try:
        sides = []
        for side, src in srcs:
            headers = list(pool.map(_read_header, src.paths))
            sides.append(_Side(side, src, headers))
        shapes = {h.shape for s in sides for h in s.headers}
        layout = "stack" if len(shapes) == 1 else "group"
        # dtypes from headers; decode the wider images once more to find their value range
        table = None if sp is None else _color_table(sp, space)
        for s in sides:
            colour = [i for i, h in enumerate(s.headers) if h.dtype is None]
            s.n_color = len(colour)
            if colour and table is None:
                _read_file(s.src.paths[colour[0]], *dec, "ingest")  # raises, naming the file
            lo, hi = (table.low, table.top) if colour and table is not None else (0, 0)
            wide = [(s.src, i, dec) for i, h in enumerate(s.headers) if _wide(h)]
            for a, b in _bounded(pool, _range_of, wide, window):
                lo, hi = min(lo, a), max(hi, b)
            s.dtype = _smallest_dtype(lo, hi)
            s.chunks = chunks
        # The id space is known only for what ingest decoded (colour images) or was told
        # (--ids); grey masks are stored as they are, in whatever id space they were written.
        if ids is not None or any(s.n_color for s in sides):
            recorded = space

        if remote:
            target = str(out)
            try:
                root = zarr.open_group(target, mode="w" if overwrite else "w-", zarr_format=3)
            except FileExistsError as err:
                msg = (
                    f"{target} exists; pass overwrite=True (--overwrite) to replace it, or "
                    "choose another output path"
                )
                raise StoreExistsError(msg) from err
        else:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
            target = str(tmp)
            root = zarr.open_group(target, mode="w", zarr_format=3)
        _create_arrays(root, sides, layout, compressors)

        total = sum(len(s.src) for s in sides)
        show = progress and sys.stderr.isatty()
        tqdm = importlib.import_module("tqdm").tqdm  # untyped

        items = [(s, i, dec, compressors) for s in sides for i in range(len(s.src))]
        with tqdm(total=total, unit="img", desc="ingest", disable=not show) as bar:
            for _ in _bounded(pool, _write_one, items, window):
                bar.update(1)

        root.attrs["segiou"] = {
            "ingest": {s.name: s.src.root or s.src.where() for s in sides},
            "labels": None if sp is None else sp.name,
            "ids": recorded,
        }
        nbytes = None
        if tmp is not None:
            nbytes = _dir_bytes(tmp)
            if final.exists():
                shutil.rmtree(final)
            tmp.replace(final)
            tmp = None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    summary: dict[str, Any] = {
        "out": str(out),
        "layout": layout,
        "shape": list(next(iter(shapes))) if layout == "stack" else None,
        "n_shapes": len(shapes),
        "labels": None if sp is None else sp.name,
        "ids": recorded,
        "codec": codec_name,
    }
    for side in ("gt", "pred"):
        found = [x for x in sides if x.name == side]
        summary[side] = None if not found else {
            "images": len(found[0].src), "dtype": str(found[0].dtype),
            "colour_images": found[0].n_color, "source": found[0].src.root,
        }  # fmt: skip
    if pred_src is not None:
        g, p = set(gt_src.names), set(pred_src.names)
        summary["unmatched"] = {"gt": len(g - p), "pred": len(p - g)}
    summary["bytes"] = nbytes
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    return summary


#: Array creation options shared by both layouts: fill 0, and write every chunk (zarr skips
#: chunks equal to the fill value by default; a ground-truth chunk missing from the store is
#: an error for the evaluation, not class 0).
_ARRAY_OPTIONS: dict[str, Any] = {"fill_value": 0, "config": {"write_empty_chunks": True}}


def _chunk_shape(s: _Side, h: int, w: int) -> tuple[int, int]:
    return (h, w) if s.chunks is None else (min(s.chunks[0], h), min(s.chunks[1], w))


def _create_arrays(root: Any, sides: list[_Side], layout: str, compressors: Any) -> None:
    for s in sides:
        if layout == "stack":
            h, w = s.headers[0].shape
            s.array = root.create_array(s.name, shape=(len(s.src), h, w), dtype=s.dtype,
                                        chunks=(1, *_chunk_shape(s, h, w)),
                                        compressors=compressors, **_ARRAY_OPTIONS)  # fmt: skip
            s.array.attrs["segiou"] = {"names": list(s.src.names)}
            continue
        s.array_names = tuple(n.replace("/", _GROUP_SEP) for n in s.src.names)
        bad = [n for n in s.array_names if n in ("", ".", "..") or n.startswith(_GROUP_SEP)]
        if bad:
            msg = (
                f"{s.name}: image name(s) {bad[:3]} cannot be Zarr array names; name images "
                "without a leading '/' (use a regex)"
            )
            raise NamingError(msg)
        _check_unique(f"{s.name}: group array names ('/' -> {_GROUP_SEP!r})",
                      dict(zip(s.src.names, s.array_names, strict=True)))  # fmt: skip
        s.array = root.create_group(s.name)
        if s.array_names != s.src.names:
            s.array.attrs["segiou"] = {
                "original_names": dict(zip(s.array_names, s.src.names, strict=True))
            }


def _write_one(s: _Side, i: int, dec: _Decoding, compressors: Any) -> None:
    """Decode image ``i`` of one side and write it (runs in a worker thread)."""
    arr = _read_file(s.src.paths[i], *dec, "ingest")
    where = s.src.image_where(i)
    if arr.shape != s.headers[i].shape:
        msg = (
            f"{where}: decoded shape {arr.shape}, but its header said {s.headers[i].shape}; "
            "was the file changed during ingest? Run ingest again"
        )
        raise ImageDecodeError(msg)
    arr = _cast(arr, s.dtype, where)
    if s.array_names:
        h, w = arr.shape
        a = s.array.create_array(s.array_names[i], shape=(h, w), dtype=s.dtype,
                                 chunks=_chunk_shape(s, h, w), compressors=compressors,
                                 **_ARRAY_OPTIONS)  # fmt: skip
        a[...] = arr
    else:
        s.array[i] = arr
