"""The workers' side of the ``searches`` table: claim, renew, release and finish, each one
conditional statement so two workers can never both own a search.

Lease times come from the workers' clocks (timezone-aware UTC). Keep them NTP-synced; a lease
(a minute by default) is far longer than ordinary clock skew.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, exists, false, func, literal, or_, select, update
from sqlalchemy.orm import Session

from app.common.dml import matched_rows
from app.db import begin_write
from app.orm import SearchRow, UTCDateTime, utcnow
from app.searches.service import notify_search_end

# A search whose worker died this many times is failed rather than handed to the next worker
# (a request that kills its worker, e.g. out of memory, would otherwise loop forever). Only
# deaths count: a worker that lost its lease while alive (the database was away, it stalled)
# gives the attempt back when it finds out (``refund_attempt``), and a worker taking back a
# search it still owns spends none.
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class LeaseState:
    owned: bool  # False: the lease went to another worker (or the search ended)
    cancel_requested: bool


def _ownerless(now: datetime, dead_owners: Sequence[str], expired: bool = True) -> Any:
    """Running, and its owner is gone: the lease expired (unless ``expired`` is False), or the
    owner is a process of this host known to be dead (no need to wait for its lease)."""
    gone = [SearchRow.lease_expires_at < now] if expired else []
    if dead_owners:
        gone.append(SearchRow.lease_owner.in_(list(dead_owners)))
    return and_(SearchRow.status == "running", or_(false(), *gone))


def _claimable(
    now: datetime, worker_id: str, dead_owners: Sequence[str] = (), expired: bool = True
) -> Any:
    taken_over = and_(_ownerless(now, dead_owners, expired), SearchRow.attempts < MAX_ATTEMPTS)
    # Still ours: a worker between searches runs none, so a row it owns is one it gave up
    # writing (the database was away); it takes it back at once.
    ours = and_(SearchRow.status == "running", SearchRow.lease_owner == worker_id)
    return or_(SearchRow.status == "queued", taken_over, ours)


def _abandoned(now: datetime, dead_owners: Sequence[str] = (), expired: bool = True) -> Any:
    return and_(_ownerless(now, dead_owners, expired), SearchRow.attempts >= MAX_ATTEMPTS)


def running_owners(session: Session, *, suffix: str) -> list[str]:
    """Owners of running searches whose worker id ends with ``suffix`` (a host's marker)."""
    owners = session.scalars(
        select(SearchRow.lease_owner)
        .where(SearchRow.status == "running", SearchRow.lease_owner.endswith(suffix))
        .distinct()
    ).all()
    session.commit()  # end the read
    return [owner for owner in owners if owner is not None]


def claim_next(
    session: Session,
    *,
    worker_id: str,
    lease_s: float,
    now: datetime | None = None,
    dead_owners: Sequence[str] = (),
    take_over_expired: bool = True,
) -> SearchRow | None:
    """Take the next search: queued ones by priority then age, or a running one whose worker
    died (its lease expired, or ``dead_owners`` names it: the study resumes), or one this
    worker still owns. ``take_over_expired`` False leaves expired leases alone (the database
    was just away: their owners may be alive and about to renew). Commits; None when there is
    nothing to do."""
    now = now or utcnow()
    claimable = _claimable(now, worker_id, dead_owners, take_over_expired)
    abandoned = _abandoned(now, dead_owners, take_over_expired)
    # A read first, so idle workers polling the queue never take the write lock.
    found = session.scalar(select(exists().where(or_(claimable, abandoned))))
    session.commit()  # end the read (commit, unlike rollback, leaves the caller's rows loaded)
    if not found:
        return None
    begin_write(session)
    _fail_abandoned(session, abandoned, now)
    pick = (
        select(SearchRow.id)
        .where(claimable)
        .order_by(SearchRow.priority.desc(), SearchRow.created_at, SearchRow.id)
        .limit(1)
    )
    claim = update(SearchRow).values(
        status="running",
        lease_owner=worker_id,
        lease_expires_at=now + timedelta(seconds=lease_s),
        heartbeat_at=now,
        # Taking back one's own claim is no new attempt.
        attempts=case(
            (SearchRow.lease_owner == worker_id, SearchRow.attempts),
            else_=SearchRow.attempts + 1,
        ),
        started_at=func.coalesce(SearchRow.started_at, literal(now, UTCDateTime())),
    )
    if session.get_bind().dialect.name == "postgresql":
        # Concurrent workers skip each other's locked candidates instead of queueing on them.
        search_id = session.scalars(pick.with_for_update(skip_locked=True)).first()
        if search_id is not None:
            session.execute(
                claim.where(SearchRow.id == search_id).execution_options(synchronize_session=False)
            )
    else:
        # SQLite has one writer at a time: a single UPDATE that re-checks the condition is the
        # whole claim, and RETURNING says which row (if any) it took.
        search_id = session.scalars(
            claim.where(SearchRow.id == pick.scalar_subquery(), claimable)
            .returning(SearchRow.id)
            .execution_options(synchronize_session=False)
        ).first()
    session.commit()
    if search_id is None:
        return None
    row = session.get(SearchRow, search_id, populate_existing=True)
    session.commit()  # end the read, so the caller's next transaction starts afresh
    return row


def _fail_abandoned(session: Session, abandoned: Any, now: datetime) -> None:
    failed = session.scalars(
        update(SearchRow)
        .where(abandoned)
        .values(
            status="failed",
            error=f"its worker stopped renewing the lease {MAX_ATTEMPTS} times (crashed or "
            "killed, e.g. out of memory); not retried",
            finished_at=now,
            lease_owner=None,
            lease_expires_at=None,
        )
        .returning(SearchRow.id)
        .execution_options(synchronize_session=False)
    ).all()
    for search_id in failed:  # their webhooks, committed with the claim
        notify_search_end(session, search_id=search_id, now=now)


def _owned(search_id: str, worker_id: str) -> Any:
    return and_(
        SearchRow.id == search_id,
        SearchRow.lease_owner == worker_id,
        SearchRow.status == "running",
    )


def renew_lease(
    session: Session,
    *,
    search_id: str,
    worker_id: str,
    lease_s: float,
    trials_done: int,
    best_value: float | None,
    progress: dict[str, Any],
    now: datetime | None = None,
    commit: bool = True,
) -> LeaseState:
    """The heartbeat: extend the lease, record progress, and read the cancel flag. Commits
    unless ``commit`` is False (the caller then writes the study's trials in the same
    transaction, so only the lease's owner ever writes them, and commits)."""
    now = now or utcnow()
    begin_write(session)
    cancel = session.scalars(
        update(SearchRow)
        .where(_owned(search_id, worker_id))
        .values(
            lease_expires_at=now + timedelta(seconds=lease_s),
            heartbeat_at=now,
            trials_done=trials_done,
            best_value=best_value,
            progress=progress,
        )
        .returning(SearchRow.cancel_requested)
        .execution_options(synchronize_session=False)
    ).first()
    if commit:
        session.commit()
    return LeaseState(owned=cancel is not None, cancel_requested=bool(cancel))


def release(session: Session, *, search_id: str, worker_id: str, commit: bool = True) -> bool:
    """Give the search back to the queue (a worker shutting down): the next worker resumes its
    study at once instead of waiting for the lease to expire. Commits unless ``commit`` is
    False (the caller writes the study's last trials first, then commits)."""
    begin_write(session)
    result = session.execute(
        update(SearchRow)
        .where(_owned(search_id, worker_id))
        # Not a failed attempt: it does not count towards MAX_ATTEMPTS.
        .values(
            status="queued",
            lease_owner=None,
            lease_expires_at=None,
            attempts=SearchRow.attempts - 1,
        )
        .execution_options(synchronize_session=False)
    )
    if commit:
        session.commit()
    return matched_rows(result) == 1


def refund_attempt(session: Session, *, search_id: str, worker_id: str) -> bool:
    """This worker lost the search to another while it was alive (it could not renew: the
    database was away, or it stalled): the takeover spent an attempt for a death that did not
    happen, so give it back. Commits."""
    begin_write(session)
    result = session.execute(
        update(SearchRow)
        .where(
            SearchRow.id == search_id,
            SearchRow.status.in_(("running", "queued")),
            or_(SearchRow.lease_owner.is_(None), SearchRow.lease_owner != worker_id),
            SearchRow.attempts > 0,
        )
        .values(attempts=SearchRow.attempts - 1)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return matched_rows(result) == 1


def finish(
    session: Session,
    *,
    search_id: str,
    worker_id: str,
    status: str,
    trials_done: int | None = None,
    best_value: float | None = None,
    error: str | None = None,
    now: datetime | None = None,
) -> bool:
    """End the search if this worker still owns it; False (nothing changed) otherwise. Does not
    commit: the caller stores the plans in the same transaction. On PostgreSQL the row stays
    locked until then, so a second finisher waits and then finds it finished."""
    now = now or utcnow()
    begin_write(session)
    values: dict[str, Any] = {
        "status": status,
        "finished_at": now,
        "heartbeat_at": now,
        "lease_owner": None,
        "lease_expires_at": None,
        "error": error,
    }
    if trials_done is not None:
        values["trials_done"] = trials_done
    if status != "failed":  # a failed search keeps the best value seen while it ran
        values["best_value"] = best_value
    result = session.execute(
        update(SearchRow)
        .where(_owned(search_id, worker_id))
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return matched_rows(result) == 1


def set_progress(session: Session, *, search_id: str, progress: dict[str, Any]) -> None:
    session.execute(
        update(SearchRow)
        .where(SearchRow.id == search_id)
        .values(progress=progress)
        .execution_options(synchronize_session=False)
    )
