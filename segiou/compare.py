"""Compare a result with a baseline report: what regressed, by how much. No counting.

Used by ``pipelines/nightly_eval.py``; both sides are JSON reports (``segiou.result`` versions 1
to 3). The paired bootstrap gate, which needs each image's counts, is
:func:`segiou.stats.compare_states`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any, NoReturn

from segiou.conventions import RULE_FIELDS, stated_rules
from segiou.errors import CheckpointError
from segiou.results import RESULT_FORMAT, RESULT_VERSIONS

__all__ = [
    "Comparison",
    "check_comparable",
    "check_report",
    "compare_reports",
    "ground_truth_difference",
]


@dataclass(frozen=True)
class Comparison:
    """Differences between a report and its baseline.

    Attributes
    ----------
    summary : dict of str to (baseline, current, delta)
        Every summary metric present in both.
    classes : dict of str to (baseline, current, delta)
        Per-class IoU of classes scored in both.
    regressions : list of str
        One line per drop beyond its tolerance, per guarded metric or class that has a score
        in the baseline and none now, per class with more of its ground-truth pixels predicted
        as an unexpected value now (same ground truth only), and one when more predicted
        pixels have an unexpected value now; empty when nothing regressed.
    unexpected_pred : (int, int) or None
        Predicted pixels with an unexpected value (left out of every score) in the baseline
        and now; ``None`` when a report does not say (one written by hand).
    """

    summary: dict[str, tuple[float, float, float]]
    classes: dict[str, tuple[float, float, float]]
    regressions: list[str] = field(default_factory=list)
    unexpected_pred: tuple[int, int] | None = None

    @property
    def regressed(self) -> bool:
        """Whether anything dropped beyond its tolerance."""
        return bool(self.regressions)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "regressed": self.regressed,
            "regressions": self.regressions,
            "summary": {
                k: dict(zip(("baseline", "current", "delta"), v, strict=True))
                for k, v in self.summary.items()
            },
            "classes": {
                k: dict(zip(("baseline", "current", "delta"), v, strict=True))
                for k, v in self.classes.items()
            },
            "unexpected_pred": None
            if self.unexpected_pred is None
            else dict(zip(("baseline", "current"), self.unexpected_pred, strict=True)),
        }


def check_report(report: object, name: str = "report") -> None:
    """Refuse what is not a segiou result report that :func:`compare_reports` can read.

    Parameters
    ----------
    report : object
        A parsed JSON document.
    name : str, default "report"
        How to name it in messages.

    Raises
    ------
    CheckpointError
        Not a ``segiou.result`` of versions 1 to 3, or its ``summary``, ``classes`` or
        ``convention`` are not what such a report holds (a damaged or hand-edited file).
    """
    _check(report, name)
    assert isinstance(report, dict)
    summary, classes, conv = (report.get(k) for k in ("summary", "classes", "convention"))

    def number(x: object) -> bool:
        return x is None or (isinstance(x, int | float) and not isinstance(x, bool)
                             and math.isfinite(x))  # fmt: skip

    if not (isinstance(summary, dict) and all(number(v) for v in summary.values())
            and isinstance(classes, list)
            and all(isinstance(c, dict) and isinstance(c.get("name"), str) and number(c.get("iou"))
                    for c in classes)
            and isinstance(conv, dict) and isinstance(conv.get("name"), str)):  # fmt: skip
        msg = (
            f"{name} is damaged: its summary, classes or convention are not those of a segiou "
            "result (numbers or null, named classes)"
        )
        raise CheckpointError(msg)


def _check(report: object, name: str) -> None:
    if not isinstance(report, dict):
        msg = f"{name} is not a segiou result report (a JSON object); got {type(report).__name__}"
        raise CheckpointError(msg)
    if report.get("format") != RESULT_FORMAT:
        msg = f"{name} is not a segiou result report (format {report.get('format')!r})"
        raise CheckpointError(msg)
    version = report.get("version")
    if isinstance(version, bool) or version not in RESULT_VERSIONS:
        msg = (
            f"{name} has report version {version!r}; this segiou reads versions "
            f"{', '.join(map(str, RESULT_VERSIONS))}"
        )
        raise CheckpointError(msg)


def check_comparable(current: dict[str, Any], baseline: dict[str, Any]) -> None:
    """Refuse two reports whose scores cannot be compared, whatever their test sets.

    Parameters
    ----------
    current, baseline : dict
        Reports as written by :meth:`segiou.Result.to_dict`.

    Raises
    ------
    CheckpointError
        Not reports, or reports of different label specs (labels, classes, categories), id
        spaces, ignore values or rules, beta, or conventions (another name, or one name with
        other rules). Whether they share their ground truth is
        :func:`ground_truth_difference`.
    """
    check_report(current, "current report")
    check_report(baseline, "baseline report")
    for key in ("labels",):
        if current.get(key) != baseline.get(key):
            msg = (
                f"reports are not comparable: {key} is {current.get(key)!r} now but "
                f"{baseline.get(key)!r} in the baseline"
            )
            raise CheckpointError(msg)
    # the same name can hide different rules or classes (another ignore set, a spec file
    # edited under its name): compared too, where both reports say them
    cur_cnt, base_cnt = current.get("counting"), baseline.get("counting")
    if isinstance(cur_cnt, dict) and isinstance(base_cnt, dict):
        for key in ("gt_ids", "pred_ids", "ignore", "void_rule", "ignore_rule"):
            if cur_cnt.get(key) != base_cnt.get(key):
                msg = (
                    f"reports are not comparable: counting {key} is {cur_cnt.get(key)!r} now "
                    f"but {base_cnt.get(key)!r} in the baseline; count both runs the same way"
                )
                raise CheckpointError(msg)
        if (
            "raw_ids" in cur_cnt
            and "raw_ids" in base_cnt
            and (  # (older reports lack them)
                cur_cnt["raw_ids"] != base_cnt["raw_ids"]
            )
        ):
            msg = (
                "reports are not comparable: the raw ids map to other classes now than in the "
                "baseline (counting raw_ids); count both runs with the same label spec"
            )
            raise CheckpointError(msg)
    cur_cls = [(c.get("id"), c.get("name")) for c in current["classes"]]
    base_cls_ids = [(c.get("id"), c.get("name")) for c in baseline["classes"]]
    if cur_cls != base_cls_ids:
        diff = next((a, b) for a, b in zip_longest(cur_cls, base_cls_ids) if a != b)
        msg = (
            f"reports are not comparable: their classes differ (first: {diff[0]!r} now, "
            f"{diff[1]!r} in the baseline; (id, name)); compare runs of one label spec"
        )
        raise CheckpointError(msg)
    cur_cat = [(c.get("name"), c.get("classes")) for c in current.get("categories") or []]
    base_cat = [(c.get("name"), c.get("classes")) for c in baseline.get("categories") or []]
    if [n for n, _ in cur_cat] != [n for n, _ in base_cat] or (
        all(m is not None for _, m in cur_cat + base_cat) and cur_cat != base_cat
    ):
        msg = (
            "reports are not comparable: their categories differ (names, or the classes each "
            "holds); compare runs of one label spec"
        )
        raise CheckpointError(msg)
    if None not in (current.get("beta"), baseline.get("beta")) and (
        current["beta"] != baseline["beta"]
    ):
        msg = (
            f"reports are not comparable: beta is {current['beta']!r} now but "
            f"{baseline['beta']!r} in the baseline (F-beta depends on it); evaluate with the "
            "baseline's beta"
        )
        raise CheckpointError(msg)
    cur_conv, base_conv = current["convention"]["name"], baseline["convention"]["name"]
    if cur_conv != base_conv:
        msg = (
            f"reports are not comparable: convention {cur_conv!r} now but {base_conv!r} in the "
            "baseline; evaluate with the baseline's --preset"
        )
        raise CheckpointError(msg)
    _check_same_rules(current["convention"], baseline["convention"])


def compare_reports(
    current: dict[str, Any],
    baseline: dict[str, Any],
    *,
    max_drop: dict[str, float] | None = None,
    max_class_drop: float | None = 0.02,
    same_ground_truth: bool = True,
) -> Comparison:
    """Compare two JSON reports; flag drops larger than the tolerances.

    Parameters
    ----------
    current, baseline : dict
        Reports as written by :meth:`segiou.Result.to_dict`.
    max_drop : dict of str to float, optional
        Largest allowed drop of each named summary metric (absolute, e.g. ``{"miou": 0.005}``);
        default ``{"miou": 0.005}``.
    max_class_drop : float or None
        Largest allowed drop of any class's IoU; ``None`` disables the per-class check. A
        class scored in the baseline that has no IoU now (none of its pixels counted: its
        predictions were unexpected values) is a regression whatever the tolerance, unless
        the baseline counted no ground-truth pixel of it, or the current report left no pixel
        out (``pixels.unexpected_pred`` empty: the class has no ground truth in another test
        set, ``same_ground_truth=False``). More predicted pixels with an
        unexpected value than in the baseline (``pixels.unexpected_pred``, counted with
        ``on_unexpected="count"``; a larger share of the pixels, when the reports' totals
        differ) is a regression too, whatever the tolerances: such pixels are left out of every
        score. So is, with ``same_ground_truth``, a class with fewer ground-truth pixels counted
        now than in the baseline (``gt_pixels``): on the same ground truth, exactly that many
        more of its pixels were predicted as an unexpected value now, however few the total
        (the baseline's may have been on other classes).
    same_ground_truth : bool, default True
        Refuse reports whose ground truth differs: another number of images, of pixels, of
        ignored or unexpected ground-truth pixels, or of any class's ground-truth pixels (a
        run on part of the test set, or on another one, would move every score without the
        model changing; with predictions of unexpected values, left out of their class's
        count, the class counts are refused when no one ground truth fits both reports).
        ``False`` compares them anyway.

    Returns
    -------
    Comparison

    Raises
    ------
    CheckpointError
        Not reports, or reports of different label specs or conventions (another name, or one
        name with other rules: which classes means run over, what the others are reported as,
        how F-beta is computed), or (with ``same_ground_truth``) of different ground truth:
        not comparable.
    """
    check_comparable(current, baseline)
    if same_ground_truth and (other := ground_truth_difference(current, baseline)) is not None:
        _refuse_other_ground_truth(other)
    tol = {"miou": 0.005} if max_drop is None else max_drop
    for k in tol:  # a guarded metric no report has would switch the check off silently
        lacking = [n for n, r in (("current", current), ("baseline", baseline))
                   if k not in r["summary"]]  # fmt: skip
        if lacking:
            shown = baseline if lacking == ["baseline"] else current  # the one that lacks it
            msg = (
                f"max_drop guards {k!r}, which the {' and '.join(lacking)} report(s) do not "
                f"have (summary: {sorted(shown['summary'])}); e.g. category_miou needs a spec "
                "with categories, mfbeta needs beta"
            )
            raise CheckpointError(msg)
    summary = {}
    for k, b in baseline["summary"].items():
        c = current["summary"].get(k)
        if b is not None and c is not None:
            summary[k] = (b, c, c - b)
    base_cls = {c["name"]: c["iou"] for c in baseline["classes"]}
    classes = {}
    for c in current["classes"]:
        b = base_cls.get(c["name"])
        if b is not None and c["iou"] is not None:
            classes[c["name"]] = (b, c["iou"], c["iou"] - b)
    regressions = [
        f"{k} dropped by {-summary[k][2]:.4f} ({summary[k][0]:.4f} -> {summary[k][1]:.4f}), "
        f"tolerance {t:.4f}"
        for k, t in tol.items()
        if k in summary and summary[k][2] < -t
    ]
    regressions += [
        f"{k} is undefined now (baseline {baseline['summary'][k]:.4f})"
        for k in tol
        if baseline["summary"][k] is not None and current["summary"][k] is None
    ]
    if max_class_drop is not None:
        regressions += [
            f"class {n!r} IoU dropped by {-d:.4f} ({b:.4f} -> {c:.4f}), tolerance {max_class_drop:.4f}"
            for n, (b, c, d) in classes.items()
            if d < -max_class_drop
        ]
    lost = (
        [] if max_class_drop is None else _undefined_classes(current, baseline, same_ground_truth)
    )
    regressions += [line for _, line in lost]
    if same_ground_truth:  # (checked above: one ground truth)
        regressions += _fewer_counted(current, baseline, {c for c, _ in lost})
    odd, lines = _more_unexpected(current, baseline)
    return Comparison(summary, classes, regressions + lines, odd)


def _check_same_rules(current: dict[str, Any], baseline: dict[str, Any]) -> None:
    """Refuse two conventions of one name that score or average otherwise.

    Every rule the echoes state is compared (:func:`segiou.conventions.stated_rules`: which
    classes means run over, what the others are reported as, how F-beta is computed); a rule
    one echo does not state (an older or hand-made report of a custom convention) is not.
    """
    now, was = stated_rules(current), stated_rules(baseline)
    for rule, what in RULE_FIELDS.items():
        if rule in now and rule in was and now[rule] != was[rule]:
            a, b = (
                "nan" if v is None and rule == "fill" else repr(v) for v in (now[rule], was[rule])
            )
            msg = (
                f"reports are not comparable: convention {current['name']!r} has other rules "
                f"now than in the baseline ({rule}, {what}: {a} now, {b} in the baseline): its "
                "scores move without the model changing; evaluate both with one convention"
            )
            raise CheckpointError(msg)


def _unexpected_pred(report: dict[str, Any], name: str) -> dict[str, int] | None:
    """Return ``pixels.unexpected_pred`` (value -> pixels); ``None`` when the report lacks it.

    Every report segiou writes has it (empty when nothing unexpected was predicted, and always
    under ``on_unexpected="raise"``); a hand-made one may not.
    """
    pixels = report.get("pixels")
    if not isinstance(pixels, dict) or "unexpected_pred" not in pixels:
        return None
    values = pixels["unexpected_pred"]
    if not (isinstance(values, dict)
            and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0
                    for c in values.values())):  # fmt: skip
        msg = (
            f"{name} is damaged: its pixels.unexpected_pred is {values!r:.80}, not a map of "
            "value to pixel count"
        )
        raise CheckpointError(msg)
    return values


def _more_unexpected(
    current: dict[str, Any], baseline: dict[str, Any]
) -> tuple[tuple[int, int] | None, list[str]]:
    """Return the predicted pixels with an unexpected value (baseline, now), and a regression.

    The regression line is given when there are more now (a larger share of the pixels, when
    the reports' pixel totals differ). Those pixels are left out of every score: a model that
    predicts garbage on some pixels would otherwise score as if they did not exist. ``None``
    (and no line) when a report does not say.
    """
    now = _unexpected_pred(current, "current report")
    was = _unexpected_pred(baseline, "baseline report")
    if now is None or was is None:
        return None, []
    odd = (sum(was.values()), sum(now.values()))
    totals = [r["pixels"].get("total") for r in (baseline, current)]
    if all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in totals):
        more = odd[1] * totals[0] > odd[0] * totals[1]  # the shares, exactly (no division)
        of = "" if totals[0] == totals[1] else f" (of {totals[1]:,} and {totals[0]:,} pixels)"
    else:
        more, of = odd[1] > odd[0], ""
    if not more:
        return odd, []
    top = sorted(now.items(), key=lambda vc: (-vc[1], vc[0]))
    shown = ", ".join(f"{v}: {c:,}" for v, c in top[:5]) + (", ..." if len(top) > 5 else "")
    line = (
        f"{odd[1]:,} predicted pixels have an unexpected value now, {odd[0]:,} in the baseline"
        f"{of} (pixels per value now: {shown}): they are left out of every score, which "
        "cannot show what the model predicted there"
    )
    return odd, [line]


def _fewer_counted(current: dict[str, Any], baseline: dict[str, Any], skip: set[int]) -> list[str]:
    """Classes with more of their pixels predicted as an unexpected value now, as lines.

    Only for reports of the same ground truth (:func:`ground_truth_difference` found none). A
    class's ``gt_pixels`` (TP + FN) leaves out its pixels predicted as an unexpected value, so
    on the same ground truth a class counted with fewer pixels now than in the baseline had
    exactly that many more of them left out now: the total of such pixels can fall (the
    baseline's were on another class) while one class loses nearly all of its pixels and its
    IoU, from the few left, reads perfect. Classes in ``skip`` (already named as undefined now)
    and classes whose count a report does not say are left out.
    """
    out = []
    for c, (now, was) in enumerate(zip(current["classes"], baseline["classes"], strict=True)):
        a, b = now.get("gt_pixels"), was.get("gt_pixels")
        if c in skip or not all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b)):
            continue
        if a < b:
            out.append(
                f"class {now['name']!r} has {a:,} ground-truth pixels counted now, {b:,} in the "
                f"baseline, on the same ground truth: {b - a:,} more of its pixels are predicted "
                "as an unexpected value now, left out of every score, which cannot show what "
                "the model predicted there"
            )
    return out


def _undefined_classes(
    current: dict[str, Any], baseline: dict[str, Any], same_ground_truth: bool
) -> list[tuple[int, str]]:
    """Classes scored in the baseline that have no IoU now, as :func:`compare_reports` lines.

    A class whose every pixel left the counts (predicted as an unexpected value under
    ``on_unexpected="count"``) has TP + FP + FN = 0: no IoU, and the mean, which skips it,
    rises. Like an undefined summary metric, that fails whatever the tolerance, unless the
    baseline counted no ground-truth pixel of the class (``gt_pixels`` 0: its IoU, 0, came
    from false positives alone, which are gone now). A class undefined in the baseline and
    scored now is no regression. Only on the same ground truth (``same_ground_truth``, checked
    before), and only when the current report left pixels out (``pixels.unexpected_pred`` not
    empty, or not said: a hand-made report): there a class undefined now lost every pixel to
    them. On another test set a class undefined now may simply be absent from it, and the
    pixels left out cannot be told apart by class (a few left out on another class failed a
    better model); the rule on their share (:func:`_more_unexpected`) still applies there.
    Returns ``(class index, line)`` pairs.
    """
    odd = _unexpected_pred(current, "current report")
    if not same_ground_truth or (odd is not None and not sum(odd.values())):
        return []
    out = []
    for i, (c, b) in enumerate(zip(current["classes"], baseline["classes"], strict=True)):
        had = b.get("gt_pixels")  # (None: a report without counts; taken as some)
        if b["iou"] is None or c["iou"] is not None or had == 0:
            continue
        known = isinstance(had, int) and not isinstance(had, bool)
        what = f"the {had:,} ground-truth pixels" if known else "the pixels"
        line = (
            f"class {c['name']!r} IoU is undefined now (baseline {b['iou']:.4f}): none of "
            f"{what} the baseline counted for it is counted now (a prediction with an "
            "unexpected value is left out of every count)"
        )
        out.append((i, line))
    return out


def _ground_truth(report: dict[str, Any]) -> list[tuple[str, object]]:
    """Return what a report says of its ground truth alone (equal for runs on the same images).

    The classes' ground-truth pixels are checked apart (:func:`_class_ground_truth`).
    """
    pixels = report.get("pixels") if isinstance(report.get("pixels"), dict) else {}
    assert isinstance(pixels, dict)
    return [
        ("images", report.get("images")),
        ("pixels", pixels.get("total")),
        ("ignored ground-truth pixels", pixels.get("ignored")),
        ("unexpected ground-truth values", pixels.get("unexpected_gt")),  # (value as a string)
    ]


def ground_truth_difference(current: dict[str, Any], baseline: dict[str, Any]) -> str | None:
    """Say how two reports' ground truth differs, where both say it; ``None``: it does not.

    Parameters
    ----------
    current, baseline : dict
        Reports as written by :meth:`segiou.Result.to_dict` (checked by
        :func:`check_comparable`).

    Returns
    -------
    str or None
        The first difference in words (e.g. ``"images: 10 now, 8 in the baseline"``): another
        number of images, of pixels, of ignored or unexpected ground-truth pixels, or class
        ground-truth pixels that no one ground truth fits (see :func:`compare_reports`).
        ``compare_reports(..., same_ground_truth=True)`` refuses reports for which it is not
        ``None``.
    """
    base = dict(_ground_truth(baseline))
    for what, now in _ground_truth(current):
        was = base.get(what)
        if now is not None and was is not None and now != was:
            return f"{what}: {now!r} now, {was!r} in the baseline"
    return _class_ground_truth(current, baseline)


def _refuse_other_ground_truth(detail: str) -> NoReturn:
    msg = (
        f"reports are not comparable: they were scored against different ground truth "
        f"({detail}); compare runs on the same test set (after changing it, make a new "
        "baseline: remove the old one and run the nightly job with --update-baseline), or pass "
        "same_ground_truth=False"
    )
    raise CheckpointError(msg)


def _class_ground_truth(current: dict[str, Any], baseline: dict[str, Any]) -> str | None:
    """Say why the classes' ground-truth pixels cannot come from one ground truth (or ``None``).

    A class's ``gt_pixels`` (TP + FN, void predictions included) leaves out its pixels whose
    prediction was an unexpected value (``on_unexpected="count"``). A report gives those per
    value (``pixels.unexpected_pred``), not per class, so a class's whole ground truth
    (counted plus left out) cannot be compared exactly once either report has any. What the
    reports do say: a class's true pixel count is at least its ``gt_pixels`` in each, and the
    true counts sum to the ``gt_pixels`` plus the pixels left out (the same in both). One
    ground truth fits both reports exactly when the sums agree and ``sum over classes of
    max(now, baseline) <= that sum``: equality of every class when neither left a pixel out
    (a class counted with more pixels in one report than the other's left-out pixels can
    explain is refused). A report lacking some class's count (hand-made) is compared class
    by class, and only when neither left a pixel out.
    """
    now, was = ([c.get("gt_pixels") for c in r["classes"]] for r in (current, baseline))
    left = [sum((_unexpected_pred(r, n) or {}).values())
            for r, n in ((current, "current report"), (baseline, "baseline report"))]  # fmt: skip

    def known(x: object) -> bool:
        return isinstance(x, int | float) and not isinstance(x, bool)

    differ = [c for c, (a, b) in enumerate(zip(now, was, strict=True))
              if known(a) and known(b) and a != b]  # fmt: skip
    if not differ:
        return None
    names = [c.get("name") for c in current["classes"]]
    if left == [0, 0]:
        c = differ[0]
        return (
            f"ground-truth pixels of class {names[c]!r}: {now[c]!r} now, {was[c]!r} in the baseline"
        )
    if not all(known(a) and known(b) for a, b in zip(now, was, strict=True)):
        return None  # (some class does not say its count: no sum to bound them by)
    total = sum(now) + left[0]
    if total == sum(was) + left[1] and sum(map(max, now, was)) <= total:
        return None  # the left-out pixels can account for every difference
    c = max(differ, key=lambda c: abs(now[c] - was[c]))  # (the first of the largest)
    return (
        f"ground-truth pixels of class {names[c]!r}: {now[c]!r} now, {was[c]!r} in the "
        f"baseline, which the pixels left out for an unexpected prediction ({left[0]:,} now, "
        f"{left[1]:,} in the baseline) cannot account for"
    )
