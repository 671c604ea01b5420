"""A worker runs its study in memory and writes the trials to the database study in batches:
with each lease heartbeat, in the heartbeat's own transaction (so only the lease's owner writes),
and when the search ends; a resumed search continues from what was written, and the plans API
lists every ranked plan's near-ties."""

from typing import Any

import optuna
import pytest
from optuna.storages import RDBStorage
from optuna.trial import TrialState
from sqlalchemy import update

from app.orm import SearchRow
from app.workers import repository
from app.workers.lease import LeaseKeeper
from app.workers.progress import ProgressTracker
from app.workers.service import SearchWorker, WorkerOptions
from search import study_storage
from search.objectives import TOKENS_PER_S
from search.study_storage import BufferedStorage
from tests.app.service.search_helpers import TPE, Live

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_a_worker_writes_its_trials_in_batches_not_one_by_one(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = live.submit({**TPE, "trials": 40})
    batches: list[int] = []
    write = study_storage._insert_trials

    def counted(connection: Any, remote_id: int, trials: Any) -> None:
        batches.append(len(trials))
        write(connection, remote_id, trials)

    def one_by_one(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a trial went through Optuna's RDB storage, step by step")

    monkeypatch.setattr(study_storage, "_insert_trials", counted)
    monkeypatch.setattr(RDBStorage, "create_new_trial", one_by_one)
    monkeypatch.setattr(RDBStorage, "set_trial_param", one_by_one)
    # A heartbeat longer than the search: its trials are written once, when it ends.
    worker = SearchWorker(
        session_factory=live.sessions,
        database_url=live.url,
        options=WorkerOptions(lease_s=60, poll_s=0.05, heartbeat_s=60),
        worker_id="batching",
    )
    assert worker.run_once() == search["id"]
    monkeypatch.undo()
    done = live.search(search["id"])
    assert done["status"] == "succeeded" and done["progress"]["trials_done"] == 40
    assert batches == [40]  # one batch, in the transaction that ended the search
    study = live.study(done)
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 40


def test_a_heartbeat_writes_the_finished_trials_while_the_lease_is_ours(live: Live) -> None:
    search = live.submit(TPE)
    with live.sessions() as session:
        claimed = repository.claim_next(session, worker_id="beating", lease_s=60)
    assert claimed is not None
    storage = BufferedStorage(live.url)
    study = optuna.create_study(
        storage=storage, study_name=claimed.optuna_study_name, direction="maximize"
    )
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=3)
    keeper = LeaseKeeper(
        session_factory=live.sessions,
        search_id=claimed.id,
        worker_id="beating",
        lease_s=60,
        interval_s=60,
        tracker=ProgressTracker(metric=TOKENS_PER_S),
        study=storage,
    )
    keeper.beat()
    assert len(live.study(search).trials) == 3 and not keeper.lost.is_set()

    # Another worker took the lease (this one was presumed dead): the next beat writes nothing.
    with live.sessions() as session:
        session.execute(
            update(SearchRow).where(SearchRow.id == claimed.id).values(lease_owner="thief")
        )
        session.commit()
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    keeper.beat()
    assert keeper.lost.is_set()
    assert len(live.study(search).trials) == 3
    storage.close()


def test_a_search_handed_back_resumes_from_its_written_trials(live: Live) -> None:
    search = live.submit({**TPE, "trials": 12})
    leaving = live.worker("leaving")
    beats = 0

    def stop_after_some(*_args: Any) -> None:
        nonlocal beats
        beats += 1
        if beats >= 6:
            leaving.stop()

    # SIGTERM in the middle of the study (here: after a few progress reports).
    original = ProgressTracker.__call__
    try:
        ProgressTracker.__call__ = lambda self, *args: (  # type: ignore[method-assign]
            original(self, *args),
            stop_after_some(),
        )[0]
        assert leaving.run_once() == search["id"]
    finally:
        ProgressTracker.__call__ = original  # type: ignore[method-assign]
    back = live.search(search["id"])
    assert back["status"] == "queued"
    written = len(live.study(back).get_trials(states=(TrialState.COMPLETE,)))
    # Every trial it reported finished is written when it hands the search back (none lost),
    # and it stopped before the budget.
    assert beats <= written < 12

    live.worker("next").run_once()
    done = live.search(search["id"])
    assert done["status"] == "succeeded" and done["progress"]["trials_done"] == 12
    trials = live.study(done).get_trials(states=(TrialState.COMPLETE,))
    assert [t.number for t in trials] == list(range(12))  # continued, not restarted


def test_the_plans_api_lists_each_entrys_near_ties(live: Live) -> None:
    search = live.submit(
        {
            "preset": "llama3-8b",
            "training": "llama3-8k",
            "cluster_id": "dgx-a100-8n",
            "sampler": "exhaustive",
            "top_k": 5,
        }
    )
    live.worker("w").run_once()
    plans = live.plans(search["id"])
    assert len(plans) == 5
    folded = [plan for plan in plans if plan["equivalents"]]
    assert folded
    for plan in folded:
        for equivalent in plan["equivalents"]:
            assert set(equivalent) >= {"plan", "objective_values", "plan_hash", "differs"}
            assert equivalent["plan_hash"] != plan["plan_hash"]
    one = live.http.get(f"/v1/plans/{folded[0]['id']}").json()
    assert one["equivalents"] == folded[0]["equivalents"]
