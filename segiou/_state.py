"""The saved state of an accumulator: its versioned JSON form, written and checked.

:func:`dump` writes format ``segiou.confusion`` version 2, or version 3 for a state that also
keeps Boundary IoU counts, instance records or absent chunks (:mod:`segiou._extras`: the fields
``boundary``, ``instances``, ``absent_chunks`` and, when prediction chunks were absent,
``absent_pred_chunks``); :func:`load` reads versions 1 to 3 and refuses a state that breaks any
invariant, naming the field: every count an exact integer in ``0 .. 2**63 - 1`` (checked before
any numpy conversion), a pixel total that fits in int64, keys a list of distinct strings, no
unexpected counts in a ``raise``-mode state, per-image rows that add up to the totals, no
unknown field and no missing one (the version-3 fields too, each with every field it is written
with: :mod:`segiou._state_fields`), and a Boundary IoU width in pixels that its images were
counted with. Version 1 kept per-image TP/FP/FN rows only; version 2 keeps each image's sparse
confusion entries (:mod:`segiou.images`). A state with version-1 rows is written as version 1,
or as version 3 with those rows when it also holds version-3 fields (a version-1 state merged
with one that met absent chunks); both load back.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from segiou._extras import Extras, InstanceRecords
from segiou._jsontext import TOO_DEEP, loads
from segiou._state_fields import (
    INT64_MAX,
    RESTORE,
    check_digest,
    check_extra_fields,
    check_image_bounds,
    check_instances,
    check_spec_fields,
    check_values,
    check_width,
    sealed,
)
from segiou._state_fields import count as _count
from segiou._state_fields import counts as _counts
from segiou._state_fields import fail as _fail
from segiou._typing import IntArray
from segiou._version import __version__
from segiou.errors import CheckpointError
from segiou.images import ImageRows, UnexpectedValue, exact_total
from segiou.labels import LabelSpec

__all__ = [
    "FORMAT",
    "INT64_MAX",
    "READABLE",
    "VERSION",
    "StateParts",
    "dump",
    "load",
    "sealed",
]

FORMAT = "segiou.confusion"
VERSION = 2
#: The version of a state with Boundary IoU counts, instance records or absent chunks.
VERSION_EXTRAS = 3
#: Versions :func:`load` reads.
READABLE = (1, 2, 3)

_FIELDS = {"format", "version", "writer", "labels", "gt_ids", "pred_ids", "per_image",
           "on_unexpected", "counts", "void", "ignored", "unexpected", "keys", "images",
           "pixels", "image_rows"}  # fmt: skip
#: Fields of version 3 only.
_EXTRA_FIELDS = {"boundary", "instances", "absent_chunks", "absent_chunks_labels",
                 "absent_pred_chunks", "absent_pred_chunks_labels"}  # fmt: skip
#: Names a version-1 state gave images counted without one: they are anonymous from version 2.
_AUTO_NAME = re.compile(r"#\d+")


@dataclass
class StateParts:
    """Everything a state holds, checked (what :class:`~segiou.ConfusionMatrix` is built from)."""

    spec: LabelSpec
    gt_ids: Any
    pred_ids: Any
    on_unexpected: Any
    per_image: bool
    counts: IntArray
    void: IntArray
    ignored: int
    unexpected_gt: dict[int, int]
    unexpected_pred: dict[int, int]
    keys: set[str]
    n_images: int
    rows: ImageRows | None
    extras: Extras | None = None

    @property
    def pixels(self) -> int:
        """The exact pixel total (Python integers: never wraps)."""
        return (
            int(self.counts.sum(dtype=object)) + int(self.void.sum(dtype=object)) + self.ignored
            + sum(self.unexpected_gt.values()) + sum(self.unexpected_pred.values())
        )  # fmt: skip


def dump(p: StateParts) -> dict[str, Any]:
    """Write ``p`` as a version-2 state (exact integers, canonical order: JSON-safe)."""
    out: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "writer": {"segiou": __version__},
        "labels": p.spec.to_dict(),
        "gt_ids": p.gt_ids,
        "pred_ids": p.pred_ids,
        "per_image": p.per_image,
        "on_unexpected": p.on_unexpected,
        "counts": p.counts.tolist(),
        "void": p.void.tolist(),
        "ignored": p.ignored,
        "unexpected": {
            "gt": {str(v): c for v, c in sorted(p.unexpected_gt.items())},
            "pred": {str(v): c for v, c in sorted(p.unexpected_pred.items())},
        },
        "keys": sorted(p.keys),
        "images": p.n_images,
        "pixels": p.pixels,
        "image_rows": None,
    }
    if p.rows is not None:
        r = p.rows
        if r.legacy is not None:  # loaded from version 1: TP/FP/FN rows only
            out["version"] = 1
            # "given" (which names were given, not labels: merged rows can hold a label such as
            # 'a' beside an image named 'a') only where version-1 readers would infer otherwise
            inferred = [not _AUTO_NAME.fullmatch(n) for n in r.names]
            given = {} if list(r.given) == inferred else {"given": list(r.given)}
            out["image_rows"] = (
                {"names": list(r.names)}
                | given
                | {
                    f: a.tolist()
                    for f, a in zip(
                        ("tp", "fp", "fn", "ignored", "unexpected"), r.legacy, strict=True
                    )
                }
            )
        else:
            order = np.lexsort((r.pred, r.gt, r.image))
            out["image_rows"] = {
                "names": list(r.names),
                "given": list(r.given),
                "entries": {
                    "image": r.image[order].tolist(),
                    "gt": r.gt[order].tolist(),
                    "pred": r.pred[order].tolist(),
                    "count": r.count[order].tolist(),
                },
                "unexpected": [list(u) for u in sorted(r.unexpected)],
            }
    if p.extras is not None and not p.extras.empty:
        out["version"] = VERSION_EXTRAS
        named = [] if p.rows is None else [n for n, g in zip(p.rows.names, p.rows.given,
                                                                 strict=True) if g]  # fmt: skip
        out.update(p.extras.to_dict(named))
    return out


def _unexpected(x: object, name: str) -> dict[int, int]:
    if not isinstance(x, Mapping):
        msg = f"field {name!r} is {str(x)[:40]!r}; expected an object of value -> pixel count"
        raise _fail(msg)
    out = {}
    for v, c in x.items():
        # a value as written (str(int)), or an int; "05" beside "5" would overwrite its count,
        # and true is no value 1
        try:
            value = int(v) if isinstance(v, str) or not _bad_int(v) else None
        except ValueError:
            value = None
        if value is None or (isinstance(v, str) and v != str(value)):
            msg = f"field {name!r} has the value {v!r}, which is not an integer mask value"
            raise _fail(msg)
        if not -(2**63) <= value < 2**64 or value in out:
            msg = f"field {name!r} has the value {v!r} out of any mask's range, or twice; {RESTORE}"
            raise _fail(msg)
        out[value] = _count(c, f"{name}[{v}]")
    return out


def _keys(x: object) -> set[str]:
    if isinstance(x, str) or not isinstance(x, list) or not all(isinstance(k, str) for k in x):
        msg = f"field 'keys' is {str(x)[:40]!r}; expected a list of batch keys (strings)"
        raise _fail(msg)
    if len(set(x)) != len(x):
        dup = sorted({k for k in x if x.count(k) > 1})[:3]
        msg = f"field 'keys' repeats {dup}; a batch is counted once"
        raise _fail(msg)
    return set(x)


def _names(
    x: object, given: object, *, infer: bool = False
) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """Read the names of per-image rows and which were given (``infer``: version 1 without)."""
    if isinstance(x, str) or not isinstance(x, list) or not all(isinstance(n, str) for n in x):
        msg = f"field 'image_rows.names' is {str(x)[:40]!r}; expected a list of image names"
        raise _fail(msg)
    if "" in x:  # (an instance record of no named image has the image "")
        msg = f"field 'image_rows.names' holds an empty name (row {x.index('')}); {RESTORE}"
        raise _fail(msg)
    if infer:  # version 1: a name is given unless it is an automatic #<row> label
        given = [not _AUTO_NAME.fullmatch(n) for n in x]
    if (not isinstance(given, list) or len(given) != len(x)
            or not all(isinstance(g, bool) for g in given)):  # fmt: skip
        msg = f"field 'image_rows.given' is {str(given)[:40]!r}; expected one true/false per name"
        raise _fail(msg)
    named = [n for n, g in zip(x, given, strict=True) if g]
    if len(set(named)) != len(named):
        dup = sorted({n for n in named if named.count(n) > 1})[:3]
        msg = f"field 'image_rows.names' repeats {dup}; an image is counted once"
        raise _fail(msg)
    return tuple(x), tuple(given)


def _rows_v2(r: Any, k: int, n: int) -> ImageRows:
    if not isinstance(r, Mapping) or set(r) != {"names", "given", "entries", "unexpected"}:
        msg = (
            f"field 'image_rows' is malformed ({str(r)[:40]}): it holds 'names', 'given', "
            "'entries', 'unexpected'"
        )
        raise _fail(msg)
    names, given = _names(r["names"], r["given"])
    if len(names) != n:
        msg = (
            f"field 'images' is {n} but 'image_rows' holds {len(names)} row(s), one per counted "
            "image; the file was altered or truncated"
        )
        raise _fail(msg)
    e = r["entries"]
    if not isinstance(e, Mapping) or set(e) != {"image", "gt", "pred", "count"}:
        msg = "field 'image_rows.entries' must hold the lists 'image', 'gt', 'pred', 'count'"
        raise _fail(msg)
    m = len(e["image"]) if isinstance(e["image"], list) else -1
    cols = {f: _counts(e[f], (m,), f"image_rows.entries.{f}") for f in ("image", "gt", "pred",
                                                                         "count")}  # fmt: skip
    image, gt, pred, count = cols["image"], cols["gt"], cols["pred"], cols["count"]
    if m and (image.max() >= n or gt.max() > k + 1 or pred.max() > k + 1 or count.min() < 1):
        msg = (
            f"field 'image_rows.entries' holds an image index >= {n}, a code > {k + 1} or a "
            "count of 0; the file was altered"
        )
        raise _fail(msg)
    folded = ((gt == k) & (pred != k)) | ((gt == k + 1) & (pred != k + 1))
    cells = image * (k + 2) ** 2 + gt * (k + 2) + pred
    if folded.any() or np.unique(cells).size != m:
        msg = "field 'image_rows.entries' repeats a cell or splits an ignored row; altered"
        raise _fail(msg)
    odd = _odd_values(r["unexpected"], n)
    return ImageRows(k, names, given, image, gt, pred, count, tuple(odd))


def _odd_values(x: object, n: int) -> list[UnexpectedValue]:
    """Read per-image unexpected values: ``[image, "gt" or "pred", value, count]`` each, once.

    The image a row index ``0 .. n - 1``, the value an integer mask value (int64 or uint64),
    the count at least 1; never a bool where an integer is expected (``true`` is no row 1).
    """
    if not isinstance(x, list):
        msg = f"field 'image_rows.unexpected' is {str(x)[:40]!r}; expected a list of entries"
        raise _fail(msg)
    odd: list[UnexpectedValue] = []
    seen = set()
    for j, u in enumerate(x):
        where = f"image_rows.unexpected[{j}]"
        if not isinstance(u, list) or len(u) != 4:
            msg = f"field {where!r} is {str(u)[:40]!r}; expected [image, side, value, count]; {RESTORE}"
            raise _fail(msg)
        image, side, value, count = u
        if _bad_int(image) or not 0 <= image < n:
            msg = f"field {where!r} has the image {image!r}, not a row index 0..{n - 1}; {RESTORE}"
            raise _fail(msg)
        if not isinstance(side, str) or side not in ("gt", "pred"):
            msg = f"field {where!r} has the side {side!r}, not 'gt' or 'pred'; {RESTORE}"
            raise _fail(msg)
        if _bad_int(value) or not -(2**63) <= value < 2**64:
            msg = f"field {where!r} has the value {value!r}, not an integer mask value; {RESTORE}"
            raise _fail(msg)
        if _count(count, where) == 0 or (image, side, value) in seen:
            what = "a count of 0" if count == 0 else "the same image, side and value again"
            msg = f"field {where!r} holds {what}; {RESTORE}"
            raise _fail(msg)
        seen.add((image, side, value))
        odd.append((image, "gt" if side == "gt" else "pred", value, count))
    return odd


def _bad_int(x: object) -> bool:
    """Whether ``x`` is not an integer (a bool is none: ``true`` is no 1 in a state)."""
    return isinstance(x, bool) or not isinstance(x, int)


def _rows_v1(r: Any, k: int, n: int) -> ImageRows:
    fields = ("names", "tp", "fp", "fn", "ignored", "unexpected")
    if not isinstance(r, Mapping) or set(r) - {"given"} != set(fields):
        msg = (
            f"field 'image_rows' is malformed ({str(r)[:40]}): it holds {list(fields)} (and "
            "'given', since segiou 0.3)"
        )
        raise _fail(msg)
    names, given = _names(r["names"], r.get("given"), infer="given" not in r)
    if len(names) != n:
        msg = (
            f"field 'images' is {n} but 'image_rows' holds {len(names)} row(s), one per counted "
            "image; the file was altered or truncated"
        )
        raise _fail(msg)
    legacy = tuple(
        _counts(r[f], (n, k) if f in ("tp", "fp", "fn") else (n,), f"image_rows.{f}")
        for f in fields[1:]
    )
    z = np.zeros(0, dtype=np.int64)
    return ImageRows(k, names, given, z, z, z, z, legacy=legacy)  # type: ignore[arg-type]


def _check_rows_add_up(p: StateParts) -> None:
    """Per-image rows must sum to the totals: they describe the same pixels."""
    r = p.rows
    assert r is not None
    k = p.spec.num_classes
    # every sum below is exact: int64 sums wrap silently, and rows of ~2**64 + 12 pixels would
    # pass for 12 (each row's counts are below 2**63; their sum is not). Rows of more pixels
    # than the state holds are refused first; then no int64 sum of a part of them can wrap
    if r.legacy is not None:
        tp, fp, fn, ign, odd = r.legacy
        held = {"tp, fn, ignored and unexpected": exact_total(tp) + exact_total(fn)
                + exact_total(ign) + exact_total(odd), "fp": exact_total(fp)}  # fmt: skip
    else:
        held = {"entries": exact_total(r.count)}
        held["unexpected values"] = sum(u[3] for u in r.unexpected)
    for what, n in held.items():
        if n > p.pixels:
            msg = (
                f"the per-image rows' {what} hold {n:,} pixels, more than the state's "
                f"{p.pixels:,}; the file was altered or is corrupt"
            )
            raise _fail(msg)
    if r.legacy is not None:
        diag = np.diagonal(p.counts)
        sums = {
            "tp": (tp.sum(axis=0), diag),
            "fp": (fp.sum(axis=0), p.counts.sum(axis=0) - diag),
            "fn": (fn.sum(axis=0), p.counts.sum(axis=1) - diag + p.void),
            "ignored": (int(ign.sum()), p.ignored),
            "unexpected": (int(odd.sum()), sum(p.unexpected_gt.values())
                           + sum(p.unexpected_pred.values())),
        }  # fmt: skip
    else:
        t = r.totals()
        sums = {
            "counts": (t["counts"], p.counts),
            "void": (t["void"], p.void),
            "ignored": (t["ignored"], p.ignored),
            "unexpected gt": (t["unexpected_gt"], p.unexpected_gt),
            "unexpected pred": (t["unexpected_pred"], p.unexpected_pred),
        }
        g, pr, c, i = r.gt, r.pred, r.count, r.image
        for side, hit in (("gt", g == k + 1), ("pred", (pr == k + 1) & (g < k))):
            per = np.zeros(r.n, dtype=np.int64)
            np.add.at(per, i[hit], c[hit])
            listed = [0] * r.n  # Python integers: exact
            for img, s, _, cnt in r.unexpected:
                if s == side:
                    listed[img] += cnt
            if per.tolist() != listed:
                sums[f"unexpected {side} values"] = (per.tolist(), listed)
    for what, (rows, total) in sums.items():
        equal = np.array_equal(rows, total) if isinstance(rows, np.ndarray) else rows == total
        if not equal:
            msg = (
                f"the per-image rows' {what} do not add up to the state's totals; the file was "
                "altered or is corrupt"
            )
            raise _fail(msg)


@functools.lru_cache(maxsize=64)
def _spec(text: str) -> LabelSpec:
    """Parse a state's label spec once per distinct spec (the states of one run share it)."""
    return LabelSpec.from_dict(json.loads(text), source="field 'labels'")


def read_json(path: Path) -> Any:
    """Parse a state file (JSON).

    Raises
    ------
    CheckpointError
        The file does not exist, cannot be read or is not JSON (the message names it).
    """
    try:
        return loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        msg = f"checkpoint {str(path)!r} does not exist"
        raise CheckpointError(msg) from err
    except (OSError, ValueError) as err:
        msg = f"checkpoint {str(path)!r} is not readable JSON: {err}"
        raise CheckpointError(msg) from err


def load(d: Any, source: str = "state") -> StateParts:
    """Read and check a saved state (version 1, 2 or 3).

    Parameters
    ----------
    d : mapping
        The state, e.g. parsed from JSON.
    source : str, default "state"
        Where it came from; every message starts with it.

    Returns
    -------
    StateParts

    Raises
    ------
    CheckpointError
        Not a segiou state, an unknown version, or a field that breaks an invariant.
    """
    try:
        return _load(d)
    except CheckpointError as err:
        msg = f"{source}: {err}"
        raise CheckpointError(msg) from err
    except RecursionError:  # a field nested hundreds of levels deep (JSON parses ~1000)
        msg = f"{source}: not a segiou confusion state: {TOO_DEEP}"
        raise CheckpointError(msg) from None


def _load(d: Any) -> StateParts:
    if not isinstance(d, Mapping) or d.get("format") != FORMAT:
        found = d.get("format") if isinstance(d, Mapping) else type(d).__name__
        msg = f"not a segiou confusion state (format {found!r}, expected {FORMAT!r})"
        raise _fail(msg)
    version = d.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        msg = (
            f"field 'version' is {version!r}, expected the integer 1, 2 or 3 (the file was "
            "altered or not written by segiou)"
        )
        raise _fail(msg)
    if version not in READABLE:
        w = d.get("writer")
        writer = w.get("segiou", "?") if isinstance(w, Mapping) else "?"
        if version < READABLE[0]:
            msg = f"state version {version} is no version segiou writes: the file was altered"
            raise _fail(msg)
        msg = (
            f"state version {version} (written by segiou {writer}) is not readable by segiou "
            f"{__version__}, which reads versions {list(READABLE)}: "
            + ("the file was altered" if writer == __version__ else
               f"upgrade segiou (if segiou {writer} is not newer, the file was altered)")
        )  # fmt: skip
        raise _fail(msg)
    check_digest(d)
    known = _FIELDS | (_EXTRA_FIELDS if version >= VERSION_EXTRAS else set())
    if unknown := sorted(set(d) - known):
        msg = f"unknown field(s) {unknown}; the file was altered or written by a newer segiou"
        raise _fail(msg)
    if missing := sorted(_FIELDS - {"writer"} - set(d)):
        msg = f"missing field(s) {missing}; the file was altered or truncated"
        raise _fail(msg)
    if not isinstance(d["per_image"], bool):
        msg = f"field 'per_image' is {d['per_image']!r}, expected true or false"
        raise _fail(msg)
    if d["on_unexpected"] not in ("raise", "count"):
        msg = f"field 'on_unexpected' is {d['on_unexpected']!r}, expected 'raise' or 'count'"
        raise _fail(msg)
    for f in ("gt_ids", "pred_ids"):
        if d[f] not in ("class", "raw"):
            msg = f"field {f!r} is {d[f]!r}, expected the id space 'class' or 'raw'"
            raise _fail(msg)
    check_spec_fields(d["labels"])
    try:
        spec = _spec(json.dumps(d["labels"], sort_keys=True))
    except Exception as err:  # any malformed spec: name the field
        msg = f"field 'labels' is not a valid label spec ({err})"
        raise _fail(msg) from err
    k = spec.num_classes
    if version >= VERSION_EXTRAS:  # all there, each of the form written, before any is read
        check_extra_fields(d, k=k, n_categories=len(spec.categories), per_image=d["per_image"])
    unexpected = d["unexpected"]
    if not isinstance(unexpected, Mapping) or set(unexpected) != {"gt", "pred"}:
        msg = "field 'unexpected' must hold 'gt' and 'pred' (value -> pixel count)"
        raise _fail(msg)
    p = StateParts(
        spec=spec, gt_ids=d["gt_ids"], pred_ids=d["pred_ids"], on_unexpected=d["on_unexpected"],
        per_image=d["per_image"], counts=_counts(d["counts"], (k, k), "counts"),
        void=_counts(d["void"], (k,), "void"), ignored=_count(d["ignored"], "ignored"),
        unexpected_gt=_unexpected(unexpected["gt"], "unexpected.gt"),
        unexpected_pred=_unexpected(unexpected["pred"], "unexpected.pred"),
        keys=_keys(d["keys"]), n_images=_count(d["images"], "images"), rows=None,
        extras=Extras.from_dict(d, k=k, n_categories=len(spec.categories),
                                per_image=d["per_image"], source=""),  # load() names it
    )  # fmt: skip
    if p.on_unexpected == "raise" and (p.unexpected_gt or p.unexpected_pred):
        msg = (
            "the state counted unexpected values, but its on_unexpected is 'raise', which never "
            "counts them; the file was altered"
        )
        raise _fail(msg)
    total = p.pixels
    if total > INT64_MAX:
        msg = f"its counts add up to {total:,} pixels, more than 2**63 - 1; the file was altered"
        raise _fail(msg)
    if d["pixels"] != total or type(d["pixels"]) is not int:  # (not 9216.0, nor a bool)
        msg = (
            f"counts add up to {total:,} pixels but the state records {d['pixels']!r}; the file "
            "was altered or truncated"
        )
        raise _fail(msg)
    check_values(p.spec, p.gt_ids, p.pred_ids, ignored=p.ignored, void=int(p.void.sum()),
                 unexpected_gt=p.unexpected_gt, unexpected_pred=p.unexpected_pred)  # fmt: skip
    check_width(p.extras)
    check_instances(p.spec, p.extras)
    _check_extra_bounds(p)
    r = d["image_rows"]
    if not p.per_image:
        if r is not None:
            msg = (
                "field 'image_rows' holds per-image rows but 'per_image' is false (a state "
                "without per-image rows has 'image_rows': null); the file was altered"
            )
            raise _fail(msg)
        if p.extras is not None:  # no image is named: every absent chunk is a label's
            p.extras.keep_named(set(), set())
        _check_records(p)
        return p
    # a version-1 state merged with one that met absent chunks is version 3 with version-1 rows
    legacy = version == 1 or (version == VERSION_EXTRAS and isinstance(r, Mapping) and "tp" in r)
    p.rows = _rows_v1(r, k, p.n_images) if legacy else _rows_v2(r, k, p.n_images)
    _check_rows_add_up(p)
    _check_extras(p)
    rows = p.rows
    if p.extras is not None:
        # entries are kept for named images only (a state written before kept them for labels
        # too, which could collide: dropped here); with every image named they add up exactly.
        # Version-1 rows: only absent chunks are told apart (a name's, or a label's)
        named = {n for n, g in zip(rows.names, rows.given, strict=True) if g}
        p.extras.keep_named(named, set(rows.names) - named if rows.legacy is None else set())
        if all(rows.given) and rows.legacy is None:
            p.extras.check_exact("")
        check_image_bounds(rows, p.extras, p.spec.classes)
    _check_records(p)
    return p


def _check_extra_bounds(p: StateParts) -> None:
    """Boundary IoU counts and category false positives within the state's own pixels.

    Per class ``c``: ``|G_d|`` at most the ground-truth pixels of ``c`` (its row of the counts,
    its void and, at most, every unexpected prediction: states written before unexpected
    predictions were left out of ``G_d`` counted them there), ``|P_d|`` at most the pixels predicted
    ``c`` at valid ground truth (its column), ``|G_d & P_d|`` at most its true positives. A
    category false positive is a void prediction at valid ground truth: at most the void total.
    """
    e = p.extras
    if e is None:
        return
    if e.boundary is not None:
        gt = p.counts.sum(axis=1) + p.void + sum(p.unexpected_pred.values())
        limits = (("intersections |G_d & P_d|", np.diagonal(p.counts), "true positives"),
                  ("ground-truth boundaries |G_d|", gt, "ground-truth pixels"),
                  ("predicted boundaries |P_d|", p.counts.sum(axis=0), "predicted pixels"))  # fmt: skip
        for row, (what, limit, of) in enumerate(limits):
            if (over := np.flatnonzero(e.boundary_total[row] > limit)).size:
                c = int(over[0])
                msg = (
                    f"field 'boundary.counts' gives class {p.spec.classes[c]!r} "
                    f"{int(e.boundary_total[row, c]):,} {what}, more than its "
                    f"{int(limit[c]):,} {of}; the file was altered"
                )
                raise _fail(msg)
    for what, chunks in (("absent_chunks", e.absent), ("absent_pred_chunks", e.absent_pred)):
        if (n := sum(chunks.values())) > p.pixels:  # each absent chunk held a pixel at least
            msg = (
                f"field {what!r} holds {n:,} absent chunks, more than the state's {p.pixels:,} "
                "pixels (each chunk read covers one at least); the file was altered"
            )
            raise _fail(msg)
    if e.instances and (fp := exact_total(e.category_fp)) > (void := int(p.void.sum())):
        msg = (
            f"field 'instances.category_fp' holds {fp:,} false positives, more than the "
            f"state's {void:,} void predictions at valid ground truth (each is one); the file "
            "was altered"
        )
        raise _fail(msg)


def _check_extras(p: StateParts) -> None:
    """Per-image Boundary IoU counts and absent chunks name counted images."""
    if p.extras is None or p.rows is None:
        return
    named = set(p.rows.names)
    e = p.extras
    for what, names in (("boundary.images", e.boundary_images), ("absent_chunks", e.absent),
                        ("absent_pred_chunks", e.absent_pred),
                        ("instances.images", e.category_fp_images)):  # fmt: skip
        if stray := sorted(set(names) - named)[:3]:
            msg = f"field {what!r} names image(s) {stray} that have no per-image row; altered"
            raise _fail(msg)


def _check_records(p: StateParts) -> None:
    """Instance records: no more pixels than their images hold, each (named image, id) once."""
    if p.extras is None or not p.extras.instances:
        return
    rec = p.extras.instance_records()
    if not rec.n:
        return
    r = p.rows
    if r is None or r.legacy is not None:  # no per-image pixels: the state's total bounds them
        if (px := exact_total(rec.pixels)) > p.pixels:
            msg = (
                f"field 'instances.records' holds {px:,} instance pixels, more than the state's "
                f"{p.pixels:,}; the file was altered"
            )
            raise _fail(msg)
        return
    row_of = {n: i for i, (n, g) in enumerate(zip(r.names, r.given, strict=True)) if g}
    held = np.zeros(r.n, dtype=np.int64)
    np.add.at(held, r.image, r.count)
    unnamed = np.array([n == "" for n in rec.image], dtype=bool)  # labelled images' records
    if (unnamed_px := int(rec.pixels[unnamed].sum(dtype=object))) > int(
        held[~np.array(r.given, dtype=bool)].sum(dtype=object)
    ):
        msg = (
            f"field 'instances.records' gives images without names {unnamed_px:,} instance "
            "pixels, more than they have; the file was altered"
        )
        raise _fail(msg)
    if unnamed.any():
        keep = ~unnamed
        rec = InstanceRecords(tuple(n for n in rec.image if n), rec.id[keep], rec.cls[keep],
                              rec.pixels[keep], rec.tp[keep], rec.cat_tp[keep])  # fmt: skip
    if stray := sorted(set(rec.image) - set(row_of))[:3]:
        msg = (
            f"field 'instances.records' names image(s) {stray} that have no per-image row; the "
            "file was altered"
        )
        raise _fail(msg)
    idx = np.array([row_of[n] for n in rec.image], dtype=np.int64)
    # per image, exactly: each record is below 2**63, their sum need not be (int64 would wrap)
    wide = exact_total(rec.pixels) > INT64_MAX
    used = np.zeros(r.n, dtype=object if wide else np.int64)
    np.add.at(used, idx, rec.pixels.astype(object) if wide else rec.pixels)
    if (over := np.flatnonzero(used > held)).size:
        i = int(over[0])
        msg = (
            f"field 'instances.records' gives image {r.names[i]!r} {int(used[i]):,} instance "
            f"pixels, more than the {int(held[i]):,} pixels it has; the file was altered"
        )
        raise _fail(msg)
    named = np.array([r.given[i] for i in idx.tolist()], dtype=bool)
    pairs = list(zip(idx[named].tolist(), rec.id[named].tolist(), strict=True))
    if len(set(pairs)) != len(pairs):
        dup = next(pr for pr in pairs if pairs.count(pr) > 1)
        msg = (
            f"field 'instances.records' records instance {dup[1]} of image "
            f"{r.names[dup[0]]!r} more than once; an instance is recorded once; altered"
        )
        raise _fail(msg)
