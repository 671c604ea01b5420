"""``Idempotency-Key`` on the creating POSTs: a retried request creates nothing twice.

A client that cannot tell whether its POST arrived (a timeout, a dropped connection, a 503) sends
it again with the same key. The first request with a key reserves it (a row with no status yet),
runs, and stores its answer; a later request with the same key and the same method, path, query
and JSON body gets that stored answer again -- same status, body and ``Location``, plus
``Idempotent-Replayed: true`` -- and nothing new is created. The same key with another request is
a 409 ``idempotency_key_reused``; a duplicate arriving while the first is still being answered is
a 409 ``idempotency_in_progress`` with ``Retry-After`` (the client retries it).

A request that fails (4xx, 5xx) releases its key: nothing was created, so the client may retry
with the same key. Keys belong to the request's tenant and live ``KEY_TTL`` (24 h); a key
reserved longer than ``IN_FLIGHT_STALE`` ago whose request never finished (its process died)
is taken over by the next request with it.

Routers use it as a dependency plus one call (``IdempotencyDep``, ``create_once``), so the
mechanism lives here only.
"""

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Annotated, Any

from fastapi import Depends, Header, Request, Response, status
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import TypeAdapter
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from app.db import begin_write, run_in_session
from app.errors import ConflictError, InvalidInputError, error_response
from app.orm import DEFAULT_TENANT, NAME_LENGTH, IdempotencyKeyRow, utcnow
from app.tenancy import tenant_of

logger = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEY_TTL = timedelta(hours=24)
# Longer than any creating request takes (a calibration fit included): a reservation this old
# with no answer belongs to a request whose process died.
IN_FLIGHT_STALE = timedelta(minutes=5)
RETRY_IN_PROGRESS_S = 1

HEADER_DESCRIPTION = (
    "Makes the request safe to retry: the same key with the same request within 24 h returns "
    "the stored response (header Idempotent-Replayed: true) and creates nothing; the same key "
    "with another request is a 409. 1-200 printable ASCII characters, e.g. a UUID."
)


def _check_key(key: str) -> str:
    if not 1 <= len(key) <= NAME_LENGTH:
        raise InvalidInputError.at(HEADER, f"must be 1 to {NAME_LENGTH} characters long")
    if not all(" " <= char <= "~" for char in key):
        raise InvalidInputError.at(HEADER, "must hold printable ASCII characters only")
    return key


@dataclass(frozen=True)
class Idempotency:
    """The request's key (None: not sent) and what identifies the request."""

    key: str | None
    request: Request

    async def request_hash(self) -> str:
        """SHA-256 of method, path with query and body. A JSON body is hashed in canonical
        form, so a client re-encoding the same document (key order, spacing) matches."""
        body = await self.request.body()
        try:
            canonical = json.dumps(
                json.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=True
            ).encode()
        except ValueError:
            canonical = body
        target = self.request.url.path + (
            "?" + self.request.url.query if self.request.url.query else ""
        )
        digest = hashlib.sha256(f"{self.request.method} {target}\n".encode())
        digest.update(canonical)
        return digest.hexdigest()


async def idempotency(
    request: Request,
    key: Annotated[
        str | None, Header(alias=HEADER, description=HEADER_DESCRIPTION, max_length=1000)
    ] = None,
) -> Idempotency:
    return Idempotency(key=None if key is None else _check_key(key), request=request)


IdempotencyDep = Annotated[Idempotency, Depends(idempotency)]


@dataclass(frozen=True)
class _Stored:
    status_code: int
    body: Any
    location: str | None


class _InProgressError(ConflictError):
    code = "idempotency_in_progress"


async def create_once(
    idempotency: Idempotency,
    session: Session,
    response: Response,
    create: Callable[[Session], Any],
    *,
    location: Callable[[Any], str],
) -> Any:
    """Run ``create(session)`` (in the thread pool, as ``run_in_session``) at most once per key.

    Without a key this is ``run_in_session`` plus the ``Location`` header. With one, the answer
    is rendered here with the route's response model and status, stored, and replayed.
    """
    if idempotency.key is None:
        result = await run_in_session(create, session)
        response.headers["Location"] = location(result)
        return result
    key, request_hash = idempotency.key, await idempotency.request_hash()
    try:
        stored = await run_in_session(_reserve, session, key=key, request_hash=request_hash)
    except _InProgressError as exc:
        return error_response(
            exc.status_code,
            exc.code,
            exc.message,
            exc.details,
            headers={"Retry-After": str(RETRY_IN_PROGRESS_S)},
        )
    if stored is not None:
        return _render(stored, replayed=True)
    route = idempotency.request.scope["route"]
    assert isinstance(route, APIRoute)
    try:
        result = await run_in_session(create, session)
        answer = _Stored(
            status_code=route.status_code or status.HTTP_200_OK,
            body=_as_json(route.response_model, result),
            location=location(result),
        )
    except BaseException:
        await run_in_session(_release, session, key=key)
        raise
    await run_in_session(_record, session, key=key, answer=answer)
    return _render(answer, replayed=False)


@lru_cache(maxsize=64)
def _adapter(response_model: Any) -> TypeAdapter[Any]:
    return TypeAdapter(response_model)


def _as_json(response_model: Any, result: Any) -> Any:
    """The body FastAPI would send for ``result`` (validated as the response model)."""
    adapter = _adapter(response_model)
    return adapter.dump_python(
        adapter.validate_python(result, from_attributes=True), mode="json", by_alias=True
    )


def _render(stored: _Stored, *, replayed: bool) -> JSONResponse:
    headers = {REPLAYED_HEADER: "true"} if replayed else {}
    if stored.location is not None:
        headers["Location"] = stored.location
    return JSONResponse(stored.body, status_code=stored.status_code, headers=headers)


# Storage (each in its own short transaction, before and after the creating one) --------------
def _tenant(session: Session) -> str:
    return tenant_of(session) or DEFAULT_TENANT


def _reserve(session: Session, *, key: str, request_hash: str) -> _Stored | None:
    """The stored answer for ``key``, or None after reserving it for this request."""
    tenant, now = _tenant(session), utcnow()
    begin_write(session)
    # Keys expire: clearing them here keeps the table to a day of keys without a sweeper.
    session.execute(delete(IdempotencyKeyRow).where(IdempotencyKeyRow.created_at < now - KEY_TTL))
    row = session.scalars(
        select(IdempotencyKeyRow).where(
            IdempotencyKeyRow.tenant == tenant, IdempotencyKeyRow.key == key
        )
    ).one_or_none()
    if row is not None:
        if row.request_hash != request_hash:
            session.rollback()
            raise ConflictError(
                f"{HEADER} '{key}' was used for another request (method, path or body differ); "
                "use a new key for a new request",
                code="idempotency_key_reused",
            )
        if row.status_code is not None:
            session.rollback()
            return _Stored(status_code=row.status_code, body=row.response, location=row.location)
        if row.created_at > now - IN_FLIGHT_STALE:
            session.rollback()
            raise _InProgressError(
                f"a request with {HEADER} '{key}' is still being answered; retry shortly"
            )
        session.delete(row)  # its request never finished: this one takes the key over
        session.flush()
    session.add(IdempotencyKeyRow(tenant=tenant, key=key, request_hash=request_hash))
    try:
        session.commit()
    except IntegrityError:
        # Another request reserved the key between our read and insert (PostgreSQL).
        session.rollback()
        raise _InProgressError(
            f"a request with {HEADER} '{key}' is still being answered; retry shortly"
        ) from None
    return None


def _record(session: Session, *, key: str, answer: _Stored) -> None:
    begin_write(session)
    row = _reservation(session, key)
    if row is None:  # expired or taken over meanwhile: nothing to replay from
        session.rollback()
        return
    row.status_code, row.response, row.location = answer.status_code, answer.body, answer.location
    session.commit()


def _release(session: Session, *, key: str) -> None:
    """Forget the reservation of a request that failed, so its retry may run again."""
    try:
        session.rollback()
        begin_write(session)
        row = _reservation(session, key)
        if row is not None:
            session.delete(row)
        session.commit()
    except SQLAlchemyError:
        # The database that failed the request may refuse this too; the reservation then goes
        # stale (IN_FLIGHT_STALE) and is taken over.
        logger.warning("could not release %s '%s'", HEADER, key, exc_info=True)
        session.rollback()


def _reservation(session: Session, key: str) -> IdempotencyKeyRow | None:
    return session.scalars(
        select(IdempotencyKeyRow).where(
            IdempotencyKeyRow.tenant == _tenant(session),
            IdempotencyKeyRow.key == key,
            IdempotencyKeyRow.status_code.is_(None),
        )
    ).one_or_none()
