"""Document fields other than names reach Markdown and text escaped (or are refused)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from report_data import v2_document

from segiou import evaluate
from segiou.errors import ResultDocumentError
from segiou.report import Report, render_markdown, render_text
from segiou.report.markdown import md_escape

EVIL = "<img src=x onerror=alert(1)>|x \x1b[2J\x1b[31mRED $a$"


def _document() -> dict[str, Any]:
    d = v2_document(evaluate(np.array([[8, 2], [1, 9]]), preset="segiou").to_dict())
    d["version"] = 3
    d["boundary"] = {
        "width": {"pixels": 3}, "pixels_used": [3], "miou": 0.5,
        "classes": [{"id": i, "name": c["name"], "iou": 0.5, "intersection": 1, "gt": 2,
                     "pred": 2} for i, c in enumerate(d["classes"])],
    }  # fmt: skip
    return d


def _assert_safe(md: str, text: str) -> None:
    assert "<img" not in md
    assert "\x1b" not in md
    assert "\x1b" not in text
    assert "$a$" not in md


def test_unknown_summary_keys_are_escaped() -> None:
    d = _document()
    d["summary"][EVIL] = 0.5
    slice_value = next(iter(d["slices"]["columns"].values()))["aachen"]
    slice_value["summary"][EVIL] = 0.25
    report = Report.from_result(d)
    md, text = render_markdown(report), render_text(report)
    _assert_safe(md, text)
    assert f"| {md_escape(EVIL)} | 50.00 |" in md
    assert "\\x1b[2J" in text


def test_slice_headers_are_named_as_in_markdown() -> None:
    text = render_text(Report.from_result(_document()))
    head = next(line for line in text.splitlines() if line.split()[-3:-1] == ["images", "mIoU"])
    assert "mIoU" in head
    assert "fwIoU" in head
    assert "miou" not in head


def test_the_boundary_title_is_escaped() -> None:
    d = _document()
    report = Report.from_result(d)
    assert "**Boundary IoU \\(width 3 px: 3 px\\)**" in render_markdown(report)
    d["boundary"]["width"] = {"ratio": 0.01}
    assert "width 0\\.01 of the image diagonal" in render_markdown(Report.from_result(d))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda b: b.__setitem__("width", {"pixels": EVIL}), "boundary.width.pixels"),
        (lambda b: b.__setitem__("width", {"ratio": "1"}), "boundary.width.ratio"),
        (lambda b: b.__setitem__("pixels_used", [EVIL]), "boundary.pixels_used[0]"),
        (lambda b: b["classes"][0].__setitem__("id", EVIL), "boundary.classes[].id"),
        (lambda b: b["classes"][0].__setitem__("id", True), "boundary.classes[].id"),
    ],
)
def test_boundary_fields_of_the_wrong_type_are_refused(change: Any, field: str) -> None:
    d = _document()
    change(d["boundary"])
    report = Report.from_result(d)
    for render in (render_markdown, render_text):
        with pytest.raises(
            ResultDocumentError, match=field.replace("[", r"\[").replace("]", r"\]")
        ):
            render(report)


def test_summary_keys_must_be_strings() -> None:
    d = copy.deepcopy(_document())
    d["summary"][3] = 0.5  # a dict given to the API, not read from JSON
    with pytest.raises(ResultDocumentError, match="summary"):
        Report.from_result(d)


def test_md_escape_escapes_dollar_signs() -> None:
    assert md_escape("$x^2$ price $5") == "\\$x^2\\$ price \\$5"
