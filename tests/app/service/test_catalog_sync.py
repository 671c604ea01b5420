"""Startup sync of the built-in catalog into the database: idempotent, and it follows changes."""

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.db import make_engine
from app.migrate import upgrade_to_head
from app.orm import ClusterSpecRow, GpuTypeRow, ModelSpecRow
from app.presets import service as presets_service
from costmodel.catalog import list_presets
from costmodel.hardware import CATALOG


@pytest.fixture
def migrated_engine(make_empty_database: Callable[[], str]) -> Iterator[Engine]:
    engine = make_engine(make_empty_database())
    upgrade_to_head(engine)
    yield engine
    engine.dispose()


def names(session: Session, table: type) -> set[str]:
    return set(session.scalars(select(table.name).where(table.is_preset)))


def test_sync_loads_everything_once(migrated_engine: Engine) -> None:
    with Session(migrated_engine) as session:
        first = presets_service.sync_catalog(session)
        expected = len(CATALOG) + len(list_presets("model")) + len(list_presets("cluster"))
        assert (first.added, first.updated, first.removed) == (expected, 0, 0)
        assert names(session, GpuTypeRow) == set(CATALOG)
        assert names(session, ModelSpecRow) == set(list_presets("model"))
        assert names(session, ClusterSpecRow) == set(list_presets("cluster"))
        ids = set(session.scalars(select(ModelSpecRow.id)))
    with Session(migrated_engine) as session:
        second = presets_service.sync_catalog(session)
        assert (second.added, second.updated, second.removed) == (0, 0, 0)
        # Same rows, not re-created: ids handed out earlier stay valid.
        assert set(session.scalars(select(ModelSpecRow.id))) == ids


def test_sync_updates_changed_and_removes_retired_presets(
    migrated_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Session(migrated_engine) as session:
        presets_service.sync_catalog(session)
    changed = CATALOG["H100-80GB"].model_copy(update={"hbm_gib": 96.0})
    smaller = {name: spec for name, spec in CATALOG.items() if name != "L40S"}
    monkeypatch.setattr(presets_service, "CATALOG", {**smaller, "H100-80GB": changed})
    with Session(migrated_engine) as session:
        report = presets_service.sync_catalog(session)
        assert (report.added, report.updated, report.removed) == (0, 1, 1)
        row = session.scalars(select(GpuTypeRow).where(GpuTypeRow.name == "H100-80GB")).one()
        assert row.spec.hbm_gib == 96.0
        assert "L40S" not in names(session, GpuTypeRow)


def test_a_user_row_keeps_a_name_the_catalog_later_uses(migrated_engine: Engine) -> None:
    with Session(migrated_engine) as session:
        session.add(GpuTypeRow(name="B200", spec=CATALOG["B200"], source="api"))
        session.commit()
        report = presets_service.sync_catalog(session)
        assert report.shadowed == 1
        row = session.scalars(select(GpuTypeRow).where(GpuTypeRow.name == "B200")).one()
        assert row.is_preset is False and row.source == "api"
