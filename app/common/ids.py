"""Row identifiers: 32 lowercase hex characters that sort by creation time.

The first 12 digits are the Unix time in milliseconds and the other 20 are random (the layout of
UUIDv7, RFC 9562, without the version bits). Sorting by id is then sorting by age, on SQLite and
PostgreSQL alike (lowercase hex compares the same under every collation), and ids made by
several workers never collide.
"""

import re
import secrets
import time
from typing import TypeVar

from sqlalchemy.orm import Session

from app.errors import NotFoundError

ID_LENGTH = 32
_ID_PATTERN = re.compile(r"[0-9a-f]{32}")


def new_id() -> str:
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(10)}"


def looks_like_id(value: str) -> bool:
    return _ID_PATTERN.fullmatch(value) is not None


RowT = TypeVar("RowT")


def row_by_id(session: Session, table: type[RowT], row_id: str) -> RowT | None:
    """The row of ``table`` whose id is ``row_id``, or None. Text holding NUL is no id (and
    PostgreSQL would refuse the query), so it finds nothing rather than failing."""
    return session.get(table, row_id) if "\x00" not in row_id else None


def require_row(session: Session, table: type[RowT], row_id: str, *, kind: str) -> RowT:
    """As ``row_by_id``, but an unknown id is a 404 naming ``kind``."""
    row = row_by_id(session, table, row_id)
    if row is None:
        raise NotFoundError(f"no {kind} with id '{row_id}'")
    return row
