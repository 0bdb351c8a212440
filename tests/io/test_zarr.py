"""Zarr mask stores: layouts, names, paths through folders, chunk decoding, faults, pickling."""

from __future__ import annotations

import pickle
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
from numpy.testing import assert_array_equal
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, TransposeCodec, ZstdCodec

from segiou.errors import MaskNotFoundError, SegiouError, StoreLayoutError
from segiou.io.zarr import ChunkError, MaskArray, MaskSet, create_stack, iter_chunk_grid, open_masks

SHAPE = (3, 13, 17)  # chunks (2, 5, 6) leave edge chunks on every axis
CHUNKS = (2, 5, 6)


def _data(dtype: str, seed: int = 0) -> np.ndarray:
    hi = 255 if np.dtype(dtype).itemsize == 1 else 1000
    lo = -5 if np.dtype(dtype).kind == "i" else 0
    return np.random.default_rng(seed).integers(lo, hi, SHAPE).astype(dtype)


def _expected_chunk(a: zarr.Array, coords: tuple[int, ...]) -> tuple[tuple[slice, ...], np.ndarray]:
    """Slices of the valid (non-padding) part of a chunk, and zarr's own values there."""
    sl = tuple(
        slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(coords, a.chunks, a.shape, strict=True)
    )
    inner = tuple(slice(0, s.stop - s.start) for s in sl)
    return inner, np.asarray(a[sl])


def _stored_key(a: zarr.Array, coords: tuple[int, ...]) -> str:
    """Store key of the object holding chunk ``coords``: the chunk, or its shard."""
    shards = a.shards or a.chunks
    stored = tuple(i * c // s for i, c, s in zip(coords, a.chunks, shards, strict=True))
    return a.metadata.encode_chunk_key(stored)


# Codec chains: the numcodecs fast path (v3 and v2, every compressor segiou decodes itself,
# both byte orders, every chunk key encoding) and zarr-python's fallback (sharding,
# transpose, Fortran order).
CODECS = {
    "v3-zstd-u8": {"dtype": "uint8"},
    "v3-zstd-u16": {"dtype": "uint16"},
    "v3-i16": {"dtype": "int16"},
    "v3-i32": {"dtype": "int32"},
    "v3-gzip": {"dtype": "uint16", "compressors": GzipCodec(level=3)},
    "v3-blosc-bitshuffle": {
        "dtype": "uint16",
        "compressors": BloscCodec(cname="lz4", shuffle="bitshuffle"),
    },
    "v3-blosc-noshuffle": {"dtype": "uint8", "compressors": BloscCodec(shuffle="noshuffle")},
    "v3-raw": {"dtype": "uint16", "compressors": None},
    "v3-zstd-crc32c": {"dtype": "uint16", "compressors": [ZstdCodec(), Crc32cCodec()]},
    "v3-crc32c-only": {"dtype": "uint16", "compressors": [Crc32cCodec()]},
    "v3-big-endian": {"dtype": "uint16", "serializer": BytesCodec(endian="big")},
    "v3-v2-keys": {"dtype": "uint8", "chunk_key_encoding": {"name": "v2", "separator": "."}},
    "v3-dot-keys": {
        "dtype": "uint8",
        "chunk_key_encoding": {"name": "default", "separator": "."},
    },
    "v3-fill-7": {"dtype": "uint8", "fill_value": 7},
    "v3-sharded": {"dtype": "uint16", "shards": (2, 10, 12)},
    "v3-transpose": {"dtype": "uint8", "filters": [TransposeCodec(order=(0, 2, 1))]},
    "v2-zstd-u8": {"dtype": "uint8", "zarr_format": 2},
    "v2-zstd-u16": {"dtype": "uint16", "zarr_format": 2},
    "v2-slash-keys": {
        "dtype": "uint16",
        "zarr_format": 2,
        "chunk_key_encoding": {"name": "v2", "separator": "/"},
    },
    "v2-blosc": {
        "dtype": "uint16",
        "zarr_format": 2,
        "compressors": numcodecs.Blosc(cname="lz4", shuffle=2),
    },
    "v2-raw": {"dtype": "uint8", "zarr_format": 2, "compressors": None},
    "v2-big-endian": {"dtype": ">u2", "zarr_format": 2},
    "v2-delta": {"dtype": "uint16", "zarr_format": 2, "filters": [numcodecs.Delta(dtype="<u2")]},
    "v2-i64": {"dtype": "int64", "zarr_format": 2},
}
FALLBACK = {"v3-sharded", "v3-transpose"}


def _make(tmp_path: Path, kind: str, name: str = "m.zarr") -> tuple[str, zarr.Array, np.ndarray]:
    kw = dict(CODECS[kind])
    dtype = kw.pop("dtype")
    data = _data(dtype)
    url = str(tmp_path / name)
    a = zarr.create_array(url, shape=SHAPE, chunks=CHUNKS, dtype=dtype, **kw)
    a[:] = data
    return url, a, data


@pytest.mark.parametrize("kind", sorted(CODECS))
def test_read_chunk_equals_zarr_on_every_chunk(tmp_path, kind):
    url, a, _ = _make(tmp_path, kind)
    ms = open_masks(url)
    arr = ms.arrays[0]
    assert arr.read_spec.codecs is None if kind in FALLBACK else arr.read_spec.codecs is not None
    assert arr.shape == SHAPE
    assert arr.chunks == CHUNKS
    coords = list(iter_chunk_grid(arr.shape, arr.chunks))
    assert len(coords) == 2 * 3 * 3
    for c in coords:
        inner, expected = _expected_chunk(a, c)
        for out in (None, np.empty(arr.chunks, np.dtype(arr.dtype))):
            got = arr.read_chunk(c, missing="error", images="x", out=out)
            assert got.shape == CHUNKS  # full chunk shape, edge chunks included
            assert got.dtype.isnative
            assert got.dtype == expected.dtype.newbyteorder("=")
            assert_array_equal(got[inner], expected)


def test_read_chunk_decodes_into_the_given_buffer(tmp_path):
    url, _, data = _make(tmp_path, "v3-zstd-u16")
    arr = open_masks(url).arrays[0]
    buf = np.empty(arr.chunks, np.dtype(arr.dtype))
    got = arr.read_chunk((0, 0, 0), missing="error", images="x", out=buf)
    assert np.shares_memory(got, buf)
    assert_array_equal(got, data[:2, :5, :6])
    # a buffer of the wrong size or dtype is not used
    small = np.empty((1, 1, 1), np.uint16)
    got = arr.read_chunk((0, 0, 0), missing="error", images="x", out=small)
    assert not np.shares_memory(got, small)
    assert_array_equal(got, data[:2, :5, :6])


# -- layouts, names, paths ----------------------------------------------------------------------
def test_open_stack_with_names(tmp_path):
    a = create_stack(tmp_path / "gt.zarr", n=3, height=4, width=5, names=["b", "a", "c"])
    a[:] = 1
    ms = open_masks(tmp_path / "gt.zarr")
    assert ms.layout == "stack"
    assert ms.names == ("b", "a", "c")  # store order, not sorted
    assert ms.url == str(tmp_path / "gt.zarr")
    assert ms.path == ""
    assert ms.dtype == np.uint8
    assert [ms.image_shape(i) for i in range(3)] == [(4, 5)] * 3
    assert ms.n_pixels() == 60
    assert len(ms.arrays) == 1
    assert ms.arrays[0].chunks == (1, 4, 5)  # default: one chunk per image


def test_open_stack_default_names(tmp_path):
    create_stack(tmp_path / "gt.zarr", n=3, height=2, width=2, dtype=np.uint16)
    ms = open_masks(str(tmp_path / "gt.zarr"))
    assert ms.names == ("000000", "000001", "000002")
    assert ms.dtype == np.uint16


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_a_path_through_the_store(tmp_path, monkeypatch, zarr_format):
    root = tmp_path / "root.zarr"
    for side in ("gt", "pred"):
        a = create_stack(root, path=f"val/{side}", n=2, height=3, width=4, names=["x", "y"],
                         zarr_format=zarr_format)  # fmt: skip
        a[:] = 1
    ms = open_masks(f"{root}/val/gt")
    assert (ms.url, ms.path, ms.names) == (str(root), "val/gt", ("x", "y"))
    assert str(root) in ms.where()
    assert "val/gt" in ms.where()
    assert open_masks(root, path="val/gt") == ms
    assert open_masks(root / "val" / "gt") == ms
    assert open_masks(f"file://{root}/val/gt").path == "val/gt"
    monkeypatch.chdir(tmp_path)
    rel = open_masks("root.zarr/val/gt")
    assert (rel.url, rel.path) == ("root.zarr", "val/gt")
    with pytest.raises(MaskNotFoundError, match=r"val/nothing"):
        open_masks(f"{root}/val/nothing")


def test_open_group_of_different_sizes(tmp_path):
    g = zarr.open_group(str(tmp_path / "gt.zarr"), mode="w")
    for name, shape in (("b", (5, 7)), ("a", (3, 4)), ("c", (6, 2))):
        g.create_array(name, shape=shape, chunks=(2, 3), dtype="uint16")[:] = 1
    ms = open_masks(tmp_path / "gt.zarr")
    assert ms.layout == "group"
    assert ms.names == ("a", "b", "c")  # sorted array names
    assert [ms.image_shape(i) for i in range(3)] == [(3, 4), (5, 7), (6, 2)]
    assert ms.n_pixels() == 12 + 35 + 12
    assert [a.path for a in ms.arrays] == ["a", "b", "c"]
    assert ms.dtype == np.uint16


def test_group_original_names(tmp_path):
    g = zarr.open_group(str(tmp_path / "gt.zarr"), mode="w")
    for name in ("city__a", "city__b"):
        g.create_array(name, shape=(2, 2), dtype="uint8")[:] = 0
    g.attrs["segiou"] = {"original_names": {"city__a": "city/a", "city__b": "city/b"}}
    assert open_masks(tmp_path / "gt.zarr").names == ("city/a", "city/b")


def test_create_stack_refuses_wrong_number_of_names(tmp_path):
    with pytest.raises(StoreLayoutError, match=r"2 names for 3 images"):
        create_stack(tmp_path / "gt.zarr", n=3, height=2, width=2, names=["a", "b"])


def test_create_stack_writes_chunks_equal_to_the_fill_value(tmp_path):
    # zarr skips chunks equal to the fill value by default; a ground-truth chunk of class 0
    # would then read as "missing" and be refused, although the store is complete.
    a = create_stack(tmp_path / "gt.zarr", n=2, height=4, width=4, chunks=(2, 2))
    a[:] = 0
    arr = open_masks(tmp_path / "gt.zarr").arrays[0]
    for c in iter_chunk_grid(arr.shape, arr.chunks):
        assert_array_equal(arr.read_chunk(c, missing="error", images="x"), 0)


# -- layout errors ------------------------------------------------------------------------------
def test_nonexistent_store(tmp_path):
    with pytest.raises(MaskNotFoundError, match=r"no Zarr array or group at .*nothing\.zarr"):
        open_masks(tmp_path / "nothing.zarr")


def test_float_store_is_refused(tmp_path):
    zarr.create_array(str(tmp_path / "f.zarr"), shape=(2, 3, 3), dtype="float32")
    with pytest.raises(StoreLayoutError, match=r"f\.zarr.*float32.*not an integer"):
        open_masks(tmp_path / "f.zarr")


@pytest.mark.parametrize("shape", [(4, 5), (1, 2, 4, 5)])
def test_stack_must_be_3d(tmp_path, shape):
    zarr.create_array(str(tmp_path / "a.zarr"), shape=shape, dtype="uint8")
    with pytest.raises(StoreLayoutError, match=r"expected N x H x W.*1 x H x W.*as a group"):
        open_masks(tmp_path / "a.zarr")


def test_names_attribute_must_match_images(tmp_path):
    a = zarr.create_array(str(tmp_path / "a.zarr"), shape=(3, 2, 2), dtype="uint8")
    a.attrs["segiou"] = {"names": ["a", "b"]}
    with pytest.raises(StoreLayoutError, match=r"2 names for 3 images"):
        open_masks(tmp_path / "a.zarr")
    a.attrs["segiou"] = {"names": ["a", "b", "a"]}
    with pytest.raises(StoreLayoutError, match=r"duplicate image names.*'a'"):
        open_masks(tmp_path / "a.zarr")


def test_group_layout_errors(tmp_path):
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    with pytest.raises(StoreLayoutError, match=r"group holds no arrays"):
        open_masks(tmp_path / "g.zarr")
    g.create_array("a", shape=(2, 2, 2), dtype="uint8")
    with pytest.raises(StoreLayoutError, match=r"image 'a' has shape \(2, 2, 2\); expected H x W"):
        open_masks(tmp_path / "g.zarr")
    g = zarr.open_group(str(tmp_path / "h.zarr"), mode="w")
    g.create_array("a", shape=(2, 2), dtype="float64")
    with pytest.raises(StoreLayoutError, match=r"image 'a'.*float64"):
        open_masks(tmp_path / "h.zarr")


# -- missing and corrupt chunks -----------------------------------------------------------------
@pytest.mark.parametrize("kind", ["v3-fill-7", "v2-zstd-u8", "v3-sharded"])
def test_missing_chunk_reads_as_fill_or_raises(tmp_path, kind):
    url, a, _ = _make(tmp_path, kind)
    arr = open_masks(url).arrays[0]
    Path(url, _stored_key(a, (1, 0, 0))).unlink()  # a sharded array: the whole shard
    got = arr.read_chunk((1, 0, 0), missing="fill", images="'img2'")
    assert got.shape == CHUNKS
    if a.fill_value is not None:  # zarr < 3.1 gives v2 arrays no fill value (None): it reads 0
        assert_array_equal(got, a.fill_value)
    # what zarr itself reads there (chunk 1 along N: images CHUNKS[0] .. 2 * CHUNKS[0])
    own = zarr.open_array(url, mode="r")[CHUNKS[0] : 2 * CHUNKS[0], : CHUNKS[1], : CHUNKS[2]]
    assert_array_equal(got[: own.shape[0], : own.shape[1], : own.shape[2]], own)
    with pytest.raises(ChunkError) as info:
        arr.read_chunk((1, 0, 0), missing="error", images="'img2'")
    msg = str(info.value)
    assert url in msg
    assert "(1, 0, 0)" in msg
    assert "'img2'" in msg
    assert "missing" in msg
    assert isinstance(info.value, SegiouError)
    assert isinstance(info.value, OSError)


@pytest.mark.parametrize("index_location", ["end", "start"])
@pytest.mark.parametrize("index_codecs", ["bytes+crc32c", "bytes"])
def test_chunk_missing_inside_a_shard_is_missing(tmp_path, index_location, index_codecs):
    # zarr leaves a chunk equal to the fill value out of its shard (write_empty_chunks=False)
    # and reads it back as the fill value; with missing="error" that is a missing chunk.
    from zarr.codecs import ShardingCodec

    codecs = [BytesCodec()] + ([Crc32cCodec()] if index_codecs == "bytes+crc32c" else [])
    url = str(tmp_path / "s.zarr")
    sharding = ShardingCodec(chunk_shape=CHUNKS, codecs=[BytesCodec(), ZstdCodec()],
                             index_codecs=codecs, index_location=index_location)  # fmt: skip
    a = zarr.create_array(url, shape=SHAPE, chunks=(2, 10, 12), dtype="uint16",
                          serializer=sharding, compressors=None)  # fmt: skip
    assert (a.shards, a.chunks) == ((2, 10, 12), CHUNKS)
    data = _data("uint16") + 1  # no fill value (0) anywhere
    data[0:2, 5:10, 6:12] = 0  # chunk (0, 1, 1) is all fill: never written into shard (0, 0, 0)
    a[:] = data
    arr = open_masks(url).arrays[0]
    assert arr.read_spec.codecs is None  # zarr's own read path
    with pytest.raises(ChunkError, match=r"chunk \(0, 1, 1\) \(images 'x'\) is missing"):
        arr.read_chunk((0, 1, 1), missing="error", images="'x'")
    assert_array_equal(arr.read_chunk((0, 1, 1), missing="fill", images="'x'"), 0)
    for c in iter_chunk_grid(arr.shape, arr.chunks):  # every other chunk, the same shard too
        if c != (0, 1, 1):
            inner, expected = _expected_chunk(a, c)
            assert_array_equal(arr.read_chunk(c, missing="error", images="x")[inner], expected)


def test_shard_index_is_read_fresh_when_the_store_changes(tmp_path):
    # an open MaskSet must see a chunk dropped from, or added to, a shard after it was opened
    url = str(tmp_path / "s.zarr")
    a = zarr.create_array(url, shape=(1, 8, 8), chunks=(1, 4, 4), shards=(1, 8, 8), dtype="uint8")
    a[:] = 1
    arr = open_masks(url).arrays[0]
    assert_array_equal(arr.read_chunk((0, 1, 1), missing="error", images="x"), 1)
    a[0, 4:, 4:] = 0  # zarr drops that chunk from the shard
    with pytest.raises(ChunkError, match="is missing"):
        arr.read_chunk((0, 1, 1), missing="error", images="x")
    a[0, 4:, 4:] = 2  # and writes it again
    assert_array_equal(arr.read_chunk((0, 1, 1), missing="error", images="x"), 2)


def test_shard_index_failing_its_checksum_is_corrupt_not_missing(tmp_path):
    url = str(tmp_path / "s.zarr")
    a = zarr.create_array(url, shape=(1, 8, 8), chunks=(1, 4, 4), shards=(1, 8, 8), dtype="uint8")
    a[:] = 1
    shard = Path(url, _stored_key(a, (0, 0, 0)))
    data = bytearray(shard.read_bytes())
    data[-20:-4] = b"\xff" * 16  # the last index entry reads "never written"; the crc disagrees
    shard.write_bytes(bytes(data))
    arr = open_masks(url).arrays[0]
    with pytest.raises(ChunkError, match="corrupt"):
        arr.read_chunk((0, 1, 1), missing="error", images="x")


def test_corrupt_shard_with_missing_error_is_a_chunk_error(tmp_path):
    url, a, _ = _make(tmp_path, "v3-sharded")
    Path(url, _stored_key(a, (0, 1, 2))).write_bytes(
        b"\x00garbage\xff" * 3
    )  # shorter than its index
    arr = open_masks(url).arrays[0]
    with pytest.raises(ChunkError, match="corrupt"):
        arr.read_chunk((0, 1, 2), missing="error", images="'a'")


@pytest.mark.parametrize(
    "kind", ["v3-zstd-u8", "v3-raw", "v3-zstd-crc32c", "v2-blosc", "v2-raw", "v3-sharded"]
)
def test_corrupt_chunk_raises_chunk_error(tmp_path, kind):
    root = tmp_path / "root.zarr"
    zarr.open_group(str(root), mode="w")
    url, a, _ = _make(root, kind, name="gt")
    Path(url, _stored_key(a, (0, 1, 2))).write_bytes(b"\x00garbage\xff" * 3)
    ms = open_masks(url)
    assert (ms.url, ms.path) == (str(root), "gt")
    arr = ms.arrays[0]
    for out in (None, np.empty(arr.chunks, np.dtype(arr.dtype))):
        with pytest.raises(ChunkError) as info:
            arr.read_chunk((0, 1, 2), missing="fill", images="'a', 'b'", out=out)
        msg = str(info.value)
        assert str(root) in msg
        assert "array 'gt'" in msg
        assert "(0, 1, 2)" in msg
        assert "'a', 'b'" in msg
        assert "corrupt" in msg


# -- pickling -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["v3-zstd-u16", "v3-sharded"])
def test_mask_array_and_set_survive_pickle(tmp_path, kind):
    url, *_ = _make(tmp_path, kind)
    ms = open_masks(url)
    arr = ms.arrays[0]
    before = arr.read_chunk((1, 2, 2), missing="error", images="x")  # opens a decoder
    for obj in (arr, ms):
        back = pickle.loads(pickle.dumps(obj))
        assert back == obj
        assert type(back) is type(obj)
    arr2 = pickle.loads(pickle.dumps(arr))
    assert isinstance(arr2, MaskArray)
    assert_array_equal(arr2.read_chunk((1, 2, 2), missing="error", images="x"), before)
    ms2 = pickle.loads(pickle.dumps(ms))
    assert isinstance(ms2, MaskSet)
    assert ms2.names == ms.names
    assert_array_equal(ms2.arrays[0].read_chunk((1, 2, 2), missing="error", images="x"), before)
    # pickling twice (a worker forwarding a task) keeps working
    arr3 = pickle.loads(pickle.dumps(arr2))
    assert_array_equal(arr3.read_chunk((0, 0, 0), missing="error", images="x"),
                       arr.read_chunk((0, 0, 0), missing="error", images="x"))  # fmt: skip


def test_group_mask_set_survives_pickle(tmp_path):
    g = zarr.open_group(str(tmp_path / "gt.zarr"), mode="w")
    g.create_array("a", shape=(3, 4), chunks=(2, 2), dtype="uint8")[:] = 5
    ms = open_masks(tmp_path / "gt.zarr")
    back = pickle.loads(pickle.dumps(ms))
    assert back == ms
    assert_array_equal(back.arrays[0].read_chunk((1, 1), missing="error", images="x")[:1], 5)


def test_pointing_at_a_store_root_names_its_mask_sets(tmp_path):
    from segiou.testing.datasets import write_demo_store

    st = write_demo_store(tmp_path / "d.zarr", images=2, height=8, width=8, seed=1)
    with pytest.raises(StoreLayoutError, match=r"point at one of them, e\.g\. .*d\.zarr/gt"):
        open_masks(st)
