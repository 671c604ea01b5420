"""``BufferedStorage``: a study run in memory and written to its database study in batches,
which Optuna then reads back as its own (the service's workers run every study this way)."""

from pathlib import Path

import optuna
import pytest
from sqlalchemy import create_engine, event

from search import SearchRequest, run_search
from search.optuna_study import evaluation_of
from search.study_storage import BufferedStorage

optuna.logging.set_verbosity(optuna.logging.WARNING)


def objective(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", 0.0, 4.0)
    width = trial.suggest_int("width", 1, 64, log=True)
    kind = trial.suggest_categorical("kind", ["a", "bb"])
    trial.set_user_attr("plan", {"tp": width, "stages": [1, 2]})
    trial.set_user_attr("priced", {"memory_ratio": x / 4})
    return x * width + len(kind)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'studies.db'}"


def same_trials(
    ours: list[optuna.trial.FrozenTrial], theirs: list[optuna.trial.FrozenTrial]
) -> bool:
    fields = ("number", "state", "params", "distributions", "values", "user_attrs", "system_attrs")
    return [tuple(getattr(t, f) for f in fields) for t in ours] == [
        tuple(getattr(t, f) for f in fields) for t in theirs
    ]


def test_trials_reach_the_database_study_when_a_batch_is_written(url: str) -> None:
    storage = BufferedStorage(url)
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize")
    study.set_user_attr("fingerprint", "abc")
    study.enqueue_trial({"x": 1.0, "width": 8, "kind": "a"})
    study.optimize(objective, n_trials=30)
    remote = optuna.load_study(study_name="s", storage=url)
    assert remote.user_attrs == {"fingerprint": "abc"}  # study attributes: written at once
    assert remote.trials == []  # trials: only in batches
    assert storage.flush() == 30
    assert same_trials(study.trials, optuna.load_study(study_name="s", storage=url).trials)
    assert storage.flush() == 0  # nothing is written twice


def test_a_batch_written_in_a_transaction_that_rolls_back_is_written_again(url: str) -> None:
    storage = BufferedStorage(url)
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize")
    study.optimize(objective, n_trials=5)
    engine = create_engine(url)
    with engine.connect() as connection:
        transaction = connection.begin()
        assert storage.pending().write(connection) == 5
        transaction.rollback()  # e.g. the heartbeat found the lease lost: nothing confirmed
    assert optuna.load_study(study_name="s", storage=url).trials == []
    batch = storage.pending()
    assert len(batch) == 5
    with engine.begin() as connection:
        batch.write(connection)
    batch.confirm()
    assert len(storage.pending()) == 0
    assert len(optuna.load_study(study_name="s", storage=url).trials) == 5
    engine.dispose()


def test_only_finished_trials_in_order_until_the_end(url: str) -> None:
    storage = BufferedStorage(url)
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize")
    study.optimize(objective, n_trials=3)
    running = study.ask()  # asked, not told: it blocks the trials after it
    study.enqueue_trial({"x": 2.0, "width": 4, "kind": "bb"})
    assert storage.flush() == 3
    assert storage.flush(final=True) == 2  # the end: the queued one stays queued, the other fails
    states = [t.state for t in optuna.load_study(study_name="s", storage=url).trials]
    assert states[3:] == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]
    assert running.number == 3


def test_opening_a_stored_study_loads_it_and_continues_its_numbers(url: str) -> None:
    first = BufferedStorage(url)
    study = optuna.create_study(storage=first, study_name="s", direction="maximize")
    study.optimize(objective, n_trials=12)
    first.flush()
    again = BufferedStorage(url)
    resumed = optuna.create_study(
        storage=again, study_name="s", direction="maximize", load_if_exists=True
    )
    assert same_trials(resumed.trials, study.trials)
    assert resumed.best_value == study.best_value
    resumed.optimize(objective, n_trials=4)
    assert again.flush() == 4
    stored = optuna.load_study(study_name="s", storage=url).trials
    assert [t.number for t in stored] == list(range(16))


def test_a_search_on_buffered_storage_ranks_what_its_database_study_holds(url: str) -> None:
    request = SearchRequest(
        model="gpt-1.7b",
        training={"seq_length": 2048, "global_batch_size": 64},
        cluster="dgx-a100-1n",
        sampler="tpe",
        trials=15,
        seed=3,
        constraints={"tp": [1, 2]},
    )
    storage = BufferedStorage(url)
    statements: list[str] = []
    event.listen(
        storage.remote.engine,
        "before_cursor_execute",
        lambda *args: statements.append(args[2]),
    )
    result = run_search(request, storage=storage, study_name="search")
    trial_writes = [s for s in statements if s.lstrip().upper().startswith("INSERT INTO TRIAL")]
    assert trial_writes == []  # the study ran in memory: no trial touched the database
    storage.flush(final=True)
    stored = optuna.load_study(study_name="search", storage=url)
    assert result.trials == len(stored.trials) == 15
    plans = {trial.number: evaluation_of(trial) for trial in stored.trials}
    assert all(plans[p.trial_number] is not None for p in result.plans if p.trial_number)
    # A second run on the same study resumes it (the budget is the study's: nothing left).
    again = run_search(request, storage=BufferedStorage(url), study_name="search")
    assert again.trials == 15
    assert [p.plan_hash for p in again.plans] == [p.plan_hash for p in result.plans]
