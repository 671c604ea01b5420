"""Scheduler integration: every stored row belongs to a tenant; API keys; replayable creating
POSTs (Idempotency-Key); webhooks on a search's end and their delivery log.

Rows that predate tenants go to the ``default`` tenant (the tenant of the open, keyless mode);
presets have no tenant. Spec and calibration names become unique within a tenant.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# app.orm: JSONDocument, UTCDateTime, ids, names, tenants
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)
ID = sa.String(length=32)
NAME = sa.String(length=200)
TENANT = sa.String(length=100)
DEFAULT_TENANT = "default"

SPEC_TABLES = ("gpu_types", "model_specs", "cluster_specs")
OWNED_TABLES = ("searches", "plans", "profiles", "observations", "calibrations")


def upgrade() -> None:
    _create_api_keys()
    for table in SPEC_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("tenant", TENANT, nullable=True))
            batch.drop_constraint(f"uq_{table}_name", type_="unique")
            batch.create_unique_constraint(f"uq_{table}_tenant_name", ["tenant", "name"])
        op.execute(
            sa.text(f"UPDATE {table} SET tenant = :tenant WHERE NOT is_preset").bindparams(
                tenant=DEFAULT_TENANT
            )
        )
    for table in OWNED_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("tenant", TENANT, nullable=False, server_default=DEFAULT_TENANT)
            )
        with op.batch_alter_table(table) as batch:
            batch.alter_column("tenant", server_default=None)
    with op.batch_alter_table("calibrations") as batch:
        batch.drop_constraint("uq_calibrations_name_version", type_="unique")
        batch.create_unique_constraint(
            "uq_calibrations_tenant_name_version", ["tenant", "name", "version"]
        )
    with op.batch_alter_table("searches") as batch:
        batch.add_column(sa.Column("api_key_id", ID, nullable=True))
        batch.add_column(sa.Column("callback_url", sa.Text(), nullable=True))
        batch.add_column(sa.Column("callback_secret", NAME, nullable=True))
        batch.create_foreign_key(
            "fk_searches_api_key_id_api_keys",
            "api_keys",
            ["api_key_id"],
            ["id"],
            ondelete="SET NULL",
        )
        batch.create_index("ix_searches_tenant_created_at", ["tenant", "created_at"])
        batch.create_index("ix_searches_api_key_id_created_at", ["api_key_id", "created_at"])
    _create_idempotency_keys()
    _create_webhook_deliveries()


def _create_api_keys() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", ID, nullable=False),
        sa.Column("tenant", TENANT, nullable=False),
        sa.Column("name", NAME, nullable=True),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("searches_per_minute", sa.Integer(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("revoked_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )


def _create_idempotency_keys() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("id", ID, nullable=False),
        sa.Column("tenant", TENANT, nullable=False),
        sa.Column("key", NAME, nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response", JSON, nullable=True),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_keys")),
        sa.UniqueConstraint("tenant", "key", name=op.f("uq_idempotency_keys_tenant_key")),
    )


def _create_webhook_deliveries() -> None:
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", ID, nullable=False),
        sa.Column("tenant", TENANT, nullable=False),
        sa.Column("search_id", ID, nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", TIMESTAMP, nullable=True),
        sa.Column("log", JSON, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("delivered_at", TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["search_id"],
            ["searches.id"],
            name=op.f("fk_webhook_deliveries_search_id_searches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
    )
    op.create_index(
        "ix_webhook_deliveries_status_next_attempt_at",
        "webhook_deliveries",
        ["status", "next_attempt_at"],
    )
    op.create_index("ix_webhook_deliveries_search_id", "webhook_deliveries", ["search_id"])


def downgrade() -> None:
    op.drop_table("webhook_deliveries")
    op.drop_table("idempotency_keys")
    with op.batch_alter_table("searches") as batch:
        batch.drop_index("ix_searches_api_key_id_created_at")
        batch.drop_index("ix_searches_tenant_created_at")
        batch.drop_constraint("fk_searches_api_key_id_api_keys", type_="foreignkey")
        for column in ("callback_secret", "callback_url", "api_key_id"):
            batch.drop_column(column)
    with op.batch_alter_table("calibrations") as batch:
        batch.drop_constraint("uq_calibrations_tenant_name_version", type_="unique")
        batch.create_unique_constraint("uq_calibrations_name_version", ["name", "version"])
    for table in OWNED_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("tenant")
    # Names unique again across what were tenants: a downgrade refuses (IntegrityError) rather
    # than drop one of two same-named specs of different tenants.
    for table in SPEC_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"uq_{table}_tenant_name", type_="unique")
            batch.create_unique_constraint(f"uq_{table}_name", ["name"])
            batch.drop_column("tenant")
    op.drop_table("api_keys")
