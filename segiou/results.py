"""Results: every metric of one accumulator under one named convention, with its rules echoed.

The JSON schema (``format = "segiou.result"``, ``version = 3``) is documented in the README;
``nan`` (undefined) is written as ``null``. Version 2 added two optional fields, ``intervals``
(bootstrap confidence intervals) and ``slices`` (every metric per metadata value), both ``null``
when not computed (:mod:`segiou.stats` computes them); version 3 adds ``boundary`` (Boundary
IoU), ``instances`` (iIoU) and ``absent_chunks``, ``null`` when not counted, and
``absent_pred_chunks`` (absent prediction chunks; documents written before have none). Readers
accept versions 1 to 3 (:data:`RESULT_VERSIONS`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from segiou import metrics as m
from segiou._typing import CountMatrix, FloatArray, IntArray
from segiou._version import __version__
from segiou.confusion import ConfusionMatrix
from segiou.conventions import Convention, get_convention
from segiou.errors import ResultDocumentError, UsageError
from segiou.images import ImageTable
from segiou.labels import LabelSpec

__all__ = [
    "BOUNDARY_AVERAGING",
    "INSTANCE_AVERAGING",
    "RESULT_FORMAT",
    "RESULT_VERSION",
    "RESULT_VERSIONS",
    "Result",
    "evaluate",
    "image_scores",
]

RESULT_FORMAT = "segiou.result"
#: The version :meth:`Result.to_dict` writes.
RESULT_VERSION = 3
#: The versions readers (:func:`segiou.compare.compare_reports`, the reports) accept.
RESULT_VERSIONS = (1, 2, 3)

#: How Boundary IoU is averaged, echoed as ``boundary.averaging`` (its own rule, whatever the
#: preset: see the README's metric table).
BOUNDARY_AVERAGING = (
    "boundary mIoU is the mean over the classes with a boundary pixel in the ground truth or the "
    "prediction (|G_d| + |P_d| > 0); a class with none is undefined (null) and left out, a class "
    "with boundary pixels only in the prediction scores 0 and counts; the preset's averaging "
    "(mean_over) and fill apply to mask IoU only, not to Boundary IoU"
)
#: How iIoU is averaged, echoed as ``instances.averaging`` (cityscapesScripts' rule).
INSTANCE_AVERAGING = (
    "mean iIoU is the mean over the classes with an instance size whose iIoU is defined "
    "(TPw + FNw + FP > 0), as in cityscapesScripts; a class without instance size, or with no "
    "instance and no false positive, is undefined (null) and left out; category mean iIoU "
    "likewise over the categories with iIoU; the preset's averaging (mean_over) and fill apply "
    "to mask IoU only, not to iIoU"
)

_PER_CLASS_SCORES = ("iou", "dice", "precision", "recall")
_COUNTS = ("tp", "fp", "fn", "void", "gt_pixels", "pred_pixels")


@dataclass(frozen=True)
class Result:
    """Metrics of one evaluation, with class names, counts and the convention used.

    Attributes
    ----------
    labels : str
        Name of the label spec.
    class_names : list of str
        Names of the evaluated classes; class ``i`` is ``class_names[i]``.
    convention : Convention
        The averaging rules (echoed by :meth:`to_dict` and by the reports).
    per_class : dict of str to ndarray
        ``iou``, ``dice``, ``precision``, ``recall`` (and ``fbeta`` when evaluated with
        ``beta``) (float) and ``tp``, ``fp``, ``fn``, ``void``, ``gt_pixels``, ``pred_pixels``
        (int), one entry per class.
    summary : dict of str to float
        ``miou``, ``fwiou``, ``micro_iou``, ``mdice``, ``mprecision``, ``pixel_accuracy``,
        ``mean_accuracy``, ``kappa`` (and ``mfbeta`` when evaluated with ``beta``,
        ``category_miou`` when the spec has categories).
    categories : dict or None
        ``names``, ``iou``, ``tp``, ``fp``, ``fn`` per category (Cityscapes style).
    pixels : dict
        ``total``, ``counted``, ``ignored``, ``void``, ``unexpected_gt``, ``unexpected_pred``.
    counting : dict
        The counting rules: id spaces, ignore values, unexpected-value policy, and
        ``raw_ids`` (the class index of each raw id) when masks held raw ids (empty for a bare
        count matrix).
    images : int
        Images counted (0 for a bare count matrix).
    batches : int
        Batch keys counted (0 for a bare count matrix).
    beta : float or None
        The β of ``fbeta``/``mfbeta`` (``None``: not evaluated).
    intervals : dict or None
        Bootstrap confidence intervals in the document's form (``method``, ``unit``,
        ``resamples``, ``level``, ``seed``, ``summary``, ``classes``, ``categories``; see the
        README), or ``None`` when not computed (:func:`segiou.stats.evaluate_with_intervals`).
    slices : dict or None
        Every metric per metadata value (``min_images``, ``columns``, ``unmatched``; see the
        README), or ``None`` when no slices were asked for.
    boundary : dict or None
        Boundary IoU (``None``: not counted): ``width`` (as asked: ``{"ratio": r}`` or
        ``{"pixels": n}``), ``pixels_used`` (the widths in pixels the images got), ``miou``,
        ``averaging`` (its averaging rule in words, :data:`BOUNDARY_AVERAGING`: its own, not
        the preset's), and per class ``iou``, ``intersection``, ``gt``, ``pred`` (boundary
        pixels).
    instances : dict or None
        Instance-level IoU (``None``: no instance ground truth): what
        :func:`segiou.quality.instance_iou` returns, plus ``average_size`` per class and
        ``averaging`` (:data:`INSTANCE_AVERAGING`: its own rule, not the preset's).
    absent_chunks : dict of str to int
        Ground-truth chunks absent from a Zarr store and read as the fill value, per image.
    absent_pred_chunks : dict of str to int
        Prediction chunks absent from a Zarr store and read as the fill value, per image (of
        the ground truth's names).
    """

    labels: str
    class_names: list[str]
    convention: Convention
    per_class: dict[str, np.ndarray]
    summary: dict[str, float]
    categories: dict[str, Any] | None
    pixels: dict[str, Any]
    counting: dict[str, Any] = field(default_factory=dict)
    images: int = 0
    batches: int = 0
    beta: float | None = None
    intervals: dict[str, Any] | None = None
    slices: dict[str, Any] | None = None
    # -- issue 13: Boundary IoU, iIoU, absent chunks (JSON: "boundary", "instances",
    # "absent_chunks"; see to_dict)
    boundary: dict[str, Any] | None = None
    instances: dict[str, Any] | None = None
    absent_chunks: dict[str, int] = field(default_factory=dict)
    absent_pred_chunks: dict[str, int] = field(default_factory=dict)

    @property
    def miou(self) -> float:
        """Mean IoU under the result's convention."""
        return self.summary["miou"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict in the documented, versioned schema (``nan`` -> ``None``).

        ``intervals`` and ``slices`` are written as they are held (already JSON-safe, undefined
        numbers as ``None``), or ``None`` when not computed.
        """
        classes = [
            {"id": i, "name": n}
            | {
                k: _num(self.per_class[k][i])
                for k in (*_PER_CLASS_SCORES, "fbeta", *_COUNTS)
                if k in self.per_class  # fbeta only when evaluated with beta
            }
            for i, n in enumerate(self.class_names)
        ]
        cats = None
        if self.categories is not None:
            c = self.categories
            cats = [
                {
                    "name": n,
                    "iou": _num(c["iou"][i]),
                    "tp": _num(c["tp"][i]),
                    "fp": _num(c["fp"][i]),
                    "fn": _num(c["fn"][i]),
                }
                | ({"classes": list(c["members"][i])} if "members" in c else {})
                for i, n in enumerate(c["names"])
            ]
        return {
            "format": RESULT_FORMAT,
            "version": RESULT_VERSION,
            "writer": {"segiou": __version__},
            "labels": self.labels,
            "convention": self.convention.to_dict(),
            "counting": self.counting,
            "summary": {k: _num(v) for k, v in self.summary.items()},
            "classes": classes,
            "categories": cats,
            "pixels": self.pixels,
            "images": self.images,
            "batches": self.batches,
            "beta": self.beta,
            "intervals": self.intervals,
            "slices": self.slices,
        } | self._quality_dict()

    def _quality_dict(self) -> dict[str, Any]:
        """Return the result fields of issue 13: ``boundary``, ``instances``, ``absent_chunks``."""
        names = self.class_names
        out: dict[str, Any] = {"boundary": None, "instances": None}
        for what, a in (("absent_chunks", self.absent_chunks),
                        ("absent_pred_chunks", self.absent_pred_chunks)):  # fmt: skip
            out[what] = {"total": sum(a.values()), "images": dict(a)}
        if (b := self.boundary) is not None:
            out["boundary"] = {
                "width": b["width"], "pixels_used": b["pixels_used"], "miou": _num(b["miou"]),
                "averaging": b.get("averaging", BOUNDARY_AVERAGING),
                "classes": [{"id": i, "name": n, "iou": _num(b["iou"][i])}
                            | {f: int(b[f][i]) for f in ("intersection", "gt", "pred")}
                            for i, n in enumerate(names)],
            }  # fmt: skip
        if (t := self.instances) is not None:
            cats = t.get("category_names") or []
            out["instances"] = {
                "miiou": _num(t["miiou"]), "category_miiou": _num(t["category_miiou"]),
                "averaging": t.get("averaging", INSTANCE_AVERAGING),
                "classes": [{"id": i, "name": n, "iiou": _num(t["iiou"][i]),
                             "average_size": t["average_size"].get(i),
                             "instances": int(t["instances"][i]),
                             "tp_weighted": _num(t["tp_weighted"][i]),
                             "fn_weighted": _num(t["fn_weighted"][i]), "fp": int(t["fp"][i])}
                            for i, n in enumerate(names)],
                "categories": [{"name": n, "iiou": _num(t["category_iiou"][j]),
                                "tp_weighted": _num(t["category_tp_weighted"][j]),
                                "fn_weighted": _num(t["category_fn_weighted"][j]),
                                "fp": int(t["category_fp"][j])} for j, n in enumerate(cats)],
            }  # fmt: skip
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Result:
        """Rebuild a result from its JSON document (schema version 1, 2 or 3).

        Parameters
        ----------
        d : mapping
            What :meth:`to_dict` wrote (e.g. read back from ``segiou eval --json``).

        Returns
        -------
        Result
            ``Result.from_dict(r.to_dict()).to_dict() == r.to_dict()``.

        Raises
        ------
        UsageError
            Not a ``segiou.result`` document of a version this segiou reads.
        """
        if (not isinstance(d, Mapping) or d.get("format") != RESULT_FORMAT
                or d.get("version") not in RESULT_VERSIONS):  # fmt: skip
            found = (d.get("format"), d.get("version")) if isinstance(d, Mapping) else type(d)
            msg = (
                f"not a segiou.result document of version {list(RESULT_VERSIONS)} (found {found!r})"
            )
            raise UsageError(msg)
        conv = Convention.from_dict(d["convention"])
        classes = d["classes"]
        scores = [
            k for k in ("iou", "dice", "precision", "recall", "fbeta")
            if classes and k in classes[0]
        ]  # fmt: skip
        per_class = {k: _floats(x[k] for x in classes) for k in scores}
        for k in ("tp", "fp", "fn", "void", "gt_pixels", "pred_pixels"):
            per_class[k] = np.array([x[k] for x in classes], dtype=np.int64)
        cats = None
        if d.get("categories") is not None:
            cs = d["categories"]
            cats = {"names": [x["name"] for x in cs], "iou": _floats(x["iou"] for x in cs)}
            cats |= {k: np.array([x[k] for x in cs], dtype=np.int64) for k in ("tp", "fp", "fn")}
            if cs and all("classes" in x for x in cs):  # (the class ids of each: since 0.3)
                cats["members"] = [[int(i) for i in x["classes"]] for x in cs]
        summary = {k: math.nan if v is None else float(v) for k, v in d["summary"].items()}
        return cls(labels=d["labels"], class_names=[x["name"] for x in classes],
                   convention=conv, per_class=per_class, summary=summary, categories=cats,
                   pixels=d["pixels"], counting=d["counting"], images=d["images"],
                   batches=d["batches"], beta=d["beta"], intervals=d.get("intervals"),
                   slices=d.get("slices"), **_quality_from_dict(d))  # fmt: skip

    def to_json(self, indent: int | None = 2) -> str:
        """Return the :meth:`to_dict` document as strict JSON text.

        Parameters
        ----------
        indent : int or None, default 2
            Indentation of the JSON text (as for :func:`json.dumps`); ``None`` writes one line.

        Returns
        -------
        str
            Strict JSON: undefined scores are ``null``, never ``NaN``.
        """
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


def _quality_from_dict(d: Mapping[str, Any]) -> dict[str, Any]:
    """Invert :meth:`Result._quality_dict` (documents without these fields give the defaults)."""
    out: dict[str, Any] = {}
    for what in ("absent_chunks", "absent_pred_chunks"):
        if (a := d.get(what)) is not None:
            images = a.get("images") if isinstance(a, Mapping) else None
            if not isinstance(images, Mapping) or not all(
                type(c) is int and c >= 0 for c in images.values()
            ):
                msg = (
                    f"field {what!r} is {str(a)[:60]!r}; expected {{'total': n, 'images': "
                    "{name: chunks}}} with counts; write the document again with segiou"
                )
                raise ResultDocumentError(msg)
            out[what] = {str(n): c for n, c in images.items()}
    if (b := d.get("boundary")) is not None:
        cs = b["classes"]
        out["boundary"] = {"width": b["width"], "pixels_used": list(b["pixels_used"]),
                           "miou": math.nan if b["miou"] is None else float(b["miou"]),
                           "iou": _floats(c["iou"] for c in cs),
                           "averaging": str(b.get("averaging", BOUNDARY_AVERAGING))}  # fmt: skip
        out["boundary"] |= {f: np.array([c[f] for c in cs], dtype=np.int64)
                            for f in ("intersection", "gt", "pred")}  # fmt: skip
    if (t := d.get("instances")) is not None:
        cs, cats = t["classes"], t.get("categories") or []
        out["instances"] = {
            "miiou": math.nan if t["miiou"] is None else float(t["miiou"]),
            "category_miiou": math.nan if t["category_miiou"] is None else float(
                t["category_miiou"]),
            "averaging": str(t.get("averaging", INSTANCE_AVERAGING)),
            "iiou": _floats(c["iiou"] for c in cs),
            "average_size": {c["id"]: float(c["average_size"]) for c in cs
                             if c["average_size"] is not None},
            "instances": np.array([c["instances"] for c in cs], dtype=np.int64),
            "tp_weighted": _floats(c["tp_weighted"] for c in cs),
            "fn_weighted": _floats(c["fn_weighted"] for c in cs),
            "fp": np.array([c["fp"] for c in cs], dtype=np.int64),
            "category_names": [c["name"] for c in cats],
            "category_iiou": _floats(c["iiou"] for c in cats),
            "category_tp_weighted": _floats(c["tp_weighted"] for c in cats),
            "category_fn_weighted": _floats(c["fn_weighted"] for c in cats),
            "category_fp": np.array([c["fp"] for c in cats], dtype=np.int64),
        }  # fmt: skip
    return out


def _floats(values: Iterable[Any]) -> np.ndarray:
    return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)


def _num(x: Any) -> float | int | None:
    if isinstance(x, np.integer | int):
        return int(x)
    f = float(x)
    return None if math.isnan(f) else f


def _ignore_rule(spec: LabelSpec, gt_ids: str) -> str:
    """Say in words which ground-truth values are ignored, naming every one."""
    what = [f"an ignore value {list(spec.ignore)}"] if spec.ignore else []
    if gt_ids == "raw" and (skipped := sorted(r.id for r in spec.raw if r.cls is None)):
        what.append(f"a raw id the spec does not evaluate {skipped}")
    if not what:
        return "no ground-truth value is ignored"
    return f"ground-truth pixels with {' or '.join(what)} are not counted, whatever was predicted"


#: What became of unexpected values, per ``on_unexpected`` (beside ``void_rule``, which covers
#: ignore values and unevaluated raw ids only).
_UNEXPECTED_RULES = {
    "raise": "a ground-truth value that is neither a class nor ignored, or a prediction that is "
    "neither a class nor void, is refused (nothing of its batch is counted)",
    "count": "a ground-truth value that is neither a class nor ignored, or a prediction that is "
    "neither a class nor void at a valid ground-truth pixel, leaves its pixel out of every count "
    "and score; such pixels are reported per value (pixels.unexpected_gt/unexpected_pred)",
}


def _raw_ids(spec: LabelSpec, gt_ids: str, pred_ids: str) -> dict[str, Any]:
    """``{"raw_ids": {raw id: class index or None}}`` when masks held raw ids, else ``{}``.

    The mapping the pixels went through, so that a result says it (a spec file edited under its
    name maps otherwise); ``None``: a raw id the spec evaluates as no class.
    """
    if not spec.raw or "raw" not in (gt_ids, pred_ids):
        return {}
    return {"raw_ids": {str(r.id): r.cls for r in sorted(spec.raw, key=lambda r: r.id)}}


def evaluate(
    source: ConfusionMatrix | CountMatrix,
    *,
    preset: str | Convention = "segiou",
    void: IntArray | None = None,
    spec: LabelSpec | str | None = None,
    beta: float | None = None,
) -> Result:
    """Compute every metric from summed counts under a named convention.

    Parameters
    ----------
    source : ConfusionMatrix or ndarray of int, shape (K, K)
        An accumulator, or a bare count matrix ``cm[gt, pred]``.
    preset : str or Convention
        ``"segiou"`` (default), ``"cityscapes"``, ``"mmseg"``, ``"hf_evaluate"``,
        ``"detectron2"``, ``"torchmetrics"``, ``"sklearn"``, ``"sklearn_all_labels"``,
        ``"keras"``; see :data:`segiou.conventions.PRESETS`.
    void : ndarray of int, shape (K,), optional
        Void predictions per class, for a bare count matrix.
    spec : LabelSpec or str, optional
        Class names and categories, for a bare count matrix (default: classes named
        ``"0".."K-1"``): a spec, a built-in name or a spec file. An accumulator carries its
        own spec.
    beta : float, optional
        Also report per-class F-beta (``fbeta``) and its mean (``mfbeta``).

    Returns
    -------
    Result

    Raises
    ------
    UsageError
        ``spec`` does not have one class per row of the count matrix, or differs from the spec
        of the accumulator given as ``source``.

    Notes
    -----
    Per-class scores: ``IoU = TP/(TP+FP+FN)``, ``Dice = 2TP/(2TP+FP+FN)``,
    ``precision = TP/(TP+FP)``, ``recall = TP/(TP+FN)``. Means follow ``preset`` (see
    :class:`~segiou.conventions.Convention`); ``mean_accuracy`` always runs over classes with
    ground truth, as in every tool.

    Examples
    --------
    >>> r = evaluate(np.array([[1, 1], [1, 1]]))
    >>> round(r.miou, 4), r.convention.name
    (0.3333, 'segiou')
    """
    if beta is not None and not (math.isfinite(beta) and beta > 0):
        msg = f"evaluate: beta={beta!r} must be a positive finite number (1 gives F1)"
        raise UsageError(msg)
    conv = get_convention(preset)
    if isinstance(spec, str):
        from segiou.labels import load_spec

        spec = load_spec(spec)
    extra: dict[str, Any] = {}
    if isinstance(source, ConfusionMatrix):
        if spec is not None and spec != source.spec:
            msg = (
                f"evaluate: spec {spec.name!r} was given, but the accumulator carries its own "
                f"spec {source.spec.name!r}, which differs; leave spec out (it is for a bare "
                "count matrix)"
            )
            raise UsageError(msg)
        if void is not None:
            msg = (
                "evaluate: void was given, but the accumulator carries its own void counts; "
                "leave void out (it is for a bare count matrix)"
            )
            raise UsageError(msg)
        cm, v, spec = source.counts, source.void, source.spec
        pixels = {
            "total": source.n_pixels,
            "counted": int(cm.sum()),
            "void": int(v.sum()),
            "ignored": source.n_ignored,
            "unexpected_gt": {str(k): c for k, c in sorted(source.unexpected_gt.items())},
            "unexpected_pred": {str(k): c for k, c in sorted(source.unexpected_pred.items())},
        }
        extra = {
            "counting": {
                "gt_ids": source.gt_ids,
                "pred_ids": source.pred_ids,
                "ignore": list(source.spec.ignore),
                "on_unexpected": source.on_unexpected,
                "void_rule": "a prediction that maps to no class at a valid ground-truth pixel "
                "is a false negative of the true class, never a false positive",
                "ignore_rule": _ignore_rule(source.spec, source.gt_ids),
                "unexpected_rule": _UNEXPECTED_RULES[source.on_unexpected],
            }
            | _raw_ids(source.spec, source.gt_ids, source.pred_ids),
            "images": source.n_images,
            "batches": len(source.keys),
        }
    else:
        cm = np.asarray(source)
        m.tp_fp_fn(cm, void=void)  # checks the shapes of the matrix and of void first
        k = cm.shape[0]
        v = np.zeros(k, dtype=np.int64) if void is None else np.asarray(void)
        if spec is None:
            spec = LabelSpec.from_num_classes(k)
        elif spec.num_classes != k:
            msg = (
                f"evaluate: label spec {spec.name!r} has {spec.num_classes} classes but the count "
                f"matrix is {k} x {k}; pass the spec the matrix was counted with (one class per "
                "row), or no spec: classes are then named 0..K-1"
            )
            raise UsageError(msg)
        pixels = {"total": int(cm.sum() + v.sum()), "counted": int(cm.sum()), "void": int(v.sum()),
                  "ignored": 0, "unexpected_gt": {}, "unexpected_pred": {}}  # fmt: skip
    tp, fp, fn = m.tp_fp_fn(cm, void=v)
    raw = {
        "iou": m.iou(cm, void=v),
        "dice": m.dice(cm, void=v),
        "precision": m.precision(cm, void=v),
        "recall": m.recall(cm, void=v),
    }
    if beta is not None:
        raw["fbeta"] = m.fbeta(cm, beta, void=v, from_precision_recall=conv.fbeta_from_pr)
    # the convention's one rule for reported scores and means (each image's row in the
    # per-image CSV and the reports goes through it too: image_scores)
    per_class: dict[str, np.ndarray] = {k: conv.reported(s, tp, fp, fn) for k, s in raw.items()}
    per_class |= {"tp": tp, "fp": fp, "fn": fn, "void": v.astype(np.int64),
                  "gt_pixels": tp + fn, "pred_pixels": tp + fp}  # fmt: skip
    summary = {
        "miou": conv.mean(raw["iou"], tp, fp, fn),
        "fwiou": m.fw_iou(cm, void=v),
        "micro_iou": m.micro_iou(cm, void=v),
        "mdice": conv.mean(raw["dice"], tp, fp, fn),
        "mprecision": conv.mean(raw["precision"], tp, fp, fn),
        "pixel_accuracy": m.pixel_accuracy(cm, void=v),
        "mean_accuracy": m.mean_accuracy(cm, void=v),
        "kappa": m.cohen_kappa(cm, void=v),
    }
    if beta is not None:
        summary["mfbeta"] = conv.mean(raw["fbeta"], tp, fp, fn)
    categories = None
    if spec.categories:
        ccm, cv = m.category_counts(cm, spec.category_matrix(), void=v)
        ctp, cfp, cfn = m.tp_fp_fn(ccm, void=cv)
        craw = m.iou(ccm, void=cv)
        members = [[i for i, g in enumerate(spec.class_categories) if g == j]
                   for j in range(len(spec.categories))]  # fmt: skip
        categories = {"names": list(spec.categories), "iou": conv.reported(craw, ctp, cfp, cfn),
                      "tp": ctp, "fp": cfp, "fn": cfn, "members": members}  # fmt: skip
        summary["category_miou"] = conv.mean(craw, ctp, cfp, cfn)
    quality = _quality(source, spec, cm) if isinstance(source, ConfusionMatrix) else {}
    return Result(
        labels=spec.name,
        class_names=list(spec.classes),
        convention=conv,
        per_class=per_class,
        summary=summary,
        categories=categories,
        pixels=pixels,
        beta=beta,
        **extra,
        **quality,
    )


def image_scores(
    source: ConfusionMatrix | ImageTable, *, preset: str | Convention = "segiou"
) -> tuple[FloatArray, FloatArray]:
    """Each image's per-class IoU and mIoU under a convention, as :func:`evaluate` scores a run.

    Each image's counts go through the rules :func:`evaluate` applies to the whole run's
    (:meth:`Convention.reported` and :meth:`Convention.mean`): under ``detectron2`` a class only
    predicted in an image is left out of its mIoU and reported as ``nan``; under
    ``sklearn_all_labels`` the mean runs over every class. An image's mIoU describes that
    image; dataset scores are never averages of these.

    Parameters
    ----------
    source : ConfusionMatrix or ImageTable
        Counts with per-image rows (``per_image=True``), or their rows (``cm.images``).
    preset : str or Convention, default "segiou"
        The convention (the result's: see :data:`segiou.conventions.PRESETS`); a
        :class:`Convention` is applied as it is (e.g. one read back from a document).

    Returns
    -------
    iou : ndarray of float64, shape (n_images, K)
        Per-class IoU of each image as a result reports it (``nan``: undefined).
    miou : ndarray of float64, shape (n_images,)
        Each image's mIoU (``nan``: no class averaged).

    Raises
    ------
    UsageError
        ``source`` has no per-image rows, or ``preset`` is unknown.

    Examples
    --------
    >>> cm = ConfusionMatrix(3, per_image=True)
    >>> _ = cm.update(np.array([[0, 0, 1, 1]]), np.array([[0, 2, 1, 1]]), names=["a"])
    >>> [image_scores(cm, preset=p)[1].tolist() for p in ("segiou", "detectron2")]
    [[0.5], [0.75]]
    """
    conv = preset if isinstance(preset, Convention) else get_convention(preset)
    t = source if isinstance(source, ImageTable) else source.images
    raw = t.iou()
    miou = np.array([conv.mean(raw[i], t.tp[i], t.fp[i], t.fn[i]) for i in range(len(t.names))],
                    dtype=np.float64)  # fmt: skip
    return conv.reported(raw, t.tp, t.fp, t.fn), miou


def _quality(cm: ConfusionMatrix, spec: LabelSpec, counts: CountMatrix) -> dict[str, Any]:
    """Boundary IoU, iIoU and absent chunks of an accumulator (issue 13)."""
    from segiou import quality as q
    from segiou._instances import instance_categories

    e = cm.extras
    out: dict[str, Any] = {
        "absent_chunks": dict(sorted(e.absent.items())),
        "absent_pred_chunks": dict(sorted(e.absent_pred.items())),
    }
    if e.boundary is not None:
        b = e.boundary_total
        scores = q.boundary_iou(b)
        out["boundary"] = {"width": e.boundary.to_dict(), "pixels_used": sorted(e.boundary_px),
                           "iou": scores, "intersection": b[0], "gt": b[1], "pred": b[2],
                           "miou": q.nanmean(scores), "averaging": BOUNDARY_AVERAGING}  # fmt: skip
    if e.instances:
        r = e.instance_records()
        t = q.instance_iou(counts, sizes=spec.instance_sizes, cls=r.cls, pixels=r.pixels,
                           tp=r.tp, cat_tp=r.cat_tp, class_categories=spec.class_categories,
                           instance_categories=instance_categories(spec),
                           category_fp=e.category_fp)  # fmt: skip
        out["instances"] = t | {"average_size": dict(spec.instance_sizes),
                                "category_names": list(spec.categories),
                                "averaging": INSTANCE_AVERAGING}  # fmt: skip
    return out
