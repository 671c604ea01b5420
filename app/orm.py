"""All SQLAlchemy tables of the service. Alembic (``migrations/``) creates and evolves them.

Conventions: ids are time-ordered hex strings (``app.common.ids``); timestamps are timezone-aware
UTC; specs are stored as JSON validated against their pydantic spec on the way in and out
(``SpecJSON``), so a row never holds a spec the cost model would reject. Types are portable:
JSON becomes JSONB on PostgreSQL and TEXT on SQLite; nothing backend-specific is needed to read a
row back.

Later issues extend these tables with new columns; the columns the search workers, exporters and
calibration need (status, lease, heartbeat, plan hashes, calibration links) exist from the start.
"""

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator, TypeEngine

from app.common.ids import ID_LENGTH, new_id
from costmodel.specs import ClusterSpec, GpuSpec, ModelSpec

# Named constraints, so migrations can refer to them on every backend (SQLite batch mode needs
# names to alter a table).
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

NAME_LENGTH = 200
TENANT_LENGTH = 100
# The tenant of everything made while access control is off (no API key exists yet) and of the
# rows that predate tenants; a key created for this tenant sees them.
DEFAULT_TENANT = "default"


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on both backends (SQLite stores no offset and returns naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime; use datetime.now(UTC)")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class JSONDocument(TypeDecorator[Any]):
    """JSON column: JSONB on PostgreSQL (indexable, compact), JSON text elsewhere."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


class SpecJSON(JSONDocument):
    """A pydantic spec stored as JSON, validated when written and parsed when read."""

    cache_ok = True

    def __init__(self, spec_type: type[BaseModel]) -> None:
        super().__init__()
        self.spec_type = spec_type

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        spec = value if isinstance(value, self.spec_type) else self.spec_type.model_validate(value)
        return spec.model_dump(mode="json")

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        return self.spec_type.model_validate(value)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _id_column() -> Mapped[str]:
    return mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)


def _created_at() -> Mapped[datetime]:
    return mapped_column(UTCDateTime(), nullable=False, default=utcnow)


class TenantOwned:
    """A row that belongs to one tenant. ``app.tenancy`` scopes every ORM query of a request to
    its tenant, so no query can forget the filter; workers and the CLI see every tenant."""

    tenant: Mapped[str] = mapped_column(
        String(TENANT_LENGTH), nullable=False, default=DEFAULT_TENANT
    )


# Spec registries ------------------------------------------------------------------------------
def _spec_tenant_default(context: Any) -> str | None:
    """Presets belong to no tenant; other specs, made outside a request, to the default one."""
    return None if context.get_current_parameters().get("is_preset") else DEFAULT_TENANT


class SpecRecord:
    """Shared shape of the stored-spec tables: a name unique within its tenant (and never a
    preset's), the spec, and where it came from."""

    id: Mapped[str] = _id_column()
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    # Owner; None for the built-in presets, which every tenant reads and none may change.
    tenant: Mapped[str | None] = mapped_column(String(TENANT_LENGTH), default=_spec_tenant_default)
    # Built-in catalog entries, refreshed at startup and read-only through the API.
    is_preset: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    # How the row was made: "catalog", "api", "hf" (Hugging Face import), ...
    source: Mapped[str] = mapped_column(String(32), nullable=False, default="api")
    description: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), nullable=False, default=utcnow, onupdate=utcnow
    )


class GpuTypeRow(SpecRecord, Base):
    __tablename__ = "gpu_types"
    __table_args__ = (UniqueConstraint("tenant", "name"),)
    spec: Mapped[GpuSpec] = mapped_column(SpecJSON(GpuSpec), nullable=False)


class ModelSpecRow(SpecRecord, Base):
    __tablename__ = "model_specs"
    __table_args__ = (UniqueConstraint("tenant", "name"),)
    spec: Mapped[ModelSpec] = mapped_column(SpecJSON(ModelSpec), nullable=False)


class ClusterSpecRow(SpecRecord, Base):
    __tablename__ = "cluster_specs"
    __table_args__ = (UniqueConstraint("tenant", "name"),)
    spec: Mapped[ClusterSpec] = mapped_column(SpecJSON(ClusterSpec), nullable=False)


# Searches and their results -------------------------------------------------------------------
class SearchRow(TenantOwned, Base):
    """A plan search: a queue entry claimed by a worker through its lease, and its progress."""

    __tablename__ = "searches"

    id: Mapped[str] = _id_column()
    name: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    # queued -> running -> succeeded | failed | cancelled
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="queued")
    objective: Mapped[str] = mapped_column(String(64), nullable=False)
    sampler: Mapped[str] = mapped_column(String(32), nullable=False)
    # The full, validated request (resolved specs, constraints, budget): all a worker needs.
    request: Mapped[dict[str, Any]] = mapped_column(JSONDocument(), nullable=False)
    # Where the specs came from, when they were stored ones (informational: ``request`` is
    # authoritative, so deleting a model leaves its searches intact).
    model_id: Mapped[str | None] = mapped_column(
        String(ID_LENGTH), ForeignKey("model_specs.id", ondelete="SET NULL")
    )
    cluster_id: Mapped[str | None] = mapped_column(
        String(ID_LENGTH), ForeignKey("cluster_specs.id", ondelete="SET NULL")
    )
    # The calibration whose parameters price the plans (``request.params`` holds a copy, so
    # the search runs the same if the calibration row goes).
    calibration_id: Mapped[str | None] = mapped_column(
        String(ID_LENGTH), ForeignKey("calibrations.id", ondelete="SET NULL")
    )
    priority: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    n_trials: Mapped[int | None] = mapped_column(Integer)
    timeout_s: Mapped[float | None] = mapped_column(Float)
    trials_done: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    best_value: Mapped[float | None] = mapped_column(Float)
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument())
    cancel_requested: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    # Lease: a worker owns a running search until lease_expires_at and renews it while alive;
    # an expired lease lets another worker take the search over.
    lease_owner: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    optuna_study_name: Mapped[str | None] = mapped_column(String(NAME_LENGTH), unique=True)
    created_at: Mapped[datetime] = _created_at()
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    error: Mapped[str | None] = mapped_column(Text)
    # The API key that submitted it (per-key submission limits count these).
    api_key_id: Mapped[str | None] = mapped_column(
        String(ID_LENGTH), ForeignKey("api_keys.id", ondelete="SET NULL")
    )
    # Webhook: POSTed a signed payload when the search ends (``app.webhooks``). The secret is
    # kept because signing needs it; the API never returns it.
    callback_url: Mapped[str | None] = mapped_column(Text)
    callback_secret: Mapped[str | None] = mapped_column(String(200))

    __table_args__ = (
        Index("ix_searches_tenant_created_at", "tenant", "created_at"),
        Index("ix_searches_api_key_id_created_at", "api_key_id", "created_at"),
        # The claim query: oldest queued search of the highest priority.
        Index("ix_searches_status_priority_created_at", "status", "priority", "created_at"),
        # The takeover query: running searches whose lease ran out.
        Index("ix_searches_status_lease_expires_at", "status", "lease_expires_at"),
    )


class CalibrationRow(TenantOwned, Base):
    """Fitted efficiency parameters (``costmodel.EfficiencyParams``), versioned by name."""

    __tablename__ = "calibrations"

    id: Mapped[str] = _id_column()
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    # GPU type the fit applies to, or None for all.
    gpu: Mapped[str | None] = mapped_column(String(100))
    params: Mapped[dict[str, Any]] = mapped_column(JSONDocument(), nullable=False)
    # The whole ``costmodel.calibration.CalibrationResult``: what moved, error before / after
    # per source, in-sample and k-fold held out.
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument())
    # What it was fitted to: profile and observation ids, parameters asked for, folds.
    inputs: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument())
    created_at: Mapped[datetime] = _created_at()

    __table_args__ = (UniqueConstraint("tenant", "name", "version"),)


class PlanRow(TenantOwned, Base):
    """One ranked plan of a search, with the estimate it was ranked by."""

    __tablename__ = "plans"

    id: Mapped[str] = _id_column()
    search_id: Mapped[str] = mapped_column(
        String(ID_LENGTH), ForeignKey("searches.id", ondelete="CASCADE"), nullable=False
    )
    rank: Mapped[int | None] = mapped_column(Integer)
    trial_number: Mapped[int | None] = mapped_column(Integer)
    plan: Mapped[dict[str, Any]] = mapped_column(JSONDocument(), nullable=False)
    # Sequences per step the plan was priced at (a search may range over several).
    global_batch_size: Mapped[int | None] = mapped_column(Integer)
    # SHA-256 of the canonical plan JSON: the same plan found by two workers is stored once.
    plan_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    estimate: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument())
    # One value per objective, in the study's order (multi-objective searches have several).
    objective_values: Mapped[list[float] | None] = mapped_column(JSONDocument())
    # Near-ties folded into this entry (search.EquivalentPlan documents), closest first.
    equivalents: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONDocument())
    feasible: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    # Copies of the most used estimate figures, so lists can sort and filter in SQL.
    step_time_s: Mapped[float | None] = mapped_column(Float)
    tokens_per_s: Mapped[float | None] = mapped_column(Float)
    peak_memory_gib: Mapped[float | None] = mapped_column(Float)
    usd_per_million_tokens: Mapped[float | None] = mapped_column(Float)
    calibration_id: Mapped[str | None] = mapped_column(
        String(ID_LENGTH), ForeignKey("calibrations.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = _created_at()

    __table_args__ = (
        UniqueConstraint("search_id", "plan_hash"),
        Index("ix_plans_search_id_rank", "search_id", "rank"),
    )


# Measurements ---------------------------------------------------------------------------------
class ProfileRow(TenantOwned, Base):
    """Raw micro-benchmark output (GEMM sweeps, nccl-tests, layer timings) from one device."""

    __tablename__ = "profiles"

    id: Mapped[str] = _id_column()
    name: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    device: Mapped[str] = mapped_column(String(100), nullable=False)
    raw: Mapped[dict[str, Any]] = mapped_column(JSONDocument(), nullable=False)
    # Host, driver and library versions the numbers were taken with.
    environment: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument())
    created_at: Mapped[datetime] = _created_at()

    __table_args__ = (Index("ix_profiles_kind_device", "kind", "device"),)


class ObservationRow(TenantOwned, Base):
    """A measured training step: what was run (specs + plan) and what it achieved."""

    __tablename__ = "observations"

    id: Mapped[str] = _id_column()
    # The stored plan this run tried, when it came from a search.
    plan_id: Mapped[str | None] = mapped_column(
        String(ID_LENGTH), ForeignKey("plans.id", ondelete="SET NULL")
    )
    name: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    # Reporting group ("prod-h100", "nightly"): calibrations can take all of a source.
    source: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    # model, training and cluster specs of the run.
    scenario: Mapped[dict[str, Any]] = mapped_column(JSONDocument(), nullable=False)
    plan: Mapped[dict[str, Any]] = mapped_column(JSONDocument(), nullable=False)
    step_time_s: Mapped[float] = mapped_column(Float, nullable=False)
    tokens_per_s: Mapped[float | None] = mapped_column(Float)
    peak_memory_gib: Mapped[float | None] = mapped_column(Float)
    # What the uncalibrated cost model predicted for it when it was reported.
    predicted_step_time_s: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = _created_at()

    __table_args__ = (
        Index("ix_observations_plan_id", "plan_id"),
        Index("ix_observations_source", "source"),
    )


# Access control, idempotency, webhooks ---------------------------------------------------------
class ApiKeyRow(Base):
    """A bearer token of one tenant. Only its SHA-256 is stored: a token is 32 random bytes, so a
    fast hash is enough (no dictionary to attack, unlike a password) and lookup is one index."""

    __tablename__ = "api_keys"

    id: Mapped[str] = _id_column()
    tenant: Mapped[str] = mapped_column(String(TENANT_LENGTH), nullable=False)
    name: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    # The token's first characters, shown by ``autopar keys list`` to tell keys apart.
    prefix: Mapped[str] = mapped_column(String(32), nullable=False)
    key_hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    # Searches this key may submit per minute; None: the server's default.
    searches_per_minute: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = _created_at()
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class IdempotencyKeyRow(Base):
    """A creating POST replayed by its ``Idempotency-Key``: the same key and request answer the
    stored response again; the same key with another request is a 409."""

    __tablename__ = "idempotency_keys"

    id: Mapped[str] = _id_column()
    tenant: Mapped[str] = mapped_column(String(TENANT_LENGTH), nullable=False)
    key: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    # SHA-256 of method, path and body: what "the same request" means.
    request_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    # None while the first request with this key is still being answered.
    status_code: Mapped[int | None] = mapped_column(Integer)
    response: Mapped[Any | None] = mapped_column(JSONDocument())
    location: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _created_at()

    __table_args__ = (UniqueConstraint("tenant", "key"),)


class WebhookDeliveryRow(TenantOwned, Base):
    """One webhook of a search's end, and how delivering it went (the delivery log)."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[str] = _id_column()
    search_id: Mapped[str] = mapped_column(
        String(ID_LENGTH), ForeignKey("searches.id", ondelete="CASCADE"), nullable=False
    )
    event: Mapped[str] = mapped_column(String(32), nullable=False)
    url: Mapped[str] = mapped_column(Text, nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONDocument(), nullable=False)
    # pending -> delivered | failed (retries exhausted)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="pending")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Every attempt: time, HTTP status or error, duration.
    log: Mapped[list[dict[str, Any]]] = mapped_column(JSONDocument(), nullable=False, default=list)
    created_at: Mapped[datetime] = _created_at()
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_webhook_deliveries_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_search_id", "search_id"),
    )
