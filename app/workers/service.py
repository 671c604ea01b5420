"""``SearchWorker``: claim a search, run it under a lease, store its ranking, repeat."""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import optuna
from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.db import DatabaseTimeouts, apply_timeouts
from app.orm import SearchRow, utcnow
from app.plans import repository as plans
from app.searches.progress import StoredProgress, primary_metric
from app.searches.schemas import SearchOutcome
from app.searches.service import notify_search_end
from app.webhooks.dispatcher import WebhookDispatcher
from app.webhooks.sender import DeliveryPolicy, WebhookSender
from app.workers import identity, repository
from app.workers.lease import LeaseKeeper
from app.workers.progress import ProgressTracker
from search import SearchRequest, SearchResult, run_search
from search.runner import DEFAULT_TRIALS
from search.study_storage import BufferedStorage, TrialBatch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerOptions:
    lease_s: float = 60.0
    """How long a claim lasts without a heartbeat; a dead worker's search waits this long."""
    poll_s: float = 1.0
    """Pause between looks at an empty queue."""
    heartbeat_s: float | None = None
    """Between lease renewals (and progress writes, and cancel checks); default lease_s / 4,
    at most 5 s."""
    db_timeouts: DatabaseTimeouts = field(default_factory=DatabaseTimeouts)
    """For the Optuna storage's own connections (the session factory's engine has its own)."""

    webhooks: DeliveryPolicy = field(default_factory=DeliveryPolicy)
    """Sending the searches' webhooks: attempts, backoff, timeout."""
    webhook_secret: str | None = field(default=None, repr=False)
    """Signs the webhooks of searches without their own secret (AUTOPAR_WEBHOOK_SECRET)."""
    webhook_poll_s: float | None = None
    """Between looks for due webhooks; default poll_s."""

    @property
    def heartbeat_interval_s(self) -> float:
        return self.heartbeat_s if self.heartbeat_s is not None else min(self.lease_s / 4, 5.0)


def new_worker_id() -> str:
    """``host-pid-random@hostkey``: see ``app.workers.identity``."""
    return identity.new_worker_id()


# While the database is away, a worker retries its writes and its claims with a backoff from
# the first to the longest pause (doubling), then resumes as if nothing happened: the outage is
# not the search's fault, and spends none of its attempts.
RETRY_FIRST_S = 0.2
RETRY_MAX_S = 5.0


# Workers starting together on a fresh database race to create Optuna's tables (its storage
# checks, then creates: "table studies already exists"); the loser retries and finds them.
STORAGE_SETUP_ATTEMPTS = 5
STORAGE_SETUP_RETRY_S = 0.2


def prepare_optuna_storage(storage_url: str | None) -> None:
    """Create Optuna's storage tables in the database if they are missing, tolerating a race
    with other workers. Done before a worker claims anything, so a race can never fail a
    search."""
    if storage_url is None:
        return
    for attempt in range(STORAGE_SETUP_ATTEMPTS):
        try:
            storage = optuna.storages.RDBStorage(storage_url)
        except SQLAlchemyError:
            if attempt == STORAGE_SETUP_ATTEMPTS - 1:
                raise
            time.sleep(STORAGE_SETUP_RETRY_S * (attempt + 1))
        else:
            storage.engine.dispose()
            return


def optuna_storage_url(database_url: str) -> str | None:
    """Optuna's RDB storage lives in the service's own database (its tables next to ours), so a
    study is shared by every worker of that database and survives them. An in-memory SQLite
    database cannot be shared between connections: its studies stay in memory (not resumable)."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        return None
    return url.render_as_string(hide_password=False)


class SearchWorker:
    def __init__(
        self,
        *,
        session_factory: sessionmaker[Session],
        database_url: str,
        options: WorkerOptions | None = None,
        worker_id: str | None = None,
    ) -> None:
        self.session_factory = session_factory
        self.storage_url = optuna_storage_url(database_url)
        self.options = options or WorkerOptions()
        self.worker_id = worker_id or new_worker_id()
        identity.register(self.worker_id)  # alive: its own process never takes its searches
        self._stopping = threading.Event()
        self._claim_backoff_s = 0.0
        self._outage_at: float | None = None  # monotonic time this worker last saw one
        self._storage_ready = False
        self._sender: WebhookSender | None = None

    def stop(self) -> None:
        """Finish soon: the current search stops at its next batch and goes back to the queue."""
        self._stopping.set()

    def run_forever(self) -> None:
        """Run searches until stopped, and send due webhooks meanwhile in a thread of their own
        (a slow receiver must not hold up the searches)."""
        logger.info("worker %s polling for searches", self.worker_id)
        dispatcher = WebhookDispatcher(
            self._webhook_sender(),
            poll_s=self.options.webhook_poll_s or self.options.poll_s,
            name=f"autopar-webhooks-{self.worker_id[-6:]}",
        )
        dispatcher.start()
        try:
            while not self._stopping.is_set():
                try:
                    worked = self.run_once()
                except Exception:  # the database is away, ...: log, wait, try again
                    logger.exception("worker %s: claiming a search failed", self.worker_id)
                    worked = None
                if worked is None:
                    self._stopping.wait(self.options.poll_s)
        finally:
            dispatcher.stop()
            self._webhook_sender().close()
            self._sender = None
        identity.unregister(self.worker_id)
        logger.info("worker %s stopped", self.worker_id)

    def deliver_webhooks(self) -> int:
        """One pass over the due webhooks (``run_forever`` makes them continually); the
        attempts made."""
        return self._webhook_sender().deliver_due(should_stop=self._stopping.is_set)

    def _webhook_sender(self) -> WebhookSender:
        # Made on first use: most workers a test makes never send anything.
        if self._sender is None:
            self._sender = WebhookSender(
                session_factory=self.session_factory,
                policy=self.options.webhooks,
                default_secret=self.options.webhook_secret,
            )
        return self._sender

    def run_once(self) -> str | None:
        """Claim one search and run it to the end; its id, or None when the queue was empty."""
        if not self._storage_ready:
            prepare_optuna_storage(self.storage_url)
            self._storage_ready = True
        try:
            row = self._claim()
        except Exception as exc:
            if not _database_outage(exc):
                raise
            self._back_off_claiming(exc)
            return None
        self._claim_backoff_s = 0.0
        if row is None:
            return None
        logger.info(
            "worker %s claimed search %s (attempt %d)", self.worker_id, row.id, row.attempts
        )
        self._run(row)
        return row.id

    def _claim(self) -> SearchRow | None:
        with self.session_factory() as session:
            return repository.claim_next(
                session,
                worker_id=self.worker_id,
                lease_s=self.options.lease_s,
                dead_owners=self._dead_local_owners(session),
                take_over_expired=not self._outage_recent(),
            )

    def _saw_outage(self) -> None:
        self._outage_at = time.monotonic()

    def _outage_recent(self) -> bool:
        """Within a lease of an outage this worker saw: leases that expired meanwhile belong
        to workers that could not renew either, and that renew (each heartbeat, and retries
        no longer apart than one) as soon as the database is back; taking them over would
        redo their work and count a death that did not happen."""
        return self._outage_at is not None and (
            time.monotonic() - self._outage_at < self.options.lease_s
        )

    def _dead_local_owners(self, session: Session) -> list[str]:
        """Workers of this host, dead (killed, e.g. the previous instance of a restarted
        server), that still hold leases: their searches are taken over at once."""
        suffix = identity.host_suffix()
        if suffix is None:
            return []
        owners = repository.running_owners(session, suffix=suffix)
        return identity.dead_local_owners(o for o in owners if o != self.worker_id)

    def _back_off_claiming(self, exc: BaseException) -> None:
        self._saw_outage()
        self._claim_backoff_s = min(max(self._claim_backoff_s * 2, RETRY_FIRST_S), RETRY_MAX_S)
        logger.warning(
            "worker %s: database unavailable, next look in %.1f s: %s",
            self.worker_id,
            self._claim_backoff_s,
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        )
        self._stopping.wait(self._claim_backoff_s)

    def _retrying(self, search_id: str, what: str, write: Callable[[], None]) -> None:
        """``write`` (one transaction, which checks the lease itself) until the database takes
        it: an outage is waited out, so the result is neither lost nor its attempt spent. A
        worker told to stop gives up (its lease then expires and the search is taken over)."""
        delay = RETRY_FIRST_S
        while True:
            try:
                write()
                return
            except Exception as exc:
                if not _database_outage(exc) or self._stopping.is_set():
                    raise
                self._saw_outage()
                logger.warning(
                    "search %s: %s: database unavailable, again in %.1f s", search_id, what, delay
                )
            if self._stopping.wait(delay):
                return
            # Never further apart than heartbeats: the lease must not lapse for want of a try.
            delay = min(delay * 2, RETRY_MAX_S, self.options.heartbeat_interval_s)

    def _lost(self, row: SearchRow) -> None:
        """Another worker took the search over while this one was alive (it could not renew:
        the database was away): give back the attempt that takeover spent."""
        try:
            with self.session_factory() as session:
                repository.refund_attempt(session, search_id=row.id, worker_id=self.worker_id)
        except SQLAlchemyError as exc:
            logger.warning("search %s: could not give back the attempt: %s", row.id, exc)

    def _open_study(self) -> BufferedStorage | None:
        if self.storage_url is None:
            return None
        study = BufferedStorage(self.storage_url)
        apply_timeouts(study.remote.engine, self.options.db_timeouts)
        return study

    # One search ----------------------------------------------------------------------------
    def _run(self, row: SearchRow) -> None:
        try:
            request = SearchRequest.model_validate(row.request)
        except ValidationError as exc:
            message = f"the stored request is no longer valid: {exc}"
            self._retrying(row.id, "failing it", lambda: self._fail(row, message))
            return
        # timeout_s is the whole search's budget: earlier claims' run time is spent.
        run_s = StoredProgress.model_validate(row.progress or {}).run_s or 0.0
        request = _remaining_budget(request, run_s)
        tracker = ProgressTracker(
            metric=primary_metric(row.objective),
            trials_done=row.trials_done,
            best_value=row.best_value,
            timeout_s=request.timeout_s,
            run_s=run_s,
        )
        try:
            # The study runs in memory; its trials reach the database study with every
            # heartbeat and when the search ends (see search.study_storage for the trade-off).
            study = self._open_study()
        except Exception as exc:
            if _database_outage(exc):
                self._retrying(row.id, "handing it back", lambda: self._release(row))
                return
            raise
        try:
            self._run_with(row, request, tracker, study)
        finally:
            if study is not None:
                study.close()

    def _run_with(
        self,
        row: SearchRow,
        request: SearchRequest,
        tracker: ProgressTracker,
        study: BufferedStorage | None,
    ) -> None:
        keeper = LeaseKeeper(
            session_factory=self.session_factory,
            search_id=row.id,
            worker_id=self.worker_id,
            lease_s=self.options.lease_s,
            interval_s=self.options.heartbeat_interval_s,
            tracker=tracker,
            study=study,
            on_outage=self._saw_outage,
        )
        try:
            with keeper:
                result = run_search(
                    request,
                    storage=study,
                    study_name=row.optuna_study_name,
                    progress=tracker,
                    should_stop=lambda: self._stopping.is_set() or keeper.should_stop(),
                )
        except Exception as exc:
            if keeper.lost.is_set():
                self._lost(row)
                return  # the new owner runs the study on
            if _database_outage(exc):
                # The database (and with it the study's storage) went away: not the search's
                # fault. Its trials written so far are safe in the study; the next claim
                # resumes it.
                logger.warning("search %s: database error, back to the queue: %s", row.id, exc)
                self._retrying(row.id, "handing it back", lambda: self._release(row, study))
                return
            logger.exception("search %s failed", row.id)
            error = f"{type(exc).__name__}: {exc}"
            self._retrying(row.id, "failing it", lambda: self._fail(row, error, study))
            return
        if keeper.lost.is_set():
            self._lost(row)
            return  # the new owner finishes the study and writes the ranking
        if result.status == "stopped" and not keeper.cancel_requested.is_set():
            # Shutting down: resumable at once by the next worker.
            self._retrying(row.id, "handing it back", lambda: self._release(row, study))
            return
        cancelled = result.status == "stopped"
        budget = tracker.snapshot().trials_budget or _trial_budget(request, result)
        self._retrying(
            row.id,
            "storing the ranking",
            lambda: self._finish(
                row,
                result,
                budget=budget,
                status="cancelled" if cancelled else "succeeded",
                study=study,
            ),
        )

    def _finish(
        self,
        row: SearchRow,
        result: SearchResult,
        *,
        budget: int | None,
        status: str,
        study: BufferedStorage | None = None,
    ) -> None:
        ranked = result.plans
        unranked = [result.single_type_best] if result.single_type_best is not None else []
        trials_done = result.trials if result.trials is not None else result.evaluated
        with self.session_factory() as session:
            if not repository.finish(
                session,
                search_id=row.id,
                worker_id=self.worker_id,
                status=status,
                trials_done=trials_done,
                best_value=ranked[0].objective_values[0] if ranked else None,
            ):
                session.rollback()
                logger.warning("search %s: lease lost before the ranking was stored", row.id)
                self._lost(row)
                return
            batch = study.pending(final=True) if study is not None else None
            if batch is not None:
                batch.write(session.connection())  # the study's last trials, with the ranking
            rows = plans.store_ranking(
                session,
                search_id=row.id,
                ranked_plans=ranked,
                unranked_plans=unranked,
                calibration_id=row.calibration_id,
                tenant=row.tenant,
            )
            outcome = SearchOutcome(
                sampler=result.sampler,
                status=result.status,
                objective_names=result.objective_names,
                directions=result.directions,
                space_size=result.space_size,
                trials=result.trials,
                single_type_best_plan_id=(
                    rows[result.single_type_best.plan_hash].id
                    if result.single_type_best is not None
                    else None
                ),
                gain_over_single_type=result.gain_over_single_type,
                notes=result.notes,
            )
            progress = StoredProgress(
                trials_budget=budget,
                eta_s=0.0,
                evaluated=result.evaluated,
                feasible=result.feasible,
                best_plan_id=rows[ranked[0].plan_hash].id if ranked else None,
                outcome=outcome,
            )
            repository.set_progress(
                session, search_id=row.id, progress=progress.model_dump(mode="json")
            )
            notify_search_end(session, search_id=row.id, now=utcnow())
            session.commit()
        if batch is not None:
            batch.confirm()
        logger.info(
            "search %s %s: %d plans ranked, %d evaluated",
            row.id,
            status,
            len(ranked),
            result.evaluated,
        )

    def _fail(self, row: SearchRow, error: str, study: BufferedStorage | None = None) -> None:
        with self.session_factory() as session:
            if repository.finish(
                session, search_id=row.id, worker_id=self.worker_id, status="failed", error=error
            ):
                notify_search_end(session, search_id=row.id, now=utcnow())
                batch = _write_last_trials(session, study, row.id)
                session.commit()
                if batch is not None:
                    batch.confirm()
            else:
                session.rollback()

    def _release(self, row: SearchRow, study: BufferedStorage | None = None) -> None:
        try:
            with self.session_factory() as session:
                if repository.release(
                    session, search_id=row.id, worker_id=self.worker_id, commit=False
                ):
                    # The next worker resumes the study from what is written: all of it.
                    batch = _write_last_trials(session, study, row.id)
                    session.commit()
                    if batch is not None:
                        batch.confirm()
                    logger.info("search %s handed back to the queue", row.id)
                else:
                    session.commit()
        except OperationalError:
            if not self._stopping.is_set():
                raise  # the caller (``_retrying``) waits the outage out
            # Shutting down with the database away: the lease expires and the search is
            # claimed again then.


def _write_last_trials(
    session: Session, study: BufferedStorage | None, search_id: str
) -> TrialBatch | None:
    """Write the study's remaining trials in the caller's transaction (the caller commits, then
    confirms the batch), when they can be: a search that fails or goes back to the queue must
    end (or be handed back) either way."""
    if study is None:
        return None
    batch = study.pending(final=True)
    if not len(batch):
        return None
    try:
        with session.begin_nested():
            batch.write(session.connection())
    except Exception:
        logger.exception("search %s: its last trials could not be written", search_id)
        return None
    return batch


def _remaining_budget(request: SearchRequest, run_s: float) -> SearchRequest:
    """The request with what is left of its ``timeout_s`` after ``run_s`` seconds of earlier
    claims (a spent budget: the run stops at once and ranks the study as it stands)."""
    if request.timeout_s is None or run_s <= 0:
        return request
    return request.model_copy(update={"timeout_s": max(request.timeout_s - run_s, 1e-3)})


def _trial_budget(request: SearchRequest, result: SearchResult) -> int | None:
    """What trials_done runs up to, when the run reported no progress (stopped at once)."""
    if result.sampler == "exhaustive":
        return result.space_size
    if request.trials is None and request.timeout_s is None:
        return DEFAULT_TRIALS
    return request.trials


def _database_outage(exc: BaseException) -> bool:
    """A lost or refused connection, raised by SQLAlchemy directly or through Optuna's storage
    (``StorageInternalError`` from an ``OperationalError``)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OperationalError | InterfaceError):
            return True
        seen = seen.__cause__
    return False
