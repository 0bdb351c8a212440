"""HTML, Markdown, text and CSV reports: what they hold, and that names from files stay text."""

from __future__ import annotations

import csv
import io
import re
from html.parser import HTMLParser
from typing import Any

import numpy as np
import pytest
from report_data import HOSTILE_CLASSES, HOSTILE_IMAGES, make_state

from segiou import ConfusionMatrix, LabelSpec, evaluate
from segiou.errors import UsageError
from segiou.report import (
    Report,
    render_csv,
    render_html,
    render_markdown,
    render_text,
)
from segiou.report.document import fmt_ci, fmt_pct

_VOID = {"meta", "img", "br", "hr", "input", "link", "col", "wbr", "source"}


class _Page(HTMLParser):
    """Every tag with its attributes; the text of each cell and of each element with an id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text_by_id: dict[str, str] = {}
        self.cells: list[str] = []
        self._open: list[tuple[str, str | None, list[str]]] = [("document", None, [])]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag not in _VOID:
            self._open.append((tag, a.get("id"), []))

    def handle_endtag(self, tag: str) -> None:
        while len(self._open) > 1:
            name, ident, parts = self._open.pop()
            text = "".join(parts)
            if name in ("td", "th"):
                self.cells.append(text)
            if ident:
                self.text_by_id[ident] = text
            self._open[-1][2].append(text + ("\n" if name in ("p", "li", "h2", "h3") else ""))
            if name == tag:
                break

    def handle_data(self, data: str) -> None:
        self._open[-1][2].append(data)

    @property
    def text(self) -> str:
        return "".join(self._open[0][2])


def _parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    page.close()
    return page


def _html_for(source: Any, cm: ConfusionMatrix | None = None) -> tuple[str, _Page]:
    html = render_html(Report.from_result(source, cm=cm))
    return html, _parse(html)


def test_html_is_self_contained_and_loads_nothing(hostile_state: ConfusionMatrix,
                                                  hostile_v2: dict[str, Any]) -> None:  # fmt: skip
    html, page = _html_for(hostile_v2, hostile_state)
    tags = {t for t, _ in page.tags}
    assert not tags & {"script", "link", "iframe", "object", "embed", "base", "form", "svg"}
    csp = [a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv")]
    assert csp == ["default-src 'none'; style-src 'unsafe-inline'; img-src data:"]
    images = [a for t, a in page.tags if t == "img"]
    assert len(images) == 3  # heatmap, IoU bars, per-image histogram
    assert all((a["src"] or "").startswith("data:image/svg+xml;base64,") for a in images)
    for _, attrs in page.tags:  # no handler, no URL but the page's own anchors and data URIs
        for name, value in attrs.items():
            assert not name.startswith("on"), (name, value)
            if name in ("href", "src"):
                assert (value or "").startswith(("#", "data:")), value
    assert "@import" not in html
    assert "url(" not in html


def test_html_shows_names_as_text_never_markup(hostile_state: ConfusionMatrix,
                                               hostile_v2: dict[str, Any]) -> None:  # fmt: skip
    html, page = _html_for(hostile_v2, hostile_state)
    for name in (*HOSTILE_CLASSES, *HOSTILE_IMAGES[:2], "<no meta>", "ghost|row", "<tiny>"):
        assert name in page.text, name
    # the raw markup never reaches the page: only its escaped form does
    for raw in ("<script>alert", '"><img src=x', "<b>bold</b>", "<i>cat</i>", "<no meta>"):
        assert raw not in html, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    assert [t for t, _ in page.tags if t == "img"] == ["img"] * 3  # the plots only


def test_html_shows_the_documents_numbers(hostile_state: ConfusionMatrix,
                                          hostile_v2: dict[str, Any]) -> None:  # fmt: skip
    _, page = _html_for(hostile_v2, hostile_state)
    s = hostile_v2["summary"]
    assert page.text_by_id["miou"] == fmt_pct(s["miou"])
    miou_tag = next(a for t, a in page.tags if a.get("id") == "miou")
    assert float(miou_tag["data-value"] or "nan") == s["miou"]
    for c in hostile_v2["classes"]:
        assert fmt_pct(c["iou"]) in page.cells
        assert f"{c['tp']:,}" in page.cells
    for iv in hostile_v2["intervals"]["classes"]["iou"]:
        assert fmt_ci(tuple(iv)) in page.cells
    for c in hostile_v2["categories"]:
        assert fmt_pct(c["iou"]) in page.cells
    text = page.text
    assert "95% CI: percentile bootstrap, resampling images, 1,000 resamples, seed 0" in text
    assert "no intervals" not in text
    # slices: a table per column, the small slice flagged, the slice's mIoU and its interval
    assert "<tiny> (small)" in page.cells
    assert "61.00 [58.00, 64.00]" in page.cells  # a slice's mIoU and its interval
    assert "70.00" in page.cells  # its fwIoU, no interval
    c0, iv0 = hostile_v2["classes"][0], hostile_v2["intervals"]["classes"]["iou"][0]
    assert f"{fmt_pct(c0['iou'])} {fmt_ci(tuple(iv0))}" in page.cells  # IoU per class by slice
    assert "Images without a metadata row (2): <no meta>, x" in text
    assert "Metadata rows without an image (1): ghost|row" in text
    # counting rules and preset
    assert "preset" in page.cells or "cityscapes" in text
    assert hostile_v2["counting"]["void_rule"] in text
    for rule in hostile_v2["convention"]["rules"]:
        assert rule in text


def test_html_of_a_version_1_result_says_what_it_lacks(hostile_state: ConfusionMatrix) -> None:
    html, page = _html_for(evaluate(hostile_state).to_dict())
    text = page.text
    assert "no intervals (they come from --bootstrap on a saved state with per-image rows)" in html
    assert "need the saved state" in html
    assert "confusion" not in page.text_by_id  # no heatmap section without the state
    assert "pairs" not in page.text_by_id
    assert len([t for t, _ in page.tags if t == "img"]) == 1  # the IoU bars only
    assert "Slices" not in text


def test_markdown_says_what_the_html_says_minus_the_plots(hostile_state: ConfusionMatrix,
                                                          hostile_v2: dict[str, Any]) -> None:  # fmt: skip
    report = Report.from_result(hostile_v2, cm=hostile_state)
    md = render_markdown(report)
    assert "<script>" not in md
    assert "<img" not in md
    assert "&lt;script&gt;alert\\(1\\)&lt;/script&gt;" in md
    assert "\\|pipe\\| \\*star\\* \\[l\\]\\(http://example\\.invalid/x\\)" in md
    assert "tab\\\\tnew\\\\nline" in md  # shown as its escape: it cannot end a table row
    for line in md.splitlines():  # every table row has as many cells as its header
        if line.startswith("| "):
            assert len(re.findall(r"(?<!\\)\|", line)) >= 3, line
    tables = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert tables
    heads = ("## Summary", "## Per class", "## Per category", "## Top confused pairs",
             "## Worst images", "## Slices", "## Counting rules and preset")  # fmt: skip
    for head in heads:
        assert head in md
    assert fmt_pct(hostile_v2["summary"]["miou"]) in md
    assert "95% CI: percentile bootstrap" in md
    assert "| aachen | 412 | 61.00 [58.00, 64.00] | 70.00 |" in md
    assert report.state is not None
    for w in report.state.worst:
        assert fmt_pct(w.miou) in md


def test_markdown_rows_keep_their_cells(hostile_state: ConfusionMatrix) -> None:
    md = render_markdown(Report.from_result(evaluate(hostile_state), cm=hostile_state))
    block = md.split("## Per class")[1].split("##")[0]
    rows = [ln for ln in block.splitlines() if ln.startswith("| ")]
    widths = {len(re.findall(r"(?<!\\)\|", ln)) for ln in rows}
    assert len(rows) == 2 + len(HOSTILE_CLASSES)
    assert widths == {11}  # 10 columns: no name adds or ends a cell
    assert "no intervals (they come from --bootstrap on a saved state with per-image rows)" in md


def test_text_report_names_beta(hostile_state: ConfusionMatrix) -> None:
    text = render_text(Report.from_result(evaluate(hostile_state, beta=2)), width=200)
    assert "mean F-beta (beta=2)" in text


def test_text_report_says_the_same(hostile_state: ConfusionMatrix,
                                   hostile_v2: dict[str, Any]) -> None:  # fmt: skip
    report = Report.from_result(hostile_v2, cm=hostile_state)
    text = render_text(report, width=200)
    assert "95% CI" in text
    assert fmt_ci(tuple(hostile_v2["intervals"]["summary"]["miou"])) in text
    assert "slices by city <x> (small: fewer than 30 images)" in text
    assert "<tiny> (small)" in text
    assert "61.00 [58.00, 64.00]" in text
    assert "top confused pairs" in text
    assert "worst images" in text
    assert "tab\\tnew\\nline" in text  # a control character is shown, not sent
    assert "\x1b" not in text
    summary = text.split("summary")[1].split("pixels:")[0]
    assert "mIoU " in summary  # named as in Markdown and HTML
    assert "miou" not in summary
    assert "ghost|row" in text
    # a bare Result still renders as before, plus the intervals line
    plain = render_text(evaluate(hostile_state))
    assert "per class (evil <b>spec</b>, convention 'segiou')" in plain
    assert "no intervals (they come from --bootstrap on a saved state with per-image rows)" in plain
    assert "top confused pairs" not in plain


def test_csv_is_the_per_class_table(hostile_state: ConfusionMatrix,
                                    hostile_v2: dict[str, Any]) -> None:  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(render_csv(Report.from_result(hostile_v2)))))
    assert [r["class"] for r in rows] == list(HOSTILE_CLASSES)
    for r, c, iv in zip(rows, hostile_v2["classes"], hostile_v2["intervals"]["classes"]["iou"],
                        strict=True):  # fmt: skip
        for key in ("iou", "dice", "precision", "recall"):
            assert (float(r[key]) if r[key] else None) == c[key]
        for key in ("tp", "fp", "fn", "void", "gt_pixels", "pred_pixels"):
            assert int(r[key]) == c[key]
        assert (float(r["iou_lo"]), float(r["iou_hi"])) == tuple(iv)
    plain = list(csv.DictReader(io.StringIO(render_csv(Report.from_state(hostile_state)))))
    assert all(r["iou_lo"] == "" and r["iou_hi"] == "" for r in plain)
    assert "fbeta" not in plain[0]
    with_beta = render_csv(Report.from_state(hostile_state, beta=1.0))
    assert with_beta.splitlines()[0].split(",")[8] == "fbeta"


def test_a_state_without_per_image_rows_says_so() -> None:
    cm, gt, pred = make_state(3)
    flat = ConfusionMatrix(cm.spec).update(gt, pred, key="b")
    report = Report.from_state(flat)
    assert "per_image=True" in report.missing_parts()[0]
    html = render_html(report)
    assert "per_image=True" in html
    assert "confused pairs" in html.lower()


def test_html_without_the_extra_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))  # fmt: skip
    cm, _, _ = make_state(3)
    with pytest.raises(UsageError, match=r"needs matplotlib.*pip install 'segiou\[report\]'"):
        render_html(Report.from_state(cm))


def test_unexpected_values_are_listed_per_value_in_every_report() -> None:
    cm = ConfusionMatrix(LabelSpec.from_num_classes(3, ignore=[255]), per_image=True,
                         on_unexpected="count")  # fmt: skip
    gt = np.array([[[0, 1, 7], [2, 2, 255], [7, 1, 1]]], np.uint8)
    pred = np.array([[[0, 9, 1], [2, 1, 0], [0, 1, 9]]], np.uint8)
    report = Report.from_state(cm.update(gt, pred, key="b"))
    html = " ".join(_parse(render_html(report)).text.split())  # as a browser shows it
    assert "Unexpected values in ground truth: 7 (2 px)" in html
    assert "Unexpected values in predictions: 9 (2 px)" in html
    assert "+ 4 unexpected" in html
    md = render_markdown(report)
    assert "Unexpected values in ground truth: 7 (2 px)" in md
    text = render_text(report)
    assert "unexpected values in predictions: 9 (2 px)" in text


def test_text_tables_never_cut_a_number() -> None:
    # a per-class table wider than 100 columns (intervals, F-beta, six-digit counts) is printed
    # wider rather than cut with an ellipsis
    from segiou.report import render_text
    from segiou.stats import evaluate_with_intervals

    rng = np.random.default_rng(0)
    cm = ConfusionMatrix("cityscapes", per_image=True)
    for i in range(2):
        g = rng.integers(0, 19, (1, 512, 1024)).astype(np.uint8)
        p = np.where(rng.random(g.shape) < 0.3, rng.integers(0, 19, g.shape), g).astype(np.uint8)
        cm.update(g, p, key=f"k{i}", names=[f"frankfurt_{i:06d}"])
    res = evaluate_with_intervals(cm, preset="cityscapes", beta=0.5, resamples=20, seed=0)
    text = render_text(res, width=100)
    assert "\u2026" not in text
    rows = {line.split()[1]: line for line in text.splitlines()
            if line.strip()[:2].strip().isdigit() and len(line.split()) > 8}  # fmt: skip
    doc = res.to_dict()
    for c, iv in zip(doc["classes"], doc["intervals"]["classes"]["iou"], strict=True):
        if " " in c["name"]:
            continue  # a two-word name shifts the columns; its row is checked by the others
        row = rows[c["name"]]
        for cell in (f"{c['tp']:,}", f"{c['fp']:,}", f"{c['fn']:,}",
                     f"[{100 * iv[0]:.2f}, {100 * iv[1]:.2f}]"):  # fmt: skip
            assert cell in row, (cell, row)


def test_intervals_over_few_images_are_flagged_in_every_report() -> None:
    """Percentile intervals undercover with few images (the review's simulation: 70% of
    "95%" mIoU intervals covered the truth at 8 images, 88% at 30); below 30 resampled units
    every report that prints intervals says so, in one line; a class held by one image has no
    interval, and the reports say why."""
    from segiou.report.gate import render_comparison_markdown, render_comparison_text
    from segiou.stats import compare_states, evaluate_with_intervals

    rng = np.random.default_rng(0)

    def state(n: int, pred_noise: float) -> ConfusionMatrix:
        r = np.random.default_rng(n)
        gt = r.integers(0, 3, (n, 8, 8))
        gt[0, :2, :2] = 3  # class 3 in image 0 only
        pred = np.where(rng.random(gt.shape) < pred_noise, 0, gt)
        cm = ConfusionMatrix(4, per_image=True)
        return cm.update(gt, pred, names=[f"im{i:02d}" for i in range(n)])

    few = "only 8 images resampled: percentile intervals come out too narrow with few images"
    note = "1 class held by a single image: no interval"
    cm = state(8, 0.2)
    res = evaluate_with_intervals(cm, resamples=50)
    assert res.intervals["units"] == 8
    text = render_text(res, width=200)
    assert f"\nwarning: {few} (in a simulation, 95% intervals of mIoU covered the true value " in (
        text)  # fmt: skip
    assert f"\nnote: {note}" in text
    md = render_markdown(Report.from_result(res))
    assert f"\n> **Warning:** {few}" in md
    assert "\nNote: " + note in md
    html = render_html(Report.from_result(res), plots=False)
    assert f'<p class="note">Warning: {few}' in html
    assert f"Note: {note}" in html
    gate = compare_states(cm, state(8, 0.3), resamples=50).to_dict()
    assert gate["bootstrap"]["units"] == 8
    assert f"\nwarning: {few} (in a simulation" in render_comparison_text(gate)
    assert f"\nwarning: {few} (in a simulation" in render_comparison_markdown(gate)
    # 30 images: no warning (nor in a document written before the units were recorded)
    many = evaluate_with_intervals(state(30, 0.2), resamples=50)
    assert "resampled: percentile intervals" not in render_text(many, width=200)
    del many.intervals["units"]
    assert "resampled: percentile intervals" not in render_markdown(Report.from_result(many))
