"""Who is calling: the bearer token of a request, checked against the stored keys, decides the
tenant the request's session is scoped to.

One indexed query per request and no cache, so a revoked key is refused by every API process at
once, and creating the first key turns access control on everywhere at once.
"""

from dataclasses import dataclass, replace

from fastapi import Request
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.auth.tokens import TOKEN_PREFIX, same_hash, token_hash
from app.errors import UnauthorizedError
from app.orm import DEFAULT_TENANT, ApiKeyRow
from app.tenancy import scope_to_tenant

_PRINCIPAL_KEY = "autopar_principal"


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
    if principal.key_id is not None and principal.searches_per_minute is None:
        principal = replace(principal, searches_per_minute=default_searches_per_minute)
    scope_to_tenant(session, principal.tenant)
    session.info[_PRINCIPAL_KEY] = principal
    return principal


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
        row = _active_key(session, token)
        if row is None:
            raise UnauthorizedError("unknown or revoked API key")
        return Principal(
            tenant=row.tenant, key_id=row.id, searches_per_minute=row.searches_per_minute
        )
    finally:
        session.close()  # the connection goes back to the pool before the request's work


def _any_active_key(session: Session) -> bool:
    statement = select(ApiKeyRow.id).where(ApiKeyRow.revoked_at.is_(None)).limit(1)
    return session.scalars(statement).first() is not None


def _active_key(session: Session, token: str) -> ApiKeyRow | None:
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    digest = token_hash(token)
    row = session.scalars(select(ApiKeyRow).where(ApiKeyRow.key_hash == digest)).one_or_none()
    if row is None or row.revoked_at is not None or not same_hash(row.key_hash, digest):
        return None
    return row
