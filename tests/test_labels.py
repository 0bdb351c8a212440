"""Label specs: the built-in tables, user specs in JSON and TOML, and validation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from segiou import ConfusionMatrix, LabelSpec, RawLabel, builtin_spec, load_spec
from segiou.errors import LabelSpecError, SegiouError

CITYSCAPES_TRAIN = [
    "road", "sidewalk", "building", "wall", "fence", "pole", "traffic light", "traffic sign",
    "vegetation", "terrain", "sky", "person", "rider", "car", "truck", "bus", "train",
    "motorcycle", "bicycle",
]  # fmt: skip


# --- built-in specs --------------------------------------------------------------------------------


def test_cityscapes():
    spec = builtin_spec("cityscapes")
    assert spec.num_classes == 19
    assert list(spec.classes) == CITYSCAPES_TRAIN
    assert spec.ignore == (255,)
    assert [r.id for r in spec.raw] == list(range(34))
    assert list(spec.categories) == [
        "flat", "construction", "object", "nature", "sky", "human", "vehicle",
    ]  # fmt: skip
    raw = spec.gt_map("raw")
    assert raw[7] == 0  # road
    assert raw[26] == 13  # car
    assert spec.classes[raw[26]] == "car"
    assert raw[33] == 18  # bicycle
    for ignored in (0, 1, 2, 3, 4, 5, 6, 9, 10, 14, 15, 16, 18, 29, 30):  # parking = 9
        assert raw[ignored] == -1, ignored
    # trainIds are the evaluated raw ids, in order
    evaluated = [r.id for r in spec.raw if r.cls is not None]
    assert evaluated == [7, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 31, 32, 33]
    assert [spec.raw[i].cls for i in evaluated] == list(range(19))
    cats = dict(zip(spec.classes, (spec.categories[c] for c in spec.class_categories), strict=True))
    assert cats["road"] == cats["sidewalk"] == "flat"
    assert cats["person"] == cats["rider"] == "human"
    assert cats["car"] == cats["bicycle"] == cats["train"] == "vehicle"
    assert cats["sky"] == "sky"
    m = spec.category_matrix()
    assert m.shape == (19, 7)
    assert m.sum(axis=1).tolist() == [1] * 19
    assert m.sum(axis=0).tolist() == [2, 3, 3, 2, 1, 2, 6]
    assert spec.colors[0] == (128, 64, 128)  # road
    assert spec.colors[13] == (0, 0, 142)  # car
    # class space: trainIds with 255 ignored
    cls = spec.gt_map("class")
    assert cls[18] == 18
    assert cls[255] == -1
    assert 19 not in cls


def test_pascal_voc():
    spec = load_spec("pascal_voc")
    assert spec.num_classes == 21
    assert spec.classes[0] == "background"
    assert spec.classes[15] == "person"
    assert spec.ignore == (255,)
    assert spec.gt_map()[255] == -1
    assert not spec.has_raw
    # the devkit's colour map (VOCdevkit labelcolormap / bitget)
    assert spec.colors[0] == (0, 0, 0)
    assert spec.colors[1] == (128, 0, 0)
    assert spec.colors[2] == (0, 128, 0)
    assert spec.colors[3] == (128, 128, 0)
    assert spec.colors[4] == (0, 0, 128)
    assert spec.colors[15] == (192, 128, 128)
    assert spec.colors[20] == (0, 64, 128)
    with pytest.raises(LabelSpecError, match="no raw ids"):
        spec.gt_map("raw")


def test_ade20k():
    spec = builtin_spec("ade20k")
    assert spec.num_classes == 150
    assert spec.classes[0] == "wall"
    assert spec.classes[-1] == "flag"
    raw = spec.gt_map("raw")
    assert raw[0] == -1  # "other": ignored (reduce_zero_label)
    for i in (1, 2, 13, 150):
        assert raw[i] == i - 1
    assert 151 not in raw
    assert 255 not in raw
    assert spec.gt_map("class")[255] == -1


def test_ade20k_raw_counting_matches_reduce_zero_label():
    gt = np.array([[0, 1, 2], [150, 3, 0]], np.uint8)
    pred = np.array([[5, 1, 3], [150, 0, 1]], np.uint8)
    cm = ConfusionMatrix("ade20k", gt_ids="raw").update(gt, pred)
    assert cm.n_ignored == 2
    assert cm.counts[0, 0] == 1  # raw 1 -> class 0
    assert cm.counts[149, 149] == 1
    assert cm.counts[1, 2] == 1  # raw 2 predicted as raw 3
    assert cm.void[2] == 1  # raw 3 predicted as 0 ("other"): void


def test_unknown_builtin_and_missing_file(tmp_path):
    with pytest.raises(LabelSpecError, match="cityscapes"):
        builtin_spec("kitti")
    with pytest.raises(LabelSpecError, match="neither a built-in"):
        load_spec(str(tmp_path / "missing.json"))
    with pytest.raises(LabelSpecError, match="id space"):
        builtin_spec("cityscapes").gt_map("labelIds")  # type: ignore[arg-type]


def test_spec_round_trip_through_dict():
    for name in ("cityscapes", "pascal_voc", "ade20k"):
        spec = builtin_spec(name)
        back = LabelSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
        assert back == spec


# --- user specs ----------------------------------------------------------------------------------

ROADS = {
    "name": "roads",
    "classes": [
        {"name": "road", "color": [128, 64, 128], "category": "flat"},
        {"name": "car", "category": "vehicle"},
    ],
    "ignore": [255],
    "raw": [
        {"id": 7, "name": "road", "class": "road"},
        {"id": 26, "name": "car", "class": 1},
        {"id": 0, "name": "unlabeled", "class": None},
    ],
}

ROADS_TOML = """
name = "roads"
ignore = 255
categories = ["flat", "vehicle"]
class_categories = [0, 1]
classes = ["road", "car"]
colors = [[128, 64, 128], [0, 0, 142]]

[[raw]]
id = 7
name = "road"
class = "road"

[[raw]]
id = 26
class = 1

[[raw]]
id = 0
name = "unlabeled"
"""


def test_json_spec(tmp_path):
    path = tmp_path / "roads.json"
    path.write_text(json.dumps(ROADS))
    spec = load_spec(path)
    assert spec.name == "roads"
    assert spec.classes == ("road", "car")
    assert spec.ignore == (255,)
    assert spec.categories == ("flat", "vehicle")
    assert spec.class_categories == (0, 1)
    assert spec.colors == ((128, 64, 128), (0, 0, 0))
    assert spec.gt_map("raw") == {7: 0, 26: 1, 0: -1}
    assert spec.gt_map("class") == {0: 0, 1: 1, 255: -1}
    cm = ConfusionMatrix(str(path), gt_ids="raw")
    cm.update(np.array([7, 26, 0, 26]), np.array([7, 7, 26, 0]))
    assert cm.counts.tolist() == [[1, 0], [1, 0]]
    assert cm.void.tolist() == [0, 1]
    assert cm.n_ignored == 1


def test_toml_spec(tmp_path):
    path = tmp_path / "roads.toml"
    path.write_text(ROADS_TOML)
    spec = load_spec(path)
    assert spec.name == "roads"
    assert spec.ignore == (255,)
    assert spec.class_categories == (0, 1)
    assert spec.colors == ((128, 64, 128), (0, 0, 142))
    assert spec.gt_map("raw") == {7: 0, 26: 1, 0: -1}
    assert spec.raw[1].name == "26"


def test_spec_name_defaults_to_file_stem(tmp_path):
    path = tmp_path / "my_labels.json"
    path.write_text(json.dumps({"classes": ["a", "b"]}))
    assert load_spec(path).name == "my_labels"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", ["cannot be read"]),
        ('["a", "b"]', ["expected an object"]),
        ('{"names": ["a"]}', ["unknown key", "names"]),
        ('{"ignore": [255]}', ["missing 'classes'"]),
    ],
)
def test_unreadable_spec_files(tmp_path, text, words):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(LabelSpecError) as info:
        load_spec(path)
    for w in words:
        assert w in str(info.value)


def test_bad_toml_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("classes = [")
    with pytest.raises(LabelSpecError, match=r"bad\.toml"):
        load_spec(path)


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: LabelSpec("s", ["a", "b", "a"]), ["duplicate class name", "'a'"]),
        (lambda: LabelSpec("s", []), ["no classes"]),
        (lambda: LabelSpec("s", ["a"], ignore=[255, 255]), ["duplicate ignore value", "255"]),
        (
            lambda: LabelSpec("s", ["a"], raw=[RawLabel(3, "x", 0), RawLabel(3, "y", None)]),
            ["duplicate raw id", "3"],
        ),
        (lambda: LabelSpec("s", ["a", "b"], ignore=[1]), ["ignore value", "[1]", "0..1"]),
        (lambda: LabelSpec("s", ["a", "b"], ignore=[0, 255]), ["[0]", "also class ids"]),
        (lambda: LabelSpec("s", ["a"], raw=[RawLabel(5, "x", 1)]), ["raw id 5", "class 1", "0..0"]),
        (lambda: LabelSpec("s", ["a"], raw=[RawLabel(5, "x", -1)]), ["class -1"]),
        (
            lambda: LabelSpec("s", ["a", "b"], categories=["x"], class_categories=[0, 1]),
            ["'b'", "category index 1", "0..0"],
        ),
        (
            lambda: LabelSpec("s", ["a", "b"], categories=["x"], class_categories=[0]),
            ["categories for 1 classes but 2"],
        ),
        (
            lambda: LabelSpec("s", ["a"], categories=["x", "x"], class_categories=[0]),
            ["duplicate category"],
        ),
        (lambda: LabelSpec("s", ["a", "b"], colors=[(0, 0, 0)]), ["1 colours for 2 classes"]),
        (lambda: LabelSpec("s", ["a"], colors=[(0, 0, 256)]), ["'a'", "(0, 0, 256)"]),
        (lambda: LabelSpec("s", ["a"], colors=[(0, 0)]), ["three integers"]),
        (
            lambda: LabelSpec.from_dict(
                {"classes": [{"name": "a", "category": "q"}], "categories": ["x"]}
            ),
            ["'a'", "'q'", "not in categories"],
        ),
        (
            lambda: LabelSpec.from_dict({"classes": ["a"], "raw": [{"id": 1, "class": "zz"}]}),
            ["raw[0]", "'zz'", "unknown class"],
        ),
        (lambda: LabelSpec.from_dict({"classes": [3]}), ["classes[0]"]),
        (lambda: LabelSpec.from_num_classes(0), ["at least 1"]),
        (lambda: LabelSpec.from_num_classes(2.5), ["must be an int"]),
    ],
)
def test_validation_errors_name_the_problem(make, words):
    with pytest.raises(LabelSpecError) as info:
        make()
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, SegiouError)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_spec_file_errors_name_the_file(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text(json.dumps({"classes": ["a", "a"]}))
    with pytest.raises(LabelSpecError, match="dup"):
        load_spec(path)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        # a class without a category, listed before one with a category
        ({"classes": [{"name": "a"}, {"name": "b", "category": "x"}]}, ["'a'", "category"]),
        # a class without a category, listed after one with a category
        ({"classes": [{"name": "a", "category": "x"}, {"name": "b"}]}, ["categor"]),
        ({"classes": ["a"], "raw": [{"name": "no id", "class": 0}]}, ["raw[0]", "'id'"]),
        ({"classes": ["a"], "raw": [7]}, ["raw[0]"]),
        ({"classes": "abc"}, ["classes", "list"]),
    ],
)
def test_malformed_user_specs(spec, words):
    with pytest.raises(LabelSpecError) as info:
        LabelSpec.from_dict(spec, source="user.json")
    for w in words:
        assert w in str(info.value), (w, str(info.value))


@pytest.mark.parametrize("value", [np.int64(254), np.uint8(254), [np.int32(254)]])
def test_numpy_integer_ignore_values(tmp_path, value):
    cm = ConfusionMatrix(3, ignore_index=value)
    assert cm.spec.ignore == (254,)
    cm.update(np.array([0, 254]), np.array([1, 1]))
    assert cm.n_ignored == 1
    cm.save(tmp_path / "state.json")  # JSON-safe
    voc = ConfusionMatrix("pascal_voc", ignore_index=value)
    assert voc.spec.ignore == (254,)


def test_with_ignore_replaces_ignore_values():
    spec = builtin_spec("pascal_voc")
    assert spec.with_ignore(254).ignore == (254,)
    assert spec.with_ignore([254, -1]).ignore == (254, -1)
    assert spec.with_ignore([]).ignore == ()
    with pytest.raises(LabelSpecError, match="also class ids"):
        spec.with_ignore(3)
    cm = ConfusionMatrix("pascal_voc", ignore_index=[254, -1])
    assert cm.spec.ignore == (254, -1)
    assert cm.spec.classes == spec.classes
