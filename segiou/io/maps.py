"""Error maps: where every pixel went, per image, in a Zarr store. No metrics.

The engine's counting tasks write them in the same pass, chunk by chunk, as they count
(:class:`MapWriter` is given to the tasks; nothing is read again). Each pixel holds its *pair
code* ``g * (K + 2) + p``, the cell of the image's confusion table it was counted in:

* ``g`` is the ground-truth code: a class ``0..K-1``, ``K`` ignored, ``K+1`` unexpected;
* ``p`` is the prediction code: a class ``0..K-1``, ``K`` void, ``K+1`` unexpected; at an
  ignored or unexpected ground-truth pixel ``p = g`` (those pixels are one cell, whatever was
  predicted).

So a pixel is *correct* when ``g == p < K``, *false* (class ``g`` predicted as ``p``) when both
are classes and differ, *void* when ``g < K`` and ``p == K``, *ignored* when ``g == K`` and
*unexpected* when ``g == K+1`` or ``p == K+1`` (:func:`kinds`). The histogram of an image's map
is its confusion entries: the correct pixels of class ``c`` number its TP, and so on.
``(K+2)**2`` is the fill value: "not written".

Layout of the store (``maps.zarr``): a root group whose attribute ``segiou.error_maps`` records
the encoding, classes and sources, and under ``maps`` the images in the ground truth's layout:
an ``N x H x W`` array (a ``stack``; image names in ``segiou.names``; chunks ``(1, ch, cw)``,
the ground truth's spatial chunks) or a group of ``H x W`` arrays named ``000000``, ... with
the image names in ``segiou.original_names`` (a ``group``; each chunked like its ground truth;
image files: one chunk per image). :func:`segiou.io.zarr.open_masks` opens ``maps.zarr/maps``
like any mask store; :func:`open_maps` also reads the encoding.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from segiou._count import IGNORE
from segiou._typing import IntArray
from segiou.errors import OutputError, StoreExistsError, StoreLayoutError, UsageError
from segiou.labels import IdSpace, LabelSpec

__all__ = [
    "CORRECT",
    "FALSE",
    "IGNORED",
    "KIND_NAMES",
    "UNEXPECTED",
    "VOID",
    "ErrorMaps",
    "MapWriter",
    "check_maps_output",
    "create_maps",
    "decode",
    "is_maps_store",
    "kinds",
    "map_dtype",
    "open_maps",
    "pair_codes",
]

#: Pixel kinds of :func:`kinds`, in order of their values.
KIND_NAMES = ("correct", "false", "ignored", "void", "unexpected")
CORRECT, FALSE, IGNORED, VOID, UNEXPECTED = range(5)
#: Version of the store's encoding (the ``segiou.error_maps`` attribute).
MAPS_VERSION = 1
_ATTR = "error_maps"
#: A file in the temporary store while the run may write it: writers refuse once it is gone.
_WRITING = ".segiou-writing"


def map_dtype(k: int) -> np.dtype:
    """Return the dtype of maps for ``k`` classes: the smallest unsigned type above ``(K+2)**2``.

    Parameters
    ----------
    k : int
        Number of classes.

    Returns
    -------
    numpy.dtype
        ``uint16`` up to 253 classes, else ``uint32``.

    Examples
    --------
    >>> map_dtype(19), map_dtype(300)
    (dtype('uint16'), dtype('uint32'))
    """
    return np.dtype(np.uint16) if (k + 2) ** 2 <= np.iinfo(np.uint16).max else np.dtype(np.uint32)


def decode(maps: np.ndarray, k: int) -> tuple[IntArray, IntArray]:
    """Split pair codes into ground-truth and prediction codes.

    Parameters
    ----------
    maps : ndarray of unsigned int
        Pair codes ``g * (K+2) + p``.
    k : int
        Number of classes.

    Returns
    -------
    gt, pred : ndarray of int64
        Codes: ``0..K-1`` classes, ``K`` ignored (gt) or void (pred), ``K+1`` unexpected.

    Examples
    --------
    >>> g, p = decode(np.array([0, 6, 20], np.uint16), 3)  # K = 3: width 5
    >>> g.tolist(), p.tolist()
    ([0, 1, 4], [0, 1, 0])
    """
    g, p = np.divmod(np.asarray(maps, dtype=np.int64), k + 2)
    return g, p


def kinds(maps: np.ndarray, k: int) -> np.ndarray:
    """Say what happened at each pixel: correct, false, ignored, void or unexpected.

    Parameters
    ----------
    maps : ndarray of unsigned int
        Pair codes.
    k : int
        Number of classes.

    Returns
    -------
    ndarray of uint8
        :data:`CORRECT` (0), :data:`FALSE` (1), :data:`IGNORED` (2), :data:`VOID` (3),
        :data:`UNEXPECTED` (4); 255 where nothing was written (the fill value).

    Examples
    --------
    >>> kinds(np.array([0, 1, 3, 18, 4, 24, 25], np.uint16), 3).tolist()  # K = 3: width 5
    [0, 1, 3, 2, 4, 4, 255]
    """
    g, p = decode(maps, k)
    out = np.full(g.shape, 255, dtype=np.uint8)
    out[(g == p) & (g < k)] = CORRECT
    out[(g < k) & (p < k) & (g != p)] = FALSE
    out[(g == k) & (p == k)] = IGNORED
    out[(g < k) & (p == k)] = VOID
    out[(g == k + 1) | ((g < k) & (p == k + 1))] = UNEXPECTED
    return out


def _codes_of(values: np.ndarray, mapping: Mapping[int, int], k: int, cache: dict[Any, Any],
              side: str) -> IntArray:  # fmt: skip
    """Each value's code (class, ``K`` ignore/void, ``K+1`` unexpected), through a table."""
    if values.dtype == np.bool_:
        values = values.view(np.uint8) != 0  # numpy reads any non-zero byte as True
        values = values.view(np.uint8)
    dt = values.dtype
    if not dt.isnative:
        values = values.astype(dt.newbyteorder("="))
        dt = values.dtype
    key = (side, dt.str)
    if dt.itemsize <= 2:  # a table over every value of the dtype
        table = cache.get(key)
        if table is None:
            info = np.iinfo(dt)
            table = np.full(int(info.max) - int(info.min) + 1, k + 1, dtype=np.int64)
            for raw, cls in mapping.items():
                if info.min <= raw <= info.max:
                    table[raw - int(info.min)] = k if cls == IGNORE else cls
            cache[key] = table
        idx = values.astype(np.int64) - int(np.iinfo(dt).min) if dt.kind == "i" else values
        out: IntArray = table[idx]
        return out
    lo, hi = min(mapping), max(mapping)
    table = cache.get((side, "span"))
    if table is None:
        table = np.full(hi - lo + 1, k + 1, dtype=np.int64)
        for raw, cls in mapping.items():
            table[raw - lo] = k if cls == IGNORE else cls
        cache[(side, "span")] = table
    big = values >= np.uint64(1 << 63) if dt == np.uint64 else None
    v = values.astype(np.int64)
    inside = (v >= lo) & (v <= hi)
    if big is not None:
        inside &= ~big
    res = np.full(v.shape, k + 1, dtype=np.int64)
    res[inside] = table[v[inside] - lo]
    return res


def pair_codes(g: np.ndarray, p: np.ndarray, gt_map: Mapping[int, int],
               pred_map: Mapping[int, int], k: int,
               cache: dict[Any, Any] | None = None) -> np.ndarray:  # fmt: skip
    """Pair code of every pixel (see the module docstring), as counting classifies it.

    Parameters
    ----------
    g, p : ndarray of int or bool
        Ground truth and prediction of the same shape (raw values).
    gt_map, pred_map : mapping of int to int
        Raw value -> class, or :data:`segiou._count.IGNORE` (ignored / void); other values are
        unexpected (the label spec's maps for the id spaces counted in).
    k : int
        Number of classes.
    cache : dict, optional
        Lookup tables kept between calls (per dtype).

    Returns
    -------
    ndarray of :func:`map_dtype`
        ``g * (K+2) + p`` codes; at ignored or unexpected ground truth ``p = g``.

    Examples
    --------
    >>> m = {0: 0, 1: 1, 255: -1}  # two classes, 255 ignored / void
    >>> pair_codes(np.array([0, 0, 1, 255, 7]), np.array([0, 1, 255, 0, 0]), m, m, 2).tolist()
    [0, 1, 6, 10, 15]
    """
    cache = {} if cache is None else cache
    gc = _codes_of(np.asarray(g), gt_map, k, cache, "gt")
    pc = _codes_of(np.asarray(p), pred_map, k, cache, "pred")
    pc = np.where(gc >= k, gc, pc)  # ignored / unexpected ground truth: one cell
    out: np.ndarray = (gc * (k + 2) + pc).astype(map_dtype(k))
    return out


def is_maps_store(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an error-maps store segiou wrote (its root attribute says so).

    Parameters
    ----------
    path : str or os.PathLike
        A folder.

    Returns
    -------
    bool
    """
    try:
        import zarr

        meta = dict(zarr.open_group(str(path), mode="r").attrs).get("segiou")
    except Exception:  # noqa: BLE001 - not a Zarr group, unreadable: not segiou's maps
        return False
    return isinstance(meta, dict) and _ATTR in meta


def check_maps_output(
    path: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str]] = ()
) -> Path:
    """Check, before any mask is read, that error maps can be written at ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        A local folder to create (or an error-maps store segiou wrote, which is replaced).
    inputs : iterable of path
        The stores and folders being read: the maps may be neither inside one nor around one.

    Returns
    -------
    Path
        The absolute path (symlinks resolved).

    Raises
    ------
    UsageError
        An empty path or a URL, a folder that does not exist or is not writable, or a path
        inside (or around) an input.
    StoreExistsError
        Something other than a segiou error-maps store exists at ``path`` (never replaced).
    """
    text = os.fspath(path)
    if not text.strip():
        msg = "--error-maps is empty; give the path of a Zarr store to create (maps.zarr)"
        raise UsageError(msg)
    if "://" in text:
        msg = f"--error-maps {text!r}: error maps are written to a local path, not a URL"
        raise UsageError(msg)
    target = Path(os.path.realpath(text))
    if target.exists() and not is_maps_store(target):
        msg = (
            f"--error-maps {text!r} exists and is not an error-maps store segiou wrote; it is "
            "never replaced: choose a new path"
        )
        raise StoreExistsError(msg)
    parent = target.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        what = "does not exist" if not parent.exists() else "is not a writable folder"
        msg = f"--error-maps {text!r}: {str(parent)!r} {what}"
        raise UsageError(msg)
    for inp in inputs:
        s = os.fspath(inp)
        if "://" in s:
            continue
        root = Path(os.path.realpath(s))
        if target == root or target.is_relative_to(root) or root.is_relative_to(target):
            msg = (
                f"--error-maps {text!r} lies inside (or around) the input {str(root)!r}; write "
                "the maps elsewhere"
            )
            raise UsageError(msg)
    return target


@dataclass(frozen=True)
class MapWriter:
    """Writes error-map regions from counting tasks: small and picklable (workers reopen).

    Created by :func:`create_maps` in a temporary folder beside the target; the engine calls
    :meth:`write` for each chunk pair it counts, then :meth:`commit` (or :meth:`abort`).
    :meth:`write` refuses once :meth:`stop` (or :meth:`abort`) removed the run's marker file
    from the temporary store, so a task still running on a cluster after the run failed does
    not write (and so recreate) a store being removed.

    Attributes
    ----------
    url : str
        The temporary store being written.
    target : str
        Where :meth:`commit` puts it.
    k : int
        Number of classes.
    layout : {"stack", "group"}
        How images are stored under ``maps``.
    gt_map, pred_map : mapping of int to int
        How raw values become classes (the accumulator's).
    """

    url: str
    target: str
    k: int
    layout: str
    gt_map: Mapping[int, int]
    pred_map: Mapping[int, int]
    _local: threading.local = field(default_factory=threading.local, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        keys = ("url", "target", "k", "layout", "gt_map", "pred_map")
        return {k: getattr(self, k) for k in keys}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_local", threading.local())

    def _array(self, i: int) -> Any:
        arrays: dict[int, Any] | None = getattr(self._local, "arrays", None)
        if arrays is None:
            arrays = self._local.arrays = {}
            self._local.cache = {}
        arr = arrays.get(0 if self.layout == "stack" else i)
        if arr is None:
            import zarr

            path = "maps" if self.layout == "stack" else f"maps/{i:06d}"
            arr = zarr.open_array(self.url, path=path, mode="r+")
            if self.layout == "group":
                arrays.clear()  # one array per image, never written again: keep one open
            arrays[0 if self.layout == "stack" else i] = arr
        return arr

    def write(self, i: int, y0: int, y1: int, x0: int, x1: int, g: np.ndarray,
              p: np.ndarray) -> None:  # fmt: skip
        """Write the codes of image ``i``'s region ``[y0:y1, x0:x1]`` (ground truth ``g``, prediction ``p``)."""
        if not Path(self.url, _WRITING).exists():  # the run stopped
            msg = f"error maps {self.target!r}: the run was stopped; not writing image {i}"
            raise OutputError(msg)
        arr = self._array(i)
        codes = pair_codes(g, p, self.gt_map, self.pred_map, self.k, self._local.cache)
        if self.layout == "stack":
            arr[i, y0:y1, x0:x1] = codes
        else:
            arr[y0:y1, x0:x1] = codes

    def commit(self) -> Path:
        """Move the finished store to its target (replacing segiou maps there); return it."""
        target = Path(self.target)
        self.stop()
        if target.exists():
            if not is_maps_store(target):  # appeared meanwhile: never replaced
                msg = f"--error-maps {self.target!r} appeared during the run; left as it was"
                raise StoreExistsError(msg)
            shutil.rmtree(target)
        Path(self.url).replace(target)
        return target

    def stop(self) -> None:
        """Make every :meth:`write` refuse from now on (remove the run's marker file)."""
        Path(self.url, _WRITING).unlink(missing_ok=True)

    def abort(self) -> None:
        """Remove the temporary store (the run failed: no half-written maps are left).

        On a cluster, stop the run's tasks first (the engine does): a task still writing
        would recreate the folder.
        """
        self.stop()
        shutil.rmtree(self.url, ignore_errors=True)


def create_maps(
    path: str | os.PathLike[str],
    gt: Any,
    spec: LabelSpec,
    gt_ids: IdSpace,
    pred_ids: IdSpace,
    *,
    sources: Mapping[str, str] | None = None,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> MapWriter:
    """Create an empty error-maps store for the images of ``gt`` (in a temporary folder).

    Parameters
    ----------
    path : str or os.PathLike
        The store to write (checked with :func:`check_maps_output`); the maps are written into
        a temporary folder beside it and moved there by :meth:`MapWriter.commit`.
    gt : MaskSet or PngSet
        The ground truth: its images, layout and chunks.
    spec : LabelSpec
        The label spec counted with.
    gt_ids, pred_ids : {"class", "raw"}
        The id spaces counted in.
    sources : mapping of str to str, optional
        What was compared (recorded in the attributes), e.g. ``{"gt": ..., "pred": ...}``.
    inputs : iterable of path, optional
        The stores and folders read: the maps may be neither inside one nor around one.

    Returns
    -------
    MapWriter
    """
    import zarr

    target = check_maps_output(path, inputs=inputs)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    k = spec.num_classes
    dtype = map_dtype(k)
    fill = (k + 2) ** 2
    root = zarr.open_group(str(tmp), mode="w")
    names = list(gt.names)
    root.attrs["segiou"] = {_ATTR: {
        "version": MAPS_VERSION, "labels": spec.name, "num_classes": k,
        "classes": list(spec.classes), "gt_ids": gt_ids, "pred_ids": pred_ids,
        "encoding": "g * (K + 2) + p; g: class 0..K-1, K ignored, K+1 unexpected; p: class "
        "0..K-1, K void, K+1 unexpected; p = g where g >= K",
        "fill": fill, "kinds": list(KIND_NAMES), "sources": dict(sources or {}),
        "layout": "stack" if gt.layout == "stack" else "group", "names": names,
    }}  # fmt: skip
    if gt.layout == "stack":
        arr = gt.arrays[0]
        root.create_array("maps", shape=tuple(arr.shape), chunks=(1, *arr.chunks[1:]),
                          dtype=dtype, fill_value=fill,
                          config={"write_empty_chunks": True})  # fmt: skip
        root["maps"].attrs["segiou"] = {"names": names}
        layout = "stack"
    else:
        group = root.create_group("maps")
        for i in range(len(names)):
            shape = gt.image_shape(i)
            chunks = tuple(gt.arrays[i].chunks) if gt.layout == "group" else shape
            group.create_array(f"{i:06d}", shape=shape, chunks=chunks, dtype=dtype,
                               fill_value=fill, config={"write_empty_chunks": True})  # fmt: skip
        group.attrs["segiou"] = {"original_names": {f"{i:06d}": n for i, n in enumerate(names)}}
        layout = "group"
    (tmp / _WRITING).touch()
    return MapWriter(str(tmp), str(target), k, layout, dict(spec.gt_map(gt_ids)),
                     dict(spec.pred_map(pred_ids)))  # fmt: skip


@dataclass(frozen=True)
class ErrorMaps:
    """An error-maps store opened for reading (see the module docstring).

    Attributes
    ----------
    path : str
        The store.
    num_classes : int
        ``K``.
    classes : tuple of str
        Class names.
    names : tuple of str
        Image names, in order.
    meta : dict
        The ``segiou.error_maps`` attribute.
    """

    path: str
    num_classes: int
    classes: tuple[str, ...]
    names: tuple[str, ...]
    meta: dict[str, Any]

    def read(self, image: int | str) -> np.ndarray:
        """Return the pair codes of one image (by index or name).

        Parameters
        ----------
        image : int or str
            Index in :attr:`names`, or the name.

        Returns
        -------
        ndarray, shape (H, W)
        """
        import zarr

        i = self.names.index(image) if isinstance(image, str) else int(image)
        if self.meta["layout"] == "stack":
            return np.asarray(zarr.open_array(self.path, path="maps", mode="r")[i])
        return np.asarray(zarr.open_array(self.path, path=f"maps/{i:06d}", mode="r")[:])

    def kinds(self, image: int | str) -> np.ndarray:
        """Return :func:`kinds` of one image (0 correct, 1 false, 2 ignored, 3 void, 4 unexpected)."""
        return kinds(self.read(image), self.num_classes)


def open_maps(path: str | os.PathLike[str]) -> ErrorMaps:
    """Open an error-maps store written by ``segiou eval --error-maps``.

    Parameters
    ----------
    path : str or os.PathLike
        The store.

    Returns
    -------
    ErrorMaps

    Raises
    ------
    StoreLayoutError
        Not an error-maps store (or one of an unknown version).
    """
    import zarr

    where = os.fspath(path)
    if not is_maps_store(where):
        msg = f"{where!r} is not an error-maps store (written by segiou eval --error-maps)"
        raise StoreLayoutError(msg)
    attrs: Any = zarr.open_group(where, mode="r").attrs
    meta: dict[str, Any] = dict(attrs["segiou"][_ATTR])
    if meta.get("version") != MAPS_VERSION:
        msg = f"{where!r}: error maps version {meta.get('version')!r}; this segiou reads 1"
        raise StoreLayoutError(msg)
    return ErrorMaps(where, int(meta["num_classes"]), tuple(meta["classes"]),
                     tuple(meta["names"]), meta)  # fmt: skip
