"""Alembic environment for autopar's tables.

Two things keep it from fighting Optuna, whose RDB storage may share the database: the version
table is ``autopar_alembic_version`` (Optuna's own Alembic uses ``alembic_version``), and
autogenerate only looks at tables of our metadata, so it never proposes dropping Optuna's.
"""

import logging.config

from alembic import context
from sqlalchemy import Connection

from app.migrate import (
    VERSION_TABLE,
    check_foreign_keys,
    include_name,
    sqlite_foreign_keys_off,
)
from app.orm import Base

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)


def _configure(connection: Connection | None = None, url: str | None = None) -> None:
    context.configure(
        connection=connection,
        url=url,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        compare_type=True,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=True,
        literal_binds=connection is None,
    )


def _url() -> str:
    from app.settings import Settings

    return config.get_main_option("sqlalchemy.url") or Settings().database_url


def run_migrations_offline() -> None:
    _configure(url=_url())
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # app.migrate passes an open connection; the alembic CLI goes through the settings.
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return

    from app.db import make_engine

    engine = make_engine(_url())
    # As app.migrate.migrate_to: SQLite's foreign keys off while tables are rebuilt.
    with engine.connect() as connection, sqlite_foreign_keys_off(connection):
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
            check_foreign_keys(connection)
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
