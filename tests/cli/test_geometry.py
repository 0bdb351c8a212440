"""Tests of the ``segiou box`` and ``segiou sets`` subcommands, through their own parser.

They build an ``argparse`` parser, call ``register`` on its subparsers and run ``args.func``, so
they do not depend on ``segiou.cli``.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET

import pytest

from segiou.cli import main
from segiou.cli.geometry import register


def run(argv, capsys):
    code = main(argv)  # the whole command line: parsing, the subcommand, the error mapping
    out, err = capsys.readouterr()
    return code, out, err


def field(out, label):
    """The value printed after ``label`` (labels are left-aligned in one column)."""
    for line in out.splitlines():
        if line.startswith(label + "  "):  # the value column starts 2+ spaces after a label
            return line[len(label) :].strip()
    msg = f"no line {label!r} in:\n{out}"
    raise AssertionError(msg)


def test_register_adds_box_and_sets():
    parser = argparse.ArgumentParser(prog="segiou")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    assert {"box", "sets"} <= set(sub.choices)
    for name in ("box", "sets"):
        assert callable(sub.choices[name].get_default("func"))


# --------------------------------------------------------------------------------------------
# segiou box
# --------------------------------------------------------------------------------------------


def test_box_worked_example(capsys):
    code, out, err = run(["box", "50,50,150,150", "80,80,180,180"], capsys)
    assert code == 0
    assert err == ""
    assert field(out, "intersection").startswith("4900  box 80, 80, 150, 150")
    assert field(out, "union") == "15100"
    assert field(out, "IoU") == "0.324503"
    assert field(out, "Dice") == "0.490000"
    assert field(out, "GIoU") == "0.217994"
    assert field(out, "IoU >= 0.5") == "no match"
    assert field(out, "VOC  @0.50") == "no match"
    assert field(out, "COCO @0.75") == "no match"
    assert field(out, "COCO @0.95") == "no match"
    assert field(out, "COCO @.50:.95") == "0/10 thresholds"
    assert "area 10000" in field(out, "box 1")


def test_box_threshold_and_sweep(capsys):
    code, out, _ = run(["box", "0,0,10,10", "0,0,10,8", "--threshold", "0.8"], capsys)
    assert code == 0
    assert field(out, "IoU") == "0.800000"
    assert field(out, "IoU >= 0.8") == "match"
    assert field(out, "COCO @0.75") == "match"
    assert field(out, "COCO @.50:.95") == "7/10 thresholds (0.50 to 0.80)"


def test_box_identical_and_disjoint(capsys):
    _, out, _ = run(["box", "1,2,3,4", "1,2,3,4"], capsys)
    assert field(out, "IoU") == "1.000000"
    assert field(out, "COCO @0.95") == "match"
    _, out, _ = run(["box", "0,0,1,1", "5,5,6,6"], capsys)
    assert field(out, "IoU") == "0.000000"
    assert field(out, "intersection") == "0  box none (no overlap)"


@pytest.mark.parametrize(
    ("fmt", "box1", "box2"),
    [("xywh", "50,50,100,100", "80,80,100,100"), ("cxcywh", "100,100,100,100", "130,130,100,100")],
)
def test_box_formats(capsys, fmt, box1, box2):
    code, out, _ = run(["box", box1, box2, "--format", fmt], capsys)
    assert code == 0
    assert field(out, "IoU") == "0.324503"
    assert field(out, "box 1").startswith("50, 50, 150, 150")
    assert f"from {fmt}" in field(out, "box 1")


def test_box_accepts_brackets_spaces_and_negative_numbers(capsys):
    code, out, _ = run(["box", "[50, 50, 150, 150]", "(80 80 180 180)"], capsys)
    assert code == 0
    assert field(out, "IoU") == "0.324503"
    code, out, _ = run(["box", "--threshold", "0.1", "--", "-10,-10,0,0", "-5,-5,5,5"], capsys)
    assert code == 0
    assert field(out, "IoU") == f"{25 / 175:.6f}"
    # without --, before or after the options, in order (box 1 stays box 1)
    for argv in (["box", "-10,-10,0,0", "-5,-5,5,5", "--threshold", "0.1"],
                 ["box", "--threshold", "0.1", "-10,-10,0,0", "-5,-5,5,5"],
                 ["box", "-10,-10,0,0", "--threshold", "0.1", "-5,-5,5,5"]):  # fmt: skip
        code, out, _ = run(argv, capsys)
        assert code == 0
        assert field(out, "IoU") == f"{25 / 175:.6f}"
        assert field(out, "box 1").startswith("-10, -10, 0, 0")
    from segiou.cli import main

    assert main(["box", "-10,-10,0,0", "-5,-5,5,5", "--threshold", "0.1"]) == 0
    assert field(capsys.readouterr().out, "IoU") == f"{25 / 175:.6f}"


def test_box_inclusive(capsys):
    code, out, _ = run(["box", "0,0,9,9", "5,5,14,14", "--inclusive"], capsys)
    assert code == 0
    assert field(out, "IoU") == f"{25 / 175:.6f}"
    assert "inclusive" in field(out, "box 1")


def test_box_svg(capsys, tmp_path):
    path = tmp_path / "overlap.svg"
    code, out, _ = run(["box", "50,50,150,150", "80,80,180,180", "--svg", str(path)], capsys)
    assert code == 0
    assert field(out, "SVG") == f"wrote {path}"
    root = ET.parse(path).getroot()
    ns = {"s": "http://www.w3.org/2000/svg"}
    paths = root.findall("s:path", ns)
    assert len(paths) == 3  # box 1, box 2, overlap
    # scaled to fit, y downward: box 1 (top-left) starts at the margin, box 2 lower and right
    assert paths[0].get("d") == "M20.00,20.00 H327.69 V327.69 H20.00 Z"
    assert paths[1].get("d").startswith("M112.31,112.31 ")
    assert paths[2].get("d") == "M112.31,112.31 H327.69 V327.69 H112.31 Z"
    assert "IoU 0.3245" in root.find("s:title", ns).text


def test_box_svg_wide_view_keeps_aspect_and_y_downward(capsys, tmp_path):
    # enclosing box 250 x 100: one scale 400 / 250 = 1.6 for both axes; box 2 is lower (y 50)
    path = tmp_path / "wide.svg"
    code, _, _ = run(["box", "0,0,200,100", "150,50,250,100", "--svg", str(path)], capsys)
    assert code == 0
    root = ET.parse(path).getroot()
    assert (root.get("width"), root.get("height")) == ("440", "224")  # 250 x 100 scaled + margins
    d = [p.get("d") for p in root.findall("{http://www.w3.org/2000/svg}path")]
    assert d == [
        "M20.00,20.00 H340.00 V180.00 H20.00 Z",
        "M260.00,100.00 H420.00 V180.00 H260.00 Z",
        "M260.00,100.00 H340.00 V180.00 H260.00 Z",
    ]


def test_box_svg_without_overlap_and_degenerate(capsys, tmp_path):
    path = tmp_path / "o.svg"
    code, _, _ = run(["box", "0,0,1,1", "3,0,4,1", "--svg", str(path)], capsys)
    assert code == 0
    assert len(ET.parse(path).getroot().findall("{http://www.w3.org/2000/svg}path")) == 2
    code, _, _ = run(["box", "2,2,2,2", "2,2,2,2", "--svg", str(path)], capsys)  # zero-size view
    assert code == 0
    ET.parse(path)


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (["50,50,150", "0,0,1,1"], "BOX1 '50,50,150' has 3 number(s); expected 4 as x1,y1,x2,y2"),
        (["0,0,1,1", "0,0,x,1"], "BOX2 '0,0,x,1': 'x' is not a number"),
        (["0,0,1,1", "5,5,4,9"], "box2 = (x1, y1, x2, y2) = [5, 5, 4, 9] has x2 < x1 (4 < 5)"),
        (["0,0,1,1", "5,5,4,9"], "swap the corners, or pass --format xywh"),
        (["0,0,1,1", "0,0,nan,1"], "box2 = [0, 0, nan, 1] has a non-finite coordinate"),
        (["0,0,1,1", "0,0,-1,1", "--format", "xywh"], "negative width (-1)"),
        (["0,0,1,1", "0,0,1,1", "--threshold", "1.5"], "--threshold 1.5 is outside [0, 1]"),
        (
            ["0,0,1,1", "0,0,1,1", "--format", "xywh", "--inclusive"],
            "--inclusive applies to xyxy pixel-index corners only, got --format xywh",
        ),
        (["0,0,1,1", "0,0,1,1", "--format", "cxcywh", "--inclusive"], "drop --inclusive"),
        (["0,0,1,1", "0,0,1,1", "--svg", "/nonexistent-dir/o.svg"], "cannot write the SVG"),
    ],
)
def test_box_bad_input(capsys, argv, pattern):
    code, out, err = run(["box", *argv], capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1  # one line
    assert err.startswith("segiou box: error: ")
    assert pattern in err


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        # integers are read exactly, so the library's 2**53 guard sees them
        (["0,0,9007199254740993,1", "0,0,9007199254740992,1"], "reaching 9007199254740993"),
        (["--format", "xywh", "9007199254740992,0,1,1", "9007199254740992,0,1,1"], "2**53 - 1"),
        (["--format", "cxcywh", "4503599627370496,0,1,1", "0,0,1,1"], "2**52 - 1"),
        # numbers float64 would round by a unit or more
        (["0,0,9007199254740993.0,1", "0,0,1,1"], "would read it as 9007199254740992 "),
        (["0,0,9007199254740993,0.5", "0,0,1,1"], "a number with a fraction makes the box"),
        (["0,0,1e400,1", "0,0,1,1"], "1e400 cannot be held in float64, which would read it as inf"),
    ],
)
def test_box_numbers_float64_would_round_are_refused(capsys, argv, pattern):
    """Fields were read with float(): 0,0,9007199254740993,1 and 0,0,9007199254740992,1 scored
    IoU 1, and two identical xywh unit boxes at x = 2**53 scored 0."""
    code, out, err = run(["box", *argv], capsys)
    assert (code, out) == (2, "")
    assert pattern in err


def test_box_reads_integers_and_exact_large_floats(capsys):
    assert run(["box", "0,0,9007199254740991,1", "0,0,9007199254740990,1"], capsys)[0] == 0
    assert run(["box", "0,0,1e20,1e20", "0,0,1e20,5e19"], capsys)[0] == 0  # exact doubles


# --------------------------------------------------------------------------------------------
# segiou sets
# --------------------------------------------------------------------------------------------


def test_sets_worked_example(capsys):
    code, out, err = run(["sets", "cat,dog,bird", "dog,bird,fish"], capsys)
    assert code == 0
    assert err == ""
    assert field(out, "intersection") == "dog, bird  (2)"
    assert field(out, "union") == "cat, dog, bird, fish  (4)"
    assert field(out, "Jaccard") == "0.500000  = 2 / 4"
    assert field(out, "Dice") == "0.666667  = 2 x 2 / (3 + 3)"


def test_sets_options(capsys):
    _, out, _ = run(["sets", "Cat, dog", "CAT;x", "--sep", ";"], capsys)
    assert field(out, "set 1") == "Cat, dog  (1)"  # one label "Cat, dog" with sep ';'
    _, out, _ = run(["sets", "Cat,dog,,", " cat , DOG", "--lower"], capsys)
    assert field(out, "Jaccard").startswith("1.000000")
    assert field(out, "set 1") == "cat, dog  (2)"
    _, out, _ = run(["sets", "a,a,b", "a", "--keep-duplicates"], capsys)
    assert field(out, "Jaccard") == "0.333333  = 1 / 3"
    assert field(out, "union") == "a, a, b  (3)"
    _, out, _ = run(["sets", "a,a,b", "a"], capsys)
    assert field(out, "Jaccard") == "0.500000  = 1 / 2"


def test_sets_empty(capsys):
    code, out, _ = run(["sets", "", ""], capsys)
    assert code == 0
    assert field(out, "Jaccard").startswith("1.000000  (both sets empty")
    assert field(out, "intersection") == "(none)  (0)"
    _, out, _ = run(["sets", "", "", "--empty", "0"], capsys)
    assert field(out, "Dice").startswith("0.000000")
    _, out, _ = run(["sets", "a", ""], capsys)
    assert field(out, "Jaccard") == "0.000000  = 0 / 1"


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (["a", "b", "--empty", "2"], "--empty 2.0 is outside [0, 1]"),
        (["a", "b", "--sep", ""], "--sep is empty"),
    ],
)
def test_sets_bad_input(capsys, argv, pattern):
    code, out, err = run(["sets", *argv], capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("segiou sets: error: ")
    assert pattern in err


def test_arguments_starting_with_a_negative_number(capsys):
    """`segiou sets -1,2 1` and `segiou box -5,0,10,10, 0,0,10,10` (a trailing comma, accepted
    without the minus) failed with argparse's 'the following arguments are required'."""
    code, out, _ = run(["sets", "-1,2", "1"], capsys)
    assert code == 0
    assert field(out, "set 1") == "-1, 2  (2)"
    code, out, _ = run(["sets", "--lower", "1,-2", "-2,-3"], capsys)
    assert (code, field(out, "intersection")) == (0, "-2  (1)")
    code, out, _ = run(["box", "-5,0,10,10,", "0,0,10,10"], capsys)
    assert code == 0
    assert field(out, "box 1").startswith("-5, 0, 10, 10  area 150")
    code, _, err = run(["box", "-5,0,10", "0,0,1,1"], capsys)
    assert code == 2
    assert "BOX1 '-5,0,10' has 3 number(s)" in err
    code, _, err = run(["box", "0,0,1,1", "0,0,1,1", "--threshold", "-0.5"], capsys)
    assert "--threshold -0.5 is outside [0, 1]" in err  # option values are left to argparse


def test_box_prints_every_digit_needed(capsys):
    """Coordinates and areas had 6 significant digits (two different boxes both read
    '123456, 0, 123460, 10'), and IoU 6 decimals ('0.500000' above 'IoU >= 0.5  no match')."""
    _, out, _ = run(["box", "123456.5,0,123460.5,10", "123456,0,123460,10"], capsys)
    assert field(out, "box 1").startswith("123456.5, 0, 123460.5, 10  area 40")
    assert field(out, "box 2").startswith("123456, 0, 123460, 10  area 40")
    assert field(out, "intersection") == "35  box 123456.5, 0, 123460, 10"
    _, out, _ = run(["box", "0,0,9007199254740991,1", "0,0,1000000,1"], capsys)
    assert field(out, "box 1").startswith("0, 0, 9007199254740991, 1  area 9007199254740991")
    _, out, _ = run(["box", "0,0,1,1", "0,0,1,0.4999996"], capsys)
    assert field(out, "IoU") == "0.4999996"
    assert field(out, "IoU >= 0.5") == "no match"
    _, out, _ = run(["box", "0,0,1,1", "0,0,1,0.5", "--threshold", "0.4999996"], capsys)
    assert field(out, "IoU >= 0.4999996") == "match"  # the threshold in full, too
    _, out, _ = run(["box", "0,0,1,1", "0,0,1,0.9999999"], capsys)
    assert field(out, "IoU") == "0.9999999"  # not 1.000000: only identical boxes score 1
    _, out, _ = run(["box", "0,0,1,1", "0,0,1,0.3333333"], capsys)
    assert field(out, "IoU") == "0.333333"  # six decimals where they mislead no verdict
