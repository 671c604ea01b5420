"""Tenant isolation in one place: a request's session carries its tenant, and every ORM query it
runs -- selects, ``session.get``, bulk updates and deletes -- is limited to that tenant's rows
(plus the shared presets for the spec tables), so no service can forget the filter. New rows
take the session's tenant. Sessions without a tenant (workers, the CLI) see every row.

Another tenant's row is therefore simply not there: the API answers 404, as for an unknown id.
The mechanism is SQLAlchemy's documented global-criteria recipe (``do_orm_execute`` +
``with_loader_criteria``).
"""

from functools import lru_cache
from typing import Any

from sqlalchemy import ColumnElement, FromClause, bindparam, event, or_
from sqlalchemy.orm import ORMExecuteState, Session, with_loader_criteria
from sqlalchemy.orm.util import LoaderCriteriaOption

from app.orm import SpecRecord, TenantOwned

_TENANT_KEY = "autopar_tenant"


def scope_to_tenant(session: Session, tenant: str) -> None:
    """From now on ``session`` reads and writes only ``tenant``'s rows (and reads presets)."""
    session.info[_TENANT_KEY] = tenant


def tenant_of(session: Session) -> str | None:
    """The tenant ``session`` is scoped to; None for an unscoped (worker, CLI) session."""
    return session.info.get(_TENANT_KEY)


@event.listens_for(Session, "do_orm_execute")
def _limit_to_tenant(state: ORMExecuteState) -> None:
    tenant = tenant_of(state.session)
    if tenant is None or not (state.is_select or state.is_update or state.is_delete):
        return
    if state.is_column_load or state.is_relationship_load:
        return  # the parent row was already filtered
    state.statement = state.statement.options(*_criteria(tenant))


@lru_cache(maxsize=1024)
def _criteria(tenant: str) -> tuple[LoaderCriteriaOption, LoaderCriteriaOption]:
    """The two criteria of ``tenant``'s queries, built once per tenant: options are immutable,
    and building them was a twentieth of a small request's CPU."""
    return (
        with_loader_criteria(
            TenantOwned, lambda table: table.tenant == tenant, include_aliases=True
        ),
        with_loader_criteria(
            SpecRecord,
            lambda table: or_(table.tenant == tenant, table.tenant.is_(None)),
            include_aliases=True,
        ),
    )


def owned_rows(table: FromClause) -> ColumnElement[bool]:
    """The same rule as ``_criteria``'s for a tenant-owned table, for a Core statement: the rows
    of the tenant bound as ``:tenant``. Only for a scoped session (``tenant_of`` not None)."""
    return table.c.tenant == bindparam("tenant")


def visible_spec_rows(table: FromClause) -> ColumnElement[bool]:
    """The same rule as ``_criteria``'s for the spec tables, for a Core statement (which no ORM
    criteria reach): the rows the tenant bound as ``:tenant`` may read, its own and the presets.
    Only for a scoped session (``tenant_of`` not None); an unscoped one sees every row."""
    return or_(table.c.tenant == bindparam("tenant"), table.c.tenant.is_(None))


@event.listens_for(Session, "before_flush")
def _stamp_new_rows(session: Session, _context: Any, _instances: Any) -> None:
    tenant = tenant_of(session)
    if tenant is None:
        return
    for row in session.new:
        if isinstance(row, SpecRecord) and row.is_preset:
            continue
        if isinstance(row, TenantOwned | SpecRecord):
            row.tenant = tenant
