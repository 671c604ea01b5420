"""``run_search``: the one entry point the CLI, the API and the workers call.

It picks the strategy, runs it within the budget, and turns the best candidates into ranked
plans explained by the scalar cost model:

- one node group: the homogeneous space. ``exhaustive`` prices all of it; ``auto`` does the same
  when it holds at most ``AUTO_EXHAUSTIVE_LIMIT`` plans (a few seconds of vectorized pricing) and
  otherwise runs a warm-started Optuna study (TPE, or NSGA-II for ``pareto``);
- several groups: single-group baselines first (each group's own homogeneous search), then an
  Optuna study over heterogeneous skeletons seeded with those baselines; the ranking covers both,
  and the result reports the gain over the best plan that uses one GPU type.
"""

import time
from collections.abc import Callable, Sequence

from optuna.storages import BaseStorage

from costmodel import estimate
from costmodel.hardware import resolve_gpu
from costmodel.specs import Plan
from search.exhaustive import enumerate_plans
from search.heterogeneous import HeterogeneousTrials
from search.homogeneous_trials import HomogeneousTrials
from search.objectives import (
    OBJECTIVE_METRICS,
    Evaluation,
    Metric,
    memory_ratio_of_estimate,
    metrics_of_estimate,
)
from search.optuna_study import StudyOutcome, TrialSpace, run_study
from search.ranking import (
    NEAR_TIE_TOLERANCE,
    Entry,
    canonical_plan,
    differing_fields,
    ordered,
    top_entries,
)
from search.request import SearchRequest
from search.result import EquivalentPlan, RankedPlan, SearchResult, Status, plan_hash
from search.space import SpaceError, homogeneous_spaces

# auto enumerates spaces up to this many plans (~1M plans/s on one core, so a few seconds).
AUTO_EXHAUSTIVE_LIMIT = 5_000_000
# Optuna budget when the request sets neither trials nor timeout_s.
DEFAULT_TRIALS = 300
# Heterogeneous searches: trial budget of each single-group baseline that is too large to
# enumerate.
BASELINE_TRIALS = 200

ProgressFn = Callable[[int, int | None, float | None], None]
StopFn = Callable[[], bool]
Found = tuple[int | None, Evaluation]  # (trial number or None, evaluation)


def run_search(
    request: SearchRequest,
    *,
    storage: str | BaseStorage | None = None,
    study_name: str | None = None,
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
) -> SearchResult:
    """Search the plan space of ``request``; see the module docstring for the strategy.

    ``storage`` (an Optuna RDB URL or storage) and ``study_name`` make the study shared and
    resumable: run again with the same name and it continues where it stopped; several workers
    may run it at once. Exhaustive enumeration needs no storage (re-running it is cheap).
    ``progress(done, total, best)`` is called after each batch (total is None when the budget
    is time only); ``should_stop()`` returning True ends the run early with what was found.
    """
    start = time.monotonic()
    deadline = start + request.timeout_s if request.timeout_s is not None else None
    metrics = OBJECTIVE_METRICS[request.objective]
    run = SearchRun(request, metrics, deadline, storage, study_name, progress, should_stop)
    result = run.homogeneous() if len(request.search_groups) == 1 else run.heterogeneous()
    result.elapsed_s = time.monotonic() - start
    return result


class SearchRun:
    """One search: its request, objectives, budget and callbacks, and the homogeneous or
    heterogeneous run that answers it (``run_search`` makes one and calls it)."""

    def __init__(
        self,
        request: SearchRequest,
        metrics: Sequence[Metric],
        deadline: float | None,
        storage: str | BaseStorage | None,
        study_name: str | None,
        progress: ProgressFn | None,
        should_stop: StopFn | None,
    ) -> None:
        self.request = request
        self.metrics = metrics
        self.deadline = deadline
        self.storage = storage
        self.study_name = study_name
        self.progress = progress
        self.should_stop = should_stop

    @property
    def trial_budget(self) -> int | None:
        """Trials to run: the request's, or the default when it names neither trials nor a
        time budget; None when only the time budget bounds it."""
        if self.request.trials is None and self.request.timeout_s is None:
            return DEFAULT_TRIALS
        return self.request.trials

    def _optuna_sampler(self) -> str:
        if self.request.sampler in ("auto", "exhaustive"):
            return "nsga2" if len(self.metrics) > 1 else "tpe"
        return self.request.sampler

    # One group -----------------------------------------------------------------------------
    def homogeneous(self) -> SearchResult:
        """Search the one-group layouts: enumerate them all (exhaustive, or auto on a small
        space) or run an Optuna study over them."""
        request = self.request
        spaces = homogeneous_spaces(request)
        size = sum(space.size for space in spaces)
        enumerate_all = request.sampler == "exhaustive" or (
            request.sampler == "auto" and size <= AUTO_EXHAUSTIVE_LIMIT
        )
        if enumerate_all:
            found = enumerate_plans(
                request,
                spaces,
                self.metrics,
                keep=request.top_k,
                progress=self.progress,
                should_stop=self.should_stop,
                deadline=self.deadline,
            )
            return self._result(
                [(None, e) for e in found.candidates],
                sampler="exhaustive",
                evaluated=found.evaluated,
                feasible=found.feasible,
                status=found.status,
                space_size=size,
            )
        sampler = self._optuna_sampler()
        space = HomogeneousTrials(request, spaces)
        outcome = self._study(space, sampler)
        distinct = self.distinct(outcome.evaluations)
        return self._result(
            distinct,
            sampler=sampler,
            evaluated=space.priced,
            feasible=space.fitting,
            status=outcome.status,
            space_size=size,
            trials=outcome.trials,
            study_name=outcome.study_name,
        )

    def _study(self, space: TrialSpace, sampler: str) -> StudyOutcome:
        """The Optuna study over ``space`` with this run's budget, storage and callbacks."""
        return run_study(
            self.request,
            space,
            self.metrics,
            sampler,
            trials=self.trial_budget,
            deadline=self.deadline,
            storage=self.storage,
            study_name=self.study_name,
            progress=self.progress,
            should_stop=self.should_stop,
        )

    # Several groups ------------------------------------------------------------------------
    def heterogeneous(self) -> SearchResult:
        """Search plans over several node groups: the single-group baselines, then an Optuna
        study of pipeline skeletons whose stages span the groups."""
        request = self.request
        space = HeterogeneousTrials(request)
        baselines, baseline_evaluated, baseline_feasible, notes = self._baselines()
        for group_best in _best_per_group(baselines, self.metrics):
            space.seed_from(group_best.plan, group_best.global_batch_size)
        space.seed_spanning()
        sampler = self._optuna_sampler()
        outcome = self._study(space, sampler)
        # Baselines first: a heterogeneous plan that is a baseline written as stages (one group,
        # one tp, even split) is that baseline.
        found = self.distinct([*baselines, *outcome.evaluations])
        result = self._result(
            found,
            sampler=sampler,
            evaluated=space.priced + baseline_evaluated,
            feasible=space.fitting + baseline_feasible,
            status=outcome.status,
            trials=outcome.trials,
            study_name=outcome.study_name,
        )
        result.notes.extend(notes)
        self._single_type_gain(result, found)
        return result

    def _baselines(self) -> tuple[list[Found], int, int, list[str]]:
        """Each group's best homogeneous plans (exhaustive when small, else a short study)."""
        found: list[Found] = []
        evaluated = feasible = 0
        notes = []
        for group in self.request.search_groups:
            try:
                single = self.request.model_copy(update={"groups": [group.name]})
                spaces = homogeneous_spaces(single)
            except SpaceError as exc:
                notes.append(f"no homogeneous plan on group '{group.name}': {exc}")
                continue
            size = sum(space.size for space in spaces)
            if size <= AUTO_EXHAUSTIVE_LIMIT:
                enumerated = enumerate_plans(
                    single,
                    spaces,
                    self.metrics,
                    keep=self.request.top_k,
                    should_stop=self.should_stop,
                    deadline=self.deadline,
                )
                found.extend((None, e) for e in enumerated.candidates)
                evaluated += enumerated.evaluated
                feasible += enumerated.feasible
            else:
                trials = HomogeneousTrials(single, spaces)
                outcome = run_study(
                    single,
                    trials,
                    self.metrics,
                    self._optuna_sampler(),
                    trials=BASELINE_TRIALS,
                    deadline=self.deadline,
                    should_stop=self.should_stop,
                )
                found.extend((None, e) for _, e in outcome.evaluations)
                evaluated += trials.priced
                feasible += trials.fitting
        ranked = ordered(found, self.metrics)
        return ranked, evaluated, feasible, notes

    def _single_type_gain(self, result: SearchResult, found: list[Found]) -> None:
        if not result.plans or len(self.metrics) != 1:
            return
        single = [
            (number, e)
            for number, e in found
            if e.feasible and len(_gpu_types(self.request, e)) == 1
        ]
        best_single = ordered(single, self.metrics)
        if not best_single:
            return
        result.single_type_best = self._ranked(1, Entry(best_single[0]))
        best = result.plans[0].objective_values[0]
        baseline = result.single_type_best.objective_values[0]
        ratio = best / baseline if self.metrics[0].direction == "maximize" else baseline / best
        result.gain_over_single_type = ratio - 1.0

    # Ranking -------------------------------------------------------------------------------
    def _result(
        self,
        found: list[Found],
        *,
        sampler: str,
        evaluated: int,
        feasible: int,
        status: Status,
        space_size: int | None = None,
        trials: int | None = None,
        study_name: str | None = None,
    ) -> SearchResult:
        feasible_found = [(n, e) for n, e in found if e.feasible]
        chosen, on_front = top_entries(feasible_found, self.metrics, self.request.top_k)
        front: list[RankedPlan] | None = None
        if on_front is not None:
            front = [self._ranked(i + 1, entry) for i, entry in enumerate(on_front)]
            by_entry = {id(entry): ranked for entry, ranked in zip(on_front, front, strict=True)}
            plans = [
                by_entry[id(entry)].model_copy(update={"rank": r + 1})
                for r, entry in enumerate(chosen)
            ]
        else:
            plans = [self._ranked(i + 1, entry) for i, entry in enumerate(chosen)]
        notes = []
        if not plans:
            notes.append(
                "no plan fits in memory"
                + (
                    f" (max_memory_fraction={self.request.max_memory_fraction:g})"
                    if self.request.max_memory_fraction < 1
                    else ""
                )
                + "; allow more GPUs, recompute or offloading, or a smaller micro-batch"
            )
        return SearchResult(
            plans=plans,
            pareto_front=front,
            evaluated=evaluated,
            feasible=feasible,
            elapsed_s=0.0,
            sampler=sampler,
            objective=self.request.objective,
            objective_names=[metric.key for metric in self.metrics],
            directions=[metric.direction for metric in self.metrics],
            status=status,
            space_size=space_size,
            trials=trials,
            study_name=study_name,
            notes=notes,
            near_tie_tolerance=NEAR_TIE_TOLERANCE,
        )

    def distinct(self, found: Sequence[Found]) -> list[Found]:
        """One entry per canonical plan (the first that found it; ``search.ranking``). A plan
        that canonicalizes to another form (stages on one group with the even split: the
        homogeneous plan) is priced again in that form, unless it was found in it already."""
        label = len(self.request.cluster.groups) > 1
        seen: dict[str, Found] = {}
        rewritten: dict[str, Plan] = {}
        for number, evaluation in found:
            plan = canonical_plan(
                evaluation.plan,
                self.request.model,
                seq_length=self.request.training.seq_length,
                label_group=label,
            )
            key = plan_hash(plan, evaluation.global_batch_size)
            if key in seen:
                continue
            seen[key] = (number, evaluation)
            if plan != evaluation.plan:
                rewritten[key] = plan
        for key, plan in rewritten.items():
            number, evaluation = seen[key]
            seen[key] = (number, self._priced_as(plan, evaluation.global_batch_size))
        return list(seen.values())

    def _priced_as(self, plan: Plan, global_batch_size: int) -> Evaluation:
        """``plan`` (a canonical form) priced by the scalar cost model."""
        explained = estimate(
            self.request.model,
            self.request.training_for(global_batch_size),
            self.request.cluster,
            plan,
            params=self.request.params,
        )
        return Evaluation(
            plan=plan,
            global_batch_size=global_batch_size,
            metrics=metrics_of_estimate(explained),
            memory_ratio=memory_ratio_of_estimate(explained, self.request.max_memory_fraction),
        )

    def _ranked(self, rank: int, entry: Entry) -> RankedPlan:
        number, evaluation = entry.best
        training = self.request.training_for(evaluation.global_batch_size)
        explained = estimate(
            self.request.model,
            training,
            self.request.cluster,
            evaluation.plan,
            params=self.request.params,
        )
        return RankedPlan(
            rank=rank,
            plan=evaluation.plan,
            estimate=explained,
            global_batch_size=evaluation.global_batch_size,
            objective_values=list(evaluation.values(self.metrics)),
            plan_hash=plan_hash(evaluation.plan, evaluation.global_batch_size),
            trial_number=number,
            equivalents=[
                EquivalentPlan(
                    plan=other.plan,
                    global_batch_size=other.global_batch_size,
                    objective_values=list(other.values(self.metrics)),
                    plan_hash=plan_hash(other.plan, other.global_batch_size),
                    trial_number=other_number,
                    differs=differing_fields(other.plan, evaluation.plan),
                )
                for other_number, other in entry.equivalents
            ],
        )


def _best_per_group(found: Sequence[Found], metrics: Sequence[Metric]) -> list[Evaluation]:
    best: dict[str, Evaluation] = {}
    for _, evaluation in ordered(found, metrics):
        if evaluation.feasible:
            best.setdefault(evaluation.plan.group or "", evaluation)
    return list(best.values())


def _gpu_types(request: SearchRequest, evaluation: Evaluation) -> set[str]:
    plan = evaluation.plan
    if plan.stages is None:
        names = [plan.group or request.cluster.groups[0].name]
    else:
        names = [
            name
            for stage in plan.stages
            for name in ([stage.group] if stage.group else [r.group for r in stage.replicas or []])
        ]
    return {resolve_gpu(request.cluster.group(name).gpu).name for name in names}
