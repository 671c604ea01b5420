"""An Optuna study run in memory and written to a database study in batches.

Optuna's RDB storage commits every step of a trial on its own: the new trial, each suggested
parameter, each attribute, the constraint, the result, the heartbeat; a heterogeneous
skeleton's ~20 parameters make that some 25 transactions per trial, and the sampler re-reads
the study from the database before every ask. A worker searching on that storage ran 559 trials
in 30 s where the CLI, in memory, ran 4,942 (SQLite; the cost model itself prices a trial in a
few milliseconds).

``BufferedStorage`` keeps the study in an ``InMemoryStorage`` (the sampler never waits on the
database) and writes its finished trials to the study of the same name in an RDB database in
one transaction per batch: ``pending()`` collects the trials not written yet,
``TrialBatch.write(connection)`` bulk-inserts them into Optuna's own tables (a handful of
multi-row ``INSERT`` statements, inside the caller's transaction), ``TrialBatch.confirm()`` marks
them written once that transaction has committed. The database study is an ordinary Optuna
study: optuna-dashboard, ``optuna.load_study`` and a ``run_search(storage=URL)`` read it.
Opening a study that already exists in the database (``optuna.create_study(...,
load_if_exists=True)``, ``optuna.load_study``) loads its trials into memory first, so a resumed
search continues it with the same trial numbers. Trials the database study holds as running or
queued belong to a process that stopped (killed mid-trial, or it wrote its queue when it ended):
opening fails them there at once, so no orphan stays RUNNING and none counts against the
budget, and the queued ones are queued again in memory (run, and written, as new trials).

The trade-offs, against writing every step as it happens:

- a process that dies loses the trials finished since its last batch (the search workers write
  one with every lease heartbeat, every few seconds, and the rest when the search ends);
- one process per study: the memory copy does not see trials that other processes add to the
  database study meanwhile. Several processes on one study (Optuna's distributed mode) use the
  RDB storage itself: ``run_search(request, storage=URL, study_name=...)``.
"""

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from functools import lru_cache
from typing import Any

from optuna.distributions import BaseDistribution, distribution_to_json
from optuna.storages import InMemoryStorage, RDBStorage
from optuna.storages._rdb import models  # Optuna's tables (its schema, migrated by Optuna)
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import Connection, func, insert, select, update

_TRIALS = models.TrialModel.__table__
_PARAMS = models.TrialParamModel.__table__
_VALUES = models.TrialValueModel.__table__
_USER_ATTRS = models.TrialUserAttributeModel.__table__
_SYSTEM_ATTRS = models.TrialSystemAttributeModel.__table__
_INTERMEDIATE = models.TrialIntermediateValueModel.__table__


def _utc(moment: datetime | None) -> datetime | None:
    """FrozenTrial times are naive local time; Optuna's tables keep naive UTC."""
    if moment is None:
        return None
    return moment.astimezone(UTC).replace(tzinfo=None)


@dataclass
class _Part:
    study_id: int  # in memory
    remote_id: int  # in the database
    start: int  # number of the first trial in ``trials``
    trials: list[FrozenTrial]


@dataclass
class TrialBatch:
    """Trials to write: ``write`` them inside a transaction, ``confirm`` once it committed."""

    storage: "BufferedStorage"
    parts: list[_Part] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(part.trials) for part in self.parts)

    def write(self, connection: Connection) -> int:
        """Insert the trials into the database study (the caller commits); how many."""
        for part in self.parts:
            trials = _unwritten(connection, part.remote_id, part.trials, part.start)
            if trials:
                _insert_trials(connection, part.remote_id, trials)
        return len(self)

    def confirm(self) -> None:
        """The transaction that wrote the batch committed: its trials are not written again."""
        self.storage._confirm(self)


def _count(connection: Connection, remote_id: int) -> int:
    found = connection.scalar(
        select(func.count()).select_from(_TRIALS).where(_TRIALS.c.study_id == remote_id)
    )
    return int(found or 0)


def _unwritten(
    connection: Connection, remote_id: int, trials: Sequence[FrozenTrial], start: int
) -> Sequence[FrozenTrial]:
    """``trials`` (numbered from ``start``) less those the database study has already: a batch
    whose COMMIT went through while the connection broke before saying so was not confirmed,
    and comes again."""
    if not trials:
        return trials
    count = _count(connection, remote_id)
    if start < count <= start + len(trials) and _ours(connection, remote_id, start, trials[0]):
        return trials[count - start :]
    return trials


def _insert_trials(connection: Connection, remote_id: int, trials: Sequence[FrozenTrial]) -> None:
    # Numbers continue the database study's: the memory copy's own numbers when this process is
    # the study's only writer (the supported case), still unique when it was not.
    count = _count(connection, remote_id)
    rows: list[dict[str, Any]] = [
        {
            "number": int(count or 0) + index,
            "study_id": remote_id,
            "state": trial.state,
            "datetime_start": _utc(trial.datetime_start),
            "datetime_complete": _utc(trial.datetime_complete),
        }
        for index, trial in enumerate(trials)
    ]
    _insert_rows(connection, _TRIALS, rows)
    # Their ids, by number (one multi-row INSERT and one SELECT on every backend, where
    # INSERT ... RETURNING of many rows runs row by row on some).
    numbers = {row["number"] for row in rows}
    found = connection.execute(
        select(_TRIALS.c.number, _TRIALS.c.trial_id).where(
            _TRIALS.c.study_id == remote_id, _TRIALS.c.number >= min(numbers)
        )
    )
    by_number = {number: trial_id for number, trial_id in found if number in numbers}
    trial_ids = [by_number[row["number"]] for row in rows]
    params: list[dict[str, Any]] = []
    values: list[dict[str, Any]] = []
    user_attrs: list[dict[str, Any]] = []
    system_attrs: list[dict[str, Any]] = []
    intermediate: list[dict[str, Any]] = []
    for trial_id, trial in zip(trial_ids, trials, strict=True):
        for name, value in trial.params.items():
            distribution = trial.distributions[name]
            params.append(
                {
                    "trial_id": trial_id,
                    "param_name": name,
                    "param_value": distribution.to_internal_repr(value),
                    "distribution_json": _distribution_json(distribution),
                }
            )
        for objective, value in enumerate(trial.values or []):
            stored, kind = models.TrialValueModel.value_to_stored_repr(value)
            values.append(
                {"trial_id": trial_id, "objective": objective, "value": stored, "value_type": kind}
            )
        for target, attrs in ((user_attrs, trial.user_attrs), (system_attrs, trial.system_attrs)):
            target.extend(
                {"trial_id": trial_id, "key": key, "value_json": json.dumps(value)}
                for key, value in attrs.items()
            )
        for step, value in trial.intermediate_values.items():
            model = models.TrialIntermediateValueModel
            step_stored, step_kind = model.intermediate_value_to_stored_repr(value)
            intermediate.append(
                {
                    "trial_id": trial_id,
                    "step": step,
                    "intermediate_value": step_stored,
                    "intermediate_value_type": step_kind,
                }
            )
    for table, table_rows in (
        (_PARAMS, params),
        (_VALUES, values),
        (_USER_ATTRS, user_attrs),
        (_SYSTEM_ATTRS, system_attrs),
        (_INTERMEDIATE, intermediate),
    ):
        _insert_rows(connection, table, table_rows)


def _ours(connection: Connection, remote_id: int, number: int, trial: FrozenTrial) -> bool:
    """Whether the database study's trial ``number`` is ``trial``, written before (same start
    time, to the microsecond) rather than another process's."""
    started = connection.scalar(
        select(_TRIALS.c.datetime_start).where(
            _TRIALS.c.study_id == remote_id, _TRIALS.c.number == number
        )
    )
    return started is not None and started == _utc(trial.datetime_start)


def _insert_rows(connection: Connection, table: Any, rows: list[dict[str, Any]]) -> None:
    """One executemany; on PostgreSQL with psycopg a ``COPY`` (psycopg runs an executemany as
    one statement per row, ~20 rows per trial: a COPY streams them in one go)."""
    if not rows:
        return
    if connection.dialect.name == "postgresql" and connection.dialect.driver == "psycopg":
        columns = list(rows[0])
        driver = connection.connection.driver_connection
        assert driver is not None  # a checked-out connection holds its psycopg connection
        cursor = driver.cursor()
        command = f"COPY {table.name} ({', '.join(columns)}) FROM STDIN"
        with cursor.copy(command) as copy:
            for row in rows:
                copy.write_row([_copy_value(row[column]) for column in columns])
        return
    connection.execute(insert(table), rows)


def _copy_value(value: Any) -> Any:
    # SQLAlchemy's Enum columns store the member's name; COPY bypasses the column types.
    return value.name if isinstance(value, Enum) else value


@lru_cache(maxsize=4096)
def _distribution_json(distribution: BaseDistribution) -> str:
    # Every trial of a study repeats the same few distributions (they hash by value).
    return distribution_to_json(distribution)


def _failed(trial: FrozenTrial) -> FrozenTrial:
    """A trial left running: nobody will finish it (its process stopped or died)."""
    copy = FrozenTrial(
        number=trial.number,
        trial_id=trial._trial_id,
        state=TrialState.FAIL,
        value=None,
        values=None,
        datetime_start=trial.datetime_start,
        datetime_complete=trial.datetime_complete or datetime.now(),
        params=trial.params,
        distributions=trial.distributions,
        user_attrs=trial.user_attrs,
        system_attrs=trial.system_attrs,
        intermediate_values=trial.intermediate_values,
    )
    return copy


def _requeued(trial: FrozenTrial) -> FrozenTrial:
    """A fresh queued trial with the parameters a stopped process had queued."""
    return FrozenTrial(
        number=-1,  # the storage numbers it
        trial_id=-1,
        state=TrialState.WAITING,
        value=None,
        values=None,
        datetime_start=None,
        datetime_complete=None,
        params={},
        distributions={},
        user_attrs=dict(trial.user_attrs),
        system_attrs=dict(trial.system_attrs),  # fixed_params: what enqueue_trial stores
        intermediate_values={},
    )


class BufferedStorage(InMemoryStorage):
    """A study in memory, written to the database at ``url`` in batches (module docstring)."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        # Study-level operations (create, attributes, load) go straight to the database: they
        # happen a few times per search. Creating it also creates Optuna's tables if missing.
        self.remote = RDBStorage(url)
        self._remote_ids: dict[int, int] = {}  # memory study id -> database study id
        self._written: dict[int, int] = {}  # memory study id -> trials written (a prefix)
        self._batch_lock = threading.Lock()

    def close(self) -> None:
        """Release the database connections."""
        self.remote.engine.dispose()

    # Studies: created and loaded through the database --------------------------------------
    def create_new_study(
        self, directions: Sequence[StudyDirection], study_name: str | None = None
    ) -> int:
        # DuplicatedStudyError when it exists: create_study(load_if_exists=True) then loads it
        # by name (get_study_id_from_name).
        """Create the study in the database and mirror it in memory."""
        remote_id = self.remote.create_new_study(directions, study_name)
        name = self.remote.get_study_name_from_id(remote_id)
        with self._lock:
            study_id = super().create_new_study(directions, name)
            self._remote_ids[study_id] = remote_id
            self._written[study_id] = 0
        return study_id

    def get_study_id_from_name(self, study_name: str) -> int:
        """The study's memory id, loading it from the database the first time."""
        with self._lock:
            try:
                return super().get_study_id_from_name(study_name)
            except KeyError:
                pass
        remote_id = self.remote.get_study_id_from_name(study_name)  # KeyError when absent
        return self._load(remote_id, study_name)

    def _load(self, remote_id: int, name: str) -> int:
        directions = self.remote.get_study_directions(remote_id)
        user_attrs = self.remote.get_study_user_attrs(remote_id)
        system_attrs = self.remote.get_study_system_attrs(remote_id)
        trials = sorted(
            self.remote.get_all_trials(remote_id, deepcopy=False), key=lambda t: t.number
        )
        left = [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
        if left:
            self._fail_left_over(remote_id, [t._trial_id for t in left])
        with self._lock:
            study_id = super().create_new_study(directions, name)
            for key, value in user_attrs.items():
                super().set_study_user_attr(study_id, key, value)
            for key, value in system_attrs.items():
                super().set_study_system_attr(study_id, key, value)
            for trial in trials:
                # Left running or queued by a process that stopped: failed, as in the database.
                template = trial if trial.state.is_finished() else _failed(trial)
                super().create_new_trial(study_id, template_trial=template)
            self._remote_ids[study_id] = remote_id
            self._written[study_id] = len(trials)
            for trial in left:
                if trial.state == TrialState.WAITING:  # queued again, after the written ones
                    super().create_new_trial(study_id, template_trial=_requeued(trial))
        return study_id

    def _fail_left_over(self, remote_id: int, trial_ids: list[int]) -> None:
        """Fail, in the database, trials a stopped process left running or queued (so they
        neither stay RUNNING forever nor count against the budget)."""
        with self.remote.engine.begin() as connection:
            connection.execute(
                update(_TRIALS)
                .where(_TRIALS.c.study_id == remote_id, _TRIALS.c.trial_id.in_(trial_ids))
                .values(state=TrialState.FAIL, datetime_complete=_utc(datetime.now()))
            )

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        """Set a study user attribute in memory and in the database."""
        super().set_study_user_attr(study_id, key, value)
        if study_id in self._remote_ids:
            self.remote.set_study_user_attr(self._remote_ids[study_id], key, value)

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        """Set a study system attribute in memory and in the database."""
        super().set_study_system_attr(study_id, key, value)
        if study_id in self._remote_ids:
            self.remote.set_study_system_attr(self._remote_ids[study_id], key, value)

    def delete_study(self, study_id: int) -> None:
        """Delete the study from memory and from the database."""
        remote_id = self._remote_ids.pop(study_id, None)
        self._written.pop(study_id, None)
        super().delete_study(study_id)
        if remote_id is not None:
            self.remote.delete_study(remote_id)

    # Trials: written in batches --------------------------------------------------------------
    def pending(self, *, final: bool = False) -> TrialBatch:
        """The trials not written yet: the finished ones that follow the last written trial
        without a gap (numbers stay in order). ``final`` (the process is done with the study):
        all of them, queued trials as queued, trials left running as failed."""
        batch = TrialBatch(self)
        with self._batch_lock, self._lock:
            for study_id, remote_id in self._remote_ids.items():
                start = self._written[study_id]
                tail = list(self.get_all_trials(study_id, deepcopy=False)[start:])
                if final:
                    chosen = [_failed(t) if t.state == TrialState.RUNNING else t for t in tail]
                else:
                    chosen = []
                    for trial in tail:
                        if not trial.state.is_finished():
                            break
                        chosen.append(trial)
                batch.parts.append(_Part(study_id, remote_id, start, chosen))
        return batch

    def _confirm(self, batch: TrialBatch) -> None:
        with self._batch_lock:
            for part in batch.parts:
                if part.study_id in self._written:
                    done = part.start + len(part.trials)
                    self._written[part.study_id] = max(self._written[part.study_id], done)

    def flush(self, *, final: bool = False) -> int:
        """Write the pending trials in a transaction of this storage's own; how many."""
        batch = self.pending(final=final)
        if not len(batch):
            return 0
        with self.remote.engine.begin() as connection:
            batch.write(connection)
        batch.confirm()
        return len(batch)
