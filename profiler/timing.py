"""Repeated timing: warm-up, then enough runs for a stable median, reported with its spread.

Short operations are batched (``inner`` calls per timed run) so that a run lasts at least
``min_run_s``: timer resolution and, on GPUs, launch and synchronization overhead would otherwise
dominate. Every run ends with ``sync`` (``torch.cuda.synchronize`` on GPUs) so asynchronous work
is inside the measurement.
"""

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypedDict, TypeVar

import numpy as np


@dataclass(frozen=True)
class TimingPolicy:
    warmup: int = 2
    min_repeats: int = 7
    max_repeats: int = 60
    min_total_s: float = 0.25  # keep repeating (up to max_repeats) until this much was timed
    min_run_s: float = 2e-4


QUICK = TimingPolicy(warmup=1, min_repeats=5, max_repeats=7, min_total_s=0.0, min_run_s=1e-4)
DEFAULT = TimingPolicy()
FULL = TimingPolicy(warmup=3, min_repeats=10, max_repeats=200, min_total_s=1.0, min_run_s=1e-3)
# Collectives on CPU ranks (gloo) are bimodal (a run finds its peer ready, or waits a scheduler
# tick for it) with a spread of 10x between the modes: their trimmed mean needs more repeats
# than the default gives compute kernels (60) to be repeatable to ~10-15% per sample. Each run
# costs a barrier and a compute burst besides the collective: about 30 s of the default
# profile's minute on a 2-core machine.
CPU_COLLECTIVES = TimingPolicy(
    warmup=2, min_repeats=10, max_repeats=90, min_total_s=0.4, min_run_s=2e-4
)


class TimingFields(TypedDict):
    """``Timed.as_fields``: the ``costmodel.observations.Timing`` fields of a sample."""

    median_s: float
    low_s: float
    high_s: float
    repeats: int
    trimmed_mean_s: float
    runs_s: list[float]


@dataclass(frozen=True)
class Timed:
    median_s: float
    low_s: float
    high_s: float
    repeats: int
    trimmed_mean_s: float
    runs_s: tuple[float, ...]  # every timed run, in order: the raw samples the profile keeps

    def as_fields(self) -> TimingFields:
        return {
            "median_s": self.median_s,
            "low_s": self.low_s,
            "high_s": self.high_s,
            "repeats": self.repeats,
            "trimmed_mean_s": self.trimmed_mean_s,
            "runs_s": list(self.runs_s),
        }


def _noop() -> None:
    return None


def summarize(durations: list[float]) -> Timed:
    """Median, 10th/90th percentiles, and the mean of the runs between those percentiles."""
    values = np.asarray(durations, dtype=float)
    median = float(np.median(values))
    low = min(median, float(np.percentile(values, 10)))
    high = max(median, float(np.percentile(values, 90)))
    inside = values[(values >= low) & (values <= high)]
    return Timed(
        median_s=median,
        low_s=low,
        high_s=high,
        repeats=len(durations),
        trimmed_mean_s=float(inside.mean()) if inside.size else median,
        runs_s=tuple(float(value) for value in values),
    )


def measure(
    operation: Callable[[], object],
    policy: TimingPolicy = DEFAULT,
    sync: Callable[[], object] = _noop,
) -> Timed:
    """Median seconds of one ``operation`` call over repeated, synchronized runs."""
    for _ in range(policy.warmup):
        operation()
    sync()
    start = time.perf_counter()
    operation()
    sync()
    first = time.perf_counter() - start
    inner = max(1, min(1000, math.ceil(policy.min_run_s / max(first, 1e-9))))
    durations: list[float] = []
    total = 0.0
    while len(durations) < policy.min_repeats or (
        total < policy.min_total_s and len(durations) < policy.max_repeats
    ):
        start = time.perf_counter()
        for _ in range(inner):
            operation()
        sync()
        elapsed = time.perf_counter() - start
        durations.append(elapsed / inner)
        total += elapsed
    return summarize(durations)


class _Median(Protocol):
    @property
    def median_s(self) -> float: ...


Sample = TypeVar("Sample", bound=_Median)


def middle_round(rounds: Sequence[Sequence[Sample]]) -> list[Sample]:
    """The same measurements taken in several rounds: per position, the round whose median is
    the middle one (the median of medians, so a round that a busy spell of the machine slowed
    down, or that ran unusually fast, is outvoted by the others)."""
    if len(rounds) == 1:
        return list(rounds[0])
    return [
        sorted(takes, key=lambda sample: sample.median_s)[len(takes) // 2]
        for takes in zip(*rounds, strict=True)
    ]
