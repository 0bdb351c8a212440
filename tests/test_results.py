"""Result documents read back (Result.from_dict) and the rules a result echoes."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from segiou import evaluate
from segiou.conventions import PRESETS
from segiou.results import Result

CM = np.array([[8, 2, 0], [1, 9, 0], [0, 0, 0]])


@pytest.mark.parametrize("preset", ["mmseg", "segiou", "sklearn_all_labels"])
def test_a_document_of_another_version_keeps_its_own_rules(preset: str) -> None:
    d = evaluate(CM, preset=preset, beta=1.0).to_dict()
    d["convention"]["description"] += " (older wording)"  # as from another segiou version
    d["convention"]["rules"] = [*d["convention"]["rules"][:-1], "an older rule, in its words"]
    want = copy.deepcopy(d)
    back = Result.from_dict(d)
    assert back.to_dict() == want
    assert back.convention.rules() == want["convention"]["rules"]
    assert back.convention.fbeta_from_pr == PRESETS[preset].fbeta_from_pr


def test_f_beta_from_precision_and_recall_is_told_by_the_documents_rule() -> None:
    d = evaluate(CM, preset="mmseg", beta=1.0).to_dict()
    d["convention"]["name"] = "a preset of another version"
    assert Result.from_dict(d).convention.fbeta_from_pr
    d = evaluate(CM, preset="segiou", beta=1.0).to_dict()
    d["convention"]["name"] = "mmseg"  # the rule wins over the name
    d["convention"]["description"] = "other"
    assert not Result.from_dict(d).convention.fbeta_from_pr


def test_the_echoed_rules_say_how_mean_accuracy_is_averaged() -> None:
    r = evaluate(CM, preset="sklearn_all_labels")
    recall = r.per_class["recall"]
    assert list(recall) == [0.8, 0.9, 0.0]
    assert r.summary["mean_accuracy"] == pytest.approx(0.85)  # over classes with ground truth
    rules = r.to_dict()["convention"]["rules"]
    (acc,) = [rule for rule in rules if rule.startswith("mean accuracy")]
    assert "classes with ground-truth pixels in every preset" in acc
    assert "reported as 0.0, is left out" in acc
    for conv in PRESETS.values():
        assert any("mean accuracy (mean recall) runs over the classes with ground-truth pixels"
                   in rule for rule in conv.rules())  # fmt: skip
