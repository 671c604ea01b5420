"""Engine and session plumbing: one engine per database URL, one session per request.

SQLite and PostgreSQL are made to behave alike: SQLite gets foreign keys, WAL (readers never
block the writer) and real transactions with savepoints (pysqlite's own transaction handling
skips ``BEGIN`` and breaks ``SAVEPOINT``; the fix is SQLAlchemy's documented recipe).

Every connection is time-limited (``DatabaseTimeouts``), so a database that hangs fails the
request (a 503, ``app.errors``) instead of hanging it: connecting, waiting for a pooled
connection, each statement on the server, and, on the client, each exchange with the server
(a server behind a black hole answers nothing, so its own ``statement_timeout`` never comes).
"""

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar

import psycopg
from fastapi import Depends, Request
from psycopg.errors import _WaitTimeout
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from app.admission_transaction import end_admission_transaction
from app.auth.access import admit_deferred, defer_admission
from app.common.limits import apply_limits
from app.db_liveness import check_liveness_on_checkout
from app.loop_reads import (
    CONNECTION_FAILURES,
    LoopReads,
    attach,
    loop_read_deadline_s,
    loop_reads_of,
)


@dataclass(frozen=True)
class DatabaseTimeouts:
    """Limits on every connection (settings ``AUTOPAR_DB_*``; README, Configuration)."""

    connect_s: float = 5.0
    """PostgreSQL: establishing a connection (psycopg enforces ``connect_timeout`` itself)."""
    statement_s: float = 10.0
    """PostgreSQL: ``statement_timeout`` on the server; the client gives up on an exchange
    (query, commit) that gets no answer ``CLIENT_GRACE_S`` later and closes the connection."""
    pool_s: float = 10.0
    """Waiting for a free pooled connection (SQLAlchemy ``pool_timeout``)."""
    busy_s: float = 5.0
    """SQLite: how long a writer waits for the lock before "database is locked"."""
    loop_read_s: float = 0.5
    """PostgreSQL: each exchange of a read run in the event loop (``app.loop_reads``); past it
    the read runs again in the thread pool under ``statement_s``. 0: no reads in the loop."""

    @property
    def client_s(self) -> float:
        return self.statement_s + CLIENT_GRACE_S


# After the server's own statement timeout: long enough for its cancellation to arrive first
# when the server is alive, so the client deadline only fires when nothing answers at all.
CLIENT_GRACE_S = 2.0
# TCP keepalives and TCP_USER_TIMEOUT (libpq): a dead peer or a black-holed route is noticed by
# the kernel within seconds even on an idle pooled connection.
_KEEPALIVE = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}


# Connections kept per engine (API process), and the most opened beyond them. Under load a
# process has up to its request threads in a service at once (AUTOPAR_REQUEST_THREADS: 4, raised
# up to a few dozen for a remote database), plus its embedded worker and webhook dispatcher; with
# SQLAlchemy's default of 5 (+10 overflow), at 40 threads every connection past the 5th was
# closed when returned and opened again for the next request (a PostgreSQL login each time).
# 20 + 10 per process keeps two API processes and their workers under PostgreSQL's default
# max_connections (100).
POOL_SIZE = 20
POOL_MAX_OVERFLOW = 10


def is_sqlite(url: str | URL) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def redact(url: str | URL) -> str:
    """The URL as safe to log: the password, if any, is masked."""
    return make_url(url).render_as_string(hide_password=True)


def make_engine(url: str | URL, timeouts: DatabaseTimeouts | None = None, **kwargs: Any) -> Engine:
    """Engine for ``url`` with the per-backend settings above. ``kwargs`` go to create_engine
    (and win over the timeouts' ``pool_timeout``)."""
    timeouts = timeouts or DatabaseTimeouts()
    in_memory = is_sqlite(url) and make_url(url).database in (None, "", ":memory:")
    pool = {} if in_memory else {"pool_size": POOL_SIZE, "max_overflow": POOL_MAX_OVERFLOW}
    kwargs = {"pool_timeout": timeouts.pool_s, **pool, **kwargs}
    if is_sqlite(url):
        # Requests run in a thread pool; a pooled connection may serve several threads in turn.
        engine = create_engine(url, connect_args={"check_same_thread": False}, **kwargs)
        _configure_sqlite(engine, in_memory=in_memory, timeouts=timeouts)
        return engine
    if make_url(url).get_driver_name() != "psycopg":
        engine = create_engine(url, pool_pre_ping=True, **kwargs)
        apply_timeouts(engine, timeouts)
        return engine
    engine = _psycopg_engine(url, timeouts, **kwargs)
    if timeouts.loop_read_s == 0:
        return engine
    # The event loop's own connection for the hot reads (app.loop_reads): a pool of one, opened
    # by a worker thread when first wanted.
    loop_engine = _psycopg_engine(url, timeouts, pool_size=1, max_overflow=0, pool_timeout=0.1)
    loop_engine = loop_engine.execution_options(isolation_level="AUTOCOMMIT")
    attach(engine, LoopReads(loop_engine, deadline_s=timeouts.loop_read_s))
    return engine


def _psycopg_engine(url: str | URL, timeouts: DatabaseTimeouts, **kwargs: Any) -> Engine:
    # A checkout pings only a connection that may have died (app.db_liveness), not every one
    # as SQLAlchemy's pool_pre_ping (which other drivers keep).
    engine = create_engine(url, pool_pre_ping=False, **kwargs)
    check_liveness_on_checkout(engine)
    apply_timeouts(engine, timeouts)
    return engine


# PostgreSQL ----------------------------------------------------------------------------------
class DeadlineConnection(psycopg.Connection[Any]):
    """A psycopg connection whose every exchange with the server has a deadline.

    psycopg waits for the server in ``Connection.wait`` (queries, commits, rollbacks); without a
    timeout it waits forever on a socket that a black hole keeps open. Past the deadline the
    connection's protocol state is unknown, so it is closed: SQLAlchemy sees a disconnect and the
    pool drops it. A transaction cut off so was never committed unless its COMMIT reached the
    server and only the answer was lost (the one case no client can tell).
    """

    deadline_s: float | None = None

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        deadline_s = timeout if timeout is not None else self._deadline_s()
        try:
            return super().wait(gen, interval, deadline_s)
        except _WaitTimeout:
            self.close()
            raise psycopg.OperationalError(
                f"the database sent no answer within {deadline_s:g} s; connection closed"
            ) from None

    def _deadline_s(self) -> float | None:
        # A read in the event loop waits less (app.loop_reads).
        in_loop_s = loop_read_deadline_s()
        if in_loop_s is None:
            return self.deadline_s
        return in_loop_s if self.deadline_s is None else min(in_loop_s, self.deadline_s)


def postgres_connect_params(params: dict[str, Any], timeouts: DatabaseTimeouts) -> dict[str, Any]:
    """``params`` (psycopg connection keywords) with the timeouts and keepalives added; an
    ``options`` the URL already has (a search_path, say) is kept."""
    statement_ms = int(timeouts.statement_s * 1000)
    options = " ".join(
        filter(None, [params.get("options"), f"-c statement_timeout={statement_ms}"])
    )
    return {
        **_KEEPALIVE,
        "tcp_user_timeout": int(timeouts.client_s * 1000),
        "connect_timeout": max(1, round(timeouts.connect_s)),
        **params,
        "options": options,
    }


def apply_timeouts(engine: Engine, timeouts: DatabaseTimeouts) -> None:
    """Time-limit every new connection of a PostgreSQL ``engine`` (one made here or elsewhere,
    e.g. Optuna's storage engine); connections it already pooled are dropped."""
    if engine.dialect.name != "postgresql" or engine.dialect.driver != "psycopg":
        return

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        if loop_read_deadline_s() is not None:
            # Connecting may take the connect timeout; the loop's connection is opened in a
            # worker thread (app.loop_reads), and a read that lost it goes there too.
            raise psycopg.OperationalError("not connecting from the event loop")
        connection = DeadlineConnection.connect(
            *cargs, **postgres_connect_params(cparams, timeouts)
        )
        connection.deadline_s = timeouts.client_s
        return connection

    @event.listens_for(engine, "checkin")
    def _restore(dbapi_connection: Any, _record: Any) -> None:
        # ``no_timeouts`` lifts them for one checkout only.
        if isinstance(dbapi_connection, DeadlineConnection):
            dbapi_connection.deadline_s = timeouts.client_s

    engine.pool.dispose()


@contextmanager
def no_timeouts(connection: Connection) -> Iterator[None]:
    """Within ``connection``'s transaction: no statement timeout (migrations, which may wait
    for another process's migration lock or rewrite big tables)."""
    driver = connection.connection.driver_connection
    if connection.dialect.name != "postgresql" or not isinstance(driver, DeadlineConnection):
        yield
        return
    deadline = driver.deadline_s
    driver.deadline_s = None
    connection.execute(text("SET LOCAL statement_timeout = 0"))
    try:
        yield
    finally:
        driver.deadline_s = deadline


# SQLite --------------------------------------------------------------------------------------
def _configure_sqlite(engine: Engine, *, in_memory: bool, timeouts: DatabaseTimeouts) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite; "begin" below issues BEGIN itself.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(timeouts.busy_s * 1000)}")
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL is durable across application crashes; only power loss can drop
            # the last transactions (https://www.sqlite.org/wal.html#performance_considerations).
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get(_SQLITE_IMMEDIATE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


_SQLITE_IMMEDIATE = "autopar_sqlite_begin_immediate"


def begin_write(session: Session) -> None:
    """Start ``session``'s transaction as a writer, before its first statement.

    On SQLite that is ``BEGIN IMMEDIATE``: a transaction that reads and then writes would
    otherwise fail at once with "database is locked" when another connection wrote in between
    (SQLITE_BUSY_SNAPSHOT, which the busy timeout does not retry) -- and a search worker writes
    to the same file several times a second. Elsewhere (PostgreSQL) it changes nothing.
    """
    if session.info.get(_READ_ONLY_KEY):
        raise RuntimeError("a read-only service (run_read_in_session) began a write")
    end_admission_transaction(session)  # the API-key check's (it only read the key)
    if session.in_transaction():
        raise RuntimeError("begin_write must come before the transaction's first statement")
    session.connection(execution_options={_SQLITE_IMMEDIATE: True})


def make_session_factory(bind: Any) -> sessionmaker[Session]:
    # expire_on_commit=False: services return rows after committing and routers serialize them.
    return sessionmaker(bind=bind, expire_on_commit=False)


# Sessions and threads ------------------------------------------------------------------------
# Sessions are synchronous, so the service code that uses them runs in the thread pool. Routers
# are ``async def`` and hand the service to ``run_in_session``, which also returns the session's
# connection to the pool before the thread is released. FastAPI's usual shape (sync endpoints, a
# sync generator dependency) needs a second and third thread per request to serialize the
# response and close the session while the connection is still checked out; with more requests
# in flight than threads, every thread then waits for a connection held by a request that waits
# for a thread, and the pool times out (a deadlock, measured at 100 concurrent clients). The
# read-only hot services go through ``run_read_in_session`` instead, which runs them in the event
# loop's own thread (on PostgreSQL on a leash, ``app.loop_reads``).


async def get_db(request: Request) -> AsyncIterator[Session]:
    """FastAPI dependency: a session from the app's factory, scoped to the caller's tenant
    (``app.auth``: a refused API key is a 401 before any work) by the first ``run_in_session``,
    in the same thread hop as the service. The final close is a no-op after ``run_in_session``."""
    session: Session = request.app.state.session_factory()
    try:
        settings = request.app.state.settings
        defer_admission(
            request,
            session,
            require_auth=settings.require_auth,
            default_searches_per_minute=settings.searches_per_minute,
        )
        apply_limits(session, settings.service_limits())
        yield session
    finally:
        session.close()


async def get_public_db(request: Request) -> AsyncIterator[Session]:
    """A session for the few routes anyone may call (health probes, the version): no API key
    asked, scoped to no tenant, so such routes must read no tenant's rows."""
    session: Session = request.app.state.session_factory()
    try:
        yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_db)]
PublicSessionDep = Annotated[Session, Depends(get_public_db)]

P = ParamSpec("P")
T = TypeVar("T")


async def run_in_session(
    service: Callable[Concatenate[Session, P], T],
    session: Session,
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """``service(session, ...)`` in the thread pool, after admitting the request (its API key
    query, ``app.auth.access.admit_deferred``) in the same thread; the session's connection goes
    back to the pool from that thread (rows returned stay readable: sessions do not expire on
    commit)."""

    def call() -> T:
        try:
            admit_deferred(session)
            return service(session, *args, **kwargs)
        finally:
            session.close()

    return await run_in_threadpool(call)


async def run_read_in_session(
    service: Callable[Concatenate[Session, P], T],
    session: Session,
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """``run_in_session`` for a service that only reads (the hot ones: an estimate, a search's
    status and plans). On SQLite it runs right here, in the event loop's thread: a read in WAL
    mode never waits for a lock (readers do not block on the writer, so the busy timeout never
    applies), so it holds the loop no longer than its own CPU time, which it would hold the GIL
    for in a pool thread anyway; and the hop to a pool thread and back (a queue, two wake-ups,
    GIL hand-overs) cost more CPU than the request's own work -- 9.4 against 4.3 ms per cached
    estimate on this repository's 2-core test VM (``benchmarks/bench_request_cpu.py``).
    PostgreSQL, which can hang (a network away), is read here too, but on a short leash, and
    from the thread pool whenever the loop has no connection of its own open or the last read
    here failed (``app.loop_reads``). The service may not write: ``begin_write`` or a flush with
    changes raises."""
    session.info[_READ_ONLY_KEY] = True
    if _is_sqlite_session(session):
        return _run_here(service, session, *args, **kwargs)
    if isinstance(session.bind, Engine):
        engine = session.bind
        loop_reads = loop_reads_of(engine)
        if loop_reads is not None and loop_reads.ready():
            session.bind = loop_reads.engine
            try:
                with loop_reads.reading_in_loop():
                    return _run_here(service, session, *args, **kwargs)
            except CONNECTION_FAILURES as error:
                # It wrote nothing (and an admission it failed stays pending): run it again
                # below, with the usual timeouts.
                loop_reads.pause(error)
        # Nothing to commit or roll back: no BEGIN and no ROLLBACK, two of a cached
        # estimate's five round trips to PostgreSQL. Each statement still sees what was
        # committed before it, as in a transaction at PostgreSQL's default READ COMMITTED.
        # (The loop's engine is in autocommit too.)
        session.bind = _autocommit(engine)
    return await run_in_session(service, session, *args, **kwargs)


def _run_here(
    service: Callable[Concatenate[Session, P], T], session: Session, /, *args: Any, **kwargs: Any
) -> T:
    try:
        admit_deferred(session)
        return service(session, *args, **kwargs)
    finally:
        session.close()


_READ_ONLY_KEY = "autopar_read_only"


@lru_cache(maxsize=8)
def _autocommit(engine: Engine) -> Engine:
    """``engine`` (the same pool) with every connection it hands out in autocommit mode."""
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def _is_sqlite_session(session: Session) -> bool:
    bind = session.get_bind()
    return bind.dialect.name == "sqlite"


@event.listens_for(Session, "before_flush")
def _refuse_writes_when_read_only(session: Session, _context: Any, _instances: Any) -> None:
    if session.info.get(_READ_ONLY_KEY) and (session.new or session.dirty or session.deleted):
        raise RuntimeError("a read-only service (run_read_in_session) changed rows")
