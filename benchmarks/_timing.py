"""Timing helpers shared by the benchmark scripts (medians; compile time in a fresh process)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn()`` over ``repeat`` runs, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def first_call_seconds(code: str, warm_runs: int = 1) -> dict[str, float]:
    """Run ``code`` (which prints its own elapsed seconds last) in fresh processes.

    First with an empty Numba cache (``cold``), then with the cache it filled (``warm``: the
    median of ``warm_runs`` processes; ``warm_min``/``warm_max``: their range).

    Python's own bytecode cache is warm in both, as after ``pip install`` (which compiles every
    module): a first process, with a Numba cache of its own, writes it into a temporary
    ``PYTHONPYCACHEPREFIX``. Without it, an environment that sets ``PYTHONDONTWRITEBYTECODE``
    (this one does) compiles segiou's ~30 modules from source in every process (~80 ms here),
    which no installed segiou pays.
    """
    out: dict[str, float] = {}
    warm: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pyc")
        runs = [("bytecode", str(Path(tmp) / "numba-bytecode-run"))]
        runs += [("cold", str(Path(tmp) / "numba"))]
        runs += [("warm", str(Path(tmp) / "numba"))] * warm_runs
        for label, cache in runs:
            res = subprocess.run([sys.executable, "-c", code], env=env | {"NUMBA_CACHE_DIR": cache},
                                 check=True, capture_output=True, text=True)  # fmt: skip
            seconds = float(res.stdout.strip().splitlines()[-1])
            if label == "cold":
                out["cold"] = seconds
            elif label == "warm":
                warm.append(seconds)
    out["warm"] = statistics.median(warm)
    out["warm_min"], out["warm_max"] = min(warm), max(warm)
    return out


def interleaved_seconds(
    fns: dict[str, Callable[[], object]], rounds: int
) -> dict[str, list[float]]:
    """Wall times of each ``fn()``, run in turn once per round (after one warm-up call each).

    On a shared, noisy machine every round sees the same conditions for every method, so the
    median of per-round ratios (:func:`median_ratio`) is steadier than a ratio of medians taken
    one method after another.
    """
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def median_ratio(num: list[float], den: list[float]) -> float:
    """Median over rounds of ``num[i] / den[i]``."""
    return statistics.median(a / b for a, b in zip(num, den, strict=True))


def noop(*args: object) -> None:
    """A task that does nothing (timing a scheduler; stdlib-only module, cheap to import)."""


def noop_sum(parts: list[object]) -> None:
    """A sum of partials that does nothing."""
