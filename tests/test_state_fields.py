"""Hand-edited states: every field of every version is checked for presence and consistency.

Found by an adversarial review of saved states: a version-3 state with its version-3 fields cut
loaded without its Boundary IoU and iIoU counts (and then merged with a state the original
refuses), and a Boundary IoU width edited in a file merged with states of that width.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from segiou import ConfusionMatrix
from segiou.errors import CheckpointError


def _js(cm: ConfusionMatrix) -> dict:
    return json.loads(json.dumps(cm.to_dict()))


def _square() -> np.ndarray:
    g = np.zeros((8, 8), np.uint8)
    g[2:6, 2:6] = 1
    return g


def _v3(per_image: bool = False, boundary: object = "1px") -> dict:
    g = _square()
    kw = {"names": ["a"]} if per_image else {}
    cm = ConfusionMatrix(2, ignore_index=255, boundary=boundary, per_image=per_image)
    cm.update(g[None], g[None], key="a", **kw)
    return _js(cm)


@pytest.mark.parametrize(
    "cut",
    [("boundary",), ("instances",), ("absent_chunks",), ("boundary", "instances", "absent_chunks")],
)
def test_a_version_3_state_missing_a_version_3_field_is_refused(cut):
    d = _v3()
    assert d["version"] == 3
    for f in cut:
        del d[f]
    with pytest.raises(CheckpointError, match=r"missing field\(s\) \[.*'" + cut[0]):
        ConfusionMatrix.from_dict(d)


@pytest.mark.parametrize("field", ["width", "pixels_used", "counts", "images"])
def test_a_boundary_object_missing_a_field_is_refused(field):
    d = _v3(per_image=True)
    del d["boundary"][field]
    with pytest.raises(CheckpointError, match=rf"field 'boundary' misses \['{field}'\]"):
        ConfusionMatrix.from_dict(d)
    d = _v3(per_image=True)
    d["boundary"]["zz"] = 1
    with pytest.raises(CheckpointError, match=r"field 'boundary' has unknown field\(s\) \['zz'\]"):
        ConfusionMatrix.from_dict(d)


def test_per_image_boundary_entries_cut_to_null_are_refused():
    d = _v3(per_image=True)
    d["boundary"]["images"] = None
    with pytest.raises(CheckpointError, match=r"field 'boundary\.images' is 'None'"):
        ConfusionMatrix.from_dict(d)


def test_boundary_nulled_in_a_state_that_holds_nothing_else_of_version_3_is_refused():
    d = _v3()
    d["boundary"] = None  # the only version-3 content: Boundary IoU gone without a word
    with pytest.raises(CheckpointError, match="holds no Boundary IoU counts"):
        ConfusionMatrix.from_dict(d)


def test_ragged_boundary_counts_are_refused_naming_the_field():
    d = _v3()
    del d["boundary"]["counts"][0][1]  # numpy raised its own ValueError here
    with pytest.raises(
        CheckpointError,
        match=r"field 'boundary\.counts' must hold non-negative integer counts of shape \(3, 2\)",
    ):
        ConfusionMatrix.from_dict(d)


def test_a_boundary_width_edited_away_from_the_width_counted_is_refused():
    d = _v3()
    assert d["boundary"]["pixels_used"] == [1]
    d["boundary"]["width"] = {"pixels": 5}
    with pytest.raises(CheckpointError, match=r"'boundary\.width' says 5 px.*\[1\] px"):
        ConfusionMatrix.from_dict(d)
    d["boundary"]["pixels_used"] = [0]  # no image gets a width of 0
    with pytest.raises(CheckpointError, match=r"boundary\.pixels_used"):
        ConfusionMatrix.from_dict(d)


def test_the_states_the_checks_describe_still_load():
    for d in (_v3(), _v3(per_image=True), _v3(boundary=0.1), _v3(per_image=True, boundary=0.5)):
        cm = ConfusionMatrix.from_dict(copy.deepcopy(d))
        assert _js(cm) | {"writer": d["writer"]} == d
    empty = ConfusionMatrix(2, boundary="3px")  # no image: no width used yet
    assert ConfusionMatrix.from_dict(_js(empty)) == empty


def _odd_state() -> dict:
    """Per-image rows of two images, one unexpected ground-truth value (9) in image 1."""
    g = np.zeros((2, 3, 3), np.uint8)
    g[1, 0, 0] = 9
    cm = ConfusionMatrix(3, ignore_index=255, per_image=True, on_unexpected="count")
    cm.update(g, g, key="a", names=["x", "y"])
    d = _js(cm)
    assert d["image_rows"]["unexpected"] == [[1, "gt", 9, 1]]
    return d


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ([True, "gt", 9, 1], "has the image True"),  # bool is an int: it crashed in totals()
        ([2, "gt", 9, 1], "has the image 2"),
        ([1.0, "gt", 9, 1], "has the image 1.0"),
        ([1, "GT", 9, 1], "has the side 'GT'"),
        ([1, ["gt"], 9, 1], r"has the side \['gt'\]"),
        ([1, "gt", True, 1], "has the value True"),
        ([1, "gt", "9", 1], "has the value '9'"),
        ([1, "gt", 2**64, 1], "has the value"),
        ([1, "gt", 9, True], "holds 'True'"),
        ([1, "gt", 9, -1], "holds '-1'"),
        ([1, "gt", 9, 0], "holds a count of 0"),
        ([1, "gt", 9], r"is \"\[1, 'gt', 9\]\""),
        ([1, "gt", 9, 1, 0], "expected \\[image, side, value, count\\]"),
    ],
)
def test_odd_per_image_unexpected_entries_are_refused_naming_the_field(entry, says):
    d = _odd_state()
    d["image_rows"]["unexpected"] = [entry]
    with pytest.raises(CheckpointError, match=r"field 'image_rows\.unexpected\[0\]' .*" + says):
        ConfusionMatrix.from_dict(d)


def test_a_repeated_per_image_unexpected_entry_is_refused():
    d = _odd_state()
    d["image_rows"]["unexpected"] = [[1, "gt", 9, 1], [1, "gt", 9, 1]]
    d["unexpected"]["gt"]["9"] = 2
    d["image_rows"]["entries"]["count"][-1] += 1  # the (K+1, K+1) cell of image 1
    d["pixels"] += 1
    with pytest.raises(CheckpointError, match=r"unexpected\[1\]' holds the same image"):
        ConfusionMatrix.from_dict(d)


@pytest.mark.parametrize("column", ["image", "gt", "pred", "count"])
def test_a_bool_in_a_per_image_entry_column_is_refused(column):
    d = _odd_state()
    e = d["image_rows"]["entries"]
    assert e[column][0] in (0, 1, 9)
    e[column][0] = True  # numpy read [true, 0, ...] as integers: true was 1
    with pytest.raises(CheckpointError, match=rf"image_rows\.entries\.{column}' holds 'True'"):
        ConfusionMatrix.from_dict(d)


@pytest.mark.parametrize(("key", "says"), [("09", "'09'"), (" 9", "' 9'"), ("True", "'True'")])
def test_an_unexpected_value_not_written_as_an_integer_is_refused(key, says):
    d = _odd_state()
    d["unexpected"]["gt"] = {key: 1}
    with pytest.raises(CheckpointError, match=rf"'unexpected\.gt' has the value {says}"):
        ConfusionMatrix.from_dict(d)
    d["unexpected"]["gt"] = {"9": 1}
    assert ConfusionMatrix.from_dict(d).unexpected_gt == {9: 1}


def _ignore_state() -> dict:
    """Ignored pixels (255), a void prediction (255 at valid ground truth), an unexpected 9."""
    g = np.array([[0, 1], [255, 9]], np.uint8)
    p = np.array([[255, 1], [0, 9]], np.uint8)
    cm = ConfusionMatrix(2, ignore_index=255, on_unexpected="count").update(g, p, key="a")
    d = _js(cm)
    assert (d["ignored"], sum(d["void"]), d["unexpected"]["gt"]) == (1, 1, {"9": 1})
    return d


def test_ignored_and_void_pixels_without_an_ignore_value_in_the_spec_are_refused():
    d = _ignore_state()
    d["labels"]["ignore"] = []  # an edit; ignore values edited to others cannot be told
    with pytest.raises(CheckpointError, match="field 'ignored' holds 1 pixels, but the spec has"):
        ConfusionMatrix.from_dict(d)
    g = np.array([[0, 1]], np.uint8)
    only_void = _js(ConfusionMatrix(2, ignore_index=255).update(g, g * 255, key="a"))
    assert (only_void["ignored"], only_void["void"]) == (0, [0, 1])
    only_void["labels"]["ignore"] = []
    with pytest.raises(CheckpointError, match="field 'void' holds 1 pixels, but the spec has"):
        ConfusionMatrix.from_dict(only_void)


def test_a_value_the_spec_maps_counted_as_unexpected_is_refused():
    d = _ignore_state()
    d["labels"]["ignore"] = [255, 9]  # 9 was counted as unexpected: the spec was edited
    with pytest.raises(CheckpointError, match=r"'unexpected\.gt' counts the value\(s\) \[9\]"):
        ConfusionMatrix.from_dict(d)
    d = _ignore_state()
    d["unexpected"]["gt"] = {"1": 1}  # class 1 counted as unexpected: the counts were edited
    with pytest.raises(CheckpointError, match=r"'unexpected\.gt' counts the value\(s\) \[1\]"):
        ConfusionMatrix.from_dict(d)


@pytest.mark.parametrize("field", ["name", "classes", "ignore"])
def test_a_state_spec_missing_a_field_every_written_spec_has_is_refused(field):
    d = _ignore_state()
    del d["labels"][field]
    with pytest.raises(CheckpointError, match=rf"field 'labels' misses \['{field}'\]"):
        ConfusionMatrix.from_dict(d)


def test_raw_ids_of_no_class_are_void_and_ignored_values():
    from segiou.labels import builtin_spec

    cm = ConfusionMatrix(builtin_spec("cityscapes"), gt_ids="raw", pred_ids="raw")
    g = np.array([[7, 0]], np.uint8)  # 0: "unlabeled", a raw id of no class
    cm.update(g, g[:, ::-1], key="a")
    d = _js(cm)
    d["labels"]["ignore"] = []
    assert ConfusionMatrix.from_dict(d).n_ignored == 1


def _instances_state(per_image: bool = False) -> dict:
    """Cityscapes raw ids: two cars (26001, 26002) and a person (24000), one image."""
    from segiou.labels import builtin_spec

    cm = ConfusionMatrix(builtin_spec("cityscapes"), gt_ids="raw", pred_ids="raw",
                         instances=True, per_image=per_image)  # fmt: skip
    g = np.full((1, 4, 4), 26, np.uint8)
    g[0, 3] = 24
    inst = np.full((1, 4, 4), 26001, np.int32)
    inst[0, 2] = 26002
    inst[0, 3] = 24000
    p = g.copy()
    p[0, 0, :2] = 27  # truck: a vehicle, not a car
    cm.update(g, p, key="k", instances=inst, **({"names": ["a"]} if per_image else {}))
    d = _js(cm)
    rec = d["instances"]["records"]
    assert (rec["id"], rec["class"]) == ([24000, 26001, 26002], [11, 13, 13])
    assert (rec["tp"], rec["category_tp"]) == ([4, 6, 4], [4, 8, 4])
    return d


@pytest.mark.parametrize(
    ("field", "index", "value", "says"),
    [
        ("class", 1, 14, "holds instance 26001 as class 14, .* of label 26, which is class 13"),
        ("id", 1, 27001, "holds instance 27001 as class 13, .* which is class 14"),
        ("id", 1, 999, "holds instance 999 as class 13, .* below 1000"),
        ("id", 1, 99001, "of label 99, no label of the spec"),
        ("category_tp", 1, 5, "gives instance 26001 6 pixels predicted as its class and 5"),
        ("category_tp", 0, 3, "gives instance 24000 4 pixels .* and 3"),
    ],
)
def test_instance_records_the_counting_could_not_have_made_are_refused(field, index, value, says):
    d = _instances_state()
    d["instances"]["records"][field][index] = value
    with pytest.raises(CheckpointError, match=says):
        ConfusionMatrix.from_dict(d)


def test_category_false_positives_outside_the_instance_categories_are_refused():
    from segiou.labels import builtin_spec

    cm = ConfusionMatrix(builtin_spec("cityscapes"), gt_ids="raw", pred_ids="raw",
                         instances=True, per_image=True)  # fmt: skip
    g = np.full((1, 2, 2), 7, np.uint8)  # road
    p = g.copy()
    p[0, 0, 0] = 29  # caravan: void, of the category vehicle, predicted at road
    cm.update(g, p, key="k", names=["a"], instances=np.zeros((1, 2, 2), np.int32))
    d = _js(cm)
    cats = d["labels"]["categories"]
    vehicle, flat = cats.index("vehicle"), cats.index("flat")
    assert d["instances"]["category_fp"][vehicle] == 1
    e = copy.deepcopy(d)
    for row in (e["instances"]["category_fp"], e["instances"]["images"]["a"]):
        row[vehicle], row[flat] = 0, 1  # moved to a category without instances: sums agree
    with pytest.raises(CheckpointError, match="false positives of category 'flat'"):
        ConfusionMatrix.from_dict(e)
    assert ConfusionMatrix.from_dict(d).extras.category_fp[vehicle] == 1


def _two_images_and_a_label() -> dict:
    """Boundary IoU per image: 'x' (class 0 only), 'y' (a square of class 1), a labelled one."""
    blank = np.zeros((8, 8), np.uint8)
    cm = ConfusionMatrix(2, ignore_index=255, boundary="1px", per_image=True)
    cm.update(np.stack([blank, _square()]), np.stack([blank, _square()]), key="a",
              names=["x", "y"])  # fmt: skip
    cm.update(blank, blank, key="b")  # no names: the label 'b', no per-image entries
    d = _js(cm)
    assert sorted(d["boundary"]["images"]) == ["x", "y"]
    assert d["boundary"]["images"]["x"][1][1] == 0 < d["boundary"]["images"]["y"][1][1]
    return d


def test_per_image_boundary_counts_moved_to_an_image_without_those_pixels_are_refused():
    d = _two_images_and_a_label()
    x, y = d["boundary"]["images"]["x"], d["boundary"]["images"]["y"]
    x[1][1], y[1][1] = y[1][1], 0  # |G_d| of class 1 moved from y to x: the sums agree
    x[0][1], y[0][1] = y[0][1], 0  # (the intersection too: within both boundaries)
    x[2][1], y[2][1] = y[2][1], 0
    with pytest.raises(CheckpointError, match=r"image 'x' 12 intersections .* class '1', more"):
        ConfusionMatrix.from_dict(d)


def test_boundary_totals_beyond_the_pixels_of_the_images_without_entries_are_refused():
    d = _two_images_and_a_label()
    d["boundary"]["counts"][1][1] += 1  # the labelled image has no pixel of class 1
    with pytest.raises(CheckpointError, match=r"leaves the images without per-image entries 1 "):
        ConfusionMatrix.from_dict(d)
    assert ConfusionMatrix.from_dict(_two_images_and_a_label()).n_images == 3


def test_category_false_positives_moved_to_an_image_without_void_predictions_are_refused():
    from segiou.labels import builtin_spec

    cm = ConfusionMatrix(builtin_spec("cityscapes"), gt_ids="raw", pred_ids="raw",
                         instances=True, per_image=True)  # fmt: skip
    g = np.full((2, 2, 2), 7, np.uint8)  # road
    p = g.copy()
    p[0, 0, 0] = 29  # caravan (void, vehicle) at road in image 'a' only
    cm.update(g, p, key="k", names=["a", "b"], instances=np.zeros((2, 2, 2), np.int32))
    d = _js(cm)
    rows = d["instances"]["images"]
    vehicle = d["labels"]["categories"].index("vehicle")
    assert (rows["a"][vehicle], rows["b"][vehicle]) == (1, 0)
    rows["a"][vehicle], rows["b"][vehicle] = 0, 1  # 'b' predicted nothing void
    with pytest.raises(CheckpointError, match=r"image 'b' 1 category false positives, more"):
        ConfusionMatrix.from_dict(d)


def test_per_image_rows_without_their_given_flags_or_with_an_empty_name_are_refused():
    g = np.zeros((2, 2, 2), np.uint8)
    d = _js(ConfusionMatrix(2, per_image=True).update(g, g, key="k", names=["#0", "b"]))
    assert d["image_rows"]["given"] == [True, True]
    e = copy.deepcopy(d)
    e["image_rows"]["given"] = None  # was read as version 1's guess: '#0' no longer a name
    with pytest.raises(CheckpointError, match=r"field 'image_rows\.given' is 'None'"):
        ConfusionMatrix.from_dict(e)
    e = copy.deepcopy(d)
    e["image_rows"]["names"][1] = ""  # "" is what instance records of no named image carry
    with pytest.raises(CheckpointError, match=r"'image_rows\.names' holds an empty name \(row 1"):
        ConfusionMatrix.from_dict(e)
    assert ConfusionMatrix.from_dict(d).n_images == 2


@pytest.mark.parametrize("cut", ["x", "all"])
def test_per_image_boundary_entries_of_a_named_image_cut_are_refused(cut):
    d = _two_images_and_a_label()
    if cut == "all":
        d["boundary"]["images"] = {}  # loaded: the totals were within the images' pixels
    else:
        del d["boundary"]["images"]["x"]
    with pytest.raises(CheckpointError, match=r"'boundary\.images' has no entry for the named"):
        ConfusionMatrix.from_dict(d)
