"""Prometheus metrics of ``segiou serve`` (prometheus-client, one registry per server)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["OUTCOMES", "Metrics"]

#: Outcomes of a batch request.
OUTCOMES = ("counted", "duplicate", "refused")
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The server's counters, gauge and histogram.

    Parameters
    ----------
    open_runs : callable
        Returns the number of open runs (read at each scrape).
    """

    def __init__(self, open_runs: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        self.batches = Counter(
            "segiou_batches", "Batch requests answered, by outcome (counted, duplicate, refused)",
            ["outcome"], registry=self.registry,
        )  # fmt: skip
        for outcome in OUTCOMES:
            self.batches.labels(outcome)
        self.pixels = Counter(
            "segiou_pixels", "Pixels of the batches counted (duplicates not included)",
            registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "segiou_request_duration_seconds", "Time from request to reply, by method and route",
            ["method", "route"], buckets=_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.commit_batches = Histogram(
            "segiou_commit_batches", "Batches committed per transaction (group commit)",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=self.registry,
        )  # fmt: skip
        self.commit_seconds = Histogram(
            "segiou_commit_seconds", "Time of one durable commit (fsync included)",
            buckets=_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.open_runs = Gauge("segiou_open_runs", "Runs open for batches", registry=self.registry)
        self.open_runs.set_function(lambda: float(open_runs()))

    def commit(self, batches: int, seconds: float) -> None:
        """Record one commit of ``batches`` batches that took ``seconds``."""
        self.commit_batches.observe(batches)
        self.commit_seconds.observe(seconds)

    def batch(self, outcome: str, pixels: int = 0) -> None:
        """Count one batch request and, when it was counted, its pixels."""
        self.batches.labels(outcome).inc()
        if outcome == "counted":
            self.pixels.inc(pixels)
