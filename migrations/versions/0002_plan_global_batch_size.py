"""Plans remember the global batch size they were priced at.

A search may range over several global batch sizes (``SearchRequest.global_batch_sizes``); a plan
and its estimate mean nothing without the batch, and ``plan_hash`` already covers it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.add_column(sa.Column("global_batch_size", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.drop_column("global_batch_size")
