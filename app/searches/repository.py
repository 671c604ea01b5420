"""Storage of searches as seen by the API: create, read, list, cancel. The workers' side of the
same rows (claim, lease, finish) is ``app.workers.repository``."""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from app.common.dml import matched_rows
from app.common.ids import looks_like_id
from app.common.pagination import newest_first
from app.orm import SearchRow
from app.searches.plan_pages import PageState
from app.tenancy import owned_rows, tenant_of


def study_name_for(search_id: str) -> str:
    """The Optuna study every worker of this search joins (and optuna-dashboard shows)."""
    return f"autopar-search-{search_id}"


def add(session: Session, row: SearchRow) -> SearchRow:
    session.add(row)
    session.flush()
    return row


def get(session: Session, *, search_id: str) -> SearchRow | None:
    if not looks_like_id(search_id):
        return None
    return session.get(SearchRow, search_id, populate_existing=True)


# What a finished search's cached plans page depends on (app.searches.plan_pages), read as a
# Core statement: loading the whole row (its request holds the resolved specs, its progress the
# outcome) to look these four up was most of a cached page's CPU.
_SEARCHES = SearchRow.__table__
_PAGE_STATE = select(
    _SEARCHES.c.id, _SEARCHES.c.status, _SEARCHES.c.finished_at, _SEARCHES.c.trials_done
).where(_SEARCHES.c.id == bindparam("search_id"))
_PAGE_STATES = {"unscoped": _PAGE_STATE, "scoped": _PAGE_STATE.where(owned_rows(_SEARCHES))}


def page_state(session: Session, *, search_id: str) -> PageState | None:
    """The search's id, status, finish time and trials done, or None when there is none (for the
    session's tenant)."""
    if not looks_like_id(search_id):
        return None
    tenant = tenant_of(session)
    statement = _PAGE_STATES["unscoped" if tenant is None else "scoped"]
    row = session.connection().execute(statement, {"search_id": search_id, "tenant": tenant})
    found = row.first()
    return None if found is None else PageState(*found)


def list_page(
    session: Session, *, status: str | None, before: str | None, limit: int
) -> tuple[Sequence[SearchRow], str | None]:
    """Newest first; ids sort by creation time, so the cursor is the last id returned."""
    statement = select(SearchRow)
    if status is not None:
        statement = statement.where(SearchRow.status == status)
    return newest_first(session, statement, SearchRow.id, before=before, limit=limit)


def cancel_queued(session: Session, *, search_id: str, now: datetime) -> bool:
    """Cancel a search no worker has started; False when it is not such a search (any more)."""
    result = session.execute(
        update(SearchRow)
        .where(
            SearchRow.id == search_id,
            SearchRow.status == "queued",
            SearchRow.started_at.is_(None),
        )
        .values(status="cancelled", cancel_requested=True, finished_at=now)
        .execution_options(synchronize_session=False)
    )
    return matched_rows(result) == 1


def request_cancel(session: Session, *, search_id: str) -> bool:
    """Flag a started search: its worker stops at the next heartbeat, or, when it is back in
    the queue, the next worker stores the ranking of the trials so far and ends it. False when
    it has finished."""
    result = session.execute(
        update(SearchRow)
        .where(SearchRow.id == search_id, SearchRow.status.in_(("queued", "running")))
        .values(cancel_requested=True)
        .execution_options(synchronize_session=False)
    )
    return matched_rows(result) == 1
