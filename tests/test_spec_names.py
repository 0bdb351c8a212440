"""Spec files: every name is a string, refused otherwise naming the file, the entry and the field.

Found by an adversarial review: ``{"name": 5}`` was read as the class ``'5'``, ``null`` as
``'None'``, and a spec name, raw names and category names were made strings the same way,
though the README says validation refuses names that are not strings.
"""

from __future__ import annotations

import json

import pytest

from segiou.errors import LabelSpecError
from segiou.labels import LabelSpec, load_spec


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"classes": [{"name": 5}, "b"]}, r"classes\[0\] field 'name' is 5"),
        ({"classes": [{"name": None}, "b"]}, r"classes\[0\] field 'name' is None"),
        ({"name": 7, "classes": ["a", "b"]}, r"'name' is 7"),
        ({"name": None, "classes": ["a", "b"]}, r"'name' is None"),
        (
            {"classes": ["a", "b"], "raw": [{"id": 3, "name": 12, "class": 0}]},
            r"raw\[0\] field 'name' is 12",
        ),
        (
            {"classes": ["a", "b"], "categories": [1, 2], "class_categories": [0, 1]},
            r"categories\[0\] is 1",
        ),
        (
            {
                "classes": ["a", "b"],
                "categories": ["x", "y"],
                "class_categories": [0, 1],
                "raw": [{"id": 3, "class": None, "category": 1}],
            },
            r"raw\[0\] field 'category' is 1",
        ),
    ],
)
def test_names_that_are_not_strings_are_refused_naming_file_entry_and_field(spec, says):
    with pytest.raises(LabelSpecError, match=r"^spec\.json: " + says):
        LabelSpec.from_dict(spec, source="spec.json")


def test_a_spec_file_with_a_number_for_a_name_is_refused(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"classes": ["a", {"name": 3}]}))
    with pytest.raises(LabelSpecError, match=r"s\.json: classes\[1\] field 'name' is 3"):
        load_spec(f)


def test_string_names_still_load_and_a_raw_id_without_a_name_is_named_by_its_id():
    s = LabelSpec.from_dict(
        {"name": "n", "classes": ["a", {"name": "b", "category": "c"}], "categories": ["c"],
         "class_categories": [0, 0], "raw": [{"id": 3, "class": 0}, {"id": 4, "name": "r"}]},
        source="x.json",
    )  # fmt: skip
    assert (s.name, s.classes, s.categories) == ("n", ("a", "b"), ("c",))
    assert [r.name for r in s.raw] == ["3", "r"]
    assert LabelSpec.from_dict({"classes": ["a"]}, source="dir/my_spec.json").name == "my_spec"
