"""Creating, listing and revoking API keys (``autopar keys``); an administrator's operations on
the database directly, never exposed over HTTP."""

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.tokens import display_prefix, new_token, token_hash
from app.common.text import is_storable
from app.orm import TENANT_LENGTH, ApiKeyRow, utcnow


class ApiKeyError(ValueError):
    """A key operation that cannot be done (unknown key, bad tenant name); one readable line."""


def create_key(
    session: Session,
    *,
    tenant: str,
    name: str | None = None,
    searches_per_minute: int | None = None,
) -> tuple[ApiKeyRow, str]:
    """Store a new key of ``tenant``; returns the row and the token, which exists nowhere else
    afterwards (only its hash is stored)."""
    _check_tenant(tenant)
    if searches_per_minute is not None and searches_per_minute < 1:
        raise ApiKeyError("searches per minute must be at least 1")
    token = new_token()
    row = ApiKeyRow(
        tenant=tenant,
        name=name,
        prefix=display_prefix(token),
        key_hash=token_hash(token),
        searches_per_minute=searches_per_minute,
    )
    session.add(row)
    session.commit()
    return row, token


def list_keys(session: Session, *, tenant: str | None = None) -> Sequence[ApiKeyRow]:
    statement = select(ApiKeyRow).order_by(ApiKeyRow.created_at, ApiKeyRow.id)
    if tenant is not None:
        statement = statement.where(ApiKeyRow.tenant == tenant)
    return session.scalars(statement).all()


def revoke_key(session: Session, *, key: str) -> ApiKeyRow:
    """Revoke by id or displayed prefix; revoking a revoked key again changes nothing."""
    rows = session.scalars(
        select(ApiKeyRow).where((ApiKeyRow.id == key) | (ApiKeyRow.prefix == key))
    ).all()
    if not rows:
        raise ApiKeyError(f"no API key with id or prefix '{key}'")
    if len(rows) > 1:
        raise ApiKeyError(f"'{key}' matches {len(rows)} keys; give the id")
    row = rows[0]
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        session.commit()
    return row


def _check_tenant(tenant: str) -> None:
    if not tenant or len(tenant) > TENANT_LENGTH or tenant != tenant.strip():
        raise ApiKeyError(f"tenant must be 1-{TENANT_LENGTH} characters without surrounding spaces")
    if not is_storable(tenant) or not tenant.isprintable():
        raise ApiKeyError("tenant must be printable text")
