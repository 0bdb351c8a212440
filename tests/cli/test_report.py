"""``segiou report`` and ``segiou eval --report``, run as a user would (in-process)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from segiou import ConfusionMatrix, evaluate
from segiou.cli import main
from segiou.report.document import fmt_pct

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def evaluated(demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the demo's state.json, result.json and eval's report.html."""
    out = tmp_path_factory.mktemp("eval")
    code = main(["eval", "--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred",
                 "--labels", "cityscapes", "--preset", "cityscapes", "--scheduler", "synchronous",
                 "--json", str(out / "result.json"), "--state", str(out / "state.json"),
                 "--report", str(out / "report.html"), "--quiet"])  # fmt: skip
    assert code == 0
    return out


def test_eval_writes_the_html_report(evaluated: Path) -> None:
    html = (evaluated / "report.html").read_text(encoding="utf-8")
    doc = json.loads((evaluated / "result.json").read_text())
    assert f'id="miou" data-metric="miou" data-value="{doc["summary"]["miou"]!r}"' in html
    assert f">{fmt_pct(doc['summary']['miou'])}</span>" in html
    assert 'id="confusion"' in html
    assert 'id="worst-table"' in html
    assert "demo_00000" in html
    assert "segiou eval --gt" in html


@pytest.mark.parametrize("fmt", ["html", "md", "csv", "json", "txt"])
def test_report_of_a_state_in_every_format(evaluated: Path, tmp_path: Path, fmt: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    out = tmp_path / f"r.{fmt}"
    assert main(["report", str(evaluated / "state.json"), "-o", str(out),
                 "--preset", "cityscapes"]) == 0  # fmt: skip
    assert f"wrote {out}" in capsys.readouterr().err
    doc = json.loads((evaluated / "result.json").read_text())
    text = out.read_text(encoding="utf-8")
    miou = fmt_pct(doc["summary"]["miou"])
    if fmt == "json":
        assert json.loads(text) == doc
    elif fmt == "csv":
        rows = list(csv.DictReader(text.splitlines()))
        assert [float(r["iou"]) if r["iou"] else None for r in rows] == [
            c["iou"] for c in doc["classes"]
        ]
    else:
        assert miou in text
        assert "worst images" in text.lower()
    if fmt == "html":  # the same page eval wrote, apart from where it came from
        eval_html = (evaluated / "report.html").read_text(encoding="utf-8")
        assert (
            text.replace(
                "state state.json (evaluated with preset &#39;cityscapes&#39;)", "X"
            ).count("<tr>")
            == eval_html.count("<tr>") + 5
        )  # --top 10 here, 5 in eval


def test_report_of_a_result_document_leaves_out_what_needs_the_state(
    evaluated: Path, tmp_path: Path
) -> None:
    out = tmp_path / "doc.md"
    assert main(["report", str(evaluated / "result.json"), "-o", str(out)]) == 0
    md = out.read_text(encoding="utf-8")
    assert "need the saved state" in md
    assert "## Worst images" not in md
    assert main(["report", str(evaluated / "result.json"), "-o", str(tmp_path / "d.html")]) == 0
    assert 'id="confusion"' not in (tmp_path / "d.html").read_text(encoding="utf-8")


def test_report_format_option_wins_over_the_suffix(evaluated: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.out"
    assert main(["report", str(evaluated / "state.json"), "-o", str(out), "--format", "md"]) == 0
    assert out.read_text(encoding="utf-8").startswith("# segiou report: cityscapes")


def test_report_exports_the_plots(evaluated: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    assert main(["report", str(evaluated / "state.json"), "-o", str(out), "--plots",
                 str(tmp_path / "plots")]) == 0  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "class_iou.png", "confusion.png", "image_miou.png"
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["confusion_v1_per_image.json", "confusion_v2_per_image.json"])
def test_report_reads_saved_states_of_both_versions(name: str, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(DATA / name), "-o", str(out), "--beta", "1"]) == 0
    html = out.read_text(encoding="utf-8")
    miou = evaluate(ConfusionMatrix.load(DATA / name), beta=1.0).summary["miou"]
    assert f'data-value="{miou!r}"' in html
    assert "F-beta" in html


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["{state}", "-o", "{tmp}/r.pdf"], "the suffix '.pdf' names no report format"),
        (["{state}", "-o", "{tmp}/r"], "the suffix '(none)' names no report format"),
        (["{state}", "-o", "{tmp}/r.html", "--preset", "nope"], "--preset 'nope' is not a preset"),
        (["{result}", "-o", "{tmp}/r.html", "--preset", "mmseg"], "--preset applies to a saved"),
        (["{result}", "-o", "{tmp}/r.md", "--bootstrap", "500"], "--bootstrap applies to a saved"),
        (["{result}", "-o", "{tmp}/r.md", "--bootstrap", "0"], "--bootstrap applies to a saved"),
        (
            ["{result}", "-o", "{tmp}/r.md", "--bootstrap-seed", "3"],
            "--bootstrap-seed applies to a saved",
        ),
        (["{tmp}/missing.json", "-o", "{tmp}/r.html"], "does not exist"),
        (["{state}", "-o", "{state}"], "lies inside"),
        (["{state}", "-o", "{tmp}/no/such/dir/r.html"], "does not exist; create it first"),
        (["{state}", "-o", "{tmp}"], "is a folder"),
        (["{state}", "-o", "{tmp}/r.md", "--plots", "{result}"], "--plots"),
        (["{tmp}/bad.json", "-o", "{tmp}/r.md"], "is not readable JSON"),
    ],
)
def test_report_bad_input_exits_2_with_a_message(
    evaluated: Path, tmp_path: Path, argv: list[str], needle: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    (tmp_path / "bad.json").write_text("{oops")
    state, result = evaluated / "state.json", evaluated / "result.json"
    before = state.read_bytes()
    args = [a.format(state=state, result=result, tmp=tmp_path) for a in argv]
    assert main(["report", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("segiou report: error: ")
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert state.read_bytes() == before
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("report", "needle"),
    [("{tmp}/r.docx", "--report '{tmp}/r.docx': the suffix '.docx' names no report format"),
     ("{tmp}/nodir/r.html", "--report '{tmp}/nodir/r.html': folder"),
     ("{json}", "name the same file")],
)  # fmt: skip
def test_eval_checks_the_report_before_counting(demo_store: Path, tmp_path: Path, report: str,
                                                needle: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    js = tmp_path / "r.json"
    fill = {"tmp": tmp_path, "json": js}
    code = main(["eval", "--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred",
                 "--labels", "cityscapes", "--scheduler", "synchronous", "--quiet",
                 "--json", str(js), "--report", report.format(**fill)])  # fmt: skip
    assert code == 2
    assert needle.format(**fill) in capsys.readouterr().err
    assert not js.exists()  # nothing was evaluated or written


def test_eval_without_the_report_extra_says_what_to_install(
    demo_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "jinja2" else real(name, *a))  # fmt: skip
    argv = ["eval", "--gt", f"{demo_store}/gt", "--pred", f"{demo_store}/pred", "--quiet",
            "--scheduler", "synchronous", "--report", str(tmp_path / "r.html")]  # fmt: skip
    assert main(argv) == 2
    assert "pip install 'segiou[report]'" in capsys.readouterr().err
    # Markdown needs no extra
    argv[-1] = str(tmp_path / "r.md")
    assert main(argv) == 0
    assert "## Worst images" in (tmp_path / "r.md").read_text(encoding="utf-8")


def test_json_report_of_a_document_with_nan_writes_null(evaluated: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    doc = json.loads((evaluated / "result.json").read_text())
    doc["summary"]["kappa"] = float("nan")  # as Python's json.dump writes it
    doc["classes"][0]["iou"] = float("nan")
    (tmp_path / "nan.json").write_text(json.dumps(doc))  # allow_nan: 'NaN' in the file
    assert main(["report", str(tmp_path / "nan.json"), "-o", str(tmp_path / "out.json")]) == 0
    back = json.loads((tmp_path / "out.json").read_text(), parse_constant=pytest.fail)
    assert back["summary"]["kappa"] is None
    assert back["classes"][0]["iou"] is None
    assert back["summary"]["miou"] == doc["summary"]["miou"]
    doc["counting"]["weird"] = float("inf")  # a field no renderer reads
    (tmp_path / "inf.json").write_text(json.dumps(doc))
    assert main(["report", str(tmp_path / "inf.json"), "-o", str(tmp_path / "o2.json")]) == 2
    assert "'counting.weird' is inf" in capsys.readouterr().err


def test_json_report_of_a_document_with_a_deeply_nested_field(
    evaluated: Path, tmp_path: Path
) -> None:
    # json parses ~990 levels; the NaN-to-null walk recursed two frames a level and overflowed
    doc = json.loads((evaluated / "result.json").read_text())
    text = json.dumps({**doc, "note": "@@"}).replace('"@@"', "[" * 600 + "]" * 600)
    (tmp_path / "deep.json").write_text(text)
    assert main(["report", str(tmp_path / "deep.json"), "-o", str(tmp_path / "out.json")]) == 0
    back = json.loads((tmp_path / "out.json").read_text())
    assert back["summary"] == doc["summary"]
    assert list(back) == [*doc, "note"]
    depth, note = 0, back["note"]
    while note:
        depth, note = depth + 1, note[0]
    assert depth == 599
