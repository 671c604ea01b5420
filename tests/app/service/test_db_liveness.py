"""Pooled PostgreSQL connections (app.db_liveness): one used a moment ago is handed out without a
ping; one the server closed meanwhile, or one idle past ``IDLE_PING_S``, is pinged first, and a
dead one is replaced before anything runs on it."""

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text

from app import db_liveness
from app.db import make_engine

pytestmark = pytest.mark.postgresql_only


@pytest.fixture
def engine(make_empty_database: Callable[[], str]) -> Iterator[Engine]:
    engine = make_engine(make_empty_database())
    yield engine
    engine.dispose()


@pytest.fixture
def pings(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each ping the pool's checkout check sends, with its answer (True: alive)."""
    sent: list[bool] = []
    real_ping = engine.dialect.do_ping

    def counting_ping(dbapi_connection: Any) -> bool:
        try:
            alive = real_ping(dbapi_connection)
        except Exception:
            sent.append(False)
            raise
        sent.append(alive)
        return alive

    monkeypatch.setattr(engine.dialect, "do_ping", counting_ping)
    return sent


def backend_pid(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_the_pool_does_not_ping_on_every_checkout(engine: Engine, pings: list[bool]) -> None:
    assert not engine.pool._pre_ping  # the check replaces SQLAlchemy's ping for psycopg
    first = backend_pid(engine)
    assert [backend_pid(engine) for _ in range(20)] == [first] * 20
    assert pings == []


def test_a_connection_the_server_closed_is_replaced_before_use(
    engine: Engine, pings: list[bool]
) -> None:
    pooled = backend_pid(engine)
    # Another pool, in autocommit (pg_stat_activity is a snapshot per transaction); the pooled
    # connection stays idle meanwhile.
    admin_engine = make_engine(engine.url).execution_options(isolation_level="AUTOCOMMIT")
    try:
        with admin_engine.connect() as admin:
            terminated = admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pooled})
            assert terminated.scalar()
            wait_until_gone(admin, pooled)
    finally:
        admin_engine.engine.dispose()
    # The server's goodbye is on the idle socket: the check sees it, pings, gets an error, and
    # the pool connects again; the caller's statement runs as if nothing had happened.
    assert backend_pid(engine) != pooled
    assert pings == [False]


def wait_until_gone(admin: Connection, pid: int) -> None:
    """pg_terminate_backend returns once the signal is sent; the backend says goodbye on its
    socket and exits a moment later."""
    deadline = time.monotonic() + 10
    alive = text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid")
    while admin.execute(alive, {"pid": pid}).scalar_one():
        assert time.monotonic() < deadline, f"backend {pid} still there 10 s after termination"
        time.sleep(0.02)


def test_a_connection_idle_past_the_limit_is_pinged(
    engine: Engine, pings: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = backend_pid(engine)
    monkeypatch.setattr(db_liveness, "IDLE_PING_S", 0.0)
    assert backend_pid(engine) == first
    assert pings == [True]
