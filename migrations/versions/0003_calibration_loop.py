"""The calibration loop: searches remember the calibration they price with, calibrations what
they were fitted to, observations the name they were reported under and the prediction they
were compared with.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# app.orm.JSONDocument
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("searches") as batch:
        batch.add_column(sa.Column("calibration_id", sa.String(length=32), nullable=True))
        batch.create_foreign_key(
            op.f("fk_searches_calibration_id_calibrations"),
            "calibrations",
            ["calibration_id"],
            ["id"],
            ondelete="SET NULL",
        )
    with op.batch_alter_table("calibrations") as batch:
        batch.add_column(sa.Column("inputs", JSON, nullable=True))
    with op.batch_alter_table("observations") as batch:
        batch.add_column(sa.Column("name", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("predicted_step_time_s", sa.Float(), nullable=True))
        batch.create_index(op.f("ix_observations_source"), ["source"])


def downgrade() -> None:
    with op.batch_alter_table("observations") as batch:
        batch.drop_index(op.f("ix_observations_source"))
        batch.drop_column("predicted_step_time_s")
        batch.drop_column("name")
    with op.batch_alter_table("calibrations") as batch:
        batch.drop_column("inputs")
    with op.batch_alter_table("searches") as batch:
        batch.drop_constraint(op.f("fk_searches_calibration_id_calibrations"), type_="foreignkey")
        batch.drop_column("calibration_id")
