"""``ProgressTracker``: the ``progress`` callback of ``run_search``, read by the heartbeat."""

import threading
import time
from dataclasses import dataclass

from search.objectives import Metric


@dataclass(frozen=True)
class ProgressSnapshot:
    trials_done: int
    trials_budget: int | None
    best_value: float | None
    eta_s: float | None
    run_s: float
    """Seconds the search has run, earlier claims included (its ``timeout_s`` budget)."""


class ProgressTracker:
    """Latest (done, budget, best) of the run, and the ETA at this run's pace.

    ``done`` counts the whole study (earlier runs and other workers included), so the pace is
    measured from where this run started: ``trials_done`` as the search row recorded it.
    The best value only improves: a resumed run's own best starts again from nothing.
    ``run_s`` is the time earlier claims ran (stored with each heartbeat), so the run time
    reported covers the whole search; ``timeout_s`` is what is left of its budget.
    """

    def __init__(
        self,
        *,
        metric: Metric,
        trials_done: int = 0,
        best_value: float | None = None,
        timeout_s: float | None = None,
        run_s: float = 0.0,
    ) -> None:
        self._metric = metric
        self._run_before = run_s
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._start_done = trials_done
        self._done = trials_done
        self._budget: int | None = None
        self._best = best_value
        self._eta_s: float | None = None

    def __call__(self, done: int, total: int | None, best: float | None) -> None:
        now = time.monotonic()
        with self._lock:
            self._done = done
            self._budget = total
            if best is not None and (self._best is None or self._better(best, self._best)):
                self._best = best
            self._eta_s = self._eta(now)

    def _better(self, value: float, than: float) -> bool:
        return value > than if self._metric.direction == "maximize" else value < than

    def _eta(self, now: float) -> float | None:
        elapsed = now - self._start
        estimates = []
        progressed = self._done - self._start_done
        if self._budget is not None and progressed > 0 and elapsed > 0:
            estimates.append(max(0, self._budget - self._done) * elapsed / progressed)
        if self._timeout_s is not None:
            estimates.append(max(0.0, self._timeout_s - elapsed))
        return min(estimates) if estimates else None

    def snapshot(self) -> ProgressSnapshot:
        with self._lock:
            return ProgressSnapshot(
                trials_done=self._done,
                trials_budget=self._budget,
                best_value=self._best,
                eta_s=self._eta_s,
                run_s=self._run_before + time.monotonic() - self._start,
            )
