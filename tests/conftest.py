"""Shared test settings: a Hypothesis profile that keeps the core suite fast on 2 cores.

``HYPOTHESIS_PROFILE=thorough pytest ...`` runs many more examples.
"""

from __future__ import annotations

import os
import signal
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

# A suite started in the background by a non-interactive shell (``pytest &`` in a script, as
# .ci/run does for one of its runs) inherits SIGINT ignored, and so would every ``segiou``
# process it starts: the tests of what Ctrl-C does then see no KeyboardInterrupt and no exit
# 130. Python's own handler, as an interactive start has it (children get the default).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small demo dataset (3 Cityscapes-like images of 64 x 128, labelIds) in Zarr."""
    from segiou.testing.datasets import write_demo_store

    return write_demo_store(tmp_path_factory.mktemp("demo") / "d.zarr", images=3, height=64,
                            width=128, seed=5)  # fmt: skip
