"""Every zarr-python internal segiou uses, in one place, each with a fallback to the public API.

The fast path reads a chunk's bytes from the store and decodes them with numcodecs into a reused
buffer (2-4x faster than zarr-python's per-chunk machinery for small chunks). It needs zarr
internals: ``zarr.core.sync.sync`` (zarr's event loop, to call a store's async ``get`` and
``exists``), the buffer prototype, and the array metadata's chunk-key encoding and codec list.
When a zarr release moves or changes one of them, this module falls back to what the public API
offers: chunks are read with ``zarr.Array.__getitem__`` (slower, same values) and store calls run
on a private event loop. ``tests/io/test_zarr_fast.py`` runs the readers with the internals
switched off.
"""

from __future__ import annotations

import asyncio
import errno
import stat
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from segiou.errors import MaskNotFoundError, StoreLayoutError

__all__ = [
    "EMPTY",
    "INTERNALS",
    "Decoder",
    "ReadSpec",
    "declared_size",
    "open_node",
    "read_spec",
    "run_sync",
]

try:  # zarr's own event loop: store objects (fsspec ones in particular) are bound to it
    from zarr.core.sync import sync as _zarr_sync
except ImportError:  # pragma: no cover - depends on the zarr release
    _zarr_sync = None  # type: ignore[assignment]
try:
    from zarr.buffer import default_buffer_prototype as _prototype
except ImportError:  # pragma: no cover - zarr < 3.1 has it only here
    try:
        from zarr.core.buffer import default_buffer_prototype as _prototype
    except ImportError:
        _prototype = None  # type: ignore[assignment]


class _Internals:
    """Which internals are usable; tests switch them off to exercise the fallbacks."""

    def __init__(self) -> None:
        self.sync = _zarr_sync is not None
        self.prototype = _prototype is not None
        self.metadata = True  # the chunk-key encoding and codec list of array metadata


#: The zarr internals in use (see :class:`_Internals`).
INTERNALS = _Internals()


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a store coroutine: on zarr's loop when available, else on a private one."""
    if INTERNALS.sync and _zarr_sync is not None:
        return _zarr_sync(coro)
    return asyncio.run(coro)


def _store_get(store: Any, key: str, byte_range: Any = None) -> bytes | None:
    """Return the bytes of ``key`` (or a range of them), or None when absent; needs the prototype."""
    assert _prototype is not None
    buf = run_sync(store.get(key, prototype=_prototype(), byte_range=byte_range))
    return None if buf is None else bytes(buf.to_bytes())


def open_node(url: str, path: str) -> Any:
    """Open the Zarr array or group at ``path`` of the store ``url`` read-only (public API).

    Parameters
    ----------
    url : str
        Store root (local path or URL).
    path : str
        Path inside the store ("" for the root).

    Returns
    -------
    zarr.Array or zarr.Group

    Raises
    ------
    MaskNotFoundError
        Nothing there.
    StoreLayoutError
        Something there that zarr cannot open.
    """
    import zarr

    try:
        return zarr.open(store=url, path=path or None, mode="r")
    except FileNotFoundError as err:
        where = f"{url}" + (f" (path {path!r})" if path else "")
        msg = f"no Zarr array or group at {where}; check the path, or run 'segiou ingest' first"
        raise MaskNotFoundError(msg) from err
    except Exception as err:  # zarr raises many types for "not a zarr node"
        where = f"{url}" + (f" (path {path!r})" if path else "")
        msg = f"cannot open a Zarr array or group at {where}: {type(err).__name__}: {err}"
        raise StoreLayoutError(msg) from err


def _v3_codec_configs(codecs: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]] | None:
    """(endianness, numcodecs configs in decode order) for a plain v3 chain, else None."""
    if not codecs or codecs[0]["name"] != "bytes":
        return None
    endian = (codecs[0].get("configuration") or {}).get("endian") or "little"
    out: list[dict[str, Any]] = []
    for c in codecs[1:]:
        cfg: dict[str, Any] = c.get("configuration") or {}
        name = c["name"]
        if name == "zstd":
            out.append({"id": "zstd", "level": cfg.get("level", 0),
                        "checksum": cfg.get("checksum", False)})  # fmt: skip
        elif name == "gzip":
            out.append({"id": "gzip", "level": cfg.get("level", 5)})
        elif name == "blosc":
            shuffle = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}.get(
                str(cfg.get("shuffle")), 1
            )
            out.append({"id": "blosc", "cname": cfg.get("cname", "zstd"),
                        "clevel": cfg.get("clevel", 5), "shuffle": shuffle,
                        "blocksize": cfg.get("blocksize", 0)})  # fmt: skip
        elif name == "crc32c":
            out.append({"id": "crc32c"})
        else:
            return None
    return endian, out[::-1]


@dataclass(frozen=True)
class ReadSpec:
    """How to read a chunk without zarr-python: plain, picklable data fixed at open time."""

    root: str | None  # local store root, or None: read through the zarr store
    key_prefix: str  # e.g. "gt/c/" (array path + chunk key prefix)
    key_sep: str  # "/" or "."
    codecs: tuple[dict[str, Any], ...] | None  # numcodecs configs, decode order; None = zarr
    dtype: str  # with byte order
    fill: Any  # what a missing chunk reads as (0 when the array has none)
    #: The array has no fill value (Zarr v2 ``fill_value: null``): the specification leaves a
    #: chunk that was never written undefined, so it is not read as 0 unless asked to.
    no_fill: bool = False

    def key(self, coords: tuple[int, ...]) -> str:
        """Store key of the chunk at grid position ``coords``."""
        return self.key_prefix + self.key_sep.join(map(str, coords))


def _chunk_key_parts(arr: Any) -> tuple[str, str]:
    """(prefix, separator) of the array's chunk keys, e.g. ``("c/", "/")`` or ``("", ".")``.

    From the metadata's own encoder (an internal); else from the metadata document, which the
    Zarr specification fixes (``chunk_key_encoding`` in v3, ``dimension_separator`` in v2).
    """
    if INTERNALS.metadata:
        try:
            sample = arr.metadata.encode_chunk_key(tuple(range(11, 11 + arr.ndim)))
            i = sample.index("11")
            return sample[:i], (sample[i + 2] if arr.ndim > 1 else "")
        except (AttributeError, TypeError, ValueError):  # pragma: no cover - zarr changed
            pass
    doc = arr.metadata.to_dict()
    if doc.get("zarr_format", 3) == 2:
        return "", doc.get("dimension_separator") or "."
    enc = doc.get("chunk_key_encoding") or {}
    sep = (enc.get("configuration") or {}).get("separator", "/" if enc.get("name") != "v2" else ".")
    return ("c" + sep if enc.get("name", "default") == "default" else ""), sep


def _codec_chain(arr: Any, dtype: np.dtype) -> tuple[list[dict[str, Any]] | None, np.dtype]:
    """Numcodecs configs (decode order) and the stored dtype, or None: read through zarr."""
    if not INTERNALS.metadata:
        return None, dtype
    try:
        md = arr.metadata
        if getattr(md, "zarr_format", 3) == 3:
            chain = _v3_codec_configs([c.to_dict() for c in md.codecs])
            if chain is None:
                return None, dtype
            endian, codecs = chain
            return codecs, dtype.newbyteorder("<" if endian == "little" else ">")
        if md.order != "C":
            return None, dtype
        codecs = [md.compressor.get_config()] if md.compressor is not None else []
        codecs += [f.get_config() for f in reversed(md.filters or [])]
        if hasattr(md.dtype, "to_native_dtype"):
            dtype = np.dtype(md.dtype.to_native_dtype())
        return codecs, dtype
    except (AttributeError, KeyError, TypeError, ValueError):  # pragma: no cover - zarr changed
        return None, dtype


def read_spec(arr: Any) -> ReadSpec:
    """How to read the chunks of the open ``zarr.Array`` ``arr`` (see :class:`ReadSpec`).

    Parameters
    ----------
    arr : zarr.Array
        An open array.

    Returns
    -------
    ReadSpec
        Its chunk keys, codecs (``None``: zarr-python decodes), dtype and fill value (0, and
        ``no_fill``, for an array without one: Zarr v2 ``fill_value: null``).
    """
    import zarr.storage

    prefix, sep = _chunk_key_parts(arr)
    prefix = (f"{arr.path}/" if arr.path else "") + prefix
    codecs, dtype = _codec_chain(arr, np.dtype(str(arr.dtype)))
    store = arr.store
    root = str(store.root) if isinstance(store, zarr.storage.LocalStore) else None
    no_fill = arr.fill_value is None  # v2 "no fill value" (v3 requires one)
    fill = 0 if no_fill else arr.fill_value
    fill = fill.item() if hasattr(fill, "item") else fill
    return ReadSpec(root, prefix, sep, None if codecs is None else tuple(codecs), dtype.str, fill,
                    no_fill)  # fmt: skip


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _zstd_content_size(b: memoryview) -> int | None:
    """Frame_Content_Size of a zstd frame header (RFC 8878, 3.1.1.1), or None when absent."""
    if len(b) < 6 or bytes(b[:4]) != _ZSTD_MAGIC:
        return None
    fhd = b[4]
    single, fcs_flag, did_flag = (fhd >> 5) & 1, fhd >> 6, fhd & 3
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[did_flag]
    width = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if width == 0 or len(b) < pos + width:
        return None
    value = int.from_bytes(b[pos : pos + width], "little")
    return value + 256 if width == 2 else value


def declared_size(config: dict[str, Any], buf: Any) -> int | None:
    """Return the decoded byte count a frame states, where its decoder also enforces it.

    A codec decoding into a given buffer (``decode(buf, out=...)``) writes as many bytes as the
    frame holds and returns the whole buffer: a short frame leaves the rest of the buffer as it
    was. So a reused buffer may take a frame only when the frame states its size and the decoder
    checks the data against that statement: zstd (Frame_Content_Size), Blosc (the header's
    ``nbytes``) and gzip (ISIZE, below 4 GiB). Other codecs, or a frame without the statement,
    give None: decode into fresh memory and check the length.

    Parameters
    ----------
    config : dict
        The codec's numcodecs configuration (its ``id`` selects the format).
    buf : bytes-like
        The encoded frame.

    Returns
    -------
    int or None
    """
    b = memoryview(buf).cast("B")
    cid = config.get("id")
    if cid == "zstd":
        return _zstd_content_size(b)
    if cid == "blosc" and len(b) >= 16:
        return int.from_bytes(b[4:8], "little")
    if cid == "gzip" and len(b) >= 18 and bytes(b[:2]) == b"\x1f\x8b":
        return int.from_bytes(b[-4:], "little")  # ISIZE: the size modulo 2**32
    return None


class Decoder:
    """Per-thread decoding state of one array (numcodecs objects, or an open zarr array)."""

    def __init__(self, spec: ReadSpec, url: str, path: str) -> None:
        import numcodecs

        self.spec = spec
        self.dtype = np.dtype(spec.dtype)
        # the bytes of a chunk in a non-local store are read with the buffer prototype
        fast = spec.codecs is not None and (spec.root is not None or INTERNALS.prototype)
        self.codecs = [numcodecs.get_codec(dict(c)) for c in spec.codecs or ()] if fast else None
        self.arr: Any = open_node(url, path) if not fast or spec.root is None else None

    def raw(self, coords: tuple[int, ...]) -> bytes | None:
        key = self.spec.key(coords)
        if self.spec.root is not None:
            path = Path(self.spec.root) / key
            try:
                if not stat.S_ISREG(path.stat().st_mode):  # a pipe would block the read forever
                    raise IsADirectoryError(errno.EISDIR, "not a regular file", str(path))
                return path.read_bytes()
            except FileNotFoundError:
                return None
        return _store_get(self.arr.store, key)

    def exists(self, coords: tuple[int, ...]) -> bool:
        """Whether the stored object (chunk, or shard) of grid position ``coords`` exists."""
        key = self.spec.key(coords)
        if self.spec.root is not None:
            return (Path(self.spec.root) / key).is_file()
        return bool(run_sync(self.arr.store.exists(key)))

    def in_shard(self, stored: tuple[int, ...], inner: tuple[int, ...]) -> bool | None:
        """Whether inner chunk ``inner`` of the (existing) shard ``stored`` was written.

        Reads the shard's index (Zarr v3 sharding: one ``(offset, nbytes)`` pair of uint64 per
        inner chunk, both all ones for a chunk never written) on every call, as the existence
        check reads the store: a cache would go stale when the store changes under an open
        :class:`MaskSet`. ``None`` when it cannot tell: the sharding codec is not the array's
        only codec, its index codecs are other than ``bytes`` and ``crc32c``, or the index
        cannot be read or fails its checksum (a corrupt shard, which zarr's own read reports).
        """
        index = self._shard_index(stored)
        return None if index is None else bool(index[inner] != EMPTY)

    def _shard_index(self, stored: tuple[int, ...]) -> np.ndarray | None:
        from zarr.abc.store import RangeByteRequest, SuffixByteRequest
        from zarr.codecs import BytesCodec, Crc32cCodec, ShardingCodec

        if not INTERNALS.prototype:
            return None  # cannot read a byte range: the caller checks the whole shard
        codecs: tuple[Any, ...] = tuple(getattr(self.arr.metadata, "codecs", ()))
        sc = codecs[0] if len(codecs) == 1 else None
        if not isinstance(sc, ShardingCodec):
            return None
        kinds = [type(c) for c in sc.index_codecs]
        if not kinds or kinds[0] is not BytesCodec or any(k is not Crc32cCodec for k in kinds[1:]):
            return None
        shape = tuple(s // c for s, c in zip(self.arr.shards, sc.chunk_shape, strict=True))
        n = int(np.prod(shape))
        size = 16 * n + 4 * (len(kinds) - 1)  # crc32c appends 4 bytes
        at_end = str(getattr(sc.index_location, "value", sc.index_location)) == "end"
        rng = SuffixByteRequest(size) if at_end else RangeByteRequest(0, size)
        key = self.spec.key(stored)
        try:
            raw = _store_get(self.arr.store, key, rng)
        except Exception:  # noqa: BLE001 - a short or unreadable shard: zarr's read names it
            return None
        if raw is None or len(raw) != size:
            return None
        if len(kinds) > 1:  # crc32c: a corrupt index must not pass for missing chunks
            import numcodecs

            try:
                numcodecs.CRC32C().decode(raw)
            except RuntimeError:
                return None
        endian = getattr(sc.index_codecs[0], "endian", None)
        little = str(getattr(endian, "value", "little")) == "little"
        pairs = np.frombuffer(raw[: 16 * n], dtype="<u8" if little else ">u8").reshape(*shape, 2)
        index: np.ndarray = pairs[..., 0] & pairs[..., 1]  # all ones only for a missing chunk
        return index


#: A shard-index entry of a chunk never written: offset and size both 2**64 - 1.
EMPTY = np.uint64(2**64 - 1)
