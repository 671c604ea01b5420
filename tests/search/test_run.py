"""run_search end to end on small spaces: samplers agree with enumeration, constraints hold,
Pareto fronts are fronts, runs stop when asked, and studies resume and share storage."""

import threading
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.storages.journal import JournalFileBackend, JournalStorage

from costmodel import estimate, estimate_many
from costmodel.feasibility import Violation
from search import SearchRequest, SearchResult, run_search
from search.pricing import price_group
from search.space import homogeneous_spaces
from tests.support.search_specs import SMALL_MODEL, SMALL_TRAINING

MODEL = SMALL_MODEL
TRAINING = SMALL_TRAINING
CLUSTER = {
    "name": "a100x16",
    "groups": [{"name": "a100", "gpu": "A100-40GB", "num_nodes": 2, "price_per_gpu_hour": 2.0}],
}
# A slice of the space small enough that 300 random trials cover it.
TINY = {"cp": 1, "vpp": 1, "micro_batch_size": [1, 2], "tp": {"max": 4}}


def search(**fields: object) -> SearchResult:
    base = {"model": MODEL, "training": TRAINING, "cluster": CLUSTER}
    return run_search(SearchRequest(**{**base, **fields}))  # type: ignore[arg-type]


def brute_force(fields: dict) -> dict[str, np.ndarray]:
    """Every plan of the space priced at once, with feasibility under the memory cap."""
    request = SearchRequest(model=MODEL, training=TRAINING, cluster=CLUSTER, **fields)
    (space,) = homogeneous_spaces(request)
    plans = space.expand(0, space.num_rows)
    arrays = estimate_many(MODEL, request.training, CLUSTER, plans)
    cap = request.max_memory_fraction * arrays["capacity_gib"]
    arrays["fits"] = (arrays["violations"] & ~int(Violation.MEMORY) == 0) & (
        arrays["peak_memory_gib"] <= cap
    )
    return arrays


def best_value(result: SearchResult) -> float:
    assert result.plans, result.notes
    return result.plans[0].objective_values[0]


def test_exhaustive_ranks_the_true_optimum_first() -> None:
    result = search(sampler="exhaustive", top_k=5)
    arrays = brute_force({})
    fits = arrays["fits"]
    assert result.evaluated == len(fits)
    assert result.feasible == int(fits.sum())
    assert best_value(result) == pytest.approx(arrays["tokens_per_s"][fits].max())
    values = [ranked.objective_values[0] for ranked in result.plans]
    assert values == sorted(values, reverse=True)
    assert [ranked.rank for ranked in result.plans] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("objective", "key", "pick"),
    [("cost", "usd_per_million_tokens", np.min), ("time_to_train", "time_to_train_s", np.min)],
)
def test_minimizing_objectives_rank_the_true_minimum_first(
    objective: str, key: str, pick: object
) -> None:
    arrays = brute_force({})
    result = search(sampler="exhaustive", objective=objective)
    assert result.directions == ["minimize"] and result.objective_names == [key]
    assert best_value(result) == pytest.approx(pick(arrays[key][arrays["fits"]]))  # type: ignore[operator]


@pytest.mark.parametrize("objective", ["throughput", "goodput"])
def test_goodput_is_priced_in_bulk_only_when_the_objective_ranks_by_it(objective: str) -> None:
    request = SearchRequest(model=MODEL, training=TRAINING, cluster=CLUSTER, objective=objective)
    (space,) = homogeneous_spaces(request)
    arrays = price_group(request, space, space.expand(0, min(space.num_rows, 4)))
    priced = np.isfinite(arrays["effective_tokens_per_s"]) | ~np.isfinite(arrays["tokens_per_s"])
    assert priced.all() == (objective == "goodput")
    # Either way the plans a search keeps report goodput, from their explained estimates.
    (best,) = search(objective=objective, top_k=1).plans
    assert best.estimate.goodput is not None and 0 < best.estimate.goodput.goodput <= 1


def test_ranked_plans_carry_their_scalar_estimate() -> None:
    result = search(sampler="exhaustive", top_k=3, objective="cost")
    for ranked in result.plans:
        again = estimate(MODEL, TRAINING, CLUSTER, ranked.plan)
        assert ranked.estimate == again
        assert ranked.objective_values == [pytest.approx(again.usd_per_million_tokens)]


def test_tpe_finds_the_exhaustive_optimum_of_a_small_space() -> None:
    exhaustive = best_value(search(sampler="exhaustive"))
    assert best_value(search(sampler="tpe", seed=0, trials=80)) == pytest.approx(exhaustive)


@pytest.mark.parametrize("sampler", ["random", "nsga2", "tpe"])
def test_every_sampler_agrees_with_enumeration_on_a_tiny_space(sampler: str) -> None:
    exhaustive = best_value(search(sampler="exhaustive", constraints=TINY))
    found = search(sampler=sampler, seed=1, trials=300, constraints=TINY, warm_start=False)
    assert best_value(found) == pytest.approx(exhaustive)


@pytest.mark.parametrize("sampler", ["exhaustive", "tpe"])
def test_every_returned_plan_respects_the_constraints(sampler: str) -> None:
    constraints = {
        "tp": [1, 2],
        "pp": {"min": 2, "max": 4},
        "recompute": "selective",
        "zero_stage": [1, 2],
        "num_gpus": {"max": 12},
    }
    result = search(
        sampler=sampler,
        seed=0,
        trials=60,
        top_k=20,
        constraints=constraints,
        max_memory_fraction=0.6,
    )
    assert result.plans
    for ranked in result.plans:
        plan, estimated = ranked.plan, ranked.estimate
        assert plan.tp in (1, 2) and 2 <= plan.pp <= 4
        assert plan.recompute == "selective" and plan.zero_stage in (1, 2)
        assert estimated.num_gpus <= 12
        assert estimated.feasible
        assert all(s.peak_memory_gib <= 0.6 * s.capacity_gib for s in estimated.per_stage)


def test_pareto_front_is_the_set_of_non_dominated_plans() -> None:
    result = search(sampler="exhaustive", objective="pareto", top_k=4)
    assert result.pareto_front is not None and len(result.plans) <= 4
    front = np.array([ranked.objective_values for ranked in result.pareto_front])
    speeds, costs = front[:, 0], front[:, 1]
    assert np.all(np.diff(speeds) < 0) and np.all(np.diff(costs) < 0)  # faster is dearer

    arrays = brute_force({})
    speed, cost = (
        arrays["tokens_per_s"][arrays["fits"]],
        arrays["usd_per_million_tokens"][arrays["fits"]],
    )
    for fast, cheap in front:  # nothing dominates a front point...
        dominated = (speed >= fast) & (cost <= cheap) & ((speed > fast) | (cost < cheap))
        assert not dominated.any()
    # ...and every plan is matched or beaten by some front point.
    covered = (speed[:, None] <= speeds[None, :] + 1e-9) & (cost[:, None] >= costs[None, :] - 1e-12)
    assert covered.any(axis=1).all()
    assert result.plans[0].objective_values == result.pareto_front[0].objective_values
    assert result.plans[-1].objective_values == result.pareto_front[-1].objective_values


def test_nsga2_returns_a_front_for_pareto() -> None:
    result = search(sampler="nsga2", objective="pareto", seed=0, trials=64)
    assert result.pareto_front
    values = np.array([ranked.objective_values for ranked in result.pareto_front])
    assert np.all(np.diff(values[:, 0]) < 0) and np.all(np.diff(values[:, 1]) < 0)


def test_same_seed_same_result() -> None:
    first = search(sampler="tpe", seed=3, trials=40)
    second = search(sampler="tpe", seed=3, trials=40)
    assert [r.plan for r in first.plans] == [r.plan for r in second.plans]
    assert first.evaluated == second.evaluated


@pytest.mark.parametrize("sampler", ["exhaustive", "tpe"])
def test_a_run_stops_when_asked_and_keeps_what_it_found(sampler: str) -> None:
    calls: list[int] = []

    def progress(done: int, total: int | None, best: float | None) -> None:
        calls.append(done)

    request = SearchRequest(
        model="gpt3-175b",
        training="gpt3-2k",
        cluster="dgx-h100-128n",
        sampler=sampler,
        trials=10_000,
        seed=0,
    )
    result = run_search(request, progress=progress, should_stop=lambda: len(calls) >= 3)
    assert result.status == "stopped"
    assert len(calls) == 3
    if sampler == "exhaustive":
        assert result.evaluated < result.space_size  # type: ignore[operator]
    else:
        assert result.trials is not None and result.trials < 10_000
    assert result.plans and all(ranked.estimate.feasible for ranked in result.plans)


def test_a_study_resumes_where_it_stopped(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    fields = {"model": MODEL, "training": TRAINING, "cluster": CLUSTER, "sampler": "tpe", "seed": 0}
    first = run_search(SearchRequest(**fields, trials=6), storage=storage, study_name="s")
    second = run_search(SearchRequest(**fields, trials=12), storage=storage, study_name="s")
    assert (first.trials, second.trials) == (6, 12)
    assert best_value(second) >= best_value(first)
    with pytest.raises(ValueError, match="study_name: study 's' holds a different search"):
        run_search(
            SearchRequest(**{**fields, "objective": "cost"}, trials=12),
            storage=storage,
            study_name="s",
        )


# The test plays a worker with Optuna's heartbeat API directly, which Optuna flags as experimental.
@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.filterwarnings("ignore:Heartbeat of storage:UserWarning")
def test_a_killed_workers_running_trial_is_failed_and_redone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    fields = {"model": MODEL, "training": TRAINING, "cluster": CLUSTER, "sampler": "tpe", "seed": 0}
    storage = optuna.storages.RDBStorage(url, heartbeat_interval=1, grace_period=1)
    run_search(SearchRequest(**fields, trials=4), storage=storage, study_name="s")
    study = optuna.load_study(study_name="s", storage=storage)
    orphan = study.ask()  # a worker asked for a trial and died before telling
    storage.record_heartbeat(orphan._trial_id)
    # Let the heartbeat go stale (SQLite's clock has whole seconds: wait past two of them).
    threading.Event().wait(2.5)
    result = run_search(SearchRequest(**fields, trials=8), storage=storage, study_name="s")
    reloaded = optuna.load_study(study_name="s", storage=url)
    states = [trial.state for trial in reloaded.get_trials(deepcopy=False)]
    assert states.count(optuna.trial.TrialState.FAIL) == 1
    assert states.count(optuna.trial.TrialState.COMPLETE) == result.trials == 8


def test_two_workers_on_one_study_give_one_ranked_list(tmp_path: Path) -> None:
    # Optuna's journal file storage: safe for concurrent workers without a database server
    # (SQLite lacks the row locks that keep two workers from taking the same queued trial; the
    # service runs many workers on PostgreSQL).
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "journal.log")))
    request = SearchRequest(
        model=MODEL, training=TRAINING, cluster=CLUSTER, sampler="tpe", seed=0, trials=24
    )
    results: list[SearchResult] = []

    def worker() -> None:
        results.append(run_search(request, storage=storage, study_name="shared"))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2  # both workers ran to the end
    final = run_search(request, storage=storage, study_name="shared")  # budget spent: ranks only
    assert 24 <= final.trials <= 24 + 2  # a race may overshoot by one trial (batch) per worker
    numbers = [t.number for t in optuna.load_study(study_name="shared", storage=storage).trials]
    assert len(numbers) == len(set(numbers))
    hashes = [ranked.plan_hash for ranked in final.plans]
    assert len(hashes) == len(set(hashes))
    values = [ranked.objective_values[0] for ranked in final.plans]
    assert values == sorted(values, reverse=True)
    # The ranking is the study's, whoever reads it: it is at least as good as each worker's view
    # and a second read gives the same list.
    assert all(values[0] >= best_value(result) for result in results)
    again = run_search(request, storage=storage, study_name="shared")
    assert [ranked.plan_hash for ranked in again.plans] == hashes
