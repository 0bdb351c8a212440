"""Slices: every metric per metadata value (city, weather, camera), with intervals.

Metadata maps image names to columns of values. Each value of each column is a slice: its
images' entries summed give its metrics exactly, and a bootstrap within the slice its intervals.
Images without metadata and metadata rows without an image are listed, never dropped.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from segiou._jsontext import loads
from segiou.conventions import Convention
from segiou.errors import UsageError
from segiou.images import ImageRows
from segiou.labels import LabelSpec
from segiou.results import evaluate
from segiou.stats._bootstrap import bootstrap

__all__ = ["Metadata", "read_metadata", "slice_results"]

#: The column of a metadata CSV (or key of a JSON record) that names the image.
IMAGE_COLUMN = "image"


@dataclass(frozen=True)
class Metadata:
    """Image name -> column -> value (strings), read from a CSV or JSON file.

    Attributes
    ----------
    columns : tuple of str
        The metadata columns (not the image column).
    values : dict of str to dict of str to str
        Per image, its value in each column (an empty cell is the value ``""``, a slice of its
        own).
    source : str
        Where the metadata came from, for messages.
    """

    columns: tuple[str, ...]
    values: dict[str, dict[str, str]]
    source: str = "metadata"

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], source: str = "metadata") -> Metadata:
        """Build metadata from ``{image: {column: value}}``.

        Parameters
        ----------
        mapping : mapping of str to mapping of str to value
            Values are strings, numbers, booleans or ``None`` (read as ``""``); a column missing
            from an image's record is ``""`` for that image.
        source : str
            For messages.

        Returns
        -------
        Metadata

        Raises
        ------
        UsageError
            A record that is not an object, or a value that is a list or an object.
        """
        columns: dict[str, None] = {}
        for name, record in mapping.items():
            if not isinstance(record, Mapping):
                msg = (
                    f"{source}: the record of image {name!r} is {type(record).__name__}; "
                    "expected an object of column -> value"
                )
                raise UsageError(msg)
            columns.update(dict.fromkeys(str(c) for c in record))
        columns.pop(IMAGE_COLUMN, None)
        values = {
            str(name): {c: _text(record.get(c), source, str(name), c) for c in columns}
            for name, record in mapping.items()
        }
        if not columns:
            msg = f"{source}: no metadata column besides {IMAGE_COLUMN!r}; nothing to slice by"
            raise UsageError(msg)
        return cls(tuple(columns), values, source)


def _text(value: Any, source: str, image: str, column: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    msg = (
        f"{source}: image {image!r} column {column!r} holds {type(value).__name__} "
        f"{str(value)[:40]!r}; a slice value must be a string or a number"
    )
    raise UsageError(msg)


def read_metadata(path: str | os.PathLike[str]) -> Metadata:
    """Read image metadata from a CSV file (with a header) or a JSON file.

    Parameters
    ----------
    path : str or os.PathLike
        ``.csv``: a header row with a column ``image`` (the image names, as segiou names them)
        and one column per attribute; ``.json``: ``{"<image>": {"<column>": value, ...}, ...}``
        or a list of records ``[{"image": "<image>", "<column>": value, ...}, ...]``.

    Returns
    -------
    Metadata

    Raises
    ------
    UsageError
        An unreadable file, another suffix, no ``image`` column, an image listed twice, a row
        with another number of cells than the header, or values that are lists or objects.
    """
    p = Path(path)
    where = str(p)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        msg = f"metadata {where!r} cannot be read ({err}); give a CSV or JSON file"
        raise UsageError(msg) from err
    suffix = p.suffix.lower()
    if suffix == ".csv":
        return _from_csv(text, where)
    if suffix == ".json":
        try:
            data = loads(text)
        except ValueError as err:
            msg = f"metadata {where!r} is not valid JSON: {err}"
            raise UsageError(msg) from err
        return _from_json(data, where)
    msg = f"metadata {where!r}: suffix {p.suffix!r} is neither .csv nor .json"
    raise UsageError(msg)


def _from_csv(text: str, where: str) -> Metadata:
    reader = csv.reader(io.StringIO(text, newline=""))  # a quoted cell may hold line breaks
    lines, rows = [], []
    for row in reader:
        rows.append(row)
        lines.append(reader.line_num)
    if not rows:
        msg = f"metadata {where!r} is empty; expected a header row with an {IMAGE_COLUMN!r} column"
        raise UsageError(msg)
    header = [h.strip() for h in rows[0]]
    if IMAGE_COLUMN not in header:
        msg = (
            f"metadata {where!r}: the header {header[:8]} has no {IMAGE_COLUMN!r} column; name "
            "the column of image names 'image'"
        )
        raise UsageError(msg)
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        msg = f"metadata {where!r}: column(s) {dup} repeat in the header"
        raise UsageError(msg)
    at = header.index(IMAGE_COLUMN)
    records: dict[str, dict[str, str]] = {}
    for line, row in zip(lines[1:], rows[1:], strict=True):
        if not row:
            continue  # a blank line
        if len(row) != len(header):
            msg = f"metadata {where!r} line {line}: {len(row)} cell(s) for {len(header)} columns"
            raise UsageError(msg)
        name = row[at]
        if name in records:
            msg = f"metadata {where!r} line {line}: image {name!r} is listed twice"
            raise UsageError(msg)
        records[name] = {h: v for h, v in zip(header, row, strict=True) if h != IMAGE_COLUMN}
    return Metadata.from_mapping(records, f"metadata {where!r}")


def _from_json(data: Any, where: str) -> Metadata:
    if isinstance(data, list):
        records: dict[str, Any] = {}
        for i, rec in enumerate(data):
            if not isinstance(rec, dict) or not isinstance(rec.get(IMAGE_COLUMN), str):
                msg = (
                    f"metadata {where!r} record {i}: expected an object with a string "
                    f"{IMAGE_COLUMN!r} field"
                )
                raise UsageError(msg)
            if rec[IMAGE_COLUMN] in records:
                msg = f"metadata {where!r} record {i}: image {rec[IMAGE_COLUMN]!r} is listed twice"
                raise UsageError(msg)
            records[rec[IMAGE_COLUMN]] = rec
        return Metadata.from_mapping(records, f"metadata {where!r}")
    if isinstance(data, dict):
        return Metadata.from_mapping(data, f"metadata {where!r}")
    msg = (
        f"metadata {where!r} holds a JSON {type(data).__name__}; expected an object "
        "{image: {column: value}} or a list of records with an 'image' field"
    )
    raise UsageError(msg)


def match_images(names: Sequence[str], meta: Metadata) -> dict[str, list[str]]:
    """Return the images without metadata and the metadata rows without an image.

    Raises
    ------
    UsageError
        Image names repeat in the state (labels of keyless merges): metadata cannot tell them
        apart.
    """
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})[:3]
        msg = (
            f"image names {dup} repeat in the state (labels of merged keyless updates), so "
            f"{meta.source} cannot name one image; count with names= to slice"
        )
        raise UsageError(msg)
    have = set(names)
    return {
        "images_without_metadata": [n for n in names if n not in meta.values],
        "metadata_without_image": sorted(n for n in meta.values if n not in have),
    }


def groups_of(names: Sequence[str], meta: Metadata, column: str) -> list[str]:
    """Each image's value in ``column``, for a group bootstrap.

    Raises
    ------
    UsageError
        ``column`` is not a metadata column, or some images have no value in it (they could
        belong to any group: listed).
    """
    if column not in meta.columns:
        msg = (
            f"bootstrap groups: column {column!r} is not in {meta.source} (columns: "
            f"{list(meta.columns)})"
        )
        raise UsageError(msg)
    lacking = [n for n in names if not meta.values.get(n, {}).get(column)]
    if lacking:
        msg = (
            f"bootstrap groups: {len(lacking)} image(s) have no {column!r} value in "
            f"{meta.source}, e.g. {lacking[:5]}; every image needs its group (give each "
            "ungrouped image a value of its own)"
        )
        raise UsageError(msg)
    return [meta.values[n][column] for n in names]


def slice_results(
    rows: ImageRows,
    spec: LabelSpec,
    meta: Metadata,
    *,
    preset: str | Convention = "segiou",
    beta: float | None = None,
    min_images: int = 30,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    group_column: str | None = None,
) -> dict[str, Any]:
    """Every metric per value of every metadata column, with bootstrap intervals.

    Parameters
    ----------
    rows : ImageRows
        Per-image entries (not legacy).
    spec : LabelSpec
        The label spec they were counted with.
    meta : Metadata
        Image name -> column -> value.
    preset, beta
        As for :func:`segiou.evaluate`.
    min_images : int, default 30
        Slices with fewer images are flagged ``small`` (their intervals are shown but are
        unreliable).
    resamples, seed, level
        Bootstrap within each slice (``resamples=0``: no intervals).
    group_column : str, optional
        Resample groups of this metadata column within each slice instead of images.

    Returns
    -------
    dict
        ``{"min_images", "columns": {column: {value: {"images", "small", "summary",
        "classes", "intervals"}}}, "unmatched": {"images_without_metadata",
        "metadata_without_image"}}`` (the result document's ``slices``).

    Raises
    ------
    UsageError
        Repeated image names, ``min_images`` below 1, or a group column some images lack.
    """
    if isinstance(min_images, bool) or not isinstance(min_images, int) or min_images < 1:
        msg = f"min_images={min_images!r} must be an integer >= 1"
        raise UsageError(msg)
    names = list(rows.names)
    unmatched = match_images(names, meta)
    groups = groups_of(names, meta, group_column) if group_column is not None else None
    columns: dict[str, dict[str, Any]] = {}
    for column in meta.columns:
        by_value: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            if name in meta.values:
                by_value.setdefault(meta.values[name][column], []).append(i)
        columns[column] = {
            value: _one_slice(rows, spec, idx, preset=preset, beta=beta, min_images=min_images,
                              resamples=resamples, seed=seed, level=level, groups=groups,
                              group_column=group_column)
            for value, idx in sorted(by_value.items())
        }  # fmt: skip
    return {"min_images": min_images, "columns": columns, "unmatched": unmatched}


def _one_slice(
    rows: ImageRows,
    spec: LabelSpec,
    idx: list[int],
    *,
    preset: str | Convention,
    beta: float | None,
    min_images: int,
    resamples: int,
    seed: int,
    level: float,
    groups: list[str] | None,
    group_column: str | None,
) -> dict[str, Any]:
    t = rows.totals(idx)
    doc = evaluate(t["counts"], void=t["void"], spec=spec, preset=preset, beta=beta).to_dict()
    intervals = None
    if resamples:
        sub = rows.select(np.asarray(idx, dtype=np.int64))
        b = bootstrap(sub, spec=spec, preset=preset, resamples=resamples, seed=seed,
                      groups=None if groups is None else [groups[i] for i in idx],
                      group_name=group_column or "group")  # fmt: skip
        intervals = b.intervals(level, categories=bool(spec.categories))
    return {
        "images": len(idx),
        "small": len(idx) < min_images,
        "summary": doc["summary"],
        "classes": [{"id": c["id"], "name": c["name"], "iou": c["iou"]} for c in doc["classes"]],
        "intervals": intervals,
    }
