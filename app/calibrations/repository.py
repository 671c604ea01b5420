"""Calibration rows: looked up by id, ``name@version`` or ``name`` (its latest version)."""

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.common.ids import looks_like_id
from app.common.pagination import escape_like, newest_first
from app.orm import CalibrationRow


def find(session: Session, *, key: str) -> CalibrationRow | None:
    if "\x00" in key:  # PostgreSQL rejects NUL in text; no row can have it.
        return None
    if looks_like_id(key):
        row = session.get(CalibrationRow, key)
        if row is not None:
            return row
    name, _, version = key.partition("@")
    statement = select(CalibrationRow).where(CalibrationRow.name == name)
    if version:
        if not version.isdigit() or len(version) > 9:
            return None
        return session.scalars(
            statement.where(CalibrationRow.version == int(version))
        ).one_or_none()
    return session.scalars(statement.order_by(CalibrationRow.version.desc()).limit(1)).first()


def latest_version(session: Session, *, name: str) -> int:
    statement = select(func.max(CalibrationRow.version)).where(CalibrationRow.name == name)
    return int(session.scalar(statement) or 0)


def list_page(
    session: Session, *, name_contains: str | None, before: str | None, limit: int
) -> tuple[Sequence[CalibrationRow], str | None]:
    """Newest first; the id to continue before (None: the last page)."""
    statement = select(CalibrationRow)
    if name_contains is not None:
        pattern = f"%{escape_like(name_contains)}%"
        statement = statement.where(CalibrationRow.name.ilike(pattern, escape="\\"))
    return newest_first(session, statement, CalibrationRow.id, before=before, limit=limit)


def add(session: Session, row: CalibrationRow) -> None:
    session.add(row)
    session.flush()
