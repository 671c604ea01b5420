"""Catalog access for the API, and the startup sync of catalog entries into the database."""

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy.orm import Session

from app.clusters.repository import clusters
from app.common.records import RecordRepository, RecordT
from app.errors import InvalidInputError, NotFoundError
from app.gpus.repository import gpus
from app.migrate import lock_database_setup
from app.modelspecs.repository import models
from app.presets.schemas import Preset, PresetIndex, PresetKind
from costmodel.catalog import (
    SpecError,
    list_presets,
    load_cluster_preset,
    load_model_preset,
    load_preset,
)
from costmodel.hardware import CATALOG
from costmodel.specs import ClusterSpec, GpuSpec, ModelSpec, Plan, TrainingSpec
from costmodel.specs.base import Spec

logger = logging.getLogger(__name__)


# Reading presets ------------------------------------------------------------------------------
# Presets are package data, immutable while the process runs; parsing their YAML on every
# request would dominate an estimate's latency, so each is loaded once.
@lru_cache(maxsize=256)
def _preset(kind: PresetKind, name: str) -> Spec:
    return load_preset(kind, name)


def preset_index() -> PresetIndex:
    return PresetIndex(
        model=list_presets("model"),
        cluster=list_presets("cluster"),
        training=list_presets("training"),
        plan=list_presets("plan"),
    )


def get_preset(*, kind: PresetKind, name: str) -> Preset:
    try:
        spec = _preset(kind, name.strip().lower())
    except SpecError as exc:
        raise NotFoundError(str(exc)) from None
    return Preset(kind=kind, name=name.strip().lower(), spec=spec.model_dump(mode="json"))


def _preset_at(kind: PresetKind, name: str, field: str) -> Spec:
    """A preset named inside a request body: an unknown name is a 422 at ``field``."""
    try:
        return _preset(kind, name.strip().lower())
    except SpecError as exc:
        raise InvalidInputError.at(field, str(exc), code="unknown_reference") from None


def model_preset(name: str, *, field: str) -> ModelSpec:
    return ModelSpec.model_validate(_preset_at("model", name, field))


def training_preset(name: str, *, field: str) -> TrainingSpec:
    return TrainingSpec.model_validate(_preset_at("training", name, field))


def plan_preset(name: str, *, field: str) -> Plan:
    return Plan.model_validate(_preset_at("plan", name, field))


# Startup sync ---------------------------------------------------------------------------------
@dataclass
class SyncReport:
    added: int = 0
    updated: int = 0
    removed: int = 0
    shadowed: int = 0


def sync_catalog(session: Session) -> SyncReport:
    """Make the stored presets equal the installed catalog: add new entries, update changed
    ones, remove retired ones. Idempotent, and serialized across processes on PostgreSQL."""
    lock_database_setup(session.connection())
    report = SyncReport()
    gpu_entries: dict[str, GpuSpec] = dict(CATALOG)
    model_entries = {name: load_model_preset(name) for name in list_presets("model")}
    cluster_entries = {name: load_cluster_preset(name) for name in list_presets("cluster")}
    _sync_table(session, gpus, gpu_entries, report)
    _sync_table(session, models, model_entries, report)
    _sync_table(session, clusters, cluster_entries, report)
    session.commit()
    return report


def _sync_table(
    session: Session,
    repository: RecordRepository[RecordT],
    entries: Mapping[str, ModelSpec | ClusterSpec | GpuSpec],
    report: SyncReport,
) -> None:
    stored = {row.name: row for row in repository.list_presets(session)}
    for name, spec in entries.items():
        row = stored.pop(name, None)
        if row is not None:
            if row.spec != spec:
                row.spec = spec  # type: ignore[assignment]  # entries hold the table's own spec type (sync_catalog pairs them)
                report.updated += 1
            continue
        if repository.name_exists(session, name=name):
            # A user's row took the name before the catalog did; theirs stays, and the preset is
            # still usable from the catalog wherever presets are named directly.
            logger.warning(
                "%s: preset '%s' not stored, a user entry has that name",
                repository.table.__tablename__,
                name,
            )
            report.shadowed += 1
            continue
        repository.add(
            session, repository.table(name=name, spec=spec, is_preset=True, source="catalog")
        )
        report.added += 1
    for retired in stored.values():
        # Searches keep their full request, so their reference is merely cleared (SET NULL).
        repository.delete(session, retired)
        report.removed += 1
