"""Strings both databases can store.

JSON lets a client send ``\\u0000`` and unpaired surrogates (``\\ud800``); PostgreSQL rejects NUL
in text and JSONB, and neither backend can encode a lone surrogate as UTF-8. Such input is
refused as a 422 up front instead of failing in the driver as a 500.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from app.errors import InvalidInputError
from costmodel.errors import field_path

_REASON = "text contains a NUL character or an unpaired surrogate"


def is_storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_unstorable(value: Any, loc: tuple[int | str, ...]) -> tuple[int | str, ...] | None:
    if isinstance(value, str):
        return None if is_storable(value) else loc
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and not is_storable(key):
                return loc
            found = _first_unstorable(item, (*loc, str(key)))
            if found is not None:
                return found
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for index, item in enumerate(value):
            found = _first_unstorable(item, (*loc, index))
            if found is not None:
                return found
    return None


def require_storable(value: Any, *, prefix: Sequence[int | str] = ()) -> None:
    """Raise a 422 naming the first string in ``value`` (a JSON-like document) not storable."""
    found = _first_unstorable(value, tuple(prefix))
    if found is not None:
        raise InvalidInputError.at(field_path(found) or None, _REASON)
