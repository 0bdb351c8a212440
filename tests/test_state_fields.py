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
