"""Engine and session plumbing: one engine per database URL, one session per request.

SQLite and PostgreSQL are made to behave alike: SQLite gets foreign keys, WAL (readers never
block the writer) and real transactions with savepoints (pysqlite's own transaction handling
skips ``BEGIN`` and breaks ``SAVEPOINT``; the fix is SQLAlchemy's documented recipe).
"""

from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar

from fastapi import Depends, Request
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

# How long a SQLite writer waits for the lock before failing with "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 5_000


def is_sqlite(url: str | URL) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def redact(url: str | URL) -> str:
    """The URL as safe to log: the password, if any, is masked."""
    return make_url(url).render_as_string(hide_password=True)


def make_engine(url: str | URL, **kwargs: Any) -> Engine:
    """Engine for ``url`` with the per-backend settings above. ``kwargs`` go to create_engine."""
    if is_sqlite(url):
        # Requests run in a thread pool; a pooled connection may serve several threads in turn.
        engine = create_engine(url, connect_args={"check_same_thread": False}, **kwargs)
        _configure_sqlite(engine, in_memory=make_url(url).database in (None, "", ":memory:"))
        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _configure_sqlite(engine: Engine, *, in_memory: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite; "begin" below issues BEGIN itself.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
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
# for a thread, and the pool times out (a deadlock, measured at 100 concurrent clients).


async def get_db(request: Request) -> AsyncIterator[Session]:
    """FastAPI dependency: a session from the app's factory. Creating it does no I/O, so this
    runs on the event loop; the final close is a no-op after ``run_in_session``."""
    session: Session = request.app.state.session_factory()
    try:
        yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_db)]

P = ParamSpec("P")
T = TypeVar("T")


async def run_in_session(
    service: Callable[Concatenate[Session, P], T],
    session: Session,
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """``service(session, ...)`` in the thread pool; the session's connection goes back to the
    pool from that thread (rows returned stay readable: sessions do not expire on commit)."""

    def call() -> T:
        try:
            return service(session, *args, **kwargs)
        finally:
            session.close()

    return await run_in_threadpool(call)
