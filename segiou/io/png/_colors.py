"""Colour-coded masks: the colour -> id table of a label spec, and the conversion."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from segiou.errors import (
    ImageDecodeError,
    UsageError,
)
from segiou.io.png._decode import SHOWN, smallest_dtype
from segiou.labels import IdSpace, LabelSpec

__all__ = [
    "ColorTable",
    "Colors",
    "Via",
    "check_colors",
    "check_ids",
    "color_table",
    "colors_to_ids",
]

Colors = Literal["error", "ignore"]

# -- colours ----------------------------------------------------------------------------------
# what a colour decodes to: a value (code _OK), or why it cannot be decoded
_OK, _UNKNOWN, _AMBIGUOUS, _NO_IGNORE, _NO_RAW = 0, 1, 2, 3, 4
#: Who decodes: ``PngSet.read`` (Python, or ``segiou eval`` on folders) or ``ingest``.
Via = Literal["read", "ingest"]


@dataclass(frozen=True)
class ColorTable:
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


def check_ids(ids: object) -> None:
    if ids not in ("class", "raw"):
        msg = f"ids={ids!r} is unknown; expected 'raw' (the spec's raw ids) or 'class'"
        raise UsageError(msg)


def check_colors(colors: object) -> None:
    if colors not in ("error", "ignore"):
        msg = f"colors={colors!r} is unknown; expected 'error' or 'ignore'"
        raise UsageError(msg)


@functools.lru_cache(maxsize=32)
def color_table(spec: LabelSpec, ids: IdSpace = "class") -> ColorTable | None:
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
    return ColorTable(spec.name, source, ids, np.array(keys, dtype=np.uint32),
                       np.array(values, dtype=np.int64), np.array(codes, dtype=np.int8),
                       tuple(owners), ignore, low, top, smallest_dtype(low, top))  # fmt: skip


def _fmt_color(v: int) -> str:
    r, g, b = _unpack(v)
    return f"({r}, {g}, {b})"


def _ranked(packed: np.ndarray) -> list[tuple[int, int]]:
    """(colour, pixel count) of each distinct value, most frequent first."""
    u, c = np.unique(packed, return_counts=True)
    order = np.lexsort((u, -c))
    return [(int(u[i]), int(c[i])) for i in order]


def _ignore_hint(via: Via) -> str:
    """How to map unknown or ambiguous colours to the ignore value, in the caller's terms."""
    if via == "ingest":
        return "colors='ignore' (segiou ingest --colors ignore)"
    return (
        "colors='ignore' (PngSet.read in Python; 'segiou eval' on image folders has no such "
        "option: pack the folders with 'segiou ingest --colors ignore' and evaluate the store)"
    )


def _class_ids_hint(via: Via) -> str:
    """How to decode colours to class ids instead, in the caller's terms."""
    if via == "ingest":
        return "ids='class' (segiou ingest --ids class)"
    return "ids='class' (segiou eval --gt-ids class / --pred-ids class)"


def colors_to_ids(
    rgb: np.ndarray,
    spec: LabelSpec | None,
    colors: Colors,
    path: str,
    ids: IdSpace = "class",
    via: Via = "read",
) -> np.ndarray:
    """Vectorised colour -> id conversion (id space ``ids``) of an H x W x 3/4 ``uint8`` image."""
    table = None if spec is None else color_table(spec, ids)
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
    table: ColorTable, rgb: np.ndarray, packed: np.ndarray, codes: np.ndarray, path: str,
    via: Via,
) -> ImageDecodeError:  # fmt: skip
    """Build the error for the pixels (colours ``packed``) that cannot be decoded (``codes``)."""
    where_ = f"label spec {table.spec!r} ({table.source})"
    if (codes == _UNKNOWN).any():
        ranked = _ranked(packed[codes == _UNKNOWN])
        shown = ", ".join(f"{_fmt_color(v)}: {n:,} px" for v, n in ranked[:SHOWN])
        more = ""
        if len(ranked) > SHOWN:
            rest = sum(n for _, n in ranked[SHOWN:])
            more = f", and {len(ranked) - SHOWN} more colour(s) in {rest:,} px"
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
