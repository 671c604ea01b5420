"""``LeaseKeeper``: the heartbeat thread of a running search.

Every ``interval_s`` it extends the lease, writes the progress, reads the cancel flag and, in
the same transaction, writes the study's trials finished since the last beat (the study runs in
memory: ``search.study_storage.BufferedStorage``); the search's ``should_stop`` only looks at
the flags it sets, so the hot loop never touches the database. A beat that finds the lease taken
(this worker was presumed dead) writes no trials and stops the run, and the worker then writes
nothing: the new owner finishes the study.
"""

import logging
import threading
from collections.abc import Callable
from types import TracebackType

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.searches.progress import StoredProgress
from app.workers import repository
from app.workers.progress import ProgressTracker
from search.study_storage import BufferedStorage, TrialBatch

logger = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(
        self,
        *,
        session_factory: sessionmaker[Session],
        search_id: str,
        worker_id: str,
        lease_s: float,
        interval_s: float,
        tracker: ProgressTracker,
        study: BufferedStorage | None = None,
        on_outage: Callable[[], None] | None = None,
    ) -> None:
        self._session_factory = session_factory
        self._on_outage = on_outage  # told of each beat the database did not take
        self._search_id = search_id
        self._worker_id = worker_id
        self._lease_s = lease_s
        self._interval_s = interval_s
        self._tracker = tracker
        self._study = study
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"autopar-lease-{search_id[-8:]}", daemon=True
        )
        self.cancel_requested = threading.Event()
        self.lost = threading.Event()

    def should_stop(self) -> bool:
        return self.cancel_requested.is_set() or self.lost.is_set()

    def beat(self) -> None:
        try:
            state = self._renew(write_trials=self._study is not None)
        except Exception as exc:
            if self._study is None or isinstance(exc, SQLAlchemyError):
                # The database is away; keep running and try again next beat (the lease lasts
                # several beats). If it stays away, another worker takes over and we stop then.
                logger.warning("search %s: heartbeat failed: %s", self._search_id, exc)
                self._outage()
                return
            # The trials could not be written: keep the lease all the same (they are written
            # with the next beat or when the search ends).
            logger.exception("search %s: writing the study's trials failed", self._search_id)
            try:
                state = self._renew(write_trials=False)
            except SQLAlchemyError as retry:
                logger.warning("search %s: heartbeat failed: %s", self._search_id, retry)
                self._outage()
                return
        if not state.owned:
            logger.warning("search %s: lease lost to another worker; stopping", self._search_id)
            self.lost.set()
        if state.cancel_requested:
            self.cancel_requested.set()

    def _outage(self) -> None:
        if self._on_outage is not None:
            self._on_outage()

    def _renew(self, *, write_trials: bool) -> repository.LeaseState:
        snapshot = self._tracker.snapshot()
        progress = StoredProgress(
            trials_budget=snapshot.trials_budget, eta_s=snapshot.eta_s, run_s=snapshot.run_s
        )
        batch: TrialBatch | None = None
        with self._session_factory() as session:
            state = repository.renew_lease(
                session,
                search_id=self._search_id,
                worker_id=self._worker_id,
                lease_s=self._lease_s,
                trials_done=snapshot.trials_done,
                best_value=snapshot.best_value,
                progress=progress.model_dump(mode="json", exclude_none=True),
                commit=False,
            )
            if state.owned and write_trials and self._study is not None:
                batch = self._study.pending()
                batch.write(session.connection())
            session.commit()
        if batch is not None:
            batch.confirm()
        return state

    def _loop(self) -> None:
        while not self._done.wait(self._interval_s):
            self.beat()

    def __enter__(self) -> "LeaseKeeper":
        self.beat()  # at once: a search cancelled while queued for takeover stops right away
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._done.set()
        self._thread.join()
