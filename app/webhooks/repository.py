"""Storage of webhook deliveries: the outbox a search's end writes to, and the conditional
statements that let any number of workers share it without sending one delivery twice at once.

A delivery is claimed by moving its ``next_attempt_at`` past the send (``hold_s``) and counting
the attempt, in one UPDATE that re-checks ``attempts``: of two workers that saw the same due
delivery, only the first matches; the second finds ``attempts`` moved on. A worker that dies
while sending leaves the claim to run out, and the delivery is tried again (at least once).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.common.dml import matched_rows
from app.common.ids import looks_like_id
from app.db import begin_write
from app.orm import SearchRow, WebhookDeliveryRow


@dataclass(frozen=True)
class ClaimedDelivery:
    id: str
    attempt: int  # 1 for the first try
    event: str
    url: str
    payload: dict[str, Any]
    search_secret: str | None


def add(session: Session, row: WebhookDeliveryRow) -> WebhookDeliveryRow:
    session.add(row)
    session.flush()
    return row


def due(session: Session, *, now: datetime, limit: int) -> list[tuple[str, int]]:
    """(id, attempts) of pending deliveries whose time has come, oldest due first. Commits (a
    read; it must not hold SQLite's snapshot while the caller sends)."""
    rows = session.execute(
        select(WebhookDeliveryRow.id, WebhookDeliveryRow.attempts)
        .where(WebhookDeliveryRow.status == "pending", WebhookDeliveryRow.next_attempt_at <= now)
        .order_by(WebhookDeliveryRow.next_attempt_at, WebhookDeliveryRow.id)
        .limit(limit)
    ).all()
    session.commit()
    return [(row.id, row.attempts) for row in rows]


def claim(
    session: Session, *, delivery_id: str, attempts: int, now: datetime, hold_s: float
) -> ClaimedDelivery | None:
    """Take the delivery for one attempt if it is still pending, due and at ``attempts``;
    None when another worker (or nobody: it ended) got there first. Commits."""
    begin_write(session)
    result = session.execute(
        update(WebhookDeliveryRow)
        .where(
            WebhookDeliveryRow.id == delivery_id,
            WebhookDeliveryRow.status == "pending",
            WebhookDeliveryRow.attempts == attempts,
            WebhookDeliveryRow.next_attempt_at <= now,
        )
        .values(attempts=attempts + 1, next_attempt_at=now + timedelta(seconds=hold_s))
        .execution_options(synchronize_session=False)
    )
    if matched_rows(result) != 1:
        session.commit()
        return None
    found = session.execute(
        select(
            WebhookDeliveryRow.event,
            WebhookDeliveryRow.url,
            WebhookDeliveryRow.payload,
            SearchRow.callback_secret,
        )
        .join(SearchRow, SearchRow.id == WebhookDeliveryRow.search_id)
        .where(WebhookDeliveryRow.id == delivery_id)
    ).one()
    session.commit()
    return ClaimedDelivery(
        id=delivery_id,
        attempt=attempts + 1,
        event=found.event,
        url=found.url,
        payload=found.payload,
        search_secret=found.callback_secret,
    )


def record_attempt(
    session: Session,
    *,
    delivery_id: str,
    attempt: int,
    entry: dict[str, Any],
    status: str,
    next_attempt_at: datetime | None,
    delivered_at: datetime | None = None,
) -> bool:
    """Append ``entry`` to the log and set the outcome, if the claim on ``attempt`` still holds
    (False: it ran out and another worker took the delivery over). Commits."""
    begin_write(session)
    log = session.scalar(
        select(WebhookDeliveryRow.log).where(
            WebhookDeliveryRow.id == delivery_id,
            WebhookDeliveryRow.status == "pending",
            WebhookDeliveryRow.attempts == attempt,
        )
    )
    if log is None:
        session.commit()
        return False
    result = session.execute(
        update(WebhookDeliveryRow)
        .where(
            WebhookDeliveryRow.id == delivery_id,
            WebhookDeliveryRow.status == "pending",
            WebhookDeliveryRow.attempts == attempt,
        )
        .values(
            log=[*log, entry],
            status=status,
            next_attempt_at=next_attempt_at,
            delivered_at=delivered_at,
        )
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return matched_rows(result) == 1


def for_search(session: Session, *, search_id: str) -> Sequence[WebhookDeliveryRow]:
    return session.scalars(
        select(WebhookDeliveryRow)
        .where(WebhookDeliveryRow.search_id == search_id)
        .order_by(WebhookDeliveryRow.created_at, WebhookDeliveryRow.id)
    ).all()


def get(session: Session, *, search_id: str, delivery_id: str) -> WebhookDeliveryRow | None:
    if not looks_like_id(delivery_id):
        return None
    return session.scalar(
        select(WebhookDeliveryRow)
        .where(WebhookDeliveryRow.id == delivery_id, WebhookDeliveryRow.search_id == search_id)
        .execution_options(populate_existing=True)
    )


def requeue_failed(session: Session, *, search_id: str, delivery_id: str, now: datetime) -> bool:
    """A failed delivery back to pending for one more attempt now; False when it is not failed
    (or not there). The caller has begun the write."""
    result = session.execute(
        update(WebhookDeliveryRow)
        .where(
            WebhookDeliveryRow.id == delivery_id,
            WebhookDeliveryRow.search_id == search_id,
            WebhookDeliveryRow.status == "failed",
        )
        .values(status="pending", next_attempt_at=now)
        .execution_options(synchronize_session=False)
    )
    return matched_rows(result) == 1
