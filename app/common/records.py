"""Storage of named specs (GPU types, models, clusters): one repository shape for the three
tables, bound to each by its domain's ``repository.py``.

Any place that takes an id also takes a name, so presets are usable by name everywhere.
"""

from collections.abc import Sequence
from typing import Generic, TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.common.ids import looks_like_id
from app.common.pagination import escape_like
from app.orm import ClusterSpecRow, GpuTypeRow, ModelSpecRow

RecordT = TypeVar("RecordT", GpuTypeRow, ModelSpecRow, ClusterSpecRow)


class RecordRepository(Generic[RecordT]):
    def __init__(self, table: type[RecordT]) -> None:
        self.table = table

    def find(self, session: Session, *, key: str) -> RecordT | None:
        """The row whose id or name is ``key``: an id first, then the exact name, then the name
        ignoring case when only one matches (as the catalog matches GPU and preset names)."""
        if "\x00" in key:  # PostgreSQL rejects NUL in text; no row can have it.
            return None
        if looks_like_id(key):
            row = session.get(self.table, key)
            if row is not None:
                return row
        row = session.scalars(select(self.table).where(self.table.name == key)).one_or_none()
        if row is not None:
            return row
        folded = select(self.table).where(func.lower(self.table.name) == key.lower()).limit(2)
        candidates = session.scalars(folded).all()
        return candidates[0] if len(candidates) == 1 else None

    def name_exists(self, session: Session, *, name: str) -> bool:
        statement = select(self.table.id).where(self.table.name == name)
        return session.scalars(statement).first() is not None

    def list_page(
        self,
        session: Session,
        *,
        name_contains: str | None,
        preset: bool | None,
        after: str | None,
        limit: int,
    ) -> tuple[Sequence[RecordT], str | None]:
        """Rows ordered by name after ``after``, and the name to continue from (None: last)."""
        statement = select(self.table).order_by(self.table.name).limit(limit + 1)
        if name_contains is not None:
            pattern = f"%{escape_like(name_contains)}%"
            statement = statement.where(self.table.name.ilike(pattern, escape="\\"))
        if preset is not None:
            statement = statement.where(self.table.is_preset == preset)
        if after is not None:
            statement = statement.where(self.table.name > after)
        rows = session.scalars(statement).all()
        if len(rows) > limit:
            return rows[:limit], rows[limit - 1].name
        return rows, None

    def list_presets(self, session: Session) -> Sequence[RecordT]:
        return session.scalars(select(self.table).where(self.table.is_preset)).all()

    def add(self, session: Session, row: RecordT) -> RecordT:
        session.add(row)
        session.flush()
        return row

    def delete(self, session: Session, row: RecordT) -> None:
        session.delete(row)
        session.flush()
