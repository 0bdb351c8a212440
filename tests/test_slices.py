"""Slices (segiou.stats): every metric per metadata value, nothing dropped silently."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import reference

from segiou import ConfusionMatrix, evaluate
from segiou.errors import UsageError
from segiou.stats import Metadata, evaluate_with_intervals, read_metadata
from segiou.testing.synthetic import cityscapes_like

NAMES = [f"img{i}" for i in range(8)]
CITY = ["aachen", "bonn", "aachen", "bonn", "aachen", "bonn", "aachen", "cologne"]
WEATHER = ["sun", "rain", "rain", "sun", "sun", "", "rain", "sun"]


def _data():
    gt, pred = cityscapes_like(8, 32, 64, seed=3)
    cm = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True)
    return cm.update(gt, pred, names=NAMES), gt, pred


def _csv(tmp_path: Path, skip: int = 7) -> Path:
    lines = ["image,city,weather"]
    lines += [f"{n},{c},{w}" for i, (n, c, w) in enumerate(zip(NAMES, CITY, WEATHER, strict=True))
              if i != skip]  # fmt: skip
    lines.append("ghost,aachen,sun")  # a metadata row without an image
    path = tmp_path / "meta.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_every_slice_is_its_images_counted_alone(tmp_path: Path) -> None:
    cm, gt, pred = _data()
    r = evaluate_with_intervals(cm, preset="cityscapes", resamples=50, slices=_csv(tmp_path),
                                min_slice_images=3)  # fmt: skip
    s = r.slices
    assert s is not None
    assert s["unmatched"] == {"images_without_metadata": ["img7"],
                              "metadata_without_image": ["ghost"]}  # fmt: skip
    assert set(s["columns"]) == {"city", "weather"}
    assert set(s["columns"]["city"]) == {"aachen", "bonn"}  # img7 (cologne) has no metadata
    assert set(s["columns"]["weather"]) == {"", "rain", "sun"}  # an empty cell is a value too
    for column, values in (("city", CITY), ("weather", WEATHER)):
        for value, item in s["columns"][column].items():
            idx = [i for i in range(7) if values[i] == value]
            assert item["images"] == len(idx)
            assert item["small"] == (len(idx) < 3)
            ref = reference.Counts(np.zeros((19, 19), np.int64), np.zeros(19, np.int64))
            for i in idx:
                ref = reference.add(ref, reference.confusion(gt[i], pred[i], 19, ignore=[255]))
            want = evaluate(ref.counts, void=ref.void, spec=cm.spec, preset="cityscapes")
            assert item["summary"]["miou"] == pytest.approx(want.miou, rel=1e-12)
            got_iou = [np.nan if c["iou"] is None else c["iou"] for c in item["classes"]]
            np.testing.assert_allclose(got_iou, reference.iou(ref.counts, ref.void), rtol=1e-12)
            assert item["intervals"]["resamples"] == 50
    # every image with metadata is in exactly one value of each column
    for values in s["columns"].values():
        assert sum(v["images"] for v in values.values()) == 7
    doc = json.loads(r.to_json())
    assert doc["slices"]["min_images"] == 3


def test_slices_without_intervals_and_with_groups(tmp_path: Path) -> None:
    cm, _, _ = _data()
    meta = _csv(tmp_path, skip=-1)
    r = evaluate_with_intervals(cm, resamples=0, slices=meta)
    assert r.intervals is None
    assert r.slices is not None
    assert all(v["intervals"] is None for v in r.slices["columns"]["city"].values())
    g = evaluate_with_intervals(cm, resamples=40, slices=meta, groups="city")
    assert g.intervals is not None
    assert g.intervals["unit"] == "group:city"
    assert g.slices is not None
    assert g.slices["columns"]["weather"]["sun"]["intervals"]["unit"] == "group:city"


def test_json_metadata_in_both_forms(tmp_path: Path) -> None:
    records = {n: {"city": c, "night": i % 2 == 0, "cam": i} for i, (n, c) in
               enumerate(zip(NAMES, CITY, strict=True))}  # fmt: skip
    a = tmp_path / "a.json"
    a.write_text(json.dumps(records))
    b = tmp_path / "b.json"
    b.write_text(json.dumps([{"image": n} | rec for n, rec in records.items()]))
    ma, mb = read_metadata(a), read_metadata(b)
    assert ma == Metadata(("city", "night", "cam"), ma.values, ma.source)
    assert ma.values == mb.values
    assert ma.values["img0"] == {"city": "aachen", "night": "true", "cam": "0"}


def test_csv_cells_with_line_breaks_and_odd_whitespace_are_read_as_written(tmp_path: Path) -> None:
    """A quoted cell may hold a line break (it was joined: "x\ny" read as "xy", merging two
    slices); a form feed or a line separator inside a cell is just a character."""
    path = tmp_path / "m.csv"
    path.write_text(
        'image,site\nimg0,"x\ny"\nimg1,xy\nimg2,a\u2028b\nimg3,c\x0cd\n', encoding="utf-8"
    )
    meta = read_metadata(path)
    assert {n: v["site"] for n, v in meta.values.items()} == {
        "img0": "x\ny", "img1": "xy", "img2": "a\u2028b", "img3": "c\x0cd"}  # fmt: skip
    path.write_text('image,site\nimg0,"x\ny"\nimg0,z\n')
    with pytest.raises(UsageError, match="line 4: image 'img0' is listed twice"):
        read_metadata(path)


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("m.csv", "name,city\nimg0,x\n", "has no 'image' column"),
        ("m.csv", "image,city\nimg0,x\nimg0,y\n", "line 3: image 'img0' is listed twice"),
        ("m.csv", "image,city\nimg0,x,extra\n", "line 2: 3 cell(s) for 2 columns"),
        ("m.csv", "", "is empty"),
        ("m.csv", "image\nimg0\n", "no metadata column"),
        ("m.txt", "image,city\n", "neither .csv nor .json"),
        ("m.json", "[1, 2]", "record 0: expected an object"),
        ("m.json", '{"img0": {"city": ["a"]}}', "a slice value must be a string or a number"),
        ("m.json", '"x"', "holds a JSON str"),
        ("m.json", "{", "is not valid JSON"),
    ],
)
def test_bad_metadata_is_refused_naming_the_place(tmp_path: Path, name: str, text: str,
                                                  needle: str) -> None:  # fmt: skip
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UsageError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        read_metadata(path)


def test_group_column_must_cover_every_image(tmp_path: Path) -> None:
    cm, _, _ = _data()
    with pytest.raises(UsageError, match=r"1 image\(s\) have no 'city' value.*img7"):
        evaluate_with_intervals(cm, resamples=10, slices=_csv(tmp_path), groups="city")
    with pytest.raises(UsageError, match="column 'town' is not in"):
        evaluate_with_intervals(cm, resamples=10, slices=_csv(tmp_path), groups="town")
    with pytest.raises(UsageError, match="cannot be read"):
        evaluate_with_intervals(cm, slices=tmp_path / "missing.csv")
    with pytest.raises(UsageError, match="min_images"):
        evaluate_with_intervals(cm, slices=_csv(tmp_path), min_slice_images=0)


def test_repeated_image_names_cannot_be_sliced(tmp_path: Path) -> None:
    gt, pred = cityscapes_like(2, 16, 32, seed=1)
    a = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True).update(gt, pred)
    b = ConfusionMatrix("cityscapes", gt_ids="class", per_image=True).update(gt, pred)
    both = a + b  # keyless updates: labels #0, #1 on both sides
    meta = tmp_path / "m.csv"
    meta.write_text("image,city\n#0,x\n")
    with pytest.raises(UsageError, match="repeat in the state"):
        evaluate_with_intervals(both, slices=meta)
