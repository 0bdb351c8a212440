"""Shared test settings: a Hypothesis profile that keeps the core suite fast on 2 cores.

``HYPOTHESIS_PROFILE=thorough pytest ...`` runs many more examples.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # the first example compiles the kernels
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "print_blob": True,
}
settings.register_profile("ci", max_examples=60, **_COMMON)
settings.register_profile("thorough", max_examples=500, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small demo dataset (3 Cityscapes-like images of 64 x 128, labelIds) in Zarr."""
    from segiou.testing.datasets import write_demo_store

    return write_demo_store(tmp_path_factory.mktemp("demo") / "d.zarr", images=3, height=64,
                            width=128, seed=5)  # fmt: skip
