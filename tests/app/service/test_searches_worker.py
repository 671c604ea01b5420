"""Searches run by workers: the ranking they store, progress, cancellation, failures, and the
claim/lease rules that keep two workers from owning one search."""

import threading
from datetime import timedelta

import pytest
from optuna.exceptions import StorageInternalError
from optuna.trial import TrialState
from sqlalchemy import update
from sqlalchemy.exc import OperationalError

from app.orm import SearchRow, utcnow
from app.workers import repository
from search import SearchRequest, run_search
from tests.app.service.search_helpers import EXHAUSTIVE, TPE, Live, wait_for


def test_a_worker_runs_the_search_and_stores_the_ranking(live: Live) -> None:
    search = live.submit(EXHAUSTIVE)
    assert live.worker("w1").run_once() == search["id"]
    assert live.worker("w1").run_once() is None  # nothing left

    done = live.search(search["id"])
    assert done["status"] == "succeeded" and done["error"] is None
    assert done["worker"] is None and done["attempts"] == 1
    assert done["outcome"]["sampler"] == "exhaustive"
    assert done["outcome"]["status"] == "completed"
    progress = done["progress"]
    space = done["outcome"]["space_size"]
    assert progress["trials_done"] == progress["trials_budget"] == space == progress["evaluated"]
    assert 0 < progress["feasible"] <= space
    assert progress["eta_s"] == 0 and progress["elapsed_s"] >= 0

    plans = live.plans(search["id"])
    assert [plan["rank"] for plan in plans] == [1, 2, 3, 4, 5]
    values = [plan["objective_values"][0] for plan in plans]
    assert values == sorted(values, reverse=True)  # throughput: best first
    assert progress["best"] == {
        "value": values[0],
        "metric": "tokens_per_s",
        "plan_id": plans[0]["id"],
    }
    for plan in plans:
        assert plan["feasible"] and plan["estimate"]["feasible"]
        assert plan["plan"]["tp"] in (1, 2)  # the constraints hold
        assert plan["plan"]["recompute"] in ("none", "selective")
        assert plan["global_batch_size"] == 64
        assert plan["objective_values"][0] == plan["estimate"]["tokens_per_s"]
        assert live.http.get(f"/v1/plans/{plan['id']}").json() == plan
    assert len({plan["plan_hash"] for plan in plans}) == len(plans)

    # The same ranking as the library gives for the stored request.
    direct = run_search(SearchRequest.model_validate(done["request"]))
    assert [plan["plan_hash"] for plan in plans] == [p.plan_hash for p in direct.plans]


def test_an_optuna_search_keeps_its_study_in_the_database(live: Live) -> None:
    search = live.submit(TPE)
    live.worker("w1").run_once()
    done = live.search(search["id"])
    assert done["status"] == "succeeded", done
    assert done["outcome"]["sampler"] == "tpe"
    assert done["progress"]["trials_done"] == done["progress"]["trials_budget"] == 8

    # The study is in the service's database (what optuna-dashboard shows), under its name.
    study = live.study(done)
    finished = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(finished) == 8 and study.user_attrs
    numbers = {trial.number for trial in finished}
    plans = live.plans(search["id"])
    assert plans and all(plan["trial_number"] in numbers for plan in plans)


def test_cancelling_a_running_search_stops_it_and_keeps_its_plans(live: Live) -> None:
    search = live.submit({**TPE, "trials": 100_000, "warm_start": False})
    worker = live.worker("w1")
    thread = threading.Thread(target=worker.run_once)
    thread.start()
    try:

        def under_way() -> bool:
            progress = live.search(search["id"])["progress"]
            return progress["trials_done"] >= 3 and progress["best"] is not None

        wait_for(under_way, "a few trials and a feasible plan")
        running = live.search(search["id"])
        assert running["status"] == "running" and running["worker"] == "w1"
        progress = running["progress"]
        assert progress["trials_budget"] == 100_000
        assert progress["best"]["value"] > 0 and progress["best"]["plan_id"] is None
        assert progress["eta_s"] > 0 and progress["elapsed_s"] >= 0

        response = live.http.post(f"/v1/searches/{search['id']}/cancel")
        assert response.status_code == 202, response.text
        assert response.json()["cancel_requested"] and response.json()["status"] == "running"
    except BaseException:
        worker.stop()  # do not leave it searching forever
        thread.join()
        raise
    thread.join()

    cancelled = live.search(search["id"])
    assert cancelled["status"] == "cancelled"
    assert cancelled["outcome"]["status"] == "stopped"
    assert 3 <= cancelled["progress"]["trials_done"] < 100_000
    plans = live.plans(search["id"])
    assert plans and cancelled["progress"]["best"]["plan_id"] == plans[0]["id"]
    # Finished: cancelling again is a no-op, and a succeeded search cannot be cancelled.
    assert live.http.post(f"/v1/searches/{search['id']}/cancel").status_code == 202
    other = live.submit(EXHAUSTIVE)
    live.worker("w1").run_once()
    assert live.http.post(f"/v1/searches/{other['id']}/cancel").status_code == 409


def test_a_search_that_cannot_run_fails_with_the_reason(live: Live) -> None:
    search = live.submit(EXHAUSTIVE)
    broken = {**search["request"], "top_k": 0}  # say, written by an older version
    with live.sessions() as session:
        session.execute(
            update(SearchRow).where(SearchRow.id == search["id"]).values(request=broken)
        )
        session.commit()
    live.worker("w1").run_once()
    failed = live.search(search["id"])
    assert failed["status"] == "failed"
    assert "top_k" in failed["error"]
    assert live.plans(search["id"]) == []


def test_claims_go_by_priority_and_are_exclusive(live: Live) -> None:
    low = live.submit(EXHAUSTIVE)
    high = live.submit({**EXHAUSTIVE, "priority": 10})
    now = utcnow()
    with live.sessions() as session:
        first = repository.claim_next(session, worker_id="a", lease_s=60, now=now)
        second = repository.claim_next(session, worker_id="b", lease_s=60, now=now)
        third = repository.claim_next(session, worker_id="c", lease_s=60, now=now)
    assert first is not None and first.id == high["id"] and first.lease_owner == "a"
    assert second is not None and second.id == low["id"] and second.lease_owner == "b"
    assert third is None  # both leases are alive
    assert first.status == "running" and first.attempts == 1 and first.started_at is not None


def test_an_expired_lease_moves_to_the_next_worker(live: Live) -> None:
    search = live.submit(EXHAUSTIVE)
    start = utcnow()
    with live.sessions() as session:
        claimed = repository.claim_next(session, worker_id="a", lease_s=60, now=start)
        assert claimed is not None
        later = start + timedelta(seconds=61)
        taken = repository.claim_next(session, worker_id="b", lease_s=60, now=later)
        assert taken is not None and taken.id == search["id"]
        assert taken.lease_owner == "b" and taken.attempts == 2
        assert taken.started_at == claimed.started_at  # elapsed counts from the first start

        # The old owner finds out at its next heartbeat and can no longer finish the search.
        state = repository.renew_lease(
            session,
            search_id=search["id"],
            worker_id="a",
            lease_s=60,
            trials_done=1,
            best_value=None,
            progress={},
        )
        assert not state.owned
        assert not repository.finish(
            session, search_id=search["id"], worker_id="a", status="succeeded"
        )
        session.rollback()

        # A search whose workers keep dying is failed, not passed on forever.
        now = later
        for _ in range(repository.MAX_ATTEMPTS - 2):
            now += timedelta(seconds=61)
            assert repository.claim_next(session, worker_id="c", lease_s=60, now=now) is not None
        now += timedelta(seconds=61)
        assert repository.claim_next(session, worker_id="d", lease_s=60, now=now) is None
    failed = live.search(search["id"])
    assert failed["status"] == "failed" and "renewing the lease" in failed["error"]


def test_a_cancelled_search_left_by_a_dead_worker_ends_cancelled(live: Live) -> None:
    search = live.submit(TPE)
    with live.sessions() as session:
        assert repository.claim_next(session, worker_id="dead", lease_s=60) is not None
    assert live.http.post(f"/v1/searches/{search['id']}/cancel").json()["status"] == "running"
    live.expire_lease(search["id"])
    assert live.worker("w2").run_once() == search["id"]
    ended = live.search(search["id"])
    assert ended["status"] == "cancelled" and ended["attempts"] == 2


def test_a_stopping_worker_puts_its_search_back_in_the_queue(live: Live) -> None:
    search = live.submit(EXHAUSTIVE)
    leaving = live.worker("leaving")
    leaving.stop()  # e.g. SIGTERM arrived: the search stops at its first check
    assert leaving.run_once() == search["id"]
    back = live.search(search["id"])
    assert back["status"] == "queued" and back["worker"] is None
    assert back["attempts"] == 0  # handing back is not a failed attempt
    assert back["started_at"] is not None

    live.worker("next").run_once()
    done = live.search(search["id"])
    assert done["status"] == "succeeded" and done["attempts"] == 1


def test_cancelling_a_handed_back_search_keeps_its_trials(live: Live) -> None:
    search = live.submit(TPE)
    # A worker runs a few trials, then shuts down and hands the search back.
    live.run_some_trials("a", lease_s=60)
    with live.sessions() as session:
        assert repository.release(session, search_id=search["id"], worker_id="a")

    # Cancelling it now must not throw those trials away: the next worker ranks them.
    response = live.http.post(f"/v1/searches/{search['id']}/cancel")
    assert response.status_code == 202
    assert response.json()["status"] == "queued" and response.json()["cancel_requested"]
    live.worker("b").run_once()
    ended = live.search(search["id"])
    assert ended["status"] == "cancelled" and ended["progress"]["trials_done"] == 3
    assert ended["progress"]["trials_budget"] == 8
    assert live.plans(search["id"])


def test_a_database_outage_hands_the_search_back_and_a_bug_fails_it(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    def outage(*_args: object, **_kwargs: object) -> None:
        # What Optuna's storage raises when the server goes away in the middle of a study.
        try:
            raise OperationalError("COMMIT", {}, ConnectionError("server closed the connection"))
        except OperationalError as exc:
            raise StorageInternalError("An exception is raised during the commit.") from exc

    def bug(*_args: object, **_kwargs: object) -> None:
        raise ValueError("the cost model cannot price this")

    search = live.submit(EXHAUSTIVE)
    monkeypatch.setattr("app.workers.service.run_search", outage)
    live.worker("w1").run_once()
    back = live.search(search["id"])
    assert back["status"] == "queued" and back["error"] is None and back["attempts"] == 0

    monkeypatch.setattr("app.workers.service.run_search", bug)
    live.worker("w1").run_once()
    failed = live.search(search["id"])
    assert failed["status"] == "failed"
    assert failed["error"] == "ValueError: the cost model cannot price this"
