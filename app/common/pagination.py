"""Keyset pagination: ``?limit=&cursor=``, answered with ``{"items": [...], "next_cursor": ...}``.

The cursor is the sort key of the last item returned, base64-encoded so clients treat it as
opaque. Keyset (rather than offset) pages stay correct while rows are added or deleted.
"""

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Annotated, TypeVar

from fastapi import Query
from pydantic import BaseModel, Field
from sqlalchemy import Select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.errors import InvalidInputError

MAX_PAGE_SIZE = 200

LimitQuery = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Items per page.")]
CursorQuery = Annotated[
    str | None,
    Query(max_length=1000, description="next_cursor of the previous page; omit for the first."),
]
NameQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        description="Only items whose name contains this text (case-insensitive).",
    ),
]
PresetQuery = Annotated[
    bool | None, Query(description="true: built-in presets only; false: user-created only.")
]


class PageMeta(BaseModel):
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= to get the next page; null on the last page."
    )


def encode_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": key}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        document = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        key = document["after"]
    except (ValueError, TypeError, KeyError, binascii.Error, UnicodeError):
        key = None
    if not isinstance(key, str) or "\x00" in key:
        raise InvalidInputError.at("cursor", "not a cursor returned by this endpoint")
    return key


def escape_like(text: str) -> str:
    """Make ``text`` literal inside a LIKE pattern (ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


RowT = TypeVar("RowT")


def newest_first(
    session: Session,
    statement: Select[RowT],
    id_column: InstrumentedAttribute[str],
    *,
    before: str | None,
    limit: int,
) -> tuple[Sequence[RowT], str | None]:
    """One page of ``statement``'s rows, newest first (ids sort by creation time), and the id to
    continue before (None: the last page)."""
    statement = statement.order_by(id_column.desc()).limit(limit + 1)
    if before is not None:
        statement = statement.where(id_column < before)
    rows = session.scalars(statement).all()
    if len(rows) > limit:
        return rows[:limit], getattr(rows[limit - 1], id_column.key)
    return rows, None
