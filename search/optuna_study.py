"""Run an Optuna study over a trial space, resumably, alone or with other workers.

The loop is ask/tell rather than ``study.optimize`` so that a batch of trials is priced in one
vectorized call, and so cancellation, deadlines and progress are checked between batches. Each
trial records the plan it priced (user attributes ``plan`` and ``priced``: batch, memory ratio,
metrics) and its memory overshoot as a constraint (``trial.set_constraint``), so samplers
learn the memory boundary and any process can rebuild the ranking from the storage alone.

With shared RDB storage several workers serve one study: the trial budget is the study's (all
workers together; a race can overshoot it by at most one batch per worker), trials left running
by a killed worker are failed by heartbeat (``fail_stale_trials``, when the study opens and
every heartbeat interval while it runs: Optuna fails a trial whose heartbeat is older than the
grace period and does not retry it) and the budget counts finished trials only, so an orphan
never takes a trial's place, and the study remembers a fingerprint of the request so a resumed
run cannot mix two different searches.
"""

import hashlib
import json
import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import optuna
from optuna.exceptions import ExperimentalWarning, UpdateFinishedTrialError
from optuna.storages import BaseStorage, RDBStorage, fail_stale_trials
from optuna.trial import FrozenTrial, TrialState

from costmodel.specs import Plan
from search.objectives import Evaluation, Metric
from search.params import Parameter, neighborhood, random_point, trades
from search.request import SearchRequest
from search.result import Status

ProgressFn = Callable[[int, int | None, float | None], None]
StopFn = Callable[[], bool]

# Trials asked per batch. TPE models every finished trial, so it asks one at a time; NSGA-II
# breeds from the previous generation and random needs no model, so they batch.
BATCH = {"tpe": 1, "nsga2": 16, "random": 256}
NSGA2_POPULATION = 32
# A trial is priced in milliseconds, so a short heartbeat is cheap; stale after the grace period,
# which is shorter than the service's default lease (60 s): a killed worker's trials are failed
# by the time its search could be taken over. (The service's workers run studies in memory,
# ``search.study_storage``, where resuming fails what was left running.)
HEARTBEAT_INTERVAL_S = 5
HEARTBEAT_GRACE_S = 30
_FINGERPRINT_ATTR = "autopar_request"
# What the trial budget counts: finished trials. Running ones may be orphans of a killed worker.
_COUNTED = (TrialState.COMPLETE, TrialState.PRUNED)
_WAITING = (TrialState.WAITING,)


class TrialSpace(Protocol):
    """Decodes trials into candidates, prices them, proposes warm-start params."""

    parameters: list[Parameter]
    # Local-search trials after each new plan from the sampler (besides those bought by
    # repeats): rugged spaces (heterogeneous skeletons) gain from it, smooth ones do not.
    local_moves_per_trial: int
    priced: int  # plans priced so far (a candidate may price several variants)
    fitting: int  # of those, plans within the memory cap

    # Candidates are hashable, so a plan proposed twice is priced once.
    def suggest(self, trial: optuna.Trial) -> Any:
        """Sample a candidate for ``trial``."""

    def decode(self, raw: dict[str, Any]) -> Any:
        """The candidate of a trial's parameters."""

    def evaluate(self, candidates: Sequence[Any]) -> list[Evaluation]:
        """Price the candidates, one evaluation each."""

    def seeds(self, metrics: Sequence[Metric]) -> list[dict[str, Any]]:
        """Trial parameters to enqueue first (warm start)."""


@dataclass
class StudyOutcome:
    """The evaluations of a study's completed trials, its trial count, name and status."""

    evaluations: list[tuple[int, Evaluation]]  # (trial number, evaluation), completed trials
    trials: int  # finished trials in the study
    study_name: str
    status: Status  # completed | stopped | timeout


def fingerprint(request: SearchRequest) -> str:
    """SHA-256 of what defines the search (``SearchRequest.fingerprint_fields``)."""
    text = json.dumps(request.fingerprint_fields(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def make_sampler(name: str, seed: int | None) -> optuna.samplers.BaseSampler:
    """The Optuna sampler ``name`` (tpe, nsga2 or random), seeded."""
    if name == "tpe":
        # Multivariate TPE models the dims jointly (tp x pp x dp trade off against each other);
        # constant_liar keeps parallel workers from piling onto one point.
        return optuna.samplers.TPESampler(
            seed=seed, multivariate=True, constant_liar=True, n_startup_trials=20
        )
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=NSGA2_POPULATION)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"sampler: '{name}' does not run an Optuna study")


def resolve_storage(storage: str | BaseStorage | None) -> BaseStorage | None:
    """A URL becomes an RDBStorage with heartbeats (so a killed worker's trials are reclaimed)."""
    if isinstance(storage, str):
        with _quiet_heartbeat():
            return RDBStorage(
                storage, heartbeat_interval=HEARTBEAT_INTERVAL_S, grace_period=HEARTBEAT_GRACE_S
            )
    return storage


@contextmanager
def _quiet_heartbeat() -> Iterator[None]:
    """Heartbeats with ask/tell are deliberate here (each trial records one when asked; see the
    module docstring): Optuna's notices that the feature is experimental and meant for
    ``Study.optimize`` would only alarm users."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
        yield


def open_study(
    request: SearchRequest,
    metrics: Sequence[Metric],
    sampler: optuna.samplers.BaseSampler,
    storage: BaseStorage | None,
    study_name: str | None,
) -> optuna.Study:
    """Create or load the study of ``request`` (named by its fingerprint unless ``study_name``); a
    ``ValueError`` when a study of that name holds another search."""
    marker = fingerprint(request)
    name = study_name or f"autopar-{marker[:16]}"
    study = optuna.create_study(
        storage=storage,
        study_name=name,
        sampler=sampler,
        directions=[metric.direction for metric in metrics],
        load_if_exists=True,
    )
    existing = study.user_attrs.get(_FINGERPRINT_ATTR)
    if existing is None:
        study.set_user_attr(_FINGERPRINT_ATTR, marker)
    elif existing != marker:
        raise ValueError(
            f"study_name: study '{name}' holds a different search (its request differs); use "
            "a new study name"
        )
    return study


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _record(trial: optuna.Trial, evaluation: Evaluation) -> None:
    # Two attributes (each is a storage write): the plan, and what it was priced at.
    trial.set_user_attr("plan", evaluation.plan.model_dump(mode="json", exclude_none=True))
    priced = {
        "global_batch_size": evaluation.global_batch_size,
        "memory_ratio": _finite(evaluation.memory_ratio),
        **{key: _finite(value) for key, value in evaluation.metrics.items()},
    }
    trial.set_user_attr("priced", priced)
    # > 0 violates: the share of the allowed memory the plan overshoots by (capped: a plan
    # breaking a structural rule, which the spaces never produce, counts as far out).
    trial.set_constraint("memory", min(evaluation.memory_ratio, 1e6) - 1.0)


def evaluation_of(trial: FrozenTrial) -> Evaluation | None:
    """The evaluation stored on a finished trial, or None when it has none."""
    attrs = trial.user_attrs
    if "plan" not in attrs or "priced" not in attrs:
        return None
    priced = dict(attrs["priced"])
    batch = int(priced.pop("global_batch_size"))
    ratio = priced.pop("memory_ratio")
    return Evaluation(
        plan=Plan.model_validate(attrs["plan"]),
        global_batch_size=batch,
        metrics={k: float("nan") if v is None else float(v) for k, v in priced.items()},
        memory_ratio=float("inf") if ratio is None else float(ratio),
    )


def _objective_values(evaluation: Evaluation, metrics: Sequence[Metric]) -> list[float]:
    values = list(evaluation.values(metrics))
    # NaN would fail the trial; the request validator guarantees prices/tokens exist, so this
    # only guards a malformed estimate.
    return [
        v if math.isfinite(v) else (-1e300 if m.direction == "maximize" else 1e300)
        for v, m in zip(values, metrics, strict=True)
    ]


class _Polish:
    """Extra trials spent where the sampler repeats itself.

    Once TPE has converged it keeps proposing plans it already priced. Each repeat buys a few
    trials elsewhere, enqueued so they are ordinary trials of the study (no sampling cost, in the
    dashboard, seen by the sampler): an iterated local search that only runs on time the sampler
    would have wasted. Moves come from, in turn:

    1. the neighbourhoods of the best plans so far: one parameter one step away, then pairs of
       integer parameters traded one step against each other (dp up, cp down);
    2. at a local optimum of those, a climber: a random restart that is hill-climbed the same
       way, replaced by a new restart once it stops improving. Restarts reach basins the
       sampler has given up on; climbing them makes the restart count.
    """

    ELITE = 5  # plans whose neighbourhoods are explored, best first
    # Trials bought per repeat. Enqueued trials fix every parameter, so they cost no sampling
    # (TPE's ask is the expensive part of a heterogeneous trial): the polish runs at pricing speed.
    PER_REPEAT = 4

    def __init__(self, space: TrialSpace, seed: int | None) -> None:
        self.space = space
        self.tried: set[Any] = set()
        self.rng = np.random.default_rng(seed)
        self.elite: list[tuple[float, dict[str, Any]]] = []  # (score, params), best first
        self.climber: tuple[float, dict[str, Any]] | None = None
        self.climbing: set[str] = set()  # moves proposed from the climber (keys)
        self.exhausted: set[str] = set()  # points whose whole neighbourhood has been tried

    def observe(self, params: dict[str, Any], score: float) -> None:
        """A finished trial's score (-inf if it does not fit): keeps the elite, and moves the
        climber to a better proposal of its own."""
        if score > -math.inf and all(params != point for _, point in self.elite):
            self.elite = sorted([*self.elite, (score, dict(params))], key=lambda e: -e[0])
            del self.elite[self.ELITE :]
        key = _key(params)
        if key in self.climbing and (self.climber is None or score > self.climber[0]):
            self.climber = (score, dict(params))

    def moves(self, count: int, priced: dict[Any, Any]) -> list[dict[str, Any]]:
        chosen: list[dict[str, Any]] = []
        if count <= 0 or not self.elite:
            return chosen
        for _, point in self.elite:
            self._extend(point, chosen, count, priced)
        while len(chosen) < count:
            if self.climber is not None:
                before = len(chosen)
                self._extend(self.climber[1], chosen, count, priced, climbing=True)
                if len(chosen) > before:
                    continue
            # The climber is at a local optimum (or there is none): restart somewhere random.
            for _ in range(50):
                restart = random_point(self.space.parameters, self.rng)
                if self._take(restart, chosen, priced, climbing=True):
                    self.climber = (-math.inf, restart)
                    break
            else:
                break  # the space is (nearly) exhausted
        return chosen

    def _extend(
        self,
        point: dict[str, Any],
        chosen: list[dict[str, Any]],
        count: int,
        priced: dict[Any, Any],
        *,
        climbing: bool = False,
    ) -> None:
        key = _key(point)
        if key in self.exhausted:
            return  # walking it again would only decode moves already tried
        for moves in (neighborhood, trades):
            for params in moves(self.space.parameters, point):
                if len(chosen) == count:
                    return
                self._take(params, chosen, priced, climbing=climbing)
        self.exhausted.add(key)

    def _take(
        self,
        params: dict[str, Any],
        chosen: list[dict[str, Any]],
        priced: dict[Any, Any],
        *,
        climbing: bool = False,
    ) -> bool:
        candidate = self.space.decode(params)
        if candidate in priced or candidate in self.tried:
            return False
        self.tried.add(candidate)
        chosen.append(params)
        if climbing:
            self.climbing.add(_key(params))
        return True


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def _better(best: float | None, value: float, metric: Metric) -> float:
    if best is None:
        return value
    return max(best, value) if metric.direction == "maximize" else min(best, value)


def run_study(
    request: SearchRequest,
    space: TrialSpace,
    metrics: Sequence[Metric],
    sampler_name: str,
    *,
    trials: int | None,
    deadline: float | None,
    storage: str | BaseStorage | None = None,
    study_name: str | None = None,
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
) -> StudyOutcome:
    """Ask/tell batches of trials until ``trials``, ``deadline`` or ``should_stop``, resuming what
    the storage already holds."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    resolved = resolve_storage(storage)
    sampler = make_sampler(sampler_name, request.seed)
    study = open_study(request, metrics, sampler, resolved, study_name)
    # The storage that records heartbeats (None: it keeps none).
    beating = (
        resolved
        if isinstance(resolved, RDBStorage) and resolved.get_heartbeat_interval() is not None
        else None
    )
    heartbeat = beating is not None
    next_stale_check = time.monotonic()
    if request.warm_start and not study.get_trials(deepcopy=False):
        for params in space.seeds(metrics):
            study.enqueue_trial(params, skip_if_exists=True)

    cache: dict[Any, Evaluation] = {}
    best: float | None = None
    polish = _Polish(space, request.seed) if sampler_name == "tpe" and len(metrics) == 1 else None
    status: Status = "completed"
    batch = BATCH[sampler_name]
    while True:
        if should_stop is not None and should_stop():
            status = "stopped"
            break
        if deadline is not None and time.monotonic() > deadline:
            status = "timeout"
            break
        if heartbeat and time.monotonic() >= next_stale_check:
            with _quiet_heartbeat():
                fail_stale_trials(study)
            next_stale_check = time.monotonic() + HEARTBEAT_INTERVAL_S
        done = len(study.get_trials(deepcopy=False, states=_COUNTED))
        remaining = batch if trials is None else min(batch, trials - done)
        if remaining <= 0:
            break
        with _quiet_heartbeat():
            asked = [study.ask() for _ in range(remaining)]
        if beating is not None:
            for trial in asked:
                beating.record_heartbeat(trial._trial_id)
        candidates = [space.suggest(trial) for trial in asked]
        repeats = sum(c in cache for c in candidates)
        fresh = list(dict.fromkeys(c for c in candidates if c not in cache))
        cache.update(zip(fresh, space.evaluate(fresh), strict=True))
        for trial, candidate in zip(asked, candidates, strict=True):
            evaluation = cache[candidate]
            try:
                _record(trial, evaluation)
                study.tell(trial, _objective_values(evaluation, metrics))
            except (UpdateFinishedTrialError, ValueError):
                # Another worker popped the same queued trial and told it first (SQLite has no
                # row locks; PostgreSQL's FOR UPDATE prevents this): its result stands.
                if study.get_trials(deepcopy=False)[trial.number].state.is_finished():
                    continue
                raise
            if evaluation.feasible:
                best = _better(best, evaluation.values(metrics)[0], metrics[0])
            if polish is not None:
                score = evaluation.scores(metrics)[0] if evaluation.feasible else -math.inf
                polish.observe(trial.params, score)
        if polish is not None and not study.get_trials(deepcopy=False, states=_WAITING):
            wanted = _Polish.PER_REPEAT if repeats else space.local_moves_per_trial
            if trials is not None:  # never queue trials past the budget
                wanted = min(wanted, trials - done - len(asked))
            for params in polish.moves(wanted, cache):
                # No skip_if_exists: it scans every trial (O(n) per call); moves are deduplicated
                # by the polish itself.
                study.enqueue_trial(params)
        if progress is not None:
            progress(done + len(asked), trials, best)

    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    evaluations = [
        (trial.number, recorded)
        for trial in finished
        if (recorded := evaluation_of(trial)) is not None
    ]
    return StudyOutcome(
        evaluations=evaluations,
        trials=len(finished),
        study_name=study.study_name,
        status=status,
    )
