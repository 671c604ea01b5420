"""Storage of named specs (GPU types, models, clusters): one repository shape for the three
tables, bound to each by its domain's ``repository.py``.

Any place that takes an id also takes a name, so presets are usable by name everywhere.
"""

import unicodedata
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, bindparam, select
from sqlalchemy.orm import Session

from app.common.ids import looks_like_id
from app.orm import ClusterSpecRow, GpuTypeRow, ModelSpecRow
from app.tenancy import tenant_of, visible_spec_rows

RecordT = TypeVar("RecordT", GpuTypeRow, ModelSpecRow, ClusterSpecRow)


def fold_name(name: str) -> str:
    """A name as case-insensitive lookup compares it: Unicode NFC (a composed and a decomposed
    ``É`` are one letter), then Python's full case folding (``ß`` = ``ss``, ``É`` = ``é``)."""
    return unicodedata.normalize("NFC", name).casefold()


class RecordRepository(Generic[RecordT]):
    def __init__(self, table: type[RecordT]) -> None:
        self.table: type[RecordT] = table
        # Built once: every estimate and search naming a stored spec runs it (building it per
        # call was a sixth of the lookup's 0.6 ms).
        self._by_name: Select[RecordT] = select(table).where(table.name == bindparam("name"))
        core = table.__table__
        spec_by_name = select(core.c.id, core.c.spec).where(core.c.name == bindparam("name"))
        self._spec_by_name = {
            "unscoped": spec_by_name,
            "scoped": spec_by_name.where(visible_spec_rows(core)),
        }

    def find_spec(self, session: Session, *, key: str) -> tuple[Any, str] | None:
        """``find``'s row as (spec, id), read as a Core statement when ``key`` is an exact name:
        the ORM's statement, criteria and entity machinery were a third of a cached estimate's
        CPU (the estimate and search requests name their specs this way). The tenant rule is
        ``app.tenancy``'s; anything else (an id, a name in other case) goes through ``find``."""
        if "\x00" not in key and not looks_like_id(key):
            tenant = tenant_of(session)
            statement = self._spec_by_name["unscoped" if tenant is None else "scoped"]
            rows = session.connection().execute(statement, {"name": key, "tenant": tenant}).all()
            if len(rows) == 1:
                return rows[0].spec, rows[0].id
        row = self.find(session, key=key)
        return None if row is None else (row.spec, row.id)

    def find(self, session: Session, *, key: str) -> RecordT | None:
        """The row whose id or name is ``key``: an id first, then the exact name, then the name
        ignoring case (``fold_name``, the same on SQLite and PostgreSQL) when only one matches
        (as the catalog matches GPU and preset names)."""
        if "\x00" in key:  # PostgreSQL rejects NUL in text; no row can have it.
            return None
        if looks_like_id(key):
            row = session.get(self.table, key)
            if row is not None:
                return row
        row = session.scalars(self._by_name, {"name": key}).one_or_none()
        if row is not None:
            return row
        # Ignoring case is done here, not by the database: SQLite's lower() folds ASCII only
        # (``École`` would not find ``école``) and PostgreSQL's follows the server's locale, so
        # neither gives the same answer on both backends. Only the names are read, and only
        # after the exact match missed; the tenant scope (app.tenancy) applies as usual.
        wanted = fold_name(key)
        names = session.execute(select(self.table.id, self.table.name)).all()
        matches = [row_id for row_id, name in names if fold_name(name) == wanted]
        return session.get(self.table, matches[0]) if len(matches) == 1 else None

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
        if preset is not None:
            statement = statement.where(self.table.is_preset == preset)
        if after is not None:
            statement = statement.where(self.table.name > after)
        if name_contains is not None:
            # The substring is matched ignoring case as ``find`` does (``fold_name``), here and
            # not with ILIKE: SQLite's folds ASCII only, so the backends would list differently.
            wanted = fold_name(name_contains)
            names = session.execute(
                statement.with_only_columns(self.table.id, self.table.name).limit(None)
            )
            ids = [row_id for row_id, name in names if wanted in fold_name(name)][: limit + 1]
            statement = statement.where(self.table.id.in_(ids))
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
