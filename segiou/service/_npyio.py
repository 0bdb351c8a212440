"""Reading ``.npy`` headers, ``.npy`` records and npz bodies: checked before, bounded while read.

Used by :mod:`segiou.service.wire` (the batch bodies). Nothing is ever unpickled, and nothing
is allocated for a member or record before its header is checked against what the body holds.
"""

from __future__ import annotations

import io
import math
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from segiou.errors import PayloadError

__all__ = ["ALIGN", "npy_records", "npz_inflated", "read_npz"]

ALIGN = 64  # .npy records start at multiples of this (numpy pads its headers to it too)
_MAX_NPY_HEADER = 1 << 16
_METHODS = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "LZMA"}
#: What an npz may hold, said with each refusal of its members' names or compression.
_SEND = (
    "an npz holds one .npy array per member, named <name>.npy, stored or deflated: what "
    "np.savez and np.savez_compressed write"
)


def _npy_header(f: Any, where: str, what: str) -> tuple[tuple[int, ...], bool, np.dtype[Any], int]:
    """Read and check a ``.npy`` header from ``f``: shape, Fortran order, dtype, data bytes.

    Refused (400): a malformed header, Python objects (never unpickled), a dtype of 0 bytes an
    item or with a sub-array (``frombuffer`` cannot read them as declared), negative dimensions,
    and a shape of no data that no array can have (``(2**62, 0, 2)``, ``(0, 2**64)``: numpy's
    ``reshape`` would fail on it). Every record and member is read through here: the one place.
    """
    try:
        major, _ = np.lib.format.read_magic(f)
        reader = {1: np.lib.format.read_array_header_1_0}.get(
            major, np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = reader(f, max_header_size=_MAX_NPY_HEADER)
    except zipfile.BadZipFile:  # the member's checksum (read with the header): not the header
        raise
    except Exception as err:
        msg = f"{where}: {what}: its .npy header is malformed ({err})"
        raise PayloadError(msg) from err
    if dtype.hasobject:
        msg = f"{where}: {what} holds Python objects; never unpickled"
        raise PayloadError(msg)
    if dtype.itemsize == 0 or dtype.subdtype is not None:
        msg = f"{where}: {what} has dtype {dtype.str!r}, which holds no array segiou can read"
        raise PayloadError(msg)
    if any(d < 0 for d in shape):
        msg = f"{where}: {what} declares shape {shape}, with a negative dimension"
        raise PayloadError(msg)
    nbytes = math.prod(shape) * dtype.itemsize  # exact: np.prod in int64 wraps (2**32 x 2**32)
    if nbytes == 0:  # with data, the body bounds the shape; without, only numpy's limits do
        try:
            np.empty(shape, dtype)  # 0 bytes: the shape checked as reshape will check it
        except (ValueError, OverflowError, MemoryError) as err:
            msg = f"{where}: {what} declares shape {shape}, which no array can have ({err})"
            raise PayloadError(msg) from err
    return shape, fortran, dtype, nbytes


def _npz_member(f: Any, size: int, where: str, what: str) -> np.ndarray:
    """Read one ``.npy`` member of ``size`` bytes (the zip's word): at most what it declares.

    The member is read to its end, where ``zipfile`` checks its CRC-32: bytes after the array
    are refused (the check would cover only what was read, so a corrupted pixel passed).
    """
    shape, fortran, dtype, nbytes = _npy_header(f, where, what)
    if f.tell() + nbytes != size:
        why = (
            "truncated?"
            if f.tell() + nbytes > size
            else "bytes after an array are refused: "
            "np.savez writes none, and they would escape the member's CRC-32 check"
        )
        msg = (
            f"{where}: {what} declares {nbytes:,} bytes of data, but the member holds "
            f"{max(size - f.tell(), 0):,} after its header ({why})"
        )
        raise PayloadError(msg)
    raw, pos = bytearray(nbytes), 0  # writable, as np.load's arrays are
    while pos < nbytes:  # in pieces: never more than declared is inflated
        piece = f.read(min(nbytes - pos, 1 << 20))
        if not piece:
            msg = f"{where}: {what} ends {nbytes - pos:,} bytes before its declared data"
            raise PayloadError(msg)
        raw[pos : pos + len(piece)] = piece
        pos += len(piece)
    if f.read(1):  # at its end: zipfile checks the CRC-32 here if the last piece did not
        msg = f"{where}: {what} holds bytes after its array"
        raise PayloadError(msg)
    a = np.frombuffer(raw, dtype=dtype, count=math.prod(shape))
    return a.reshape(shape, order="F" if fortran else "C")


def read_npz(
    body: bytes | bytearray | memoryview, where: str, limit: int | None = None
) -> dict[str, np.ndarray]:
    """Read an npz (``.npy`` members, stored or deflated), checking each header before its data.

    Members are named ``<name>.npy``, each once, and stored or deflated, as ``np.savez`` and
    ``np.savez_compressed`` write them; others are refused, though ``np.load`` reads them:
    bzip2 and LZMA members (numpy never writes them, and an LZMA decoder reserves the dictionary
    its member's header asks for, up to 4 GiB, which the body does not bound), members named
    ``gt``.

    A member's declared shape and dtype are checked against the member's size in the zip
    directory before anything is allocated (a member holding more or less than its header
    declares is refused), and no more than the header declares is ever read (inflated; a member
    that inflates to more than the directory says fails its checksum at the size the directory
    says); each member's CRC-32 is checked over all its data. With ``limit``, members whose
    sizes in the directory add up to
    more than ``limit`` bytes are refused (413) before any is inflated: a deflated body of
    0.5 MB could otherwise unpack to 512 MiB.
    """
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as z:
            infos = z.infolist()
            inflated = sum(i.file_size for i in infos)  # each member is read up to its size
            if limit is not None and inflated > limit:  # at most: reads total no more than this
                raise PayloadError(_too_big(where, inflated, limit), 413)
            for info in infos:
                name, what = info.filename.removesuffix(".npy"), f"npz member {info.filename!r}"
                if not info.filename.endswith(".npy") or not name or name in out:
                    wrong = "is in the npz twice" if name in out else "is not named <name>.npy"
                    msg = f"{where}: {what} {wrong}; {_SEND}"
                    raise PayloadError(msg)
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    how = _METHODS.get(info.compress_type, f"method {info.compress_type}")
                    msg = f"{where}: {what} is compressed with {how}, which is not read; {_SEND}"
                    raise PayloadError(msg)
                with z.open(info) as f:  # what its header declares, at most info.file_size
                    out[name] = _npz_member(f, info.file_size, where, what)
    except PayloadError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError, RuntimeError,
            NotImplementedError, zlib.error) as err:  # fmt: skip
        msg = (
            f"{where}: the body is not a readable npz without pickled objects "
            f"({type(err).__name__}: {err})"
        )
        raise PayloadError(msg) from err
    return out


def npz_inflated(body: bytes | bytearray | memoryview) -> int | None:
    """Return the bytes an npz's members hold once inflated, as its zip directory says.

    What :func:`read_npz` reads at most (each member up to its size in the directory): the work
    a body takes, which its length does not bound (a deflated member of 33 MB of zeros travels
    in 38 KB). Reads the directory only; ``None`` if there is no readable one.

    Parameters
    ----------
    body : bytes-like
        An npz body.

    Returns
    -------
    int or None
    """
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as z:
            return sum(i.file_size for i in z.infolist())
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError, RuntimeError,
            NotImplementedError, zlib.error):  # fmt: skip
        return None


def _too_big(where: str, n: int, limit: int) -> str:
    return (
        f"{where}: the npz's members hold {n:,} bytes once inflated, more than this server's "
        f"limit of {limit:,} bytes (--max-body-mb bounds inflated npz members as it bounds "
        "bodies); send smaller batches, or start the server with a larger --max-body-mb"
    )


_RECORDS = ("gt", "pred", "names", "one too many")


def npy_records(body: memoryview, where: str) -> Iterator[np.ndarray]:
    pos, n, index = 0, body.nbytes, 0
    while pos < n:
        if bytes(body[pos : pos + 6]) != b"\x93NUMPY":
            msg = f"{where}: no .npy record at byte {pos} (records start at multiples of 64)"
            raise PayloadError(msg)
        head = io.BytesIO(bytes(body[pos : pos + min(n - pos, _MAX_NPY_HEADER + 12)]))
        what = f"the .npy record at byte {pos} ({_RECORDS[min(index, 3)]})"
        shape, fortran, dtype, nbytes = _npy_header(head, where, what)
        index += 1
        start = pos + head.tell()
        end = start + nbytes
        if end > n:
            msg = (
                f"{where}: {what} declares {end - start} bytes of data but the body ends "
                f"{n - start} bytes after its header (truncated?)"
            )
            raise PayloadError(msg)
        a = np.frombuffer(body, dtype=dtype, count=math.prod(shape), offset=start)
        yield a.reshape(shape, order="F" if fortran else "C")
        pos = end + (-end % ALIGN)
