"""The shared view of a result document (``segiou.result``, versions 1 to 3), read once.

A document gives a report its scores, intervals and slices (the state's part is in
:mod:`segiou.report.view`). Renderers (:mod:`~segiou.report.html`,
:mod:`~segiou.report.markdown`, :mod:`~segiou.report.text`, :mod:`~segiou.report.plots`) read
these objects, never the raw dict. Nothing here computes a statistic: scores and intervals are
the document's (which :func:`segiou.evaluate` and the bootstrap wrote). A document is user
input (a file): every field a renderer reads is checked here, naming the field that is wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from segiou.errors import ResultDocumentError

__all__ = [
    "HINT",
    "SUMMARY_LABELS",
    "CategoryRow",
    "ClassRow",
    "Interval",
    "Intervals",
    "Pixels",
    "ResultDoc",
    "SliceValue",
    "Slices",
    "few_units_warning",
    "fmt_ci",
    "fmt_pct",
    "printable",
    "slice_classes",
    "slice_metrics",
    "summary_label",
]

#: Result document versions the reports read (``segiou.result``).
READABLE_VERSIONS = (1, 2, 3)
#: How a summary metric is named in reports, in the order reports list them.
SUMMARY_LABELS = {
    "miou": "mIoU",
    "fwiou": "fwIoU",
    "micro_iou": "micro IoU",
    "mdice": "mean Dice",
    "mprecision": "mean precision",
    "pixel_accuracy": "pixel accuracy",
    "mean_accuracy": "mean accuracy",
    "kappa": "Cohen's kappa",
    "category_miou": "category mIoU",
    "mfbeta": "mean F-beta",
}
#: A confidence interval ``(lo, hi)``, or ``None`` where the document has none.
Interval = tuple[float, float] | None
HINT = (
    "pass a result written by segiou (Result.to_json(), segiou eval --json) or a saved state "
    "(ConfusionMatrix.save, segiou eval --state)"
)


def printable(text: object) -> str:
    """Return a user-given name with every control character shown as its escape.

    Names come from files and stores: an ANSI escape or a newline printed raw would rewrite a
    terminal or break a table (an ESC byte is shown as a backslash, then x1b).

    Parameters
    ----------
    text : object
        A class, category or image name.

    Returns
    -------
    str
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def fmt_pct(x: float | None, digits: int = 2) -> str:
    """Format a ratio as percent (``0.1234`` -> ``"12.34"``); ``"-"`` when undefined.

    A ratio that is not exactly 1 (or 0, or -1) never shows as ``100.00`` (or ``0.00``,
    ``-100.00``): rounding would make it look perfect (or null), so it is shown as a bound with
    the same digits, ``">99.99"`` (``"<0.01"``, ``">-0.01"``, ``"<-99.99"``). Exact values are in
    the JSON document and the CSV files.

    Parameters
    ----------
    x : float or None
        A ratio in [-1, 1] (or ``None``/``nan``: undefined).
    digits : int, default 2
        Decimals.

    Returns
    -------
    str

    Examples
    --------
    >>> fmt_pct(0.123456), fmt_pct(None), fmt_pct(1.0), fmt_pct(0.99999), fmt_pct(0.000001)
    ('12.35', '-', '100.00', '>99.99', '<0.01')
    >>> fmt_pct(1.5), fmt_pct(-1.00001)  # out of range (a hand-edited document): as it is
    ('150.00', '-100.00')
    """
    if x is None or math.isnan(x):
        return "-"
    shown = f"{100 * x:.{digits}f}"
    step = 10.0**-digits
    if abs(float(shown)) >= 100 and abs(x) < 1:  # rounded up to a perfect score
        return f">{100 - step:.{digits}f}" if x > 0 else f"<{step - 100:.{digits}f}"
    if float(shown) == 0 and x != 0:  # rounded down to nothing
        return f"<{step:.{digits}f}" if x > 0 else f">{-step:.{digits}f}"
    return shown


def fmt_ci(iv: Interval, digits: int = 2) -> str:
    """Format an interval in percent (``"[10.10, 14.50]"``); ``""`` when there is none.

    The ends are written in brackets with a comma, so a negative end (Cohen's kappa) cannot be
    read as a dash: ``"[-29.80, -20.55]"``.

    Parameters
    ----------
    iv : (float, float) or None
        The interval's ends, as ratios.
    digits : int, default 2
        Decimals.

    Returns
    -------
    str

    Examples
    --------
    >>> fmt_ci((0.101, 0.145)), fmt_ci((-0.298, -0.2055)), fmt_ci(None)
    ('[10.10, 14.50]', '[-29.80, -20.55]', '')
    """
    if iv is None:
        return ""
    return f"[{fmt_pct(iv[0], digits)}, {fmt_pct(iv[1], digits)}]"


#: Resampled units below which reports warn that percentile intervals come out too narrow.
FEW_UNITS = 30


def few_units_warning(units: int | None, unit: str) -> str | None:
    """Warn that percentile intervals over fewer than :data:`FEW_UNITS` units undercover.

    Parameters
    ----------
    units : int or None
        Images (or groups) resampled; ``None``: not stated (documents written before it).
    unit : str
        ``"image"`` or ``"group:<column>"``.

    Returns
    -------
    str or None
        The warning (without a ``warning:`` prefix), or ``None`` from 30 units on (and at one,
        where there is no interval to warn about: the document's note says why).
    """
    if units is None or not 2 <= units < FEW_UNITS:
        return None
    word = "images" if unit == "image" else "groups"
    return (
        f"only {units:,} {word} resampled: percentile intervals come out too narrow with few "
        f"{word} (in a simulation, 95% intervals of mIoU covered the true value in 70% of data "
        "sets of 8 images, 84% of 15, 88% of 30 and 91% of 100)"
    )


def summary_label(key: str, beta: float | None = None) -> str:
    """Name a summary metric for people (``"miou"`` -> ``"mIoU"``; unknown keys as they are).

    Parameters
    ----------
    key : str
        The metric's key in the document's ``summary``.
    beta : float, optional
        The document's β, named with ``mfbeta``.

    Returns
    -------
    str
    """
    label = SUMMARY_LABELS.get(key, key)
    return f"{label} (beta={beta:g})" if key == "mfbeta" and beta is not None else label


class _Check:
    """Read fields of a JSON document, refusing a wrong type by naming the field and the file."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field: str, found: object, expected: str) -> NoReturn:
        shown = json.dumps(found)[:60] if _jsonable(found) else type(found).__name__
        msg = f"{self.where}: field {field!r} is {shown}, expected {expected}; {HINT}"
        raise ResultDocumentError(msg)

    def obj(self, value: object, field: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.fail(field, value, "an object")
        return value

    def seq(self, value: object, field: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(field, value, "a list")
        return value

    def text(self, value: object, field: str) -> str:
        if not isinstance(value, str):
            self.fail(field, value, "a string")
        return value

    def num(self, value: object, field: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isinf(value):
            self.fail(field, value, "a finite number or null")
        return None if math.isnan(value) else float(value)

    def count(self, value: object, field: str, *, null: bool = False) -> int | None:
        if value is None and null:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(field, value, "an integer >= 0" + (" or null" if null else ""))
        return value

    def interval(self, value: object, field: str) -> Interval:
        if value is None:
            return None
        if not isinstance(value, list) or len(value) != 2:
            self.fail(field, value, "[lo, hi] or null")
        lo, hi = self.num(value[0], f"{field}[0]"), self.num(value[1], f"{field}[1]")
        if lo is None or hi is None:
            return None  # an interval of an undefined score
        if lo > hi:
            self.fail(field, value, "[lo, hi] with lo <= hi")
        return lo, hi

    def intervals_list(self, value: object, field: str, n: int) -> list[Interval]:
        items = self.seq(value, field)
        if len(items) != n:
            self.fail(field, f"a list of {len(items)}", f"one entry per row ({n})")
        return [self.interval(v, f"{field}[{i}]") for i, v in enumerate(items)]


def _jsonable(x: object) -> bool:
    try:
        json.dumps(x)
    except (TypeError, ValueError):
        return False
    return True


@dataclass(frozen=True)
class Intervals:
    """Confidence intervals of a result (schema version 2 and later), as the document states them.

    Attributes
    ----------
    method, unit : str
        E.g. ``"percentile bootstrap"`` over ``"image"`` (or ``"group:<column>"``).
    resamples : int or None
    level : float or None
        E.g. 0.95.
    seed : int or None
    summary : dict of str to Interval
        Per summary metric.
    classes : list of Interval
        Per-class IoU, one per class.
    categories : list of Interval or None
        Per-category IoU.
    units : int or None
        Images (or groups) resampled (``None`` in documents written before it).
    note : str or None
        Why some intervals are undefined although their scores are not (a single unit).
    """

    method: str
    unit: str
    resamples: int | None
    level: float | None
    seed: int | None
    summary: dict[str, Interval]
    classes: list[Interval]
    categories: list[Interval] | None
    units: int | None = None
    note: str | None = None

    @classmethod
    def read(cls, value: object, field: str, n_classes: int, n_cats: int | None,
             check: _Check) -> Intervals:  # fmt: skip
        """Read the ``intervals`` object of a document (see the module docstring)."""
        d = check.obj(value, field)
        summary = {
            str(k): check.interval(v, f"{field}.summary.{k}")
            for k, v in check.obj(d.get("summary", {}), f"{field}.summary").items()
        }
        cl = check.obj(d.get("classes", {"iou": [None] * n_classes}), f"{field}.classes")
        classes = check.intervals_list(cl.get("iou"), f"{field}.classes.iou", n_classes)
        cats = None
        if d.get("categories") is not None and n_cats is not None:
            cd = check.obj(d["categories"], f"{field}.categories")
            cats = check.intervals_list(cd.get("iou"), f"{field}.categories.iou", n_cats)
        level = check.num(d.get("level"), f"{field}.level")
        if level is not None and not 0 < level < 1:
            check.fail(f"{field}.level", d.get("level"), "a number between 0 and 1 (e.g. 0.95)")
        return cls(
            method=check.text(d.get("method", "bootstrap"), f"{field}.method"),
            unit=check.text(d.get("unit", "image"), f"{field}.unit"),
            resamples=check.count(d.get("resamples"), f"{field}.resamples", null=True),
            level=level,
            seed=None if d.get("seed") is None else check.count(d["seed"], f"{field}.seed"),
            summary=summary,
            classes=classes,
            categories=cats,
            units=check.count(d.get("units"), f"{field}.units", null=True),
            note=None if d.get("note") is None else check.text(d["note"], f"{field}.note"),
        )

    def few_units(self) -> str | None:
        """Return the warning of :func:`few_units_warning` for these intervals, or ``None``."""
        return few_units_warning(self.units, self.unit)

    @property
    def level_label(self) -> str:
        """``"95% CI"`` (or ``"CI"`` when the level is not stated)."""
        return "CI" if self.level is None else f"{100 * self.level:g}% CI"

    def describe(self) -> str:
        """Say in words how the intervals were made."""
        if self.unit.startswith("group:"):
            unit = f"resampling groups of images sharing a value of {self.unit[6:]!r}"
        else:
            unit = f"resampling {self.unit}s" if self.unit == "image" else f"unit {self.unit!r}"
        parts = [f"{self.level_label}: {self.method}, {unit}"]
        if self.resamples is not None:
            parts.append(f"{self.resamples:,} resamples")
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        return ", ".join(parts)


@dataclass(frozen=True)
class ClassRow:
    """One class of a result document (``None``: undefined or not in the document)."""

    id: int
    name: str
    iou: float | None
    dice: float | None
    precision: float | None
    recall: float | None
    fbeta: float | None
    tp: int | None
    fp: int | None
    fn: int | None
    void: int | None
    gt_pixels: int | None
    pred_pixels: int | None
    iou_ci: Interval = None


@dataclass(frozen=True)
class CategoryRow:
    """One category (classes merged, Cityscapes style) of a result document."""

    name: str
    iou: float | None
    tp: int | None
    fp: int | None
    fn: int | None
    iou_ci: Interval = None


@dataclass(frozen=True)
class Pixels:
    """Where every pixel went: counted, void, ignored, unexpected (per value)."""

    total: int
    counted: int
    void: int
    ignored: int
    unexpected_gt: dict[str, int]
    unexpected_pred: dict[str, int]

    @property
    def unexpected(self) -> int:
        """Pixels with an unexpected value, either side."""
        return sum(self.unexpected_gt.values()) + sum(self.unexpected_pred.values())


@dataclass(frozen=True)
class SliceValue:
    """The metrics of the images sharing one value of a metadata column (schema version 2 and later)."""

    value: str
    images: int
    small: bool
    summary: dict[str, float | None]
    class_iou: list[tuple[str, float | None]]
    intervals: Intervals | None

    def iou_of(self, name: str) -> float | None:
        """Return the IoU of class ``name`` in this slice (``None``: undefined or not listed)."""
        return next((iou for n, iou in self.class_iou if n == name), None)

    def ci_of(self, key: str) -> Interval:
        """Return the interval of summary metric ``key`` in this slice (``None``: none)."""
        return None if self.intervals is None else self.intervals.summary.get(key)

    def iou_ci_of(self, name: str) -> Interval:
        """Return the interval of class ``name``'s IoU in this slice (``None``: none)."""
        if self.intervals is None:
            return None
        i = next((i for i, (n, _) in enumerate(self.class_iou) if n == name), None)
        return None if i is None else self.intervals.classes[i]


def slice_metrics(values: list[SliceValue]) -> list[str]:
    """List the summary metrics any of a column's slices has, in the reports' order.

    Parameters
    ----------
    values : list of SliceValue
        The slices of one column.

    Returns
    -------
    list of str
    """
    seen = {k for v in values for k in v.summary}
    return [k for k in SUMMARY_LABELS if k in seen] + sorted(seen - set(SUMMARY_LABELS))


def slice_classes(values: list[SliceValue]) -> list[str]:
    """List the class names any of a column's slices has, in first-seen order.

    Parameters
    ----------
    values : list of SliceValue
        The slices of one column.

    Returns
    -------
    list of str
    """
    names: dict[str, None] = {}
    for v in values:
        names.update((n, None) for n, _ in v.class_iou)
    return list(names)


@dataclass(frozen=True)
class Slices:
    """Slice tables of a result (schema version 2 and later), with the images that did not match."""

    min_images: int | None
    columns: dict[str, list[SliceValue]]
    images_without_metadata: list[str]
    metadata_without_image: list[str]


def _read_slices(value: object, check: _Check) -> Slices:
    d = check.obj(value, "slices")
    columns: dict[str, list[SliceValue]] = {}
    for col, values in check.obj(d.get("columns", {}), "slices.columns").items():
        rows = []
        for val, entry in check.obj(values, f"slices.columns.{col}").items():
            f = f"slices.columns.{col}.{val}"
            e = check.obj(entry, f)
            classes = [check.obj(c, f"{f}.classes[{i}]")
                       for i, c in enumerate(check.seq(e.get("classes", []), f"{f}.classes"))]  # fmt: skip
            class_iou = [
                (check.text(c.get("name", str(c.get("id", i))), f"{f}.classes[{i}].name"),
                 check.num(c.get("iou"), f"{f}.classes[{i}].iou"))
                for i, c in enumerate(classes)
            ]  # fmt: skip
            small = e.get("small", False)
            if not isinstance(small, bool):
                check.fail(f"{f}.small", small, "true or false")
            summary = {check.text(k, f"{f}.summary (a key)"): check.num(v, f"{f}.summary.{k}")
                       for k, v in check.obj(e.get("summary", {}), f"{f}.summary").items()}  # fmt: skip
            ivs = e.get("intervals")
            intervals = (
                None if ivs is None
                else Intervals.read(ivs, f"{f}.intervals", len(class_iou), None, check)
            )  # fmt: skip
            rows.append(SliceValue(str(val), check.count(e.get("images"), f"{f}.images") or 0,
                                   small, summary, class_iou, intervals))  # fmt: skip
        columns[str(col)] = rows
    un = check.obj(d.get("unmatched") or {}, "slices.unmatched")

    def names(key: str) -> list[str]:
        return [check.text(n, f"slices.unmatched.{key}[{i}]")
                for i, n in enumerate(check.seq(un.get(key, []), f"slices.unmatched.{key}"))]  # fmt: skip

    return Slices(
        min_images=check.count(d.get("min_images"), "slices.min_images", null=True),
        columns=columns,
        images_without_metadata=names("images_without_metadata"),
        metadata_without_image=names("metadata_without_image"),
    )


@dataclass(frozen=True)
class ResultDoc:
    """A result document (``segiou.result``, version 1, 2 or 3), checked field by field.

    Build with :meth:`read`; renderers read the attributes, never the raw dict. ``data`` keeps
    the document as given (the ``json`` report format writes it back).
    """

    version: int
    writer: str
    labels: str
    convention: Mapping[str, Any]
    counting: Mapping[str, Any]
    summary: dict[str, float | None]
    classes: list[ClassRow]
    categories: list[CategoryRow] | None
    pixels: Pixels
    images: int
    batches: int
    beta: float | None
    intervals: Intervals | None
    slices: Slices | None
    data: Mapping[str, Any]

    @classmethod
    def read(cls, data: object, *, where: str = "result document") -> ResultDoc:
        """Check a result document and build its view.

        Parameters
        ----------
        data : dict
            What :meth:`segiou.Result.to_dict` wrote (or ``json.load`` of its JSON).
        where : str
            How to name the document in messages (e.g. the file).

        Returns
        -------
        ResultDoc

        Raises
        ------
        ResultDocumentError
            Another format, a version other than 1, 2 or 3, or a field of the wrong type (the
            message names the field).
        """
        check = _Check(where)
        d = check.obj(data, "(document)")
        if d.get("format") != "segiou.result":
            check.fail("format", d.get("format"), "'segiou.result'")
        version = d.get("version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            check.fail("version", version, f"one of {list(READABLE_VERSIONS)}")
        conv = check.obj(d.get("convention"), "convention")
        for key in ("name", "description"):
            check.text(conv.get(key, ""), f"convention.{key}")
        for key in ("rules", "differences"):
            for i, r in enumerate(check.seq(conv.get(key, []), f"convention.{key}")):
                check.text(r, f"convention.{key}[{i}]")
        summary = {check.text(k, "summary (a key)"): check.num(v, f"summary.{k}")
                   for k, v in check.obj(d.get("summary"), "summary").items()}  # fmt: skip
        raw_classes = check.seq(d.get("classes"), "classes")
        raw_cats = d.get("categories")
        cats_list = None if raw_cats is None else check.seq(raw_cats, "categories")
        ivs = None
        if d.get("intervals") is not None:
            n_cats = None if cats_list is None else len(cats_list)
            ivs = Intervals.read(d["intervals"], "intervals", len(raw_classes), n_cats, check)
        classes = [
            _class_row(check.obj(c, f"classes[{i}]"), i, check,
                       None if ivs is None else ivs.classes[i])
            for i, c in enumerate(raw_classes)
        ]  # fmt: skip
        cats = None
        if cats_list is not None:
            cats = []
            for i, entry in enumerate(cats_list):
                f = f"categories[{i}]"
                c = check.obj(entry, f)
                tp, fp, fn = (
                    check.count(c.get(k), f"{f}.{k}", null=True) for k in ("tp", "fp", "fn")
                )
                cats.append(CategoryRow(
                    check.text(c.get("name"), f"{f}.name"), check.num(c.get("iou"), f"{f}.iou"),
                    tp, fp, fn,
                    iou_ci=None if ivs is None or ivs.categories is None else ivs.categories[i],
                ))  # fmt: skip
        px = check.obj(d.get("pixels"), "pixels")

        def per_value(key: str) -> dict[str, int]:
            return {str(k): check.count(v, f"pixels.{key}.{k}") or 0
                    for k, v in check.obj(px.get(key, {}), f"pixels.{key}").items()}  # fmt: skip

        total, counted, void, ignored = (check.count(px.get(k, 0), f"pixels.{k}") or 0
                                         for k in ("total", "counted", "void", "ignored"))  # fmt: skip
        pixels = Pixels(total, counted, void, ignored, per_value("unexpected_gt"),
                        per_value("unexpected_pred"))  # fmt: skip
        writer = d.get("writer") or {}
        return cls(
            version=int(version),
            writer=str(writer.get("segiou", "?")) if isinstance(writer, Mapping) else "?",
            labels=check.text(d.get("labels", "?"), "labels"),
            convention=conv,
            counting=check.obj(d.get("counting") or {}, "counting"),
            summary=summary,
            classes=classes,
            categories=cats,
            pixels=pixels,
            images=check.count(d.get("images", 0), "images") or 0,
            batches=check.count(d.get("batches", 0), "batches") or 0,
            beta=check.num(d.get("beta"), "beta"),
            intervals=ivs,
            slices=None if d.get("slices") is None else _read_slices(d["slices"], check),
            data=d,
        )

    @property
    def miou(self) -> float | None:
        """The document's mIoU (``None``: undefined)."""
        return self.summary.get("miou")

    @property
    def preset(self) -> str:
        """The convention's name."""
        return str(self.convention.get("name", "?"))

    @property
    def has_fbeta(self) -> bool:
        """Whether the classes carry F-beta (evaluated with ``beta``)."""
        return any(c.fbeta is not None for c in self.classes) or "mfbeta" in self.summary

    def summary_rows(self) -> list[tuple[str, str, float | None, Interval]]:
        """``(key, label, value, interval)`` per summary metric, in the reports' order."""
        keys = [k for k in SUMMARY_LABELS if k in self.summary]
        keys += [k for k in self.summary if k not in SUMMARY_LABELS]
        ivs = self.intervals.summary if self.intervals is not None else {}
        return [(k, summary_label(k, self.beta), self.summary[k], ivs.get(k)) for k in keys]

    def counting_rules(self) -> list[tuple[str, str]]:
        """``(rule, text)`` pairs: the preset, its rules, the counting rules, in words."""
        c, conv = self.counting, self.convention
        rules = [("preset", f"{self.preset}: {conv.get('description', '')}".rstrip(": "))]
        rules += [("averaging", str(r)) for r in conv.get("rules", [])]
        if not c:
            rules.append(("counting", "not recorded (the result came from a bare count matrix)"))
            return rules
        if "gt_ids" in c:
            ids = f"ground truth {c.get('gt_ids')}, predictions {c.get('pred_ids')}"
            rules.append(("id spaces", ids))
        unexpected = "unexpected_rule" if c.get("unexpected_rule") is not None else "on_unexpected"
        for key, name in (("ignore_rule", "ignored"), ("void_rule", "void"),
                          (unexpected, "unexpected values")):  # fmt: skip
            if c.get(key) is not None:
                rules.append((name, str(c[key])))
        if isinstance(raw := c.get("raw_ids"), Mapping) and raw:
            mapped = [f"{r} is {k}" for r, k in raw.items() if k is not None]
            none = [str(r) for r, k in raw.items() if k is None]
            text = f"the class index of each raw id: {', '.join(mapped) or 'none'}"
            rules.append(("raw ids", text + (f"; no class: {', '.join(none)}" if none else "")))
        return rules


def _class_row(c: Mapping[str, Any], i: int, check: _Check, ci: Interval) -> ClassRow:
    f = f"classes[{i}]"
    iou, dice, precision, recall, fbeta = (
        check.num(c.get(k), f"{f}.{k}") for k in ("iou", "dice", "precision", "recall", "fbeta")
    )
    tp, fp, fn, void, gt_pixels, pred_pixels = (
        check.count(c.get(k), f"{f}.{k}", null=True)
        for k in ("tp", "fp", "fn", "void", "gt_pixels", "pred_pixels")
    )
    return ClassRow(
        check.count(c.get("id", i), f"{f}.id") or 0, check.text(c.get("name"), f"{f}.name"),
        iou, dice, precision, recall, fbeta, tp, fp, fn, void, gt_pixels, pred_pixels, ci,
    )  # fmt: skip
