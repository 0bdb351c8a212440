"""Readers and form checks of a saved state's fields (used by :mod:`segiou._state`).

Counts are read exactly (:func:`count`, :func:`counts`: integers in ``0 .. 2**63 - 1``, never
a bool, checked before any numpy conversion). :func:`check_extra_fields` checks that the
version-3 fields are all there and of the form :meth:`segiou._extras.Extras.to_dict` writes
before any of them is read: a field cut from a file must not load as "not counted" (Boundary
IoU or iIoU gone without a word), and :func:`check_width` refuses a Boundary IoU width that
the widths its images were counted with contradict. :func:`sealed` records a state's sha256
(:func:`digest`) in its ``writer`` field as it is saved, and :func:`check_digest` refuses a
state changed after that.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from segiou._count import IGNORE
from segiou._extras import Extras, InstanceRecords
from segiou._instance_kernels import FIRST as _FIRST
from segiou._instances import instance_categories
from segiou._typing import IntArray
from segiou.errors import CheckpointError, LabelSpecError
from segiou.images import ImageRows
from segiou.labels import IdSpace, LabelSpec

__all__ = [
    "INT64_MAX",
    "RESTORE",
    "check_digest",
    "check_extra_fields",
    "check_image_bounds",
    "check_instances",
    "check_spec_fields",
    "check_values",
    "check_width",
    "count",
    "counts",
    "digest",
    "fail",
    "sealed",
]

INT64_MAX = 2**63 - 1
#: What to do about a field that cannot be right (every message of an altered file ends so).
RESTORE = "the file was altered or truncated: restore it from its source, or count the images again"
#: The fields of each version-3 object, as written.
_BOUNDARY = ("width", "pixels_used", "counts", "images")
_INSTANCES = ("records", "category_fp", "images")
_RECORDS = ("image", "id", "class", "pixels", "tp", "category_tp")


def fail(msg: str) -> CheckpointError:
    """Return the error of a state that breaks an invariant (``load`` adds its source)."""
    return CheckpointError(msg)


def count(x: object, name: str) -> int:
    """Return ``x`` if it is an exact count: an integer (not a bool) in 0 .. 2**63 - 1."""
    if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= INT64_MAX:
        msg = (
            f"field {name!r} holds {str(x)[:40]!r}; expected non-negative integer counts below "
            "2**63 (exact counts never exceed 2**63 - 1)"
        )
        raise fail(msg)
    return x


def counts(x: object, shape: tuple[int, ...], name: str) -> IntArray:
    """Integer counts of ``shape``, each in 0 .. 2**63 - 1, as int64 (checked before casting).

    numpy would pick a dtype for values it cannot hold in int64 (float64 for 2**63 beside small
    integers, object beyond 64 bits) and then the dtype would be all the message could blame:
    any value that is not an exact count is found and named instead.
    """
    try:
        a = np.asarray(x)
    except (ValueError, TypeError, OverflowError):  # ragged lists, integers beyond numpy's
        a = np.asarray([], dtype=object)
    if a.size == 0 and int(np.prod(shape)) == 0 and a.ndim == 1:
        return np.zeros(shape, dtype=np.int64)
    exact = a.dtype.kind in "iu" and a.shape == shape
    if exact and a.size and (a.min() < 0 or (a.dtype.kind == "u" and a.max() > INT64_MAX)):
        exact = False
    if exact and _has_bool(x):  # numpy reads [1, true] as integers: true is no count of 1
        exact = False
    if exact:
        return a.astype(np.int64)
    for v in flat(x):  # the slow path: name the first value that is no exact count
        count(v, name)
    got = a.shape if a.dtype.kind != "O" else "ragged"
    msg = f"field {name!r} has shape {got}, expected {shape}"
    raise fail(msg)


def _has_bool(x: object) -> bool:
    """Whether nested lists hold a bool (Python's or numpy's); C-speed on flat lists."""
    if not isinstance(x, list | tuple):
        return False
    types = set(map(type, x))
    if bool in types or np.bool_ in types:
        return True
    return bool(types & {list, tuple}) and any(_has_bool(v) for v in x)


def flat(x: object) -> list[object]:
    """Return the values of nested lists, in order."""
    if isinstance(x, list | tuple):
        return [v for item in x for v in flat(item)]
    return [x]


def _extra_counts(x: object, shape: tuple[int, ...], name: str) -> None:
    """Refuse counts of a version-3 field not nested as ``shape``, as :mod:`segiou._extras` words it.

    Only the nesting: :mod:`segiou._extras` checks every value, but numpy raised its own error
    on ragged lists before it could.
    """
    if not _nested(x, shape):
        msg = (
            f"field {name!r} must hold non-negative integer counts of shape {shape}, got "
            f"{str(x)[:60]!r}"
        )
        raise fail(msg)


def _nested(x: object, shape: tuple[int, ...]) -> bool:
    """Whether ``x`` is lists nested as ``shape`` (values not checked)."""
    if not isinstance(x, list | tuple) or len(x) != shape[0]:
        return False
    if len(shape) == 1:  # scalars only (C-speed: a state can hold millions of records)
        return not set(map(type, x)) & {list, tuple}
    return all(_nested(v, shape[1:]) for v in x)


def _fields(x: object, name: str, fields: tuple[str, ...]) -> Mapping[str, Any]:
    """``x`` as an object with exactly ``fields`` (none missing, none unknown)."""
    if not isinstance(x, Mapping):
        msg = f"field {name!r} is {str(x)[:40]!r}; expected null or an object of {list(fields)}"
        raise fail(msg)
    if missing := [f for f in fields if f not in x]:
        msg = f"field {name!r} misses {missing}; {RESTORE}"
        raise fail(msg)
    if unknown := sorted(set(x) - set(fields), key=str):
        msg = f"field {name!r} has unknown field(s) {unknown}; {RESTORE}"
        raise fail(msg)
    return x


def _images(x: object, per_image: bool, name: str, shape: tuple[int, ...]) -> None:
    """Per-image entries: an object of name -> counts with per-image rows, else null."""
    if not per_image:
        if x is not None:  # (an empty object is harmless, and Extras refuses a full one)
            if isinstance(x, Mapping) and not x:
                return
            msg = f"field {name!r} holds per-image entries but 'per_image' is false; {RESTORE}"
            raise fail(msg)
        return
    if not isinstance(x, Mapping):
        msg = (
            f"field {name!r} is {str(x)[:40]!r}, but a state with per-image rows keeps an object "
            f"of image name -> counts there (null: per-image entries cut); {RESTORE}"
        )
        raise fail(msg)
    for n, v in x.items():
        _extra_counts(v, shape, f"{name}[{n!r}]")


def check_extra_fields(d: Mapping[str, Any], *, k: int, n_categories: int,
                       per_image: bool) -> None:  # fmt: skip
    """Refuse version-3 fields that are not all there, or not of the form written.

    ``boundary``, ``instances`` and ``absent_chunks`` must be there, each with every field it
    is written with and no other, its counts of the spec's shapes (``absent_pred_chunks`` is
    there when prediction chunks were absent: states written before have none).

    A version-3 state holds at least one of them (a state with none is written as version 2):
    one set to null where it was the only one is refused too.

    Raises
    ------
    CheckpointError
        The field, and what to do.
    """
    if missing := [f for f in ("boundary", "instances", "absent_chunks") if f not in d]:
        msg = (
            f"missing field(s) {missing}: a version-3 state has 'boundary', 'instances' and "
            f"'absent_chunks' (null or {{}} when not counted); {RESTORE}"
        )
        raise fail(msg)
    b = d["boundary"]
    if b is not None:
        b = _fields(b, "boundary", _BOUNDARY)
        if not isinstance(b["width"], Mapping):
            msg = f"field 'boundary.width' is {str(b['width'])[:40]!r}; expected {{'ratio': r}} or {{'pixels': n}}"
            raise fail(msg)
        used = b["pixels_used"]
        if not isinstance(used, list) or any(count(v, "boundary.pixels_used") < 1 for v in used):
            msg = (
                f"field 'boundary.pixels_used' is {str(used)[:40]!r}; expected the list of widths "
                f"in pixels the images were counted with (each 1 or more); {RESTORE}"
            )
            raise fail(msg)
        _extra_counts(b["counts"], (3, k), "boundary.counts")
        _images(b["images"], per_image, "boundary.images", (3, k))
    inst = d["instances"]
    if inst is not None:
        inst = _fields(inst, "instances", _INSTANCES)
        rec = _fields(inst["records"], "instances.records", _RECORDS)
        names = rec["image"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            msg = f"field 'instances.records.image' must be a list of image names; {RESTORE}"
            raise fail(msg)
        for f in _RECORDS[1:]:
            _extra_counts(rec[f], (len(names),), f"instances.records.{f}")
        _extra_counts(inst["category_fp"], (n_categories,), "instances.category_fp")
        _images(inst["images"], per_image, "instances.images", (n_categories,))
    chunks = 0
    for f in ("absent_chunks", "absent_chunks_labels", "absent_pred_chunks",
              "absent_pred_chunks_labels"):  # fmt: skip
        m = d.get(f, {})
        if not isinstance(m, Mapping):
            msg = f"field {f!r} is {str(m)[:40]!r}; expected an object of image name -> chunks"
            raise fail(msg)
        chunks += sum(count(n, f"{f}[{name!r}]") for name, n in m.items())
    for f in ("absent_chunks_labels", "absent_pred_chunks_labels"):
        if d.get(f) and not per_image:
            msg = (
                f"field {f!r} tells labels from image names, but the state keeps no per-image "
                f"rows (so names no image); {RESTORE}"
            )
            raise fail(msg)
    if b is None and inst is None and not chunks:
        msg = (
            "the state is version 3 but holds no Boundary IoU counts, instances or absent chunks "
            "('boundary' and 'instances' null, 'absent_chunks' empty, no 'absent_pred_chunks'), "
            "which a version-3 state "
            f"always has: one of them was cut; {RESTORE}"
        )
        raise fail(msg)


def check_width(e: Extras | None) -> None:
    """Refuse a Boundary IoU width in pixels that its images were not counted with.

    ``pixels_used`` lists the widths the images got: with a width of ``n`` pixels, only ``n``
    (a ratio of the diagonal gives each image its own, which no state can check).

    Raises
    ------
    CheckpointError
        A width was altered: counts of one width merged with another's would be wrong.
    """
    if e is None or e.boundary is None or e.boundary.pixels is None:
        return
    if stray := sorted(e.boundary_px - {e.boundary.pixels}):
        msg = (
            f"field 'boundary.width' says {e.boundary.pixels} px, but 'boundary.pixels_used' "
            f"says images were counted with {stray} px: the counts hold for the width they were "
            f"counted with, and one of the two fields was edited; {RESTORE}"
        )
        raise fail(msg)


#: The fields :meth:`segiou.labels.LabelSpec.to_dict` always writes (a state's spec has them).
_SPEC_FIELDS = ("name", "classes", "ignore")


def check_spec_fields(x: object) -> None:
    """Refuse a state's spec without a field every written spec has.

    A spec file may leave out its name (named after the file) and its ignore values (none);
    a state's spec never does: one cut would read back as another spec.

    Raises
    ------
    CheckpointError
        The missing field.
    """
    if isinstance(x, Mapping) and (missing := [f for f in _SPEC_FIELDS if f not in x]):
        msg = f"field 'labels' misses {missing}, which a state's label spec always has; {RESTORE}"
        raise fail(msg)


def check_values(spec: LabelSpec, gt_ids: IdSpace, pred_ids: IdSpace, *, ignored: int,
                 void: int, unexpected_gt: Mapping[int, int],
                 unexpected_pred: Mapping[int, int]) -> None:  # fmt: skip
    """Refuse counts the spec could not have made.

    A value it maps (a class, ignored or void) counted as unexpected, ignored pixels without an
    ignored value, void predictions without a void value.

    Raises
    ------
    CheckpointError
        The counts and the spec disagree: one was edited (a spec's ignore values or raw ids, or
        the counts).
    """
    try:
        maps = {"gt": spec.gt_map(gt_ids), "pred": spec.pred_map(pred_ids)}
    except LabelSpecError as err:  # e.g. raw ids without a raw table
        msg = f"the state's settings are invalid ({err})"
        raise fail(msg) from err
    for side, values in (("gt", unexpected_gt), ("pred", unexpected_pred)):
        if mapped := sorted(v for v in values if v in maps[side]):
            msg = (
                f"field 'unexpected.{side}' counts the value(s) {mapped[:5]} as unexpected, but "
                f"the spec maps them (a class, ignored or void): the spec or the counts were "
                f"edited; {RESTORE}"
            )
            raise fail(msg)
    for what, n, side, none in (("ignored", ignored, "gt", "ignored ground-truth value"),
                                ("void", void, "pred", "void prediction value")):  # fmt: skip
        if n and IGNORE not in maps[side].values():
            msg = (
                f"field {what!r} holds {n:,} pixels, but the spec has no {none} (no ignore "
                f"value{', no raw id of no class' if spec.has_raw else ''}): the spec or the "
                f"counts were edited; {RESTORE}"
            )
            raise fail(msg)


def check_instances(spec: LabelSpec, e: Extras | None) -> None:
    """Refuse instance records and category false positives the counting could not have made.

    An instance value is ``label * 1000 + k`` of a label the spec maps to a class with an
    average instance size (its raw ids, or class ids without them): the record's class is that
    one. A pixel predicted as its class is also predicted in its instance category (``tp <=
    category_tp``), and an instance of a class outside any instance category has no category
    true positive; category false positives are kept for instance categories only.

    Raises
    ------
    CheckpointError
        The record or count, named.
    """
    if e is None or not e.instances:
        return
    inst_cats = set(instance_categories(spec))
    if (r := e.instance_records()).n:
        _check_records(spec, r, inst_cats)
    outside = [g for g in range(len(spec.categories)) if g not in inst_cats]
    for name, row in (("instances.category_fp", e.category_fp),
                      *((f"instances.images[{n!r}]", v) for n, v in
                        e.category_fp_images.items())):  # fmt: skip
        if outside and row[outside].any():
            g = outside[int(np.flatnonzero(row[outside])[0])]
            msg = (
                f"field {name!r} counts false positives of category {spec.categories[g]!r}, "
                f"which has no instances (only instance categories count them); {RESTORE}"
            )
            raise fail(msg)


def _check_records(spec: LabelSpec, r: InstanceRecords, inst_cats: set[int]) -> None:
    """Each record's class from its instance value; its category true positives."""
    labels = spec.gt_map("raw" if spec.has_raw else "class")
    sized = {c for c, _ in spec.instance_sizes}
    icat = [g if g in inst_cats else -1 for g in spec.class_categories or [-1] * spec.num_classes]
    # vectorised (a state can hold millions of records): each record's class from its value
    uniq, inverse = np.unique(r.id // _FIRST, return_inverse=True)
    expected = np.array([labels.get(int(u), -9) for u in uniq], dtype=np.int64)[inverse]
    in_cat = np.array(icat, dtype=np.int64)[r.cls] >= 0  # (classes are below K: checked)
    wrong = (r.id < _FIRST) | (expected != r.cls) | ~np.isin(r.cls, sorted(sized))
    if (bad := np.flatnonzero(wrong)).size:
        i = int(bad[0])
        v, c, want = int(r.id[i]), int(r.cls[i]), int(expected[i])
        msg = (
            f"field 'instances.records' holds instance {v} as class {c}, but instance values "
            f"are label * 1000 + k and {v} is "
            + ("below 1000 (no instance)" if v < _FIRST else f"of label {v // _FIRST}, ")
            + ("" if v < _FIRST else "no label of the spec" if want == -9 else
               f"which is class {want}" + ("" if want in sized else " (no instance size)"))
            + f"; {RESTORE}"
        )  # fmt: skip
        raise fail(msg)
    if (bad := np.flatnonzero(np.where(in_cat, r.tp > r.cat_tp, r.cat_tp > 0))).size:
        i = int(bad[0])
        msg = (
            f"field 'instances.records' gives instance {int(r.id[i])} {int(r.tp[i])} pixels "
            f"predicted as its class and {int(r.cat_tp[i])} in its instance category"
            + (" (those include the first)" if in_cat[i] else " (its class is in none)")
            + f"; {RESTORE}"
        )
        raise fail(msg)


def check_image_bounds(rows: ImageRows, e: Extras | None, classes: Sequence[str]) -> None:
    """Refuse per-image Boundary IoU counts and category false positives beyond their image.

    Every named image has entries (counting keeps them). Per named image, as the state's totals
    are bounded by its counts: per class ``|G_d & P_d|`` at most the image's true positives,
    ``|G_d|`` its ground-truth pixels, ``|P_d|`` its pixels predicted so at valid ground truth;
    its category false positives at most its void predictions at valid ground truth. What the
    totals hold beyond the entries belongs to the labelled images: bounded by their pixels the
    same way. (Version-1 rows hold no per-image matrix, and never come with Boundary IoU or
    instances.)

    Raises
    ------
    CheckpointError
        The image (or the rest of the totals), the class and the count, named.
    """
    if e is None or rows.legacy is not None or (e.boundary is None and not e.instances):
        return
    k, n = rows.k, rows.n
    row_of = {name: i for i, (name, g) in enumerate(zip(rows.names, rows.given, strict=True)) if g}
    kinds = [("boundary", e.boundary_images)] if e.boundary is not None else []
    kinds += [("instances", e.category_fp_images)] if e.instances else []
    for kind, entries in kinds:
        # counting keeps an entry for every named image (a merge takes a shared image's off
        # the totals by it): one cut would leave its counts in the totals twice after a merge
        if cut := [name for name in row_of if name not in entries][:3]:
            msg = f"field '{kind}.images' has no entry for the named image(s) {cut}; {RESTORE}"
            raise fail(msg)
        named = [name for name in entries if name in row_of]  # (keep_named left only these)
        m = len(named)
        slot = np.full(n, m, dtype=np.int64)  # row m: the images without entries
        slot[[row_of[name] for name in named]] = np.arange(m, dtype=np.int64)
        s, g, p, c = slot[rows.image], rows.gt, rows.pred, rows.count
        valid = g < k
        if kind == "boundary":  # (m + 1, 3, K): per image, per bound, per class
            limit = np.zeros((m + 1, 3, k), dtype=np.int64)
            for row, (sel, col) in enumerate(((valid & (g == p), g), (valid, g),
                                              (valid & (p < k), p))):  # fmt: skip
                np.add.at(limit, (s[sel], row, col[sel]), c[sel])
            total = e.boundary_total
            named_rows = np.stack([entries[name] for name in named]) if m else limit[:0]
        else:  # (m + 1, 1, 1): category false positives within void predictions
            limit = np.zeros((m + 1, 1, 1), dtype=np.int64)
            sel = valid & (p == k)
            np.add.at(limit, (s[sel], 0, 0), c[sel])
            total = e.category_fp.sum(keepdims=True)[:, None]
            named_rows = (np.stack([entries[name].sum(keepdims=True)[:, None] for name in named])
                          if m else limit[:0])  # fmt: skip
        # the totals' share beyond the entries (exact: the entries add up to at most the totals)
        have = np.concatenate([named_rows, (total - named_rows.sum(axis=0))[None]])
        if (over := np.argwhere(have > limit)).size:
            j, row, cls = (int(v) for v in over[0])
            _refuse(kind, named[j] if j < m else None, int(have[j, row, cls]),
                    int(limit[j, row, cls]), row, classes[cls])  # fmt: skip


_BOUNDS = (("intersections |G_d & P_d|", "true positives"),
           ("ground-truth boundaries |G_d|", "ground-truth pixels"),
           ("predicted boundaries |P_d|", "pixels predicted so at valid ground truth"))  # fmt: skip


def _refuse(kind: str, image: str | None, got: int, limit: int, row: int, cls: str) -> None:
    """Refuse one image's (or the rest's) count beyond its limit."""
    where = (
        f"field '{kind}.images' gives image {image!r}"
        if image is not None
        else f"field '{kind}{'.counts' if kind == 'boundary' else '.category_fp'}' leaves the "
        "images without per-image entries"
    )
    if kind == "instances":
        msg = (
            f"{where} {got:,} category false positives, more than their {limit:,} void "
            f"predictions at valid ground truth; {RESTORE}"
        )
    else:
        what, of = _BOUNDS[row]
        msg = f"{where} {got:,} {what} of class {cls!r}, more than their {limit:,} {of}; {RESTORE}"
    raise fail(msg)


def _whole_floats(x: Any) -> Any:
    """``x`` with every float of an integral value as an int (``x`` itself if there is none).

    A JSON tool may write the float ``1.0`` (a Boundary IoU ratio, the only float a state
    holds) back as ``1``: the same number. Lists of ints or strings (the counts) are not walked.
    """
    if isinstance(x, float):
        return int(x) if x.is_integer() else x
    if isinstance(x, dict):
        out = {k: _whole_floats(v) for k, v in x.items()}
        return x if all(out[k] is v for k, v in x.items()) else out
    if isinstance(x, list) and x and not isinstance(x[0], (int, str)):
        items = [_whole_floats(v) for v in x]
        return x if all(a is b for a, b in zip(items, x, strict=True)) else items
    return x


def _canonical(d: Mapping[str, Any]) -> tuple[str, bool]:
    """Return the canonical JSON of a state's fields but ``writer``, and whether it is theirs.

    Canonical: sorted keys, no spaces, whole floats as ints; theirs: no float was made an int.
    """
    body = {k: v for k, v in d.items() if k != "writer"}
    whole = _whole_floats(body)
    return json.dumps(whole, sort_keys=True, separators=(",", ":"), allow_nan=False), whole is body


def digest(d: Mapping[str, Any]) -> str:
    """Return the SHA-256 of a state's canonical JSON (see :func:`sealed`), ``writer`` left out.

    Raises
    ------
    TypeError, ValueError
        A field JSON cannot hold (NaN, infinity, an object of another type).
    """
    return hashlib.sha256(_canonical(d)[0].encode("ascii")).hexdigest()


def sealed(d: Mapping[str, Any]) -> str:
    """Return the JSON text of a state (from :func:`dump`), its SHA-256 in ``writer.sha256``.

    What :meth:`segiou.ConfusionMatrix.save` writes: any change to the file afterwards (a
    damaged disk or copy, a hand edit) is refused when it is loaded. The digest is that of
    the fields but ``writer`` as JSON with sorted keys and no spaces (floats of an integral
    value as ints), the same text the file holds after ``writer``: the state is encoded once.
    It sits in ``writer``, which earlier segiou versions read without checking: states they
    wrote (no digest) load as before, and they load these.
    """
    text, same = _canonical(d)
    writer = {**d.get("writer", {}), "sha256": hashlib.sha256(text.encode("ascii")).hexdigest()}
    if not same:  # (a whole float such as a ratio of 1.0: written as it is)
        return json.dumps({**d, "writer": writer}, separators=(",", ":"))
    return '{"writer":' + json.dumps(writer, separators=(",", ":")) + "," + text[1:]


def check_digest(d: Mapping[str, Any]) -> None:
    """Refuse a state whose content no longer matches the digest its writer recorded."""
    w = d.get("writer")
    if not isinstance(w, Mapping) or "sha256" not in w:
        return  # written without one (to_dict, or an earlier segiou)
    try:
        same = w["sha256"] == digest(d)
        why = ""
    except (TypeError, ValueError) as err:  # a value segiou never writes (NaN, ...)
        same, why = False, f"; it holds a value no state holds ({err})"
    if not same:
        msg = (
            "the state was changed after segiou wrote it: its content no longer matches the "
            f"SHA-256 recorded in field 'writer'{why} (damaged on disk or in a copy, or edited "
            "by hand). Restore the file from a copy or count the images again; a state edited "
            "on purpose loads once 'sha256' is removed from 'writer' (every invariant is then "
            "still checked)"
        )
        raise fail(msg)
