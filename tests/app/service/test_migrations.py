"""Alembic migrations: an empty database upgraded to head matches the ORM models exactly, on
every backend, also when Optuna's storage tables share the database."""

from collections.abc import Callable

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, inspect

from app.db import make_engine
from app.migrate import (
    VERSION_TABLE,
    current_revision,
    downgrade_to_base,
    head_revision,
    include_name,
    upgrade_to_head,
)
from app.orm import Base


def schema_differences(url: str, metadata: MetaData = Base.metadata) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "include_name": include_name}
            )
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


def table_names(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_to_head_matches_the_models(make_empty_database: Callable[[], str]) -> None:
    url = make_empty_database()
    upgrade_to_head(url)
    assert schema_differences(url) == []
    assert table_names(url) == set(Base.metadata.tables) | {VERSION_TABLE}
    engine = make_engine(url)
    with engine.connect() as connection:
        assert current_revision(connection) == head_revision()
    engine.dispose()


def test_the_comparison_notices_a_missing_column(make_empty_database: Callable[[], str]) -> None:
    """Guards the test above: a model change without a migration must show up."""
    url = make_empty_database()
    upgrade_to_head(url)
    changed = MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["searches"].append_column(Column("new_counter", Integer))
    differences = schema_differences(url, changed)
    assert [diff[0] for diff in differences] == ["add_column"]  # type: ignore[index]


def test_upgrade_is_idempotent_and_reversible(make_empty_database: Callable[[], str]) -> None:
    url = make_empty_database()
    upgrade_to_head(url)
    upgrade_to_head(url)
    downgrade_to_base(url)
    assert table_names(url) == {VERSION_TABLE}
    upgrade_to_head(url)
    assert schema_differences(url) == []


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_optuna_storage_shares_the_database(make_empty_database: Callable[[], str]) -> None:
    """Optuna runs its own Alembic (version table ``alembic_version``) in the same database."""
    import optuna

    url = make_empty_database()
    optuna.storages.RDBStorage(url)  # creates Optuna's tables and its alembic_version first
    upgrade_to_head(url)
    assert schema_differences(url) == []
    tables = table_names(url)
    assert {"alembic_version", VERSION_TABLE, "studies", "trials"} <= tables
    # ...and Optuna still works after our migration.
    storage = optuna.storages.RDBStorage(url)
    study = optuna.create_study(storage=storage, study_name="coexist")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    assert len(study.trials) == 2
    storage.remove_session()
    storage.engine.dispose()
