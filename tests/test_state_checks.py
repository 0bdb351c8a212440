"""A saved state is checked exactly on load, and merged extras never wrap int64.

Found by an adversarial review of state persistence: every sum a loader compares is exact (an
int64 sum of counts each below 2**63 wraps silently), Boundary IoU counts and category false
positives are bounded by the state's own pixels, and a merge refuses what would pass 2**63 - 1.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from segiou import ConfusionMatrix
from segiou.errors import CheckpointError, DuplicateImageError


def _three_images() -> dict:
    a = ConfusionMatrix(2, per_image=True)
    g = np.zeros((3, 2, 2), np.uint8)
    a.update(g, g, key="k", names=["a", "b", "c"])
    return json.loads(json.dumps(a.to_dict()))


def test_rows_whose_int64_sum_wraps_are_refused():
    d = _three_images()
    assert d["image_rows"]["entries"]["count"] == [4, 4, 4]
    c = (2**64 + 12) // 3  # each below 2**63; the three add up to 12 modulo 2**64
    d["image_rows"]["entries"]["count"] = [c, c, 2**64 + 12 - 2 * c]
    with pytest.raises(CheckpointError, match="more than the state's 12"):
        ConfusionMatrix.from_dict(d)


def test_version_1_rows_whose_int64_sum_wraps_are_refused():
    d = _three_images()
    c = (2**64 + 12) // 3
    d["version"] = 1
    d["image_rows"] = {
        "names": ["a", "b", "c"],
        "tp": [[c, 0], [c, 0], [2**64 + 12 - 2 * c, 0]],
        "fp": [[0, 0]] * 3,
        "fn": [[0, 0]] * 3,
        "ignored": [0] * 3,
        "unexpected": [0] * 3,
    }
    with pytest.raises(CheckpointError, match="more than the state's 12"):
        ConfusionMatrix.from_dict(d)


def test_unexpected_values_whose_int64_sum_wraps_are_refused():
    cm = ConfusionMatrix(2, per_image=True, on_unexpected="count")
    g = np.zeros((1, 2, 2), np.uint8)
    p = g.copy()
    p[0, 0, 0] = 9  # one unexpected predicted pixel
    cm.update(g, p, key="k", names=["a"])
    d = json.loads(json.dumps(cm.to_dict()))
    assert d["image_rows"]["unexpected"] == [[0, "pred", 9, 1]]
    big = 2**63 - 1
    d["image_rows"]["unexpected"] = [[0, "pred", 9, big], [0, "pred", 8, big], [0, "pred", 7, 3]]
    with pytest.raises(CheckpointError, match="more than the state's 4"):
        ConfusionMatrix.from_dict(d)


def test_instance_pixels_whose_int64_sum_wraps_are_refused():
    from segiou.labels import builtin_spec

    spec = builtin_spec("cityscapes")
    cm = ConfusionMatrix(spec, gt_ids="raw", pred_ids="raw", per_image=True, instances=True)
    g = np.full((1, 4, 4), 26, np.uint8)  # car
    inst = np.full((1, 4, 4), 26001, np.int32)
    inst[0, :1] = 26002
    inst[0, 1:2] = 26003
    cm.update(g, g, key="k", names=["a"], instances=inst)
    d = json.loads(json.dumps(cm.to_dict()))
    rec = d["instances"]["records"]
    assert sorted(rec["pixels"]) == [4, 4, 8]
    c = (2**64 + 16) // 3  # each below 2**63; the three add up to 16 modulo 2**64
    rec["pixels"] = [c, c, 2**64 + 16 - 2 * c]
    rec["tp"] = rec["category_tp"] = [0, 0, 0]
    with pytest.raises(CheckpointError, match="instance pixels, more than the 16 pixels it has"):
        ConfusionMatrix.from_dict(d)


def test_a_wrapping_state_saved_to_a_file_is_refused(tmp_path):
    d = _three_images()
    c = (2**64 + 12) // 3
    d["image_rows"]["entries"]["count"] = [c, c, 2**64 + 12 - 2 * c]
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    with pytest.raises(CheckpointError, match=r"^.*s\.json.*more than"):
        ConfusionMatrix.load(f)
    ok = copy.deepcopy(_three_images())
    assert ConfusionMatrix.from_dict(ok).n_pixels == 12


def _boundary_state() -> dict:
    g = np.random.default_rng(0).integers(0, 2, (16, 16)).astype(np.uint8)
    p = np.random.default_rng(1).integers(0, 2, (16, 16)).astype(np.uint8)
    a = ConfusionMatrix(2, boundary="2px")
    a.update(g, p, key="a")
    return json.loads(json.dumps(a.to_dict()))


@pytest.mark.parametrize(
    ("row", "says"),
    [(0, "intersections"), (1, "ground-truth boundaries"), (2, "predicted boundaries")],
)
def test_boundary_counts_beyond_the_state_pixels_are_refused(row, says):
    d = _boundary_state()
    counts = d["boundary"]["counts"]
    counts[row][0] = 200  # 256 pixels, about 128 of class 0: no boundary of 200 fits
    if row == 0:  # an intersection within both boundaries, beyond the true positives
        counts[1][0] = counts[2][0] = 200
    with pytest.raises(CheckpointError, match=f"class '0' 200 {says}"):
        ConfusionMatrix.from_dict(d)


def test_boundary_counts_of_a_thousand_in_a_256_pixel_state_are_refused():
    d = _boundary_state()
    d["boundary"]["counts"] = [[1000, 1000], [1000, 1000], [1000, 1000]]
    with pytest.raises(CheckpointError, match=r"boundary\.counts"):
        ConfusionMatrix.from_dict(d)
    assert ConfusionMatrix.from_dict(_boundary_state()).n_pixels == 256


def test_per_image_boundary_rows_whose_int64_sum_wraps_are_refused():
    g = np.zeros((3, 4, 4), np.uint8)
    a = ConfusionMatrix(2, boundary="1px", per_image=True)
    a.update(g, g, key="k", names=["a", "b", "c"])
    d = json.loads(json.dumps(a.to_dict()))
    c = (2**64 + 36) // 3
    rows = d["boundary"]["images"]
    for name, v in zip("abc", (c, c, 2**64 + 36 - 2 * c), strict=True):
        rows[name] = [[v, 0], [v, 0], [v, 0]]
    d["boundary"]["counts"] = [[36, 0], [36, 0], [36, 0]]  # what the wrapped sum gives
    with pytest.raises(CheckpointError, match=r"boundary\.images"):
        ConfusionMatrix.from_dict(d)


def test_category_false_positives_beyond_the_void_predictions_are_refused():
    from segiou.labels import builtin_spec

    spec = builtin_spec("cityscapes")
    cm = ConfusionMatrix(spec, gt_ids="raw", pred_ids="raw", instances=True)
    g = np.full((1, 4, 4), 26, np.uint8)  # car
    p = g.copy()
    p[0, 0] = 30  # caravan: a void prediction in the vehicle category (at ground truth car)
    cm.update(g, p, key="k", instances=np.full((1, 4, 4), 26001, np.int32))
    d = json.loads(json.dumps(cm.to_dict()))
    fp = d["instances"]["category_fp"]
    assert sum(fp) == 0, "a caravan at a car is no category false positive (same category)"
    fp[0] = 2**40
    with pytest.raises(CheckpointError, match="category_fp"):
        ConfusionMatrix.from_dict(d)


def test_merging_boundary_counts_past_int64_is_refused():
    from segiou.errors import CountOverflowError

    big = 2**62
    x = ConfusionMatrix(2, boundary="1px")
    y = ConfusionMatrix(2, boundary="1px")
    for s, key in ((x, "a"), (y, "b")):  # no file holds these: set in memory
        s.extras.boundary_total[:] = big
        s.keys.add(key)
    with pytest.raises(CountOverflowError, match="Boundary IoU counts"):
        x + y
    assert (x.extras.boundary_total == big).all()


def _absent(name: str, given: bool, absent: int, key: str, value: int) -> ConfusionMatrix:
    """A per-image state of one image with ``absent`` chunks read as the fill value."""
    from segiou._scores import count_batch

    cm = ConfusionMatrix(2, per_image=True)
    g = np.full((1, 4, 4), value, np.uint8)
    t, _ = count_batch(g, g, cm._lookup, None, None, where="x", on_unexpected="raise",
                       per_image=True, threads=None, labels=False)  # fmt: skip
    cm.add_tally(t, key=key, names=[name], n_images=1, names_given=given, absent=[absent])
    return cm


def test_a_label_that_is_another_images_name_keeps_its_absent_chunks():
    a = _absent("000000", False, 3, "A", 0)  # an unnamed store: the label 000000
    b = _absent("000000", True, 1, "B", 1)  # an image named 000000
    c = _absent("000000", True, 1, "C", 1)  # the same named image again (sampler padding)
    one, two = (a + b) + c, c + (a + b)
    assert one == two
    assert one.extras.absent == two.extras.absent == {"000000": 4}
    assert (b + a).extras.absent == (a + b).extras.absent == {"000000": 4}
    d = _absent("000000", True, 1, "D", 1)  # and again
    for state in (one, a + b):  # saved and loaded: the label's and the name's stay apart
        back = ConfusionMatrix.from_dict(json.loads(json.dumps(state.to_dict())))
        assert back == state
        assert "absent_chunks_labels" in state.to_dict()
        assert (back + d).extras.absent == {"000000": 4}
        assert (d + back).extras.absent == {"000000": 4}


def test_an_image_on_both_sides_with_other_absent_chunks_is_refused_whatever_the_order():
    x = _absent("img", True, 2, "X", 1)  # the same image (equal counts), 2 chunks absent...
    y = _absent("img", True, 0, "Y", 1)  # ... and none: which is right cannot be told
    for a, b in ((x, y), (y, x)):
        with pytest.raises(DuplicateImageError, match=r"'img' \(absent chunks"):
            a + b
    assert (x + _absent("img", True, 2, "Z", 1)).extras.absent == {"img": 2}  # equal: once


def test_absent_chunks_of_states_written_before_load_as_they_did():
    a = _absent("000000", False, 3, "A", 0)
    b = _absent("img", True, 2, "B", 1)
    d = (a + b).to_dict()
    assert "absent_chunks_labels" not in d  # no string is both: written as before
    assert d["absent_chunks"] == {"000000": 3, "img": 2}
    back = ConfusionMatrix.from_dict(d)
    assert back.extras.absent_labels == {"000000": 3}
    assert back.extras.absent_named == {"img": 2}
    assert (back + _absent("img", True, 2, "C", 1)).extras.absent == {"000000": 3, "img": 2}


def test_ignore_values_in_another_order_merge_and_compare_equal(tmp_path):
    from segiou.service.wire import canonical_state

    g = np.array([[0, 1], [254, 255]], np.uint8)
    a = ConfusionMatrix(3, ignore_index=[255, 254]).update(g, g, key="a")
    b = ConfusionMatrix(3, ignore_index=[254, 255]).update(g, g, key="b")
    assert (a + b) == (b + a)
    assert (a + b).n_ignored == 4
    a.save(tmp_path / "a.json")
    assert ConfusionMatrix.load(tmp_path / "a.json") + b == a + b
    assert a.spec.ignore == (255, 254)  # the order given is kept (colour masks read the first)
    other_a = ConfusionMatrix(3, ignore_index=[254, 255]).update(g, g, key="a")
    assert other_a == a
    assert canonical_state(other_a) == canonical_state(a)
    with pytest.raises(Exception, match=r"ignore: \(255, 254\) vs \(254, 253\)"):
        a + ConfusionMatrix(3, ignore_index=[254, 253])


def test_a_spec_difference_is_named_in_the_merge_message():
    from dataclasses import replace

    from segiou.errors import IncompatibleMatrixError
    from segiou.labels import builtin_spec

    s = builtin_spec("cityscapes")
    sizes = tuple((c, v * 2) for c, v in s.instance_sizes)
    with pytest.raises(IncompatibleMatrixError, match=r"differences: instance_sizes\[0\]: \("):
        ConfusionMatrix(s) + ConfusionMatrix(replace(s, instance_sizes=sizes))
    raw = list(s.raw)
    raw[-1] = replace(raw[-1], name=raw[-1].name + "X")
    with pytest.raises(IncompatibleMatrixError) as err:
        ConfusionMatrix(s) + ConfusionMatrix(replace(s, raw=tuple(raw)))
    assert f"raw[{len(raw) - 1}]: " in str(err.value)
    assert f"name={raw[-1].name!r}" in str(err.value)  # the differing entry, whole
    with pytest.raises(IncompatibleMatrixError, match=r"raw: 34 vs 33 entries \(from raw\[33\]"):
        ConfusionMatrix(s) + ConfusionMatrix(replace(s, raw=tuple(raw[:-1])))


def test_an_extras_field_error_names_its_source_once(tmp_path):
    d = _boundary_state()
    d["boundary"]["counts"] = "x"
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    with pytest.raises(CheckpointError) as err:
        ConfusionMatrix.load(f)
    assert str(err.value).startswith(f"{f}: field 'boundary.counts' must hold")
    with pytest.raises(CheckpointError, match=r"^state: field 'boundary\.counts' must hold"):
        ConfusionMatrix.from_dict(d)
