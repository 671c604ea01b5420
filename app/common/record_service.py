"""Create / read / list / delete for named specs, shared by the models and clusters domains.

Presets are ordinary rows with ``is_preset`` set: listed, readable and usable by name like any
other, but read-only (deleting one is a 409).
"""

from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.common.pagination import decode_cursor, encode_cursor
from app.common.records import RecordRepository, RecordT
from app.common.text import require_storable
from app.db import begin_write
from app.errors import ConflictError, ErrorDetail, InvalidInputError, NotFoundError
from costmodel.specs import ClusterSpec, GpuSpec, ModelSpec

NamedSpec = ModelSpec | ClusterSpec | GpuSpec


def get_record(
    session: Session, *, repository: RecordRepository[RecordT], key: str, kind: str
) -> RecordT:
    row = repository.find(session, key=key)
    if row is None:
        raise NotFoundError(f"no {kind} with id or name '{key}'")
    return row


def list_records(
    session: Session,
    *,
    repository: RecordRepository[RecordT],
    name: str | None,
    preset: bool | None,
    cursor: str | None,
    limit: int,
) -> tuple[Sequence[RecordT], str | None]:
    if name is not None:
        require_storable(name, prefix=("name",))
    rows, last_key = repository.list_page(
        session, name_contains=name, preset=preset, after=decode_cursor(cursor), limit=limit
    )
    return rows, (encode_cursor(last_key) if last_key is not None else None)


def create_record(
    session: Session,
    *,
    repository: RecordRepository[RecordT],
    spec: NamedSpec,
    kind: str,
    source: str,
    description: str | None = None,
) -> RecordT:
    """Store ``spec`` under its own ``name``; a name already in use (preset or not) is a 409."""
    begin_write(session)  # it reads (is the name taken?) before it writes
    name = spec.name
    require_storable(spec.model_dump(mode="json"))
    if description is not None:
        require_storable(description, prefix=("description",))
    if repository.name_exists(session, name=name):
        raise _name_taken(kind, name)
    row = repository.table(name=name, spec=spec, source=source, description=description)
    try:
        repository.add(session, row)
        session.commit()
    except IntegrityError:
        # Another request took the name between the check and the insert.
        session.rollback()
        raise _name_taken(kind, name) from None
    return row


def delete_record(
    session: Session, *, repository: RecordRepository[RecordT], key: str, kind: str
) -> None:
    begin_write(session)
    row = get_record(session, repository=repository, key=key, kind=kind)
    if row.is_preset:
        raise ConflictError(f"{kind} '{row.name}' is a built-in preset and cannot be deleted")
    repository.delete(session, row)
    session.commit()


def resolve_spec_reference(
    session: Session, *, repository: RecordRepository[RecordT], key: str, field: str, kind: str
) -> tuple[Any, str]:
    """The (spec, row id) of a stored row referenced from inside a request body
    (``RecordRepository.find_spec``): unknown is a 422 at ``field`` (the request is wrong, not
    the URL)."""
    found = repository.find_spec(session, key=key)
    if found is None:
        raise InvalidInputError.at(
            field, f"no stored {kind} with id or name '{key}'", code="unknown_reference"
        )
    return found


def _name_taken(kind: str, name: str) -> ConflictError:
    return ConflictError(
        f"a {kind} named '{name}' already exists; choose another name",
        details=[ErrorDetail(field="name", reason="already in use")],
    )
