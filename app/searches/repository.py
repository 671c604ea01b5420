"""Storage of searches as seen by the API: create, read, list, cancel. The workers' side of the
same rows (claim, lease, finish) is ``app.workers.repository``."""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.common.dml import matched_rows
from app.common.ids import looks_like_id
from app.common.pagination import newest_first
from app.orm import SearchRow


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
