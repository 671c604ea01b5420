"""The delivery log of a search's webhooks, and re-queueing a failed delivery."""

from typing import cast

from sqlalchemy.orm import Session

from app.common.ids import looks_like_id
from app.db import begin_write
from app.errors import ConflictError, NotFoundError
from app.orm import WebhookDeliveryRow, utcnow
from app.searches import repository as searches
from app.webhooks import repository
from app.webhooks.payload import WebhookEvent
from app.webhooks.schemas import (
    DeliveryAttempt,
    DeliveryStatus,
    SearchDeliveries,
    WebhookDelivery,
)


def list_deliveries(session: Session, *, search_id: str) -> SearchDeliveries:
    _require_search(session, search_id)
    rows = repository.for_search(session, search_id=search_id)
    return SearchDeliveries(search_id=search_id, items=[to_record(row) for row in rows])


def retry_delivery(session: Session, *, search_id: str, delivery_id: str) -> WebhookDelivery:
    """A failed delivery is tried once more, now (by the next worker to look); 409 for one
    that is still pending or was delivered."""
    if not looks_like_id(search_id):
        raise _search_not_found(search_id)
    begin_write(session)
    _require_search(session, search_id)
    requeued = repository.requeue_failed(
        session, search_id=search_id, delivery_id=delivery_id, now=utcnow()
    )
    if requeued:
        session.commit()
    row = repository.get(session, search_id=search_id, delivery_id=delivery_id)
    if row is None:
        raise NotFoundError(f"search '{search_id}' has no webhook delivery '{delivery_id}'")
    if not requeued:
        raise ConflictError(
            f"webhook delivery '{row.id}' is {row.status}; only a failed one can be retried"
        )
    return to_record(row)


def to_record(row: WebhookDeliveryRow) -> WebhookDelivery:
    return WebhookDelivery(
        id=row.id,
        search_id=row.search_id,
        # Both columns are written only from these Literal types (outbox, repository).
        event=cast(WebhookEvent, row.event),
        url=row.url,
        status=cast(DeliveryStatus, row.status),
        attempts=row.attempts,
        next_attempt_at=row.next_attempt_at,
        log=[DeliveryAttempt.model_validate(entry) for entry in row.log],
        created_at=row.created_at,
        delivered_at=row.delivered_at,
    )


def _require_search(session: Session, search_id: str) -> None:
    if searches.get(session, search_id=search_id) is None:
        raise _search_not_found(search_id)


def _search_not_found(search_id: str) -> NotFoundError:
    return NotFoundError(f"no search with id '{search_id}'")
