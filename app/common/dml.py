"""What an executed UPDATE or DELETE reports."""

from typing import Any, cast

from sqlalchemy import CursorResult, Result


def matched_rows(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE matched (``rowcount``). ``Session.execute`` is typed to
    return a plain ``Result``; for a DML statement it is a ``CursorResult``, which has it."""
    return cast(CursorResult[Any], result).rowcount
