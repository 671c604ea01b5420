"""Apply the Alembic migrations in ``migrations/`` programmatically (serve, tests, benchmarks)."""

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import URL

from app.db import make_engine, no_timeouts

# Our own version table: Optuna's RDB storage runs its own Alembic with the default
# ``alembic_version`` table in the same database.
VERSION_TABLE = "autopar_alembic_version"
# Source checkout and editable installs: migrations/ sits next to the app package.
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
# Arbitrary constant: the PostgreSQL advisory-lock key of ``lock_database_setup``.
_MIGRATION_LOCK_KEY = 0x6175_746F_7061_72  # "autopar"


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Autogenerate hook: look only at our tables, never at Optuna's or anyone else's."""
    from app.orm import Base

    if type_ == "table":
        return name in Base.metadata.tables
    return True


def alembic_config(connection: Connection | None = None) -> Config:
    if not MIGRATIONS_DIR.is_dir():
        raise RuntimeError(f"migrations folder not found at {MIGRATIONS_DIR}")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    config.attributes["configure_logger"] = False
    return config


@lru_cache(maxsize=1)
def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(connection: Connection) -> str | None:
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def lock_database_setup(connection: Connection) -> None:
    """Hold a PostgreSQL advisory lock until the surrounding transaction ends, so processes
    starting together migrate and load the catalog one after the other (no-op on SQLite, where
    writers are serialized by the database lock already)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})


def upgrade_to_head(database: Engine | str | URL) -> None:
    """Bring the database to the newest revision; safe to call concurrently and repeatedly."""
    migrate_to(database, "head")


def downgrade_to_base(database: Engine | str | URL) -> None:
    migrate_to(database, "base", down=True)


def migrate_to(database: Engine | str | URL, revision: str, *, down: bool = False) -> None:
    """Upgrade (or with ``down``, downgrade) the database to ``revision``, in one transaction."""
    engine = database if isinstance(database, Engine) else make_engine(database)
    step = command.downgrade if down else command.upgrade
    try:
        # No timeouts: it may wait for another process's migration, or rewrite big tables.
        with (
            engine.connect() as connection,
            sqlite_foreign_keys_off(connection),
            connection.begin(),
            no_timeouts(connection),
        ):
            lock_database_setup(connection)
            step(alembic_config(connection), revision)
            check_foreign_keys(connection)
    finally:
        if engine is not database:
            engine.dispose()


@contextmanager
def sqlite_foreign_keys_off(connection: Connection) -> Iterator[None]:
    """SQLite alters a table by copying it and dropping the old one (Alembic's batch mode), and
    with foreign keys on, DROP TABLE first deletes the rows, running the ON DELETE actions of
    the tables that refer to it: altering ``searches`` deleted every plan (CASCADE). So they are
    off while migrating (set outside the transaction, the only place SQLite honours it) and
    checked before the commit (``check_foreign_keys``)."""
    if connection.dialect.name != "sqlite":
        yield
        return
    raw = connection.connection.driver_connection
    assert raw is not None  # a connection just checked out of the pool
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        yield
    finally:
        raw.execute("PRAGMA foreign_keys=ON")


def check_foreign_keys(connection: Connection) -> None:
    if connection.dialect.name != "sqlite":
        return  # PostgreSQL checks them as it goes
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
    if broken:
        raise RuntimeError(f"the migration left rows with dangling foreign keys: {broken[:5]}")
