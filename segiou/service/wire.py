"""What travels between ``segiou serve`` and its client: bodies, names, and the batch digest.

Shared by the server and :mod:`segiou.client` (it imports no web framework). A batch body is
one of:

* ``application/json``: a partial state, the ``segiou.confusion`` JSON that
  :meth:`~segiou.confusion.ConfusionMatrix.to_dict` writes;
* ``application/vnd.segiou.state+npz``: the same state in a compact binary form: an npz whose
  ``__state__`` member is the JSON text (as bytes) in which every rectangular list of integers
  was replaced by ``{"__npz__": "<member>"}``, the member being that list as an ``int64``
  array (members stored or deflated; :func:`encode_state` deflates them), and every object that would read as such a reference (``{"__npz__": ...}``, say
  per-image entries of an image named ``__npz__``) or that has the key ``__npz_escaped__``
  is wrapped as ``{"__npz_escaped__": <object>}`` (bodies without such objects are as
  before). It knows nothing of the state's fields, so it follows the state format as it
  changes;
* ``application/vnd.segiou.masks+npz``: raw masks, an npz with ``gt`` and ``pred`` (integer or
  bool arrays of one shape) and optionally ``names`` (a 1-D unicode array, one per image);
* ``application/vnd.segiou.masks+npy``: the same arrays as consecutive ``.npy`` records
  (``gt``, ``pred``, then optionally ``names``), each starting at a multiple of 64 bytes (zero
  padding between them): no zip container, so neither side copies or checksums the masks.

Nothing is ever unpickled: npz members and ``.npy`` records of object dtype are refused (an
npz is read member by member, each ``.npy`` header checked against what its member holds
before anything is allocated).

Two batches under one key have the *same content* when the SHA-256 of their canonical form is
equal: the state the server counts or reads from the body, re-serialised with
:meth:`~segiou.confusion.ConfusionMatrix.to_dict` (its ``writer`` field left out) as JSON with
sorted keys and no spaces (:func:`canonical_state`). A JSON state, its npz form and the raw masks
it was counted from (under the same key and names) are therefore the same content.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from segiou._batch import n_images_of, same_counting
from segiou._jsontext import TOO_DEEP, loads
from segiou.confusion import ConfusionMatrix
from segiou.errors import PayloadError, UsageError
from segiou.service._npyio import ALIGN, npy_records, read_npz

__all__ = [
    "BATCH_CONTENT_TYPES",
    "CONTENT_JSON",
    "CONTENT_MASKS_NPY",
    "CONTENT_MASKS_NPZ",
    "CONTENT_STATE_NPZ",
    "KEY_PATTERN",
    "RUN_NAME_PATTERN",
    "canonical_state",
    "check_key",
    "check_run_name",
    "decode_masks",
    "decode_state",
    "encode_masks",
    "encode_state",
    "prefers",
    "state_digest",
]

CONTENT_JSON = "application/json"
CONTENT_STATE_NPZ = "application/vnd.segiou.state+npz"
CONTENT_MASKS_NPZ = "application/vnd.segiou.masks+npz"
CONTENT_MASKS_NPY = "application/vnd.segiou.masks+npy"
#: Content types a batch (``PUT /v1/runs/{name}/batches/{key}``) may have.
BATCH_CONTENT_TYPES = (CONTENT_JSON, CONTENT_STATE_NPZ, CONTENT_MASKS_NPZ, CONTENT_MASKS_NPY)


def _quality(header: str, media: str) -> float:
    """Return the quality an ``Accept`` header gives ``media`` (its range's, a wildcard's, or 0).

    The most specific range decides (RFC 9110, 12.5.1): ``media`` itself, then ``type/*``, then
    ``*/*``. A ``q`` that is not a number counts as 0 (not a clear yes).
    """
    kind = media.split("/", 1)[0]
    best: dict[int, float] = {}  # specificity -> quality
    for part in header.split(","):
        name, *params = (x.strip() for x in part.split(";"))
        name = name.lower()
        rank = 2 if name == media else 1 if name == f"{kind}/*" else 0 if name == "*/*" else -1
        if rank < 0:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
        best[rank] = max(best.get(rank, 0.0), 0.0 if math.isnan(q) else q)
    return best[max(best)] if best else 0.0


def prefers(header: str, media: str, other: str) -> bool:
    """Whether an ``Accept`` header asks for ``media`` rather than ``other`` (the default form).

    Parameters
    ----------
    header : str
        The header's value, e.g. ``"application/vnd.segiou.state+npz;q=0.9, */*;q=0.1"``.
    media : str
        The form asked for by name, e.g. :data:`CONTENT_STATE_NPZ`.
    other : str
        The default form, e.g. :data:`CONTENT_JSON`.

    Returns
    -------
    bool
        ``True`` when the header names ``media`` itself (a wildcard never selects it) with a
        quality above 0 (``q=0``: "not acceptable", RFC 9110) and at least that of ``other``
        (its own range's, or a wildcard's): ``application/json, <npz>;q=0.9`` keeps JSON.
    """
    named = any(p.split(";", 1)[0].strip().lower() == media for p in header.split(","))
    q = _quality(header, media)
    return named and q > 0 and q >= _quality(header, other)


#: A run name: a letter or digit, then up to 63 letters, digits, ``.``, ``_`` or ``-``.
RUN_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
#: A batch key: a letter or digit, then up to 199 letters, digits or ``. _ : @ + = -``.
KEY_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}"
_RUN_NAME = re.compile(RUN_NAME_PATTERN)
_KEY = re.compile(KEY_PATTERN)
_NPZ_REF = "__npz__"
#: Wraps a dict of the state that a reader would take for a reference (see :func:`_pack`).
_NPZ_ESC = "__npz_escaped__"
_STATE_MEMBER = "__state__"


def check_run_name(name: object) -> str:
    """Return ``name`` if it is a valid run name, else raise.

    Parameters
    ----------
    name : object
        The candidate (a run name travels in URLs: see :data:`RUN_NAME_PATTERN`).

    Returns
    -------
    str

    Raises
    ------
    UsageError
        Not a string matching :data:`RUN_NAME_PATTERN`.

    Examples
    --------
    >>> check_run_name("val-2024.11")
    'val-2024.11'
    """
    if not isinstance(name, str) or not _RUN_NAME.fullmatch(name):
        msg = (
            f"run name {name!r} is not valid: use 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
        raise UsageError(msg)
    return name


def check_key(key: object) -> str:
    """Return ``key`` if it is a valid batch key, else raise.

    Parameters
    ----------
    key : object
        The candidate (see :data:`KEY_PATTERN`).

    Returns
    -------
    str

    Raises
    ------
    UsageError
        Not a string matching :data:`KEY_PATTERN`.

    Examples
    --------
    >>> check_key("rank0:step-1200")
    'rank0:step-1200'
    """
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        msg = (
            f"batch key {key!r} is not valid: use 1 to 200 letters, digits or '. _ : @ + = -', "
            "starting with a letter or digit"
        )
        raise UsageError(msg)
    return key


# -- states -------------------------------------------------------------------------------------
def canonical_state(cm: ConfusionMatrix, *, legacy: bool = False) -> bytes:
    r"""Return the canonical form of a state: what the batch digest is taken of.

    Parameters
    ----------
    cm : ConfusionMatrix
        The batch's state.
    legacy : bool, default False
        The form segiou 0.2 took digests of (rows and ignore values in the order held): a
        batch a server of that version stored is recognised when sent again.

    Returns
    -------
    bytes
        :meth:`~segiou.confusion.ConfusionMatrix.to_dict` without its ``writer`` field, its
        per-image rows sorted by name (given or label) and then by their counts, and its ignore
        values sorted (they act as a set), as UTF-8 JSON with sorted keys and no spaces. Row
        order records only the order of counting and merging (``a + b == b + a``), so equal
        states have one canonical form.

    Raises
    ------
    PayloadError
        A string of the state (an image name, say) is not valid Unicode (a lone surrogate, which
        the JSON escape ``\ud800`` carries): no UTF-8 form exists (HTTP 400).
    """
    d = cm.to_dict()
    d.pop("writer", None)
    if isinstance(d.get("image_rows"), dict) and not legacy:
        d["image_rows"] = _rows_in_order(d["image_rows"])
    if not legacy:
        d["labels"] = same_counting(d["labels"])  # ignore values in any order count alike
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)  # fmt: skip
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as err:  # a lone surrogate (JSON's "\ud800" escape reads as one)
        near = text[max(0, err.start - 40) : err.end]
        msg = (
            f"the state holds a string with {text[err.start : err.end]!r}, which is no Unicode "
            f"character (a lone surrogate), near {near!r}: it cannot be written as UTF-8 JSON, "
            "so it is not counted. Name images (and classes) with valid text"
        )
        raise PayloadError(msg) from err


def _rows_in_order(rows: dict[str, Any]) -> dict[str, Any]:
    """Return a state's ``image_rows`` with the images sorted (name, given, counts), renumbered.

    Version 2 rows (sparse entries and unexpected values, indexed by image) and version 1 rows
    (one list item per image) alike.
    """
    names: list[str] = rows["names"]
    n = len(names)
    given = rows.get("given")
    if "entries" in rows:
        e = rows["entries"]
        cells: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
        for i, g, p, c in zip(e["image"], e["gt"], e["pred"], e["count"], strict=True):
            cells[i].append((g, p, c))
        odd: list[list[tuple[str, int, int]]] = [[] for _ in range(n)]
        for i, side, v, c in rows["unexpected"]:
            odd[i].append((side, v, c))
        sig: list[Any] = [(sorted(cells[i]), sorted(odd[i])) for i in range(n)]
    else:  # version 1: TP/FP/FN, ignored and unexpected per image
        fields = ("tp", "fp", "fn", "ignored", "unexpected")
        sig = [tuple(rows[f][i] for f in fields) for i in range(n)]
    order = sorted(range(n), key=lambda i: (names[i], True if given is None else given[i], sig[i]))
    out = dict(rows)
    out["names"] = [names[i] for i in order]
    if given is not None:
        out["given"] = [given[i] for i in order]
    if "entries" in rows:
        flat = [(j, g, p, c) for j, i in enumerate(order) for g, p, c in sig[i][0]]
        out["entries"] = {f: [x[m] for x in flat] for m, f in enumerate(("image", "gt", "pred",
                                                                           "count"))}  # fmt: skip
        out["unexpected"] = [
            [j, side, v, c] for j, i in enumerate(order) for side, v, c in sig[i][1]
        ]
    else:
        for f in fields:
            out[f] = [rows[f][i] for i in order]
    return out


def state_digest(canonical: bytes) -> str:
    """Return the hex SHA-256 of a canonical state (see :func:`canonical_state`).

    Parameters
    ----------
    canonical : bytes
        What :func:`canonical_state` returned.

    Returns
    -------
    str
        64 hex digits.
    """
    return hashlib.sha256(canonical).hexdigest()


def _int_leaves(x: list[Any]) -> bool:
    stack: list[Any] = [x]
    while stack:
        for v in stack.pop():
            if type(v) is list:
                stack.append(v)
            elif type(v) is not int:  # bool, float, str, None: stays JSON
                return False
    return True


def _pack(x: Any, arrays: dict[str, np.ndarray]) -> Any:
    """Replace rectangular lists of int64 with references ``{"__npz__": member}``.

    A dict of the state that would read as a reference or as an escape (keyed by image names:
    an image may be named ``__npz__``) is wrapped as ``{"__npz_escaped__": dict}``, whose keys
    a reader takes literally.
    """
    if isinstance(x, Mapping):
        out = {k: _pack(v, arrays) for k, v in x.items()}
        return {_NPZ_ESC: out} if set(x) == {_NPZ_REF} or _NPZ_ESC in x else out
    if isinstance(x, list | tuple):
        x = list(x)
        if x and _int_leaves(x):
            try:
                a = np.asarray(x)
            except (ValueError, OverflowError):  # ragged, or beyond int64
                a = None
            if a is not None and a.dtype == np.int64 and a.ndim >= 1:
                name = f"a{len(arrays)}"
                arrays[name] = a
                return {_NPZ_REF: name}
        return [_pack(v, arrays) for v in x]
    return x


def _unpack(x: Any, arrays: Mapping[str, np.ndarray], used: set[str], where: str) -> Any:
    if isinstance(x, dict):
        if set(x) == {_NPZ_ESC} and isinstance(x[_NPZ_ESC], dict):  # a dict of the state
            return {k: _unpack(v, arrays, used, where) for k, v in x[_NPZ_ESC].items()}
        if set(x) == {_NPZ_REF}:
            name = x[_NPZ_REF]
            if not isinstance(name, str) or name not in arrays:
                msg = f"{where}: the state refers to npz member {name!r}, which is not there"
                raise PayloadError(msg)
            if name in used:  # one member many times: work and memory past what it inflates to
                msg = (f"{where}: the state refers to npz member {name!r} more than once; each "
                       "member stands for one list (as encode_state writes them)")  # fmt: skip
                raise PayloadError(msg)
            used.add(name)
            return arrays[name].tolist()
        return {k: _unpack(v, arrays, used, where) for k, v in x.items()}
    if isinstance(x, list):
        return [_unpack(v, arrays, used, where) for v in x]
    return x


def encode_state(state: Mapping[str, Any], *, binary: bool = False) -> tuple[bytes, str]:
    """Encode a state (:meth:`~segiou.confusion.ConfusionMatrix.to_dict` output) as a body.

    Parameters
    ----------
    state : mapping
        The state.
    binary : bool, default False
        The npz form, its members deflated (as ``np.savez_compressed`` writes them, at zlib
        level 1): far smaller than JSON as soon as a state is not tiny, since int64 members
        undeflated take 8 bytes a count where JSON takes 2 for a 0 (measured: 4,096 classes,
        one image: 0.6 MB against 33.6 MB of JSON and 134 MB undeflated; 150 classes, 200
        images: 0.57 MB against 2.35 MB and 6.2 MB).

    Returns
    -------
    (bytes, str)
        The body and its content type.
    """
    if not binary:
        return json.dumps(state, separators=(",", ":"), allow_nan=False).encode(), CONTENT_JSON
    arrays: dict[str, np.ndarray] = {}
    skeleton = json.dumps(_pack(state, arrays), separators=(",", ":"), allow_nan=False)
    buf = io.BytesIO()
    members = {_STATE_MEMBER: np.frombuffer(skeleton.encode(), dtype=np.uint8), **arrays}
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, a in members.items():  # what np.savez_compressed writes, at a faster level
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, a, allow_pickle=False)
    return buf.getvalue(), CONTENT_STATE_NPZ


def decode_state(
    body: bytes | bytearray | memoryview,
    content_type: str,
    *,
    where: str = "body",
    limit: int | None = None,
) -> ConfusionMatrix:
    """Read a state body (JSON or its npz form) into an accumulator.

    Parameters
    ----------
    body : bytes-like
        The body.
    content_type : str
        :data:`CONTENT_JSON` or :data:`CONTENT_STATE_NPZ`.
    where : str
        Names the body in error messages.
    limit : int, optional
        Most bytes the members of an npz body may hold once inflated (413 beyond; the server
        passes its body limit). Default: no limit.

    Returns
    -------
    ConfusionMatrix
        Through :meth:`~segiou.confusion.ConfusionMatrix.from_dict`, which checks it.

    Raises
    ------
    PayloadError
        Not JSON (or not an npz of the documented form); 413 for npz members past ``limit``.
    CheckpointError
        Not a valid segiou state.
    """
    if content_type == CONTENT_JSON:
        try:
            d = loads(bytes(body) if isinstance(body, memoryview) else body)
        except (ValueError, UnicodeDecodeError) as err:
            msg = f"{where}: the body is not valid JSON ({err})"
            raise PayloadError(msg) from err
    elif content_type == CONTENT_STATE_NPZ:
        arrays = read_npz(body, where, limit)
        skel = arrays.pop(_STATE_MEMBER, None)
        if skel is None or skel.dtype != np.uint8 or skel.ndim != 1:
            msg = f"{where}: a state npz needs a 1-D uint8 member {_STATE_MEMBER!r} (JSON text)"
            raise PayloadError(msg)
        bad = sorted(n for n, a in arrays.items() if a.dtype != np.int64)
        if bad:
            msg = f"{where}: state npz members {bad} are not int64 arrays"
            raise PayloadError(msg)
        try:
            skeleton = loads(skel.tobytes())
        except (ValueError, UnicodeDecodeError) as err:
            msg = f"{where}: member {_STATE_MEMBER!r} is not valid JSON ({err})"
            raise PayloadError(msg) from err
        used: set[str] = set()
        try:
            d = _unpack(skeleton, arrays, used, where)
        except RecursionError:  # parsed, yet too deep to walk
            msg = f"{where}: member {_STATE_MEMBER!r} is not a state: {TOO_DEEP}"
            raise PayloadError(msg) from None
        if extra := sorted(set(arrays) - used):
            msg = f"{where}: state npz members {extra[:5]} are not referred to by the state"
            raise PayloadError(msg)
    else:
        msg = f"{where}: content type {content_type!r} is not a state"
        raise PayloadError(msg, 415)
    return ConfusionMatrix.from_dict(d, source=where)


# -- masks --------------------------------------------------------------------------------------
def _names_array(names: Sequence[str] | None) -> np.ndarray | None:
    if names is None:
        return None
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        msg = "names must be a sequence of str, one per image"
        raise UsageError(msg)
    return np.array(list(names), dtype=np.str_)


def _npy_record(a: np.ndarray) -> list[bytes | memoryview]:
    a = np.ascontiguousarray(a)
    head = io.BytesIO()
    np.lib.format.write_array_header_2_0(head, np.lib.format.header_data_from_array_1_0(a))
    data = memoryview(a.reshape(-1)).cast("B") if a.size else memoryview(b"")  # type: ignore[arg-type]
    pad = -(len(head.getvalue()) + data.nbytes) % ALIGN
    return [head.getvalue(), data, b"\0" * pad]


def encode_masks(
    gt: np.ndarray, pred: np.ndarray, names: Sequence[str] | None = None, *, npz: bool = False
) -> tuple[list[bytes | memoryview], int, str]:
    """Encode raw masks as a body, without copying them (``.npy`` records) or as an npz.

    Parameters
    ----------
    gt, pred : ndarray
        Label masks (any integer dtype or bool; C-contiguous arrays are not copied).
    names : sequence of str, optional
        Image names, one per image (leading axes are images).
    npz : bool, default False
        Write an npz (``application/vnd.segiou.masks+npz``) instead of ``.npy`` records.

    Returns
    -------
    (list of bytes-like, int, str)
        The body as chunks to send one after another, its length, and its content type.

    Raises
    ------
    UsageError
        ``names`` is not a sequence of str.
    """
    gt, pred = np.asarray(gt), np.asarray(pred)
    arr_names = _names_array(names)
    if npz:
        buf = io.BytesIO()
        members = {"gt": gt, "pred": pred} | ({} if arr_names is None else {"names": arr_names})
        np.savez(buf, allow_pickle=False, **members)
        data = buf.getvalue()
        return [data], len(data), CONTENT_MASKS_NPZ
    chunks: list[bytes | memoryview] = []
    for a in (gt, pred) if arr_names is None else (gt, pred, arr_names):
        chunks += _npy_record(a)
    return chunks, sum(memoryview(c).nbytes for c in chunks), CONTENT_MASKS_NPY


def decode_masks(
    body: bytes | bytearray | memoryview,
    content_type: str,
    *,
    where: str = "body",
    limit: int | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str] | None]:
    """Read a raw-masks body: ``gt``, ``pred`` and optionally ``names``.

    Parameters
    ----------
    body : bytes-like
        The body (``.npy`` records are read in place, without a copy).
    content_type : str
        :data:`CONTENT_MASKS_NPZ` or :data:`CONTENT_MASKS_NPY`.
    where : str
        Names the body in error messages.
    limit : int, optional
        Most bytes the members of an npz body may hold once inflated (413 beyond; the server
        passes its body limit). Default: no limit.

    Returns
    -------
    (ndarray, ndarray, list of str or None)

    Raises
    ------
    PayloadError
        Not a readable npz or sequence of ``.npy`` records, members missing or unknown,
        pickled objects, names that are not a 1-D unicode array, or masks declaring more images
        than the body has bytes (and their data too: images of no pixels, ``(2**40, 0, 8)``,
        cost the counting memory and count nothing); 413 for npz members past ``limit``.
    """
    if content_type == CONTENT_MASKS_NPZ:
        arrays = read_npz(body, where, limit)
    elif content_type == CONTENT_MASKS_NPY:
        recs = list(npy_records(memoryview(body).cast("B"), where))
        if len(recs) not in (2, 3):
            msg = f"{where}: expected 2 or 3 .npy records (gt, pred[, names]), found {len(recs)}"
            raise PayloadError(msg)
        arrays = dict(zip(("gt", "pred", "names"), recs, strict=False))
    else:
        msg = f"{where}: content type {content_type!r} is not raw masks"
        raise PayloadError(msg, 415)
    if missing := [m for m in ("gt", "pred") if m not in arrays]:
        msg = f"{where}: raw masks need members 'gt' and 'pred'; missing {missing}"
        raise PayloadError(msg)
    if extra := sorted(set(arrays) - {"gt", "pred", "names"}):
        msg = f"{where}: unknown members {extra[:5]}; expected 'gt', 'pred' and optionally 'names'"
        raise PayloadError(msg)
    names = arrays.get("names")
    if names is not None and (names.dtype.kind != "U" or names.ndim != 1):
        msg = f"{where}: 'names' must be a 1-D unicode array, got {names.dtype} {names.shape}"
        raise PayloadError(msg)
    size = memoryview(body).nbytes
    for m in ("gt", "pred"):  # an image with a pixel has a byte of data: masks with any pass
        shape, n = arrays[m].shape, n_images_of(arrays[m].shape)
        if n > max(size, arrays[m].nbytes):
            msg = (
                f"{where}: {m!r} of shape {shape} declares {n:,} images in {arrays[m].nbytes:,} "
                f"bytes of data and a body of {size:,} bytes; a batch holds at most one image "
                "per byte of its body (or of its data): leave out the images of no pixels, "
                "which count nothing"
            )
            raise PayloadError(msg)
    return arrays["gt"], arrays["pred"], None if names is None else names.tolist()
