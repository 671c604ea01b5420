"""Who is calling: the bearer token of a request, checked against the stored keys, decides the
tenant the request's session is scoped to.

One indexed query per request and no cache, so a revoked key is refused by every API process at
once, and creating the first key turns access control on everywhere at once.

The query runs in the thread of the request's first service call (``admit_deferred``, from
``app.db.run_in_session``), on the connection that call checks out, and a read-only service goes
on in its transaction (``app.admission_transaction``): a second trip through the thread pool, or
a second pooled connection, per request cost more than the query itself. The statements are
prebuilt Core, not ORM queries (0.16 instead of 0.41 ms). A refused key still answers 401
before anything else: a request that fails before its service runs (a malformed body, a bad
header) is admitted first (``admit_before_errors``), and a session not admitted yet cannot start
a transaction.
"""

from dataclasses import dataclass, replace
from typing import Any

from fastapi import FastAPI, Request
from sqlalchemy import bindparam, event, select
from sqlalchemy.orm import Session, SessionTransaction
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.admission_transaction import mark_admission_transaction
from app.auth.tokens import TOKEN_PREFIX, same_hash, token_hash
from app.errors import ApiError, UnauthorizedError
from app.orm import DEFAULT_TENANT, ApiKeyRow
from app.tenancy import scope_to_tenant

_PRINCIPAL_KEY = "autopar_principal"
_DEFERRED_KEY = "autopar_deferred_admission"


@dataclass(frozen=True)
class Principal:
    """The caller: a tenant, the key it used (None while access control is off) and the
    searches that key may submit per minute (None: unlimited)."""

    tenant: str
    key_id: str | None = None
    searches_per_minute: int | None = None


async def admit_request(
    request: Request,
    session: Session,
    *,
    require_auth: bool,
    default_searches_per_minute: int | None = None,
) -> Principal:
    """Authenticate ``request`` and scope ``session`` to its tenant; 401 when refused.
    ``default_searches_per_minute`` applies to keys without a limit of their own."""
    token = _bearer_token(request)
    principal = await run_in_threadpool(_authenticate, session, token, require_auth)
    _admit(session, principal, default_searches_per_minute)
    return principal_of(session) or principal


@dataclass
class _DeferredAdmission:
    """What ``admit_deferred`` needs to admit a request later, in the service's thread."""

    token: str | None
    require_auth: bool
    default_searches_per_minute: int | None
    settled: bool = False


def defer_admission(
    request: Request,
    session: Session,
    *,
    require_auth: bool,
    default_searches_per_minute: int | None = None,
) -> None:
    """``admit_request`` without its database query, which ``admit_deferred`` runs later in the
    thread of the request's first service call. A malformed Authorization header is still a 401
    here; until admitted, ``session`` refuses to start a transaction."""
    token = _bearer_token(request)
    admission = _DeferredAdmission(token, require_auth, default_searches_per_minute)
    session.info[_DEFERRED_KEY] = admission
    request.state.autopar_admission = admission


def admit_deferred(session: Session) -> None:
    """Admit the request ``defer_admission`` left pending on ``session`` (a no-op once done):
    authenticate and scope ``session`` to its tenant; 401 when refused. An admission that
    failed (its key query did) stays pending, so a retry of the call admits first
    (``app.db.run_read_in_session``). Blocking: call it from the thread pool, or in the loop
    where the database cannot hang it."""
    # Popped before the key query: while pending, the session refuses to start a transaction.
    admission: _DeferredAdmission | None = session.info.pop(_DEFERRED_KEY, None)
    if admission is None:
        return
    admission.settled = True
    try:
        principal = _authenticate(session, admission.token, admission.require_auth)
    except BaseException:
        session.info[_DEFERRED_KEY] = admission
        raise
    _admit(session, principal, admission.default_searches_per_minute)


def _admit(session: Session, principal: Principal, default_searches_per_minute: int | None) -> None:
    if principal.key_id is not None and principal.searches_per_minute is None:
        principal = replace(principal, searches_per_minute=default_searches_per_minute)
    scope_to_tenant(session, principal.tenant)
    session.info[_PRINCIPAL_KEY] = principal


@event.listens_for(Session, "after_transaction_create")
def _refuse_unadmitted(session: Session, _transaction: SessionTransaction) -> None:
    # A service that reached the database some other way than run_in_session would act for no
    # tenant (and see every row): refuse instead.
    if _DEFERRED_KEY in session.info:
        raise RuntimeError("a request's session was used before the request was admitted")


def admit_before_errors(app: FastAPI) -> None:
    """Make every error handler of ``app`` (but the 500's) admit a still-pending request first, so
    a request with a refused key gets its 401 whatever else is wrong with it, as when admission
    ran before the body was validated. Call it after the handlers are installed."""
    unauthorized = app.exception_handlers[ApiError]
    for exc_class, handler in list(app.exception_handlers.items()):
        if exc_class is Exception or exc_class == 500:
            continue
        app.exception_handlers[exc_class] = _admitting_first(handler, unauthorized)


def _admitting_first(handler: Any, unauthorized: Any) -> Any:
    async def admitting_handler(request: Request, exc: Exception) -> Response:
        admission: _DeferredAdmission | None = getattr(request.state, "autopar_admission", None)
        if admission is not None and not admission.settled:
            admission.settled = True
            session: Session = request.app.state.session_factory()
            try:
                await run_in_threadpool(
                    _authenticate, session, admission.token, admission.require_auth
                )
            except UnauthorizedError as refused:
                return await unauthorized(request, refused)
            finally:
                session.close()
        return await handler(request, exc)

    return admitting_handler


def principal_of(session: Session) -> Principal | None:
    return session.info.get(_PRINCIPAL_KEY)


def _bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError("Authorization must be 'Bearer <API key>'")
    return token.strip()


def _authenticate(session: Session, token: str | None, require_auth: bool) -> Principal:
    try:
        if token is None:
            if require_auth or _any_active_key(session):
                raise UnauthorizedError(
                    "this server requires an API key: send 'Authorization: Bearer <key>' "
                    "(keys come from `autopar keys create`)"
                )
            return Principal(tenant=DEFAULT_TENANT)
        principal = _active_key(session, token)
        if principal is None:
            raise UnauthorizedError("unknown or revoked API key")
        return principal
    except BaseException:
        session.close()
        raise
    finally:
        # A read-only service goes on in this transaction (one pooled connection, one ping and
        # one rollback per request: on PostgreSQL two round trips fewer); a writer ends it first
        # (app.db.begin_write), as its transaction must begin as a writer.
        mark_admission_transaction(session)


# Every request runs one of these, so they are built once and run as Core statements on the
# session's connection: the ORM's per-call statement building, compile-cache lookup and entity
# loading cost 0.4 ms of a 2 ms request; this costs 0.16 ms (SQLite, this machine).
_KEYS = ApiKeyRow.__table__
_ANY_ACTIVE_KEY = select(_KEYS.c.id).where(_KEYS.c.revoked_at.is_(None)).limit(1)
_KEY_BY_HASH = select(
    _KEYS.c.id, _KEYS.c.tenant, _KEYS.c.key_hash, _KEYS.c.revoked_at, _KEYS.c.searches_per_minute
).where(_KEYS.c.key_hash == bindparam("digest"))


def _any_active_key(session: Session) -> bool:
    return session.connection().execute(_ANY_ACTIVE_KEY).first() is not None


def _active_key(session: Session, token: str) -> Principal | None:
    """The caller whose active key ``token`` is, or None."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    digest = token_hash(token)
    row = session.connection().execute(_KEY_BY_HASH, {"digest": digest}).one_or_none()
    if row is None or row.revoked_at is not None or not same_hash(row.key_hash, digest):
        return None
    return Principal(tenant=row.tenant, key_id=row.id, searches_per_minute=row.searches_per_minute)
