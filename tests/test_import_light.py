"""``import segiou`` stays light: heavy optional packages load only when a feature needs them."""

from __future__ import annotations

import json
import subprocess
import sys

#: Packages the core (counting, the accumulator) must not import: the Dask engine, storage
#: adapters, image decoders, progress/console output and the HTML report's templates and plots
#: load on first use only.
HEAVY = ("dask", "distributed", "zarr", "PIL", "tifffile", "rich", "tqdm", "matplotlib", "jinja2")

_SCRIPT = """
import json, sys
import numpy as np
import segiou

loaded = {"import": sorted(m for m in HEAVY if m in sys.modules)}
cm = segiou.ConfusionMatrix(3, ignore_index=255)
cm.update(np.array([[0, 1], [2, 255]], np.uint8), np.array([[0, 2], [2, 1]], np.uint8), key="a")
assert cm.counts.sum() == 3, cm.counts
cm.to_dict()
loaded["update"] = sorted(m for m in HEAVY if m in sys.modules)
print(json.dumps(loaded))
"""


def test_import_and_update_do_not_load_heavy_packages():
    code = f"HEAVY = {HEAVY!r}\n{_SCRIPT}"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == {"import": [], "update": []}, loaded
