"""PostgreSQL reads in the event loop (app.loop_reads): they run there once the loop's own
connection is open (opened by a worker thread, never by the loop), each exchange waits no longer
than the leash, and a read that fails there runs again in the thread pool, admitted as before."""

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session

from app.auth.keys import create_key
from app.db import DatabaseTimeouts, make_engine, run_read_in_session
from app.loop_reads import LoopReads, loop_reads_of
from app.main import create_app, prepare_database
from app.settings import Settings
from tests.app.service.api_helpers import asgi_client, assert_error
from tests.app.service.search_helpers import wait_for

pytestmark = pytest.mark.postgresql_only

LEASH_S = 0.3


@pytest.fixture
def engine(make_empty_database: Callable[[], str]) -> Iterator[Engine]:
    engine = make_engine(make_empty_database(), DatabaseTimeouts(loop_read_s=LEASH_S))
    yield engine
    engine.dispose()


def loop_reads(engine: Engine) -> LoopReads:
    found = loop_reads_of(engine)
    assert found is not None
    return found


def threads_connecting(engine: Engine) -> list[int]:
    """The thread of each connection the loop's pool opens from now on."""
    threads: list[int] = []
    event.listen(
        loop_reads(engine).engine, "connect", lambda *_: threads.append(threading.get_ident())
    )
    return threads


def thread_of_read(session: Session) -> int:
    assert session.execute(text("SELECT 1")).scalar_one() == 1
    return threading.get_ident()


async def until_loop_connection_open(engine: Engine) -> None:
    deadline = time.monotonic() + 10
    while not loop_reads(engine).open:
        assert time.monotonic() < deadline, "the loop's connection was never opened"
        await asyncio.sleep(0.01)


def terminate_other_backends(engine: Engine) -> None:
    """Close every other connection to ``engine``'s database from the server's side."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    time.sleep(0.2)  # the goodbye reaches the closed connections' sockets


def test_reads_run_in_the_loop_once_its_own_connection_is_open(engine: Engine) -> None:
    connected_in = threads_connecting(engine)

    async def run() -> tuple[int, int, int]:
        first = await run_read_in_session(thread_of_read, Session(engine))
        await until_loop_connection_open(engine)
        second = await run_read_in_session(thread_of_read, Session(engine))
        return threading.get_ident(), first, second

    loop_thread, first, second = asyncio.run(run())
    assert first != loop_thread  # no connection of the loop's own yet: the thread pool
    assert second == loop_thread
    assert len(connected_in) == 1 and connected_in[0] != loop_thread


def test_no_reads_in_the_loop_when_the_leash_is_0(make_empty_database: Callable[[], str]) -> None:
    engine = make_engine(make_empty_database(), DatabaseTimeouts(loop_read_s=0))

    async def run() -> tuple[int, list[int]]:
        threads = []
        for _ in range(3):
            threads.append(await run_read_in_session(thread_of_read, Session(engine)))
            await asyncio.sleep(0.2)  # time enough for a loop's connection to be opened
        return threading.get_ident(), threads

    try:
        assert loop_reads_of(engine) is None
        loop_thread, threads = asyncio.run(run())
        assert loop_thread not in threads
    finally:
        engine.dispose()


def test_a_read_that_outlasts_the_leash_runs_again_in_the_thread_pool(engine: Engine) -> None:
    """... and reads stay in the thread pool for the pause, then come back to the loop."""
    loop_reads(engine).pause_s = 2.0
    calls: list[tuple[int, float]] = []

    def slow_read(session: Session) -> str:
        calls.append((threading.get_ident(), time.monotonic()))
        return str(session.execute(text("SELECT pg_sleep(0.6)::text || 'slept'")).scalar_one())

    async def run() -> tuple[int, str, int, int]:
        await run_read_in_session(thread_of_read, Session(engine))
        await until_loop_connection_open(engine)
        answer = await run_read_in_session(slow_read, Session(engine))
        assert loop_reads(engine).paused
        during_pause = await run_read_in_session(thread_of_read, Session(engine))
        await asyncio.sleep(2.0)
        await run_read_in_session(thread_of_read, Session(engine))  # reopens the connection
        await until_loop_connection_open(engine)
        back = await run_read_in_session(thread_of_read, Session(engine))
        return threading.get_ident(), answer, during_pause, back

    loop_thread, answer, during_pause, back = asyncio.run(run())
    assert answer == "slept"
    (first_thread, first_at), (retry_thread, retry_at) = calls
    assert first_thread == loop_thread and retry_thread != loop_thread
    assert retry_at - first_at < LEASH_S + 0.2  # the loop was held for the leash, not 0.6 s
    assert during_pause != loop_thread and back == loop_thread


def test_a_read_whose_loop_connection_died_is_not_reconnected_in_the_loop(
    engine: Engine,
) -> None:
    connected_in = threads_connecting(engine)

    async def run() -> tuple[int, int]:
        await run_read_in_session(thread_of_read, Session(engine))
        await until_loop_connection_open(engine)
        terminate_other_backends(engine)
        return threading.get_ident(), await run_read_in_session(thread_of_read, Session(engine))

    loop_thread, answered_in = asyncio.run(run())
    assert answered_in != loop_thread
    assert loop_thread not in connected_in
    assert loop_reads(engine).paused


def test_a_request_whose_key_check_failed_in_the_loop_is_admitted_again(
    make_empty_database: Callable[[], str],
) -> None:
    """The retry outside the loop checks the API key again: a request without one is still a
    401 (not run for no tenant), and one with a key gets its own tenant's answer."""
    url = make_empty_database()
    setup = make_engine(url)
    prepare_database(setup)
    with Session(setup) as session:
        _, token = create_key(session, tenant="team-a")
    setup.dispose()
    app = create_app(Settings(database_url=url, migrate_on_startup=False, embedded_worker=False))
    engine = app.state.session_factory.kw["bind"]
    bearer = {"Authorization": f"Bearer {token}"}
    with asgi_client(app) as http:
        assert http.get("/v1/searches/none", headers=bearer).status_code == 404
        wait_for(lambda: loop_reads(engine).open, "the loop's connection")
        terminate_other_backends(engine)
        assert_error(http.get("/v1/searches/none"), 401)
        assert loop_reads(engine).paused  # the request above failed in the loop first
        assert_error(http.get("/v1/searches/none", headers=bearer), 404, "not_found")
    engine.dispose()
