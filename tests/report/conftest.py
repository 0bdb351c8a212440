"""Fixtures of the report tests (the data itself is in ``tests/report_data.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from report_data import HOSTILE_IMAGES, hostile_spec, make_state, v2_document

from segiou import ConfusionMatrix, evaluate


@pytest.fixture
def hostile_state() -> ConfusionMatrix:
    return make_state(hostile_spec(), names=list(HOSTILE_IMAGES))[0]


@pytest.fixture
def hostile_v2(hostile_state: ConfusionMatrix) -> dict[str, Any]:
    return v2_document(evaluate(hostile_state, preset="cityscapes").to_dict())
