"""Averaging conventions, and named presets that reproduce well-known tools.

The tools of the field agree on per-class IoU where a class has ground truth, and disagree on
classes in neither mask, classes only predicted, and which classes a mean runs over. A
:class:`Convention` makes each of those rules explicit; every :class:`~segiou.results.Result`
echoes the one it used. Counting rules (ignore values, void predictions, unexpected values)
are set on the accumulator and echoed too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from segiou._typing import FloatArray
from segiou.errors import UnknownNameError, UsageError
from segiou.metrics import MeanOver

__all__ = ["PRESETS", "RULE_FIELDS", "Convention", "get_convention", "stated_rules"]

#: The rules a convention sets, as :func:`stated_rules` reads them from an echo: which classes
#: means run over, what the others are reported as, and how F-beta is computed.
RULE_FIELDS = {
    "mean_over": "which classes means run over",
    "fill": "what a class outside them is reported as",
    "fbeta_from_pr": "whether F-beta is computed from precision and recall",
}


@dataclass(frozen=True)
class Convention:
    """How per-class scores are reported and averaged.

    Parameters
    ----------
    name : str
        Preset name, echoed in results.
    mean_over : {"present", "gt", "all"}
        Classes a mean runs over: ``present`` = TP+FP+FN > 0; ``gt`` = classes with
        ground-truth pixels; ``all`` = every class, classes in neither mask scoring 0.
    fill : float
        Per-class value reported for classes outside ``mean_over`` (``nan`` = undefined).
    description : str
        One line: which tool and call this reproduces.
    differences : tuple of str
        What the tool does that segiou does not reproduce, or does differently.
    fbeta_from_pr : bool
        F-beta is computed from per-class precision and recall, ``(1+b^2) P R / (b^2 P + R)``,
        so it is undefined (``nan``) for a class without true positives, and means leave that
        class out (mmsegmentation's mFscore). Otherwise such a class scores 0 (when it is in
        either mask) and counts.
    stated_rules : tuple of str, optional
        The rules in words as a result document states them (a convention read back from a
        document of another segiou version keeps its own words); ``None``: made from the
        fields above.
    """

    name: str
    mean_over: MeanOver
    fill: float
    description: str
    differences: tuple[str, ...] = ()
    fbeta_from_pr: bool = False
    stated_rules: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.mean_over not in ("present", "gt", "all"):
            msg = (
                f"convention {self.name!r}: mean_over={self.mean_over!r} is unknown; expected "
                "'present', 'gt' or 'all'"
            )
            raise UsageError(msg)

    def rules(self) -> list[str]:
        """Return the rules of this convention in words (echoed in reports)."""
        if self.stated_rules is not None:
            return list(self.stated_rules)
        over = {
            "present": "means run over classes present in ground truth or prediction "
            "(TP+FP+FN > 0); a class in neither is left out",
            "gt": "means run over classes with ground-truth pixels; a class only predicted "
            "is left out",
            "all": "means run over every class; a class in neither mask scores 0",
        }[self.mean_over]
        fill = "nan (undefined)" if math.isnan(self.fill) else repr(self.fill)
        fbeta = (
            "F-beta is (1+b^2)PR/(b^2P+R) from per-class precision and recall: undefined (nan) "
            "for a class without true positives, which means leave out"
            if self.fbeta_from_pr
            else "F-beta is (1+b^2)TP/((1+b^2)TP+b^2FN+FP): 0 for a class in either mask without "
            "true positives"
        )
        accuracy = (
            "mean accuracy (mean recall) runs over the classes with ground-truth pixels in "
            "every preset: a class without ground truth has no recall"
            + (f" (its recall, reported as {fill}, is left out)" if self.mean_over == "all" else "")
        )
        return [
            over,
            f"per-class scores outside the averaged classes are reported as {fill}",
            (
                "a class only predicted scores IoU 0 and is included in means"
                if self.mean_over != "gt"
                else f"a class only predicted (no ground truth) is left out of means and "
                f"reported as {fill}"
            ),
            fbeta,
            accuracy,
            "ratios are computed once from the summed counts of the whole dataset",
        ]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Convention:
        """Rebuild a convention from its echo in a result document (:meth:`to_dict`).

        Parameters
        ----------
        d : mapping
            The document's ``convention`` object.

        Returns
        -------
        Convention
            The preset of that name when the echo is the preset's own; else a convention with
            the echo's fields that keeps its words (a document of another segiou version).

        Raises
        ------
        KeyError, TypeError, ValueError
            The echo lacks ``name``, ``mean_over``, ``fill``, ``description`` or
            ``differences`` (a hand-made document), or they are malformed.
        """
        try:
            preset = get_convention(d["name"])
        except UnknownNameError:
            preset = None
        if preset is not None and preset.to_dict() == d:
            return preset
        fill = math.nan if d["fill"] is None else float(d["fill"])
        rules = tuple(str(r) for r in d.get("rules", ()))
        # its own words are kept; F-beta from precision and recall is told by its rule
        # (documents state it), else by the preset of that name
        fbeta = [r for r in rules if r.startswith("F-beta is ")]
        from_pr = (fbeta[0].startswith("F-beta is (1+b^2)PR") if fbeta
                   else preset is not None and preset.fbeta_from_pr)  # fmt: skip
        return cls(d["name"], d["mean_over"], fill, d["description"], tuple(d["differences"]),
                   fbeta_from_pr=from_pr, stated_rules=rules)  # fmt: skip

    def averaged(self, tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
        """Return which classes the means run over (and are scored), from per-class counts.

        Parameters
        ----------
        tp, fp, fn : ndarray of int, shape (..., K)
            True positives, false positives and false negatives (void included) per class:
            of a whole run, or one row per image.

        Returns
        -------
        ndarray of bool, shape (..., K)
            ``present``: ``TP+FP+FN > 0``; ``gt``: ``TP+FN > 0``; ``all``: every class.

        Examples
        --------
        >>> z = np.array([1, 0, 0])
        >>> get_convention("detectron2").averaged(z, np.array([0, 2, 0]), z).tolist()
        [True, False, False]
        """
        tp, fp, fn = np.asarray(tp), np.asarray(fp), np.asarray(fn)
        if self.mean_over == "present":
            out: np.ndarray = (tp + fp + fn) > 0
        elif self.mean_over == "gt":
            out = (tp + fn) > 0
        else:
            out = np.ones(tp.shape, dtype=bool)
        return out

    def reported(
        self, scores: FloatArray, tp: np.ndarray, fp: np.ndarray, fn: np.ndarray
    ) -> FloatArray:
        """Return per-class scores as a result reports them under this convention.

        Parameters
        ----------
        scores : ndarray of float, shape (..., K)
            Per-class scores as the metrics compute them (``nan``: undefined).
        tp, fp, fn : ndarray of int, shape (..., K)
            The counts the scores came from (see :meth:`averaged`).

        Returns
        -------
        ndarray of float64, shape (..., K)
            The scores of the averaged classes (``all``: an undefined one is 0), ``fill``
            for the others.
        """
        out = np.array(scores, dtype=np.float64)
        if self.mean_over == "all":
            out[np.isnan(out)] = 0.0
        out[~self.averaged(tp, fp, fn)] = self.fill
        return out

    def mean(self, scores: FloatArray, tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> float:
        """Average per-class scores over the classes this convention averages.

        The one rule of a result's means (:func:`segiou.evaluate`) and of each image's mIoU
        in the per-image CSV and the reports; the same as :func:`segiou.metrics.mean` with
        ``over=mean_over``.

        Parameters
        ----------
        scores : ndarray of float, shape (K,)
            Per-class scores (``nan``: undefined).
        tp, fp, fn : ndarray of int, shape (K,)
            The counts the scores came from.

        Returns
        -------
        float
            ``nan`` when no class is averaged (an undefined score of an averaged class is left
            out; ``all``: it counts as 0).

        Examples
        --------
        >>> s, tp = np.array([0.5, 0.0, np.nan]), np.array([1, 0, 0])
        >>> fp, fn = np.array([0, 1, 0]), np.array([1, 0, 0])
        >>> [round(PRESETS[p].mean(s, tp, fp, fn), 4) for p in ("segiou", "detectron2",
        ...                                                      "sklearn_all_labels")]
        [0.25, 0.5, 0.1667]
        """
        s = np.asarray(scores, dtype=np.float64)
        if self.mean_over == "all":
            s = np.nan_to_num(s, nan=0.0)
        vals = s[self.averaged(tp, fp, fn)]
        vals = vals[~np.isnan(vals)]
        return float(vals.mean()) if vals.size else float("nan")

    def rule_values(self) -> dict[str, Any]:
        """Return the rules this convention sets (:data:`RULE_FIELDS`; a ``nan`` fill is ``None``).

        Returns
        -------
        dict
            ``mean_over``, ``fill`` and ``fbeta_from_pr``: equal for two conventions exactly
            when they score and average alike (their names and words aside).
        """
        return {"mean_over": self.mean_over,
                "fill": None if math.isnan(self.fill) else float(self.fill),
                "fbeta_from_pr": self.fbeta_from_pr}  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe echo of the convention."""
        return {
            "name": self.name,
            "mean_over": self.mean_over,
            "fill": None if math.isnan(self.fill) else self.fill,
            "description": self.description,
            "rules": self.rules(),
            "differences": list(self.differences),
        }


_NAN = float("nan")
_MMSEG_DIFF = (
    (
        "ground-truth values outside 0..K-1 other than the ignore index are dropped silently by "
        "torch.histc while the prediction there still counts as a false positive; segiou raises "
        "(or reports them with on_unexpected='count')"
    ),
    (
        "a predicted value outside 0..K-1 at valid ground truth is a false negative of the true "
        "class (the prediction is dropped, the ground truth kept); segiou counts a prediction "
        "that is an ignore value so (void, reported per class) but refuses any other value, or "
        "leaves the pixel out of every count with on_unexpected='count': to reproduce the "
        "numbers, map such predictions to an ignore value first (np.where(pred < K, pred, 255))"
    ),
)
_MMSEG_ONLY_DIFF = (
    (
        "IoUMetric reports percentages rounded to two decimals (np.round(x * 100, 2)); segiou "
        "reports unrounded fractions"
    ),
    (
        "IoUMetric sums the per-class areas in float32 (torch.histc), so totals above 2**24 "
        "pixels are rounded (relative error about 1e-7); segiou counts exactly in int64"
    ),
    "nan_to_num is not applied",
)
_ZERO_DIVISION_DIFF = (
    "mprecision leaves out a class with ground truth that is never predicted (precision 0/0); "
    "{tool} scores it zero_division (0) and includes it in the macro average"
)
_SKLEARN_IGNORE_DIFF = (
    "scikit-learn has no ignore value: a ground-truth pixel with an ignore value that is left "
    "in y_true still counts (its prediction is a false positive of the predicted class); "
    "segiou does not count it"
)

_ADE20K_DIFF = (
    "{option} (ADE20K) is the ade20k spec read with gt_ids='raw' for the annotations and "
    "pred_ids='class' for a model's outputs (0..149); pred_ids defaults to gt_ids, and outputs "
    "read as raw ids are one class off (0 becomes 'other', ignored)"
)

#: Named conventions; ``segiou`` is the default.
PRESETS: dict[str, Convention] = {
    c.name: c
    for c in [
        Convention(
            "segiou", "present", _NAN,
            "segiou's default: nan for classes in neither mask, left out of means; a class only "
            "predicted scores 0 and counts",
        ),
        Convention(
            "cityscapes", "present", _NAN,
            "cityscapesScripts evalPixelLevelSemanticLabeling: IoU and category IoU (classes "
            "merged), nan-skipping averages; predictions of non-evaluated labelIds are false "
            "negatives, never false positives",
            (("instance-weighted iIoU is computed when instance ids are given (instances=True, "
              "or *_gtFine_instanceIds.png beside the labelIds); as in cityscapesScripts, its "
              "category iIoU counts predictions of unevaluated ids of the category (caravan, "
              "trailer) as the category, which category IoU does not"),
             "cityscapesScripts evaluates predictions in labelIds: use pred_ids='raw'"),
        ),
        Convention(
            "mmseg", "present", _NAN,
            "mmsegmentation IoUMetric / mean_iou: aAcc, mIoU, mAcc, mDice, mFscore, mPrecision "
            "and mRecall (= mean_accuracy) with np.nanmean; mFscore leaves out classes without "
            "true positives (F from precision and recall is 0/0 there)",
            (*_MMSEG_DIFF, *_MMSEG_ONLY_DIFF,
             _ADE20K_DIFF.format(option="reduce_zero_label=True")),
            fbeta_from_pr=True,
        ),
        Convention(
            "hf_evaluate", "present", _NAN,
            "Hugging Face evaluate 'mean_iou' (a port of mmsegmentation's): mean_iou, "
            "mean_accuracy, overall_accuracy, per_category_iou",
            (*_MMSEG_DIFF, "nan_to_num is not applied",
             _ADE20K_DIFF.format(option="reduce_labels=True")),
        ),
        Convention(
            "detectron2", "gt", _NAN,
            "detectron2 SemSegEvaluator: mIoU, fwIoU, mACC, pACC over classes with ground truth; "
            "IoU of classes absent from the ground truth is nan, even if predicted",
            (("detectron2 counts predictions outside 0..K-1 into the wrong bins of its bincount; "
             "segiou treats them as void or unexpected"),
             ("with no ground-truth pixel at all (every pixel ignored) detectron2's fwIoU is 0 "
              "(a sum over no class) beside nan mIoU, mACC and pACC; segiou's fwIoU is nan "
              "too")),
        ),
        Convention(
            "torchmetrics", "present", 0.0,
            "torchmetrics MulticlassJaccardIndex: average='macro' leaves classes in neither "
            "mask out; average=None reports them as 0 (zero_division=0); 'micro' and 'weighted' "
            "are micro_iou and fwiou",
            (("torchmetrics' ignore_index inside 0..K-1 zeroes that class's weight; segiou "
             "requires ignore values outside the class range"),
             ("torchmetrics expects every prediction to be a class 0..K-1: a prediction outside "
              "the range raises an error or lands in a wrong bin of its bincount (depending on "
              "version and validate_args); segiou refuses it (or leaves the pixel out of every "
              "count with on_unexpected='count'), and counts a prediction that is an ignore value "
              "as void (a false negative)"),
             _ZERO_DIVISION_DIFF.format(tool="MulticlassPrecision(average='macro')"),
             ("MulticlassRecall / MulticlassAccuracy(average='macro') average over classes with "
              "TP+FP+FN > 0, a class only predicted scoring 0; segiou's mean_accuracy runs over "
              "classes with ground truth"),
             ("with no counted pixel at all, average='micro' gives 0 (its zero_division); "
              "segiou's micro_iou is nan")),
        ),
        Convention(
            "sklearn", "present", _NAN,
            "scikit-learn jaccard_score(y_true, y_pred, average='macro') with labels=None: only "
            "labels present in y_true or y_pred are scored",
            (("with labels=None scikit-learn scores every value found in y_true or y_pred: an "
              "ignore or void value left in the arrays (e.g. 255) becomes an extra label with "
              "its own IoU in the average; segiou scores only the evaluated classes. To "
              "compare, drop the ignored pixels, map void predictions to a value outside "
              "0..K-1 and pass labels=[the classes 0..K-1 present in either]"),
             _SKLEARN_IGNORE_DIFF,
             _ZERO_DIVISION_DIFF.format(tool="precision_score(average='macro')")),
        ),
        Convention(
            "sklearn_all_labels", "all", 0.0,
            "scikit-learn jaccard_score(..., labels=range(K), zero_division=0): every class "
            "averaged, classes in neither mask score 0",
            (_SKLEARN_IGNORE_DIFF,
             ("recall_score(labels=range(K), average='macro', zero_division=0) scores a class "
              "without ground truth 0 in the mean; segiou's mean_accuracy runs over classes "
              "with ground truth")),
        ),
        Convention(
            "keras", "present", _NAN,
            "Keras MeanIoU: mean over classes whose union is non-zero",
            (("with no counted pixel at all MeanIoU is 0 (divide_no_nan); segiou's miou is nan"),
             ("MeanIoU keeps its confusion matrix in float32 by default, so cells above 2**24 "
              "pixels are rounded; segiou counts exactly in int64")),
        ),
    ]
}  # fmt: skip


def get_convention(preset: str | Convention) -> Convention:
    """Return a convention by preset name (or pass one through).

    Parameters
    ----------
    preset : str or Convention
        A key of :data:`PRESETS` (``"segiou"``, ``"cityscapes"``, ``"mmseg"``, ...), or a
        :class:`Convention`, returned as it is. A custom convention may take a preset's name
        only with that preset's rules (:meth:`Convention.rule_values`): results echo the name,
        and a report named ``segiou`` must be scored as ``segiou`` scores.

    Returns
    -------
    Convention

    Raises
    ------
    UnknownNameError
        Unknown preset (also a ``KeyError``); the message lists the known ones.
    UsageError
        A custom convention named after a preset with other rules (the message names the
        first rule that differs).

    Examples
    --------
    >>> get_convention("detectron2").mean_over
    'gt'
    >>> get_convention(Convention("segiou", "all", 0.0, "mine"))
    Traceback (most recent call last):
    ...
    segiou.errors.UsageError: convention 'segiou' has a preset's name but not its rules ...
    """
    if isinstance(preset, Convention):
        same = PRESETS.get(preset.name)
        if same is not None and preset.rule_values() != same.rule_values():
            mine, theirs = preset.rule_values(), same.rule_values()
            field = next(f for f in RULE_FIELDS if mine[f] != theirs[f])
            msg = (
                f"convention {preset.name!r} has a preset's name but not its rules ({field}, "
                f"{RULE_FIELDS[field]}: {mine[field]!r} here, {theirs[field]!r} in preset "
                f"{preset.name!r}); results echo the name and reports are compared by their "
                "rules, so give a custom convention a name of its own (e.g. "
                f"'{preset.name}-{mine['mean_over']}'), or use the preset as it is"
            )
            raise UsageError(msg)
        return preset
    try:
        return PRESETS[preset]
    except KeyError:
        msg = f"unknown preset {preset!r}; expected one of {sorted(PRESETS)}"
        raise UnknownNameError(msg) from None


def stated_rules(echo: Mapping[str, Any]) -> dict[str, Any]:
    """Return the rules a result document's convention echo states (:data:`RULE_FIELDS`).

    Parameters
    ----------
    echo : mapping
        A document's ``convention`` object (:meth:`Convention.to_dict`).

    Returns
    -------
    dict
        ``mean_over`` and ``fill`` (``None``: ``nan``) as the echo gives them, and
        ``fbeta_from_pr`` from its F-beta rule in words. A field the echo lacks (a hand-made or
        older document) is the preset's of its name, or left out when the name is no preset's:
        it cannot be compared.

    Examples
    --------
    >>> stated_rules({"name": "detectron2"})["mean_over"]
    'gt'
    >>> stated_rules({"name": "mine", "mean_over": "all", "fill": 0.0})
    {'mean_over': 'all', 'fill': 0.0}
    """
    preset = PRESETS.get(str(echo.get("name")))
    out = dict(preset.rule_values()) if preset is not None else {}
    if "mean_over" in echo:
        out["mean_over"] = echo["mean_over"]
    if "fill" in echo:
        fill = echo["fill"]
        nan = fill is None or (isinstance(fill, float) and math.isnan(fill))
        out["fill"] = None if nan else fill
    rules = echo.get("rules")
    fbeta = [r for r in rules if isinstance(r, str) and r.startswith("F-beta is ")] if isinstance(
        rules, list | tuple) else []  # fmt: skip
    if fbeta:
        out["fbeta_from_pr"] = fbeta[0].startswith("F-beta is (1+b^2)PR")
    elif "rules" in echo:  # words without an F-beta rule (before it was stated): unknown
        out.pop("fbeta_from_pr", None)
    return out
