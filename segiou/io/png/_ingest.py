"""Pack label images into a Zarr store (``segiou ingest``)."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

import numpy as np

from segiou.errors import (
    ImageDecodeError,
    MaskNotFoundError,
    NamingError,
    StoreExistsError,
    UsageError,
)
from segiou.io.png._colors import Colors, check_colors, check_ids, color_table
from segiou.io.png._decode import Header, read_header, smallest_dtype
from segiou.io.png._pairs import PngSet, check_unique, read_file
from segiou.labels import IdSpace, LabelSpec, load_spec

__all__ = ["CODEC_CHOICES", "ingest", "parse_codec"]

GROUP_SEP = "__"


def _is_url(out: str | Path) -> bool:
    text = str(out)
    return "://" in text and not text.startswith("file://")


def _is_zarr_dir(p: Path) -> bool:
    return any((p / f).is_file() for f in ("zarr.json", ".zgroup", ".zarray"))


def _check_out(out: Path, overwrite: bool, inputs: list[str]) -> None:
    """Refuse an output store that would replace something else, or lie in (or hold) an input."""
    real = Path(os.path.realpath(out))
    for root in filter(None, inputs):
        src = Path(os.path.realpath(root))
        if real == src or real.is_relative_to(src) or src.is_relative_to(real):
            inside = "inside the input" if real != src and real.is_relative_to(src) else "the input"
            if src.is_relative_to(real) and real != src:
                inside = "a folder holding the input"
            msg = (
                f"--out {str(out)!r} is {inside} {str(src)!r}: writing (or replacing) the store "
                "there would change or delete the images being ingested; choose another path"
            )
            raise UsageError(msg)
    top = next(p for p in (real, *real.parents) if p.exists())
    if top != real and not os.access(top, os.W_OK | os.X_OK):
        msg = f"--out {str(out)!r}: folder {str(top)!r} is not writable; choose another path"
        raise UsageError(msg)
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


def _put_in_place(new: Path, final: Path) -> None:
    """Move the store ``new`` to ``final``; a store there is set aside until it is replaced.

    Should the move fail, the old store goes back; should the process die between the two
    renames, it is kept as ``.<name>.replaced-*/<name>`` beside ``final``.
    """
    if not final.exists():
        new.replace(final)
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{final.name}.replaced-", dir=final.parent))
    try:
        final.replace(aside / final.name)
    except BaseException:
        aside.rmdir()
        raise
    try:
        new.replace(final)
    except BaseException:
        (aside / final.name).replace(final)
        aside.rmdir()
        raise
    shutil.rmtree(aside, ignore_errors=True)  # the new store is in place: done either way


def _left_over(final: Path) -> list[dict[str, str]]:
    """Folders an ingest into ``final`` left beside it when its process died (or still writes).

    ``.<name>.replaced-*`` holds the store that was at ``final`` before (set aside between the
    two renames of :func:`_put_in_place`); ``.<name>.partial-*`` a store being written.
    """
    return [
        {"path": str(path), "kind": kind}
        for kind in ("replaced", "partial")
        for path in sorted(final.parent.glob(f".{glob_escape(final.name)}.{kind}-*"))
        if path.is_dir()
    ]


def _dir_bytes(path: Path) -> int:
    return sum((Path(d) / f).stat().st_size for d, _, files in os.walk(path) for f in files)


@dataclass
class _Side:
    name: str  # "gt" or "pred"
    src: PngSet
    headers: list[Header]
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
    arr = read_file(src.paths[i], *dec, "ingest")
    return (int(arr.min()), int(arr.max())) if arr.size else (0, 0)


def _wide(h: Header) -> bool:
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
    instances: PngSet | None = None,
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
    instances : PngSet, optional
        Instance ids of the ground truth (Cityscapes ``*_gtFine_instanceIds.png``, the same
        image names), stored as a third array (or group) ``instances`` in the ground truth's
        layout, where ``segiou eval`` finds them for iIoU.

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
        for remote stores); ``left_over``: folders an earlier ingest into ``out`` left beside
        it when it did not finish (or another one still writes), each ``{"path", "kind"}``:
        ``"replaced"`` holds the store that was at ``out`` before it (its process died between
        setting it aside and moving the new one in), ``"partial"`` a store being written;
        segiou never deletes them (remote stores: none); ``seconds``.

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
    check_colors(colors)
    if ids is not None:
        check_ids(ids)
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
    if instances is not None:
        if tuple(instances.names) != tuple(gt_src.names):
            msg = (
                f"instances: {instances.where()} does not name the same images as the ground "
                f"truth {gt_src.where()} in the same order; give one instance file per image"
            )
            raise MaskNotFoundError(msg)
        srcs.append(("instances", instances))
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
    left: list[dict[str, str]] = []
    final = Path(str(out).removeprefix("file://"))
    if not remote:
        _check_out(final, overwrite, [gt_src.root] + ([pred_src.root] if pred_src else []))
        final = Path(os.path.realpath(final))  # a symlinked output: write where it leads

    n_workers = workers or min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's default
    pool = ThreadPoolExecutor(n_workers, thread_name_prefix="segiou-ingest")
    window = 2 * n_workers
    tmp: Path | None = None
    try:
        sides = []
        for side, src in srcs:
            headers = list(pool.map(read_header, src.paths))
            sides.append(_Side(side, src, headers))
        shapes = {h.shape for s in sides for h in s.headers}
        layout = "stack" if len(shapes) == 1 else "group"
        # dtypes from headers; decode the wider images once more to find their value range
        table = None if sp is None else color_table(sp, space)
        for s in sides:
            colour = [i for i, h in enumerate(s.headers) if h.dtype is None]
            s.n_color = len(colour)
            if colour and table is None:
                read_file(s.src.paths[colour[0]], *dec, "ingest")  # raises, naming the file
            lo, hi = (table.low, table.top) if colour and table is not None else (0, 0)
            wide = [(s.src, i, dec) for i, h in enumerate(s.headers) if _wide(h)]
            for a, b in _bounded(pool, _range_of, wide, window):
                lo, hi = min(lo, a), max(hi, b)
            if lo < 0 and any(h.dtype is not None and not _wide(h) for h in s.headers):
                hi = max(hi, 255)  # 8-bit images are not measured: beside negative ids, int16
            if lo < 0 and hi >= 1 << 63:
                msg = (
                    f"{s.name} images of {s.src.where()} hold ids from {lo} to {hi}: no integer type holds both "
                    "(int64 ends at 2**63 - 1, uint64 at 0). Check those masks"
                )
                raise ImageDecodeError(msg)
            s.dtype = smallest_dtype(lo, hi)
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
            left = _left_over(final)  # before this ingest's own partial store
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
            _put_in_place(tmp, final)
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
    for side in ("gt", "pred", "instances"):
        found = [x for x in sides if x.name == side]
        summary[side] = None if not found else {
            "images": len(found[0].src), "dtype": str(found[0].dtype),
            "colour_images": found[0].n_color, "source": found[0].src.root,
        }  # fmt: skip
    if pred_src is not None:
        g, p = set(gt_src.names), set(pred_src.names)
        summary["unmatched"] = {"gt": len(g - p), "pred": len(p - g)}
    summary["bytes"] = nbytes
    summary["left_over"] = left
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
            s.array.attrs["segiou"] = {"names": list(s.src.names), "all_chunks_written": True}
            continue
        s.array_names = tuple(n.replace("/", GROUP_SEP) for n in s.src.names)
        bad = [n for n in s.array_names
               if n in ("", ".", "..", "zarr.json") or n.startswith(GROUP_SEP)]  # fmt: skip
        if bad:
            msg = (
                f"{s.name}: image name(s) {bad[:3]} cannot be Zarr array names (reserved: "
                "'zarr.json', '.', '..', a leading '/' or '__'); rename the files, or name the "
                "images with a regex"
            )
            raise NamingError(msg)
        check_unique(f"{s.name}: group array names ('/' -> {GROUP_SEP!r})",
                      dict(zip(s.src.names, s.array_names, strict=True)))  # fmt: skip
        s.array = root.create_group(s.name)
        meta: dict[str, Any] = {"all_chunks_written": True}
        if s.array_names != s.src.names:
            meta["original_names"] = dict(zip(s.array_names, s.src.names, strict=True))
        s.array.attrs["segiou"] = meta


def _write_one(s: _Side, i: int, dec: _Decoding, compressors: Any) -> None:
    """Decode image ``i`` of one side and write it (runs in a worker thread)."""
    arr = read_file(s.src.paths[i], *dec, "ingest")
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
