"""Searches across workers: a killed worker's study is resumed by the next one without losing a
plan, two workers on one study agree on one ranking, and the two ways to run workers (inside
the API, ``autopar worker``)."""

import threading
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy import select
from typer.testing import CliRunner

from app.cli import cli, register_commands
from app.main import create_app
from app.orm import PlanRow
from app.plans.repository import store_ranking
from app.settings import Settings
from app.workers.service import prepare_optuna_storage
from costmodel.specs import Plan
from search import SearchRequest, SearchResult, plan_hash, run_search
from search.objectives import TOKENS_PER_S
from search.optuna_study import evaluation_of
from search.ranking import entries, layout_key
from tests.app.service.search_helpers import EXHAUSTIVE, TPE, Live, serving, wait_for

EMBEDDED_THREAD = "autopar-embedded-worker"


def study_plans(study: optuna.Study) -> dict[str, float]:
    """Plan hash -> tokens/s of every distinct feasible plan the study's trials priced."""
    found: dict[str, float] = {}
    for trial in study.get_trials(states=(TrialState.COMPLETE,)):
        evaluation = evaluation_of(trial)
        assert evaluation is not None
        if evaluation.feasible:
            key = plan_hash(evaluation.plan, evaluation.global_batch_size)
            found.setdefault(key, evaluation.metrics["tokens_per_s"])
    return found


def study_ranking(study: optuna.Study) -> list[tuple[str, float]]:
    """(plan hash, tokens/s) of the entries (one per layout, near-ties folded: search.ranking)
    the study's trials make, best first: what a ranking that lost nothing must contain."""
    found, seen = [], set()
    for trial in study.get_trials(states=(TrialState.COMPLETE,)):
        evaluation = evaluation_of(trial)
        assert evaluation is not None
        key = plan_hash(evaluation.plan, evaluation.global_batch_size)
        if evaluation.feasible and key not in seen:
            seen.add(key)
            found.append((trial.number, evaluation))
    return [
        (
            plan_hash(entry.evaluation.plan, entry.evaluation.global_batch_size),
            entry.evaluation.metrics["tokens_per_s"],
        )
        for entry in entries(found, (TOKENS_PER_S,))
    ]


def stored_layouts(plans: list[dict[str, Any]]) -> set[str]:
    """Layouts the stored entries stand for, their near-ties' included."""
    documents = [
        (document["plan"], document["global_batch_size"])
        for plan in plans
        for document in [plan, *plan["equivalents"]]
    ]
    return {layout_key(Plan.model_validate(plan), batch) for plan, batch in documents}


def ranking_of(plans: list[dict[str, Any]]) -> list[tuple[str, float]]:
    return [(plan["plan_hash"], plan["objective_values"][0]) for plan in plans]


def same_ranking(ours: list[tuple[str, float]], expected: list[tuple[str, float]]) -> bool:
    """Equal up to the order of ties."""
    return sorted(ours) == sorted(expected) and [v for _, v in ours] == [v for _, v in expected]


def test_a_killed_worker_loses_no_plans(live: Live) -> None:
    search = live.submit({**TPE, "trials": 12, "top_k": 100})
    # Worker A claims the search, runs 5 trials of its study, and dies: no ranking written, its
    # lease still on the row.
    claimed = live.run_some_trials("doomed", lease_s=600, trials=5)
    assert claimed.id == search["id"]
    study = live.study(search)
    before = [
        layout_key(evaluation.plan, evaluation.global_batch_size)
        for trial in study.get_trials(states=(TrialState.COMPLETE,))
        if (evaluation := evaluation_of(trial)) is not None and evaluation.feasible
    ]
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 5
    assert live.search(search["id"])["status"] == "running" and live.plans(search["id"]) == []
    assert live.worker("survivor").run_once() is None  # the lease is still alive

    # The lease runs out; the next worker claims the search and resumes the same study.
    live.expire_lease(search["id"])
    assert live.worker("survivor").run_once() == search["id"]
    resumed = live.search(search["id"])
    assert resumed["status"] == "succeeded" and resumed["attempts"] == 2
    assert resumed["progress"]["trials_done"] == 12

    study = live.study(search)
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 12  # continued, not restarted
    plans = live.plans(search["id"])
    # Every layout the dead worker found is in the ranking (as an entry or a near-tie of one).
    assert set(before) <= stored_layouts(plans)
    assert same_ranking(ranking_of(plans), study_ranking(study))


# SQLite has no row locks, and Optuna's RDB storage relies on them (SELECT ... FOR UPDATE) when
# two processes ask for trials at once: they can get the same trial number or the same enqueued
# trial. Leases keep it to one worker per search there, so this mode is PostgreSQL's.
@pytest.mark.postgresql_only
def test_two_workers_on_one_study_agree_on_one_ranking(live: Live) -> None:
    search = live.submit({**TPE, "trials": 16, "top_k": 100})
    request = SearchRequest.model_validate(live.search(search["id"])["request"])
    prepare_optuna_storage(live.url)  # as every worker does before its first claim
    results: list[SearchResult] = []

    def work() -> None:
        results.append(run_search(request, storage=live.url, study_name=search["study_name"]))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2

    # One study: the budget is shared (a race overshoots it by at most one trial per worker).
    study = live.study(search)
    finished = study.get_trials(states=(TrialState.COMPLETE,))
    assert 16 <= len(finished) <= 18
    whole = study_ranking(study)
    priced = study_plans(study)
    # Consistent: a plan both workers ranked has the same values in both.
    values: dict[str, list[float]] = {}
    for result in results:
        for plan in result.plans:
            values.setdefault(plan.plan_hash, []).append(plan.objective_values[0])
    assert all(len(set(found)) == 1 for found in values.values())
    assert {key: found[0] for key, found in values.items()}.items() <= priced.items()

    # Both rankings stored in the order the workers finished (the later one saw every trial):
    # one row per plan, and the stored ranking is the whole study's.
    results.sort(key=lambda result: result.trials or 0)
    assert results[-1].trials == len(finished)
    with live.sessions() as session:
        first = store_ranking(
            session, search_id=search["id"], ranked_plans=results[0].plans, tenant="default"
        )
        second = store_ranking(
            session, search_id=search["id"], ranked_plans=results[1].plans, tenant="default"
        )
        session.commit()
        rows = session.scalars(select(PlanRow).where(PlanRow.search_id == search["id"])).all()
    assert len(rows) == len({row.plan_hash for row in rows}) == len(values)
    assert all(second[key].id == row.id for key, row in first.items() if key in second)
    assert same_ranking(ranking_of(live.plans(search["id"])), whole)


def test_the_api_runs_searches_in_its_embedded_worker(live: Live) -> None:
    settings = Settings(database_url=live.url, migrate_on_startup=False, worker_poll_s=0.05)
    assert settings.embedded_worker  # the default
    with serving(create_app(settings)) as client:
        search = client.post("/v1/searches", json=EXHAUSTIVE).json()

        def finished() -> bool:
            return bool(client.get(f"/v1/searches/{search['id']}").json()["status"] != "queued")

        wait_for(finished, "the embedded worker")
        wait_for(
            lambda: client.get(f"/v1/searches/{search['id']}").json()["status"] == "succeeded",
            "the search to succeed",
        )
        assert client.get(f"/v1/searches/{search['id']}/plans").json()["items"]
        assert any(thread.name == EMBEDDED_THREAD for thread in threading.enumerate())
    # Shutdown stopped it.
    assert not any(thread.name == EMBEDDED_THREAD for thread in threading.enumerate())


def test_no_embedded_worker_when_turned_off(live: Live) -> None:
    settings = Settings(database_url=live.url, migrate_on_startup=False, embedded_worker=False)
    with serving(create_app(settings)) as client:
        assert client.post("/v1/searches", json=EXHAUSTIVE).status_code == 202
        assert not any(thread.name == EMBEDDED_THREAD for thread in threading.enumerate())


def test_autopar_worker_once(live: Live) -> None:
    register_commands()
    command = ["worker", "--database-url", live.url, "--once"]
    search = live.submit(EXHAUSTIVE)
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    assert f"ran search {search['id']}" in result.output
    assert live.search(search["id"])["status"] == "succeeded"
    again = CliRunner().invoke(cli, command)
    assert again.exit_code == 0 and "no search queued" in again.output
