"""Layer 4: Zarr mask stores: open, validate the layout, read chunks fast. No metrics.

Layouts (both Zarr format 3 and 2, any store zarr-python opens: local paths, fsspec URLs):

``stack``
    One ``N x H x W`` integer array of equal-size images (Cityscapes). Image names are the
    array attribute ``segiou.names`` (a list of ``N`` strings); without it images are named
    by index (``"000000"``, ...).
``group``
    A group with one ``H x W`` integer array per image, any sizes (ADE20K); the array's name
    is the image's name (or, when the group attribute ``segiou.original_names`` maps array
    names to image names, that name: ingest stores ``a/b`` as the array ``a__b``), images in
    sorted array-name order.

Reading: the bytes of a chunk are read from the store and decoded with numcodecs into a
reused buffer, which is 2-4x faster than zarr-python's per-chunk machinery for small chunks.
Codec chains this fast path does not know (sharding, transpose, ...) are read through
zarr-python instead: slower, same values. A chunk missing from the store reads as the array's
fill value (``missing="fill"``) or raises (``missing="error"``); for a sharded array that also
holds for a chunk missing inside an existing shard (read from the shard's index).

The Zarr specification says a chunk never written holds the fill value, and zarr-python does not
write chunks equal to it by default, so a complete store written by another tool may lack them.
Stores written by :func:`create_stack` and ``segiou ingest`` write every chunk and record it
(the attribute ``segiou.all_chunks_written`` of the array or group: :attr:`MaskSet.complete`),
so that a chunk missing from them can be refused as lost.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from segiou.errors import ChunkError, MissingChunkError, StoreLayoutError
from segiou.io._zarr_fast import Decoder, ReadSpec, declared_size, open_node, read_spec

__all__ = [
    "ChunkError",
    "MaskArray",
    "MaskSet",
    "create_stack",
    "is_zarr",
    "open_masks",
    "recorded_ids",
    "split_url",
]

Layout = Literal["stack", "group"]
Missing = Literal["fill", "error"]
#: Whose masks an array holds (ground truth or predictions), for messages.
Side = Literal["gt", "pred"]


def canonical_url(url: str) -> str:
    """Return one spelling of a remote store URL, for keys that name the data.

    The scheme and host are lower-cased (both are case-insensitive); in the path, repeated
    slashes, ``.`` segments and a trailing slash are dropped: ``S3://Bucket//val/./gt.zarr/``
    and ``s3://bucket/val/gt.zarr`` name one store. ``..`` is kept: object stores do not
    resolve it. The query string is kept as it is.

    Parameters
    ----------
    url : str
        A URL with a scheme (``s3://``, ``gs://``, ``https://``, ...).

    Returns
    -------
    str
        The canonical spelling.
    """
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s not in ("", ".")]
    path = "/" + "/".join(segments) if segments else ""
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def split_url(url: str | Path, path: str | None) -> tuple[str, str]:
    """Split ``data.zarr/val/gt`` into the store root (``data.zarr``) and the inner path."""
    text = str(url)
    if path is not None:
        return text, path.strip("/")
    if "://" in text and not text.startswith("file://"):
        return text, ""
    p = Path(text.removeprefix("file://"))
    parts = p.parts
    for i in range(len(parts), 0, -1):
        root = Path(*parts[:i])
        if (
            (root / "zarr.json").is_file()
            or (root / ".zgroup").is_file()
            or (root / ".zarray").is_file()
        ):
            # walk up to the outermost zarr node: that is the store root
            outer = i
            for j in range(i - 1, 0, -1):
                up = Path(*parts[:j])
                if (up / "zarr.json").is_file() or (up / ".zgroup").is_file():
                    outer = j
                else:
                    break
            return str(Path(*parts[:outer])), "/".join(parts[outer:])
    return text, ""


def recorded_ids(url: str | Path) -> Literal["raw", "class"] | None:
    """Return the id space ``segiou ingest`` recorded for the store holding ``url``.

    Parameters
    ----------
    url : str or Path
        A Zarr store, or a path through one (``data.zarr/gt``).

    Returns
    -------
    str or None
        ``"raw"`` or ``"class"`` (the root attribute ``segiou.ids``), or None when the store
        records none (not written by ``segiou ingest``, not a Zarr store, or unreadable: the
        engine reports that when it opens the store).
    """
    try:
        import zarr

        root, _ = split_url(url, None)
        meta = dict(zarr.open_group(root, mode="r").attrs).get("segiou", {})
    except Exception:  # noqa: BLE001 -- not a group, missing, remote: nothing recorded
        return None
    ids = meta.get("ids") if isinstance(meta, dict) else None
    return ids if ids in ("raw", "class") else None


@dataclass(frozen=True)
class MaskArray:
    """One Zarr array of masks (a stack, or one image of a group), opened lazily per process.

    Instances are small and picklable: workers reopen the array from ``url`` and ``path``.
    """

    url: str
    path: str
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str
    read_spec: ReadSpec
    _local: threading.local = field(default_factory=threading.local, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        keys = ("url", "path", "shape", "chunks", "dtype", "read_spec")
        return {k: getattr(self, k) for k in keys}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_local", threading.local())

    def _decoder(self) -> Decoder:
        dec = getattr(self._local, "dec", None)
        if dec is None:
            dec = Decoder(self.read_spec, self.url, self.path)
            self._local.dec = dec
        return dec

    def where(self) -> str:
        """Store and array path, for messages."""
        return f"{self.url}" + (f" array {self.path!r}" if self.path else "")

    def chunk_ranges(self, axis: int, start: int, stop: int) -> Iterator[tuple[int, int, int]]:
        """(chunk index, lo, hi) of the chunks along ``axis`` overlapping ``[start, stop)``.

        Parameters
        ----------
        axis : int
            Axis of the array.
        start, stop : int
            Half-open range of indices along ``axis``.

        Yields
        ------
        index : int
            Index of the chunk along ``axis``.
        lo, hi : int
            The part of ``[start, stop)`` inside that chunk (half-open); nothing is yielded
            when ``stop <= start``.
        """
        c = self.chunks[axis]
        for i in range(start // c, (stop - 1) // c + 1 if stop > start else start // c):
            yield i, max(start, i * c), min(stop, (i + 1) * c)

    def _missing(self, coords: tuple[int, ...], images: str, side: Side) -> MissingChunkError:
        if side == "pred":
            fill = self._decoder().spec.fill
            msg = (
                f"{self.where()}: chunk {coords} (images {images}) is missing from the "
                "prediction store. A store written by segiou ingest or create_stack records that "
                "it holds every chunk, so there the chunk was lost: re-write the predictions of "
                "these images (or re-ingest them). But a writer with zarr's "
                "write_empty_chunks=False (its default when an array is opened again, as "
                "zarr.open_array(..., mode='r+') on a store create_stack made) skips every chunk "
                f"equal to the fill value ({fill}): if the predictions were written so, read "
                f"them as the fill value (predictions of {fill}) with missing_pred_chunks='fill' "
                "(--missing-pred-chunks fill)"
            )
            return MissingChunkError(msg)
        msg = (
            f"{self.where()}: chunk {coords} (images {images}) is missing from the "
            "store. A store written by segiou ingest or create_stack records that it holds "
            "every chunk, so there the chunk was lost: re-ingest the ground truth. If zarr "
            "wrote the store with its default write_empty_chunks=False, chunks equal to the fill "
            f"value ({self._decoder().spec.fill}) were never written: read them as the fill "
            "value with missing_gt_chunks='fill' (--missing-gt-chunks fill)"
        )
        return MissingChunkError(msg)

    def read_chunk(
        self,
        coords: tuple[int, ...],
        *,
        missing: Missing,
        images: str,
        out: np.ndarray | None = None,
        side: Side = "gt",
    ) -> np.ndarray:
        """Decode one chunk (full chunk shape, edge chunks included).

        ``out``, a reusable buffer of the chunk's size and dtype, receives the decoded values
        when the fast path can decode into it (no allocation, no page faults).

        Parameters
        ----------
        coords : tuple of int
            Position of the chunk in the chunk grid (one index per axis).
        missing : {"fill", "error"}
            A chunk missing from the store reads as the array's fill value, or raises.
        images : str
            The images the chunk holds, named in error messages.
        out : ndarray, optional
            Reusable buffer of the chunk's size and dtype; used only by the fast path, and only
            when its dtype and size match.
        side : {"gt", "pred"}
            Whose chunk it is: what a missing chunk's error tells the user to do.

        Returns
        -------
        ndarray, shape ``chunks``
            The chunk's values in native byte order (parts beyond the array's edge hold the
            fill value or whatever the store holds there). It may be a view of ``out``.

        Raises
        ------
        ChunkError
            The chunk is missing (with ``missing="error"``) or cannot be decoded; the message
            names the store, array, chunk and images.
        """
        dec = self._decoder()
        if dec.codecs is None:  # zarr's own path for chains we do not decode
            # zarr fills a missing chunk silently: check the stored object (the shard of a
            # sharded array) first, and name the chunk when zarr cannot decode it
            shards = getattr(dec.arr, "shards", None) or self.chunks
            stored = tuple(i * c // s for i, c, s in zip(coords, self.chunks, shards, strict=True))
            if missing == "error":
                if not dec.exists(stored):
                    raise self._missing(coords, images, side)
                # zarr also fills a chunk missing inside a shard that exists: read the index
                inner = tuple(i % (s // c) for i, c, s in zip(coords, self.chunks, shards,
                                                              strict=True))  # fmt: skip
                if shards != self.chunks and dec.in_shard(stored, inner) is False:
                    raise self._missing(coords, images, side)
            sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in
                       zip(coords, self.chunks, self.shape, strict=True))  # fmt: skip
            try:
                part = np.asarray(dec.arr[sl])
            except Exception as err:
                msg = (
                    f"{self.where()}: chunk {coords} (images {images}) is corrupt and cannot be "
                    f"decoded ({type(err).__name__}: {err}); re-write this chunk or re-ingest"
                )
                raise ChunkError(msg) from err
            out = np.full(self.chunks, dec.spec.fill, dtype=part.dtype)
            out[tuple(slice(0, n) for n in part.shape)] = part
            return out
        try:
            raw = dec.raw(coords)
        except OSError as err:  # a folder where the chunk should be, an unreadable file
            msg = (
                f"{self.where()}: chunk {coords} (images {images}) cannot be read "
                f"({type(err).__name__}: {err}); a chunk is a file: fix or re-write it"
            )
            raise ChunkError(msg) from err
        if raw is None:
            if missing == "error":
                raise self._missing(coords, images, side)
            return np.full(self.chunks, dec.spec.fill, dtype=dec.dtype)
        size = int(np.prod(self.chunks))
        expected = size * dec.dtype.itemsize
        configs = dec.spec.codecs or ()
        try:
            data: Any = raw
            for j, codec in enumerate(dec.codecs):
                # a reused buffer only for a frame that states the chunk's exact size (and whose
                # decoder enforces it): a short frame would leave the buffer's old bytes behind
                if (j == len(dec.codecs) - 1 and out is not None and out.dtype == dec.dtype
                        and out.size == size
                        and declared_size(configs[j], data) == expected):  # fmt: skip
                    data = codec.decode(data, out=out.reshape(-1).view(np.uint8))
                else:
                    data = codec.decode(data)
            nbytes = data.nbytes if isinstance(data, np.ndarray) else memoryview(data).nbytes
            if nbytes != expected:
                msg = (
                    f"it decodes to {nbytes:,} bytes, but a chunk of shape {self.chunks} and "
                    f"dtype {dec.dtype} holds {expected:,}"
                )
                raise ChunkError(msg)
            arr = (
                np.frombuffer(data, dtype=dec.dtype)
                if not isinstance(data, np.ndarray)
                else (data.reshape(-1).view(dec.dtype))
            )
        except Exception as err:
            msg = (
                f"{self.where()}: chunk {coords} (images {images}) is corrupt and cannot be "
                f"decoded ({type(err).__name__}: {err}); re-write this chunk or re-ingest"
            )
            raise ChunkError(msg) from err
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        return arr.reshape(self.chunks)


@dataclass(frozen=True)
class MaskSet:
    """A set of named masks in a Zarr store (see the module docstring for the layouts).

    Attributes
    ----------
    url : str
        Store root (local path or fsspec URL).
    path : str
        Path of the array or group inside the store.
    layout : {"stack", "group"}
    names : tuple of str
        Image names in order.
    arrays : tuple of MaskArray
        ``stack``: one array; ``group``: one array per image.
    ids : {"raw", "class"} or None
        The id space ``segiou ingest`` recorded in the store (:func:`recorded_ids`).
    named : bool
        Whether the store names its images (``False``: a stack without ``segiou.names``, whose
        images are numbered ``000000``, ...: such numbers only label images).
    complete : bool
        Whether the store records that every chunk was written (``segiou ingest``,
        :func:`create_stack`: the attribute ``segiou.all_chunks_written``): a missing chunk
        was then lost, not left out as the fill value.
    """

    url: str
    path: str
    layout: Layout
    names: tuple[str, ...]
    arrays: tuple[MaskArray, ...]
    ids: Literal["raw", "class"] | None = None
    named: bool = True
    complete: bool = False

    @property
    def dtype(self) -> np.dtype:
        """The (common) dtype of the masks."""
        return np.dtype(self.arrays[0].dtype)

    def where(self) -> str:
        """Store and path, for messages."""
        return f"{self.url}" + (f" (path {self.path!r})" if self.path else "")

    def image_shape(self, i: int) -> tuple[int, int]:
        """``(H, W)`` of image ``i``.

        Parameters
        ----------
        i : int
            Index of the image, in the order of :attr:`names`.

        Returns
        -------
        tuple of (int, int)
            Height and width of the image.
        """
        a = self.arrays[0] if self.layout == "stack" else self.arrays[i]
        return (a.shape[1], a.shape[2]) if self.layout == "stack" else (a.shape[0], a.shape[1])

    def image_shapes(self) -> np.ndarray:
        """``(H, W)`` of every image at once: :meth:`image_shape` as one array.

        Returns
        -------
        ndarray of int64, shape (N, 2)
            Read-only. A ``stack`` returns a broadcast view of its one shape (no memory per
            image); a ``group`` builds the array once, on first use, and keeps it.
        """
        if self.layout == "stack":
            one = np.array(self.arrays[0].shape[1:], dtype=np.int64)
            return np.broadcast_to(one, (len(self.names), 2))
        return self._group_shapes

    @functools.cached_property
    def _group_shapes(self) -> np.ndarray:
        out = np.array([a.shape for a in self.arrays], dtype=np.int64).reshape(-1, 2)
        out.flags.writeable = False
        return out

    def n_pixels(self) -> int:
        """Total number of pixels."""
        s = self.image_shapes()
        return int((s[:, 0] * s[:, 1]).sum())


def is_zarr(path: str | Path) -> bool:
    """Whether ``path`` names a Zarr store (or a node inside one) rather than an image folder.

    Parameters
    ----------
    path : str or Path
        A URL with a scheme other than ``file://`` counts as Zarr (remote stores); a local
        path counts when it, or a folder above it, holds ``zarr.json``, ``.zgroup`` or
        ``.zarray``.

    Returns
    -------
    bool
    """
    text = str(path)
    if "://" in text and not text.startswith("file://"):
        return True
    p = Path(text.removeprefix("file://"))
    return any(
        (q / m).exists() for q in (p, *p.parents) for m in ("zarr.json", ".zgroup", ".zarray")
    )


def open_masks(url: str | Path, path: str | None = None) -> MaskSet:
    """Open a mask store and validate its layout.

    Parameters
    ----------
    url : str or Path
        Store (``gt.zarr``, ``s3://bucket/gt.zarr``) or a path through it
        (``data.zarr/val/gt``).
    path : str, optional
        Path of the array or group inside the store.

    Returns
    -------
    MaskSet

    Raises
    ------
    MaskNotFoundError
        Nothing at that location.
    StoreLayoutError
        Not a 3-D integer array nor a group of 2-D integer arrays; names that do not match the
        number of images; duplicate names.
    """
    import zarr

    root, inner = split_url(url, path)
    node = open_node(root, inner)
    where = f"{root}" + (f" (path {inner!r})" if inner else "")
    if isinstance(node, zarr.Array):
        if node.ndim != 3:
            msg = (
                f"{where}: array has shape {node.shape}; expected N x H x W masks. A single "
                "image must be stored as 1 x H x W, images of different sizes as a group"
            )
            raise StoreLayoutError(msg)
        _check_dtype(where, node.dtype)
        meta = _segiou_attrs(node, where)
        given = meta.get("names")
        if given is not None and (
            isinstance(given, str) or not isinstance(given, list)
            or not all(isinstance(n, str) for n in given)
        ):  # fmt: skip
            msg = (
                f"{where}: attribute segiou.names is {str(given)[:60]!r}; expected a list of "
                "image names (strings), one per image"
            )
            raise StoreLayoutError(msg)
        names = tuple(given or (f"{i:06d}" for i in range(node.shape[0])))
        if len(names) != node.shape[0]:
            msg = (
                f"{where}: attribute segiou.names has {len(names)} names for "
                f"{node.shape[0]} images; write one name per image"
            )
            raise StoreLayoutError(msg)
        _unique(where, names)
        arr = MaskArray(root, inner, tuple(node.shape), tuple(node.chunks), str(node.dtype),
                        read_spec(node))  # fmt: skip
        return MaskSet(root, inner, "stack", names, (arr,), recorded_ids(root), given is not None,
                       meta.get("all_chunks_written") is True)  # fmt: skip
    subs = sorted(k for k, _ in node.groups())
    if subs and "ingest" in _segiou_attrs(node, where) and not any(True for _ in node.arrays()):
        # the root of a store written by segiou ingest: its groups are mask sets, not images
        msg = (
            f"{where}: this store holds the mask sets {subs}; point at one of them, e.g. "
            f"{where}/{subs[0]}"
        )
        raise StoreLayoutError(msg)
    members = _group_arrays(node, "", where)  # every array of the group and its subgroups
    if not members:
        msg = f"{where}: group holds no arrays; expected one H x W array per image"
        if subs:
            msg += f" (it holds groups {subs[:5]}: point at one of them, e.g. {where}/{subs[0]})"
        raise StoreLayoutError(msg)
    arrays = []
    for name, _, a in members:
        if a.ndim != 2:
            hint = (
                f"; this looks like a store with several mask sets: point at one of them, e.g. "
                f"{root}/{inner + '/' if inner else ''}{name}"
                if a.ndim == 3
                else ""
            )
            msg = f"{where}: image {name!r} has shape {a.shape}; expected H x W{hint}"
            raise StoreLayoutError(msg)
        _check_dtype(f"{where} image {name!r}", a.dtype)
        sub = f"{inner}/{name}" if inner else name
        arrays.append(MaskArray(root, sub, tuple(a.shape), tuple(a.chunks), str(a.dtype),
                                read_spec(a)))  # fmt: skip
    names = tuple(image for _, image, _ in members)
    _unique(where, names)
    complete = _segiou_attrs(node, where).get("all_chunks_written") is True
    return MaskSet(root, inner, "group", names, tuple(arrays), recorded_ids(root), True, complete)


def _segiou_attrs(node: Any, where: str) -> dict[str, Any]:
    """Return the node's ``segiou`` attribute, checked to be an object (``{}`` when absent)."""
    meta = dict(node.attrs).get("segiou", {})
    if not isinstance(meta, dict):
        msg = (
            f"{where}: attribute 'segiou' is {str(meta)[:60]!r}; expected an object such as "
            '{"names": [...]} (it is written by segiou ingest and create_stack): fix or remove it'
        )
        raise StoreLayoutError(msg)
    return meta


def _group_arrays(group: Any, prefix: str, where: str) -> list[tuple[str, str, Any]]:
    """(array path, image name, array) of every array in ``group`` and its subgroups, sorted.

    An array ``city/x`` is the image ``city/x``, or the name the group attribute
    ``segiou.original_names`` gives it (ingest stores ``a/b`` as the array ``a__b``).
    """
    original = _segiou_attrs(group, where).get("original_names", {})
    if not isinstance(original, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in original.items()
    ):
        msg = (
            f"{where}: attribute segiou.original_names of group {prefix or '/'!r} is "
            f"{str(original)[:60]!r}; expected an object of array name -> image name (strings)"
        )
        raise StoreLayoutError(msg)
    found = [(prefix + n, prefix + original.get(n, n), a) for n, a in group.arrays()]
    for name, sub in group.groups():
        found += _group_arrays(sub, f"{prefix}{name}/", where)
    return sorted(found, key=lambda t: t[0])


def _check_dtype(where: str, dtype: Any) -> None:
    dt = np.dtype(str(dtype)) if not isinstance(dtype, np.dtype) else dtype
    if dt.kind not in "biu":
        msg = f"{where}: dtype {dt} is not an integer label type; masks must hold class ids"
        raise StoreLayoutError(msg)


def _unique(where: str, names: tuple[str, ...]) -> None:
    if "" in names:  # (a state marks what belongs to no named image with "")
        msg = f"{where}: image {names.index('')} has an empty name; name every image"
        raise StoreLayoutError(msg)
    seen: set[str] = set()
    dups = [n for n in names if n in seen or seen.add(n)]  # type: ignore[func-returns-value]
    if dups:
        msg = f"{where}: duplicate image names, e.g. {dups[:3]}; names must be unique"
        raise StoreLayoutError(msg)


def iter_chunk_grid(shape: tuple[int, ...], chunks: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """All chunk coordinates of an array."""
    return itertools.product(*(range(-(-s // c)) for s, c in zip(shape, chunks, strict=True)))


def create_stack(
    url: str | Path,
    *,
    n: int,
    height: int,
    width: int,
    dtype: Any = np.uint8,
    names: Sequence[str] | None = None,
    chunks: tuple[int, int] | None = None,
    path: str | None = None,
    zarr_format: Literal[2, 3] = 3,
    overwrite: bool = False,
) -> Any:
    """Create an empty ``stack`` store of ``n`` images; write images with ``arr[i] = mask``.

    Parameters
    ----------
    url : str or Path
        Store to create.
    n, height, width : int
        Number and size of the images.
    dtype : dtype
        Label dtype (uint8 unless there are more than 255 ids).
    names : sequence of str, optional
        Image names (stored as the attribute ``segiou.names``).
    chunks : (int, int), optional
        Spatial chunk shape; default one chunk per image. Chunks along N are always 1.
    path : str, optional
        Array path inside the store.
    zarr_format : {2, 3}
        Zarr format; 3 by default, with zarr's default codec (zstd).
    overwrite : bool
        Replace an existing store.

    Returns
    -------
    zarr.Array
        The new ``n x height x width`` array, filled with 0 until images are written. It
        writes every chunk (``write_empty_chunks=True``), and the store records so; that
        setting is not stored: an array opened again (``zarr.open_array(url, mode="r+")``)
        skips chunks equal to the fill value unless opened under
        ``zarr.config.set({"array.write_empty_chunks": True})``, and an evaluation then refuses
        them unless told to read them as the fill value (``missing_pred_chunks="fill"``,
        ``missing_gt_chunks="fill"``).

    Raises
    ------
    StoreLayoutError
        ``names`` does not hold one name per image.
    """
    import zarr

    if names is not None and len(names) != n:
        msg = f"{len(names)} names for {n} images; give one name per image"
        raise StoreLayoutError(msg)
    ch = chunks or (height, width)
    arr = zarr.create_array(
        store=str(url), name=path, shape=(n, height, width), chunks=(1, *ch), dtype=dtype,
        fill_value=0, zarr_format=zarr_format, overwrite=overwrite,
        # write every chunk, also those equal to the fill value (zarr skips them by default):
        # a ground-truth chunk missing from the store is an error, not class 0
        config={"write_empty_chunks": True},
    )  # fmt: skip
    # every chunk is written: a chunk missing later was lost (the evaluation refuses it)
    arr.attrs["segiou"] = {"all_chunks_written": True} | (
        {"names": list(map(str, names))} if names is not None else {}
    )
    return arr
