"""Label specs: the built-in tables, user specs in JSON and TOML, and validation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from segiou import ConfusionMatrix, LabelSpec, RawLabel, builtin_spec, evaluate, load_spec
from segiou.errors import LabelRangeError, LabelSpecError, SegiouError

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
    assert raw[255] == -1  # the ignore value applies to raw ids too (as reduce_zero_label's 255)
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
        {"name": "car", "color": [0, 0, 142], "category": "vehicle"},
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
    assert spec.colors == ((128, 64, 128), (0, 0, 142))
    assert spec.gt_map("raw") == {7: 0, 26: 1, 0: -1, 255: -1}  # ignore 255 in raw ids too
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
    assert spec.gt_map("raw") == {7: 0, 26: 1, 0: -1, 255: -1}  # ignore 255 in raw ids too
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


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_deeply_nested_spec_file_is_refused_by_name(tmp_path, suffix):
    # tomllib recurses: 3000 nested arrays (6 KB) raised RecursionError, not a LabelSpecError
    path = tmp_path / f"deep{suffix}"
    nested = "[" * 3000 + "]" * 3000
    path.write_text(f"classes = {nested}\n" if suffix == ".toml" else f'{{"classes": {nested}}}')
    with pytest.raises(LabelSpecError, match=r"deep\.(toml|json).*nested too deeply"):
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
        # a misspelt key inside an entry was dropped: 'clas' left raw id 7 without a class
        # (its pixels ignored), 'colour' or 'categry' lost the colour or the category
        (
            {"classes": ["road"], "raw": [{"id": 7, "clas": "road"}]},
            ["raw[0]", "unknown key(s) ['clas']"],
        ),
        ({"classes": [{"name": "a", "colour": [1, 2, 3]}]}, ["classes[0]", "['colour']"]),
        ({"classes": [{"name": "a", "categry": "x"}]}, ["classes[0]", "['categry']"]),
        # given two ways, disagreeing: the per-class one won silently
        (
            {
                "classes": [
                    {"name": "road", "category": "flat"},
                    {"name": "car", "category": "vehicle"},
                ],
                "categories": ["flat", "vehicle"],
                "class_categories": [1, 1],
            },
            ["'road' has category 'flat'", "give categories one way"],
        ),
        ({"classes": [{"name": "a", "category": 1}]}, ["'a' has category 1", "expected a name"]),
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


# --- integer fields ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        # a non-integer class index would miscount every pixel of the raw id as void
        ({"classes": ["a", "b"], "raw": [{"id": 3, "class": 0.5}]}, ["raw[0]", "'class'", "0.5"]),
        ({"classes": ["a", "b"], "raw": [{"id": 3, "class": 1.0}]}, ["raw[0]", "'class'", "1.0"]),
        ({"classes": ["a", "b"], "raw": [{"id": 3, "class": True}]}, ["raw[0]", "'class'", "True"]),
        ({"classes": ["a"], "raw": [{"id": 3, "class": [0]}]}, ["raw[0]", "'class'", "[0]"]),
        # 7.9 was truncated to 7, then reported as a duplicate of raw id 7
        (
            {"classes": ["a", "b"], "raw": [{"id": 7, "class": 0}, {"id": 7.9, "class": 1}]},
            ["raw[1]", "'id'", "7.9"],
        ),
        ({"classes": ["a"], "raw": [{"id": "x", "class": 0}]}, ["raw[0]", "'id'", "'x'"]),
        ({"classes": ["a"], "raw": [{"id": True, "class": 0}]}, ["raw[0]", "'id'", "True"]),
        ({"classes": ["a"], "ignore": ["x"]}, ["ignore[0]", "'x'", "integer"]),
        ({"classes": ["a"], "ignore": [255, 254.5]}, ["ignore[1]", "254.5"]),
        ({"classes": ["a"], "ignore": "x"}, ["'ignore'", "'x'"]),
        ({"classes": ["a"], "ignore": 254.5}, ["'ignore'", "254.5"]),
        ({"classes": ["a"], "ignore": True}, ["'ignore'", "True"]),
        ({"classes": ["a"], "colors": [[0, 0, "x"]]}, ["colors[0]", "'x'"]),
        ({"classes": ["a"], "colors": [[0, 0, 12.7]]}, ["colors[0]", "12.7"]),
        ({"classes": [{"name": "a", "color": [0, 0]}]}, ["classes[0]", "'color'"]),
        ({"classes": ["a"], "raw": [{"id": 1, "class": 0, "color": 5}]}, ["raw[0]", "'color'"]),
        (
            {"classes": ["a"], "categories": ["x"], "class_categories": [0.0]},
            ["class_categories[0]", "0.0"],
        ),
    ],
)
def test_non_integer_spec_fields(tmp_path, spec, words):
    with pytest.raises(LabelSpecError) as info:
        LabelSpec.from_dict(spec, source="user.json")
    for w in ["user.json", *words]:
        assert w in str(info.value), (w, str(info.value))
    assert "duplicate" not in str(info.value)
    # the same from a file: the message names the file
    path = tmp_path / "bad_fields.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(LabelSpecError) as info:
        load_spec(path)
    for w in [str(path), *words]:
        assert w in str(info.value), (w, str(info.value))


def test_non_integer_spec_file_fields_name_file_entry_and_field(tmp_path):
    path = tmp_path / "ids.toml"
    path.write_text('classes = ["a"]\n[[raw]]\nid = "x"\nclass = 0\n')
    with pytest.raises(LabelSpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert str(path) in msg
    assert "raw[0]" in msg
    assert "'id'" in msg
    assert "invalid literal" not in msg


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: LabelSpec("s", ["a", "b"], raw=[RawLabel(3, "x", 0.5)]), ["raw id 3", "0.5"]),
        (lambda: LabelSpec("s", ["a", "b"], raw=[RawLabel(3, "x", True)]), ["raw id 3", "True"]),
        (lambda: LabelSpec("s", ["a", "b"], raw=[RawLabel(7.9, "x", 0)]), ["raw id 7.9"]),
        (lambda: LabelSpec("s", ["a"], ignore=[254.5]), ["ignore", "254.5"]),
        (lambda: LabelSpec("s", ["a"], ignore=[True]), ["ignore", "True"]),
        (lambda: LabelSpec("s", ["a"], categories=["x"], class_categories=[0.5]), ["0.5"]),
        (lambda: LabelSpec.from_num_classes(3, ignore=254.5), ["ignore", "254.5"]),
        (lambda: builtin_spec("pascal_voc").with_ignore(254.5), ["ignore", "254.5"]),
        (lambda: ConfusionMatrix(3, ignore_index=254.5), ["ignore", "254.5"]),
    ],
)
def test_non_integer_values_in_code(make, words):
    with pytest.raises(LabelSpecError) as info:
        make()
    for w in [*words, "integer"]:
        assert w in str(info.value), (w, str(info.value))


@pytest.mark.parametrize(("make", "words"), [
    (lambda: LabelSpec("bin", "ab"), ["classes 'ab' is not a list of strings"]),
    (lambda: LabelSpec("x", ["a"], categories="fv", class_categories=[0]), ["categories 'fv'"]),
    (lambda: LabelSpec("x", [1, 2]), ["classes [1, 2] is not a list of strings"]),
    (lambda: LabelSpec(5, ["a"]), ["name is not a string"]),
    (lambda: LabelSpec("x", ["a"], raw=(RawLabel(3, 7, 0),)), ["raw id 3 has the name 7"]),
])  # fmt: skip
def test_names_in_code_are_strings(make, words):
    """A string was split into letters (2 classes from "ab"); numbers made states that saved
    but did not load, or loaded back as another spec."""
    with pytest.raises(LabelSpecError) as info:
        make()
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    spec = LabelSpec("x", np.array(["a", "b"]))  # numpy strings: stored as plain ones
    assert ConfusionMatrix.from_dict(ConfusionMatrix(spec).to_dict()).spec == spec


def test_numpy_integer_raw_ids_are_stored_as_int():
    spec = LabelSpec(
        "s", ["a", "b"], categories=["x"], class_categories=[np.int64(0), np.uint8(0)],
        raw=[RawLabel(np.int64(3), "x", np.int32(1)), RawLabel(np.uint8(4), "y", None)],
    )  # fmt: skip
    assert spec.raw == (RawLabel(3, "x", 1), RawLabel(4, "y", None))
    assert all(type(r.id) is int for r in spec.raw)
    assert type(spec.raw[0].cls) is int
    assert all(type(c) is int for c in spec.class_categories)
    assert LabelSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


# --- ignore values in raw id space ---------------------------------------------------------------


def test_ignore_index_applies_to_raw_ids():
    # labelIds: 7 road, 26 car, 0 unlabeled (not evaluated); 254 is the user's ignore value
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", ignore_index=254)
    assert cm.spec.gt_map("raw")[254] == -1
    cm.update(np.array([7, 254, 0, 26]), np.array([7, 7, 7, 254]))
    assert cm.n_ignored == 2  # 254 (the ignore value) and 0 (not evaluated)
    assert cm.counts[0, 0] == 1
    assert cm.void[13] == 1  # 254 predicted on a car: void, a false negative
    assert cm.counts.sum() + cm.void.sum() == 2
    r = evaluate(cm)
    assert r.counting["ignore"] == [254]
    rule = r.counting["ignore_rule"]
    assert "[254]" in rule
    assert "raw id" in rule
    assert "[0, 1, 2, 3, 4, 5, 6, 9, 10, 14, 15, 16, 18, 29, 30]" in rule
    # class ids: the rule names only the ignore values
    rc = evaluate(ConfusionMatrix("cityscapes", ignore_index=254))
    assert "raw id" not in rc.counting["ignore_rule"]
    assert "[254]" in rc.counting["ignore_rule"]


def test_results_of_raw_ids_say_the_mapping_they_went_through():
    from segiou.compare import compare_reports
    from segiou.errors import CheckpointError
    from segiou.report import Report, render_markdown

    def result(spec: LabelSpec, gt: list[int] = [7, 8, 0], **kw: str) -> dict:  # noqa: B006
        cm = ConfusionMatrix(spec, **kw).update(np.array(gt), np.array([7, 8, 8]))
        return evaluate(cm).to_dict()

    spec = LabelSpec("roads", ["road", "walk"], ignore=[255],
                     raw=(RawLabel(7, "r", 0), RawLabel(8, "w", 1), RawLabel(0, "u", None)))  # fmt: skip
    d = result(spec, gt_ids="raw")
    assert d["counting"]["raw_ids"] == {"0": None, "7": 0, "8": 1}
    assert (
        result(spec, [0, 1, 1], gt_ids="class", pred_ids="raw")["counting"]["raw_ids"]
        == (d["counting"]["raw_ids"])
    )
    assert "raw_ids" not in evaluate(ConfusionMatrix(spec)).to_dict()["counting"]
    md = render_markdown(Report.from_result(d))
    assert "the class index of each raw id: 7 is 0, 8 is 1; no class: 0" in md
    # the same spec name mapping otherwise (a spec file edited under its name): not comparable
    swapped = LabelSpec("roads", ["road", "walk"], ignore=[255],
                        raw=(RawLabel(7, "r", 1), RawLabel(8, "w", 0), RawLabel(0, "u", None)))  # fmt: skip
    other = result(swapped, gt_ids="raw")
    other["classes"] = d["classes"]  # (only the mapping differs)
    other["summary"] = d["summary"]
    with pytest.raises(CheckpointError, match="raw ids map to other classes"):
        compare_reports(other, d)
    del other["counting"]["raw_ids"]  # a report written before: compared as before
    compare_reports(other, d)


def test_builtin_ignore_255_applies_to_raw_ids():
    # ade20k raw masks: 0 "other" and 255 are ignored, as by mmsegmentation's reduce_zero_label
    cm = ConfusionMatrix("ade20k", gt_ids="raw").update(
        np.array([0, 255, 1, 150], np.uint8), np.array([1, 1, 1, 255], np.uint8)
    )
    assert cm.n_ignored == 2
    assert cm.counts[0, 0] == 1
    assert cm.void[149] == 1
    cs = ConfusionMatrix("cityscapes", gt_ids="raw").update(
        np.array([255, 7], np.uint8), np.array([7, 7], np.uint8)
    )
    assert cs.n_ignored == 1


def test_no_ignore_values_in_raw_ids():
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", ignore_index=[])
    assert 255 not in cm.spec.gt_map("raw")
    with pytest.raises(LabelRangeError, match="255"):
        cm.update(np.array([255, 7], np.uint8), np.array([7, 7], np.uint8))
    rule = evaluate(cm).counting["ignore_rule"]
    assert "raw id the spec does not evaluate" in rule
    assert "ignore value" not in rule
    assert evaluate(ConfusionMatrix(2, ignore_index=[])).counting["ignore_rule"] == (
        "no ground-truth value is ignored"
    )


def test_ignore_value_that_is_an_evaluated_raw_id_is_refused():
    # class space: 26 is no class (19 trainIds); raw ids: 26 is "car", evaluated
    spec = builtin_spec("cityscapes").with_ignore(26)
    assert spec.gt_map("class")[26] == -1
    with pytest.raises(LabelSpecError) as info:
        spec.gt_map("raw")
    for w in ("ignore value 26", "raw id 26", "'car'", "class 13"):
        assert w in str(info.value), (w, str(info.value))
    with pytest.raises(LabelSpecError, match="ignore value 26"):
        ConfusionMatrix("cityscapes", gt_ids="raw", ignore_index=26)
    # an ignore value that is a raw id the spec does not evaluate agrees with the raw table
    assert builtin_spec("cityscapes").with_ignore(30).gt_map("raw")[30] == -1


def test_classes_with_and_without_colours_are_refused():
    d = {"name": "roads", "classes": [{"name": "road", "color": [128, 64, 128]}, {"name": "car"}]}
    with pytest.raises(LabelSpecError, match=r"class\(es\) \['car'\] have no 'color'"):
        LabelSpec.from_dict(d)
    d["classes"][1]["color"] = [0, 0, 142]
    assert LabelSpec.from_dict(d).colors == ((128, 64, 128), (0, 0, 142))


def test_colours_given_two_ways_are_refused():
    d = {"name": "x", "classes": ["a", {"name": "b", "color": [1, 2, 3]}], "colors": [[0, 0, 1]]}
    with pytest.raises(LabelSpecError, match="give colours one way"):
        LabelSpec.from_dict(d)
