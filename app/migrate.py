"""Apply the Alembic migrations in ``migrations/`` programmatically (serve, tests, benchmarks)."""

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import URL

from app.db import make_engine

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
    engine = database if isinstance(database, Engine) else make_engine(database)
    try:
        with engine.begin() as connection:
            lock_database_setup(connection)
            command.upgrade(alembic_config(connection), "head")
    finally:
        if engine is not database:
            engine.dispose()


def downgrade_to_base(database: Engine | str | URL) -> None:
    engine = database if isinstance(database, Engine) else make_engine(database)
    try:
        with engine.begin() as connection:
            lock_database_setup(connection)
            command.downgrade(alembic_config(connection), "base")
    finally:
        if engine is not database:
            engine.dispose()
