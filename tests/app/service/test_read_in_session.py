"""Read-only services (app.db.run_read_in_session): on SQLite they run in the event loop's own
thread; a session bound to a connection (as the API tests' are) runs them in the thread pool
elsewhere (PostgreSQL engines read in the loop on a leash: test_loop_reads.py); and a service
run so cannot write."""

import threading

import anyio
import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session, sessionmaker

from app.db import begin_write, run_read_in_session
from app.orm import ModelSpecRow
from costmodel.catalog import load_preset


def session_on(connection: Connection) -> Session:
    return sessionmaker(bind=connection, join_transaction_mode="create_savepoint")()


def test_a_read_runs_in_the_loop_thread_on_sqlite_only(db_connection: Connection) -> None:
    def read(session: Session) -> tuple[int, int]:
        return threading.get_ident(), session.execute(text("SELECT 1")).scalar_one()

    async def run() -> tuple[int, int, int]:
        loop_thread = threading.get_ident()
        service_thread, one = await run_read_in_session(read, session_on(db_connection))
        return loop_thread, service_thread, one

    loop_thread, service_thread, one = anyio.run(run)
    assert one == 1
    if db_connection.dialect.name == "sqlite":
        assert service_thread == loop_thread
    else:
        assert service_thread != loop_thread


@pytest.mark.parametrize("how", ["begin_write", "flush"])
def test_a_read_only_service_cannot_write(db_connection: Connection, how: str) -> None:
    def writer(session: Session) -> None:
        if how == "begin_write":
            begin_write(session)
            return
        spec = load_preset("model", "llama2-7b")
        session.add(ModelSpecRow(name="written-by-a-reader", spec=spec))
        session.flush()

    with pytest.raises(RuntimeError, match=r"read-only service \(run_read_in_session\)"):
        anyio.run(run_read_in_session, writer, session_on(db_connection))
    with session_on(db_connection) as session:
        assert session.query(ModelSpecRow).filter_by(name="written-by-a-reader").count() == 0


def test_a_read_is_autocommit_on_postgresql_and_unchanged_on_sqlite(service_engine: Engine) -> None:
    """PostgreSQL: no BEGIN and no ROLLBACK for a read, and the pooled connection is handed out
    as before afterwards. SQLite: the session keeps its engine (the read runs in the loop)."""

    def autocommit(session: Session) -> bool:
        # psycopg's own flag: no BEGIN is sent before a statement while it is set.
        return bool(getattr(session.connection().connection.driver_connection, "autocommit", False))

    session = sessionmaker(bind=service_engine)()
    read = anyio.run(run_read_in_session, autocommit, session)
    if service_engine.dialect.name == "postgresql":
        assert read is True
    else:
        assert read is False and session.bind is service_engine
    with sessionmaker(bind=service_engine)() as after:
        assert autocommit(after) is False
