"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``) via playwright.

Skipped, saying why, where no Chromium is installed (``apt-get install chromium``; ``.ci/run``
installs it when it can) or playwright is missing (it is in the ``test`` extra; it drives the
system's Chromium and downloads no browser). ``SEGIOU_CHROMIUM`` names another binary.

Each test writes its screenshots into its temporary folder. The README's picture is the
screenshot of :func:`test_report_opens_in_chromium_with_no_errors`; to make it again, run this
file with ``SEGIOU_SCREENSHOT_DIR=docs``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from report_data import HOSTILE_CLASSES, HOSTILE_IMAGES

from segiou import ConfusionMatrix
from segiou.cli import main
from segiou.report import Report, render_html
from segiou.report.document import fmt_pct

#: Launch flags that work as root in a container: no sandbox (root), no GPU, no network chatter.
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _chromium() -> str:
    given = os.environ.get("SEGIOU_CHROMIUM")
    found = given or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("no Chromium browser installed (Debian: apt-get install chromium)")
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    exe = _chromium()
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')"
    )
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=FLAGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class _Visit:
    """A page opened from a file, recording console errors, dialogs and every request."""

    def __init__(self, browser: Any, path: Path, *, width: int = 1100, height: int = 1400) -> None:
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": width, "height": height})
        p = self.page
        p.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}")
             if m.type in ("error", "warning", "assert") else None)  # fmt: skip
        p.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        p.on("dialog", self._dialog)
        p.on("request", lambda r: self.requests.append(r.url))
        p.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url}"))
        p.goto(path.as_uri(), wait_until="load")
        self.url = path.as_uri()

    def _dialog(self, dialog: Any) -> None:
        self.problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    def check_clean(self) -> None:
        """No console error, no script ran, nothing loaded but the file (and data URIs)."""
        assert self.problems == []
        assert [u for u in self.requests if u != self.url and not u.startswith("data:")] == []
        loaded = self.page.locator("img").evaluate_all(
            "imgs => imgs.map(i => [i.complete, i.naturalWidth, i.naturalHeight])"
        )
        assert loaded
        assert all(ok and w > 0 and h > 0 for ok, w, h in loaded), loaded

    def close(self) -> None:
        self.page.close()


def _screenshot(page: Any, path: Path, *, full_page: bool) -> None:
    page.screenshot(path=str(path), full_page=full_page)
    with Image.open(path) as im:
        assert im.format == "PNG"
        assert im.size[0] >= 800
        assert im.size[1] >= 800


def test_report_opens_in_chromium_with_no_errors(browser: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from segiou.testing.datasets import write_demo_store

    monkeypatch.chdir(tmp_path)  # the report names its inputs as given: short, relative paths
    write_demo_store("d.zarr", images=12, height=96, width=192, seed=3)
    js, html = tmp_path / "result.json", tmp_path / "report.html"
    assert main(["eval", "--gt", "d.zarr/gt", "--pred", "d.zarr/pred", "--labels",
                 "cityscapes", "--preset", "cityscapes", "--scheduler", "synchronous", "--quiet",
                 "--json", str(js), "--report", str(html), "--top", "8"]) == 0  # fmt: skip
    miou = json.loads(js.read_text())["summary"]["miou"]
    visit = _Visit(browser, html)
    try:
        visit.check_clean()
        page = visit.page
        assert page.inner_text("#miou") == fmt_pct(miou)  # the number a person reads
        assert float(page.get_attribute("#miou", "data-value")) == miou  # exactly the JSON's
        assert page.locator("#class-table tbody tr").count() == 19
        assert page.locator("#worst-table tbody tr").count() == 8
        assert page.locator("#pairs-table tbody tr").count() == 8
        assert page.locator("section#confusion img").count() == 1
        _screenshot(page, tmp_path / "report.png", full_page=True)
        page.set_viewport_size({"width": 1000, "height": 1150})
        _screenshot(page, tmp_path / "report-top.png", full_page=False)
        if out := os.environ.get("SEGIOU_SCREENSHOT_DIR"):  # the README's picture, in 128 colours
            with Image.open(tmp_path / "report-top.png") as im:
                im.convert("RGB").quantize(colors=128).save(Path(out) / "report.png", optimize=True)
    finally:
        visit.close()


def test_hostile_names_stay_text_in_the_browser(browser: Any, tmp_path: Path,
                                                hostile_state: ConfusionMatrix,
                                                hostile_v2: dict[str, Any]) -> None:  # fmt: skip
    path = tmp_path / "hostile.html"
    path.write_text(render_html(Report.from_result(hostile_v2, cm=hostile_state)),
                    encoding="utf-8")  # fmt: skip
    visit = _Visit(browser, path)
    try:
        visit.check_clean()  # no alert(), no request to example.invalid or to "x"
        page = visit.page
        names = page.locator("#class-table tbody td.name").all_text_contents()
        assert names == list(HOSTILE_CLASSES)
        images = page.locator("#worst-table tbody tr td:first-child").all_text_contents()
        assert sorted(images) == sorted(HOSTILE_IMAGES)
        assert page.locator("script").count() == 0
        assert page.locator("img[onerror]").count() == 0
        # intervals and slices are on the page
        assert page.locator("#class-table th.ci").inner_text() == "95% CI"
        assert page.locator(".slice-table tr.small").count() == 1
        _screenshot(page, tmp_path / "hostile.png", full_page=True)
    finally:
        visit.close()


def test_the_visit_catches_what_it_should(browser: Any, tmp_path: Path) -> None:
    # the checks themselves, on a page that breaks every rule: a check that cannot fail proves
    # nothing
    bad = tmp_path / "bad.html"
    missing = (tmp_path / "missing.png").as_uri()
    bad.write_text(f"<!DOCTYPE html><p>x</p><img src='{missing}'>"
                   "<script>console.error('boom'); alert('hi'); undefined_call();</script>")  # fmt: skip
    visit = _Visit(browser, bad)
    try:
        text = "\n".join(visit.problems)
        assert "console error: boom" in text
        assert "dialog: hi" in text
        assert "page error" in text
        assert missing in visit.requests
        with pytest.raises(AssertionError):
            visit.check_clean()
    finally:
        visit.close()
