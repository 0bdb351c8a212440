"""The report's plots: SVG for the HTML page, PNG files to export; matplotlib only when asked."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from report_data import make_state

from segiou import ConfusionMatrix, LabelSpec, evaluate
from segiou.errors import UsageError
from segiou.report import PLOTS, Report, export_plots, plot_figures

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}href"


def test_svg_plots_are_self_contained(hostile_state: ConfusionMatrix) -> None:
    svgs = plot_figures(Report.from_state(hostile_state), "svg")
    assert list(svgs) == list(PLOTS)
    for stem, data in svgs.items():
        root = ET.fromstring(data)
        assert root.tag == f"{SVG}svg", stem
        for el in root.iter():
            assert el.tag not in (f"{SVG}script", f"{SVG}foreignObject"), (stem, el.tag)
            for key in ("href", XLINK):
                if key in el.attrib:
                    assert el.attrib[key].startswith(("#", "data:image/png;base64,")), el.attrib
        assert b"<text" not in data  # text drawn as paths: no font needed


def test_the_same_report_draws_the_same_bytes(hostile_state: ConfusionMatrix) -> None:
    report = Report.from_state(hostile_state)
    assert plot_figures(report, "svg") == plot_figures(report, "svg")


def test_interval_whiskers_are_drawn(hostile_state: ConfusionMatrix,
                                     hostile_v2: dict[str, Any]) -> None:  # fmt: skip
    v1 = evaluate(hostile_state, preset="cityscapes").to_dict()
    plain = plot_figures(Report.from_result(v1), "svg")["class_iou"]
    whiskers = plot_figures(Report.from_result(hostile_v2), "svg")["class_iou"]
    assert plain != whiskers
    # one horizontal whisker line (plus two caps) per class with an interval
    n = sum(iv is not None for iv in hostile_v2["intervals"]["classes"]["iou"])
    assert whiskers.count(b'id="LineCollection') - plain.count(b'id="LineCollection') >= 1
    assert n >= 1


def test_export_plots_writes_png_files(tmp_path: Path, hostile_state: ConfusionMatrix) -> None:
    files = export_plots(Report.from_state(hostile_state), tmp_path / "new" / "plots", dpi=60)
    assert [f.name for f in files] == [f"{s}.png" for s in PLOTS]
    for f in files:
        with Image.open(f) as im:
            assert im.format == "PNG"
            assert min(im.size) > 100
    # from a result document only the IoU bars can be drawn
    doc_only = Report.from_result(evaluate(hostile_state).to_dict())
    assert [f.name for f in export_plots(doc_only, tmp_path / "d")] == ["class_iou.png"]
    with pytest.raises(UsageError, match="is a file"):
        export_plots(doc_only, files[0])
    with pytest.raises(UsageError, match="'svg' or 'png'"):
        plot_figures(doc_only, "pdf")


def test_names_matplotlib_cannot_draw_do_not_fail(tmp_path: Path) -> None:
    # glyphs the font lacks (CJK, emoji), mathtext, a lone "$", a huge class count
    names = ["道路", "🚗 car", "$", "a$b$c", "\\frac{1}{0}", *map(str, range(55))]
    spec = LabelSpec("intl", names, ignore=[255])
    cm, _, _ = make_state(spec, n=3)
    images = plot_figures(Report.from_state(cm), "png", dpi=40)
    assert set(images) == set(PLOTS)
    for data in images.values():
        with Image.open(io.BytesIO(data)) as im:
            assert im.size[0] > 50


def test_reports_and_the_command_line_load_no_plotting_until_asked() -> None:
    code = (
        "import json, sys, segiou, segiou.report, segiou.cli\n"
        "segiou.cli.build_parser()\n"
        "print(json.dumps(sorted(m for m in ('matplotlib', 'jinja2') if m in sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_many_classes_name_one_in_n_along_each_axis() -> None:
    # 1000 overlapping names took a minute of layout; every n-th is named, and the axis says so
    import numpy as np

    from segiou.report.plots import MAX_NAMED_TICKS, _class_iou, _confusion

    k = 300
    g = np.arange(k * 4, dtype=np.uint16).reshape(1, 40, 30) % k
    cm = ConfusionMatrix(k).update(g, g)
    report = Report.from_state(cm)
    conf, bars = _confusion(report), _class_iou(report)
    assert conf is not None
    ax, bx = conf.axes[0], bars.axes[0]
    ys = [t.get_text() for t in ax.get_yticklabels()]
    assert ys == [str(i) for i in range(0, k, 3)]  # 300 / 120 -> one in 3
    xs = [t.get_text() for t in ax.get_xticklabels()]
    assert xs[:-1] == ys
    assert xs[-1] == "(void)"  # the void column is always named
    assert [t.get_text() for t in bx.get_yticklabels()] == ys
    assert len(ys) <= MAX_NAMED_TICKS
    for label in (ax.get_ylabel(), ax.get_xlabel(), bx.get_ylabel()):
        assert "one in 3 of 300 classes named" in label
    small = Report.from_state(ConfusionMatrix(5).update(g % 5, g % 5))
    small_ax = _confusion(small).axes[0]  # type: ignore[union-attr]
    assert [t.get_text() for t in small_ax.get_yticklabels()] == list("01234")
    assert small_ax.get_ylabel() == "ground truth"
