"""The settings of a run (``POST /v1/runs``): checked, with defaults, and the empty run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segiou.confusion import ConfusionMatrix
from segiou.errors import UsageError
from segiou.labels import LabelSpec, builtin_spec
from segiou.service.wire import check_run_name

__all__ = ["MAX_CLASSES", "run_settings"]

#: Most classes a run may have (every state of it holds a K x K int64 matrix).
MAX_CLASSES = 4096
_SETTINGS = ("name", "labels", "ignore_index", "gt_ids", "pred_ids", "per_image", "on_unexpected")


def _spec(labels: object) -> LabelSpec:
    k = labels if _is_int(labels) else None
    if isinstance(labels, Mapping) and isinstance(labels.get("classes"), list):
        k = len(labels["classes"])
    if k is not None and k > MAX_CLASSES:  # type: ignore[operator]
        msg = (
            f"field 'labels' asks for {k} classes; a run holds at most {MAX_CLASSES} (every "
            "state is a K x K matrix)"
        )
        raise UsageError(msg)
    if isinstance(labels, str):
        return builtin_spec(labels)  # a name only: a request never names a file of the server
    if isinstance(labels, int) and not isinstance(labels, bool):
        return LabelSpec.from_num_classes(labels)
    if isinstance(labels, Mapping):
        return LabelSpec.from_dict(labels, source="field 'labels'")
    msg = (
        f"field 'labels' is {labels!r}; expected a built-in spec name (cityscapes, pascal_voc, "
        "ade20k), a number of classes, or a spec object"
    )
    raise UsageError(msg)


def run_settings(body: object) -> tuple[dict[str, Any], ConfusionMatrix]:
    """Check the settings of ``POST /v1/runs``; return them with defaults, and the empty run.

    Parameters
    ----------
    body : object
        The parsed JSON body: ``name``, ``labels`` and optionally ``ignore_index``,
        ``gt_ids``, ``pred_ids``, ``per_image``, ``on_unexpected``.

    Returns
    -------
    (dict, ConfusionMatrix)
        The settings (every field, defaults filled in) and an empty accumulator with them.

    Raises
    ------
    UsageError
        Not an object, unknown or missing fields, or a field of the wrong type.
    LabelSpecError
        Invalid labels or ignore values.
    """
    if not isinstance(body, Mapping):
        msg = f"the body must be a JSON object with fields {list(_SETTINGS)}"
        raise UsageError(msg)
    if unknown := sorted(set(body) - set(_SETTINGS)):
        msg = f"unknown field(s) {unknown}; a run has {list(_SETTINGS)}"
        raise UsageError(msg)
    for required in ("name", "labels"):
        if required not in body:
            msg = f"field {required!r} is missing; a run needs a name and labels"
            raise UsageError(msg)
    s = {"ignore_index": None, "gt_ids": "class", "pred_ids": None, "per_image": False,
         "on_unexpected": "raise"} | dict(body)  # fmt: skip
    check_run_name(s["name"])
    ign = s["ignore_index"]
    if not (ign is None or _is_int(ign) or (isinstance(ign, list) and all(map(_is_int, ign)))):
        msg = f"field 'ignore_index' is {ign!r}; expected null, an integer or a list of them"
        raise UsageError(msg)
    for name, allowed in (("gt_ids", ("class", "raw")), ("pred_ids", ("class", "raw", None)),
                          ("on_unexpected", ("raise", "count")), ("per_image", (True, False))):  # fmt: skip
        value = s[name]
        if value not in allowed or (isinstance(value, bool) != (name == "per_image")):
            msg = f"field {name!r} is {value!r}; expected one of {list(allowed)}"
            raise UsageError(msg)
    cm = ConfusionMatrix(_spec(s["labels"]), ignore_index=ign, gt_ids=s["gt_ids"],
                         pred_ids=s["pred_ids"], on_unexpected=s["on_unexpected"],
                         per_image=s["per_image"])  # fmt: skip
    return s, cm


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)
